"""The producer's partition choice equals Kafka's Java client (kafka-format.md §17.1).

Oracles: the check values of §17.1 (computed with Kafka's own ``Utils.murmur2``) and
kafka-python's independent murmur2 port for keys of every length 0..20 and random bytes
(kafka-python returns the hash as an unsigned 32-bit value, Kafka as a signed ``int``: the
same bits, compared through :func:`kafka_python_murmur2`).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as _kafka_python_murmur2

from plog.engine.clients.partitioner import (
    StickyPartitioner,
    choose_partition,
    murmur2,
    partition_for_key,
    to_positive,
)


def kafka_python_murmur2(key: bytes) -> int:
    """kafka-python's hash as Java's signed int."""
    h = _kafka_python_murmur2(key) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


@pytest.mark.parametrize("key, want", [(b"", 275646681), (b"key1", 28543940), (b"hello world", 1221641059)])
def test_murmur2_check_values(key, want):
    assert murmur2(key) == want


@pytest.mark.parametrize("key, partitions, want", [(b"key1", 6, 2), (b"hello world", 12, 7)])
def test_keyed_partition_check_values(key, partitions, want):
    assert partition_for_key(key, partitions) == want


@pytest.mark.parametrize("length", range(21))
def test_every_key_length_0_to_20_matches_kafka_python(length):
    for fill in (b"a", b"\x00", b"\xff", b"\x80"):
        key = (fill * length)[:length]
        assert murmur2(key) == kafka_python_murmur2(key), key
    key = bytes(range(200, 200 + length)) if length else b""
    assert murmur2(key) == kafka_python_murmur2(key)


@given(st.binary(max_size=300))
def test_murmur2_matches_kafka_python(key):
    h = murmur2(key)
    assert h == kafka_python_murmur2(key)
    assert -(1 << 31) <= h < (1 << 31)


@given(st.binary(max_size=64), st.integers(1, 10_000))
def test_keyed_partition_is_in_range_and_stable(key, partitions):
    p = partition_for_key(key, partitions)
    assert 0 <= p < partitions and p == partition_for_key(key, partitions)


def test_to_positive_is_a_mask_not_abs():
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-(1 << 31)) == 0
    assert to_positive(5) == 5


def test_choice_order_explicit_then_key_then_sticky():
    sticky = StickyPartitioner(6, rng=iter([4, 1]).__next__)
    assert choose_partition(b"key1", 6, partition=5, sticky=sticky) == 5
    assert choose_partition(b"key1", 6, sticky=sticky) == 2
    assert choose_partition(None, 6, sticky=sticky) == 4
    assert choose_partition(b"key1", 6, sticky=sticky, ignore_keys=True) == 4
    with pytest.raises(ValueError):
        choose_partition(None, 6, partition=6)
    with pytest.raises(ValueError):
        partition_for_key(b"k", 0)


def test_sticky_switches_after_batch_size_and_a_full_batch():
    draws = iter([7, 8, 9, 10])
    sticky = StickyPartitioner(6, batch_size=100, rng=draws.__next__)
    assert sticky.partition() == 1  # 7 % 6
    sticky.record_appended(60, batch_full=False)
    sticky.record_appended(60, batch_full=False)  # 120 >= 100 but the batch is still open
    assert sticky.partition() == 1
    sticky.record_appended(10, batch_full=True)  # 130 and a complete batch: switch
    assert sticky.partition() == 2  # 8 % 6
    sticky.record_appended(199, batch_full=False)
    assert sticky.partition() == 2
    sticky.record_appended(1, batch_full=False)  # 200 = 2 * batch.size: switch regardless
    assert sticky.partition() == 3  # 9 % 6


def test_sticky_draws_among_available_partitions_or_all():
    assert StickyPartitioner(6, available=[3, 5], rng=lambda: 3).partition() == 5
    assert StickyPartitioner(6, available=[], rng=lambda: 9).partition() == 3


def test_sticky_spreads_records_over_every_partition():
    sticky = StickyPartitioner(4, batch_size=1000)
    seen = set()
    for _ in range(400):
        seen.add(sticky.partition())
        sticky.record_appended(100, batch_full=True)
    assert seen == {0, 1, 2, 3}


def test_sticky_rejects_bad_settings():
    with pytest.raises(ValueError, match="batch.size must be >= 1"):
        StickyPartitioner(3, batch_size=0)
    with pytest.raises(ValueError):
        StickyPartitioner(0)


@pytest.mark.parametrize("partitions", [1, 2, 3, 6, 7, 12, 50, 1000])
def test_keyed_partition_equals_kafka_python_default_partitioner(partitions):
    from kafka.partitioner.default import DefaultPartitioner

    class Cluster:  # the three calls kafka-python's partitioner makes
        def topics(self):
            return {"t"}

        def partitions_for_topic(self, topic):
            return set(range(partitions))

        available_partitions_for_topic = partitions_for_topic

    oracle, cluster = DefaultPartitioner(), Cluster()
    for length in range(21):
        for key in (bytes(range(length)), b"k" * length, f"user-{length}".encode()):
            want = oracle.partition("t", key, key, None, None, cluster)
            assert partition_for_key(key, partitions) == want, (key, partitions)
