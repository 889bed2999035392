"""Offset, time and transaction index entries, and Kafka's algorithms over index bytes.

Everything here works on a buffer the caller hands in (``bytes``, ``bytearray``,
``memoryview`` or an ``mmap``); the engine owns the files and the mmaps. All integers are
big-endian, as in every Kafka index file.

Offset index (``<base>.index``), 8-byte entries (``OffsetIndex``)::

    0  int32  relativeOffset   offset - baseOffset
    4  int32  position         byte position in the .log of the batch holding the offset

Time index (``<base>.timeindex``), 12-byte entries (``TimeIndex``)::

    0  int64  timestamp        largest timestamp seen up to and including the offset
    8  int32  relativeOffset   offset - baseOffset

Transaction index (``<base>.txnindex``), 34-byte entries (``AbortedTxn``)::

    0  int16  version           0; Kafka reads only byte 0 (signed) and rejects > 0
    2  int64  producerId
   10  int64  firstOffset       first offset of the aborted transaction
   18  int64  lastOffset        offset of the ABORT marker
   26  int64  lastStableOffset  the LSO when the abort was written

Entry count. Kafka never scans for "used" entries: an index opened from disk has
``entries = floor(fileLength / entrySize)``. A crashed broker leaves the active segment's
index preallocated to ``segment.index.bytes`` (default 10485760, rounded down to the entry
size: 10485760 for ``.index``, 10485756 for ``.timeindex``), zero-filled past the last real
entry; a zero entry decodes to ``(baseOffset, 0)`` / ``(0, baseOffset)``. The offset index
sanity check passes such a tail (the last offset equals the base offset); the time index
check does not once the first timestamp is positive (the last timestamp, 0, is smaller),
which is the "Corrupt time index found ... last timestamp is 0" error Kafka users see after
an unclean shutdown. The transaction index is append-only and never preallocated; a
trailing partial entry is ignored, as Kafka's iterator does.

Lookup (``AbstractIndex.indexSlotRangeFor``). Kafka binary-searches the last 8 KiB of the
index first (the "warm" section: ``warmEntries = 8192 // entrySize`` = 1024 offset-index
or 682 time-index entries) because in-sync followers and consumers look up near the end,
and a plain binary search over a large mmap touches cold pages (Kafka measured produce
latency jumping from a few ms to about a second). The search and its tie-breaks are
reproduced exactly here, since they decide which entry a lookup returns when an index holds
duplicate keys (e.g. a zero-filled tail).

The search runs on a buffer (an mmap, ``bytes``) or on any source of entries: pass
``read(src, position)``, a function returning a tuple whose first item is the key field at
that byte position (the engine's read-only index reader passes one that reads the
entry with ``pread`` and records each probe), and the very same code decides the slot.

Searches take a :class:`IndexSearchKey` that names the entry layout and the field compared:
``OFFSET_INDEX_KEY`` (relative offset), ``OFFSET_INDEX_VALUE`` (position),
``TIME_INDEX_KEY`` (timestamp) and ``TIME_INDEX_VALUE`` (relative offset). Offset targets
are passed relative to the base offset (Kafka compares ``baseOffset + relative`` with an
absolute target; with Python's unbounded ints the two are the same comparison).
"""

from __future__ import annotations

import struct
import sys
from array import array
from typing import Callable, Iterator, NamedTuple

from .errors import CorruptIndexError
from .java import int32

# -- sizes -------------------------------------------------------------------------------

OFFSET_INDEX_ENTRY_SIZE = 8
TIME_INDEX_ENTRY_SIZE = 12

