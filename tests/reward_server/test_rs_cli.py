"""The console script's flags and environment handling."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reward_server.__main__ import main
from reward_server.settings import Settings


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
    assert ran["app"] == "reward_server.app:app_from_env" and ran["factory"] is True
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
