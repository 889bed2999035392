"""Record batch, magic v2 (Kafka's ``DefaultRecordBatch``, built as ``MemoryRecordsBuilder`` does).

Batch header, 61 bytes, big-endian (``RECORD_BATCH_OVERHEAD``)::

    offset size field
       0    8   baseOffset            absolute offset of the first record
       8    4   batchLength           bytes after this field = batch size - 12
      12    4   partitionLeaderEpoch  not covered by the CRC (the leader rewrites it)
      16    1   magic                 2
      17    4   crc                   CRC-32C of bytes [21, end of batch), unsigned
      21    2   attributes            bits 0-2 codec, 3 timestamp type, 4 transactional,
                                      5 control, 6 delete horizon present; 7-15 unused
      23    4   lastOffsetDelta
      27    8   baseTimestamp         or the delete horizon when attribute bit 6 is set
      35    8   maxTimestamp
      43    8   producerId            -1 = none
      51    2   producerEpoch         -1 = none
      53    4   baseSequence          -1 = none
      57    4   recordsCount
      61    -   records               uncompressed, or one stream of the batch's codec

The records region holds ``recordsCount`` records, laid out and decoded by
``default_record`` (:func:`~plog.formats.default_record.decode_records`, and
:func:`~plog.formats.default_record.record_heads` for readers that need no values).

Invariants this module keeps:

* The CRC covers exactly ``[21, 12 + batchLength)``; ``baseOffset`` and
  ``partitionLeaderEpoch`` may be rewritten without touching it.
* A v2 batch decodes to exactly ``recordsCount`` records and its records region (after
  decompression) is consumed exactly; anything else is a :class:`CorruptRecordError`.
* Decompression is bounded by a caller-given ``max_decompressed`` so a hostile batch
  cannot make the reader allocate more than that.
* When the timestamp type is LogAppendTime, every record reports the batch
  ``maxTimestamp``; the stored deltas are ignored, as Kafka does.
"""

from __future__ import annotations

import struct
from typing import Iterable, Iterator, Sequence

from plog.formats.crc import crc32c

from . import compression
from .default_record import decode_records, encode_records
from .errors import CorruptRecordError, InvalidRecordError, FormatError
from .records import CREATE_TIME, LOG_APPEND_TIME, NO_SEQUENCE, NO_TIMESTAMP, Record, increment_sequence

# Field offsets, chained as in DefaultRecordBatch so each one names its predecessor.
BASE_OFFSET_OFFSET = 0
LENGTH_OFFSET = BASE_OFFSET_OFFSET + 8
PARTITION_LEADER_EPOCH_OFFSET = LENGTH_OFFSET + 4
MAGIC_OFFSET = PARTITION_LEADER_EPOCH_OFFSET + 4
CRC_OFFSET = MAGIC_OFFSET + 1
ATTRIBUTES_OFFSET = CRC_OFFSET + 4
LAST_OFFSET_DELTA_OFFSET = ATTRIBUTES_OFFSET + 2
BASE_TIMESTAMP_OFFSET = LAST_OFFSET_DELTA_OFFSET + 4
MAX_TIMESTAMP_OFFSET = BASE_TIMESTAMP_OFFSET + 8
PRODUCER_ID_OFFSET = MAX_TIMESTAMP_OFFSET + 8
PRODUCER_EPOCH_OFFSET = PRODUCER_ID_OFFSET + 8
BASE_SEQUENCE_OFFSET = PRODUCER_EPOCH_OFFSET + 2
RECORDS_COUNT_OFFSET = BASE_SEQUENCE_OFFSET + 4
RECORDS_OFFSET = RECORDS_COUNT_OFFSET + 4
RECORD_BATCH_OVERHEAD = RECORDS_OFFSET  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the part of the size not counted by batchLength
CRC_START = ATTRIBUTES_OFFSET

MAGIC = 2

COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20
DELETE_HORIZON_FLAG_MASK = 0x40

