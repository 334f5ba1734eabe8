"""GTPOTrainer: TRL's GRPOTrainer with GTPO's λ (Eq. 5), δ (Eq. 6) and entropy penalty (Eq. 7).

TRL's `_compute_loss` accepts per-token advantages of shape [B, T]. GTPO uses that: after TRL
has generated, scored and normalised a batch (`_generate_and_score_completions`), each
completion's advantage becomes A_i · λ_{i,t} · δ_i, computed by `gtpo.gtpo_terms` while the
G completions of every prompt are still together. Because λ·δ ≥ 0, TRL's clipped surrogate
with loss_type="grpo", (1/|o_i|) Σ_t min(r·λδA, clip(r)·λδA) averaged over completions, is
Eq. 7's first term; the penalty γ⟨H⟩_i is added with its own gradient (`entropy_term`). In the
advantage form of Eq. 7 (`GTPOConfig(entropy_form="advantage")`) the advantage is instead
(A_i − γ⟨H⟩_i) · λ_{i,t} · δ_i with ⟨H⟩_i measured at generation time, and there is no
separate entropy term.

H_ini (Eq. 6) is measured once, before the first update, on the first `h_ini_prompts`
training prompts, and written into TRL's TrainerState (`stateful_callbacks`, saved in each
checkpoint's trainer_state.json), so a resumed run filters with the original model's H_ini.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

import torch
from trl import GRPOConfig, GRPOTrainer
from trl.trainer.utils import pad

from gtpo import LN2, completion_entropy, gtpo_metrics, gtpo_terms
from gtpo.config import GTPOConfig, GTPOConfigError
from gtpo.state import CLIENT_STATE_KEY, EntropyMonitor, prefixed, restore_h_ini
from gtpo.trl.checks import check_trl_args

logger = logging.getLogger(__name__)

# Where H_ini lives in TrainerState.stateful_callbacks (TRL's checkpointed trainer_state.json).
STATE_KEY = "GTPO"


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


class GTPOTrainer(GRPOTrainer):
    """TRL's GRPOTrainer running GTPO (or, with `GTPOConfig(algo="grpo")`, TRL's GRPO unchanged).

    Args:
        model, reward_funcs, args, train_dataset, …: as for `trl.GRPOTrainer`. `args` must use
            loss_type="grpo" and beta=0.0 in GTPO mode (`gtpo.trl.checks` lists every refusal).
        gtpo_config: the GTPO knobs (γ, λ's weight, the δ filter, H_ini), the same object the
            demo and the OpenRLHF launcher read; defaults to the paper's settings.

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
        self._captured_entropies: torch.Tensor | None = None
        self._capture = False
        super().__init__(model, reward_funcs, args, *trl_args, **trl_kwargs)
        if self._is_vlm:
            raise GTPOConfigError(
                "GTPOTrainer supports text-only models: the entropy forward behind δ (Eq. 6) does "
                "not pass image inputs."
            )

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
        if self.train_dataset is None:
            raise GTPOConfigError(
                "H_ini (Eq. 6) is measured on the first training prompts but there is no "
                "train_dataset; pass GTPOConfig(h_ini=...) or entropy_filter='on'|'off'"
            )
        seen: list[int] = []
        for index in self._get_train_sampler():
            if index not in seen:
                seen.append(index)
                if len(seen) == count:
                    break
        return [self.train_dataset[i]["prompt"] for i in seen]

    @torch.no_grad()
    def measure_h_ini(self) -> float:
        """H_ini of Eq. 6: mean ⟨H⟩ of G completions for each of the first h_ini_prompts prompts.

        Generation goes through TRL's own path (chat template, generation config, vLLM if set);
        no rewards are needed. The RNG is forked so that training samples what it would have
        sampled without the measurement.
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
        total = torch.zeros(2, dtype=torch.float64, device=self.accelerator.device)
        devices = [self.accelerator.device] if self.accelerator.device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):
            for start in range(0, share, per_call):
                chunk = mine[start : start + per_call]
                repeated = [p for p in chunk for _ in range(self.num_generations)]
                entropies = self._sampled_entropies(repeated)
                real = min(len(chunk), max(count - start, 0)) * self.num_generations
                total += torch.stack([entropies[:real].double().sum(), torch.tensor(real)])
        total = self.accelerator.reduce(total, reduction="sum")
        h_ini = float(total[0] / total[1].clamp(min=1))
        logger.info(
            "GTPO: H_ini = %.4f nats measured on %d prompts × %d completions in %.1f s (ln 2 = "
            "%.4f): %s",
            h_ini,
            len(prompts),
            self.num_generations,
            time.perf_counter() - started,
            LN2,
            "below ln 2, Eq. 6 filters completions with ⟨H⟩ > ln 2"
            if h_ini < LN2
            else "at or above ln 2, Eq. 6 keeps every completion",
        )
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
        prompt = [torch.tensor(ids) for ids in prompt_ids]
        completion = [torch.tensor(ids, dtype=torch.long) for ids in completion_ids]
        return self._completion_entropies(
            pad(prompt, padding_value=pad_id, padding_side="left").to(device),
            pad([torch.ones_like(t) for t in prompt], padding_value=0, padding_side="left").to(
                device
            ),
            pad(completion, padding_value=pad_id, padding_side="right").to(device),
            pad([torch.ones_like(t) for t in completion], padding_value=0).to(device),
        )

    @torch.no_grad()
    def _completion_entropies(
        self,
        prompt_ids: torch.Tensor,
        prompt_mask: torch.Tensor,
        completion_ids: torch.Tensor,
        completion_mask: torch.Tensor,
    ) -> torch.Tensor:
        """⟨H⟩_i (Sec. 4.2) under the current policy, from TRL's fused forward. [N]."""
        _, entropies, _ = self._get_per_token_logps_and_entropies(
            self.model,
            torch.cat([prompt_ids, completion_ids], dim=1),
            torch.cat([prompt_mask, completion_mask], dim=1),
            completion_ids.size(1),
            batch_size=self.args.per_device_train_batch_size,
            compute_entropy=True,
        )
        return completion_entropy(entropies.float(), completion_mask)

    # -- λ and δ on each generated batch (Eq. 5-6) -------------------------------------------

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        if not getattr(self, "_h_ini_resolved", False):
            self._resolve_h_ini()
            self._h_ini_resolved = True
        batch = super()._generate_and_score_completions(inputs)
        mode = "train" if self.model.training else "eval"
        group = self.num_generations if mode == "train" else self.num_generations_eval
        mask = batch["completion_mask"]
        entropy = self._completion_entropies(
            batch["prompt_ids"], batch["prompt_mask"], batch["completion_ids"], mask
        )
        advantages = batch["advantages"]
        terms = gtpo_terms(
            self.gtpo_config,
            batch["completion_ids"],
            mask,
            advantages,
            group,
            entropy,
            self.h_ini,
        )
        if self.gtpo_config.is_gtpo:
            # [B, T] advantages: TRL's _compute_loss takes them as they are: λ_{i,t}·δ_i·A_i, or
            # λ_{i,t}·δ_i·(A_i − γ⟨H⟩_i) in the advantage form of Eq. 7.
            batch["advantages"] = terms.token_advantages().to(advantages.device)
        self._log_gtpo(mode, gtpo_metrics(terms.weights, advantages, mask, terms.keep, entropy))
        return batch

    def _log_gtpo(self, mode: str, metrics: dict[str, float]) -> None:
        """gtpo/* metrics through TRL's own metric buffer (averaged over processes and steps)."""
        local = torch.tensor(list(metrics.values()), device=self.accelerator.device)
        averaged = self.accelerator.reduce(local, reduction="mean").tolist()
        metrics = dict(zip(metrics, averaged, strict=True))
        for name, value in prefixed(metrics, self.h_ini).items():
            self._metrics[mode][name].append(value)
        if mode == "train":
            step = self.state.global_step
            self._entropy_monitor.update(metrics["entropy_mean"], self.h_ini, step)

    # -- Eq. 7's entropy term --------------------------------------------------------------

    def _get_per_token_logps_and_entropies(self, *args: Any, **kwargs: Any) -> Any:
        logps, entropies, aux = super()._get_per_token_logps_and_entropies(*args, **kwargs)
        if self._capture:
            self._captured_entropies = entropies
        return logps, entropies, aux

    def _compute_loss(self, model: Any, inputs: dict[str, Any]) -> torch.Tensor:
        if not self.gtpo_config.is_gtpo:
            return super()._compute_loss(model, inputs)  # the GRPO baseline: TRL's loss as is
        # TRL's forward already computes the token entropies (with grad) for its own metric;
        # they are kept here instead of running the model a second time.
        self._capture = True
        try:
            loss = super()._compute_loss(model, inputs)
        finally:
            self._capture = False
        entropies, self._captured_entropies = self._captured_entropies, None
        training = self.model.training
        normalizer = self.current_gradient_accumulation_steps if training else 1.0
        # entropy_coef is 0 in the advantage form: γ⟨H⟩_i is already in the advantages.
        return loss + entropy_term(
            entropies, inputs["completion_mask"], self.gtpo_config.entropy_coef, normalizer
        )
