"""Held-out evaluation: greedy and sampled accuracy, format rate, pass@k and maj@k (paper Sec. 6.1).

Every sample is scored by the reward server's ``/v1/score``, whose verdict also names the
answer it read: maj@k votes on the answer the server scored, in whatever response format it
scored it. pass@k and maj@k are the project's estimators (`gtpo.eval`): unbiased pass@k (Chen et
al. 2021) and maj@k averaged exactly over every k of the n samples. Only well-formed samples
vote (the server grants accuracy only with the full format); the demo's answers are integers, so
they vote by their text.
"""

from __future__ import annotations

from collections import Counter

import torch

from gtpo.demo.model import Policy, sample
from gtpo.demo.task import STYLES, Problem, style_of
from gtpo.eval import maj_at_k, pass_at_k
from gtpo.reward_client import RewardClient
from reward_server.protocol import FORMAT_MAX, is_correct


def evaluate(
    policy: Policy,
    problems: list,
    client: RewardClient,
    samples_per_prompt: int,
    max_new_tokens: int,
    seed: int,
) -> dict[str, float]:
    """Greedy and sampled (T = 1.0) metrics on `problems`, in [0, 1].

    Keys: greedy_accuracy, greedy_format, sampled_accuracy, format_rate, pass@1..n, maj@1..n
    with n = `samples_per_prompt`; also mean_length (tokens) and, on the synthetic task,
    style_<name>, the share of sampled completions in each reasoning style. `problems` have
    `.prompt` and `.answer` (the synthetic task's, or a real model's `ChatProblem`).
    """
    n = samples_per_prompt
    texts = [p.prompt for p in problems]
    labels = [str(p.answer) for p in problems]
    prompts = [policy.encode(t) for t in texts]
    results: dict[str, float] = {}

    greedy = sample(policy.model, prompts, policy.eos_id, policy.pad_id, max_new_tokens, 0.0)
    scored = _verdicts(client, texts, [policy.decode(c) for c in greedy], labels, per_request=16)
    results["greedy_accuracy"] = _share([is_correct(v["accuracy_score"]) for v in scored])
    results["greedy_format"] = _share([v["format_score"] == FORMAT_MAX for v in scored])

    generator = torch.Generator().manual_seed(seed)
    rows = [ids for ids in prompts for _ in range(n)]
    sampled = sample(
        policy.model, rows, policy.eos_id, policy.pad_id, max_new_tokens, 1.0, generator
    )
    responses = [policy.decode(c) for c in sampled]
    scored = _verdicts(
        client,
        [t for t in texts for _ in range(n)],
        responses,
        [lab for lab in labels for _ in range(n)],
        per_request=n,
    )
    correct = [is_correct(v["accuracy_score"]) for v in scored]
    results["sampled_accuracy"] = _share(correct)
    results["format_rate"] = _share([v["format_score"] == FORMAT_MAX for v in scored])
    results["mean_length"] = sum(len(c) for c in sampled) / len(sampled)
    if isinstance(problems[0], Problem):  # the synthetic task's reasoning styles
        styles = Counter(style_of(r) for r in responses)
        for style in (*STYLES, "other"):
            results[f"style_{style}"] = styles[style] / len(responses)

    answers = [v["answer"] if v["format_score"] == FORMAT_MAX else None for v in scored]
    for k in range(1, n + 1):
        passes, majorities = 0.0, 0.0
        for p in range(len(problems)):
            rows_p = slice(p * n, (p + 1) * n)
            passes += pass_at_k(n, sum(correct[rows_p]), k)
            majorities += maj_at_k(answers[rows_p], correct[rows_p], k)
        results[f"pass@{k}"] = passes / len(problems)
        results[f"maj@{k}"] = majorities / len(problems)
    return results


def _verdicts(
    client: RewardClient,
    prompts: list[str],
    responses: list[str],
    labels: list[str],
    per_request: int,
) -> list[dict]:
    """The server's verdict on each ``prompt + response`` (``/v1/score``: the format and
    accuracy scores and the answer it read), ``per_request`` samples a request."""
    queries = [p + r for p, r in zip(prompts, responses, strict=True)]
    return client.verdicts(queries, prompts, labels, per_request=per_request, desc=None)


def _share(flags: list[bool]) -> float:
    return sum(flags) / len(flags) if flags else 0.0
