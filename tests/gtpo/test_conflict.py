"""conflict_weights / conflict_mask against a reference written straight from Sec. 5.1."""

from __future__ import annotations

from contextlib import contextmanager

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from paper_reference import reference_weights

import gtpo
from gtpo import conflict as conflict_module


def pack(groups: list[list[list[int]]], pad_id: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad a list of groups of completions into ids [N, L] and mask [N, L]."""
    rows = [c for group in groups for c in group]
    length = max((len(r) for r in rows), default=0)
    ids = torch.full((len(rows), length), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), length), dtype=torch.bool)
    for n, row in enumerate(rows):
        ids[n, : len(row)] = torch.tensor(row, dtype=torch.long)
        mask[n, : len(row)] = True
    return ids, mask


def weights_for(
    groups: list[list[list[int]]], advantages: list[list[float]], pad_id: int = 0, **kwargs
) -> list[list[float]]:
    ids, mask = pack(groups, pad_id)
    adv = torch.tensor([a for group in advantages for a in group], dtype=torch.float32)
    weights = gtpo.conflict_weights(ids, mask, adv, group_size=len(groups[0]), **kwargs)
    assert torch.all(weights[~mask] == 0), "padding must get weight 0"
    rows = [c for group in groups for c in group]
    return [weights[n, : len(row)].tolist() for n, row in enumerate(rows)]


def expected_for(groups, advantages, conflict_weight: float = 2.0) -> list[list[float]]:
    return [
        row
        for group, adv in zip(groups, advantages, strict=True)
        for row in reference_weights(group, adv, conflict_weight)
    ]


# ---------------------------------------------------------------------------------------------
# Property-based agreement with the reference.


@st.composite
def batches(draw):
    group_size = draw(st.integers(1, 6))
    n_groups = draw(st.integers(1, 3))
    vocab = draw(st.integers(1, 4))  # a tiny vocabulary makes coincidences (conflicts) common
    token = st.integers(0, vocab - 1)
    groups, advantages = [], []
    for _ in range(n_groups):
        if draw(st.booleans()):  # groups built around a shared prefix and suffix, as with tags
            prefix = draw(st.lists(token, max_size=3))
            suffix = draw(st.lists(token, max_size=3))
            groups.append(
                [prefix + draw(st.lists(token, max_size=4)) + suffix for _ in range(group_size)]
            )
        else:
            groups.append([draw(st.lists(token, max_size=9)) for _ in range(group_size)])
        advantages.append(
            draw(
                st.lists(
                    st.sampled_from([-1.7, -1.0, -0.25, 0.0, 0.5, 1.0, 2.3]),
                    min_size=group_size,
                    max_size=group_size,
                )
            )
        )
    pad_id = draw(token)  # padding that reuses a real token id must still never match
    return groups, advantages, pad_id


@settings(max_examples=400, deadline=None)
@given(batches(), st.sampled_from([2.0, 1.5]))
def test_matches_brute_force_reference(batch, conflict_weight):
    groups, advantages, pad_id = batch
    got = weights_for(groups, advantages, pad_id=pad_id, conflict_weight=conflict_weight)
    assert got == expected_for(groups, advantages, conflict_weight)


@contextmanager
def small_work_units(budget: int, first_window: int):
    """Force the chunk loop over groups and the windowed run scan with tiny units."""
    saved = conflict_module._PAIRWISE_BUDGET, conflict_module._FIRST_WINDOW
    conflict_module._PAIRWISE_BUDGET, conflict_module._FIRST_WINDOW = budget, first_window
    try:
        yield
    finally:
        conflict_module._PAIRWISE_BUDGET, conflict_module._FIRST_WINDOW = saved


@settings(max_examples=100, deadline=None)
@given(batches(), st.integers(1, 3))
def test_chunked_and_windowed_scan_match_reference(batch, first_window):
    groups, advantages, pad_id = batch
    with small_work_units(budget=1, first_window=first_window):
        got = weights_for(groups, advantages, pad_id=pad_id)
    assert got == expected_for(groups, advantages)


def test_long_runs_cross_many_scan_windows():
    torch.manual_seed(0)
    shared = torch.randint(0, 50, (300,)).tolist()
    groups = [[shared, [*shared[:200], 7, *shared[201:]], shared[:-1], [9, *shared]]]
    advantages = [[1.0, -1.0, -0.5, 0.5]]
    got = weights_for(groups, advantages)
    assert got == expected_for(groups, advantages)
    assert got[0][:200] == [2.0] * 200  # the forward run spans 200 tokens (several windows)


# ---------------------------------------------------------------------------------------------
# The cases the issue names, written out by hand.

R, A_, SEP, EA = 101, 102, 103, 104  # <reasoning>, <answer>, </reasoning>, </answer>


def test_paper_example_prefix_and_suffix_tags():
    """Shared <reasoning> prefix and </answer> suffix with opposite advantages: λ = 2 / 0."""
    good = [R, 7, 8, SEP, A_, 5, EA]
    bad = [R, 7, 9, 9, SEP, A_, 6, EA]
    got = weights_for([[good, bad]], [[1.0, -1.0]])
    # forward run: R, 7 (same ids at positions 0-1); backward run: EA only (5 vs 6 differ).
    assert got[0] == [2, 2, 1, 1, 1, 1, 2]
    assert got[1] == [0, 0, 1, 1, 1, 1, 1, 0]


def test_middle_token_outside_the_outer_runs_keeps_weight_one():
    # Position 2 holds token 9 in both completions, but position 1 differs: the forward run
    # stops at position 0, so the shared middle token is not protected.
    good = [R, 1, 9, 2, EA]
    bad = [R, 3, 9, 4, EA]
    got = weights_for([[good, bad]], [[0.8, -0.8]])
    assert got[0] == [2, 1, 1, 1, 2]
    assert got[1] == [0, 1, 1, 1, 0]


def test_all_positive_or_all_negative_groups_have_no_conflicts():
    same = [R, 1, 2, EA]
    assert weights_for([[same, same, same]], [[1.0, 0.5, 2.0]]) == [[1.0] * 4] * 3
    assert weights_for([[same, same, same]], [[-1.0, -0.5, -2.0]]) == [[1.0] * 4] * 3


def test_zero_advantage_members_neither_create_nor_receive_conflicts():
    shared = [R, 1, EA]
    # Only one side has a non-zero advantage: the A = 0 completions must not act as partners.
    assert weights_for([[shared, shared, shared]], [[1.0, 0.0, 0.0]]) == [[1.0] * 3] * 3
    # With both sides present, the A = 0 member itself keeps λ = 1 on the shared tokens.
    got = weights_for([[shared, shared, shared]], [[1.0, 0.0, -1.0]])
    assert got == [[2.0] * 3, [1.0] * 3, [0.0] * 3]


def test_identical_completions_with_opposite_advantages_are_fully_masked():
    same = [R, 5, 6, EA]
    assert weights_for([[same, same]], [[1.0, -1.0]]) == [[2.0] * 4, [0.0] * 4]


def test_length_one_completions():
    got = weights_for([[[R], [R], [EA]]], [[1.0, -1.0, -0.5]])
    assert got == [[2.0], [0.0], [1.0]]


def test_token_in_both_runs_gets_weight_two_not_four():
    # Equal-length completions identical everywhere: every token is in the forward AND the
    # backward run; a product of the two masks would give 4.
    got = weights_for([[[R, 1, EA], [R, 1, EA], [R, 2, EA]]], [[1.0, -1.0, 0.5]])
    assert got[0] == [2.0, 2.0, 2.0]
    assert max(max(row) for row in got) == 2.0


def test_padding_id_equal_to_a_real_token_never_matches():
    # Backward alignment: the short completion's padding (id EA) must not line up with the
    # long completion's real EA. Forward: padding at position 2 of the short one vs real EA.
    short = [R, 1]
    long = [R, 1, EA]
    got = weights_for([[long, short]], [[1.0, -1.0]], pad_id=EA)
    assert got[0] == [2.0, 2.0, 1.0]
    assert got[1] == [0.0, 0.0]


def test_ragged_groups_across_a_batch():
    groups = [
        [[R, 1, 2, EA], [R, 3, EA]],
        [[R], [R, 4, 4, 4, 4, 4, EA]],
    ]
    advantages = [[1.0, -1.0], [-1.0, 1.0]]
    got = weights_for(groups, advantages)
    assert got == expected_for(groups, advantages)
    assert got[0] == [2, 1, 1, 2] and got[1] == [0, 1, 0]
    assert got[2] == [0] and got[3] == [2, 1, 1, 1, 1, 1, 1]


def test_groups_do_not_see_each_other():
    # The same tokens with opposite signs in *different* groups are not conflicts.
    got = weights_for([[[R, EA], [R, EA]], [[R, EA], [R, EA]]], [[1.0, 1.0], [-1.0, -1.0]])
    assert got == [[1.0, 1.0]] * 4


def test_conflict_mask_is_the_boolean_behind_the_weights():
    ids, mask = pack([[[R, 1, EA], [R, 2, EA], [7, 7, 7]]])
    adv = torch.tensor([1.0, -1.0, -1.0])
    m = gtpo.conflict_mask(ids, mask, adv, group_size=3)
    assert m.dtype == torch.bool
    assert m.tolist() == [[True, False, True], [True, False, True], [False, False, False]]


def test_weights_do_not_depend_on_advantage_magnitude_or_grad():
    ids, mask = pack([[[R, 1, EA], [R, 2, EA]]])
    adv = torch.tensor([0.3, -7.0], requires_grad=True)
    w = gtpo.conflict_weights(ids, mask, adv, group_size=2)
    assert not w.requires_grad
    assert w.dtype == torch.float32
    assert w.tolist() == [[2, 1, 2], [0, 1, 0]]


def test_empty_batch_and_empty_completions():
    ids = torch.zeros((0, 5), dtype=torch.long)
    w = gtpo.conflict_weights(ids, ids.bool(), torch.zeros(0), group_size=4)
    assert w.shape == (0, 5)
    # Completions with no tokens at all get an all-zero (all padding) row.
    ids, mask = pack([[[], [R]]])
    w = gtpo.conflict_weights(ids, mask, torch.tensor([1.0, -1.0]), group_size=2)
    assert w.tolist() == [[0.0], [1.0]]


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda ids, mask, adv: (ids[0], mask[0], adv, 2), "must be \\[N, L\\]"),
        (lambda ids, mask, adv: (ids, mask[:, :2], adv, 2), "completion_mask shape"),
        (lambda ids, mask, adv: (ids, mask.long(), adv, 2), "bool tensor"),
        (lambda ids, mask, adv: (ids, mask, adv[:3], 2), "advantages must be \\[N\\]"),
        (lambda ids, mask, adv: (ids, mask, adv, 3), "groups of group_size = 3"),
        (lambda ids, mask, adv: (ids, mask, adv, 0), "group_size = 0"),
        (lambda ids, mask, adv: (ids, mask, adv / 0, 2), "NaN or inf"),
    ],
)
def test_bad_inputs_raise_readable_errors(change, message):
    ids, mask = pack([[[R, 1, EA], [R, 2, EA], [R], [EA, EA]]])
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5])
    with pytest.raises((ValueError, TypeError), match=message):
        gtpo.conflict_weights(*change(ids, mask, adv))


def test_left_padded_mask_is_refused():
    ids = torch.tensor([[0, R, EA], [R, 1, EA]])
    mask = torch.tensor([[False, True, True], [True, True, True]])
    with pytest.raises(ValueError, match="right-padded"):
        gtpo.conflict_weights(ids, mask, torch.tensor([1.0, -1.0]), group_size=2)