# The whole header in one unpack: q baseOffset, i batchLength, i ple, b magic, I crc,
# h attributes, i lastOffsetDelta, q baseTimestamp, q maxTimestamp, q producerId,
# h producerEpoch, i baseSequence, i recordsCount.
HEADER = struct.Struct(">qiibIhiqqqhii")
assert HEADER.size == RECORD_BATCH_OVERHEAD

_Q = struct.Struct(">q")
_I = struct.Struct(">i")
_CRC = struct.Struct(">I")

# Smallest possible encoded record: length(1) attrs(1) tsDelta(1) offsetDelta(1)
# keyLen(1) valueLen(1) headers(1). Used to reject absurd record counts early.
MIN_RECORD_SIZE = 7

#: Default cap on the decompressed size of one batch's records. Kafka's batches are at
#: most max.message.bytes (1 MiB by default) compressed; 256 MiB leaves room for very
#: compressible data while keeping a hostile batch from exhausting memory.
DEFAULT_MAX_DECOMPRESSED = 256 * 1024 * 1024


class RecordBatch:
    """A read-only view of one v2 batch.

    ``buffer`` is a memoryview of exactly the batch's bytes (``size_in_bytes`` long);
    ``position`` is where it started in the buffer it was read from (a file position
    when that buffer is a segment). The header is unpacked once, on construction.
    """

    __slots__ = (
        "buffer",
        "position",
        "base_offset",
        "batch_length",
        "partition_leader_epoch",
        "magic",
        "crc",
        "attributes",
        "last_offset_delta",
        "base_timestamp",
        "max_timestamp",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "records_count",
    )

    def __init__(self, buffer: memoryview, position: int = 0):
        if len(buffer) < RECORD_BATCH_OVERHEAD:
            raise CorruptRecordError(
                f"Record batch is corrupt (the size {len(buffer)} is smaller than the minimum "
                f"allowed overhead {RECORD_BATCH_OVERHEAD})",
                position,
            )
        (
            self.base_offset,
            self.batch_length,
            self.partition_leader_epoch,
            self.magic,
            self.crc,
            self.attributes,
            self.last_offset_delta,
            self.base_timestamp,
            self.max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self.records_count,
        ) = HEADER.unpack_from(buffer, 0)
        self.buffer = buffer
        self.position = position

    @classmethod
    def _from_header(cls, header: tuple, buffer: memoryview, position: int) -> "RecordBatch":
        """Build from an already unpacked header (the entry iterator's fast path)."""
        self = cls.__new__(cls)
        (
            self.base_offset,
            self.batch_length,
            self.partition_leader_epoch,
            self.magic,
            self.crc,
            self.attributes,
            self.last_offset_delta,
            self.base_timestamp,
            self.max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self.records_count,
        ) = header
        self.buffer = buffer
        self.position = position
        return self

    # -- derived header facts -------------------------------------------------------

    @property
    def size_in_bytes(self) -> int:
        return LOG_OVERHEAD + self.batch_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_CODEC_MASK

    @property
    def compression_name(self) -> str:
        return compression.codec_name(self.attributes & COMPRESSION_CODEC_MASK)

    @property
    def timestamp_type(self) -> int:
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_FLAG_MASK)

    @property
    def delete_horizon_ms(self) -> int | None:
        """The delete horizon (KIP-534) when attribute bit 6 is set, else None."""
        return self.base_timestamp if self.attributes & DELETE_HORIZON_FLAG_MASK else None

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return increment_sequence(self.base_sequence, self.last_offset_delta)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    # -- validation -----------------------------------------------------------------

    def compute_crc(self) -> int:
        return crc32c(self.buffer[CRC_START:])

    def is_valid(self) -> bool:
        return self.size_in_bytes >= RECORD_BATCH_OVERHEAD and self.crc == crc32c(self.buffer[CRC_START:])

    def ensure_valid(self) -> None:
        """Raise :class:`CorruptRecordError` as Kafka's ``ensureValid`` does."""
        if self.size_in_bytes < RECORD_BATCH_OVERHEAD:
            raise CorruptRecordError(
                f"Record batch is corrupt (the size {self.size_in_bytes} is smaller than the minimum "
                f"allowed overhead {RECORD_BATCH_OVERHEAD})",
                self.position,
            )
        computed = crc32c(self.buffer[CRC_START:])
        if computed != self.crc:
            raise CorruptRecordError(
                f"Record is corrupt (stored crc = {self.crc}, computed crc = {computed})", self.position
            )

    # -- records ----------------------------------------------------------------------

    def records_payload(self, max_decompressed: int = DEFAULT_MAX_DECOMPRESSED) -> bytes:
        """The records region, decompressed: the concatenated record encodings."""
        raw = self.buffer[RECORDS_OFFSET:]
        codec = self.attributes & COMPRESSION_CODEC_MASK
        if codec == 0:
            return bytes(raw)
        try:
            return compression.decompress(codec, raw, max_decompressed, magic=MAGIC)
        except FormatError as e:
            raise e.at(self.position + RECORDS_OFFSET) if e.position is None else e

    def records(self, max_decompressed: int = DEFAULT_MAX_DECOMPRESSED) -> list[Record]:
        """Decode every record. Raises CorruptRecordError/InvalidRecordError naming the
        batch position when the records region does not hold exactly ``records_count``
        well-formed records."""
        count = self.records_count
        if count < 0:
            raise InvalidRecordError(f"Found invalid record count {count} in magic v2 batch", self.position)
        if count == 0:
            return []
        payload = self.records_payload(max_decompressed)
        if count > len(payload) // MIN_RECORD_SIZE + 1:
            raise CorruptRecordError("Incorrect declared batch size, premature EOF reached", self.position)
        if self.attributes & TIMESTAMP_TYPE_MASK:
            log_append_time = self.max_timestamp
        else:
            log_append_time = None
        try:
            return decode_records(payload, count, self.base_offset, self.base_timestamp, log_append_time)
        except FormatError as e:
            raise e.at(self.position) if e.position is None else e

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records())

    def __repr__(self) -> str:
        return (
            f"RecordBatch(base_offset={self.base_offset}, last_offset={self.last_offset}, "
            f"count={self.records_count}, codec={self.compression_name}, position={self.position}, "
            f"size={self.size_in_bytes})"
        )


