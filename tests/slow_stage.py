"""The slow stage (`make test-slow`): the real-model demo alone, then two pytest processes side
by side.

- "main": every documented command (tests/documented/test_documented_pages.py, one docs run),
  then every slow suite that trains (OpenRLHF's fit(), TRL, gtpo eval), one after the other;
- "server": the reward server's slow suites (live servers under load, kills and probes), which
  need little memory.

Training runs do not go side by side: two of them (a docs run's beside a suite's) filled the
24 GiB machine and Ray killed their workers. The real model's quick demo runs first, alone: it
is CPU-bound for 8-10 minutes, and beside other work it took four times as long and passed the
docs runner's 20-minute limit. Its test (tests/demo/test_demo_real_model.py) runs the
documented command through the docs runner; the main part then reports that command as run by
it (substitutions.RUN_BY_TESTS).

Each pytest process has its own temporary folder. Their output is interleaved line by line,
each line prefixed with its part, as it comes (a run cut short by CI's time limit still shows
where it was); each process ends with its slowest tests, then this prints every part's time.
The exit status is the first failing part's, else 0.

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
ALONE = ["tests/demo/test_demo_real_model.py"]
DOCS = ["tests/documented/test_documented_pages.py"]
REWARD_SERVER = ["tests/reward_server"]


def _pytest(extra: list[str], paths: list[str]) -> list[str]:
    return [sys.executable, "-m", "pytest", "-m", MARKS, f"--durations={SLOWEST}", *extra, *paths]


def streams(extra: list[str]) -> dict[str, tuple[list[str], dict[str, str]]]:
    """The two side-by-side parts: their command lines and extra environment."""
    ignored = [f"--ignore={path}" for path in (*ALONE, *REWARD_SERVER)]
    return {
        "main": (_pytest(extra, [*ignored, *DOCS, "tests"]), {RUN_BY_TESTS_ENV: "1"}),
        "server": (_pytest(extra, REWARD_SERVER), {}),
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
