"""A TRL reward function that scores completions with the reward server (`POST /get_reward`).

TRL calls a reward function with `prompts`, `completions` and every other dataset column as a
keyword argument; the label (the reference answer) comes from one of those columns. Each
completion is sent in OpenRLHF's request shape, `query` = prompt + completion, through the
project's reward client, so TRL runs are scored exactly like OpenRLHF and demo runs.

A conversational prompt (a list of messages) is sent as the text the model was prompted with:
the chat template rendered with the assistant turn opened, as OpenRLHF sends it. So the server
sees what the template put there, a prefilled `<reasoning>` or `<think>` included.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gtpo.config import GTPOConfig
from gtpo.reward_client import RewardClient, RewardServerError

# Keyword arguments TRL adds to every reward call that are not dataset columns.
TRL_CALL_ARGUMENTS = frozenset(
    {"completion_ids", "trainer_state", "log_extra", "log_metric", "environments"}
)


def _text(item: Any) -> str:
    """A completion as text: a string as is; a chat (list of messages, TRL's conversational
    completion) as the concatenation of its message contents."""
    if isinstance(item, str):
        return item
    return "".join(str(message.get("content", "")) for message in item)


class ChatRenderer:
    """Renders a conversational prompt exactly as TRL's generation renders it (the tokenizer's
    chat template, or the trainer's own, with the assistant turn opened), as text."""

    def __init__(
        self,
        tokenizer: Any,
        chat_template: str | None = None,
        template_kwargs: dict[str, Any] | None = None,
    ) -> None:
        self.tokenizer = tokenizer
        self.chat_template = chat_template
        self.template_kwargs = dict(template_kwargs or {})

    def __call__(self, prompt: Any) -> str:
        if isinstance(prompt, str):
            return prompt
        return self.tokenizer.apply_chat_template(
            prompt,
            chat_template=self.chat_template,
            add_generation_prompt=True,
            tokenize=False,
            **self.template_kwargs,
        )


class RewardServerReward:
    """`reward_funcs=[RewardServerReward("http://127.0.0.1:8000")]` for GTPOTrainer/GRPOTrainer.

    Args:
        url: the reward server's base URL (`python -m reward_server` or the compose service);
            several servers as a list or comma-separated: requests rotate over them and fail
            over from one to the next.
        label_column: the dataset column holding each prompt's reference answer.
        per_request: completions per HTTP request. 8 by default: with `concurrency` requests in
            flight that is 64 completions at once, and about 4× the throughput of one
            completion per request (OpenRLHF's shape) on the same server.
        concurrency: requests in flight at once (pooled keep-alive connections).
        timeout_s: one attempt's timeout.
        token: sent as `Authorization: Bearer` when the server sets GTPO_RS_API_TOKEN.
        reward_timeout: keep retrying an unreachable service (connection errors, timeouts, 5xx,
            408, 429) with backoff for this many seconds, then stop training with an error
            naming the URL (a missing reward is never scored as 0). Default: GTPOTrainer's
            `GTPOConfig.reward_timeout` (300 s).
        tokenizer: renders conversational prompts with its chat template (what the model was
            prompted with). GTPOTrainer passes its own; with TRL's GRPOTrainer pass the same
            tokenizer as `processing_class`, or conversational prompts are refused.
        response_format: the format the completions are written in, sent as `?format=`:
            `paper`, `think` (`<think>…</think>` then the final answer; a `<think>` the chat
            template prefills is in the rendered prompt) or `boxed`. None: the server's setting.

    Returns per completion the server's total reward (format 0..10 + accuracy 0/10); the mean
    format and accuracy rewards are logged as `rewards/format` and `rewards/accuracy`.
    """

    __name__ = "reward_server"  # TRL names the reward's metrics after it

    def __init__(
        self,
        url: str | Sequence[str],
        label_column: str = "label",
        per_request: int = 8,
        concurrency: int = 8,
        timeout_s: float = 60.0,
        token: str | None = None,
        reward_timeout: float | None = None,
        tokenizer: Any = None,
        response_format: str | None = None,
    ) -> None:
        if per_request < 1:
            raise ValueError(f"per_request must be >= 1, got {per_request}")
        self.reward_timeout = reward_timeout
        retry_for_s = GTPOConfig().reward_timeout if reward_timeout is None else reward_timeout
        self.client = RewardClient(
            url,
            token=token,
            concurrency=concurrency,
            timeout_s=timeout_s,
            retry_for_s=retry_for_s,
            hint="check that it is running and reachable, or raise reward_timeout "
            "(GTPOConfig(reward_timeout=...) with GTPOTrainer)",
            response_format=response_format,
        )
        self.label_column = label_column
        self.per_request = per_request
        # GTPOTrainer sets this: a failure is then held until every process has scored its
        # completions (`take_failure`), so that no process waits alone in TRL's reward gather.
        self.defer_failures = False
        self._failure: str | None = None
        self.render = ChatRenderer(tokenizer) if tokenizer is not None else None

    def use_renderer(self, render: ChatRenderer) -> None:
        """The trainer's own chat rendering, unless a tokenizer was passed here."""
        if self.render is None:
            self.render = render

    def _prompt_text(self, prompt: Any) -> str:
        if isinstance(prompt, str):
            return prompt
        if self.render is None:
            raise TypeError(
                "RewardServerReward got a conversational prompt but no tokenizer to render it "
                "with: pass RewardServerReward(url, tokenizer=...) with the trainer's "
                "processing_class (GTPOTrainer passes its own)"
            )
        return self.render(prompt)

    def use_timeout(self, reward_timeout: float) -> None:
        """The retry budget GTPOTrainer's config gives, unless one was passed here."""
        if self.reward_timeout is None:
            self.client.retry_for_s = reward_timeout

    def take_failure(self) -> str | None:
        """The message of the last call's failure, if any (and forget it)."""
        failure, self._failure = self._failure, None
        return failure

    def __call__(self, prompts: list[Any], completions: list[Any], **columns: Any) -> list[Any]:
        if self.label_column not in columns:
            available = sorted(set(columns) - TRL_CALL_ARGUMENTS)
            raise KeyError(
                f"the dataset has no {self.label_column!r} column for the reward server's labels; "
                f"pass RewardServerReward(url, label_column=...) naming one of {available}"
            )
        labels = [str(label) for label in columns[self.label_column]]
        try:
            rewards = self.client.score(
                [self._prompt_text(p) for p in prompts],
                [_text(c) for c in completions],
                labels,
                self.per_request,
            )
        except RewardServerError as exc:
            if not self.defer_failures:
                raise
            self._failure = str(exc)
            return [None] * len(prompts)  # never read: GTPOTrainer raises on every process
        log_metric = columns.get("log_metric")
        if log_metric is not None and rewards.total:
            log_metric("rewards/format", sum(rewards.format) / len(rewards.format))
            log_metric("rewards/accuracy", sum(rewards.accuracy) / len(rewards.accuracy))
        return rewards.total

    def close(self) -> None:
        self.client.close()
