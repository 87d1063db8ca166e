"""What a measuring process's C allocator does with the memory it frees.

glibc's malloc serves a request of 128 KiB or more with a mapping of its own and unmaps it when
it is freed; only freeing such a block raises that threshold (its dynamic adjustment). asyncio
reads a socket into a 256 KiB buffer and shrinks it to what came, and a shrunk block freed
raises nothing: in a process where nothing else had raised the threshold, every read mapped,
faulted in and unmapped memory. A nats-py consumer fed 4,000 messages a second made 2,200
mmap and munmap calls and 4,700 page faults a second, and cost a fifth more CPU than with
fixed thresholds; whether a process suffered it hung on which libraries it had imported.
Fixed thresholds keep such blocks in the heap and what is freed at its top for the next read.
"""

from __future__ import annotations

import ctypes
import sys

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameters
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 4 << 20  # above every client library's read buffer
TRIM_THRESHOLD = 2 * MMAP_THRESHOLD  # the ratio glibc's own adjustment keeps
# The same settings for a process that is not the harness's (contrib/bench's bare loops), read
# by glibc as the process starts.
ENVIRONMENT = {"MALLOC_MMAP_THRESHOLD_": str(MMAP_THRESHOLD),
               "MALLOC_TRIM_THRESHOLD_": str(TRIM_THRESHOLD)}


def keep_freed_memory() -> bool:
    """Fix this process's thresholds; False where the C library has no such setting."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    # mallopt answers 1 where it took the setting (musl's answers 0: it has none).
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and \
        bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
