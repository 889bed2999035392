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

The walk has a native twin (native/src/walk.rs, ``plog._native.walk_entries``), which also
checks each entry's CRC when asked to; ``formats/native.py`` decides at import which one
``BatchIterator`` runs. ``_iter_reference`` is the reference: both give the same batches,
``valid_end``, trailing bytes and typed errors (tests/native).
"""

from __future__ import annotations

import struct
from typing import Iterator, NamedTuple

from . import native
from .errors import CorruptRecordError
from .legacy import LegacyBatch
from .record_batch import HEADER, RECORD_BATCH_OVERHEAD, RecordBatch

LOG_OVERHEAD = 12
HEADER_SIZE_UP_TO_MAGIC = 17
RECORD_OVERHEAD_V0 = 14
MIN_V2_SIZE = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD  # 49

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1

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

    def _iter_reference(self) -> Iterator[RecordBatch | LegacyBatch]:
        """The reference walk (the pure-Python path)."""
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

    def _iter_native(self) -> Iterator[RecordBatch | LegacyBatch]:
        """The same walk by the native twin (native/src/walk.rs), which hands back the
        entries it walked and the fault or trailing bytes it stopped at; the objects, the
        ``valid_end`` updates and the raise happen here, in the reference's order.

        The twin walks a few entries at a time (16, then up to 4096 a call) so a caller
        that stops early (a lookup) does not pay for the rest of the buffer."""
        mv, base, max_size = self._mv, self._base, self._max
        pos, limit = self._start, 16
        if (pos < 0 or not mv.c_contiguous or not _INT64_MIN <= base <= _INT64_MAX - len(mv)
                or (max_size is not None and not _INT64_MIN <= max_size <= _INT64_MAX)):
            # A start from the end, a strided view, numbers past int64: the reference's
            # indexing and Python ints handle them.
            yield from self._iter_reference()
            return
        end = max(self._end, pos)  # an end before the start walks nothing, as at the start
        walk = native.module.walk_entries
        from_header = RecordBatch._from_header
        while pos is not None:
            headers, _, next_pos, trailing, fault = walk(mv, pos, end, base, max_size, False, limit)
            # The entries are contiguous from pos; header[1] is each one's size less 12.
            for header in headers:
                stop = pos + LOG_OVERHEAD + header[1]
                if header[3] == 2:
                    yield from_header(header, mv[pos:stop], base + pos)
                else:
                    yield LegacyBatch(mv[pos:stop], base + pos)
                pos = stop
                self.valid_end = base + pos
            pos = next_pos
            if fault is not None:
                raise native.typed_error(fault)
            if trailing is not None:
                self.trailing = TrailingBytes(*trailing)
            limit = min(limit * 4, 4096)

    # One path for the life of the process (formats/native.py decides, PLOG_NATIVE=0 picks
    # the reference).
    __iter__ = _iter_native if native.active() else _iter_reference


def iter_batches(buf, start: int = 0, end: int | None = None, **kwargs) -> BatchIterator:
    """Shorthand for :class:`BatchIterator`."""
    return BatchIterator(buf, start, end, **kwargs)
