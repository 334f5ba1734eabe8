"""GTPOConfig (every knob, declared once) and gtpo_terms (a config becomes λ, δ and γ)."""

from __future__ import annotations

import argparse
import dataclasses
import math
import random
from pathlib import Path

import pytest
import torch
from paper_reference import LN2, reference_delta, reference_weights

from gtpo import GTPOConfig, GTPOConfigError, gtpo_terms
from gtpo.config import ABLATIONS, add_arguments, flag, namespace_values

DOCS = Path(__file__).resolve().parents[2] / "docs" / "core-api.md"


def test_defaults_are_the_papers():
    config = GTPOConfig()
    assert config.algo == "gtpo"
    assert config.gamma == 0.1  # γ of Eq. 7
    assert config.conflict_weight == 2.0  # λ on protected tokens of positive completions, Eq. 5
    assert config.no_conflict is False
    assert config.entropy_filter == "auto"  # Eq. 6 as written: filter only when H_ini < ln 2
    assert config.entropy_form == "penalty"  # Eq. 7 as written: −γ⟨H⟩_i, its own term
    assert config.h_ini is None  # measured, not given
    assert config.h_ini_prompts == 100  # Sec. 4.2: the first 100 training prompts
    assert config.ablations == ()
    assert config.is_gtpo and config.applies_conflict and config.entropy_coef == 0.1
    assert config.advantage_entropy_coef == 0.0 and config.label_suffix == ""


@pytest.mark.parametrize(
    ("algo", "form", "penalty", "folded", "suffix"),
    [
        ("gtpo", "penalty", 0.3, 0.0, ""),
        ("gtpo", "advantage", 0.0, 0.3, "-adv"),
        ("grpo", "penalty", 0.0, 0.0, ""),
        ("grpo", "advantage", 0.0, 0.0, ""),
    ],
)
def test_entropy_form_puts_gamma_in_one_place(algo, form, penalty, folded, suffix):
    config = GTPOConfig(algo=algo, gamma=0.3, entropy_form=form)
    assert (config.entropy_coef, config.advantage_entropy_coef) == (penalty, folded)
    assert config.label_suffix == suffix


BAD = [
    ("algo", "ppo", "pass one of gtpo, grpo"),
    ("entropy_filter", "sometimes", "pass one of auto, on, off"),
    ("entropy_form", "bonus", "pass one of penalty, advantage"),
    ("gamma", -0.1, "finite number >= 0"),
    ("gamma", math.nan, "finite number >= 0"),
    ("gamma", math.inf, "finite number >= 0"),
    ("conflict_weight", -1.0, "finite number >= 0"),
    ("conflict_weight", math.nan, "finite number >= 0"),
    ("h_ini", -0.5, "finite and >= 0"),
    ("h_ini", math.nan, "finite and >= 0"),
    ("h_ini_prompts", 0, "at least one prompt"),
    ("reward_timeout", 0.0, "number of seconds > 0"),
    ("reward_timeout", math.nan, "number of seconds > 0"),
    ("collapse_patience", 0, "pass 1 or more"),
]


@pytest.mark.parametrize(("name", "value", "advice"), BAD, ids=[f"{n}={v}" for n, v, _ in BAD])
def test_each_bad_value_raises_naming_its_flag(name, value, advice):
    with pytest.raises(GTPOConfigError) as err:
        GTPOConfig(**{name: value})
    assert len(err.value.problems) == 1
    problem = err.value.problems[0]
    assert problem.startswith(f"{flag(name)} is ") and advice in problem
    assert problem in str(err.value)


def test_every_bad_value_is_reported_at_once():
    with pytest.raises(GTPOConfigError) as err:
        GTPOConfig(gamma=-1.0, h_ini_prompts=0, entropy_filter="always")
    named = sorted(p.split(" ", 1)[0] for p in err.value.problems)
    assert named == ["--gtpo.entropy_filter", "--gtpo.gamma", "--gtpo.h_ini_prompts"]


