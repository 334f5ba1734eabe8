"""GTPOConfig: every GTPO knob, declared once.

Each field carries its default, its help text and, where it has one, its paper symbol and
equation. Everything else derives from it: the OpenRLHF launcher's `--gtpo.*` flags
(`gtpo.openrlhf.flags`), the demo's command line and trainer (`gtpo demo`), and the TRL
trainer's arguments. The flag spelling is the same everywhere (`--gtpo.gamma 0`,
`--gtpo.entropy_filter off`, `--gtpo.no_conflict`), so a command line moves between the demo and
a cluster unchanged. `gtpo.objective.gtpo_terms` is the one function that turns a config into
λ (Eq. 5), δ (Eq. 6) and γ (Eq. 7); every trainer calls it.

Adding a knob:
- a field here, made with `knob(default, help, symbol=, equation=)` (its `--gtpo.<name>` flag,
  its default and its help follow in every front end);
- a range check in `_problems` if some values cannot run (every front end reports it with the
  flag's name);
- if it shapes λ, δ or γ, read it in `gtpo_terms` (every trainer then applies it);
- a test in tests/gtpo/test_config.py and a row in docs/core-api.md (a test checks that table
  lists every field).
Nothing else: the launchers, the demo and the trainers take their flags and values from here.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

FLAG_PREFIX = "--gtpo."

# Where Eq. 7's entropy term goes (the `entropy_form` knob; `entropy_coefficients`).
PENALTY = "penalty"  # the paper's Eq. 7: −γ⟨H⟩_i as its own term, with its own gradient
ADVANTAGE = "advantage"  # the authors' public code: A_i − γ⟨H⟩_i (detached) weighted by λ·δ
ENTROPY_FORMS = (PENALTY, ADVANTAGE)


class GTPOConfigError(ValueError):
    """A GTPO setting that cannot run; the message names the setting and what to change.

    `problems` holds one line per refused setting, so a front end (the OpenRLHF launcher) can
    list them together with its own refusals.
    """

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems = problems if problems is not None else [message]


def knob(
    default: Any,
    help: str,
    *,
    type: type | None = None,
    choices: tuple[str, ...] | None = None,
    metavar: str | None = None,
    symbol: str | None = None,
    equation: str | None = None,
) -> Any:
    """A GTPOConfig field with what its flag and its docs need (read by `add_arguments`)."""
    meta = {
        "help": help,
        "type": type if type is not None else _type_of_default(default),
        "choices": choices,
        "metavar": metavar,
        "symbol": symbol,
        "equation": equation,
    }
    return field(default=default, metadata=meta)


def _type_of_default(default: Any) -> type:
    """The flag type of a knob without an explicit one (its default's type)."""
    if isinstance(default, bool):
        return bool
    if default is None:
        raise TypeError("a knob whose default is None needs an explicit type=")
    return type(default)


@dataclass(frozen=True)
class GTPOConfig:
    """The knobs of GTPO (Eq. 5-7) and of its GRPO baseline (Eq. 1) run through the same code."""

    algo: str = knob(
        "gtpo",
        "gtpo (default) or grpo: the GRPO baseline through the same code for an A/B "
        "(λ ≡ 1, δ ≡ 1, γ = 0); entropy is still measured and logged",
        choices=("gtpo", "grpo"),
    )
    gamma: float = knob(
        0.1,
        "entropy penalty γ of Eq. 7 (paper: 0.1); 0 drops the entropy term",
        metavar="GAMMA",
        symbol="γ",
        equation="Eq. 7",
    )
    entropy_form: str = knob(
        "penalty",
        "where γ⟨H⟩_i of Eq. 7 goes: penalty (the paper's Eq. 7) subtracts it as its own term, "
        "with its own gradient, not multiplied by δ; advantage (the authors' public code, "
        "journal version) folds it into the advantage, J = (1/G) Σ_i δ_i (A_i − γ⟨H⟩_i)/|o_i| "
        "Σ_t λ_{i,t} r_{i,t}, with ⟨H⟩_i detached and λ from the signs of the original A_i",
        choices=ENTROPY_FORMS,
        symbol="γ",
        equation="Eq. 7",
    )
    conflict_weight: float = knob(
        2.0,
        "λ on conflict tokens of completions with A > 0 (Eq. 5, paper: 2)",
        metavar="WEIGHT",
        symbol="λ",
        equation="Eq. 5",
    )
    no_conflict: bool = knob(
        False,
        "ablation: λ ≡ 1 (no conflict-token weighting)",
        symbol="λ",
        equation="Eq. 5",
    )
    entropy_filter: str = knob(
        "auto",
        "δ of Eq. 6: auto filters completions with ⟨H⟩ above the cut (ln 2) only when H_ini is "
        "below it; on filters "
        "them whatever H_ini; off keeps every completion (ablation)",
        choices=("auto", "on", "off"),
        symbol="δ",
        equation="Eq. 6",
    )
    entropy_threshold: float = knob(
        math.log(2.0),
        "the entropy cut of Eq. 6 in nats: δ_i = 0 for completions with ⟨H⟩_i above it, and "
        "with --gtpo.entropy_filter auto only when H_ini is below it (paper: ln 2; the authors' "
        "code cuts at 0.7 on every step: --gtpo.entropy_threshold 0.7 --gtpo.entropy_filter on)",
        metavar="NATS",
        symbol="δ",
        equation="Eq. 6",
    )
    h_ini: float | None = knob(
        None,
        "H_ini in nats instead of measuring it (see --gtpo.h_ini_prompts)",
        type=float,
        metavar="NATS",
        symbol="H_ini",
        equation="Eq. 6",
    )
    h_ini_prompts: int = knob(
        100,
        "measure H_ini (Eq. 6) once, before the first update, on the first N training "
        "prompts (paper: 100); gtpo-openrlhf samples G completions of each, which costs N×G "
        "extra generations and reward calls",
        metavar="N",
        symbol="H_ini",
        equation="Eq. 6",
    )
    gpu_memory_gib: float | None = knob(
        None,
        "gtpo-openrlhf: the memory of one GPU in GiB, for the dry run's per-phase memory check "
        "(default: the local GPU's, when there is one)",
        type=float,
        metavar="GIB",
    )
    reward_timeout: float = knob(
        300.0,
        "keep retrying an unreachable reward server (connection errors, 5xx, 408, 429) with "
        "backoff for this long, then stop the run with an error naming the URL",
        metavar="SECONDS",
    )
    collapse_patience: int = knob(
        5,
        "warn when the mean completion entropy stays above ln 2 for this many steps",
        metavar="STEPS",
    )

    def __post_init__(self) -> None:
        problems = _problems(self)
        if problems:
            lines = "\n".join(f"  - {p}" for p in problems)
            raise GTPOConfigError(f"invalid GTPO settings:\n{lines}", problems)

    @property
    def is_gtpo(self) -> bool:
        return self.algo == "gtpo"

    @property
    def applies_conflict(self) -> bool:
        """λ of Eq. 5 is applied (GTPO without the no_conflict ablation)."""
        return self.is_gtpo and not self.no_conflict

    @property
    def filter_mode(self) -> str:
        """δ of Eq. 6: auto | on | off (always off for the GRPO baseline)."""
        return self.entropy_filter if self.is_gtpo else "off"

    @property
    def entropy_coef(self) -> float:
        """γ subtracted as its own term with its own gradient (Eq. 7's penalty form): the
        configured γ with `entropy_form` penalty, 0 with advantage and for the GRPO baseline."""
        return entropy_coefficients(self.gamma if self.is_gtpo else 0.0, self.entropy_form)[0]

    @property
    def advantage_entropy_coef(self) -> float:
        """γ folded into the advantage, A_i − γ⟨H⟩_i with ⟨H⟩_i detached: the configured γ with
        `entropy_form` advantage, 0 with penalty and for the GRPO baseline."""
        return entropy_coefficients(self.gamma if self.is_gtpo else 0.0, self.entropy_form)[1]

    @property
    def label_suffix(self) -> str:
        """ "-adv" in advantage form, "" otherwise: run labels tell the two forms apart."""
        return "-adv" if self.is_gtpo and self.entropy_form == ADVANTAGE else ""

    def with_ablation(self, name: str | None) -> GTPOConfig:
        """This config with one of `ABLATIONS` applied (None: unchanged)."""
        if name is None:
            return self
        if name not in ABLATIONS:
            raise GTPOConfigError(f"--ablation must be one of {', '.join(ABLATIONS)}, got {name!r}")
        return dataclasses.replace(self, **ABLATIONS[name])

    @property
    def ablations(self) -> tuple[str, ...]:
        """The names in `ABLATIONS` this config has switched on, in `ABLATIONS` order."""
        return tuple(
            name
            for name, overrides in ABLATIONS.items()
            if all(getattr(self, knob) == value for knob, value in overrides.items())
        )

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> GTPOConfig:
        """Build from a mapping of field names; an unknown name is an error, not ignored."""
        known = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise GTPOConfigError(f"unknown GTPO setting(s) {unknown}; known: {known}")
        return cls(**values)

    @classmethod
    def from_namespace(cls, namespace: Any) -> GTPOConfig:
        """Build from an argparse namespace filled by `add_arguments` (dests `gtpo.<field>`)."""
        return cls(**namespace_values(namespace))


def entropy_coefficients(gamma: float, entropy_form: str) -> tuple[float, float]:
    """(penalty, folded): the share of γ that Eq. 7 subtracts as its own term −γ⟨H⟩_i and the
    share folded into the advantage as A_i − γ⟨H⟩_i. One is γ, the other 0."""
    if entropy_form not in ENTROPY_FORMS:
        raise ValueError(
            f"entropy_form is {entropy_form!r}; pass one of {', '.join(ENTROPY_FORMS)} "
            f"({flag('entropy_form')})"
        )
    return (gamma, 0.0) if entropy_form == PENALTY else (0.0, gamma)


# GTPO without one of its parts, as named in the demo's `--ablation` shorthand and in reports.
ABLATIONS: dict[str, dict[str, Any]] = {
    "no-conflict": {"no_conflict": True},  # λ ≡ 1
    "no-filter": {"entropy_filter": "off"},  # δ ≡ 1
    "no-entropy": {"gamma": 0.0},  # γ = 0
}


def _dest(name: str) -> str:
    return FLAG_PREFIX[2:] + name


def flag(name: str) -> str:
    """The command-line spelling of a GTPOConfig field: `gamma` -> `--gtpo.gamma`."""
    return FLAG_PREFIX + name


def namespace_values(namespace: Any) -> dict[str, Any]:
    """The GTPOConfig fields present in an argparse namespace filled by `add_arguments`.

    With `add_arguments(..., defaults=False)` these are exactly the flags on the command line.
    """
    values = {}
    for f in dataclasses.fields(GTPOConfig):
        dest = _dest(f.name)
        if hasattr(namespace, dest):
            values[f.name] = getattr(namespace, dest)
    return values


def add_arguments(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    *,
    exclude: Collection[str] = (),
    defaults: bool = True,
) -> None:
    """Add one `--gtpo.<field>` flag per GTPOConfig field (dest `gtpo.<field>`).

    `exclude` names fields a front end has no use for (the demo runs GTPO and GRPO side by
    side, so it takes no `--gtpo.algo`); a flag that would be ignored is not offered. With
    `defaults=False` a flag left off the command line leaves no attribute, so a front end with
    its own presets can tell a given value from a default (`namespace_values`).
    """
    unknown = set(exclude) - {f.name for f in dataclasses.fields(GTPOConfig)}
    if unknown:
        raise ValueError(f"exclude names unknown GTPOConfig fields {sorted(unknown)}")
    for f in dataclasses.fields(GTPOConfig):
        if f.name in exclude:
            continue
        meta = f.metadata
        default = f.default if defaults else argparse.SUPPRESS
        helptext = meta["help"]
        if meta["symbol"] and meta["equation"] and meta["equation"] not in helptext:
            helptext = f"{helptext} [{meta['symbol']}, {meta['equation']}]"
        if meta["type"] is bool:
            parser.add_argument(
                flag(f.name),
                dest=_dest(f.name),
                action="store_true",
                default=default,
                help=helptext,
            )
            continue
        parser.add_argument(
            flag(f.name),
            dest=_dest(f.name),
            type=meta["type"],
            choices=meta["choices"],
            metavar=meta["metavar"],
            default=default,
            help=helptext + f" (default: {f.default})",
        )


def _problems(config: GTPOConfig) -> list[str]:
    """Every out-of-range knob, each naming the flag and what to pass instead."""
    problems: list[str] = []
    for f in dataclasses.fields(config):
        choices = f.metadata["choices"]
        value = getattr(config, f.name)
        if choices and value not in choices:
            problems.append(f"{flag(f.name)} is {value!r}; pass one of {', '.join(choices)}.")
    if not (math.isfinite(config.gamma) and config.gamma >= 0):
        problems.append(
            f"{flag('gamma')} is {config.gamma}; γ is an entropy *penalty* (Eq. 7) and must be "
            "a finite number >= 0 (paper: 0.1)."
        )
    if not (math.isfinite(config.conflict_weight) and config.conflict_weight >= 0):
        problems.append(
            f"{flag('conflict_weight')} is {config.conflict_weight}; λ on protected tokens must "
            "be a finite number >= 0 (Eq. 5, paper: 2)."
        )
    if not (math.isfinite(config.entropy_threshold) and config.entropy_threshold > 0):
        problems.append(
            f"{flag('entropy_threshold')} is {config.entropy_threshold}; the cut of Eq. 6 is an "
            "entropy in nats > 0 (paper: ln 2 = 0.693; the authors' code: 0.7)."
        )
    if config.gpu_memory_gib is not None and not (
        math.isfinite(config.gpu_memory_gib) and config.gpu_memory_gib > 0
    ):
        problems.append(
            f"{flag('gpu_memory_gib')} is {config.gpu_memory_gib}; pass one GPU's memory in GiB "
            "(80 for an A100 80GB or an H100)."
        )
    if config.h_ini is not None and not (math.isfinite(config.h_ini) and config.h_ini >= 0):
        problems.append(
            f"{flag('h_ini')} is {config.h_ini}; an entropy in nats is finite and >= 0. Pass a "
            "measured value or leave the flag out to measure it on the first prompts."
        )
    if config.h_ini_prompts < 1:
        problems.append(
            f"{flag('h_ini_prompts')} is {config.h_ini_prompts}; H_ini is measured on at least "
            f"one prompt (paper: 100). Pass {flag('h_ini')} to skip the measurement instead."
        )
    if not (math.isfinite(config.reward_timeout) and config.reward_timeout > 0):
        problems.append(
            f"{flag('reward_timeout')} is {config.reward_timeout}; pass a number of seconds > 0 "
            "(default 300)."
        )
    if config.collapse_patience < 1:
        problems.append(
            f"{flag('collapse_patience')} is {config.collapse_patience}; pass 1 or more."
        )
    return problems
