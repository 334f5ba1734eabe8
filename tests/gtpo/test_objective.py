"""The GTPO objective (Eq. 7), the GRPO baseline and their gradients on a tiny causal LM."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

import gtpo

BOS, R, SEP, ANS, EA = 0, 1, 2, 3, 4  # <bos>, <reasoning>, </reasoning>, <answer>, </answer>
VOCAB = 12


class TinyCausalLM(nn.Module):
    """Embedding → causal running mean → MLP → logits: position t only sees tokens ≤ t."""

    def __init__(self, vocab: int = VOCAB, dim: int = 16, seed: int = 0):
        super().__init__()
        torch.manual_seed(seed)
        self.embed = nn.Embedding(vocab, dim)
        self.mix = nn.Linear(dim, dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.embed(ids)
        steps = torch.arange(1, ids.shape[1] + 1, dtype=h.dtype)[None, :, None]
        h = h.cumsum(dim=1) / steps
        return self.head(torch.tanh(self.mix(h)))


def batch_tensors(completions: list[list[int]]):
    """Right-padded completion ids/mask and the model inputs that predict them."""
    length = max(len(c) for c in completions)
    ids = torch.full((len(completions), length), EA, dtype=torch.long)  # pad id = a real token
    mask = torch.zeros_like(ids, dtype=torch.bool)
    for n, c in enumerate(completions):
        ids[n, : len(c)] = torch.tensor(c)
        mask[n, : len(c)] = True
    inputs = torch.cat([torch.full((len(completions), 1), BOS), ids[:, :-1]], dim=1)
    return ids, mask, inputs


def forward(model: nn.Module, ids: torch.Tensor, inputs: torch.Tensor, mask: torch.Tensor):
    logits = model(inputs)
    logits.retain_grad()
    logprobs = torch.log_softmax(logits, -1).gather(-1, ids[..., None]).squeeze(-1)
    entropy = gtpo.completion_entropy(gtpo.token_entropy(logits), mask)
    return logits, logprobs, entropy


# A group of four: two correct (A > 0), two wrong (A < 0); all share the <reasoning> prefix and
# the </answer> suffix, the classic GRPO conflict of Sec. 4.1.
GROUP = [
    [R, 5, 6, 7, SEP, ANS, 9, EA],
    [R, 5, 8, SEP, ANS, 9, EA],
    [R, 5, 10, SEP, ANS, 11, EA],
    [R, 6, SEP, ANS, 10, EA],
]
ADVANTAGES = torch.tensor([1.2, 0.4, -0.6, -1.0])


def gtpo_grads(model, completions, advantages, keep=None, gamma=0.0):
    ids, mask, inputs = batch_tensors(completions)
    logits, logprobs, entropy = forward(model, ids, inputs, mask)
    weights = gtpo.conflict_weights(ids, mask, advantages, group_size=len(completions))
    keep = torch.ones(len(completions)) if keep is None else keep
    loss, metrics = gtpo.gtpo_loss(
        logprobs, logprobs.detach(), advantages, mask, weights, keep, entropy, gamma=gamma
    )
    loss.backward()
    return logits.grad, weights, mask, metrics


def grpo_grads(model, completions, advantages):
    ids, mask, inputs = batch_tensors(completions)
    logits, logprobs, _ = forward(model, ids, inputs, mask)
    loss, _ = gtpo.grpo_loss(logprobs, logprobs.detach(), advantages, mask)
    loss.backward()
    return logits.grad


def test_masked_tokens_of_negative_completions_get_exactly_zero_gradient():
    model = TinyCausalLM()
    grad, weights, mask, _ = gtpo_grads(model, GROUP, ADVANTAGES, gamma=0.0)
    grpo = grpo_grads(TinyCausalLM(), GROUP, ADVANTAGES)
    protected = (weights == 0) & mask
    assert protected.any(), "the example must contain protected tokens"
    assert torch.all(grad[protected] == 0)
    assert torch.all(grpo[protected].abs().sum(-1) > 0), "GRPO does push these tokens down"


def test_masked_tokens_of_positive_completions_get_exactly_twice_the_grpo_gradient():
    grad, weights, mask, _ = gtpo_grads(TinyCausalLM(), GROUP, ADVANTAGES)
    grpo = grpo_grads(TinyCausalLM(), GROUP, ADVANTAGES)
    doubled = (weights == 2) & mask
    untouched = (weights == 1) & mask
    assert doubled.any() and untouched.any()
    assert torch.equal(grad[doubled], 2 * grpo[doubled])
    assert torch.equal(grad[untouched], grpo[untouched])


def test_filtered_completion_contributes_no_policy_gradient():
    keep = torch.tensor([1.0, 0.0, 1.0, 1.0])
    grad, _, mask, metrics = gtpo_grads(TinyCausalLM(), GROUP, ADVANTAGES, keep=keep)
    kept, _, _, _ = gtpo_grads(TinyCausalLM(), GROUP, ADVANTAGES)
    assert torch.all(grad[1] == 0)
    assert kept[1][mask[1]].abs().sum() > 0
    # The other completions are untouched by filtering completion 1.
    assert torch.equal(grad[[0, 2, 3]], kept[[0, 2, 3]])
    assert metrics["filtered_frac"] == 0.25


def test_gamma_penalises_entropy_and_a_step_lowers_it():
    ids, mask, inputs = batch_tensors(GROUP)
    no_advantage = torch.zeros(len(GROUP))
    weights = torch.ones(ids.shape)
    model = TinyCausalLM(seed=3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)

    _, logprobs, entropy = forward(model, ids, inputs, mask)
    loss, _ = gtpo.gtpo_loss(
        logprobs, logprobs.detach(), no_advantage, mask, weights, torch.ones(4), entropy, gamma=0.1
    )
    # With no advantage signal the loss is exactly γ·mean⟨H⟩: it grows with entropy.
    assert loss.item() == pytest.approx(0.1 * entropy.mean().item(), rel=1e-6)
    d_loss_d_entropy = torch.autograd.grad(loss, entropy, retain_graph=True)[0]
    assert torch.allclose(d_loss_d_entropy, torch.full((4,), 0.1 / 4))
    before = entropy.mean().item()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    _, _, after = forward(model, ids, inputs, mask)
    assert after.mean().item() < before


def test_gtpo_without_corrections_is_grpo():
    ids, mask, inputs = batch_tensors(GROUP)
    model = TinyCausalLM()
    _, logprobs, entropy = forward(model, ids, inputs, mask)
    ones = torch.ones(ids.shape)
    gtpo_value, _ = gtpo.gtpo_loss(
        logprobs, logprobs.detach(), ADVANTAGES, mask, ones, torch.ones(4), entropy, gamma=0.0
    )
    grpo_value, _ = gtpo.grpo_loss(logprobs, logprobs.detach(), ADVANTAGES, mask)
    assert gtpo_value.item() == grpo_value.item()


def test_loss_equals_eq7_written_with_loops():
    torch.manual_seed(4)
    n, length = 6, 5
    logprobs = -torch.rand(n, length) * 3
    old = logprobs + 0.3 * torch.randn(n, length)  # ratios away from 1, some clipped
    mask = torch.ones(n, length, dtype=torch.bool)
    mask[1, 3:] = False
    mask[4, 1:] = False
    advantages = torch.randn(n)
    weights = torch.tensor([0.0, 1.0, 2.0])[torch.randint(0, 3, (n, length))]
    keep = torch.tensor([1.0, 0.0, 1.0, 1.0, 1.0, 0.0])
    entropy = torch.rand(n)
    gamma, eps = 0.1, 0.2

    loss, _ = gtpo.gtpo_loss(
        logprobs, old, advantages, mask, weights, keep, entropy, gamma=gamma, clip_eps=eps
    )

    total = 0.0
    for i in range(n):
        tokens = [t for t in range(length) if mask[i, t]]
        inner = 0.0
        for t in tokens:
            ratio = math.exp(logprobs[i, t].item() - old[i, t].item())
            a = weights[i, t].item() * keep[i].item() * advantages[i].item()
            inner += min(ratio * a, min(max(ratio, 1 - eps), 1 + eps) * a)
        total += inner / len(tokens) - gamma * entropy[i].item()
    assert loss.item() == pytest.approx(-total / n, rel=1e-5)


def test_clipping_stops_the_gradient_beyond_the_trust_region():
    logprobs = torch.tensor([[0.0, 0.0]], requires_grad=True)
    old = torch.tensor([[-0.5, 0.0]])  # ratio e^0.5 ≈ 1.65 > 1.2 on the first token
    loss, _ = gtpo.gtpo_loss(
        logprobs,
        old,
        torch.tensor([1.0]),
        torch.ones(1, 2, dtype=torch.bool),
        torch.ones(1, 2),
        torch.ones(1),
        torch.zeros(1),
        gamma=0.0,
    )
    loss.backward()
    assert logprobs.grad[0, 0] == 0 and logprobs.grad[0, 1] != 0


def test_metrics_report_conflicts_filtering_and_entropy():
    ids, mask, _ = batch_tensors(GROUP)
    weights = gtpo.conflict_weights(ids, mask, ADVANTAGES, group_size=4)
    keep = torch.tensor([1.0, 1.0, 0.0, 1.0])
    entropy = torch.tensor([0.2, 0.4, 1.0, 0.6])
    metrics = gtpo.gtpo_metrics(weights, ADVANTAGES, mask, keep, entropy)
    positive_tokens = int(mask[:2].sum())
    negative_tokens = int(mask[2:].sum())
    assert metrics["conflict_frac_pos"] == int((weights[:2] == 2).sum()) / positive_tokens
    assert metrics["conflict_frac_neg"] == int(((weights[2:] == 0) & mask[2:]).sum()) / (
        negative_tokens
    )
    assert 0 < metrics["conflict_frac_neg"] < 1
    assert metrics["filtered_frac"] == 0.25
    assert metrics["entropy_mean"] == pytest.approx(0.55)


def test_grpo_kl_term_uses_the_k3_estimator():
    logprobs = torch.tensor([[-1.0, -2.0], [-0.5, -0.1]])
    ref = torch.tensor([[-1.5, -2.0], [-0.4, -0.3]])
    mask = torch.tensor([[True, True], [True, False]])
    advantages = torch.zeros(2)
    loss, metrics = gtpo.grpo_loss(
        logprobs, logprobs, advantages, mask, kl_coef=0.5, ref_logprobs=ref
    )
    k3 = lambda d: math.exp(d) - d - 1  # noqa: E731
    expected_kl = ((k3(-0.5) + k3(0.0)) / 2 + k3(0.1)) / 2
    assert metrics["kl"] == pytest.approx(expected_kl, rel=1e-5)
    assert loss.item() == pytest.approx(0.5 * expected_kl, rel=1e-5)
    with pytest.raises(ValueError, match="ref_logprobs"):
        gtpo.grpo_loss(logprobs, logprobs, advantages, mask, kl_coef=0.1)


def test_bad_shapes_and_settings_raise_readable_errors():
    mask = torch.ones(2, 3, dtype=torch.bool)
    lp = torch.zeros(2, 3)
    good = dict(
        logprobs=lp,
        old_logprobs=lp,
        advantages=torch.zeros(2),
        completion_mask=mask,
        weights=torch.ones(2, 3),
        keep=torch.ones(2),
        completion_entropy=torch.zeros(2),
    )
    with pytest.raises(ValueError, match="weights has shape"):
        gtpo.gtpo_loss(**{**good, "weights": torch.ones(3, 2)})
    with pytest.raises(ValueError, match="keep has shape"):
        gtpo.gtpo_loss(**{**good, "keep": torch.ones(2, 1)})
    with pytest.raises(ValueError, match="gamma"):
        gtpo.gtpo_loss(**good, gamma=-0.1)
    with pytest.raises(ValueError, match="completion_mask must be"):
        gtpo.gtpo_loss(**{**good, "completion_mask": mask[0]})


def test_garbage_on_padding_does_not_leak_into_loss_or_gradient():
    logprobs = torch.tensor([[-1.0, -0.5, float("nan")], [-2.0, float("-inf"), float("inf")]])
    logprobs.requires_grad_()
    old = torch.tensor([[-1.0, -0.5, 0.0], [-2.0, 0.0, 0.0]])
    mask = torch.tensor([[True, True, False], [True, False, False]])
    token_entropy = torch.tensor([[0.5, 0.7, float("nan")], [0.2, float("inf"), 1.0]])
    entropy = gtpo.completion_entropy(token_entropy, mask)
    assert entropy.tolist() == pytest.approx([0.6, 0.2])
    loss, _ = gtpo.gtpo_loss(
        logprobs, old, torch.tensor([1.0, -1.0]), mask, torch.ones(2, 3), torch.ones(2), entropy
    )
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(logprobs.grad).all()
    assert logprobs.grad[~mask].abs().sum() == 0
