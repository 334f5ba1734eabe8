"""The demo's evaluation: maj@k votes on the answers the server scored, in every response
format, and the eval plot (pass@k and maj@k themselves are tested in tests/eval)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import gtpo.demo.evaluate as evaluate_module
from gtpo.demo.evaluate import evaluate
from gtpo.demo.model import Policy
from gtpo.reward_client import RewardClient


def _evaluate(server, monkeypatch, fmt, texts, draws, samples=4):
    """The demo's evaluation of one problem (2 + 5) whose greedy and sampled completions are
    `texts[id]` for the ids of `draws` (greedy first), scored by the real server."""
    draws = iter(draws)
    monkeypatch.setattr(evaluate_module, "sample", lambda *args, **kwargs: next(draws))
    policy = Policy(model=None, encode=lambda text: [0], decode=lambda ids: texts[ids[0]],
                    eos_id=0, pad_id=0)  # fmt: skip
    problem = SimpleNamespace(prompt="What is 2 + 5?", answer=7)
    client = RewardClient(server, response_format=fmt)
    try:
        return evaluate(policy, [problem], client, samples, max_new_tokens=8, seed=0)
    finally:
        client.close()


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
    draws = [[[1]], [[1], [1], [2], [1]]]  # greedy, then 4 samples: 3 right, 1 wrong
    results = _evaluate(server, monkeypatch, fmt, {1: right, 2: wrong}, draws)
    assert results["sampled_accuracy"] == 0.75
    assert results["format_rate"] == 1.0
    assert results["maj@1"] == pytest.approx(0.75)
    assert results["maj@3"] == pytest.approx(1.0)  # every 3 of the 4 samples hold two 7s


def test_votes_are_the_answers_of_the_servers_own_format(think_server, monkeypatch):
    """A client that leaves the format to the server (no ?format=) votes on the answers the
    server read in its own format (think here). A local parser in the demo's default format
    (paper) found no <answer> block in these completions: no votes, maj@k = 0."""
    texts = {1: "<think>2+5</think>\\boxed{7}", 2: "<think>2+4</think>\\boxed{6}"}
    results = _evaluate(think_server, monkeypatch, None, texts, [[[1]], [[1], [1], [2], [1]]])
    assert results["sampled_accuracy"] == 0.75 and results["format_rate"] == 1.0
    assert results["maj@1"] == pytest.approx(0.75)
    assert results["maj@3"] == pytest.approx(1.0)


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
