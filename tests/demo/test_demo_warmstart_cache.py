"""`gtpo demo`'s warm-start cache (gtpo.demo.warmstart_cache): a hit is the warm start a fresh
run trains, bit for bit, and a change to anything that determines it trains it again."""

from __future__ import annotations

import importlib
import logging
import sys
from dataclasses import replace

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import gtpo.demo.run as demo_run
from gtpo.cli import main as gtpo_main
from gtpo.demo import warmstart_cache
from gtpo.demo.run import DemoConfig, Task, TinyPolicySpec
from gtpo.demo.task import corpus, make_split
from gtpo.demo.tokenizer import build_tokenizer
from gtpo.demo.warmstart import noisy_demonstration


@pytest.fixture(scope="module")
def task() -> Task:
    split = make_split(200, 8)
    tokenizer = build_tokenizer(corpus(split.train))
    return Task(split, TinyPolicySpec(tokenizer.to_str()), noisy_demonstration, None)


# A few steps of the tiny model: enough for the weights to move from their initialisation.
SMALL = DemoConfig(sft_steps=4, sft_batch=8)


def _warm(config: DemoConfig, task: Task, seed: int = 0):
    """The seed's warm start as `gtpo demo` makes it: (weights, losses, where they came from)."""
    policy = task.spec.load(seed=seed)
    losses, source = demo_run._warm_start(config, seed, task, policy)
    return policy.model.state_dict(), losses, source


def test_a_hit_is_the_warm_start_a_fresh_run_trains_bit_for_bit(task, tmp_path):
    trained, trained_losses, source = _warm(SMALL, task)  # no cache: trained
    assert source == "trained"
    cached = replace(SMALL, cache=tmp_path)
    _, _, first = _warm(cached, task)
    loaded, loaded_losses, second = _warm(cached, task)
    (entry,) = tmp_path.glob("*.pt")
    assert (first, second) == ("trained", str(entry))
    assert loaded_losses == trained_losses
    assert trained.keys() == loaded.keys()
    for name, weights in trained.items():
        assert torch.equal(weights, loaded[name]), name
    initial = task.spec.load(seed=0).model.state_dict()
    assert not all(torch.equal(initial[name], loaded[name]) for name in initial)


@pytest.mark.parametrize(
    ("change", "seed"),
    [({"sft_steps": 5}, 0), ({"sft_lr": 1e-3}, 0), ({"sft_batch": 4}, 0), ({}, 1)],
    ids=["steps", "lr", "batch", "seed"],
)
def test_a_changed_setting_or_seed_trains_again(task, tmp_path, change, seed):
    cached = replace(SMALL, cache=tmp_path)
    _warm(cached, task)
    _, _, source = _warm(replace(cached, **change), task, seed)
    assert source == "trained"
    assert len(list(tmp_path.glob("*.pt"))) == 2


def test_other_demonstrations_or_problems_train_again(task, tmp_path):
    cached = replace(SMALL, cache=tmp_path)
    _warm(cached, task)
    other_targets = replace(task, demonstrate=lambda problem, rng: problem.prompt)
    assert _warm(cached, other_targets)[2] == "trained"
    fewer = replace(task, split=replace(task.split, train=task.split.train[:-1]))
    assert _warm(cached, fewer)[2] == "trained"


values = st.one_of(st.integers(), st.floats(allow_nan=False), st.text(max_size=8), st.none())


@given(
    parts=st.dictionaries(st.text(max_size=8), values, min_size=1, max_size=6),
    data=st.data(),
)
def test_the_key_changes_with_any_part(parts, data):
    name = data.draw(st.sampled_from(sorted(parts)))
    other = data.draw(values.filter(lambda v: repr(v) != repr(parts[name])))
    assert warmstart_cache.key(parts) == warmstart_cache.key(dict(parts))
    assert warmstart_cache.key(parts) != warmstart_cache.key({**parts, name: other})


def test_the_key_holds_this_machines_numerics(monkeypatch):
    before = warmstart_cache.key({"seed": 0})
    monkeypatch.setattr(torch, "get_num_threads", lambda: 64)
    threads = warmstart_cache.key({"seed": 0})
    monkeypatch.setattr(warmstart_cache, "_cpu", lambda: "another CPU")
    assert len({before, threads, warmstart_cache.key({"seed": 0})}) == 3


def test_a_change_to_the_code_is_another_key(tmp_path, monkeypatch):
    (tmp_path / "warm_code_probe.py").write_text("STEP = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    before = warmstart_cache.source_digest(["warm_code_probe"])
    (tmp_path / "warm_code_probe.py").write_text("STEP = 2\n")
    assert warmstart_cache.source_digest(["warm_code_probe"]) != before
    sys.modules.pop("warm_code_probe", None)


def test_every_module_the_warm_start_runs_is_in_its_key():
    """The modules the warm start and the tiny model's construction import from the demo."""
    for name in ("gtpo.demo.warmstart", "gtpo.demo.model", "gtpo.demo.tokenizer"):
        assert name in demo_run.WARM_START_CODE
    warmstart_cache.source_digest(demo_run.WARM_START_CODE)  # each one is found


def test_an_unreadable_entry_is_trained_again_and_said_so(task, tmp_path, caplog):
    cached = replace(SMALL, cache=tmp_path)
    _warm(cached, task)
    (entry,) = tmp_path.glob("*.pt")
    entry.write_bytes(entry.read_bytes()[:100])  # cut short, as by a full disk
    with caplog.at_level(logging.WARNING):
        assert _warm(cached, task)[2] == "trained"
    assert "cannot be read" in caplog.text and str(entry) in caplog.text
    assert _warm(cached, task)[2] == str(entry)  # written whole again


def test_the_cli_caches_by_default_and_not_with_no_cache(monkeypatch, tmp_path):
    seen = []
    monkeypatch.setattr(demo_run, "run_demo", seen.append)
    monkeypatch.setenv(warmstart_cache.CACHE_ENV, str(tmp_path / "root"))
    assert gtpo_main(["demo", "--quick"]) == 0
    assert gtpo_main(["demo", "--quick", "--no-cache"]) == 0
    assert gtpo_main(["demo", "--quick", "--cache-dir", str(tmp_path / "mine")]) == 0
    assert [c.cache for c in seen] == [tmp_path / "root" / "warm-starts", None, tmp_path / "mine"]
    monkeypatch.delenv(warmstart_cache.CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert warmstart_cache.default_folder() == tmp_path / "xdg" / "gtpo" / "warm-starts"
    with pytest.raises(SystemExit):
        gtpo_main(["demo", "--no-cache", "--cache-dir", str(tmp_path)])
