"""Legacy messages, magic v0 and v1 (Kafka's ``LegacyRecord`` / ``AbstractLegacyRecordBatch``).

A log entry is an offset, a size and one message::

    offset size field
       0    8   offset        absolute offset (for a compressed wrapper: its last inner offset)
       8    4   messageSize   bytes from crc to the end of the value
      12    4   crc           CRC-32 (IEEE, zlib) of bytes [16, end of message), unsigned
      16    1   magic         0 or 1
      17    1   attributes    bits 0-2 codec (0-3; zstd is not allowed), bit 3 timestamp
                              type in v1 (0 CreateTime, 1 LogAppendTime)
      18    8   timestamp     v1 only
    18/26   4   keyLength     -1 = null
       .    k   key
       .    4   valueLength   -1 = null
       .    v   value

A compressed "wrapper" message has a null key and, as value, the compressed bytes of an
inner message set (whole log entries, each uncompressed). Inner offsets are relative
(0, 1, ...) in v1, with the wrapper offset being the absolute offset of the last inner
message, and absolute in v0. In v1 a LogAppendTime wrapper's timestamp is reported by
every inner record.

Invariants: a message is at least 14 bytes (v0) or 22 (v1) after the log overhead;
decoding never reads past the entry; inner message sets are bounded by the caller's
``max_decompressed``.
"""

from __future__ import annotations

import struct
import zlib
from typing import Sequence

from . import compression
from .errors import CorruptRecordError, FormatError, InvalidRecordError, UnsupportedCodecError
from .records import CREATE_TIME, LOG_APPEND_TIME, NO_TIMESTAMP, NO_TIMESTAMP_TYPE, LegacyRecord

LOG_OVERHEAD = 12
OFFSET_OFFSET = 0
SIZE_OFFSET = 8
CRC_OFFSET = 12  # from the entry start; CRC covers [MAGIC_OFFSET, end)
MAGIC_OFFSET = CRC_OFFSET + 4
ATTRIBUTES_OFFSET = MAGIC_OFFSET + 1
TIMESTAMP_OFFSET = ATTRIBUTES_OFFSET + 1
KEY_SIZE_OFFSET_V0 = TIMESTAMP_OFFSET
KEY_SIZE_OFFSET_V1 = TIMESTAMP_OFFSET + 8
RECORD_OVERHEAD_V0 = 14  # crc + magic + attributes + key length + value length
RECORD_OVERHEAD_V1 = 22  # v0 + timestamp

COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08

LEGACY_ENTRY_HEAD = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_Q = struct.Struct(">q")
_I = struct.Struct(">i")

DEFAULT_MAX_DECOMPRESSED = 256 * 1024 * 1024


def _sized(buf, pos: int, end: int, what: str, base: int):
    """Read an int32-length-prefixed byte string ending at or before ``end``."""
    if pos + 4 > end:
        raise CorruptRecordError(f"Message is truncated: no room for the {what} length", base + pos)
    (n,) = _I.unpack_from(buf, pos)
    pos += 4
    if n < 0:
        return None, pos
    if pos + n > end:
        raise CorruptRecordError(
            f"Message {what} length {n} runs past the end of the message ({end - pos} bytes left)", base + pos - 4
        )
    return bytes(buf[pos : pos + n]), pos + n


