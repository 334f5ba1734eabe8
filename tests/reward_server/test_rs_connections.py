"""Connection limits of a real server on 127.0.0.1 (reward_server/service/connections.py and the
body limit's memory bounds), driven over raw sockets: what a slow, silent or careless client and an
attacker do. The server runs with short deadlines so that each test takes seconds; the reliability
suite measures the same probes at the default settings, with the memory held."""

from __future__ import annotations

import contextlib
import json
import re
import select
import socket
import threading
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import pytest

TOKEN = "s3cret"
HEADER_S, BODY_S, SEND_S = 2.0, 2.0, 1.0
MAX_CONNECTIONS = 32
PENDING = 8 * 1024 * 1024
# The server must act within its deadline plus this (a busy machine delays its event loop).
MARGIN_S = 3.0
R = "<reasoning>r</reasoning>"


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory, server_starter) -> Iterator:
    srv = server_starter(
        tmp_path_factory.mktemp("rs-limits"),
        {
            "GTPO_RS_API_TOKEN": TOKEN,
            "GTPO_RS_VERIFY_WORKERS": "1",
            "GTPO_RS_HEADER_TIMEOUT_S": str(HEADER_S),
            "GTPO_RS_BODY_TIMEOUT_S": str(BODY_S),
            "GTPO_RS_SEND_TIMEOUT_S": str(SEND_S),
            "GTPO_RS_MAX_CONNECTIONS": str(MAX_CONNECTIONS),
            "GTPO_RS_MAX_PENDING_BODY_BYTES": str(PENDING),
        },
    )
    yield srv
    srv.stop()


def _connect(url: str, rcvbuf: int | None = None) -> socket.socket:
    parts = urlsplit(url)
    sock = socket.socket()
    if rcvbuf is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.connect((parts.hostname, parts.port))
    return sock


def _head(path: str, length: int | None = None, token: bool = True, extra: bytes = b"") -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: rs", "Content-Type: application/json"]
    if token:
        lines.append(f"Authorization: Bearer {TOKEN}")
    if length is not None:
        lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n").encode() + extra


def _answer(sock: socket.socket, timeout: float, until: bytes = b"") -> tuple[bytes, float]:
    """Everything the server sends until it closes (or ``timeout``, or ``until`` arrives), and
    when it closed (``inf`` when it had not)."""
    start = time.monotonic()
    sock.settimeout(0.2)
    data = b""
    while time.monotonic() - start < timeout:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            continue
        except ConnectionResetError:
            return data, time.monotonic() - start
        if not chunk:
            return data, time.monotonic() - start
        data += chunk
        if until and until in data:
            break
    return data, float("inf")


