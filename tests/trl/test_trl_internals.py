"""TRL's internals GTPOTrainer overrides or reads (gtpo/trl/internals.py): the installed TRL has
them, and a TRL without one, or outside the tested range, is refused before anything is built,
instead of training as GRPO with GTPO's hooks silently uncalled."""

from __future__ import annotations

from pathlib import Path

import pytest
import tomllib

trl = pytest.importorskip("trl")

from gtpo.config import GTPOConfigError  # noqa: E402
from gtpo.trl import internals  # noqa: E402
from gtpo.trl.trainer import GTPOTrainer  # noqa: E402


def test_the_installed_trl_has_every_internal_gtpo_uses():
    assert internals.missing(trl.GRPOTrainer) == []
    assert internals.release(internals.check_trl()) == internals.MINIMUM
    # Every private GRPOTrainer method GTPOTrainer overrides is declared.
    overridden = {
        name
        for name in vars(GTPOTrainer)
        if name.startswith("_") and not name.startswith("__") and hasattr(trl.GRPOTrainer, name)
    }
    assert overridden <= set(internals.METHODS), overridden - set(internals.METHODS)


def test_the_package_pins_the_tested_range():
    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    assert internals.PIN in project["project"]["optional-dependencies"]["trl"]


@pytest.mark.parametrize("version", ["1.15.2", "1.17.0", "2.0.0"])
def test_a_release_outside_the_tested_range_is_refused(version):
    with pytest.raises(GTPOConfigError, match=r">=1\.16,<1\.17, found " + version):
        internals.check_trl(version)


def test_a_trl_without_an_overridden_method_is_refused_before_the_trainer_is_built(monkeypatch):
    """A renamed `_compute_loss` would leave GTPO's loss hook uncalled: TRL's GRPO would train."""
    monkeypatch.delattr(trl.GRPOTrainer, "_compute_loss")
    with pytest.raises(GTPOConfigError, match=r"GRPOTrainer\._compute_loss.*trl>=1\.16,<1\.17"):
        GTPOTrainer(model="no model is loaded: the check comes first")


class VisionRenamed:  # a GRPOTrainer whose __init__ calls `_is_vlm` something else
    def __init__(self):
        self.is_vision_model = False
        self._metrics, self._tokenizer, self.reward_funcs = {}, None, []
        self.num_generations = self.num_generations_eval = 8
        self.chat_template: str | None = None  # annotated: still an assignment
        self.chat_template_kwargs, self.shuffle_dataset = {}, True
        self.current_gradient_accumulation_steps = 1


for _method in internals.METHODS:
    setattr(VisionRenamed, _method, lambda self: None)


def test_a_trl_that_no_longer_sets_an_attribute_is_refused():
    assert internals.missing(VisionRenamed) == ["GRPOTrainer()._is_vlm"]
