"""GTPO's cost per training step against GRPO's, in the real TRL and OpenRLHF loops, side by
side in one run with the same model, data and seeds.

- TRL: `gtpo.trl.GTPOTrainer` with GTPOConfig() against TRL's own `GRPOTrainer` (the same
  GRPOConfig), each in a fresh process. Time per step: the median of the
  steady steps (the first, which holds H_ini's measurement and warm-up, is left out; H_ini has
  its own line). Memory: the process's peak resident set size (VmHWM) over the steady steps
  (reset after the first), generation included; on a CUDA device (where the arms train in
  bf16), the GPU memory PyTorch allocated at its peak over the same steps.
- OpenRLHF: `gtpo-openrlhf` in OpenRLHF's real PPOTrainer.fit() on CPU (tests/openrlhf's
  harness: DeepSpeed ZeRO-2, Ray, the vLLM stand-in), against `--gtpo.algo grpo`. Time per
  step: the median of PPOTrainer.train_step's steady calls (experience making, the policy's
  training, the weight broadcast; not the generation). Memory: the policy rank's peak RSS during
  its training phase (ActorPPOTrainer.ppo_train), the median over steady steps.
- The controller's `weight_advantages` at N = 8192 completions × L = 8192 tokens: time and the
  peak RSS above the experiences themselves.

The model makes the forward pass dominate: a Llama of ~11M parameters with an LLM's 32k
vocabulary in TRL (the logits are the largest tensor of a step, as at V = 152k; 8k in OpenRLHF,
whose bf16 is slow on a CPU), random weights (every completion runs to its 100-token limit),
G = 8 (TRL: one prompt a step) or 4 (OpenRLHF: four prompts a step) completions per prompt.
Rewards come from a local function that varies within groups (the reward server's cost is the
same for both methods and not measured here). In TRL, H_ini is given to the runs and its
one-off measurement timed after training, so it adds nothing to the steady steps' memory.

    python benchmarks/step_cost.py            # two alternating runs of each method, 6-23 min
    python benchmarks/step_cost.py --quick    # one run of each, fewer steps: under 10 minutes
    python benchmarks/step_cost.py --loops trl --entropy-form advantage   # one loop, one form
    python benchmarks/step_cost.py --loops trl --hidden-size 1024   # a wider model, same vocabulary

The last line is `step cost GTPO/GRPO: trl time R, trl memory R, openrlhf time R, openrlhf
memory R`. The machine's other load skews the times: compare ratios from one run. The full run
takes about 6 minutes on 2 cores with bf16 units (AVX-512 BF16), 23 without (OpenRLHF's bf16
matrix products).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from resident import reset_peak, status_kib

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "openrlhf"))
sys.path.insert(0, str(REPO / "tests"))

HIDDEN_SIZE = 256  # ~11M parameters with V = 32k (8.2M of them the tied embedding)


def model_shape(hidden_size: int) -> dict:
    """A 4-layer Llama of the given width, with Llama's MLP ratio and 64-wide heads. The width
    sets the logits' share of a token's matrix products (V·h against ~12·layers·h² for the
    body): 72% at 256, 40% at 1024; Qwen2.5-0.5B's is about 27%, Qwen2.5-7B's and
    Llama-3-8B's 7-8%. GTPO's penalty form adds work on the logits only."""
    if hidden_size % 64:
        raise SystemExit(f"--hidden-size: a multiple of 64 (the heads' width), not {hidden_size}")
    return {
        "hidden_size": hidden_size,
        "intermediate_size": round(hidden_size * 2.6875),
        "num_hidden_layers": 4,
        "num_attention_heads": hidden_size // 64,
        "num_key_value_heads": hidden_size // 64,
    }


VOCAB = 32_000
# OpenRLHF's DeepSpeed runs in bf16 (its only choices are bf16 and fp16), and bf16 matrix products
# are ~7× slower than fp32 on a CPU without bf16 units: its runs use an 8k vocabulary.
OPENRLHF_VOCAB = 8_192
COMPLETION_TOKENS = 100
LOOPS = {"controller", "trl", "openrlhf"}
TRL_H_INI = 10.0  # what the random weights measure (nats, above ln 2: Eq. 6 keeps everything)
REWARD_FILE = '''"""Step-cost benchmark reward: varies within every group, costs nothing."""
import torch


def reward_func(queries, prompts, labels):
    return {"rewards": torch.tensor([float(len(q) % 3) for q in queries])}
'''


# ---------------------------------------------------------------------------------- TRL


def toy_config(hidden_size: int, vocab: int, pad_id: int = 0, eos_id: int = 1) -> Any:
    """The toy shape's config (`model_shape`), tied embeddings."""
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=vocab, max_position_embeddings=256, tie_word_embeddings=True,
        pad_token_id=pad_id, eos_token_id=eos_id, **model_shape(hidden_size),
    )  # fmt: skip


