"""``LogSegments``: a partition's segments, sorted by base offset (Kafka's ``LogSegments``).

Invariant: base offsets are unique and the map iterates in ascending order; the last
segment is the active one. Lookups by offset use ``bisect`` on the sorted base offsets.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from typing import Iterator

from plog.engine.storage.segment import LogSegment


class LogSegments:
    def __init__(self) -> None:
        self._bases: list[int] = []
        self._by_base: dict[int, LogSegment] = {}

    def __len__(self) -> int:
        return len(self._bases)

    def __iter__(self) -> Iterator[LogSegment]:
        return (self._by_base[b] for b in list(self._bases))

    def __contains__(self, base_offset: int) -> bool:
        return base_offset in self._by_base

    def add(self, segment: LogSegment) -> LogSegment | None:
        """Add (or replace) the segment at its base offset; returns the replaced one."""
        old = self._by_base.get(segment.base_offset)
        if old is None:
            insort(self._bases, segment.base_offset)
        self._by_base[segment.base_offset] = segment
        return old

    def remove(self, base_offset: int) -> LogSegment | None:
        seg = self._by_base.pop(base_offset, None)
        if seg is not None:
            self._bases.pop(bisect_left(self._bases, base_offset))
        return seg

    def clear(self) -> None:
        self._bases.clear()
        self._by_base.clear()

    def get(self, base_offset: int) -> LogSegment | None:
        return self._by_base.get(base_offset)

    @property
    def base_offsets(self) -> list[int]:
        return list(self._bases)

    @property
    def first(self) -> LogSegment | None:
        return self._by_base[self._bases[0]] if self._bases else None

    @property
    def last(self) -> LogSegment | None:
        return self._by_base[self._bases[-1]] if self._bases else None

    active = last

    def floor(self, offset: int) -> LogSegment | None:
        """The segment with the largest base offset <= ``offset``."""
        i = bisect_right(self._bases, offset)
        return self._by_base[self._bases[i - 1]] if i else None

    def higher(self, base_offset: int) -> LogSegment | None:
        """The segment after the one at ``base_offset``."""
        i = bisect_right(self._bases, base_offset)
        return self._by_base[self._bases[i]] if i < len(self._bases) else None

    def values(self, from_offset: int, to_offset: int | None = None) -> list[LogSegment]:
        """Segments holding offsets in ``[from_offset, to_offset)``: from the one
        *containing* ``from_offset`` (its floor) up to, not including, the first whose
        base is >= ``to_offset``."""
        start = max(bisect_right(self._bases, from_offset) - 1, 0)
        end = len(self._bases) if to_offset is None else bisect_left(self._bases, to_offset)
        return [self._by_base[b] for b in self._bases[start:end]]

    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._by_base.values())