def encode_batch(
    records: Sequence,
    *,
    base_offset: int = 0,
    compression_codec: int = 0,
    compression_level: int | None = None,
    timestamp_type: int = CREATE_TIME,
    log_append_time: int | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = -1,
    delete_horizon_ms: int | None = None,
    last_offset_delta: int | None = None,
) -> bytes:
    """Build one v2 batch the way Kafka's ``MemoryRecordsBuilder`` does.

    ``records`` are ``Record``-shaped tuples ``(offset, timestamp, key, value[, headers])``
    with absolute, strictly increasing offsets (the first may exceed ``base_offset``, as
    after compaction). ``baseTimestamp`` is the first record's timestamp, or the delete
    horizon when one is given (record deltas are then relative to it, KIP-534).
    ``maxTimestamp`` is the largest record timestamp (CreateTime) or ``log_append_time``.
    ``last_offset_delta`` may be forced (the cleaner keeps the original last offset).

    Like Kafka, a builder with no records writes nothing: the result is ``b""``. Use
    :func:`encode_empty_batch` for the header-only batches compaction leaves behind.
    """
    if not records:
        return b""
    if timestamp_type not in (CREATE_TIME, LOG_APPEND_TIME):
        raise ValueError("magic v2 batches need CreateTime or LogAppendTime")
    if delete_horizon_ms is not None:
        base_timestamp = delete_horizon_ms
    else:
        base_timestamp = records[0][1]
    payload, max_ts, last_delta = encode_records(records, base_offset, base_timestamp)
    if last_offset_delta is not None:
        if last_offset_delta < last_delta:
            raise ValueError("last_offset_delta is below the last record's offset delta")
        last_delta = last_offset_delta
    if timestamp_type == LOG_APPEND_TIME:
        if log_append_time is None:
            raise ValueError("LogAppendTime batches need log_append_time")
        max_ts = log_append_time
    if compression_codec:
        payload = compression.compress(compression_codec, bytes(payload), level=compression_level, magic=MAGIC)
    attributes = compression_codec & COMPRESSION_CODEC_MASK
    if timestamp_type == LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_FLAG_MASK
    if is_control:
        attributes |= CONTROL_FLAG_MASK
    if delete_horizon_ms is not None:
        attributes |= DELETE_HORIZON_FLAG_MASK
    return _assemble(
        base_offset,
        partition_leader_epoch,
        attributes,
        last_delta,
        base_timestamp,
        max_ts,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
        payload,
    )


