"""The trainer's loss is the `gtpo` core objective: on a batch captured from a real step, the
loss value and the parameter update equal those recomputed independently (plain log_softmax,
explicit entropy, Eq. 7 written out per completion)."""

from __future__ import annotations

import copy
import random

import pytest
import torch

from gtpo import LN2, GTPOConfig, conflict_weights, entropy_filter, grpo_loss, gtpo_loss
from gtpo.demo.model import Policy, build_model, completion_logits, left_pad
from gtpo.demo.run import make_policy
from gtpo.demo.task import corpus, demonstration, make_split
from gtpo.demo.tokenizer import build_tokenizer
from gtpo.demo.trainer import RLConfig, group_advantages, measure_h_ini, rl_step
from gtpo.demo.warmstart import warm_start
from gtpo.reward_client import Rewards
from reward_server.checker.extract import extract_answer
from reward_server.checker.format import score_format

G = 8


class LocalScorer:
    """Stands in for the HTTP client in these unit tests (the e2e test uses the real server):
    the server's own format and answer rules, no network."""

    def score(self, prompts, responses, labels, per_request):
        fmt, acc = [], []
        for response, label in zip(responses, labels, strict=True):
            response = response.removesuffix("<|endoftext|>")
            f = score_format(response).score
            fmt.append(f)
            acc.append(10.0 if f == 10.0 and extract_answer(response) == label else 0.0)
        return Rewards([f + a for f, a in zip(fmt, acc, strict=True)], fmt, acc)


@pytest.fixture(scope="module")
def setup():
    torch.set_num_threads(1)
    split = make_split(400, 16)
    tokenizer = build_tokenizer(corpus(split.train))
    policy = make_policy(build_model(tokenizer.get_vocab_size(), 0, 1, seed=0), tokenizer)
    assert (policy.pad_id, policy.eos_id) == (0, 1)
    # A little SFT so that completions are formatted and groups have mixed rewards.
    warm_start(
        policy.model, policy.encode, split.train, policy.eos_id, policy.pad_id, steps=40, seed=0
    )
    return policy, split


def _step(policy: Policy, problems, cfg: RLConfig, h_ini: float):
    """One trainer step with plain SGD(lr=1), so the parameter change is minus the gradient."""
    model_before = copy.deepcopy(policy.model)
    optimizer = torch.optim.SGD(policy.model.parameters(), lr=1.0)
    generator = torch.Generator().manual_seed(3)
    metrics, batch = rl_step(policy, optimizer, problems, LocalScorer(), cfg, h_ini, generator)
    update = [
        (after.detach() - before.detach())
        for after, before in zip(policy.model.parameters(), model_before.parameters(), strict=True)
    ]
    return model_before, metrics, batch, update


def _reference_terms(model, batch, pad_id):
    """log π and ⟨H⟩ computed the textbook way (no fused kernel)."""
    logits, ids, mask = completion_logits(model, batch.prompts, batch.completions, pad_id)
    log_p = torch.log_softmax(logits.double(), dim=-1)
    logprobs = log_p.gather(-1, ids[..., None]).squeeze(-1)
    token_entropy = -(log_p.exp() * log_p).sum(-1)
    mean_entropy = (token_entropy * mask).sum(1) / mask.sum(1)
    return logprobs, mean_entropy, ids, mask


def _eq7_by_hand(logprobs, mean_entropy, advantages, mask, weights, keep, gamma):
    """J_GTPO = (1/G) Σ_i [ (δ_i A_i / |o_i|) Σ_t λ_{i,t} r_{i,t} − γ ⟨H⟩_i ], ratio r = 1
    in value but carrying the gradient of log π (r = exp(logp − logp.detach()))."""
    total = 0.0
    n = len(advantages)
    for i in range(n):
        length = int(mask[i].sum())
        ratio = torch.exp(logprobs[i, :length] - logprobs[i, :length].detach())
        term = keep[i] * advantages[i] / length * (weights[i, :length] * ratio).sum()
        total = total + term - gamma * mean_entropy[i]
    return -total / n


def _grad(model, loss) -> list[torch.Tensor]:
    model.zero_grad(set_to_none=True)
    loss.backward(retain_graph=True)  # several objectives share one forward pass
    return [p.grad.detach().clone() for p in model.parameters()]


