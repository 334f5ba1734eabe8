"""The Compose settings docs/deployment.md gives for several nodes serve the reward server where
the other nodes reach it.

Compose v2 is not installed everywhere the default stage runs, so `render` reads the files as
Compose does for what they use (`${VAR:-default}`, `${VAR-default}`, `${VAR}`, nested
defaults; an override's mappings merged into the base's, `!reset` emptying a value); where a
Compose binary is found its own `config` must agree with `render`.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import compose_env, find_compose

REPO = Path(__file__).resolve().parents[2]
HOSTNET = ["compose.yaml", "compose.hostnet.yaml"]
# docs/deployment.md, "Several nodes": what the head node sets.
MULTI_NODE = {
    "GTPO_NUM_NODES": "2",
    "GTPO_RS_BIND": "0.0.0.0",
    "GTPO_REWARD_URL": "http://10.0.0.1:8000/get_reward",
}


class _Reset:
    """`!reset`: the override empties the base's value."""


class _Loader(yaml.SafeLoader):
    pass


_Loader.add_constructor("!reset", lambda loader, node: _Reset())


def _interpolate(text: str, env: dict[str, str]) -> str:
    out, i = [], 0
    while (start := text.find("${", i)) >= 0:
        out.append(text[i:start])
        depth, end = 1, start + 2
        while depth:
            depth += {"{": 1, "}": -1}.get(text[end], 0)
            end += 1
        body = text[start + 2 : end - 1]
        name, op, default = body, "", ""
        for candidate in (":-", "-"):
            if candidate in body:
                name, default = body.split(candidate, 1)
                op = candidate
                break
        value = env.get(name)
        if (op == ":-" and not value) or (op == "-" and value is None):
            value = _interpolate(default, env)
        out.append(value or "")
        i = end
    return "".join(out) + text[i:]


def _merge(base: Any, override: Any) -> Any:
    if isinstance(override, _Reset):
        return None
    if isinstance(base, dict) and isinstance(override, dict):
        merged = dict(base)
        for key, value in override.items():
            merged[key] = _merge(base.get(key), value) if key in base else value
        return {k: v for k, v in merged.items() if v is not None or k not in override}
    return override


def _resolve(value: Any, env: dict[str, str]) -> Any:
    if isinstance(value, str):
        return _interpolate(value, env)
    if isinstance(value, dict):
        return {k: _resolve(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(v, env) for v in value]
    return value


def render(files: list[str], env: dict[str, str]) -> dict:
    """The services of `files` (later ones override) with `env` interpolated."""
    merged: dict = {}
    for name in files:
        merged = _merge(merged, yaml.load((REPO / name).read_text(), Loader=_Loader))
    return _resolve(merged, env)["services"]


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
