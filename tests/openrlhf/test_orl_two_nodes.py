"""Two nodes on one machine: two network namespaces joined by a veth pair on a private /24.

The head namespace runs the Ray head and the reward server, started with the environment
compose.hostnet.yaml gives it under docs/deployment.md's multi-node settings; the worker
namespace runs a Ray worker. A Ray task placed on the worker node posts to the reward server
at the head's address, as a rollout actor on a second node does; the same request to the
loopback URL fails there, which is why `gtpo-openrlhf` refuses a loopback `--reward.remote_url`
when the policy spans several nodes.

Every address lives inside the two namespaces the test creates; nothing is routed out of them,
and the namespaces (with the veth pair and every process inside) are removed even when the test
fails. Needs root and iproute2; slow stage.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
IFACE = "gtpo0"  # both ends carry this name inside their namespace


@dataclass
class Net:
    head: str
    worker: str
    head_ip: str
    worker_ip: str


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=30)


def _in(namespace: str, *cmd: str) -> list[str]:
    return ["ip", "netns", "exec", namespace, *cmd]


@contextlib.contextmanager
def two_namespaces() -> Iterator[Net]:
    """Namespaces `gtpo-h<n>` and `gtpo-w<n>`, each with loopback up and one end of a veth pair
    named IFACE at 10.<a>.<b>.1/24 and .2/24; no route leaves them. Removed on exit with every
    process inside them."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("network namespaces need root and iproute2")
    tag = f"{os.getpid() % 100000}"
    net = Net(
        f"gtpo-h{tag}", f"gtpo-w{tag}",
        f"10.{200 + os.getpid() % 50}.{os.getpid() % 250}.1",
        f"10.{200 + os.getpid() % 50}.{os.getpid() % 250}.2",
    )  # fmt: skip
    head_end, worker_end = f"gh{tag}", f"gw{tag}"
    try:
        _ip("netns", "add", net.head)
        _ip("netns", "add", net.worker)
        _ip("link", "add", head_end, "type", "veth", "peer", "name", worker_end)
        for namespace, end, address in (
            (net.head, head_end, net.head_ip),
            (net.worker, worker_end, net.worker_ip),
        ):
            _ip("link", "set", end, "netns", namespace)
            _ip("-n", namespace, "link", "set", "lo", "up")
            _ip("-n", namespace, "link", "set", end, "name", IFACE)
            _ip("-n", namespace, "addr", "add", f"{address}/24", "dev", IFACE)
            _ip("-n", namespace, "link", "set", IFACE, "up")
        yield net
    finally:
        for namespace in (net.head, net.worker):
            _kill_namespace_processes(namespace)
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True, timeout=30)
        # A veth end never moved into a namespace (a failure half-way) is still here.
        subprocess.run(["ip", "link", "del", head_end], capture_output=True, timeout=30)


def _kill_namespace_processes(namespace: str) -> None:
    """SIGKILL exactly the processes inside `namespace` (`ip netns pids`), nothing else."""
    for _ in range(5):
        listed = subprocess.run(
            ["ip", "netns", "pids", namespace], capture_output=True, text=True, timeout=30
        )
        pids = [int(p) for p in listed.stdout.split()]
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.5)