def test_unknown_setting_and_unknown_ablation_are_refused():
    with pytest.raises(GTPOConfigError, match="unknown GTPO setting"):
        GTPOConfig.from_mapping({"gama": 0.1})
    with pytest.raises(GTPOConfigError, match="--ablation must be one of"):
        GTPOConfig().with_ablation("no-kl")


@pytest.mark.parametrize("name", sorted(ABLATIONS))
def test_each_ablation_is_its_field_overrides_and_is_recognised(name):
    ablated = GTPOConfig().with_ablation(name)
    changed = {
        f.name: getattr(ablated, f.name)
        for f in dataclasses.fields(GTPOConfig)
        if getattr(ablated, f.name) != getattr(GTPOConfig(), f.name)
    }
    assert changed == ABLATIONS[name]
    assert ablated.ablations == (name,)
    # The same knobs given as flags are the same ablation (one vocabulary).
    assert GTPOConfig(**ABLATIONS[name]).ablations == (name,)


def _parser(**kwargs) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(exit_on_error=False)
    add_arguments(parser, **kwargs)
    return parser


NON_DEFAULT = GTPOConfig(
    algo="grpo",
    gamma=0.05,
    entropy_form="advantage",
    conflict_weight=3.0,
    no_conflict=True,
    entropy_filter="on",
    entropy_threshold=0.7,
    h_ini=0.42,
    h_ini_prompts=20,
    gpu_memory_gib=80.0,
    reward_timeout=60.0,
    collapse_patience=7,
)


def _argv(config: GTPOConfig) -> list[str]:
    argv: list[str] = []
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if value is True:
            argv.append(flag(f.name))
        elif value is not False and value is not None:
            argv += [flag(f.name), str(value)]
    return argv


def test_flags_round_trip_through_add_arguments_and_from_namespace():
    assert GTPOConfig.from_namespace(_parser().parse_args([])) == GTPOConfig()
    for f in dataclasses.fields(GTPOConfig):  # the test's config really moves every knob
        assert getattr(NON_DEFAULT, f.name) != getattr(GTPOConfig(), f.name), f.name
    parsed = _parser().parse_args(_argv(NON_DEFAULT))
    assert GTPOConfig.from_namespace(parsed) == NON_DEFAULT
    assert vars(parsed) == {f"gtpo.{k}": v for k, v in dataclasses.asdict(NON_DEFAULT).items()}


def test_flags_without_defaults_hold_only_what_was_given_and_exclude_drops_flags(capsys):
    parser = _parser(exclude=("algo",), defaults=False)
    given = namespace_values(parser.parse_args(["--gtpo.gamma", "0", "--gtpo.no_conflict"]))
    assert given == {"gamma": 0.0, "no_conflict": True}
    with pytest.raises(SystemExit):
        parser.parse_args(["--gtpo.algo", "grpo"])
    assert "unrecognized arguments: --gtpo.algo" in capsys.readouterr().err
    with pytest.raises(ValueError, match="unknown GTPOConfig fields"):
        _parser(exclude=("gama",))


def test_argparse_refuses_a_value_outside_the_choices():
    with pytest.raises(argparse.ArgumentError, match="invalid choice"):
        _parser().parse_args(["--gtpo.entropy_filter", "always"])


# gtpo_terms against the paper's definitions (tests/paper_reference.py).

G = 4


def _batch(seed: int):
    """Groups of G ragged completions over a tiny vocabulary (many conflicts), as lists and as
    right-padded tensors."""
    rng = random.Random(seed)
    completions, advantages, entropies = [], [], []
    for group in range(5):
        rewards = [float(rng.randint(0, 2)) for _ in range(G)]
        if group == 2:
            rewards = [1.0] * G  # A = 0 for the whole group
        mean = sum(rewards) / G
        std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / (G - 1))
        for r in rewards:
            body = [rng.randint(1, 3) for _ in range(rng.randint(1, 7))]
            body[-1] = 7
            completions.append(body)
            advantages.append((r - mean) / (std + 1e-9))
            entropies.append(rng.uniform(0.3, 1.1))
    length = max(map(len, completions))
    ids = torch.zeros(len(completions), length, dtype=torch.long)
    mask = torch.zeros(len(completions), length, dtype=torch.bool)
    for i, c in enumerate(completions):
        ids[i, : len(c)] = torch.tensor(c)
        mask[i, : len(c)] = True
    return completions, advantages, entropies, ids, mask


