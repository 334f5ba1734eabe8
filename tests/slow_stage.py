"""The slow stage (`make test-slow`): three phases, each of one or two pytest processes.

1. "alone": the real model's quick demo (tests/demo/test_demo_real_model.py): it is CPU-bound
   on both cores for 8-10 minutes, and beside a training run it took four times as long. Its
   test runs the documented command through the docs runner; the docs part then reports that
   command as run by it (substitutions.RUN_BY_TESTS). Then the reward server's tests that bring
   their own load (tests/reward_server/test_rs_deadline.py: verdicts and retried batches beside
   CPU-bound processes they start): beside a training suite as well (load 9 on 2 cores), four
   of 16 batches failed all five of OpenRLHF's tries, which is not what they measure.
2. "real-model": OpenRLHF's fit() with the real instruct model (tests/openrlhf/
   test_orl_real_model.py), beside "server": the reward server's slow suites (live servers
   under load, kills and probes), which need little memory. The real model's two ZeRO-3 ranks
   with two vLLM engines hold about 14 GB: beside any other training run the 24 GiB machine
   filled and Ray killed a worker.
3. "docs": every documented command (tests/documented/test_documented_pages.py, one docs run),
   then the TRL and `gtpo eval` suites, beside "fit": every other slow suite (OpenRLHF's fit()
   with the tiny models). Each holds one training run at a time, 5-9 GiB at its peak; two
   peaks beside both pytest processes filled the machine once (Ray killed a worker), so every
   training run starts when its peak fits (tests/memory_gate.py).

Each pytest process has its own temporary folder. Their output is interleaved line by line,
each line prefixed with its part, as it comes (a run cut short by CI's time limit still shows
where it was); each process ends with its slowest tests, then this prints every part's time
and, last, every failed test's summary line: a CI report that keeps only the end of the output
still names what failed. The exit status is the first failing part's, else 0.

    python tests/slow_stage.py [PYTEST ARGS...]        # extra arguments go to every part
    python tests/slow_stage.py --parts docs,fit ...    # only these parts, in their phases
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
import memory_gate  # noqa: E402
from documented.substitutions import RUN_BY_TESTS_ENV  # noqa: E402

MARKS = "slow and not docker"
SLOWEST = 25  # each part prints its slowest tests
OWN_LOAD = "tests/reward_server/test_rs_deadline.py"
ALONE = ["tests/demo/test_demo_real_model.py", OWN_LOAD]
REAL_MODEL = ["tests/openrlhf/test_orl_real_model.py"]
REWARD_SERVER = [f"--ignore={OWN_LOAD}", "tests/reward_server"]
DOCS = ["tests/documented/test_documented_pages.py", "tests/trl", "tests/eval"]
OWN_PART = [*ALONE, *REAL_MODEL, "tests/reward_server", *DOCS]


# pytest-timeout for the tests that set none: a training run may wait for memory (tests/
# memory_gate.py) while the other part's run holds it, a few minutes, and the wait counts.
TIMEOUT_S = 1200


def _pytest(extra: list[str], paths: list[str]) -> list[str]:
    return [sys.executable, "-m", "pytest", "-m", MARKS, f"--durations={SLOWEST}",
            f"--timeout={TIMEOUT_S}", *extra, *paths]  # fmt: skip


def phases(extra: list[str]) -> list[dict[str, tuple[list[str], dict[str, str]]]]:
    """Each phase's parts, side by side: their command lines and extra environment. "fit" takes
    every slow suite no other part names, so a new one runs without being listed here."""
    everything_else = [*(f"--ignore={path}" for path in OWN_PART), "tests"]
    return [
        {"alone": (_pytest(extra, ALONE), {})},
        {
            "real-model": (_pytest(extra, REAL_MODEL), {}),
            "server": (_pytest(extra, REWARD_SERVER), {}),
        },
        {
            "docs": (_pytest(extra, DOCS), {RUN_BY_TESTS_ENV: "1"}),
            "fit": (_pytest(extra, everything_else), {}),
        },
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


def _start(
    name: str, argv: list[str], env: dict[str, str], lock: threading.Lock, failures: list[str]
) -> tuple:
    # Each part its own pytest temporary folder: pytest's cleanup of old numbered folders must
    # not meet another part's.
    base = Path(tempfile.gettempdir()) / f"gtpo-slow-{name}"
    proc = subprocess.Popen(
        [*argv, f"--basetemp={base}"], cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, errors="replace", bufsize=1,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **env},
    )  # fmt: skip
    relay = threading.Thread(target=_relay, args=(name, proc, lock, failures), daemon=True)
    relay.start()
    return proc, relay


def _wait(running: dict[str, tuple], started: float) -> dict[str, tuple[int, float]]:
    ended: dict[str, tuple[int, float]] = {}
    while len(ended) < len(running):
        for name, (proc, relay) in running.items():
            if name not in ended and proc.poll() is not None:
                relay.join()
                ended[name] = (proc.returncode, time.monotonic() - started)
        time.sleep(0.5)
    return ended


def _chosen(argv: list[str]) -> tuple[set[str] | None, list[str]]:
    """`--parts a,b` out of the command line: the parts to run (None: all), the rest."""
    if "--parts" not in argv:
        return None, argv
    at = argv.index("--parts")
    if at + 1 == len(argv):
        raise SystemExit("--parts needs a comma-separated list, e.g. --parts docs,fit")
    return set(argv[at + 1].split(",")), argv[:at] + argv[at + 2 :]


def main(argv: list[str]) -> int:
    only, extra = _chosen(argv)
    every_part = {name for parts in phases(extra) for name in parts}
    if only is not None and not only <= every_part:
        raise SystemExit(
            f"unknown part(s) {sorted(only - every_part)}; the parts: {sorted(every_part)}"
        )
    memory_gate.WAITS.unlink(missing_ok=True)
    lock = threading.Lock()
    failures: list[str] = []
    started = time.monotonic()
    ended: dict[str, tuple[int, float]] = {}
    for parts in phases(extra):
        chosen = {name: part for name, part in parts.items() if only is None or name in only}
        if not chosen:
            continue
        phase_started = time.monotonic()
        running = {
            name: _start(name, command, env, lock, failures)
            for name, (command, env) in chosen.items()
        }
        ended |= _wait(running, phase_started)
    total = time.monotonic() - started
    print(f"\n== the slow stage: {total / 60:.1f} min in all")
    for name, (code, seconds) in ended.items():
        print(f"   {name:<10} {seconds / 60:5.1f} min, exit {code}")
    waits = memory_gate.WAITS.read_text().splitlines() if memory_gate.WAITS.exists() else []
    print(f"   training runs that waited for memory (tests/memory_gate.py): {len(waits)}")
    for wait in waits:
        print(f"     {wait}")
    print(f"   tests that did not pass: {len(failures)}")
    for failure in failures:
        print(f"     {failure}")
    failed = [code for code, _ in ended.values() if code != 0]
    return failed[0] if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
