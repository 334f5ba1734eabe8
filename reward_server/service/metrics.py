"""Prometheus metrics of one app instance (own registry, so several apps can live in a test).

With several uvicorn workers (``--workers N``), the console script sets
``PROMETHEUS_MULTIPROC_DIR``: every worker then writes its samples to files there and
`exposition` sums all workers, so /metrics describes the whole server.
"""

from __future__ import annotations

import os

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)

from reward_server.checker.response import Start
from reward_server.service.pool import CAUSE_CPU, CAUSE_QUEUE, CAUSE_WALL


class Metrics:
    """Every metric the service exports under ``/metrics`` (names prefixed ``gtpo_rs_``)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "gtpo_rs_requests", "HTTP requests by route and status", ["route", "status"], registry=r
        )
        self.latency = Histogram(
            "gtpo_rs_request_seconds",
            "Request latency by route",
            ["route"],
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=r,
        )
        self.items = Counter("gtpo_rs_items", "Scored completions", registry=r)
        self.verdicts = Counter(
            "gtpo_rs_verdicts", "Accuracy verdicts by reason", ["reason"], registry=r
        )
        self.responses = Counter(
            "gtpo_rs_responses",
            "Where each scored completion's response was found to start: prompt, chat_header, "
            "whole_query, or not_found (a prompt given and not in its query: scored 0)",
            ["start"],
            registry=r,
        )
        for start in Start:
            self.responses.labels(start.value)  # exported at 0 from the start
        self.format_scores = Counter(
            "gtpo_rs_format", "Format verdicts by reason", ["reason"], registry=r
        )
        self.timeouts = Counter(
            "gtpo_rs_verify_timeouts",
            "Symbolic checks timed out, by cause: cpu (their CPU budget), wall (the wall-clock "
            "safety net while running), queue (the net while waiting for a worker)",
            ["cause"],
            registry=r,
        )
        for cause in (CAUSE_CPU, CAUSE_WALL, CAUSE_QUEUE):
            self.timeouts.labels(cause)  # exported at 0 from the start
        self.not_computed = Counter(
            "gtpo_rs_not_computed",
            "Verdicts that could not be computed in time (wall_timeout, queue_timeout, "
            "worker_error): their request was answered 503 with Retry-After, never scored",
            registry=r,
        )
        self.item_errors = Counter(
            "gtpo_rs_item_errors",
            "Items scored 0 because reading or checking them raised, by stage (response, "
            "answer, reference, check) and exception type",
            ["stage", "error"],
            registry=r,
        )
        self.dropped = Counter(
            "gtpo_rs_connections_dropped",
            "Requests and connections ended before an answer, by cause: client_gone (requests "
            "whose client went away first, pipelined ones included), header_timeout, "
            "body_timeout, send_timeout, unsent_limit, headers_too_large, connection_cap",
            ["cause"],
            registry=r,
        )
        self.cache = Counter(
            "gtpo_rs_cache_lookups",
            "Verdict cache lookups (hit includes in-flight sharing)",
            ["result"],
            registry=r,
        )
        self.restarts = Counter(
            "gtpo_rs_worker_restarts",
            "Verification workers replaced, by reason",
            ["reason"],
            registry=r,
        )
        check_buckets = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)
        self.verify_busy = Histogram(
            "gtpo_rs_verify_seconds",
            "Time of a symbolic check in a worker",
            buckets=check_buckets,
            registry=r,
        )
        self.verify_cpu = Histogram(
            "gtpo_rs_verify_cpu_seconds",
            "CPU time of a symbolic check in a worker (what its budget counts)",
            buckets=check_buckets,
            registry=r,
        )
        self.verify_queued = Histogram(
            "gtpo_rs_verify_queue_seconds",
            "Wait for a free verification worker",
            buckets=check_buckets,
            registry=r,
        )
        self.reruns = Counter(
            "gtpo_rs_verify_reruns",
            "Symbolic checks run again because their worker died under them",
            registry=r,
        )
        self.workers_alive = Gauge(
            "gtpo_rs_verify_workers",
            "Live verification worker processes (all server processes together)",
            registry=r,
            multiprocess_mode="livesum",
        )
        self.workers_ready = Gauge(
            "gtpo_rs_workers_ready",
            "1 when the verification pool is warmed up (every live server process)",
            registry=r,
            multiprocess_mode="livemin",
        )

    def on_cache(self, hit: bool) -> None:
        self.cache.labels("hit" if hit else "miss").inc()

    def on_timing(self, queued: float, busy: float, cpu: float) -> None:
        self.verify_queued.observe(queued)
        self.verify_busy.observe(busy)
        self.verify_cpu.observe(cpu)

    def on_size(self, live: int) -> None:
        self.workers_alive.set(live)

    def on_rerun(self) -> None:
        self.reruns.inc()

    def on_restart(self, reason: str) -> None:
        self.restarts.labels(reason).inc()

    def on_timeout(self, cause: str) -> None:
        self.timeouts.labels(cause).inc()

    def on_dropped(self, cause: str, n: int) -> None:
        self.dropped.labels(cause).inc(n)

    def on_item_error(self, stage: str, error: str) -> None:
        self.item_errors.labels(stage, error).inc()


def exposition(metrics: Metrics) -> tuple[bytes, str]:
    """The /metrics body and content type: this process's registry, or all workers' samples."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(metrics.registry), CONTENT_TYPE_LATEST


def process_exited() -> None:
    """Drop this process's live gauges from the shared samples (multiprocess mode only)."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.mark_process_dead(os.getpid())
