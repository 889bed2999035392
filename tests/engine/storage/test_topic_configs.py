"""Effective topic configs: Kafka defaults < server.properties < dynamic broker configs <
topic configs (KRaft metadata log or plog's topics file) < command line."""

from __future__ import annotations

import json
import uuid

import pytest

from plog.engine.errors import ConfigError
from plog.engine.storage.topic_configs import (
    COMMAND_LINE,
    DYNAMIC_BROKER,
    DYNAMIC_CLUSTER,
    KAFKA_DEFAULT,
    PLOG_TOPICS,
    SERVER_PROPERTIES,
    TOPIC_METADATA,
    ConfigResolver,
    read_metadata_image,
    read_properties,
    topic_settings_from_broker,
)
from plog.formats.metadata_schemas import MetadataRecordType
from plog.formats.cluster_metadata import encode_metadata_value
from plog.formats.record_batch import encode_batch


def test_kafka_metadata_log_of_the_corpus(corpus):
    """A real broker's __cluster_metadata-0: topic configs set at creation are found."""
    log_dir = corpus / "ArthurArutunyan04__Backend_labs" / "kafka-data"
    found = read_metadata_image(log_dir)
    assert found.topic_configs["oms_order_created"] == {"cleanup.policy": "delete", "retention.ms": "86400000"}
    assert found.topic_configs["__consumer_offsets"]["cleanup.policy"] == "compact"
    assert "oms_order_created" in found.topics
    eff = ConfigResolver(log_dir).resolve("oms_order_created")
    assert eff.config.retention_ms == 86400000
    assert eff.source_of("retention.ms") == TOPIC_METADATA
    assert eff.source_of("retention.bytes") == KAFKA_DEFAULT
    assert ConfigResolver(log_dir).resolve("__consumer_offsets").config.compact


def test_zookeeper_era_dir_has_no_metadata(corpus):
    log_dir = corpus / "William0423__kafka" / "kafka-logs"
    assert read_metadata_image(log_dir).topic_configs == {}
    assert ConfigResolver(log_dir).resolve("anything").config.retention_ms == 7 * 24 * 3600 * 1000


def test_broker_names_map_to_topic_names():
    assert topic_settings_from_broker({"log.retention.hours": "168"}) == {"retention.ms": str(168 * 3600_000)}
    # ms wins over minutes over hours, as in Kafka.
    assert topic_settings_from_broker({"log.retention.hours": "1", "log.retention.minutes": "2"}) == \
        {"retention.ms": "120000"}
    assert topic_settings_from_broker({"log.retention.ms": "5", "log.retention.hours": "1"})["retention.ms"] == "5"
    assert topic_settings_from_broker({"log.retention.hours": "-1"})["retention.ms"] == "-1"
    assert topic_settings_from_broker({"log.cleaner.min.cleanable.ratio": "0.1", "log.cleanup.policy": "compact"}) \
        == {"min.cleanable.dirty.ratio": "0.1", "cleanup.policy": "compact"}
    with pytest.raises(ConfigError, match="log.retention.hours"):
        topic_settings_from_broker({"log.retention.hours": "a week"})


def test_read_properties(tmp_path):
    f = tmp_path / "server.properties"
    f.write_text("# comment\n! also\nlog.retention.hours=24\nlog.dirs = /a,\\\n  /b\nnode.id: 3\nempty\n")
    assert read_properties(f) == {"log.retention.hours": "24", "log.dirs": "/a,/b", "node.id": "3", "empty": ""}


def _metadata_log(log_dir, records):
    """A __cluster_metadata-0 with ``records`` (type name, fields) as Kafka writes them."""
    part = log_dir / "__cluster_metadata-0"
    part.mkdir(parents=True)
    values = [encode_metadata_value(MetadataRecordType[t], 0, f) for t, f in records]
    (part / "00000000000000000000.log").write_bytes(
        encode_batch([(i, 1000, None, v) for i, v in enumerate(values)], base_offset=0))


