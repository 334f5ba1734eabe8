"""Client of the reward server: ``POST /v1/score`` in concurrent batches with retries, and
answer equivalence as the server judges it (``POST /v1/equivalent``).

Evaluation is scored by the same service that produced the training rewards, so "correct" means
the same thing in both, and maj@k groups a prompt's answers with the same checker: the same
answer policy, cost guard and deadline.

Standard library HTTP (urllib): the client adds no dependency.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tqdm.auto import tqdm

log = logging.getLogger(__name__)

# Reasons after which a sample does not vote in maj@k: it has no answer the server would judge
# (no block, an empty one, or the format gate refused it — the server then never compares it).
NON_VOTING = frozenset({"no_answer_block", "empty_answer", "format_not_met"})


class RewardServerError(RuntimeError):
    """The reward server is unreachable or refused a request."""


class RewardClient:
    """Scores through ``/v1/score``; retries connection errors, timeouts and 5xx responses.

    ``batch_size`` items go in one request and ``concurrency`` requests run at once.
    """

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        timeout_s: float = 120.0,
        retries: int = 4,
        batch_size: int = 64,
        concurrency: int = 8,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"reward URL must start with http:// or https://, got {url!r}")
        if batch_size < 1 or concurrency < 1 or retries < 0:
            raise ValueError("batch_size and concurrency must be >= 1 and retries >= 0")
        self.url = url.rstrip("/")
        self.token = token
        self.timeout_s = timeout_s
        self.retries = retries
        self.batch_size = batch_size
        self.concurrency = concurrency

    def _request(self, path: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        data = None if payload is None else json.dumps(payload).encode()
        request = urllib.request.Request(
            self.url + path, data=data, headers=headers, method="GET" if data is None else "POST"
        )
        for attempt in range(self.retries + 1):
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                    return json.loads(response.read())
            except urllib.error.HTTPError as err:
                detail = err.read().decode(errors="replace")[:500]
                if err.code < 500 and err.code not in (408, 429):
                    hint = {
                        401: " (set --reward-token or GTPO_RS_API_TOKEN)",
                        413: " (lower --score-batch-size)",
                    }.get(err.code, "")
                    raise RewardServerError(
                        f"{self.url}{path} answered {err.code}: {detail}{hint}"
                    ) from None
                problem = f"HTTP {err.code}: {detail}"
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as err:
                problem = str(getattr(err, "reason", err))
            if attempt < self.retries:
                delay = 0.5 * 2**attempt
                log.warning("%s%s failed (%s); retry in %.1f s", self.url, path, problem, delay)
                time.sleep(delay)
        raise RewardServerError(
            f"{self.url}{path} failed after {self.retries + 1} attempts ({problem}); is the "
            "reward server running? Start it with: gtpo-reward-server --port PORT"
        )

    def wait_ready(self, timeout_s: float = 120.0) -> None:
        """Block until ``GET /readyz`` says ready (the verification workers are warm)."""
        deadline = time.monotonic() + timeout_s
        last = ""
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(self.url + "/readyz", timeout=5) as response:
                    if response.status == 200:
                        return
            except urllib.error.HTTPError as err:
                last = f"HTTP {err.code}"
            except (urllib.error.URLError, OSError) as err:
                last = str(getattr(err, "reason", err))
            time.sleep(0.5)
        raise RewardServerError(
            f"reward server at {self.url} not ready after {timeout_s:.0f} s ({last}); start it "
            "with: gtpo-reward-server --port PORT"
        )

    def score_batch(
        self, queries: Sequence[str], prompts: Sequence[str] | None, labels: Sequence[Any]
    ) -> list[dict[str, Any]]:
        """One ``/v1/score`` request; returns the per-item verdicts (see reward_server.schemas)."""
        payload: dict[str, Any] = {"query": list(queries), "labels": list(labels)}
        if prompts is not None:
            payload["prompts"] = list(prompts)
        return self._results("/v1/score", payload, len(queries))

    def _results(self, path: str, payload: dict[str, Any], n: int) -> list[dict[str, Any]]:
        """The ``results`` list of a POST to ``path``, checked to hold one entry per item."""
        results = self._request(path, payload).get("results")
        if not isinstance(results, list) or len(results) != n:
            raise RewardServerError(
                f"{self.url}{path} returned {len(results or [])} results for {n} items: is the "
                "URL a GTPO reward server (with /v1/score and /v1/equivalent)?"
            )
        return results

    def score(
        self,
        queries: Sequence[str],
        prompts: Sequence[str] | None,
        labels: Sequence[Any],
        *,
        desc: str = "score",
    ) -> list[dict[str, Any]]:
        """Score every item, ``batch_size`` per request, ``concurrency`` requests at a time;
        results come back in input order."""
        starts = range(0, len(queries), self.batch_size)

        def one(start: int) -> list[dict[str, Any]]:
            end = start + self.batch_size
            return self.score_batch(
                queries[start:end], None if prompts is None else prompts[start:end],
                labels[start:end],
            )  # fmt: skip

        out: list[dict[str, Any]] = []
        with (
            ThreadPoolExecutor(self.concurrency) as pool,
            tqdm(total=len(queries), desc=desc, unit="sample") as bar,
        ):
            for batch in pool.map(one, starts):  # map keeps the input order
                out.extend(batch)
                bar.update(len(batch))
        return out

    def equivalent(self, pairs: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
        """One ``/v1/equivalent`` request: the server's verdict (``equivalent``, ``reason``) on
        each (answer, reference) pair, in order."""
        payload = {"pairs": [{"answer": a, "reference": r} for a, r in pairs]}
        return self._results("/v1/equivalent", payload, len(pairs))

    def find_match(self, answer: str, representatives: Sequence[str]) -> int | None:
        """Index of the first representative the server holds ``answer`` equivalent to."""
        for start in range(0, len(representatives), self.batch_size):
            reps = representatives[start : start + self.batch_size]
            results = self.equivalent([(answer, rep) for rep in reps])
            for offset, item in enumerate(results):
                if item.get("equivalent") is True:
                    return start + offset
        return None

    def group(
        self, answers_per_prompt: Sequence[Sequence[str | None]], *, desc: str = "group answers"
    ) -> list[list[int | None]]:
        """Equivalence classes of each prompt's answers (see ``gtpo.eval.metrics.group_answers``),
        prompts grouped concurrently."""
        from gtpo.eval.metrics import group_answers

        def one(answers: Sequence[str | None]) -> list[int | None]:
            return group_answers(answers, find_match=self.find_match)

        with (
            ThreadPoolExecutor(self.concurrency) as pool,
            tqdm(total=len(answers_per_prompt), desc=desc, unit="prompt") as bar,
        ):
            out = []
            for labels in pool.map(one, answers_per_prompt):
                out.append(labels)
                bar.update()
        return out