def _still_serving(srv) -> None:
    body = {"query": [R + "<answer>4</answer>"], "labels": ["4"]}
    r = httpx.post(srv.url + "/get_reward", json=body, headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 200 and r.json()["rewards"] == [20.0]


def _flood(sock: socket.socket, piece: bytes, total: int) -> int:
    """Send ``piece`` until ``total`` bytes went out or the server answered or closed; returns
    the bytes sent. The server that accepts everything reads all of it."""
    sent = 0
    sock.setblocking(False)
    while sent < total:
        readable, writable, _ = select.select([sock], [sock], [], 5)
        if readable:
            break
        if not writable:
            break
        try:
            sent += sock.send(piece)
        except (BrokenPipeError, ConnectionResetError):
            break
    sock.setblocking(True)
    return sent


@pytest.mark.parametrize(
    ("name", "piece"),
    [("an 8 MB header", b"a" * 65536), ("100,000 headers", b"X-A: b\r\n" * 8192)],
)
def test_oversized_headers_are_cut_off(limited, name: str, piece: bytes) -> None:
    """An 8 MB header and 100,000 headers were accepted (the parser kept them all); the server
    now stops reading at 16 KB or 100 headers and answers 431."""
    sock = _connect(limited.url)
    sock.sendall(_head("/get_reward") + (b"X-Big: " if name.startswith("an") else b""))
    _flood(sock, piece, 8 * 1024 * 1024)
    answer, closed_after = _answer(sock, MARGIN_S)
    sock.close()
    assert closed_after < MARGIN_S, f"{name}: still reading headers"
    # The 431 comes first; a reset after it (unread data) may hide it from this client.
    assert answer == b"" or answer.startswith(b"HTTP/1.1 431"), answer[:200]
    _still_serving(limited)


def test_too_many_or_too_large_headers_get_a_431_that_names_the_setting(limited) -> None:
    for extra, setting in (
        (b"".join(b"X-%d: v\r\n" % i for i in range(101)) + b"\r\n", "GTPO_RS_MAX_HEADERS"),
        (b"X-Big: " + b"a" * 20_000 + b"\r\n\r\n", "GTPO_RS_MAX_HEADER_BYTES"),
    ):
        sock = _connect(limited.url)
        sock.sendall(_head("/get_reward", 2, extra=extra) + b"{}")
        answer, _ = _answer(sock, MARGIN_S)
        sock.close()
        assert answer.startswith(b"HTTP/1.1 431"), answer[:200]
        assert setting in json.loads(answer.split(b"\r\n\r\n", 1)[1])["detail"]
    # A request just inside both limits is served.
    extra = b"".join(b"X-%d: v\r\n" % i for i in range(90))
    r = httpx.post(
        limited.url + "/get_reward",
        json={"query": [R + "<answer>4</answer>"], "labels": ["4"]},
        headers={"Authorization": f"Bearer {TOKEN}", **{f"X-{i}": "v" for i in range(90)}},
    )
    assert r.status_code == 200 and extra


def test_slowloris_headers_are_cut_at_the_header_deadline(limited) -> None:
    """200 connections sending their headers a byte at a time stayed open 60 s before."""
    socks = [_connect(limited.url) for _ in range(20)]
    start = time.monotonic()
    for sock in socks:
        sock.sendall(b"POST /get_reward HTTP/1.1\r\nHost: rs\r\n")
    closed: dict[int, bytes] = {}
    while len(closed) < len(socks) and time.monotonic() - start < HEADER_S + MARGIN_S:
        for i, sock in enumerate(socks):
            if i in closed:
                continue
            try:
                sock.sendall(b"X")  # one more byte of a header that never ends
                sock.settimeout(0.01)
                chunk = sock.recv(4096)
                closed[i] = chunk
            except TimeoutError:
                pass
            except OSError:
                closed[i] = b""
        time.sleep(0.2)
    took = time.monotonic() - start
    for sock in socks:
        sock.close()
    assert len(closed) == len(socks), f"{len(socks) - len(closed)} still open after {took:.1f} s"
    assert any(c.startswith(b"HTTP/1.1 408") for c in closed.values()), closed
    _still_serving(limited)


def test_silent_sockets_are_closed_at_the_header_deadline(limited) -> None:
    """500 silent sockets were still open at 86 s before."""
    socks = [_connect(limited.url) for _ in range(20)]
    results = [_answer(sock, HEADER_S + MARGIN_S) for sock in socks]
    for sock in socks:
        sock.close()
    assert all(data == b"" for data, _ in results)  # closed without a word: nothing was asked
    assert max(t for _, t in results) < HEADER_S + MARGIN_S, "a silent socket stayed open"
    _still_serving(limited)


def test_a_body_sent_too_slowly_gets_a_408(limited) -> None:
    sock = _connect(limited.url)
    sock.sendall(_head("/get_reward", 1000) + b"\r\n" + b'{"query": [')
    answer, took = _answer(sock, BODY_S + MARGIN_S)
    sock.close()
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert b"GTPO_RS_BODY_TIMEOUT_S" in answer and took >= BODY_S * 0.9


def test_the_body_of_an_unauthenticated_request_is_never_buffered(limited) -> None:
    """Before, the body limit read (and held) the whole body before the token was checked:
    connections holding 15 MB of a 16 MB body each held that memory for as long as they
    liked. The 401 now comes before the body is read."""
    sock = _connect(limited.url)
    sock.sendall(_head("/get_reward", 15 * 1024 * 1024, token=False) + b"\r\n" + b"x" * 65536)
    answer, _ = _answer(sock, MARGIN_S, until=b"\r\n\r\n")
    sock.close()
    assert answer.startswith(b"HTTP/1.1 401"), answer[:200]


def test_bodies_being_received_are_bounded_in_all(limited) -> None:
    """Half-sent bodies of authorised requests hold at most GTPO_RS_MAX_PENDING_BODY_BYTES
    together: the request that would pass it gets 503 with Retry-After, and its connection is
    closed (the client, still sending, may then read a reset instead of the answer: /metrics
    counts the 503 either way)."""
    before = _refused_503(limited)
    first, second = _connect(limited.url), _connect(limited.url)
    part = int(PENDING * 0.6)
    first.sendall(_head("/get_reward", 12 * 1024 * 1024) + b"\r\n" + b"x" * part)
    time.sleep(0.3)
    data = _head("/get_reward", 12 * 1024 * 1024) + b"\r\n" + b"x" * part
    sending = threading.Thread(target=_send_quietly, args=(second, data))
    sending.start()
    answer, closed_after = _answer(second, MARGIN_S + 10)
    sending.join()
    first.close()
    second.close()
    assert closed_after < MARGIN_S + 10, "the second body was held"
    assert _refused_503(limited) == before + 1
    if answer:
        assert answer.startswith(b"HTTP/1.1 503"), answer[:200]
        assert b"retry-after: 1" in answer.lower() and b"GTPO_RS_MAX_PENDING_BODY_BYTES" in answer


def _send_quietly(sock: socket.socket, data: bytes) -> None:
    with contextlib.suppress(OSError):
        sock.sendall(data)


def _refused_503(srv) -> float:
    text = httpx.get(srv.url + "/metrics").text
    m = re.search(r'^gtpo_rs_requests_total\{route="/get_reward",status="503"\} (\S+)$', text, re.M)
    return float(m.group(1)) if m else 0.0


def test_an_answer_left_unread_is_dropped_at_the_send_deadline(limited) -> None:
    """A client that never reads its (large) answer: once the answer has started to come, the
    server drops the connection and what it held when the client has not read for
    GTPO_RS_SEND_TIMEOUT_S (the client's kernel sees the reset; nothing is read here)."""
    response = R + "<answer>" + "9" * (4 * 1024 * 1024) + "</answer>"
    body = json.dumps({"query": [response], "labels": ["9"]}).encode()
    sock = _connect(limited.url, rcvbuf=4096)
    sock.sendall(_head("/v1/score", len(body)) + b"\r\n" + body)
    started, _, _ = select.select([sock], [], [], 60)  # the answer's first bytes are here
    assert started, "no answer in 60 s"
    since = time.monotonic()
    while _tcp_state(sock) == _ESTABLISHED and time.monotonic() - since < SEND_S + MARGIN_S:
        time.sleep(0.1)
    dropped = _tcp_state(sock) != _ESTABLISHED
    sock.close()
    assert dropped, "the answer still waits for a client that does not read it"
    _still_serving(limited)


_ESTABLISHED = 1  # tcp_info's first byte, the connection's state (linux/tcp.h)


def _tcp_state(sock: socket.socket) -> int:
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0]


