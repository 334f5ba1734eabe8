"""The console script's flags and environment handling."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reward_server.__main__ import main
from reward_server.service.settings import Settings


@pytest.fixture(autouse=True)
def _restore_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # main() exports its flags as GTPO_RS_* for the uvicorn workers; undo that after each test.
    for name in ("HOST", "PORT", "WORKERS", "LOG_LEVEL", "VERIFY_WORKERS"):
        monkeypatch.setenv(f"GTPO_RS_{name}", "")
        monkeypatch.delenv(f"GTPO_RS_{name}")


def test_help_lists_the_flags(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for flag in ("--host", "--port", "--workers", "--verify-workers", "GTPO_RS_"):
        assert flag in out


def test_flags_override_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GTPO_RS_PORT", "9000")
    monkeypatch.setenv("GTPO_RS_VERIFY_TIMEOUT_S", "3.5")
    ran = {}

    def fake_run(app, **kw):
        ran.update(app=app, metrics_dir=os.environ.get("PROMETHEUS_MULTIPROC_DIR"), **kw)

    monkeypatch.setattr("uvicorn.run", fake_run)
    main(["--port", "8123", "--workers", "3", "--host", "0.0.0.0"])
    assert ran["app"] == "reward_server.service.app:app_from_env" and ran["factory"] is True
    assert (ran["host"], ran["port"], ran["workers"]) == ("0.0.0.0", 8123, 3)
    # Each uvicorn worker builds its settings from the environment: flags travel through it.
    s = Settings()
    assert (s.port, s.workers, s.host, s.verify_timeout_s) == (8123, 3, "0.0.0.0", 3.5)
    # Several workers share their metrics through a temporary folder, gone once serving ends.
    folder = ran["metrics_dir"]
    assert folder and "PROMETHEUS_MULTIPROC_DIR" not in os.environ and not Path(folder).exists()


def test_bad_environment_fails_with_the_variable_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GTPO_RS_VERIFY_TIMEOUT_S", "-1")
    with pytest.raises(ValueError, match="verify_timeout_s"):
        main(["--port", "8124"])


def test_the_wall_net_follows_the_cpu_budget_unless_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GTPO_RS_VERIFY_TIMEOUT_S", "3")
    assert Settings().verify_wall_timeout_s == 15.0  # WALL_NET_FACTOR budgets
    monkeypatch.setenv("GTPO_RS_VERIFY_WALL_TIMEOUT_S", "4")
    assert Settings().verify_wall_timeout_s == 4.0
    monkeypatch.setenv("GTPO_RS_VERIFY_WALL_TIMEOUT_S", "2")
    with pytest.raises(ValueError, match="GTPO_RS_VERIFY_WALL_TIMEOUT_S"):
        Settings()


def test_idle_connections_outlive_every_clients_keep_alive(monkeypatch: pytest.MonkeyPatch) -> None:
    """uvicorn's default keep-alive (5 s) equals httpx's idle expiry and is shorter than
    aiohttp's (15 s, the rollout actors' client): a client may send on a connection in the
    instant the server closes it, and read a reset instead of an answer. The server keeps idle
    connections open longer than either client does."""
    import asyncio

    import aiohttp
    import httpx

    async def aiohttp_expiry() -> float:
        connector = aiohttp.TCPConnector()  # as gtpo.reward_client's AsyncRewardClient makes it
        try:
            return connector._keepalive_timeout
        finally:
            await connector.close()

    ran = {}
    monkeypatch.setattr("uvicorn.run", lambda app, **kw: ran.update(kw))
    main([])
    clients = {"httpx": httpx.Limits().keepalive_expiry, "aiohttp": asyncio.run(aiohttp_expiry())}
    assert all(ran.get("timeout_keep_alive", 5) > expiry for expiry in clients.values()), clients
    monkeypatch.setenv("GTPO_RS_KEEP_ALIVE_S", "30")
    main([])
    assert ran["timeout_keep_alive"] == 30


@pytest.mark.parametrize("value", ["", "  "])
def test_an_empty_token_is_refused_at_start(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    """`GTPO_RS_API_TOKEN=${TOKEN}` with TOKEN unset sets it empty: the server then answered
    `?token=` with 200, open while its operator believed it closed, without a word."""
    monkeypatch.setenv("GTPO_RS_API_TOKEN", value)
    monkeypatch.setattr("uvicorn.run", lambda app, **kw: pytest.fail("the server started"))
    with pytest.raises(ValueError, match="GTPO_RS_API_TOKEN is set but empty"):
        main(["--port", "8125"])


@pytest.mark.parametrize("value", [" s3cret", "s3cret\n", "s3cret "])
def test_a_token_with_spaces_at_its_ends_is_refused_at_start(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    """HTTP trims header values: such a token refused every Bearer client with 401."""
    monkeypatch.setenv("GTPO_RS_API_TOKEN", value)
    monkeypatch.setattr("uvicorn.run", lambda app, **kw: pytest.fail("the server started"))
    with pytest.raises(ValueError, match="spaces or a newline at its start or end"):
        main(["--port", "8125"])


@pytest.mark.parametrize(
    ("host", "token", "warned"),
    [
        ("0.0.0.0", None, True),
        ("::", None, True),
        ("rs.example", None, True),
        ("0.0.0.0", "s3cret", False),
        ("127.0.0.1", None, False),
        ("localhost", None, False),
        ("::1", None, False),
    ],
)
def test_a_non_loopback_address_without_a_token_is_warned_about(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    host: str,
    token: str | None,
    warned: bool,
) -> None:
    if token is not None:
        monkeypatch.setenv("GTPO_RS_API_TOKEN", token)
    monkeypatch.setattr("uvicorn.run", lambda app, **kw: None)
    with caplog.at_level("WARNING", logger="reward_server"):
        main(["--host", host])
    said = [r.getMessage() for r in caplog.records if "without a token" in r.getMessage()]
    assert bool(said) == warned, said
    if warned:
        assert host in said[0] and "GTPO_RS_API_TOKEN" in said[0]


def _folder_of_length(root: Path, length: int) -> Path:
    """A folder under `root` whose path is exactly `length` bytes long."""
    name = "d" * (length - len(os.fsencode(root)) - 1)
    assert name, "root is already that long"
    folder = root / name
    folder.mkdir()
    return folder


def test_the_socket_room_check_matches_what_linux_binds() -> None:
    """The longest TMPDIR the check allows holds the forkserver's socket, one byte more does
    not: the check's arithmetic is the kernel's, not a guess."""
    import socket
    import tempfile

    from reward_server.service import pool

    # A short root: pytest's own folders may already be longer than the room itself.
    with tempfile.TemporaryDirectory(prefix="rs-", dir="/tmp") as root:
        room = pool.SOCKET_PATH_MAX - len("/pymp-XXXXXXXX/listener-XXXXXXXX")
        longest = _folder_of_length(Path(root), room)
        pool.check_socket_room(str(longest))
        (longest / "pymp-abcdefgh").mkdir()
        with socket.socket(socket.AF_UNIX) as listener:
            listener.bind(str(longest / "pymp-abcdefgh" / "listener-abcdefgh"))
        too_long = _folder_of_length(Path(root), room + 1)
        with pytest.raises(pool.TempDirTooLongError, match="set TMPDIR to a folder of at most"):
            pool.check_socket_room(str(too_long))
        (too_long / "pymp-abcdefgh").mkdir()
        with socket.socket(socket.AF_UNIX) as listener, pytest.raises(OSError, match="too long"):
            listener.bind(str(too_long / "pymp-abcdefgh" / "listener-abcdefgh"))


def test_a_tmpdir_too_long_for_the_pools_socket_is_refused_in_one_line(tmp_path: Path) -> None:
    """A job scheduler's per-job TMPDIR can be long: the server died at start-up with
    "OSError: AF_UNIX path too long" in a lifespan traceback (uvicorn's exit status 3)."""
    import subprocess
    import sys

    long_tmp = tmp_path / ("t" * 100)
    long_tmp.mkdir()
    ended = subprocess.run(
        [sys.executable, "-m", "reward_server", "--port", "0"],
        env={**os.environ, "TMPDIR": str(long_tmp)}, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert ended.returncode == 2, ended.stderr[-2000:]
    assert ended.stderr.count("\n") == 1, ended.stderr
    assert "set TMPDIR to a folder of at most 75 characters" in ended.stderr
