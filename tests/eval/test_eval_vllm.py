"""``gtpo eval --backend vllm`` on vLLM's CPU build itself (slow stage).

Two tiny models whose samples are known in law (tests/eval/conftest.py) in one call, as a user
types it: `gtpo eval` in its own process, a real reward server on 127.0.0.1. What it shows:

- vLLM's sampler draws each model's answers from that model's law, and the text the cache keeps
  is the completion up to its stop id with special tokens kept, as the hf backend writes it;
- on a CPU each engine runs in gtpo eval's own process (gtpo.eval.generate.IN_PROCESS_ON_CPU:
  no engine-core process is started), and the memory the first model's engine held (its KV
  cache, 2 GiB here) is given back before the second model's engine starts.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
pytest.importorskip("vllm")
psutil = pytest.importorskip("psutil")

from gtpo.eval.generate import CPU_KV_CACHE_GIB, IN_PROCESS_ON_CPU  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures"
N = 64  # samples per prompt: 128 draws per model
KV_CACHE_GIB = CPU_KV_CACHE_GIB  # gtpo eval's KV cache on a CPU (no VLLM_CPU_KVCACHE_SPACE set)
LAWS = {
    "gtpo": {"1/2": 0.45, "0.5": 0.25, "3": 0.3},
    "grpo": {"3": 0.55, "\\frac{1}{2}": 0.45},
}
TEXT = re.compile(r"<reasoning> think </reasoning> <answer> (\S+) </answer>")


class ProcessTree:
    """Polls a process and its descendants every 50 ms: the resident memory of all of them
    together (GiB), in order, and every vLLM engine-core process seen (vLLM names them
    `VLLM::EngineCore`)."""

    def __init__(self, pid: int) -> None:
        self.root = psutil.Process(pid)
        self.rss_gib: list[float] = []
        self.engine_cores: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self._stop.is_set():
            try:
                processes = [self.root, *self.root.children(recursive=True)]
            except psutil.Error:
                return
            rss = 0
            for process in processes:
                try:
                    rss += process.memory_info().rss
                    if "EngineCore" in " ".join(process.cmdline()) + process.name():
                        self.engine_cores.add(process.pid)
                except psutil.Error:
                    pass
            self.rss_gib.append(rss / 2**30)
            time.sleep(0.05)

    def __enter__(self) -> ProcessTree:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def high_low_high(samples: list[float], high: float, low: float) -> bool:
    """Whether `samples` reach `high`, then fall to `low` or below, then reach `high` again."""
    phase = 0
    for value in samples:
        if phase in (0, 2) and value >= high:
            phase += 1
        elif phase == 1 and value <= low:
            phase = 2
    return phase == 3


def test_two_models_through_vllm_one_engine_at_a_time(
    tmp_path: Path, markov_model, reward_url: str
) -> None:
    data = tmp_path / "aime.jsonl"
    gtpo = [sys.executable, "-m", "gtpo.cli"]
    subprocess.run(
        [*gtpo, "data", "aime24", "--input", str(FIXTURES / "questions.jsonl"), "--out", str(data)],
        check=True,
    )
    models = {name: markov_model(tmp_path / name, law) for name, law in LAWS.items()}
    out = tmp_path / "out"
    argv = [*gtpo, "eval", "--backend", "vllm", "--enforce-eager", "--data", str(data),
            "--k", "1,8", "--n", str(N), "--reward-url", reward_url, "--out", str(out),
            "--max-new-tokens", "12"]  # fmt: skip
    for name, path in models.items():
        argv += ["--model", str(path), "--name", name.upper()]
    started = time.perf_counter()
    log = tmp_path / "eval.log"
    with log.open("w") as sink:
        # gtpo eval's own defaults: its KV cache size, its engine in its process.
        unset = ("VLLM_CPU_KVCACHE_SPACE", IN_PROCESS_ON_CPU[0])
        env = {k: v for k, v in os.environ.items() if k not in unset}
        proc = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, env=env)
        with ProcessTree(proc.pid) as tree:
            try:
                returncode = proc.wait(timeout=420)
            finally:
                proc.kill()
    print(f"gtpo eval --backend vllm, two models: {time.perf_counter() - started:.0f} s")
    assert returncode == 0, log.read_text()[-4000:]
    # Both engines ran in gtpo eval's process, one at a time: the first one's KV cache was
    # given back (the memory fell by most of it) before the second one's was taken.
    assert not tree.engine_cores, tree.engine_cores
    peak = max(tree.rss_gib)
    assert high_low_high(tree.rss_gib, peak - KV_CACHE_GIB / 4, peak - KV_CACHE_GIB * 3 / 4), [
        round(x, 2) for x in tree.rss_gib[::10]
    ]

    results = json.loads((out / "results.json").read_text())
    assert [m["name"] for m in results["models"]] == ["GTPO", "GRPO"]
    for name, model in zip(LAWS, results["models"], strict=True):
        assert model["backend"] == "vllm" and (model["prompts"], model["n"]) == (2, N)
        assert model["format_rate"] == 1.0
        (cache,) = [p for p in (out / "cache").glob(f"{name}-*.jsonl")]
        texts = [json.loads(line)["text"] for line in cache.read_text().splitlines()]
        assert len(texts) == 2 * N
        answers = []
        for text in texts:
            match = TEXT.fullmatch(text.strip())
            assert match, f"{name}: {text!r} is not the model's one layout"
            answers.append(match.group(1))
        # Each answer's frequency within 4.5 standard errors of the model's law.
        counts = Counter(answers)
        assert set(counts) <= set(LAWS[name]), counts
        for answer, p in LAWS[name].items():
            bound = 4.5 * math.sqrt(p * (1 - p) / len(answers))
            assert abs(counts[answer] / len(answers) - p) <= bound, (name, counts)
