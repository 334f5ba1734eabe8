"""`gtpo demo --quick` end to end, as a user runs it: the report folder, rewards through HTTP,
and identical results for a fixed seed (one run against a server started here, one where the
demo starts its own and loads the warm start the first trained)."""

from __future__ import annotations

import json
import re
import struct
import subprocess
from pathlib import Path

import pytest
from demo_cli import expected_traffic, gtpo_command, reward_traffic

from gtpo.cli import main as gtpo_main
from gtpo.demo.run import preset

QUICK = preset("quick")
METHODS = ("gtpo", "grpo")


def _run(out: Path, *extra: str) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [*gtpo_command(), "demo", "--quick", "--out", str(out), *extra],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    # One line per reward request (httpx's INFO records) used to flood the terminal: 2,607 in
    # the default run, mixed into the progress bars.
    assert "HTTP Request:" not in done.stdout + done.stderr
    return done


@pytest.fixture(scope="module")
def warm_starts(tmp_path_factory) -> Path:
    """This module's warm-start cache, empty before its first run."""
    return tmp_path_factory.mktemp("warm-starts")


@pytest.fixture(scope="module")
def quick_run(server, tmp_path_factory, warm_starts):
    out = tmp_path_factory.mktemp("quick")
    before = reward_traffic(server)
    _run(out, "--reward-url", server, "--cache-dir", str(warm_starts))
    moved = {k: v - before[k] for k, v in reward_traffic(server).items()}
    return out, moved


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path.name} is not a PNG"
    return struct.unpack(">II", data[16:24])


def test_quick_demo_writes_the_report(quick_run):
    out, _ = quick_run
    for name in ("rewards", "entropy", "conflict", "filtered", "eval"):
        width, height = _png_size(out / f"{name}.png")
        assert width >= 600 and height >= 400, name
        assert (out / f"{name}.png").stat().st_size > 15_000, f"{name}.png looks empty"

    summary = (out / "summary.md").read_text()
    assert "| warm start (before RL) | GTPO after RL | GRPO after RL |" in summary
    for row in ("greedy accuracy", "sampled accuracy", "format rate", "pass@8", "maj@8"):
        line = next(ln for ln in summary.splitlines() if ln.startswith(f"| {row}"))
        numbers = re.findall(r"\| (\d\.\d{3}) ", line + " ")
        assert len(numbers) == 3, line  # warm start, GTPO, GRPO

    results = json.loads((out / "results.json").read_text())
    assert sorted(r["method"] for r in results["runs"]) == sorted(METHODS)
    for run in results["runs"]:
        for when in ("before", "after"):
            for k in range(1, 9):
                assert 0.0 <= run[when][f"pass@{k}"] <= 1.0
                assert 0.0 <= run[when][f"maj@{k}"] <= 1.0
            # pass@k never decreases with k.
            passes = [run[when][f"pass@{k}"] for k in range(1, 9)]
            assert passes == sorted(passes)

    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    steps = QUICK.steps
    assert [(r["method"], r["step"]) for r in rows] == [
        (m, s) for m in sorted(METHODS) for s in range(steps)
    ]
    for row in rows:
        assert row["reward"] == pytest.approx(row["format_reward"] + row["accuracy_reward"])
        assert 0.0 <= row["conflict_frac_pos"] <= 1.0 and row["entropy_mean"] > 0
    csv_lines = (out / "metrics.csv").read_text().splitlines()
    assert len(csv_lines) == 1 + 2 * steps and "conflict_frac_neg" in csv_lines[0]


def test_every_reward_came_through_http(quick_run):
    out, moved = quick_run
    assert moved == expected_traffic(QUICK)
    results = json.loads((out / "results.json").read_text())
    assert results["reward_requests"] == moved["requests"]