def test_precedence_of_every_layer(tmp_path):
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    (log_dir / "meta.properties").write_text("version=1\nnode.id=3\ncluster.id=abc\n")
    tid = uuid.uuid4()
    _metadata_log(log_dir, [
        ("TOPIC_RECORD", {"name": "t", "topicId": tid}),
        ("CONFIG_RECORD", {"resourceType": 4, "resourceName": "", "name": "log.retention.bytes", "value": "111"}),
        ("CONFIG_RECORD", {"resourceType": 4, "resourceName": "3", "name": "log.cleaner.delete.retention.ms",
                           "value": "222"}),
        ("CONFIG_RECORD", {"resourceType": 4, "resourceName": "7", "name": "log.cleaner.delete.retention.ms",
                           "value": "999"}),  # another broker's: ignored
        ("CONFIG_RECORD", {"resourceType": 2, "resourceName": "t", "name": "segment.bytes", "value": "5000"}),
        ("CONFIG_RECORD", {"resourceType": 2, "resourceName": "t", "name": "min.compaction.lag.ms", "value": "7"}),
        ("CONFIG_RECORD", {"resourceType": 2, "resourceName": "t", "name": "min.compaction.lag.ms", "value": None}),
    ])
    props = tmp_path / "server.properties"
    props.write_text("log.retention.hours=2\nlog.retention.bytes=1\n")
    resolver = ConfigResolver(log_dir, server_properties=props, overrides={"file.delete.delay.ms": "0"})
    assert resolver.node_id == 3
    eff = resolver.resolve("t")
    assert (eff.config.retention_ms, eff.source_of("retention.ms")) == (7_200_000, SERVER_PROPERTIES)
    assert (eff.config.retention_bytes, eff.source_of("retention.bytes")) == (111, DYNAMIC_CLUSTER)
    assert (eff.config.delete_retention_ms, eff.source_of("delete.retention.ms")) == (222, DYNAMIC_BROKER)
    assert (eff.config.segment_bytes, eff.source_of("segment.bytes")) == (5000, TOPIC_METADATA)
    assert eff.source_of("min.compaction.lag.ms") == KAFKA_DEFAULT  # deleted by a null ConfigRecord
    assert (eff.config.file_delete_delay_ms, eff.source_of("file.delete.delay.ms")) == (0, COMMAND_LINE)
    assert eff.describe("segment.bytes") == "segment.bytes=5000 (topic config (metadata log))"


def test_removed_topic_loses_its_configs(tmp_path):
    tid = uuid.uuid4()
    _metadata_log(tmp_path, [
        ("TOPIC_RECORD", {"name": "gone", "topicId": tid}),
        ("CONFIG_RECORD", {"resourceType": 2, "resourceName": "gone", "name": "retention.ms", "value": "5"}),
        ("REMOVE_TOPIC_RECORD", {"topicId": tid}),
    ])
    found = read_metadata_image(tmp_path)
    assert "gone" not in found.topics and "gone" not in found.topic_configs


def test_plog_topics_file(tmp_path):
    (tmp_path / ".plog-topics.json").write_text(json.dumps(
        {"version": 1, "topics": {"t": {"topic_id": str(uuid.uuid4()), "configs": {"retention.ms": "10"}}}}))
    eff = ConfigResolver(tmp_path).resolve("t")
    assert (eff.config.retention_ms, eff.source_of("retention.ms")) == (10, PLOG_TOPICS)


def test_bad_values_are_one_line_errors(tmp_path):
    with pytest.raises(ConfigError, match="unknown topic config"):
        ConfigResolver(tmp_path, overrides={"retention.hours": "1"})
    with pytest.raises(ConfigError, match="topic t: invalid value"):
        ConfigResolver(tmp_path, overrides={"retention.ms": "soon"}).resolve("t")
    (tmp_path / ".plog-topics.json").write_text("{not json")
    with pytest.raises(ConfigError, match="not a plog topics file"):
        ConfigResolver(tmp_path)


