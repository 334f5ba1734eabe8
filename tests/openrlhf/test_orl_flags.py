"""Flag handling of gtpo-openrlhf, through OpenRLHF's real train_ppo_ray __main__ block.

Each run stops where OpenRLHF's train(args) starts (see conftest.run_train_ppo_ray), so the
args checked are the ones every Ray actor receives inside strategy.args.
"""

from __future__ import annotations

import dataclasses
import logging
from types import SimpleNamespace

import pytest

pytest.importorskip("openrlhf")
pytest.importorskip("deepspeed")

from gtpo.config import GTPOConfig
from gtpo.openrlhf import checks, compat, run_args
from gtpo.openrlhf.flags import parse_gtpo_flags


def flatten(ns: SimpleNamespace, prefix: str = "") -> dict:
    out = {}
    for key, value in vars(ns).items():
        if isinstance(value, SimpleNamespace):
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def test_the_gtpo_flags_come_out_of_argv_and_openrlhf_tokens_stay_in_order():
    argv = [
        "--actor.model_name_or_path", "m", "--gtpo.gamma", "0.05", "--algo.kl.init_coef", "-0.5",
        "--gtpo.no_conflict", "--gtpo.entropy_filter=on", "--ds.packing_samples",
        "--data.max_len=64", "--gtpo.h_ini", "0.3",
    ]  # fmt: skip
    gtpo, rest = parse_gtpo_flags(argv)
    given = {k: v for k, v in vars(gtpo).items() if k in {"gtpo.gamma", "gtpo.no_conflict",
             "gtpo.entropy_filter", "gtpo.h_ini"}}  # fmt: skip
    assert given == {"gtpo.gamma": 0.05, "gtpo.no_conflict": True, "gtpo.entropy_filter": "on",
                     "gtpo.h_ini": 0.3}  # fmt: skip
    assert rest == [
        "--actor.model_name_or_path", "m", "--algo.kl.init_coef", "-0.5", "--ds.packing_samples",
        "--data.max_len=64",
    ]  # fmt: skip


def test_an_unknown_gtpo_flag_exits_with_the_usage(capsys):
    with pytest.raises(SystemExit) as exit_info:
        parse_gtpo_flags(["--actor.x", "1", "--gtpo.gama", "0.1"])
    assert exit_info.value.code == 2
    assert "unrecognized arguments: --gtpo.gama" in capsys.readouterr().err


def test_gtpo_flags_arrive_in_hierarchized_args(openrlhf_args):
    args = openrlhf_args(
        "--gtpo.gamma",
        "0.05",
        "--gtpo.conflict_weight=3",
        "--gtpo.entropy_filter",
        "off",
        "--gtpo.h_ini",
        "0.42",
        "--gtpo.no_conflict",
        "--gtpo.collapse_patience",
        "7",
        "--gtpo.h_ini_prompts",
        "20",
        "--gtpo.reward_timeout=60",
    )
    # Every GTPOConfig field arrives; the ones not given keep their defaults.
    assert vars(args.gtpo) == {
        **dataclasses.asdict(GTPOConfig()),
        "gamma": 0.05,
        "conflict_weight": 3.0,
        "no_conflict": True,
        "entropy_filter": "off",
        "h_ini": 0.42,
        "h_ini_prompts": 20,
        "reward_timeout": 60.0,
        "collapse_patience": 7,
    }
    # OpenRLHF does `loss -= entropy * coef`; Eq. 7 subtracts γ⟨H⟩ from the objective.
    assert args.actor.entropy_coef == pytest.approx(-0.05)


def test_defaults_follow_the_paper(openrlhf_args):
    args = openrlhf_args()
    assert args.gtpo.gamma == 0.1 and args.gtpo.conflict_weight == 2.0
    assert args.gtpo.entropy_filter == "auto" and args.gtpo.h_ini is None
    assert args.gtpo.h_ini_prompts == 100  # Sec. 4.2: the first 100 training prompts
    assert args.actor.entropy_coef == pytest.approx(-0.1)
    # Eq. 7 averages each completion's tokens first (1/|o_i|), then the completions.
    assert args.actor.loss_agg_mode == "seq-mean-token-mean"


