"""What a collapsing policy writes (long runs of spaces or newlines, repeated end tokens, boxes
nested deep) and what an attacker sends: scored in linear time, and one item's failure costs
that item only. In-process (the scorer without a pool); the live server's side is in
test_rs_http.py and the reliability suite."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from reward_server.checker import grade
from reward_server.checker.compare import Verdict
from reward_server.checker.pending import SymbolicCheck
from reward_server.checker.response import strip_end_tokens
from reward_server.protocol import response_format
from reward_server.service.metrics import Metrics
from reward_server.service.scoring import ItemErrors, Scorer
from reward_server.service.settings import Settings
from reward_server.service.verify import Verifier

R = "<reasoning>\nwork\n</reasoning>\n"
# Each degenerate run is this long: the patterns that were quadratic took 3-4 s at 12,000
# characters and 20 s here; linear reading takes milliseconds.
N = 48_000
# CPU seconds, not wall time (a process that waits for a CPU on a busy machine uses none: one
# run beside two CPU-bound processes stalled 4 s of wall time on a case that costs 12 ms):
# the slowest case below uses about 50 ms of CPU.
BOUND_S = 1.5


def _shapes(run: str) -> dict[str, tuple[str, str, str]]:
    """(response, format, label) with ``run`` where a degenerate completion puts it."""
    return {
        "between two boxes": (R + f"<answer>\\boxed{{1}}{run}x\\boxed{{2}}</answer>", "paper", "2"),
        "after a box": (R + f"<answer>\\boxed{{1}}{run}x</answer>", "paper", "1"),
        "before a box": (R + f"<answer>{run}\\boxed{{1}}</answer>", "paper", "1"),
        "boxed, between boxes": (f"w \\boxed{{1}}{run}x\\boxed{{2}}", "boxed", "2"),
        "boxed, before the box": (f"w {run}\\boxed{{1}}", "boxed", "1"),
        "boxed, after the box": (f"w \\boxed{{1}}{run}", "boxed", "1"),
        "think, everywhere": (f"<think>{run}</think>{run}\\boxed{{1}}{run}", "think", "1"),
        "after the answer block": (R + f"<answer>1</answer>{run}", "paper", "1"),
        "in the label": (R + "<answer>1</answer>", "paper", f"\\boxed{{{run}}}"),
    }


RUNS = [" ", "\n", ",", "$", ".", "\\", "(", ")", "$ $", ", ", "\\\\", "\\(", "x^", " and"]


def _score(scorer: Scorer, response: str, fmt: str, label: str):
    return asyncio.run(scorer.score(response, None, label, response_format(fmt)))


@pytest.mark.parametrize("run", RUNS, ids=repr)
def test_degenerate_runs_are_scored_in_linear_time(run: str) -> None:
    scorer = Scorer(Settings(verify_workers=1), Verifier(None))
    slow = []
    for name, (response, fmt, label) in _shapes(run * (N // len(run))).items():
        start = time.process_time()
        item = _score(scorer, response, fmt, label)
        seconds = time.process_time() - start
        assert item.reward == item.format_score + item.accuracy_score
        if seconds > BOUND_S:
            slow.append(f"{name}: {seconds:.2f} s")
    assert not slow, slow


# Answers within the cost guard's length cap (1,000 characters) are read and canonicalised
# whole, as /v1/equivalent receives them (a completion's answer block has its runs shortened
# first): a run where a rewrite allows spacing, brackets or separators.
UNDER_THE_CAP = [
    ("sin", " ", "x"),  # a part label's pattern: 4.7 s of CPU before
    ("1", "\u00b0 ", "x"),  # degree signs removed, leaving a run of spaces: 0.6 s before
    ("x =", "\n", "1"),
    ("(a) ", "\t", "(b) 2"),
    ("3 (", " ", "which is 4)"),
    ("y<", ", ", "x"),
]


@pytest.mark.parametrize(("before", "run", "after"), UNDER_THE_CAP, ids=repr)
def test_answers_under_the_length_cap_are_read_in_linear_time(
    before: str, run: str, after: str
) -> None:
    answer = before + (run * 1000)[: 990 - len(before) - len(after)] + after
    start = time.process_time()
    verdict = Verifier(None).precheck(answer, "1")
    assert time.process_time() - start < BOUND_S, f"{time.process_time() - start:.2f} s"
    assert isinstance(verdict, (Verdict, SymbolicCheck))


def test_the_probes_answers_are_read_as_before_but_at_once() -> None:
    """The issue's probe: an answer of a box, 12,000 spaces, then another box."""
    scorer = Scorer(Settings(verify_workers=1), Verifier(None))
    spaces = " " * 12_000
    start = time.process_time()
    between = _score(
        scorer, R + f"<answer>\\boxed{{1}}{spaces}x\\boxed{{2}}</answer>", "paper", "2"
    )
    boxed = _score(scorer, f"w \\boxed{{1}}{spaces}x\\boxed{{2}}", "boxed", "2")
    assert time.process_time() - start < BOUND_S
    assert between.accuracy_score == boxed.accuracy_score == 0.0
    # A box with a long run of blanks inside is still its value; one before the box changes
    # nothing either (the run is shortened, not refused).
    inside = _score(scorer, R + f"<answer>\\boxed{{42{spaces}}}</answer>", "paper", "42")
    before = _score(scorer, R + f"<answer>{spaces}\\boxed{{42}}{spaces}</answer>", "paper", "42")
    assert inside.reason == before.reason == "equivalent"


