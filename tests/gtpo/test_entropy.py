"""token_entropy, completion_entropy and the Eq. 6 filter."""

from __future__ import annotations

import math

import pytest
import torch

import gtpo
from gtpo.entropy import LN2


def textbook_entropy(logits: torch.Tensor) -> torch.Tensor:
    """H = −Σ_v p_v ln p_v in float64, straight from the definition."""
    p = torch.softmax(logits.double(), dim=-1)
    return -(p * torch.log(p)).sum(-1)


@pytest.mark.parametrize("chunk_size", [None, 1, 3, 7, 1000])
@pytest.mark.parametrize("shape", [(2, 5, 11), (3, 4), (1, 1, 1, 17)])
def test_equals_textbook_formula(shape, chunk_size):
    torch.manual_seed(0)
    logits = torch.randn(*shape) * 3
    got = gtpo.token_entropy(logits, chunk_size=chunk_size)
    assert got.shape == shape[:-1]
    assert got.dtype == torch.float32
    torch.testing.assert_close(got.double(), textbook_entropy(logits), atol=1e-5, rtol=0)


def test_large_vocabulary_in_low_precision_matches_fp64():
    torch.manual_seed(1)
    logits = (torch.randn(2, 3, 152_064) * 4).to(torch.bfloat16)
    got = gtpo.token_entropy(logits, chunk_size=2)
    torch.testing.assert_close(got.double(), textbook_entropy(logits.float()), atol=1e-5, rtol=0)


def test_known_values_uniform_and_one_hot():
    uniform = torch.zeros(1, 8)
    assert gtpo.token_entropy(uniform).item() == pytest.approx(math.log(8), abs=1e-6)
    two_way = torch.tensor([[0.0, 0.0, -math.inf, -math.inf]])
    assert gtpo.token_entropy(two_way).item() == pytest.approx(LN2, abs=1e-6)
    one_hot = torch.tensor([[0.0, -math.inf, -math.inf]])
    assert gtpo.token_entropy(one_hot).item() == 0.0


def test_gradient_matches_autograd_of_the_definition():
    torch.manual_seed(2)
    logits = torch.randn(3, 4, 9, dtype=torch.float64, requires_grad=True)
    torch.autograd.gradcheck(lambda x: gtpo.token_entropy(x, chunk_size=5), (logits,))

    weights = torch.randn(3, 4, dtype=torch.float64)
    (gtpo.token_entropy(logits, chunk_size=2) * weights).sum().backward()
    ours = logits.grad.clone()
    logits.grad = None
    (textbook_entropy(logits) * weights).sum().backward()
    torch.testing.assert_close(ours, logits.grad)


def test_gradient_is_finite_with_masked_vocabulary():
    logits = torch.tensor([[0.5, -math.inf, 1.0, -math.inf]], requires_grad=True)
    gtpo.token_entropy(logits).sum().backward()
    assert torch.isfinite(logits.grad).all()
    assert logits.grad[0, 1] == 0 and logits.grad[0, 3] == 0


def test_backward_keeps_no_fp32_copy_of_the_logits():
    """Autograd must save only the logits themselves and the [rows] entropy, never a softmax."""
    logits = torch.randn(4, 6, 50, dtype=torch.bfloat16, requires_grad=True)
    saved: list[torch.Tensor] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved.append(t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        entropy = gtpo.token_entropy(logits, chunk_size=3)
    big = [t for t in saved if t.numel() >= logits.numel()]
    assert all(t.dtype == torch.bfloat16 for t in big), [t.dtype for t in big]
    assert all(t.untyped_storage().data_ptr() == logits.untyped_storage().data_ptr() for t in big)
    entropy.sum().backward()
    assert logits.grad.dtype == torch.bfloat16


def test_rejects_integer_logits_and_bad_chunks():
    with pytest.raises(TypeError, match="floating point"):
        gtpo.token_entropy(torch.ones(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="chunk_size"):
        gtpo.token_entropy(torch.ones(2, 3), chunk_size=0)


def test_completion_entropy_is_the_mean_over_real_tokens():
    token = torch.tensor([[1.0, 2.0, 3.0, 99.0], [4.0, 99.0, 99.0, 99.0], [99.0] * 4])
    mask = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0]], dtype=torch.bool)
    assert gtpo.completion_entropy(token, mask).tolist() == [2.0, 4.0, 0.0]
    with pytest.raises(ValueError, match="same shape"):
        gtpo.completion_entropy(token, mask[:, :2])


def test_entropy_filter_follows_eq6():
    h = torch.tensor([0.1, LN2, LN2 + 1e-4, 2.0])
    # Confident model (H_ini < ln 2): completions above ln 2 are filtered out, ln 2 itself kept.
    assert gtpo.entropy_filter(h, h_ini=0.3).tolist() == [1.0, 1.0, 0.0, 0.0]
    # Uncertain model (H_ini > ln 2) and the boundary H_ini = ln 2: everything is kept.
    assert gtpo.entropy_filter(h, h_ini=1.2).tolist() == [1.0] * 4
    assert gtpo.entropy_filter(h, h_ini=LN2).tolist() == [1.0] * 4


