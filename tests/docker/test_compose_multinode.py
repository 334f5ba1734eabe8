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


def test_the_documented_worker_node_gets_the_head_s_image_volumes_and_secrets():
    """docs/deployment.md's other nodes run the trainer service itself (`compose run`), not a
    bare `docker run` of an image that was built only on the head: the same build, the Hugging
    Face cache and HF_TOKEN (a gated model), and the checkpoint folder on the shared storage the
    head's ranks write to (a resume reads every rank's shards)."""
    from documented import pages

    block = next(
        b for b in pages.blocks(REPO / "docs" / "deployment.md")
        if any("other node" in c.place for c in b.commands)
    )  # fmt: skip
    worker = [c for c in block.commands if "other node" in c.place]
    exports = {}
    for command in worker:
        if command.argv[0] == "export":
            exports.update(a.partition("=")[::2] for a in command.argv[1:])
    (run,) = [c for c in worker if c.argv[0] == "docker"]
    assert run.argv[:2] == ("docker", "compose") and "run" in run.argv, run.text
    assert run.argv[-2:] == ("trainer", "ray-worker"), run.text
    env = {k: v.replace("$HEAD_IP", "10.0.0.1") for k, v in exports.items()}
    trainer = render(HOSTNET, env)["trainer"]
    mounts = {target: source for source, target in (v.rsplit(":", 1) for v in trainer["volumes"])}
    assert mounts["/ckpt"] == "/shared/ckpt" and mounts["/data"] == "/shared/data"
    assert "/hf" in mounts
    assert trainer["environment"]["GTPO_RAY_HEAD"] == "10.0.0.1:6379"
    with_token = render(HOSTNET, {**env, "HF_TOKEN": "hf_secret"})["trainer"]["environment"]
    assert with_token["HF_TOKEN"] == "hf_secret"