class LegacyBatch:
    """One v0/v1 log entry seen as a batch: an uncompressed message is a batch of one
    record; a compressed wrapper is a batch of its inner messages.

    ``buffer`` is a memoryview of exactly the entry (12 + messageSize bytes).
    """

    __slots__ = ("buffer", "position", "offset", "message_size", "crc", "magic", "attributes", "timestamp",
                 "key", "value", "_base_offset")

    def __init__(self, buffer: memoryview, position: int = 0):
        n = len(buffer)
        if n < LOG_OVERHEAD + RECORD_OVERHEAD_V0:
            raise CorruptRecordError(
                f"Record is corrupt (crc could not be retrieved as the record is too small, size = {n - LOG_OVERHEAD})",
                position,
            )
        self.offset, self.message_size, self.crc, self.magic, self.attributes = LEGACY_ENTRY_HEAD.unpack_from(buffer, 0)
        self.buffer = buffer
        self.position = position
        self._base_offset = None
        if self.magic == 0:
            self.timestamp = NO_TIMESTAMP
            pos = KEY_SIZE_OFFSET_V0
        elif self.magic == 1:
            if n < LOG_OVERHEAD + RECORD_OVERHEAD_V1:
                raise CorruptRecordError(f"Magic v1 message of size {n - LOG_OVERHEAD} is below the minimum 22", position)
            (self.timestamp,) = _Q.unpack_from(buffer, TIMESTAMP_OFFSET)
            pos = KEY_SIZE_OFFSET_V1
        else:
            raise CorruptRecordError(f"Invalid magic found in record: {self.magic}", position)
        self.key, pos = _sized(buffer, pos, n, "key", position)
        self.value, pos = _sized(buffer, pos, n, "value", position)
        # Bytes after the value are outside Kafka's reading but inside the CRC range;
        # nothing to do with them here.

    # -- header facts, shaped like RecordBatch's ------------------------------------------

    @property
    def size_in_bytes(self) -> int:
        return LOG_OVERHEAD + self.message_size

    @property
    def last_offset(self) -> int:
        return self.offset

    @property
    def next_offset(self) -> int:
        return self.offset + 1

    @property
    def base_offset(self) -> int:
        """First offset in the entry; for a compressed wrapper, the first inner record's
        (Kafka's ``AbstractLegacyRecordBatch.baseOffset`` iterates to find it)."""
        if self._base_offset is None:
            if self.compression == 0:
                self._base_offset = self.offset
            else:
                records = self.records()
                self._base_offset = records[0].offset
        return self._base_offset

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_CODEC_MASK

    @property
    def compression_name(self) -> str:
        return compression.codec_name(self.attributes & COMPRESSION_CODEC_MASK)

    @property
    def timestamp_type(self) -> int:
        if self.magic == 0:
            return NO_TIMESTAMP_TYPE
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME

    @property
    def max_timestamp(self) -> int:
        return self.timestamp

    # v2-only facts, with the values Kafka's legacy batches report.
    is_transactional = False
    is_control = False
    has_delete_horizon = False
    delete_horizon_ms = None
    producer_id = -1
    producer_epoch = -1
    base_sequence = -1
    last_sequence = -1
    partition_leader_epoch = -1

    @property
    def records_count(self) -> int | None:
        """1 for an uncompressed message; None for a wrapper (counting needs decompression)."""
        return 1 if self.compression == 0 else None

    # -- validation -------------------------------------------------------------------

    def compute_crc(self) -> int:
        return zlib.crc32(self.buffer[MAGIC_OFFSET:])

    def is_valid(self) -> bool:
        return self.message_size >= RECORD_OVERHEAD_V0 and self.crc == zlib.crc32(self.buffer[MAGIC_OFFSET:])

    def ensure_valid(self) -> None:
        if self.message_size < RECORD_OVERHEAD_V0:
            raise CorruptRecordError(
                "Record is corrupt (crc could not be retrieved as the record is too small, "
                f"size = {self.message_size})",
                self.position,
            )
        computed = zlib.crc32(self.buffer[MAGIC_OFFSET:])
        if computed != self.crc:
            raise CorruptRecordError(f"Record is corrupt (stored crc = {self.crc}, computed crc = {computed})", self.position)

    # -- records ----------------------------------------------------------------------

    def _as_record(self, offset: int, timestamp: int) -> LegacyRecord:
        return LegacyRecord(offset, timestamp, self.key, self.value, (), self.magic, self.attributes, self.crc,
                            self.is_valid())

    def records(self, max_decompressed: int = DEFAULT_MAX_DECOMPRESSED) -> list[LegacyRecord]:
        codec = self.compression
        if codec == 0:
            return [self._as_record(self.offset, self.timestamp)]
        return self._inner_records(codec, max_decompressed)

    def __iter__(self):
        return iter(self.records())

    def _inner_records(self, codec: int, max_decompressed: int) -> list[LegacyRecord]:
        if self.value is None:
            raise InvalidRecordError(
                f"Found invalid compressed record set with null value (magic = {self.magic})", self.position
            )
        if codec == compression.ZSTD:
            raise UnsupportedCodecError(f"ZStandard compression is not supported for magic {self.magic}", self.position)
        try:
            inner = compression.decompress(codec, self.value, max_decompressed, magic=self.magic)
        except FormatError as e:
            raise e.at(self.position) if e.position is None else e
        entries = []
        mv = memoryview(inner)
        pos, n = 0, len(inner)
        while pos < n:
            if n - pos < LOG_OVERHEAD + RECORD_OVERHEAD_V0:
                raise CorruptRecordError("Compressed message set ends inside an inner message", self.position)
            (size,) = _I.unpack_from(mv, pos + SIZE_OFFSET)
            if size < RECORD_OVERHEAD_V0 or pos + LOG_OVERHEAD + size > n:
                raise CorruptRecordError(f"Inner message of size {size} does not fit its message set", self.position)
            try:
                entry = LegacyBatch(mv[pos : pos + LOG_OVERHEAD + size], self.position)
            except FormatError as e:
                raise CorruptRecordError(f"Invalid inner message: {e.reason}", self.position) from None
            if entry.compression != 0:
                raise InvalidRecordError("Inner messages must not be compressed", self.position)
            entries.append(entry)
            pos += LOG_OVERHEAD + size
        if not entries:
            raise InvalidRecordError("Found invalid compressed record set with no inner records", self.position)
        if self.magic >= 1:
            last_inner = entries[-1].offset
            if self.offset == 0:
                # Old librdkafka wrote wrapper offset 0; Kafka then takes inner offsets as they are.
                absolute_base = 0
            elif self.offset < last_inner:
                raise InvalidRecordError(
                    f"Found invalid wrapper offset in compressed v1 message set, wrapper offset '{self.offset}' "
                    f"is less than the last inner message offset '{last_inner}' and it is not zero",
                    self.position,
                )
            else:
                absolute_base = self.offset - last_inner
            log_append = self.timestamp_type == LOG_APPEND_TIME
            return [
                e._as_record(absolute_base + e.offset, self.timestamp if log_append else e.timestamp) for e in entries
            ]
        return [e._as_record(e.offset, NO_TIMESTAMP) for e in entries]

    def __repr__(self) -> str:
        return (
            f"LegacyBatch(offset={self.offset}, magic={self.magic}, codec={self.compression_name}, "
            f"position={self.position}, size={self.size_in_bytes})"
        )