@pytest.fixture(scope="module")
def crowded(tmp_path_factory: pytest.TempPathFactory, server_starter) -> Iterator:
    """A server with a connection cap, whose header and body deadlines are far off (so that
    only the cap closes a connection during the test, however busy the machine)."""
    srv = server_starter(
        tmp_path_factory.mktemp("rs-crowded"),
        {
            "GTPO_RS_VERIFY_WORKERS": "1",
            "GTPO_RS_MAX_CONNECTIONS": str(MAX_CONNECTIONS),
            "GTPO_RS_HEADER_TIMEOUT_S": "120",
            "GTPO_RS_BODY_TIMEOUT_S": "120",
        },
    )
    yield srv
    srv.stop()


def test_connections_past_the_cap_make_room_or_get_503(crowded) -> None:
    """Past GTPO_RS_MAX_CONNECTIONS, idle connections are closed oldest first, so a real
    request is still served; when every connection is busy, a request gets 503."""
    idle = [_connect(crowded.url) for _ in range(MAX_CONNECTIONS + 8)]
    time.sleep(0.5)
    r = httpx.post(
        crowded.url + "/get_reward", json={"query": [R + "<answer>4</answer>"], "labels": ["4"]}
    )
    assert r.status_code == 200, r.text  # room was made for it
    gone = sum(_closed(s) for s in idle[:12])
    newest_open = sum(not _closed(s) for s in idle[-8:])
    for s in idle:
        s.close()
    assert gone >= 8 and newest_open == 8, (gone, newest_open)
    time.sleep(0.5)
    busy = [_connect(crowded.url) for _ in range(MAX_CONNECTIONS)]
    for s in busy:  # each in the middle of a body: a request in progress
        s.sendall(_head("/get_reward", 100) + b"\r\n" + b"{")
    time.sleep(0.5)
    late = _connect(crowded.url)
    late.sendall(_head("/get_reward", 2) + b"\r\n{}")
    answer, _ = _answer(late, MARGIN_S)
    for s in [*busy, late]:
        s.close()
    assert answer.startswith(b"HTTP/1.1 503"), answer[:200]


def _closed(sock: socket.socket) -> bool:
    try:
        sock.settimeout(0.1)
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except OSError:
        return True
