"""The uvicorn internals the connection limits extend (reward_server/service/uvicorn_internals.py):
the installed release has them, and a release without one, or outside the tested range, is
refused at start-up with the range to install, instead of serving with a limit silently off."""

from __future__ import annotations

from pathlib import Path

import pytest
import tomllib
from uvicorn.protocols.http import httptools_impl

from reward_server import __main__ as cli
from reward_server.service import connections, uvicorn_internals
from reward_server.service.uvicorn_internals import UvicornIncompatibleError, check_uvicorn

ROOT = Path(__file__).resolve().parents[2]


def test_the_installed_uvicorn_has_every_internal_the_limits_extend():
    assert uvicorn_internals.missing() == []
    assert uvicorn_internals.release(check_uvicorn()) == uvicorn_internals.MINIMUM
    # Every method LimitedHttpProtocol overrides from uvicorn is declared.
    own = {
        name
        for name, value in vars(connections.LimitedHttpProtocol).items()
        if callable(value) and hasattr(httptools_impl.HttpToolsProtocol, name)
    } - {"__init__"}
    declared = {name.split(".", 1)[1] for name in uvicorn_internals.REQUIRED if "." in name}
    assert own <= declared, own - declared


def test_the_package_pins_the_tested_range():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert uvicorn_internals.PIN in project["optional-dependencies"]["server"]


@pytest.mark.parametrize("version", ["0.53.2", "0.55.0", "1.0.0"])
def test_a_release_outside_the_tested_range_is_refused(version):
    with pytest.raises(UvicornIncompatibleError, match=r">=0\.54,<0\.55.*found " + version):
        check_uvicorn(version)


def test_a_release_without_a_hook_the_limits_override_is_refused(monkeypatch):
    """uvicorn renaming `_start_asgi_task` would leave the client-gone wrapper uncalled."""
    monkeypatch.delattr(httptools_impl.HttpToolsProtocol, "_start_asgi_task")
    with pytest.raises(UvicornIncompatibleError, match=r"HttpToolsProtocol\._start_asgi_task"):
        check_uvicorn()


class FlowElsewhere:  # a release whose connection_made keeps its flow control under a new name
    def __init__(self, loop, server_state, limit_concurrency):
        self.loop, self.server_state = loop, server_state
        self.limit_concurrency = limit_concurrency
        self.cycle: object = None

    def connection_made(self, transport):
        self.transport = transport
        self.flow_control = object()


def test_a_release_that_sets_an_attribute_no_more_is_refused(monkeypatch):
    monkeypatch.setattr(httptools_impl, "HttpToolsProtocol", FlowElsewhere)
    gone = uvicorn_internals.missing()
    assert "HttpToolsProtocol().flow" in gone
    assert "HttpToolsProtocol().cycle" not in gone  # an annotated assignment counts


def test_the_server_refuses_to_start_in_one_line(monkeypatch, capsys):
    monkeypatch.setattr(uvicorn_internals.metadata, "version", lambda name: "0.60.1")
    with pytest.raises(SystemExit) as ended:
        cli.main(["--port", "0"])
    assert ended.value.code == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "uvicorn>=0.54,<0.55" in error and "0.60.1" in error
