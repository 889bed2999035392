"""The consumer protocol's assignor user data: the bytes a consumer's sticky assignors put in
the ``userData`` of its ``ConsumerProtocolSubscription``.

(The Subscription and Assignment themselves, as ``__consumer_offsets`` stores them, are
``offsets_topic``'s ``encode_consumer_subscription`` and its decoders.)

``sticky`` (``StickyAssignor``): Kafka's ``Struct`` schemas, big-endian; STRING is an int16
length then UTF-8, ARRAY an int32 count::

    v1  previous_assignment: [topic STRING, partitions [INT32]] | generation INT32
    v0  previous_assignment: [topic STRING, partitions [INT32]]

``cooperative-sticky`` (``CooperativeStickyAssignor``): the generation alone, INT32.

Invariants: decoding never raises. What Kafka's ``Schema.read`` cannot parse (a buffer
underflow, a negative or oversized size) falls back as Kafka falls back: sticky v1, then
v0 (generation ``None``), then "nothing owned, generation ``DEFAULT_GENERATION``";
trailing bytes are ignored, as ``Schema.read`` ignores them. Partitions are plain
``(topic, partition)`` tuples.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from .errors import SchemaError
from .java import HashOrder, string_hash_code

#: ``AbstractStickyAssignor.DEFAULT_GENERATION``: "no generation known".
DEFAULT_GENERATION = -1

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


def encode_sticky_user_data(assigned: Iterable[tuple[str, int]], generation: int) -> bytes:
    """``StickyAssignor.serializeTopicPartitionAssignment``: the v1 Struct of ``assigned``
    (``(topic, partition)`` pairs) and ``generation``. Topics appear in the order of the
    ``HashMap`` that ``CollectionUtils.groupPartitionsByTopic`` fills with
    ``computeIfAbsent``, partitions in the order given."""
    by_topic: dict[str, list[int]] = {}
    order = HashOrder(string_hash_code)
    for topic, partition in assigned:
        by_topic.setdefault(topic, []).append(partition)
        order.add(topic, at_head=True)  # one computeIfAbsent per partition
    out = bytearray(_INT32.pack(len(by_topic)))
    for topic in order:
        name = topic.encode("utf-8")
        partitions = by_topic[topic]
        out += _INT16.pack(len(name)) + name
        out += struct.pack(f">i{len(partitions)}i", len(partitions), *partitions)
    out += _INT32.pack(generation)
    return bytes(out)


class _SchemaError(SchemaError):
    """A Struct that does not parse (Kafka: ``SchemaException`` or buffer underflow)."""


def _read_previous_assignment(data: bytes, offset: int) -> tuple[list[tuple[str, int]], int]:
    """``ArrayOf(TOPIC_ASSIGNMENT).read``: the partitions and the offset after the array."""

    def take(fmt: str) -> int:
        nonlocal offset
        size = struct.calcsize(fmt)
        if offset + size > len(data):
            raise _SchemaError("buffer underflow")
        (value,) = struct.unpack_from(fmt, data, offset)
        offset += size
        return value

    partitions: list[tuple[str, int]] = []
    topics = take(">i")
    if topics < 0 or topics > len(data) - offset:
        raise _SchemaError(f"array size {topics}")
    for _ in range(topics):
        length = take(">h")
        if length < 0 or length > len(data) - offset:
            raise _SchemaError(f"string length {length}")
        topic = data[offset : offset + length].decode("utf-8", "replace")
        offset += length
        count = take(">i")
        if count < 0 or count > len(data) - offset:
            raise _SchemaError(f"array size {count}")
        for _ in range(count):
            partitions.append((topic, take(">i")))
    return partitions, offset


def decode_sticky_user_data(data: bytes) -> tuple[list[tuple[str, int]], int | None]:
    """``StickyAssignor.deserializeTopicPartitionAssignment``: (previous partitions,
    generation). v1 first; if that fails, v0 (generation ``None``); if that fails too,
    ``([], DEFAULT_GENERATION)``."""
    try:
        partitions, offset = _read_previous_assignment(data, 0)
        if offset + 4 > len(data):
            raise _SchemaError("no generation")
        return partitions, _INT32.unpack_from(data, offset)[0]
    except _SchemaError:
        pass
    try:
        partitions, _offset = _read_previous_assignment(data, 0)
        return partitions, None
    except _SchemaError:
        return [], DEFAULT_GENERATION


def encode_cooperative_user_data(generation: int) -> bytes:
    """``CooperativeStickyAssignor.subscriptionUserData``: the generation, INT32."""
    return _INT32.pack(generation)


def decode_cooperative_user_data(data: bytes) -> int:
    """The generation in a ``cooperative-sticky`` member's user data; ``DEFAULT_GENERATION``
    when it is too short to hold one (``Schema.read`` fails, Kafka takes the default)."""
    if len(data) < 4:
        return DEFAULT_GENERATION
    return _INT32.unpack_from(data)[0]


__all__ = [
    "DEFAULT_GENERATION",
    "decode_cooperative_user_data",
    "decode_sticky_user_data",
    "encode_cooperative_user_data",
    "encode_sticky_user_data",
]
