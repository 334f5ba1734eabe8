"""Request and response models: OpenRLHF's remote reward protocol, the richer ``/v1/score`` and
``/v1/equivalent`` (answer/reference pairs).

OpenRLHF 0.11 (``SingleTurnAgentExecutor._fetch_rewards_via_http``) posts
``{"query": [...], "prompts": [...], "labels": [...]}`` — one sample per request, many requests
concurrently — where ``query`` is prompt + response decoded with special tokens kept, and reads
``rewards``, ``scores`` and ``extra_logs`` from the answer.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from reward_server.protocol import Reason

# A label is the dataset's answer field: usually a string (GSM8K solution, MATH solution or bare
# answer), sometimes a number. A JSON object or list is a client bug, not a label.
Label = str | int | float | None


class RewardRequest(BaseModel):
    """One batch to score; the three lists are parallel."""

    model_config = ConfigDict(extra="ignore")

    query: list[str] = Field(..., description="Prompt + response, as decoded by OpenRLHF.")
    prompts: list[str] | None = Field(
        None, description="The prompt of each query; located in the query to cut it off."
    )
    # Validated by _check below (one message per bad label, booleans refused), documented here
    # as what it accepts, so that the OpenAPI schema promises no more than the server takes.
    labels: list[Any] = Field(
        ...,
        description="Reference: GSM8K/MATH solution, bare answer, finite number or null.",
        json_schema_extra={"items": {"type": ["string", "number", "null"]}},
    )

    @model_validator(mode="after")
    def _check(self) -> RewardRequest:
        for i, label in enumerate(self.labels):
            if label is not None and (
                isinstance(label, bool) or not isinstance(label, str | int | float)
            ):
                raise ValueError(
                    f"labels[{i}] must be a string, a number or null, not {type(label).__name__}"
                )
            if isinstance(label, float) and not math.isfinite(label):
                # NaN/Infinity are not JSON, but Python's json.dumps writes them: a dataset bug
                # that would otherwise reward the answer "nan".
                raise ValueError(f"labels[{i}] must be a finite number, not {label}")
        n = len(self.query)
        if len(self.labels) != n:
            raise ValueError(
                f"'query' has {n} items but 'labels' has {len(self.labels)}: "
                "send one label per query"
            )
        if self.prompts is not None and len(self.prompts) != n:
            raise ValueError(
                f"'query' has {n} items but 'prompts' has {len(self.prompts)}: "
                "send one prompt per query (or omit 'prompts')"
            )
        return self


class ExtraLogs(BaseModel):
    """Per-item sub-rewards; OpenRLHF logs every key of ``extra_logs``."""

    format_reward: list[float]
    accuracy_reward: list[float]


class RewardResponse(BaseModel):
    """OpenRLHF's expected answer: ``rewards`` drive the advantages; ``scores`` (the accuracy,
    1 or 0) are logged and read by OpenRLHF's dynamic filtering."""

    rewards: list[float]
    scores: list[float] = Field(..., description="The accuracy as 1 (correct) or 0.")
    extra_logs: ExtraLogs


class ItemScore(BaseModel):
    """The full verdict for one item of ``/v1/score``."""

    response: str = Field(
        ..., description="The response after prompt and end tokens removal ('' when not found)."
    )
    response_start: str = Field(
        ...,
        description="Where the response was found: prompt (past the prompt), chat_header (past "
        "the last assistant header), whole_query (no prompt, no header), not_found (the prompt "
        "is not in the query: nothing scored).",
    )
    response_format: str = Field(..., description="The response format it was scored in.")
    answer: str | None = Field(
        ..., description="The final answer, unwrapped (paper: the last <answer> block)."
    )
    reference: str | None = Field(..., description="Reference extracted from the label.")
    format_score: float = Field(..., description="0, 1.0, 1.5 or 10.")
    format_reason: str = Field(..., description="ok, missing_answer, several_answers, ...")
    accuracy_score: float = Field(..., description="0 or 10.")
    reason: Reason = Field(..., description="Accuracy verdict: only ``equivalent`` earns accuracy.")
    reward: float = Field(..., description="format_score + accuracy_score.")


class ScoreResponse(BaseModel):
    results: list[ItemScore]


class Pair(BaseModel):
    """One answer and the reference it is checked against."""

    model_config = ConfigDict(extra="forbid")

    answer: str = Field(..., description="An answer as written (``\\boxed{}``/``$`` allowed).")
    reference: str = Field(
        ..., description="A bare answer, or a dataset label (GSM8K ``#### 72``, MATH solution)."
    )


class EquivalentRequest(BaseModel):
    """Pairs to check; the verdicts come back in the same order."""

    model_config = ConfigDict(extra="forbid")

    pairs: list[Pair]


class EquivalentVerdict(BaseModel):
    equivalent: bool = Field(..., description="True only when ``reason`` is ``equivalent``.")
    reason: Reason = Field(..., description="Why: only ``equivalent`` is equivalent.")


class EquivalentResponse(BaseModel):
    results: list[EquivalentVerdict]


class ErrorResponse(BaseModel):
    detail: str