TXN_VERSION_OFFSET = 0
TXN_VERSION_SIZE = 2
TXN_PRODUCER_ID_OFFSET = TXN_VERSION_OFFSET + TXN_VERSION_SIZE
TXN_FIRST_OFFSET_OFFSET = TXN_PRODUCER_ID_OFFSET + 8
TXN_LAST_OFFSET_OFFSET = TXN_FIRST_OFFSET_OFFSET + 8
TXN_LAST_STABLE_OFFSET_OFFSET = TXN_LAST_OFFSET_OFFSET + 8
TXN_INDEX_ENTRY_SIZE = TXN_LAST_STABLE_OFFSET_OFFSET + 8  # 34
TXN_CURRENT_VERSION = 0

DEFAULT_MAX_INDEX_SIZE = 10485760  # segment.index.bytes
WARM_SECTION_BYTES = 8192  # AbstractIndex.warmEntries() = 8192 / entrySize

NO_TIMESTAMP = -1  # RecordBatch.NO_TIMESTAMP
INT32_MAX = (1 << 31) - 1

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_TXN_ENTRY = struct.Struct(">hqqqq")
_TXN_VERSION_BYTE = struct.Struct(">b")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


# -- value types -------------------------------------------------------------------------


class OffsetPosition(NamedTuple):
    """An offset index entry: the absolute offset and its byte position in the .log."""

    offset: int
    position: int


class TimestampOffset(NamedTuple):
    """A time index entry: the largest timestamp seen up to and including ``offset``."""

    timestamp: int
    offset: int


class AbortedTxn(NamedTuple):
    """A transaction index entry (``AbortedTxn``)."""

    version: int
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def __str__(self) -> str:  # AbortedTxn.toString, quoted in the sanity-check message
        return (
            f"AbortedTxn(version={self.version}, producerId={self.producer_id}, "
            f"firstOffset={self.first_offset}, lastOffset={self.last_offset}, "
            f"lastStableOffset={self.last_stable_offset})"
        )


class IndexSearchKey(NamedTuple):
    """Which field of which entry layout a search compares (Kafka's ``IndexSearchType``)."""

    name: str
    entry_size: int
    field_offset: int
    field: struct.Struct


OFFSET_INDEX_KEY = IndexSearchKey("offset index relative offset", OFFSET_INDEX_ENTRY_SIZE, 0, _INT32)
OFFSET_INDEX_VALUE = IndexSearchKey("offset index position", OFFSET_INDEX_ENTRY_SIZE, 4, _INT32)
TIME_INDEX_KEY = IndexSearchKey("time index timestamp", TIME_INDEX_ENTRY_SIZE, 0, _INT64)
TIME_INDEX_VALUE = IndexSearchKey("time index relative offset", TIME_INDEX_ENTRY_SIZE, 8, _INT32)


# -- sizes and counts --------------------------------------------------------------------


def index_entries(length: int, entry_size: int) -> int:
    """Entries Kafka sees in an index file of ``length`` bytes: ``floor(length / size)``."""
    return length // entry_size


