"""Pure-torch stand-ins for the four names OpenRLHF imports from `flash_attn.bert_padding`.

Same contracts as flash-attn 2.x: `unpad_input` packs the real tokens of a padded batch,
`pad_input` scatters them back, `index_first_axis` gathers rows. Needed (not just importable)
because the GTPO adapter maps packed-sample entropies back to the padded layout on CPU tests.
"""

import torch
import torch.nn.functional as F
from einops import rearrange

__all__ = ["index_first_axis", "pad_input", "rearrange", "unpad_input"]


def index_first_axis(tensor: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    return tensor[indices]


def unpad_input(hidden_states: torch.Tensor, attention_mask: torch.Tensor, unused_mask=None):
    seqlens = attention_mask.sum(dim=-1, dtype=torch.int32)
    indices = torch.nonzero(attention_mask.flatten(), as_tuple=False).flatten()
    max_seqlen = int(seqlens.max().item()) if seqlens.numel() else 0
    cu_seqlens = F.pad(torch.cumsum(seqlens, dim=0, dtype=torch.int32), (1, 0))
    flat = rearrange(hidden_states, "b s ... -> (b s) ...")
    return index_first_axis(flat, indices), indices, cu_seqlens, max_seqlen, seqlens


def pad_input(hidden_states: torch.Tensor, indices: torch.Tensor, batch: int, seqlen: int):
    out = torch.zeros(
        batch * seqlen,
        *hidden_states.shape[1:],
        dtype=hidden_states.dtype,
        device=hidden_states.device,
    )
    out[indices] = hidden_states
    return rearrange(out, "(b s) ... -> b s ...", b=batch)
