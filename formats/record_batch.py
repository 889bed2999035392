"""Record batch, magic v2 (Kafka's ``DefaultRecordBatch`` / ``DefaultRecord``).

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

Record (inside the records region; varints are zig-zag, see ``varint``)::

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
    keyLength varint (-1 null) | key | valueLength varint (-1 null) | value |
    headersCount varint | (headerKeyLength varint | headerKey | headerValueLength varint
    (-1 null) | headerValue) * headersCount

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
from itertools import repeat
from typing import Iterable, Iterator, Sequence

from crc32c import crc32c

from . import compression
from .errors import CorruptRecordError, InvalidRecordError, FormatError
from .records import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    Record,
    decode_header_key,
    encode_header_key,
    increment_sequence,
)
from .varint import _SMALL as _SMALL_VARINTS
from .varint import encode_varint, encode_varlong, read_varint, read_varlong

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

_new_record = tuple.__new__

# Zig-zag decoding of every value a one- or two-byte varint can hold (14 bits): one list
# index replaces four integer operations per field in the record loop.
_ZIGZAG = [(z >> 1) ^ -(z & 1) for z in range(1 << 14)]


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


def decode_records(
    data: bytes, count: int, base_offset: int, base_timestamp: int, log_append_time: int | None = None
) -> list[Record]:
    """Decode ``count`` records from ``data`` (an uncompressed records region).

    Raises CorruptRecordError/InvalidRecordError (position None: the caller knows where
    the batch is) when ``data`` does not hold exactly ``count`` well-formed records.
    """
    records = _decode_records(data, count, base_offset, base_timestamp)
    if log_append_time is not None:
        # LogAppendTime: every record reports the batch maxTimestamp (rare; kept out of the loop).
        records = [_new_record(Record, (r[0], log_append_time, r[2], r[3], r[4])) for r in records]
    return records


def _decode_records(data, count, base_offset, base_timestamp):
    """The decode loop of :func:`decode_records`.

    The varint reads are inlined for the one- and two-byte cases (values -8192..8191),
    which cover almost every length, delta and key size; longer ones go through
    ``read_varint``/``read_varlong``. (Two-byte lengths matter: a 100-byte value already
    needs two.)
    Positions in raised errors are relative to ``data``'s start plus the 61-byte header,
    i.e. relative to the batch.
    """
    out: list[Record] = []
    append = out.append
    zz = _ZIGZAG  # a local: the loop runs once per record
    n = len(data)
    pos = 0
    try:
        for _ in range(count):
            # length (zz: the zig-zag decoding of every one- and two-byte varint, precomputed)
            b = data[pos]
            if b < 0x80:
                length = zz[b]
                pos += 1
            elif data[pos + 1] < 0x80:
                length = zz[(b & 0x7F) | (data[pos + 1] << 7)]
                pos += 2
            else:
                length, pos = read_varint(data, pos)
            end = pos + length
            if end > n:
                raise CorruptRecordError(
                    f"Invalid record size: expected {length} bytes in record payload, but instead the buffer "
                    f"has only {n - pos} remaining bytes",
                    None,
                )
            pos += 1  # attributes: unused, always 0
            # timestampDelta (varlong)
            b = data[pos]
            if b < 0x80:
                ts_delta = zz[b]
                pos += 1
            elif data[pos + 1] < 0x80:
                ts_delta = zz[(b & 0x7F) | (data[pos + 1] << 7)]
                pos += 2
            else:
                ts_delta, pos = read_varlong(data, pos)
            # offsetDelta
            b = data[pos]
            if b < 0x80:
                off_delta = zz[b]
                pos += 1
            elif data[pos + 1] < 0x80:
                off_delta = zz[(b & 0x7F) | (data[pos + 1] << 7)]
                pos += 2
            else:
                off_delta, pos = read_varint(data, pos)
            # key
            b = data[pos]
            if b < 0x80:
                klen = zz[b]
                pos += 1
            elif data[pos + 1] < 0x80:
                klen = zz[(b & 0x7F) | (data[pos + 1] << 7)]
                pos += 2
            else:
                klen, pos = read_varint(data, pos)
            if klen >= 0:
                key = data[pos : pos + klen]
                pos += klen
            else:
                key = None
            # value (a key length that lied is caught by the pos != end check below)
            b = data[pos]
            if b < 0x80:
                vlen = zz[b]
                pos += 1
            elif data[pos + 1] < 0x80:
                vlen = zz[(b & 0x7F) | (data[pos + 1] << 7)]
                pos += 2
            else:
                vlen, pos = read_varint(data, pos)
            if vlen >= 0:
                value = data[pos : pos + vlen]
                pos += vlen
            else:
                value = None
            # headers
            b = data[pos]
            if b == 0:
                headers = ()
                pos += 1
            else:
                headers, pos = _decode_headers(data, pos, end)
            if pos != end:
                raise CorruptRecordError(
                    f"Invalid record size: expected to read {length} bytes in record payload, but instead "
                    f"read {pos - (end - length)}",
                    None,
                )
            append((base_offset + off_delta, base_timestamp + ts_delta, key, value, headers))
    except IndexError:
        # A field read ran off the end: either fewer records than the count, or
        # lengths inside a record that lied.
        if pos >= n:
            raise CorruptRecordError("Incorrect declared batch size, premature EOF reached", None) from None
        raise CorruptRecordError("Found invalid record structure", None) from None
    if pos != n:
        raise CorruptRecordError("Incorrect declared batch size, records still remaining in file", None)
    # Plain tuples in the loop, turned into Records by one C-level map: cheaper than a
    # tuple.__new__(Record, ...) call per record inside the loop.
    return list(map(_new_record, repeat(Record, len(out)), out))


def _decode_headers(data: bytes, pos: int, end: int) -> tuple[tuple, int]:
    count, pos = read_varint(data, pos)
    if count < 0:
        raise InvalidRecordError(f"Found invalid number of record headers {count}", None)
    if count > end - pos:
        raise CorruptRecordError(f"Found invalid number of record headers {count}", None)
    headers = []
    for _ in range(count):
        klen, pos = read_varint(data, pos)
        if klen < 0:
            raise InvalidRecordError(f"Invalid negative header key size {klen}", None)
        if pos + klen > end:
            raise CorruptRecordError("Found invalid record structure", None)
        hkey = decode_header_key(data[pos : pos + klen])
        pos += klen
        vlen, pos = read_varint(data, pos)
        if vlen >= 0:
            if pos + vlen > end:
                raise CorruptRecordError("Found invalid record structure", None)
            hval = data[pos : pos + vlen]
            pos += vlen
        else:
            hval = None
        headers.append((hkey, hval))
        if pos > end:
            raise CorruptRecordError("Found invalid record structure", None)
    return tuple(headers), pos


# ---------------------------------------------------------------------------------------
# Encoding


def encode_record(offset_delta: int, timestamp_delta: int, key, value, headers=()) -> bytes:
    """One record's bytes, length prefix included (``DefaultRecord.writeTo``)."""
    parts = [b"\x00", encode_varlong(timestamp_delta), encode_varint(offset_delta)]
    if key is None:
        parts.append(b"\x01")
    else:
        parts.append(encode_varint(len(key)))
        parts.append(key)
    if value is None:
        parts.append(b"\x01")
    else:
        parts.append(encode_varint(len(value)))
        parts.append(value)
    if headers:
        parts.append(encode_varint(len(headers)))
        for hkey, hval in headers:
            hk = encode_header_key(hkey)
            parts.append(encode_varint(len(hk)))
            parts.append(hk)
            if hval is None:
                parts.append(b"\x01")
            else:
                parts.append(encode_varint(len(hval)))
                parts.append(hval)
    else:
        parts.append(b"\x00")
    body = b"".join(parts)
    return encode_varint(len(body)) + body