def test_repeated_end_tokens_are_stripped_in_linear_time() -> None:
    # 4 MB of "</s>": one copy of the text per token took 1.1 s for 800 KB and 40 s here
    # (quadratic); one walk back takes 0.4 s of CPU.
    start = time.process_time()
    assert strip_end_tokens("42" + "</s>" * 1_000_000 + " \n") == "42"
    assert strip_end_tokens("42" + "<pad>\n</s>" * 100_000, ["<my_eos>"]) == "42"
    assert time.process_time() - start < 5.0


@pytest.mark.parametrize(("where", "reason"), [("answer", "answer"), ("label", "reference")])
def test_boxes_nested_400_deep_cost_one_item_not_the_batch(where: str, reason: str) -> None:
    """RecursionError, before: a 500 for the whole batch (and OpenRLHF's client gives up)."""
    deep = "\\boxed{" * 400 + "1" + "}" * 400
    answer, label = (deep, "1") if where == "answer" else ("1", deep)
    queries = [R + "<answer>7</answer>", R + f"<answer>{answer}</answer>", R + "<answer>8</answer>"]
    scorer = Scorer(Settings(verify_workers=1), Verifier(None))
    items = asyncio.run(scorer.score_batch(queries, None, ["7", label, "9"]))
    assert [it.reason for it in items] == ["equivalent", f"{reason}_too_long", "not_equivalent"]
    assert [it.reward for it in items] == [20.0, 10.0, 10.0]


def test_an_item_whose_reading_raises_scores_zero_alone(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Any exception while reading one item (here its label, and its answer) scores that item 0
    with a reason, counts it by stage and type, logs it once without a traceback, and leaves
    the rest of the batch scored."""
    real_reference = grade.extract_reference

    def reference(label: object) -> str | None:
        if label == "boom":
            raise RecursionError("maximum recursion depth exceeded")
        return real_reference(label)

    real_unwrap = grade.unwrap_math

    def unwrap(text: str, **kw: object) -> str:
        if text == "explode":
            raise ValueError("a defect")
        return real_unwrap(text, **kw)

    monkeypatch.setattr(grade, "extract_reference", reference)
    monkeypatch.setattr(grade, "unwrap_math", unwrap)
    metrics = Metrics()
    scorer = Scorer(Settings(verify_workers=1), Verifier(None), ItemErrors(metrics.on_item_error))
    queries = [R + "<answer>7</answer>"] * 3 + [R + "<answer>explode</answer>"] * 2
    with caplog.at_level(logging.ERROR, logger="reward_server.service.scoring"):
        items = asyncio.run(scorer.score_batch(queries, None, ["7", "boom", "boom", "7", "7"]))
    assert [(it.reason, it.reward) for it in items] == [
        ("equivalent", 20.0),
        ("reference_error", 10.0),
        ("reference_error", 10.0),
        ("answer_error", 10.0),
        ("answer_error", 10.0),
    ]

    def count(stage: str, error: str) -> float | None:
        labels = {"stage": stage, "error": error}
        return metrics.registry.get_sample_value("gtpo_rs_item_errors_total", labels)

    assert (count("reference", "RecursionError"), count("answer", "ValueError")) == (2.0, 2.0)
    lines = [r for r in caplog.records if r.name == "reward_server.service.scoring"]
    assert len(lines) == 2 and not any(r.exc_info for r in lines), lines
    assert "RecursionError" in lines[0].getMessage() and "reference_error" in lines[0].getMessage()


def test_a_large_request_is_read_off_the_event_loop() -> None:
    """A request past READ_INLINE_CHARS is read in a reading thread: the loop keeps turning
    (here a ticker) while 512 sentence answers of about 1,000 characters are read. Read in the
    loop, they held it for the whole reading (1,024 took 4.1 s in the probe): its longest stall
    was the reading's whole time. The bound is relative, so a busy machine slows both."""
    sentence = "Janet collects the eggs of her ducks and sells them at the market every day, " * 12
    queries = [R + f"<answer>{sentence}so she makes $18.</answer>"] * 512
    scorer = Scorer(Settings(verify_workers=1, cache_size=0), Verifier(None))

    async def main() -> tuple[float, float, int]:
        gaps: list[float] = []

        async def ticker() -> None:
            last = time.perf_counter()
            while True:
                await asyncio.sleep(0.005)
                now = time.perf_counter()
                gaps.append(now - last)
                last = now

        tick = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        start = time.perf_counter()
        items = await scorer.score_batch(queries, None, ["#### 18"] * len(queries))
        took = time.perf_counter() - start
        tick.cancel()
        assert all(it.reason == "equivalent" for it in items)
        return max(gaps), took, len(gaps)

    longest, took, ticks = asyncio.run(main())
    scorer.close()
    assert ticks >= 10 and longest < took / 3, (longest, took, ticks)
