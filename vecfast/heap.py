"""Process-wide allocator settings for processes that run torch on the CPU."""

from __future__ import annotations

import ctypes
import functools

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt parameters, from glibc's malloc.h


@functools.cache
def keep_freed_heap_memory() -> None:
    """Have glibc's malloc keep freed memory for reuse instead of giving it back to the OS at once.

    Torch on the CPU allocates and frees the same large temporaries at every call. With
    glibc's adaptive defaults blocks of a few MiB are mapped anew for each call, or the heap
    top is trimmed after it, so every call faults its working set in again: the batched nav
    renderer took ~6,600 minor page faults per step at 256 envs (~50 with fixed thresholds)
    and ran at half speed; an APPO run's main process took 4x the page faults. Fixed thresholds (blocks up to
    32 MiB from the heap, trim only beyond 256 MiB free) apply to the whole process; off
    glibc this does nothing.
    """
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt(_M_MMAP_THRESHOLD, 32 << 20)
    mallopt(_M_TRIM_THRESHOLD, 256 << 20)
