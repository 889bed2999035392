"""Reading an offset or time index file without mapping it: the read-only tools' index reader.

The writer maps its indexes (:mod:`plog.engine.storage.abstract_index`); the offline tools
(``lookup``, ``verify``, ``dump``, ``ls``, ``recover``'s plan) and a consumer following a live
writer read them here, with ``os.pread``, so a file that a running broker truncates under
us gives a short read, never a SIGBUS. Both paths run the same search and sanity code, that
of :mod:`plog.formats.indexes` (Kafka's warm-section binary search, ``sanityCheck``'s
rules): here the search reads each entry it probes with one ``pread`` (about twenty for a
lookup), or searches an in-memory copy after :meth:`IndexFile.load`.

Counting entries. ``slots`` is what Kafka counts in a file, ``floor(length / entrySize)``.
A broker that crashed (or is running) leaves its active segment's index preallocated, zero
filled past the real entries; ``entries`` is the count this reader uses, which is ``slots``
unless ``trim_zero_tail`` asked for the count before that tail. Two ways to find the tail:

* :meth:`IndexFile.zero_tail_start` binary-searches it, trusting what a valid index
  guarantees (real entries are never all zero past slot 0: relative offsets and timestamps
  strictly increase, and no offset index entry has position 0, since a segment's first
  append is never indexed), so it reads a handful of entries of a 10 MiB file;
* :meth:`IndexFile.trailing_zero_start` reads the whole tail backwards and finds the first
  all-zero slot after the last non-zero byte, whatever the file holds (``verify``).
"""

from __future__ import annotations

import errno
import os
import stat
from typing import Iterator

from plog.formats import indexes as ix
from plog.formats.indexes import IndexSearchKey, OffsetPosition, TimestampOffset

#: Bytes read per ``pread`` when a file is read in chunks (whole entries).
CHUNK_BYTES = 1 << 20


