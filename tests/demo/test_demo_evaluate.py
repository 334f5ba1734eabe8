"""The demo's evaluation: answer extraction, maj@k votes in every response format, the eval plot
(pass@k and maj@k themselves are tested in tests/eval)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import gtpo.demo.evaluate as evaluate_module
from gtpo.demo.evaluate import evaluate, extract_answer
from gtpo.demo.model import Policy
from gtpo.reward_client import RewardClient


def test_extract_answer_takes_the_last_block():
    assert extract_answer("<reasoning>x</reasoning><answer> 5 </answer>") == "5"
    assert extract_answer("<answer>1</answer><answer>2</answer>") == "2"
    assert extract_answer("<reasoning>so 5</reasoning>5") is None
    assert extract_answer("</answer><answer>") is None


def test_extract_answer_reads_each_response_format_as_the_server_does():
    # think: an <answer> block, else the last box; a template's prefilled <think> counts.
    assert extract_answer("<think>2+5</think>\\boxed{7}<|im_end|>", "", "think") == "7"
    assert extract_answer("2+5</think>The answer is \\boxed{7}.", "user\n<think>", "think") == "7"
    assert extract_answer("<think>x</think><answer>7</answer>", "", "think") == "7"
    assert extract_answer("<think>still thinking \\boxed{7}", "", "think") is None
    # boxed: the final box, no tags; the paper's tags are not an answer there.
    assert extract_answer("So $x = \\boxed{12}$.<|im_end|>", "", "boxed") == "12"
    assert extract_answer("<answer>12</answer>", "", "boxed") is None


@pytest.mark.parametrize(
    ("fmt", "right", "wrong"),
    [
        ("paper", "<reasoning>2+5</reasoning><answer>7</answer>",
         "<reasoning>2+4</reasoning><answer>6</answer>"),
        ("think", "<think>2+5</think>\\boxed{7}", "<think>2+4</think>\\boxed{6}"),
        ("boxed", "2+5 gives \\boxed{7}", "2+4 gives \\boxed{6}"),
    ],
)  # fmt: skip
def test_majority_votes_count_in_every_response_format(server, monkeypatch, fmt, right, wrong):
    """maj@k votes on the answers the server scored: in think and boxed formats too, where a
    reader of <answer> blocks only would find no votes and report maj@k = 0."""
    texts = {1: right, 2: wrong}
    draws = iter([[[1]], [[1], [1], [2], [1]]])  # greedy, then 4 samples: 3 right, 1 wrong
    monkeypatch.setattr(evaluate_module, "sample", lambda *args, **kwargs: next(draws))
    policy = Policy(model=None, encode=lambda text: [0], decode=lambda ids: texts[ids[0]],
                    eos_id=0, pad_id=0)  # fmt: skip
    problem = SimpleNamespace(prompt="What is 2 + 5?", answer=7)
    client = RewardClient(server, response_format=fmt)
    try:
        results = evaluate(policy, [problem], client, 4, max_new_tokens=8, seed=0)
    finally:
        client.close()
    assert results["sampled_accuracy"] == 0.75
    assert results["format_rate"] == 1.0
    assert results["maj@1"] == pytest.approx(0.75)
    assert results["maj@3"] == pytest.approx(1.0)  # every 3 of the 4 samples hold two 7s


def test_the_eval_plot_marks_whole_numbers_of_samples(tmp_path, monkeypatch):
    from gtpo.demo import report

    figures = []
    monkeypatch.setattr(report, "_save", lambda fig, path: figures.append(fig) or str(path))
    metrics = {f"{m}@{k}": 0.5 for m in ("pass", "maj") for k in (1, 2, 3, 4)}
    results = {
        "config": {"eval_samples": 4},
        "methods": ["gtpo"],
        "runs": [{"method": "gtpo", "seed": 0, "before": metrics, "after": metrics}],
    }
    report.plot_eval(tmp_path, results, {"gtpo": "tab:blue"})
    for ax in figures[0].axes:
        assert list(ax.get_xticks()) == [1, 2, 3, 4]
