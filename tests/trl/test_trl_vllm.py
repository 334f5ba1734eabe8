"""TRL with `use_vllm=True, vllm_mode="colocate"` on vLLM's CPU build itself (slow stage).

GTPOTrainer on the real instruct model generates every completion with the colocated vLLM
engine (its sampler, its log-probs for TRL's token-level importance-sampling correction) and
syncs its weights to that engine before each step's generation. Only the weight load is
CPU-specific (tests/standins/vllm_cpu_transport.py: TRL's one `load_weights` call per weight
becomes one layerwise reload, because vLLM's CPU backend repacks its linear weights).

Server mode (`vllm_mode="server"`) is GPU-only: TRL's client sends the weights to the
`trl vllm-serve` process over NCCL (PyNcclCommunicator), which has no CPU backend.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

pytest.importorskip("trl")
pytest.importorskip("vllm")

import memory_gate  # noqa: E402
from real_model_task import prefilled_model  # noqa: E402

from gtpo.local_reward_server import LocalRewardServer  # noqa: E402

SCRIPT = Path(__file__).with_name("vllm_colocate_run.py")
STEPS = 2


def test_gtpo_trains_with_the_colocated_engine_and_syncs_it_every_step(real_model, tmp_path):
    model_dir = prefilled_model(real_model.path, tmp_path / "model")
    out = tmp_path / "out"
    out.mkdir()
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind"}
    # 7.8 GiB at its peak (measured): it waits for the slow stage's other training runs.
    with (
        memory_gate.admitted(8.0, "TRL with the colocated engine"),
        LocalRewardServer(tmp_path / "reward_server.log") as server,
    ):
        server.wait()
        run = subprocess.run(
            [sys.executable, str(SCRIPT), str(model_dir), server.url, str(out), str(STEPS)],
            env=env, capture_output=True, text=True, timeout=840,
        )  # fmt: skip
    assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
    result = json.loads((out / "result.json").read_text())
    assert result["steps"] == STEPS
    # TRL syncs before each step's generation: after each, the engine holds exactly the
    # trainer's weights in its own dtype (vLLM runs this float32 checkpoint in bf16).
    assert result["engine_dtype"] == "torch.bfloat16"
    assert result["differences"] == [0.0] * STEPS
    assert all(math.isfinite(loss) for loss in result["losses"]) and result["losses"]
    assert result["moved"] > result["parameters"] // 2
