"""One v2 record (Kafka's ``DefaultRecord``): decoding a batch's records region, and
encoding records.

Record (inside the records region; varints are zig-zag, see ``varint``)::

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
    keyLength varint (-1 null) | key | valueLength varint (-1 null) | value |
    headersCount varint | (headerKeyLength varint | headerKey | headerValueLength varint
    (-1 null) | headerValue) * headersCount

Invariants: a records region decodes to exactly the count its batch declares and is
consumed exactly; anything else is a :class:`CorruptRecordError` (or
:class:`InvalidRecordError`) carrying the message Kafka's ``DefaultRecord.readFrom``
gives. The batch around the region (header, CRC, compression) is ``record_batch``'s.

``decode_records`` and ``record_heads`` have native twins (native/src/records.rs), bound at
import when ``formats/native.py`` says the native core runs; the pure-Python functions stay
as ``reference_decode_records`` and ``reference_record_heads`` (see the end of the decoding
section).
"""

from __future__ import annotations

from functools import wraps
from itertools import repeat
from typing import Sequence

from . import native
from .errors import CorruptRecordError, FormatError, InvalidRecordError
from .records import NO_TIMESTAMP, Record, decode_header_key, encode_header_key
from .varint import small_varints
from .varint import encode_varint, encode_varlong, read_varint, read_varlong

_new_record = tuple.__new__

# Zig-zag decoding of every value a one- or two-byte varint can hold (14 bits): one list
# index replaces four integer operations per field in the record loops.
_ZIGZAG = [(z >> 1) ^ -(z & 1) for z in range(1 << 14)]


# ---------------------------------------------------------------------------------------
# Decoding the records region
#
# Two passes, each one tight loop with the varint reads inlined for the one- and two-byte
# cases (values -8192..8191: nearly every length, delta and key size; a 100-byte value
# already needs two bytes); longer varints go through read_varint/read_varlong.
#
# * _frame_records, the heads pass: where each record ends and its size, its offset,
#   timestamp and key, without values or headers. Scan statistics and the cleaner's key
#   scan need no more (record_heads).
# * _decode_tails: the value and headers of each framed record (decode_records).
#
# The heads pass gives up (returns None) at anything that is not a well-formed head: a
# negative length or one past the region, a key that leaves no room for the value in its
# record, an index or varint past the end, bytes left over. The region then goes through
# _decode_checked, the plain record-by-record decoder, which raises the error Kafka's
# DefaultRecord.readFrom raises at the first bad record. When the heads pass succeeds,
# the tails pass meets the records in the order the plain decoder would, with the same
# checks, so its first error is the one the plain decoder raises.
# Errors raised here have position None; the caller that knows where the batch is adds it.

#: A record head: ``(size, end, offset, timestamp, key, value_position)`` (indexes
#: ``HEAD_SIZE`` ...): the record's bytes are ``data[end - size:end]`` (its length varint
#: included), its valueLength varint is at ``value_position``; offset and timestamp are
#: absolute (the timestamp as stored: base timestamp + delta, whatever the batch's
#: timestamp type). Plain tuples: a NamedTuple per record would cost what the heads pass
#: exists to save.
RecordHead = tuple
HEAD_SIZE, HEAD_END, HEAD_OFFSET, HEAD_TIMESTAMP, HEAD_KEY, HEAD_VALUE_POSITION = range(6)

# The zig-zag table for record lengths: a negative length maps past any region, so one
# "end > n" test rejects both (the plain decoder then names the length).
_PAST_ANY_REGION = 1 << 62
_LENGTHS = [z if z >= 0 else _PAST_ANY_REGION for z in _ZIGZAG]


def decode_records(
    data: bytes, count: int, base_offset: int, base_timestamp: int, log_append_time: int | None = None
) -> list[Record]:
    """Decode ``count`` records from ``data`` (an uncompressed records region).

    Raises CorruptRecordError/InvalidRecordError (position None: the caller knows where
    the batch is) when ``data`` does not hold exactly ``count`` well-formed records.
    Varint errors carry positions relative to ``data``'s start.
    """
    heads = _frame_records(data, count, base_offset, base_timestamp)
    if heads is None:
        records = _decode_checked(data, count, base_offset, base_timestamp)
    else:
        records = _decode_tails(data, heads)
    if log_append_time is not None:
        # LogAppendTime: every record reports the batch maxTimestamp (rare; kept out of the loop).
        records = [_new_record(Record, (r[0], log_append_time, r[2], r[3], r[4])) for r in records]
    return records


