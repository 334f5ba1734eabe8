"""``gtpo eval`` end to end on CPU: tiny models built from a config (tests/eval/conftest.py),
transformers ``generate``, a real reward server on 127.0.0.1, and every reported number
recomputed here by brute force from the generated texts."""

from __future__ import annotations

import itertools
import json
import re
import sys
from collections import Counter
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

import gtpo.eval.generate as generate_module
from gtpo.cli import main as gtpo_main
from gtpo.eval.run import answer_classes
from gtpo.reward_client import RewardClient, RewardServerError, request_count

FIXTURES = Path(__file__).parent / "fixtures"
VALUE = {"1/2": Fraction(1, 2), "0.5": Fraction(1, 2), "\\frac{1}{2}": Fraction(1, 2), "3": 3}
LABELS = {"half": Fraction(1, 2), "three": 3}
KS = [1, 2, 4, 8]
N = 8


def expected_metrics(texts: list[str], label: Fraction) -> tuple[dict[int, float], ...]:
    """pass@k and maj@k of one prompt by enumerating every k-subset; answers grouped by value
    (what the server's equivalence must do: 1/2, 0.5 and \\frac{1}{2} are one answer)."""
    values = [VALUE[re.search(r"<answer> (\S+) </answer>", t).group(1)] for t in texts]
    passes, majs = {}, {}
    for k in KS:
        subsets = list(itertools.combinations(values, k))
        passes[k] = sum(label in s for s in subsets) / len(subsets)
        total = Fraction(0)
        for s in subsets:
            votes = Counter(s)
            top = max(votes.values())
            winners = [v for v, c in votes.items() if c == top]
            total += Fraction(sum(w == label for w in winners), len(winners))
        majs[k] = float(total / len(subsets))
    return passes, majs


def cached_texts(cache_dir: Path, model: str) -> dict[int, list[str]]:
    """prompt index → texts by sample index, from the model's generation cache."""
    (path,) = [p for p in cache_dir.glob("*.jsonl") if p.name.startswith(Path(model).name)]
    by_prompt: dict[int, dict[int, str]] = {}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        by_prompt.setdefault(row["prompt_index"], {})[row["sample"]] = row["text"]
    return {p: [rows[i] for i in range(N)] for p, rows in by_prompt.items()}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory, markov_model) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("e2e")
    data = root / "aime.jsonl"
    assert gtpo_main(["data", "aime24", "--input", str(FIXTURES / "questions.jsonl"),
                      "--out", str(data)]) == 0  # fmt: skip
    return {
        "root": root,
        "data": data,
        "gtpo": markov_model(root / "gtpo", {"1/2": 0.45, "0.5": 0.25, "3": 0.3}),
        "grpo": markov_model(root / "grpo", {"3": 0.55, "\\frac{1}{2}": 0.45}),
    }


def run_eval(
    ws: dict[str, Path], reward_url: str, out: Path, *models: str, extra: tuple[str, ...] = ()
) -> dict[str, Any]:
    argv = ["eval", "--data", str(ws["data"]), "--k", ",".join(map(str, KS)), "--n", str(N),
            "--backend", "hf", "--reward-url", reward_url, "--out", str(out),
            "--max-new-tokens", "12", "--gen-batch-size", "4", *extra]  # fmt: skip
    for model in models:
        argv += ["--model", str(ws[model]), "--name", model.upper()]
    assert gtpo_main(argv) == 0
    return json.loads((out / "results.json").read_text())


def test_eval_two_models_numbers_match_brute_force(
    workspace: dict[str, Path], reward_url: str
) -> None:
    out = workspace["root"] / "out"
    results = run_eval(workspace, reward_url, out, "gtpo", "grpo")
    assert [m["name"] for m in results["models"]] == ["GTPO", "GRPO"]
    ids = [json.loads(line)["id"] for line in workspace["data"].read_text().splitlines()]
    for model in results["models"]:
        texts = cached_texts(out / "cache", model["model"])
        exp_pass = {k: 0.0 for k in KS}
        exp_maj = {k: 0.0 for k in KS}
        for p, prompt_id in enumerate(ids):
            passes, majs = expected_metrics(texts[p], LABELS[prompt_id])
            for k in KS:
                exp_pass[k] += passes[k] / len(ids)
                exp_maj[k] += majs[k] / len(ids)
        for k in KS:
            assert model["pass@k"][str(k)] == pytest.approx(exp_pass[k], abs=1e-9), (model, k)
            assert model["maj@k"][str(k)] == pytest.approx(exp_maj[k], abs=1e-9), (model, k)
        # Every completion is well formed: format 10, and reward = 10 + 10 × accuracy.
        assert model["format_rate"] == 1.0
        assert model["mean_reward"] == pytest.approx(10 + 10 * model["accuracy"])
        assert model["accuracy"] == pytest.approx(model["pass@k"]["1"])
        assert set(model["reasons"]) <= {"equivalent", "not_equivalent"}
        assert (model["prompts"], model["n"]) == (2, N)
    # The two models' samples differ in law, so their numbers do too.
    assert results["models"][0]["maj@k"] != results["models"][1]["maj@k"]

    table = (out / "results.md").read_text()
    assert "| GTPO | 2 | 8 |" in table and "| GRPO | 2 | 8 |" in table and "maj@8" in table
    png = (out / "passk.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    samples = [json.loads(x) for x in next(out.glob("samples-gtpo-*.jsonl")).read_text().split("\n")
               if x]  # fmt: skip
    assert len(samples) == 2 * N and {"answer", "reason", "class", "label"} <= set(samples[0])
    assert "reward_token" not in results["config"]