def test_same_seed_same_results(quick_run, tmp_path, warm_starts):
    """The second run loads the warm start the first trained (gtpo.demo.warmstart_cache): what
    follows is the same, step for step, as after a trained one."""
    first, _ = quick_run
    # This time the demo starts its own reward server.
    _run(tmp_path, "--cache-dir", str(warm_starts))

    def rows(out: Path) -> list[dict]:
        lines = (out / "metrics.jsonl").read_text().splitlines()
        return [
            {k: v for k, v in json.loads(line).items() if k != "step_seconds"} for line in lines
        ]

    assert rows(first) == rows(tmp_path)
    a, b = (json.loads((out / "results.json").read_text()) for out in (first, tmp_path))
    assert a["runs"] == b["runs"]
    assert a["h_ini"] == b["h_ini"]
    assert b["reward_url"] == "local" and a["reward_url"].startswith("http://127.0.0.1:")
    (entry,) = warm_starts.glob("*.pt")
    assert a["warm_starts"] == {"0": "trained"} and b["warm_starts"] == {"0": str(entry)}
    said = "Warm start loaded from the cache, not trained by this run"
    assert said not in (first / "summary.md").read_text()
    assert f"{said} (seed 0: {entry})" in (tmp_path / "summary.md").read_text()


def test_cli_refuses_a_remote_reward_url_and_bad_numbers(capsys):
    with pytest.raises(SystemExit, match="only sends rewards traffic to a server on this machine"):
        gtpo_main(["demo", "--quick", "--reward-url", "http://example.com:8000"])
    with pytest.raises(SystemExit, match="--steps must be >= 1"):
        gtpo_main(["demo", "--steps", "0"])
    with pytest.raises(SystemExit):
        gtpo_main(["demo", "--ablation", "no-kl"])
    assert "invalid choice" in capsys.readouterr().err


def test_cli_passes_the_response_format_through(monkeypatch, capsys):
    import gtpo.demo.run as demo_run

    seen = []
    monkeypatch.setattr(demo_run, "run_demo", seen.append)
    assert gtpo_main(["demo", "--quick", "--response-format", "think"]) == 0
    assert gtpo_main(["demo", "--quick"]) == 0
    assert [c.response_format for c in seen] == ["think", "paper"]  # the task's own by default
    with pytest.raises(SystemExit):
        gtpo_main(["demo", "--response-format", "xml"])
    assert "invalid choice: 'xml'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "httpx_level"),
    [
        (["demo", "--quick"], "WARNING"),
        (["--log-level", "debug", "demo", "--quick"], "DEBUG"),
        (["demo", "--quick", "--log-level", "debug"], "DEBUG"),
    ],
)
def test_log_level_debug_brings_the_request_lines_back(monkeypatch, argv, httpx_level):
    import logging

    import gtpo.demo.run as demo_run

    monkeypatch.setattr(demo_run, "run_demo", lambda config: None)
    monkeypatch.setattr(logging.getLogger(), "handlers", [])  # let basicConfig configure
    for name in ("", "httpx", "httpcore"):  # put every level back afterwards
        monkeypatch.setattr(logging.getLogger(name), "level", logging.getLogger(name).level)
    assert gtpo_main(argv) == 0
    assert logging.getLevelName(logging.getLogger("httpx").level) == httpx_level


def test_cli_takes_the_gtpo_flags_of_gtpo_openrlhf(capsys):
    """One vocabulary: the demo's knobs are GTPOConfig's --gtpo.* flags, checked the same way."""
    with pytest.raises(SystemExit, match=r"--gtpo\.gamma is -1\.0; .* must be a finite number"):
        gtpo_main(["demo", "--gtpo.gamma", "-1"])
    with pytest.raises(SystemExit):
        gtpo_main(["demo", "--gtpo.algo", "grpo"])  # the demo trains both methods itself
    assert "unrecognized arguments: --gtpo.algo" in capsys.readouterr().err
    # --ablation is a shorthand for the same knobs, and names the run either way.
    shorthand = preset("quick", ablation="no-filter")
    spelled = preset("quick", gtpo_values={"entropy_filter": "off"})
    assert shorthand.gtpo == spelled.gtpo and shorthand.gtpo.ablations == ("no-filter",)
    assert shorthand.gtpo.h_ini_prompts == QUICK.gtpo.h_ini_prompts == 32  # the preset's


