"""glibc's allocator settings for a process that moves multi-megabyte email bodies.

By default glibc raises its mmap threshold each time a large block is freed, so later 16 MB bodies
come from the heap arenas (one per sending thread) and their memory is kept, not returned: a worker
that sent a few large emails stayed hundreds of MB larger than it needed to be. A fixed threshold
keeps every block over 128 KiB in its own mapping, given back to the system when freed, and two
arenas are enough for a process whose threads mostly wait on the network.
"""

from __future__ import annotations

import ctypes
import ctypes.util

M_ARENA_MAX = -8
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 128 * 1024


def return_large_blocks_to_the_system() -> bool:
    """Apply the settings when the C library is glibc; False (and nothing changed) elsewhere."""
    name = ctypes.util.find_library("c")
    if not name:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(mallopt(M_ARENA_MAX, 2))
