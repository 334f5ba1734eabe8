"""The memory of one policy GPU in each phase of a run: what `--dry-run` prints and refuses.

Under `--train.colocate_all` the vLLM engines and the policy share each GPU and take turns:
the engines generate while the policy's training state sleeps (`--ds.enable_sleep`), the
policy trains while the engines sleep (`--vllm.enable_sleep`). Sleep frees less than it seems:
OpenRLHF's `offload_deepspeed_states` moves the optimizer states, the fp32 master weights and
the gradients to the host but leaves the bf16 weights (`lp_params`) on the GPU, and a
reference model (a KL term) stays whole. vLLM takes `--vllm.gpu_memory_utilization` of the
GPU's memory for itself whatever else is resident. Per GPU, in bytes (P parameters, N ranks the
policy is sharded over, m × T the tokens of a training micro-batch):

    generation = u · M                                   vLLM's share (weights, KV cache)
               + W                                       the policy's weights, through sleep
               + R                                       the reference model's weights
               + c · (processes on the GPU)              CUDA contexts
    training   = S + A + R + c · (processes on the GPU)  vLLM asleep keeps only its context
    sync       = 2P/t + W + 2·L + R + c · (processes)    after each step, colocated: vLLM's
                                                         weights woken (its share without
                                                         --vllm.enable_sleep), the tensor sent

- W: b·P (b = 2 in bf16, about 0.52 for bitsandbytes' NF4 with double quantisation on the linear
  layers, whose embeddings stay bf16), ÷ N under ZeRO-3; the full training state S when the
  policy does not sleep.
- S: DeepSpeed's own estimate of the model states (`estimate_zero2_model_states_mem_needs`:
  2P + 18P/N, or 2P with `--ds.adam_offload`; `estimate_zero3_model_states_mem_needs`:
  4·L + 18P/N, or 4·L + 2P/N, L the largest layer's parameters) for the trainable parameters;
  with LoRA the trainable ones are the adapters', and the frozen base adds b·P (÷ N under
  ZeRO-3).
- A: the activations of one micro-batch: with gradient checkpointing one bf16 hidden state per
  layer (2·m·T·h·layers) and one layer recomputed at a time (34·m·T·h, Korthikanti et al. 2022,
  attention that keeps no T×T scores); without it, 34·m·T·h for every layer. Plus the logits,
  10·m·T·V: lm_head's bf16 output (2 bytes an element), the fp32 copy OpenRLHF 0.11.2's
  `Actor.forward` makes (`.to(torch.float32)`), kept for the backward (4), and the fp32
  gradient the backward writes for it (4; GTPO's fused pass writes one: fused.py). With a
  temperature other than 1 the forward divides the copy in place, and the division's backward
  writes a second fp32 gradient: 12·m·T·V. Measured on a CPU at a 151,936-token vocabulary
  and 1,024 tokens, GTPO's pass peaked at exactly 10 and 12 bytes a logit
  (benchmarks/logits_memory.py).
- Sync (colocated only: engines on GPUs of their own add nothing to a policy GPU): OpenRLHF
  0.11.2 wakes only vLLM's weights for the weight sync (2P ÷ t, t its tensor parallelism; the
  whole share without --vllm.enable_sleep) while the policy sleeps (W; S without
  --ds.enable_sleep), and sends one tensor at a time: at most the largest module in bf16 (2·L),
  a ZeRO-3 gather, or a merged LoRA/QLoRA weight (GTPO's sync, policy.py).
- R: 2P (÷ N under ZeRO-3) with a KL term, 0 with `--ref.offload`.
- c: 0.5 GiB per process on the GPU (CUDA 12's context; the policy rank, each engine's worker,
  the reference rank).

vLLM's share must hold its own copy of the weights (2P ÷ its tensor parallelism) and a KV cache
of at least one sequence of `--data.max_len` tokens. The KV cache gets what is left of the share
after the weights and, in vLLM 0.29, after its profiled activation peak and its CUDA graphs'
estimate, which only the engine measures: the sequences counted here are an upper bound.

These are estimates: the allocator's fragmentation, NCCL's buffers and vLLM's CUDA graphs
(unless `--vllm.enforce_eager`) come on top, so a phase above 95 % of the GPU is refused too.
Only a GPU measures the real peaks (`torch.cuda.max_memory_allocated`, `nvidia-smi`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gtpo.openrlhf import compat

GIB = 2**30
CUDA_CONTEXT = GIB // 2
ACTIVATION_BYTES = 34  # per token and hidden unit of one layer (Korthikanti et al. 2022)
LOGIT_BYTES = 10  # bf16 logits, their fp32 copy, its fp32 gradient
SCALED_LOGIT_BYTES = 12  # and the temperature division's own fp32 gradient
NF4_BYTES = 0.5 + 1 / 64  # 4 bits a weight, one 8-bit absmax per block of 64 (double quantised)
HEADROOM = 0.95  # the share of the GPU a phase may plan for
LORA_LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass(frozen=True)
class ModelShape:
    """A decoder-only transformer's sizes, from its config.json."""

    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool
    qkv_bias: bool = False

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> ModelShape | None:
        """None for a config without the sizes of a dense decoder (an MoE, a non-LM)."""
        try:
            heads = int(config["num_attention_heads"])
            hidden = int(config["hidden_size"])
            return cls(
                layers=int(config["num_hidden_layers"]),
                hidden=hidden,
                intermediate=int(config["intermediate_size"]),
                heads=heads,
                kv_heads=int(config.get("num_key_value_heads") or heads),
                head_dim=int(config.get("head_dim") or hidden // heads),
                vocab=int(config["vocab_size"]),
                tied=bool(config.get("tie_word_embeddings", False)),
                qkv_bias=config.get("model_type") in ("qwen2", "qwen2_vl"),
            )
        except (KeyError, TypeError, ValueError):
            return None

    def linear_shapes(self) -> dict[str, tuple[int, int]]:
        """(in, out) features of each linear layer of one transformer block."""
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        h, i = self.hidden, self.intermediate
        return {
            "q_proj": (h, q), "k_proj": (h, kv), "v_proj": (h, kv), "o_proj": (q, h),
            "gate_proj": (h, i), "up_proj": (h, i), "down_proj": (i, h),
        }  # fmt: skip

    @property
    def linear_parameters(self) -> int:
        """The parameters of every block's linear layers: what 4-bit loading quantises."""
        return self.layers * sum(a * b for a, b in self.linear_shapes().values())

    @property
    def embedding_parameters(self) -> int:
        return self.vocab * self.hidden * (1 if self.tied else 2)

    @property
    def parameters(self) -> int:
        bias = (self.heads + 2 * self.kv_heads) * self.head_dim if self.qkv_bias else 0
        norms = self.layers * 2 * self.hidden + self.hidden
        return self.linear_parameters + self.layers * bias + norms + self.embedding_parameters

    @property
    def largest_layer(self) -> int:
        """DeepSpeed's `largest_layer_params`: the largest module, the embedding here."""
        return max(self.vocab * self.hidden, self.hidden * self.intermediate)

    def lora_parameters(self, rank: int, targets: list[str] | str | None) -> int:
        """r·(in + out) for each targeted linear layer of every block."""
        if targets in (None, compat.ALL_LINEAR, [compat.ALL_LINEAR]):
            targets = list(LORA_LINEAR)
        names = [targets] if isinstance(targets, str) else list(targets)
        shapes = self.linear_shapes()
        per_block = sum(rank * sum(shapes[n]) for n in shapes if any(t in n for t in names))
        return self.layers * per_block

    def kv_bytes_per_token(self) -> int:
        return 2 * self.layers * self.kv_heads * self.head_dim * 2  # keys and values, bf16


def deepspeed_model_states(trainable: int, stage: int, gpus: int, largest_layer: int,
                           adam_offload: bool) -> int:  # fmt: skip
    """DeepSpeed 0.19's own GPU estimate of the model states of `trainable` parameters
    (deepspeed.runtime.zero.stage_1_and_2.estimate_zero2_model_states_mem_needs and
    stage3.estimate_zero3_model_states_mem_needs, optimizer offload without parameter offload);
    stage 0 is stage 1-2's without partitioning."""
    if stage >= 3:
        partitioned = 2 if adam_offload else 18
        return 4 * largest_layer + int(partitioned * trainable / gpus)
    if adam_offload:
        return 2 * trainable
    return 2 * trainable + int(18 * trainable / (gpus if stage > 0 else 1))


@dataclass
class Phase:
    """The parts that share one GPU in one phase, in bytes."""

    name: str
    parts: list[tuple[str, int]] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(b for _, b in self.parts)

    def describe(self) -> str:
        shown = " + ".join(f"{label} {gib(b)}" for label, b in self.parts if b)
        return f"{gib(self.total)} = {shown}"


@dataclass
class GPUMemory:
    generation: Phase | None  # None: the engines have GPUs of their own
    training: Phase
    sync: Phase | None  # None: the engines have GPUs of their own
    engine_share: int  # vLLM's bytes on each of its GPUs
    engine_needs: int  # its weights and one full-length sequence's KV cache
    kv_sequences: int  # full-length sequences the share's KV cache holds


def gib(size: float) -> str:
    return f"{size / GIB:.1f} GiB"


def estimate(args: Any, shape: ModelShape, gpu_bytes: int) -> GPUMemory:
    """Each phase's bytes on one policy GPU (module docstring)."""
    stage = compat.ZERO_STAGE.get(args)
    ranks = compat.data_parallel_size(args)
    shard = ranks if stage >= 3 else 1
    four_bit = bool(compat.LOAD_IN_4BIT.get(args))
    weight_bytes = (
        NF4_BYTES * shape.linear_parameters + 2 * (shape.parameters - shape.linear_parameters)
        if four_bit
        else 2 * shape.parameters
    )
    adam_offload = bool(compat.ADAM_OFFLOAD.get(args))
    rank = compat.LORA_RANK.get(args)
    if rank:
        trainable = shape.lora_parameters(rank, compat.LORA_TARGET_MODULES.get(args))
        states = int(weight_bytes / shard) + deepspeed_model_states(
            trainable, stage, ranks, 0, adam_offload
        )
    else:
        states = deepspeed_model_states(
            shape.parameters, stage, ranks, shape.largest_layer, adam_offload
        )
    weights = int(weight_bytes / shard)
    reference = 0
    if compat.KL_COEF.get(args) > 0 and not compat.REF_OFFLOAD.get(args):
        reference = int(2 * shape.parameters / shard)
    activations = _activations(args, shape)

    colocated = bool(compat.COLOCATE_ALL.get(args))
    processes = 1 + (1 if colocated else 0) + (1 if reference else 0)
    contexts = CUDA_CONTEXT * processes
    tp = compat.VLLM_TENSOR_PARALLEL_SIZE.get(args)
    share = int(compat.VLLM_MEMORY.get(args) * gpu_bytes)
    engine_weights = 2 * shape.parameters // tp
    max_len = compat.MAX_LEN.get(args)
    one_sequence = shape.kv_bytes_per_token() // tp * max_len
    kv_sequences = max(0, (share - engine_weights) // max(1, one_sequence))

    training = Phase("training", [("model states", states), ("activations", activations)])
    if reference:
        training.parts.append(("reference", reference))
    if colocated and not compat.VLLM_SLEEP.get(args):
        training.parts.append(("vLLM awake (--vllm.enable_sleep off)", share))
    training.parts.append(("CUDA contexts", contexts))
    generation = sync = None
    if colocated:
        asleep = compat.DS_SLEEP.get(args)
        resident = weights if asleep else states
        label = "policy weights" if asleep else f"policy awake ({compat.DS_SLEEP.flag} off)"
        generation = Phase("generation", [("vLLM", share), (label, resident)])
        if compat.VLLM_SLEEP.get(args):
            engine = ("vLLM weights", engine_weights)
        else:
            engine = (f"vLLM awake ({compat.VLLM_SLEEP.flag} off)", share)
        sync = Phase("sync", [engine, (label, resident), ("tensor sent", 2 * shape.largest_layer)])
        for phase in (generation, sync):
            if reference:
                phase.parts.append(("reference", reference))
            phase.parts.append(("CUDA contexts", contexts))
    return GPUMemory(generation, training, sync, share, engine_weights + one_sequence, kv_sequences)


def _activations(args: Any, shape: ModelShape) -> int:
    tokens = compat.TRAIN_MICRO_BATCH_SIZE.get(args) * compat.MAX_LEN.get(args)
    if compat.DYNAMIC_BATCH.get(args):
        tokens = compat.MAX_TOKENS_PER_GPU.get(args)
    per_layer = ACTIVATION_BYTES * tokens * shape.hidden
    if compat.GRADIENT_CHECKPOINTING.get(args):
        layers = 2 * tokens * shape.hidden * shape.layers + per_layer
    else:
        layers = per_layer * shape.layers
    scaled = compat.ROLLOUT_TEMPERATURE.get(args) != 1.0
    return layers + (SCALED_LOGIT_BYTES if scaled else LOGIT_BYTES) * tokens * shape.vocab


def refusals(args: Any, memory: GPUMemory, gpu_bytes: int, source: str) -> list[str]:
    """One line per phase that does not fit the GPU, naming the flags to change."""
    problems = []
    limit = int(HEADROOM * gpu_bytes)
    flag = compat.VLLM_MEMORY.flag
    generation = memory.generation
    if generation is not None and generation.total > limit:
        others = generation.total - memory.engine_share
        most = (limit - others) / gpu_bytes
        least = memory.engine_needs / gpu_bytes
        fix = (
            f"Lower {flag} to at most {most:.2f} (its weights and one sequence's KV cache need "
            f"{least:.2f})"
            if most >= least
            else f"No {flag} leaves room for the engine's weights beside them: keep less resident"
        )
        problems.append(
            f"the generation phase needs {generation.describe()} on each GPU, more than "
            f"{HEADROOM:.0%} of its {gib(gpu_bytes)} ({source}): vLLM takes "
            f"{flag} {compat.VLLM_MEMORY.get(args)} of the GPU beside what stays resident "
            f"while it generates. {fix}, or pass {compat.REF_OFFLOAD.flag} or "
            f"{compat.ZERO_STAGE.flag} 3 to keep less resident."
        )
    sync = memory.sync
    if sync is not None and sync.total > limit:
        problems.append(
            f"the weight sync after each step needs {sync.describe()} on each GPU, more than "
            f"{HEADROOM:.0%} of its {gib(gpu_bytes)} ({source}): vLLM's weights wake while the "
            f"policy's stay. Pass {compat.VLLM_SLEEP.flag} and {compat.DS_SLEEP.flag}, "
            f"{compat.ZERO_STAGE.flag} 3, or spread the policy over more GPUs."
        )
    if memory.training.total > limit:
        problems.append(
            f"the training phase needs {memory.training.describe()} on each GPU, more than "
            f"{HEADROOM:.0%} of its {gib(gpu_bytes)} ({source}). Lower "
            f"{compat.TRAIN_MICRO_BATCH_SIZE.flag} or {compat.MAX_LEN.flag}, pass "
            f"{compat.GRADIENT_CHECKPOINTING.flag}, {compat.ZERO_STAGE.flag} 3 or "
            f"{compat.ADAM_OFFLOAD.flag}, or spread the policy over more GPUs."
        )
    if memory.engine_share < memory.engine_needs:
        problems.append(
            f"vLLM's share, {flag} {compat.VLLM_MEMORY.get(args)} of {gib(gpu_bytes)} = "
            f"{gib(memory.engine_share)}, does not hold its weights and the KV cache of one "
            f"sequence of {compat.MAX_LEN.flag} tokens ({gib(memory.engine_needs)}): the engine "
            f"would fail at start. Raise {flag}, or {compat.VLLM_TENSOR_PARALLEL_SIZE.flag}."
        )
    return problems
