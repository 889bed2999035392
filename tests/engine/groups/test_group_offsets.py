"""Group state from ``__consumer_offsets`` folders (plog.engine.groups.committed_offsets).

Synthetic partitions are written with the engine: ``Log.open`` + ``append_as_leader`` of
batches whose records are the coordinator's keys and values, and
``append_end_txn_marker`` for transactional offset commits. Every expected value is the
test's own record of what it wrote. The real Kafka log directories of the corpus are
checked against values read off ``plog dump --offsets-decoder`` of their segments.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from plog.engine.storage.log_config import LogConfig
from plog.engine.errors import GroupOffsetsError
from plog.engine.groups.committed_offsets import (
    CommittedOffset,
    list_groups,
    offsets_partition_dirs,
    read_group_state,
    replay_offsets_partition,
)
from plog.engine.storage.log import Log
from plog.engine.storage.file_names import TopicPartition
from plog.formats.compression import GZIP
from plog.formats.legacy import encode_legacy_batch
from plog.formats.offsets_topic import (
    encode_consumer_assignment,
    encode_consumer_subscription,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_key,
    encode_offset_commit_key,
    encode_offset_commit_value,
    encode_value,
    partition_for_group,
)
from plog.formats.record_batch import encode_batch

NOW = int(time.time() * 1000)
TP = TopicPartition


def same_partition_groups(first: str, n: int) -> list[str]:
    """``first`` and more group ids that hash to its ``__consumer_offsets`` partition."""
    target = partition_for_group(first)
    found = [first]
    i = 0
    while len(found) < n:
        candidate = f"group-{i}"
        if candidate != first and partition_for_group(candidate) == target:
            found.append(candidate)
        i += 1
    return found


class OffsetsPartition:
    """A ``__consumer_offsets-<p>`` folder written as a group coordinator would."""

    def __init__(self, log_dir: Path, partition: int, segment_bytes: int | None = None):
        props = {} if segment_bytes is None else {"segment.bytes": segment_bytes}
        self.dir = log_dir / f"__consumer_offsets-{partition}"
        self.log = Log.open(self.dir, LogConfig.from_properties(props))
        self.seq: dict[int, int] = {}

    def write(self, records: list[tuple[bytes, bytes | None]], *, producer_id: int = -1,
              transactional: bool = False) -> int:
        """One batch; returns the offset of its first record."""
        recs = [(i, NOW + i, k, v) for i, (k, v) in enumerate(records)]
        kw = {}
        if producer_id >= 0:
            kw = dict(producer_id=producer_id, producer_epoch=0, base_sequence=self.seq.get(producer_id, 0),
                      is_transactional=transactional)
            self.seq[producer_id] = self.seq.get(producer_id, 0) + len(records)
        return self.log.append_as_leader(encode_batch(recs, **kw)).first_offset

    def commit(self, group: str, offsets: dict[tuple[str, int], int], **kw) -> int:
        return self.write([(encode_offset_commit_key(group, t, p),
                            encode_offset_commit_value(o, metadata=f"m{o}", commit_timestamp=NOW, leader_epoch=3))
                           for (t, p), o in offsets.items()], **kw)

    def delete_offsets(self, group: str, partitions: list[tuple[str, int]], **kw) -> int:
        return self.write([(encode_offset_commit_key(group, t, p), None) for t, p in partitions], **kw)

    def end(self, producer_id: int, *, commit: bool) -> int:
        return self.log.append_end_txn_marker(producer_id, 0, commit=commit, coordinator_epoch=1).first_offset


def expected(offset: int, record_offset: int) -> CommittedOffset:
    """What ``OffsetsPartition.commit`` wrote for ``offset`` at ``record_offset``."""
    return CommittedOffset(offset, 3, f"m{offset}", NOW, None, record_offset)


def member(member_id: str, assignment: dict[str, list[int]]) -> dict:
    return {
        "memberId": member_id,
        "groupInstanceId": None,
        "clientId": "client-" + member_id,
        "clientHost": "/10.0.0.1",
        "rebalanceTimeout": 300000,
        "sessionTimeout": 45000,
        "subscription": encode_consumer_subscription(
            {"topics": sorted(assignment), "userData": None, "ownedPartitions": [], "generationId": -1,
             "rackId": None}),
        "assignment": encode_consumer_assignment(
            {"assignedPartitions": [{"topic": t, "partitions": ps} for t, ps in assignment.items()],
             "userData": None}),
    }


# -- plain commits, group metadata -----------------------------------------------------------


def test_last_commit_wins_and_a_tombstone_deletes(tmp_path):
    group = "orders-app"
    part = OffsetsPartition(tmp_path, partition_for_group(group))
    part.commit(group, {("orders", 0): 5, ("orders", 1): 7})      # 0, 1
    part.commit(group, {("orders", 0): 9})                         # 2
    part.delete_offsets(group, [("orders", 1)])                    # 3
    part.commit(group, {("payments", 0): 1})                       # 4
    part.delete_offsets(group, [("payments", 0)])                  # 5
    part.commit(group, {("payments", 0): 2})                       # 6: back after its tombstone
    state = read_group_state([tmp_path], group)
    assert list(state) == [group]
    s = state[group]
    assert s.offsets == {TP("orders", 0): expected(9, 2), TP("payments", 0): expected(2, 6)}
    assert s.metadata is None and not s.deleted and s.exists
    assert s.partition == partition_for_group(group)
    assert s.pending_transactional_offsets == {}


def test_two_groups_in_one_partition(tmp_path):
    a, b = same_partition_groups("billing", 2)
    part = OffsetsPartition(tmp_path, partition_for_group(a))
    part.commit(a, {("t", 0): 1})
    part.commit(b, {("t", 0): 100, ("t", 1): 200})
    part.write([(encode_offset_commit_key(a, "t", 1), encode_offset_commit_value(11, commit_timestamp=NOW)),
                (encode_offset_commit_key(b, "t", 0), None)])
    everything = read_group_state([tmp_path])
    assert list(everything) == sorted([a, b])
    assert everything[a].offsets == {TP("t", 0): expected(1, 0),
                                     TP("t", 1): CommittedOffset(11, None, "", NOW, None, 3)}
    assert everything[b].offsets == {TP("t", 1): expected(200, 2)}
    only_a = read_group_state([tmp_path], a)
    assert list(only_a) == [a] and only_a[a] == everything[a]
    assert list_groups([tmp_path]) == sorted([a, b])
    # A group of the same partition that was never written, and one of another partition.
    assert read_group_state([tmp_path], "nobody-" + a) == {}


def test_classic_group_metadata_members_and_deletion(tmp_path):
    group = "reporting"
    part = OffsetsPartition(tmp_path, partition_for_group(group))
    members = [member("m1", {"orders": [0, 2]}), member("m2", {"orders": [1], "payments": [0]})]
    value = encode_group_metadata_value("consumer", 4, "range", "m1", current_state_timestamp=NOW, members=members)
    part.write([(encode_group_metadata_key(group), value)])                                   # 0
    part.commit(group, {("orders", 0): 42})                                                    # 1
    s = read_group_state([tmp_path], group)[group]
    meta = s.metadata
    assert (meta.protocol_type, meta.generation, meta.protocol, meta.leader, meta.current_state_timestamp,
            meta.value_version, meta.record_offset) == ("consumer", 4, "range", "m1", NOW, 3, 0)
    assert [(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.session_timeout, m.rebalance_timeout)
            for m in meta.members] == [("m1", None, "client-m1", "/10.0.0.1", 45000, 300000),
                                       ("m2", None, "client-m2", "/10.0.0.1", 45000, 300000)]
    assert [m.assignment for m in meta.members] == [(TP("orders", 0), TP("orders", 2)),
                                                    (TP("orders", 1), TP("payments", 0))]
    assert meta.members[0].raw_assignment == members[0]["assignment"]
    # DeleteGroups: tombstones for the offsets and the group.
    part.write([(encode_offset_commit_key(group, "orders", 0), None), (encode_group_metadata_key(group), None)])
    s = read_group_state([tmp_path], group)[group]
    assert s.deleted and s.metadata is None and s.offsets == {} and not s.exists
    assert list_groups([tmp_path]) == []
    # The same id used again: a new empty group (no members, protocol not chosen yet).
    part.write([(encode_group_metadata_key(group), encode_group_metadata_value("consumer", 0, None, None, NOW))])
    s = read_group_state([tmp_path], group)[group]
    assert not s.deleted and s.metadata.generation == 0 and s.metadata.members == () and s.exists


def test_non_consumer_protocols_keep_raw_assignments(tmp_path):
    group = "connect-cluster"
    part = OffsetsPartition(tmp_path, partition_for_group(group))
    raw = b"\x00\x01opaque"
    m = dict(member("w1", {}), subscription=b"sub", assignment=raw)
    part.write([(encode_group_metadata_key(group), encode_group_metadata_value("connect", 2, "sessioned", "w1",
                                                                               NOW, members=[m]))])
    [mem] = read_group_state([tmp_path], group)[group].metadata.members
    assert mem.assignment is None and mem.raw_assignment == raw and mem.raw_subscription == b"sub"


# -- transactional offset commits ------------------------------------------------------------


def test_transactional_commits_visible_after_commit_dropped_after_abort(tmp_path):
    group = "eos-app"
    part = OffsetsPartition(tmp_path, partition_for_group(group))
    part.commit(group, {("in", 0): 10, ("in", 1): 20})                                  # 0-1
    part.commit(group, {("in", 0): 15}, producer_id=7, transactional=True)              # 2
    s = read_group_state([tmp_path], group)[group]
    # Pending: the consumer still sees the old offset.
    assert s.offsets[TP("in", 0)] == expected(10, 0)
    assert s.pending_transactional_offsets == {7: {TP("in", 0): expected(15, 2)}}
    part.end(7, commit=True)                                                             # 3
    s = read_group_state([tmp_path], group)[group]
    assert s.offsets == {TP("in", 0): expected(15, 2), TP("in", 1): expected(20, 1)}
    assert s.pending_transactional_offsets == {}
    part.commit(group, {("in", 1): 99}, producer_id=7, transactional=True)              # 4
    part.commit(group, {("in", 0): 77}, producer_id=8, transactional=True)              # 5
    part.end(7, commit=False)                                                            # 6
    s = read_group_state([tmp_path], group)[group]
    assert s.offsets == {TP("in", 0): expected(15, 2), TP("in", 1): expected(20, 1)}
    assert s.pending_transactional_offsets == {8: {TP("in", 0): expected(77, 5)}}
    part.end(8, commit=True)                                                             # 7
    s = read_group_state([tmp_path], group)[group]
    assert s.offsets == {TP("in", 0): expected(77, 5), TP("in", 1): expected(20, 1)}


def test_a_plain_commit_appended_after_a_transactional_one_wins(tmp_path):
    """Kafka keeps the most recently appended commit when a transaction commits after a
    plain commit of the same partition was written (``olderThan``)."""
    group = "mixed"
    part = OffsetsPartition(tmp_path, partition_for_group(group))
    part.commit(group, {("a", 0): 1, ("a", 1): 1})                                       # 0-1
    part.commit(group, {("a", 0): 50, ("a", 1): 50}, producer_id=3, transactional=True)  # 2-3
    part.commit(group, {("a", 1): 60})                                                   # 4: after the txn's record
    part.end(3, commit=True)                                                             # 5
    s = read_group_state([tmp_path], group)[group]
    assert s.offsets == {TP("a", 0): expected(50, 2), TP("a", 1): expected(60, 4)}


def test_a_transactional_tombstone_only_touches_its_pending_commit(tmp_path):
    group = "txn-delete"
    part = OffsetsPartition(tmp_path, partition_for_group(group))
    part.commit(group, {("x", 0): 4})                                                    # 0
    part.commit(group, {("x", 0): 8, ("x", 1): 8}, producer_id=5, transactional=True)    # 1-2
    part.delete_offsets(group, [("x", 0)], producer_id=5, transactional=True)            # 3
    part.end(5, commit=True)                                                             # 4
    s = read_group_state([tmp_path], group)[group]
    assert s.offsets == {TP("x", 0): expected(4, 0), TP("x", 1): expected(8, 2)}


# -- other record types, torn and corrupt tails, several log dirs -------------------------


def test_kip848_and_unknown_record_types_are_skipped_and_counted(tmp_path):
    group = "new-protocol"
    part = OffsetsPartition(tmp_path, partition_for_group(group))
    meta_key = encode_key("consumer_group_metadata", 3, {"groupId": group})
    member_key = encode_key("consumer_group_member_metadata", 5, {"groupId": group, "memberId": "x"})
    part.write([(meta_key, encode_value("consumer_group_metadata", 0, {"epoch": 1})),
                (member_key, b"\x00\x00opaque-not-decoded")])
    part.write([(b"\x00\x11" + b"\x00\x03abc", b"\x00\x00")])  # record type 17: unknown here
    part.commit(group, {("t", 0): 3})
    replay = replay_offsets_partition(part.dir)
    assert replay.unknown_records == 1 and replay.undecodable_records == 0 and replay.records == 4
    s = replay.groups[group]
    assert s.skipped_records == 2 and s.live_skipped_keys == 2 and s.metadata is None
    assert s.offsets == {TP("t", 0): expected(3, 3)}
    # The group's offsets go, its consumer-group records stay: it still exists.
    part.delete_offsets(group, [("t", 0)])
    assert list_groups([tmp_path]) == [group]
    part.write([(meta_key, None), (member_key, None)])
    s = read_group_state([tmp_path], group)[group]
    assert s.skipped_records == 4 and s.live_skipped_keys == 0 and not s.exists
    assert list_groups([tmp_path]) == []


def test_segments_torn_tails_and_corruption(tmp_path):
    group = "rolling"
    part = OffsetsPartition(tmp_path, partition_for_group(group), segment_bytes=400)
    offsets = {}
    for i in range(30):
        offsets[("t", i % 4)] = i
        part.commit(group, {("t", i % 4): i})
    part.log.close()
    logs = sorted(part.dir.glob("*.log"))
    assert len(logs) > 3
    want = {TP(t, p): expected(o, o) for (t, p), o in sorted(offsets.items())}
    assert read_group_state([tmp_path], group)[group].offsets == want
    # A batch being written: its first 40 bytes, then a header-less fragment.
    last = logs[-1]
    whole = last.read_bytes()
    torn = encode_batch([(0, NOW, encode_offset_commit_key(group, "t", 0), encode_offset_commit_value(999))])
    last.write_bytes(whole + torn[:40])
    replay = replay_offsets_partition(part.dir, group=group)
    assert replay.groups[group].offsets == want
    assert replay.trailing_bytes == 40 and replay.tail_error is None and replay.log_end_offset == 30
    # Zeros after the last batch (a preallocated or half-flushed tail): not data either.
    last.write_bytes(whole + bytes(64))
    replay = replay_offsets_partition(part.dir, group=group)
    assert replay.groups[group].offsets == want and replay.trailing_bytes == 64 and replay.tail_error
    last.write_bytes(whole)
    # The same damage before the last segment is corruption.
    first = logs[0]
    first.write_bytes(first.read_bytes() + bytes(64))
    with pytest.raises(GroupOffsetsError, match=first.name):
        read_group_state([tmp_path], group)


def test_the_most_advanced_replica_is_read(tmp_path):
    group = "replicated"
    p = partition_for_group(group)
    behind, ahead = tmp_path / "broker-1", tmp_path / "broker-2"
    part = OffsetsPartition(behind, p)
    part.commit(group, {("t", 0): 1})
    part.log.close()
    shutil.copytree(behind, ahead)
    part = OffsetsPartition(ahead, p)
    part.commit(group, {("t", 0): 2})
    part.log.close()
    assert offsets_partition_dirs([behind, ahead]) == {p: [behind / f"__consumer_offsets-{p}",
                                                           ahead / f"__consumer_offsets-{p}"]}
    for dirs in ([behind, ahead], [ahead, behind]):
        assert read_group_state(dirs, group)[group].offsets == {TP("t", 0): expected(2, 1)}


def test_reading_changes_nothing(tmp_path):
    group = "untouched"
    part = OffsetsPartition(tmp_path, partition_for_group(group), segment_bytes=300)
    for i in range(10):
        part.commit(group, {("t", 0): i}, producer_id=4, transactional=True)
        part.end(4, commit=i % 2 == 0)
    d = part.dir

    def listing():
        return sorted((q.name, q.stat().st_size, q.stat().st_mtime_ns) for q in d.iterdir())

    before = listing()
    assert read_group_state([tmp_path], group)[group].offsets == {TP("t", 0): expected(8, 16)}
    list_groups([tmp_path])
    assert listing() == before


# -- real Kafka log directories ----------------------------------------------------------------


def test_corpus_kafka_2x_group_with_thousands_of_commits(corpus):
    log_dir = corpus / "William0423__kafka" / "kafka-logs"
    state = read_group_state([log_dir])
    assert list(state) == ["debug-consumer-group"]
    s = state["debug-consumer-group"]
    assert s.partition == 28 == partition_for_group("debug-consumer-group")
    # The last of 8201 commits of the same partition (OffsetCommitValue v2: no leader epoch).
    assert s.offsets == {TP("debug_topic", 0): CommittedOffset(40, None, "", 1534312623113, None, 8201)}
    meta = s.metadata
    assert (meta.protocol_type, meta.generation, meta.protocol, meta.leader, meta.current_state_timestamp,
            meta.value_version, meta.record_offset) == (
        "consumer", 1, "range", "consumer-1-61400dcb-1b93-4b4e-8891-5ae75e419305", 1534299389537, 2, 0)
    [m] = meta.members
    assert (m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout, m.session_timeout,
            m.assignment) == ("consumer-1-61400dcb-1b93-4b4e-8891-5ae75e419305", None, "consumer-1", "/127.0.0.1",
                              300000, 10000, (TP("debug_topic", 0),))
    assert list_groups([log_dir]) == ["debug-consumer-group"]


def test_corpus_librdkafka_group_on_a_compacted_partition(corpus):
    log_dir = corpus / "ArthurArutunyan04__Backend_labs" / "kafka-data"
    state = read_group_state([log_dir], "universe-labs-oms-consumer")
    s = state["universe-labs-oms-consumer"]
    assert s.partition == 19
    assert s.offsets == {
        TP("oms_order_created", 1): CommittedOffset(81731, 8, "", 1765403766080, None, 258480),
        TP("oms_order_created", 2): CommittedOffset(40705, 8, "", 1765403766080, None, 258496),
        TP("oms_order_created", 3): CommittedOffset(82261, 8, "", 1765403766080, None, 258515),
        TP("oms_order_status_changed", 1): CommittedOffset(21188, 8, "", 1765403766162, None, 258519),
        TP("oms_order_status_changed", 2): CommittedOffset(10889, 8, "", 1765403766162, None, 258522),
        TP("oms_order_status_changed", 3): CommittedOffset(21677, 8, "", 1765403766162, None, 258526),
    }
    meta = s.metadata
    assert (meta.protocol_type, meta.generation, meta.protocol, meta.leader, meta.current_state_timestamp) == (
        "consumer", 9, "range", "rdkafka-1bc005e0-f563-4fca-bed5-1b8a0c9691d4", 1765403389575)
    assert [(m.member_id, m.client_id, m.client_host, m.session_timeout, m.rebalance_timeout, m.assignment)
            for m in meta.members] == [
        ("rdkafka-68d84c5d-68c8-4027-955a-b24c32315bcc", "rdkafka", "/172.18.0.7", 60000, 300000,
         tuple(TP("oms_order_status_changed", p) for p in range(5))),
        ("rdkafka-1bc005e0-f563-4fca-bed5-1b8a0c9691d4", "rdkafka", "/172.18.0.7", 60000, 300000,
         tuple(TP("oms_order_created", p) for p in range(5))),
    ]
    # The folder also holds index files of a segment whose .log is gone: they are ignored.
    assert replay_offsets_partition(log_dir / "__consumer_offsets-19").log_end_offset == 258527


def test_corpus_deleted_group(corpus):
    log_dir = corpus / "yuanliubei__kafka-source-code" / "kafka-logs"
    s = read_group_state([log_dir], "DemoConsumer")["DemoConsumer"]
    # Offset 2705908 committed at 56, group emptied at 57, both tombstoned at 58-59.
    assert s.deleted and s.offsets == {} and s.metadata is None and not s.exists
    assert list_groups([log_dir]) == []


def test_corpus_confluent_platform_groups(corpus):
    log_dir = corpus / "rjmfernandes__flink-on-prem" / "data"
    assert list_groups([log_dir]) == [
        "_confluent-controlcenter-7-6-0-1",
        "_confluent-controlcenter-7-6-0-1-command",
        "_confluent-controlcenter-7-6-0-lastProduceTimeConsumer",
        "connect-group",
        "schema-registry",
    ]
    state = read_group_state([log_dir])
    for group, s in state.items():
        assert s.partition == partition_for_group(group)
    # Offsets only, no group metadata (a consumer using assign(), not subscribe()).
    s = state["_confluent-controlcenter-7-6-0-lastProduceTimeConsumer"]
    assert s.metadata is None
    assert {tp.topic: (o.offset, o.leader_epoch, o.record_offset) for tp, o in s.offsets.items()} == {
        "products": (15439, 0, 0), "products_keyed": (25914, 0, 1), "loyalty_levels": (15524, 0, 2),
        "orders": (15525, 0, 3), "customers": (15404, 0, 4), "customers_keyed": (25812, 0, 5),
        "order_customer_product": (15525, 0, 6), "promotions": (17, 0, 7)}
    assert all(tp.partition == 0 for tp in s.offsets)
    # Kafka Streams: the metadata string is the application's own (base64 text here).
    s = state["_confluent-controlcenter-7-6-0-1-command"]
    assert s.offsets == {TP("_confluent-command", 0): CommittedOffset(2, None, "AgAAAY72k0g+", 1713533857012, None, 3)}
    assert (s.metadata.generation, s.metadata.protocol, s.metadata.record_offset) == (2, "stream", 2)
    s = state["_confluent-controlcenter-7-6-0-1"]
    assert len(s.offsets) == 19 and len(s.metadata.members) == 12
    assert s.offsets[TP("_confluent-monitoring", 0)] == CommittedOffset(2821, None, "AgAAAY73DL91", 1713541792633,
                                                                         None, 1560)
    # Connect and Schema Registry groups: empty after their last rebalance.
    for group, generation in (("connect-group", 10), ("schema-registry", 2)):
        meta = state[group].metadata
        assert (meta.generation, meta.protocol, meta.leader, meta.members) == (generation, None, None, ())


def test_corpus_connect_and_schema_registry_members(corpus):
    log_dir = corpus / "ItumelengMogase__Real-Time-Data-Pipeline-for-Patient-Admissions" / "kafka-data"
    state = read_group_state([log_dir])
    assert list(state) == ["compose-connect-group", "schema-registry"]
    connect = state["compose-connect-group"].metadata
    assert (connect.protocol_type, connect.generation, connect.protocol, connect.record_offset) == (
        "connect", 37, "sessioned", 36)
    [m] = connect.members
    assert (m.member_id, m.client_id, m.client_host, m.rebalance_timeout, m.session_timeout, m.assignment) == (
        "connect-1-5ca1b5b2-50fa-4e0a-a02c-4bbce2411343", "connect-1", "/172.18.0.9", 60000, 10000, None)
    sr = state["schema-registry"].metadata
    assert (sr.protocol_type, sr.generation, sr.protocol, sr.leader, sr.current_state_timestamp, sr.record_offset) \
        == ("sr", 19, "v0", "sr-1-85720a95-5fba-45b4-b406-13b07627d70d", 1728588424529, 38)
    assert sr.members[0].raw_subscription.startswith(b'{"host":"schema-registry"')


def test_a_kafka_0_10_partition_in_magic_1_messages(tmp_path):
    """Old brokers wrote magic v1 messages (one per record, or a compressed wrapper),
    OffsetCommitValue v1 with an expire timestamp and GroupMetadataValue v0."""
    group = "legacy"
    d = tmp_path / f"__consumer_offsets-{partition_for_group(group)}"
    log = Log.open(d)
    m = member("old-1", {"t": [0, 1]})
    del m["rebalanceTimeout"], m["groupInstanceId"]
    records = [
        (0, NOW, encode_group_metadata_key(group), encode_group_metadata_value("consumer", 1, "range", "old-1",
                                                                               members=[m], version=0)),
        (1, NOW, encode_offset_commit_key(group, "t", 0),
         encode_offset_commit_value(5, commit_timestamp=NOW, expire_timestamp=NOW + 86_400_000)),
    ]
    log.append_as_follower(encode_legacy_batch(records, magic=1))
    log.append_as_follower(encode_legacy_batch(
        [(2, NOW, encode_offset_commit_key(group, "t", 1), encode_offset_commit_value(6, commit_timestamp=NOW,
                                                                                      expire_timestamp=NOW + 1)),
         (3, NOW, encode_offset_commit_key(group, "t", 0), None)], magic=1, compression_codec=GZIP))
    log.close()
    s = read_group_state([tmp_path], group)[group]
    assert s.offsets == {TP("t", 1): CommittedOffset(6, None, "", NOW, NOW + 1, 2)}
    meta = s.metadata
    assert (meta.value_version, meta.current_state_timestamp, meta.generation) == (0, None, 1)
    [mem] = meta.members
    assert (mem.rebalance_timeout, mem.session_timeout, mem.group_instance_id, mem.assignment) == (
        45000, 45000, None, (TP("t", 0), TP("t", 1)))
