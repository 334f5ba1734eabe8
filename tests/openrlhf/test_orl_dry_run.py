"""`gtpo-openrlhf --dry-run`: OpenRLHF's real parser and checks, GTPO's refusals and OpenRLHF's
layout rules, on a laptop: no Ray, no weights, no hub."""

from __future__ import annotations

import json
import logging
import socket
from pathlib import Path

import pytest

pytest.importorskip("openrlhf")
pytest.importorskip("deepspeed")

from gtpo.openrlhf.__main__ import main

# The documented 2-node × 8-GPU command's layout (docs/training-openrlhf.md, Several nodes).
TWO_NODES = [
    "--actor.model_name_or_path", "Qwen/Qwen2.5-3B-Instruct",
    "--data.prompt_dataset", "data/gsm8k_train.jsonl",
    "--data.input_key", "prompt", "--data.label_key", "label", "--data.apply_chat_template",
    "--reward.remote_url", "http://10.0.0.1:8000/get_reward",
    "--algo.advantage.estimator", "group_norm", "--algo.kl.init_coef", "0",
    "--rollout.n_samples_per_prompt", "8", "--rollout.batch_size", "16",
    "--train.batch_size", "128", "--rollout.micro_batch_size", "8",
    "--train.micro_batch_size", "4", "--rollout.max_new_tokens", "512", "--data.max_len", "1024",
    "--actor.num_nodes", "2", "--actor.num_gpus_per_node", "8",
    "--vllm.num_engines", "16", "--vllm.tensor_parallel_size", "1",
    "--train.colocate_all", "--vllm.enable_sleep", "--ds.enable_sleep",
    "--ds.zero_stage", "2", "--ds.param_dtype", "bf16",
]  # fmt: skip
GRPO_KL = ["--gtpo.algo", "grpo", "--algo.kl.init_coef", "1e-6"]


@pytest.fixture
def no_ray_no_network(monkeypatch):
    """ray.init and every outgoing connection fail the test: a dry run makes neither."""
    import ray

    calls: list[str] = []

    def forbidden(*args, **kwargs):
        calls.append("ray.init")
        raise RuntimeError("a dry run started Ray")

    def connect(self, address):
        calls.append(f"connect {address}")
        raise OSError("a dry run opened a connection")

    monkeypatch.setattr(ray, "init", forbidden)
    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    yield calls
    assert calls == []


def dry_run(argv, capsys, caplog):
    """(exit code, plan on stdout, error log) of `gtpo-openrlhf --dry-run ARGV`."""
    code = 0
    with caplog.at_level(logging.INFO, logger="gtpo"):
        try:
            main(["--dry-run", *argv])
        except SystemExit as exc:
            code = exc.code
    errors = "\n".join(r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR)
    return code, capsys.readouterr().out, errors


def headline(plan: str) -> str:
    """The plan's first line (vLLM and DeepSpeed may print warnings to stdout before it)."""
    (line,) = [line for line in plan.splitlines() if line.startswith("gtpo-openrlhf --dry-run:")]
    return line


def plan_row(plan: str, label: str) -> str:
    rows = [line for line in plan.splitlines() if line.startswith(label + " ")]
    assert len(rows) == 1, plan
    return rows[0]


