"""GTPOTrainer: TRL's GRPOTrainer with GTPO's λ (Eq. 5), δ (Eq. 6) and entropy penalty (Eq. 7).

TRL's `_compute_loss` accepts per-token advantages of shape [B, T]. GTPO uses that: each
completion's advantage becomes A_i · λ_{i,t} · δ_i, and because λ·δ ≥ 0, TRL's clipped surrogate
with loss_type="grpo", (1/|o_i|) Σ_t min(r·λδA, clip(r)·λδA) averaged over completions, is
Eq. 7's first term; the penalty γ⟨H⟩_i is added with its own gradient (`entropy_term`). In the
advantage form of Eq. 7 (`GTPOConfig(entropy_form="advantage")`) the advantage is instead
(A_i − γ⟨H⟩_i) · λ_{i,t} · δ_i and there is no separate entropy term.

Where each factor is computed, and why no extra forward is needed:

- λ, at generation (`_generate_and_score_completions`): it compares the G completions of a
  prompt, which are together only there (TRL then shuffles rows into micro-batches). With several
  processes a group may straddle two of them (TRL shards the generation batch, and eval batches,
  without regard to groups), so the completion ids are gathered and each process computes λ for
  the groups its rows belong to.
- ⟨H⟩_i, for δ and the advantage form: the mean entropy of the completion under the policy that
  sampled it. TRL's loss forward computes the token entropies anyway; when a generation batch is
  used before any optimizer step (TRL runs no old-log-prob forward then: one policy iteration,
  generation aligned with the accumulation window), that forward *is* the sampling policy and
  δ is taken from it at loss time. When TRL does run the old-log-prob forward (off-policy reuse,
  vLLM's importance sampling), the entropies come from that forward instead, at generation.
  Nothing is computed when nothing reads it (δ off, penalty form: the loss forward's entropies
  serve the metrics only).

H_ini (Eq. 6) is measured once, before the first update, on the first `h_ini_prompts`
training prompts (its own generation and forward, in eval mode), and written into TRL's
TrainerState (`stateful_callbacks`, saved in each checkpoint's trainer_state.json), so a resumed
run filters with the original model's H_ini.
"""

from __future__ import annotations

import itertools
import logging
import math
import time
from typing import Any

import torch
from trl import GRPOConfig, GRPOTrainer
from trl.models.utils import disable_gradient_checkpointing
from trl.trainer.utils import pad

from gtpo import completion_entropy, conflict_terms, entropy_terms
from gtpo.config import GTPOConfig, GTPOConfigError
from gtpo.objective import metric_sums, metrics_from_sums, token_advantages
from gtpo.reward_client import RewardServerError
from gtpo.state import CLIENT_STATE_KEY, EntropyMonitor, log_measured_h_ini, prefixed, restore_h_ini
from gtpo.trl.checks import check_trl_args
from gtpo.trl.internals import check_trl
from gtpo.trl.rewards import ChatRenderer, RewardServerReward

logger = logging.getLogger(__name__)

# Where H_ini lives in TrainerState.stateful_callbacks (TRL's checkpointed trainer_state.json).
STATE_KEY = "GTPO"
# What the generated batch carries to the loss, beside TRL's own keys (rows follow TRL's
# shuffle and split): λ [B, T], TRL's advantages A_i [B], and ⟨H⟩_i under the sampling policy
# [B] when an old-log-prob forward measured it.
WEIGHTS, ADVANTAGES, SAMPLING_ENTROPY = "gtpo_weights", "gtpo_advantages", "gtpo_entropy"


def entropy_term(
    token_entropies: torch.Tensor, mask: torch.Tensor, gamma: float, normalizer: float
) -> torch.Tensor:
    """Eq. 7's penalty as a loss term: γ · (1/N) Σ_i ⟨H⟩_i, divided like TRL divides its loss.

    Args:
        token_entropies: [N, L] entropy of π_θ(·|s_{i,t}) at each completion position, with grad.
        mask: [N, L] real completion tokens.
        gamma: γ ≥ 0 (0 for the GRPO baseline and in the advantage form).
        normalizer: TRL's gradient-accumulation divisor for this micro-batch.

    The one place the entropy term is formed: J = … − γ⟨H⟩_i, so the loss −J gains +γ⟨H⟩_i and
    minimising it lowers the entropy (Sec. 5.2).
    """
    return gamma * completion_entropy(token_entropies, mask).mean() / normalizer


