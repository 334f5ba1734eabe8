"""The slow stage (`make test-slow`): the real-model demo alone, then two pytest processes side
by side.

A slow run waits more than it computes: Ray and vLLM starting, pip unpacking wheels, servers
ridden through outages, retries a second apart. On the 2-core CI machine one pytest process
left 20-45 % of the CPU idle (`vmstat`), so two streams share it:

- "docs": every documented command (tests/documented/test_documented_pages.py), one docs run;
- "suites": every other slow test.

First, alone: the real model's quick demo, CPU-bound for 8-10 minutes (beside the other stream
it took four times as long and passed the docs runner's 20-minute limit), and the suites that
train the real instruct model with vLLM engines (beside the docs stream's training runs the
24 GiB machine ran out of memory). The demo's test (tests/demo/test_demo_real_model.py) runs
the documented command through the docs runner; the docs stream then reports that command as
run by it (substitutions.RUN_BY_TESTS).

Each pytest process has its own temporary folder. The streams' output is interleaved line by
line, each line prefixed with its stream, as it comes (a run cut short by CI's time limit still
shows where it was); each process ends with its slowest tests, then this prints every part's
time. The exit status is the first failing part's, else 0.

    python tests/slow_stage.py [PYTEST ARGS...]   # extra arguments go to every part
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
from documented.substitutions import RUN_BY_TESTS_ENV  # noqa: E402

MARKS = "slow and not docker"
SLOWEST = 25  # each part prints its slowest tests
# Alone, one after the other: the real model's quick demo, and the suites that train the real
# instruct model with its vLLM engines (beside the docs stream's training runs the machine's
# 24 GiB ran out: Ray killed a worker at 95 %).
ALONE = [
    "tests/demo/test_demo_real_model.py",
    "tests/openrlhf/test_orl_real_model.py",
    "tests/trl/test_trl_real_model.py",
    "tests/trl/test_trl_vllm.py",
]
DOCS = ["tests/documented/test_documented_pages.py"]


def _pytest(extra: list[str], paths: list[str]) -> list[str]:
    return [sys.executable, "-m", "pytest", "-m", MARKS, f"--durations={SLOWEST}", *extra, *paths]


def streams(extra: list[str]) -> dict[str, tuple[list[str], dict[str, str]]]:
    """The two side-by-side parts: their command lines and extra environment."""
    ignored = [f"--ignore={path}" for path in (*ALONE, *DOCS)]
    return {
        "docs": (_pytest(extra, DOCS), {RUN_BY_TESTS_ENV: "1"}),
        "suites": (_pytest(extra, [*ignored, "tests"]), {}),
    }


def _relay(name: str, proc: subprocess.Popen, lock: threading.Lock) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        with lock:
            sys.stdout.write(f"[{name}] {line}")
            sys.stdout.flush()


def _start(name: str, argv: list[str], env: dict[str, str], lock: threading.Lock) -> tuple:
    # Each part its own pytest temporary folder: pytest's cleanup of old numbered folders must
    # not meet another part's.
    base = Path(tempfile.gettempdir()) / f"gtpo-slow-{name}"
    proc = subprocess.Popen(
        [*argv, f"--basetemp={base}"], cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, errors="replace", bufsize=1,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **env},
    )  # fmt: skip
    relay = threading.Thread(target=_relay, args=(name, proc, lock), daemon=True)
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


def main(extra: list[str]) -> int:
    lock = threading.Lock()
    started = time.monotonic()
    ended = _wait({"alone": _start("alone", _pytest(extra, ALONE), {}, lock)}, started)
    side_by_side = time.monotonic()
    running = {name: _start(name, argv, env, lock) for name, (argv, env) in streams(extra).items()}
    ended |= _wait(running, side_by_side)
    total = time.monotonic() - started
    print(f"\n== the slow stage: {total / 60:.1f} min in all")
    for name, (code, seconds) in ended.items():
        print(f"   {name:<7} {seconds / 60:5.1f} min, exit {code}")
    failed = [code for code, _ in ended.values() if code != 0]
    return failed[0] if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
