"""The Compose settings docs/deployment.md gives for several nodes serve the reward server where
the other nodes reach it (the files read by `compose_render.render`; where a Compose binary is
found, its own `config` must agree with `render`).
"""

from __future__ import annotations

import json
import subprocess
import tempfile

import pytest
from compose_render import HOSTNET, MULTI_NODE, REPO, render

from .conftest import compose_env, find_compose


def test_the_documented_multi_node_settings_bind_every_interface():
    server = render(HOSTNET, MULTI_NODE)["reward-server"]
    assert server["network_mode"] == "host" and not server.get("ports")
    # The server binds this address on the host's own network stack: the other node reaches it.
    assert server["environment"]["GTPO_RS_HOST"] == "0.0.0.0"
    assert render(HOSTNET, MULTI_NODE)["trainer"]["environment"]["GTPO_REWARD_URL"] == (
        "http://10.0.0.1:8000/get_reward"
    )


def test_one_node_keeps_the_server_on_loopback():
    assert render(HOSTNET, {})["reward-server"]["environment"]["GTPO_RS_HOST"] == "127.0.0.1"
    bridge = render(["compose.yaml"], {})["reward-server"]
    assert bridge["ports"] == ["127.0.0.1:8000:8000"]
    assert render(["compose.yaml"], {"GTPO_RS_BIND": "0.0.0.0"})["reward-server"]["ports"] == [
        "0.0.0.0:8000:8000"
    ]


@pytest.mark.parametrize("env", [{}, MULTI_NODE], ids=["defaults", "multi-node"])
def test_compose_itself_resolves_the_same(env):
    compose = find_compose()
    if compose is None:
        pytest.skip("no Compose v2 binary here; render() alone was checked")
    args = [*compose, "--project-directory", str(REPO)]
    for name in HOSTNET:
        args += ["-f", str(REPO / name)]
    with tempfile.NamedTemporaryFile("w", suffix=".env") as empty:
        args += ["--env-file", empty.name, "--profile", "gpu", "config", "--format", "json"]
        out = subprocess.run(args, env=compose_env(**env), capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    theirs = json.loads(out.stdout)["services"]
    ours = render(HOSTNET, env)
    for service, key in (("reward-server", "GTPO_RS_HOST"), ("trainer", "GTPO_REWARD_URL")):
        assert theirs[service]["environment"][key] == ours[service]["environment"][key]
