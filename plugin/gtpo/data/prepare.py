"""Dataset rows → JSONL records ``{"prompt", "label", "id", "source", "split"}`` plus a skip
report (which rows were left out and why)."""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gtpo.data.prompt import SYSTEM_PROMPT, build_prompt
from gtpo.data.sources import SOURCES, load_hub, load_local, question_of

log = logging.getLogger(__name__)

# Row fields kept in the output when present (per-subject / per-level breakdowns of MATH).
KEPT_FIELDS = ("level", "type", "subject", "url", "year")


@dataclass
class Prepared:
    """Records to write and the rows skipped, each ``{"index", "id", "reason"}``."""

    records: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)

    def skip_summary(self) -> dict[str, int]:
        return dict(Counter(s["reason"] for s in self.skipped).most_common())


def prepare(
    source: str,
    split: str,
    *,
    input_path: Path | None = None,
    hub_name: str | None = None,
    hub_configs: Iterable[str | None] | None = None,
    hub_split: str | None = None,
    fmt: str = "messages",
    tokenizer: Any = None,
    system: str = SYSTEM_PROMPT,
    limit: int | None = None,
    load_dataset: Callable[..., Iterable[dict[str, Any]]] | None = None,
) -> Prepared:
    """Read ``source``'s ``split`` (local ``input_path`` if given, else the hub) and build the
    records; rows without a question or a usable label are skipped with a reason."""
    if source not in SOURCES:
        raise ValueError(f"unknown source {source!r}: choose one of {', '.join(SOURCES)}")
    from tqdm.auto import tqdm  # here: `gtpo --help` must not need the eval extra

    spec = SOURCES[source]
    if input_path is not None:
        rows: Iterable[dict[str, Any]] = load_local(input_path, split)
    else:
        rows = load_hub(
            spec, split, hub_name=hub_name, hub_configs=hub_configs, hub_split=hub_split,
            load_dataset=load_dataset,
        )  # fmt: skip
    out = Prepared()
    for index, row in enumerate(tqdm(rows, desc=f"prepare {source} {split}", unit="row")):
        if limit is not None and len(out.records) >= limit:
            break
        row_id = str(row.get("id", row.get("unique_id", f"{source}-{split}-{index}")))
        question = question_of(row)
        label, reason = spec.label(row)
        if question is None:
            reason = "no_question"
        if reason is not None:
            out.skipped.append({"index": index, "id": row_id, "reason": reason})
            continue
        record = {
            "prompt": build_prompt(question, fmt, tokenizer, system),
            "label": label,
            "id": row_id,
            "source": source,
            "split": split,
        }
        record.update({key: row[key] for key in KEPT_FIELDS if row.get(key) is not None})
        out.records.append(record)
    return out


def write_jsonl(path: Path, records: Iterable[dict[str, Any]]) -> int:
    """One JSON object per line; returns the count. Written to a temporary name first, so a
    failed run never leaves a half file under the final name."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    count = 0
    with tmp.open("w", encoding="utf-8") as fh:
        for record in records:
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")
            count += 1
    tmp.replace(path)
    return count
