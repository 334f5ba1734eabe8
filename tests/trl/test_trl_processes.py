"""GTPOTrainer across processes and through a reward outage (slow stage).

- Two processes on CPU, `torchrun --nproc_per_node 2` (TRL's accelerate over gloo on
  127.0.0.1, tests/trl/two_processes.py), with training and eval batches whose groups
  straddle the processes: every loss row's advantages are λ·δ·A from the paper's loops on the
  whole group.
- One process's reward calls failing (a dead server, 3 s budget) while the other's succeed:
  both processes stop with the error, instead of one waiting in TRL's reward gather.
- A 10 s reward-server outage in the middle of a single-process run: ridden out, and every
  completion rewarded exactly as the server scores it.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

trl = pytest.importorskip("trl")
torch = pytest.importorskip("torch")

from transformers import TrainerCallback  # noqa: E402
from trl_harness import (  # noqa: E402
    check_loss_advantages,
    expected_advantages,
    make_args,
    make_trainer,
)

from gtpo import GTPOConfig  # noqa: E402
from gtpo.local_reward_server import LocalRewardServer, free_port  # noqa: E402
from gtpo.reward_client import RewardClient  # noqa: E402
from gtpo.trl import RewardServerReward  # noqa: E402

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def reward_server(tmp_path_factory):
    with LocalRewardServer(tmp_path_factory.mktemp("rs") / "rs.log") as server:
        server.wait()
        yield server


def launch(out: Path, *script_args: str, timeout: float = 540) -> subprocess.CompletedProcess:
    """`torchrun --nproc_per_node 2 two_processes.py OUT ...`, on loopback."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            [str(HERE), str(HERE.parent), os.environ.get("PYTHONPATH", "")]
        ),
        "OMP_NUM_THREADS": "1",
        "GLOO_SOCKET_IFNAME": "lo",
        "TOKENIZERS_PARALLELISM": "false",
    }
    command = [
        sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
        "--master_addr", "127.0.0.1", "--master_port", str(free_port()),
        str(HERE / "two_processes.py"), str(out), *script_args,
    ]  # fmt: skip
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)


def global_batches(records: list[dict], mode: str) -> list[tuple[dict, torch.Tensor, torch.Tensor]]:
    """The generation batches of both processes joined in process order (TRL's global order, in
    which groups are consecutive), each padded to the wider process."""
    per_rank = [[(g[0], g[1], g[2]) for g in r["generations"] if g[3] == mode] for r in records]
    joined = []
    for parts in zip(*per_rank, strict=True):
        batch = {}
        for key, side, value in (
            ("prompt_ids", "left", 0), ("prompt_mask", "left", 0),
            ("completion_ids", "right", 0), ("completion_mask", "right", 0),
        ):  # fmt: skip
            tensors = [p[0][key] for p in parts]
            width = max(t.shape[1] for t in tensors)
            padded = []
            for t in tensors:
                fill = torch.full((t.shape[0], width - t.shape[1]), value, dtype=t.dtype)
                padded.append(torch.cat([fill, t] if side == "left" else [t, fill], dim=1))
            batch[key] = torch.cat(padded)
        joined.append((batch, torch.cat([p[1] for p in parts]), torch.cat([p[2] for p in parts])))
    return joined


def test_two_processes_group_straddling_batches_like_the_paper(reward_server, tmp_path):
    run = launch(tmp_path, reward_server.url)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    records = [torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in (0, 1)]
    assert records[0]["h_ini"] == records[1]["h_ini"]  # summed over both processes
    for mode in ("train", "eval"):
        batches = global_batches(records, mode)
        # 2 training steps; 2 evals of 6 held-out prompts × G = 24 rows, 12 per global batch.
        assert len(batches) == {"train": 2, "eval": 4}[mode]
        # Groups straddle the processes: 6 rows each, G = 4, so group 1 is half on each.
        assert all(len(raw) == 12 for _, raw, _ in batches)
        conflicts = 0
        for rank in (0, 1):
            losses = [inputs for inputs, m in records[rank]["losses"] if m == mode]
            assert len(losses) == len(batches)  # one loss micro-batch per generated batch
            for batch, inputs in zip(batches, losses, strict=True):
                expected, seen = expected_advantages([batch], records[0]["h_ini"])
                assert check_loss_advantages([inputs], expected) == 6
                conflicts += seen["conflicts"]
        assert conflicts > 0, mode


def test_a_reward_failure_on_one_process_stops_both(reward_server, tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}"  # closed again: nobody listens
    started = time.monotonic()
    run = launch(tmp_path, reward_server.url, dead, timeout=300)
    elapsed = time.monotonic() - started
    assert run.returncode != 0
    for rank in (0, 1):  # the failing process and the one whose own rewards were fine
        message = (tmp_path / f"rank{rank}.error").read_text()
        assert f"reward server {dead} did not answer" in message
    assert elapsed < 240, elapsed  # not a wait for the collective timeout (ddp_timeout 600 s)


def test_a_10s_reward_outage_is_ridden_out(task, tmp_path, caplog):
    server = LocalRewardServer(tmp_path / "rs.log").start()
    server.wait()
    outage: dict[str, float] = {}
    threads: list[threading.Thread] = []

    class Outage(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step != 1:
                return
            server.stop()
            outage["start"] = time.monotonic()

            def restart() -> None:
                time.sleep(10)
                server.start()
                server.wait()
                outage["end"] = time.monotonic()

            threads.append(threading.Thread(target=restart))
            threads[-1].start()

    reward = RewardServerReward(server.url, reward_timeout=120)
    scored = []
    score = reward.client.score

    def recording_score(prompts, responses, labels, per_request):
        rewards = score(prompts, responses, labels, per_request)
        scored.append((prompts, responses, labels, rewards.total))
        return rewards

    reward.client.score = recording_score
    trainer = make_trainer(task, make_args(tmp_path, max_steps=3), GTPOConfig(h_ini=0.5), [reward])
    trainer.add_callback(Outage())
    try:
        with caplog.at_level(logging.WARNING, logger="gtpo"):
            trainer.train()
        for thread in threads:
            thread.join()
        assert trainer.state.global_step == 3
        assert outage["end"] - outage["start"] >= 10
        assert "unreachable" in caplog.text and "answers again after" in caplog.text
        assert len(scored) == 3 and all(len(s[3]) == 8 for s in scored)
        with RewardClient(server.url) as client:
            for prompts, completions, labels, rewards in scored:
                assert rewards == client.score(prompts, completions, labels, 1).total
    finally:
        reward.close()
        server.stop()
