"""`gtpo demo`: reward server → task and tokenizer → warm start → GTPO and GRPO side by side →
held-out evaluation → report.

For each seed the warm start, H_ini and the "before RL" evaluation are computed once in this
process; then the scenario's runs (`scenario_runs`: GTPO and GRPO by default, five runs in the
collapse scenario) train from that same checkpoint in two worker processes with one thread
each (on 2 cores, thread contention slows the tiny model's ops many times over), and each
evaluates its final policy; the next seed's warm start trains meanwhile. All randomness comes
from seeded generators inside each process and rewards are put back by index, so a fixed seed
gives identical results.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import time
from collections import Counter
from collections.abc import Mapping
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer

from gtpo import GTPOConfig
from gtpo.config import GTPOConfigError, flag
from gtpo.demo import warmstart_cache
from gtpo.demo.evaluate import evaluate
from gtpo.demo.model import Policy, build_model
from gtpo.demo.real import HFPolicySpec, chat_split, worked_solution
from gtpo.demo.report import write_metrics_tables, write_report
from gtpo.demo.task import Problem, corpus, make_split
from gtpo.demo.tokenizer import EOS, PAD, build_tokenizer, check_round_trip
from gtpo.demo.trainer import RLConfig, measure_h_ini, train, training_order
from gtpo.demo.warmstart import noisy_demonstration, warm_start
from gtpo.local_reward_server import LocalRewardServer, check_loopback
from gtpo.reward_client import RewardClient, quiet_request_logs, request_count

log = logging.getLogger(__name__)

# The modules whose code computes a warm start (this one builds the tiny model): their source
# is part of its cache key.
WARM_START_CODE = (
    "gtpo.demo.warmstart", "gtpo.demo.task", "gtpo.demo.model", "gtpo.demo.tokenizer",
    "gtpo.demo.real", "gtpo.demo.word_problems", __name__,
)  # fmt: skip


@dataclass(frozen=True)
class DemoConfig:
    """What one `gtpo demo` run does. `SCENARIOS` and `PRESETS` hold the sizes of each.

    `gtpo` holds GTPO's knobs (the `--gtpo.*` flags and the `--ablation` shorthand), including
    H_ini's prompt count; the GRPO runs take none of them but λ's weight for their logged
    conflict fractions. `scenario` chooses the runs (`scenario_runs`): ``default`` trains GTPO
    and GRPO side by side; ``collapse`` reproduces the paper's stability experiment.
    """

    out: Path = Path("gtpo-demo")
    scenario: str = "default"
    seeds: tuple[int, ...] = (0,)
    steps: int = 150
    lr: float = 5e-5
    reward_url: str | None = None
    # The format completions are scored in (?format=); the synthetic task writes the paper's.
    response_format: str = "paper"
    # None: the tiny model on the synthetic task. Otherwise a real model (a known name, a hub id
    # or a directory, `gtpo model prepare`) on word problems (`gtpo.demo.real`).
    model: str | None = None
    problem_steps: tuple[int, ...] = (1,)  # arithmetic steps of the real model's word problems
    sft_steps: int = 600
    sft_lr: float = 3e-3
    sft_batch: int = 64
    n_train: int = 4000
    eval_prompts: int = 64
    eval_samples: int = 8  # k up to 8 for pass@k and maj@k
    prompts_per_step: int = 8
    group_size: int = 8
    max_new_tokens: int = 72
    temperature: float = 1.0  # of the RL rollouts (H_ini and the evaluation sample at 1.0)
    kl_coef: float = 0.04  # β of the collapse scenario's GRPO-with-KL run (the paper's 0.04)
    quick: bool = False
    gtpo: GTPOConfig = field(default_factory=GTPOConfig)
    # Where warm starts are kept between runs (`gtpo.demo.warmstart_cache`; the CLI's default
    # is `default_folder()`, `--no-cache` None); None: every run trains its own.
    cache: Path | None = None


# The collapse scenario's setting, chosen by watching GRPO with β = 0 alone (docs/demo.md).
SCENARIOS: dict[str, dict] = {
    "default": {},
    "collapse": {"steps": 200, "lr": 2.5e-3},
}

PRESETS: dict[str, dict] = {
    "default": {},
    # About 30 s of compute: enough to exercise every stage, not to learn much.
    "quick": {
        "steps": 6,
        "sft_steps": 100,
        "eval_prompts": 16,
        "gtpo": GTPOConfig(h_ini_prompts=32),
    },
}
# A real model (`--model`): its sizes replace the preset's. Chosen on SmolLM2-135M-Instruct on 2
# CPU cores, before comparing the methods (docs/demo.md): how many SFT steps make the format
# stick, and which learning rate makes GRPO's held-out accuracy rise over the warm start's.
_REAL_MODEL_DEFAULT: dict = {
    "steps": 30,
    "lr": 2e-5,
    "sft_steps": 20,
    "sft_lr": 3e-5,
    "sft_batch": 16,
    "n_train": 2000,
    "eval_prompts": 48,
    "eval_samples": 4,
    "prompts_per_step": 4,
    "group_size": 4,
    "max_new_tokens": 48,
    "gtpo": GTPOConfig(h_ini_prompts=16),
}
REAL_MODEL_PRESETS: dict[str, dict] = {
    "default": _REAL_MODEL_DEFAULT,
    # A shorter warm start (a weaker start, so 8 steps have room to move) and a smaller lr
    # (GRPO at 2e-5 drifted up in entropy in its first 10 steps): docs/demo.md.
    "quick": {
        **_REAL_MODEL_DEFAULT,
        "steps": 8,
        "lr": 1e-5,
        "sft_steps": 15,
        "n_train": 500,
        "eval_prompts": 24,
        "gtpo": GTPOConfig(h_ini_prompts=8),
    },
}


# What the demo asks the reward server: rewards while it trains, verdicts while it evaluates.
REWARD_ROUTES = ("/get_reward", "/v1/score")

# DemoConfig fields every RL run of a scenario takes as they are (same names in RLConfig).
SHARED_RL_FIELDS = (
    "steps",
    "prompts_per_step",
    "group_size",
    "max_new_tokens",
    "temperature",
    "lr",
)


def scenario_runs(config: DemoConfig, seed: int) -> dict[str, RLConfig]:
    """The RL runs of one seed, by role, all from the same warm start.

    default: ``gtpo`` (with `config.gtpo`'s knobs) and ``grpo`` (β = 0).
    collapse: ``grpo`` (β = 0), ``grpo_kl`` (β = `config.kl_coef`), GTPO with each form of the
    entropy term, ``gtpo_penalty`` (Eq. 7) and ``gtpo_advantage`` (the authors' code), and
    ``gtpo_no_filter`` (GTPO without δ, Eq. 6).
    """
    common = {name: getattr(config, name) for name in SHARED_RL_FIELDS} | {"seed": seed}
    knobs = config.gtpo
    if config.scenario == "default":
        return {
            "gtpo": RLConfig(method="gtpo", gtpo=knobs, **common),
            "grpo": RLConfig(method="grpo", gtpo=knobs, **common),
        }
    return {
        "grpo": RLConfig(method="grpo", gtpo=knobs, **common),
        "grpo_kl": RLConfig(method="grpo", kl_coef=config.kl_coef, gtpo=knobs, **common),
        "gtpo_penalty": RLConfig(
            method="gtpo", gtpo=replace(knobs, entropy_form="penalty"), **common
        ),
        "gtpo_advantage": RLConfig(
            method="gtpo", gtpo=replace(knobs, entropy_form="advantage"), **common
        ),
        "gtpo_no_filter": RLConfig(method="gtpo", gtpo=knobs.with_ablation("no-filter"), **common),
    }


def make_policy(model, tokenizer: Tokenizer) -> Policy:
    return Policy(
        model=model,
        encode=lambda text: tokenizer.encode(text).ids,
        # Special tokens kept: the query OpenRLHF sends holds the EOS, the server strips it.
        decode=lambda ids: tokenizer.decode(ids, skip_special_tokens=False),
        eos_id=tokenizer.token_to_id(EOS),
        pad_id=tokenizer.token_to_id(PAD),
    )


@dataclass(frozen=True)
class TinyPolicySpec:
    """How a worker process builds the tiny policy: its tokenizer, a seed for the random
    initialisation and, optionally, trained weights. Picklable (`real.HFPolicySpec` is the real
    model's)."""

    tokenizer_json: str

    def load(self, state_path: str | None = None, seed: int = 0) -> Policy:
        tokenizer = Tokenizer.from_str(self.tokenizer_json)
        model = build_model(
            tokenizer.get_vocab_size(), tokenizer.token_to_id(PAD), tokenizer.token_to_id(EOS), seed
        )
        if state_path is not None:
            model.load_state_dict(torch.load(state_path, weights_only=True))
        model.eval()
        return make_policy(model, tokenizer)


@dataclass(frozen=True)
class RLJob:
    """Everything a worker process needs (picklable: it is sent to a spawned process)."""

    cfg: RLConfig
    policy: TinyPolicySpec | HFPolicySpec
    warm_start_path: str
    reward_url: str
    response_format: str
    train: list[Problem]
    heldout: list[Problem]
    h_ini: float
    metrics_path: str
    eval_samples: int
    eval_seed: int
    progress_position: int


def _init_worker(level: int) -> None:
    torch.set_num_threads(1)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    quiet_request_logs(level)  # a spawned worker starts with the HTTP libraries' defaults


def run_rl_job(job: RLJob) -> dict:
    """Train one method from the warm start, then evaluate it on the held-out prompts."""
    torch.set_num_threads(1)
    policy = job.policy.load(job.warm_start_path, job.cfg.seed)
    client = RewardClient(job.reward_url, response_format=job.response_format)
    protected: Counter[int] = Counter()
    try:
        train(
            policy,
            job.train,
            client,
            job.cfg,
            job.h_ini,
            Path(job.metrics_path),
            progress_position=job.progress_position,
            protected=protected,
        )
        after = evaluate(
            policy, job.heldout, client, job.eval_samples, job.cfg.max_new_tokens, job.eval_seed
        )
        # The trained policy, beside the warm start it came from (load with `build_model`).
        final = Path(job.metrics_path).with_suffix(".pt")
        torch.save(policy.model.state_dict(), final)
    finally:
        client.close()
    total = sum(protected.values())
    pieces = [
        {"piece": policy.decode([token]), "tokens": count, "share": count / total}
        for token, count in protected.most_common(PROTECTED_PIECES)
    ]
    return {
        "method": job.cfg.label, "seed": job.cfg.seed, "after": after, "protected": pieces,
        "protected_total": total,
    }  # fmt: skip


# How many of the token pieces λ protects most often the report lists.
PROTECTED_PIECES = 12


def run_demo(config: DemoConfig) -> dict:
    """Run everything; returns the results written to ``<out>/results.json``."""
    started = time.perf_counter()
    out = config.out
    out.mkdir(parents=True, exist_ok=True)
    (out / "runs").mkdir(exist_ok=True)
    # One thread for the tiny model (thread contention slows its small ops many times over);
    # both cores for a real model's warm start and first evaluation, before the workers start.
    torch.set_num_threads(1 if config.model is None else 2)

    with ExitStack() as stack:
        if config.reward_url:
            url = check_loopback(config.reward_url)
            server = None
        else:
            # Started first: it warms its verification workers while the warm start trains.
            server = stack.enter_context(LocalRewardServer(out / "reward_server.log"))
            url = server.url
        client = RewardClient(url, response_format=config.response_format)
        stack.callback(client.close)

        task = _task(config)

        if server is not None:
            server.wait()
        requests_before = request_count(url, *REWARD_ROUTES)

        roles = {role: cfg.label for role, cfg in scenario_runs(config, 0).items()}
        labels = list(roles.values())
        if len(set(labels)) != len(labels):
            raise ValueError(f"two runs of the demo would share a label: {roles}")
        results: dict = {
            # "ablation": the `--ablation` names the GTPO knobs amount to, as in the labels.
            "config": _jsonable(
                {**asdict(config), "ablation": "-".join(config.gtpo.ablations) or None}
            ),
            "reward_url": "local" if server is not None else url,
            "methods": labels,
            "roles": roles,
            "h_ini": {},
            "runs": [],
            "model": task.model,
            "warm_starts": {},  # seed -> "trained", or the cache file it was loaded from
        }
        level = logging.getLogger().getEffectiveLevel()
        pool = stack.enter_context(
            ProcessPoolExecutor(
                max_workers=2,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_init_worker,
                initargs=(level,),
            )
        )
        # Each seed's RL runs are queued as soon as its warm start is done, and the next
        # seed's warm start trains meanwhile, so no core idles while a seed's last run trains.
        pending = [
            _start_seed(config, seed, task, client, url, pool, results["warm_starts"])
            for seed in config.seeds
        ]
        for seed, runs in zip(config.seeds, pending, strict=True):
            results["runs"].extend(_finish_seed(seed, runs))
            results["h_ini"][str(seed)] = results["runs"][-1]["h_ini"]
        results["reward_requests"] = request_count(url, *REWARD_ROUTES) - requests_before
        results["wall_seconds"] = time.perf_counter() - started

    write_metrics_tables(out, results)
    write_report(out, results)
    (out / "results.json").write_text(json.dumps(results, indent=2, sort_keys=True))
    log.info("report written to %s (%.0f s)", out / "summary.md", results["wall_seconds"])
    return results


@dataclass(frozen=True)
class Task:
    """What the demo trains on: the split, how to build the policy, the warm start's targets."""

    split: Any  # .train, .heldout: problems with .prompt and .answer
    spec: TinyPolicySpec | HFPolicySpec
    demonstrate: Any  # (problem, rng) -> the warm start's completion text
    model: dict | None  # the real model: its name, where its weights came from, its directory


def _task(config: DemoConfig) -> Task:
    """The tiny model's synthetic task and tokenizer, or a real model's word problems."""
    out = config.out
    if config.model is None:
        split = make_split(config.n_train, config.eval_prompts)
        tokenizer = build_tokenizer(corpus(split.train))
        check_round_trip(tokenizer, corpus(split.heldout))
        (out / "tokenizer.json").write_text(tokenizer.to_str())
        log.info(
            "task: %d training prompts, %d held-out prompts; vocabulary %d tokens",
            len(split.train), len(split.heldout), tokenizer.get_vocab_size(),
        )  # fmt: skip
        return Task(split, TinyPolicySpec(tokenizer.to_str()), noisy_demonstration, None)
    from transformers import AutoTokenizer

    from gtpo.models import prepare_model

    prepared = prepare_model(config.model)
    model_dir, source = prepared.path, prepared.source
    log.info("model %s: %s", config.model, source)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    split = chat_split(tokenizer, config.n_train, config.eval_prompts, config.problem_steps)
    log.info(
        "task: %d training and %d held-out word problems of %s step(s); vocabulary %d tokens",
        len(split.train), len(split.heldout), "/".join(map(str, config.problem_steps)),
        len(tokenizer),
    )  # fmt: skip
    model = {"name": config.model, "source": source, "path": str(model_dir)}
    return Task(split, HFPolicySpec(str(model_dir)), worked_solution, model)


def _warm_start(
    config: DemoConfig, seed: int, task: Task, policy: Policy
) -> tuple[list[float], str]:
    """Train the seed's warm start into `policy`, or load it from `config.cache` where an
    earlier run made it from the same inputs (`warmstart_cache`). Returns each step's loss and
    where the weights came from ("trained", or the cache file)."""

    def train_it() -> list[float]:
        losses = warm_start(
            policy.model, policy.encode, task.split.train, policy.eos_id, policy.pad_id,
            steps=config.sft_steps, seed=seed, batch_size=config.sft_batch, lr=config.sft_lr,
            desc=f"warm start seed {seed}", demonstrate=task.demonstrate,
        )  # fmt: skip
        log.info("seed %d: warm start done, loss %.3f -> %.3f", seed, losses[0], losses[-1])
        return losses

    if config.cache is None:
        return train_it(), "trained"
    spec = task.spec
    digest = warmstart_cache.key({
        "spec": spec,
        "model_files": (
            warmstart_cache.folder_digest(Path(spec.model_dir))
            if isinstance(spec, HFPolicySpec) else None
        ),
        "seed": seed, "steps": config.sft_steps, "batch": config.sft_batch, "lr": config.sft_lr,
        "problems": task.split.train,
        "demonstrate": f"{task.demonstrate.__module__}.{task.demonstrate.__qualname__}",
        "code": warmstart_cache.source_digest(WARM_START_CODE),
    })  # fmt: skip
    cached = warmstart_cache.load(config.cache, digest)
    if cached is not None:
        policy.model.load_state_dict(cached.state_dict)
        path = config.cache / f"{digest}.pt"
        log.info("seed %d: warm start from the cache, %s (the same model, demonstrations, "
                 "settings and code; --no-cache trains it again)", seed, path)  # fmt: skip
        return cached.losses, str(path)
    losses = train_it()
    warmstart_cache.store(
        config.cache, digest, warmstart_cache.WarmStart(policy.model.state_dict(), losses)
    )
    return losses, "trained"


def _start_seed(
    config: DemoConfig, seed: int, task: Task, client: RewardClient, url: str,
    pool: ProcessPoolExecutor, warm_starts: dict[str, str],
) -> list[tuple[RLJob, Future, dict]]:  # fmt: skip
    """Warm start, H_ini and the "before RL" evaluation of one seed, here; then its RL runs
    queued on `pool`. Returns each job, its future and what the report adds to its result;
    where the warm start came from goes to `warm_starts`."""
    out = config.out
    split = task.split
    policy = task.spec.load(seed=seed)
    losses, warm_starts[str(seed)] = _warm_start(config, seed, task, policy)
    checkpoint = out / "runs" / f"warm_start-seed{seed}.pt"
    torch.save(policy.model.state_dict(), checkpoint)

    h_ini = _h_ini(config, seed, split, policy)
    eval_seed = 10_000 + seed  # same held-out samples' randomness before and after RL
    before = evaluate(
        policy, split.heldout, client, config.eval_samples, config.max_new_tokens, eval_seed
    )
    log.info("seed %d: before RL %s", seed, _brief(before, config.eval_samples))

    jobs = [
        RLJob(
            cfg=cfg,
            policy=task.spec,
            warm_start_path=str(checkpoint),
            reward_url=url,
            response_format=config.response_format,
            train=split.train,
            heldout=split.heldout,
            h_ini=h_ini,
            metrics_path=str(out / "runs" / f"{cfg.label}-seed{seed}.jsonl"),
            eval_samples=config.eval_samples,
            eval_seed=eval_seed,
            progress_position=position,
        )
        for position, cfg in enumerate(scenario_runs(config, seed).values())
    ]
    shared = {"before": before, "h_ini": h_ini, "sft_loss": losses[-1]}
    return [(job, pool.submit(run_rl_job, job), shared) for job in jobs]


def _finish_seed(seed: int, pending: list[tuple[RLJob, Future, dict]]) -> list[dict]:
    """Wait for one seed's RL runs, in the order they were queued."""
    runs = []
    for job, future, shared in pending:
        result = future.result()
        log.info("seed %d: %s after RL %s", seed, job.cfg.label,
                 _brief(result["after"], job.eval_samples))  # fmt: skip
        runs.append({**result, **shared})
    return runs


def _h_ini(config: DemoConfig, seed: int, split, policy: Policy) -> float:
    """H_ini of Eq. 6: --gtpo.h_ini if given, else measured on the first training prompts."""
    if config.gtpo.h_ini is not None:
        log.info("seed %d: H_ini = %.3f nats (--gtpo.h_ini)", seed, config.gtpo.h_ini)
        return config.gtpo.h_ini
    prompts = config.gtpo.h_ini_prompts
    order = training_order(split.train, seed)
    h_ini = measure_h_ini(
        policy, order[:prompts], config.max_new_tokens, torch.Generator().manual_seed(seed)
    )
    log.info("seed %d: H_ini = %.3f nats (ln 2 = 0.693) on the first %d training prompts",
             seed, h_ini, prompts)  # fmt: skip
    return h_ini


def _brief(metrics: dict[str, float], k: int) -> str:
    keys = ("greedy_accuracy", "sampled_accuracy", "format_rate", f"pass@{k}", f"maj@{k}")
    return ", ".join(f"{key} {metrics[key]:.3f}" for key in keys)


def _jsonable(value):
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def preset(
    name: str,
    *,
    scenario: str = "default",
    gtpo_values: Mapping[str, Any] | None = None,
    ablation: str | None = None,
    **overrides: Any,
) -> DemoConfig:
    """The default or quick sizes of a scenario (one of `SCENARIOS`), with the given fields
    replaced (None: keep).

    `gtpo_values` replaces GTPOConfig fields of the preset's knobs (the `--gtpo.*` flags given),
    then `ablation` (one of `config.ABLATIONS`) is applied on top. Raises GTPOConfigError for a
    knob GTPOConfig refuses.
    """
    model = overrides.get("model")
    if model is not None and scenario != "default":
        raise GTPOConfigError(
            f"the {scenario} scenario runs on the tiny model (its setting was chosen for it); "
            "drop --model, or run the default scenario on the model"
        )
    config = replace(DemoConfig(), **SCENARIOS[scenario])
    config = replace(config, **PRESETS[name], quick=name == "quick")
    if model is not None:
        config = replace(config, **REAL_MODEL_PRESETS[name])
    config = replace(config, scenario=scenario)
    config = replace(config, **{k: v for k, v in overrides.items() if v is not None})
    given = dict(gtpo_values or {})
    chosen_by_scenario = sorted({"entropy_form", "entropy_filter"} & set(given))
    if scenario != "default" and (ablation or chosen_by_scenario):
        named = [f"--ablation {ablation}"] if ablation else []
        named += [flag(name) for name in chosen_by_scenario]
        raise GTPOConfigError(
            f"the {scenario} scenario runs GTPO with each entropy form and without δ itself; "
            f"drop {', '.join(named)}"
        )
    knobs = replace(config.gtpo, **given).with_ablation(ablation)
    return replace(config, gtpo=knobs)
