"""The reliability benchmark's verdict on its restart run (benchmarks/reward_server_reliability.py):
a reward lost while the server was back within OpenRLHF's retry window, or a wrong one, is the
server's failure; rewards OpenRLHF's client dropped during a longer outage are the restart's
time, a target that `--restart-target-s inf` leaves to a quiet machine, and always said."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from reliability_harness import OPENRLHF_RETRY_WINDOW_S, RestartReport

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "reward_server_reliability.py"


@pytest.fixture(scope="module")
def verdict():
    spec = importlib.util.spec_from_file_location("reward_server_reliability", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.restart_verdict


def _report(downtime_s: list[float], lost: int = 0, wrong: int = 0) -> RestartReport:
    examples = [f"sample {i}: reward None" for i in range(lost)]
    examples += [f"sample {i}: reward [0.0]" for i in range(wrong)]
    return RestartReport(
        samples=100, rewarded=100 - lost, lost=lost, wrong_reward=wrong,
        downtime_s=downtime_s, examples=examples,
    )  # fmt: skip


def test_everything_rewarded_is_no_problem(verdict):
    assert verdict(_report([1.5, 1.4]), OPENRLHF_RETRY_WINDOW_S) == ([], None)


def test_a_reward_lost_within_the_window_is_the_servers_failure(verdict):
    problems, note = verdict(_report([1.5, 3.9], lost=2), float("inf"))
    assert len(problems) == 2 and note is None


@pytest.mark.parametrize("target_s", [OPENRLHF_RETRY_WINDOW_S, float("inf")])
def test_rewards_dropped_in_a_longer_outage_are_said_and_judged_by_the_target(verdict, target_s):
    problems, note = verdict(_report([5.32, 3.49], lost=5), target_s)
    assert "down 5.32 s" in note and "dropped 5 samples' rewards" in note
    if target_s == float("inf"):
        assert problems == []
    else:
        assert problems == ["a restart took 5.32 s, over the 4 s target"]


def test_a_wrong_reward_fails_whatever_the_outage(verdict):
    problems, _ = verdict(_report([5.32, 3.49], wrong=1), float("inf"))
    assert problems == ["sample 0: reward [0.0]"]
