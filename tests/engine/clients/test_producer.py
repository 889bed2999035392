"""The embedded producer: partitioning, batching, codecs, headers, timestamps, idempotence,
replication of the written bytes, and what happens when a batch fails."""

from __future__ import annotations

import pytest

from plog.engine.cluster.data_dir import DataDir
from plog.engine.clients.consumer import Consumer
from plog.engine.errors import (
    InvalidProducerBatchError,
    ProducerError,
    RecordTooLargeError,
    UnknownTopicOrPartitionError,
)
from plog.engine.clients.partitioner import partition_for_key
from plog.engine.clients.producer import Producer
from plog.formats.batches import BatchIterator
from plog.formats.record_batch import encode_batch


def _data_dir(tmp_path, brokers=1):
    return DataDir.init(tmp_path / "d", brokers=brokers)


def _read_all(dd, topic):
    c = Consumer(dd, auto_offset_reset="earliest", max_poll_records=100000)
    c.assign(dd.partitions(topic))
    out = []
    while True:
        got = c.poll(0)
        if not got:
            break
        out.extend(got)
    c.close()
    return out


def _batches(dd, tp, broker=None):
    log = dd.open_reader(tp, broker)
    try:
        return [b for seg in log.segments for b in seg.batches(0)]
    finally:
        log.close()


def test_keyed_records_land_on_the_murmur2_partition(tmp_path):
    dd = _data_dir(tmp_path)
    dd.create_topic("t", replica_assignment={p: [1] for p in range(7)})
    keys = [bytes(range(n)) for n in range(21)] + [b"key1", b"hello world", "ü".encode()]
    with Producer(dd) as p:
        futures = [(k, p.send("t", b"v", key=k)) for k in keys]
    for key, fut in futures:
        assert fut.get().partition == partition_for_key(key, 7)
    # §17.1 check values: "key1" -> partition 2 of 6, "hello world" -> 7 of 12.
    assert partition_for_key(b"key1", 6) == 2 and partition_for_key(b"hello world", 12) == 7


def test_round_trip_of_keys_values_headers_timestamps_and_tombstones(tmp_path):
    dd = _data_dir(tmp_path)
    dd.create_topic("t", replica_assignment={0: [1], 1: [1], 2: [1]})
    sent = []
    with Producer(dd, batch_size=200) as p:
        for i in range(300):
            key = None if i % 5 == 0 else b"k%d" % (i % 17)
            value = None if i % 11 == 0 else bytes([i % 256]) * (i % 40)
            headers = [("h", b"\xff\x00"), ("n", None)] if i % 3 == 0 else None
            ts = 1_600_000_000_000 + i
            meta = p.send("t", value, key=key, headers=headers, timestamp_ms=ts)
            sent.append((meta, key, value, tuple(headers or ()), ts))
    got = {(r.partition, r.offset): r for r in _read_all(dd, "t")}
    assert len(got) == 300
    for meta, key, value, headers, ts in sent:
        m = meta.get()
        r = got[(m.partition, m.offset)]
        assert (r.key, r.value, tuple(r.headers), r.timestamp, r.timestamp_type) == (key, value, headers, ts,
                                                                                      "CreateTime")
        assert m.timestamp == ts


