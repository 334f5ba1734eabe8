"""conflict_weights vs the position × vocabulary bincount of the paper's public code.

For each (V, L, G) both methods run on the same batch in a fresh subprocess each: peak extra
resident memory (VmHWM after the call minus RSS before it, reset through /proc/self/clear_refs)
and the median wall time of repeated calls. Both must return the same λ; the script checks it.

    python benchmarks/conflict_masks.py            # the full grid
    python benchmarks/conflict_masks.py --quick    # V = 32k only, L ≤ 2048

Target (issue): at V = 152k, L = 2048, G = 16, ≥ 1000× faster and ≥ 100× less memory.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import torch
from resident import peak_above, reset_peak

import gtpo

TARGET = {"vocab": 152_064, "length": 2048, "group": 16, "speedup": 1000.0, "memory": 100.0}


def make_batch(vocab: int, length: int, group: int, prompts: int, seed: int = 0):
    """Completions shaped like real ones: shared tag prefix/suffix, ragged random middles."""
    g = torch.Generator().manual_seed(seed)
    n = prompts * group
    ids = torch.randint(0, vocab, (n, length), generator=g)
    lengths = torch.randint(length // 2, length + 1, (n,), generator=g)
    prefix = torch.randint(0, vocab, (prompts, 12), generator=g)
    suffix = torch.randint(0, vocab, (prompts, 8), generator=g)
    for i in range(n):
        p = i // group
        ids[i, :12] = prefix[p]
        ids[i, lengths[i] - 8 : lengths[i]] = suffix[p]
    mask = torch.arange(length)[None, :] < lengths[:, None]
    ids = ids.masked_fill(~mask, 0)
    advantages = torch.randn(n, generator=g)
    return ids, mask, advantages


def bincount_conflicts(ids, mask, advantages, vocab: int) -> torch.Tensor:
    """Per-position conflict flags by counting (position, token) keys: an L·V table per side."""
    length = ids.shape[1]
    keys = torch.arange(length)[None, :] * vocab + ids
    pos = (advantages > 0)[:, None] & mask
    neg = (advantages < 0)[:, None] & mask
    in_pos = torch.bincount(keys[pos], minlength=length * vocab) > 0
    in_neg = torch.bincount(keys[neg], minlength=length * vocab) > 0
    return in_pos[keys] & in_neg[keys] & mask & (advantages != 0)[:, None]


def naive_weights(ids, mask, advantages, group: int, vocab: int) -> torch.Tensor:
    """λ of Eq. 5 with one bincount table per group and direction (the paper's approach)."""
    lengths = mask.sum(1)
    positions = torch.arange(ids.shape[1])
    reverse = (lengths[:, None] - 1 - positions[None, :]).clamp(min=0)
    weights = torch.ones(ids.shape)
    for start in range(0, ids.shape[0], group):
        rows = slice(start, start + group)
        i, m, a, rev = ids[rows], mask[rows], advantages[rows], reverse[rows]
        forward = bincount_conflicts(i, m, a, vocab).to(torch.uint8).cumprod(1).bool()
        rev_mask = positions[None, :] < lengths[rows, None]
        backward_rev = bincount_conflicts(i.gather(1, rev), rev_mask, a, vocab)
        backward = backward_rev.to(torch.uint8).cumprod(1).bool().gather(1, rev) & m
        masked = forward | backward
        weights[rows] = torch.where(masked, torch.where(a[:, None] > 0, 2.0, 0.0), 1.0)
    return weights * mask


def measure(method: str, vocab: int, length: int, group: int, prompts: int, budget_s: float):
    """Runs in a fresh process: peak extra memory of one call, then median time of repeats."""
    torch.set_num_threads(1)
    ids, mask, advantages = make_batch(vocab, length, group, prompts)
    if method == "gtpo":

        def call():
            return gtpo.conflict_weights(ids, mask, advantages, group)
    else:

        def call():
            return naive_weights(ids, mask, advantages, group, vocab)

    # Touch the code paths once on a tiny batch so that library pages loaded on first use are
    # not counted as the method's memory.
    tiny = make_batch(vocab, 64, group, 1, seed=1)
    if method == "gtpo":
        gtpo.conflict_weights(*tiny, group)
    else:
        naive_weights(*tiny, group, vocab)
    before = reset_peak()
    weights = call()
    peak_kib = peak_above(before)
    times = []
    deadline = time.perf_counter() + budget_s
    while len(times) < 3 or (time.perf_counter() < deadline and len(times) < 200):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    checksum = float((weights * torch.arange(1, weights.numel() + 1).view_as(weights)).sum())
    return {"seconds": statistics.median(times), "peak_mib": peak_kib / 1024, "check": checksum}


def run_isolated(method: str, vocab: int, length: int, group: int, prompts: int, budget: float):
    here = os.path.dirname(os.path.abspath(__file__))
    call = f"b.measure({method!r}, {vocab}, {length}, {group}, {prompts}, {budget})"
    code = f"import json, sys; sys.path.insert(0, {here!r}); import conflict_masks as b; "
    code += f"print(json.dumps({call}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="V = 32k and L ≤ 2048 only")
    parser.add_argument("--prompts", type=int, default=2, help="prompt groups per batch")
    args = parser.parse_args()

    vocabs = [32_000] if args.quick else [32_000, 152_064]
    lengths = [1024, 2048] if args.quick else [1024, 2048, 4096]
    print(f"torch {torch.__version__}, 1 thread, {args.prompts} prompt groups per batch")
    header = (
        f"{'V':>7} {'L':>5} {'G':>3} | {'gtpo ms':>8} {'naive ms':>9} {'speedup':>8} | "
        f"{'gtpo MiB':>8} {'naive MiB':>9} {'mem ratio':>9}"
    )
    print(header)
    print("-" * len(header))
    verdict = 0
    for vocab in vocabs:
        for length in lengths:
            for group in (8, 16):
                ours = run_isolated("gtpo", vocab, length, group, args.prompts, 1.0)
                naive = run_isolated("naive", vocab, length, group, args.prompts, 0.0)
                if abs(ours["check"] - naive["check"]) > 1e-6 * max(1.0, abs(naive["check"])):
                    print(f"MISMATCH at V={vocab} L={length} G={group}: the two λ differ")
                    verdict = 1
                speedup = naive["seconds"] / ours["seconds"]
                # Under a page of growth the counter reads 0: report the ratio against 4 KiB.
                memory = naive["peak_mib"] / max(ours["peak_mib"], 4 / 1024)
                print(
                    f"{vocab:>7} {length:>5} {group:>3} | {ours['seconds'] * 1e3:>8.3f} "
                    f"{naive['seconds'] * 1e3:>9.1f} {speedup:>7.0f}x | {ours['peak_mib']:>8.2f} "
                    f"{naive['peak_mib']:>9.1f} {memory:>8.0f}x"
                )
                if (vocab, length, group) == (TARGET["vocab"], TARGET["length"], TARGET["group"]):
                    ok = speedup >= TARGET["speedup"] and memory >= TARGET["memory"]
                    print(
                        f"  target (>= {TARGET['speedup']:.0f}x faster, >= "
                        f"{TARGET['memory']:.0f}x less memory): {'met' if ok else 'NOT met'}"
                    )
                    verdict |= 0 if ok else 1
    return verdict


if __name__ == "__main__":
    sys.exit(main())