def test_the_documented_two_node_command_is_planned(no_ray_no_network, capsys, caplog):
    code, plan, errors = dry_run(TWO_NODES, capsys, caplog)
    assert code == 0, errors
    # The model's config is not here (offline, not cached): the first line says what that
    # leaves unchecked, never "every check passed".
    first = headline(plan)
    assert "every check passed" not in plan
    assert first.startswith("gtpo-openrlhf --dry-run: OpenRLHF 0.11.2; every check run passed; ")
    assert "not checked: memory, vLLM's tensor parallelism and the model's length" in first
    assert "HF_HUB_OFFLINE is set; `hf download Qwen/Qwen2.5-3B-Instruct config.json`" in first
    assert first.endswith("; nothing started.")
    assert plan_row(plan, "cluster").endswith("2 node(s) × 8 GPUs for the policy")
    assert "16 ranks: 16 data-parallel" in plan_row(plan, "policy")
    assert plan_row(plan, "reference").endswith("none (no KL term)")
    assert "16 vLLM engine(s) × tensor parallel 1, on the policy's GPUs" in plan
    assert plan_row(plan, "GPUs in all").split()[3] == "16"
    # 128 samples in 16 micro-batches of 8 over 16 ranks: 8 rows each, 2 training micro-batches
    # of 4, and train.batch_size 128 = 4 × 16 ranks × 2: one optimizer step per rollout.
    assert "per rank: 1 (×16)" in plan_row(plan, "experience")
    assert "rows per rank: 8 (×16) → 2 (×16) micro-batch(es) of 4, 2 per optimizer step → 1 " in (
        plan_row(plan, "training")
    )
    assert "config not read" in plan_row(plan, "model")
    assert "dataset not read" in plan_row(plan, "steps")
    assert "http://10.0.0.1:8000/get_reward  response format: the server's default" in plan
    assert "100 prompts × G 8 = 800 generations" in plan_row(plan, "H_ini")
    assert "--actor.entropy_coef None → -0.1" in plan_row(plan, "GTPO sets")
    assert "--actor.loss_agg_mode token-mean → seq-mean-token-mean" in plan_row(plan, "GTPO sets")


def test_kl_on_two_nodes_needs_the_reference_on_both(no_ray_no_network, capsys, caplog):
    code, plan, errors = dry_run([*TWO_NODES, *GRPO_KL], capsys, caplog)
    assert code == 2 and plan == ""
    assert "Pass --ref.num_nodes 2 --ref.num_gpus_per_node 8." in errors
    code, plan, errors = dry_run(
        [*TWO_NODES, *GRPO_KL, "--ref.num_nodes", "2", "--ref.num_gpus_per_node", "8"],
        capsys,
        caplog,
    )
    assert code == 0, errors
    assert plan_row(plan, "reference").endswith(
        "2 node(s) × 8 GPUs, on the policy's GPUs (KL 1e-06)"
    )
    assert plan_row(plan, "GPUs in all").split()[3] == "16"


def test_every_refusal_is_listed_each_naming_its_flag(no_ray_no_network, capsys, caplog):
    argv = [
        *TWO_NODES, *GRPO_KL, "--train.batch_size", "100", "--ds.load_in_4bit",
        "--vllm.num_engines", "8", "--logger.wandb.run_name", "x",
    ]  # fmt: skip
    code, _, errors = dry_run(argv, capsys, caplog)
    assert code == 2
    for fix in (
        "Pass --ref.num_nodes 2",
        "Pass --train.batch_size 64 or 128",
        "Pass --ds.lora.rank (QLoRA",
        "Pass --vllm.num_engines 16",
        "pass --logger.wandb.key",
    ):
        assert fix in errors, fix


def test_qlora_is_planned(no_ray_no_network, capsys, caplog):
    """The documented two-node command with the authors' QLoRA flags passes every check, and
    the plan shows the target modules handed to peft as its `all-linear` string."""
    qlora = [
        "--ds.load_in_4bit", "--ds.lora.rank", "128", "--ds.lora.alpha", "128",
        "--ds.lora.target_modules", "all-linear",
    ]  # fmt: skip
    code, plan, errors = dry_run([*TWO_NODES, *qlora], capsys, caplog)
    assert code == 0, errors
    assert "LoRA rank 128" in plan
    assert "--ds.lora.target_modules ['all-linear'] → all-linear" in plan_row(plan, "GTPO sets")


def test_openrlhfs_own_checks_are_refusals_too(no_ray_no_network, capsys, caplog):
    code, plan, errors = dry_run([*TWO_NODES, "--train.partial_rollout_enable"], capsys, caplog)
    assert code == 2 and plan == ""
    assert "OpenRLHF refuses this command line" in errors
    assert "--train.partial_rollout_enable requires --train.async_enable" in errors


def _tiny_config(directory: Path, heads: int = 4, positions: int = 256) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    config = {
        "model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": heads,
        "vocab_size": 300, "max_position_embeddings": positions,
    }  # fmt: skip
    (directory / "config.json").write_text(json.dumps(config))
    return directory


