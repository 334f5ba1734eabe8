"""The collapse scenario's verdicts: did each run collapse, in the paper's sense, and when?

The paper (Sec. 4.2, Fig. 1) describes GRPO's policy collapse as a sequence: the mean
completion entropy ⟨H⟩ climbs above ln 2, then the formatting reward falls, then the accuracy
reward falls; GTPO's δ (Eq. 6) is meant to keep ⟨H⟩ below ln 2 and the model formatted, and
GTPO without δ collapses too (Fig. 5). This module turns a run's per-step metrics into those
events, with fixed rules written down here, and the events into the "paper claim → measured"
table of ``summary.md`` and the curves of ``collapse.png``.

Rules (applied to each curve smoothed by a trailing mean over `window` steps, from the first
step that has a full window, so that the noise of the first few steps decides nothing):
- ⟨H⟩ crosses ln 2: the first step at which the smoothed ⟨H⟩ is above ln 2;
- a reward falls: the first step at which the smoothed reward is below 75 % of its best
  smoothed value so far and at least 1 point (of 10) under it (format 9.6 → below 7.2;
  accuracy 3.0 → below 2.0); the point keeps the noise of a reward near 0 from counting;
- a run collapses when, within the run, ⟨H⟩ goes above ln 2 and the format reward falls; it
  does so *in the paper's order* when the crossing comes first, then the format's fall, then
  the accuracy's (ties allowed: the smoothing blurs a few steps).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display needed
import matplotlib.pyplot as plt

from gtpo import LN2
from gtpo.eval.report import table_lines

FALL_FRACTION = 0.75  # a reward "falls" below this share of its best smoothed value so far…
FALL_POINTS = 1.0  # …and by at least this much on the 0..10 scale


def smooth(values: list[float], window: int) -> list[float]:
    """Trailing moving average (the raw curves of 64 samples a step are noisy)."""
    smoothed, total = [], 0.0
    for i, v in enumerate(values):
        total += v
        if i >= window:
            total -= values[i - window]
        smoothed.append(total / min(i + 1, window))
    return smoothed


def window_for(steps: int) -> int:
    """Smoothing window: a tenth of the run, between 1 and 10 steps."""
    return max(1, min(10, steps // 10))


@dataclass(frozen=True)
class Events:
    """When one run's ⟨H⟩ crossed ln 2 and its rewards fell (None: never)."""

    entropy_above_ln2: int | None
    format_fell: int | None
    accuracy_fell: int | None
    peak_entropy: float  # highest smoothed ⟨H⟩
    final_format: float  # smoothed format reward at the last step
    final_accuracy: float

    @property
    def collapsed(self) -> bool:
        """⟨H⟩ went above ln 2 and the format reward fell, in whatever order."""
        return self.entropy_above_ln2 is not None and self.format_fell is not None

    @property
    def in_paper_order(self) -> bool:
        """⟨H⟩ above ln 2, then the format falls, then the accuracy falls (Sec. 4.2)."""
        steps = (self.entropy_above_ln2, self.format_fell, self.accuracy_fell)
        return None not in steps and list(steps) == sorted(steps)


def _first_fall(values: list[float], start: int) -> int | None:
    """Index of the first value below FALL_FRACTION of the best one so far and FALL_POINTS
    under it, from `start`."""
    best = float("-inf")
    for index in range(start, len(values)):
        best = max(best, values[index])
        value = values[index]
        if value < FALL_FRACTION * best and value <= best - FALL_POINTS:
            return index
    return None


def run_events(rows: list[dict]) -> Events:
    """The events of one run, from its per-step rows."""
    rows = sorted(rows, key=lambda r: r["step"])
    window = window_for(len(rows))
    entropy = smooth([r["entropy_mean"] for r in rows], window)
    fmt = smooth([r["format_reward"] for r in rows], window)
    acc = smooth([r["accuracy_reward"] for r in rows], window)
    start = min(window, len(rows)) - 1  # the first index with a full window
    above = next((i for i in range(start, len(rows)) if entropy[i] > LN2), None)
    fell_format, fell_accuracy = _first_fall(fmt, start), _first_fall(acc, start)

    def step(index: int | None) -> int | None:
        return None if index is None else rows[index]["step"]

    return Events(
        entropy_above_ln2=step(above),
        format_fell=step(fell_format),
        accuracy_fell=step(fell_accuracy),
        peak_entropy=max(entropy[start:]),
        final_format=fmt[-1],
        final_accuracy=acc[-1],
    )


def rows_by_run(rows: list[dict]) -> dict[str, dict[int, list[dict]]]:
    """method label -> seed -> that run's rows, ordered by step."""
    grouped: dict[str, dict[int, list[dict]]] = {}
    for row in rows:
        grouped.setdefault(row["method"], {}).setdefault(row["seed"], []).append(row)
    return {
        method: {
            seed: sorted(mine, key=lambda r: r["step"]) for seed, mine in sorted(seeds.items())
        }
        for method, seeds in grouped.items()
    }


