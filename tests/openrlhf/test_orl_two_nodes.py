"""Two nodes on one machine: two network namespaces joined by a veth pair on a private /24.

The head namespace runs the Ray head and the reward server, started with the environment
compose.hostnet.yaml gives it under docs/deployment.md's multi-node settings; the worker
namespace runs a Ray worker. A Ray task placed on the worker node posts to the reward server
at the head's address, as a rollout actor on a second node does; the same request to the
loopback URL fails there, which is why `gtpo-openrlhf` refuses a loopback `--reward.remote_url`
when the policy spans several nodes. Then `gtpo-openrlhf` trains across both nodes, submitted
as docs/training-openrlhf.md's steps submit it: `ray job submit` to the head's job server, the
W&B key exported on the head before `ray start --head`.

Every address lives inside the two namespaces the test creates; nothing is routed out of them,
and the namespaces (with the veth pair and every process inside) are removed even when the test
fails. Needs root and iproute2; slow stage.
"""

from __future__ import annotations

import contextlib
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
from namespaces import IFACE, Net, in_namespace, kill_namespace_processes, two_namespaces

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent


def _environment(**extra: str) -> dict[str, str]:
    # Not tests/openrlhf/conftest.py's RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0: with it Ray refuses a
    # second node, and each node's address is given with --node-ip-address here anyway.
    inherited = {k: v for k, v in os.environ.items() if k != "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"}
    return {**inherited, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", **extra}


def _start(namespace: str, cmd: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen:
    sink = log.open("w")
    return subprocess.Popen(
        in_namespace(namespace, *cmd), env=env, stdout=sink, stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip


def _wait_http(namespace: str, url: str, timeout: float, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        probe = subprocess.run(
            in_namespace(namespace, sys.executable, "-c",
                f"import urllib.request; urllib.request.urlopen({url!r}, timeout=2)"),
            capture_output=True, timeout=30,
        )  # fmt: skip
        if probe.returncode == 0:
            return
        time.sleep(1)
    raise AssertionError(
        f"{url} did not answer in {timeout:.0f} s; log:\n{log.read_text()[-3000:]}"
    )


DASHBOARD_PORT = 8265  # Ray's default: where `ray job submit --address` finds the job server


@contextlib.contextmanager
def ray_cluster(
    net: Net, env: dict[str, str], logs: Path, cpus: int, gpus: int,
    dashboard: bool = False, head_only: dict[str, str] | None = None,
) -> Iterator[str]:  # fmt: skip
    """`ray start --head` in the head namespace and `ray start --address` in the worker's, each
    with `gpus` logical GPUs; yields the head's address once both nodes are up. `dashboard`:
    the head serves Ray's dashboard and job server on its address; `head_only`: variables only
    the head's `ray start` is given (what the documented steps export on the head)."""
    # Short: Ray's Unix sockets live under it, and their paths must fit in 107 bytes.
    ray_tmp = tempfile.mkdtemp(prefix="gtpo-ray-", dir="/tmp")
    common = ["--num-cpus", str(cpus), "--num-gpus", str(gpus), "--object-store-memory",
              "200000000", "--block"]  # fmt: skip
    address = f"{net.head_ip}:6379"
    try:
        served = (
            ["--include-dashboard", "true", "--dashboard-host", net.head_ip,
             "--dashboard-port", str(DASHBOARD_PORT)]
            if dashboard else ["--include-dashboard", "false"]
        )  # fmt: skip
        _start(
            net.head,
            ["ray", "start", "--head", "--node-ip-address", net.head_ip, "--port", "6379",
             *served, "--temp-dir", ray_tmp, *common],
            logs / "ray-head.log", {**env, **(head_only or {})},
        )  # fmt: skip
        time.sleep(10)
        _start(
            net.worker,
            ["ray", "start", "--address", address, "--node-ip-address", net.worker_ip, *common],
            logs / "ray-worker.log", env,
        )  # fmt: skip
        waited = subprocess.run(
            in_namespace(net.head, sys.executable, "-c", WAIT_FOR_TWO_NODES, address),
            env=env, capture_output=True, text=True, timeout=180,
        )  # fmt: skip
        assert waited.returncode == 0, waited.stderr[-2000:] + _logs(logs)
        yield address
    finally:
        for namespace in (net.head, net.worker):
            kill_namespace_processes(namespace)
        shutil.rmtree(ray_tmp, ignore_errors=True)


def _logs(folder: Path) -> str:
    return "".join(f"\n--- {p.name}\n{p.read_text()[-2000:]}" for p in sorted(folder.glob("*.log")))


WAIT_FOR_TWO_NODES = """
import sys, time
import ray

ray.init(address=sys.argv[1], log_to_driver=False)
deadline = time.monotonic() + 150
while len([n for n in ray.nodes() if n["Alive"]]) < 2:
    assert time.monotonic() < deadline, ray.nodes()
    time.sleep(1)
"""

POST_FROM_WORKER = """
import json, sys, urllib.request
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

ray.init(address=sys.argv[1], log_to_driver=False)
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
        with ray_cluster(net, ray_env, tmp_path, cpus=1, gpus=1) as address:
            driver = subprocess.run(
                in_namespace(net.head, sys.executable, "-c", POST_FROM_WORKER, address,
                             net.worker_ip, f"{head_url}/get_reward",
                             f"http://127.0.0.1:{port}/get_reward"),
                env=ray_env, capture_output=True, text=True, timeout=300,
            )  # fmt: skip
        assert driver.returncode == 0, driver.stderr[-3000:] + _logs(tmp_path)
        report = json.loads(driver.stdout.strip().splitlines()[-1])
    assert report["nodes"] == sorted([net.head_ip, net.worker_ip])
    where, answer = report["results"][f"{head_url}/get_reward"]
    assert answer["rewards"] == [20.0], answer  # format 10 + accuracy 10, from the other node
    # The loopback URL, from the worker node: its own loopback, where nothing listens.
    where, error = report["results"][f"http://127.0.0.1:{port}/get_reward"]
    assert where is None and "Connection refused" in error, error


def _fit_environment(capture: Path) -> dict[str, str]:
    """fit_harness.run_fit's environment for the driver and, through `ray start`, every Ray
    worker of both nodes; collectives go over the veth pair, not loopback."""
    import fit_harness

    worker = {k: v for k, v in fit_harness.WORKER_ENV.items() if k in FIT_WORKER_ENV}
    paths = [fit_harness.FIT_SITE, fit_harness.STANDINS, fit_harness.HF_ENGINE]
    return _environment(
        **worker,
        GLOO_SOCKET_IFNAME=IFACE,
        PYTHONPATH=os.pathsep.join(map(str, paths)),
        GTPO_TEST_CAPTURE_DIR=str(capture),
        GTPO_TEST_FLOAT32="1" if fit_harness.float32_on_cpu.wanted() else "0",
        PYTHONUNBUFFERED="1",
        RAY_USAGE_STATS_ENABLED="0",
    )


# fit_harness.WORKER_ENV without its loopback settings (GLOO_SOCKET_IFNAME=lo and Ray's
# single-node switch).
FIT_WORKER_ENV = ("DS_ACCELERATOR", "TOKENIZERS_PARALLELISM", "OMP_NUM_THREADS")


# Every actor the cluster has run, dead ones included, from the GCS's actor table (the log
# prefixes cannot tell: both nodes share one filesystem, so both log monitors read every log).
ACTOR_NODES = """
import json, sys
import ray
from ray._private.state import actors

ray.init(address=sys.argv[1], log_to_driver=False)
rows = [[a, v["ActorClassName"], v["Address"]["IPAddress"]] for a, v in actors().items()]
print(json.dumps(rows))
"""


def _actor_nodes(net: Net, address: str, env: dict[str, str]) -> dict[str, tuple[str, str]]:
    """actor id -> (class name, node address) of every actor the cluster has run."""
    listed = subprocess.run(
        in_namespace(net.head, sys.executable, "-c", ACTOR_NODES, address),
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr[-2000:]
    rows = json.loads(listed.stdout.strip().splitlines()[-1])
    return {actor: (name, ip) for actor, name, ip in rows}


def _nodes_of(actor: str, placed: dict[str, tuple[str, str]]) -> set[str]:
    return {ip for name, ip in placed.values() if name.endswith(actor)}


WANDB_KEY = "wandb-key-only-the-head-has"


def test_gtpo_openrlhf_trains_across_two_nodes(fixture_files, tmp_path):
    """The documented steps on two nodes of one logical GPU each: `ray job submit` from the
    worker node to the head's job server, the head given the W&B key before `ray start --head`.
    Policy ranks and colocated vLLM engines (the stand-in) on both nodes, the reward server on
    the head. (The page's own block runs in two namespaces in the docs run, tests/documented,
    its `ray job submit` as a dry run: this covers it; a resume runs on one node there and in
    test_orl_async.)"""
    import fit_harness

    fixture = fixture_files  # one filesystem: both nodes read the session's toy fixture
    with two_namespaces() as net:
        server_log = tmp_path / "reward-server.log"
        _start(
            net.head, ["gtpo-reward-server", "--host", "0.0.0.0", "--port", "8000"], server_log,
            _environment(GTPO_RS_WORKERS="1", GTPO_RS_VERIFY_WORKERS="1"),
        )  # fmt: skip
        head_url = f"http://{net.head_ip}:8000"
        _wait_http(net.head, f"{head_url}/readyz", 120, server_log)
        env = _fit_environment(tmp_path / "capture")
        env.pop("WANDB_API_KEY", None)  # the submitting shell has none: only the head has it
        (tmp_path / "capture").mkdir()
        shared = tmp_path / "shared"  # one filesystem: storage both nodes read

        def submit(argv: list[str], log: Path) -> str:
            """`ray job submit … -- gtpo-openrlhf ARGV` from the worker node, as documented: the
            job's driver runs on the head, in the environment `ray start --head` was given."""
            done = subprocess.run(
                in_namespace(net.worker, "ray", "job", "submit", "--address",
                    f"http://{net.head_ip}:{DASHBOARD_PORT}", "--", "gtpo-openrlhf", *argv),
                env=env, capture_output=True, text=True, timeout=600,
            )  # fmt: skip
            output = done.stdout + done.stderr
            log.write_text(output)
            assert done.returncode == 0, output[-4000:] + _logs(tmp_path)
            return output

        def arguments(name: str, extra: dict[str, str], switches: list[str]) -> list[str]:
            argv = fit_harness.with_flags(
                fit_harness.base_argv(fixture, head_url, shared / name),
                {
                    "--actor.num_nodes": "2", "--actor.num_gpus_per_node": "1",
                    "--vllm.num_engines": "2", "--rollout.micro_batch_size": "4",
                    "--train.micro_batch_size": "8", "--gtpo.h_ini_prompts": "2", **extra,
                },
            )  # fmt: skip
            return [*argv, "--train.colocate_all", "--vllm.enable_sleep", "--ds.enable_sleep",
                    *switches]  # fmt: skip

        def run(name: str, extra: dict[str, str], switches: list[str]) -> tuple[str, dict]:
            """The run's log, and the node of each actor it started."""
            before = _actor_nodes(net, address, env)
            log = submit(arguments(name, extra, switches), tmp_path / f"{name}.log")
            after = _actor_nodes(net, address, env)
            return log, {k: v for k, v in after.items() if k not in before}

        with ray_cluster(
            net, env, tmp_path, cpus=4, gpus=1, dashboard=True,
            head_only={"WANDB_API_KEY": WANDB_KEY},
        ) as address:  # fmt: skip
            # A W&B run named on the command line takes the key the head was given.
            wandb = submit(
                ["--dry-run", *arguments("wandb", {}, []), "--logger.wandb.run_name", "two"],
                tmp_path / "wandb-dry-run.log",
            )  # fmt: skip
            gtpo, gtpo_actors = run("gtpo", {}, [])
    assert "W&B           on, run 'two'" in wandb and WANDB_KEY not in wandb
    both = {net.head_ip, net.worker_ip}
    for actor in ("PolicyModelActor", "RolloutActor"):
        assert _nodes_of(actor, gtpo_actors) == both, (actor, gtpo_actors)
    assert "Global step 3" in gtpo
    assert (shared / "gtpo" / "final").exists()
