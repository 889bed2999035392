"""A produce request's batches for one partition, back to back in one buffer (Kafka's
``MemoryRecords`` of a ``ProduceRequest``).

:class:`MemoryRecords` is a list of views, one per batch, so whatever takes a list of
batches takes it as it is. The buffer is the request's own: the leader's append
(engine/storage/append_fast.py) stamps offsets, its leader epoch and log-append times into
it in place and writes it from there, as Kafka's ``LogValidator`` rewrites a request's
buffer, instead of joining copies of the batches first. So after an append the views hold
the batches as the log has them, not as they were sent: a caller that sends one again
encodes it again.
"""

from __future__ import annotations


class MemoryRecords(list):
    """The batches ``buffer[0:sizes[0]]``, ``buffer[sizes[0]:sizes[0] + sizes[1]]``... as
    writable memoryviews, in order. Invariant: the batches tile ``buffer`` exactly."""

    __slots__ = ("buffer", "_starts")

    def __init__(self, buffer: bytearray, sizes: list[int]):
        view = memoryview(buffer)
        starts, at = [], 0
        for size in sizes:
            starts.append(at)
            at += size
        if at != len(buffer):
            raise ValueError(f"batches of {at} bytes in a buffer of {len(buffer)}")
        super().__init__(view[a:a + size] for a, size in zip(starts, sizes))
        self.buffer = buffer
        self._starts = starts

    def start_of(self, i: int) -> int:
        """Where batch ``i`` starts in :attr:`buffer`."""
        return self._starts[i]


__all__ = ["MemoryRecords"]
