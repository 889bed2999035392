"""Producer state snapshots (``<20-digit offset>.snapshot``), version 1.

The file name's offset is the log offset up to which (exclusive) producer state was
captured. Layout (Kafka's non-flexible ``PID_SNAPSHOT_MAP_SCHEMA``), big-endian::

    0   int16   version             must be 1
    2   uint32  crc                 CRC-32C of bytes [6, EOF)
    6   int32   entry count         array length
    10  46 * N  entries

    entry + 0   int64  producer_id
          8     int16  epoch
         10     int32  last_sequence             -1 if no batch metadata
         14     int64  last_offset               last data offset, -1 if none
         22     int32  offset_delta              lastSeq - firstSeq of the last batch
         26     int64  timestamp                 the producer's last timestamp
         34     int32  coordinator_epoch         -1 if never set
         38     int64  current_txn_first_offset  first offset of the open transaction, or -1

Reading follows Kafka 3.x's ``ProducerStateManager.readSnapshot`` in its order and with its
messages (``decode_snapshot(kafka_version=4)``: Kafka 4.x's order and messages):
first the schema parse ("Snapshot failed schema validation: Error reading field '<f>': ..."
for a file too short for a field, a negative count, or a count larger than the bytes left),
then the version ("Snapshot contained an unknown file version N"), then the CRC ("Snapshot is
corrupt (CRC is no longer valid). Stored crc: X. Computed crc: Y"). Kafka ignores bytes after
the last entry (the CRC covers them, so they only pass if written with the file); with
``strict=True`` (the default) they are rejected too, after the CRC check. The count is never
used to allocate before it is checked against the bytes present.

Entry order on write is the iteration order of the broker's in-memory producer map. Since
Kafka 3.5 that is a ``java.util.HashMap<Long, ProducerStateEntry>``: buckets in ascending
index, ``index = (h ^ (h >>> 16)) & (capacity - 1)`` with ``h = (int)(pid ^ (pid >>> 32))``,
capacity 16 doubling whenever the size exceeds 3/4 of it, insertion order within a bucket
(a resize keeps it). ``encode_snapshot(order="java")`` emulates this, treating the input
order as insertion order; trees (8+ colliding ids in a 64+ table) are not modelled. Kafka
2.x-3.4 used a Scala map with another order, so readers accept any order and
``order="given"`` writes entries as passed (byte-identical re-encoding of any file).
"""

from __future__ import annotations

import struct
from typing import Iterable, NamedTuple

from plog.formats.crc import crc32c as _crc32c

from .errors import CorruptSnapshotError
from .java import hash_map_order, long_hash_code
from .records import decrement_sequence

PRODUCER_SNAPSHOT_VERSION = 1

VERSION_OFFSET = 0
CRC_OFFSET = VERSION_OFFSET + 2
PRODUCER_ENTRIES_OFFSET = CRC_OFFSET + 4  # the CRC covers [6, EOF): count and entries
ENTRIES_OFFSET = PRODUCER_ENTRIES_OFFSET + 4
ENTRY_SIZE = 46

_HEADER = struct.Struct(">hIi")
_ENTRY = struct.Struct(">qhiqiqiq")
assert _HEADER.size == ENTRIES_OFFSET and _ENTRY.size == ENTRY_SIZE

# Field names and end offsets inside an entry, for Kafka's "Error reading field" message.
_ENTRY_FIELDS = (
    ("producer_id", 8),
    ("epoch", 10),
    ("last_sequence", 14),
    ("last_offset", 22),
    ("offset_delta", 26),
    ("timestamp", 34),
    ("coordinator_epoch", 38),
    ("current_txn_first_offset", 46),
)
_UNDERFLOW = "java.nio.BufferUnderflowException"


class ProducerSnapshotEntry(NamedTuple):
    """One producer's state, field for field as stored."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int

    @property
    def has_batch_metadata(self) -> bool:
        """Kafka restores one ``BatchMetadata`` only when ``last_offset >= 0``."""
        return self.last_offset >= 0

    @property
    def first_sequence(self) -> int:
        """First sequence of the last batch, or -1 (``NO_SEQUENCE``) without batch metadata."""
        if self.last_offset < 0:
            return -1
        return decrement_sequence(self.last_sequence, self.offset_delta)


def _schema_error(detail: str) -> CorruptSnapshotError:
    return CorruptSnapshotError(f"Snapshot failed schema validation: {detail}")


def _check_v4(view: memoryview) -> None:
    """Kafka 4.x's ``ProducerStateManager.readSnapshot`` up to the CRC check (as in 4.3.1).

    It reads the int16 version and checks it, then parses the generated ``ProducerSnapshot``
    message, all inside one ``catch (Exception e)`` that turns any failure into
    ``Snapshot failed schema validation: <e.getMessage()>``: a buffer underflow has no
    message (``null``), a version other than 1 is the wrapped "unknown file version", and a
    count larger than the bytes left is the generated reader's "Tried to allocate a
    collection" message. Bytes after the last entry are ignored, as in 3.x."""
    size = len(view)
    if size < CRC_OFFSET:
        raise _schema_error("null")
    version = struct.unpack_from(">h", view, 0)[0]
    if version != PRODUCER_SNAPSHOT_VERSION:
        raise _schema_error(f"Snapshot contained an unknown file version {version}")
    if size < ENTRIES_OFFSET:
        raise _schema_error("null")  # the crc or the array length runs off the end
    count = struct.unpack_from(">i", view, PRODUCER_ENTRIES_OFFSET)[0]
    remaining = size - ENTRIES_OFFSET
    if count < 0:
        raise _schema_error("non-nullable field producerEntries was serialized as null")
    if count > remaining:
        raise _schema_error(f"Tried to allocate a collection of size {count}, but there are only "
                            f"{remaining} bytes remaining.")
    if count * ENTRY_SIZE > remaining:
        raise _schema_error("null")  # an entry's field runs off the end


