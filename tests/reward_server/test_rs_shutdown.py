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
import signal
import subprocess
import sys
import threading
import time

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
    ps = subprocess.run(["ps", "-eo", "pid=,sid=,stat=,args="], capture_output=True, text=True)
    rows = []
    for line in ps.stdout.splitlines():
        pid, session, stat, args = line.split(None, 3)
        if int(session) == sid and not stat.startswith("Z"):
            rows.append(f"{pid} {args[:120]}")
    return rows


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize(
    ("stop", "to_group"),
    [(signal.SIGTERM, True), (signal.SIGINT, True), (signal.SIGTERM, False)],
    ids=["SIGTERM-group", "SIGINT-group", "SIGTERM-server"],
)
def test_a_stop_signal_drains_the_batch_and_leaves_nothing(workers, stop, to_group, tmp_path):
    port = free_port()
    log = tmp_path / "server.log"
    env = {**os.environ, "GTPO_RS_VERIFY_WORKERS": "2", "GTPO_RS_LOG_LEVEL": "info"}
    with log.open("wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "reward_server", "--host", "127.0.0.1", "--port", str(port),
             "--workers", str(workers)],
            env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
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
        time.sleep(0.3)  # the batch is in the workers
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
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        for pid in [int(row.split()[0]) for row in _session(server.pid)]:
            os.kill(pid, signal.SIGKILL)
    text = log.read_text(errors="replace")
    print(f"\nexit {code}; answer {answer.get('status', answer.get('error'))}; left {left}")
    assert code == 0, text[-3000:]
    assert left == [], left
    assert "Traceback" not in text, text[-3000:]
    assert "replaced" not in text, text[-3000:]
    # In flight when the signal came: answered in full, or refused as retryable.
    assert answer.get("at", signalled) >= signalled, "the batch ended before the signal"
    if answer.get("status") == 200:
        rewards = answer["body"]["rewards"]  # type: ignore[index]
        assert rewards == [20.0] * len(BATCH["query"])
    else:
        assert answer.get("status") == 503, answer
