"""Training throughput of OpenRLHF's async loop against its synchronous one, for GTPO and for
the GRPO baseline, side by side in one run: `gtpo-openrlhf` in OpenRLHF's real fit() on CPU
(tests/openrlhf's harness), with and without `--train.async_enable` (queue 1).

Throughput: steps a second between the end of the first training step and the end of the last
(start-up, H_ini and the first rollout left out), from the wall-clock times the harness records
at the end of each `train_step`. Async overlaps generating rollout k+1 with training on rollout
k; on a 2-core machine the generator and the trainer share the cores, so the overlap can only
hide the waits (Ray, the reward server), not add compute: what a GPU cluster gains, with the
rollout engines and the policy on different GPUs, is not measured here.

The model is the tests' toy Llama with random weights (every completion runs to its limit),
4 prompts × G = 4 a step, rewards from a local function (the reward server's cost is the same
for every arm).

    python benchmarks/async_throughput.py            # 2 alternating rounds of 8 steps, ~10 min
    python benchmarks/async_throughput.py --quick    # 1 round of 5 steps, ~5 min

The last line is `async/sync throughput: gtpo R, grpo R`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "openrlhf"))
sys.path.insert(0, str(REPO / "tests"))

REWARD_FILE = '''"""Throughput benchmark reward: varies within every group, costs nothing."""
import torch


def reward_func(queries, prompts, labels):
    return {"rewards": torch.tensor([float(len(q) % 3) for q in queries])}
'''
ARMS = [("gtpo", False), ("gtpo", True), ("grpo", False), ("grpo", True)]


def steps_per_second(ends: list[float]) -> float:
    """Steps a second from the end of the first step to the end of the last."""
    return (len(ends) - 1) / (ends[-1] - ends[0])


def run_arm(fixture, algo: str, asynchronous: bool, steps: int, out: Path) -> float:
    from fit_harness import base_argv, run_fit, with_flags

    reward = out.parent / "reward.py"
    reward.write_text(REWARD_FILE)
    argv = with_flags(
        base_argv(fixture, "http://unused", out),
        {
            "--reward.remote_url": str(reward),
            "--data.max_samples": str(4 * steps),
            "--rollout.temperature": "1.0",
            "--rollout.micro_batch_size": "4",
            "--gtpo.algo": algo,
            "--gtpo.h_ini_prompts": "1",
        },
    )
    run = run_fit([*argv, *(["--train.async_enable"] if asynchronous else [])], out, timeout=1200)
    if run.returncode != 0:
        raise SystemExit(f"{algo} {'async' if asynchronous else 'sync'} failed: {out / 'run.log'}")
    (ends,) = [json.loads(f.read_text()) for f in run.capture.glob("train_step_end_*.json")]
    if len(ends) != steps:
        raise SystemExit(f"{len(ends)} steps ran, {steps} expected: {out / 'run.log'}")
    return steps_per_second(ends)


def main() -> None:
    from gtpo.cli import end_on_sigterm

    end_on_sigterm()  # a caller's timeout (SIGTERM) ends the runs this started, as Ctrl-C does
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="1 round of 5 steps")
    args = ap.parse_args()
    steps, rounds = (5, 1) if args.quick else (8, 2)
    from fit_harness import build_fixture

    started = time.perf_counter()
    print(f"{os.cpu_count()} CPU cores, load average {os.getloadavg()[0]:.2f}", flush=True)
    rates: dict[tuple[str, bool], list[float]] = {arm: [] for arm in ARMS}
    with tempfile.TemporaryDirectory(prefix="async-throughput-") as tmp:
        work = Path(tmp)
        fixture = build_fixture(work / "fixture", n_prompts=4 * steps, sft_steps=0)
        for round_ in range(rounds):  # alternating: drift in the machine's speed falls on all
            for algo, asynchronous in ARMS:
                name = f"{algo}-{'async' if asynchronous else 'sync'}-{round_}"
                rate = run_arm(fixture, algo, asynchronous, steps, work / name)
                rates[(algo, asynchronous)].append(rate)
                print(f"{name}: {rate:.3f} steps/s", flush=True)
    ratio = {}
    for algo in ("gtpo", "grpo"):
        sync, asynchronous = (statistics.median(rates[(algo, a)]) for a in (False, True))
        ratio[algo] = asynchronous / sync
        print(
            f"{algo.upper()}  sync {sync:.3f} steps/s  async {asynchronous:.3f} steps/s  "
            f"ratio {ratio[algo]:.2f}  ({steps - 1} steps timed, {rounds} run(s) each)"
        )
    print(f"wall time {time.perf_counter() - started:.0f} s")
    print(f"async/sync throughput: gtpo {ratio['gtpo']:.2f}, grpo {ratio['grpo']:.2f}")


if __name__ == "__main__":
    main()
