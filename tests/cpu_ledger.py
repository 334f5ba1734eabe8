"""Where the slow stage's CPU goes: each part's CPU seconds and the machine's busy share by minute.

Every process a part starts carries its name in the environment (`PART_ENV`), down to Ray's
workers, vLLM's engine cores and the documented commands' processes; a process without it (the
Docker daemon's builds, the system) counts as `OTHER`. Every `interval_s` the ledger reads each
process's CPU ticks (/proc/PID/stat) and adds what each used since the last look to its part;
a process that ends between two looks loses what it used since the last (at most `interval_s`
of CPU, against parts that use hundreds of seconds). The machine's busy share comes from
/proc/stat. Linux only; elsewhere the ledger stays empty.
"""

from __future__ import annotations

import os
import threading
import time
from collections import defaultdict
from pathlib import Path

PART_ENV = "GTPO_SLOW_PART"
OTHER = "other"
TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")
PROC = Path("/proc")


def _ticks(pid: str) -> tuple[str, int] | None:
    """(start time, utime + stime) of a process, in clock ticks; None once it is gone."""
    try:
        stat = (PROC / pid / "stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) "
    return fields[19], int(fields[11]) + int(fields[12])


def _part_of(pid: str) -> str:
    try:
        environ = (PROC / pid / "environ").read_bytes()
    except OSError:
        return OTHER
    prefix = f"{PART_ENV}=".encode()
    for entry in environ.split(b"\0"):
        if entry.startswith(prefix):
            return entry[len(prefix) :].decode(errors="replace")
    return OTHER


def _machine_ticks() -> tuple[int, int]:
    """(busy, total) CPU ticks of the whole machine since boot."""
    user, nice, system, idle, iowait, irq, softirq, steal = map(
        int, (PROC / "stat").read_text().split("\n", 1)[0].split()[1:9]
    )
    busy = user + nice + system + irq + softirq + steal
    return busy, busy + idle + iowait


class CpuLedger:
    """`sample()` adds what every process used since the last sample to its part; `start()`
    samples every `interval_s` in a thread until `stop()`."""

    def __init__(self, interval_s: float = 5.0) -> None:
        self.interval_s = interval_s
        self.cpu_s: dict[str, float] = defaultdict(float)
        self.busy_by_minute: dict[int, list[int]] = defaultdict(lambda: [0, 0])
        self._seen: dict[tuple[str, str], tuple[str, int]] = {}  # (pid, start) -> (part, ticks)
        self._machine = _machine_ticks() if PROC.joinpath("stat").exists() else None
        self._started = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._baseline()

    def _baseline(self) -> None:
        """What the processes already running have used counts for nobody."""
        for pid in filter(str.isdigit, os.listdir(PROC) if PROC.exists() else []):
            now = _ticks(pid)
            if now is not None:
                self._seen[(pid, now[0])] = (_part_of(pid), now[1])

    def sample(self) -> None:
        if self._machine is None:
            return
        alive = {}
        for pid in filter(str.isdigit, os.listdir(PROC)):
            now = _ticks(pid)
            if now is None:
                continue
            key = (pid, now[0])
            part, before = self._seen.get(key) or (_part_of(pid), 0)
            self.cpu_s[part] += (now[1] - before) * TICK_S
            alive[key] = (part, now[1])
        self._seen = alive
        busy, total = _machine_ticks()
        minute = self.busy_by_minute[int((time.monotonic() - self._started) // 60)]
        minute[0] += busy - self._machine[0]
        minute[1] += total - self._machine[1]
        self._machine = (busy, total)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def start(self) -> CpuLedger:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self.sample()

    def report(self, seconds: float, cores: int | None = None) -> list[str]:
        """Lines: each part's CPU minutes and share of what the machine had, then its busy
        share minute by minute."""
        cores = cores or os.cpu_count() or 1
        had = seconds * cores
        lines = [f"CPU used, by part (of {had / 60:.1f} core-minutes in {seconds / 60:.1f} min):"]
        for part, used in sorted(self.cpu_s.items(), key=lambda kv: -kv[1]):
            lines.append(f"  {part:<12} {used / 60:6.1f} core-min  {100 * used / had:5.1f} %")
        idle = sum(total - busy for busy, total in self.busy_by_minute.values()) * TICK_S
        lines.append(f"  {'(idle)':<12} {idle / 60:6.1f} core-min")
        shares = [
            round(100 * busy / total) if total else 0
            for _, (busy, total) in sorted(self.busy_by_minute.items())
        ]
        lines.append("The machine's CPU busy, % by minute:")
        for first in range(0, len(shares), 15):
            row = " ".join(f"{share:3d}" for share in shares[first : first + 15])
            lines.append(f"  {first:3d}-{first + 14:<3d} {row}")
        return lines
