"""The collapse scenario's verdicts: events found on hand-made curves, the claims table, and the
runs the scenario trains."""

from __future__ import annotations

import pytest

from gtpo import GTPOConfigError
from gtpo.demo.run import preset, scenario_runs
from gtpo.demo.stability import claims_table, run_events, smooth


def _rows(method: str, seed: int, entropy, fmt, acc) -> list[dict]:
    return [
        {"method": method, "seed": seed, "step": step, "entropy_mean": h,
         "format_reward": f, "accuracy_reward": a}
        for step, (h, f, a) in enumerate(zip(entropy, fmt, acc, strict=True))
    ]  # fmt: skip


def _collapsing(n=100, cross=40, fall=60, acc_fall=70):
    """⟨H⟩ rises through ln 2 at `cross`; format falls at `fall`; accuracy at `acc_fall`."""
    entropy = [0.3 if t < cross else 1.5 for t in range(n)]
    fmt = [9.5 if t < fall else 3.0 for t in range(n)]
    acc = [3.0 if t < acc_fall else 0.5 for t in range(n)]
    return entropy, fmt, acc


def _stable(n=100):
    return [0.3] * n, [9.5] * n, [3.0] * n


def test_smooth_is_a_trailing_mean():
    assert smooth([1, 2, 3, 4], 2) == [1, 1.5, 2.5, 3.5]
    assert smooth([5.0], 10) == [5.0]


def test_events_in_the_papers_order_make_a_collapse():
    events = run_events(_rows("grpo", 0, *_collapsing()))
    # Window 10: the smoothed curve crosses / falls a few steps after the raw step.
    assert 40 <= events.entropy_above_ln2 < 50
    assert 60 <= events.format_fell < 70
    assert 70 <= events.accuracy_fell < 80
    assert events.collapsed and events.in_paper_order
    assert events.peak_entropy == pytest.approx(1.5)


def test_no_collapse_without_a_fall_or_before_the_entropy_rises():
    stable = run_events(_rows("gtpo", 0, *_stable()))
    assert stable.entropy_above_ln2 is None and stable.format_fell is None
    assert not stable.collapsed
    # High entropy but the format holds: not a collapse.
    entropy, _, acc = _collapsing()
    assert not run_events(_rows("x", 0, entropy, [9.5] * 100, acc)).collapsed
    # The format falls first and the entropy rises only later: a collapse, not in the paper's
    # order.
    entropy, fmt, acc = _collapsing(cross=80, fall=30)
    late = run_events(_rows("x", 0, entropy, fmt, acc))
    assert late.collapsed and not late.in_paper_order
    # A dip to 80 % of the best format is noise, not a fall (the rule is 75 %).
    fmt = [9.5 if t < 50 else 0.8 * 9.5 for t in range(100)]
    assert run_events(_rows("x", 0, [0.3] * 100, fmt, [3.0] * 100)).format_fell is None
    # A reward near 0 that halves has not fallen: less than 1 point of 10.
    acc = [0.8 if t < 50 else 0.3 for t in range(100)]
    assert run_events(_rows("x", 0, [0.3] * 100, [9.5] * 100, acc)).accuracy_fell is None
    # Noise in the first steps, before a full smoothing window, decides nothing.
    entropy = [2.0, 2.0] + [0.3] * 98
    fmt = [9.5, 2.0] + [9.5] * 98
    early = run_events(_rows("x", 0, entropy, fmt, [3.0] * 100))
    assert early.entropy_above_ln2 is None and early.format_fell is None


def test_claims_table_reports_each_run_against_its_claim():
    rows = []
    for seed in (0, 1, 2):
        rows += _rows("grpo", seed, *_collapsing(cross=40 + seed))
        rows += _rows("gtpo", seed, *_stable())
    # GTPO in the other form keeps ⟨H⟩ low but loses the format on one seed: a collapse
    # downwards, which does not bear out "keeps the model formatted".
    rows += _rows(
        "gtpo-adv", 0, [0.01] * 100, [9.5 if t < 30 else 0.0 for t in range(100)], [0.0] * 100
    )
    rows += _rows("gtpo-adv", 1, *_stable())
    rows += _rows("gtpo-adv", 2, *_stable())
    # GTPO without δ collapses in one seed of three.
    rows += _rows("gtpo-no-filter", 0, *_collapsing())
    rows += _rows("gtpo-no-filter", 1, *_stable())
    rows += _rows("gtpo-no-filter", 2, *_stable())
    roles = {
        "grpo": "grpo",
        "gtpo_penalty": "gtpo",
        "gtpo_advantage": "gtpo-adv",
        "gtpo_no_filter": "gtpo-no-filter",
    }
    lines = claims_table(rows, roles).splitlines()
    assert lines[0] == "| paper claim | run | measured | agrees |"
    grpo, gtpo, adv, no_filter = lines[2:]
    assert "| grpo |" in grpo and grpo.endswith("| yes |")
    assert "collapsed in 3/3 seeds (3 in the paper's order)" in grpo
    assert "collapsed in 0/3 seeds" in gtpo and gtpo.endswith("| yes |")
    assert "never" in gtpo  # ⟨H⟩ never went above ln 2
    assert "collapsed in 0/3 seeds" in adv and adv.endswith("| in 2/3 seeds |")
    assert "collapsed in 1/3 seeds" in no_filter and no_filter.endswith("| in 1/3 seeds |")


def test_collapse_scenario_trains_five_runs_with_distinct_labels():
    config = preset("quick", scenario="collapse")
    runs = scenario_runs(config, seed=0)
    assert list(runs) == ["grpo", "grpo_kl", "gtpo_penalty", "gtpo_advantage", "gtpo_no_filter"]
    labels = [cfg.label for cfg in runs.values()]
    assert len(set(labels)) == 5, labels
    assert runs["grpo"].kl_coef == 0 and runs["grpo_kl"].kl_coef == pytest.approx(0.04)
    assert runs["gtpo_penalty"].gtpo.entropy_form == "penalty"
    assert runs["gtpo_advantage"].gtpo.entropy_form == "advantage"
    assert runs["gtpo_no_filter"].gtpo.entropy_filter == "off"
    assert runs["gtpo_penalty"].gtpo.entropy_filter == "auto"
    # Every run of one seed shares the sizes of the scenario.
    assert {(c.steps, c.lr, c.seed) for c in runs.values()} == {(config.steps, config.lr, 0)}
    default = scenario_runs(preset("default"), seed=1)
    assert [c.label for c in default.values()] == ["gtpo", "grpo"]


def test_collapse_scenario_refuses_flags_it_sets_itself():
    with pytest.raises(GTPOConfigError, match="--ablation no-filter"):
        preset("default", scenario="collapse", ablation="no-filter")
    with pytest.raises(GTPOConfigError, match=r"--gtpo\.entropy_form"):
        preset("default", scenario="collapse", gtpo_values={"entropy_form": "advantage"})
    # Knobs it does not set pass through to every GTPO run.
    config = preset("default", scenario="collapse", gtpo_values={"gamma": 0.2})
    assert all(c.gtpo.gamma == 0.2 for c in scenario_runs(config, 0).values())
