"""The slow stage's order (tests/slow_stage.py): which parts may run side by side."""

from __future__ import annotations

import pytest
import slow_stage


def _marks(part: slow_stage.Part) -> str:
    """The marker expression of a part's pytest command line (`python -m pytest -m MARKS`)."""
    after_pytest = part.argv[part.argv.index("pytest") :]
    return after_pytest[after_pytest.index("-m") + 1]


def _ends_before(first: str, then: str, lanes: list[list[slow_stage.Part]]) -> bool:
    """Whether part `then` only starts after part `first` has ended: through the parts before
    it in its lane and those it waits for by name, and theirs in turn."""
    earlier = {}  # part -> the parts it starts after directly
    for lane in lanes:
        for at, part in enumerate(lane):
            earlier[part.name] = {p.name for p in lane[:at]} | set(part.after)
    seen, todo = set(), [then]
    while todo:
        for name in earlier[todo.pop()] - seen:
            seen.add(name)
            todo.append(name)
    return first in seen


@pytest.mark.parametrize("docker", [False, True])
def test_trl_and_the_real_model_never_run_beside_a_training_part(docker):
    """TRL trains in its pytest process, outside the memory gate; the real model's two ranks
    fill the machine beside any other training run (the module's docstring)."""
    lanes = slow_stage.lanes([], docker)
    assert _ends_before("fit", "trl", lanes)
    for training in ("fit", "docs", "trl"):
        assert _ends_before("real-model", training, lanes)
    for part in ("real-model", "server", "fit", "docs", "trl"):
        assert _ends_before("alone", part, lanes)


def test_the_docker_part_runs_the_docker_suites_only_when_asked_for():
    without = {part.name for lane in slow_stage.lanes([]) for part in lane}
    assert "docker" not in without
    lanes = slow_stage.lanes(["-x"], docker=True)
    (docker,) = [part for lane in lanes for part in lane if part.name == "docker"]
    assert _marks(docker) == "docker"
    assert docker.argv[-1] == "tests/docker" and "-x" in docker.argv
    assert _ends_before("docs", "docker", lanes) and _ends_before("fit", "docker", lanes)
    # Every other part leaves the Docker suites out.
    for part in (part for lane in lanes for part in lane if part.name != "docker"):
        assert _marks(part) == "slow and not docker"


def test_with_docker_is_not_passed_to_pytest(monkeypatch):
    seen = []
    monkeypatch.setattr(slow_stage, "_run_lane", lambda lane, only, *rest: seen.append(lane))
    slow_stage.main(["--with-docker", "--parts", "docker", "-x"])
    argv = [arg for lane in seen for part in lane for arg in part.argv]
    assert "--with-docker" not in argv and "-x" in argv
    assert "docker" in {part.name for lane in seen for part in lane}