def record_heads(data: bytes, count: int, base_offset: int = 0, base_timestamp: int = 0) -> list[RecordHead]:
    """The head of each of the ``count`` records in ``data`` (an uncompressed records
    region), see :data:`RecordHead`.

    Values and headers are neither decoded nor checked; any other fault
    :func:`decode_records` rejects raises the same error here."""
    heads = _frame_records(data, count, base_offset, base_timestamp)
    if heads is None:
        _decode_checked(data, count, 0, 0)
        # Not reached: every region the heads pass refuses fails the plain decoder too.
        raise CorruptRecordError("Found invalid record structure", None)
    return heads


def _frame_records(data, count: int, base_offset: int, base_timestamp: int) -> list[RecordHead] | None:
    """The heads pass (see above): the heads of ``count`` records, or None."""
    zz, lengths = _ZIGZAG, _LENGTHS  # locals: the loop runs once per record
    out: list[RecordHead] = []
    append = out.append
    n = len(data)
    pos = 0
    try:
        for _ in range(count):
            start = pos
            b = data[pos]  # length
            if b < 0x80:
                pos += 1
                end = pos + lengths[b]
            elif (c := data[pos + 1]) < 0x80:
                pos += 2
                end = pos + lengths[(b & 0x7F) | (c << 7)]
            else:
                length, pos = read_varint(data, pos)
                end = pos + length if length >= 0 else _PAST_ANY_REGION
            if end > n:
                return None
            b = data[pos + 1]  # timestampDelta (varlong), after the attributes byte
            if b < 0x80:
                ts_delta = zz[b]
                pos += 2
            elif (c := data[pos + 2]) < 0x80:
                ts_delta = zz[(b & 0x7F) | (c << 7)]
                pos += 3
            else:
                ts_delta, pos = read_varlong(data, pos + 1)
            b = data[pos]  # offsetDelta
            if b < 0x80:
                off_delta = zz[b]
                pos += 1
            elif (c := data[pos + 1]) < 0x80:
                off_delta = zz[(b & 0x7F) | (c << 7)]
                pos += 2
            else:
                off_delta, pos = read_varint(data, pos)
            b = data[pos]  # keyLength
            if b < 0x80:
                klen = zz[b]
                pos += 1
            elif (c := data[pos + 1]) < 0x80:
                klen = zz[(b & 0x7F) | (c << 7)]
                pos += 2
            else:
                klen, pos = read_varint(data, pos)
            if klen >= 0:
                key = data[pos : pos + klen]
                pos += klen
            else:
                key = None
            if pos >= end:  # no room left for the value length and the headers count
                return None
            append((end - start, end, base_offset + off_delta, base_timestamp + ts_delta, key, pos))
            pos = end
    except (IndexError, FormatError):
        return None
    return out if pos == n else None


def _decode_tails(data, heads: list[RecordHead]) -> list[Record]:
    """The tails pass: each framed record's value and headers, then the Records."""
    zz = _ZIGZAG
    out: list[tuple] = []
    append = out.append
    n = len(data)
    pos = 0
    try:
        for size, end, offset, timestamp, key, pos in heads:
            b = data[pos]  # valueLength
            if b < 0x80:
                vlen = zz[b]
                pos += 1
            elif (c := data[pos + 1]) < 0x80:
                vlen = zz[(b & 0x7F) | (c << 7)]
                pos += 2
            else:
                vlen, pos = read_varint(data, pos)
            if vlen >= 0:
                value = data[pos : pos + vlen]
                pos += vlen
            else:
                value = None
            if data[pos] == 0:  # headersCount
                headers = ()
                pos += 1
            else:
                headers, pos = _decode_headers(data, pos, end)
            if pos != end:
                raise _size_mismatch(data, end - size, pos)
            append((offset, timestamp, key, value, headers))
    except IndexError:
        raise _ran_off_error(pos, n) from None
    # Plain tuples in the loop, turned into Records by one C-level map: cheaper than a
    # tuple.__new__(Record, ...) call per record inside the loop.
    return list(map(_new_record, repeat(Record, len(out)), out))