def preallocated_length(max_index_size: int, entry_size: int) -> int:
    """Length Kafka gives a new index file: ``max_index_size`` rounded down to the entry size."""
    if max_index_size < entry_size:
        raise ValueError(f"Invalid max index size: {max_index_size}")
    return entry_size * (max_index_size // entry_size)


def warm_entries(entry_size: int) -> int:
    """Size of the warm section in entries: 1024 for the offset index, 682 for the time index."""
    return WARM_SECTION_BYTES // entry_size


def can_append_offset(base_offset: int, offset: int) -> bool:
    """``AbstractIndex.canAppendOffset``: ``0 <= offset - base <= Integer.MAX_VALUE``."""
    return 0 <= offset - base_offset <= INT32_MAX


def relative_offset(base_offset: int, offset: int) -> int:
    """``AbstractIndex.relativeOffset``; raises ValueError as Kafka raises IndexOffsetOverflow."""
    if not can_append_offset(base_offset, offset):
        raise ValueError(f"Integer overflow for offset: {offset} (base offset {base_offset})")
    return offset - base_offset


def _check_entries(buf, entries: int, entry_size: int) -> None:
    # The engine passes the count it keeps next to the mmap; a count the buffer cannot back
    # would otherwise surface as struct.error deep inside a search.
    if entries < 0 or entries * entry_size > len(buf):
        raise CorruptIndexError(
            f"Index buffer of {len(buf)} bytes cannot hold {entries} entries of {entry_size} bytes"
        )


# -- offset index entries ----------------------------------------------------------------


def encode_offset_entry(base_offset: int, offset: int, position: int) -> bytes:
    """One 8-byte offset index entry (``OffsetIndex.append``)."""
    if not 0 <= position <= INT32_MAX:
        raise ValueError(f"Position {position} does not fit an int32 index entry")
    return _OFFSET_ENTRY.pack(relative_offset(base_offset, offset), position)


def decode_offset_entry(buf, slot: int, base_offset: int) -> OffsetPosition:
    """Entry ``slot`` of an offset index (``OffsetIndex.entry``/``parseEntry``)."""
    if slot < 0 or (slot + 1) * OFFSET_INDEX_ENTRY_SIZE > len(buf):
        raise CorruptIndexError(
            f"Attempt to fetch the {slot}th entry from an offset index, which has size "
            f"{len(buf) // OFFSET_INDEX_ENTRY_SIZE}"
        )
    rel, position = _OFFSET_ENTRY.unpack_from(buf, slot * OFFSET_INDEX_ENTRY_SIZE)
    return OffsetPosition(base_offset + rel, position)


def iter_offset_entries(buf, base_offset: int, entries: int | None = None) -> Iterator[OffsetPosition]:
    """Every whole entry of an offset index (or the first ``entries``), in file order."""
    n = index_entries(len(buf), OFFSET_INDEX_ENTRY_SIZE) if entries is None else entries
    _check_entries(buf, n, OFFSET_INDEX_ENTRY_SIZE)
    view = memoryview(buf)[: n * OFFSET_INDEX_ENTRY_SIZE]
    for rel, position in _OFFSET_ENTRY.iter_unpack(view):
        yield OffsetPosition(base_offset + rel, position)


def last_offset_entry(buf, entries: int, base_offset: int) -> OffsetPosition:
    """``OffsetIndex.lastEntry``: the last entry, or ``(base_offset, 0)`` when empty."""
    if entries == 0:
        return OffsetPosition(base_offset, 0)
    _check_entries(buf, entries, OFFSET_INDEX_ENTRY_SIZE)
    return decode_offset_entry(buf, entries - 1, base_offset)


# -- time index entries ------------------------------------------------------------------


def encode_time_entry(base_offset: int, timestamp: int, offset: int) -> bytes:
    """One 12-byte time index entry (``TimeIndex.maybeAppend``)."""
    return _TIME_ENTRY.pack(timestamp, relative_offset(base_offset, offset))


def decode_time_entry(buf, slot: int, base_offset: int) -> TimestampOffset:
    """Entry ``slot`` of a time index (``TimeIndex.entry``/``parseEntry``)."""
    if slot < 0 or (slot + 1) * TIME_INDEX_ENTRY_SIZE > len(buf):
        raise CorruptIndexError(
            f"Attempt to fetch the {slot}th entry from time index which has size "
            f"{len(buf) // TIME_INDEX_ENTRY_SIZE}"
        )
    timestamp, rel = _TIME_ENTRY.unpack_from(buf, slot * TIME_INDEX_ENTRY_SIZE)
    return TimestampOffset(timestamp, base_offset + rel)


def iter_time_entries(buf, base_offset: int, entries: int | None = None) -> Iterator[TimestampOffset]:
    """Every whole entry of a time index (or the first ``entries``), in file order."""
    n = index_entries(len(buf), TIME_INDEX_ENTRY_SIZE) if entries is None else entries
    _check_entries(buf, n, TIME_INDEX_ENTRY_SIZE)
    view = memoryview(buf)[: n * TIME_INDEX_ENTRY_SIZE]
    for timestamp, rel in _TIME_ENTRY.iter_unpack(view):
        yield TimestampOffset(timestamp, base_offset + rel)


def last_time_entry(buf, entries: int, base_offset: int) -> TimestampOffset:
    """``TimeIndex.lastEntryFromIndexFile``: the last entry, or ``(-1, base_offset)``."""
    if entries == 0:
        return TimestampOffset(NO_TIMESTAMP, base_offset)
    _check_entries(buf, entries, TIME_INDEX_ENTRY_SIZE)
    return decode_time_entry(buf, entries - 1, base_offset)


# -- entries as columns ------------------------------------------------------------------

_BIG_ENDIAN = sys.byteorder == "big"


def offset_entry_columns(data) -> tuple[array, array]:
    """The whole entries of an offset index chunk as two ``array('i')`` columns:
    ``(relative offsets, positions)``. Decoded at C speed (a byte swap, strided copies)."""
    both = array("i")
    both.frombytes(bytes(data[:len(data) - len(data) % OFFSET_INDEX_ENTRY_SIZE]))
    if not _BIG_ENDIAN:
        both.byteswap()
    return both[0::2], both[1::2]


def time_entry_columns(data) -> tuple[array, array]:
    """The whole entries of a time index chunk as ``(timestamps array('q'), relative
    offsets array('i'))``, gathered with strided slice copies and byte-swapped."""
    k = len(data) // TIME_INDEX_ENTRY_SIZE
    data = data[:k * TIME_INDEX_ENTRY_SIZE]
    ts, rel = bytearray(8 * k), bytearray(4 * k)
    for j in range(8):
        ts[j::8] = data[j::12]
    for j in range(4):
        rel[j::4] = data[8 + j::12]
    timestamps, offsets = array("q"), array("i")
    timestamps.frombytes(ts)
    offsets.frombytes(rel)
    if not _BIG_ENDIAN:
        timestamps.byteswap()
        offsets.byteswap()
    return timestamps, offsets


# -- transaction index entries -----------------------------------------------------------


def encode_aborted_txn(
    producer_id: int,
    first_offset: int,
    last_offset: int,
    last_stable_offset: int,
    version: int = TXN_CURRENT_VERSION,
) -> bytes:
    """One 34-byte transaction index entry (``new AbortedTxn(...)``)."""
    return _TXN_ENTRY.pack(version, producer_id, first_offset, last_offset, last_stable_offset)


def iter_txn_entries(buf, name: str = "") -> Iterator[AbortedTxn]:
    """Every whole entry of a transaction index; a trailing partial entry is ignored.

    The version is ``AbortedTxn.version()``: byte 0 alone, signed. Kafka throws for a
    version above 0 (so ``0xff..`` reads as -1 and passes); the low byte is never looked at.
    """
    view = memoryview(buf)
    n = len(view) // TXN_INDEX_ENTRY_SIZE
    unpack = _TXN_ENTRY.unpack_from
    version_of = _TXN_VERSION_BYTE.unpack_from
    for i in range(n):
        pos = i * TXN_INDEX_ENTRY_SIZE
        version = version_of(view, pos)[0]
        if version > TXN_CURRENT_VERSION:
            raise CorruptIndexError(
                f"Unexpected aborted transaction version {version} in transaction index "
                f"{name}, current version is {TXN_CURRENT_VERSION}"
            )
        _, producer_id, first, last, lso = unpack(view, pos)
        yield AbortedTxn(version, producer_id, first, last, lso)


# -- lookup (AbstractIndex.indexSlotRangeFor / binarySearch) -----------------------------


#: ``read(src, position)``: a tuple whose first item is the key field at that byte position.
FieldReader = Callable[[object, int], tuple]


def _index_slot_range_for(buf, entries: int, target: int, key: IndexSearchKey, upper: bool,
                          read: FieldReader | None = None) -> int:
    # One function, not a wrapper around a generic one: this is the writer's lookup hot path.
    if entries == 0:
        return -1
    size = key.entry_size
    off = key.field_offset
    if read is None:
        _check_entries(buf, entries, size)
        read = key.field.unpack_from

    first_hot_entry = max(0, entries - 1 - WARM_SECTION_BYTES // size)
    # The target is in the warm section when the first warm entry is strictly below it.
    if read(buf, first_hot_entry * size + off)[0] < target:
        lo, hi = first_hot_entry, entries - 1
    elif read(buf, off)[0] > target:
        # Below the least entry: no lower bound; the first slot is the upper bound.
        return 0 if upper else -1
    else:
        lo, hi = 0, first_hot_entry

    while lo < hi:
        mid = (lo + hi + 1) >> 1  # Java: (lo + hi + 1) >>> 1 on non-negative ints
        found = read(buf, mid * size + off)[0]
        if found > target:
            hi = mid - 1
        elif found < target:
            lo = mid
        else:
            return mid
    if not upper:
        return lo
    return -1 if lo == entries - 1 else lo + 1


SEARCH_KEYS = {
    "offset": OFFSET_INDEX_KEY,
    "position": OFFSET_INDEX_VALUE,
    "timestamp": TIME_INDEX_KEY,
    "time_offset": TIME_INDEX_VALUE,
}


def _search_key(key: IndexSearchKey | str) -> IndexSearchKey:
    if isinstance(key, IndexSearchKey):
        return key
    try:
        return SEARCH_KEYS[key]
    except KeyError:
        raise ValueError(f"Unknown index search key {key!r}; expected one of {sorted(SEARCH_KEYS)}") from None


def largest_lower_bound_slot(buf, entries: int, target: int, key: IndexSearchKey | str,
                             read: FieldReader | None = None) -> int:
    """Slot of the largest entry whose ``key`` field is <= ``target``, or -1.

    Kafka's ``largestLowerBoundSlotFor``, warm section and tie-breaks included. ``key`` is
    an :class:`IndexSearchKey` or one of the names in ``SEARCH_KEYS`` ("offset",
    "position", "timestamp", "time_offset"). For offset fields ``target`` is relative to
    the base offset. With ``read`` (see :data:`FieldReader`), entries come from it and
    ``buf`` is only handed back to it.
    """
    return _index_slot_range_for(buf, entries, target, _search_key(key), False, read)


def smallest_upper_bound_slot(buf, entries: int, target: int, key: IndexSearchKey | str) -> int:
    """Slot of the smallest entry whose ``key`` field is >= ``target``, or -1.

    Kafka's ``smallestUpperBoundSlotFor`` (used with the position by
    ``fetchUpperBoundOffset``). Like Kafka, it returns 0 for a target below the first entry.
    Kafka quirk, kept: a target *equal* to the first entry's key returns slot 1 (or -1 when
    there is only one entry), because the binary search never compares its starting slot;
    every other exact match returns its own slot.
    """
    return _index_slot_range_for(buf, entries, target, _search_key(key), upper=True)


def offset_index_lookup(buf, entries: int, base_offset: int, target_offset: int) -> OffsetPosition:
    """``OffsetIndex.lookup``: the largest entry with offset <= target, else ``(base, 0)``."""
    slot = _index_slot_range_for(buf, entries, target_offset - base_offset, OFFSET_INDEX_KEY, False)
    if slot == -1:
        return OffsetPosition(base_offset, 0)
    return decode_offset_entry(buf, slot, base_offset)


def time_index_lookup(buf, entries: int, base_offset: int, target_timestamp: int) -> TimestampOffset:
    """``TimeIndex.lookup``: the largest entry with timestamp <= target, else ``(-1, base)``."""
    slot = _index_slot_range_for(buf, entries, target_timestamp, TIME_INDEX_KEY, False)
    if slot == -1:
        return TimestampOffset(NO_TIMESTAMP, base_offset)
    return decode_time_entry(buf, slot, base_offset)


def fetch_upper_bound_offset(
    buf, entries: int, base_offset: int, fetch_position: int, fetch_size: int
) -> OffsetPosition | None:
    """``OffsetIndex.fetchUpperBoundOffset``: an entry at or past ``position + size``.

    The sum is a Java ``int`` addition, so it wraps exactly as Kafka's does.
    """
    target = int32(fetch_position + fetch_size)
    slot = _index_slot_range_for(buf, entries, target, OFFSET_INDEX_VALUE, True)
    if slot == -1:
        return None
    return decode_offset_entry(buf, slot, base_offset)


def truncate_slot_count(
    buf, entries: int, base_offset: int, offset: int, key: IndexSearchKey | str = OFFSET_INDEX_KEY
) -> int:
    """Entries left by ``truncateTo(offset)``: every entry with offset >= ``offset`` goes.

    Pass ``OFFSET_INDEX_KEY`` for an offset index and ``TIME_INDEX_VALUE`` for a time index
    (Kafka searches the time index by its offset field). With no entry <= offset, 0 are
    kept; with an entry exactly at ``offset``, its slot; otherwise slot + 1.
    """
    key = _search_key(key)
    if key not in (OFFSET_INDEX_KEY, TIME_INDEX_VALUE):
        raise ValueError(f"truncateTo searches an offset field, not the {key.name}")
    target = offset - base_offset
    slot = _index_slot_range_for(buf, entries, target, key, False)
    if slot < 0:
        return 0
    found = key.field.unpack_from(buf, slot * key.entry_size + key.field_offset)[0]
    return slot if found == target else slot + 1


# -- sanity checks (sanityCheck(), trunk messages) ---------------------------------------


def _entries_for_check(length: int, entries_buf, entry_size: int, name: str) -> int:
    entries = length // entry_size
    if entries * entry_size > len(entries_buf):
        raise CorruptIndexError(
            f"Index file {name} has {entries} entries in {length} bytes but only "
            f"{len(entries_buf)} bytes were supplied"
        )
    return entries


def sanity_check_offset_index(length: int | None, entries_buf, base_offset: int, name: str = "") -> None:
    """``OffsetIndex.sanityCheck``: the last offset must not be below the base offset and
    the file length must be a multiple of 8. ``length`` is the file length (None: the
    buffer's); ``entries_buf`` holds at least its whole entries (normally the mmap)."""
    if length is None:
        length = len(entries_buf)
    entries = _entries_for_check(length, entries_buf, OFFSET_INDEX_ENTRY_SIZE, name)
    # Slices, not a memoryview: a lingering export would keep an mmap from closing.
    last = bytes(entries_buf[(entries - 1) * OFFSET_INDEX_ENTRY_SIZE: entries * OFFSET_INDEX_ENTRY_SIZE]) if entries else None
    sanity_check_offset_index_ends(length, last, base_offset, name)


class IndexSanityProblem(NamedTuple):
    """One rule of an index's ``sanityCheck`` that fails: ``rule`` is ``"last-offset"`` (the
    last entry's offset is below the base offset), ``"timestamps"`` (the last timestamp is
    below the first) or ``"length"`` (not a multiple of the entry size); ``offset`` is the
    last entry's offset (None for ``"length"``); ``message`` is Kafka's."""

    rule: str
    offset: int | None
    message: str


def offset_index_problems(length: int, last_entry: bytes | None, base_offset: int,
                          name: str = "") -> list[IndexSanityProblem]:
    """Every rule of ``OffsetIndex.sanityCheck`` that fails, in Kafka's order, from the file
    length and its last whole entry (None when it has none)."""
    problems = []
    if last_entry is not None:
        last_offset = decode_offset_entry(last_entry, 0, base_offset).offset
        if last_offset < base_offset:
            problems.append(IndexSanityProblem("last-offset", last_offset, (
                f"Corrupt index found, index file {name} has non-zero size but the last offset "
                f"is {last_offset} which is less than the base offset {base_offset}")))
    if length % OFFSET_INDEX_ENTRY_SIZE != 0:
        problems.append(IndexSanityProblem("length", None, (
            f"Index file {name} is corrupt, found {length} bytes which is neither positive "
            f"nor a multiple of {OFFSET_INDEX_ENTRY_SIZE}")))
    return problems


def sanity_check_offset_index_ends(length: int, last_entry: bytes | None, base_offset: int, name: str = "") -> None:
    """:func:`sanity_check_offset_index` from the file length and its last whole entry
    (None when it has none), so a caller can check a huge file by reading 8 bytes."""
    problems = offset_index_problems(length, last_entry, base_offset, name)
    if problems:
        raise CorruptIndexError(problems[0].message)


def sanity_check_time_index(length: int | None, entries_buf, base_offset: int, name: str = "") -> None:
    """``TimeIndex.sanityCheck``: last timestamp >= first timestamp, last offset >= base
    offset, file length a multiple of 12, checked in that order."""
    if length is None:
        length = len(entries_buf)
    entries = _entries_for_check(length, entries_buf, TIME_INDEX_ENTRY_SIZE, name)
    first = bytes(entries_buf[:TIME_INDEX_ENTRY_SIZE]) if entries else None
    last = bytes(entries_buf[(entries - 1) * TIME_INDEX_ENTRY_SIZE: entries * TIME_INDEX_ENTRY_SIZE]) if entries else None
    sanity_check_time_index_ends(length, first, last, base_offset, name)


def time_index_problems(length: int, first_entry: bytes | None, last_entry: bytes | None, base_offset: int,
                        name: str = "") -> list[IndexSanityProblem]:
    """Every rule of ``TimeIndex.sanityCheck`` that fails, in Kafka's order, from the file
    length and its first and last whole entries (None when it has none)."""
    problems = []
    if last_entry is not None:
        last = decode_time_entry(last_entry, 0, base_offset)
        first_timestamp = _INT64.unpack_from(first_entry, 0)[0]
        if last.timestamp < first_timestamp:
            problems.append(IndexSanityProblem("timestamps", last.offset, (
                f"Corrupt time index found, time index file ({name}) has non-zero size but "
                f"the last timestamp is {last.timestamp} which is less than the first "
                f"timestamp {first_timestamp}")))
        if last.offset < base_offset:
            problems.append(IndexSanityProblem("last-offset", last.offset, (
                f"Corrupt time index found, time index file ({name}) has non-zero size but "
                f"the last offset is {last.offset} which is less than the first offset "
                f"{base_offset}")))
    if length % TIME_INDEX_ENTRY_SIZE != 0:
        problems.append(IndexSanityProblem("length", None, (
            f"Time index file {name} is corrupt, found {length} bytes which is neither "
            f"positive nor a multiple of {TIME_INDEX_ENTRY_SIZE}")))
    return problems


def sanity_check_time_index_ends(length: int, first_entry: bytes | None, last_entry: bytes | None,
                                 base_offset: int, name: str = "") -> None:
    """:func:`sanity_check_time_index` from the file length and its first and last whole
    entries (None when it has none)."""
    problems = time_index_problems(length, first_entry, last_entry, base_offset, name)
    if problems:
        raise CorruptIndexError(problems[0].message)


def sanity_check_txn_index(buf, start_offset: int, name: str = "") -> None:
    """``TransactionIndex.sanityCheck``: every entry's last offset >= the segment base."""
    for txn in iter_txn_entries(buf, name):
        if txn.last_offset < start_offset:
            raise CorruptIndexError(
                f"Last offset of aborted transaction {txn} in index {name} is less than "
                f"start offset {start_offset}"
            )
