"""Training runs started by tests, admitted one by one by the memory the machine has left.

The slow stage (tests/slow_stage.py) runs two pytest processes side by side, and each starts
OpenRLHF training runs (Ray, DeepSpeed ranks, vLLM engines) one after another. A run's peak is
4-9 GiB (measured: 6.8 GiB for two ranks with the tiny model; 8.9 GiB for a documented
command's first run, whose DeepSpeed ops are JIT-built by two compilers of 1.9 GiB each). Two
peaks at once beside the pytest processes filled the 24 GiB machine, and Ray's memory monitor
(at 95 % used) killed a worker of one of them.

So each run asks `admitted(need_gib)` first. Under a lock every process on the machine shares,
it waits until both hold:

- what is available (MemAvailable) covers its own need, the needs of runs admitted in the last
  `RAMP_S` seconds (still growing towards their peak: counted whole), and a margin that keeps
  the machine below Ray's threshold;
- its peak and the peaks of every run in flight fit together beside what the machine holds
  outside the runs (`BASELINE`, measured whenever a run starts alone): a run alternates between
  generating (vLLM) and training (DeepSpeed), so one seen in a trough at admission may be back
  at its peak while the new one is at its own. By MemAvailable alone, a 9 GiB documented run
  and a 7 GiB two-rank run could start together, 16 GiB of peaks where about 15 fit beside the
  two pytest processes.

Runs in flight are kept in a ledger beside the lock; a run whose process has ended (killed,
timed out) leaves it. A run that finds no other run in flight is admitted at once: it has
nothing to wait for. Every wait is printed, and written to `WAITS`.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

LEDGER = Path(tempfile.gettempdir()) / "gtpo-test-memory-ledger.json"
# Every wait, a line each: pytest captures what a test prints, and the slow stage prints these
# at its end (tests/slow_stage.py).
WAITS = Path(tempfile.gettempdir()) / "gtpo-test-memory-waits.log"
# Runs whose measured peak passed what they declared, a line each (the slow stage prints them):
# a declaration too low lets two runs start whose peaks do not fit together.
OVERRUNS = Path(tempfile.gettempdir()) / "gtpo-test-memory-overruns.log"
# What the machine held outside the gated runs (GiB), when a run last started alone.
BASELINE = Path(tempfile.gettempdir()) / "gtpo-test-memory-baseline"
RAMP_S = 300.0  # a run reaches its peak within this (the slowest: a first run's JIT build)
RAY_KILLS_AT = 0.95  # Ray's memory monitor: memory_usage_threshold
MARGIN_GIB = 1.0
POLL_S = 2.0
# A run's peak is a plateau of tens of seconds (the model, its optimizer state and the engine's
# KV cache held through every step), so a sample every 5 s finds it; each sample reads every
# process's smaps_rollup, about 130 ms of the pytest process's CPU for a real-model run.
PEAK_POLL_S = 5.0


def _meminfo_gib() -> tuple[float, float]:
    """(MemTotal, MemAvailable) in GiB."""
    fields = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        name, value = line.split(":", 1)
        fields[name] = int(value.split()[0]) / 2**20
    return fields["MemTotal"], fields["MemAvailable"]


def _process_start(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot; None: no such process): a pid
    and its start time name one process, also after the pid is reused."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


@contextlib.contextmanager
def _locked() -> Iterator[dict[str, list]]:
    """The ledger ({token: [pid, its start, need_gib, admitted_at]}, runs whose process ended
    dropped), read and written back under an exclusive lock. One ledger, read once: written
    back to the path named later, it could overwrite another ledger without its lock."""
    ledger = LEDGER
    with open(f"{ledger}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            runs = json.loads(ledger.read_text()) if ledger.exists() else {}
        except ValueError:
            runs = {}
        runs = {token: run for token, run in runs.items() if _process_start(run[0]) == run[1]}
        yield runs
        ledger.write_text(json.dumps(runs))


def short_by(need_gib: float, runs: dict[str, list], now: float) -> float:
    """How many GiB are missing for a run of ``need_gib`` to start now (0: it may start)."""
    total, available = _meminfo_gib()
    ramping = sum(need for _, _, need, at in runs.values() if now - at < RAMP_S)
    floor = (1 - RAY_KILLS_AT) * total + MARGIN_GIB
    now_short = need_gib + ramping + floor - available
    # Never measured alone (a ledger written by hand): all that is used now, runs included.
    outside = float(BASELINE.read_text()) if BASELINE.exists() else total - available
    peaks = need_gib + sum(need for _, _, need, _ in runs.values())
    peaks_short = peaks - (total - floor - outside)
    return max(0.0, now_short, peaks_short)


@contextlib.contextmanager
def admitted(need_gib: float, what: str) -> Iterator[None]:
    """Wait until a run of ``need_gib`` GiB at its peak fits beside the runs in flight, then
    hold its place in the ledger while the body runs."""
    token = f"{os.getpid()}-{time.monotonic_ns()}"
    waited_since = None
    while True:
        with _locked() as runs:
            now = time.time()
            if not runs:  # alone: all that is used now is outside the runs
                total, available = _meminfo_gib()
                BASELINE.write_text(f"{total - available:.3f}")
            missing = short_by(need_gib, runs, now) if runs else 0.0
            if missing == 0.0:
                runs[token] = [os.getpid(), _process_start(os.getpid()), need_gib, now]
                break
        if waited_since is None:
            waited_since = time.monotonic()
            print(f"memory gate: {what} ({need_gib:.1f} GiB) waits, {missing:.1f} GiB short "
                  f"beside {len(runs)} run(s) in flight", flush=True)  # fmt: skip
        time.sleep(POLL_S)
    if waited_since is not None:
        line = f"{what} ({need_gib:.1f} GiB) waited {time.monotonic() - waited_since:.0f} s"
        print(f"memory gate: {line}", flush=True)
        with WAITS.open("a") as waits:
            waits.write(line + "\n")
    try:
        yield
    finally:
        with _locked() as runs:
            runs.pop(token, None)


class GroupPeak:
    """The peak memory of one process group (a run started with `start_new_session`: its
    driver, Ray's processes and vLLM's engine cores), sampled every `PEAK_POLL_S` seconds in a
    thread as the sum of the processes' proportional set sizes (PSS: a page shared by n
    processes counts 1/n in each, so the sum is what the group holds). With `marked`
    (NAME, VALUE): every process whose environment holds NAME=VALUE instead, wherever it runs
    (a documented run's actors live in its page's Ray head, another session)."""

    def __init__(self, pgid: int, marked: tuple[str, str] | None = None) -> None:
        self.pgid = pgid
        self.marked = None if marked is None else f"{marked[0]}={marked[1]}".encode()
        self.peak_gib = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(PEAK_POLL_S):
            self.peak_gib = max(self.peak_gib, _pss_gib(self._ours))

    def _ours(self, entry: Path) -> bool:
        if self.marked is not None:
            return self.marked in (entry / "environ").read_bytes().split(b"\0")
        return int((entry / "stat").read_text().rsplit(")", 1)[1].split()[2]) == self.pgid

    def stop(self, need_gib: float, what: str) -> float:
        """Stop sampling; a peak above `need_gib` is written to `OVERRUNS`. Returns the peak."""
        self._stop.set()
        self._thread.join()
        if self.peak_gib > need_gib:
            with OVERRUNS.open("a") as overruns:
                overruns.write(
                    f"{what}: {self.peak_gib:.1f} GiB at its peak, {need_gib:.1f} declared\n"
                )
        return self.peak_gib


def _pss_gib(ours: Callable[[Path], bool]) -> float:
    """The PSS of every process whose /proc entry `ours` accepts, together."""
    total_kib = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if not ours(entry):
                continue
            for line in (entry / "smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total_kib += int(line.split()[1])
                    break
        except (OSError, ValueError, IndexError):  # ended while read, or not ours to read
            continue
    return total_kib / 2**20
