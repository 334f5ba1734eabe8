"""compat.py: the start-up check against the installed OpenRLHF, and the facts it declares
(internals overridden, settings read, tensor layout) against the real OpenRLHF."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest
import tomllib
import torch

pytest.importorskip("openrlhf")
pytest.importorskip("deepspeed")

from gtpo.openrlhf import compat


def test_installed_openrlhf_has_every_internal_the_adapter_overrides():
    assert compat.check_openrlhf().startswith("0.11.")


def test_a_missing_internal_is_named(monkeypatch):
    from openrlhf.trainer.ppo_utils.experience_maker import RemoteExperienceMaker

    monkeypatch.delattr(RemoteExperienceMaker, "_flatten_results")
    missing = r"RemoteExperienceMaker\._flatten_results"
    with pytest.raises(compat.OpenRLHFIncompatibleError, match=missing):
        compat.check_openrlhf()


@pytest.mark.parametrize("version", ["0.11.0", "0.11.1", "0.12.0", "0.10.4", "1.0.0"])
def test_another_release_is_refused_with_the_pin_to_install(monkeypatch, version):
    monkeypatch.setattr(compat.metadata, "version", lambda name: version)
    pin = re.escape("openrlhf[vllm]>=0.11.2,<0.12")
    with pytest.raises(compat.OpenRLHFIncompatibleError, match=rf"found {version}.*{pin}"):
        compat.check_openrlhf()


@pytest.mark.parametrize("version", ["0.11.2", "0.11.3", "0.11.2.post1", "0.11.10"])
def test_a_later_0_11_release_passes_the_version_check(monkeypatch, version):
    monkeypatch.setattr(compat.metadata, "version", lambda name: version)
    assert compat.check_openrlhf() == version


def test_the_start_up_check_refuses_what_pyproject_refuses():
    """pyproject.toml's openrlhf extra is compat.PIN (vLLM included), and its version range is
    the one check_openrlhf accepts."""
    from packaging.requirements import Requirement

    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    (pin,) = project["project"]["optional-dependencies"]["openrlhf"]
    assert pin == compat.PIN
    requirement = Requirement(pin)
    assert requirement.extras == {"vllm"}
    for version in ["0.10.9", "0.11.0", "0.11.1", "0.11.2", "0.11.7", "0.12.0", "0.13.1"]:
        accepted = compat.MINIMUM <= compat.release(version) < compat.BELOW
        assert requirement.specifier.contains(version) == accepted, version


def test_launcher_exits_2_when_openrlhf_does_not_fit(monkeypatch, caplog):
    from gtpo.openrlhf.__main__ import main

    monkeypatch.setattr(compat.metadata, "version", lambda name: "0.10.4")
    monkeypatch.setattr("gtpo.openrlhf.__main__.check_openrlhf", compat.check_openrlhf)
    with pytest.raises(SystemExit) as exit_info:
        main(["--actor.model_name_or_path", "m"])
    assert exit_info.value.code == 2
    assert "supports OpenRLHF >=0.11.2,<0.12, found 0.10.4" in caplog.text


def _resolve(module_name: str, dotted: str):
    obj = importlib.import_module(module_name)
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def test_every_openrlhf_method_the_adapter_overrides_is_declared_in_compat():
    """compat.REQUIRED is the list a new release is checked against: an override missing from
    it would let a renamed OpenRLHF method switch GTPO off without an error."""
    from gtpo.openrlhf import actors, async_training

    declared = [_resolve(m, a) for m, attrs in compat.REQUIRED.items() for a in attrs]
    # (GTPO's class, the OpenRLHF classes it extends): the controller mixin extends both trainers.
    subclasses = [
        (cls, [next(b for b in cls.__mro__ if b.__module__.startswith("openrlhf"))])
        for cls in (
            actors.GTPOPolicyModelActor, actors.GTPOActorPPOTrainer, actors.GTPOExperienceMaker,
            actors.GTPOPPOTrainer, actors.RetryingRewardExecutor, actors.GTPORolloutActor,
            async_training.GTPOTrainingActor, async_training.GTPOGenerateSamplesActor,
            async_training.GTPOPPOTrainerAsync,
        )
    ]  # fmt: skip
    trainers = [actors.GTPOPPOTrainer.__mro__[2], async_training.GTPOTrainingActor.__mro__[2]]
    subclasses.append((actors.GTPOController, trainers))
    overrides = []
    for cls, bases in subclasses:
        for name, value in vars(cls).items():
            # Constructors are called with the arguments OpenRLHF passes; the others must exist.
            for base in bases:
                if callable(value) and name != "__init__" and hasattr(base, name):
                    overrides.append(f"{cls.__name__}.{name}")
                    assert any(getattr(base, name) is d for d in declared), f"{cls.__name__}.{name}"
    assert len(overrides) >= 16  # the check saw the overrides


def test_a_setting_train_ppo_ray_no_longer_has_is_named(monkeypatch):
    gone = compat.Arg("train.no_such_setting")
    monkeypatch.setattr(compat, "ARGS", (*compat.ARGS, gone))
    with pytest.raises(compat.OpenRLHFIncompatibleError, match=r"flag --train\.no_such_setting"):
        compat.check_openrlhf()


def test_every_setting_the_adapter_reads_is_declared_in_compat():
    """No module of the adapter spells an OpenRLHF setting's path itself."""
    import re
    from pathlib import Path

    import gtpo.openrlhf

    package = Path(gtpo.openrlhf.__file__).parent
    for path in package.glob("*.py"):
        if path.name == "compat.py":
            continue
        spelled = re.findall(
            r"args\.(?:actor|algo|rollout|train|ds|vllm|reward)\.\w+", path.read_text()
        )
        assert spelled == [], f"{path.name} reads {spelled}; declare them as compat.Arg"


