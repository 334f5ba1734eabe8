"""Probes of a reward server's connections as a careless client and an attacker use them
(issue 43), over raw sockets to a real ``python -m reward_server`` on 127.0.0.1, with the
memory the server process holds meanwhile (its PSS, sampled):

- ``slowloris``: connections that send their headers a byte a second;
- ``silent``: sockets that connect and never send;
- ``large_headers``: one 8 MB header, and 100,000 headers;
- ``half_sent_bodies``: connections that send 15 MB of a 16 MB body and stop, without the
  token and with it;
- ``unread_answers``: clients that ask for a large answer and never read it;
- ``few_descriptors``: a server allowed 256 file descriptors, 300 silent sockets, then real
  requests;
- ``supervisor_killed``: ``kill -9`` of the uvicorn supervisor of ``--workers 2``, then a
  restart on the same port;
- ``churn``: one client thread sending two pipelined requests and resetting, again and again,
  while another asks ``/healthz`` on a kept-alive connection.

The slow tests (test_rs_probes.py) assert on what these return; benchmarks/
reward_server_probes.py prints them, for this checkout and an older one side by side.
"""

from __future__ import annotations

import json
import os
import resource
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from reliability_harness import (
    alive,
    descendants,
    pss_bytes,
    start_server,
    stop_server,
    term_with_parent,
    wait_ready,
)

from gtpo.local_reward_server import free_port

MB = 1024 * 1024


@dataclass
class Held:
    """What a probe's connections cost: how long the server kept them, and the memory its
    process held above what it held before (peak, and once the probe's connections are gone
    or the server dropped them)."""

    name: str
    connections: int
    open_s: float  # the longest any connection stayed open (inf: still open at the end); for
    # unread answers, from their first byte
    closed: int  # connections the server closed
    peak_mb: float
    after_mb: float
    answers: dict[str, int] = field(default_factory=dict)  # the first status line of each


