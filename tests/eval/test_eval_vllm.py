"""``gtpo eval --backend vllm`` on vLLM's CPU build itself (slow stage).

Two tiny models whose samples are known in law (tests/eval/conftest.py) in one call, as a user
types it: `gtpo eval` in its own process, a real reward server on 127.0.0.1. What it shows:

- vLLM's sampler draws each model's answers from that model's law, and the text the cache keeps
  is the completion up to its stop id with special tokens kept, as the hf backend writes it;
- the first model's engine is shut down (its engine-core process gone, the memory it held with
  it) before the second model's engine starts, and none is left when the call returns.
"""

from __future__ import annotations

import json
import math
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

FIXTURES = Path(__file__).parent / "fixtures"
N = 64  # samples per prompt: 128 draws per model
LAWS = {
    "gtpo": {"1/2": 0.45, "0.5": 0.25, "3": 0.3},
    "grpo": {"3": 0.55, "\\frac{1}{2}": 0.45},
}
TEXT = re.compile(r"<reasoning> think </reasoning> <answer> (\S+) </answer>")


class EngineCores:
    """Polls a process's descendants for vLLM engine-core processes (vLLM names them
    `VLLM::EngineCore`): every one seen, and the most alive at once."""

    def __init__(self, pid: int) -> None:
        self.root = psutil.Process(pid)
        self.seen: set[int] = set()
        self.most_at_once = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self._stop.is_set():
            alive = set()
            try:
                for child in self.root.children(recursive=True):
                    try:
                        if "EngineCore" in " ".join(child.cmdline()) + child.name():
                            alive.add(child.pid)
                    except psutil.Error:
                        pass
            except psutil.Error:
                return
            self.seen |= alive
            self.most_at_once = max(self.most_at_once, len(alive))
            time.sleep(0.05)

    def __enter__(self) -> EngineCores:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


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
        proc = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT)
        with EngineCores(proc.pid) as engines:
            try:
                returncode = proc.wait(timeout=420)
            finally:
                proc.kill()
    print(f"gtpo eval --backend vllm, two models: {time.perf_counter() - started:.0f} s")
    assert returncode == 0, log.read_text()[-4000:]
    # One engine per model, never two alive at once.
    assert len(engines.seen) == 2, (engines.seen, log.read_text()[-2000:])
    assert engines.most_at_once == 1
    assert not any(psutil.pid_exists(pid) for pid in engines.seen)

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