def h_ini_sums(entropies: torch.Tensor, real: int) -> torch.Tensor:
    """[Σ ⟨H⟩_i over the first `real` rows, `real`], float64, on the entropies' device (the
    accelerator's): what each process adds up before H_ini's cross-process sum. [2]."""
    total = entropies[:real].double().sum()
    return torch.stack([total, torch.full_like(total, float(real))])


class GTPOTrainer(GRPOTrainer):
    """TRL's GRPOTrainer running GTPO (or, with `GTPOConfig(algo="grpo")`, TRL's GRPO unchanged).

    Args:
        model, reward_funcs, args, train_dataset, …: as for `trl.GRPOTrainer`. `args` must use
            loss_type="grpo" and beta=0.0 in GTPO mode (`gtpo.trl.checks` lists every refusal).
        gtpo_config: the GTPO knobs (γ, λ's weight, the δ filter, H_ini, the reward timeout),
            the same object the demo and the OpenRLHF launcher read; defaults to the paper's.

    Attributes:
        h_ini: H_ini in nats once known (measured, restored from a checkpoint, or configured).
        h_ini_source: "measured", "checkpoint" or "config" (None before it is known).
    """

    def __init__(
        self,
        model: Any,
        reward_funcs: Any = None,
        args: GRPOConfig | None = None,
        *trl_args: Any,
        gtpo_config: GTPOConfig | None = None,
        **trl_kwargs: Any,
    ) -> None:
        check_trl()  # the private methods overridden below exist in the installed TRL
        self.gtpo_config = gtpo_config if gtpo_config is not None else GTPOConfig()
        if not isinstance(self.gtpo_config, GTPOConfig):
            raise GTPOConfigError(
                f"gtpo_config must be a gtpo.GTPOConfig, got {type(self.gtpo_config).__name__}"
            )
        if args is None:
            args = GRPOConfig(loss_type="grpo")
        check_trl_args(
            args,
            self.gtpo_config,
            tools=trl_kwargs.get("tools"),
            rollout_func=trl_kwargs.get("rollout_func"),
            env=trl_kwargs.get("environment_factory"),
        )
        self.h_ini: float | None = None
        self.h_ini_source: str | None = None
        self._entropy_monitor = EntropyMonitor(self.gtpo_config.collapse_patience)
        self._window_entropy: list[float] = []
        # Set while TRL's old-log-prob forward runs at generation (capture ⟨H⟩ from it) and
        # while its loss forward runs (apply δ from it).
        self._sampling_entropies: torch.Tensor | None = None
        self._capture_sampling = False
        self._loss_inputs: dict[str, Any] | None = None
        self._loss_entropies: torch.Tensor | None = None
        self._loss_gamma = 0.0  # the micro-batch's γ of the separate penalty term
        super().__init__(model, reward_funcs, args, *trl_args, **trl_kwargs)
        if self._is_vlm:
            raise GTPOConfigError(
                "GTPOTrainer supports text-only models: H_ini's generation and forward (Eq. 6) do "
                "not pass image inputs."
            )
        self._server_rewards = [f for f in self.reward_funcs if isinstance(f, RewardServerReward)]
        render = ChatRenderer(self._tokenizer, self.chat_template, self.chat_template_kwargs)
        for reward in self._server_rewards:
            reward.use_timeout(self.gtpo_config.reward_timeout)
            reward.use_renderer(render)
            reward.defer_failures = True

    # -- H_ini (Eq. 6), kept in TrainerState ------------------------------------------------

    @property
    def _needs_h_ini(self) -> bool:
        return self.gtpo_config.filter_mode == "auto"

    def _resolve_h_ini(self) -> None:
        """H_ini for this run: the config's, else the checkpoint's, else measured now."""
        saved = self.state.stateful_callbacks.get(STATE_KEY, {}).get("attributes", {})
        states = {"global_step": self.state.global_step}
        if saved.get("h_ini") is not None:
            states[CLIENT_STATE_KEY] = saved["h_ini"]
        h_ini = restore_h_ini(states, self.gtpo_config.h_ini)
        if h_ini is not None:
            self.h_ini = h_ini
            self.h_ini_source = "config" if self.gtpo_config.h_ini is not None else "checkpoint"
        elif self.h_ini is None and self._needs_h_ini:
            self.h_ini = self.measure_h_ini()
            self.h_ini_source = "measured"
        self._store_h_ini()

    def _store_h_ini(self) -> None:
        if self.h_ini is not None:
            self.state.stateful_callbacks[STATE_KEY] = {
                "args": {},
                "attributes": {"h_ini": float(self.h_ini)},
            }

    def train(self, *args: Any, **kwargs: Any) -> Any:
        # TrainerState is rebuilt (or loaded from the checkpoint) inside train(); H_ini is then
        # resolved at the first generation, which comes before the first update.
        self._h_ini_resolved = False
        return super().train(*args, **kwargs)

    def _save_checkpoint(self, model: Any, trial: Any) -> None:
        self._store_h_ini()
        super()._save_checkpoint(model, trial)

    def _first_training_prompts(self, count: int) -> list[Any]:
        """The first `count` distinct prompts in the order training draws them."""
        dataset = self.train_dataset
        if dataset is None:
            raise GTPOConfigError(
                "H_ini (Eq. 6) is measured on the first training prompts but there is no "
                "train_dataset; pass GTPOConfig(h_ini=...) or entropy_filter='on'|'off'"
            )
        if not hasattr(dataset, "__getitem__") or not hasattr(dataset, "__len__"):
            # A stream: the first `count` examples, in the order TRL's dataloader reads them
            # (it shuffles a datasets.IterableDataset with the run's seed first).
            if self.shuffle_dataset and hasattr(dataset, "shuffle"):
                dataset = dataset.shuffle(seed=self.args.seed)
            return [example["prompt"] for example in itertools.islice(dataset, count)]
        seen: list[int] = []
        for index in self._get_train_sampler():
            if index not in seen:
                seen.append(index)
                if len(seen) == count:
                    break
        return [dataset[i]["prompt"] for i in seen]

    @torch.no_grad()
    def measure_h_ini(self) -> float:
        """H_ini of Eq. 6: mean ⟨H⟩ of G completions for each of the first h_ini_prompts prompts.

        Generation goes through TRL's own path (chat template, generation config, vLLM if set);
        no rewards are needed. The entropy forward runs in eval mode (no dropout: the model's
        own distribution) without gradient checkpointing. The RNG is forked so that training
        samples what it would have sampled without the measurement.
        """
        started = time.perf_counter()
        wanted = self.gtpo_config.h_ini_prompts
        prompts = self._first_training_prompts(wanted)
        share = math.ceil(len(prompts) / self.accelerator.num_processes)
        mine = prompts[self.accelerator.process_index * share :][:share]
        count = len(mine)
        # Equal work on every process (collective generation must not hang): pad with repeats.
        mine = (mine + prompts[:share])[:share]
        per_call = max(1, self.args.per_device_train_batch_size // self.num_generations)
        device = self.accelerator.device
        total = torch.zeros(2, dtype=torch.float64, device=device)
        devices = [device] if device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):
            for start in range(0, share, per_call):
                chunk = mine[start : start + per_call]
                repeated = [p for p in chunk for _ in range(self.num_generations)]
                entropies = self._sampled_entropies(repeated)
                real = min(len(chunk), max(count - start, 0)) * self.num_generations
                total += h_ini_sums(entropies, real)
        total = self.accelerator.reduce(total, reduction="sum")
        h_ini = float(total[0] / total[1].clamp(min=1))
        log_measured_h_ini(
            h_ini, len(prompts), self.num_generations, time.perf_counter() - started,
            self.gtpo_config.entropy_threshold,
        )  # fmt: skip
        if len(prompts) < wanted:
            logger.warning(
                "GTPO: the dataset has %d prompts, fewer than h_ini_prompts %d",
                len(prompts),
                wanted,
            )
        return h_ini

    def _sampled_entropies(self, prompts: list[Any]) -> torch.Tensor:
        """⟨H⟩_i of one completion sampled for each prompt (TRL's generation path). [N]."""
        prompt_ids, images, fields = self._tokenize_prompts(prompts)
        completion_ids, _ = self._generate_single_turn(
            prompt_ids, images, fields, self.num_generations
        )
        device = self.accelerator.device
        pad_id = self._tokenizer.pad_token_id
        prompt = [torch.tensor(ids, device=device) for ids in prompt_ids]
        completion = [torch.tensor(ids, dtype=torch.long, device=device) for ids in completion_ids]
        completion_mask = pad([torch.ones_like(t) for t in completion], padding_value=0)
        ids = torch.cat(
            [
                pad(prompt, padding_value=pad_id, padding_side="left"),
                pad(completion, padding_value=pad_id, padding_side="right"),
            ],
            dim=1,
        )
        mask = torch.cat(
            [
                pad([torch.ones_like(t) for t in prompt], padding_value=0, padding_side="left"),
                completion_mask,
            ],
            dim=1,
        )
        training = self.model.training
        self.model.eval()
        try:
            with disable_gradient_checkpointing(
                self.model, self.args.gradient_checkpointing_kwargs
            ):
                _, entropies, _ = self._get_per_token_logps_and_entropies(
                    self.model,
                    ids,
                    mask,
                    completion_mask.size(1),
                    batch_size=self.args.per_device_train_batch_size,
                    compute_entropy=True,
                )
        finally:
            self.model.train(training)
        return completion_entropy(entropies.float(), completion_mask)

    # -- λ (Eq. 5) at generation ---------------------------------------------------------------

    @property
    def _needs_sampling_entropy(self) -> bool:
        """δ or the advantage form read ⟨H⟩_i (a GRPO baseline or δ off + penalty: metrics only)."""
        cfg = self.gtpo_config
        return cfg.filter_mode != "off" or cfg.advantage_entropy_coef != 0

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        if not getattr(self, "_h_ini_resolved", False):
            self._resolve_h_ini()
            self._h_ini_resolved = True
        self._sampling_entropies = None
        self._capture_sampling = self._needs_sampling_entropy
        try:
            batch = super()._generate_and_score_completions(inputs)
            self._raise_reward_failures()
        finally:
            self._capture_sampling = False
        mode = "train" if self.model.training else "eval"
        group = self.num_generations if mode == "train" else self.num_generations_eval
        mask = batch["completion_mask"]
        advantages = batch["advantages"]
        batch[WEIGHTS] = self._conflict_weights(batch["completion_ids"], mask, advantages, group)
        batch[ADVANTAGES] = advantages
        entropies, self._sampling_entropies = self._sampling_entropies, None
        if entropies is not None:  # TRL ran its old-log-prob forward: the sampling policy's
            batch[SAMPLING_ENTROPY] = completion_entropy(entropies.float(), mask)
        return batch

    def _conflict_weights(
        self, ids: torch.Tensor, mask: torch.Tensor, advantages: torch.Tensor, group: int
    ) -> torch.Tensor:
        """λ of this process's rows, computed over whole groups. [B, T].

        TRL shards a generation (or eval) batch over processes without regard to groups, so a
        group may straddle two processes: the rows are gathered (process p holds rows
        p·B … p·B+B−1 of the batch, whose groups are consecutive), and λ is computed on the
        groups that hold this process's rows.
        """
        cfg = self.gtpo_config
        processes = self.accelerator.num_processes
        if not cfg.applies_conflict or processes == 1:
            return conflict_terms(cfg, ids, mask, advantages, group)
        rows, width = ids.shape
        # One gather for ids and mask: padding becomes −1 (token ids are >= 0).
        packed = self.accelerator.pad_across_processes(
            ids.masked_fill(~mask.bool(), -1), dim=1, pad_index=-1
        )
        every_id = self.accelerator.gather(packed)
        every_advantage = self.accelerator.gather(advantages)
        first = self.accelerator.process_index * rows
        start, stop = first // group * group, -(-(first + rows) // group) * group
        every_id = every_id[start:stop]
        weights = conflict_terms(
            cfg, every_id.clamp(min=0), every_id >= 0, every_advantage[start:stop], group
        )
        return weights[first - start : first - start + rows, :width]

    # -- δ and Eq. 7 at loss time ---------------------------------------------------------------

    def _get_per_token_logps_and_entropies(self, model: Any, *args: Any, **kwargs: Any) -> Any:
        capture = self._capture_sampling and model is self.model
        if capture:  # TRL's old-log-prob forward at generation: ⟨H⟩ from the same pass
            kwargs["compute_entropy"] = True
        logps, entropies, aux = super()._get_per_token_logps_and_entropies(model, *args, **kwargs)
        if capture:
            self._sampling_entropies, self._capture_sampling = entropies.detach(), False
        elif self._loss_inputs is not None:
            self._loss_entropies = entropies
            self._apply_gtpo(self._loss_inputs, entropies)
        return logps, entropies, aux

    def _apply_gtpo(self, inputs: dict[str, Any], entropies: torch.Tensor) -> None:
        """δ and the entropy form on this micro-batch, before TRL's loss reads the advantages.

        Runs inside `_compute_loss`, right after its forward: ⟨H⟩_i comes from the generation's
        old-log-prob forward when there was one, else from this forward (the sampling policy:
        no optimizer step since generation). The advantages are rebuilt from the values stored
        at generation, so a micro-batch reused for several iterations is weighted once.
        """
        mask = inputs["completion_mask"]
        sampling = inputs.get(SAMPLING_ENTROPY)
        entropy = sampling if sampling is not None else completion_entropy(entropies.detach(), mask)
        advantages = inputs[ADVANTAGES]
        terms = entropy_terms(self.gtpo_config, advantages, entropy, self.h_ini)
        if self.gtpo_config.is_gtpo:
            # [B, T] advantages: TRL's _compute_loss takes them as they are: λ_{i,t}·δ_i·A_i, or
            # λ_{i,t}·δ_i·(A_i − γ⟨H⟩_i) in the advantage form of Eq. 7.
            inputs["advantages"] = token_advantages(inputs[WEIGHTS], terms.keep, terms.advantages)
        mode = "train" if self.model.training else "eval"
        sums = metric_sums(inputs[WEIGHTS], advantages, mask, terms.keep, entropy)
        self._log_gtpo(mode, metrics_from_sums(sums))
        self._loss_gamma = terms.gamma

    def _compute_loss(self, model: Any, inputs: dict[str, Any]) -> torch.Tensor:
        self._loss_inputs, self._loss_entropies, self._loss_gamma = inputs, None, 0.0
        try:
            loss = super()._compute_loss(model, inputs)
        finally:
            self._loss_inputs = None
        entropies, self._loss_entropies = self._loss_entropies, None
        if not self._loss_gamma:  # GRPO, the advantage form, or γ = 0: no separate term
            return loss
        normalizer = self.current_gradient_accumulation_steps if self.model.training else 1.0
        # TRL's forward already computes the token entropies (with grad) for its own metric;
        # Eq. 7's penalty uses them instead of running the model a second time.
        return loss + entropy_term(
            entropies, inputs["completion_mask"], self._loss_gamma, normalizer
        )

    # -- metrics and failures ---------------------------------------------------------------

    def _log_gtpo(self, mode: str, metrics: dict[str, torch.Tensor]) -> None:
        """gtpo/* metrics through TRL's own metric buffer (averaged over processes and steps);
        the collapse monitor sees each optimizer step's mean ⟨H⟩. The values stay on the
        device until one reduce and one read."""
        local = torch.stack([value.float() for value in metrics.values()])
        averaged = self.accelerator.reduce(local, reduction="mean").tolist()
        metrics = dict(zip(metrics, averaged, strict=True))
        for name, value in prefixed(metrics, self.h_ini).items():
            self._metrics[mode][name].append(value)
        if mode == "train":
            self._window_entropy.append(metrics["entropy_mean"])
            if self.accelerator.sync_gradients:
                window, self._window_entropy = self._window_entropy, []
                step = self.state.global_step + 1  # the step this optimizer update completes
                self._entropy_monitor.update(sum(window) / len(window), self.h_ini, step)

    def _raise_reward_failures(self) -> None:
        """Stop every process when the reward service failed on any of them.

        `RewardServerReward` holds its failure (GTPOTrainer sets `defer_failures`) instead of
        raising before TRL's reward gather, where the other processes would wait for this one
        until the collective timeout. After the gather every process learns whether any failed
        and raises the same error.
        """
        from accelerate.utils import gather_object

        local = [f for f in (r.take_failure() for r in self._server_rewards) if f]
        failures = local
        if self.accelerator.num_processes > 1:
            failures = [f for f in gather_object([local[0] if local else None]) if f]
        if failures:
            raise RewardServerError(failures[0])