@contextmanager
def _sampled(pid: int) -> Iterator[Callable[[], tuple[float, float]]]:
    """Sample the server's PSS every 0.2 s; yields a function returning (peak, now) in MB
    above the PSS before the probe."""
    base = pss_bytes(pid)
    peak = [base]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], pss_bytes(pid))
            stop.wait(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield lambda: ((peak[0] - base) / MB, (pss_bytes(pid) - base) / MB)
    finally:
        stop.set()
        sampler.join()


def _address(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    return parts.hostname, parts.port


def _connect(url: str, rcvbuf: int | None = None) -> socket.socket:
    sock = socket.socket()
    if rcvbuf is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.connect(_address(url))
    sock.setblocking(False)
    return sock


def _head(path: str, length: int, token: str | None = None) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: rs", "Content-Type: application/json"]
    if token:
        lines.append(f"Authorization: Bearer {token}")
    lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _closed(sock: socket.socket, seen: dict[int, bytes]) -> bool:
    """Read what is there; True once the server closed (what it sent kept in ``seen``)."""
    key = sock.fileno()
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return True
            seen[key] = seen.get(key, b"") + chunk
    except BlockingIOError:
        return False
    except OSError:
        return True


_TCP_ESTABLISHED = 1  # tcp_info's first byte, the connection's state (linux/tcp.h)


def _dropped(sock: socket.socket, seen: dict[int, bytes]) -> bool:
    """Whether the server closed or reset the connection, read from the kernel's TCP state,
    without reading what it sent (a client that never reads its answer)."""
    try:
        state = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0]
    except OSError:
        return True
    if state == _TCP_ESTABLISHED:
        return False
    try:
        seen[sock.fileno()] = sock.recv(256)  # its status line, if it came
    except OSError:
        seen[sock.fileno()] = b""
    return True


def _answer_started(sock: socket.socket) -> bool:
    """Whether the server's answer has begun to arrive, peeked at, nothing read."""
    try:
        return bool(sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
    except OSError:  # nothing yet (BlockingIOError), or reset: its end, which `closed` reports
        return False


def _first_lines(seen: dict[int, bytes]) -> dict[str, int]:
    lines: dict[str, int] = {}
    for data in seen.values():
        line = data.split(b"\r\n", 1)[0].decode(errors="replace") or "(nothing)"
        lines[line] = lines.get(line, 0) + 1
    return lines


def _watch(
    name: str,
    socks: list[socket.socket],
    pid: int,
    seconds: float,
    memory: Callable[[], tuple[float, float]],
    each_second: Callable[[socket.socket], None] = lambda s: None,
    closed: Callable[[socket.socket, dict[int, bytes]], bool] = _closed,
    from_first_byte: bool = False,
) -> Held:
    """Until every socket is closed by the server (``closed``) or ``seconds`` pass: call
    ``each_second`` on each open one every second; then close all of them and report.

    A connection's time open counts from now, or, with ``from_first_byte``, from the first
    byte of its answer (seen without reading it): a send deadline starts when the answer
    does, after its verdict was computed, which a busy machine takes seconds over."""
    start = time.monotonic()
    open_ = set(range(len(socks)))
    began: dict[int, float] = {}
    closed_at: dict[int, float] = {}
    seen: dict[int, bytes] = {}
    last_tick = 0.0
    while open_ and time.monotonic() - start < seconds:
        for i in list(open_):
            if from_first_byte and i not in began and _answer_started(socks[i]):
                began[i] = time.monotonic()
            if closed(socks[i], seen):
                open_.discard(i)
                closed_at[i] = time.monotonic() - began.get(i, start)
        if time.monotonic() - last_tick >= 1.0:
            last_tick = time.monotonic()
            for i in open_:
                with suppress(OSError):
                    each_second(socks[i])
        time.sleep(0.05)
    peak, _ = memory()
    for s in socks:
        s.close()
    time.sleep(1.0)
    _, after = memory()
    longest = float("inf") if open_ else max(closed_at.values(), default=0.0)
    return Held(name, len(socks), longest, len(closed_at), peak, after, _first_lines(seen))


def slowloris(url: str, pid: int, n: int = 200, seconds: float = 60.0) -> Held:
    """``n`` connections each sending a request line, then a header a byte a second."""
    with _sampled(pid) as memory:
        socks = [_connect(url) for _ in range(n)]
        for s in socks:
            s.send(b"POST /get_reward HTTP/1.1\r\nHost: rs\r\nX-Slow: ")
        return _watch("slowloris", socks, pid, seconds, memory, lambda s: s.send(b"x"))


def silent(url: str, pid: int, n: int = 500, seconds: float = 90.0) -> Held:
    with _sampled(pid) as memory:
        socks = [_connect(url) for _ in range(n)]
        return _watch("silent sockets", socks, pid, seconds, memory)


def _flood(sock: socket.socket, head: bytes, piece: bytes, total: int, seconds: float) -> None:
    """Send ``head`` then ``piece`` until ``total`` bytes, the server closes, or ``seconds``."""
    sock.setblocking(True)
    sock.settimeout(seconds)
    try:
        sock.sendall(head)
        sent = 0
        while sent < total:
            _, writable, _ = select.select([], [sock], [], seconds)
            if not writable:
                return
            sent += sock.send(piece)
    except OSError:
        pass
    finally:
        sock.setblocking(False)


def large_headers(url: str, pid: int, seconds: float = 30.0) -> list[Held]:
    """One 8 MB header; 100,000 headers (each in its own connection)."""
    out = []
    for name, head, piece, total in (
        ("one 8 MB header", b"POST /get_reward HTTP/1.1\r\nX-Big: ", b"a" * 65536, 8 * MB),
        ("100,000 headers", b"POST /get_reward HTTP/1.1\r\n", b"X-A: b\r\n" * 8192, 800_000),
    ):
        with _sampled(pid) as memory:
            sock = _connect(url)
            flooding = threading.Thread(target=_flood, args=(sock, head, piece, total, seconds))
            flooding.start()
            held = _watch(name, [sock], pid, seconds, memory)
            flooding.join()
            out.append(held)
    return out


def half_sent_bodies(
    url: str,
    pid: int,
    token: str | None,
    n: int = 24,
    body_mb: int = 15,
    seconds: float = 60.0,
) -> Held:
    """``n`` connections each sending ``body_mb`` MB of a 16 MB body, then nothing."""
    with _sampled(pid) as memory:
        socks = [_connect(url) for _ in range(n)]
        threads = [
            threading.Thread(
                target=_flood,
                args=(s, _head("/get_reward", 16 * MB, token), b"x" * 65536, body_mb * MB, 20.0),
            )
            for s in socks
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        name = f"half-sent bodies, {'with' if token else 'without'} the token"
        return _watch(name, socks, pid, seconds, memory)


def unread_answers(
    url: str, pid: int, token: str | None = None, n: int = 10, seconds: float = 60.0
) -> Held:
    """``n`` clients each asking /v1/score for an answer of about 8 MB (a 4 MB response,
    echoed), reading none of it."""
    response = "<reasoning>r</reasoning><answer>" + "9" * (4 * MB) + "</answer>"
    body = json.dumps({"query": [response], "labels": ["9"]}).encode()
    with _sampled(pid) as memory:
        socks = [_connect(url, rcvbuf=4096) for _ in range(n)]
        for sock in socks:
            sock.setblocking(True)
            sock.sendall(_head("/v1/score", len(body), token) + body)
            sock.setblocking(False)
        return _watch(
            "unread answers", socks, pid, seconds, memory, closed=_dropped, from_first_byte=True
        )


@dataclass
class Descriptors:
    silent: int
    requests: int
    answered: int  # of the real requests, answered 200
    failures: dict[str, int] = field(default_factory=dict)


def few_descriptors(env: dict[str, str], silent_sockets: int = 300, requests: int = 20,
                    cwd: Path | None = None) -> Descriptors:  # fmt: skip
    """A server allowed 256 file descriptors (soft and hard), ``silent_sockets`` sockets that
    never send, then ``requests`` real requests, each on its own connection."""
    import httpx

    def limited() -> None:
        term_with_parent()
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))

    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "reward_server", "--host", "127.0.0.1", "--port", str(port)],
        env={**os.environ, "GTPO_RS_LOG_LEVEL": "warning", **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=limited,
        cwd=cwd,
    )
    url = f"http://127.0.0.1:{port}"
    report = Descriptors(silent_sockets, requests, 0)
    socks: list[socket.socket] = []
    try:
        wait_ready(url, proc)
        socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(silent_sockets)]
        time.sleep(1.0)
        body = {"query": ["<reasoning>r</reasoning><answer>4</answer>"], "labels": ["4"]}
        for _ in range(requests):
            try:
                r = httpx.post(url + "/get_reward", json=body, timeout=10)
                report.answered += r.status_code == 200
                if r.status_code != 200:
                    key = f"HTTP {r.status_code}"
                    report.failures[key] = report.failures.get(key, 0) + 1
            except httpx.HTTPError as exc:
                key = type(exc).__name__
                report.failures[key] = report.failures.get(key, 0) + 1
    finally:
        for s in socks:
            s.close()
        stop_server(proc)
    return report


