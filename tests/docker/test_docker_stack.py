"""End to end, with a real Docker engine: base image from Debian packages (docker/offline-base.sh),
images built by Compose, `compose --profile demo up` on the host network, the reward server
scored from the host in OpenRLHF's request shape, the quick demo run to completion against it
with its report on a host volume, then `compose down`.

Every container uses the host network and every request goes to 127.0.0.1. The demo image
gets torch from a local CPU wheel served over loopback HTTP when the host has one (PyPI's torch
is a multi-GB CUDA build), else from PyTorch's CPU index. Several minutes: marked slow.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import os
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import memory_gate
import pytest
from documented.runner import COMPOSE_DEMO_GIB

from gtpo.local_reward_server import free_port

REPO = Path(__file__).resolve().parents[2]
FILES = ["-f", str(REPO / "compose.yaml"), "-f", str(REPO / "compose.hostnet.yaml")]
PROJECT = "gtpo-e2e"
PREFIX = "gtpo-e2e"  # image names: gtpo-e2e-reward-server:test, ...
BASE_TAG = "gtpo-e2e-base:bookworm"
REPORT_OWNER = 4321  # a non-root host user; the demo must write the report as this user

pytestmark = [pytest.mark.slow, pytest.mark.docker, pytest.mark.timeout(2400)]


def log(message: str) -> None:
    print(f"[docker e2e {time.strftime('%H:%M:%S')}] {message}", flush=True)


def sh(cmd: list[str], *, timeout: float, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run a long command, its output kept for the failure message."""
    out = subprocess.run(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
        env=env,
        cwd=REPO,
    )
    assert out.returncode == 0, f"{' '.join(cmd)} exited {out.returncode}:\n{out.stdout[-6000:]}"
    return out


def host_ca_bundle() -> str | None:
    """The CA bundle this host's pip verifies TLS with: the image's pip must trust the same CAs
    (a TLS-intercepting proxy's CA lives there)."""
    candidates = [os.environ.get("PIP_CERT"), "/etc/ssl/certs/ca-certificates.crt"]
    return next((c for c in candidates if c and os.path.isfile(c)), None)


def cpu_torch_wheelhouse() -> Path | None:
    """A local folder holding a CPU torch wheel for CPython 3.11 (Debian bookworm's Python)."""
    dirs = [os.environ.get("GTPO_TEST_WHEELHOUSE", "")]
    dirs += os.environ.get("PIP_FIND_LINKS", "").split()
    dirs.append("/opt/wheels")
    for entry in dirs:
        path = Path(entry.removeprefix("file://"))
        if entry and path.is_dir() and any(path.glob("torch-*+cpu-cp311-*.whl")):
            return path
    return None


