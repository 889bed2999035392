"""Keep freed heap in the process, for the commands that allocate and free megabytes per
round (``produce``, ``consume``).

glibc gives the top of its heap back to the kernel once more than ``M_TRIM_THRESHOLD`` of it
is free, and serves blocks over ``M_MMAP_THRESHOLD`` with fresh mappings; both thresholds
only follow the largest block freed so far. A produce round allocates and frees about three
times its 5 MiB (the batches, the request's buffer, the input read), so after each round
glibc trims the heap and the next one faults every page in again, zeroed by the kernel.
Measured on 1 M 100-byte lines: 0.14 of 0.55 CPU-seconds, almost all of the system time
(consume's jsonl: 0.05 of its 0.08 system seconds). Fixed thresholds keep up to 64 MiB of
freed heap for reuse: the peak RSS is unchanged (it already holds a round).

The CLI owns its process, so it sets them; the engine never does (a library user's process
is theirs). Other C libraries (musl's mallopt does nothing, macOS has none): nothing to set.
"""

from __future__ import annotations

# glibc's <malloc.h>
_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2
_M_MMAP_THRESHOLD = -3


def keep_freed_heap() -> bool:
    """Set the thresholds (see the module docstring); whether the C library took them."""
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError, ImportError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    return all([mallopt(_M_MMAP_THRESHOLD, 32 << 20), mallopt(_M_TRIM_THRESHOLD, 64 << 20),
                mallopt(_M_TOP_PAD, 16 << 20)])
