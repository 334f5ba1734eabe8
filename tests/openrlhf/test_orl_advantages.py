"""GTPO's advantage weighting on real OpenRLHF Experience objects.

Rollout samples are built by OpenRLHF's own SamplesGenerator._process_response_into_experience,
split into micro-batches by OpenRLHF's split_rollout_samples (fixed size, straddling prompt
groups; and dynamic batching, non-contiguous rows) or shuffled by hand, and given group_norm
advantages by OpenRLHF's RemoteExperienceMaker. The weighting must leave exactly
group_norm × λ·δ, with λ and δ computed directly by the core on the rollout in prompt order.
"""

from __future__ import annotations

import copy
import math
import random
from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("openrlhf")
pytest.importorskip("deepspeed")

from openrlhf.trainer.ppo_utils.experience import Experience
from openrlhf.trainer.ppo_utils.experience_maker import RemoteExperienceMaker
from openrlhf.trainer.ppo_utils.kl_controller import FixedKLController
from openrlhf.trainer.ppo_utils.samples_generator import SamplesGenerator
from paper_reference import reference_delta, reference_weights

from gtpo import GTPOConfig, conflict_weights, entropy_filter
from gtpo.openrlhf import compat
from gtpo.openrlhf import step as step_module
from gtpo.openrlhf.run_args import gtpo_config
from gtpo.openrlhf.step import weight_advantages

G = 4
PAD = 0


def make_rollout(num_prompts: int, seed: int):
    """OpenRLHF rollout samples plus the ground truth the test checks against."""
    rng = random.Random(seed)
    samples, completions, rewards, entropies = [], [], [], []
    for k in range(num_prompts):
        prompt = [rng.randint(10, 20) for _ in range(rng.randint(2, 6))]
        group_rewards = [float(rng.randint(0, 2)) for _ in range(G)]
        if k == 1:
            group_rewards = [1.0] * G  # std 0: every A_i = 0, nothing to protect or penalise
        for j in range(G):
            body = [rng.randint(1, 3) for _ in range(rng.randint(1, 9))]  # tiny vocab: collisions
            if j % 2 == 0:
                body[:2] = [5, 6][: len(body)]  # shared prefix in half the group
            body[-1] = 7  # shared end-of-answer token
            response = {
                "observation_tokens": prompt + body,
                "action_ranges": [(len(prompt), len(prompt) + len(body))],
                "reward": group_rewards[j],
                "scores": group_rewards[j],
                "rollout_log_probs": None,
                "prompt": f"prompt {k}",
                "label": "x",
                "truncated": False,
                "extra_logs": {},
            }
            samples.append(SamplesGenerator._process_response_into_experience(None, response))
            completions.append(body)
            rewards.append(group_rewards[j])
            entropies.append(rng.uniform(0.3, 1.1))  # ⟨H⟩_i on both sides of ln 2
    return samples, completions, torch.tensor(rewards), torch.tensor(entropies)


def core_factors(completions, rewards, entropies, h_ini, conflict, filter_mode):
    """λ [N, L] and δ [N] straight from the core, on the rollout in prompt order."""
    length = max(len(c) for c in completions)
    ids = torch.zeros(len(completions), length, dtype=torch.long)
    mask = torch.zeros(len(completions), length, dtype=torch.bool)
    for i, c in enumerate(completions):
        ids[i, : len(c)] = torch.tensor(c)
        mask[i, : len(c)] = True
    grouped = rewards.reshape(-1, G)
    advantages = (
        (grouped - grouped.mean(-1, keepdim=True)) / (grouped.std(-1, keepdim=True) + 1e-9)
    ).reshape(-1)
    weights = conflict_weights(ids, mask, advantages, G, 2.0) if conflict else mask.float()
    if filter_mode == "off":
        keep = torch.ones(len(completions))
    else:
        keep = entropy_filter(entropies, h_ini if filter_mode == "auto" else 0.0)
    return weights, keep


def maker_for(args) -> RemoteExperienceMaker:
    strategy = SimpleNamespace(args=args)
    tokenizer = SimpleNamespace(pad_token_id=PAD)
    return RemoteExperienceMaker(
        None, None, None, None, FixedKLController(0.0), strategy, tokenizer
    )


def with_group_norm(maker: RemoteExperienceMaker, experiences):
    for e in experiences:
        # What make_experience leaves when there is no reference model.
        e.kl = torch.zeros_like(e.action_mask, dtype=torch.float32)
    return maker.compute_advantages_and_returns(experiences)


