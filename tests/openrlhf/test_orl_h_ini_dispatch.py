"""H_ini's forwards over many data-parallel ranks: every rank runs the same number of forwards,
whatever the prompts, G, micro-batch size and rank count, and the images of a VLM's samples go
with them. And the training split the launcher judges (`compat.training_rows_per_rank`) is the
one OpenRLHF's dispatch makes.

Real OpenRLHF code does the splitting: `RemoteExperienceMaker.split_rollout_samples` makes the
micro-batches (`Experience.concat_experiences`), `RayActorGroup.async_run_method_batch` cuts
them into one chunk per rank exactly as it does on a cluster, and `flatten_results` (OpenRLHF's
`_flatten_results`) gathers them. Only the Ray actors are replaced, by handlers that record what
each rank was given and answer with a known entropy per sample (a rank needs a GPU; `ray.put`
and `ray.get` pass values through). End to end, H_ini's forwards split 2 and 1 over two ranks
under ZeRO-3 in test_orl_real_model.py (slow stage).
"""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("openrlhf")
pytest.importorskip("deepspeed")

import ray
from openrlhf.trainer.ppo_utils.experience import Experience
from openrlhf.trainer.ray.launcher import RayActorGroup

from gtpo.openrlhf import compat, experience, step


class Rank:
    """One policy actor: records the forwards it ran; ⟨H⟩ of a row is its first token id."""

    def __init__(self) -> None:
        self.forwards: list[dict] = []
        self.appended_rows = 0  # training rows pushed to this rank's replay buffer
        self.execute_batch = SimpleNamespace(remote=self._execute_batch)

    def _execute_batch(self, method_name: str, all_data: dict, start: int, end: int) -> list:
        chunk = {key: values[start:end] for key, values in all_data.items()}
        if method_name == "append":  # PPOTrainer.train_step's push of the experiences
            self.appended_rows += sum(e.sequences.size(0) for e in chunk["experience"])
            return []
        assert method_name == compat.FORWARD_WITH_ENTROPY
        out = []
        for i in range(end - start):
            self.forwards.append({key: values[i] for key, values in chunk.items()})
            sequences = chunk["sequences"][i]
            # Log-probs shaped like the action mask ([B, T−1]), as PolicyModelActor.forward's.
            out.append(step.ActorForward(sequences[:, 1:].float(), sequences[:, 0].float()))
        return out


def args_for(
    micro_batch: int,
    ranks: int,
    *,
    dynamic: bool = False,
    ring: int = 1,
    tp: int = 1,
    prompts: int = 1,
    group: int = 1,
) -> SimpleNamespace:
    return SimpleNamespace(
        train=SimpleNamespace(
            dynamic_batch_enable=dynamic, colocate_all=False, colocate_actor_ref=False
        ),
        rollout=SimpleNamespace(
            micro_batch_size=micro_batch,
            max_tokens_per_gpu=64,
            batch_size=prompts,
            n_samples_per_prompt=group,
        ),
        actor=SimpleNamespace(num_nodes=1, num_gpus_per_node=ranks * ring * tp),
        ds=SimpleNamespace(ring_attn_size=ring, tensor_parallel_size=tp),
    )


def maker(args: SimpleNamespace, ring: int = 1, tp: int = 1) -> tuple:
    """A GTPOExperienceMaker with OpenRLHF's split and dispatch, over recording ranks."""
    group = object.__new__(RayActorGroup)  # its __init__ starts Ray actors
    group.duplicate_actors = ring * tp
    handlers = [Rank() for _ in range(args.actor.num_nodes * args.actor.num_gpus_per_node)]
    group._actor_handlers = handlers
    experience_maker = object.__new__(experience.GTPOExperienceMaker)
    experience_maker.strategy = SimpleNamespace(args=args)
    experience_maker.args = args
    experience_maker.tokenizer = SimpleNamespace(pad_token_id=0)
    experience_maker.actor_model_group = group
    experience_maker._forward_entropy = None
    return experience_maker, handlers


def samples(n: int, images: bool = False) -> list[Experience]:
    """n rollout samples of different lengths; sample k's first token id is k + 1."""
    out = []
    for k in range(n):
        length = 3 + k % 4
        sequences = torch.full((1, length), 7, dtype=torch.long)
        sequences[0, 0] = k + 1
        out.append(
            Experience(
                sequences=sequences,
                attention_mask=torch.ones(1, length, dtype=torch.long),
                action_mask=torch.ones(1, length - 1, dtype=torch.bool),
                total_length=torch.tensor([length]),
                mm_train_inputs=[{"pixel_values": torch.full((2, 2), float(k))}] if images else [],
            )
        )
    return out


