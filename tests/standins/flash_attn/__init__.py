"""Stand-in for `flash_attn` on CPU test machines (the real one needs nvcc to build).

OpenRLHF's `models/ring_attn_utils.py` imports `flash_attn.bert_padding` and
`flash_attn.utils.distributed` at module level. Only those names exist here, implemented in plain
torch with the same semantics. `flash_attn.ops` is deliberately absent so that OpenRLHF's
`log_probs_from_logits` takes its own pure-torch fallback (it catches the ImportError).
"""

__version__ = "0.0.0+cpu-standin"