def snapshot_crc(buf) -> int:
    """CRC-32C of bytes [6, EOF), the value stored at bytes 2-5."""
    return _crc32c(memoryview(buf)[PRODUCER_ENTRIES_OFFSET:])


def decode_snapshot(buf, strict: bool = True, kafka_version: int = 3) -> list[ProducerSnapshotEntry]:
    """Decode a producer snapshot file's bytes into its entries, in file order.

    ``kafka_version`` picks whose checks and messages a corrupt file gets: 3 (the default)
    is the schema-based reader of Kafka 3.x described above; 4 is Kafka 4.x's, which reads
    the version first and then the generated ``ProducerSnapshot`` message
    (:func:`_check_v4`)."""
    view = memoryview(buf)
    size = len(view)
    if kafka_version >= 4:
        _check_v4(view)
    # Schema.read, field by field: version, crc, then the array.
    if size < CRC_OFFSET:
        raise _schema_error(f"Error reading field 'version': {_UNDERFLOW}")
    if size < PRODUCER_ENTRIES_OFFSET:
        raise _schema_error(f"Error reading field 'crc': {_UNDERFLOW}")
    if size < ENTRIES_OFFSET:
        raise _schema_error(f"Error reading field 'producer_entries': {_UNDERFLOW}")
    version, stored_crc, count = _HEADER.unpack_from(view, 0)
    remaining = size - ENTRIES_OFFSET
    if count < 0:
        raise _schema_error(f"Error reading field 'producer_entries': Array size {count} cannot be negative")
    if count > remaining:
        raise _schema_error(
            f"Error reading field 'producer_entries': Error reading array of size {count}, "
            f"only {remaining} bytes available"
        )
    if count * ENTRY_SIZE > remaining:
        # The first entry that does not fit fails on the first field that runs off the end.
        short = remaining % ENTRY_SIZE
        field = next(name for name, end in _ENTRY_FIELDS if short < end)
        raise _schema_error(
            f"Error reading field 'producer_entries': Error reading field '{field}': {_UNDERFLOW}"
        )
    if version != PRODUCER_SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"Snapshot contained an unknown file version {version}")
    computed_crc = _crc32c(view[PRODUCER_ENTRIES_OFFSET:])
    if stored_crc != computed_crc:
        raise CorruptSnapshotError(
            f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {stored_crc}. "
            f"Computed crc: {computed_crc}"
        )
    end = ENTRIES_OFFSET + count * ENTRY_SIZE
    if strict and end != size:
        raise _schema_error(
            f"{size - end} bytes follow the {count} producer entries of {ENTRY_SIZE} bytes each"
        )
    make = ProducerSnapshotEntry._make
    return [make(fields) for fields in _ENTRY.iter_unpack(view[ENTRIES_OFFSET:end])]


def java_hash_map_order(producer_ids: Iterable[int], capacity: int = 16) -> list[int]:
    """Iteration order of a ``java.util.HashMap<Long, ...>`` after putting ``producer_ids``.

    ``capacity`` is the table size to start from (16 for ``new HashMap<>()``); the broker's
    map never shrinks, so a map that once held many producers iterates with its larger
    table. A repeated id keeps its first position, as ``put`` on an existing key does.
    """
    if capacity < 1 or capacity & (capacity - 1):
        raise ValueError(f"HashMap capacity must be a power of two, not {capacity}")
    return hash_map_order(producer_ids, long_hash_code, capacity)


def encode_snapshot(
    entries: Iterable[ProducerSnapshotEntry], order: str = "java", capacity: int = 16
) -> bytes:
    """Snapshot file bytes for ``entries``.

    ``order="java"`` writes them in the order trunk's HashMap would iterate them (input order
    taken as insertion order; a repeated producer id keeps its first position and its last
    entry, as ``Map.put`` does); ``order="given"`` writes them as passed.
    """
    entries = list(entries)
    if order == "java":
        by_id = {entry.producer_id: entry for entry in entries}
        entries = [by_id[pid] for pid in java_hash_map_order(by_id, capacity)]
    elif order != "given":
        raise ValueError(f"Unknown snapshot entry order {order!r}; expected 'java' or 'given'")
    out = bytearray(ENTRIES_OFFSET + ENTRY_SIZE * len(entries))
    _HEADER.pack_into(out, 0, PRODUCER_SNAPSHOT_VERSION, 0, len(entries))
    pack_into = _ENTRY.pack_into
    for i, entry in enumerate(entries):
        try:
            pack_into(out, ENTRIES_OFFSET + i * ENTRY_SIZE, *entry)
        except struct.error as e:
            raise ValueError(f"{entry} does not fit the snapshot's field widths: {e}") from None
    struct.pack_into(">I", out, CRC_OFFSET, snapshot_crc(out))
    return bytes(out)
