"""Confluent's wire format: how a Schema Registry serializer frames a key or a value.

Every current Confluent serializer (Java ``KafkaAvroSerializer``/``KafkaProtobufSerializer``/
``KafkaJsonSchemaSerializer``, confluent-kafka's Python, Go, .NET and JavaScript clients)
writes one of three framings, and its deserializer reads them in this order:

1. **Header.** A record header ``__key_schema_id`` (for the key) or ``__value_schema_id``
   (for the value) holds the schema's id carrier: the *last* such header wins, and a header
   whose value is null is as if it were absent. The key or value itself is then the bare
   payload, with no prefix.
2. **Prefix, magic 0.** ``00 | schema id (int32, big-endian)`` then the payload.
3. **Prefix, magic 1.** ``01 | schema GUID (16 bytes: a UUID's most significant long, then
   its least significant long, big-endian)`` then the payload.

An id carrier (a header value, or the start of the key/value) is::

    +0   magic    int8     0: a 4-byte id follows; 1: a 16-byte GUID follows
    +1   id       int32    (magic 0)  the registry's schema id
    +1   guid     16 bytes (magic 1)  the schema's GUID (the registry's MD5 of the schema)
    +5 / +17      for Protobuf only: the message-index list, then (prefix form) the payload

Serializers write the GUID form in headers and the id form as a prefix, but either
magic may appear in either place and readers accept both.

**Protobuf message indexes.** A Protobuf schema is a whole ``.proto`` file; the indexes
say which message type of it the payload is: ``[i]`` is the file's i-th top-level
message (in declaration order), ``[i, j]`` the j-th message nested in it, and so on. They are
written as a zig-zag varint count then one zig-zag varint per index (Kafka's
``ByteUtils.writeVarint``), except that the most common list, ``[0]``, is written as the
single byte ``00`` (a count of zero, which readers take as ``[0]``).

This module only splits bytes: :func:`parse_frame` says whether a key or value is framed
(and if not, why), :func:`read_message_indexes` reads the Protobuf list. Which schema an id
names, and what the payload decodes to, is the engine's (``plog.engine.schemas``).
"""

from __future__ import annotations

import struct
import uuid
from typing import NamedTuple, Sequence

from .errors import FormatError
from .varint import encode_varint, read_varint

MAGIC_ID = 0
MAGIC_GUID = 1
KEY_SCHEMA_ID_HEADER = "__key_schema_id"
VALUE_SCHEMA_ID_HEADER = "__value_schema_id"

ID_SIZE = 4
GUID_SIZE = 16
#: Bytes of an id carrier before the payload (or the Protobuf message indexes).
ID_PREFIX_SIZE = 1 + ID_SIZE  # 5
GUID_PREFIX_SIZE = 1 + GUID_SIZE  # 17

_ID = struct.Struct(">i")

#: The one-byte encoding of the message-index list ``[0]``.
DEFAULT_MESSAGE_INDEXES = b"\x00"


class WireFormatError(FormatError):
    """An id carrier or a Protobuf message-index list that does not decode."""


class Frame(NamedTuple):
    """What :func:`parse_frame` found in a key or a value.

    ``framed`` is False when the bytes carry no schema id; ``reason`` then says why, in
    words for a user ("empty value", "the first byte is 0x7b, not a Confluent magic byte").
    When framed, exactly one of ``schema_id`` and ``guid`` is set; ``carrier`` is
    ``"prefix"`` or ``"header"`` (the header's name then is ``header``); ``tail`` is what
    follows the id in its carrier (for the prefix form: the Protobuf message indexes, if
    any, and the payload; for the header form: the message indexes, if any) and
    ``payload`` is the record's key or value when the id came from a header (else None:
    the payload is in ``tail``). Use :func:`split_payload` to get the indexes and payload.
    """

    framed: bool
    reason: str | None = None
    schema_id: int | None = None
    guid: uuid.UUID | None = None
    carrier: str | None = None
    header: str | None = None
    tail: bytes = b""
    payload: bytes | None = None

    @property
    def id_text(self) -> str:
        """The id as people write it: ``id 7`` or ``guid 0b4e...``."""
        return f"id {self.schema_id}" if self.schema_id is not None else f"guid {self.guid}"


def schema_id_header(is_key: bool) -> str:
    return KEY_SCHEMA_ID_HEADER if is_key else VALUE_SCHEMA_ID_HEADER


def _last_header(headers: Sequence, name: str) -> tuple[bool, bytes | None]:
    """(found, value) of the last header called ``name`` (Kafka's ``Headers.lastHeader``)."""
    found, value = False, None
    for key, val in headers or ():
        if key == name:
            found, value = True, val
    return found, value


