"""Zig-zag varints and varlongs, as Kafka's ``ByteUtils`` writes them in v2 records.

Layout: the value is zig-zag mapped (``(n << 1) ^ (n >> 31)`` for int32, ``>> 63`` for
int64) so small magnitudes of either sign stay small, then written as unsigned LEB128:
seven bits per byte, least significant group first, bit 7 (0x80) set on every byte but
the last.

    value  -1   0    1    63   -64  64
    bytes  01   00   02   7e   7f   80 01

Limits, as Kafka enforces them on read:

* a varint (int32) is at most 5 bytes; a 5th byte with bit 7 set is "too long";
  bits of the 5th byte above bit 3 fall off, as in Java's ``<< 28`` into an int;
* a varlong (int64) is at most 10 bytes; a continuation bit after 63 bits is "too long".

Decoders take ``(buf, pos)`` and return ``(value, new_pos)``; they raise
:class:`~plog.formats.errors.VarintError` naming the position of the first byte for a
value that is too long or runs off the end of the buffer. Hot loops in
``record_batch`` inline the one- and two-byte cases and call these only for the rest.
"""

from __future__ import annotations

from .errors import VarintError

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1


def read_varint(buf, pos: int) -> tuple[int, int]:
    """Decode a zig-zag varint (int32) at ``pos``."""
    start = pos
    result = 0
    shift = 0
    n = len(buf)
    while True:
        if pos >= n:
            raise VarintError("Varint runs past the end of the buffer", start)
        b = buf[pos]
        pos += 1
        if shift == 28:
            if b & 0x80:
                raise VarintError(
                    "Varint is too long, the most significant bit in the 5th byte is set", start
                )
            # Java: raw |= b << 28 into an int; bits above 31 fall off.
            result |= (b << 28) & 0xFFFFFFFF
            break
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
    return (result >> 1) ^ -(result & 1), pos


def read_varlong(buf, pos: int) -> tuple[int, int]:
    """Decode a zig-zag varlong (int64) at ``pos``."""
    start = pos
    result = 0
    shift = 0
    n = len(buf)
    while True:
        if pos >= n:
            raise VarintError("Varlong runs past the end of the buffer", start)
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > 63:
            raise VarintError("Varlong is too long, most significant bit in the 10th byte is set", start)
    result &= 0xFFFFFFFFFFFFFFFF
    return (result >> 1) ^ -(result & 1), pos


def read_unsigned_varint(buf, pos: int) -> tuple[int, int]:
    """Decode an unsigned LEB128 varint (protocol 'compact' lengths and tags)."""
    start = pos
    result = 0
    shift = 0
    n = len(buf)
    while True:
        if pos >= n:
            raise VarintError("Unsigned varint runs past the end of the buffer", start)
        b = buf[pos]
        pos += 1
        if shift == 28 and b & 0xF0:
            raise VarintError("Unsigned varint is too long", start)
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def _leb128(z: int) -> bytes:
    out = bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


# Precomputed encodings of small values: record lengths, deltas and short key/value
# lengths are almost always in this range, and the reference encoder's loop looks them up.
# -64..63 (zig-zag to 0..127, one byte) at import; 64..8191 (128..16382, two bytes) when
# the reference encoder first asks (small_varints): 8k objects, ~1.5 ms that a start of the
# CLI on the native path does not need. A value missing from the table is encoded instead.
_SMALL = {n: bytes((((n << 1) ^ (n >> 31)) & 0xFF,)) for n in range(-64, 64)}
_SMALL_COMPLETE = 128 + 8192 - 64


def small_varints() -> dict[int, bytes]:
    """The encodings of -64..8191 (each a varint and a varlong alike), complete."""
    if len(_SMALL) < _SMALL_COMPLETE:
        _SMALL.update({n: bytes(((n << 1) & 0x7F | 0x80, n >> 6)) for n in range(64, 8192)})
    return _SMALL


def encode_varint(n: int) -> bytes:
    """Encode an int32 as a zig-zag varint; ValueError outside int32."""
    small = _SMALL.get(n)
    if small is not None:
        return small
    if not INT32_MIN <= n <= INT32_MAX:
        raise ValueError(f"{n} does not fit in a varint (int32)")
    return _leb128(((n << 1) ^ (n >> 31)) & 0xFFFFFFFF)


def encode_varlong(n: int) -> bytes:
    """Encode an int64 as a zig-zag varlong; ValueError outside int64."""
    small = _SMALL.get(n)
    if small is not None:
        return small
    if not INT64_MIN <= n <= INT64_MAX:
        raise ValueError(f"{n} does not fit in a varlong (int64)")
    return _leb128(((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF)


def encode_unsigned_varint(n: int) -> bytes:
    """Encode a non-negative int as unsigned LEB128 (at most uint32)."""
    if not 0 <= n <= 0xFFFFFFFF:
        raise ValueError(f"{n} does not fit in an unsigned varint")
    return _leb128(n)


def size_of_varint(n: int) -> int:
    """Number of bytes :func:`encode_varint` writes for ``n``."""
    z = ((n << 1) ^ (n >> 31)) & 0xFFFFFFFF
    size = 1
    while z > 0x7F:
        z >>= 7
        size += 1
    return size


def size_of_varlong(n: int) -> int:
    """Number of bytes :func:`encode_varlong` writes for ``n``."""
    z = ((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF
    size = 1
    while z > 0x7F:
        z >>= 7
        size += 1
    return size
