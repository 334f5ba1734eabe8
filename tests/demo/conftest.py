"""The reward server the demo's end-to-end tests send to: a real process on 127.0.0.1, one per
test module, so its counters show every request the demo made."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request

import pytest

from gtpo.local_reward_server import free_port


def _serve(tmp_path_factory, **env: str):
    port = free_port()
    log = tmp_path_factory.mktemp("server") / "server.log"
    with open(log, "wb") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "reward_server", "--host", "127.0.0.1", "--port", str(port),
             "--verify-workers", "1", "--log-level", "warning"],
            stdout=sink, stderr=subprocess.STDOUT, env={**os.environ, **env},
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if urllib.request.urlopen(f"{url}/readyz", timeout=2).status == 200:
                break
        except OSError:
            pass
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            pytest.fail(f"reward server did not start: {log.read_text()[-2000:]}")
        time.sleep(0.2)
    yield url
    proc.terminate()
    proc.wait(timeout=20)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    yield from _serve(tmp_path_factory)


@pytest.fixture(scope="module")
def think_server(tmp_path_factory):
    """A server whose own response format (GTPO_RS_RESPONSE_FORMAT) is think."""
    yield from _serve(tmp_path_factory, GTPO_RS_RESPONSE_FORMAT="think")
