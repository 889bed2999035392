"""Kafka's ``OffsetIndex``: a segment's sparse map from offset to ``.log`` position, mapped
(the machinery is :class:`~plog.engine.storage.abstract_index.AbstractIndex`'s)."""

from __future__ import annotations

import struct

from plog.formats import indexes as ix
from plog.formats.indexes import DEFAULT_MAX_INDEX_SIZE, OffsetPosition

from plog.engine.errors import IndexFullError, IndexOffsetOverflowError, InvalidOffsetError
from plog.engine.storage.abstract_index import AbstractIndex

_PACK_OFFSET_ENTRY = struct.Struct(">ii").pack_into
_PACK_OFFSET = struct.Struct(">ii").pack
_INT32_MAX = ix.INT32_MAX


class OffsetIndex(AbstractIndex):
    """Sparse map from offset to the ``.log`` position of the batch holding it (``OffsetIndex``).

    Entries are 8 bytes: (offset - base_offset) and position, both int32 big-endian.
    Invariants: offsets strictly increase (``append`` refuses anything else) and every
    offset is within ``base_offset .. base_offset + 2^31 - 1``; positions are the start of
    the append that ended at that offset. The file is not checksummed: after a crash the
    segment's recovery rebuilds it. Lazy (see the module docstring); not thread-safe.
    """

    entry_size = ix.OFFSET_INDEX_ENTRY_SIZE
    _kind = "index"

    def __init__(self, path, base_offset: int, max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
                 writable: bool = True):
        super().__init__(path, base_offset, max_index_size, writable)
        self._last_offset = base_offset

    def _refresh_last(self) -> None:
        n = self._entries
        if n == 0 or (n * 8 <= self._backed and self._mm is not None):
            self._last_offset = ix.last_offset_entry(self._buf, n, self.base_offset).offset
        else:
            self._last_offset = ix.last_offset_entry(self._read_slots(n - 1, 1), 1, self.base_offset).offset

    @property
    def last_offset(self) -> int:
        """Offset of the last entry, or ``base_offset`` when empty."""
        self._load()
        return self._last_offset

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The largest entry with offset <= ``target_offset``, or ``(base_offset, 0)``."""
        self._ensure()
        return ix.offset_index_lookup(self._buf, self._entries, self.base_offset, target_offset)

    def fetch_upper_bound_offset(self, fetch_offset_position: int | OffsetPosition,
                                 fetch_size: int) -> OffsetPosition | None:
        """An entry whose position is at or past ``position + fetch_size``, or None
        (``fetchUpperBoundOffset``). Accepts the position or an ``OffsetPosition``."""
        if isinstance(fetch_offset_position, OffsetPosition):
            fetch_offset_position = fetch_offset_position.position
        self._ensure()
        return ix.fetch_upper_bound_offset(self._buf, self._entries, self.base_offset,
                                           fetch_offset_position, fetch_size)

    def entry(self, n: int) -> OffsetPosition:
        """Entry ``n`` (0-based); IndexError past the valid entries."""
        self._ensure()
        if not 0 <= n < self._entries:
            raise IndexError(f"Attempt to fetch the {n}th entry from index {self._name}, "
                             f"which has size {self._entries}")
        return ix.decode_offset_entry(self._buf, n, self.base_offset)

    def append(self, offset: int, position: int) -> None:
        """Add ``(offset, position)``.

        Raises IndexFullError when full, InvalidOffsetError unless the index is empty or
        ``offset > last_offset``, IndexOffsetOverflowError (an InvalidOffsetError and a
        ValueError) when ``offset - base_offset`` does not fit 0..2^31-1, and ValueError
        for a position outside 0..2^31-1. Checked in Kafka's order.
        """
        self._ensure()
        self._require_writable("append to")
        entries = self._entries
        if entries >= self._max_entries:
            raise IndexFullError(f"Attempt to append to a full index (size = {entries}): {self._name}")
        if entries != 0 and offset <= self._last_offset:
            raise InvalidOffsetError(
                f"Attempt to append an offset {offset} to position {entries} no larger than "
                f"the last offset appended ({self._last_offset}) to {self._name}")
        relative = offset - self.base_offset
        if not 0 <= relative <= _INT32_MAX:
            raise IndexOffsetOverflowError(f"Integer overflow for offset: {offset} ({self._name})")
        if not 0 <= position <= _INT32_MAX:
            raise ValueError(f"Position {position} does not fit an int32 index entry")
        # Packed straight into the mapping where its page is backed (this runs once per
        # batch during recovery); the first entry of a page is a pwrite.
        pos = entries * 8
        if pos + 8 <= self._backed:
            _PACK_OFFSET_ENTRY(self._mm, pos, relative, position)
        else:
            self._store(pos, _PACK_OFFSET(relative, position))
        self._entries = entries + 1
        self._last_offset = offset

    def truncate_to(self, offset: int) -> None:
        """Remove every entry with offset >= ``offset``."""
        self._truncate_to(offset, ix.OFFSET_INDEX_KEY)

    def _sanity_ends(self, length: int, first: bytes | None, last: bytes | None, name: str) -> None:
        ix.sanity_check_offset_index_ends(length, last, self.base_offset, name)
