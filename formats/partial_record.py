"""A v2 record read partially, up to its key (as Kafka's ``DefaultRecord.readPartiallyFrom``
skips what its caller does not need).

Record layout (``default_record``)::

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
    keyLength varint (-1 null) | key | ...

Used where one field of one record decides something about a whole batch: a control
batch's type is in its one record's 4-byte key, so reading the key alone spares decoding
(and checking) the value and headers. Nothing past the key is read or validated; a varint
running off ``buf`` raises :class:`~plog.formats.errors.VarintError`.
"""

from __future__ import annotations

from .varint import read_varint, read_varlong


def read_record_key(buf, pos: int) -> bytes | None:
    """The key of the record whose length varint is at ``pos`` in ``buf`` (None for a null
    key). A key longer than what is left of ``buf`` is cut at its end, unchecked: the caller
    checks the key's size."""
    _length, pos = read_varint(buf, pos)
    pos += 1  # attributes, unused
    _timestamp_delta, pos = read_varlong(buf, pos)
    _offset_delta, pos = read_varint(buf, pos)
    key_length, pos = read_varint(buf, pos)
    return bytes(buf[pos:pos + key_length]) if key_length >= 0 else None


__all__ = ["read_record_key"]