def _single_node(model: str, dataset: Path) -> list[str]:
    return [
        "--actor.model_name_or_path", model, "--data.prompt_dataset", str(dataset),
        "--data.input_key", "prompt", "--data.label_key", "label",
        "--reward.remote_url", "http://127.0.0.1:8000/get_reward?format=think",
        "--algo.advantage.estimator", "group_norm", "--algo.kl.init_coef", "0",
        "--rollout.n_samples_per_prompt", "4", "--rollout.batch_size", "8",
        "--train.batch_size", "32", "--rollout.max_new_tokens", "64", "--data.max_len", "128",
        "--actor.num_gpus_per_node", "2", "--vllm.num_engines", "2",
        "--rollout.micro_batch_size", "4", "--train.micro_batch_size", "4",
    ]  # fmt: skip


def test_a_local_model_and_dataset_are_read(no_ray_no_network, tmp_path, capsys, caplog):
    model = _tiny_config(tmp_path / "model")
    dataset = tmp_path / "prompts.jsonl"
    dataset.write_text(
        "".join(json.dumps({"prompt": f"q{i}", "label": "1"}) + "\n" for i in range(20))
    )
    code, plan, errors = dry_run(_single_node(str(model), dataset), capsys, caplog)
    assert code == 0, errors
    assert "2 layers, 4 attention heads, vocabulary 300, 256 positions" in plan_row(plan, "model")
    # 20 prompts in rollouts of 8: 3 per episode, the last of 4; 20 × 4 // 32 = 2 LR steps.
    assert plan_row(plan, "steps").endswith(
        "20 prompts → 3 rollouts per episode (the last of 4 prompts) × 1 episode(s); "
        "OpenRLHF's max_steps (learning-rate schedule) 2"
    )
    assert "response format: think" in plan_row(plan, "rewards")
    # Rules only the model's config and the file can show, each naming its flag.
    argv = [*_single_node(str(model), dataset), "--vllm.tensor_parallel_size", "3",
            "--data.max_len", "512", "--data.label_key", "answer"]  # fmt: skip
    code, _, errors = dry_run(argv, capsys, caplog)
    assert code == 2
    assert "--vllm.tensor_parallel_size 3 does not divide the model's 4 attention heads" in errors
    assert "Pass --data.max_len 256 or less" in caplog.text  # a warning: rope scaling may allow it
    assert "--data.label_key 'answer': the first row" in errors


def test_a_hub_id_is_read_from_the_cache_and_never_fetched_offline(
    no_ray_no_network, tmp_path, monkeypatch, capsys, caplog
):
    cache = tmp_path / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    dataset = tmp_path / "prompts.jsonl"
    dataset.write_text(json.dumps({"prompt": "q", "label": "1"}) + "\n")
    code, plan, errors = dry_run(_single_node("some-org/not-cached", dataset), capsys, caplog)
    assert code == 0, errors
    why = "it is not in the local Hugging Face cache and HF_HUB_OFFLINE is set"
    assert f"config not read ({why})" in plan_row(plan, "model")
    assert "not checked: memory, vLLM's tensor parallelism and the model's length" in plan
    # The same id once its config is in the cache (the hub's layout: refs/main → snapshot).
    repo = cache / "models--some-org--cached"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("abc123")
    _tiny_config(repo / "snapshots" / "abc123", heads=6)
    code, plan, errors = dry_run(_single_node("some-org/cached", dataset), capsys, caplog)
    assert code == 0, errors
    assert "6 attention heads" in plan_row(plan, "model")


DENSE_CONFIG = {
    "model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128,
    "num_attention_heads": 6, "num_key_value_heads": 2, "vocab_size": 300,
    "max_position_embeddings": 256, "tie_word_embeddings": True,
}  # fmt: skip


@pytest.fixture
def online_with_a_hub(tmp_path, monkeypatch):
    """The hub stand-in on loopback (tests/standins/hub_on_loopback.py) as the hub, online, an
    empty cache, no token; Ray and every connection but to loopback fail the test."""
    import huggingface_hub.constants as constants
    import ray
    from hub_on_loopback import HubOnLoopback

    real_connect = socket.socket.connect

    def connect(self, address):
        if not (isinstance(address, tuple) and address[0] == "127.0.0.1"):
            raise OSError(f"a dry run opened a connection to {address}")
        return real_connect(self, address)

    monkeypatch.setattr(ray, "init", lambda *a, **k: pytest.fail("a dry run started Ray"))
    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no-token"))
    models = {"some-org/public": DENSE_CONFIG, "some-org/gated": DENSE_CONFIG}
    with HubOnLoopback(models, gated={"some-org/gated"}) as hub:
        # huggingface_hub builds each file's URL from a template made at import from the endpoint
        monkeypatch.setattr(constants, "ENDPOINT", hub.url)
        template = hub.url + "/{repo_id}/resolve/{revision}/{filename}"
        monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", template)
        yield hub


