"""Stand-in for `vllm.distributed.utils.StatelessProcessGroup`.

OpenRLHF's `stateless_init_process_group` (utils/distributed_util.py) builds one of these between
DeepSpeed rank 0 and every rollout engine, outside torch's default group, then wraps it in a
`PyNcclCommunicator` to broadcast the weights. Here it is a TCPStore on the given address, the
same rendezvous vLLM's class uses.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import torch.distributed as dist


@dataclass
class StatelessProcessGroup:
    store: dist.TCPStore
    rank: int
    world_size: int

    @classmethod
    def create(cls, host: str, port: int, rank: int, world_size: int) -> StatelessProcessGroup:
        store = dist.TCPStore(
            host, port, world_size, is_master=rank == 0, timeout=timedelta(seconds=300)
        )
        return cls(store, rank, world_size)
