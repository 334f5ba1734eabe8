"""tests/memory_gate.py: training runs started by tests wait for the memory their peak needs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import memory_gate
import pytest

TOTAL_GIB = 24.0
FLOOR_GIB = (1 - memory_gate.RAY_KILLS_AT) * TOTAL_GIB + memory_gate.MARGIN_GIB  # 2.2


# Runs started by a test in threads: each test's end waits for them (``machine``). One that
# left its ledger only after the next test had set its own wrote the old ledger, empty, to the
# next test's path, and a run the next test held in it was gone (seen once in a full run).
_waiting: list[threading.Thread] = []


@pytest.fixture
def machine(tmp_path, monkeypatch):
    """A private ledger, fast polling, and MemAvailable set by the test."""
    state = {"available": 20.0}
    monkeypatch.setattr(memory_gate, "LEDGER", tmp_path / "ledger.json")
    monkeypatch.setattr(memory_gate, "WAITS", tmp_path / "waits.log")
    monkeypatch.setattr(memory_gate, "BASELINE", tmp_path / "baseline")
    monkeypatch.setattr(memory_gate, "POLL_S", 0.01)
    monkeypatch.setattr(memory_gate, "_meminfo_gib", lambda: (TOTAL_GIB, state["available"]))
    yield state
    while _waiting:
        _waiting.pop().join(10.0)


def _start_waiting(need: float, what: str) -> tuple[threading.Thread, threading.Event]:
    admitted = threading.Event()

    def run() -> None:
        with memory_gate.admitted(need, what):
            admitted.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    _waiting.append(thread)
    return thread, admitted


def test_a_run_alone_starts_even_when_memory_is_short(machine, capsys) -> None:
    machine["available"] = 1.0
    with memory_gate.admitted(9.0, "alone"):
        pass
    assert "waits" not in capsys.readouterr().out


def test_a_run_waits_while_a_growing_one_would_not_leave_it_room(machine, capsys) -> None:
    machine["available"] = 15.0  # 15 - 7 (first, still growing) - 2.2 = 5.8 < 6
    with memory_gate.admitted(7.0, "first"):
        thread, admitted = _start_waiting(6.0, "second")
        assert not admitted.wait(0.3)
        assert "second (6.0 GiB) waits, 0.2 GiB short beside 1 run(s)" in capsys.readouterr().out
    assert admitted.wait(5.0)  # the first left the ledger
    thread.join(5.0)
    assert "second (6.0 GiB) waited" in capsys.readouterr().out
    assert memory_gate.WAITS.read_text().startswith("second (6.0 GiB) waited ")


def test_room_beside_a_growing_run_is_used_at_once(machine) -> None:
    machine["available"] = 15.3  # 15.3 - 7 - 2.2 = 6.1 >= 6
    with memory_gate.admitted(7.0, "first"):
        _, admitted = _start_waiting(6.0, "second")
        assert admitted.wait(5.0)


def test_a_run_past_its_ramp_is_counted_by_what_it_holds(machine, monkeypatch) -> None:
    machine["available"] = 20.0  # 4 GiB outside the runs
    with memory_gate.admitted(7.0, "older"):
        machine["available"] = 9.0  # what the older run holds is already out of MemAvailable
        monkeypatch.setattr(memory_gate, "RAMP_S", 0.0)
        _, admitted = _start_waiting(6.0, "newer")  # 9 - 2.2 = 6.8 >= 6
        assert admitted.wait(5.0)


def test_a_run_whose_process_ended_leaves_the_ledger(machine) -> None:
    machine["available"] = 10.0
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)  # fmt: skip
    pid = int(ended.stdout)
    memory_gate.LEDGER.write_text(json.dumps({"killed": [pid, "1", 9.0, time.time()]}))
    _, admitted = _start_waiting(7.0, "next")  # beside a live 9 GiB run it would wait
    assert admitted.wait(5.0)


def test_a_reused_pid_does_not_hold_a_place(machine) -> None:
    machine["available"] = 10.0  # this process, under another start time: an earlier run's pid
    memory_gate.LEDGER.write_text(json.dumps({"earlier": [os.getpid(), "1", 9.0, time.time()]}))
    _, admitted = _start_waiting(7.0, "next")
    assert admitted.wait(5.0)


def test_a_live_run_holds_its_place(machine) -> None:
    machine["available"] = 10.0
    start = memory_gate._process_start(os.getpid())
    memory_gate.LEDGER.write_text(json.dumps({"live": [os.getpid(), start, 9.0, time.time()]}))
    _, admitted = _start_waiting(7.0, "next")  # 10 - 9 - 2.2 < 7
    assert not admitted.wait(0.3)
    # The live run ends as a run does, under the ledger's lock: written without it, the
    # waiting thread's write-back of what it had read could put the run back (it did once).
    with memory_gate._locked() as runs:
        runs.pop("live")
    assert admitted.wait(5.0)


def test_runs_whose_peaks_could_meet_do_not_start_together(machine, monkeypatch) -> None:
    """A run past its ramp may be in a trough (generating, or between steps) when another asks:
    MemAvailable alone would admit a run whose peak, met by the older run's, fills the
    machine. Both peaks must fit beside what the machine holds outside the runs."""
    machine["available"] = 18.0  # alone: 6 GiB outside the runs
    with memory_gate.admitted(7.0, "older"):
        assert float(memory_gate.BASELINE.read_text()) == pytest.approx(6.0)
        monkeypatch.setattr(memory_gate, "RAMP_S", 0.0)
        machine["available"] = 16.0  # the older run in a trough: 2 GiB of its 7
        # By MemAvailable: 16 - 2.2 = 13.8 >= 9. Peaks: 7 + 9 = 16 > 24 - 2.2 - 6 = 15.8.
        thread, admitted = _start_waiting(9.0, "newer")
        assert not admitted.wait(0.3)
        _, smaller = _start_waiting(8.0, "smaller")  # 7 + 8 = 15 <= 15.8
        assert smaller.wait(5.0)
    thread.join(5.0)
    assert admitted.is_set()  # once the older one left


def test_a_ledger_is_written_back_where_it_was_read(tmp_path, monkeypatch) -> None:
    """A run leaving the ledger while the ledger's path changes (a test's thread ending after
    the next test set its own) writes back to the ledger it read, under that ledger's lock."""
    monkeypatch.setattr(memory_gate, "LEDGER", tmp_path / "read.json")
    other = tmp_path / "other.json"
    other.write_text('{"held": [1, "1", 7.0, 0.0]}')
    with memory_gate._locked():
        monkeypatch.setattr(memory_gate, "LEDGER", other)
    assert json.loads((tmp_path / "read.json").read_text()) == {}
    assert json.loads(other.read_text()) == {"held": [1, "1", 7.0, 0.0]}