def _assert_update_is_minus_grad(update, grads):
    # The trainer runs in fp32, the reference in fp64: compare with a tolerance on the scale.
    flat_update = torch.cat([u.flatten() for u in update]).double()
    flat_grad = torch.cat([g.flatten() for g in grads]).double()
    assert flat_grad.norm() > 0
    assert torch.allclose(flat_update, -flat_grad, atol=1e-5 * float(flat_grad.abs().max()))


def _problems(split, n=4):
    return random.Random(0).sample(split.train, n)


@pytest.mark.parametrize("h_ini", [0.3, 1.0])
def test_gtpo_step_is_eq7_of_the_core(setup, h_ini):
    policy, split = setup
    policy = copy.copy(policy)
    policy.model = copy.deepcopy(policy.model)
    cfg = RLConfig(method="gtpo", group_size=G, max_grad_norm=1e9, gtpo=GTPOConfig(gamma=0.1))
    before, metrics, batch, update = _step(policy, _problems(split), cfg, h_ini)
    assert float((batch.advantages != 0).float().mean()) > 0  # the batch has a signal

    logprobs, mean_entropy, ids, mask = _reference_terms(before, batch, policy.pad_id)
    weights = conflict_weights(ids, mask, batch.advantages, G)
    keep = entropy_filter(mean_entropy, h_ini)
    assert (weights != mask.float()).any(), "no conflict tokens: the check would be vacuous"
    if h_ini < LN2:
        assert float(keep.min()) == 0.0, "nothing filtered: the check would be vacuous"

    core, core_metrics = gtpo_loss(
        logprobs, logprobs.detach(), batch.advantages.double(), mask, weights.double(),
        keep.double(), mean_entropy, gamma=0.1,
    )  # fmt: skip
    by_hand = _eq7_by_hand(
        logprobs, mean_entropy, batch.advantages.double(), mask, weights, keep, 0.1
    )
    assert metrics["loss"] == pytest.approx(float(core.detach()), abs=1e-5)
    assert float(core.detach()) == pytest.approx(float(by_hand.detach()), abs=1e-9)
    for key in ("conflict_frac_pos", "conflict_frac_neg", "filtered_frac"):
        assert metrics[key] == pytest.approx(core_metrics[key])
    _assert_update_is_minus_grad(update, _grad(before, by_hand))


def test_gtpo_step_in_advantage_form_is_the_cores_advantage_form(setup):
    policy, split = setup
    policy = copy.copy(policy)
    policy.model = copy.deepcopy(policy.model)
    knobs = GTPOConfig(gamma=0.1, entropy_form="advantage")
    cfg = RLConfig(method="gtpo", group_size=G, max_grad_norm=1e9, gtpo=knobs)
    assert cfg.label == "gtpo-adv"
    assert RLConfig(gtpo=knobs.with_ablation("no-filter")).label == "gtpo-adv-no-filter"
    # H_ini above ln 2: δ ≡ 1 (with H_ini = 0.3 this batch is all filtered, and the advantage
    # form, which has no separate entropy term, would leave no gradient to compare).
    before, metrics, batch, update = _step(policy, _problems(split), cfg, 1.0)

    logprobs, mean_entropy, ids, mask = _reference_terms(before, batch, policy.pad_id)
    weights = conflict_weights(ids, mask, batch.advantages, G).double()
    keep = entropy_filter(mean_entropy, 1.0).double()
    args = (logprobs, logprobs.detach(), batch.advantages.double(), mask, weights, keep)
    core, _ = gtpo_loss(*args, mean_entropy, gamma=0.1, entropy_form="advantage")
    penalty, _ = gtpo_loss(*args, mean_entropy, gamma=0.1)
    assert metrics["loss"] == pytest.approx(float(core.detach()), abs=1e-5)
    assert float(core.detach()) != pytest.approx(float(penalty.detach()), abs=1e-4)
    _assert_update_is_minus_grad(update, _grad(before, core))


