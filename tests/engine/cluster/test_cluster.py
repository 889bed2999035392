"""The data directory: brokers, topic metadata and replica folders, concurrent writers."""

from __future__ import annotations

import json
import multiprocessing
import random

import pytest

from plog.engine.storage.checkpoints import read_meta_properties
from plog.engine.cluster.data_dir import DataDir
from plog.engine.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    LogDirError,
    ReadOnlyDataDirError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from plog.engine.clients.producer import Producer


def test_init_makes_one_kafka_log_dir_per_broker(tmp_path):
    dd = DataDir.init(tmp_path / "d", brokers=3, racks=["a", "b", "a"])
    assert dd.broker_ids == [1, 2, 3]
    assert [b.rack for b in dd.brokers] == ["a", "b", "a"]
    meta = json.loads((tmp_path / "d" / "cluster.json").read_text())
    assert [b["id"] for b in meta["brokers"]] == [1, 2, 3]
    dd.create_topic("t", 3, 2, rng=random.Random(1))
    for b in dd.broker_ids:
        props = read_meta_properties(tmp_path / "d" / f"broker-{b}")
        assert props.node_id == b and props.cluster_id == dd.metadata.cluster_id
    with pytest.raises(LogDirError):
        DataDir.init(tmp_path / "d")
    with pytest.raises(LogDirError):
        DataDir.open(tmp_path / "missing")


def test_create_places_replicas_with_kafkas_algorithm(tmp_path):
    dd = DataDir.init(tmp_path / "d", brokers=5)
    t = dd.create_topic("t", 10, 3, rng=random.Random(7))
    assert t.partitions == 10 and t.replication_factor == 3
    for p, replicas in enumerate(t.replicas):
        assert len(set(replicas)) == 3
        for b in replicas:
            assert (tmp_path / "d" / f"broker-{b}" / f"t-{p}" / "00000000000000000000.log").exists()
            assert (tmp_path / "d" / f"broker-{b}" / f"t-{p}" / "partition.metadata").exists()
    leaders = [r[0] for r in t.replicas]
    assert sorted(leaders.count(b) for b in dd.broker_ids) == [2, 2, 2, 2, 2]


def test_create_rejects_what_kafka_rejects(tmp_path):
    dd = DataDir.init(tmp_path / "d", brokers=2)
    dd.create_topic("a.b", 1, 1)
    with pytest.raises(TopicExistsError):
        dd.create_topic("a.b", 1, 1)
    assert dd.create_topic("a.b", 1, 1, if_not_exists=True) is None
    with pytest.raises(TopicExistsError, match="collides"):
        dd.create_topic("a_b", 1, 1)
    with pytest.raises(InvalidReplicationFactorError):
        dd.create_topic("x", 1, 3)
    with pytest.raises(InvalidPartitionsError):
        dd.create_topic("x", 0, 1)
    with pytest.raises(InvalidTopicError):
        dd.create_topic("bad name", 1, 1)
    with pytest.raises(InvalidTopicError):
        dd.create_topic("__consumer_offsets", 1, 1)
    with pytest.raises(InvalidTopicError):
        dd.create_topic("x", 1, 1, configs={"segment.bytes": "ten"})
    with pytest.raises(InvalidReplicaAssignmentError):
        dd.create_topic("x", replica_assignment={0: [1, 1]})
    with pytest.raises(InvalidReplicaAssignmentError):
        dd.create_topic("x", replica_assignment={0: [9]})
    assert dd.topics() == ["a.b"]


def test_manual_assignment_and_describe(tmp_path):
    dd = DataDir.init(tmp_path / "d", brokers=3)
    dd.create_topic("t", replica_assignment={0: [2, 3], 1: [3, 1]})
    with Producer(dd) as p:
        for i in range(10):
            p.send("t", b"x", partition=i % 2)
    rows = dd.describe_partitions("t")
    assert [(r.tp.partition, r.leader, r.replicas, r.isr) for r in rows] == [(0, 2, [2, 3], [2, 3]),
                                                                            (1, 3, [3, 1], [3, 1])]
    assert [(r.log_start_offset, r.log_end_offset) for r in rows] == [(0, 5), (0, 5)]
    assert all(r.size > 0 and r.segments == 1 for r in rows)


def test_alter_adds_partitions_and_changes_configs(tmp_path):
    dd = DataDir.init(tmp_path / "d", brokers=3)
    dd.create_topic("t", 2, 2, rng=random.Random(3))
    t = dd.alter_topic("t", partitions=5, set_configs={"retention.ms": "1000"})
    assert t.partitions == 5 and all(len(r) == 2 for r in t.replicas)
    assert t.configs == {"retention.ms": "1000"}
    assert dd.topic_config("t").retention_ms == 1000
    for p in range(5):
        for b in t.replicas[p]:
            assert dd.partition_path(("t", p), b).is_dir()
    t = dd.alter_topic("t", delete_configs=["retention.ms"])
    assert t.configs == {}
    with pytest.raises(InvalidPartitionsError):
        dd.alter_topic("t", partitions=5)
    with pytest.raises(UnknownTopicOrPartitionError):
        dd.alter_topic("nope", partitions=5)


def test_delete_removes_every_replica(tmp_path):
    dd = DataDir.init(tmp_path / "d", brokers=2)
    dd.create_topic("t", 2, 2)
    dd.create_topic("keep", 1, 1)
    dd.delete_topic("t")
    assert dd.topics() == ["keep"]
    for b in (1, 2):
        assert not [e for e in (tmp_path / "d" / f"broker-{b}").iterdir() if e.name.startswith("t-")]
    with pytest.raises(UnknownTopicOrPartitionError):
        dd.delete_topic("t")


def test_a_kafka_log_dir_opens_read_only(tmp_path):
    dd = DataDir.init(tmp_path / "d")
    dd.create_topic("t", replica_assignment={0: [1], 1: [1]})
    kafka = DataDir.open(tmp_path / "d" / "broker-1")
    assert kafka.kafka_log_dir and kafka.topics() == ["t"] and kafka.topic("t").partitions == 2
    with pytest.raises(ReadOnlyDataDirError):
        kafka.create_topic("x", 1, 1)


def _produce_in_child(path, topic, start, n):
    dd = DataDir.open(path)
    with Producer(dd, batch_size=200, linger_ms=0) as p:
        for i in range(start, start + n):
            p.send(topic, b"%d" % i, partition=0)


def test_writers_in_several_processes_take_turns(tmp_path):
    dd = DataDir.init(tmp_path / "d")
    # No fsync per produce: what is tested is the writers' turns, and 3,000 fsyncs on a busy
    # disk can outlast the join's timeout.
    dd.create_topic("t", replica_assignment={0: [1]}, configs={"plog.fsync.on.produce": "false"})
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_produce_in_child, args=(str(dd.path), "t", i * 1000, 1000)) for i in range(3)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(120)
        assert proc.exitcode == 0
    log = dd.open_reader(("t", 0))
    values = sorted(int(r.value) for r in log.read_records())
    log.close()
    assert values == list(range(3000))
