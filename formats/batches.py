"""Walking the entries of a ``.log`` file's bytes (Kafka's ``FileLogInputStream``).

A segment is a sequence of entries, each starting with ``offset int64 | size int32``
and holding its magic byte at +16, whatever its format (legacy v0/v1 message or v2
batch). The walk, exactly as Kafka's file reader does it:

1. If 17 or fewer bytes remain, stop: a trailing fragment is ignored (and reported).
2. Read offset (0-7), size (8-11) and magic (16).
3. ``size < 14`` cannot be any entry: raise :class:`CorruptRecordError` naming the position.
4. If the entry runs past the end of the buffer, stop: a partial trailing entry (reported).
5. Magic 0/1 is a legacy entry, magic 2 a v2 batch; anything else is a corrupt header.
   Advance by ``12 + size``.

:class:`BatchIterator` yields :class:`~plog.formats.record_batch.RecordBatch` and
:class:`~plog.formats.legacy.LegacyBatch` objects whose ``position`` is their byte offset
(plus ``base_position``, so a caller holding a slice of a file can report file positions).
After the iteration, ``valid_end`` is the position just past the last whole entry and
``trailing`` describes what was left over (None when the buffer ended on a boundary).
Batches are not CRC-checked here; call ``ensure_valid()`` where that matters.
"""

from __future__ import annotations

import struct
from typing import Iterator, NamedTuple

from .errors import CorruptRecordError
from .legacy import LegacyBatch
from .record_batch import HEADER, RECORD_BATCH_OVERHEAD, RecordBatch

LOG_OVERHEAD = 12
HEADER_SIZE_UP_TO_MAGIC = 17
RECORD_OVERHEAD_V0 = 14
MIN_V2_SIZE = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD  # 49

#: ``offset int64 | size int32``: the 12 bytes every entry starts with, whatever its magic
#: (a v2 batch's baseOffset and batchLength, a legacy message's offset and messageSize).
ENTRY_HEAD = struct.Struct(">qi")


class TrailingBytes(NamedTuple):
    """Bytes after the last whole entry. ``declared_size`` is the entry size the
    partial header announces (``12 + size``), or None when fewer than 18 bytes remain."""

    position: int
    length: int
    declared_size: int | None


class BatchIterator:
    """Iterate the entries of ``buf[start:end]``; see the module docstring.

    ``max_batch_size``, when given, rejects entries larger than it as corrupt (Kafka's
    in-memory reader does this with max.message.bytes; its file reader does not).
    """

    def __init__(self, buf, start: int = 0, end: int | None = None, *, base_position: int = 0,
                 max_batch_size: int | None = None):
        self._mv = buf if isinstance(buf, memoryview) else memoryview(buf)
        if self._mv.ndim != 1 or self._mv.itemsize != 1:
            self._mv = self._mv.cast("B")
        self._start = start
        self._end = len(self._mv) if end is None else min(end, len(self._mv))
        self._base = base_position
        self._max = max_batch_size
        self.valid_end = start + base_position
        self.trailing: TrailingBytes | None = None

    def __iter__(self) -> Iterator[RecordBatch | LegacyBatch]:
        mv, end, base, max_size = self._mv, self._end, self._base, self._max
        pos = self._start
        unpack_entry = ENTRY_HEAD.unpack_from
        unpack_header = HEADER.unpack_from
        from_header = RecordBatch._from_header
        declared = None
        # The loop is the hot path of verify and recovery (one pass per batch of a
        # segment): a v2 batch's whole header is unpacked once, here, and handed over.
        while end - pos > HEADER_SIZE_UP_TO_MAGIC:
            magic = mv[pos + 16]
            if magic == 2 and end - pos >= RECORD_BATCH_OVERHEAD:
                header = unpack_header(mv, pos)
                size = header[1]
            else:
                header = None
                size = unpack_entry(mv, pos)[1]
            if size < RECORD_OVERHEAD_V0:
                raise CorruptRecordError(
                    f"Found record size {size} smaller than minimum record overhead ({RECORD_OVERHEAD_V0})", base + pos
                )
            if max_size is not None and size + LOG_OVERHEAD > max_size:
                raise CorruptRecordError(
                    f"Record size {size + LOG_OVERHEAD} exceeds the largest allowable message size ({max_size})",
                    base + pos,
                )
            stop = pos + LOG_OVERHEAD + size
            if stop > end:
                declared = LOG_OVERHEAD + size
                break
            if magic == 2:
                if size < MIN_V2_SIZE:
                    raise CorruptRecordError(
                        f"Record batch is corrupt (the size {size + LOG_OVERHEAD} is smaller than the minimum "
                        f"allowed overhead {RECORD_BATCH_OVERHEAD})",
                        base + pos,
                    )
                yield from_header(header, mv[pos:stop], base + pos)
            elif magic < 2:
                yield LegacyBatch(mv[pos:stop], base + pos)
            else:
                # mv[] gives an unsigned byte; report it as Kafka's signed int8.
                raise CorruptRecordError(f"Invalid magic found in record: {magic - 256 if magic > 127 else magic}",
                                         base + pos)
            pos = stop
            self.valid_end = base + pos
        if pos < end:
            self.trailing = TrailingBytes(base + pos, end - pos, declared)


def iter_batches(buf, start: int = 0, end: int | None = None, **kwargs) -> BatchIterator:
    """Shorthand for :class:`BatchIterator`."""
    return BatchIterator(buf, start, end, **kwargs)
