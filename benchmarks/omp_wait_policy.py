"""Two torch processes sharing a machine's cores, with libgomp's default waiting and with
OMP_WAIT_POLICY=PASSIVE, side by side in one run.

torch's CPU wheels parallelise with GNU OpenMP, whose idle threads spin before they sleep. A
process alone loses little to it; two processes that each run an OpenMP team on the same cores
(two pytest processes, a test suite beside a training run: what `make test` and the slow stage
do on 2 cores) spin while the other process holds the core the team waits on. This measures the
same fixed work (a small Llama's training steps and sampled generations, on every core's worth
of threads) as one process alone and as two at once, under each policy:

    python benchmarks/omp_wait_policy.py [--steps 6] [--layers 12]

It prints each setting's wall time and the CPU its processes used, then the ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

POLICIES = {"spin (libgomp's default)": None, "OMP_WAIT_POLICY=PASSIVE": "PASSIVE"}


def work(steps: int, layers: int) -> dict:
    """The fixed work of one process: `steps` training steps and generations of a Llama of
    `layers` layers at SmolLM2-135M's widths, random weights."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        hidden_size=576, intermediate_size=1536, num_hidden_layers=layers, num_attention_heads=9,
        num_key_value_heads=3, vocab_size=49152,
    )  # fmt: skip
    model = LlamaForCausalLM(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    tokens = torch.randint(0, config.vocab_size, (4, 128))
    started = time.perf_counter()
    for _ in range(steps):
        model(input_ids=tokens, labels=tokens).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        with torch.no_grad():
            model.generate(tokens[:, :16], max_new_tokens=24, do_sample=True, pad_token_id=0)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "wall_s": time.perf_counter() - started,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "threads": torch.get_num_threads(),
    }


# A single-threaded CPU-bound neighbour (a pip install, a compiler, a pure-Python test).
BUSY_LOOP = "while True: pass"


def run_together(processes: int, policy: str | None, args: argparse.Namespace, busy: bool) -> dict:
    """`processes` copies of `work` started at once, beside a busy loop if `busy`; the wall time
    until the last ends and the CPU they used (the busy loop's not counted)."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if policy:
        env["OMP_WAIT_POLICY"] = policy
    argv = [sys.executable, __file__, "--work", "--steps", str(args.steps), "--layers",
            str(args.layers)]  # fmt: skip
    neighbour = subprocess.Popen([sys.executable, "-c", BUSY_LOOP]) if busy else None
    try:
        started = time.perf_counter()
        procs = [subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True)
                 for _ in range(processes)]  # fmt: skip
        results = []
        for proc in procs:
            out, _ = proc.communicate()
            if proc.returncode:
                raise SystemExit(f"a worker exited with {proc.returncode}")
            results.append(json.loads(out.strip().splitlines()[-1]))
        wall = time.perf_counter() - started
    finally:
        if neighbour is not None:
            neighbour.kill()
            neighbour.wait()
    return {"wall_s": wall, "cpu_s": sum(r["cpu_s"] for r in results),
            "threads": results[0]["threads"]}  # fmt: skip


# (label, torch processes, beside a busy loop)
SETTINGS = [
    ("one torch process alone", 1, False),
    ("one torch process beside a busy loop", 1, True),
    ("two torch processes at once", 2, False),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--work", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.work:
        print(json.dumps(work(args.steps, args.layers)))
        return
    print(f"{os.cpu_count()} cores; each torch process: {args.steps} training steps and "
          f"generations of a {args.layers}-layer Llama\n")  # fmt: skip
    print(f"{'setting':<40} {'policy':<26} {'wall':>8} {'CPU':>8}")
    ratios = []
    for label, processes, busy in SETTINGS:
        measured = {}
        for name, policy in POLICIES.items():
            measured[policy] = result = run_together(processes, policy, args, busy)
            print(f"{label:<40} {name:<26} {result['wall_s']:7.1f}s {result['cpu_s']:7.1f}s",
                  flush=True)  # fmt: skip
        spin, passive = measured[None], measured["PASSIVE"]
        ratios.append(
            f"{label}: spin / PASSIVE = {spin['wall_s'] / passive['wall_s']:.2f} wall, "
            f"{spin['cpu_s'] / passive['cpu_s']:.2f} CPU ({spin['threads']} threads a process)"
        )
    print("", *ratios, sep="\n")


if __name__ == "__main__":
    main()