@dataclass
class Restart:
    workers: int  # uvicorn worker processes before the kill
    workers_left: int  # of them still alive 20 s after the kill
    port_free_s: float  # from the supervisor's SIGKILL until the port could be bound (inf: never)
    restarted: bool  # a new server on the same port became ready


def supervisor_killed(
    env: dict[str, str], cwd: Path | None = None, wait_s: float = 30.0
) -> Restart:
    """``--workers 2``: SIGKILL the supervisor; wait until its port can be bound again (or
    ``wait_s`` pass), then start a server on it. Every process left of the first server is
    killed at the end."""
    port = free_port()
    env = {**env, "GTPO_RS_WORKERS": "2", "GTPO_RS_VERIFY_WORKERS": "1"}
    proc, _ = start_server(env, port=port, cwd=cwd)
    workers = _uvicorn_workers(proc.pid)
    everything = descendants(proc.pid)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    killed_at = time.monotonic()
    free = float("inf")
    while time.monotonic() - killed_at < wait_s:
        with socket.socket() as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                time.sleep(0.05)
                continue
        free = time.monotonic() - killed_at
        break
    while any(alive(p) for p in workers) and time.monotonic() - killed_at < 20.0:
        time.sleep(0.1)
    left = sum(alive(p) for p in workers)
    restarted = False
    if free < wait_s:
        try:
            again, _ = start_server(env, port=port, cwd=cwd)
            restarted = True
            stop_server(again)
        except RuntimeError:
            pass
    for pid in everything:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
    return Restart(len(workers), left, free, restarted)