def logits_share(config: Any) -> float:
    """The LM head's share of a token's matrix products (V·h against the decoder's linear
    layers: attention projections and the MLP, per layer)."""
    h, layers = config.hidden_size, config.num_hidden_layers
    head_dim = getattr(config, "head_dim", None) or h // config.num_attention_heads
    kv = config.num_key_value_heads * head_dim
    body = layers * (2 * h * h + 2 * h * kv + 3 * h * config.intermediate_size)
    head = config.vocab_size * h
    return head / (head + body)


def trl_arm(
    algo: str, steps: int, entropy_form: str, hidden_size: int, model_dir: str | None, out: Path
) -> dict:
    """One TRL run in this process (a fresh one per arm): per-step seconds, H_ini, peak RSS.
    The toy shape of `hidden_size`, or `model_dir`'s config (random weights) and tokenizer."""
    import torch
    from datasets import Dataset
    from transformers import (
        AutoConfig,
        AutoModelForCausalLM,
        AutoTokenizer,
        PreTrainedTokenizerFast,
        TrainerCallback,
    )
    from trl import GRPOConfig, GRPOTrainer

    from gtpo import GTPOConfig
    from gtpo.demo.task import corpus, make_split
    from gtpo.demo.tokenizer import EOS, PAD, build_tokenizer
    from gtpo.trl import GTPOTrainer

    torch.set_num_threads(2)
    split = make_split(64, 0)
    if model_dir:
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        config = AutoConfig.from_pretrained(model_dir)
    else:
        tokenizer = PreTrainedTokenizerFast(
            tokenizer_object=build_tokenizer(corpus(split.train)), pad_token=PAD, eos_token=EOS
        )
        tokenizer.add_tokens([f"<unused{i}>" for i in range(len(tokenizer), VOCAB)])
        config = toy_config(hidden_size, VOCAB, tokenizer.pad_token_id, tokenizer.eos_token_id)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)

    def varied_reward(completions, **_):
        return [float(len(c) % 3) for c in completions]

    # On a CUDA machine (make test-gpu) the TRL arms train on the GPU in bf16.
    cuda = torch.cuda.is_available()
    args = GRPOConfig(
        output_dir=str(out), loss_type="grpo", beta=0.0, num_generations=8,
        per_device_train_batch_size=8, max_completion_length=COMPLETION_TOKENS,
        max_steps=steps, temperature=1.0, learning_rate=1e-5, report_to=[], use_cpu=not cuda,
        bf16=cuda, logging_strategy="no", disable_tqdm=True, save_strategy="no", seed=0,
    )  # fmt: skip
    times: list[float] = []

    def settled() -> float:
        """The clock once the device's queued work is done (CUDA runs it asynchronously)."""
        if cuda:
            torch.cuda.synchronize()
        return time.perf_counter()

    class Clock(TrainerCallback):
        def on_step_begin(self, *a, **k):
            self.started = settled()

        def on_step_end(self, a, state, *rest, **k):
            times.append(settled() - self.started)
            if state.global_step == 1:
                reset_peak()
                if cuda:
                    torch.cuda.reset_peak_memory_stats()

    # GRPO is TRL's own GRPOTrainer, what a user switches from. GTPO's H_ini is given, so that
    # its one-off measurement (timed afterwards, on its own) leaves nothing in the process that
    # the steady steps' peak memory would count.
    config = GTPOConfig(h_ini=TRL_H_INI, h_ini_prompts=2, entropy_form=entropy_form)
    gtpo = {"gtpo_config": config} if algo == "gtpo" else {}
    trainer = (GTPOTrainer if algo == "gtpo" else GRPOTrainer)(
        model, [varied_reward], args,
        train_dataset=Dataset.from_list([{"prompt": p.prompt} for p in split.train]),
        processing_class=tokenizer, callbacks=[Clock()], **gtpo,
    )  # fmt: skip
    trainer.train()
    peaks = {"peak_rss_kb": status_kib("VmHWM")}
    if cuda:  # the GPU's memory is the one that limits a run there
        peaks["peak_cuda_kb"] = torch.cuda.max_memory_allocated() // 1024
    h_ini_seconds = []
    if algo == "gtpo":
        started = time.perf_counter()
        trainer.measure_h_ini()
        h_ini_seconds.append(time.perf_counter() - started)
    return {"step_seconds": times, "h_ini_seconds": h_ini_seconds, **peaks}


