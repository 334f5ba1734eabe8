"""GTPO inside OpenRLHF's real training loop, end to end on CPU (slow stage).

Each run is `gtpo-openrlhf …` in a subprocess (fit_harness.py): OpenRLHF's train_ppo_ray, its
Ray actor groups, create_vllm_engines and RolloutRayActor, its agent executor calling this
project's reward server over HTTP on 127.0.0.1, PPOTrainer.fit() with GTPO's experience maker
and actor trainer, a real DeepSpeed engine (ZeRO-2/3, bf16, gloo, CPU Adam), the weight
broadcast to the rollout engine, checkpoints, resume and TensorBoard.

Stand-ins, each for something that cannot run without a GPU, and the GPU-only bugs each could
hide:
- vLLM's engine (tests/standins/vllm/engine.py) generates with transformers `generate`. Hides:
  vLLM's sampler, its logprobs (the tests keep --algo.advantage.is_correction_level off),
  continuous batching, paged KV cache and sleep-mode memory, tensor parallelism.
- vLLM's StatelessProcessGroup / PyNcclCommunicator broadcast over a private gloo group
  (`--vllm.sync_backend gloo`). Hides: NCCL set-up and timeouts, CUDA streams, CUDA IPC (the
  colocated nccl path is not taken).
- flash_attn (tests/standins/flash_attn) with `--ds.attn_implementation sdpa`. Hides: flash
  attention kernels and numerics, packed-sample varlen attention.
- CUDA calls with no CPU meaning (tests/standins/cuda_on_cpu.py): set_device, synchronize and
  current_stream are no-ops, current_device() is the CPU. Hides: a missing `.to(device)` (one
  device for everything), stream races (no-op synchronize), per-GPU placement.
- Ray has logical GPUs (`ray.init(num_gpus=N)`). Hides: CUDA_VISIBLE_DEVICES mapping, GPU
  memory pressure of colocated actors.
"""

from __future__ import annotations

import json
import math
import socket
import threading
import time
from collections import defaultdict
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

pytest.importorskip("openrlhf")
pytest.importorskip("deepspeed")
pytest.importorskip("tensorboard")

import httpx  # noqa: E402
import torch  # noqa: E402
from fit_harness import (  # noqa: E402
    TEMPERATURE,
    FitRun,
    G,
    base_argv,
    check_factors,
    completions_of,
    paper_terms,
    run_fit,
    with_flags,
)
from paper_reference import reference_delta, reference_weights  # noqa: E402

from gtpo.local_reward_server import LocalRewardServer  # noqa: E402

STEPS = 3  # 12 prompts, 4 per step


def flag(argv: list[str], name: str, value: str) -> list[str]:
    """argv with `name` set to `value` (replaced if present, appended otherwise)."""
    return with_flags(argv, {name: value})


@pytest.fixture(scope="module")
def gtpo_run(fixture_files, reward_server, tmp_path_factory):
    """The main GTPO run: ZeRO-2, straddling micro-batches, a checkpoint at step 2."""
    out = tmp_path_factory.mktemp("fit-gtpo")
    argv = [*base_argv(fixture_files, reward_server.url, out), "--ckpt.save_steps", "2"]
    run = run_fit(argv, out)
    assert run.returncode == 0, run.failure()
    return run