def test_grpo_step_is_eq1_of_the_core_and_differs_from_gtpo(setup):
    policy, split = setup
    policy = copy.copy(policy)
    policy.model = copy.deepcopy(policy.model)
    cfg = RLConfig(method="grpo", group_size=G, max_grad_norm=1e9)
    before, metrics, batch, update = _step(policy, _problems(split), cfg, 0.3)

    logprobs, mean_entropy, ids, mask = _reference_terms(before, batch, policy.pad_id)
    core, _ = grpo_loss(logprobs, logprobs.detach(), batch.advantages.double(), mask)
    ones = torch.ones_like(batch.advantages.double())
    by_hand = _eq7_by_hand(
        logprobs, mean_entropy, batch.advantages.double(), mask, mask.double(), ones, 0.0
    )
    assert metrics["loss"] == pytest.approx(float(core.detach()), abs=1e-6)
    assert metrics["entropy_mean"] == pytest.approx(float(mean_entropy.detach().mean()), abs=1e-5)
    grpo_grads = _grad(before, core)
    _assert_update_is_minus_grad(update, grpo_grads)
    torch.testing.assert_close(_grad(before, by_hand), grpo_grads)

    # Same batch, GTPO's objective: λ, δ and γ change the update (else the comparison is moot).
    weights = conflict_weights(ids, mask, batch.advantages, G)
    gtpo, _ = gtpo_loss(
        logprobs, logprobs.detach(), batch.advantages.double(), mask, weights.double(),
        entropy_filter(mean_entropy, 0.3).double(), mean_entropy,
    )  # fmt: skip
    gtpo_grads = _grad(before, gtpo)
    difference = sum(float((a - b).norm()) for a, b in zip(gtpo_grads, grpo_grads, strict=True))
    assert difference > 1e-3


def test_grpo_with_kl_adds_beta_times_the_kl_to_the_reference(setup):
    """Eq. 1 with β > 0: the loss and the update are GRPO's plus β · KL(π_θ ‖ π_ref), with the
    per-token estimator exp(ref − logp) − (ref − logp) − 1 averaged per completion."""
    policy, split = setup
    policy = copy.copy(policy)
    policy.model = copy.deepcopy(policy.model)
    # A reference that differs from the policy, so the KL and its gradient are not zero.
    reference = build_model(policy.model.config.vocab_size, 0, 1, seed=5).eval()
    beta = 0.5
    cfg = RLConfig(method="grpo", group_size=G, max_grad_norm=1e9, kl_coef=beta)
    assert cfg.label == "grpo-kl0.5"
    before = copy.deepcopy(policy.model)
    optimizer = torch.optim.SGD(policy.model.parameters(), lr=1.0)
    generator = torch.Generator().manual_seed(3)
    metrics, batch = rl_step(
        policy, optimizer, _problems(split), LocalScorer(), cfg, 0.3, generator, reference
    )
    update = [
        (a.detach() - b.detach())
        for a, b in zip(policy.model.parameters(), before.parameters(), strict=True)
    ]
    logprobs, mean_entropy, _, mask = _reference_terms(before, batch, policy.pad_id)
    with torch.no_grad():
        ref_logprobs, _, _, _ = _reference_terms(reference, batch, policy.pad_id)
    kl = 0.0
    for i in range(len(batch.advantages)):
        length = int(mask[i].sum())
        d = ref_logprobs[i, :length] - logprobs[i, :length]
        kl = kl + (torch.exp(d) - d - 1).mean()
    kl = kl / len(batch.advantages)
    ones = torch.ones_like(batch.advantages.double())
    grpo = _eq7_by_hand(
        logprobs, mean_entropy, batch.advantages.double(), mask, mask.double(), ones, 0.0
    )
    expected = grpo + beta * kl
    assert float(kl.detach()) > 1e-3
    assert metrics["kl"] == pytest.approx(float(kl.detach()), rel=1e-4)
    assert metrics["loss"] == pytest.approx(float(expected.detach()), abs=1e-5)
    _assert_update_is_minus_grad(update, _grad(before, expected))
    # β is GRPO's: GTPO has no KL term and no reference model (Eq. 7).
    with pytest.raises(ValueError, match="no KL term"):
        RLConfig(method="gtpo", kl_coef=0.04)
    with pytest.raises(ValueError, match="reference model"):
        rl_step(policy, optimizer, _problems(split), LocalScorer(), cfg, 0.3, generator)


