"""`gtpo demo`, stopped by SIGTERM as `timeout` or a job scheduler stops it, ends the reward
server it started (and that server's verification workers) as Ctrl-C does. The server runs in a
session of its own (so that Ctrl-C in a terminal reaches the demo first), so nothing else would
end it: Python's default for SIGTERM exits without running the demo's clean-up."""

from __future__ import annotations

import signal
import subprocess
import time

import pytest
from demo_cli import gtpo_command

psutil = pytest.importorskip("psutil")


def test_sigterm_ends_the_demo_and_its_reward_server(tmp_path):
    demo = subprocess.Popen(
        [*gtpo_command(), "demo", "--quick", "--out", str(tmp_path / "out")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        helpers: list[psutil.Process] = []
        while not helpers:  # the reward server and its workers, once started
            assert demo.poll() is None and time.monotonic() < deadline, "no reward server seen"
            children = psutil.Process(demo.pid).children(recursive=True)
            helpers = [c for c in children if "reward_server" in _command_line(c)]
            time.sleep(0.2)
        time.sleep(1.0)  # let it spawn its workers too
        helpers = psutil.Process(demo.pid).children(recursive=True)
        demo.send_signal(signal.SIGTERM)
        assert demo.wait(timeout=60) != 0
        _gone, alive = psutil.wait_procs(helpers, timeout=20)
        assert not alive, [(p.pid, p.cmdline()) for p in alive]
    finally:
        if demo.poll() is None:
            demo.kill()
        for child in psutil.Process().children(recursive=True):
            if child.pid != demo.pid and "reward_server" in _command_line(child):
                child.kill()


def _command_line(process: psutil.Process) -> str:
    """``process``'s command line; empty once it has ended (a zombie not yet reaped by its
    parent, another test's process too, has none to read)."""
    try:
        return " ".join(process.cmdline())
    except psutil.Error:
        return ""
