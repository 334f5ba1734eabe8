"""Shutdown as a supervisor sends it (slow stage): SIGTERM or SIGINT to the server alone, or to
its whole process group as systemd, Slurm and `kill -- -PGID` do, with one process and with
`--workers 2`, while a batch is being scored.

Before: a signal to the group killed the verification workers and the forkserver first; the
pool replaced the workers during the shutdown, started a new forkserver that outlived the server
by seconds, and two BrokenPipeError tracebacks were logged; one process ended with status 143,
`--workers 2` with 0.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from reliability_harness import wait_ready

from gtpo.local_reward_server import free_port

pytestmark = pytest.mark.slow

# Right answers whose check sympy works on for a while (about 1.5 s for the batch on a quiet
# machine with 2 workers; each its own cache entry): still being scored when the signal comes.
_POWERS = range(4, 14)
BATCH = {
    "query": [
        f"<reasoning>r</reasoning><answer>\\sin^{{{k}}}(x)\\cos^{{{k}}}(x)</answer>"
        for k in _POWERS
    ],
    "labels": [f"\\frac{{\\sin^{{{k}}}(2x)}}{{2^{{{k}}}}}" for k in _POWERS],
}


def _session(sid: int) -> list[str]:
    """`pid command` of every live process in session `sid` (zombies are already dead)."""
    # -ww: the whole command line, whatever COLUMNS says (under pytest it cut it at 80).
    ps = subprocess.run(
        ["ps", "-ww", "-eo", "pid=,sid=,stat=,args="], capture_output=True, text=True
    )
    rows = []
    for line in ps.stdout.splitlines():
        pid, session, stat, args = line.split(None, 3)
        if int(session) == sid and not stat.startswith("Z"):
            rows.append(f"{pid} {args[:120]}")
    return rows


def _wait_until_checked(url: str, items: int, timeout_s: float = 60.0) -> None:
    """Until the server has looked `items` verdicts up in its cache (every process's
    /metrics together): the batch has been read and its checks are with the workers."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        metrics = httpx.get(f"{url}/metrics", timeout=10).text
        lookups = sum(
            float(line.rsplit(" ", 1)[1])
            for line in metrics.splitlines()
            if line.startswith("gtpo_rs_cache_lookups_total")
        )
        if lookups >= items:
            return
        time.sleep(0.05)
    raise AssertionError(f"the batch's {items} checks did not reach the server in {timeout_s} s")


def _start(workers: int, log: Path) -> tuple[subprocess.Popen, int]:
    """`python -m reward_server` with `workers` uvicorn processes and 2 verification workers,
    in its own session (a signal to its group reaches every process it starts)."""
    port = free_port()
    env = {**os.environ, "GTPO_RS_VERIFY_WORKERS": "2", "GTPO_RS_LOG_LEVEL": "info"}
    with log.open("wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "reward_server", "--host", "127.0.0.1", "--port", str(port),
             "--workers", str(workers)],
            env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    return server, port


def _end_session(server: subprocess.Popen) -> None:
    """Kill whatever of the server's session is still alive (a failed test leaves nothing)."""
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
    for pid in [int(row.split()[0]) for row in _session(server.pid)]:
        os.kill(pid, signal.SIGKILL)


def _stopped_cleanly(server: subprocess.Popen, code: int, text: str) -> None:
    """What every stop must leave: status 0, no process of the server's session, nothing
    logged as an error, no worker replaced."""
    # Each message's first line names the fault: CI's summary shows only that line.
    assert code == 0, f"exit status {code}\n{text[-3000:]}"
    assert _session(server.pid) == [], _session(server.pid)
    assert "Traceback" not in text, f"a traceback: {_traceback_ends(text)}\n{text[-3000:]}"
    for fault in ("replaced", "could not start"):
        assert fault not in text, f"{fault!r} in the log\n{text[-3000:]}"


def _traceback_ends(text: str) -> str:
    """The exceptions ``text``'s tracebacks end with (other processes' lines interleave)."""
    return "; ".join(re.findall(r"^[\w.]+(?:Error|Exception|Interrupt|Exit)\b.*$", text, re.M))


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize(
    ("stop", "to_group"),
    [(signal.SIGTERM, True), (signal.SIGINT, True), (signal.SIGTERM, False)],
    ids=["SIGTERM-group", "SIGINT-group", "SIGTERM-server"],
)
def test_a_stop_signal_drains_the_batch_and_leaves_nothing(workers, stop, to_group, tmp_path):
    log = tmp_path / "server.log"
    server, port = _start(workers, log)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, server)
        answer: dict[str, object] = {}

        def score() -> None:
            try:
                reply = httpx.post(f"{url}/get_reward", json=BATCH, timeout=60)
                answer["status"], answer["body"] = reply.status_code, reply.json()
                answer["at"] = time.monotonic()
            except httpx.HTTPError as exc:
                answer["error"] = repr(exc)

        client = threading.Thread(target=score)
        client.start()
        # A fixed pause did not do on a busy machine: the request was not yet sent, or not yet
        # accepted, when the signal closed the listening socket (refused, or reset).
        _wait_until_checked(url, len(BATCH["query"]))
        signalled = time.monotonic()
        if to_group:
            os.killpg(server.pid, stop)
        else:
            server.send_signal(stop)
        code = server.wait(60)
        client.join(60)
        time.sleep(0.5)
        left = _session(server.pid)
    finally:
        _end_session(server)
    text = log.read_text(errors="replace")
    print(f"\nexit {code}; answer {answer.get('status', answer.get('error'))}; left {left}")
    assert left == [], left
    _stopped_cleanly(server, code, text)
    # In flight when the signal came: answered in full, or refused as retryable.
    assert answer.get("at", signalled) >= signalled, "the batch ended before the signal"
    if answer.get("status") == 200:
        rewards = answer["body"]["rewards"]  # type: ignore[index]
        assert rewards == [20.0] * len(BATCH["query"])
    else:
        assert answer.get("status") == 503, answer


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_group_signal_while_the_workers_start_stops_without_starting_them_again(
    workers, stop, tmp_path
):
    """The signal reaches the forkserver too, while the pool is starting its workers: a start
    that failed then was retried (a traceback, a new forkserver that could outlive the server).
    Now the server stops without serving, as after any stop signal.

    SIGINT to a forkserver still importing the checker (seconds on a busy machine) printed a
    KeyboardInterrupt traceback: it ignored stop signals only once its imports were done."""
    log = tmp_path / "server.log"
    server, _ = _start(workers, log)
    try:
        deadline = time.monotonic() + 120
        # The first forkserver of the session: the pool is starting its workers.
        while not any("forkserver" in row for row in _session(server.pid)):
            assert server.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.01)
        os.killpg(server.pid, stop)
        code = server.wait(60)
        time.sleep(0.5)
    finally:
        _end_session(server)
    _stopped_cleanly(server, code, log.read_text(errors="replace"))
