"""Every documented `gtpo-openrlhf` command passes `gtpo-openrlhf --dry-run` as written, with
the real models' configs in the local cache (tests/documented/hub-configs): a page whose command
the launcher or OpenRLHF would refuse, or whose plan would not fit its GPUs' memory, fails here in
the default stage, long before the slow stage runs it (test_documented_pages.py). Also the
trainer image's `print-command`, the plan a page prints, and the reader and the substitution
table themselves: every command of every page is run by the slow stage or listed with the reason
it is not, and no rule of the table is stale.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from documented import pages
from documented.substitutions import (
    COVERED,
    KINDS,
    PYTHON_SUBSTITUTIONS,
    SUBSTITUTIONS,
    Context,
    not_run,
    substitute,
)

pytest.importorskip("openrlhf")
pytest.importorskip("deepspeed")

from gtpo.openrlhf.__main__ import main

ROOT = pages.ROOT
HUB_CONFIGS = Path(__file__).resolve().parent / "hub-configs"
STANDINS = ROOT / "tests" / "standins"
LAUNCHER = "gtpo-openrlhf"
# What a reader substitutes for the variables the docs leave to them.
EXAMPLE_ENV = {"HEAD_IP": "10.0.0.1"}


def documented_launches() -> list[tuple[str, list[str], dict[str, str]]]:
    """(where, gtpo-openrlhf's arguments, the page's exports so far) of every command."""
    found = []
    for page in pages.pages():
        exports: dict[str, str] = {}  # a reader runs a page's blocks in one shell
        for block in pages.blocks(page):
            for command in block.commands:
                env = {**EXAMPLE_ENV, **exports}
                argv = [pages.expand(t, env, command.where) for t in command.argv]
                if argv[0] == "export":
                    exports.update(a.partition("=")[::2] for a in argv[1:])
                if LAUNCHER in argv:
                    launch = argv[argv.index(LAUNCHER) + 1 :]
                    found.append((command.where, [t for t in launch if t != "--dry-run"], exports))
    return found


LAUNCHES = documented_launches()


@pytest.fixture
def hub_configs(monkeypatch):
    """The local Hugging Face cache holds the documented models' config.json only."""
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_CACHE", str(HUB_CONFIGS))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(HUB_CONFIGS))