@pytest.fixture(scope="module")
def wheel_url() -> Iterator[str | None]:
    """The wheelhouse served on 127.0.0.1 (a build on the host network reaches it)."""
    folder = cpu_torch_wheelhouse()
    if folder is None:
        yield None
        return

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # pip asks for the index many times
            pass

    handler = functools.partial(Quiet, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def base_image(docker_engine: None) -> Iterator[str]:
    if os.geteuid() != 0:
        pytest.skip("docker/offline-base.sh needs root (debootstrap, chroot)")
    if not shutil.which("debootstrap"):
        install = subprocess.run(
            ["apt-get", "install", "-y", "debootstrap"], capture_output=True, text=True
        )
        if install.returncode != 0 or not shutil.which("debootstrap"):
            pytest.skip(f"debootstrap missing and not installable: {install.stderr[-500:]}")
    cmd = ["sh", str(REPO / "docker" / "offline-base.sh"), "--tag", BASE_TAG]
    if ca := host_ca_bundle():
        cmd += ["--ca-bundle", ca]
    started = time.monotonic()
    sh(cmd, timeout=1200)
    log(f"base image {BASE_TAG} built in {time.monotonic() - started:.0f} s")
    yield BASE_TAG


def post(url: str, payload: dict) -> dict:
    request = urllib.request.Request(
        url, json.dumps(payload).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def wait_ready(url: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(f"{url}/readyz", timeout=5) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        assert time.monotonic() < deadline, f"{url}/readyz never answered 200"
        time.sleep(1)


def image_size(tag: str) -> str:
    out = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{.Size}}", tag],
        capture_output=True,
        text=True,
    )
    return f"{int(out.stdout) / 1e6:.0f} MB" if out.returncode == 0 else "?"


def test_compose_demo_profile_end_to_end(compose_with_engine, base_image, wheel_url, tmp_path):
    port = free_port()
    out_dir = tmp_path / "report"
    out_dir.mkdir()
    os.chown(out_dir, REPORT_OWNER, REPORT_OWNER)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GTPO_", "COMPOSE_"))}
    env.update(
        COMPOSE_PROJECT_NAME=PROJECT,
        GTPO_IMAGE_PREFIX=PREFIX,
        GTPO_TAG="test",
        GTPO_BASE_IMAGE=base_image,
        GTPO_RS_PORT=str(port),
        GTPO_DEMO_ARGS="--quick",
        GTPO_DEMO_OUT=str(out_dir),
    )
    if wheel_url:
        # Wheelhouse only for torch: the CPU wheel, no download from PyTorch's index.
        env.update(GTPO_PIP_FIND_LINKS=wheel_url, GTPO_TORCH_INDEX_URL="")
    compose = [*compose_with_engine, *FILES, "--profile", "demo"]
    url = f"http://127.0.0.1:{port}"
    demo_memory = contextlib.ExitStack()

    try:
        started = time.monotonic()
        sh([*compose, "build"], timeout=1800, env=env)
        server_image = f"{PREFIX}-reward-server:test"
        sizes = {name: image_size(f"{PREFIX}-{name}:test") for name in ("reward-server", "demo")}
        log(f"images built in {time.monotonic() - started:.0f} s: {sizes}")

        # The image itself: unprivileged, and its own healthcheck probes /healthz.
        config = json.loads(
            sh(
                ["docker", "image", "inspect", "--format", "{{json .Config}}", server_image],
                timeout=60,
            ).stdout
        )
        assert config["User"] == "10001:10001"
        assert "/healthz" in " ".join(config["Healthcheck"]["Test"])
        assert config["Cmd"] == ["gtpo-reward-server"]

        # `up -d` returns once the demo has started, i.e. after the server turned healthy. Its
        # containers hold memory until the demo exits: in the slow stage, beside fit()'s runs.
        demo_memory.enter_context(memory_gate.admitted(COMPOSE_DEMO_GIB, "the Compose demo"))
        sh([*compose, "up", "-d"], timeout=600, env=env)
        wait_ready(url)
        with urllib.request.urlopen(f"{url}/healthz", timeout=5) as response:
            assert response.status == 200

        prompt = "What is 6 * 7? Think, then answer.\n"
        right = "<reasoning>6 * 7 = 42</reasoning>\n<answer>42</answer>"
        wrong = "<reasoning>6 * 7 = 48</reasoning>\n<answer>48</answer>"
        unformatted = "the answer is 42"
        body = post(
            f"{url}/get_reward",
            {
                "query": [prompt + right, prompt + wrong, prompt + unformatted],
                "prompts": [prompt] * 3,
                "labels": ["42"] * 3,
            },
        )
        assert body["extra_logs"]["format_reward"] == [10.0, 10.0, 0.0]
        assert body["extra_logs"]["accuracy_reward"] == [10.0, 0.0, 0.0]
        assert body["rewards"] == [20.0, 10.0, 0.0]

        # The server runs as its unprivileged user and carries no torch.
        server_id = sh([*compose, "exec", "-T", "reward-server", "id", "-u"], timeout=60, env=env)
        assert server_id.stdout.strip() == "10001"
        no_torch = subprocess.run(
            [*compose, "exec", "-T", "reward-server", "python3", "-c", "import torch"],
            capture_output=True,
            text=True,
            env=env,
            cwd=REPO,
        )
        assert no_torch.returncode != 0 and "torch" in no_torch.stderr

        demo_id = sh([*compose, "ps", "-a", "-q", "demo"], timeout=60, env=env).stdout.strip()
        deadline = time.monotonic() + 900
        while True:
            state = json.loads(
                sh(["docker", "inspect", "--format", "{{json .State}}", demo_id], timeout=60).stdout
            )
            if state["Status"] == "exited":
                break
            assert time.monotonic() < deadline, "the demo did not finish in 15 minutes"
            time.sleep(3)
        logs = sh([*compose, "logs", "--no-color", "demo"], timeout=60, env=env).stdout
        demo_memory.close()
        assert state["ExitCode"] == 0, f"demo exited {state['ExitCode']}:\n{logs[-4000:]}"
        log(f"demo finished in {time.monotonic() - started:.0f} s since the build started")

        # The report is on the host, written as the folder's owner, scored by this server.
        summary = out_dir / "summary.md"
        assert summary.is_file() and summary.stat().st_size > 0
        assert summary.stat().st_uid == REPORT_OWNER
        results = json.loads((out_dir / "results.json").read_text())
        assert results["reward_url"] == url
        assert results["reward_requests"] > 0
        assert list(out_dir.glob("*.png"))

        health = sh(
            [
                "docker",
                "inspect",
                "--format",
                "{{.State.Health.Status}}",
                f"{PROJECT}-reward-server-1",
            ],
            timeout=60,
        )
        assert health.stdout.strip() == "healthy"
    finally:
        demo_memory.close()
        down = subprocess.run(
            [*compose, "down", "--volumes", "--remove-orphans", "--timeout", "20"],
            capture_output=True,
            text=True,
            env=env,
            cwd=REPO,
        )
        # Earlier generations of these images, untagged by the rebuild.
        subprocess.run(
            ["docker", "image", "prune", "-f", "--filter", "label=io.gtpo.image"],
            capture_output=True,
        )
    assert down.returncode == 0, down.stderr
    left = subprocess.run(
        ["docker", "ps", "-a", "-q", "--filter", f"label=com.docker.compose.project={PROJECT}"],
        capture_output=True,
        text=True,
    )
    assert left.stdout.strip() == "", "compose down left containers behind"


def test_the_deployment_page_runs_as_written(compose_with_engine, base_image, wheel_url,
                                              tmp_path, capsys):  # fmt: skip
    """docs/deployment.md's commands, as the docs runner runs every page (tests/documented):
    each as written but for the substitution table's Docker rules (the host-network override on
    this bridge-less engine, the offline base image and local torch wheel, the quick demo), its
    GPU profile listed as GPU-only. The stack comes up, the demo writes its report to the
    clone's ./gtpo-demo through the server, `compose down` leaves nothing running."""
    from documented import pages
    from documented.runner import DocsRun, page_session

    assert compose_with_engine  # Compose v2 installed as the `docker compose` plugin
    run = DocsRun(tmp_path, tiny_model=tmp_path / "unused", stage="docker")
    page = "docs/deployment.md"
    env = {"GTPO_BASE_IMAGE": base_image}
    if wheel_url:
        env.update(GTPO_PIP_FIND_LINKS=wheel_url, GTPO_TORCH_INDEX_URL="")
    project = run.workdir.name
    try:
        with capsys.disabled(), page_session(run, page) as session:
            session.context.docker_env = env
            session.context.wheelhouse = cpu_torch_wheelhouse()
            print(f"\n== {page}")
            for block in pages.blocks(pages.ROOT / page):
                session.run_block(block)
    finally:
        subprocess.run(
            ["docker", "compose", "-p", project, "down", "--volumes", "--remove-orphans"],
            capture_output=True, cwd=run.workdir,
        )  # fmt: skip
    ran = {w.split(":")[1] for w in run.by_where if w.startswith(page)}
    assert len(ran) >= 5, ran  # up, the demo twice, down, the offline build
    results = json.loads((run.workdir / "gtpo-demo" / "results.json").read_text())
    assert results["reward_requests"] > 0
    left = subprocess.run(
        ["docker", "ps", "-q", "--filter", f"label=com.docker.compose.project={project}"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert left.stdout.strip() == "", "the page's compose down left containers running"
    print(run.report.markdown())