def _uvicorn_workers(supervisor: int) -> list[int]:
    """The supervisor's children that uvicorn spawned to serve (``spawn_main``)."""
    children = []
    for task in Path(f"/proc/{supervisor}/task").glob("*"):
        children += [int(c) for c in (task / "children").read_text().split()]
    return [c for c in children if b"spawn_main" in Path(f"/proc/{c}/cmdline").read_bytes()]


@dataclass
class Churned:
    connections: int  # the churning client's connections
    healthz: list[float]  # seconds of each /healthz meanwhile
    quiet: list[float]  # seconds of each /healthz in the second before, without the churn
    tracebacks: int  # in the server's log, during the churn
    log_lines: int  # written to the server's log during the churn

    def p(self, q: float, quiet: bool = False) -> float:
        ordered = sorted(self.quiet if quiet else self.healthz)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def churn(url: str, log: Path, seconds: float = 5.0) -> Churned:
    """Two pipelined ``/get_reward`` requests, then a reset (SO_LINGER 0: an RST, not a FIN),
    on a new connection each time, from one thread for ``seconds``; meanwhile ``/healthz`` on
    one kept-alive connection every 50 ms. What the server logged meanwhile is read from
    ``log``."""
    import httpx

    body = json.dumps({"query": ["<answer>4</answer>"], "labels": ["4"]}).encode()
    request = _head("/get_reward", len(body)) + body
    linger = (1).to_bytes(4, "little") + (0).to_bytes(4, "little")  # struct linger {1, 0}
    before = log.read_bytes() if log.exists() else b""
    stop = threading.Event()
    count = [0]

    def churning() -> None:
        while not stop.is_set():
            sock = socket.socket()
            try:
                sock.connect(_address(url))
                sock.sendall(request * 2)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
            except OSError:
                pass
            finally:
                sock.close()
            count[0] += 1

    def timed(http: httpx.Client, until: float, into: list[float]) -> None:
        while time.monotonic() < until:
            started = time.perf_counter()
            http.get("/healthz").raise_for_status()
            into.append(time.perf_counter() - started)
            time.sleep(0.05)

    quiet: list[float] = []
    with httpx.Client(base_url=url, timeout=30) as http:
        timed(http, time.monotonic() + 1.0, quiet)
    client = threading.Thread(target=churning, daemon=True)
    client.start()
    healthz: list[float] = []
    try:
        with httpx.Client(base_url=url, timeout=30) as http:
            timed(http, time.monotonic() + seconds, healthz)
    finally:
        stop.set()
        client.join()
    time.sleep(1.0)  # what the last connections made the server log
    during = log.read_bytes()[len(before) :].decode(errors="replace")
    return Churned(count[0], healthz, quiet, during.count("Traceback"), len(during.splitlines()))


def large_bodies(url: str, pid: int, n: int = 8, rounds: int = 2) -> Held:
    """``n`` concurrent requests of 15 MB (1,000 responses of 15,000 characters each), ``rounds``
    times; the server's memory at the peak and 3 s after the last answer."""
    import httpx

    response = "<reasoning>r</reasoning><answer>" + "7" * 15_000 + "</answer>"
    body = json.dumps({"query": [response] * 1000, "labels": ["7"] * 1000}).encode()
    answers: dict[str, int] = {}

    def send() -> None:
        reply = httpx.post(
            url + "/get_reward", content=body, timeout=120,
            headers={"Content-Type": "application/json"},
        )  # fmt: skip
        answers[str(reply.status_code)] = answers.get(str(reply.status_code), 0) + 1

    with _sampled(pid) as memory:
        started = time.monotonic()
        for _ in range(rounds):
            senders = [threading.Thread(target=send) for _ in range(n)]
            for sender in senders:
                sender.start()
            for sender in senders:
                sender.join()
        seconds = time.monotonic() - started
        time.sleep(3.0)
        peak, after = memory()
    return Held("large bodies", n * rounds, seconds, 0, peak, after, answers)