def shuffled_micro_batches(samples, seed: int):
    rows = list(range(len(samples)))
    random.Random(seed).shuffle(rows)
    batches = []
    for start in range(0, len(rows), 3):
        part = []
        for r in rows[start : start + 3]:
            sample = copy.deepcopy(samples[r])
            sample.index = [r]
            part.append(sample)
        batches.append(Experience.concat_experiences(part, PAD))
    return batches


SPLITS = {
    "fixed": ("--rollout.micro_batch_size", "3"),
    "dynamic": (
        "--train.dynamic_batch_enable",
        "--rollout.max_tokens_per_gpu",
        "40",
        "--actor.num_gpus_per_node",
        "2",
    ),
    "shuffled": (),
}


@pytest.mark.parametrize("chunked", [False, True], ids=["one-chunk", "group-per-chunk"])
@pytest.mark.parametrize("split", sorted(SPLITS))
@pytest.mark.parametrize(
    ("conflict", "filter_mode"), [(True, "auto"), (True, "off"), (False, "on")]
)
def test_weighted_advantages_are_group_norm_times_core_weights(
    openrlhf_args, monkeypatch, split, conflict, filter_mode, chunked
):
    """λ·δ on every action token of every micro-batch; with `chunked`, the controller works one
    prompt group at a time (as it does on a large rollout) and gets the same result."""
    if chunked:
        monkeypatch.setattr(step_module, "CHUNK_TOKENS", 1)
    args = openrlhf_args(*SPLITS[split])
    maker = maker_for(args)
    samples, completions, rewards, entropies = make_rollout(num_prompts=5, seed=7)
    if split == "shuffled":
        experiences = shuffled_micro_batches(samples, seed=3)
    else:
        experiences = maker.split_rollout_samples(samples)

    orders = [list(e.index) for e in experiences]
    assert any(len({i // G for i in o}) > 1 for o in orders), "no micro-batch straddles groups"
    if split != "fixed":
        assert any(o != list(range(o[0], o[0] + len(o))) for o in orders), "rows are contiguous"

    experiences = with_group_norm(maker, experiences)
    group_norm = [e.advantages.clone() for e in experiences]
    per_batch_entropy = [entropies[torch.tensor(o)] for o in orders]
    h_ini = 0.5  # below ln 2: Eq. 6 filters

    metrics = weight_advantages(
        experiences,
        per_batch_entropy,
        G,
        h_ini,
        GTPOConfig(no_conflict=not conflict, conflict_weight=2.0, entropy_filter=filter_mode),
    )

    weights, keep = core_factors(completions, rewards, entropies, h_ini, conflict, filter_mode)
    if conflict:
        assert (weights == 0).any() and (weights == 2).any(), "test data has no conflicts"
    if filter_mode != "off":
        assert (keep == 0).any() and (keep == 1).any(), "test data filters nothing"
    for e, before, order in zip(experiences, group_norm, orders, strict=True):
        mask = e.action_mask.bool()
        for r, i in enumerate(order):
            n_tokens = len(completions[i])
            assert int(mask[r].sum()) == n_tokens
            expected = before[r][mask[r]] * (weights[i, :n_tokens] * keep[i])
            assert torch.equal(e.advantages[r][mask[r]], expected)
            # Prompt and padding positions (masked out of the loss) are left as they were.
            assert torch.equal(e.advantages[r][~mask[r]], before[r][~mask[r]])

    real = weights > 0
    assert metrics["filtered_frac"] == pytest.approx(float((keep == 0).float().mean()))
    assert metrics["entropy_mean"] == pytest.approx(float(entropies.mean()))
    if not conflict:
        assert metrics["conflict_frac_pos"] == metrics["conflict_frac_neg"] == 0.0
    else:
        assert 0 < metrics["conflict_frac_pos"] <= 1 and real.any()


def test_a_group_whose_rows_hold_two_prompts_is_refused(openrlhf_args):
    """A release that reordered rollout rows would make λ compare completions of different
    prompts; the weighting refuses instead of computing it silently wrong."""
    maker = maker_for(openrlhf_args("--rollout.micro_batch_size", "3"))
    samples, _, _, entropies = make_rollout(num_prompts=2, seed=1)
    samples[G - 1], samples[G] = samples[G], samples[G - 1]  # one row of each group swapped
    experiences = with_group_norm(maker, maker.split_rollout_samples(samples))
    per_batch = [entropies[torch.tensor(list(e.index))] for e in experiences]
    with pytest.raises(ValueError, match=r"rows 0\.\.3 .* hold 2 different prompts"):
        weight_advantages(experiences, per_batch, G, 0.5, GTPOConfig())


def test_rows_that_do_not_tile_the_rollout_are_refused(openrlhf_args):
    maker = maker_for(openrlhf_args("--rollout.micro_batch_size", "3"))
    samples, _, _, entropies = make_rollout(num_prompts=2, seed=1)
    experiences = with_group_norm(maker, maker.split_rollout_samples(samples))
    dropped = experiences[:-1]  # a lost micro-batch leaves a group incomplete
    with pytest.raises(ValueError, match="n_samples_per_prompt"):
        weight_advantages(
            dropped, [entropies[: len(e.index)] for e in dropped], G, 0.5, GTPOConfig()
        )


def test_h_ini_above_ln2_keeps_every_completion(openrlhf_args):
    maker = maker_for(openrlhf_args("--rollout.micro_batch_size", "3"))
    samples, _, _, entropies = make_rollout(num_prompts=3, seed=5)
    experiences = with_group_norm(maker, maker.split_rollout_samples(samples))
    parts = [entropies[torch.tensor(e.index)] for e in experiences]
    metrics = weight_advantages(experiences, parts, G, 0.9, GTPOConfig(no_conflict=True))
    assert metrics["filtered_frac"] == 0.0


def _paper_advantages(rewards: list[float], estimator: str) -> list[float]:
    """A_i in plain Python: (R_i − mean) / (std + 1e-9) (group_norm), else R_i − mean (dr_grpo)."""
    out = []
    for start in range(0, len(rewards), G):
        group = rewards[start : start + G]
        mean = sum(group) / G
        std = math.sqrt(sum((r - mean) ** 2 for r in group) / (G - 1))
        out += [(r - mean) / (std + 1e-9) if estimator == "group_norm" else r - mean for r in group]
    return out


@pytest.mark.parametrize("estimator", ["group_norm", "dr_grpo"])
@pytest.mark.parametrize("form", ["penalty", "advantage"])
def test_final_advantages_are_lambda_delta_times_the_forms_advantage(
    openrlhf_args, estimator, form
):
    """OpenRLHF's own estimator, then GTPO's weighting, against the paper's loops: the final
    advantage of token t of completion i is λ_{i,t}·δ_i·A_i (penalty) or λ_{i,t}·δ_i·(A_i −
    γ⟨H⟩_i) (advantage), λ from the signs of A_i, A_i from the estimator's definition."""
    args = openrlhf_args(
        "--rollout.micro_batch_size", "3", "--algo.advantage.estimator", estimator,
        "--gtpo.entropy_form", form,
    )  # fmt: skip
    maker = maker_for(args)
    samples, completions, rewards, entropies = make_rollout(num_prompts=5, seed=7)
    experiences = with_group_norm(maker, maker.split_rollout_samples(samples))
    advantages = _paper_advantages(rewards.tolist(), estimator)
    # OpenRLHF's estimator is the definition (dr_grpo: centred, not divided by the std) ...
    for e in experiences:
        first = compat.first_action_value(e.advantages, e.action_mask.bool())
        assert first.tolist() == pytest.approx([advantages[i] for i in e.index], abs=1e-6)
    # ... and the two estimators differ on this data (else the comparison is moot).
    other = _paper_advantages(
        rewards.tolist(), "dr_grpo" if estimator == "group_norm" else "group_norm"
    )
    assert max(abs(a - b) for a, b in zip(advantages, other, strict=True)) > 0.1
    parts = [entropies[torch.tensor(e.index)] for e in experiences]
    h_ini, gamma = 0.5, 0.1
    weight_advantages(experiences, parts, G, h_ini, gtpo_config(args))

    weights = []
    for start in range(0, len(completions), G):
        group = slice(start, start + G)
        weights += reference_weights(completions[group], advantages[group], 2.0)
    assert {0.0, 2.0} <= {w for row in weights for w in row}, "no conflicts in the test data"
    keep = [reference_delta(float(h), h_ini) for h in entropies]
    assert 0.0 in keep and 1.0 in keep
    for e in experiences:
        mask = e.action_mask.bool()
        for r, i in enumerate(e.index):
            a = advantages[i] - (gamma * float(entropies[i]) if form == "advantage" else 0.0)
            expected = torch.tensor([w * keep[i] * a for w in weights[i]])
            assert torch.allclose(e.advantages[r][mask[r]].float(), expected, atol=1e-5), i
    assert args.actor.entropy_coef == (None if form == "advantage" else pytest.approx(-gamma))
