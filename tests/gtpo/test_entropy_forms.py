"""Both forms of Eq. 7's entropy term: `gtpo_loss` and its gradients against the objective
written out in loops (tests/paper_reference.py), and `gtpo_terms` for each form."""

from __future__ import annotations

import pytest
import torch
from paper_reference import reference_objective

import gtpo
from gtpo import GTPOConfig, gtpo_terms

FORMS = ("penalty", "advantage")
G, V = 4, 6


def _inputs(seed: int = 0):
    """Two groups of G ragged completions over a tiny vocabulary (conflicts), a filtered one."""
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([5, 3, 4, 2, 4, 5, 1, 3])
    n, length = len(lengths), int(lengths.max())
    mask = torch.arange(length)[None, :] < lengths[:, None]
    ids = torch.randint(0, 3, (n, length), generator=gen)
    ids[:, 0] = 1  # a shared first token: forward conflicts in every mixed group
    ids[~mask] = 5  # padding holds a real token id
    logits = torch.randn(n, length, V, generator=gen, requires_grad=True)
    old_noise = 0.3 * torch.randn(n, length, generator=gen)  # ratios away from 1, some clipped
    advantages = torch.tensor([1.2, 0.4, -0.6, -1.0, 0.9, -0.3, -0.3, -0.3])
    keep = torch.tensor([1.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0])  # completion 1 filtered
    weights = gtpo.conflict_weights(ids, mask, advantages, group_size=G)
    assert (weights == 0).any() and (weights == 2).any(), "no conflict tokens"
    return logits, ids, mask, old_noise, advantages, keep, weights


def _core_loss(logits, ids, mask, old_noise, advantages, keep, weights, gamma, form):
    logprobs = torch.log_softmax(logits, -1).gather(-1, ids[..., None]).squeeze(-1)
    entropy = gtpo.completion_entropy(gtpo.token_entropy(logits), mask)
    old = logprobs.detach() + old_noise
    loss, _ = gtpo.gtpo_loss(
        logprobs, old, advantages, mask, weights, keep, entropy, gamma=gamma, entropy_form=form
    )
    return loss


def _loop_loss(logits, ids, mask, old_noise, advantages, keep, weights, gamma, form):
    """−J of Eq. 7 from the loop definition; entropies and log-probs token by token."""
    logprobs, old, entropies, rows = [], [], [], []
    for i in range(ids.shape[0]):
        lp_row, old_row, h_row = [], [], []
        for t in range(int(mask[i].sum())):
            log_p = torch.log_softmax(logits[i, t], -1)
            lp_row.append(log_p[ids[i, t]])
            old_row.append(float(log_p[ids[i, t]].detach()) + float(old_noise[i, t]))
            h_row.append(-(log_p.exp() * log_p).sum())
        logprobs.append(lp_row)
        old.append(old_row)
        entropies.append(sum(h_row) / len(h_row))
        rows.append(weights[i, : len(lp_row)].tolist())
    j = reference_objective(
        logprobs, old, advantages.tolist(), rows, keep.tolist(), entropies, gamma, form
    )
    return -j


@pytest.mark.parametrize("form", FORMS)
def test_loss_and_gradient_equal_eq7_written_in_loops(form):
    inputs = _inputs()
    logits = inputs[0]
    loss = _core_loss(*inputs, gamma=0.1, form=form)
    (core_grad,) = torch.autograd.grad(loss, logits)
    reference = _loop_loss(*inputs, gamma=0.1, form=form)
    (loop_grad,) = torch.autograd.grad(reference, logits)
    assert loss.item() == pytest.approx(reference.item(), rel=1e-5)
    assert torch.allclose(core_grad, loop_grad, atol=1e-6)
    mask = inputs[2]
    assert torch.all(core_grad[~mask] == 0), "padding gets no gradient"


def test_the_two_forms_differ_and_agree_without_entropy_term():
    inputs = _inputs(seed=1)
    penalty = torch.autograd.grad(_core_loss(*inputs, gamma=0.1, form="penalty"), inputs[0])[0]
    advantage = torch.autograd.grad(_core_loss(*inputs, gamma=0.1, form="advantage"), inputs[0])
    assert not torch.allclose(penalty, advantage[0], atol=1e-4)
    without = [
        torch.autograd.grad(_core_loss(*inputs, gamma=0.0, form=f), inputs[0])[0] for f in FORMS
    ]
    assert torch.equal(without[0], without[1])


