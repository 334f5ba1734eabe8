"""The report folder: per-step metrics (JSONL and CSV), PNG plots, and ``summary.md``.

Plots mirror the paper's figures in miniature: rewards during training (Fig. 2 top), mean
completion entropy against ln 2 (Fig. 1, 4), the share of conflict tokens and of filtered
completions, and pass@k / maj@k on held-out prompts (Fig. 2 bottom).
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display needed
import matplotlib.pyplot as plt

from gtpo import LN2
from gtpo.demo.stability import claims_table, plot_collapse, smooth, window_for
from gtpo.eval.report import table_lines

# One colour per role of `run.scenario_runs`, so a run keeps its colour in every plot.
ROLE_COLORS = {
    "gtpo": "tab:blue",
    "grpo": "tab:red",
    "grpo_kl": "tab:orange",
    "gtpo_penalty": "tab:blue",
    "gtpo_advantage": "tab:green",
    "gtpo_no_filter": "tab:purple",
}
SUMMARY_ROWS = (
    ("greedy_accuracy", "greedy accuracy"),
    ("sampled_accuracy", "sampled accuracy (T = 1)"),
    ("format_rate", "format rate (sampled)"),
    ("pass@1", "pass@1"),
    ("pass@2", "pass@2"),
    ("pass@4", "pass@4"),
    ("pass@8", "pass@8"),
    ("maj@1", "maj@1"),
    ("maj@2", "maj@2"),
    ("maj@4", "maj@4"),
    ("maj@8", "maj@8"),
    ("mean_length", "completion length (tokens, sampled)"),
    ("style_short", "share of short-style reasoning (sampled)"),
)


def label_colors(results: dict) -> dict[str, str]:
    """Each run label's colour, from its role (`results["roles"]`)."""
    return {label: ROLE_COLORS.get(role, "tab:gray") for role, label in results["roles"].items()}


def load_rows(out: Path, results: dict) -> list[dict]:
    """Per-step rows of every run, ordered by seed then method (not by finishing time)."""
    rows = []
    for run in sorted(results["runs"], key=lambda r: (r["seed"], r["method"])):
        path = out / "runs" / f"{run['method']}-seed{run['seed']}.jsonl"
        rows.extend(json.loads(line) for line in path.read_text().splitlines() if line)
    return rows


def write_metrics_tables(out: Path, results: dict) -> None:
    """``metrics.jsonl`` and ``metrics.csv``: one row per (seed, method, step)."""
    rows = load_rows(out, results)
    with open(out / "metrics.jsonl", "w") as sink:
        for row in rows:
            sink.write(json.dumps(row) + "\n")
    if rows:
        # The union, in first-seen order: only the GRPO run with β > 0 logs `kl`.
        fields = list(dict.fromkeys(key for row in rows for key in row))
        with open(out / "metrics.csv", "w", newline="") as sink:
            writer = csv.DictWriter(sink, fieldnames=fields, restval="")
            writer.writeheader()
            writer.writerows(rows)


def _curves(rows: list[dict], key: str) -> dict[str, tuple[list[int], list[float]]]:
    """Per method: steps and the value of `key` averaged over seeds."""
    by_method: dict[str, dict[int, list[float]]] = {}
    for row in rows:
        by_method.setdefault(row["method"], {}).setdefault(row["step"], []).append(row[key])
    return {
        method: (sorted(steps), [sum(steps[s]) / len(steps[s]) for s in sorted(steps)])
        for method, steps in by_method.items()
    }


def _plot_panel(
    ax, rows: list[dict], key: str, title: str, ylabel: str, colors: dict[str, str],
    linestyle="-", suffix="",
) -> None:  # fmt: skip
    curves = _curves(rows, key)
    window = window_for(len(next(iter(curves.values()))[0])) if curves else 1
    for method, (steps, values) in sorted(curves.items()):
        color = colors[method]
        ax.plot(steps, values, color=color, alpha=0.25, linewidth=0.8, linestyle=linestyle)
        ax.plot(
            steps, smooth(values, window), color=color, label=method + suffix,
            linestyle=linestyle,
        )  # fmt: skip
    ax.set_title(title)
    ax.set_xlabel("RL step")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)