# Rows TRL's chunked log-prob kernel sees per micro-batch in these runs: on a device without
# Triton, TRL's fused LM head passes every position of the 8 sequences (prompt and padding
# included, ~137 each); on CUDA it passes only the completions' tokens.
KERNEL_ROWS = 1100


def trl_kernel_backward(hidden_size: int, vocab: int, repeats: int = 7) -> tuple[float, float]:
    """Median seconds of TRL's own chunked log-prob backward (`trl.kernels.ChunkedLogProbFunction`,
    the kernel behind both trainers' loss forward) on this device: with the log-prob gradient
    only (GRPO) and with the entropy's gradient too (Eq. 7's penalty), alternating."""
    import torch
    from trl.kernels import ChunkedLogProbFunction

    torch.set_num_threads(2)
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    hidden = torch.randn(KERNEL_ROWS, hidden_size, device=device, requires_grad=True)
    weight = (torch.randn(vocab, hidden_size, device=device) * 0.02).requires_grad_()
    targets = torch.randint(0, vocab, (KERNEL_ROWS,), device=device)

    def backward_seconds(penalty: bool) -> float:
        hidden.grad = weight.grad = None
        logps, entropy, *_ = ChunkedLogProbFunction.apply(
            hidden, weight, None, targets, 1.0, vocab, None, 1.0, ("entropy",)
        )
        loss = -logps.mean() + (0.1 * entropy.mean() if penalty else 0.0)
        if device == "cuda":
            torch.cuda.synchronize()
        started = time.perf_counter()
        loss.backward()
        if device == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - started

    seconds: dict[bool, list[float]] = {False: [], True: []}
    for round_ in range(repeats + 1):
        for penalty in seconds:
            elapsed = backward_seconds(penalty)
            if round_:  # the first round warms up
                seconds[penalty].append(elapsed)
    return statistics.median(seconds[False]), statistics.median(seconds[True])


def run_trl(
    steps: int, rounds: int, entropy_form: str, hidden_size: int, model_dir: str | None, work: Path
) -> dict[str, list[dict]]:
    """`rounds` runs of each method, alternating (GRPO, GTPO, GRPO, ...), each in its own
    process: drift in the machine's speed falls on both."""
    results: dict[str, list[dict]] = {"grpo": [], "gtpo": []}
    for round_ in range(rounds):
        for algo in results:
            out = work / f"trl-{algo}-{round_}.json"
            command = [sys.executable, __file__, "--trl-arm", algo, "--steps", str(steps),
                       "--entropy-form", entropy_form,
                       "--hidden-size", str(hidden_size),
                       *(["--model-dir", model_dir] if model_dir else [])]  # fmt: skip
            subprocess.run([*command, "--json", str(out)], check=True)
            results[algo].append(json.loads(out.read_text()))
    return results


