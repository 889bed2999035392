"""Finding whole, valid entries in the damaged bytes of a ``.log``: the one check ("is there a
valid entry at this position") and the one resync scanner ("where is the next one"), which
``plog recover --salvage`` and ``plog verify`` both use. Walking the valid entries themselves
is :class:`~plog.engine.storage.file_records.FileBatches`' job.

An entry (a v2 batch, or a v0/v1 message) is *valid at a position* when its header is
plausible and its checksum matches:

* any magic: ``size >= 14`` (``RECORD_OVERHEAD_V0``) and the entry ends within the file;
* v2 (magic 2 at +16): the whole 61-byte header is readable, ``batchLength >= 49``, no
  attribute bit above the delete-horizon flag, a codec Kafka knows (0..4), a non-negative
  last offset delta and ``0 <= recordsCount <= lastOffsetDelta + 1``; then CRC-32C;
* v0/v1 (only when :attr:`EntryRules.legacy`): ``size >= 14 + 8 * magic``, a codec 0..3, a
  non-negative offset; then CRC-32;

and it passes the caller's :class:`EntryRules` (offsets and size bounds). The checks that
cost nothing come first, so garbage costs one header check per candidate position.

The scanner (:func:`find_next_entry`) reads the file in 1 MiB windows from a position on; a
v2 candidate is a byte 2 at +16 (found with ``bytes.find``), and in a segment that already
held legacy entries every position whose size field is non-zero and magic is 0 or 1 is a
legacy candidate too. Candidates are tried in file order and the first valid one wins, so
the work stays linear in the bytes scanned. Files are read with ``pread`` (a file truncated
under us gives a short read, never a SIGBUS), and a candidate larger than the window has its
checksum computed by streaming the rest of it.
"""

from __future__ import annotations

import os
import re
import zlib
from typing import Callable, Iterable, NamedTuple

from plog.formats.crc import crc32c

from plog.formats.batch_header import ENTRY_HEAD, LOG_OVERHEAD, MAGIC_OFFSET, MIN_V2_SIZE, RECORD_OVERHEAD_V0, SIZE_OFFSET
from plog.formats.batch_header import LEGACY_CRC_START, LEGACY_ENTRY_HEAD, legacy_codec_known, legacy_min_size
from plog.formats.batch_header import V2_CRC_START, V2_HEADER, V2_HEADER_SIZE, v2_header_plausible

#: Bytes of a file read per window (and per read when a checksum is streamed).
WINDOW = 1 << 20
_LEGACY_MIN = LOG_OVERHEAD + RECORD_OVERHEAD_V0  # 26: the smallest entry of any magic
_NONZERO = re.compile(rb"[^\x00]")


class EntryRules(NamedTuple):
    """What an entry must also satisfy to count as found (None: no such bound).

    ``min_offset``: its (base) offset is at least this; ``max_offset``: its last offset is
    at most this; ``max_size``: entries larger than this (with the 12-byte log overhead) are
    not checked, which bounds the work spent on a damaged size field; ``legacy``: v0/v1
    entries are candidates too (only in a segment known to hold them).
    """

    min_offset: int | None = None
    max_offset: int | None = None
    max_size: int | None = None
    legacy: bool = False


def stream_crc(fd: int, start: int, end: int, func: Callable, value: int) -> int:
    """Continue the checksum ``value`` (``crc32c`` or ``zlib.crc32``) over ``[start, end)``
    of the file, read ``WINDOW`` bytes at a time; -1 if the file ends first."""
    pos = start
    while pos < end:
        chunk = os.pread(fd, min(WINDOW, end - pos), pos)
        if not chunk:
            return -1
        value = func(chunk, value)
        pos += len(chunk)
    return value


def all_zero(fd: int, start: int, end: int) -> bool:
    """Whether every byte of ``[start, end)`` is zero (what a preallocated or zero-filled
    tail holds); a file that ends first is judged on what it has."""
    pos = start
    while pos < end:
        chunk = os.pread(fd, min(WINDOW, end - pos), pos)
        if not chunk:
            break
        if _NONZERO.search(chunk):
            return False
        pos += len(chunk)
    return True


def _checksum_matches(fd: int, buf, q: int, position: int, stop: int, crc_start: int,
                      func: Callable, stored: int) -> bool:
    """The entry at ``buf[q:]`` (file ``position`` .. ``stop``) has checksum ``stored``."""
    view = memoryview(buf)
    end_in_view = q + (stop - position)
    if end_in_view <= len(view):
        return func(view[q + crc_start:end_in_view]) == stored
    value = func(view[q + crc_start:])
    return stream_crc(fd, position + len(view) - q, stop, func, value) == stored