@pytest.fixture(autouse=True)
def ray_passes_values(monkeypatch):
    monkeypatch.setattr(ray, "put", lambda value: value)
    monkeypatch.setattr(ray, "get", lambda refs: refs)


# (prompts, G, rollout micro-batch, data-parallel ranks), a grid plus the cases that failed: 100
# prompts × G = 8 in micro-batches of 16 on 64 ranks (50 micro-batches, fewer than ranks), and
# 100 micro-batches over 16 ranks (14 ranks get 7, one 2, one 0).
GRID = [
    *itertools.product((1, 3, 5), (2, 4, 8), (1, 3, 4, 16), (1, 2, 3, 4, 8, 64)),
    (100, 8, 16, 64),
    (100, 8, 8, 16),
    (3, 4, 4, 2),  # the fit() run that hung under ZeRO-3: 3 micro-batches over 2 ranks
    (1, 4, 4, 2),  # and the one that raised: 1 micro-batch, 2 ranks
]


@pytest.mark.parametrize(("prompts", "group", "micro_batch", "ranks"), GRID)
def test_every_rank_runs_the_same_number_of_h_ini_forwards(prompts, group, micro_batch, ranks):
    experience_maker, handlers = maker(args_for(micro_batch, ranks))
    entropies = experience_maker.completion_entropies(samples(prompts * group))
    counts = [len(h.forwards) for h in handlers]
    assert min(counts) == max(counts) >= 1, counts
    # Every real sample measured once, in rollout order; the repeats are not counted.
    assert entropies.tolist() == [float(k + 1) for k in range(prompts * group)]


@pytest.mark.parametrize(("n", "ranks", "ring", "tp"), [(6, 4, 1, 1), (2, 4, 1, 1), (9, 2, 2, 1)])
def test_dynamic_batching_and_ring_groups_are_balanced_too(n, ranks, ring, tp):
    args = args_for(4, ranks, dynamic=True, ring=ring, tp=tp)
    experience_maker, handlers = maker(args, ring, tp)
    entropies = experience_maker.completion_entropies(samples(n))
    counts = [len(h.forwards) for h in handlers]
    assert min(counts) == max(counts) >= 1, counts
    assert entropies.tolist() == [float(k + 1) for k in range(n)]


def test_vlm_inputs_go_with_the_h_ini_forward():
    """make_experience passes each micro-batch's processed images to the policy's forward; the
    H_ini forward must too, or a VLM's entropy is measured without its images."""
    experience_maker, handlers = maker(args_for(2, 2))
    experience_maker.completion_entropies(samples(4, images=True))
    for forward in (f for h in handlers for f in h.forwards):
        first_tokens = forward["sequences"][:, 0].tolist()
        pixels = [inputs["pixel_values"][0, 0].item() for inputs in forward["mm_train_inputs_list"]]
        assert pixels == [t - 1.0 for t in first_tokens]


