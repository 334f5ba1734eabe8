"""The logits' memory in one training forward and backward, measured against the plan's
estimate (`gtpo.openrlhf.memory`: 10 bytes a logit, 12 with a temperature other than 1), side
by side for GTPO's fused log-prob and entropy pass and for the log-probs alone (GRPO's step,
OpenRLHF's own `log_probs_from_logits`, which needs OpenRLHF importable).

What each arm runs is the tail of OpenRLHF 0.11.2's `Actor.forward` at a real vocabulary:
lm_head in bf16 (its weight frozen: its gradient belongs to the model states), the cast to fp32
and the division by the temperature, then the pass over the logits, a loss, and the backward to
the hidden states. Each arm runs in its own process; its peak resident memory above what it
held before the pass (Linux: VmHWM, reset just before) is the measurement.

    python benchmarks/logits_memory.py                     # Qwen2.5's 151,936-token vocabulary
    python benchmarks/logits_memory.py --temperature 0.7 --tokens 2048 --hidden 3584

The last line is `logits memory: estimate X MiB; measured gtpo Y MiB (Y/X = R), ...`. On a GPU
the same tensors are allocated by the CUDA caching allocator, whose peak
(`torch.cuda.max_memory_allocated`) only a GPU run measures.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

from resident import ARM_ENV, peak_above, reset_peak

ARMS = ("gtpo", "logprobs")


def arm(way: str, tokens: int, vocab: int, hidden: int, temperature: float) -> dict:
    import torch

    torch.manual_seed(0)
    states = torch.randn(1, tokens, hidden, dtype=torch.bfloat16, requires_grad=True)
    lm_head = torch.randn(vocab, hidden, dtype=torch.bfloat16) / hidden**0.5
    targets = torch.randint(vocab, (1, tokens))

    def step(states, lm_head, targets):
        logits = (states @ lm_head.T).to(torch.float32)  # Actor.forward: .to(torch.float32)
        if temperature != 1.0:  # as Actor.forward: in place, and only then
            logits.div_(temperature)
        if way == "gtpo":
            from gtpo import token_logprobs_and_entropy

            logprobs, entropy = token_logprobs_and_entropy(logits, targets)
            loss = -logprobs.mean() - 0.1 * entropy.mean()
        else:
            try:
                from openrlhf.models.utils import log_probs_from_logits
            except ImportError as exc:  # OpenRLHF imports flash-attn at module level
                raise SystemExit(f"the logprobs arm needs OpenRLHF importable: {exc}") from exc

            loss = -log_probs_from_logits(logits, targets).mean()
        loss.backward()
        return float(loss)

    step(states[:, :8], lm_head, targets[:, :8])  # imports and thread pools, outside the peak
    states.grad = None
    before = reset_peak()
    loss = step(states, lm_head, targets)
    return {"extra_kb": peak_above(before), "loss": loss}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=1024, help="m × T of one micro-batch")
    parser.add_argument("--vocab", type=int, default=151936)
    parser.add_argument("--hidden", type=int, default=2048, help="Qwen2.5-3B's width")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--arm", choices=ARMS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    sizes = [str(v) for v in (args.tokens, args.vocab, args.hidden, args.temperature)]
    if args.arm:
        print(json.dumps(arm(args.arm, args.tokens, args.vocab, args.hidden, args.temperature)))
        return
    from gtpo.openrlhf.memory import LOGIT_BYTES, SCALED_LOGIT_BYTES

    per_logit = LOGIT_BYTES if args.temperature == 1.0 else SCALED_LOGIT_BYTES
    estimate = per_logit * args.tokens * args.vocab / 2**20
    measured = {}
    for way in ARMS:
        out = subprocess.run(
            [sys.executable, __file__, "--arm", way, "--tokens", sizes[0], "--vocab", sizes[1],
             "--hidden", sizes[2], "--temperature", sizes[3]],
            check=True, capture_output=True, text=True, env=ARM_ENV,
        )  # fmt: skip
        measured[way] = json.loads(out.stdout.strip().splitlines()[-1])["extra_kb"] / 1024
        print(f"{way}: {measured[way]:.0f} MiB above the hidden states and lm_head", flush=True)
    shown = ", ".join(f"{w} {m:.0f} MiB ({w}/estimate = {m / estimate:.2f})"
                      for w, m in measured.items())  # fmt: skip
    print(f"logits memory of {args.tokens} tokens × {args.vocab} vocabulary: estimate "
          f"{estimate:.0f} MiB ({per_logit} bytes a logit); measured {shown}")  # fmt: skip


if __name__ == "__main__":
    main()
