"""OpenRLHF settings GRPO users turn on, in the real fit() loop on CPU (slow stage): a prompt
count that leaves a short final rollout, dynamic filtering, LoRA. Each on two data-parallel ranks
where the rank count matters. The harness and its stand-ins: fit_harness.py; the toy model is
enough here (ZeRO-2: nothing below depends on parameters being partitioned; the ZeRO-3 hang
needs the real model, test_orl_real_model.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

pytest.importorskip("openrlhf")
pytest.importorskip("deepspeed")
pytest.importorskip("peft")

import torch  # noqa: E402
from fit_harness import Fixture, G, base_argv, build_fixture, run_fit, with_flags  # noqa: E402

TWO_RANKS = {"--actor.num_gpus_per_node": "2", "--rollout.micro_batch_size": "4"}


def with_labels(fixture: Fixture, out: Path, unreachable: set[int]) -> Fixture:
    """The fixture's prompts with the labels of rows `unreachable` set to -1, an answer the
    arithmetic task never has (its running values stay >= 0): those groups are all wrong."""
    rows = [json.loads(line) for line in fixture.prompts.read_text().splitlines()]
    for k in unreachable:
        rows[k]["label"] = "-1"
    path = out / "prompts.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return Fixture(fixture.model, path)


def test_a_short_final_rollout_is_trained_alike_on_every_rank(
    fixture_files, reward_server, tmp_path
):
    """11 prompts in rollouts of 4: the last has 3 (12 samples), which OpenRLHF's dispatch
    splits 8 and 4 rows over the two ranks, 2 and 1 training micro-batches of 4: the rank with
    one used to wait in the collective of the other's second until killed, and the final save
    never came. GTPO trains on its first 8 samples (1 and 1) and says so."""
    short_tail = {"--data.max_samples": "11", "--train.micro_batch_size": "4"}
    argv = with_flags(
        base_argv(fixture_files, reward_server.url, tmp_path),
        {**TWO_RANKS, **short_tail, "--train.batch_size": "8"},
    )
    run = run_fit(argv, tmp_path, num_gpus=3)
    assert run.returncode == 0, run.log[-4000:]
    assert "a rollout of 12 samples reaches the 2 data-parallel ranks as 8, 4 rows" in run.log
    assert "Training on its first 8 samples (2 prompts)" in run.log
    records = run.experiences()
    assert [sum(len(mb["index"]) for mb in r["micro_batches"]) for r in records] == [16, 16, 8]
    per_rank = run.train_micro_batches()
    assert per_rank == [[2, 2, 1], [2, 2, 1]], per_rank
    assert (tmp_path / "final" / "model.safetensors").exists()  # the final save happened


def test_dynamic_filtering_on_two_ranks_trains_only_mixed_groups(
    fixture_files, reward_server, tmp_path
):
    """--algo.dynamic_filtering_enable with the server's scores (the accuracy, 1 or 0): prompts
    whose label no completion can match are all-wrong groups and are dropped and replaced; every
    group trained on has right and wrong completions; rollouts that come back short are cut or
    skipped so both ranks train alike; the run ends and saves."""
    unreachable = {0, 3, 5, 8}
    # 32 prompts: the toy model gets about one group in three mixed (right and wrong), so the
    # filter keeps several groups and drops many, and some rollouts come back short.
    fixture = with_labels(build_fixture(tmp_path / "fixture", n_prompts=32), tmp_path, unreachable)
    argv = with_flags(
        base_argv(fixture, reward_server.url, tmp_path),
        {**TWO_RANKS, "--data.max_samples": "32", "--train.micro_batch_size": "4",
         "--train.batch_size": "8"},
    )  # fmt: skip
    run = run_fit([*argv, "--algo.dynamic_filtering_enable"], tmp_path, num_gpus=3)
    assert run.returncode == 0, run.log[-4000:]
    assert "Filtered out: avg_reward=0.00" in run.log
    dataset = [json.loads(line) for line in fixture.prompts.read_text().splitlines()]
    excluded = {dataset[k]["prompt"] for k in unreachable}
    records = run.experiences()
    assert records, "no step trained"
    for record in records:
        groups: dict[str, list[float]] = {}
        for mb in record["micro_batches"]:
            for prompt, score in zip(mb["prompts"], mb["scores"].flatten().tolist(), strict=True):
                groups.setdefault(prompt, []).append(score)
        for prompt, scores in groups.items():
            assert prompt not in excluded
            assert len(scores) == G and 0 < sum(scores) < G, scores  # right and wrong
    counts = run.train_micro_batches()
    assert len(counts) == 2 and counts[0] == counts[1] and all(counts[0]), counts
    assert (tmp_path / "final" / "model.safetensors").exists()


def test_a_run_whose_filter_drops_every_group_ends_with_an_error(
    fixture_files, reward_server, tmp_path
):
    """Every label unreachable: every group is all wrong and dynamic filtering drops all 12.
    The run used to make no experience, train nothing and exit 0."""
    fixture = with_labels(fixture_files, tmp_path, set(range(12)))
    argv = base_argv(fixture, reward_server.url, tmp_path)
    run = run_fit([*argv, "--algo.dynamic_filtering_enable"], tmp_path)
    assert run.returncode == 1, run.log[-4000:]
    assert "training stopped: the run ended without a training step: 12 prompts were drawn" in (
        run.log
    )
    assert "--algo.dynamic_filtering_enable dropped 12 of their 12 groups of 4" in run.log
    assert not run.experiences()


def test_lora_trains_adapters_and_the_engine_gets_the_merged_weights(
    fixture_files, reward_server, tmp_path
):
    """--ds.lora.rank: OpenRLHF 0.11.2 sends PEFT's parameter names (and the adapters) to the
    rollout engine, whose model has neither (KeyError at the first sync, after H_ini). GTPO's
    sync sends W + B·A·α/r under the base names: the engine ends with exactly the merge of the
    saved adapter into the initial weights."""
    from peft import PeftModel
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    argv = with_flags(
        base_argv(fixture_files, reward_server.url, tmp_path),
        {"--ds.lora.rank": "8", "--ds.lora.alpha": "16", "--actor.adam.lr": "5e-3"},
    )
    run = run_fit(argv, tmp_path)
    assert run.returncode == 0, run.log[-4000:]
    assert "GTPO: H_ini = " in run.log
    synced = run.rollout_weights()
    assert len(synced) == 3
    saved = tmp_path / "final"
    assert (saved / "adapter_config.json").exists()
    base = AutoModelForCausalLM.from_pretrained(fixture_files.model, dtype=torch.bfloat16)
    initial = {n: p.detach().clone() for n, p in base.named_parameters()}
    merged = PeftModel.from_pretrained(base, saved).merge_and_unload()
    changed = 0
    for name, value in merged.named_parameters():
        if name not in synced[-1]:
            continue  # the tied lm_head: not one of the engine's parameters
        torch.testing.assert_close(synced[-1][name], value.detach(), rtol=0.02, atol=2e-3)
        changed += not torch.equal(synced[-1][name], initial[name])
    assert changed > 0  # the adapters moved the weights the engine samples with
    adapter = load_file(saved / "adapter_model.safetensors")
    assert adapter and all("lora_" in name for name in adapter)