def encode_empty_batch(
    *,
    base_offset: int,
    last_offset: int,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    max_timestamp: int = NO_TIMESTAMP,
    timestamp_type: int = CREATE_TIME,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A header-only batch (``DefaultRecordBatch.writeEmptyHeader``): count 0,
    batchLength 49, no compression, baseTimestamp -1, delete-horizon bit clear."""
    attributes = 0
    if timestamp_type == LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_FLAG_MASK
    if is_control:
        attributes |= CONTROL_FLAG_MASK
    return _assemble(
        base_offset,
        partition_leader_epoch,
        attributes,
        last_offset - base_offset,
        NO_TIMESTAMP,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        0,
        b"",
    )


def _assemble(
    base_offset, ple, attributes, last_delta, base_ts, max_ts, pid, epoch, base_seq, count, payload
) -> bytes:
    size = RECORD_BATCH_OVERHEAD + len(payload)
    buf = bytearray(size)
    HEADER.pack_into(
        buf, 0, base_offset, size - LOG_OVERHEAD, ple, MAGIC, 0, attributes, last_delta, base_ts, max_ts, pid, epoch,
        base_seq, count,
    )
    buf[RECORDS_OFFSET:] = payload
    _CRC.pack_into(buf, CRC_OFFSET, crc32c(memoryview(buf)[CRC_START:]))
    return bytes(buf)


# ---------------------------------------------------------------------------------------
# In-place rewrites the broker makes (LogValidator), outside or inside the CRC.


def set_base_offset(batch: bytearray | memoryview, base_offset: int) -> None:
    """Rewrite baseOffset (bytes 0-7, outside the CRC)."""
    _Q.pack_into(batch, BASE_OFFSET_OFFSET, base_offset)


def set_partition_leader_epoch(batch: bytearray | memoryview, epoch: int) -> None:
    """Rewrite partitionLeaderEpoch (bytes 12-15, outside the CRC)."""
    _I.pack_into(batch, PARTITION_LEADER_EPOCH_OFFSET, epoch)


def set_max_timestamp(batch: bytearray | memoryview, timestamp_type: int, max_timestamp: int) -> None:
    """Kafka's ``setMaxTimestamp``: set the timestamp type bit and maxTimestamp, then
    recompute the CRC (only when something changed, as Kafka does)."""
    view = memoryview(batch)
    attributes = struct.unpack_from(">h", view, ATTRIBUTES_OFFSET)[0]
    current_type = LOG_APPEND_TIME if attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME
    current_max = _Q.unpack_from(view, MAX_TIMESTAMP_OFFSET)[0]
    if current_type == timestamp_type and current_max == max_timestamp:
        return
    if timestamp_type == LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    else:
        attributes &= ~TIMESTAMP_TYPE_MASK
    struct.pack_into(">h", view, ATTRIBUTES_OFFSET, attributes)
    _Q.pack_into(view, MAX_TIMESTAMP_OFFSET, max_timestamp)
    _CRC.pack_into(view, CRC_OFFSET, crc32c(view[CRC_START:]))


def iter_records(batches: Iterable[RecordBatch]) -> Iterator[Record]:
    """Flatten the records of several batches."""
    for batch in batches:
        yield from batch.records()
