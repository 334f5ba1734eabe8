"""The vLLM rollout actors' reward call: OpenRLHF builds GTPO's executor in each rollout actor
(`seam.building`, `compat.REWARD_EXECUTOR`), which keeps one pooled reward client, rotates
requests over the reward servers, retries for up to --gtpo.reward_timeout seconds and stops the
run if the service stays down (`rewards.py`).
"""

from __future__ import annotations

import functools
from typing import Any

from gtpo.openrlhf import compat, seam
from gtpo.openrlhf.rewards import rollout_reward_client
from gtpo.reward_client import RewardServerError


class RetryingRewardExecutor(seam.RewardExecutor):
    """OpenRLHF's single-turn executor whose HTTP reward call shares one pooled client over
    every reward server and outlasts a server restart (`rewards.py`).

    OpenRLHF's `execute` swallows any error of the reward call and returns the sample with
    reward None; here the call retries for up to `reward_timeout` seconds, and a sample that
    still has no reward stops the run with RewardServerError.
    """

    def __init__(
        self, remote_rm_url: Any, reward_timeout: float, reward_token: str | None = None
    ) -> None:
        super().__init__(remote_rm_url)
        self.last_failure: str | None = None
        self.client = None
        if self.reward_endpoints and self.reward_func is None:
            self.client = rollout_reward_client(self.reward_endpoints, reward_timeout, reward_token)

    async def fetch_rewards_via_http(self, queries_list, prompts_list, labels_list):
        payload = {"query": queries_list, "prompts": prompts_list, "labels": labels_list}
        try:
            return [await self.client.get_reward(payload)]
        except RewardServerError as exc:
            self.last_failure = str(exc)
            raise

    async def execute(self, *args: Any, **kwargs: Any) -> dict:
        output = await super().execute(*args, **kwargs)
        if self.client is not None and output.get("reward") is None:
            raise RewardServerError(
                self.last_failure or f"no reward from {', '.join(self.reward_endpoints)}"
            )
        return output


class GTPORolloutActor(seam.RolloutRayActor):
    """OpenRLHF's vLLM rollout actor with the retrying reward executor."""

    async def __init__(
        self,
        *args: Any,
        reward_timeout: float = 300.0,
        reward_token: str | None = None,
        **kwargs: Any,
    ) -> None:
        executor = functools.partial(
            RetryingRewardExecutor, reward_timeout=reward_timeout, reward_token=reward_token
        )
        with seam.building((compat.REWARD_EXECUTOR, executor)):
            await super().__init__(*args, **kwargs)


# What create_vllm_engines builds in place of OpenRLHF's RolloutRayActor (compat.ROLLOUT_ACTOR),
# given the launcher's --gtpo.reward_timeout and token (seam.WithArguments).
GTPORolloutRemote = seam.remote(GTPORolloutActor)