def _read_carrier(data: bytes, what: str) -> tuple[int | None, uuid.UUID | None, bytes] | str:
    """(id, guid, tail) of an id carrier, or the reason it is not one."""
    if not data:
        return f"empty {what}"
    magic = data[0]
    if magic == MAGIC_ID:
        if len(data) < ID_PREFIX_SIZE:
            return f"truncated: the {what} has {len(data)} bytes, a magic byte 0 and a schema id need {ID_PREFIX_SIZE}"
        return _ID.unpack_from(data, 1)[0], None, data[ID_PREFIX_SIZE:]
    if magic == MAGIC_GUID:
        if len(data) < GUID_PREFIX_SIZE:
            return (f"truncated: the {what} has {len(data)} bytes, a magic byte 1 and a schema GUID need "
                    f"{GUID_PREFIX_SIZE}")
        return None, uuid.UUID(bytes=bytes(data[1:GUID_PREFIX_SIZE])), data[GUID_PREFIX_SIZE:]
    return f"the first byte of the {what} is 0x{magic:02x}, not a Confluent magic byte (0 or 1)"


def parse_frame(data: bytes | None, headers: Sequence = (), *, is_key: bool = False) -> Frame:
    """How ``data`` (a record's key, or its value with ``is_key=False``) is framed, given the
    record's ``headers`` (``(name, value)`` pairs). Never raises: bytes that carry no id give
    ``Frame(False, reason)``."""
    name = schema_id_header(is_key)
    what = "key" if is_key else "value"
    found, header_value = _last_header(headers, name)
    if found and header_value is not None:
        carrier = _read_carrier(bytes(header_value), f"header {name}")
        if isinstance(carrier, str):
            return Frame(False, carrier)
        schema_id, guid, tail = carrier
        return Frame(True, None, schema_id, guid, "header", name, tail, b"" if data is None else bytes(data))
    if data is None:
        return Frame(False, f"null {what}")
    carrier = _read_carrier(bytes(data), what)
    if isinstance(carrier, str):
        return Frame(False, carrier)
    schema_id, guid, tail = carrier
    return Frame(True, None, schema_id, guid, "prefix", None, tail, None)


def read_message_indexes(buf: bytes, pos: int = 0) -> tuple[list[int], int]:
    """The Protobuf message-index list at ``buf[pos:]`` and the position after it.

    A count of 0 is the short form of ``[0]``. Raises :class:`WireFormatError` for a
    negative count, a count larger than the bytes left could hold, a negative index or a
    varint that runs off the end."""
    try:
        count, pos = read_varint(buf, pos)
    except FormatError as e:
        raise WireFormatError(f"the Protobuf message-index count does not decode: {e.reason}", e.position) from None
    if count == 0:
        return [0], pos
    if count < 0 or count > len(buf) - pos:
        left = len(buf) - pos
        raise WireFormatError(f"impossible Protobuf message-index count {count} ({left} byte{'' if left == 1 else 's'} "
                              "left)", pos)
    indexes = []
    for _ in range(count):
        start = pos
        try:
            index, pos = read_varint(buf, pos)
        except FormatError as e:
            raise WireFormatError(f"a Protobuf message index does not decode: {e.reason}", e.position) from None
        if index < 0:
            raise WireFormatError(f"negative Protobuf message index {index}", start)
        indexes.append(index)
    return indexes, pos


def split_payload(frame: Frame, *, protobuf: bool) -> tuple[list[int] | None, bytes]:
    """(message indexes, payload) of a framed key or value: the indexes only for a Protobuf
    schema (else None). Raises :class:`WireFormatError` for message indexes that do not
    decode, or that the header form followed by anything but them."""
    if not protobuf:
        if frame.carrier == "header":
            return None, frame.payload or b""
        return None, frame.tail
    indexes, pos = read_message_indexes(frame.tail)
    if frame.carrier == "header":
        if pos != len(frame.tail):
            raise WireFormatError(f"{len(frame.tail) - pos} unexpected bytes after the message indexes in "
                                  f"header {frame.header}", pos)
        return indexes, frame.payload or b""
    return indexes, frame.tail[pos:]


def encode_message_indexes(indexes: Sequence[int]) -> bytes:
    """The wire form of a message-index list (``[0]`` as the single byte ``00``)."""
    if list(indexes) == [0]:
        return DEFAULT_MESSAGE_INDEXES
    return encode_varint(len(indexes)) + b"".join(encode_varint(i) for i in indexes)


def encode_prefix(schema_id: int | None = None, guid: uuid.UUID | None = None,
                  message_indexes: Sequence[int] | None = None) -> bytes:
    """An id carrier: magic 0 and ``schema_id``, or magic 1 and ``guid``, then the Protobuf
    message indexes when given. (What serializers write; plog writes it in tests and for
    users who build framed records by hand.)"""
    if (schema_id is None) == (guid is None):
        raise ValueError("give a schema id or a GUID, not both")
    head = bytes((MAGIC_ID,)) + _ID.pack(schema_id) if guid is None else bytes((MAGIC_GUID,)) + guid.bytes
    return head + (encode_message_indexes(message_indexes) if message_indexes is not None else b"")


__all__ = [
    "DEFAULT_MESSAGE_INDEXES", "Frame", "GUID_PREFIX_SIZE", "ID_PREFIX_SIZE", "KEY_SCHEMA_ID_HEADER", "MAGIC_GUID",
    "MAGIC_ID", "VALUE_SCHEMA_ID_HEADER", "WireFormatError", "encode_message_indexes", "encode_prefix",
    "parse_frame", "read_message_indexes", "schema_id_header", "split_payload",
]