def test_batches_respect_batch_size_and_sticky_partitioning(tmp_path):
    dd = _data_dir(tmp_path)
    dd.create_topic("t", replica_assignment={0: [1], 1: [1]})
    with Producer(dd, batch_size=1024, linger_ms=10_000) as p:
        for i in range(200):
            p.send("t", b"x" * 90)
    counts = []
    for tp in dd.partitions("t"):
        for b in _batches(dd, tp):
            assert b.size_in_bytes <= 1024 + 61 + 100  # one record may overflow the estimate
            counts.append(b.records_count)
    assert sum(counts) == 200 and len(counts) > 10
    # Sticky partitioning keeps whole batches on one partition: no batch of one record in the middle.
    assert sorted(counts)[len(counts) // 2] > 5


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_every_codec(tmp_path, codec):
    dd = _data_dir(tmp_path)
    dd.create_topic("t", replica_assignment={0: [1]})
    values = [b"value %d " % i * (i % 7 + 1) for i in range(500)]
    with Producer(dd, compression_type=codec) as p:
        for v in values:
            p.send("t", v, key=b"same")
    assert [r.value for r in _read_all(dd, "t")] == values
    assert {b.compression_name for b in _batches(dd, ("t", 0))} == {codec}


def test_idempotent_producer_ids_sequences_and_duplicate_retries(tmp_path):
    dd = _data_dir(tmp_path)
    dd.create_topic("t", replica_assignment={0: [1]})
    p1, p2 = Producer(dd, batch_size=100), Producer(dd)
    assert p1.producer_id != p2.producer_id and p1.producer_id >= 0
    for i in range(20):
        p1.send("t", b"a%d" % i, key=b"k")
    p1.close()
    p2.close()
    batches = _batches(dd, ("t", 0))
    assert [b.producer_id for b in batches] == [p1.producer_id] * len(batches)
    seq = 0
    for b in batches:
        assert b.base_sequence == seq and b.producer_epoch == 0
        seq += b.records_count
    # A retry of the last batch (same producer, epoch, sequences) is acknowledged, not written again.
    last = batches[-1]
    records = [(i, r.timestamp, r.key, r.value) for i, r in enumerate(last.records())]
    raw = encode_batch(records, producer_id=last.producer_id, producer_epoch=0, base_sequence=last.base_sequence)
    with dd.writer() as w:
        before = w.replica_log(("t", 0), 1).log_end_offset
        info = w.append(("t", 0), raw)
        assert info.duplicate and info.first_offset == last.base_offset
        assert w.replica_log(("t", 0), 1).log_end_offset == before


def test_non_idempotent_producer_writes_no_producer_id(tmp_path):
    dd = _data_dir(tmp_path)
    dd.create_topic("t", replica_assignment={0: [1]})
    with Producer(dd, enable_idempotence=False) as p:
        p.send("t", b"x")
    (b,) = _batches(dd, ("t", 0))
    assert (b.producer_id, b.producer_epoch, b.base_sequence) == (-1, -1, -1)


def test_replicas_are_byte_identical(tmp_path):
    dd = _data_dir(tmp_path, brokers=3)
    dd.create_topic("t", replica_assignment={0: [1, 2, 3], 1: [3, 1, 2]})
    with Producer(dd, compression_type="gzip", batch_size=500) as p:
        for i in range(1000):
            p.send("t", b"%d" % i, key=b"%d" % (i % 13))
    for tp in dd.partitions("t"):
        replicas = dd.replicas(tp)
        files = [sorted(dd.partition_path(tp, b).iterdir()) for b in replicas]
        names = [[f.name for f in fs] for fs in files]
        assert names[0] == names[1] == names[2]
        for name in names[0]:
            if name.endswith((".log", ".index", ".timeindex", ".snapshot")) or name == "leader-epoch-checkpoint":
                contents = {(dd.partition_path(tp, b) / name).read_bytes() for b in replicas}
                assert len(contents) == 1, (tp, name)


def test_log_append_time_topic(tmp_path):
    dd = _data_dir(tmp_path)
    dd.create_topic("t", replica_assignment={0: [1]}, configs={"message.timestamp.type": "LogAppendTime"})
    with Producer(dd) as p:
        fut = p.send("t", b"x", timestamp_ms=5)
    meta = fut.get()
    assert meta.timestamp > 1_600_000_000_000
    (r,) = _read_all(dd, "t")
    assert r.timestamp == meta.timestamp and r.timestamp_type == "LogAppendTime"


def test_unknown_partition_and_oversized_record_fail_at_send(tmp_path):
    dd = _data_dir(tmp_path)
    dd.create_topic("t", replica_assignment={0: [1]})
    with Producer(dd, max_request_size=1000) as p:
        with pytest.raises(UnknownTopicOrPartitionError):
            p.send("t", b"x", partition=1)
        with pytest.raises(RecordTooLargeError):
            p.send("t", b"x" * 2000)
    with pytest.raises(UnknownTopicOrPartitionError):
        Producer(dd, auto_create_topics=False).send("nope", b"x")


def test_auto_created_topic(tmp_path):
    dd = _data_dir(tmp_path)
    with Producer(dd) as p:
        p.send("fresh", b"x")
    dd.reload()
    assert dd.topic("fresh").partitions == 1
    assert [r.value for r in _read_all(dd, "fresh")] == [b"x"]


def test_nothing_after_a_failed_batch_is_written(tmp_path):
    dd = _data_dir(tmp_path)
    dd.create_topic("c", replica_assignment={0: [1]}, configs={"cleanup.policy": "compact"})
    p = Producer(dd, batch_size=50, linger_ms=60_000)
    ok = [p.send("c", b"v%d" % i, key=b"k", partition=0) for i in range(3)]
    bad = p.send("c", b"no key", partition=0)  # a compacted topic refuses records without a key
    later = [p.send("c", b"w%d" % i, key=b"k", partition=0) for i in range(3)]
    with pytest.raises(InvalidProducerBatchError):
        p.flush()
    assert all(f.get().offset >= 0 for f in ok)
    with pytest.raises(InvalidProducerBatchError):
        bad.get()
    for f in later:
        with pytest.raises(ProducerError):
            f.get()
    p.close()
    assert [r.value for r in _read_all(dd, "c")] == [b"v0", b"v1", b"v2"]


def test_topic_compression_config_overrides_the_producer(tmp_path):
    dd = _data_dir(tmp_path)
    dd.create_topic("t", replica_assignment={0: [1]}, configs={"compression.type": "zstd"})
    with Producer(dd, compression_type="none") as p:
        p.send("t", b"x" * 100)
    assert [b.compression_name for b in _batches(dd, ("t", 0))] == ["zstd"]


def test_batch_headers_are_kafka_v2(tmp_path):
    dd = _data_dir(tmp_path)
    dd.create_topic("t", replica_assignment={0: [1]})
    with Producer(dd) as p:
        for i in range(3):
            p.send("t", b"x", timestamp_ms=1000 + i)
    raw = (dd.partition_path(("t", 0)) / "00000000000000000000.log").read_bytes()
    (b,) = list(BatchIterator(raw))
    assert b.magic == 2 and b.is_valid() and b.base_offset == 0 and b.last_offset_delta == 2
    assert b.max_timestamp == 1002 and b.partition_leader_epoch == 0
