"""Where each dataset lives and how its rows become (question, label) pairs.

Rows come from the Hugging Face hub (``datasets.load_dataset``) or from a local file or folder
(JSON, JSONL, Parquet). Labels are written as the bare reference answer (``72``,
``\\frac{1}{2}``), which the reward server reads as is; the MATH answer is the content of the
solution's last ``\\boxed{}`` (`last_boxed`: data preparation runs where no server does, so it
reads the box itself rather than through the server's internals).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

Row = dict[str, Any]
# label(row) -> (label, None) or (None, reason it is skipped)
LabelFn = Callable[[Row], "tuple[str | None, str | None]"]

QUESTION_KEYS = ("problem", "question", "Problem", "Question")
MATH_SUBJECTS = (
    "algebra",
    "counting_and_probability",
    "geometry",
    "intermediate_algebra",
    "number_theory",
    "prealgebra",
    "precalculus",
)
SPLITS = ("train", "test")


def gsm8k_label(row: Row) -> tuple[str | None, str | None]:
    """GSM8K: the text after the solution's last ``####``."""
    solution = row.get("answer")
    if not isinstance(solution, str) or "####" not in solution:
        return None, "no_final_answer_marker"  # GSM8K solutions end with "#### 72"
    answer = solution.rsplit("####", 1)[1].strip()
    return (answer, None) if answer else (None, "empty_answer")


def math_label(row: Row) -> tuple[str | None, str | None]:
    """MATH: the last ``\\boxed{}`` (or ``\\fbox{}``) of the solution; a bare ``answer`` field
    (MATH-500 style) when there is no solution."""
    solution = row.get("solution")
    if isinstance(solution, str) and solution.strip():
        for command in BOX_COMMANDS:
            inner = last_boxed(solution, command)
            if inner is not None and inner.strip():
                return inner.strip(), None
        return None, "no_boxed_answer"
    return answer_label(row)


# A MATH solution boxes its final answer: `\boxed{…}`, in a few `\fbox{…}`, rarely `\boxed 5`.
BOX_COMMANDS = ("\\boxed", "\\fbox")


def last_boxed(text: str, command: str = "\\boxed") -> str | None:
    """What the last ``command{…}`` of ``text`` holds, its braces balanced (an earlier one when
    the last never closes), or the token after a brace-less ``command 5``; None without one."""
    closing = _closing_braces(text)
    # A lookahead: `\\boxed \\boxed{1}` holds two boxes, the second inside the first's token.
    box = re.compile(re.escape(command) + r"(?=(\{)| \s*(\S+))")
    for found in reversed(list(box.finditer(text))):
        if found[2] is not None:
            return found[2].rstrip("$.")
        if found.start(1) in closing:
            return text[found.end(1) : closing[found.start(1)]]
    return None


def _closing_braces(text: str) -> dict[int, int]:
    """The place of each ``{`` of ``text`` that is closed → the place of its ``}``."""
    closing: dict[int, int] = {}
    opened: list[int] = []
    for brace in re.finditer(r"[{}]", text):
        if brace[0] == "{":
            opened.append(brace.start())
        elif opened:
            closing[opened.pop()] = brace.start()
    return closing


def answer_label(row: Row) -> tuple[str | None, str | None]:
    """AIME/AMC: the ``answer`` field (an integer or a short string)."""
    answer = row.get("answer", row.get("Answer"))
    if isinstance(answer, bool) or answer is None:
        return None, "no_answer"
    if isinstance(answer, float) and answer.is_integer():
        answer = int(answer)  # 27.0 from a Parquet float column is the integer answer 27
    text = str(answer).strip()
    return (text, None) if text else (None, "no_answer")


@dataclass(frozen=True)
class Source:
    """A dataset: its hub location and how to read a row."""

    name: str
    hub_name: str
    hub_configs: tuple[str | None, ...]
    hub_splits: dict[str, str]  # our split -> the hub's split name
    label: LabelFn
    description: str