def _environment(**extra: str) -> dict[str, str]:
    # Not tests/openrlhf/conftest.py's RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0: with it Ray refuses a
    # second node, and each node's address is given with --node-ip-address here anyway.
    inherited = {k: v for k, v in os.environ.items() if k != "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"}
    return {**inherited, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", **extra}


def _start(namespace: str, cmd: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen:
    sink = log.open("w")
    return subprocess.Popen(
        _in(namespace, *cmd), env=env, stdout=sink, stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip


def _wait_http(namespace: str, url: str, timeout: float, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        probe = subprocess.run(
            _in(namespace, sys.executable, "-c",
                f"import urllib.request; urllib.request.urlopen({url!r}, timeout=2)"),
            capture_output=True, timeout=30,
        )  # fmt: skip
        if probe.returncode == 0:
            return
        time.sleep(1)
    raise AssertionError(
        f"{url} did not answer in {timeout:.0f} s; log:\n{log.read_text()[-3000:]}"
    )


POST_FROM_WORKER = """
import json, sys, urllib.request
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

ray.init(address=sys.argv[1], log_to_driver=False)
deadline = __import__("time").monotonic() + 120
while len([n for n in ray.nodes() if n["Alive"]]) < 2:
    assert __import__("time").monotonic() < deadline, ray.nodes()
    __import__("time").sleep(1)
worker = [n for n in ray.nodes() if n["Alive"] and n["NodeManagerAddress"] == sys.argv[2]][0]

@ray.remote(num_cpus=0)
def post(url):
    import socket
    body = json.dumps({"query": ["Q: 1+1?<reasoning>2</reasoning><answer>2</answer>"],
                       "prompts": ["Q: 1+1?"], "labels": ["2"]}).encode()
    request = urllib.request.Request(url, body, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return socket.gethostbyname(socket.gethostname()), json.load(response)
    except OSError as exc:
        return None, repr(exc)

on_worker = NodeAffinitySchedulingStrategy(node_id=worker["NodeID"], soft=False)
results = {url: ray.get(post.options(scheduling_strategy=on_worker).remote(url))
           for url in sys.argv[3:]}
print(json.dumps({"nodes": sorted(n["NodeManagerAddress"] for n in ray.nodes() if n["Alive"]),
                  "results": results}))
"""


def test_a_second_node_reaches_the_reward_server_as_documented(tmp_path):
    from compose_render import HOSTNET, MULTI_NODE, render

    server_env = render(HOSTNET, MULTI_NODE)["reward-server"]["environment"]
    with two_namespaces() as net:
        port = server_env["GTPO_RS_PORT"]
        server_log = tmp_path / "reward-server.log"
        _start(
            net.head, ["gtpo-reward-server"], server_log,
            _environment(**{
                **{k: str(v) for k, v in server_env.items() if v is not None},
                "GTPO_RS_WORKERS": "1", "GTPO_RS_VERIFY_WORKERS": "1",
            }),
        )  # fmt: skip
        head_url = f"http://{net.head_ip}:{port}"
        _wait_http(net.head, f"{head_url}/readyz", 120, server_log)
        # The worker namespace reaches it over the veth pair, as another host would.
        _wait_http(net.worker, f"{head_url}/readyz", 10, server_log)

        ray_env = _environment(RAY_USAGE_STATS_ENABLED="0")
        # Short: Ray's Unix sockets live under it, and their paths must fit in 107 bytes.
        ray_tmp = tempfile.mkdtemp(prefix="gtpo-ray-", dir="/tmp")
        common = ["--num-cpus", "1", "--num-gpus", "1", "--object-store-memory", "100000000",
                  "--block"]  # fmt: skip
        _start(
            net.head,
            ["ray", "start", "--head", "--node-ip-address", net.head_ip, "--port", "6379",
             "--include-dashboard", "false", "--temp-dir", ray_tmp, *common],
            tmp_path / "ray-head.log", ray_env,
        )  # fmt: skip
        time.sleep(10)
        _start(
            net.worker,
            ["ray", "start", "--address", f"{net.head_ip}:6379", "--node-ip-address",
             net.worker_ip, *common],
            tmp_path / "ray-worker.log", ray_env,
        )  # fmt: skip
        driver = subprocess.run(
            _in(net.head, sys.executable, "-c", POST_FROM_WORKER, f"{net.head_ip}:6379",
                net.worker_ip, f"{head_url}/get_reward", f"http://127.0.0.1:{port}/get_reward"),
            env=ray_env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        logs = "".join(
            f"\n--- {p.name}\n{p.read_text()[-2000:]}" for p in sorted(tmp_path.glob("*.log"))
        )
        assert driver.returncode == 0, driver.stderr[-3000:] + logs
        report = json.loads(driver.stdout.strip().splitlines()[-1])
    shutil.rmtree(ray_tmp, ignore_errors=True)
    assert report["nodes"] == sorted([net.head_ip, net.worker_ip])
    where, answer = report["results"][f"{head_url}/get_reward"]
    assert answer["rewards"] == [20.0], answer  # format 10 + accuracy 10, from the other node
    # The loopback URL, from the worker node: its own loopback, where nothing listens.
    where, error = report["results"][f"http://127.0.0.1:{port}/get_reward"]
    assert where is None and "Connection refused" in error, error
