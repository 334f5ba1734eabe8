"""docker/trainer-entrypoint.sh: the GTPO_* environment becomes a `gtpo-openrlhf` command line
that OpenRLHF 0.11's own parser and the GTPO launcher accept, with the paper's settings.

The command is printed by the entrypoint (`print-command`, no GPU needed) and then run through
the real launcher up to OpenRLHF's train(args), as tests/openrlhf does: the args checked are the
ones every Ray actor would receive. The image itself needs CUDA and is not built here.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
ENTRYPOINT = REPO / "docker" / "trainer-entrypoint.sh"
STANDINS = REPO / "tests" / "standins"

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def entrypoint(*args: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GTPO_")}
    clean.pop("WANDB_API_KEY", None)
    return subprocess.run(
        ["bash", str(ENTRYPOINT), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**clean, **env},
    )


def printed_command(*args: str, **env: str) -> list[str]:
    out = entrypoint("print-command", *args, **env)
    assert out.returncode == 0, out.stderr
    return shlex.split(out.stdout)


def flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_defaults_are_the_papers_single_node_setup():
    argv = printed_command(GTPO_GPUS_PER_NODE="8")
    assert argv[0] == "gtpo-openrlhf"
    expected = {
        "--actor.model_name_or_path": "Qwen/Qwen2.5-3B-Instruct",
        "--rollout.n_samples_per_prompt": "8",
        "--actor.adam.lr": "1e-6",
        "--rollout.temperature": "1.0",
        "--gtpo.gamma": "0.1",
        "--algo.advantage.estimator": "group_norm",
        "--algo.kl.init_coef": "0",
        # one policy iteration per batch: train batch = prompts per step × G
        "--rollout.batch_size": "16",
        "--train.batch_size": "128",
        "--actor.num_gpus_per_node": "8",
        "--vllm.num_engines": "8",
    }
    assert {name: flag(argv, name) for name in expected} == expected


def test_environment_overrides_and_extra_flags_come_last():
    argv = printed_command(
        "--gtpo.h_ini",
        "0.3",
        GTPO_GPUS_PER_NODE="4",
        GTPO_MODEL="meta-llama/Llama-3.1-8B-Instruct",
        GTPO_N_SAMPLES="12",
        GTPO_VLLM_TP="2",
        GTPO_EXTRA_ARGS="--train.seed 7",
        GTPO_REWARD_URL="http://reward-server:9100/get_reward",
        WANDB_API_KEY="secret-key",
    )
    assert flag(argv, "--actor.model_name_or_path") == "meta-llama/Llama-3.1-8B-Instruct"
    assert flag(argv, "--train.batch_size") == str(16 * 12)
    assert flag(argv, "--vllm.num_engines") == "2"
    assert flag(argv, "--reward.remote_url") == "http://reward-server:9100/get_reward"
    assert argv[-4:] == ["--train.seed", "7", "--gtpo.h_ini", "0.3"]
    # The W&B key switches logging on (a run name; the launcher reads the key from the
    # environment) and is never on the command line.
    assert flag(argv, "--logger.wandb.run_name")
    assert "--logger.wandb.key" not in argv and "secret-key" not in shlex.join(argv)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({}, "no GPU visible"),
        ({"GTPO_GPUS_PER_NODE": "4", "GTPO_VLLM_TP": "3"}, "must divide the 4 GPUs"),
        ({"GTPO_GPUS_PER_NODE": "4", "GTPO_N_SAMPLES": "x"}, "samples must be a positive"),
    ],
)
def test_bad_settings_stop_with_a_message(env, message):
    out = entrypoint("print-command", PATH="/usr/bin:/bin", **env)
    assert out.returncode == 2
    assert message in out.stderr


def test_ray_worker_needs_the_head_address():
    out = entrypoint("ray-worker", GTPO_GPUS_PER_NODE="8")
    assert out.returncode == 2 and "GTPO_RAY_HEAD" in out.stderr


def test_the_multi_node_head_serves_ray_jobs_on_the_cluster_address_only(tmp_path):
    """With several nodes the head starts Ray first. Its job server (8265) runs any job it is
    sent, unauthenticated: it binds the node's cluster address, not 0.0.0.0 (before: every
    interface). `ray` and `gtpo-openrlhf` are scripts here that record their arguments."""
    for tool in ("ray", "gtpo-openrlhf"):
        script = tmp_path / tool
        script.write_text(f'#!/bin/sh\necho "{tool} $*" >> {tmp_path}/calls\n')
        script.chmod(0o755)
    path = f"{tmp_path}:/usr/bin:/bin"
    env = {"PATH": path, "GTPO_GPUS_PER_NODE": "8", "GTPO_NUM_NODES": "2"}
    out = entrypoint("train", GTPO_NODE_IP="10.0.0.1", **env)
    assert out.returncode == 0, out.stderr
    ray, launcher = (tmp_path / "calls").read_text().splitlines()
    argv = ray.split()
    assert argv[:3] == ["ray", "start", "--head"] and "0.0.0.0" not in argv
    assert flag(argv, "--dashboard-host") == flag(argv, "--node-ip-address") == "10.0.0.1"
    assert launcher.startswith("gtpo-openrlhf ")
    # Without GTPO_NODE_IP: the node's first address; without any, what to set.
    (tmp_path / "calls").unlink()
    hostname = tmp_path / "hostname"
    hostname.write_text("#!/bin/sh\necho 10.1.2.3 172.17.0.1\n")
    hostname.chmod(0o755)
    assert entrypoint("train", **env).returncode == 0
    argv = (tmp_path / "calls").read_text().splitlines()[0].split()
    assert flag(argv, "--dashboard-host") == flag(argv, "--node-ip-address") == "10.1.2.3"
    hostname.write_text("#!/bin/sh\nexit 1\n")
    out = entrypoint("train", **env)
    assert out.returncode == 2 and "set GTPO_NODE_IP" in out.stderr


def test_other_commands_run_as_given():
    out = entrypoint("echo", "hello")
    assert (out.returncode, out.stdout) == (0, "hello\n")


class Captured(Exception):
    def __init__(self, args: Any) -> None:
        super().__init__("captured")
        self.captured_args = args


def _launcher_args(monkeypatch, **env: str) -> Any:
    """The OpenRLHF args the GTPO launcher builds from the entrypoint's command line."""
    pytest.importorskip("openrlhf")
    pytest.importorskip("deepspeed")
    # OpenRLHF imports flash_attn and vllm at module level; CPU machines use the stand-ins
    # (vLLM's CPU build where it is installed).
    if importlib.util.find_spec("flash_attn") is None:
        monkeypatch.syspath_prepend(str(STANDINS))
    if importlib.util.find_spec("vllm") is None:
        monkeypatch.syspath_prepend(str(STANDINS / "hf_engine"))
    import openrlhf.utils
    import ray

    from gtpo.openrlhf.__main__ import main

    def capture(args: Any) -> Any:
        raise Captured(args)

    argv = printed_command(GTPO_GPUS_PER_NODE="8", **env)
    monkeypatch.setattr(ray, "is_initialized", lambda: True)
    monkeypatch.setattr(openrlhf.utils, "get_strategy", capture)
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(Captured) as captured:
        main(argv[1:])
    return captured.value.captured_args


