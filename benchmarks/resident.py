"""Peak resident memory of a stretch of code in this process (Linux), for the benchmarks that
measure memory side by side: reset the peak, run, read how far it rose."""

from __future__ import annotations

import os

# glibc returns a freed block of 128 KiB or more to the system at once (its default raises that
# threshold as blocks are freed, and then keeps them): the peak resident memory is then what
# was alive at once, not what the allocator kept. Each measured arm runs in a process of its
# own with this environment.
ARM_ENV = {**os.environ, "MALLOC_MMAP_THRESHOLD_": str(128 * 1024)}


def status_kib(field: str) -> int:
    """A /proc/self/status field in KiB (VmRSS, VmHWM)."""
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith(field + ":"))


def reset_peak() -> int:
    """Start the peak (VmHWM) again from the current resident size, which is returned."""
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")
    return status_kib("VmRSS")


def peak_above(before: int) -> int:
    """KiB the peak rose above `before` (reset_peak's value)."""
    return status_kib("VmHWM") - before
