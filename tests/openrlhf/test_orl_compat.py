"""compat.py: the start-up check against the installed OpenRLHF, and the facts it declares
(internals overridden, settings read, tensor layout) against the real OpenRLHF."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import textwrap
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


def _gtpo_subclasses():
    """(GTPO's class, the OpenRLHF classes it extends) for every class of the adapter that
    extends one: the controller mixin extends both trainers."""
    from gtpo.openrlhf import async_training, controller, experience, policy, rollout_actor

    classes = (
        policy.GTPOPolicyModelActor, policy.GTPOActorPPOTrainer, experience.GTPOExperienceMaker,
        controller.GTPOPPOTrainer, controller.GTPOSamplesGenerator,
        rollout_actor.RetryingRewardExecutor, rollout_actor.GTPORolloutActor,
        async_training.GTPOTrainingActor, async_training.PublishedSync,
        async_training.VersionedSamplesGenerator, async_training.GTPOGenerateSamplesActor,
        async_training.GTPOPPOTrainerAsync,
    )  # fmt: skip
    pairs = [(cls, [b for b in cls.__mro__[1:] if _openrlhf(b)][:1]) for cls in classes]
    trainers = [controller.GTPOPPOTrainer.__mro__[2], async_training.GTPOTrainingActor.__mro__[2]]
    return [*pairs, (controller.GTPOController, trainers)]


def _openrlhf(cls: type) -> bool:
    """OpenRLHF's class, or the seam's presentation of one (its private steps renamed)."""
    return cls.__module__.startswith("openrlhf") or cls.__module__ == "gtpo.openrlhf.seam"


def _openrlhf_names(base: type, name: str) -> str:
    """The OpenRLHF method behind `name` on `base` (a seam class's public step: its private)."""
    steps = {p: q for c in base.__mro__ for p, q in vars(c).get("public_steps", {}).items()}
    return steps.get(name, name)


def test_every_openrlhf_method_the_adapter_overrides_is_declared_in_compat():
    """compat.REQUIRED is the list a new release is checked against: an override missing from
    it would let a renamed OpenRLHF method switch GTPO off without an error."""
    declared = [
        compat.resolve(m, a)
        for m, attrs in compat.REQUIRED.items()
        for a in attrs
        if hasattr(compat.resolve(m, a.rpartition(".")[0]) if "." in a else m, a.split(".")[-1])
    ]
    overrides = []
    for cls, bases in _gtpo_subclasses():
        for name, value in vars(cls).items():
            # Constructors are called with the arguments OpenRLHF passes; the others must exist.
            for base in bases:
                if callable(value) and name != "__init__" and hasattr(base, name):
                    overrides.append(f"{cls.__name__}.{name}")
                    own = next(b for b in base.__mro__ if b.__module__.startswith("openrlhf"))
                    method = getattr(own, _openrlhf_names(base, name))
                    assert any(method is d for d in declared), f"{cls.__name__}.{name}"
    assert len(overrides) >= 16  # the check saw the overrides


def _self_attributes(cls: type, context: type[ast.expr_context]) -> set[str]:
    """The attributes GTPO's class reads (ast.Load) or sets (ast.Store) on `self`."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
        if node.value.id == "self" and isinstance(node.ctx, context)
    }


def test_every_attribute_the_subclasses_read_is_gtpos_or_declared_in_compat():
    """An instance attribute of OpenRLHF's that GTPO reads is in compat.INSTANCE (or a
    class attribute that the REQUIRED check finds): a release that renames it fails at
    start-up, not in the middle of a run."""
    instance = {compat.resolve(m, d): set(attrs) for (m, d), attrs in compat.INSTANCE.items()}
    subclasses = _gtpo_subclasses()
    for cls, bases in subclasses:
        # GTPO's own attributes: those of the GTPO classes this one is mixed in with.
        users = [user for user, _ in subclasses if cls in user.__mro__]
        own = set()
        for klass in {k for user in users for k in user.__mro__}:
            if klass.__module__.startswith("gtpo.openrlhf") and not _openrlhf(klass):
                own |= set(vars(klass)) | _self_attributes(klass, ast.Store)
        for name in _self_attributes(cls, ast.Load) - own:
            owners = [b for base in bases for b in base.__mro__ if _openrlhf(b)]
            declared = any(name in instance.get(b, ()) for b in owners)
            on_class = any(name in vars(b) for b in owners)
            assert declared or on_class, f"{cls.__name__} reads self.{name}: declare it"


def _break_source(monkeypatch, attribute: str) -> None:
    """A release that no longer sets `attribute` on its objects (renamed in its source)."""
    source = compat.source_of
    renamed = rf"\bself\.{attribute}\b"
    monkeypatch.setattr(
        compat, "source_of", lambda obj: re.sub(renamed, f"self.{attribute}_gone", source(obj))
    )


class _Without:
    """`obj` as a release without the dotted attribute path `hidden` below it."""

    def __init__(self, obj, hidden: str) -> None:
        self._obj, self._hidden = obj, hidden

    def __getattr__(self, name: str):
        head, _, rest = self._hidden.partition(".")
        if name != head:
            return getattr(self._obj, name)
        if not rest:
            raise AttributeError(name)
        return _Without(getattr(self._obj, name), rest)


@pytest.mark.parametrize(
    ("module", "dotted"), [(m, d) for m, attrs in compat.REQUIRED.items() for d in attrs]
)
def test_each_declared_internal_a_release_drops_is_named_at_start_up(monkeypatch, module, dotted):
    first, _, rest = dotted.partition(".")
    target = importlib.import_module(module)
    if rest:
        monkeypatch.setattr(target, first, _Without(getattr(target, first), rest))
    else:
        monkeypatch.delattr(target, first)
    with pytest.raises(compat.OpenRLHFIncompatibleError, match=re.escape(f"{module}.{dotted}")):
        compat.check_openrlhf()


@pytest.mark.parametrize(
    ("cls", "attribute"),
    [(f"{m}.{d}", a) for (m, d), attrs in compat.INSTANCE.items() for a in attrs],
)
def test_each_instance_attribute_a_release_no_longer_sets_is_named(monkeypatch, cls, attribute):
    _break_source(monkeypatch, attribute)
    expected = "OpenRLHF 0.11.2 lacks internals .*" + re.escape(f"{cls}().{attribute}")
    with pytest.raises(compat.OpenRLHFIncompatibleError, match=expected) as error:
        compat.check_openrlhf()
    assert "The adapter expects OpenRLHF 0.11.2" in str(error.value)


@pytest.mark.parametrize("built", [b for b in compat.BUILT if b.builder], ids=lambda b: b.name)
def test_each_name_openrlhf_no_longer_builds_by_is_named(monkeypatch, built):
    source = compat.source_of
    builder = compat.resolve(built.module, built.builder)
    monkeypatch.setattr(
        compat, "source_of",
        lambda obj: source(obj).replace(built.name, "Other") if obj is builder else source(obj),
    )  # fmt: skip
    named = re.escape(f"{built.module}.{built.builder} building {built.name}")
    with pytest.raises(compat.OpenRLHFIncompatibleError, match=named):
        compat.check_openrlhf()


@pytest.mark.parametrize("built", compat.BUILT, ids=lambda b: f"{b.module}.{b.name}")
def test_each_name_gtpo_rebinds_a_release_drops_is_named(monkeypatch, built):
    monkeypatch.delattr(importlib.import_module(built.module), built.name)
    with pytest.raises(compat.OpenRLHFIncompatibleError, match=re.escape(f"{built.module}.")):
        compat.check_openrlhf()


def test_outside_the_seam_no_module_touches_openrlhf():
    """Only compat.py and seam.py import OpenRLHF; no other module of the adapter names a
    private attribute of OpenRLHF's, assigns a class, a module's global or an object's method,
    or reaches into an object's __dict__."""
    import gtpo.openrlhf
    from gtpo.openrlhf import seam

    classes = [
        klass
        for cls in vars(seam).values()
        if isinstance(cls, type) and _openrlhf(cls)
        for klass in cls.__mro__
        if klass.__module__.startswith("openrlhf")
    ]
    members = {name for klass in classes for name in vars(klass)}
    private = {
        name
        for name in members | {a for klass in classes for a in compat.assigned_attributes(klass)}
        if name.startswith("_") and not name.startswith("__")
    }
    assert {"_dispatch_forward", "_model_update_group", "_generate_vllm"} <= private
    for path in Path(gtpo.openrlhf.__file__).parent.glob("*.py"):
        if path.name in ("compat.py", "seam.py"):
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            where = f"{path.name}:{getattr(node, 'lineno', '?')}"
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                assert not any(n.split(".")[0] == "openrlhf" for n in names), where
            if isinstance(node, ast.Attribute):
                assert node.attr not in private, f"{where} names OpenRLHF's {node.attr}"
                assert node.attr not in ("__class__", "__dict__"), where
                if isinstance(node.ctx, ast.Store) and node.attr in members:  # a method patched
                    assert isinstance(node.value, ast.Name) and node.value.id == "self", where
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                assert node.func.id not in ("setattr", "delattr"), where


def test_a_setting_train_ppo_ray_no_longer_has_is_named(monkeypatch):
    gone = compat.Arg("train.no_such_setting")
    monkeypatch.setattr(compat, "ARGS", (*compat.ARGS, gone))
    with pytest.raises(compat.OpenRLHFIncompatibleError, match=r"flag --train\.no_such_setting"):
        compat.check_openrlhf()


def test_every_setting_the_adapter_reads_is_declared_in_compat():
    """No module of the adapter spells an OpenRLHF setting's path itself."""
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