class IndexFile:
    """An offset (``entry_size`` 8) or time (12) index of the segment at ``base_offset``,
    read with ``pread``. A missing file has no entries (``missing``), unless ``missing_ok``
    is False (then ``FileNotFoundError``); ``path`` None is a missing file. With
    ``trim_zero_tail`` the entries stop at a zero-filled preallocated tail
    (:meth:`zero_tail_start`). Use as a context manager, or call :meth:`close`. Given
    ``fd``, the reader reads that open descriptor of ``path`` and leaves it open.
    """

    def __init__(self, path: str | os.PathLike | None, entry_size: int, base_offset: int, *,
                 trim_zero_tail: bool = True, missing_ok: bool = True, fd: int | None = None):
        self.path = None if path is None else os.fspath(path)
        self.entry_size = entry_size
        self.base_offset = base_offset
        self.file_length = 0
        self.slots = 0
        self.entries = 0
        self.missing = path is None
        self._fd: int | None = fd
        self._owned = fd is None
        self._zero = bytes(entry_size)
        self._data: bytes | None = None
        if fd is None:
            if path is None:
                return
            try:
                self._fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            except FileNotFoundError:
                if not missing_ok:
                    raise
                self.missing = True
                return
        st = os.fstat(self._fd)
        if stat.S_ISDIR(st.st_mode):  # open(2) takes a directory; reading it cannot
            self.close()
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), self.path)
        self.file_length = st.st_size
        self.slots = self.entries = self.file_length // entry_size
        if trim_zero_tail:
            self.entries = self.zero_tail_start()

    def __enter__(self) -> "IndexFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._fd is not None and self._owned:
            os.close(self._fd)
        self._fd = None
        self._data = None

    # -- reading entries -----------------------------------------------------------------

    def entry_bytes(self, slot: int) -> bytes:
        """The bytes of slot ``slot``; zeros when the file shrank under us (read as its tail)."""
        if self._data is not None and slot < self.entries:
            return self._data[slot * self.entry_size:(slot + 1) * self.entry_size]
        data = os.pread(self._fd, self.entry_size, slot * self.entry_size)
        return data if len(data) == self.entry_size else self._zero

    def chunks(self, first_slot: int = 0, end_slot: int | None = None,
               chunk_bytes: int = CHUNK_BYTES) -> Iterator[tuple[int, bytes]]:
        """``(slot, bytes)`` of consecutive whole entries from ``first_slot`` up to
        ``end_slot`` (default: :attr:`entries`), at most ``chunk_bytes`` (at least one entry)
        a read; ends early if the file shrank under us."""
        size = self.entry_size
        end = self.entries if end_slot is None else end_slot
        per_read = max(1, chunk_bytes // size)
        slot = first_slot
        while slot < end and self._fd is not None:
            k = min(per_read, end - slot)
            data = os.pread(self._fd, k * size, slot * size)
            k = len(data) // size
            if not k:
                return
            yield slot, data[:k * size]
            slot += k

    def load(self, max_bytes: int) -> bool:
        """Keep the :attr:`entries` in memory when they take at most ``max_bytes`` (searches
        then read no file); returns whether they are kept."""
        size = self.entries * self.entry_size
        if self._data is None and size <= max_bytes:
            data = b"".join(chunk for _, chunk in self.chunks())
            self.entries = len(data) // self.entry_size  # the file may have shrunk meanwhile
            self._data = data
        return self._data is not None

    def key(self, slot: int, key: IndexSearchKey) -> int:
        return key.field.unpack_from(self.entry_bytes(slot), key.field_offset)[0]

    def offset_entry(self, slot: int) -> OffsetPosition:
        return ix.decode_offset_entry(self.entry_bytes(slot), 0, self.base_offset)

    def time_entry(self, slot: int) -> TimestampOffset:
        return ix.decode_time_entry(self.entry_bytes(slot), 0, self.base_offset)

    def last_offset_entry(self) -> OffsetPosition | None:
        return self.offset_entry(self.entries - 1) if self.entries else None

    def last_time_entry(self) -> TimestampOffset | None:
        return self.time_entry(self.entries - 1) if self.entries else None

    # -- the zero-filled tail --------------------------------------------------------------

    @property
    def zero_tail(self) -> int:
        """Zero-filled slots after the entries in use (a preallocated index)."""
        return self.slots - self.entries

    def zero_tail_start(self, first: int = 0) -> int:
        """The first slot of the zero-filled tail (:attr:`slots` when the last slot is not
        zero), by binary search over ``[first, slots)`` (see the module docstring): with
        ``first`` 1, slot 0 is always kept."""
        n = self.slots
        if n <= first or self.entry_bytes(n - 1) != self._zero:
            return n
        lo, hi = first, n - 1  # hi is known zero; find the first zero slot
        while lo < hi:
            mid = (lo + hi) // 2
            if self.entry_bytes(mid) == self._zero:
                hi = mid
            else:
                lo = mid + 1
        return lo

    def trailing_zero_start(self) -> int:
        """The first slot of the zero-filled tail found exactly: the slot after the one that
        holds the last non-zero byte of the whole entries (0 for an all-zero file). The
        tail is read backwards, ``CHUNK_BYTES`` at a time."""
        end = self.slots * self.entry_size
        zeros = 0
        pos = end
        while pos > 0:
            start = max(0, pos - CHUNK_BYTES)
            data = os.pread(self._fd, pos - start, start)
            if len(data) != pos - start:
                break
            kept = len(data.rstrip(b"\x00"))
            zeros += len(data) - kept
            if kept:
                break
            pos = start
        nonzero = end - zeros
        return -(-nonzero // self.entry_size)

    # -- Kafka's algorithms ----------------------------------------------------------------

    def first_and_last(self) -> tuple[bytes | None, bytes | None]:
        """The first and last of the :attr:`slots` (what ``sanityCheck`` reads); None, None
        for an empty file, or one that shrank under us."""
        if not self.slots:
            return None, None
        size = self.entry_size
        first = os.pread(self._fd, size, 0)
        last = os.pread(self._fd, size, (self.slots - 1) * size)
        if len(first) < size or len(last) < size:
            return None, None
        return first, last

    def sanity_problems(self, name: str) -> list[ix.IndexSanityProblem]:
        """Every rule of Kafka's ``sanityCheck`` the file fails (its slots, zero tail
        included, and its length), in Kafka's order; ``name`` goes in the messages."""
        first, last = self.first_and_last()
        if self.entry_size == ix.OFFSET_INDEX_ENTRY_SIZE:
            return ix.offset_index_problems(self.file_length, last, self.base_offset, name)
        return ix.time_index_problems(self.file_length, first, last, self.base_offset, name)

    def sanity_check(self, name: str) -> None:
        """Kafka's ``sanityCheck``: ``CorruptIndexError`` with Kafka's message for the first
        rule that fails."""
        problems = self.sanity_problems(name)
        if problems:
            raise ix.CorruptIndexError(problems[0].message)

    def offset_lookup(self, target_offset: int) -> OffsetPosition:
        """``OffsetIndex.lookup``: the largest entry with offset <= target, else ``(base, 0)``."""
        if self._data is not None:
            return ix.offset_index_lookup(self._data, self.entries, self.base_offset, target_offset)
        slot = largest_lower_bound(self, target_offset - self.base_offset, ix.OFFSET_INDEX_KEY)
        return OffsetPosition(self.base_offset, 0) if slot < 0 else self.offset_entry(slot)

    def describe(self) -> str:
        if self.missing:
            return "missing"
        text = f"{self.entries} entries"
        if self.zero_tail:
            text += f" ({self.zero_tail} zero-filled preallocated slots after them)"
        return text


def largest_lower_bound(index: IndexFile, target: int, key: IndexSearchKey, probes: list | None = None) -> int:
    """Kafka's ``largestLowerBoundSlotFor`` over an :class:`IndexFile` (the search of
    :func:`plog.formats.indexes.largest_lower_bound_slot`, reading each probed entry with
    ``pread``): the slot of the largest entry whose ``key`` <= ``target`` (relative to the
    base offset for offset fields), or -1. Every entry compared is appended to ``probes``
    as ``(slot, value)``."""
    size = index.entry_size
    field_offset = key.field_offset
    unpack = key.field.unpack_from

    def read(_src, position: int) -> tuple:
        slot = position // size
        value = unpack(index.entry_bytes(slot), field_offset)
        if probes is not None:
            probes.append((slot, value[0]))
        return value

    return ix.largest_lower_bound_slot(None, index.entries, target, key, read)


def preallocated_prefix(fd: int, length: int, entry_size: int) -> int:
    """The length of an open index file up to its zero-filled preallocated tail, in whole
    entries, keeping at least the first entry; a length that is not whole entries is kept
    as it is (the sanity check reports it). What a view of a live writer's active index maps:
    trimming at roll or close never cuts into that prefix."""
    if length % entry_size:
        return length
    reader = IndexFile(None, entry_size, 0, trim_zero_tail=False, fd=fd)
    reader.file_length, reader.slots = length, length // entry_size  # the length the caller maps
    return reader.zero_tail_start(first=1) * entry_size


__all__ = ["CHUNK_BYTES", "IndexFile", "largest_lower_bound", "preallocated_prefix"]