def valid_entry_at(fd: int, buf, q: int, position: int, file_size: int, rules: EntryRules) -> bool:
    """Whether a whole valid entry that passes ``rules`` starts at file ``position``, where
    ``buf[q:]`` holds the file's bytes from that position on (as many as were read; the rest
    of a large entry is read from ``fd``). See the module docstring for the checks."""
    # Called for every candidate in damaged bytes: the tests that reject garbage come first.
    avail = len(buf) - q
    if avail < MAGIC_OFFSET + 1:
        return False
    offset, length = ENTRY_HEAD.unpack_from(buf, q)
    stop = position + LOG_OVERHEAD + length
    if length < RECORD_OVERHEAD_V0 or stop > file_size:
        return False
    min_offset, max_offset, max_size, legacy = rules
    if (max_size is not None and length + LOG_OVERHEAD > max_size) or (min_offset is not None and offset < min_offset):
        return False
    magic = buf[q + MAGIC_OFFSET]
    if magic == 2:
        if length < MIN_V2_SIZE or avail < V2_HEADER_SIZE:
            return False
        (_, _, _, _, stored, attributes, lod, _, _, _, _, _, count) = V2_HEADER.unpack_from(buf, q)
        if not v2_header_plausible(attributes, lod) or count < 0 or count > lod + 1:
            return False
        if max_offset is not None and offset + lod > max_offset:
            return False
        return _checksum_matches(fd, buf, q, position, stop, V2_CRC_START, crc32c, stored)
    if (magic > 1 or not legacy or length < legacy_min_size(magic) or avail < LEGACY_ENTRY_HEAD.size
            or offset < 0):
        return False
    if max_offset is not None and offset > max_offset:
        return False
    _, _, stored, _, attributes = LEGACY_ENTRY_HEAD.unpack_from(buf, q)
    if not legacy_codec_known(attributes):
        return False
    return _checksum_matches(fd, buf, q, position, stop, LEGACY_CRC_START, zlib.crc32, stored)


def _legacy_candidates(buf: bytes, window: int) -> Iterable[int]:
    """Positions in ``buf[:window]`` whose size field is non-zero and magic is 0 or 1."""
    q = 0
    limit = min(window, len(buf) - LEGACY_ENTRY_HEAD.size)
    size_at, size_end = SIZE_OFFSET, LOG_OVERHEAD  # an entry's size field
    while q < limit:
        if buf[q + size_at:q + size_end] == b"\0\0\0\0":
            # A zero size cannot start an entry: jump so that the size field's last byte is
            # the next non-zero byte (zero-filled regions cost one regex search).
            m = _NONZERO.search(buf, q + size_end)
            if m is None:
                return
            q = max(q + 1, m.start() - (size_end - 1))
            continue
        if buf[q + MAGIC_OFFSET] <= 1:
            yield q
        q += 1


def find_next_entry(fd: int, start: int, file_size: int, rules: EntryRules = EntryRules(), *,
                    first_try: int | None = None) -> int | None:
    """The position of the first valid entry (:func:`valid_entry_at`) at or after ``start``,
    or None. ``first_try``, a position at or after ``start`` (where a damaged entry's own size
    field points), is tried before any other."""
    if first_try is not None and start <= first_try < file_size:
        head = os.pread(fd, V2_HEADER_SIZE, first_try)
        if valid_entry_at(fd, head, 0, first_try, file_size, rules):
            return first_try
    pos = start
    while pos + _LEGACY_MIN <= file_size:
        buf = os.pread(fd, WINDOW + V2_HEADER_SIZE, pos)
        if not buf:
            return None
        window = min(WINDOW, len(buf))
        hits = []
        j = buf.find(b"\x02", MAGIC_OFFSET, window + MAGIC_OFFSET)
        while j >= 0:
            hits.append(j - MAGIC_OFFSET)
            j = buf.find(b"\x02", j + 1, window + MAGIC_OFFSET)
        if rules.legacy:
            hits = sorted(set(hits).union(_legacy_candidates(buf, window)))
        for q in hits:
            if valid_entry_at(fd, buf, q, pos + q, file_size, rules):
                return pos + q
        pos += window
    return None


__all__ = ["WINDOW", "EntryRules", "all_zero", "find_next_entry", "stream_crc", "valid_entry_at"]
