"""Evaluation outputs: ``results.json``, a markdown table and a PNG of pass@k / maj@k against k
(one line per model, so GTPO and GRPO checkpoints compare in one picture)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def write_json(path: Path, results: Sequence[dict[str, Any]], config: dict[str, Any]) -> None:
    """All numbers and the settings that produced them."""
    path.write_text(json.dumps({"config": config, "models": list(results)}, indent=2) + "\n")


def table_lines(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    """A Markdown table in GitHub's pipe syntax: the header, its rule, one line per row (cells
    unpadded, so the file diffs cleanly)."""
    return [
        f"| {' | '.join(header)} |",
        "|" + "---|" * len(header),
        *(f"| {' | '.join(map(str, row))} |" for row in rows),
    ]


def markdown_table(results: Sequence[dict[str, Any]]) -> str:
    """One row per model: pass@k and maj@k (%) for every k, format rate (%), mean reward."""
    ks = sorted({int(k) for r in results for k in r["pass@k"]})
    head = (
        ["model", "prompts", "n"]
        + [f"pass@{k}" for k in ks]
        + [f"maj@{k}" for k in ks]
        + ["format %", "mean reward"]
    )
    rows = [
        [r["name"], r["prompts"], r["n"]]
        + [f"{100 * r[metric][str(k)]:.1f}" for metric in ("pass@k", "maj@k") for k in ks]
        + [f"{100 * r['format_rate']:.1f}", f"{r['mean_reward']:.2f}"]
        for r in results
    ]
    return "\n".join(table_lines(head, rows)) + "\n"


class PlotUnavailableError(RuntimeError):
    """matplotlib is not installed."""


def pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend, or an error naming what to install. `evaluate`
    calls it before generating: an install without matplotlib (gtpo[openrlhf,server]) otherwise
    generated every sample and failed at the plot."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as err:
        raise PlotUnavailableError(
            "gtpo eval draws passk.png with matplotlib, which is not installed: "
            "pip install 'gtpo[eval]' (or matplotlib)"
        ) from err
    return plt


def plot(path: Path, results: Sequence[dict[str, Any]], title: str = "") -> None:
    """pass@k (left) and maj@k (right) in % against k on a log2 axis, one line per model."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, metric in zip(axes, ("pass@k", "maj@k"), strict=True):
        for r in results:
            ks = sorted(int(k) for k in r[metric])
            ax.plot(ks, [100 * r[metric][str(k)] for k in ks], marker="o", label=r["name"])
            ax.set_xscale("log", base=2)
            ax.set_xticks(ks, [str(k) for k in ks])
        ax.set_xlabel("k")
        ax.set_title(metric)
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("%")
    axes[1].legend()
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
