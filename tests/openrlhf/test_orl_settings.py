"""OpenRLHF settings GRPO users turn on, in the real fit() loop on CPU (slow stage): a prompt count
that leaves a short final rollout, dynamic filtering. Each on two data-parallel ranks where the
rank count matters. (LoRA runs through the real engine: test_orl_qlora.py.) The harness and its
stand-ins: fit_harness.py; the toy model is enough here (ZeRO-2: nothing below depends on
parameters being partitioned; the ZeRO-3 hang needs the real model, test_orl_real_model.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

pytest.importorskip("openrlhf")
pytest.importorskip("deepspeed")

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
    assert run.returncode == 0, run.failure()
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
    assert run.returncode == 0, run.failure()
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
    assert run.returncode == 1, run.failure()
    assert "training stopped: the run ended without a training step: 12 prompts were drawn" in (
        run.log
    )
    assert "--algo.dynamic_filtering_enable dropped 12 of their 12 groups of 4" in run.log
    assert not run.experiences()