# A parent and its child, each touching MiB of its own, then waiting to be killed.
HOLDER = """
import os, sys, time
mib = int(sys.argv[1])
held = bytearray(mib * 2**20)
held[::4096] = b"x" * len(held[::4096])
if os.fork() == 0:
    child = bytearray(mib * 2**20)
    child[::4096] = b"y" * len(child[::4096])
    print("ready", flush=True)
time.sleep(60)
"""


def test_a_groups_peak_counts_every_process_of_it_and_an_overrun_is_written(
    tmp_path, monkeypatch
) -> None:
    monkeypatch.setattr(memory_gate, "PEAK_POLL_S", 0.05)
    monkeypatch.setattr(memory_gate, "OVERRUNS", tmp_path / "overruns.log")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, "150"], stdout=subprocess.PIPE, start_new_session=True
    )
    try:
        assert holder.stdout.readline() == b"ready\n"
        peak = memory_gate.GroupPeak(holder.pid)
        deadline = time.monotonic() + 10  # a sampler thread a busy machine schedules late
        while peak.peak_gib < 0.28 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        os.killpg(holder.pid, 9)
        holder.wait()
    measured = peak.stop(need_gib=0.2, what="two holders")
    assert 0.28 <= measured < 0.45  # 2 × 150 MiB (one holder alone: 0.15), and interpreters
    assert memory_gate.OVERRUNS.read_text() == (
        f"two holders: {measured:.1f} GiB at its peak, 0.2 declared\n"
    )
    assert peak.stop(need_gib=1.0, what="again") == measured  # within its need: nothing written
    assert memory_gate.OVERRUNS.read_text().count("\n") == 1


def test_a_marked_peak_counts_the_marked_processes_of_every_session(tmp_path, monkeypatch):
    """A documented run's actors live in its page's Ray head, another session than the
    launcher's: the peak counts every process carrying the page's mark, and no other."""
    monkeypatch.setattr(memory_gate, "POLL_S", 0.05)
    mark = ("GTPO_TEST_MARK", tmp_path.name)

    def holder(mib: int, marked: bool) -> subprocess.Popen:
        env = {**os.environ, **({mark[0]: mark[1]} if marked else {})}
        proc = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(mib)], stdout=subprocess.PIPE,
            start_new_session=True, env=env,
        )  # fmt: skip
        assert proc.stdout.readline() == b"ready\n"
        return proc

    holders = []
    try:
        # Two sessions of 2 × 100 MiB marked; 2 × 400 MiB unmarked beside them.
        holders = [holder(100, True), holder(100, True), holder(400, False)]
        peak = memory_gate.GroupPeak(holders[0].pid, marked=mark)
        deadline = time.monotonic() + 10  # a sampler thread a busy machine schedules late
        while peak.peak_gib < 0.38 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        for proc in holders:
            os.killpg(proc.pid, 9)
            proc.wait()
    measured = peak.stop(need_gib=1.0, what="marked")
    assert 0.38 <= measured < 0.7  # 4 × 100 MiB and four interpreters; 1.2 GiB with the other
