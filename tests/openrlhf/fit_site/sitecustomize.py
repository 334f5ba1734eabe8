"""Start-up hook of every process in an end-to-end OpenRLHF run (tests/openrlhf/fit_harness.py).

fit_harness.py puts this folder and tests/standins on PYTHONPATH for the driver and, through
Ray's runtime_env, for every Ray worker (and so for vLLM's engine-core processes they start).
Python imports `sitecustomize` at start-up, so each process (1) gives OpenRLHF's unconditional
CUDA calls a CPU meaning (tests/standins/cuda_on_cpu.py), (2) syncs weights to the real engine
over gloo (tests/standins/vllm_cpu_transport.py) and (3), when GTPO_TEST_CAPTURE_DIR is set,
records what the run did at every step so the test can recompute it independently:

    experiences_<pid>_<step>.pt: per micro-batch sequences, action_mask, index, prompts and
    labels, raw rewards,
    the group_norm advantages OpenRLHF computed, the advantages after GTPO's hook, the
    completion entropies; and the maker's h_ini and gtpo/* metrics.
    generated_<pid>_<n>.json: the prompts of each generation call (the first one measures H_ini).
    train_step_seconds_<pid>.json: the wall time of each PPOTrainer.train_step (the controller's
    experience making, the policy's training and the weight broadcast; not the generation), and
    train_step_end_<pid>.json the wall-clock time each one ended (benchmarks/async_throughput.py).
    actor_peak_rss_<pid>.json: each policy rank's peak resident memory (kB) during each
    ActorPPOTrainer.ppo_train call, the high-water mark reset before it (benchmarks/step_cost.py).
    train_micro_batches_<pid>.json: the training micro-batches of each ppo_train call, per rank.
    trainer_weights_<pid>_<n>.pt: the weights the n-th sync sent (policy rank 0).
    trainer_raw_<pid>_<n>.pt: with a 4-bit base (QLoRA), what those weights were made from as
    the trainer held it: every adapter tensor, and every 4-bit weight's packed bytes with its
    quant state (bitsandbytes' `QuantState.as_dict()`, plain tensors and numbers).
    generations_<pid>.jsonl: each completion an engine generated, with its count of syncs then.
    prefix_cache_resets_<pid>.json: each prefix-cache reset an engine was asked for, and whether
    vLLM did it.
    (The engines themselves write engine_weights_<pid>_<n>.pt or rollout_weights_<pid>_<n>.pt.)

The recording wraps OpenRLHF's own RemoteExperienceMaker methods (GTPO's subclass calls them
through super()), so it sees the hook's input and output without touching GTPO's code.
"""

from __future__ import annotations

import itertools
import os

import bnb_cpu_layout
import cuda_on_cpu
import float32_on_cpu
import vllm_cpu_sleep
import vllm_cpu_transport


def _record_experiences(experience_maker) -> None:
    import torch

    capture = os.environ["GTPO_TEST_CAPTURE_DIR"]
    base = experience_maker.RemoteExperienceMaker
    compute_advantages = base.compute_advantages_and_returns
    make_batch = base.make_experience_batch
    steps = itertools.count(1)

    def compute_advantages_and_returns(self, experiences):
        out = compute_advantages(self, experiences)
        # Runs inside GTPO's override before its hook: these are OpenRLHF's own advantages.
        self._recorded = {
            "group_norm": [e.advantages.clone() for e in out],
            "entropy": [t.clone() for t in (getattr(self, "_rollout_entropy", None) or [])],
        }
        return out

    def make_experience_batch(self, rollout_samples):
        out = make_batch(self, rollout_samples)
        recorded = getattr(self, "_recorded", {})
        record = {
            "micro_batches": [
                {
                    "sequences": e.sequences.clone(),
                    "action_mask": e.action_mask.clone(),
                    "attention_mask": e.attention_mask.clone(),
                    "index": list(e.index),
                    "prompts": list(e.prompts),
                    "labels": list(e.labels),
                    "rewards": e.rewards.clone(),
                    "scores": None if e.scores is None else e.scores.clone(),
                    "policy_version": e.info.get("policy_version"),
                    "advantages": e.advantages.clone(),
                    "rollout_log_probs": None
                    if e.rollout_log_probs is None
                    else e.rollout_log_probs.clone(),
                    "action_log_probs": None
                    if e.action_log_probs is None
                    else e.action_log_probs.clone(),
                }
                for e in out
            ],
            "group_norm": recorded.get("group_norm"),
            "entropy": recorded.get("entropy"),
            "h_ini": getattr(self, "h_ini", None),
            "metrics": dict(getattr(self, "metrics", {})),
        }
        torch.save(record, os.path.join(capture, f"experiences_{os.getpid()}_{next(steps)}.pt"))
        return out

    base.compute_advantages_and_returns = compute_advantages_and_returns
    base.make_experience_batch = make_experience_batch