def test_torn_metadata_log_tail_keeps_what_was_read(tmp_path):
    tid = uuid.uuid4()
    _metadata_log(tmp_path, [("TOPIC_RECORD", {"name": "t", "topicId": tid}),
                             ("CONFIG_RECORD", {"resourceType": 2, "resourceName": "t", "name": "retention.ms",
                                                "value": "5"})])
    seg = tmp_path / "__cluster_metadata-0" / "00000000000000000000.log"
    seg.write_bytes(seg.read_bytes() + b"\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x40garbage")
    assert read_metadata_image(tmp_path).topic_configs == {"t": {"retention.ms": "5"}}


def test_internal_segment_bytes_is_the_segment_size(tmp_path):
    """Kafka 4.x: a topic's internal.segment.bytes overrides segment.bytes (LogConfig.segmentSize)."""
    tid = uuid.uuid4()
    _metadata_log(tmp_path, [
        ("TOPIC_RECORD", {"name": "t", "topicId": tid}),
        ("CONFIG_RECORD", {"resourceType": 2, "resourceName": "t", "name": "segment.bytes", "value": "1048576"}),
        ("CONFIG_RECORD", {"resourceType": 2, "resourceName": "t", "name": "internal.segment.bytes",
                           "value": "2048"}),
    ])
    eff = ConfigResolver(tmp_path).resolve("t")
    assert eff.config.segment_bytes == 2048
    assert eff.source_of("segment.bytes") == "topic config (metadata log), internal.segment.bytes"


def test_partition_registrations_follow_kafkas_merge(tmp_path):
    """PartitionRecord, then PartitionChangeRecords as Kafka's PartitionRegistration.merge applies
    them: an ISR change keeps the leader epoch, any leader field but -2 (none, -1, included)
    starts a new one; a plain Kafka log directory describes the result."""
    from plog.engine.cluster.data_dir import DataDir
    from plog.engine.storage.topic_configs import read_metadata_image

    tid, gone = uuid.uuid4(), uuid.uuid4()
    reg = {"replicas": [1, 2], "isr": [1, 2], "removingReplicas": [], "addingReplicas": [], "leader": 1,
           "leaderEpoch": 4, "partitionEpoch": 7}
    (tmp_path / "meta.properties").write_text("version=1\nnode.id=2\ncluster.id=abc\n")
    _metadata_log(tmp_path, [
        ("TOPIC_RECORD", {"name": "t", "topicId": tid}),
        ("PARTITION_RECORD", {"partitionId": 0, "topicId": tid, **reg}),
        ("PARTITION_RECORD", {"partitionId": 1, "topicId": tid, **reg}),
        ("PARTITION_CHANGE_RECORD", {"partitionId": 0, "topicId": tid, "isr": [1]}),
        ("PARTITION_CHANGE_RECORD", {"partitionId": 0, "topicId": tid, "leader": -1}),
        ("PARTITION_CHANGE_RECORD", {"partitionId": 0, "topicId": tid, "leader": 2, "isr": [2]}),
        ("TOPIC_RECORD", {"name": "gone", "topicId": gone}),
        ("PARTITION_RECORD", {"partitionId": 0, "topicId": gone, **reg}),
        ("REMOVE_TOPIC_RECORD", {"topicId": gone}),
    ])
    image = read_metadata_image(tmp_path)
    p0, p1 = image.partitions["t"][0], image.partitions["t"][1]
    assert (p0.leader, p0.leader_epoch, p0.isr, p0.replicas, p0.partition_epoch) == (2, 6, [2], [1, 2], 10)
    assert (p1.leader, p1.leader_epoch, p1.isr, p1.partition_epoch) == (1, 4, [1, 2], 7)
    assert set(image.partitions) == {"t"} and image.last_offset == 8
    dd = DataDir.open(tmp_path)
    assert dd.kafka_log_dir and dd.topics() == ["t"]
    rows = dd.describe_partitions("t")
    assert [(r.leader, r.leader_epoch, r.replicas, r.isr, r.under_replicated, r.source) for r in rows] == \
        [(2, 6, [1, 2], [2], True, "metadata log"), (1, 4, [1, 2], [1, 2], False, "metadata log")]
    # neither partition has a folder on this broker (2): no offsets, and broker 1's replica is elsewhere
    assert [(r.broker, r.folder) for r in rows[0].replica_states] == [(1, False), (2, False)]
