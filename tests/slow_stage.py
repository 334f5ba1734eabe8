"""The slow stage (`make test-slow`) as two pytest processes side by side.

A slow run waits more than it computes: Ray and vLLM starting, pip unpacking wheels, servers
ridden through outages, retries a second apart. On the 2-core CI machine one pytest process
left about half of the CPU idle (`vmstat` over a whole stage), so two streams share it:

- "docs": every documented command (tests/documented/test_documented_pages.py) and the tests
  that read what one of them made (`docs_run.run_one`: the real-model demo), one docs run;
- "suites": every other slow test.

Each stream is one pytest process with its own temporary folder. Their output is interleaved
line by line, each line prefixed with its stream, as it comes (a run cut short by CI's time
limit still shows where it was); each stream ends with its slowest tests, then this prints both
streams' times. The exit status is the first failing stream's, else 0.

    python tests/slow_stage.py [PYTEST ARGS...]   # extra arguments go to both streams
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
MARKS = "slow and not docker"
SLOWEST = 25  # each stream prints its slowest tests
# The tests that read the docs run (its session fixture, tests/conftest.py `docs_run`): they
# run in the docs stream, so that one docs run serves them all.
# The demo test first, as in one process: it runs docs/demo.md's command before that page runs.
DOCS_STREAM = ["tests/demo/test_demo_real_model.py", "tests/documented/test_documented_pages.py"]


def streams(extra: list[str]) -> dict[str, list[str]]:
    base = [sys.executable, "-m", "pytest", "-m", MARKS, f"--durations={SLOWEST}", *extra]
    ignored = [f"--ignore={path}" for path in DOCS_STREAM]
    return {"docs": [*base, *DOCS_STREAM], "suites": [*base, *ignored, "tests"]}


def _relay(name: str, proc: subprocess.Popen, lock: threading.Lock) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        with lock:
            sys.stdout.write(f"[{name}] {line}")
            sys.stdout.flush()


def main(extra: list[str]) -> int:
    lock = threading.Lock()
    started = time.monotonic()
    running: dict[str, tuple[subprocess.Popen, threading.Thread]] = {}
    for name, argv in streams(extra).items():
        # Each stream its own pytest temporary folder: pytest's cleanup of old numbered folders
        # must not meet the other stream's.
        base = Path(tempfile.gettempdir()) / f"gtpo-slow-{name}"
        proc = subprocess.Popen(
            [*argv, f"--basetemp={base}"], cwd=ROOT, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, errors="replace", bufsize=1,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
        relay = threading.Thread(target=_relay, args=(name, proc, lock), daemon=True)
        relay.start()
        running[name] = (proc, relay)
    ended: dict[str, tuple[int, float]] = {}
    while len(ended) < len(running):
        for name, (proc, relay) in running.items():
            if name not in ended and proc.poll() is not None:
                relay.join()
                ended[name] = (proc.returncode, time.monotonic() - started)
        time.sleep(0.5)
    total = time.monotonic() - started
    print(f"\n== the slow stage: two streams side by side, {total / 60:.1f} min in all")
    for name, (code, seconds) in ended.items():
        print(f"   {name:<7} {seconds / 60:5.1f} min, exit {code}")
    failed = [code for code, _ in ended.values() if code != 0]
    return failed[0] if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