# Training needs at least one rollout micro-batch per rank (OpenRLHF refuses fewer at start-up).
TRAINABLE = [(p, g, m, r) for p, g, m, r in GRID if -(-p * g // m) >= r]


@pytest.mark.parametrize(("prompts", "group", "micro_batch", "ranks"), TRAINABLE)
def test_the_launchers_training_split_is_openrlhfs(prompts, group, micro_batch, ranks):
    """`compat.training_rows_per_rank`, which the launcher refuses uneven splits by, against
    OpenRLHF's own: the rollout split into micro-batches, pushed to the ranks' replay buffers
    with `async_run_method_batch("append", ...)` as PPOTrainer.train_step does."""
    args = args_for(micro_batch, ranks, prompts=prompts, group=group)
    experience_maker, handlers = maker(args)
    micro_batches = experience_maker.split_rollout_samples(samples(prompts * group))
    group_of_ranks = experience_maker.actor_model_group
    group_of_ranks.async_run_method_batch(method_name="append", experience=micro_batches)
    assert compat.training_rows_per_rank(args) == [h.appended_rows for h in handlers]


def rewarded(experiences: list[Experience]) -> list[Experience]:
    """Rollout samples as the rollout actors return them: rewarded already (no reward model)."""
    for e in experiences:
        e.rewards = torch.ones(e.sequences.size(0))
    return experiences


@pytest.mark.parametrize(("prompts", "group", "micro_batch", "ranks"), TRAINABLE)
def test_every_rank_runs_the_same_number_of_experience_forwards(prompts, group, micro_batch, ranks):
    """make_experience's forwards (policy, and the reference model's with KL) are collectives
    under ZeRO-3: each rank must run as many as the others whatever the counts. The padding's
    results are dropped: one experience and one ⟨H⟩ per real micro-batch, in order."""
    args = args_for(micro_batch, ranks, prompts=prompts, group=group)
    args.algo = SimpleNamespace(kl=SimpleNamespace(use_loss=False))
    experience_maker, handlers = maker(args)
    experience_maker.reward_model_group = experience_maker.critic_model_group = None
    experience_maker.initial_model_group = None
    micro_batches = experience_maker.split_rollout_samples(rewarded(samples(prompts * group)))
    experiences = experience_maker.make_experience(micro_batches)
    counts = [len(h.forwards) for h in handlers]
    assert min(counts) == max(counts) >= 1, counts
    assert experiences == micro_batches
    first_tokens = [e.sequences[:, 0].float() for e in experiences]
    for entropy, expected in zip(experience_maker._rollout_entropy, first_tokens, strict=True):
        assert torch.equal(entropy, expected)


@pytest.mark.parametrize(("prompts", "group", "micro_batch", "ranks"), TRAINABLE)
@pytest.mark.parametrize(("train_micro", "accumulation"), [(1, 1), (3, 1), (8, 1), (2, 2)])
def test_a_rollout_is_cut_to_what_every_rank_trains_on_alike(
    prompts, group, micro_batch, ranks, train_micro, accumulation
):
    """`compat.trainable_samples` against OpenRLHF's own split of the kept samples into the
    ranks' replay buffers: every rank trains the same number of micro-batches on them, a
    positive multiple of the accumulation steps, and keeping one more prompt group would break
    that (or nothing is kept when no prefix works)."""
    args = args_for(micro_batch, ranks, prompts=prompts, group=group)
    args.train.micro_batch_size = train_micro
    args.train.batch_size = train_micro * ranks * accumulation
    assert compat.accumulation_steps(args) == accumulation

    def alike(n: int) -> bool:
        experience_maker, handlers = maker(args)
        micro_batches = experience_maker.split_rollout_samples(samples(n))
        if len(micro_batches) < ranks:
            return False  # OpenRLHF's dispatch refuses fewer micro-batches than ranks
        group_of_ranks = experience_maker.actor_model_group
        group_of_ranks.async_run_method_batch(method_name="append", experience=micro_batches)
        steps = {h.appended_rows // train_micro for h in handlers}
        return len(steps) == 1 and steps.pop() in range(accumulation, 10**6, accumulation)

    total = prompts * group
    kept = compat.trainable_samples(args, total)
    assert kept % group == 0 and 0 <= kept <= total
    assert kept == max((n for n in range(group, total + 1, group) if alike(n)), default=0)


@pytest.mark.parametrize(
    ("micro_batches", "ranks", "ring", "tp"), [(3, 2, 2, 1), (5, 2, 1, 2), (7, 3, 2, 2)]
)
def test_experience_forwards_over_ring_and_tensor_parallel_groups(micro_batches, ranks, ring, tp):
    """With ring attention or tensor parallelism, the ranks of one group run the same
    micro-batches (OpenRLHF's dispatch gives the group one chunk); the data-parallel ranks
    (GPUs ÷ (ring × tp), `compat.data_parallel_size`) still run equal numbers of forwards, and
    the group's duplicate answers are dropped once. (The ring forward itself needs flash-attn on
    a GPU.)"""
    args = args_for(1, ranks, ring=ring, tp=tp, prompts=micro_batches, group=1)
    args.algo = SimpleNamespace(kl=SimpleNamespace(use_loss=False))
    assert compat.data_parallel_size(args) == ranks
    experience_maker, handlers = maker(args, ring, tp)
    experience_maker.reward_model_group = experience_maker.critic_model_group = None
    experience_maker.initial_model_group = None
    split = experience_maker.split_rollout_samples(rewarded(samples(micro_batches)))
    experiences = experience_maker.make_experience(split)
    counts = [len(h.forwards) for h in handlers]
    assert min(counts) == max(counts) == -(-micro_batches // ranks), counts
    assert experiences == split and len(experience_maker._rollout_entropy) == micro_batches