# ---------------------------------------------------------------------------------- OpenRLHF


def run_openrlhf(
    steps: int, rounds: int, entropy_form: str, hidden_size: int, model_dir: str | None, work: Path
) -> dict[str, list[dict]]:
    """`rounds` fit() runs of each method, alternating, through the tests' harness."""
    from fit_harness import G, base_argv, build_config_fixture, build_fixture, run_fit, with_flags

    if model_dir:
        fixture = build_config_fixture(work / "fixture", Path(model_dir), n_prompts=4 * steps)
    else:
        shape = model_shape(hidden_size)
        fixture = build_fixture(work / "fixture", n_prompts=4 * steps, sft_steps=0,
                                shape=shape, vocab_size=OPENRLHF_VOCAB)  # fmt: skip
    reward = work / "reward.py"
    reward.write_text(REWARD_FILE)
    results: dict[str, list[dict]] = {"grpo": [], "gtpo": []}
    for round_ in range(rounds):
        for algo in results:
            out = work / f"openrlhf-{algo}-{round_}"
            argv = base_argv(fixture, "http://unused", out)
            overrides = {
                "--reward.remote_url": str(reward),
                "--data.max_samples": str(4 * steps),
                "--data.max_len": "256",
                "--rollout.max_new_tokens": str(COMPLETION_TOKENS),
                "--rollout.temperature": "1.0",
                "--rollout.micro_batch_size": "4",
                "--train.micro_batch_size": str(4 * G),
                "--gtpo.algo": algo,
                "--gtpo.h_ini_prompts": "2",
                "--gtpo.entropy_form": entropy_form,
            }
            argv = with_flags(argv, overrides)
            run = run_fit(argv, out, timeout=1200)
            if run.returncode != 0:
                raise SystemExit(f"OpenRLHF {algo} run failed; log: {out / 'run.log'}")
            capture = out / "capture"
            (step_file,) = capture.glob("train_step_seconds_*.json")
            (memory_file,) = capture.glob("actor_peak_rss_*.json")
            h_ini = [float(line.split(" in ")[1].split(" s")[0]) for line in run.log.splitlines()
                     if "GTPO: H_ini = " in line]  # fmt: skip
            results[algo].append(
                {
                    "step_seconds": json.loads(step_file.read_text()),
                    "peak_rss_kb": json.loads(memory_file.read_text()),
                    "h_ini_seconds": h_ini,
                }
            )
    return results


# ---------------------------------------------------------------------------------- controller