def test_arg_reads_and_sets_hierarchized_args(openrlhf_args):
    args = openrlhf_args("--rollout.n_samples_per_prompt", "4")
    assert compat.GROUP_SIZE.get(args) == args.rollout.n_samples_per_prompt == 4
    compat.LOSS_AGG_MODE.set(args, compat.TOKEN_MEAN)
    assert args.actor.loss_agg_mode == compat.TOKEN_MEAN
    assert compat.KL_COEF.flag == "--algo.kl.init_coef"


def test_tensor_layout_matches_openrlhf_actor():
    """compat's slicing picks, for each action position, the token OpenRLHF's Actor scores there
    and the logits it scores it with: its log-probs are rebuilt from them exactly."""
    from types import SimpleNamespace

    from openrlhf.models import Actor
    from tiny_llama import tiny_llama

    actor = Actor(tiny_llama())
    actor.packing_samples = False  # set by Actor only when it loads a checkpoint by name
    sequences = torch.randint(1, 32, (3, 9), generator=torch.Generator().manual_seed(4))
    attention_mask = torch.ones_like(sequences)
    action_mask = torch.zeros(3, 6, dtype=torch.bool)
    for row, n in enumerate((2, 4, 6)):
        action_mask[row, 6 - n :] = True
    with torch.no_grad():
        log_probs, output = actor(sequences, action_mask, attention_mask, return_output=True)
        logits = compat.forward_logits(output)
    ids, mask = compat.completion_ids(SimpleNamespace(sequences=sequences, action_mask=action_mask))
    assert ids.shape == mask.shape == log_probs.shape
    per_position = torch.log_softmax(logits.float(), dim=-1)
    rebuilt = compat.action_positions(per_position, action_mask).gather(-1, ids[..., None])
    torch.testing.assert_close(rebuilt.squeeze(-1)[mask], log_probs[mask], rtol=1e-5, atol=1e-5)
    advantages = torch.arange(18.0).view(3, 6)
    assert compat.first_action_value(advantages, mask).tolist() == [4.0, 8.0, 12.0]


# --- the behaviour probe: OpenRLHF's own code on a toy rollout, at start-up ----------------


@pytest.mark.parametrize("estimator", ["group_norm", "dr_grpo"])
def test_the_installed_release_behaves_as_the_adapter_assumes(openrlhf_args, estimator):
    args = openrlhf_args("--algo.advantage.estimator", estimator)  # the launcher ran the probe
    compat.check_behaviour(args)  # and again, explicitly: no problem found
    assert compat._probe(args) == []


def _whitened(original):
    """A release that also whitens group_norm advantages over the batch (as 0.11.2 does for
    reinforce_baseline): the names stay, the numbers GTPO reads change."""

    def compute(self, experiences):
        out = original(self, experiences)
        values = torch.cat([e.advantages[e.action_mask.bool()] for e in out])
        for e in out:
            e.advantages = (e.advantages - values.mean()) / values.std()
        return out

    return compute


def _reordered(original):
    """A release that numbers rollout rows differently (a prompt's samples no longer adjacent)."""

    def split(self, samples):
        out = original(self, samples)
        for e in out:
            e.index = [(i * 3) % len(samples) for i in e.index]
        return out

    return split


def _shifted(original):
    """A release whose action mask starts one token early (the prompt's last token counted)."""

    def split(self, samples):
        out = original(self, samples)
        for e in out:
            e.action_mask = torch.roll(e.action_mask, -1, dims=1)
        return out

    return split


@pytest.mark.parametrize(
    ("method", "change", "named"),
    [
        ("compute_advantages_and_returns", _whitened, "advantages are"),
        ("split_rollout_samples", _reordered, "numbered the rows"),
        ("split_rollout_samples", _shifted, "action tokens are not its response"),
    ],
)
def test_a_release_that_changed_behaviour_is_refused_at_start_up(
    openrlhf_args, run_orl, base_argv, monkeypatch, caplog, method, change, named
):
    from openrlhf.trainer.ppo_utils.experience_maker import RemoteExperienceMaker

    args = openrlhf_args()
    monkeypatch.setattr(
        RemoteExperienceMaker, method, change(getattr(RemoteExperienceMaker, method))
    )
    with pytest.raises(compat.OpenRLHFIncompatibleError, match=named):
        compat.check_behaviour(args)
    with pytest.raises(SystemExit) as exit_info:  # the launcher stops before anything runs
        run_orl(base_argv)
    assert exit_info.value.code == 2
    assert "does not behave as GTPO's adapter assumes" in caplog.text
