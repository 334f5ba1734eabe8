"""Memory given back to the system after large requests (glibc's allocator; elsewhere these do
nothing).

A request of 15 MB holds its body, then thousands of strings parsed from it. glibc keeps what
Python frees in its heaps for reuse, and raises its threshold for serving large blocks with
``mmap`` each time such a block is freed, so after a burst of big bodies the server kept most
of it: 8 concurrent requests of 15 MB, twice, left it at 437 MB where it started at 46 MB.
``malloc_trim``, once the last large request in flight has ended, gives the heaps' free pages
back: 81-95 MB 3 s later. (A fixed ``mmap`` threshold, which returns each large block as it is
freed, gave 57-60 MB but slowed those requests by a page fault per fresh page: 12-17 s for the
16 against 9-10 s.)
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import sys

# A request body from this size up is large: the last one to end trims the heaps.
TRIM_AFTER_BYTES = 1 << 20


def _glibc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        if hasattr(libc, "malloc_trim"):
            return libc
    return None


_LIBC = _glibc()


def trim() -> None:
    """Return the heaps' free pages to the system (ctypes releases the GIL meanwhile)."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)