def plot_training(out: Path, rows: list[dict], n_seeds: int, colors: dict[str, str]) -> list[str]:
    """The training plots; returns their file names."""
    note = f" (mean of {n_seeds} seeds)" if n_seeds > 1 else ""
    files = []

    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for ax, (key, title, top) in zip(
        axes,
        (
            ("reward", "total reward", 20),
            ("format_reward", "format reward", 10),
            ("accuracy_reward", "accuracy reward", 10),
        ),
        strict=True,
    ):
        _plot_panel(ax, rows, key, title + note, f"mean over samples (0..{top})", colors)
        ax.set_ylim(0, top * 1.02)
    axes[0].legend()
    files.append(_save(fig, out / "rewards.png"))

    fig, ax = plt.subplots(figsize=(7, 4.5))
    _plot_panel(ax, rows, "entropy_mean", "mean completion entropy ⟨H⟩" + note, "nats", colors)
    ax.axhline(LN2, color="black", linestyle="--", linewidth=1, label="ln 2")
    ax.set_ylim(bottom=0)
    ax.legend()
    files.append(_save(fig, out / "entropy.png"))

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    _plot_panel(
        axes[0], rows, "conflict_frac_pos", "conflict tokens, A > 0 (λ = 2)", "share of tokens",
        colors,
    )  # fmt: skip
    _plot_panel(
        axes[1], rows, "conflict_frac_neg", "conflict tokens, A < 0 (λ = 0)", "share of tokens",
        colors,
    )  # fmt: skip
    axes[0].legend()
    fig.suptitle("share of completion tokens in the conflict mask M (Eq. 5)" + note)
    files.append(_save(fig, out / "conflict.png"))

    fig, ax = plt.subplots(figsize=(7, 4.5))
    title = "filtered completions (δ = 0, Eq. 6)" + note
    _plot_panel(
        ax, rows, "filtered_frac", title, "share of completions", colors, suffix=": filtered"
    )
    # Dashed: completions with ⟨H⟩ > ln 2, the ones δ removes when H_ini < ln 2 (GRPO keeps
    # them): shows what the filter would act on for both methods.
    _plot_panel(
        ax, rows, "high_entropy_frac", title, "share of completions", colors, linestyle="--",
        suffix=": ⟨H⟩ > ln 2",
    )  # fmt: skip
    top = max([r["high_entropy_frac"] for r in rows] + [r["filtered_frac"] for r in rows])
    ax.set_ylim(-0.002, max(0.05, min(1.0, 1.15 * top)))
    ax.legend()
    files.append(_save(fig, out / "filtered.png"))
    return files


def plot_eval(out: Path, results: dict, colors: dict[str, str]) -> str:
    """pass@k and maj@k against k, before and after RL (mean over seeds)."""
    ks = list(range(1, results["config"]["eval_samples"] + 1))
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    for ax, metric in zip(axes, ("pass", "maj"), strict=True):
        before = _mean_over_seeds(results, results["methods"][0], "before")
        ax.plot(ks, [before[f"{metric}@{k}"] for k in ks], color="gray", marker="o",
                label="warm start (before RL)")  # fmt: skip
        for method in results["methods"]:
            after = _mean_over_seeds(results, method, "after")
            ax.plot(ks, [after[f"{metric}@{k}"] for k in ks], color=colors[method], marker="o",
                    label=method)  # fmt: skip
        ax.set_title(f"{metric}@k on held-out prompts")
        ax.set_xlabel("k")
        ax.set_xticks(ks)  # k is a whole number of samples
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("share of prompts")
    axes[0].legend()
    return _save(fig, out / "eval.png")


def _save(fig, path: Path) -> str:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path.name


def _mean_over_seeds(results: dict, method: str, when: str) -> dict[str, float]:
    runs = [r[when] for r in results["runs"] if r["method"] == method]
    return {k: sum(r[k] for r in runs) / len(runs) for k in runs[0]}


def _cell(values: list[float]) -> str:
    mean = sum(values) / len(values)
    if len(values) == 1:
        return f"{mean:.3f}" if abs(mean) < 10 else f"{mean:.1f}"
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    return f"{mean:.3f} ± {sd:.3f}" if abs(mean) < 10 else f"{mean:.1f} ± {sd:.1f}"


