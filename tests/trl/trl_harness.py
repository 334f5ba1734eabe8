"""What the TRL tests share: the tiny task's trainer, the capture of what TRL generated and what
its loss saw, and Eq. 5-7 recomputed from the paper's loops and a plain forward.

The only small part is the model. Its temperature is low (0.14) so that completions share
tokens (conflict tokens exist) and their entropies fall on both sides of ln 2 (δ is not
trivially 1).
"""

from __future__ import annotations

import torch
from paper_reference import reference_delta, reference_weights
from trl import GRPOConfig

from gtpo.demo.model import build_model
from gtpo.trl import GTPOTrainer
from gtpo.trl.trainer import ADVANTAGES

G = 4
TEMPERATURE = 0.14


def length_reward(completions, **_):
    """A second reward that varies within every group, so advantages have both signs."""
    return [float(len(c) % 3) for c in completions]


def make_args(out, **overrides) -> GRPOConfig:
    values = dict(
        output_dir=str(out), loss_type="grpo", num_generations=G, per_device_train_batch_size=8,
        max_completion_length=16, max_steps=2, temperature=TEMPERATURE, learning_rate=1e-3,
        report_to=[], use_cpu=True, bf16=False, logging_steps=1, save_strategy="no", seed=0,
    )  # fmt: skip
    values.update(overrides)
    return GRPOConfig(**values)


def make_trainer(task, args, gtpo_config, reward_funcs=None, cls=GTPOTrainer, **trl_kwargs):
    tokenizer, dataset = task
    model = build_model(len(tokenizer), tokenizer.pad_token_id, tokenizer.eos_token_id, seed=0)
    extra = {"gtpo_config": gtpo_config} if cls is GTPOTrainer else {}
    return cls(
        model, reward_funcs or [length_reward], args, train_dataset=dataset,
        processing_class=tokenizer, **extra, **trl_kwargs,
    )  # fmt: skip


def row_key(ids: torch.Tensor, mask: torch.Tensor) -> tuple[int, ...]:
    return tuple(ids[mask.bool()].tolist())


def capture(trainer, record_mode=False, temperature=TEMPERATURE):
    """Record every generated batch (with ⟨H⟩ of each completion under the policy that sampled
    it, from a plain forward at the run's `temperature`) and every loss micro-batch as the loss
    saw it (its advantages are final once TRL's loss has run: δ is applied there). With
    `record_mode`, each record is a pair (record, "train" or "eval")."""
    generations, losses = [], []

    def mode():
        return "train" if trainer.model.training else "eval"

    generate = trainer._generate_and_score_completions

    def spy(inputs):
        batch = generate(inputs)
        with torch.no_grad():  # the policy that sampled the batch, before any update on it
            entropy, _ = reference_entropies(trainer.model, batch, temperature)
        mask = batch["completion_mask"].bool()
        mean_entropy = (entropy * mask).sum(-1) / mask.sum(-1)
        record = (dict(batch), batch[ADVANTAGES].clone(), mean_entropy)
        generations.append((record, mode()) if record_mode else record)
        return batch

    compute = trainer._compute_loss

    def loss_spy(model, inputs):
        loss = compute(model, inputs)
        losses.append((dict(inputs), mode()) if record_mode else dict(inputs))
        return loss

    trainer._generate_and_score_completions = spy
    trainer._compute_loss = loss_spy
    return generations, losses


def reference_entropies(model, batch, temperature=TEMPERATURE):
    """Per-token entropy and log-prob of the completion tokens, from a plain forward (no TRL)."""
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
    mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
    width = batch["completion_ids"].shape[1]
    logits = model(input_ids=ids, attention_mask=mask).logits[:, -width - 1 : -1] / temperature
    dist = torch.distributions.Categorical(logits=logits.float())
    return dist.entropy(), dist.log_prob(batch["completion_ids"])


def expected_advantages(generations, h_ini, group=G, gamma=0.0):
    """λ·δ·(A − γ⟨H⟩) of every generated completion from the paper's loops (λ from the signs of
    A), keyed by its prompt and completion tokens; and counts of what the check covered."""
    expected, seen = {}, {"conflicts": 0, "filtered": 0, "kept": 0}
    for batch, raw, mean_entropy in generations:
        mask = batch["completion_mask"].bool()
        for start in range(0, len(raw), group):
            rows = range(start, start + group)
            tokens = [batch["completion_ids"][i][mask[i]].tolist() for i in rows]
            weights = reference_weights(tokens, [float(raw[i]) for i in rows])
            for i, row in zip(rows, weights, strict=True):
                delta = reference_delta(float(mean_entropy[i]), h_ini)
                shifted = float(raw[i]) - gamma * float(mean_entropy[i])
                key = (
                    row_key(batch["prompt_ids"][i], batch["prompt_mask"][i]),
                    tuple(tokens[i - start]),
                )
                expected[key] = torch.tensor(row) * delta * shifted
                seen["conflicts"] += sum(w != 1 for w in row)
                seen["filtered" if delta == 0 else "kept"] += 1
    return expected, seen


def check_loss_advantages(losses, expected):
    """Every row of every loss micro-batch carries its completion's expected advantages."""
    rows = 0
    for inputs in losses:
        mask = inputs["completion_mask"].bool()
        for i in range(len(mask)):
            key = (
                row_key(inputs["prompt_ids"][i], inputs["prompt_mask"][i]),
                row_key(inputs["completion_ids"][i], mask[i]),
            )
            torch.testing.assert_close(
                inputs["advantages"][i][mask[i]], expected[key], atol=1e-4, rtol=1e-4
            )
            rows += 1
    return rows


def eq7_loss(trainer, model, inputs, gamma):
    """Eq. 7 as a loss on one micro-batch, recomputed from a plain forward: the clipped
    surrogate of the final advantages (r against the old log-probs when TRL has them) minus
    γ⟨H⟩, divided by TRL's accumulation steps."""
    entropy, logprobs = reference_entropies(model, inputs)
    mask = inputs["completion_mask"].bool()
    old = inputs.get("old_per_token_logps")
    ratio = torch.exp(logprobs - (logprobs.detach() if old is None else old))
    advantages = inputs["advantages"]
    clipped = torch.clamp(ratio, 1 - trainer.epsilon_low, 1 + trainer.epsilon_high)
    per_token = torch.minimum(ratio * advantages, clipped * advantages)
    length = mask.sum(-1)
    surrogate = (per_token * mask).sum(-1) / length
    objective = surrogate - gamma * (entropy * mask).sum(-1) / length
    return -objective.mean() / trainer.current_gradient_accumulation_steps