def test_openrlhf_accepts_the_command_with_gtpo_settings(monkeypatch, caplog):
    with caplog.at_level("WARNING", logger="gtpo"):
        args = _launcher_args(monkeypatch)
    assert args.actor.adam.lr == pytest.approx(1e-6)
    assert args.rollout.n_samples_per_prompt == 8
    assert args.rollout.temperature == pytest.approx(1.0)
    assert args.algo.advantage.estimator == "group_norm"
    assert args.gtpo.algo == "gtpo" and args.gtpo.gamma == pytest.approx(0.1)
    assert args.actor.entropy_coef == pytest.approx(-0.1)  # Eq. 7's penalty, as OpenRLHF's
    assert args.reward.remote_url == ["http://127.0.0.1:8000/get_reward"]
    # On-policy as in the paper: the launcher has nothing to warn about but what this offline
    # machine could not check (the model's config is not here: checks.not_checked).
    from gtpo.openrlhf.checks import NOT_CHECKED

    warned = [r.getMessage() for r in caplog.records if r.levelno >= 30 and "gtpo" in r.name]
    assert [w for w in warned if not w.startswith(NOT_CHECKED)] == [], caplog.text


def test_the_authors_variant_through_extra_args(monkeypatch):
    """dr_grpo advantages and the entropy term in the advantage (the authors' code) replace the
    paper's defaults when given in GTPO_EXTRA_ARGS, which come after them."""
    args = _launcher_args(
        monkeypatch,
        GTPO_EXTRA_ARGS="--algo.advantage.estimator dr_grpo --gtpo.entropy_form advantage "
        "--gtpo.entropy_threshold 0.7 --gtpo.entropy_filter on",
    )
    assert args.algo.advantage.estimator == "dr_grpo"
    assert args.gtpo.entropy_form == "advantage"
    assert args.gtpo.entropy_threshold == pytest.approx(0.7) and args.gtpo.entropy_filter == "on"
    assert args.actor.entropy_coef is None  # γ⟨H⟩_i goes into the advantages instead
