"""Values shared by every record format: the record tuple, timestamp types, sequences.

A :class:`Record` is what a consumer sees: absolute offset, timestamp, key, value and
headers. It is a plain tuple subclass so the v2 decoder can build millions of them
cheaply (``tuple.__new__`` with no ``__init__`` call). Keys and values are ``bytes`` or
``None`` (null); an empty key is ``b""`` and is not the same as a null key.

Header keys are ``str``. Kafka declares them UTF-8 strings; plog decodes them with
``surrogateescape`` so that a header key holding invalid UTF-8 survives a decode/encode
round trip byte for byte (Kafka's own reader would replace such bytes with U+FFFD).
"""

from __future__ import annotations

from typing import NamedTuple

from .java import int32

# Timestamp types, numbered as Kafka's TimestampType.id.
NO_TIMESTAMP_TYPE = -1
CREATE_TIME = 0
LOG_APPEND_TIME = 1

TIMESTAMP_TYPE_NAMES = {NO_TIMESTAMP_TYPE: "NoTimestampType", CREATE_TIME: "CreateTime", LOG_APPEND_TIME: "LogAppendTime"}

NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

INT32_MAX = (1 << 31) - 1

Header = tuple  # (key: str, value: bytes | None)


class Record(NamedTuple):
    """One record as read from a batch. ``headers`` is a tuple of ``(str, bytes|None)``."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple = ()


class LegacyRecord(NamedTuple):
    """One magic v0/v1 message. Carries its own CRC, which DumpLogSegments prints."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple
    magic: int
    attributes: int
    crc: int
    is_valid: bool


def increment_sequence(sequence: int, increment: int) -> int:
    """Kafka's ``DefaultRecordBatch.incrementSequence``: sequences wrap to 0 after INT32_MAX."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def decrement_sequence(sequence: int, decrement: int) -> int:
    """Kafka's ``DefaultRecordBatch.decrementSequence``, the inverse of :func:`increment_sequence`
    (sequences wrap at Integer.MAX_VALUE; the result is a Java int)."""
    if sequence < decrement:
        return int32(INT32_MAX - (decrement - sequence) + 1)
    return int32(sequence - decrement)


def encode_header_key(key: str | bytes) -> bytes:
    if isinstance(key, bytes):
        return key
    return key.encode("utf-8", "surrogateescape")


def decode_header_key(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")