def events_by_run(rows: list[dict]) -> dict[str, dict[int, Events]]:
    """method label -> seed -> Events."""
    return {
        method: {seed: run_events(mine) for seed, mine in seeds.items()}
        for method, seeds in rows_by_run(rows).items()
    }


def _steps(values: list[int | None]) -> str:
    return ", ".join("never" if v is None else str(v) for v in values)


def _measured(events: dict[int, Events]) -> str:
    runs = list(events.values())
    collapsed = sum(e.collapsed for e in runs)
    ordered = sum(e.in_paper_order for e in runs)
    return (
        f"collapsed in {collapsed}/{len(runs)} seeds ({ordered} in the paper's order); "
        f"⟨H⟩ > ln 2 at step "
        f"{_steps([e.entropy_above_ln2 for e in runs])}; format fell at "
        f"{_steps([e.format_fell for e in runs])}; accuracy fell at "
        f"{_steps([e.accuracy_fell for e in runs])}; peak ⟨H⟩ "
        f"{', '.join(f'{e.peak_entropy:.2f}' for e in runs)}; final format "
        f"{', '.join(f'{e.final_format:.1f}' for e in runs)}, accuracy "
        f"{', '.join(f'{e.final_accuracy:.1f}' for e in runs)}"
    )


def _agreement(events: dict[int, Events], claim_collapses: bool) -> str:
    """How many seeds bear the claim out: a collapse, or for a "stays stable" claim, ⟨H⟩ never
    above ln 2 and a format reward that never falls (a collapse downwards counts against it)."""

    def agrees(e: Events) -> bool:
        if claim_collapses:
            return e.collapsed
        return e.entropy_above_ln2 is None and e.format_fell is None

    agreeing = sum(agrees(e) for e in events.values())
    if agreeing == len(events):
        return "yes"
    return "no" if agreeing == 0 else f"in {agreeing}/{len(events)} seeds"


def claims_table(rows: list[dict], labels: dict[str, str]) -> str:
    """The "paper claim → measured" table.

    `labels` maps each role (``grpo``, ``grpo_kl``, ``gtpo_penalty``, ``gtpo_advantage``,
    ``gtpo_no_filter``) to the method label of its run.
    """
    events = events_by_run(rows)
    claims = (
        ("grpo", True, "GRPO with β = 0 collapses: ⟨H⟩ climbs above ln 2, then the format "
         "reward falls, then accuracy falls (Sec. 4.2, Fig. 1)"),
        ("grpo_kl", True, "GRPO with β = 0.04 collapses too: the KL term reacts late (Fig. 1)"),
        ("gtpo_penalty", False, "GTPO (Eq. 7, penalty form) keeps ⟨H⟩ below ln 2 and the model "
         "formatted (Sec. 4.3, Fig. 4)"),
        ("gtpo_advantage", False, "GTPO (the authors' code, entropy in the advantage) keeps "
         "⟨H⟩ below ln 2 and the model formatted"),
        ("gtpo_no_filter", True, "GTPO without δ collapses too (Fig. 5)"),
    )  # fmt: skip
    measured = [
        [claim, labels[role], _measured(events[labels[role]]),
         _agreement(events[labels[role]], collapses)]
        for role, collapses, claim in claims
        if labels.get(role) in events
    ]  # fmt: skip
    return "\n".join(table_lines(["paper claim", "run", "measured", "agrees"], measured))


def plot_collapse(out: Path, rows: list[dict], colors: dict[str, str]) -> str:
    """``collapse.png``: format reward and ⟨H⟩ against ln 2 per run (like Fig. 1 and 4).

    Thin lines: each seed; thick: the mean over seeds; all smoothed the same way.
    """
    fig, axes = plt.subplots(2, 1, figsize=(9, 8), sharex=True)
    grouped = rows_by_run(rows)
    for ax, key in zip(axes, ("format_reward", "entropy_mean"), strict=True):
        for method, seeds in grouped.items():
            curves = []
            for mine in seeds.values():
                steps = [r["step"] for r in mine]
                curve = smooth([r[key] for r in mine], window_for(len(mine)))
                curves.append(curve)
                ax.plot(steps, curve, color=colors[method], alpha=0.25, linewidth=0.8)
            length = min(len(c) for c in curves)
            mean = [sum(c[i] for c in curves) / len(curves) for i in range(length)]
            ax.plot(steps[:length], mean, color=colors[method], linewidth=2, label=method)
        ax.grid(alpha=0.3)
    axes[0].set_title("format reward (0..10)")
    axes[0].set_ylim(0, 10.2)
    axes[1].set_title("mean completion entropy ⟨H⟩")
    axes[1].axhline(LN2, color="black", linestyle="--", linewidth=1, label="ln 2")
    axes[1].set_ylim(bottom=0)
    axes[1].set_xlabel("RL step")
    axes[1].set_ylabel("nats")
    axes[0].legend(fontsize=8)
    axes[1].legend(fontsize=8)
    fig.suptitle("collapse scenario: thin lines are seeds, thick lines their mean")
    fig.tight_layout()
    fig.savefig(out / "collapse.png", dpi=110)
    plt.close(fig)
    return "collapse.png"