def _display(label: str) -> str:
    """``gtpo`` -> ``GTPO``, ``gtpo-no-filter`` -> ``GTPO no-filter``."""
    method, _, ablation = label.partition("-")
    return f"{method.upper()} {ablation}".strip()


def summary_table(results: dict) -> str:
    """Markdown table: warm start vs each method after RL, held-out metrics."""
    methods = results["methods"]
    header = ["held-out metric", "warm start (before RL)"]
    header += [f"{_display(m)} after RL" for m in methods]
    rows = []
    for key, name in SUMMARY_ROWS:
        if key not in results["runs"][0]["before"]:  # pass@8 with fewer samples, styles
            continue
        before = [r["before"][key] for r in results["runs"] if r["method"] == methods[0]]
        after = [[r["after"][key] for r in results["runs"] if r["method"] == m] for m in methods]
        rows.append([name, _cell(before), *map(_cell, after)])
    return "\n".join(table_lines(header, rows))


def write_report(out: Path, results: dict) -> None:
    """Plots and ``summary.md`` in `out`."""
    rows = load_rows(out, results)
    seeds = sorted({r["seed"] for r in results["runs"]})
    colors = label_colors(results)
    collapse = results["config"]["scenario"] == "collapse"
    pictures = [plot_collapse(out, rows, colors)] if collapse else []
    pictures += plot_training(out, rows, len(seeds), colors)
    pictures.append(plot_eval(out, results, colors))
    text = _run_lines(results, seeds)
    if collapse:
        text += _claims_lines(rows, results["roles"])
    text += [
        "## Held-out prompts" + (" (mean ± sd over seeds)" if len(seeds) > 1 else ""),
        "",
        summary_table(results),
        "",
        *_training_lines(_final_training(rows, results["methods"])),
        *protected_table(results),
        "## Plots",
        "",
        *[f"![{name}]({name})" for name in pictures],
        "",
        "Per-step metrics: `metrics.csv`, `metrics.jsonl`; everything above: `results.json`.",
        "",
    ]
    (out / "summary.md").write_text("\n".join(text))


def _run_lines(results: dict, seeds: list[int]) -> list[str]:
    """The report's title and what ran: settings, H_ini and δ, the reward traffic."""
    cfg = results["config"]
    collapse = cfg["scenario"] == "collapse"
    h_ini_values = [float(v) for v in results["h_ini"].values()]
    filtering = [v < LN2 for v in h_ini_values]
    delta = (
        "below ln 2 on every seed: Eq. 6's filter is active (δ = 0 for completions with ⟨H⟩ > ln 2)"
        if all(filtering)
        else "at or above ln 2 on every seed: Eq. 6's filter never acts (δ ≡ 1), GTPO is λ "
        "and the entropy penalty"
        if not any(filtering)
        else "below ln 2 on some seeds only: Eq. 6's filter acts on those"
    )
    model = results.get("model")
    if collapse:
        title = "the collapse scenario"
    else:
        title = f"GTPO vs GRPO on {model['name']}" if model else "GTPO vs GRPO on a tiny model"
    kl = f"KL β = {cfg['kl_coef']:g} for {results['roles']['grpo_kl']}" if collapse else "no KL"
    demonstrations = "worked solutions in the paper's format" if model else "noisy demonstrations"
    return [
        f"# gtpo demo: {title}",
        "",
        *([f"Model: {model['name']}, {model['source']}.", ""] if model else []),
        f"Seeds {', '.join(map(str, seeds))}; {cfg['steps']} RL steps of "
        f"{cfg['prompts_per_step']} prompts × G = {cfg['group_size']} completions, "
        f"temperature {cfg['temperature']:g}, lr {cfg['lr']:g}, one policy iteration per batch, "
        f"{kl}; warm start "
        f"{cfg['sft_steps']} SFT steps on {demonstrations}; held-out set "
        f"{cfg['eval_prompts']} prompts × {cfg['eval_samples']} samples."
        + (f" Ablation: {cfg['ablation']}." if cfg["ablation"] else ""),
        "",
        *_loaded_warm_starts(results.get("warm_starts", {})),
        f"H_ini (mean completion entropy before RL, per seed): "
        f"{', '.join(f'{v:.3f}' for v in h_ini_values)} nats (ln 2 = {LN2:.3f}), {delta}.",
        f"Rewards: {int(results['reward_requests'])} requests to the reward server "
        f"({results['reward_url']}): POST /get_reward while training, /v1/score while "
        f"evaluating. Wall time {results['wall_seconds']:.0f} s.",
        "",
    ]