def test_ablations_switch_off_one_part_each(setup):
    policy, split = setup
    problems = _problems(split)
    h_ini = 0.3
    for ablation in (None, "no-conflict", "no-filter", "no-entropy"):
        p = copy.copy(policy)
        p.model = copy.deepcopy(policy.model)
        knobs = GTPOConfig().with_ablation(ablation)
        cfg = RLConfig(method="gtpo", group_size=G, max_grad_norm=1e9, gtpo=knobs)
        before, metrics, batch, _ = _step(p, problems, cfg, h_ini)
        logprobs, mean_entropy, ids, mask = _reference_terms(before, batch, p.pad_id)
        advantages = batch.advantages.double()
        weights = conflict_weights(ids, mask, batch.advantages, G).double()
        keep = entropy_filter(mean_entropy, h_ini).double()
        gamma = 0.1
        if ablation == "no-conflict":
            weights = mask.double()  # λ ≡ 1
        if ablation == "no-filter":
            keep = torch.ones_like(keep)  # δ ≡ 1
        if ablation == "no-entropy":
            gamma = 0.0  # γ = 0
        expected = _eq7_by_hand(logprobs, mean_entropy, advantages, mask, weights, keep, gamma)
        assert metrics["loss"] == pytest.approx(float(expected.detach()), abs=1e-5), ablation
        assert metrics["filtered_frac"] == pytest.approx(float((keep == 0).double().mean()))
    knobs = GTPOConfig().with_ablation("no-conflict")
    assert RLConfig(method="gtpo", gtpo=knobs).label == "gtpo-no-conflict"
    with pytest.raises(ValueError, match="--ablation"):
        RLConfig(gtpo=GTPOConfig().with_ablation("no-kl"))


def test_group_advantages_hand_case():
    rewards = torch.tensor([20.0, 10.0, 10.0, 0.0, 5.0, 5.0, 5.0, 5.0])
    advantages = group_advantages(rewards, 4)
    std = torch.tensor([20.0, 10.0, 10.0, 0.0]).std()
    torch.testing.assert_close(advantages[:4], torch.tensor([10.0, 0.0, 0.0, -10.0]) / std)
    assert torch.equal(advantages[4:], torch.zeros(4))  # equal rewards: no signal


def test_h_ini_is_the_mean_completion_entropy_before_training(setup):
    policy, split = setup
    problems = split.train[:10]
    h_ini = measure_h_ini(policy, problems, 48, torch.Generator().manual_seed(5))
    # Recompute from the same samples: same generator seed, same completions.
    from gtpo.demo.model import sample

    prompts = [policy.encode(p.prompt) for p in problems]
    completions = sample(
        policy.model, prompts, policy.eos_id, policy.pad_id, 48, 1.0,
        torch.Generator().manual_seed(5),
    )  # fmt: skip
    batch = type("B", (), {"prompts": prompts, "completions": completions})
    _, mean_entropy, _, _ = _reference_terms(policy.model, batch, policy.pad_id)
    assert h_ini == pytest.approx(float(mean_entropy.detach().mean()), abs=1e-5)


def test_left_padding_does_not_change_the_logits(setup):
    policy, _ = setup
    short, long = policy.encode("3+4="), policy.encode("3+4-2+1=")
    completion = policy.encode("<reasoning>so 7</reasoning><answer>7</answer>")
    alone, _, _ = completion_logits(policy.model, [short], [completion], policy.pad_id)
    padded, _, _ = completion_logits(
        policy.model, [short, long], [completion, completion], policy.pad_id
    )
    assert left_pad([short, long], policy.pad_id)[1][0].sum() == len(short)
    torch.testing.assert_close(alone[0], padded[0], atol=1e-5, rtol=1e-4)


def test_demonstration_sft_improves_the_likelihood(setup):
    policy, split = setup
    # The fixture's 40 SFT steps leave the policy far better than chance on demonstrations.
    rng = random.Random(11)
    problems = split.train[:32]
    prompts = [policy.encode(p.prompt) for p in problems]
    completions = [
        [*policy.encode(demonstration(p, rng).completion), policy.eos_id] for p in problems
    ]
    logits, ids, mask = completion_logits(policy.model, prompts, completions, policy.pad_id)
    nll = torch.nn.functional.cross_entropy(logits[mask], ids[mask])
    assert float(nll.detach()) < 0.6 * float(torch.log(torch.tensor(float(logits.shape[-1]))))