def _record_generated_prompts(samples_generator) -> None:
    """generated_<pid>_<n>.json: the prompts of each generation call (in completion order)."""
    import json

    capture = os.environ["GTPO_TEST_CAPTURE_DIR"]
    generate = samples_generator.SamplesGenerator._generate_vllm
    calls = itertools.count(1)

    def _generate_vllm(self, dataloader_iter, num_prompts, dynamic_filtering, **kwargs):
        experiences, consumed, exhausted = generate(
            self, dataloader_iter, num_prompts, dynamic_filtering, **kwargs
        )
        prompts = list(dict.fromkeys(p for e in experiences for p in e.prompts))
        path = os.path.join(capture, f"generated_{os.getpid()}_{next(calls)}.json")
        with open(path, "w") as fh:
            json.dump(prompts, fh)
        return experiences, consumed, exhausted

    samples_generator.SamplesGenerator._generate_vllm = _generate_vllm


def _record_synced_weights(policy) -> None:
    """trainer_weights_<pid>_<n>.pt: on policy rank 0, the weights the n-th sync sent, as the
    trainer held them (gathered under ZeRO-3; with LoRA, GTPO's merged view under the base
    names, `lora.rollout_parameters`), to compare with what each engine then holds. Wraps
    GTPO's `broadcast_to_vllm`, which every sync goes through (OpenRLHF's own loop or GTPO's
    streamed one)."""
    import deepspeed
    import torch

    from gtpo.openrlhf.lora import is_peft, rollout_parameters

    capture = os.environ["GTPO_TEST_CAPTURE_DIR"]
    trainer_class = policy.GTPOActorPPOTrainer
    broadcast = trainer_class.broadcast_to_vllm
    syncs = itertools.count(1)

    def recording_broadcast(self):
        out = broadcast(self)
        model = self.actor.model.module
        zero3 = self.strategy.args.ds.zero_stage == 3
        weights = rollout_parameters(model, zero3) if is_peft(model) else model.named_parameters()
        rank0 = torch.distributed.get_rank() == 0
        sent = {}
        for name, param in weights:
            partitioned = hasattr(param, "ds_id")  # ZeRO-3: every rank takes part in the gather
            with deepspeed.zero.GatheredParameters([param], enabled=partitioned):
                if rank0:
                    sent[name] = param.data.detach().clone()
        if rank0:
            n = next(syncs)
            torch.save(sent, os.path.join(capture, f"trainer_weights_{os.getpid()}_{n}.pt"))
            raw = _raw_4bit_state(model)
            if raw:
                torch.save(raw, os.path.join(capture, f"trainer_raw_{os.getpid()}_{n}.pt"))
        return out

    trainer_class.broadcast_to_vllm = recording_broadcast


def _raw_4bit_state(model) -> dict:
    """PEFT name → adapter tensor, or → {"packed", "quant_state"} of a 4-bit weight; empty
    without a 4-bit weight. (One rank, ZeRO-2: nothing to gather.)"""
    import torch

    raw = {}
    for name, param in model.named_parameters():
        state = getattr(param, "quant_state", None)
        if state is not None:
            quant = {k: v.clone() if torch.is_tensor(v) else v for k, v in state.as_dict().items()}
            raw[name] = {"packed": param.data.clone(), "quant_state": quant}
        elif "lora_" in name:
            raw[name] = param.data.detach().clone()
    return raw if any(isinstance(v, dict) for v in raw.values()) else {}


def _record_engine(vllm_engine) -> None:
    """generations_<pid>.jsonl: each completion a rollout engine generated, with the number of
    weight syncs that engine had completed when it did (the policy version that sampled it).

    Counted in OpenRLHF's RolloutRayActor, which every sync passes through whichever engine is
    behind it (a sync ends on the weight OpenRLHF marks `empty_cache`)."""
    import json

    capture = os.environ["GTPO_TEST_CAPTURE_DIR"]
    actor = vllm_engine.RolloutRayActor.__ray_actor_class__
    update_weight, generate = actor.update_weight, actor.generate

    async def counting_update_weight(self, name, dtype, shape, empty_cache=False):
        out = await update_weight(self, name, dtype, shape, empty_cache)
        if empty_cache:
            self._gtpo_syncs = getattr(self, "_gtpo_syncs", 0) + 1
            if os.environ.get("GTPO_TEST_GREEDY_PROMPT"):
                await greedy_after_sync(self)
        return out

    async def greedy_after_sync(self):
        """greedy_<pid>.jsonl: the engine's greedy continuation of GTPO_TEST_GREEDY_PROMPT (a
        JSON list of token ids, or a list of such lists) right after each sync, through its own
        scheduler and prefix cache, GTPO_TEST_GREEDY_TOKENS tokens at most (default 8), to
        compare with the trainer's weights of that sync. One line per prompt, in order."""
        import asyncio

        from vllm import SamplingParams
        from vllm.utils import random_uuid

        prompts = json.loads(os.environ["GTPO_TEST_GREEDY_PROMPT"])
        if prompts and isinstance(prompts[0], int):
            prompts = [prompts]
        tokens = int(os.environ.get("GTPO_TEST_GREEDY_TOKENS", "8"))
        greedy = SamplingParams(temperature=0.0, max_tokens=tokens)

        async def continuation(prompt: list[int]) -> list[int]:
            request = self.llm.generate({"prompt_token_ids": prompt}, greedy, random_uuid())
            outputs = [o async for o in request]
            return list(outputs[-1].outputs[0].token_ids)

        continuations = await asyncio.gather(*(continuation(p) for p in prompts))
        with open(os.path.join(capture, f"greedy_{os.getpid()}.jsonl"), "a") as fh:
            for k, ids in enumerate(continuations):
                line = {"syncs": self._gtpo_syncs, "prompt": k, "ids": ids}
                fh.write(json.dumps(line) + "\n")

    async def recording_generate(self, prompt_token_ids, sampling_params, multi_modal_data=None):
        syncs = getattr(self, "_gtpo_syncs", 0)
        out = await generate(self, prompt_token_ids, sampling_params, multi_modal_data)
        line = {"ids": list(prompt_token_ids) + list(out.outputs[0].token_ids), "syncs": syncs}
        with open(os.path.join(capture, f"generations_{os.getpid()}.jsonl"), "a") as fh:
            fh.write(json.dumps(line) + "\n")
        return out

    async def recording_reset_prefix_cache(self):
        # OpenRLHF's own method awaits the engine's reset and drops its answer: vLLM leaves the
        # cache as it is (False) while requests hold KV blocks.
        done = await self.llm.reset_prefix_cache()
        syncs = getattr(self, "_gtpo_syncs", 0)
        _append_json("prefix_cache_resets", {"syncs": syncs, "done": done})

    actor.update_weight, actor.generate = counting_update_weight, recording_generate
    actor.reset_prefix_cache = recording_reset_prefix_cache


