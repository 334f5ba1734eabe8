"""Several hosts on one machine: network namespaces joined by a veth pair on a private /24.

Every address lives inside the two namespaces; nothing is routed out of them, and the
namespaces (with the veth pair and every process inside) are removed on exit, also when the
caller fails. Needs root and iproute2. Used by tests/openrlhf/test_orl_two_nodes.py and the
docs runner's multi-node blocks (tests/documented).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

IFACE = "gtpo0"  # both ends carry this name inside their namespace


@dataclass
class Net:
    head: str
    worker: str
    head_ip: str
    worker_ip: str

    def wrap(self, node: str) -> list[str]:
        """The prefix that runs a command on `node` ("head" or "worker")."""
        return in_namespace(self.head if node == "head" else self.worker)


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=30)


def in_namespace(namespace: str, *cmd: str) -> list[str]:
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
            kill_namespace_processes(namespace)
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True, timeout=30)
        # A veth end never moved into a namespace (a failure half-way) is still here.
        subprocess.run(["ip", "link", "del", head_end], capture_output=True, timeout=30)


def kill_namespace_processes(namespace: str) -> None:
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
