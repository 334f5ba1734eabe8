"""``gtpo eval`` end to end: prompts → n samples per prompt (cached) → reward server verdicts →
pass@k, maj@k, format rate, mean reward → JSON, markdown, plot.

Per sample the reward server gives the extracted answer, the format score (0..10), the accuracy
score (0 or 10) and why. A sample is *correct* when its accuracy score is 10 — the training
reward's own criterion, so the format gate applies as in training. A sample *votes* in maj@k when
the server judged its answer (`reward_server.protocol.NON_VOTING` lists the reasons that exclude
it).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gtpo.eval.generate import GenerationCache, Sampling, generate
from gtpo.eval.metrics import group_answers, maj_at_k_from_labels, pass_at_k
from gtpo.eval.report import markdown_table, plot, pyplot, write_json
from gtpo.reward_client import RewardClient
from reward_server.protocol import FORMAT_MAX, NON_VOTING, is_correct

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EvalItem:
    """One prompt: chat messages or a ready string, and the label the reward server reads."""

    prompt: str | list[dict[str, str]]
    label: Any
    id: str


@dataclass
class EvalConfig:
    """Everything ``gtpo eval`` needs; the CLI fills it from its flags."""

    models: list[str]
    data: Path
    reward_url: str
    out: Path
    ks: list[int] = field(default_factory=lambda: [1, 4, 8, 16, 32, 64])
    n: int | None = None  # default: max(ks)
    names: list[str] | None = None
    backend: str = "hf"
    sampling: Sampling = field(default_factory=Sampling)
    input_key: str = "prompt"
    label_key: str = "label"
    limit: int | None = None
    gen_batch_size: int = 16
    device: str | None = None
    reward_token: str | None = None
    response_format: str | None = None  # ?format= of every scoring request (None: the server's)
    score_batch_size: int = 64
    score_concurrency: int = 8
    tensor_parallel_size: int = 1
    enforce_eager: bool = False  # vllm: no graph compilation (a faster start)
    cache_dir: Path | None = None  # default: out / "cache"


def load_eval_data(
    path: Path, input_key: str = "prompt", label_key: str = "label", limit: int | None = None
) -> list[EvalItem]:
    """Read a JSONL file written by ``gtpo data`` (or any with the two keys)."""
    items: list[EvalItem] = []
    with Path(path).open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}:{number}: not JSON ({err})") from None
            missing = [key for key in (input_key, label_key) if key not in row]
            if missing:
                raise ValueError(
                    f"{path}:{number}: no {', '.join(map(repr, missing))} key (keys: "
                    f"{', '.join(row)}); prepare the file with `gtpo data` or pass "
                    "--input-key/--label-key"
                )
            prompt = row[input_key]
            if not isinstance(prompt, str | list):
                raise ValueError(f"{path}:{number}: {input_key!r} must be a string or messages")
            items.append(EvalItem(prompt, row[label_key], str(row.get("id", number - 1))))
            if limit is not None and len(items) >= limit:
                break
    if not items:
        raise ValueError(f"{path}: no prompts")
    return items


def render_prompt(prompt: str | list[dict[str, str]], tokenizer: Any) -> str:
    """A string prompt as is; chat messages through the tokenizer's chat template."""
    if isinstance(prompt, str):
        return prompt
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError(
            "the data holds chat messages but this model's tokenizer has no chat template: "
            "prepare the data with `gtpo data ... --format plain` (or --format chat "
            "--tokenizer OTHER) for a base model"
        )
    return tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)


def summarize(
    items: Sequence[EvalItem],
    verdicts: Sequence[Sequence[dict[str, Any]]],
    labels: Sequence[Sequence[int | None]],
    ks: Sequence[int],
) -> dict[str, Any]:
    """Per-model numbers from the server's verdicts and the answers' equivalence classes."""
    n = len(verdicts[0])
    passes = {k: 0.0 for k in ks}
    majs = {k: 0.0 for k in ks}
    reasons: Counter[str] = Counter()
    formats = rewards = accurate = 0.0
    for prompt_verdicts, prompt_labels in zip(verdicts, labels, strict=True):
        correct = [is_correct(v["accuracy_score"]) for v in prompt_verdicts]
        label_correct: dict[int, bool] = {}
        for label, ok in zip(prompt_labels, correct, strict=True):
            if label is not None:
                label_correct.setdefault(label, ok)
        for k in ks:
            passes[k] += pass_at_k(n, sum(correct), k)
            majs[k] += maj_at_k_from_labels(prompt_labels, label_correct, k)
        for v in prompt_verdicts:
            reasons[v["reason"]] += 1
            formats += v["format_score"] >= FORMAT_MAX
            accurate += is_correct(v["accuracy_score"])
            rewards += v["reward"]
    prompts, samples = len(items), len(items) * n
    return {
        "prompts": prompts,
        "n": n,
        "pass@k": {str(k): passes[k] / prompts for k in ks},
        "maj@k": {str(k): majs[k] / prompts for k in ks},
        "accuracy": accurate / samples,
        "format_rate": formats / samples,
        "mean_reward": rewards / samples,
        "reasons": dict(sorted(reasons.items())),
    }


