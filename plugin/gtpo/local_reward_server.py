"""A reward server on this machine: ``python -m reward_server`` as a child process on
127.0.0.1 and a free port (the demo's embedded server, and the test suites' real servers).

``check_loopback`` is the demo's rule for a server it did not start: it only sends rewards
traffic to this machine. ``RewardClient`` itself talks to any host.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

from gtpo.reward_client import RewardClient, RewardServerError

log = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def check_loopback(url: str) -> str:
    """The demo talks to a local server only: refuse anything but a loopback address."""
    parts = urlsplit(url)
    if parts.scheme != "http" or parts.hostname not in (LOOPBACK, "localhost", "::1"):
        raise ValueError(
            f"--reward-url {url!r}: the demo only sends rewards traffic to a server on this "
            "machine; use http://127.0.0.1:PORT (for example the compose service's published "
            "port)"
        )
    return url.rstrip("/")


class LocalRewardServer:
    """``python -m reward_server`` as a child process on 127.0.0.1 and a free port.

    Use as a context manager; the server and its workers are stopped on exit. Its output goes
    to ``log_path``.
    """

    def __init__(self, log_path: Path, verify_workers: int = 1) -> None:
        self.port = free_port()
        self.url = f"http://{LOOPBACK}:{self.port}"
        self.log_path = log_path
        self.verify_workers = verify_workers
        self.proc: subprocess.Popen | None = None

    def start(self) -> LocalRewardServer:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        command = [
            sys.executable,
            "-m",
            "reward_server",
            "--host",
            LOOPBACK,
            "--port",
            str(self.port),
            "--verify-workers",
            str(self.verify_workers),
            "--log-level",
            "warning",
        ]
        log.info("starting the reward server: %s", " ".join(command))
        with open(self.log_path, "wb") as sink:
            # A session of its own, so Ctrl-C in the terminal reaches the demo, which then stops
            # the server cleanly instead of both racing to shut down.
            self.proc = subprocess.Popen(
                command,
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        return self

    def wait(self, timeout_s: float = 60.0) -> None:
        """Block until the server is ready; fails at once if it exits first."""
        with RewardClient(self.url) as client:
            try:
                client.wait_ready(timeout_s, self.proc)
            except RewardServerError as err:
                raise RewardServerError(f"{err} (server log: {self.log_path})") from None

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> LocalRewardServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