def test_eval_resumes_from_the_cache(
    workspace: dict[str, Path], reward_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = workspace["root"] / "resume"
    first = run_eval(workspace, reward_url, out, "gtpo")

    # A complete cache: the rerun generates nothing and reports the same numbers.
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("generated although every sample was cached")

    monkeypatch.setattr(generate_module, "_hf_generate", refuse)
    assert run_eval(workspace, reward_url, out, "gtpo")["models"] == first["models"]
    monkeypatch.undo()

    # An interrupted run: 5 of 16 lines kept plus a torn line; only the 11 missing are made.
    (cache,) = (out / "cache").glob("*.jsonl")
    lines = cache.read_text().splitlines()
    cache.write_text("\n".join(lines[:5]) + '\n{"key": "torn')
    made: list[int] = []
    real = generate_module._hf_generate

    def counting(model, tok, prompts, missing, sampling, store, **kw):
        made.append(sum(len(v) for v in missing.values()))
        return real(model, tok, prompts, missing, sampling, store, **kw)

    monkeypatch.setattr(generate_module, "_hf_generate", counting)
    again = run_eval(workspace, reward_url, out, "gtpo")
    assert made == [2 * N - 5]
    kept = {json.loads(line)["key"]: json.loads(line)["text"] for line in lines[:5]}
    texts = {}
    for line in cache.read_text().splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        texts[row["key"]] = row["text"]
    assert len(texts) == 2 * N and all(texts[key] == text for key, text in kept.items())
    assert again["models"][0]["prompts"] == 2


@pytest.mark.parametrize(
    ("layout", "response_format"),
    [("think_prefilled", "think"), ("think", "think"), ("boxed", "boxed")],
)
def test_eval_scores_reasoning_models_formats(
    workspace: dict[str, Path], reward_url: str, markov_model, layout: str, response_format: str
) -> None:
    """A model that writes <think>…</think> (its template opening the block, or itself) then a
    boxed answer, and one that writes a boxed answer with no tags: with --response-format every
    sample gets full format and exactly the accuracy its answer earns; without it (the server's
    paper format) none does."""
    model = markov_model(
        workspace["root"] / layout, {"1/2": 0.3, "\\frac{1}{2}": 0.2, "3": 0.5}, layout
    )
    workspace = {**workspace, layout: model}
    out = workspace["root"] / f"out-{layout}"
    argv = ["--response-format", response_format]
    results = run_eval(workspace, reward_url, out, layout, extra=argv)["models"][0]
    assert results["format_rate"] == 1.0
    texts = cached_texts(out / "cache", str(model))
    ids = [json.loads(line)["id"] for line in workspace["data"].read_text().splitlines()]
    right = [
        VALUE[re.search(r"\\boxed\{(.+)\}", t).group(1)] == LABELS[prompt_id]
        for p, prompt_id in enumerate(ids)
        for t in texts[p]
    ]
    assert 0 < sum(right) < len(right)  # both right and wrong answers were sampled
    assert results["accuracy"] == pytest.approx(sum(right) / len(right))
    assert results["mean_reward"] == pytest.approx(10 + 10 * results["accuracy"])
    paper = run_eval(workspace, reward_url, workspace["root"] / f"paper-{layout}", layout)
    assert paper["models"][0]["format_rate"] == 0.0 and paper["models"][0]["accuracy"] == 0.0


def test_server_equivalence_groups_answers(reward_url: str) -> None:
    client = RewardClient(reward_url)
    before = {r: request_count(reward_url, r) for r in ("/v1/equivalent", "/v1/score")}
    assert client.find_match("0.5", ["3", "1/2"]) == 1
    # Grouping asks the pairwise route, never a synthetic response through /v1/score.
    assert request_count(reward_url, "/v1/equivalent") > before["/v1/equivalent"]
    assert request_count(reward_url, "/v1/score") == before["/v1/score"]
    assert client.find_match("\\frac{2}{4}", ["1/2"]) == 0
    assert client.find_match("4", ["3", "1/2"]) is None
    assert answer_classes(client, [["1/2", "3", "0.5", None, "\\frac{1}{2}", "03"]]) == [
        [0, 1, 0, None, 0, 1]
    ]


def test_eval_refuses_n_below_max_k(workspace: dict[str, Path], reward_url: str) -> None:
    with pytest.raises(SystemExit, match="--n 4 is smaller than the largest k"):
        gtpo_main(["eval", "--model", str(workspace["gtpo"]), "--data", str(workspace["data"]),
                   "--k", "1,8", "--n", "4", "--reward-url", reward_url,
                   "--out", str(workspace["root"] / "bad")])  # fmt: skip


def test_without_matplotlib_it_stops_before_generating(
    workspace: dict[str, Path], reward_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An install without matplotlib (gtpo[openrlhf,server]) is told what to install before any
    sample is generated, not after every model's generation."""
    import gtpo.eval.run as run_module

    def generate(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("generated before checking for matplotlib")

    monkeypatch.setattr(run_module, "generate", generate)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises
    out = workspace["root"] / "no-plot"
    with pytest.raises(
        SystemExit, match=r"matplotlib, which is not installed: pip install 'gtpo\[eval\]'"
    ):
        gtpo_main(["eval", "--model", str(workspace["gtpo"]), "--data", str(workspace["data"]),
                   "--reward-url", reward_url, "--out", str(out)])  # fmt: skip
    assert not (out / "cache").exists()


def test_unreachable_reward_server_fails_with_a_hint() -> None:
    import socket

    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = RewardClient(f"http://127.0.0.1:{port}", retry_for_s=0)
    with pytest.raises(RewardServerError, match="is the reward server running"):
        client.verdicts_batch(["x"], None, ["1"])
