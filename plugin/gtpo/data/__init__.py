"""Dataset preparation: GSM8K, MATH, AIME 2024/2025, AMC 2023 → JSONL with the paper's prompt.

``prepare(source, split, ...)`` returns the records and the skipped rows with reasons;
``gtpo data`` (`gtpo.data.cli`) writes them.
"""

from gtpo.data.prepare import Prepared, prepare, write_jsonl
from gtpo.data.prompt import SYSTEM_PROMPT, build_prompt
from gtpo.data.sources import SOURCES

__all__ = ["SOURCES", "SYSTEM_PROMPT", "Prepared", "build_prompt", "prepare", "write_jsonl"]