def test_explicit_token_mean_is_kept_with_a_warning(openrlhf_args, caplog):
    with caplog.at_level(logging.WARNING, logger="gtpo"):
        args = openrlhf_args("--actor.loss_agg_mode", "token-mean")
    assert args.actor.loss_agg_mode == "token-mean"
    assert "Pass --actor.loss_agg_mode seq-mean-token-mean to match the paper" in caplog.text


def test_grpo_baseline_keeps_openrlhf_loss_aggregation(openrlhf_args):
    assert openrlhf_args("--gtpo.algo", "grpo").actor.loss_agg_mode == "token-mean"


def test_gamma_zero_turns_openrlhf_entropy_term_off(openrlhf_args):
    assert openrlhf_args("--gtpo.gamma", "0").actor.entropy_coef is None


def test_openrlhf_flags_pass_through_untouched(run_orl, base_argv):
    own = [
        *base_argv,
        "--actor.adam.lr",
        "1e-6",
        "--rollout.temperature",
        "1.0",
        "--data.input_template",
        "Q: {}\nA:",
        "--algo.advantage.is_correction_threshold",
        "2.0",
        "--ckpt.save_steps",
        "10",
        "--actor.loss_agg_mode",
        "seq-mean-token-mean",
    ]
    plain = flatten(run_orl(own, gtpo=False))
    with_gtpo = flatten(run_orl([*own[:6], "--gtpo.gamma", "0.2", *own[6:]]))
    gtpo_only = {k for k in with_gtpo if k.startswith("gtpo.")}
    assert gtpo_only == {f"gtpo.{f.name}" for f in dataclasses.fields(GTPOConfig)}
    assert with_gtpo.pop("actor.entropy_coef") == pytest.approx(-0.2)
    assert plain.pop("actor.entropy_coef") is None
    for key in gtpo_only:
        with_gtpo.pop(key)
    assert with_gtpo.keys() == plain.keys()
    different = {
        k: (plain[k], with_gtpo[k])
        for k in plain
        if plain[k] != with_gtpo[k] and not (k.endswith("run_name"))  # timestamped by OpenRLHF
    }
    assert different == {}
    assert with_gtpo["algo.advantage.is_correction_threshold"] == [0.0, 2.0]  # OpenRLHF's own


