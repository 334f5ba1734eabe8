"""Real reward servers on 127.0.0.1: each runs in its own process, started like a user would."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import httpx
import pytest

from gtpo.local_reward_server import free_port

# The harnesses of this folder (reliability_harness.py, deadline_harness.py) are imported by the
# tests as top-level modules (--import-mode=importlib does not put test folders on sys.path), and
# by the benchmarks, which print the figures the slow tests assert on.
if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))

import reliability_harness
from reliability_harness import HANG, term_with_parent

# A file that the code-like hostile answers would create if anything ever evaluated them.
CODE_MARKER = Path(tempfile.gettempdir()) / f"gtpo-rs-code-ran-{os.getpid()}"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``hostile_case``: every hand-written hostile request of the harness, one test each."""
    if "hostile_case" in metafunc.fixturenames:
        cases = reliability_harness.hostile_cases(str(CODE_MARKER))
        metafunc.parametrize("hostile_case", cases, ids=[c.name for c in cases])


@pytest.fixture(scope="session")
def harness() -> ModuleType:
    return reliability_harness


@pytest.fixture
def code_marker() -> Iterator[Path]:
    CODE_MARKER.unlink(missing_ok=True)
    yield CODE_MARKER
    CODE_MARKER.unlink(missing_ok=True)


@dataclass
class Server:
    url: str
    proc: subprocess.Popen[bytes]
    log: Path

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def start_server(tmp_dir: Path, env: dict[str, str] | None = None, script: bool = False) -> Server:
    """Start ``python -m reward_server`` (or the ``gtpo-reward-server`` script) and wait for
    ``/readyz``."""
    port = free_port()
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("GTPO_RS_")}
    full_env.update({"GTPO_RS_VERIFY_WORKERS": "2", "GTPO_RS_LOG_LEVEL": "warning"})
    full_env.update(env or {})
    exe = Path(sys.executable).parent / "gtpo-reward-server"
    cmd = [str(exe)] if script and exe.exists() else [sys.executable, "-m", "reward_server"]
    log = tmp_dir / f"server-{port}.log"
    proc = subprocess.Popen(
        [*cmd, "--host", "127.0.0.1", "--port", str(port)],
        env=full_env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        preexec_fn=term_with_parent if sys.platform.startswith("linux") else None,
    )
    server = Server(f"http://127.0.0.1:{port}", proc, log)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"reward server exited:\n{log.read_text()}")
        try:
            if httpx.get(server.url + "/readyz", timeout=1).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    server.stop()
    raise RuntimeError(f"reward server not ready in 90 s:\n{log.read_text()}")


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """Default settings, plus the hang hook, a CPU budget of 1 s per check and a 2 s wall-clock
    net per answer (``TIMEOUT_S`` and ``WALL_S`` of the tests that use it)."""
    srv = start_server(
        tmp_path_factory.mktemp("rs"),
        {
            "GTPO_RS_DEBUG_HANG_ANSWER": HANG,
            "GTPO_RS_VERIFY_TIMEOUT_S": "1.0",
            "GTPO_RS_VERIFY_WALL_TIMEOUT_S": "2.0",
        },
    )
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def secured_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """Token auth and small limits, configured through GTPO_RS_* and run by the console script."""
    srv = start_server(
        tmp_path_factory.mktemp("rs-secured"),
        {
            "GTPO_RS_API_TOKEN": "s3cret",
            "GTPO_RS_MAX_BODY_BYTES": "4096",
            "GTPO_RS_MAX_BATCH_SIZE": "4",
            "GTPO_RS_STRICT_FORMAT": "true",
            "GTPO_RS_VERIFY_WORKERS": "1",
        },
        script=True,
    )
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def rs_tools() -> object:
    """Helpers for test modules (they cannot import conftest under --import-mode=importlib)."""
    from types import SimpleNamespace

    return SimpleNamespace(
        HANG=HANG, descendants=reliability_harness.descendants, alive=reliability_harness.alive
    )


@pytest.fixture
def harness_servers(tmp_path: Path) -> Iterator[Callable[..., tuple]]:
    """Start servers as the reliability harness does (``start(env)`` -> (process, url)), their
    output in the test's folder; every one killed at the end of the test."""
    started: list[subprocess.Popen[bytes]] = []

    def start(env: dict[str, str] | None = None) -> tuple:
        proc, url = reliability_harness.start_server(env or {}, log=tmp_path / "servers.log")
        started.append(proc)
        return proc, url

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)


@pytest.fixture(scope="session")
def server_starter() -> Callable[..., Server]:
    """``start_server``, for a module's own server (its settings, module scope)."""
    return start_server


@pytest.fixture
def make_server(tmp_path: Path) -> Iterator[Callable[..., Server]]:
    """Start throw-away servers; stopped at the end of the test."""
    started: list[Server] = []

    def make(env: dict[str, str] | None = None) -> Server:
        srv = start_server(tmp_path, env)
        started.append(srv)
        return srv

    yield make
    for srv in started:
        srv.stop(signal.SIGKILL)
