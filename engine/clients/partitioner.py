"""Which partition a produced record goes to: Kafka's producer rules (kafka-format.md §17.1).

In order, as ``KafkaProducer.partition`` decides:

1. an explicit partition in the record wins;
2. a record with a key (and ``partitioner.ignore.keys`` false) goes to
   ``to_positive(murmur2(key)) % num_partitions`` -- every partition counts, available or
   not, so a key lands on the partition number the Java client picks;
3. otherwise the built-in sticky partitioner (KIP-794, Kafka >= 3.3) chooses: it sticks to
   one partition until at least ``batch.size`` bytes went to it and a batch is complete
   (or ``2 * batch.size`` bytes in any case), then draws the next one at random.

Kafka's adaptive variant weights the draw by the brokers' queue lengths; an embedded log has
no network queues, so every partition weighs the same (``partitioner.adaptive.partitioning``
has nothing to measure), which is the non-adaptive draw of ``BuiltInPartitioner.nextPartition``.
"""

from __future__ import annotations

import random as _random
import struct
from collections.abc import Callable, Sequence

from plog.formats.java import int32

#: The seed and constants of Kafka's ``Utils.murmur2``.
_SEED = 0x9747B28C
_M = 0x5BD1E995
_R = 24
_MASK = 0xFFFFFFFF

DEFAULT_BATCH_SIZE = 16384


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` of ``data``: a signed 32-bit int (Java ``int`` arithmetic)."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    end = length & ~3
    for (k,) in struct.iter_unpack("<I", data[:end]):
        k = (k * _M) & _MASK
        k ^= k >> _R
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = length & 3
    if tail == 3:
        h ^= data[end + 2] << 16
    if tail >= 2:
        h ^= data[end + 1] << 8
    if tail >= 1:
        h ^= data[end]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return int32(h)


def to_positive(n: int) -> int:
    """Kafka's ``Utils.toPositive``: the low 31 bits (not the absolute value)."""
    return n & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """The partition Kafka's default partitioner gives a (serialized) key."""
    if num_partitions <= 0:
        raise ValueError(f"a topic has at least one partition, not {num_partitions}")
    return to_positive(murmur2(key)) % num_partitions


class StickyPartitioner:
    """Kafka's ``BuiltInPartitioner`` for records without a key, for one topic.

    ``partition()`` is the current sticky partition. After appending a record to it, the
    producer calls ``record_appended(appended_bytes, batch_full)`` with the growth of the
    batch's size and whether every batch of that partition is now complete; the partition
    switches once ``batch_size`` bytes went to it and a batch is complete, or after
    ``2 * batch_size`` bytes whatever the batches (so one long linger cannot pin a
    partition). ``available`` lists the partitions that can take records (all of them in
    an embedded log unless told otherwise); a draw falls back to every partition when none
    is available, as Kafka does.
    """

    def __init__(self, num_partitions: int, *, batch_size: int = DEFAULT_BATCH_SIZE,
                 available: Sequence[int] | None = None, rng: Callable[[], int] | None = None):
        if batch_size < 1:
            raise ValueError(f"batch.size must be >= 1 but got {batch_size}")
        if num_partitions <= 0:
            raise ValueError(f"a topic has at least one partition, not {num_partitions}")
        self.num_partitions = num_partitions
        self.batch_size = batch_size
        self.available = list(range(num_partitions)) if available is None else list(available)
        # Java's ThreadLocalRandom.nextInt() made positive; injectable for tests.
        self._rng = rng or (lambda: to_positive(_random.getrandbits(32)))
        self._partition: int | None = None
        self._produced = 0

    def partition(self) -> int:
        if self._partition is None:
            self._switch()
        return self._partition

    def record_appended(self, appended_bytes: int, batch_full: bool) -> None:
        """Count bytes appended to the sticky partition; maybe switch (``updatePartitionInfo``)."""
        if self._partition is None:
            return
        self._produced += appended_bytes
        if (self._produced >= self.batch_size and batch_full) or self._produced >= 2 * self.batch_size:
            self._switch()

    def _switch(self) -> None:
        random = self._rng()
        if self.available:
            self._partition = self.available[random % len(self.available)]
        else:
            self._partition = random % self.num_partitions
        self._produced = 0


def choose_partition(key: bytes | None, num_partitions: int, *, partition: int | None = None,
                     sticky: StickyPartitioner | None = None, ignore_keys: bool = False) -> int:
    """``KafkaProducer.partition``: explicit partition, else the key's hash, else sticky."""
    if partition is not None:
        if not 0 <= partition < num_partitions:
            raise ValueError(f"partition {partition} is not in [0, {num_partitions})")
        return partition
    if key is not None and not ignore_keys:
        return partition_for_key(key, num_partitions)
    if sticky is None:
        raise ValueError("a record without a key needs the topic's sticky partitioner")
    return sticky.partition()


__all__ = [
    "DEFAULT_BATCH_SIZE",
    "StickyPartitioner",
    "choose_partition",
    "murmur2",
    "partition_for_key",
    "to_positive",
]