def _append_json(name: str, value) -> None:
    import json

    path = os.path.join(os.environ["GTPO_TEST_CAPTURE_DIR"], f"{name}_{os.getpid()}.json")
    values = []
    if os.path.exists(path):
        with open(path) as fh:
            values = json.load(fh)
    with open(path, "w") as fh:
        json.dump([*values, value], fh)


def _record_train_step_time(ppo_trainer) -> None:
    import time

    base = ppo_trainer.BasePPOTrainer
    train_step = base.train_step

    def timed(self, rollout_samples, global_step):
        started = time.perf_counter()
        out = train_step(self, rollout_samples, global_step)
        _append_json("train_step_seconds", time.perf_counter() - started)
        _append_json("train_step_end", time.time())  # wall clock: steps a second
        return out

    base.train_step = timed


def _record_actor_training(ppo_actor) -> None:
    """Per ActorPPOTrainer.ppo_train call on each policy rank: its peak resident memory (Linux:
    writing 5 to /proc/self/clear_refs resets the peak, VmHWM, to the current RSS) and the
    number of training micro-batches it ran."""
    base = ppo_actor.ActorPPOTrainer
    ppo_train, training_step = base.ppo_train, base.training_step
    counted = {"micro_batches": 0}

    def counting(self, *args, **kwargs):
        counted["micro_batches"] += 1
        return training_step(self, *args, **kwargs)

    def measured(self, kl_ctl):
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        counted["micro_batches"] = 0
        out = ppo_train(self, kl_ctl)
        with open("/proc/self/status") as fh:
            peak = next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:"))
        _append_json("actor_peak_rss", peak)
        _append_json("train_micro_batches", counted["micro_batches"])
        return out

    base.ppo_train = measured
    base.training_step = counting


def _both(first, second):
    def patch(module) -> None:
        first(module)
        second(module)

    return patch


# The real engine's weight sync and its sleep mode on CPU (tests/standins/vllm_cpu_sleep.py; a
# no-op where the stand-in engine runs: it imports none of these modules but its own
# PyNcclCommunicator, the same gloo class); bitsandbytes' 4-bit layers
# in the layout a GPU keeps (tests/standins/bnb_cpu_layout.py); float32 where the harness asks
# for it (a CPU without bf16 units: tests/standins/float32_on_cpu.py).
extra = {**vllm_cpu_transport.PATCHES, **vllm_cpu_sleep.PATCHES, **bnb_cpu_layout.PATCHES}
if os.environ.get("GTPO_TEST_FLOAT32") == "1":
    extra.update(float32_on_cpu.PATCHES)
if os.environ.get("GTPO_TEST_CAPTURE_DIR"):
    recordings = {
        "openrlhf.trainer.ppo_trainer": _record_train_step_time,
        "openrlhf.trainer.ray.ppo_actor": _record_actor_training,
        "gtpo.openrlhf.policy": _record_synced_weights,
        "openrlhf.trainer.ppo_utils.experience_maker": _record_experiences,
        "openrlhf.trainer.ppo_utils.samples_generator": _record_generated_prompts,
        "openrlhf.trainer.ray.vllm_engine": _record_engine,
    }
    for name, record in recordings.items():
        extra[name] = _both(extra[name], record) if name in extra else record
cuda_on_cpu.install(extra)