def header_first_offset(batch) -> int:
    """The first offset a batch's header gives without decompressing anything: a v2
    batch's base offset; a legacy entry's own offset (for a compressed wrapper that is its
    last inner offset: the wrapper counts as that one offset)."""
    return batch.last_offset if isinstance(batch, LegacyBatch) else batch.base_offset


# ---------------------------------------------------------------------------------------
# Encoding


def encode_message(
    offset: int, magic: int, key: bytes | None, value: bytes | None, *, timestamp: int = NO_TIMESTAMP,
    attributes: int = 0,
) -> bytes:
    """One log entry (offset + size + message) with its CRC-32 (``LegacyRecord.write``)."""
    if magic not in (0, 1):
        raise ValueError(f"legacy magic must be 0 or 1, not {magic}")
    parts = [struct.pack(">bb", magic, attributes)]
    if magic == 1:
        parts.append(_Q.pack(timestamp))
    for field in (key, value):
        if field is None:
            parts.append(b"\xff\xff\xff\xff")
        else:
            parts.append(_I.pack(len(field)))
            parts.append(bytes(field))
    body = b"".join(parts)
    crc = zlib.crc32(body)
    return struct.pack(">qiI", offset, len(body) + 4, crc) + body


def encode_legacy_batch(
    records: Sequence,
    *,
    magic: int,
    compression_codec: int = 0,
    compression_level: int | None = None,
    timestamp_type: int = CREATE_TIME,
    log_append_time: int | None = None,
    base_offset: int | None = None,
) -> bytes:
    """Encode ``(offset, timestamp, key, value)`` records as Kafka's builder writes them
    for magic 0/1: one entry per record when uncompressed; otherwise one wrapper whose
    offset is the last absolute offset and whose inner offsets are relative to
    ``base_offset`` (v1; default: the first record's offset) or absolute (v0)."""
    if not records:
        return b""
    if compression_codec == compression.ZSTD:
        raise UnsupportedCodecError(f"ZStandard compression is not supported for magic {magic}")
    ts_bit = TIMESTAMP_TYPE_MASK if (magic == 1 and timestamp_type == LOG_APPEND_TIME) else 0
    if ts_bit and log_append_time is None:
        raise ValueError("LogAppendTime needs log_append_time")

    def ts_of(rec) -> int:
        if magic == 0:
            return NO_TIMESTAMP
        return log_append_time if ts_bit else rec[1]

    if compression_codec == 0:
        return b"".join(encode_message(r[0], magic, r[2], r[3], timestamp=ts_of(r), attributes=ts_bit) for r in records)
    if base_offset is None:
        base_offset = records[0][0]
    inner = b"".join(
        encode_message(r[0] - base_offset if magic == 1 else r[0], magic, r[2], r[3], timestamp=ts_of(r),
                       attributes=ts_bit)
        for r in records
    )
    wrapped = compression.compress(compression_codec, inner, level=compression_level, magic=magic)
    if magic == 1:
        wrapper_ts = log_append_time if ts_bit else max(r[1] for r in records)
    else:
        wrapper_ts = NO_TIMESTAMP
    return encode_message(records[-1][0], magic, None, wrapped, timestamp=wrapper_ts,
                          attributes=compression_codec | ts_bit)
