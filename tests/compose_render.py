"""compose.yaml and compose.hostnet.yaml read as Compose v2 resolves them, for what they use:
`${VAR:-default}`, `${VAR-default}`, `${VAR}` with nested defaults, an override's mappings
merged into the base's and `!reset` emptying a value. Compose is not installed everywhere the
tests run; tests/docker/test_compose_multinode.py checks this against Compose's own `config`
where it is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
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
    """The services of `files` (later ones override) with `env` interpolated, and each
    `environment` entry without a value passed through from `env` when set there (dropped
    otherwise), as Compose does."""
    merged: dict = {}
    for name in files:
        merged = _merge(merged, yaml.load((REPO / name).read_text(), Loader=_Loader))
    services = _resolve(merged, env)["services"]
    for service in services.values():
        environment = service.get("environment") or {}
        for key in [k for k, v in environment.items() if v is None]:
            if key in env:
                environment[key] = env[key]
            else:
                del environment[key]
    return services