REFUSED = {
    "estimator": (
        ["--algo.advantage.estimator", "gae"],
        "Pass --algo.advantage.estimator group_norm or dr_grpo",
    ),
    "estimator_reinforce_baseline": (
        ["--algo.advantage.estimator", "reinforce_baseline"],
        "Pass --algo.advantage.estimator group_norm or dr_grpo",
    ),
    "entropy_coef_in_advantage_form": (
        ["--gtpo.entropy_form", "advantage", "--actor.entropy_coef", "-0.1"],
        "unset in the advantage form",
    ),
    "single_sample": (
        ["--rollout.n_samples_per_prompt", "1"],
        "Pass --rollout.n_samples_per_prompt 8",
    ),
    "kl_coef": (["--algo.kl.init_coef", "0.01"], "Pass --algo.kl.init_coef 0"),
    "kl_default": (None, "OpenRLHF's default is 0.01"),
    "kl_loss": (["--algo.kl.use_loss"], "Drop --algo.kl.use_loss"),
    "async_partial_rollout": (
        ["--train.async_enable", "--train.partial_rollout_enable"],
        "one completion's tokens come from two policies",
    ),
    "async_queue_of_two": (
        ["--train.async_enable", "--train.async_queue_size", "2"],
        "pass --train.async_queue_size 1",
    ),
    "async_over_sampling": (
        ["--train.async_enable", "--rollout.vllm_generate_batch_size", "16"],
        "Leave --rollout.vllm_generate_batch_size unset",
    ),
    "entropy_coef": (["--actor.entropy_coef", "0.01"], "Remove --actor.entropy_coef"),
    "negative_gamma": (["--gtpo.gamma", "-0.1"], "must be a finite number >= 0"),
    "bad_h_ini": (["--gtpo.h_ini", "nan"], "leave the flag out to measure it"),
    "gspo": (["--actor.policy_loss_type", "gspo"], "Drop --actor.policy_loss_type"),
    # OpenRLHF's default correction mode is mask: out-of-band tokens (ICEPOP) or whole
    # sequences are dropped; gtpo.correction says why each breaks Eq. 7.
    "is_correction_token_mask": (
        ["--algo.advantage.is_correction_level", "token"],
        "drops single tokens from the loss",
    ),
    "is_correction_seq_mask": (
        ["--algo.advantage.is_correction_level", "seq"],
        "Pass --algo.advantage.is_correction_level token --algo.advantage.is_correction_mode clip",
    ),
    "multi_turn_agent": (
        ["--train.agent_func_path", "agent.py"],
        "Drop --train.agent_func_path",
    ),
    "no_h_ini_prompts": (["--gtpo.h_ini_prompts", "0"], "at least one prompt"),
    "reward_timeout_zero": (["--gtpo.reward_timeout", "0"], "number of seconds > 0"),
    "reward_timeout_nan": (["--gtpo.reward_timeout", "nan"], "number of seconds > 0"),
    # OpenRLHF asserts this in train(), after ray.init and the placement group.
    "colocated_reference_on_one_node": (
        [
            "--gtpo.algo",
            "grpo",
            "--algo.kl.init_coef",
            "1e-6",
            "--actor.num_nodes",
            "2",
            "--vllm.num_engines",
            "2",
            "--train.colocate_all",
        ],
        "Pass --ref.num_nodes 2 --ref.num_gpus_per_node 1",
    ),
    "engines_not_covering_colocated_policy": (
        ["--train.colocate_all", "--vllm.num_engines", "2"],
        "Pass --vllm.num_engines 1",
    ),
    # DeepSpeed asserts train_batch == micro × accumulation × ranks in each policy rank.
    "train_batch_ranks_cannot_split": (
        [
            "--actor.num_gpus_per_node",
            "2",
            "--rollout.micro_batch_size",
            "8",
            "--train.micro_batch_size",
            "4",
            "--train.batch_size",
            "36",
        ],
        "Pass --train.batch_size 32 or 40",
    ),
    # The rollout actors on the second node would post to their own loopback.
    "loopback_reward_url_on_two_nodes": (
        ["--actor.num_nodes", "2", "--train.batch_size", "64"],
        "Pass --reward.remote_url with an address every node reaches",
    ),
    # QLoRA trains (test_orl_qlora.py); 4-bit weights alone have nothing an optimizer updates.
    "4bit_without_lora": (
        ["--ds.load_in_4bit"],
        "--ds.load_in_4bit without --ds.lora.rank: bitsandbytes' 4-bit weights are packed bytes",
    ),
    # Trains, then OpenRLHF's final save asserts its ZeRO-3 state dict has every key, and the
    # quant-state entries are missing (a fit() run on CPU; the assertion is not device-specific).
    "4bit_zero3": (
        ["--ds.load_in_4bit", "--ds.lora.rank", "8", "--ds.zero_stage", "3"],
        "the trained adapters are not written. A 4-bit base is a quarter of bf16's size and only "
        "the adapters have optimizer state: pass --ds.zero_stage 2.",
    ),
    # OpenRLHF's Actor asserts bf16 with 4 bits, in each policy actor after Ray started.
    "4bit_fp16": (
        ["--ds.load_in_4bit", "--ds.lora.rank", "8", "--ds.param_dtype", "fp16"],
        "Pass --ds.param_dtype bf16",
    ),
    "wandb_run_without_key": (
        ["--logger.wandb.run_name", "gtpo-run"],
        "OpenRLHF starts W&B only with --logger.wandb.key",
    ),
    # 32 samples in micro-batches of 3 over 2 ranks: 18 and 14 rows, 2 and 1 training
    # micro-batches of 8, so one rank would wait in a collective the other never joins.
    "uneven_training_split": (
        [
            "--actor.num_gpus_per_node",
            "2",
            "--rollout.micro_batch_size",
            "3",
            "--train.micro_batch_size",
            "8",
        ],
        "as 18 and 14 rows, so they would train on 2 and 1 micro-batches of 8",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_forbidden_settings_are_refused_with_what_to_change(
    run_orl, base_argv, caplog, monkeypatch, case
):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    extra, message = REFUSED[case]
    if extra is None:  # KL left at OpenRLHF's default
        i = base_argv.index("--algo.kl.init_coef")
        argv = base_argv[:i] + base_argv[i + 2 :]
    else:
        argv = [*base_argv, *extra]
    with caplog.at_level(logging.ERROR, logger="gtpo"), pytest.raises(SystemExit) as exit_info:
        run_orl(argv)
    assert exit_info.value.code == 2
    refused = " ".join(r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR)
    assert "refuses" in refused and message in refused


def test_qlora_as_the_authors_ran_it_is_accepted(openrlhf_args):
    """The paper's setting: a 4-bit base, LoRA rank 128, α 128 on every linear projection. The
    one-item list `--ds.lora.target_modules all-linear` gives (nargs="*") reaches OpenRLHF as
    the string peft expands (test_orl_lora.py loads a model with it)."""
    args = openrlhf_args(
        "--ds.load_in_4bit", "--ds.lora.rank", "128", "--ds.lora.alpha", "128",
        "--ds.lora.target_modules", "all-linear", "--ds.param_dtype", "bf16",
    )  # fmt: skip
    assert args.ds.load_in_4bit and args.ds.lora.rank == 128
    assert args.ds.lora.target_modules == "all-linear"


def test_token_clip_correction_is_accepted_as_trl_token_truncate_is(openrlhf_args):
    """The per-token clipped ratio to vLLM's log-probs composes with λ and δ (every Eq. 7 term
    kept, each reweighted): accepted here as TRL's token_truncate is (tests/trl)."""
    from gtpo import correction

    args = openrlhf_args(
        "--algo.advantage.is_correction_level", "token",
        "--algo.advantage.is_correction_mode", "clip",
    )  # fmt: skip
    assert args.algo.advantage.is_correction_level == "token"
    assert correction.openrlhf_kind("token", "clip") == correction.SUPPORTED_KIND
    assert correction.refusal_reason("token_truncate") is None


def test_every_refusal_is_reported_at_once(run_orl, base_argv, caplog):
    argv = [*base_argv, "--algo.advantage.estimator", "rloo", "--train.async_enable",
            "--train.async_queue_size", "3"]  # fmt: skip
    with caplog.at_level(logging.ERROR, logger="gtpo"), pytest.raises(SystemExit):
        run_orl(argv)
    text = caplog.text
    assert "group_norm or dr_grpo" in text and "--train.async_queue_size is 3" in text


def test_dr_grpo_is_accepted_and_only_unclips_the_centred_rewards(openrlhf_args):
    group_norm = flatten(openrlhf_args())
    dr_grpo = flatten(openrlhf_args("--algo.advantage.estimator", "dr_grpo"))
    assert dr_grpo.pop("algo.advantage.estimator") == "dr_grpo"
    assert group_norm.pop("algo.advantage.estimator") == "group_norm"
    different = {k for k in dr_grpo if dr_grpo[k] != group_norm[k] and not k.endswith("run_name")}
    # R_i − mean spans ±20 on the 0..20 scale; OpenRLHF's default clamp (±10) would cut it.
    assert different == {"reward.clip_range"}
    assert (
        tuple(group_norm["reward.clip_range"]) == (-10, 10) and dr_grpo["reward.clip_range"] is None
    )
    assert dr_grpo["actor.entropy_coef"] == pytest.approx(-0.1)
    # A clip range the user gives is kept, for the baseline too.
    given = openrlhf_args(
        "--algo.advantage.estimator", "dr_grpo", "--reward.clip_range", "-5", "5",
        "--gtpo.algo", "grpo",
    )  # fmt: skip
    assert tuple(given.reward.clip_range) == (-5, 5)
    assert (
        openrlhf_args(
            "--algo.advantage.estimator", "dr_grpo", "--gtpo.algo", "grpo"
        ).reward.clip_range
        is None
    )


@pytest.mark.parametrize("estimator", ["group_norm", "dr_grpo"])
def test_advantage_form_leaves_openrlhf_entropy_coef_unset(openrlhf_args, caplog, estimator):
    with caplog.at_level(logging.INFO, logger="gtpo"):
        args = openrlhf_args(
            "--gtpo.entropy_form", "advantage", "--algo.advantage.estimator", estimator
        )
    assert args.gtpo.entropy_form == "advantage" and args.gtpo.gamma == 0.1
    assert args.actor.entropy_coef is None  # γ⟨H⟩_i goes into the advantages instead
    assert args.actor.loss_agg_mode == "seq-mean-token-mean"
    assert "--gtpo.entropy_form advantage: γ⟨H⟩_i is folded into the advantages" in caplog.text
    assert openrlhf_args("--gtpo.entropy_form", "penalty").actor.entropy_coef == pytest.approx(-0.1)


def test_grpo_baseline_allows_kl_and_keeps_openrlhf_entropy_coef(openrlhf_args):
    args = openrlhf_args("--gtpo.algo", "grpo", "--algo.kl.init_coef", "0.001")
    assert args.gtpo.algo == "grpo"
    assert args.algo.kl.init_coef == 0.001
    assert args.actor.entropy_coef is None  # γ = 0: the baseline has no entropy term


@pytest.mark.parametrize("algo", ["gtpo", "grpo"])
def test_async_with_a_queue_of_one_is_accepted(openrlhf_args, algo):
    args = openrlhf_args("--gtpo.algo", algo, "--train.async_enable")
    assert args.train.async_enable and args.train.async_queue_size == 1


def test_grpo_baseline_refuses_partial_rollouts_too(run_orl, base_argv):
    with pytest.raises(SystemExit):
        run_orl([*base_argv, "--gtpo.algo", "grpo", "--train.async_enable",
                 "--train.partial_rollout_enable"])  # fmt: skip


def test_unknown_gtpo_flag_is_an_error(run_orl, base_argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        run_orl([*base_argv, "--gtpo.gama", "0.1"])
    assert exit_info.value.code == 2
    assert "--gtpo.gama" in capsys.readouterr().err


def test_off_policy_settings_are_warned_about(openrlhf_args, caplog):
    with caplog.at_level(logging.WARNING, logger="gtpo"):
        openrlhf_args("--train.batch_size", "16", "--train.max_epochs", "2")
    text = caplog.text
    assert (
        "--train.batch_size 16 != --rollout.batch_size × --rollout.n_samples_per_prompt = 32"
        in text
    )
    assert "Set --train.batch_size 32" in text
    assert "--train.max_epochs 2" in text


def test_an_uneven_split_is_left_to_dynamic_batching(openrlhf_args):
    """OpenRLHF's dynamic batching balances the micro-batches over the ranks itself: the
    launcher accepts the uneven split then, and refuses the same settings without it."""
    args = openrlhf_args(
        "--actor.num_gpus_per_node", "2", "--rollout.micro_batch_size", "3",
        "--train.micro_batch_size", "8", "--train.dynamic_batch_enable",
    )  # fmt: skip
    command = checks.Command(args, run_args.gtpo_config(args))
    assert checks.training_split(command) is None
    compat.DYNAMIC_BATCH.set(args, False)
    assert "would train on 2 and 1 micro-batches of 8" in checks.training_split(command)


@pytest.mark.parametrize(
    ("gpus", "micro", "rows"),
    [("1", "64", "as 32 rows"), ("2", "24", "each of the 2 data-parallel ranks as 16 and 16 rows")],
)
def test_a_step_that_would_train_on_nothing_is_refused(run_orl, base_argv, caplog, gpus, micro,
                                                        rows):  # fmt: skip
    """Every rank's share is smaller than one training micro-batch: OpenRLHF's drop_last would
    leave nothing to train on, and the run would end with unchanged weights and exit 0."""
    with pytest.raises(SystemExit) as exit_info:
        run_orl([*base_argv, "--actor.num_gpus_per_node", gpus, "--train.micro_batch_size", micro])
    assert exit_info.value.code == 2
    err = caplog.text
    assert rows in err and "no step would train on anything" in err
    assert "Lower --train.micro_batch_size to at most" in err


def test_samples_that_drop_last_leaves_out_are_warned_about(openrlhf_args, caplog):
    # 2 ranks × 16 rows in micro-batches of 6: 2 each, 4 rows of each rank never trained on.
    with caplog.at_level(logging.WARNING, logger="gtpo"):
        openrlhf_args(
            "--actor.num_gpus_per_node", "2", "--rollout.micro_batch_size", "8",
            "--train.micro_batch_size", "6", "--train.batch_size", "24",
        )  # fmt: skip
    assert "8 of the 32 samples of each step are never trained on" in caplog.text


@pytest.mark.parametrize(
    ("low", "high", "warning"),
    [
        ("0", "1", None),  # OpenRLHF's default: the mixed groups of 4 (means 1/4..3/4) kept
        ("0.2", "0.8", None),  # 1/4, 2/4 and 3/4 still inside
        ("1", "20", "keeps no group that has right and wrong answers"),  # the reward's scale
        ("0.8", "1", "keeps no group that has right and wrong answers"),  # 3/4 < 0.8
        ("0", "20", "also keeps groups whose answers are all right (mean 1)"),
        ("-1", "1", "also keeps groups whose answers are all wrong (mean 0)"),
    ],
)
def test_dynamic_filtering_ranges_that_keep_no_mixed_group_are_warned_about(
    openrlhf_args, caplog, low, high, warning
):
    with caplog.at_level(logging.WARNING, logger="gtpo"):
        args = openrlhf_args(
            "--algo.dynamic_filtering_enable", "--algo.dynamic_filtering_range", low, high
        )
    assert compat.DYNAMIC_FILTERING_RANGE.get(args) == [float(low), float(high)]
    warned = [r.getMessage() for r in caplog.records if "dynamic_filtering_range" in r.getMessage()]
    if warning is None:
        assert not warned
    else:
        assert len(warned) == 1 and warning in warned[0], warned


def test_a_colocated_reference_on_the_policys_nodes_is_accepted(openrlhf_args):
    args = openrlhf_args(
        "--gtpo.algo", "grpo", "--algo.kl.init_coef", "1e-6", "--actor.num_nodes", "2",
        "--vllm.num_engines", "2", "--train.colocate_all", "--ref.num_nodes", "2",
        "--ref.num_gpus_per_node", "1", "--reward.remote_url", "http://10.0.0.1:8000/get_reward",
    )  # fmt: skip
    # What train_ppo_ray.py's assert compares once Ray is up.
    assert (args.ref.num_nodes, args.ref.num_gpus_per_node) == (
        args.actor.num_nodes,
        args.actor.num_gpus_per_node,
    )


def test_a_wandb_run_takes_its_key_from_the_environment(openrlhf_args, monkeypatch):
    """OpenRLHF's PPOTrainer starts W&B only when `args.logger.wandb.key` is truthy."""
    monkeypatch.setenv("WANDB_API_KEY", "key-from-env")
    args = openrlhf_args("--logger.wandb.run_name", "gtpo-run")
    assert args.logger.wandb.key == "key-from-env" and args.logger.wandb.run_name == "gtpo-run"
    # A key on the command line wins; no W&B flag at all leaves W&B off, key or not.
    given = openrlhf_args("--logger.wandb.run_name", "r", "--logger.wandb.key", "given")
    assert given.logger.wandb.key == "given"
    assert openrlhf_args().logger.wandb.key is None


def test_on_policy_settings_are_not_warned_about(openrlhf_args, caplog):
    with caplog.at_level(logging.WARNING, logger="gtpo"):
        openrlhf_args("--actor.loss_agg_mode", "seq-mean-token-mean")
    # The base command's model is a hub id this offline test machine never read: that the memory
    # was not checked is said (checks.not_checked), and is not a setting's warning.
    warned = [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and r.name.startswith("gtpo")
    ]
    assert [w for w in warned if not w.startswith(checks.NOT_CHECKED)] == [], warned


def test_launcher_restores_openrlhf_names(openrlhf_args):
    from openrlhf.trainer import ppo_trainer
    from openrlhf.trainer.ray import ppo_actor, vllm_engine
    from openrlhf.utils import config

    def names():
        return (
            config.hierarchize,
            ppo_trainer.PPOTrainer,
            ppo_actor.PolicyModelActor,
            vllm_engine.RolloutRayActor,
        )

    before = names()
    openrlhf_args()
    assert names() == before
