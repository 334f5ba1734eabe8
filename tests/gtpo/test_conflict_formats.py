"""What GTPO's conflict runs (Sec. 5.1) hold for the think format's completions, as
docs/reward-server.md states: the shared prefix is `<think>` and the opening words right and
wrong completions share (only the words when the template prefilled `<think>`), `</think>` is
never in it, and the shared suffix is the end of the final box and the end token, plus the
trailing digits a right and a wrong answer share."""

from __future__ import annotations

import torch

from gtpo.conflict import conflict_mask


def marked(completions: list[str], advantages: list[float]) -> list[list[str]]:
    """The words of each completion that the conflict mask marks (one token per word)."""
    vocab: dict[str, int] = {}
    rows = [[vocab.setdefault(w, len(vocab) + 1) for w in c.split()] for c in completions]
    length = max(map(len, rows))
    ids = torch.zeros(len(rows), length, dtype=torch.long)
    mask = torch.zeros(len(rows), length, dtype=torch.bool)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = torch.tensor(row)
        mask[i, : len(row)] = True
    out = conflict_mask(ids, mask, torch.tensor(advantages), group_size=len(rows))
    return [[w for w, m in zip(c.split(), r.tolist(), strict=False) if m] for c, r in zip(
        completions, out, strict=True)]  # fmt: skip


GROUP = [
    "Okay , so 16 - 3 - 4 = 9 . </think> She makes $ \\boxed{ 1 8 } $ . <eos>",
    "Okay , let me see 16 - 7 = 8 . </think> She makes $ \\boxed{ 1 6 } $ . <eos>",
    "Alright , 9 * 2 = 18 . </think> The answer is $ \\boxed{ 1 8 } $ . <eos>",
    "Okay , so 9 + 2 = 11 . </think> The answer is $ \\boxed{ 1 1 } $ . <eos>",
]
ADVANTAGES = [1.0, -1.0, 1.0, -1.0]
SUFFIX = ["}", "$", ".", "<eos>"]


def test_prefilled_think_block_protects_only_shared_opening_words() -> None:
    runs = marked(GROUP, ADVANTAGES)
    assert runs == [["Okay", ",", "so", *SUFFIX], ["Okay", ",", *SUFFIX], SUFFIX,
                    ["Okay", ",", "so", *SUFFIX]]  # fmt: skip
    assert not any("</think>" in run or "<think>" in run for run in runs)


def test_think_tag_written_by_the_model_opens_every_forward_run() -> None:
    runs = marked(["<think> " + c for c in GROUP], ADVANTAGES)
    assert [run[0] for run in runs] == ["<think>"] * 4
    assert runs[2] == ["<think>", *SUFFIX]  # "Alright" differs: the run stops after the tag
    assert not any("</think>" in run for run in runs)


def test_shared_trailing_digits_of_right_and_wrong_answers_join_the_suffix() -> None:
    runs = marked(["We get \\boxed{ 1 8 } . <eos>", "We get \\boxed{ 2 8 } . <eos>"], [1.0, -1.0])
    assert runs[0] == runs[1] == ["We", "get", "\\boxed{", "8", "}", ".", "<eos>"]