def dry_run(argv, exports, monkeypatch, capsys, caplog) -> str:
    """The plan of `gtpo-openrlhf --dry-run ARGV` with the page's exports in the environment;
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
    where = {w.split(":")[0] for w, _, _ in LAUNCHES}
    assert {"README.md", "docs/training-openrlhf.md"} <= where, where
    assert len([p for p in where if p.startswith("recipes/")]) >= 4, where


@pytest.mark.parametrize(("where", "argv", "exports"), LAUNCHES, ids=[c[0] for c in LAUNCHES])
def test_documented_command_passes_the_dry_run(
    where, argv, exports, hub_configs, monkeypatch, capsys, caplog
):
    plan = dry_run(argv, exports, monkeypatch, capsys, caplog)
    assert "every check passed" in plan, where
    # Each command names its model, and the real model's config is read: the memory of both
    # phases is estimated for the GPUs the page states, and fits (or the run was refused).
    assert "memory        per policy GPU of" in plan, where
    if any(token.startswith("--logger.wandb.") for token in argv):
        assert "W&B           on" in plan, where
    # The key comes from the launcher's environment: a command line shows in ps, in the
    # submitted job's entrypoint and in the logs.
    assert "--logger.wandb.key" not in argv, where


def test_the_plan_a_page_shows_is_the_commands_own(hub_configs, monkeypatch, capsys, caplog,
                                                   tmp_path):  # fmt: skip
    """docs/training-openrlhf.md prints the two-node command's plan, with GSM8K's 7,473
    prompts on the shared storage: the dry run prints exactly that."""
    text = (ROOT / "docs" / "training-openrlhf.md").read_text()
    start = text.index("gtpo-openrlhf --dry-run: OpenRLHF")
    shown = text[start : text.index("```", start)].strip()
    where, argv, exports = next(c for c in LAUNCHES if "--actor.num_nodes" in c[1]
                                and c[1][c[1].index("--actor.num_nodes") + 1] == "2")  # fmt: skip
    shared = tmp_path / "shared"
    (shared / "data").mkdir(parents=True)
    with (shared / "data" / "gsm8k_train.jsonl").open("w") as rows:
        for i in range(7473):
            rows.write(f'{{"prompt": "q{i}", "label": "1"}}\n')
    argv = [t.replace("/shared/", f"{shared}/") for t in argv]
    plan = dry_run(argv, exports, monkeypatch, capsys, caplog).replace(f"{shared}/", "/shared/")
    assert plan.strip() == shown, where


def test_every_command_runs_in_a_stage_or_says_why_not():
    """The slow stage runs every command of every page (its Docker part deployment.md's);
    what it cannot run on a CPU is listed with its reason, and that list stays short."""
    runners = {"gtpo", "gtpo-openrlhf", "gtpo-reward-server", "pip", "make", "python", "curl",
               "export", "ray", "docker", "cp"}  # fmt: skip
    skipped = []
    for command in pages.all_commands():
        reason = not_run(command)
        if reason:
            skipped.append((command.where, reason))
            continue
        assert command.argv[0] in runners, f"{command.where}: no runner for {command.argv[0]}"
    # Two reasons: CUDA itself, and the GPU image (NVIDIA's base image and container runtime).
    gpu_only = {r for _, r in skipped if "CI's" not in r}
    assert len(gpu_only) <= 2, gpu_only


def test_each_covered_run_picks_one_documented_training_command():
    """substitutions.COVERED: a key that picks no command (the page changed) or several would
    leave a run unchecked or dry-run one nobody meant."""
    picked: dict[tuple[str, str, str], list[str]] = {key: [] for key in COVERED}
    for command in pages.all_commands():
        for key in COVERED:
            page, flag, value = key
            pairs = itertools.pairwise(command.argv)
            if command.page == page and (flag, value) in pairs and LAUNCHER in command.argv:
                picked[key].append(command.where)
    assert all(len(where) == 1 for where in picked.values()), picked


def test_every_rule_of_the_table_changes_a_documented_command(tmp_path):
    """A rule that no command needs any more goes: the table says what CI changes, no more."""
    ctx = Context(tiny_model=tmp_path / "tiny", workdir=tmp_path, wheelhouse=tmp_path,
                  docker_env={"GTPO_BASE_IMAGE": "gtpo-base:bookworm"})  # fmt: skip
    on_two_nodes = dataclasses.replace(ctx, shared=tmp_path / "shared")
    used = set()
    for command in pages.all_commands():
        if not_run(command):
            continue
        env = {**EXAMPLE_ENV, "WANDB_API_KEY": "k"}
        argv = [pages.expand(t, env, command.where) for t in command.argv]
        for context in (ctx, on_two_nodes):
            used |= {why for _, _, why in substitute(command, list(argv), context).notes}
    unused = [rule.why for rule in SUBSTITUTIONS if rule.why not in used]
    assert not unused, unused
    assert {rule.kind for rule in (*SUBSTITUTIONS, *PYTHON_SUBSTITUTIONS)} <= set(KINDS)
    code = "".join(b.code for b in pages.all_blocks() if b.language == "python")
    assert all(rule.old in code for rule in PYTHON_SUBSTITUTIONS)


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
def test_trainer_image_command_passes_the_dry_run(setting, hub_configs, monkeypatch, capsys,
                                                  caplog):  # fmt: skip
    import shlex

    env = {"PATH": os.environ["PATH"], "GTPO_GPUS_PER_NODE": "8", **ENTRYPOINT_SETTINGS[setting]}
    printed = subprocess.run(
        ["bash", str(ENTRYPOINT), "print-command"], env=env, capture_output=True, text=True
    )
    assert printed.returncode == 0, printed.stderr
    tokens = shlex.split(printed.stdout)
    assert tokens[0] == LAUNCHER
    # The launcher runs in the image's environment (the W&B key comes from there).
    exports = {k: v for k, v in env.items() if k == "WANDB_API_KEY"}
    # On 80 GB GPUs (on a GPU node the launcher reads the GPU's own memory).
    plan = dry_run([*tokens[1:], "--gtpo.gpu_memory_gib", "80"], exports, monkeypatch, capsys,
                   caplog)  # fmt: skip
    assert "every check passed" in plan
    assert "memory        per policy GPU of 80.0 GiB" in plan
    if "WANDB_API_KEY" in env:
        assert "W&B           on, run 'run'" in plan
        assert env["WANDB_API_KEY"] not in printed.stdout


def test_the_two_node_command_is_planned_within_a_minute():
    """The documented 2-node × 8-GPU command, as a user runs it: a fresh process."""
    two_nodes = [
        c
        for c in LAUNCHES
        if "--actor.num_nodes" in c[1] and c[1][c[1].index("--actor.num_nodes") + 1] == "2"
    ]
    (_, argv, exports), *_ = two_nodes
    env = {**os.environ, **exports, "HF_HUB_CACHE": str(HUB_CONFIGS)}
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


def _substituted(argv: list[str], ctx: Context):
    command = pages.Command("docs/x.md", 1, tuple(argv))
    return substitute(command, list(argv), ctx)


def test_the_table_declares_the_pages_ray_head_and_the_runner_starts_it_from_there(tmp_path):
    ctx = Context(tiny_model=tmp_path / "tiny", workdir=tmp_path)
    run = ["gtpo-openrlhf", "--actor.model_name_or_path", "m"]
    assert _substituted(run, ctx).ray_head
    assert any("RAY_ADDRESS" in change for _, change, _ in _substituted(run, ctx).notes)
    # a dry run starts nothing; `ray job submit` and two nodes use the page's own cluster
    assert not _substituted([*run, "--dry-run"], ctx).ray_head
    assert not _substituted(["ray", "job", "submit", "--", *run], ctx).ray_head
    assert not _substituted(run, dataclasses.replace(ctx, shared=tmp_path / "s")).ray_head


def test_shared_storage_becomes_a_folder_only_on_two_nodes_and_says_so(tmp_path):
    ctx = Context(tiny_model=tmp_path / "tiny", workdir=tmp_path)
    argv = ["export", "GTPO_DATA_DIR=/shared/data", "OTHER=/sharedx/y"]
    assert _substituted(argv, ctx).argv == argv
    sub = _substituted(argv, dataclasses.replace(ctx, shared=tmp_path / "s"))
    assert sub.argv == ["export", f"GTPO_DATA_DIR={tmp_path}/s/data", "OTHER=/sharedx/y"]
    assert [change for _, change, _ in sub.notes] == [
        f"GTPO_DATA_DIR=/shared/data → GTPO_DATA_DIR={tmp_path}/s/data"
    ]


@pytest.mark.parametrize(
    ("argv", "need"),
    [
        (["gtpo-openrlhf", "--actor.model_name_or_path", "m"], "TRAINING_RUN_GIB"),
        (["ray", "job", "submit", "--", "gtpo-openrlhf", "--x", "1"], "TRAINING_RUN_GIB"),
        (["gtpo-openrlhf", "--dry-run"], None),
        (["docker", "compose", "-f", "c.yaml", "--profile", "demo", "up"], "COMPOSE_DEMO_GIB"),
        (["docker", "compose", "down"], None),
        (["gtpo", "demo", "--quick"], None),
    ],
)
def test_runs_that_hold_gigabytes_wait_for_the_memory_gate(argv, need, monkeypatch):
    """The slow stage's parts start their training runs, the Compose demo's containers
    included, only when their peaks fit together (tests/memory_gate.py)."""
    from documented import runner

    asked = []
    monkeypatch.setattr(runner.memory_gate, "admitted", lambda gib, what: asked.append(gib))
    runner._memory_gate(runner._declared_gib(argv), "page.md:1")
    assert asked == ([] if need is None else [getattr(runner, need)])
