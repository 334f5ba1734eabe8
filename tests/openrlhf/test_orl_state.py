"""H_ini persistence through OpenRLHF's client states, and the entropy-collapse monitor."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("openrlhf")
pytest.importorskip("deepspeed")
transformers = pytest.importorskip("transformers")


from gtpo import LN2  # noqa: E402
from gtpo.openrlhf.controller import GTPOPPOTrainer  # noqa: E402
from gtpo.openrlhf.resume import CheckpointNotShared  # noqa: E402
from gtpo.openrlhf.run_args import gtpo_config  # noqa: E402
from gtpo.state import CLIENT_STATE_KEY, EntropyMonitor  # noqa: E402


class CheckpointingGroup:
    """The two PolicyModelActor methods the trainer calls for checkpoints, on local disk.

    DeepSpeed's save_checkpoint(client_state=...) torch.saves the client states with the model
    states and load_checkpoint returns them; this does the same, without a DeepSpeed engine.
    """

    def __init__(self, ray, path):
        self.ray = ray
        self.file = path / "client_states.pt"
        self.calls: list[str] = []

    def async_run_method(self, method_name, *args, **kwargs):
        self.calls.append(method_name)
        if method_name == "save_checkpoint":
            torch.save(kwargs["client_states"], self.file)
            return [self.ray.put(None)]
        if method_name == "get_checkpoint_states":
            return [self.ray.put(torch.load(self.file, weights_only=False))]
        raise AssertionError(f"unexpected call {method_name}")


def bare_trainer(args, group, h_ini=None) -> GTPOPPOTrainer:
    """A GTPOPPOTrainer without its Ray/tokenizer/dataset set-up, for the checkpoint methods."""
    trainer = object.__new__(GTPOPPOTrainer)
    trainer.args = args
    trainer.gtpo = gtpo_config(args)
    trainer.actor_model_group = group
    trainer.critic_model_group = None
    trainer.wandb_logger = trainer.tensorboard_logger = None
    trainer.best_eval_metric_key = ""
    trainer.best_eval_metric_value = float("-inf")
    trainer._latest_eval_metric_value = None
    trainer.experience_maker = SimpleNamespace(h_ini=h_ini)
    return trainer


def test_h_ini_survives_checkpoint_save_and_restore(ray_cluster, openrlhf_args, tmp_path):
    ckpt = tmp_path / "ckpt"
    args = openrlhf_args("--ckpt.path", str(ckpt), "--ckpt.load_enable", "--ckpt.save_steps", "1")
    group = CheckpointingGroup(ray_cluster, tmp_path)

    first = bare_trainer(args, group, h_ini=0.3712)
    states = {
        "episode": 0,
        "global_step": 4,
        "total_consumed_prompts": 32,
        "data_loader_state_dict": {},
    }
    first.save_logs_and_checkpoints(4, {}, states)  # OpenRLHF's own method decides to save
    assert group.calls == ["save_checkpoint"]

    (ckpt / "_actor").mkdir(parents=True)  # where DeepSpeed would have written
    resumed = bare_trainer(args, group)
    assert resumed.experience_maker.h_ini is None
    restored = resumed.init_checkpoint_states()  # OpenRLHF's own method loads the states
    assert restored["global_step"] == 4 and restored[CLIENT_STATE_KEY] == pytest.approx(0.3712)
    assert resumed.experience_maker.h_ini == pytest.approx(0.3712)


def test_flag_h_ini_wins_over_the_checkpoint(ray_cluster, openrlhf_args, tmp_path, caplog):
    ckpt = tmp_path / "ckpt"
    argv = ("--ckpt.path", str(ckpt), "--ckpt.load_enable", "--ckpt.save_steps", "1")
    group = CheckpointingGroup(ray_cluster, tmp_path)
    bare_trainer(openrlhf_args(*argv), group, h_ini=0.3).save_logs_and_checkpoints(
        1, {}, {"episode": 0, "global_step": 1}
    )
    (ckpt / "_actor").mkdir(parents=True)
    resumed = bare_trainer(openrlhf_args(*argv, "--gtpo.h_ini", "0.5"), group)
    with caplog.at_level(logging.WARNING, logger="gtpo"):
        resumed.init_checkpoint_states()
    assert resumed.experience_maker.h_ini == 0.5
    assert "overrides the H_ini 0.3000" in caplog.text


class RanksGroup:
    """Policy ranks that each report the checkpoint states they loaded (empty: none)."""

    def __init__(self, ray, rank_states):
        self.ray = ray
        self.rank_states = rank_states

    def async_run_method(self, method_name, *args, **kwargs):
        assert method_name == "get_checkpoint_states"
        return [self.ray.put(states) for states in self.rank_states]


def test_a_checkpoint_the_controller_cannot_see_is_refused(ray_cluster, openrlhf_args, tmp_path):
    """--ckpt.path on a disk only the policy ranks' node has: OpenRLHF's controller would
    restart at step 0 over trained weights and GTPO would measure H_ini again on them."""
    args = openrlhf_args("--ckpt.path", str(tmp_path / "local-only"), "--ckpt.load_enable")
    loaded = {"global_step": 4, CLIENT_STATE_KEY: 0.37}
    trainer = bare_trainer(args, RanksGroup(ray_cluster, [loaded, loaded]))
    trainer.measure_h_ini = lambda: pytest.fail("H_ini measured on a resumed policy")
    with pytest.raises(CheckpointNotShared, match=r"controller resumes at step 0.*rank 1: step 4"):
        trainer.init_checkpoint_states()  # OpenRLHF's own method finds no checkpoint


def test_ranks_that_loaded_different_checkpoints_are_refused(ray_cluster, openrlhf_args, tmp_path):
    ckpt = tmp_path / "ckpt"
    (ckpt / "_actor").mkdir(parents=True)
    args = openrlhf_args("--ckpt.path", str(ckpt), "--ckpt.load_enable")
    group = RanksGroup(ray_cluster, [{"global_step": 4, CLIENT_STATE_KEY: 0.37}, {}])
    with pytest.raises(CheckpointNotShared, match=r"rank 0: step 4, rank 1: step 0"):
        bare_trainer(args, group).init_checkpoint_states()


def test_a_checkpoint_every_process_sees_resumes(ray_cluster, openrlhf_args, tmp_path):
    ckpt = tmp_path / "ckpt"
    (ckpt / "_actor").mkdir(parents=True)
    args = openrlhf_args("--ckpt.path", str(ckpt), "--ckpt.load_enable")
    loaded = {"global_step": 4, CLIENT_STATE_KEY: 0.37}
    trainer = bare_trainer(args, RanksGroup(ray_cluster, [loaded, loaded]))
    assert trainer.init_checkpoint_states()["global_step"] == 4
    assert trainer.experience_maker.h_ini == pytest.approx(0.37)


@pytest.mark.parametrize("flags", [("--gtpo.algo", "grpo"), ("--gtpo.entropy_filter", "off")])
def test_h_ini_is_not_measured_when_nothing_reads_it(ray_cluster, openrlhf_args, tmp_path, flags):
    """The GRPO baseline and δ off read no H_ini: no h_ini_prompts × G extra generations."""
    trainer = bare_trainer(openrlhf_args(*flags), RanksGroup(ray_cluster, []))
    trainer.measure_h_ini = lambda: pytest.fail("H_ini measured although δ is off")
    trainer.init_checkpoint_states()
    assert trainer.experience_maker.h_ini is None


def test_best_checkpoint_carries_h_ini_too(ray_cluster, openrlhf_args, tmp_path):
    group = CheckpointingGroup(ray_cluster, tmp_path)
    trainer = bare_trainer(openrlhf_args("--ckpt.path", str(tmp_path / "c")), group, h_ini=0.25)
    trainer.save_best_checkpoint({"eval_x_pass1": 0.5}, 3, {"global_step": 3})
    assert torch.load(group.file, weights_only=False)[CLIENT_STATE_KEY] == 0.25


def test_entropy_monitor_warns_when_entropy_stays_above_ln2(caplog):
    monitor = EntropyMonitor(patience=3)
    with caplog.at_level(logging.WARNING, logger="gtpo"):
        warned = [
            monitor.update(h, 0.4, step)
            for step, h in enumerate([0.9, 0.9, 0.5, 0.8, 0.8, 0.8, 0.8])
        ]
    # The dip to 0.5 resets the streak; the warning comes at the 3rd consecutive step above ln 2.
    assert warned == [False, False, False, False, False, True, False]
    assert "policy-collapse signal" in caplog.text
    assert not EntropyMonitor(1).update(LN2, 0.4, 0)
