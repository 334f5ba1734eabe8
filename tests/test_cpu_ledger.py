"""The slow stage's CPU ledger (tests/cpu_ledger.py): CPU seconds go to the part named in a
process's environment, the others' to "other", and what ran before the ledger to nobody."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from cpu_ledger import OTHER, PART_ENV, CpuLedger

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="reads /proc (Linux)")

# Burns `CPU_S` seconds of its own CPU time (however busy the machine), says so, then waits to
# be killed: the ledger must see it alive after its work.
BURN = """
import sys, time
while time.process_time() < float(sys.argv[1]):
    pass
print("done", flush=True)
sys.stdin.read()
"""
CPU_S = 0.6


def _burner(part: str | None) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != PART_ENV}
    if part is not None:
        env[PART_ENV] = part
    proc = subprocess.Popen(
        [sys.executable, "-c", BURN, str(CPU_S)], env=env, stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline() == "done\n"
    return proc


def test_each_process_counts_for_the_part_in_its_environment():
    before = _burner("fit")  # started before the ledger: its CPU so far is nobody's
    ledger = CpuLedger()
    tagged, untagged = _burner("docs"), _burner(None)
    try:
        ledger.sample()
    finally:
        for proc in (before, tagged, untagged):
            proc.kill()
            proc.wait()
    assert ledger.cpu_s["docs"] >= CPU_S * 0.9, dict(ledger.cpu_s)
    assert ledger.cpu_s[OTHER] >= CPU_S * 0.9, dict(ledger.cpu_s)
    assert ledger.cpu_s["fit"] < CPU_S / 2, dict(ledger.cpu_s)  # its burn came before


def test_the_report_lists_parts_by_cpu_and_the_busy_share_by_minute():
    ledger = CpuLedger()
    proc = _burner("fit")
    try:
        ledger.sample()
    finally:
        proc.kill()
        proc.wait()
    lines = ledger.report(seconds=60.0, cores=2)
    assert lines[0] == "CPU used, by part (of 2.0 core-minutes in 1.0 min):"
    listed = [line.split()[0] for line in lines[1 : 1 + len(ledger.cpu_s)]]
    assert "fit" in listed
    assert listed == sorted(ledger.cpu_s, key=lambda part: -ledger.cpu_s[part])
    assert lines[1 + len(ledger.cpu_s)].split()[0] == "(idle)"
    busy = lines[lines.index("The machine's CPU busy, % by minute:") + 1].split()
    assert busy[0] == "0-14" and 0 < int(busy[1]) <= 100