def test_advantage_form_sends_no_gradient_through_the_entropy():
    _, ids, mask, _, advantages, keep, weights = _inputs()
    logprobs = torch.randn(ids.shape, requires_grad=True)
    entropy = torch.rand(ids.shape[0], requires_grad=True)
    for form, flows in (("advantage", False), ("penalty", True)):
        loss, _ = gtpo.gtpo_loss(
            logprobs, logprobs.detach(), advantages, mask, weights, keep, entropy, entropy_form=form
        )
        (grad,) = torch.autograd.grad(loss, entropy, allow_unused=True)
        if flows:
            assert torch.allclose(grad, torch.full_like(entropy, 0.1 / len(entropy)))
        else:
            assert grad is None or torch.all(grad == 0)


def test_advantage_form_weights_the_ratio_by_a_minus_gamma_h():
    """At ratio 1, ∂L/∂ log π_{i,t} = −λ_{i,t} δ_i (A_i − γ⟨H⟩_i) / (N |o_i|)."""
    _, ids, mask, _, advantages, keep, weights = _inputs()
    logprobs = torch.zeros(ids.shape, requires_grad=True)
    entropy = torch.rand(ids.shape[0])
    loss, _ = gtpo.gtpo_loss(
        logprobs, logprobs.detach(), advantages, mask, weights, keep, entropy,
        gamma=0.3, entropy_form="advantage",
    )  # fmt: skip
    (grad,) = torch.autograd.grad(loss, logprobs)
    n, lengths = ids.shape[0], mask.sum(1)
    expected = -weights * (keep * (advantages - 0.3 * entropy) / (n * lengths))[:, None]
    assert torch.allclose(grad, expected, atol=1e-7)
    assert torch.all(grad[1] == 0), "a filtered completion gets nothing in the advantage form"


def test_penalty_form_lowers_the_entropy_of_a_filtered_completion():
    logits, ids, mask, old_noise, advantages, keep, weights = _inputs()
    assert keep[1] == 0
    loss = _core_loss(logits, ids, mask, old_noise, advantages, keep, weights, 0.1, "penalty")
    (grad,) = torch.autograd.grad(loss, logits)
    # Row 1's only gradient is the penalty's: γ/N · ∂⟨H⟩_1/∂logits.
    entropy = gtpo.completion_entropy(gtpo.token_entropy(logits), mask)
    (penalty_only,) = torch.autograd.grad(0.1 * entropy[1] / len(entropy), logits)
    assert grad[1][mask[1]].abs().sum() > 0
    assert torch.allclose(grad[1], penalty_only[1], atol=1e-7)


def test_unknown_form_is_refused_with_the_choices():
    _, ids, mask, _, advantages, keep, weights = _inputs()
    lp = torch.zeros(ids.shape)
    with pytest.raises(ValueError, match="penalty, advantage"):
        gtpo.gtpo_loss(lp, lp, advantages, mask, weights, keep, torch.zeros(8), entropy_form="x")


@pytest.mark.parametrize("algo", ["gtpo", "grpo"])
@pytest.mark.parametrize("form", FORMS)
def test_gtpo_terms_apply_the_form(algo, form):
    _, ids, mask, _, _, _, _ = _inputs()
    # Small positive A_i that γ⟨H⟩_i turns negative: λ must still follow the original signs.
    advantages = torch.tensor([0.05, 0.4, -0.6, -1.0, 0.9, -0.3, 0.02, -0.3])
    entropy = torch.tensor([0.9, 0.2, 0.5, 0.3, 0.6, 0.4, 0.8, 0.1], requires_grad=True)
    config = GTPOConfig(algo=algo, gamma=0.2, entropy_form=form, entropy_filter="off")
    terms = gtpo_terms(config, ids, mask, advantages, G, entropy, None)
    folded = algo == "gtpo" and form == "advantage"
    expected = advantages - 0.2 * entropy.detach() if folded else advantages
    assert torch.allclose(terms.advantages, expected)
    assert not terms.advantages.requires_grad, "⟨H⟩_i enters as a number"
    assert terms.gamma == (0.2 if algo == "gtpo" and form == "penalty" else 0.0)
    assert terms.gamma == config.entropy_coef
    assert config.advantage_entropy_coef == (0.2 if folded else 0.0)
    if algo == "gtpo":
        assert torch.equal(terms.weights, gtpo.conflict_weights(ids, mask, advantages, G))
        if folded:
            assert (terms.advantages[[0, 6]] < 0).all(), "the shift must flip a sign here"
    assert torch.equal(
        terms.token_advantages(), terms.weights * (terms.keep * terms.advantages)[:, None]
    )
