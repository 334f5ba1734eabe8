"""GTPO under OpenRLHF's async training (`--train.async_enable`, queue size 1), in the real
fit() loop on CPU (slow stage): OpenRLHF's PPOTrainerAsync with its generator and trainer actors
(GTPO's subclasses, gtpo.openrlhf.async_training), the stand-in vLLM engine recording which
weight sync generated each completion (the ground truth of the staleness GTPO tags), the toy
model (nothing here depends on parameters being partitioned). The harness and its stand-ins:
fit_harness.py.
"""

from __future__ import annotations

import math

import pytest

pytestmark = pytest.mark.slow

pytest.importorskip("openrlhf")
pytest.importorskip("deepspeed")
pytest.importorskip("tensorboard")

import torch  # noqa: E402
from fit_harness import (  # noqa: E402
    TEMPERATURE,
    G,
    base_argv,
    check_factors,
    paper_terms,
    run_fit,
    sample_versions,
    with_flags,
)

STEPS = 3  # 12 prompts, 4 per step


def async_run(fixture_files, reward_server, out, algo="gtpo", extra=()):
    argv = with_flags(base_argv(fixture_files, reward_server.url, out), {"--gtpo.algo": algo})
    run = run_fit([*argv, "--train.async_enable", *extra], out)
    assert run.returncode == 0, run.failure()
    return run


@pytest.fixture(scope="module")
def gtpo_async(fixture_files, reward_server, tmp_path_factory):
    out = tmp_path_factory.mktemp("async-gtpo")
    return async_run(fixture_files, reward_server, out, extra=["--ckpt.save_steps", "2"])


def logged(run) -> dict[str, dict[int, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (folder,) = list((run.out / "tensorboard").iterdir())
    events = EventAccumulator(str(folder))
    events.Reload()
    return {tag: {e.step: e.value for e in events.Scalars(tag)} for tag in events.Tags()["scalars"]}


def test_it_runs_async_and_lambda_delta_is_the_papers_on_every_row(gtpo_async):
    assert "queue_size=1" in gtpo_async.log  # PPOTrainerAsync's own start-up line
    records = gtpo_async.experiences()
    assert len(records) == STEPS and f"Global step {STEPS}" in gtpo_async.log
    h_ini = records[0]["h_ini"]
    for record in records:
        assert record["h_ini"] == h_ini
        check_factors(record, paper_terms(record, G, h_ini))


def test_every_sample_is_tagged_with_the_version_that_generated_it(gtpo_async):
    """The tag GTPO puts on each sample is the number of weight syncs the engine had done when
    it generated that completion (recorded by the engine itself); one step stale occurs and is
    what gtpo/staleness_max logs."""
    engine = gtpo_async.engine_versions()
    staleness = {}
    for step, record in enumerate(gtpo_async.experiences()):  # trained at global step `step`
        versions = set()
        for ids, version in sample_versions(record):
            assert version in engine[ids], (step, version, engine[ids])
            versions.add(version)
        assert len(versions) == 1  # a rollout is generated with one set of weights
        staleness[step + 1] = step - versions.pop()
    assert set(staleness.values()) <= {0, 1} and 1 in staleness.values(), staleness
    assert staleness[1] == 0  # the first rollout: the initial weights, nothing to be stale on
    assert logged(gtpo_async)["train/gtpo/staleness_max"] == pytest.approx(staleness)


def test_h_ini_is_measured_once_on_the_first_training_prompts(gtpo_async):
    assert gtpo_async.log.count("GTPO: H_ini = ") == 1
    # The generator actor makes H_ini's rollout (before either loop starts, for the trainer's
    # entropy forward) from the loader training draws from, then one rollout a step: the two
    # first draws are the same prompts, the measurement having put the loader's state back.
    (calls,) = gtpo_async.generated_prompts_by_process().values()
    calls = [prompts for prompts in calls if prompts]
    assert len(calls) == 1 + STEPS
    first_step = {p for mb in gtpo_async.experiences()[0]["micro_batches"] for p in mb["prompts"]}
    assert set(calls[0]) == set(calls[1]) == first_step


def test_the_entropy_penalty_is_eq7_under_async(gtpo_async):
    scalars = logged(gtpo_async)
    for step, value in scalars["train/gtpo/entropy_mean"].items():
        assert scalars["train/entropy_loss"][step] == pytest.approx(value, rel=1e-3)


def test_delta_reads_the_entropy_of_the_trainers_weights_one_step_from_the_samplers(
    gtpo_async, fixture_files
):
    """δ's ⟨H⟩_i comes from the trainer's experience forward (π_old, where OpenRLHF's async
    takes the behaviour log-probs too). For a one-step-stale rollout that is the entropy under
    the weights after the update its sampler had not seen. Measured here: ⟨H⟩_i recomputed under
    the sampler's own weights (the engine's after its syncs), beside the one δ read."""
    from transformers import AutoModelForCausalLM

    from gtpo import LN2, completion_entropy, token_entropy

    synced = gtpo_async.rollout_weights()
    differences, flips = [], 0
    for step, record in enumerate(gtpo_async.experiences()):
        version = sample_versions(record)[0][1]
        if step - version != 1:
            continue
        sampler = AutoModelForCausalLM.from_pretrained(fixture_files.model, dtype=torch.bfloat16)
        if version:
            sampler.load_state_dict(synced[version - 1], strict=False)
        for mb, recorded in zip(record["micro_batches"], record["entropy"], strict=True):
            with torch.no_grad():
                logits = sampler(mb["sequences"]).logits / TEMPERATURE
            mask = mb["action_mask"].bool()
            entropy = token_entropy(logits)[:, :-1][:, -mask.shape[1] :]
            under_sampler = completion_entropy(entropy, mask)
            differences += (under_sampler - recorded).abs().tolist()
            flips += int(((under_sampler > LN2) != (recorded > LN2)).sum())
    assert differences, "no one-step-stale rollout to measure"
    print(
        f"\nasync, one step stale: |⟨H⟩ under the sampler − ⟨H⟩ δ read| max "
        f"{max(differences):.4f}, mean {sum(differences) / len(differences):.4f} nats over "
        f"{len(differences)} completions; δ would differ on {flips}"
    )
    assert max(differences) < math.log(2)  # one update moves the entropy, not across the scale


def test_resume_restores_h_ini_under_async(gtpo_async, fixture_files, reward_server, tmp_path):
    argv = with_flags(
        base_argv(fixture_files, reward_server.url, tmp_path),
        {"--ckpt.path": str(gtpo_async.out / "ckpt")},
    )
    run = run_fit([*argv, "--train.async_enable", "--ckpt.load_enable"], tmp_path)
    assert run.returncode == 0, run.failure()
    assert "restored from the checkpoint" in run.log and "measured on" not in run.log
    records = run.experiences()
    assert len(records) == 1 and records[0]["h_ini"] == gtpo_async.experiences()[0]["h_ini"]


def test_the_grpo_baseline_runs_async_too(fixture_files, reward_server, tmp_path):
    run = async_run(fixture_files, reward_server, tmp_path, algo="grpo")
    assert "GTPO: H_ini = " not in run.log
    records = run.experiences()
    assert len(records) == STEPS
    for record in records:
        for mb, group_norm in zip(record["micro_batches"], record["group_norm"], strict=True):
            assert torch.equal(mb["advantages"], group_norm)  # λ ≡ 1, δ ≡ 1
    assert max(logged(run)["train/gtpo/staleness_max"].values()) == 1