def controller_arm(n: int, length: int, out: Path) -> None:
    """weight_advantages on N completions of up to L tokens, in micro-batches of 16, as
    OpenRLHF's controller holds them; time and peak RSS above the experiences."""
    import torch
    from openrlhf.trainer.ppo_utils.experience import Experience

    from gtpo import GTPOConfig
    from gtpo.openrlhf.step import weight_advantages

    group, prompt, micro = 8, 64, 16
    rng = random.Random(0)
    experiences, entropies = [], []
    for first in range(0, n, micro):
        width = prompt + length
        sequences = torch.randint(3, 32_000, (micro, width))
        action_mask = torch.zeros(micro, width - 1, dtype=torch.bool)
        for r in range(micro):
            # Half to all of L tokens; the completions of a group share their first tokens.
            tokens = rng.randint(length // 2, length)
            action_mask[r, prompt - 1 : prompt - 1 + tokens] = True
            row = first + r
            sequences[r, prompt : prompt + 16] = row // group
        advantages = torch.randn(micro, 1).expand(micro, width - 1).contiguous()
        experiences.append(
            Experience(
                sequences=sequences, action_mask=action_mask, advantages=advantages,
                index=list(range(first, first + micro)),
            )
        )  # fmt: skip
        entropies.append(torch.rand(micro))
    reset_peak()
    held = status_kib("VmHWM")  # the experiences' RSS
    started = time.perf_counter()
    weight_advantages(experiences, entropies, group, 0.5, GTPOConfig())
    seconds = time.perf_counter() - started
    out.write_text(json.dumps({"seconds": seconds, "extra_peak_kb": status_kib("VmHWM") - held}))


def run_controller(work: Path, n: int, length: int) -> dict:
    out = work / "controller.json"
    subprocess.run(
        [sys.executable, __file__, "--controller-arm", f"{n}x{length}", "--json", str(out)],
        check=True,
    )
    return json.loads(out.read_text())


# ---------------------------------------------------------------------------------- report


def steady(values: list[float]) -> list[float]:
    return values[1:] if len(values) > 1 else values


def main() -> None:
    from gtpo.cli import end_on_sigterm

    end_on_sigterm()  # a caller's timeout (SIGTERM) ends the runs this started, as Ctrl-C does
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer steps (under 10 minutes)")
    ap.add_argument(
        "--entropy-form",
        choices=["penalty", "advantage"],
        default="penalty",
        help="where GTPO's entropy term goes (GTPOConfig.entropy_form; default: penalty)",
    )
    ap.add_argument(
        "--loops", default="controller,trl,openrlhf",
        help="what to measure, comma-separated (default: all; the last line needs both loops)",
    )  # fmt: skip
    ap.add_argument(
        "--hidden-size", type=int, default=HIDDEN_SIZE,
        help=f"the model's width (default {HIDDEN_SIZE}; wider shrinks the logits' share)",
    )  # fmt: skip
    ap.add_argument(
        "--model", default=None, metavar="NAME_OR_PATH",
        help="measure at this model's shape instead (its config with random weights, its "
        "tokenizer): a known name such as smollm2-135m-instruct, a hub id or a directory "
        "(gtpo model prepare); --hidden-size is then ignored",
    )  # fmt: skip
    ap.add_argument("--model-dir", help=argparse.SUPPRESS)
    ap.add_argument("--trl-arm", help=argparse.SUPPRESS)
    ap.add_argument("--controller-arm", help=argparse.SUPPRESS)
    ap.add_argument("--steps", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--json", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.trl_arm:
        with tempfile.TemporaryDirectory() as tmp:
            arm = trl_arm(args.trl_arm, args.steps, args.entropy_form, args.hidden_size,
                          args.model_dir, Path(tmp))  # fmt: skip
            args.json.write_text(json.dumps(arm))
        return
    if args.controller_arm:
        n, length = map(int, args.controller_arm.split("x"))
        controller_arm(n, length, args.json)
        return

    # (steps per run, rounds of runs per method): the first step of each run is left out.
    trl_plan, orl_plan = ((5, 1), (4, 1)) if args.quick else ((8, 2), (5, 2))
    loops = set(args.loops.split(","))
    if not loops <= LOOPS:
        ap.error(f"--loops takes a comma-separated subset of {','.join(sorted(LOOPS))}")
    started = time.perf_counter()
    print(f"{os.cpu_count()} CPU cores, load average {os.getloadavg()[0]:.2f}", flush=True)
    import torch

    if torch.cuda.is_available():
        print(f"CUDA device: {torch.cuda.get_device_name()}", flush=True)
    model_dir = None
    if args.model:
        from transformers import AutoConfig

        from gtpo.models import ModelUnavailableError, prepare_model

        try:
            prepared = prepare_model(args.model)
        except ModelUnavailableError as err:
            raise SystemExit(f"step_cost.py --model: {err}") from None
        model_dir = str(prepared.path)
        config = AutoConfig.from_pretrained(model_dir)
        shape = (
            f"{args.model}'s shape ({config.num_hidden_layers} layers, width "
            f"{config.hidden_size}, vocabulary {config.vocab_size}), random weights"
        )
    else:
        config = toy_config(args.hidden_size, VOCAB)
        shape = f"a 4-layer Llama of width {args.hidden_size}, vocabulary {VOCAB} (TRL)"
    print(f"GTPO's entropy form: {args.entropy_form}; model: {shape}", flush=True)
    print(f"the logits are {logits_share(config):.0%} of a token's matrix products", flush=True)
    ratios: dict[str, tuple[float, float]] = {}
    with tempfile.TemporaryDirectory(prefix="step-cost-") as tmp:
        work = Path(tmp)
        if "controller" in loops:
            controller = run_controller(work, 8192, 8192)
            print(f"controller: {json.dumps(controller)}", flush=True)
        if "trl" in loops:
            trl = run_trl(*trl_plan, args.entropy_form, args.hidden_size, model_dir, work)
            print(f"TRL: {json.dumps(trl)}", flush=True)
            kernel = trl_kernel_backward(config.hidden_size, config.vocab_size)
        if "openrlhf" in loops:
            orl = run_openrlhf(*orl_plan, args.entropy_form, args.hidden_size, model_dir, work)
            print(f"OpenRLHF: {json.dumps(orl)}", flush=True)

    def row(loop: str, results: dict[str, list[dict]], steady_steps: int) -> None:
        """Median of the steady steps of every run of a method; median of its runs' peaks
        (TRL: one per run; OpenRLHF: one per steady step)."""
        time_, memory = {}, {}
        every_run = [r for runs in results.values() for r in runs]
        on_gpu = all("peak_cuda_kb" in r for r in every_run)
        key, label = ("peak_cuda_kb", "peak GPU MB") if on_gpu else ("peak_rss_kb", "peak RSS MB")
        for algo, runs in results.items():
            time_[algo] = statistics.median(t for r in runs for t in steady(r["step_seconds"]))
            peaks = [p for r in runs for p in (steady(r[key])
                     if isinstance(r[key], list) else [r[key]])]  # fmt: skip
            memory[algo] = statistics.median(peaks)
        print(
            f"{loop:<9} step s  GRPO {time_['grpo']:7.3f}  GTPO {time_['gtpo']:7.3f}  "
            f"ratio {time_['gtpo'] / time_['grpo']:.3f}   {label}  GRPO "
            f"{memory['grpo'] / 1024:7.0f}  GTPO {memory['gtpo'] / 1024:7.0f}  ratio "
            f"{memory['gtpo'] / memory['grpo']:.3f}  (GTPO − GRPO "
            f"{(memory['gtpo'] - memory['grpo']) / 1024:+.0f} MB; {steady_steps} steady steps)"
        )
        h_ini = [s for r in results["gtpo"] for s in r["h_ini_seconds"]]
        if h_ini:
            print(f"{loop:<9} H_ini's one-off measurement (GTPO): {statistics.median(h_ini):.1f} s")
        ratios[loop] = time_["gtpo"] / time_["grpo"], memory["gtpo"] / memory["grpo"]

    if "trl" in loops:
        row("TRL", trl, (trl_plan[0] - 1) * trl_plan[1])
        print(
            f"TRL       its chunked log-prob backward, {KERNEL_ROWS} rows × {config.vocab_size} "
            "vocabulary: "
            f"{kernel[0] * 1e3:.0f} ms, {kernel[1] * 1e3:.0f} ms with the entropy's gradient "
            "(the penalty form's; GRPO and the advantage form have none)"
        )
    if "openrlhf" in loops:
        row("OpenRLHF", orl, (orl_plan[0] - 1) * orl_plan[1])
    if "controller" in loops:
        print(
            f"controller weight_advantages, N = 8192 × L = 8192: {controller['seconds']:.1f} s, "
            f"peak RSS above the experiences {controller['extra_peak_kb'] / 1024:.0f} MB"
        )
    print(f"wall time {time.perf_counter() - started:.0f} s")
    if {"trl", "openrlhf"} <= loops:
        (trl_time, trl_memory), (orl_time, orl_memory) = ratios["TRL"], ratios["OpenRLHF"]
        print(
            f"step cost GTPO/GRPO: trl time {trl_time:.2f}, trl memory {trl_memory:.2f}, "
            f"openrlhf time {orl_time:.2f}, openrlhf memory {orl_memory:.2f}"
        )


if __name__ == "__main__":
    main()