def _fetch_plan(model, tmp_path, capsys, caplog):
    tmp_path.mkdir(exist_ok=True)
    dataset = tmp_path / "prompts.jsonl"
    dataset.write_text(json.dumps({"prompt": "q", "label": "1"}) + "\n")
    argv = [*_single_node(model, dataset), "--gtpo.gpu_memory_gib", "80"]
    return dry_run(argv, capsys, caplog)


def test_a_config_not_here_is_fetched_from_the_hub_alone(
    online_with_a_hub, tmp_path, capsys, caplog
):
    """The model's config.json, and nothing else, comes from the hub into the cache; memory and
    the heads are then checked, and the next dry run reads the cache."""
    code, plan, errors = _fetch_plan("some-org/public", tmp_path, capsys, caplog)
    assert code == 0, errors
    assert headline(plan).endswith("; every check passed; nothing started.")
    assert "6 attention heads" in plan_row(plan, "model")
    assert plan_row(plan, "memory").startswith("memory        per policy GPU of 80.0 GiB")
    paths = {path for _, path, _ in online_with_a_hub.requests}
    assert paths <= {"/some-org/public/resolve/main/config.json", "/api/agent-harnesses"}, paths
    asked = len(online_with_a_hub.requests)
    code, again, errors = _fetch_plan("some-org/public", tmp_path, capsys, caplog)
    assert code == 0 and again == plan and len(online_with_a_hub.requests) == asked


def test_a_gated_config_is_fetched_with_the_users_token(
    online_with_a_hub, tmp_path, monkeypatch, capsys, caplog
):
    from hub_on_loopback import GOOD_TOKEN

    code, plan, errors = _fetch_plan("some-org/gated", tmp_path, capsys, caplog)
    assert code == 0, errors
    first = headline(plan)
    assert "every check passed" not in plan
    assert "not checked: memory, vLLM's tensor parallelism and the model's length" in first
    assert "the model is gated, set HF_TOKEN to a token that has access" in first
    monkeypatch.setenv("HF_TOKEN", GOOD_TOKEN)
    code, plan, errors = _fetch_plan("some-org/gated", tmp_path / "again", capsys, caplog)
    assert code == 0 and headline(plan).endswith("; every check passed; nothing started.")
    assert ("GET", "/some-org/gated/resolve/main/config.json", f"Bearer {GOOD_TOKEN}") in (
        online_with_a_hub.requests
    )


def test_a_model_the_hub_lacks_is_asked_for_once_and_named(
    online_with_a_hub, tmp_path, capsys, caplog
):
    code, plan, errors = _fetch_plan("some-org/missing", tmp_path, capsys, caplog)
    assert code == 0, errors
    assert "the hub has no such model (or it is private: set HF_TOKEN)" in plan_row(plan, "model")
    assert "`hf download some-org/missing config.json` makes them run" in headline(plan)
    asked = [p for _, p, _ in online_with_a_hub.requests if p.startswith("/some-org/missing/")]
    assert len(asked) == 1, asked  # the plan and the checks read it four times


def test_wandb_starts_with_the_key_from_the_environment(
    no_ray_no_network, monkeypatch, capsys, caplog
):
    monkeypatch.setenv("WANDB_API_KEY", "secret-key")
    code, plan, errors = dry_run([*TWO_NODES, "--logger.wandb.run_name", "r1"], capsys, caplog)
    assert code == 0, errors
    assert plan_row(plan, "W&B").startswith("W&B           on, run 'r1'")
    assert "--logger.wandb.key None → ***" in plan_row(plan, "GTPO sets")
    assert "secret-key" not in plan


class _PlacementReached(Exception):
    pass