def scalars(run) -> dict[str, dict[int, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (folder,) = list((run.out / "tensorboard").iterdir())
    events = EventAccumulator(str(folder))
    events.Reload()
    return {tag: {e.step: e.value for e in events.Scalars(tag)} for tag in events.Tags()["scalars"]}


def test_gtpo_factor_on_every_action_token_is_the_papers(gtpo_run):
    """λ·δ from Eq. 5-6 in plain loops, on the real Experience fields of every step, is exactly
    the factor GTPO applied to OpenRLHF's group_norm advantages."""
    records = gtpo_run.experiences()
    assert len(records) == STEPS
    h_ini = records[0]["h_ini"]
    assert h_ini < math.log(2)  # Eq. 6's filtering branch (see the temperature in base_argv)
    seen = defaultdict(int)
    deltas = []
    for record in records:
        rows = completions_of(record)
        assert sorted(rows) == list(range(len(rows))) and len(rows) == 4 * G
        terms = paper_terms(record, G, h_ini)
        check_factors(record, terms)
        for index, (lam, delta) in terms.items():
            deltas.append(delta)
            advantage = rows[index]["advantage"]
            sign = math.copysign(1, advantage) if advantage else 0
            for w in lam:
                seen[(w, sign)] += 1
    # Both sides of Eq. 5 happened: protected tokens of right (λ = 2) and wrong (λ = 0)
    # completions, next to ordinary ones.
    assert seen[(2.0, 1.0)] > 0 and seen[(0.0, -1.0)] > 0 and seen[(1.0, 1.0)] > 0
    # Eq. 6 both ways: some completions filtered (⟨H⟩ > ln 2), most kept.
    assert 0 < deltas.count(0.0) < len(deltas) / 2


def test_micro_batches_straddle_prompt_groups(gtpo_run):
    record = gtpo_run.experiences()[0]
    groups_per_batch = [{i // G for i in mb["index"]} for mb in record["micro_batches"]]
    assert any(len(groups) > 1 for groups in groups_per_batch)


def test_logged_entropy_loss_is_eq7_completion_mean(gtpo_run):
    """OpenRLHF's entropy_loss (training forward, reweighted by GTPO) equals gtpo/entropy_mean
    (experience forward, same weights) at every step: the penalty is (1/N) Σ_i ⟨H⟩_i."""
    logged = scalars(gtpo_run)
    assert sorted(logged["train/entropy_loss"]) == list(range(1, STEPS + 1))
    for step, value in logged["train/gtpo/entropy_mean"].items():
        assert logged["train/entropy_loss"][step] == pytest.approx(value, rel=1e-3)
    records = gtpo_run.experiences()
    for step, record in enumerate(records, start=1):
        entropy = torch.cat(record["entropy"]).mean().item()
        assert logged["train/gtpo/entropy_mean"][step] == pytest.approx(entropy, rel=1e-5)


def test_gtpo_metrics_logged_every_step(gtpo_run):
    logged = scalars(gtpo_run)
    for name in ("conflict_frac_pos", "conflict_frac_neg", "filtered_frac", "entropy_mean"):
        assert sorted(logged[f"train/gtpo/{name}"]) == list(range(1, STEPS + 1)), name
    h_ini = gtpo_run.experiences()[0]["h_ini"]
    logged_h_ini = logged["train/gtpo/h_ini"]
    assert sorted(logged_h_ini) == list(range(1, STEPS + 1))
    assert list(logged_h_ini.values()) == pytest.approx([h_ini] * STEPS, rel=1e-6)


def test_h_ini_measured_once_before_training(gtpo_run, fixture_files):
    """H_ini comes from the first --gtpo.h_ini_prompts prompts before any update, and equals
    the tiny model's mean completion entropy recomputed here from its initial weights."""
    assert gtpo_run.log.count("GTPO: H_ini = ") == 1
    assert "measured on 4 prompts × 4 completions" in gtpo_run.log
    # Sec. 4.2: the first training prompts. The measurement's prompts are exactly the ones of
    # step 1's rollout, which comes next (the last call finds the dataloader exhausted).
    generated = [prompts for prompts in gtpo_run.generated_prompts() if prompts]
    assert len(generated) == 1 + STEPS
    assert len(generated[0]) == 4 and set(generated[0]) == set(generated[1])
    records = gtpo_run.experiences()
    h_ini = records[0]["h_ini"]
    assert all(r["h_ini"] == h_ini for r in records)
    # Step 1 uses the initial weights too: its entropies come from the same forward.
    from transformers import AutoModelForCausalLM

    from gtpo import completion_entropy, token_entropy

    model = AutoModelForCausalLM.from_pretrained(fixture_files.model, dtype=torch.bfloat16)
    first = records[0]
    for mb, recorded in zip(first["micro_batches"], first["entropy"], strict=True):
        with torch.no_grad():
            logits = model(mb["sequences"]).logits / TEMPERATURE  # the policy that sampled
        mask = mb["action_mask"].bool()
        entropy = token_entropy(logits)[:, :-1][:, -mask.shape[1] :]
        torch.testing.assert_close(completion_entropy(entropy, mask), recorded, atol=0.03, rtol=0)


def test_trained_weights_reach_the_rollout_engine(gtpo_run, fixture_files):
    from safetensors.torch import load_file

    initial = load_file(fixture_files.model / "model.safetensors")
    final = load_file(gtpo_run.out / "final" / "model.safetensors")
    synced = gtpo_run.rollout_weights()
    assert len(synced) == STEPS  # one broadcast after every step
    names = list(synced[-1])  # the engine's parameters (the tied lm_head is not one of them)
    assert set(names) <= set(final) and set(names) <= set(initial)
    for name in names:
        assert torch.equal(synced[-1][name], final[name].to(synced[-1][name].dtype)), name
    changed = {n for n in names if not torch.equal(initial[n].to(final[n].dtype), final[n])}
    # RMSNorm weights start at 1.0, where bf16 steps by 2^-7: three small updates round away.
    assert changed >= {n for n in names if not n.endswith("norm.weight")}
    assert any(not torch.equal(synced[0][n], synced[1][n]) for n in names)


# name: (flags set or added, switches added, logical GPUs Ray needs)
#
# H_ini's forwards over two ranks (2 ranks under ZeRO-3 with micro-batches that split 2 and 1;
# fewer micro-batches than ranks) no longer have runs of their own here: every rank's count of
# forwards, whatever the prompts, G, micro-batch size and ranks, is checked against OpenRLHF's
# own dispatch code in the default stage (test_orl_h_ini_dispatch.py), and uneven forwards
# under ZeRO-3's all-gather run end to end in test_orl_real_model.py's
# test_two_ranks_zero3_with_uneven_experience_forwards (two ranks, 7 micro-batches split 4 and 3).
VARIANTS = {
    # recipes/grpo-ab.md's GRPO runs in their layout: the reference model colocated with the
    # policy and the engine on one GPU, sleep mode (the docs run dry-runs them, covered by this).
    "grpo-reference-kl": (
        {
            "--gtpo.algo": "grpo",
            "--algo.kl.init_coef": "0.01",
            "--ref.num_nodes": "1",
            "--ref.num_gpus_per_node": "1",
        },
        ["--train.colocate_all", "--vllm.enable_sleep", "--ds.enable_sleep"],
        1,
    ),
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_variant_completes_its_steps(variant, fixture_files, reward_server, tmp_path):
    overrides, switches, num_gpus = VARIANTS[variant]
    argv = base_argv(fixture_files, reward_server.url, tmp_path)
    for name, value in overrides.items():
        argv = flag(argv, name, value)
    run = run_fit([*argv, *switches], tmp_path, num_gpus=num_gpus)
    assert run.returncode == 0, run.failure()
    records = run.experiences()
    assert len(records) == STEPS
    assert f"Global step {STEPS}" in run.log
    assert len(run.rollout_weights()) == STEPS
    if "--gtpo.h_ini_prompts" in overrides:
        prompts = int(overrides["--gtpo.h_ini_prompts"])
        assert f"measured on {prompts} prompts × {G} completions" in run.log
    if variant == "grpo-reference-kl":
        # The baseline: OpenRLHF's advantages untouched (λ ≡ 1, δ ≡ 1) and a KL against the
        # reference model that grows once the policy has moved; δ is off, so no H_ini.
        assert "GTPO: H_ini = " not in run.log
        for record in records:
            for mb, group_norm in zip(record["micro_batches"], record["group_norm"], strict=True):
                assert torch.equal(mb["advantages"], group_norm)
        assert scalars(run)["train/kl"][STEPS] > 0


def rescore(url: str, model: Path, records: list[dict]) -> tuple[list[float], list[float]]:
    """(rewards the run trained on, the server's rewards for the same completions now)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model)
    trained, fresh = [], []
    for record in records:
        for mb in record["micro_batches"]:
            for r in range(len(mb["index"])):
                real = mb["sequences"][r][mb["attention_mask"][r].bool()]  # without padding
                query = tokenizer.decode(real, skip_special_tokens=False)
                body = {
                    "query": [query],
                    "prompts": [mb["prompts"][r]],
                    "labels": [mb["labels"][r]],
                }
                answer = httpx.post(f"{url}/get_reward", json=body, timeout=30).json()
                fresh.append(float(answer["rewards"][0]))
                trained.append(float(mb["rewards"].flatten()[r]))
    return trained, fresh


def run_fit_acting_after_step_1(argv: list[str], out: Path, action) -> FitRun:
    """run_fit, calling `action()` in another thread once the run's log shows step 1 done."""

    def watch() -> None:
        log = out / "run.log"
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if log.exists() and "Global step 1" in log.read_text():
                action()
                return
            time.sleep(0.2)

    thread = threading.Thread(target=watch)
    thread.start()
    try:
        return run_fit(argv, out)
    finally:
        thread.join()


# The authors' variant, the advantage form of the entropy term with dr_grpo's advantages
# (`recipes/paper.md`'s second run, which the docs run dry-runs because of this run).
AUTHORS_VARIANT = {"--algo.advantage.estimator": "dr_grpo", "--gtpo.entropy_form": "advantage"}


@pytest.fixture(scope="module")
def faulted_run(fixture_files, tmp_path_factory):
    """The authors' variant (`AUTHORS_VARIANT`) with --reward.remote_url naming two live servers,
    each getting half of the rollout's requests. Right after step 1 the second is killed
    (connections refused from then on) and the first is stopped for 10 s, then started again.
    One fit() start (about a minute of the slow stage) for the checks of both: the loss form
    and the servers' faults touch no common code, the advantages are computed from whatever
    rewards the rollout got."""
    from gtpo.reward_client import request_count

    tmp_path = tmp_path_factory.mktemp("faulted")
    with (
        LocalRewardServer(tmp_path / "a.log") as first,
        LocalRewardServer(tmp_path / "b.log") as second,
    ):
        first.wait()
        second.wait()
        argv = with_flags(base_argv(fixture_files, first.url, tmp_path), AUTHORS_VARIANT)
        urls = f"{first.url}/get_reward,{second.url}/get_reward"
        argv = flag(argv, "--reward.remote_url", urls)
        served: dict[str, float] = {}
        outage: dict[str, float] = {}

        def kill_second_and_pause_first() -> None:
            served["first"], served["second"] = request_count(first.url), request_count(second.url)
            second.proc.kill()  # no goodbye: connections refused from now on
            first.stop()
            outage["start"] = time.monotonic()
            time.sleep(10)
            first.start()
            first.wait()
            outage["end"] = time.monotonic()

        run = run_fit_acting_after_step_1(argv, tmp_path, kill_second_and_pause_first)
        assert run.returncode == 0, run.failure()
        run.served, run.outage = served, outage
        run.rescored = rescore(first.url, fixture_files.model, run.experiences())
    return run


def test_a_reward_server_that_dies_and_one_down_for_10s_are_ridden_out(faulted_run):
    """The rollout actors keep retrying, the run completes on the first server, and every
    sample is rewarded exactly as the server scores it."""
    served, outage = faulted_run.served, faulted_run.outage
    # H_ini's 4 prompts and step 1's 4, G = 4 each: 32 requests, alternating servers.
    assert served["first"] + served["second"] >= 32
    assert abs(served["first"] - served["second"]) <= 2, served
    assert outage["end"] - outage["start"] >= 10
    assert "unreachable" in faulted_run.log and "answers again after" in faulted_run.log
    assert len(faulted_run.experiences()) == STEPS
    trained, fresh = faulted_run.rescored
    assert len(trained) == STEPS * 4 * G
    assert trained == fresh


def test_reward_server_that_stays_down_stops_the_run(fixture_files, reward_server, tmp_path):
    """Nothing listens at the reward URL: the run stops with an error naming it, after
    --gtpo.reward_timeout, before training on unscored samples."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead_url = f"http://127.0.0.1:{probe.getsockname()[1]}"  # closed again: nobody listens
    argv = flag(base_argv(fixture_files, dead_url, tmp_path), "--gtpo.reward_timeout", "4")
    started = time.monotonic()
    run = run_fit(argv, tmp_path, timeout=180)
    assert run.returncode == 1, run.failure()
    assert f"training stopped: reward server {dead_url}/get_reward did not answer" in run.log
    assert "raise --gtpo.reward_timeout" in run.log
    assert not run.experiences()  # no step ran
    assert time.monotonic() - started < 120


def test_fixture_prompts_carry_the_paper_instruction(fixture_files):
    from gtpo.data.prompt import SYSTEM_PROMPT

    rows = [json.loads(line) for line in fixture_files.prompts.read_text().splitlines()]
    assert all(r["prompt"].startswith(SYSTEM_PROMPT) and r["label"] for r in rows)


def test_authors_variant_dr_grpo_and_advantage_form(faulted_run):
    """`--algo.advantage.estimator dr_grpo --gtpo.entropy_form advantage` in the real loop:
    OpenRLHF's advantages are R_i − group mean (no std), the final ones are
    λ_{i,t}·δ_i·(A_i − γ⟨H⟩_i) from the paper's loops, and OpenRLHF's entropy loss is off."""
    run = faulted_run
    records = run.experiences()
    assert len(records) == STEPS
    h_ini, gamma = records[0]["h_ini"], 0.1
    kept = 0
    for record in records:
        rows = completions_of(record)
        rewards = {}
        for mb in record["micro_batches"]:
            for r, index in enumerate(mb["index"]):
                rewards[index] = float(mb["rewards"][r])
        expected: dict[int, list[float]] = {}
        for first in range(0, len(rows), G):
            group = [rows[i] for i in range(first, first + G)]
            mean = sum(rewards[first + k] for k in range(G)) / G
            for k, c in enumerate(group):  # dr_grpo: centred, not divided by the std
                assert c["advantage"] == pytest.approx(rewards[first + k] - mean, abs=1e-5)
            lam = reference_weights([c["tokens"] for c in group], [c["advantage"] for c in group])
            for k, c in enumerate(group):
                a = c["advantage"] - gamma * c["entropy"]
                kept += reference_delta(c["entropy"], h_ini) == 1
                expected[first + k] = [w * reference_delta(c["entropy"], h_ini) * a for w in lam[k]]
        for mb in record["micro_batches"]:
            mask = mb["action_mask"].bool()
            for r, index in enumerate(mb["index"]):
                want = torch.tensor(expected[index], dtype=mb["advantages"].dtype)
                torch.testing.assert_close(mb["advantages"][r, mask[r]], want, rtol=0, atol=1e-5)
    assert kept > 0, "every completion filtered: the comparison would be vacuous"
    logged = scalars(run)
    assert "train/entropy_loss" not in logged  # OpenRLHF's entropy coefficient is unset
    assert sorted(logged["train/gtpo/entropy_mean"]) == list(range(1, STEPS + 1))
