"""Stand-in for `flash_attn.utils.distributed.all_gather` (imported by OpenRLHF's ring attention).

Ring attention needs several GPUs; CPU tests never form a ring group, so calling this is an error.
"""


def all_gather(tensor, group):
    raise NotImplementedError(
        "flash_attn stand-in: ring attention needs the real flash-attn on GPU"
    )
