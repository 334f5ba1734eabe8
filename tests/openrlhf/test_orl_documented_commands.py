"""Every `gtpo-openrlhf` command the docs and recipes show, and the trainer image's
`print-command`, passes `gtpo-openrlhf --dry-run`: a doc that drifts from the code fails here.

A command is read as a shell would: the lines of a ```bash block joined at trailing
backslashes, comments dropped, quotes removed, `$VAR`/`${VAR}` taken from the page's
`export VAR=value` lines before it or from EXAMPLE_ENV (the values a reader substitutes).
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("openrlhf")
pytest.importorskip("deepspeed")

from gtpo.openrlhf.__main__ import main

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted(
    [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "recipes").glob("*.md")]
)
LAUNCHER = "gtpo-openrlhf"
STANDINS = ROOT / "tests" / "standins"
# What a reader substitutes for the variables the docs leave to them.
EXAMPLE_ENV = {"HEAD_IP": "10.0.0.1", "WANDB_API_KEY": "your-wandb-key"}
VARIABLE = re.compile(r"\$(?:\{(\w+)\}|(\w+))")


def _expand(token: str, env: dict[str, str]) -> str:
    def value(match: re.Match) -> str:
        name = match.group(1) or match.group(2)
        assert name in env, f"${name} is neither exported in the block nor in EXAMPLE_ENV"
        return env[name]

    return VARIABLE.sub(value, token)


def documented_commands(page: Path) -> list[tuple[str, list[str], dict[str, str]]]:
    """(label, gtpo-openrlhf's arguments, the block's exports) of every command on the page."""
    found = []
    text = page.read_text()
    exports: dict[str, str] = {}  # a reader runs a page's blocks in one shell
    for block in re.findall(r"^```(?:bash|sh)\n(.*?)^```", text, re.M | re.S):
        for line in block.replace("\\\n", " ").splitlines():
            if LAUNCHER not in line and not line.startswith("export "):
                continue  # other commands may use shell syntax shlex does not read
            tokens = shlex.split(line, comments=True)
            if tokens[:1] == ["export"]:
                for assignment in tokens[1:]:
                    name, _, value = assignment.partition("=")
                    exports[name] = value
            if LAUNCHER not in tokens:
                continue
            env = {**EXAMPLE_ENV, **exports}
            argv = [_expand(t, env) for t in tokens[tokens.index(LAUNCHER) + 1 :]]
            argv = [t for t in argv if t != "--dry-run"]
            found.append((f"{page.relative_to(ROOT)}#{len(found) + 1}", argv, dict(exports)))
    return found


COMMANDS = [command for page in PAGES for command in documented_commands(page)]


def dry_run(argv: list[str], exports: dict[str, str], monkeypatch, capsys, caplog) -> str:
    """The plan of `gtpo-openrlhf --dry-run ARGV` with the block's exports in the environment;
    fails with the launcher's refusals."""
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    for name, value in exports.items():
        monkeypatch.setenv(name, value)
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="gtpo"):
        try:
            main(["--dry-run", *argv])
        except SystemExit as exc:
            pytest.fail(f"exit {exc.code}: {caplog.text}")
    return capsys.readouterr().out


def test_the_docs_show_the_commands_this_checks():
    pages = {label.split("#")[0] for label, _, _ in COMMANDS}
    assert {"README.md", "docs/training-openrlhf.md"} <= pages, pages
    assert len([p for p in pages if p.startswith("recipes/")]) >= 4, pages


@pytest.mark.parametrize(("label", "argv", "exports"), COMMANDS, ids=[c[0] for c in COMMANDS])
def test_documented_command_passes_the_dry_run(label, argv, exports, monkeypatch, capsys, caplog):
    plan = dry_run(argv, exports, monkeypatch, capsys, caplog)
    assert "every check passed" in plan, label
    # A command that names a W&B run starts W&B (OpenRLHF needs the key for that).
    if any(token.startswith("--logger.wandb.") for token in argv):
        assert "W&B           on" in plan, label
    # The key comes from the launcher's environment: a command line shows in ps, in the
    # submitted job's entrypoint and in the logs.
    assert "--logger.wandb.key" not in argv, label


ENTRYPOINT = ROOT / "docker" / "trainer-entrypoint.sh"
ENTRYPOINT_SETTINGS = {
    "one node": {},
    # docs/deployment.md's settings for several nodes
    "two nodes": {"GTPO_NUM_NODES": "2", "GTPO_REWARD_URL": "http://10.0.0.1:8000/get_reward"},
    "two nodes, GRPO with KL": {
        "GTPO_NUM_NODES": "2",
        "GTPO_REWARD_URL": "http://10.0.0.1:8000/get_reward",
        "GTPO_ALGO": "grpo",
        "GTPO_KL_COEF": "1e-6",
    },
    "W&B": {"WANDB_API_KEY": "wandb-secret-123", "GTPO_RUN_NAME": "run"},
}


@pytest.mark.parametrize("setting", list(ENTRYPOINT_SETTINGS))
def test_trainer_image_command_passes_the_dry_run(setting, monkeypatch, capsys, caplog):
    env = {"PATH": os.environ["PATH"], "GTPO_GPUS_PER_NODE": "8", **ENTRYPOINT_SETTINGS[setting]}
    printed = subprocess.run(
        ["bash", str(ENTRYPOINT), "print-command"], env=env, capture_output=True, text=True
    )
    assert printed.returncode == 0, printed.stderr
    tokens = shlex.split(printed.stdout)
    assert tokens[0] == LAUNCHER
    # The launcher runs in the image's environment (the W&B key comes from there).
    exports = {k: v for k, v in env.items() if k == "WANDB_API_KEY"}
    plan = dry_run(tokens[1:], exports, monkeypatch, capsys, caplog)
    assert "every check passed" in plan
    if "WANDB_API_KEY" in env:
        assert "W&B           on, run 'run'" in plan
        assert env["WANDB_API_KEY"] not in printed.stdout


def test_the_two_node_command_is_planned_within_a_minute():
    """The documented 2-node × 8-GPU command, as a user runs it: a fresh process."""
    two_nodes = [
        c
        for c in COMMANDS
        if "--actor.num_nodes" in c[1] and c[1][c[1].index("--actor.num_nodes") + 1] == "2"
    ]
    (_, argv, exports), *_ = two_nodes
    env = {**os.environ, **exports}
    # What conftest.py put on sys.path where flash-attn or vLLM are not installed.
    standins = [p for p in sys.path if Path(p).resolve().is_relative_to(STANDINS)]
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [env.get("PYTHONPATH"), *standins]))
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "gtpo.openrlhf", "--dry-run", *argv],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    seconds = time.monotonic() - start
    assert done.returncode == 0, done.stderr[-3000:]
    assert "2 node(s) × 8 GPUs" in done.stdout
    assert seconds < 60, seconds
