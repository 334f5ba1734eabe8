"""GTPOTrainer in two processes on CPU, for test_trl_processes.py: run by `torchrun
--nproc_per_node 2` (TRL's accelerate then runs torch.distributed over gloo on 127.0.0.1), as a
user runs TRL on two GPUs.

    torchrun --nproc_per_node 2 tests/trl/two_processes.py OUT REWARD_URL [DEAD_URL]

Each process writes OUT/rank<r>.pt: every generated batch (its rows, TRL's advantages and ⟨H⟩
under the policy that sampled it, train or eval) and every loss micro-batch as the loss saw it.
The batch sizes make groups straddle the two processes, in training (6 rows per process, G = 4)
and in eval (6 rows per process). With DEAD_URL, process 1 scores against a server nobody
listens on (reward_timeout 3 s): both processes must stop with its error, which each writes to
OUT/rank<r>.error.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch
from datasets import Dataset
from transformers import PreTrainedTokenizerFast
from trl_harness import capture, length_reward, make_args, make_trainer

from gtpo import GTPOConfig
from gtpo.demo.task import corpus, make_split
from gtpo.demo.tokenizer import EOS, PAD, build_tokenizer
from gtpo.reward_client import RewardServerError
from gtpo.trl import RewardServerReward


def main(out: Path, url: str, dead_url: str | None) -> None:
    rank = int(os.environ["RANK"])  # torchrun's; TRL's accelerator is not built yet
    split = make_split(48, 6)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=build_tokenizer(corpus(split.train)), pad_token=PAD, eos_token=EOS
    )
    rows = [{"prompt": p.prompt, "label": str(p.answer)} for p in split.train]
    held_out = [{"prompt": p.prompt, "label": str(p.answer)} for p in split.heldout]
    reward = (
        RewardServerReward(dead_url, reward_timeout=3)
        if dead_url and rank == 1
        else RewardServerReward(url)
    )
    args = make_args(
        out, use_cpu=True, per_device_train_batch_size=6, per_device_eval_batch_size=6,
        max_steps=2, eval_strategy="steps", eval_steps=1, ddp_timeout=600,
    )  # fmt: skip
    trainer = make_trainer(
        (tokenizer, Dataset.from_list(rows)), args, GTPOConfig(h_ini_prompts=6),
        reward_funcs=[reward, length_reward], eval_dataset=Dataset.from_list(held_out),
    )  # fmt: skip
    generations, losses = capture(trainer, record_mode=True)
    try:
        trainer.train()
    except RewardServerError as exc:
        (out / f"rank{rank}.error").write_text(str(exc))
        raise SystemExit(1) from None
    finally:
        reward.close()
    keep = ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask", "advantages")
    torch.save(
        {
            "h_ini": trainer.h_ini,
            "generations": [
                ({k: batch[k] for k in keep}, raw, entropy, mode)
                for (batch, raw, entropy), mode in generations
            ],
            "losses": [({k: inputs[k] for k in keep}, mode) for inputs, mode in losses],
        },
        out / f"rank{rank}.pt",
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
