"""The slow stage (`make test-slow`): pytest processes ("parts") in two lanes side by side.

Each lane runs its parts one after the other; a part also waits for the parts it names as
`after` in the other lane. Every part after "alone" starts as soon as its lane and those allow:
in fixed phases of two parts each (67 minutes measured), one core waited at each phase's end
for the slower part.

    lane 1          lane 2
    "alone"         (waits for "alone")
    "real-model"    "server"
    "fit"           (waits for "real-model") "docs"
    "trl"           (waits for "fit") "docker" (with --with-docker)

- "alone": the real model's quick demo (tests/demo/test_demo_real_model.py): it is CPU-bound
  on both cores for 8-10 minutes, and beside a training run it took four times as long. Its
  test runs the documented command through the docs runner; the docs part then reports that
  command as run by it (substitutions.RUN_BY_TESTS). Then the reward server's tests that bring
  their own load (tests/reward_server/test_rs_deadline.py: verdicts and retried batches beside
  CPU-bound processes they start): beside a training suite as well (load 9 on 2 cores), four of
  16 batches failed all five of OpenRLHF's tries, which is not what they measure.
- "real-model": OpenRLHF's fit() with the real instruct model (tests/openrlhf/
  test_orl_real_model.py), beside "server": the reward server's slow suites (live servers under
  load, kills and probes), which need little memory. The real model's two ZeRO-3 ranks with two
  vLLM engines hold about 14 GB: beside any other training run the 24 GiB machine filled and
  Ray killed a worker, so no other training part starts before it ends.
- "trl": TRL on the real model, fully fine-tuned and with LoRA, and with its colocated vLLM
  engine (tests/trl/test_trl_real_model.py, test_trl_vllm.py), last in lane 1, after "fit":
  it is CPU-bound (beside the busiest of "fit" it took 27.7 minutes, alone 6.5), and its
  training runs in the pytest process, outside the memory gate: beside fit()'s 15 GiB async
  run the machine would fill.
- "docs": every documented command (tests/documented/test_documented_pages.py, one docs run),
  beside "fit", every other slow suite (OpenRLHF's fit() with the tiny models, TRL's two
  processes, `gtpo eval` through vLLM). Each holds one training run at a time, 5-9 GiB at its
  peak; two peaks beside both pytest processes filled the machine once (Ray killed a worker),
  so every training run starts when its peak fits (tests/memory_gate.py).
- "docker" (`--with-docker`, as CI runs it; `make test-docker` alone otherwise): the images
  and the Compose stack (tests/docker, `pytest -m docker`), beside "trl", after "fit": they
  took CI's third stage, after the whole slow stage. Started after the docs instead, beside
  fit() (measured once): its image builds took CPU from the stage's longest part (fit 41.3
  minutes, trl 8.1) and its demo waited 206 s for fit()'s memory. Its Compose demo holds a few
  GiB, behind the memory gate (documented.runner.COMPOSE_DEMO_GIB).

Each pytest process has its own temporary folder. Their output is interleaved line by line,
each line prefixed with its part, as it comes (a run cut short by CI's time limit still shows
where it was); each process ends with its slowest tests, then this prints every part's start
and time, the CPU each part's processes used and the machine's busy share minute by minute
(tests/cpu_ledger.py: a stage bound by CPU shows near 100 % throughout, one that waits shows
its gaps) and, last, every failed test's summary line: a CI report that keeps only the end of
the output still names what failed. The exit status is the first failing part's, else 0.

    python tests/slow_stage.py [PYTEST ARGS...]        # extra arguments go to every part
    python tests/slow_stage.py --parts docs,fit ...    # only these parts (the others count
                                                       # as done for `after`)
    python tests/slow_stage.py --with-docker           # and the Docker suites, in lane 2
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
import memory_gate  # noqa: E402
from cpu_ledger import PART_ENV, CpuLedger  # noqa: E402
from documented.substitutions import RUN_BY_TESTS_ENV  # noqa: E402

MARKS = "slow and not docker"
SLOWEST = 25  # each part prints its slowest tests
OWN_LOAD = "tests/reward_server/test_rs_deadline.py"
ALONE = ["tests/demo/test_demo_real_model.py", OWN_LOAD]
REAL_MODEL = ["tests/openrlhf/test_orl_real_model.py"]
REWARD_SERVER = [f"--ignore={OWN_LOAD}", "tests/reward_server"]
TRL = ["tests/trl/test_trl_real_model.py", "tests/trl/test_trl_vllm.py"]
DOCS = ["tests/documented/test_documented_pages.py"]
DOCKER = ["tests/docker"]
OWN_PART = [*ALONE, *REAL_MODEL, "tests/reward_server", *TRL, *DOCS]


# pytest-timeout for the tests that set none: a training run may wait for memory (tests/
# memory_gate.py) while the other part's run holds it, a few minutes, and the wait counts.
TIMEOUT_S = 1200


@dataclass(frozen=True)
class Part:
    """One pytest process: its command line, extra environment, and the parts of the other lane
    that must have ended before it starts."""

    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    after: tuple[str, ...] = ()


def _pytest(extra: list[str], paths: list[str], marks: str = MARKS) -> list[str]:
    return [sys.executable, "-m", "pytest", "-m", marks, f"--durations={SLOWEST}",
            f"--timeout={TIMEOUT_S}", *extra, *paths]  # fmt: skip


def lanes(extra: list[str], docker: bool = False) -> list[list[Part]]:
    """The two lanes' parts, in order. "fit" takes every slow suite no other part names, so a
    new one runs without being listed here; "docker" (`make test-docker`'s suites) only when
    asked for."""
    everything_else = [*(f"--ignore={path}" for path in OWN_PART), "tests"]
    return [
        [
            Part("alone", _pytest(extra, ALONE)),
            Part("real-model", _pytest(extra, REAL_MODEL)),
            Part("fit", _pytest(extra, everything_else)),
            Part("trl", _pytest(extra, TRL)),
        ],
        [
            Part("server", _pytest(extra, REWARD_SERVER), after=("alone",)),
            Part("docs", _pytest(extra, DOCS), {RUN_BY_TESTS_ENV: "1"}, after=("real-model",)),
            *([Part("docker", _pytest(extra, DOCKER, "docker"), after=("fit",))] if docker else []),
        ],
    ]


# The lines of pytest's short test summary that name a test that did not pass.
NOT_PASSED = ("FAILED ", "ERROR ")


def _relay(name: str, proc: subprocess.Popen, lock: threading.Lock, failures: list[str]) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        with lock:
            sys.stdout.write(f"[{name}] {line}")
            sys.stdout.flush()
            if line.startswith(NOT_PASSED):
                failures.append(f"[{name}] {line.rstrip()}")


def _run(part: Part, lock: threading.Lock, failures: list[str]) -> int:
    """Run `part` to its end, relaying its output; its exit status."""
    # Each part its own pytest temporary folder: pytest's cleanup of old numbered folders must
    # not meet another part's.
    base = Path(tempfile.gettempdir()) / f"gtpo-slow-{part.name}"
    proc = subprocess.Popen(
        [*part.argv, f"--basetemp={base}"], cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, errors="replace", bufsize=1,
        env={**os.environ, "PYTHONUNBUFFERED": "1", PART_ENV: part.name, **part.env},
    )  # fmt: skip
    _relay(part.name, proc, lock, failures)
    return proc.wait()


@dataclass
class Ended:
    code: int
    started_s: float  # from the stage's start
    seconds: float


def _run_lane(
    lane: list[Part], only: set[str] | None, done: dict[str, threading.Event],
    ended: dict[str, Ended], lock: threading.Lock, failures: list[str], started: float,
) -> None:  # fmt: skip
    try:
        for part in lane:
            if only is None or part.name in only:
                for name in part.after:
                    done[name].wait()
                began = time.monotonic()
                code = _run(part, lock, failures)
                ended[part.name] = Ended(code, began - started, time.monotonic() - began)
            done[part.name].set()
    finally:  # a lane that failed to start a part must not leave the other waiting for it
        for part in lane:
            done[part.name].set()


WITH_DOCKER = "--with-docker"


def _chosen(argv: list[str]) -> tuple[set[str] | None, list[str]]:
    """`--parts a,b` out of the command line: the parts to run (None: all), the rest."""
    if "--parts" not in argv:
        return None, argv
    at = argv.index("--parts")
    if at + 1 == len(argv):
        raise SystemExit("--parts needs a comma-separated list, e.g. --parts docs,fit")
    return set(argv[at + 1].split(",")), argv[:at] + argv[at + 2 :]


def main(argv: list[str]) -> int:
    docker = WITH_DOCKER in argv
    only, extra = _chosen([arg for arg in argv if arg != WITH_DOCKER])
    every_lane = lanes(extra, docker)
    every_part = {part.name for lane in every_lane for part in lane}
    if only is not None and not only <= every_part:
        raise SystemExit(
            f"unknown part(s) {sorted(only - every_part)}; the parts: {sorted(every_part)}"
        )
    memory_gate.WAITS.unlink(missing_ok=True)
    memory_gate.OVERRUNS.unlink(missing_ok=True)
    lock = threading.Lock()
    failures: list[str] = []
    done = {name: threading.Event() for name in every_part}
    ended: dict[str, Ended] = {}
    started = time.monotonic()
    ledger = CpuLedger().start()
    threads = [
        threading.Thread(target=_run_lane, args=(lane, only, done, ended, lock, failures, started))
        for lane in every_lane
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    total = time.monotonic() - started
    ledger.stop()
    print(f"\n== the slow stage: {total / 60:.1f} min in all")
    for lane_number, lane in enumerate(every_lane, 1):
        for part in lane:
            if part.name in ended:
                run = ended[part.name]
                print(
                    f"   lane {lane_number} {part.name:<10} {run.seconds / 60:5.1f} min, "
                    f"from {run.started_s / 60:4.1f} min, exit {run.code}"
                )
    for title, path in (
        ("training runs that waited for memory (tests/memory_gate.py)", memory_gate.WAITS),
        ("training runs above their declared peak (raise it where the run is)",
         memory_gate.OVERRUNS),
    ):  # fmt: skip
        lines = path.read_text().splitlines() if path.exists() else []
        print(f"   {title}: {len(lines)}")
        for line in lines:
            print(f"     {line}")
    for line in ledger.report(total):
        print(f"   {line}")
    print(f"   tests that did not pass: {len(failures)}")
    for failure in failures:
        print(f"     {failure}")
    failed = [run.code for run in ended.values() if run.code != 0]
    return failed[0] if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