def _encode_records(records: Sequence, base_offset: int, base_timestamp: int) -> tuple[bytearray, int, int]:
    """Encode records; return (bytes, max timestamp, last offset delta).

    The common record (small deltas and lengths, no headers) is built with one join and
    precomputed varint encodings; :func:`encode_record` is the plain reference of the
    same layout and is used for records with headers."""
    out = bytearray()
    max_ts = NO_TIMESTAMP
    last_delta = -1
    small = _SMALL_VARINTS.get
    join = b"".join
    for rec in records:
        offset, ts, key, value = rec[0], rec[1], rec[2], rec[3]
        headers = rec[4] if len(rec) > 4 else ()
        delta = offset - base_offset
        if delta <= last_delta:
            raise ValueError(f"record offsets must increase strictly (offset {offset} after delta {last_delta})")
        if ts < 0 and ts != NO_TIMESTAMP:
            raise ValueError(f"Invalid negative timestamp {ts}")
        if key is not None and not isinstance(key, (bytes, bytearray, memoryview)):
            raise TypeError(f"record key must be bytes or None, not {type(key).__name__}")
        if value is not None and not isinstance(value, (bytes, bytearray, memoryview)):
            raise TypeError(f"record value must be bytes or None, not {type(value).__name__}")
        if headers:
            out += encode_record(delta, ts - base_timestamp, key, value, headers)
        else:
            ts_delta = ts - base_timestamp
            body = join((
                b"\x00",
                small(ts_delta) or encode_varlong(ts_delta),
                small(delta) or encode_varint(delta),
                b"\x01" if key is None else small(len(key)) or encode_varint(len(key)),
                b"" if key is None else key,
                b"\x01" if value is None else small(len(value)) or encode_varint(len(value)),
                b"" if value is None else value,
                b"\x00",
            ))
            out += small(len(body)) or encode_varint(len(body))
            out += body
        last_delta = delta
        if ts > max_ts:
            max_ts = ts
    return out, max_ts, last_delta


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
    payload, max_ts, last_delta = _encode_records(records, base_offset, base_timestamp)
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