def _decode_checked(data, count: int, base_offset: int, base_timestamp: int) -> list[Record]:
    """The plain decoder: record by record, each varint read as the passes read it
    (:func:`_read_checked`) and each check where they make it."""
    out: list[Record] = []
    n = len(data)
    pos = 0
    try:
        for _ in range(count):
            start = pos
            length, pos = _read_checked(data, pos, read_varint)
            end = pos + length
            if end > n:
                raise CorruptRecordError(
                    f"Invalid record size: expected {length} bytes in record payload, but instead the buffer "
                    f"has only {n - pos} remaining bytes",
                    None,
                )
            pos += 1  # attributes: unused, always 0
            ts_delta, pos = _read_checked(data, pos, read_varlong)
            off_delta, pos = _read_checked(data, pos, read_varint)
            klen, pos = _read_checked(data, pos, read_varint)
            key = data[pos : pos + klen] if klen >= 0 else None
            pos += max(klen, 0)
            vlen, pos = _read_checked(data, pos, read_varint)
            value = data[pos : pos + vlen] if vlen >= 0 else None
            pos += max(vlen, 0)
            if data[pos] == 0:
                headers, pos = (), pos + 1
            else:
                headers, pos = _decode_headers(data, pos, end)
            if pos != end:
                raise _size_mismatch(data, start, pos)
            out.append(Record(base_offset + off_delta, base_timestamp + ts_delta, key, value, headers))
    except IndexError:
        raise _ran_off_error(pos, n) from None
    if pos != n:
        raise CorruptRecordError("Incorrect declared batch size, records still remaining in file", None)
    return out


def _read_checked(data, pos: int, read_long) -> tuple[int, int]:
    """One varint at ``pos`` as the passes read it: the one- and two-byte forms by
    indexing (an IndexError past the end), longer ones by ``read_long``."""
    b = data[pos]
    if b < 0x80:
        return _ZIGZAG[b], pos + 1
    c = data[pos + 1]
    if c < 0x80:
        return _ZIGZAG[(b & 0x7F) | (c << 7)], pos + 2
    return read_long(data, pos)


def _size_mismatch(data, start: int, pos: int) -> CorruptRecordError:
    """Kafka's error for the record at ``start`` whose fields ended at ``pos``, not where
    its length said."""
    length, body = _read_checked(data, start, read_varint)
    return CorruptRecordError(
        f"Invalid record size: expected to read {length} bytes in record payload, but instead read {pos - body}",
        None,
    )


def _ran_off_error(pos: int, n: int) -> CorruptRecordError:
    """A field read ran off the end at ``pos``: either fewer records than the count, or
    lengths inside a record that lied."""
    if pos >= n:
        return CorruptRecordError("Incorrect declared batch size, premature EOF reached", None)
    return CorruptRecordError("Found invalid record structure", None)


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
# The native twins (native/src/records.rs), chosen once, at import, by formats/native.py.
#
# The functions above are the reference (PLOG_NATIVE=0 runs them; tests/native holds the
# twins identical to them). The native decoders take ``bytes`` (what records_payload
# returns); any other buffer, or a base beyond int64, goes to the reference, which slices
# its own type. Their results are the reference's: Records built by the same C-level map,
# heads as the same plain tuples, and the same typed errors with the same positions.

reference_decode_records = decode_records
reference_record_heads = record_heads


@wraps(reference_decode_records)
def _native_decode_records(data, count, base_offset, base_timestamp, log_append_time=None):
    if type(data) is not bytes:
        return reference_decode_records(data, count, base_offset, base_timestamp, log_append_time)
    try:
        rows = native.module.decode_records(data, count, base_offset, base_timestamp, log_append_time)
    except native.NativeFormatError as e:
        raise native.typed_error(e) from None
    except OverflowError:
        return reference_decode_records(data, count, base_offset, base_timestamp, log_append_time)
    return list(map(_new_record, repeat(Record, len(rows)), rows))


@wraps(reference_record_heads)
def _native_record_heads(data, count, base_offset=0, base_timestamp=0):
    if type(data) is not bytes:
        return reference_record_heads(data, count, base_offset, base_timestamp)
    try:
        return native.module.record_heads(data, count, base_offset, base_timestamp)
    except native.NativeFormatError as e:
        raise native.typed_error(e) from None
    except OverflowError:
        return reference_record_heads(data, count, base_offset, base_timestamp)


if native.active():
    decode_records = _native_decode_records
    record_heads = _native_record_heads


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


def encode_records(records: Sequence, base_offset: int, base_timestamp: int) -> tuple[bytearray, int, int]:
    """Encode records; return (bytes, max timestamp, last offset delta).

    The common record (small deltas and lengths, no headers) is built with one join and
    precomputed varint encodings; :func:`encode_record` is the plain reference of the
    same layout and is used for records with headers."""
    out = bytearray()
    max_ts = NO_TIMESTAMP
    last_delta = -1
    small = small_varints().get
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