SOURCES: dict[str, Source] = {
    s.name: s
    for s in (
        Source("gsm8k", "openai/gsm8k", ("main",), {"train": "train", "test": "test"},
               gsm8k_label, "GSM8K grade-school math (7473 train, 1319 test)"),
        Source("math", "EleutherAI/hendrycks_math", MATH_SUBJECTS,
               {"train": "train", "test": "test"}, math_label,
               "MATH competition problems, the 7 subjects (7500 train, 5000 test)"),
        Source("aime24", "HuggingFaceH4/aime_2024", (None,), {"test": "train"}, answer_label,
               "AIME 2024, 30 problems (evaluation only)"),
        Source("aime25", "math-ai/aime25", (None,), {"test": "test"}, answer_label,
               "AIME 2025, 30 problems (evaluation only)"),
        Source("amc23", "math-ai/amc23", (None,), {"test": "test"}, answer_label,
               "AMC 2023, 40 problems (evaluation only)"),
    )
}  # fmt: skip


def question_of(row: Row) -> str | None:
    """The problem statement, whichever of the usual keys holds it."""
    for key in QUESTION_KEYS:
        value = row.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _read_file(path: Path) -> list[Row]:
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        rows = []
        with path.open(encoding="utf-8") as fh:
            for number, line in enumerate(fh, 1):
                if line.strip():
                    try:
                        rows.append(json.loads(line))
                    except json.JSONDecodeError as err:
                        raise ValueError(f"{path}:{number}: not JSON ({err})") from None
        return rows
    if suffix == ".json":
        data = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(data, list):
            return data
        if isinstance(data, dict) and isinstance(data.get("data"), list):
            return data["data"]
        if isinstance(data, dict):
            return [data]  # the original MATH release: one problem per JSON file
        raise ValueError(f"{path}: expected a JSON list of objects or one object")
    if suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError as err:
            raise RuntimeError("reading Parquet needs pyarrow: pip install pyarrow") from err
        return pq.read_table(path).to_pylist()
    raise ValueError(f"{path}: unsupported file type {suffix!r} (use .json, .jsonl or .parquet)")


def _split_files(folder: Path, split: str) -> list[Path]:
    """Data files of ``split`` in ``folder``: those under a folder named like the split, else
    those whose name starts with it (``test-00000-of-00001.parquet``), else all of them."""
    files = sorted(
        p for p in folder.rglob("*") if p.is_file() and p.suffix in (".json", ".jsonl", ".parquet")
    )
    if not files:
        raise FileNotFoundError(f"{folder}: no .json, .jsonl or .parquet files")
    by_folder = [p for p in files if split in p.relative_to(folder).parts[:-1]]
    if by_folder:
        return by_folder
    by_name = [p for p in files if p.name.startswith(split)]
    if by_name:
        return by_name
    log.warning("%s: no file or folder named after split %r; reading all %d files",
                folder, split, len(files))  # fmt: skip
    return files


def load_local(path: Path, split: str) -> Iterator[Row]:
    """Rows of a local file, or of the ``split`` files in a folder."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file or folder")
    files = _split_files(path, split) if path.is_dir() else [path]
    for file in files:
        for row in _read_file(file):
            if not isinstance(row, dict):
                raise ValueError(f"{file}: rows must be JSON objects, got {type(row).__name__}")
            yield row


def load_hub(
    source: Source,
    split: str,
    *,
    hub_name: str | None = None,
    hub_configs: Iterable[str | None] | None = None,
    hub_split: str | None = None,
    load_dataset: Callable[..., Iterable[Row]] | None = None,
) -> Iterator[Row]:
    """Rows from the hub: every config of ``source`` (or the overrides) for ``split``.

    A ``hub_name`` override reads the hub split named ``split`` (or ``hub_split``) with
    ``hub_configs`` (default: the dataset's default config).

    ``load_dataset`` defaults to ``datasets.load_dataset``; tests pass a fake.
    """
    if hub_split is None and split not in source.hub_splits:
        raise ValueError(
            f"{source.name} has only the {', '.join(source.hub_splits)} split; use --split "
            f"{' or '.join(source.hub_splits)} (or --hub-split to read another hub split)"
        )
    if load_dataset is None:
        try:
            from datasets import load_dataset
        except ImportError as err:
            raise RuntimeError(
                "reading from the hub needs the datasets package (pip install datasets); or "
                "pass --input with a local JSON/JSONL/Parquet file or folder"
            ) from err
    name = hub_name or source.hub_name
    configs = tuple(hub_configs) if hub_configs else (
        source.hub_configs if hub_name is None else (None,)
    )  # fmt: skip
    if hub_split is None:
        hub_split = source.hub_splits[split] if hub_name is None else split
    for config in configs:
        log.info("loading %s%s split %s from the hub", name, f" ({config})" if config else "",
                 hub_split)  # fmt: skip
        yield from load_dataset(name, config, split=hub_split)