def _reference(config: GTPOConfig, completions, advantages, entropies, h_ini):
    """λ rows, δ and γ straight from the paper for this config."""
    if config.is_gtpo and not config.no_conflict:
        weights = []
        for start in range(0, len(completions), G):
            group = slice(start, start + G)
            weights += reference_weights(
                completions[group], advantages[group], config.conflict_weight
            )
    else:
        weights = [[1.0] * len(c) for c in completions]
    mode = config.entropy_filter if config.is_gtpo else "off"
    if mode == "off":
        keep = [1.0] * len(entropies)
    else:
        below = h_ini if mode == "auto" else 0.0  # "on": Eq. 6's H_ini < ln 2 branch, always
        keep = [reference_delta(h, below) for h in entropies]
    gamma = config.gamma if config.is_gtpo else 0.0
    if config.entropy_form == "advantage":  # folded into the advantage: no separate term
        return weights, keep, 0.0
    return weights, keep, gamma


CASES = {
    "auto, H_ini below ln 2": (GTPOConfig(), 0.5),
    "auto, H_ini above ln 2": (GTPOConfig(), 0.9),
    "on": (GTPOConfig(entropy_filter="on"), 0.9),
    "off": (GTPOConfig(entropy_filter="off"), 0.5),
    "λ on positive conflicts = 3": (GTPOConfig(conflict_weight=3.0), 0.5),
    **{name: (GTPOConfig().with_ablation(name), 0.5) for name in ABLATIONS},
    "advantage form": (GTPOConfig(entropy_form="advantage"), 0.5),
    "grpo": (GTPOConfig(algo="grpo", gamma=0.3, entropy_filter="on"), 0.5),
}


@pytest.mark.parametrize("case", list(CASES))
def test_gtpo_terms_equal_the_papers_lambda_delta_gamma(case):
    config, h_ini = CASES[case]
    completions, advantages, entropies, ids, mask = _batch(seed=3)
    terms = gtpo_terms(
        config, ids, mask, torch.tensor(advantages), G, torch.tensor(entropies), h_ini
    )
    weights, keep, gamma = _reference(config, completions, advantages, entropies, h_ini)
    for i, c in enumerate(completions):
        assert terms.weights[i, : len(c)].tolist() == weights[i], f"row {i}"
        assert (terms.weights[i, len(c) :] == 0).all()  # padding
    assert terms.keep.tolist() == keep
    assert terms.gamma == gamma
    folded = config.is_gtpo and config.entropy_form == "advantage"
    shifted = [
        a - config.gamma * h if folded else a for a, h in zip(advantages, entropies, strict=True)
    ]
    assert terms.advantages.tolist() == pytest.approx(shifted)
    # The batch exercises what the case is about (else the comparison is moot).
    if config.applies_conflict:
        assert {0.0, config.conflict_weight} <= {w for row in weights for w in row}
    if config.filter_mode != "off" and (config.filter_mode == "on" or h_ini < LN2):
        assert 0.0 in keep and 1.0 in keep


def test_grpo_gives_lambda_one_delta_one_gamma_zero_whatever_the_knobs():
    _, advantages, entropies, ids, mask = _batch(seed=4)
    config = GTPOConfig(algo="grpo", gamma=0.5, conflict_weight=5.0, entropy_filter="on")
    terms = gtpo_terms(config, ids, mask, torch.tensor(advantages), G, torch.tensor(entropies), 0.1)
    assert torch.equal(terms.weights, mask.float())
    assert torch.equal(terms.keep, torch.ones(len(entropies)))
    assert terms.gamma == 0.0


def test_auto_filter_without_h_ini_says_what_to_pass():
    _, advantages, entropies, ids, mask = _batch(seed=5)
    with pytest.raises(ValueError, match=r"--gtpo\.h_ini"):
        gtpo_terms(
            GTPOConfig(), ids, mask, torch.tensor(advantages), G, torch.tensor(entropies), None
        )