def answer_classes(
    client: RewardClient, votes: Sequence[Sequence[str | None]], desc: str | None = None
) -> list[list[int | None]]:
    """Equivalence classes of each prompt's answers (`group_answers`), as the reward server
    judges them (``/v1/equivalent``), prompts grouped concurrently."""
    return client.concurrently(
        lambda answers: group_answers(answers, find_match=client.find_match), votes, desc=desc
    )


def _slug(model: str) -> str:
    tail = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(model).name or model)[:40]
    return f"{tail}-{hashlib.sha256(model.encode()).hexdigest()[:8]}"


def evaluate_model(
    model: str, name: str, items: Sequence[EvalItem], config: EvalConfig, client: RewardClient
) -> dict[str, Any]:
    """Generate (or reuse), score, group and summarize one model; writes its per-sample file."""
    from transformers import AutoTokenizer

    from gtpo.models import resolve_model

    n = config.n or max(config.ks)
    model = resolve_model(model)  # a known name (smollm2-135m-instruct) to its directory
    tokenizer = AutoTokenizer.from_pretrained(model)
    prompts = [render_prompt(item.prompt, tokenizer) for item in items]
    cache = GenerationCache((config.cache_dir or config.out / "cache") / f"{_slug(model)}.jsonl")
    completions = generate(
        model, tokenizer, prompts, n, config.sampling, cache,
        backend=config.backend, batch_size=config.gen_batch_size, device=config.device,
        vllm_kwargs={
            "tensor_parallel_size": config.tensor_parallel_size,
            "enforce_eager": config.enforce_eager,
        },
    )  # fmt: skip

    flat = client.verdicts(
        [p + c for p, texts in zip(prompts, completions, strict=True) for c in texts],
        [p for p in prompts for _ in range(n)],
        [item.label for item in items for _ in range(n)],
        desc=f"score {name}",
    )
    verdicts = [flat[i * n : (i + 1) * n] for i in range(len(items))]
    votes = [
        [v["answer"] if v["reason"] not in NON_VOTING and v["answer"] else None for v in pv]
        for pv in verdicts
    ]
    labels = answer_classes(client, votes, desc=f"group answers {name}")

    samples_path = config.out / f"samples-{_slug(model)}.jsonl"
    with samples_path.open("w", encoding="utf-8") as fh:
        for item, pv, pl in zip(items, verdicts, labels, strict=True):
            for i, (v, label) in enumerate(zip(pv, pl, strict=True)):
                row = {"id": item.id, "sample": i, "class": label, **v, "label": item.label}
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")

    summary = summarize(items, verdicts, labels, config.ks)
    return {"name": name, "model": model, "backend": config.backend, **summary}


def evaluate(config: EvalConfig) -> list[dict[str, Any]]:
    """Evaluate every model of ``config``; write results.json, results.md and passk.png."""
    n = config.n or max(config.ks)
    if not config.ks or min(config.ks) < 1:
        raise ValueError(f"--k values must be >= 1, got {config.ks}")
    if max(config.ks) > n:
        raise ValueError(
            f"--n {n} is smaller than the largest k ({max(config.ks)}): pass@k and maj@k need "
            "n >= k samples per prompt; raise --n or drop the larger k"
        )
    names = config.names or [Path(m).name or m for m in config.models]
    if len(names) != len(config.models):
        raise ValueError(f"{len(config.models)} --model but {len(names)} --name: give one each")
    if len(set(names)) != len(names):
        raise ValueError(f"model names must differ (got {names}); set them with --name")
    pyplot()  # the plot's library, before hours of generation rather than after

    items = load_eval_data(config.data, config.input_key, config.label_key, config.limit)
    config.out.mkdir(parents=True, exist_ok=True)
    results = []
    with RewardClient(
        config.reward_url, token=config.reward_token,
        batch_size=config.score_batch_size, concurrency=config.score_concurrency,
        response_format=config.response_format,
    ) as client:  # fmt: skip
        client.wait_ready()  # fail before generating, not after
        for model, name in zip(config.models, names, strict=True):
            log.info("evaluating %s (%s) on %d prompts × %d samples", name, model, len(items), n)
            results.append(evaluate_model(model, name, items, config, client))

    settings = asdict(config)
    settings = json.loads(json.dumps(settings, default=str))
    settings.pop("reward_token", None)  # never write a secret to disk
    settings["n"] = n
    write_json(config.out / "results.json", results, settings)
    table = markdown_table(results)
    (config.out / "results.md").write_text(table)
    plot(config.out / "passk.png", results, title=Path(config.data).name)
    log.info("results in %s\n%s", config.out, table)
    return results