def test_quick_collapse_scenario_writes_the_claims_table_and_curves(server, tmp_path):
    """`gtpo demo --scenario collapse --quick`, the CI form of the paper's stability
    experiment: five runs from one warm start, the claims table and the curves."""
    _run(tmp_path, "--scenario", "collapse", "--reward-url", server)
    results = json.loads((tmp_path / "results.json").read_text())
    roles = results["roles"]
    order = ["grpo", "grpo_kl", "gtpo_penalty", "gtpo_advantage", "gtpo_no_filter"]
    assert sorted(roles) == sorted(order)
    assert sorted(r["method"] for r in results["runs"]) == sorted(roles.values())
    assert results["config"]["scenario"] == "collapse"

    summary = (tmp_path / "summary.md").read_text()
    assert "## Paper claim → measured" in summary
    table = summary[summary.index("| paper claim |") :].split("\n\n")[0].splitlines()
    assert len(table) == 2 + 5
    for line, role in zip(table[2:], order, strict=True):
        label = roles[role]
        assert f"| {label} |" in line and "collapsed in " in line, line
        assert line.rstrip().endswith(("| yes |", "| no |", "seeds |"))
    width, height = _png_size(tmp_path / "collapse.png")
    assert width >= 600 and height >= 600
    assert "![collapse.png](collapse.png)" in summary

    # Only the β > 0 run logs the KL, 0 at the first step (the policy is the reference) and
    # positive once it has moved.
    kl_rows = [
        json.loads(line)
        for line in (tmp_path / "runs" / f"{roles['grpo_kl']}-seed0.jsonl").read_text().splitlines()
    ]
    assert kl_rows[0]["kl"] == pytest.approx(0.0, abs=1e-6)
    assert kl_rows[-1]["kl"] > 0
    header = (tmp_path / "metrics.csv").read_text().splitlines()[0].split(",")
    assert "kl" in header
    other = (tmp_path / "runs" / f"{roles['grpo']}-seed0.jsonl").read_text().splitlines()
    assert all("kl" not in json.loads(line) for line in other)


def test_cli_collapse_scenario_refuses_flags_it_sets(capsys):
    with pytest.raises(SystemExit, match="drop --ablation no-filter"):
        gtpo_main(["demo", "--scenario", "collapse", "--ablation", "no-filter"])


def test_the_help_states_the_presets_sizes():
    from gtpo.cli import build_parser

    demo = build_parser()._subparsers._group_actions[0].choices["demo"]
    helps = {a.option_strings[0]: a.help for a in demo._actions if a.option_strings}
    sizes = {
        "default": preset("default"), "quick": preset("quick"),
        "model": preset("default", model="m"), "model quick": preset("quick", model="m"),
        "collapse": preset("default", scenario="collapse"),
    }  # fmt: skip
    assert helps["--steps"] == (
        f"RL steps (default {sizes['default'].steps}; collapse scenario "
        f"{sizes['collapse'].steps}; quick {sizes['quick'].steps}; --model "
        f"{sizes['model'].steps}, quick {sizes['model quick'].steps})"
    )

    def short(lr: float) -> str:
        return f"{lr:g}".replace("e-0", "e-")  # 2e-5, as the help writes it

    assert (
        f"--model {short(sizes['model'].lr)}, quick {short(sizes['model quick'].lr)})"
        in (helps["--lr"])
    )
    assert f"default {short(sizes['default'].lr)};" in helps["--lr"]
    assert helps["--sft-steps"] == (
        f"warm-start SFT steps (default {sizes['default'].sft_steps}, quick "
        f"{sizes['quick'].sft_steps}; --model {sizes['model'].sft_steps}, quick "
        f"{sizes['model quick'].sft_steps})"
    )
