"""Kafka's ``TimeIndex``: a segment's sparse map from timestamp to offset, mapped (the
machinery is :class:`~plog.engine.storage.abstract_index.AbstractIndex`'s)."""

from __future__ import annotations

import struct

from plog.formats import indexes as ix
from plog.formats.indexes import DEFAULT_MAX_INDEX_SIZE, TimestampOffset

from plog.engine.errors import IndexFullError, IndexOffsetOverflowError, InvalidOffsetError, InvalidTimestampError
from plog.engine.storage.abstract_index import AbstractIndex

_PACK_TIME_ENTRY = struct.Struct(">qi").pack_into
_PACK_TIME = struct.Struct(">qi").pack
_INT32_MAX = ix.INT32_MAX
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


class TimeIndex(AbstractIndex):
    """Sparse map from timestamp to offset (``TimeIndex``).

    Entries are 12 bytes: timestamp (int64) and (offset - base_offset) (int32). An entry
    (T, O) means "the largest timestamp seen up to and including offset O is T".
    Invariants: timestamps strictly increase and offsets never decrease (``maybe_append``
    skips an equal timestamp and refuses a smaller one); one slot is reserved for the
    entry written when the segment is rolled or closed, so ``is_full`` is
    ``entries >= max_entries - 1``. Not checksummed; rebuilt by recovery. Lazy; not
    thread-safe.
    """

    entry_size = ix.TIME_INDEX_ENTRY_SIZE
    _kind = "time index"

    def __init__(self, path, base_offset: int, max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
                 writable: bool = True):
        super().__init__(path, base_offset, max_index_size, writable)
        self._last_entry = TimestampOffset(ix.NO_TIMESTAMP, base_offset)

    def _refresh_last(self) -> None:
        n = self._entries
        if n == 0 or (n * 12 <= self._backed and self._mm is not None):
            self._last_entry = ix.last_time_entry(self._buf, n, self.base_offset)
        else:
            self._last_entry = ix.last_time_entry(self._read_slots(n - 1, 1), 1, self.base_offset)

    @property
    def last_entry(self) -> TimestampOffset:
        """The last entry, or ``(-1, base_offset)`` when empty."""
        self._load()
        return self._last_entry

    def is_full(self) -> bool:
        """``entries >= max_entries - 1``: the last slot is kept for the roll/close entry."""
        self._load()
        return self._entries >= self._max_entries - 1

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The largest entry with timestamp <= target, or ``(-1, base_offset)``."""
        self._ensure()
        return ix.time_index_lookup(self._buf, self._entries, self.base_offset, target_timestamp)

    def entry(self, n: int) -> TimestampOffset:
        """Entry ``n`` (0-based); IndexError past the valid entries."""
        self._ensure()
        if not 0 <= n < self._entries:
            raise IndexError(f"Attempt to fetch the {n}th entry from time index {self._name} "
                             f"which has size {self._entries}")
        return ix.decode_time_entry(self._buf, n, self.base_offset)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """§8.2: append ``(timestamp, offset)`` if ``timestamp`` is above the last entry's.

        1. Full (and not ``skip_full_check``): IndexFullError.
        2. With entries: an offset below the last one is InvalidOffsetError; a timestamp
           below the last one is InvalidTimestampError.
        3. Only a strictly greater timestamp is written; an equal one (the same entry
           again at roll/close, or v0 data's -1) is skipped silently.
        ``skip_full_check`` lets the roll/close entry use the reserved slot; with no slot
        left at all it is still IndexFullError.
        """
        self._ensure()
        self._require_writable("append to")
        entries = self._entries
        if not skip_full_check and entries >= self._max_entries - 1:
            raise IndexFullError(f"Attempt to append to a full time index (size = {entries}): {self._name}")
        last = self._last_entry
        if entries != 0 and offset < last.offset:
            raise InvalidOffsetError(
                f"Attempt to append an offset ({offset}) to slot {entries} no larger than the "
                f"last offset appended ({last.offset}) to {self._name}", offset=offset)
        if entries != 0 and timestamp < last.timestamp:
            raise InvalidTimestampError(
                f"Attempt to append a timestamp ({timestamp}) to slot {entries} no larger than "
                f"the last timestamp appended ({last.timestamp}) to {self._name}")
        if timestamp <= last.timestamp:
            return
        if entries >= self._max_entries:
            # Kafka's buffer would overflow here (the reserved slot is used up too).
            raise IndexFullError(f"Attempt to append to a full time index (size = {entries}): {self._name}")
        relative = offset - self.base_offset
        if not 0 <= relative <= _INT32_MAX:
            raise IndexOffsetOverflowError(f"Integer overflow for offset: {offset} ({self._name})", offset=offset)
        if not _INT64_MIN <= timestamp <= _INT64_MAX:
            raise ValueError(f"Timestamp {timestamp} does not fit an int64 time index entry")
        pos = entries * 12
        if pos + 12 <= self._backed:
            _PACK_TIME_ENTRY(self._mm, pos, timestamp, relative)
        else:
            self._store(pos, _PACK_TIME(timestamp, relative))
        self._entries = entries + 1
        self._last_entry = TimestampOffset(timestamp, offset)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose OFFSET (the value field) is >= ``offset``."""
        self._truncate_to(offset, ix.TIME_INDEX_VALUE)

    def _sanity_ends(self, length: int, first: bytes | None, last: bytes | None, name: str) -> None:
        ix.sanity_check_time_index_ends(length, first, last, self.base_offset, name)
