"""Stand-in for vLLM's `PyNcclCommunicator`: the same broadcast over a private gloo group.

OpenRLHF's weight sync (`ActorPPOTrainer.broadcast_to_vllm`, with `--vllm.sync_backend gloo`)
calls `broadcast(tensor, src=0, stream=...)` on it in DeepSpeed rank 0, while every engine calls
it to receive. The bytes really move between the processes. What it cannot show: NCCL itself,
CUDA streams (the stream argument is ignored, so a missing synchronize would go unnoticed) and
device placement of the received tensors.
"""

from __future__ import annotations

from datetime import timedelta

import torch
import torch.distributed as dist


class PyNcclCommunicator:
    def __init__(self, group, device=None) -> None:
        store = dist.PrefixStore("gtpo-test-weight-sync", group.store)
        self.rank = group.rank
        self.world_size = group.world_size
        self._pg = dist.ProcessGroupGloo(
            store, group.rank, group.world_size, timedelta(seconds=300)
        )

    def broadcast(self, tensor: torch.Tensor, src: int, stream=None) -> None:
        opts = dist.BroadcastOptions()
        opts.rootRank = src
        opts.rootTensor = 0
        self._pg.broadcast([tensor], opts).wait()