def test_a_fixed_cut_of_07_always_applied_is_the_authors_setting():
    """--gtpo.entropy_threshold 0.7 --gtpo.entropy_filter on: δ_i = 1 for ⟨H⟩_i ≤ 0.7 on every
    step, whatever H_ini (their code: `entropies <= ENT_THRESHOLD`, no H_ini test)."""
    from gtpo.config import GTPOConfig
    from gtpo.objective import entropy_terms

    h = torch.tensor([0.1, LN2 + 1e-4, 0.7, 0.7001, 2.0])
    advantages = torch.ones(5)
    authors = GTPOConfig(entropy_threshold=0.7, entropy_filter="on")
    for h_ini in (None, 0.2, 1.5):  # H_ini plays no part, and need not be measured
        keep = entropy_terms(authors, advantages, h, h_ini).keep
        assert keep.tolist() == [1.0, 1.0, 1.0, 0.0, 0.0]
    # The paper's cut drops the completion between ln 2 and 0.7 that the authors' keeps.
    paper = entropy_terms(GTPOConfig(entropy_filter="on"), advantages, h, None).keep
    assert paper.tolist() == [1.0, 0.0, 0.0, 0.0, 0.0]
    # With `auto`, the cut is also what H_ini is compared with: 0.69 < H_ini = 0.695 < 0.7.
    auto = GTPOConfig(entropy_threshold=0.7)
    assert entropy_terms(auto, advantages, h, 0.695).keep.tolist() == [1.0, 1.0, 1.0, 0.0, 0.0]
    assert entropy_terms(GTPOConfig(), advantages, h, 0.695).keep.tolist() == [1.0] * 5


def test_the_cut_must_be_a_positive_entropy():
    from gtpo.config import GTPOConfig, GTPOConfigError

    for bad in (0.0, -0.7, float("nan"), float("inf")):
        with pytest.raises(GTPOConfigError, match=r"--gtpo\.entropy_threshold"):
            GTPOConfig(entropy_threshold=bad)


def test_entropy_filter_is_not_differentiable_and_checks_h_ini():
    h = torch.tensor([0.1, 2.0], requires_grad=True)
    delta = gtpo.entropy_filter(h, h_ini=0.1)
    assert not delta.requires_grad
    for bad in (float("nan"), -0.5, float("inf")):
        with pytest.raises(ValueError, match="h_ini"):
            gtpo.entropy_filter(h, h_ini=bad)


def test_fused_logprobs_and_entropy_match_separate_computations():
    torch.manual_seed(5)
    logits = torch.randn(3, 7, 13) * 2
    ids = torch.randint(0, 13, (3, 7))
    logprobs, entropy = gtpo.token_logprobs_and_entropy(logits, ids, chunk_size=4)
    expected = torch.log_softmax(logits.double(), -1).gather(-1, ids[..., None]).squeeze(-1)
    torch.testing.assert_close(logprobs.double(), expected, atol=1e-6, rtol=0)
    torch.testing.assert_close(entropy.double(), textbook_entropy(logits), atol=1e-6, rtol=0)


def test_fused_gradient_combines_both_outputs():
    torch.manual_seed(6)
    logits = torch.randn(2, 5, 9, dtype=torch.float64, requires_grad=True)
    ids = torch.randint(0, 9, (2, 5))
    torch.autograd.gradcheck(
        lambda x: gtpo.token_logprobs_and_entropy(x, ids, chunk_size=3), (logits,)
    )
    w_lp, w_h = torch.randn(2, 5, dtype=torch.float64), torch.randn(2, 5, dtype=torch.float64)
    logprobs, entropy = gtpo.token_logprobs_and_entropy(logits, ids, chunk_size=4)
    ((logprobs * w_lp).sum() + (entropy * w_h).sum()).backward()
    ours = logits.grad.clone()
    logits.grad = None
    reference_lp = torch.log_softmax(logits, -1).gather(-1, ids[..., None]).squeeze(-1)
    ((reference_lp * w_lp).sum() + (textbook_entropy(logits) * w_h).sum()).backward()
    torch.testing.assert_close(ours, logits.grad)


def test_fused_handles_masked_vocabulary_and_checks_shapes():
    logits = torch.tensor([[0.0, -math.inf, 1.0]], requires_grad=True)
    logprobs, entropy = gtpo.token_logprobs_and_entropy(logits, torch.tensor([2]))
    (logprobs.sum() + entropy.sum()).backward()
    assert torch.isfinite(logits.grad).all() and logits.grad[0, 1] == 0
    assert logprobs.item() == pytest.approx(1.0 - math.log(1 + math.e), abs=1e-6)
    with pytest.raises(ValueError, match="token_ids shape"):
        gtpo.token_logprobs_and_entropy(logits, torch.tensor([[2]]))
