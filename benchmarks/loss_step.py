"""A training step with the GTPO objective vs the GRPO objective, side by side.

One step = forward of a tiny causal LM, per-token log-probs of the sampled tokens, the loss,
backward and an optimizer step. GTPO adds what Eq. 5-7 need: conflict weights λ, token entropy
(with its gradient, for the γ penalty), the filter δ; it takes log-probs and entropy from one
pass over the logits (`gtpo.token_logprobs_and_entropy`). GRPO uses the usual log-softmax and
gather, and computes no entropy at all. Both objectives run on identical batches,
interleaved so that machine noise hits both alike; the script prints the median step times
and their ratio.

    python benchmarks/loss_step.py            # target: GTPO / GRPO ≤ 1.10
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch
from torch import nn

import gtpo


class TinyCausalLM(nn.Module):
    """A small pre-norm decoder-only transformer (causal self-attention + MLP)."""

    def __init__(self, vocab: int, dim: int, layers: int, heads: int, max_len: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.position = nn.Embedding(max_len, dim)
        layer = nn.TransformerEncoderLayer(
            dim, heads, 4 * dim, dropout=0.0, batch_first=True, norm_first=True
        )
        self.blocks = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        length = ids.shape[1]
        h = self.embed(ids) + self.position(torch.arange(length, device=ids.device))
        causal = nn.Transformer.generate_square_subsequent_mask(length)
        h = self.blocks(h, mask=causal, is_causal=True)
        return self.head(self.norm(h))


def make_batch(vocab: int, prompts: int, group: int, prompt_len: int, length: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    n = prompts * group
    prompt = torch.randint(0, vocab, (prompts, prompt_len), generator=g).repeat_interleave(group, 0)
    completion = torch.randint(0, vocab, (n, length), generator=g)
    completion[:, :4] = torch.tensor([11, 12, 13, 14])  # shared opening tags: real conflicts
    lengths = torch.randint(length // 2, length + 1, (n,), generator=g)
    mask = torch.arange(length)[None, :] < lengths[:, None]
    completion = completion.masked_fill(~mask, 0)
    rewards = torch.randint(0, 3, (n,), generator=g).float()
    grouped = rewards.view(prompts, group)
    advantages = (grouped - grouped.mean(1, keepdim=True)) / (grouped.std(1, keepdim=True) + 1e-4)
    return torch.cat([prompt, completion], 1), completion, mask, advantages.view(-1)


def step(model, optimizer, batch, method: str, group: int, prompt_len: int) -> float:
    sequences, completion, mask, advantages = batch
    start = time.perf_counter()
    logits = model(sequences[:, :-1])[:, prompt_len - 1 :]
    if method == "gtpo":
        logprobs, token_entropy = gtpo.token_logprobs_and_entropy(logits, completion)
        entropy = gtpo.completion_entropy(token_entropy, mask)
        weights = gtpo.conflict_weights(completion, mask, advantages, group)
        keep = gtpo.entropy_filter(entropy, h_ini=0.5)
        loss, _ = gtpo.gtpo_loss(
            logprobs, logprobs.detach(), advantages, mask, weights, keep, entropy, gamma=0.1
        )
    else:  # the usual GRPO implementation: log-softmax, gather, no entropy
        logprobs = torch.log_softmax(logits.float(), -1).gather(-1, completion[..., None])
        logprobs = logprobs.squeeze(-1)
        loss, _ = gtpo.grpo_loss(logprobs, logprobs.detach(), advantages, mask)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--prompts", type=int, default=2)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--prompt-len", type=int, default=32)
    parser.add_argument("--length", type=int, default=192)
    parser.add_argument("--steps", type=int, default=12, help="timed steps per method")
    parser.add_argument("--target", type=float, default=1.10)
    args = parser.parse_args()

    torch.manual_seed(0)
    seq_len = args.prompt_len + args.length
    models = {}
    for method in ("gtpo", "grpo"):
        torch.manual_seed(0)  # identical initial weights for both
        model = TinyCausalLM(args.vocab, args.dim, args.layers, 4, seq_len)
        models[method] = (model, torch.optim.AdamW(model.parameters(), lr=1e-4))
    params = sum(p.numel() for p in models["gtpo"][0].parameters())
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads; model {params / 1e6:.2f}M "
        f"params, V={args.vocab}, batch {args.prompts}x{args.group} completions of "
        f"<= {args.length} tokens after a {args.prompt_len}-token prompt"
    )
    times: dict[str, list[float]] = {"gtpo": [], "grpo": []}
    for i in range(args.steps + 2):
        batch = make_batch(args.vocab, args.prompts, args.group, args.prompt_len, args.length, i)
        # Alternate which method goes first so drift in machine load hits both equally.
        order = ("gtpo", "grpo") if i % 2 == 0 else ("grpo", "gtpo")
        for method in order:
            model, optimizer = models[method]
            elapsed = step(model, optimizer, batch, method, args.group, args.prompt_len)
            if i >= 2:  # the first two steps warm up allocators and kernels
                times[method].append(elapsed)
    gtpo_s = statistics.median(times["gtpo"])
    grpo_s = statistics.median(times["grpo"])
    ratio = gtpo_s / grpo_s
    print(f"median step  GTPO {gtpo_s * 1e3:8.1f} ms   GRPO {grpo_s * 1e3:8.1f} ms")
    print(
        f"ratio GTPO / GRPO = {ratio:.3f}  (target <= {args.target:.2f}: "
        f"{'met' if ratio <= args.target else 'NOT met'})"
    )
    return 0 if ratio <= args.target else 1


if __name__ == "__main__":
    sys.exit(main())
