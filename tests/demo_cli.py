"""How the demo tests run `gtpo demo` as a user does, and count what reached the reward server
(tests/demo/conftest.py starts that server; tests/ is on sys.path)."""

from __future__ import annotations

import re
import shutil
import sys
import urllib.request
from pathlib import Path


def gtpo_command() -> list[str]:
    script = Path(sys.executable).with_name("gtpo")
    if script.exists():
        return [str(script)]  # the console script from [project.scripts]
    found = shutil.which("gtpo")
    return [found] if found else [sys.executable, "-m", "gtpo.cli"]


def server_counter(url: str, name: str, route: str | None = None) -> float:
    """The sum of a Prometheus counter of the reward server's /metrics (one route, or all)."""
    text = urllib.request.urlopen(f"{url}/metrics", timeout=5).read().decode()
    total = 0.0
    for line in text.splitlines():
        match = re.match(rf"^{name}(\{{[^}}]*\}})?\s+(\S+)$", line)
        if match and (route is None or f'route="{route}"' in (match[1] or "")):
            total += float(match[2])
    return total


def reward_traffic(url: str) -> dict[str, float]:
    """Requests and items the demo sent: /get_reward while training, /v1/score evaluating."""
    requests = sum(
        server_counter(url, "gtpo_rs_requests_total", route)
        for route in ("/get_reward", "/v1/score")
    )
    return {"requests": requests, "items": server_counter(url, "gtpo_rs_items_total")}


def expected_traffic(config, methods: int = 2) -> dict[str, int]:
    """What one seed of `gtpo demo` sends for DemoConfig `config`. Training: one request per
    prompt group. Evaluation (before RL, then after each method): greedy in requests of 16
    prompts, sampled in requests of one prompt's k samples."""
    steps, per_step, group = config.steps, config.prompts_per_step, config.group_size
    n_eval, k = config.eval_prompts, config.eval_samples
    eval_requests = -(-n_eval // 16) + n_eval
    return {
        "requests": methods * steps * per_step + (1 + methods) * eval_requests,
        "items": methods * steps * per_step * group + (1 + methods) * n_eval * (1 + k),
    }