def test_a_run_prints_its_args_without_the_wandb_key(no_ray_no_network, monkeypatch, capsys):
    """train(args) prints the whole args into the driver's log (which Ray keeps with the job),
    the W&B key the launcher took from WANDB_API_KEY included. A real launch, not a dry run,
    stopped where it would place the first models (Ray reported as up: none starts)."""
    import importlib

    import ray

    # The module (ray.util's attribute of that name is the function).
    placement_groups = importlib.import_module("ray.util.placement_group")

    def placement_group(*args, **kwargs):
        raise _PlacementReached

    import openrlhf.utils

    strategies = []
    real_get_strategy = openrlhf.utils.get_strategy

    def get_strategy(args):
        strategies.append(real_get_strategy(args))
        return strategies[-1]

    monkeypatch.setenv("WANDB_API_KEY", "secret-key-1234")
    monkeypatch.setattr(ray, "is_initialized", lambda: True)
    monkeypatch.setattr(placement_groups, "placement_group", placement_group)
    monkeypatch.setattr(openrlhf.utils, "get_strategy", get_strategy)
    with pytest.raises(_PlacementReached):
        main([*TWO_NODES, "--logger.wandb.run_name", "r1"])
    printed = capsys.readouterr().out
    assert "Qwen/Qwen2.5-3B-Instruct" in printed and "run_name='r1'" in printed  # the args
    assert "secret-key-1234" not in printed
    assert "key='***'" in printed
    # The strategy goes on to Ray's actors as OpenRLHF built it, its key where the run needs it.
    (strategy,) = strategies
    assert "print" not in vars(strategy)
    assert strategy.args.logger.wandb.key == "secret-key-1234"


def test_the_dry_run_restores_what_it_rebinds(no_ray_no_network, capsys, caplog):
    import openrlhf.utils
    import ray

    before = (openrlhf.utils.get_strategy, ray.is_initialized)
    assert dry_run(TWO_NODES, capsys, caplog)[0] == 0
    assert (openrlhf.utils.get_strategy, ray.is_initialized) == before


@pytest.mark.parametrize(
    ("url", "refused"),
    [
        ("http://127.0.0.1:8000/get_reward", True),
        ("http://localhost:8000/get_reward", True),
        ("http://[::1]:8000/get_reward", True),
        ("http://10.0.0.1:8000/get_reward,http://127.0.0.2:8000/get_reward", True),
        ("http://rs1.cluster:8000/get_reward", False),  # a name each node resolves
    ],
)
def test_two_nodes_need_a_reward_url_every_node_reaches(
    no_ray_no_network, capsys, caplog, url, refused
):
    i = TWO_NODES.index("--reward.remote_url")
    argv = [*TWO_NODES[: i + 1], url, *TWO_NODES[i + 2 :]]
    code, _, errors = dry_run(argv, capsys, caplog)
    assert (code == 2) == refused, errors
    assert ("Pass --reward.remote_url with an address every node reaches" in errors) == refused


def test_the_dry_run_needs_no_flash_attn(tmp_path):
    """On a laptop flash-attn does not install (it needs CUDA) and OpenRLHF imports it at module
    level: the dry run, in a process of its own without the tests' stand-ins, still plans."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    probe = [sys.executable, "-c", "import importlib.util as u; print(u.find_spec('flash_attn'))"]
    assert subprocess.run(probe, env=env, capture_output=True, text=True).stdout.strip() == "None"
    argv = ["--actor.model_name_or_path", "org/model", "--reward.remote_url",
            "http://10.1.2.3:8000/get_reward", "--algo.advantage.estimator", "group_norm",
            "--algo.kl.init_coef", "0", "--rollout.n_samples_per_prompt", "8",
            "--rollout.batch_size", "16", "--train.batch_size", "128",
            "--actor.num_gpus_per_node", "8", "--vllm.num_engines", "8"]  # fmt: skip
    run = subprocess.run(
        [sys.executable, "-m", "gtpo.openrlhf", "--dry-run", *argv],
        env={**env, "HF_HUB_OFFLINE": "1"}, cwd=tmp_path, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert "every check run passed; not checked: memory" in run.stdout
    assert headline(run.stdout).endswith("; nothing started.")
