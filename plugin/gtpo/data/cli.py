"""``gtpo data``: GSM8K, MATH, AIME 2024/2025 and AMC 2023 → JSONL with the paper's prompt."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from gtpo.data.prompt import FORMATS
from gtpo.data.sources import SOURCES, SPLITS

log = logging.getLogger(__name__)


def configure_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add ``gtpo data``'s arguments to ``parser``."""
    parser.add_argument(
        "source", choices=sorted(SOURCES),
        help="; ".join(f"{s.name}: {s.description} [{s.hub_name}]" for s in SOURCES.values()),
    )  # fmt: skip
    parser.add_argument("--split", choices=SPLITS, default="test", help="default %(default)s")
    parser.add_argument("--out", type=Path, required=True, help="output JSONL file")
    parser.add_argument(
        "--input", type=Path, default=None, metavar="PATH",
        help="local JSON/JSONL/Parquet file or folder instead of the hub (a folder is searched "
        "for files of --split: under a folder of that name or named after it)",
    )  # fmt: skip
    parser.add_argument("--hub-name", default=None, help="another hub dataset with these rows")
    parser.add_argument(
        "--hub-config", action="append", default=None, metavar="CONFIG",
        help="hub config to read (repeatable; default: the source's, e.g. MATH's 7 subjects)",
    )  # fmt: skip
    parser.add_argument("--hub-split", default=None, help="hub split name, if not --split")
    parser.add_argument(
        "--format", choices=FORMATS, default="messages", dest="fmt",
        help="messages: system+user chat messages (OpenRLHF --apply_chat_template, gtpo eval); "
        "chat: rendered with --tokenizer's chat template; plain: text for base models "
        "(default %(default)s)",
    )  # fmt: skip
    parser.add_argument("--tokenizer", default=None, help="tokenizer for --format chat")
    parser.add_argument(
        "--system-prompt", default=None, help="replace the paper's system instruction"
    )
    parser.add_argument("--limit", type=int, default=None, help="keep the first N records")
    return parser


def run(args: argparse.Namespace) -> int:
    """Handler: prepare, write the JSONL and report what was skipped."""
    from gtpo.data.prepare import prepare, write_jsonl
    from gtpo.data.prompt import SYSTEM_PROMPT

    if args.limit is not None and args.limit < 1:
        raise SystemExit(f"gtpo data: --limit must be >= 1, got {args.limit}")
    if args.fmt == "chat" and not args.tokenizer:
        raise SystemExit("gtpo data: --format chat needs --tokenizer PATH")
    tokenizer = None
    if args.tokenizer:
        from transformers import AutoTokenizer

        from gtpo.models import ModelUnavailableError, resolve_model

        try:
            tokenizer = AutoTokenizer.from_pretrained(resolve_model(args.tokenizer))
        except ModelUnavailableError as err:
            raise SystemExit(f"gtpo data: {err}") from None
    try:
        prepared = prepare(
            args.source, args.split, input_path=args.input, hub_name=args.hub_name,
            hub_configs=args.hub_config, hub_split=args.hub_split, fmt=args.fmt,
            tokenizer=tokenizer, system=args.system_prompt or SYSTEM_PROMPT, limit=args.limit,
        )  # fmt: skip
    except (ValueError, FileNotFoundError) as err:
        raise SystemExit(f"gtpo data: {err}") from None
    if not prepared.records:
        raise SystemExit(
            f"gtpo data: no usable rows ({prepared.skip_summary() or 'the input is empty'}); "
            "check --input/--split"
        )
    count = write_jsonl(args.out, prepared.records)
    skipped_path = args.out.with_name(args.out.name + ".skipped.jsonl")
    if prepared.skipped:
        write_jsonl(skipped_path, prepared.skipped)
        reasons = ", ".join(f"{r}: {c}" for r, c in prepared.skip_summary().items())
        log.warning("skipped %d rows (%s); list in %s", len(prepared.skipped), reasons,
                    skipped_path)  # fmt: skip
    else:
        skipped_path.unlink(missing_ok=True)  # a stale list from an earlier run would mislead
    log.info("wrote %d prompts to %s", count, args.out)
    return 0


def add_data_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``data`` on the ``gtpo`` command."""
    parser = subparsers.add_parser(
        "data",
        help="prepare GSM8K / MATH / AIME / AMC as JSONL with the paper's prompt",
        description="Read a dataset from the Hugging Face hub or a local JSON/JSONL/Parquet "
        "file or folder and write one JSON object per line: prompt (the paper's system "
        "instruction + the question), label (the reference answer the reward server reads), "
        "id, source, split. Rows without a usable reference (e.g. a MATH solution with no "
        "\\boxed{}) are skipped and listed in OUT.skipped.jsonl.",
    )
    configure_parser(parser)
    parser.set_defaults(handler=run)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Standalone entry point (``python -m gtpo.data.cli``)."""
    parser = configure_parser(argparse.ArgumentParser(prog="gtpo data"))
    args = parser.parse_args(argv)
    logging.basicConfig(level="INFO", format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from gtpo.reward_client import quiet_request_logs

    quiet_request_logs(logging.INFO)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