def _claims_lines(rows: list[dict], roles: dict[str, str]) -> list[str]:
    """The collapse scenario's section: each claim of the paper against what the runs did."""
    return [
        "## Paper claim → measured",
        "",
        "Rules (gtpo/demo/stability.py): curves smoothed over a tenth of the run (at most "
        "10 steps), from the first full window; a reward *falls* when it drops below 75 % "
        "of its best value so far and at least 1 point under it; a "
        "run *collapses* when ⟨H⟩ goes above ln 2 and the format reward falls, in the "
        "paper's order when ⟨H⟩ crosses first, then the format falls, then the accuracy. "
        "Rewards on the 0..10 scale; steps count from 0.",
        "",
        claims_table(rows, roles),
        "",
    ]


def _training_lines(last: dict[str, dict[str, float]]) -> list[str]:
    """Each method's training metrics, the mean of its last 20 % of steps."""
    header = ["method", "total reward", "format reward", "accuracy reward", "⟨H⟩", "filtered",
              "conflict tokens, A > 0", "conflict tokens, A < 0"]  # fmt: skip
    rows = [
        [m, f"{v['reward']:.2f}", f"{v['format_reward']:.2f}", f"{v['accuracy_reward']:.2f}",
         f"{v['entropy_mean']:.3f}", f"{v['filtered_frac']:.3f}", f"{v['conflict_frac_pos']:.3f}",
         f"{v['conflict_frac_neg']:.3f}"]
        for m, v in last.items()
    ]  # fmt: skip
    return [
        "## Training, mean of the last 20 % of steps",
        "",
        "Conflict tokens: the share of the tokens of completions with A > 0 (A < 0) in Eq. 5's "
        "mask M, which GTPO weights 2 (0); GRPO's is logged by the same rule and not acted on.",
        "",
        *table_lines(header, rows),
        "",
    ]


def protected_table(results: dict) -> list[str]:
    """Markdown lines: the token pieces λ protects most often in each method's runs (the tokens
    of its completions in Eq. 5's mask, over every step and seed), on this tokenizer."""
    lines = [
        "## The token pieces λ protects most often",
        "",
        "Share of the tokens in Eq. 5's conflict mask over the whole run (a piece is one token "
        "of this tokenizer; a tag split into several pieces counts each).",
        "",
    ]
    for method in results["methods"]:
        counts: dict[str, int] = {}
        total = 0
        for run in results["runs"]:
            if run["method"] == method:
                total += run.get("protected_total", 0)
                for row in run.get("protected", []):
                    counts[row["piece"]] = counts.get(row["piece"], 0) + row["tokens"]
        if not total:
            continue
        top = sorted(counts.items(), key=lambda kv: -kv[1])[:8]
        cells = ", ".join(f"`{piece!r}` {count / total:.0%}" for piece, count in top)
        lines += [f"- {_display(method)}: {cells}", ""]
    return lines if len(lines) > 5 else []


def _final_training(rows: list[dict], methods: list[str]) -> dict[str, dict[str, float]]:
    result = {}
    for method in methods:
        mine = [r for r in rows if r["method"] == method]
        last_step = max(r["step"] for r in mine)
        tail = [r for r in mine if r["step"] >= last_step - max(1, (last_step + 1) // 5) + 1]
        keys = ("reward", "format_reward", "accuracy_reward", "entropy_mean", "filtered_frac",
                "conflict_frac_pos", "conflict_frac_neg")  # fmt: skip
        result[method] = {k: sum(r[k] for r in tail) / len(tail) for k in keys}
    return result


def _loaded_warm_starts(sources: dict[str, str]) -> list[str]:
    """A line naming the seeds whose warm start an earlier run trained (the cache of
    `gtpo.demo.warmstart_cache`), so the wall time is read as such."""
    loaded = {seed: path for seed, path in sources.items() if path != "trained"}
    if not loaded:
        return []
    listed = "; ".join(f"seed {seed}: {path}" for seed, path in loaded.items())
    return [f"Warm start loaded from the cache, not trained by this run ({listed}).", ""]
