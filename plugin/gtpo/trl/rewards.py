"""A TRL reward function that scores completions with the reward server (`POST /get_reward`).

TRL calls a reward function with `prompts`, `completions` and every other dataset column as a
keyword argument; the label (the reference answer) comes from one of those columns. Each
completion is sent in OpenRLHF's request shape, `query` = prompt + completion, through the
project's reward client, so TRL runs are scored exactly like OpenRLHF and demo runs.
"""

from __future__ import annotations

from typing import Any

from gtpo.reward_client import RewardClient


def _text(item: Any) -> str:
    """A prompt or completion as text: a string as is; a chat (list of messages) as the
    concatenation of its message contents, which is what the server strips and reads."""
    if isinstance(item, str):
        return item
    return "".join(str(message.get("content", "")) for message in item)


class RewardServerReward:
    """`reward_funcs=[RewardServerReward("http://127.0.0.1:8000")]` for GTPOTrainer/GRPOTrainer.

    Args:
        url: the reward server's base URL (`python -m reward_server` or the compose service).
        label_column: the dataset column holding each prompt's reference answer.
        per_request: completions per HTTP request (1, as OpenRLHF sends them).
        concurrency: requests in flight at once.
        token: sent as `Authorization: Bearer` when the server sets GTPO_RS_API_TOKEN.
        timeout_s: per-request timeout (connection errors, 5xx, 408 and 429 are retried first);
            an unreachable server then stops training with an error
            naming the URL (a missing reward is never scored as 0).

    Returns per completion the server's total reward (format 0..10 + accuracy 0/10); the mean
    format and accuracy rewards are logged as `rewards/format` and `rewards/accuracy`.
    """

    __name__ = "reward_server"  # TRL names the reward's metrics after it

    def __init__(
        self,
        url: str,
        label_column: str = "label",
        per_request: int = 1,
        concurrency: int = 8,
        timeout_s: float = 60.0,
        token: str | None = None,
    ) -> None:
        if per_request < 1:
            raise ValueError(f"per_request must be >= 1, got {per_request}")
        # The project's one client: any host, bearer token, retries with backoff.
        self.client = RewardClient(url, token=token, concurrency=concurrency, timeout_s=timeout_s)
        self.label_column = label_column
        self.per_request = per_request

    def __call__(self, prompts: list[Any], completions: list[Any], **columns: Any) -> list[float]:
        if self.label_column not in columns:
            available = sorted(
                k for k in columns if k not in ("completion_ids", "trainer_state", "log_extra")
            )
            raise KeyError(
                f"the dataset has no {self.label_column!r} column for the reward server's labels; "
                f"pass RewardServerReward(url, label_column=...) naming one of {available}"
            )
        labels = [str(label) for label in columns[self.label_column]]
        rewards = self.client.score(
            [_text(p) for p in prompts], [_text(c) for c in completions], labels, self.per_request
        )
        log_metric = columns.get("log_metric")
        if log_metric is not None and rewards.total:
            log_metric("rewards/format", sum(rewards.format) / len(rewards.format))
            log_metric("rewards/accuracy", sum(rewards.accuracy) / len(rewards.accuracy))
        return rewards.total

    def close(self) -> None:
        self.client.close()
