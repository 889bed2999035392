"""Consumer-group administration (``engine.group_admin``): list, describe with lag, every
reset strategy planned and executed, the refusal while members are live, delete, the
option parsers, and describe read-only on a real Kafka log directory from the corpus."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import CORPUS
from plog.engine.cluster.data_dir import DataDir
from plog.engine.clients.consumer import Consumer
from plog.engine.errors import (
    GroupIdNotFoundError,
    GroupNotInactiveError,
    InvalidResetArgumentError,
    NoOffsetForPartitionError,
    ReadOnlyDataDirError,
    UnknownTopicOrPartitionError,
)
from plog.engine.groups.admin import (
    GroupListing,
    ResetStrategy,
    delete_groups,
    describe_group,
    list_groups,
    parse_datetime,
    parse_iso_duration,
    parse_reset_plan,
    parse_topic_arg,
    plan_offset_reset,
    read_reset_plan,
    reset_offsets,
)
from plog.engine.groups.coordinator import GroupCoordinator
from plog.engine.clients.producer import Producer
from plog.engine.storage.file_names import TopicPartition

P0, P1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
#: Record i of partition 0 is at BASE + i s, record i of partition 1 at BASE + 2i s.
BASE = 1_714_521_600_000  # 2024-05-01T00:00:00Z
KAFKA_DIR = CORPUS / "ArthurArutunyan04__Backend_labs/kafka-data"
KAFKA_GROUP = "universe-labs-oms-consumer"


def _drain(c: Consumer, want: int) -> list:
    out = []
    for _ in range(200):
        out.extend(c.poll(10))
        if len(out) >= want:
            break
    return out


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """``orders``: 10 records in partition 0, 6 in partition 1; group ``g1`` committed
    offset 4 on partition 0 only, and has no members. Built once (producing and creating
    __consumer_offsets fsync a lot); each test gets a copy."""
    path = tmp_path_factory.mktemp("groups") / "d"
    d = DataDir.init(path, brokers=1)
    d.create_topic("orders", replica_assignment={0: [1], 1: [1]})
    with Producer(d) as p:
        for i in range(10):
            p.send("orders", b"v%d" % i, partition=0, timestamp_ms=BASE + i * 1000)
        for i in range(6):
            p.send("orders", b"w%d" % i, partition=1, timestamp_ms=BASE + i * 2000)
    c = Consumer(d, group_id="g1", auto_offset_reset="earliest", enable_auto_commit=False)
    c.subscribe(["orders"])
    assert len(_drain(c, 16)) == 16
    c.commit({P0: 4})
    c.close()
    return path


@pytest.fixture
def dd(template, tmp_path) -> DataDir:
    shutil.copytree(template, tmp_path / "d")
    return DataDir.open(tmp_path / "d")


def _committed(dd, group="g1") -> dict:
    return {tp: c.offset for tp, c in GroupCoordinator(dd).committed(group).items()}


def _new(plan) -> dict:
    return {(r.topic, r.partition): r.new_offset for r in plan.rows}


# -- describe and list ----------------------------------------------------------------------------


def test_describe_committed_offsets_log_end_and_lag(dd):
    d = describe_group(dd, "g1")
    assert (d.state, d.protocol_type, d.protocol, d.members, d.live) == ("Empty", "consumer", None, (), True)
    assert [(p.topic, p.partition, p.current_offset, p.log_end_offset, p.lag, p.consumer_id) for p in d.partitions] \
        == [("orders", 0, 4, 10, 6, None)]
    # After a commit of every position the lag is 0 on both partitions.
    c = Consumer(dd, group_id="g1", auto_offset_reset="earliest", enable_auto_commit=False)
    c.subscribe(["orders"])
    assert len(_drain(c, 12)) == 12  # p0 from its committed 4, p1 from the start
    c.commit()
    c.close()
    rows = describe_group(dd, "g1").partitions
    assert [(p.partition, p.current_offset, p.log_end_offset, p.lag) for p in rows] == [(0, 10, 10, 0), (1, 6, 6, 0)]


def test_describe_live_member_owns_partitions_without_offsets(dd):
    c = Consumer(dd, group_id="g1", client_id="billing-1", auto_offset_reset="earliest", enable_auto_commit=False)
    c.subscribe(["orders"])
    try:
        d = describe_group(dd, "g1")
        assert d.state == "Stable" and d.protocol == "range" and len(d.members) == 1
        member = d.members[0]
        assert member.client_id == "billing-1" and member.member_id.startswith("billing-1-")
        assert member.host.startswith("/") and member.assignment == (P0, P1)
        rows = [(p.partition, p.current_offset, p.log_end_offset, p.lag, p.consumer_id, p.host, p.client_id)
                for p in d.partitions]
        assert rows == [(0, 4, 10, 6, member.member_id, member.host, "billing-1"),
                        (1, None, 6, None, member.member_id, member.host, "billing-1")]
        # Once its session has expired the member no longer counts (the coordinator drops it
        # at the next group operation).
        later = describe_group(dd, "g1", now_ms=10**15)
        assert later.state == "Empty" and later.members == ()
        assert [p.consumer_id for p in later.partitions] == [None]
    finally:
        c.close()


def test_describe_unknown_group(dd):
    with pytest.raises(GroupIdNotFoundError) as e:
        describe_group(dd, "nope")
    assert str(e.value) == "Consumer group 'nope' does not exist."


def test_describe_partition_not_in_directory_has_no_log_end(dd):
    reset_offsets(dd, "g2", ResetStrategy.to_offset(3), topics=["orders:1"], execute=True)
    dd.delete_topic("orders")
    rows = describe_group(dd, "g2").partitions
    assert [(p.topic, p.partition, p.current_offset, p.log_end_offset, p.lag) for p in rows] == \
        [("orders", 1, 3, None, None)]


def test_list_groups(dd):
    reset_offsets(dd, "offsets-only", ResetStrategy.to_earliest(), topics=["orders"], execute=True)
    live = Consumer(dd, group_id="live", auto_offset_reset="earliest")
    live.subscribe(["orders"])
    try:
        assert list_groups(dd) == [
            GroupListing("g1", "Empty", "consumer", None, 0),
            GroupListing("live", "Stable", "consumer", "range", 1),
            GroupListing("offsets-only", "Empty", None, None, 0),
        ]
    finally:
        live.close(autocommit=False)


# -- reset: every strategy ------------------------------------------------------------------------


@pytest.mark.parametrize("strategy, expected", [
    (ResetStrategy.to_earliest(), {0: 0, 1: 0}),
    (ResetStrategy.to_latest(), {0: 10, 1: 6}),
    (ResetStrategy.to_offset(3), {0: 3, 1: 3}),
    (ResetStrategy.to_offset(8), {0: 8, 1: 6}),           # clamped to the log end
    (ResetStrategy.to_offset(-5), {0: 0, 1: 0}),          # clamped to the log start
    (ResetStrategy.to_datetime("2024-05-01T00:00:07.000"), {0: 7, 1: 4}),
    (ResetStrategy.to_datetime("2024-05-01T02:00:07.000+02:00"), {0: 7, 1: 4}),
    (ResetStrategy.to_datetime("2024-05-01T00:00:09.500Z"), {0: 10, 1: 5}),  # nothing at/after: log end on p0
    (ResetStrategy.to_datetime("2020-01-01"), {0: 0, 1: 0}),
    (ResetStrategy.by_duration("PT3S", now_ms=BASE + 10_000), {0: 7, 1: 4}),
    (ResetStrategy.by_duration("P1D", now_ms=BASE + 10_000), {0: 0, 1: 0}),
    (ResetStrategy.to_current(), {0: 4, 1: 6}),           # no offset on p1: the log end
    (ResetStrategy.from_plan({P0: 2, P1: 99}), {0: 2, 1: 6}),
    (ResetStrategy.to_spec("-3"), {0: 7, 1: 3}),
    (ResetStrategy.to_spec("@2024-05-01T00:00:05Z"), {0: 5, 1: 3}),
])
def test_reset_strategy_plan_then_execute(dd, strategy, expected):
    topics = None if strategy.kind == "from-file" else ["orders"]  # a plan file brings its partitions
    plan = plan_offset_reset(dd, "g1", strategy, topics=topics)
    assert _new(plan) == {("orders", p): o for p, o in expected.items()}
    assert [(r.partition, r.current_offset, r.log_start_offset, r.log_end_offset) for r in plan.rows] == \
        [(0, 4, 0, 10), (1, None, 0, 6)]
    assert not plan.executed and _committed(dd) == {P0: 4}  # a dry run commits nothing
    done = reset_offsets(dd, "g1", strategy, topics=topics, execute=True)
    assert done.executed and _new(done) == _new(plan)
    assert _committed(dd) == {TopicPartition("orders", p): o for p, o in expected.items()}


def test_shift_by_moves_from_the_committed_offset_and_clamps(dd):
    reset_offsets(dd, "g1", ResetStrategy.to_offset(4), topics=["orders"], execute=True)
    assert _new(plan_offset_reset(dd, "g1", ResetStrategy.shift_by(-2), all_topics=True)) == \
        {("orders", 0): 2, ("orders", 1): 2}
    assert _new(plan_offset_reset(dd, "g1", ResetStrategy.shift_by(5), all_topics=True)) == \
        {("orders", 0): 9, ("orders", 1): 6}
    assert _new(plan_offset_reset(dd, "g1", ResetStrategy.shift_by(-100), all_topics=True)) == \
        {("orders", 0): 0, ("orders", 1): 0}
    reset_offsets(dd, "g1", ResetStrategy.shift_by(3), topics=["orders:0"], execute=True)
    assert _committed(dd) == {P0: 7, P1: 4}


def test_shift_by_or_committed_without_an_offset_fails(dd):
    with pytest.raises(NoOffsetForPartitionError, match="Cannot shift offset for partition orders-1 since there "
                                                        "is no current committed offset"):
        plan_offset_reset(dd, "g1", ResetStrategy.shift_by(1), topics=["orders"])
    with pytest.raises(NoOffsetForPartitionError, match="orders-1"):
        plan_offset_reset(dd, "g1", ResetStrategy.to_spec("committed"), topics=["orders"])


def test_scopes(dd):
    # --all-topics: only the partitions the group has offsets for.
    assert _new(plan_offset_reset(dd, "g1", ResetStrategy.to_latest(), all_topics=True)) == {("orders", 0): 10}
    assert _new(plan_offset_reset(dd, "g1", ResetStrategy.to_latest(), topics=["orders:1"])) == {("orders", 1): 6}
    assert _new(plan_offset_reset(dd, "g1", ResetStrategy.to_latest(), topics=["orders:1,0", "orders:1"])) == \
        {("orders", 0): 10, ("orders", 1): 6}
    with pytest.raises(UnknownTopicOrPartitionError, match='The partitions "orders-2,orders-7" do not exist'):
        plan_offset_reset(dd, "g1", ResetStrategy.to_latest(), topics=["orders:2,7"])
    with pytest.raises(UnknownTopicOrPartitionError, match="Topic 'nope' does not exist"):
        plan_offset_reset(dd, "g1", ResetStrategy.to_latest(), topics=["nope"])
    with pytest.raises(InvalidResetArgumentError, match="One of the reset scopes"):
        plan_offset_reset(dd, "g1", ResetStrategy.to_latest())
    with pytest.raises(UnknownTopicOrPartitionError, match='"orders-5"'):
        plan_offset_reset(dd, "g1", ResetStrategy.from_plan({TopicPartition("orders", 5): 1}))


def test_reset_creates_a_new_group(dd):
    done = reset_offsets(dd, "fresh", ResetStrategy.to_offset(2), topics=["orders"], execute=True)
    assert done.state == "Empty" and _committed(dd, "fresh") == {P0: 2, P1: 2}
    assert [(p.partition, p.current_offset, p.lag) for p in describe_group(dd, "fresh").partitions] == \
        [(0, 2, 8), (1, 2, 4)]


def test_reset_refused_while_a_member_is_live(dd):
    c = Consumer(dd, group_id="g1", auto_offset_reset="earliest", enable_auto_commit=False)
    c.subscribe(["orders"])
    try:
        for execute in (False, True):  # Kafka refuses the dry run too
            with pytest.raises(GroupNotInactiveError) as e:
                reset_offsets(dd, "g1", ResetStrategy.to_earliest(), topics=["orders"], execute=execute)
            assert str(e.value) == ("Assignments can only be reset if the group 'g1' is inactive, "
                                    "but the current state is Stable.")
        assert _committed(dd) == {P0: 4}
    finally:
        c.close()
    reset_offsets(dd, "g1", ResetStrategy.to_earliest(), topics=["orders"], execute=True)
    assert _committed(dd) == {P0: 0, P1: 0}


# -- delete ---------------------------------------------------------------------------------------


def test_delete_groups(dd):
    reset_offsets(dd, "g2", ResetStrategy.to_latest(), topics=["orders"], execute=True)
    live = Consumer(dd, group_id="live", auto_offset_reset="earliest")
    live.subscribe(["orders"])
    try:
        result = delete_groups(dd, ["g1", "nope", "live", "g1"])
    finally:
        live.close(autocommit=False)
    assert result.deleted == {"g1": 1}
    assert result.failed == {
        "nope": "Deleting group 'nope' failed because the group does not exist.",
        "live": "Deleting group 'live' failed because the group is not empty (1 active member(s)).",
    }
    with pytest.raises(GroupIdNotFoundError):
        describe_group(dd, "g1")
    assert [g.group_id for g in list_groups(dd)] == ["g2", "live"]
    assert delete_groups(dd, ["g2", "live"]).deleted == {"g2": 2, "live": 0}
    assert list_groups(dd) == []


# -- parsers --------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, ms", [
    ("2024-05-01T00:00:07.000", BASE + 7000),          # Kafka's form, UTC without a zone
    ("2024-05-01T00:00:07.123Z", BASE + 7123),
    ("2024-05-01T02:00:07.000+02", BASE + 7000),
    ("2024-05-01T02:00:07.000+0200", BASE + 7000),
    ("2024-04-30T22:00:07.000-02:00", BASE + 7000),
    ("2024-05-01", BASE),
    ("2024-05-01T00:01", BASE + 60_000),
    ("1969-12-31T23:59:59.000Z", -1000),
])
def test_parse_datetime(text, ms):
    assert parse_datetime(text) == ms


@pytest.mark.parametrize("text", ["", "yesterday", "2024-13-01T00:00:00", "1714521600000", "2024-05-01T25:00"])
def test_parse_datetime_rejects(text):
    with pytest.raises(InvalidResetArgumentError, match="YYYY-MM-DDTHH:mm:SS.sss"):
        parse_datetime(text)


@pytest.mark.parametrize("text, seconds", [
    ("P1D", 86_400), ("PT1H30M", 5_400), ("PT15M", 900), ("P7DT12H", 7 * 86_400 + 43_200), ("pt2h", 7_200),
    ("PT0.5S", 0.5), ("PT-1.5S", -1.5), ("-PT6H", -21_600), ("P-1DT25H", 3_600), ("PT0S", 0),
])
def test_parse_iso_duration(text, seconds):
    assert parse_iso_duration(text) == int(seconds * 10**9)


@pytest.mark.parametrize("text", ["", "P", "PT", "1h", "P1H", "PT1D", "P1Y", "P1W", "PT1.5M", "15m"])
def test_parse_iso_duration_rejects(text):
    with pytest.raises(InvalidResetArgumentError, match="PnDTnHnMnS"):
        parse_iso_duration(text)


def test_by_duration_subtracts_from_now():
    assert ResetStrategy.by_duration("PT1H", now_ms=BASE).value == BASE - 3_600_000
    assert ResetStrategy.by_duration("PT0.0015S", now_ms=BASE).value == BASE - 2  # floor, as toEpochMilli


def test_parse_topic_arg():
    assert parse_topic_arg("orders") == ("orders", None)
    assert parse_topic_arg("orders:0,2") == ("orders", [0, 2])
    for bad, message in (("orders:", "Invalid partition ''"), ("orders:x", "Invalid partition 'x'"),
                         ("a:1:2", "expected topic name and partitions"), (":1", "expected topic name")):
        with pytest.raises(InvalidResetArgumentError, match=message):
            parse_topic_arg(bad)


def test_parse_reset_plan():
    assert parse_reset_plan("orders,0,2\r\n\norders,1,99\norders,0,3\n", "g1") == {P0: 3, P1: 99}
    both = "g1,orders,0,5\ng2,orders,1,7\ng1,orders,1,6\n"
    assert parse_reset_plan(both, "g1") == {P0: 5, P1: 6}
    with pytest.raises(InvalidResetArgumentError, match="No reset plan for group g3 found"):
        parse_reset_plan(both, "g3")
    with pytest.raises(InvalidResetArgumentError, match=r"plan.csv:2: expected topic,partition,offset, got 'x,y'"):
        parse_reset_plan("orders,0,1\nx,y\n", "g1", source="plan.csv")
    with pytest.raises(InvalidResetArgumentError, match="empty"):
        parse_reset_plan("\n", "g1")


def test_read_reset_plan_from_a_file_or_stdin(tmp_path):
    """--from-file's reading, in the engine (plog groups reset-offsets --from-file calls it):
    a file, '-' for standard input (named <stdin> in errors), and a file that is not UTF-8."""
    import io

    plan = tmp_path / "plan.csv"
    plan.write_text("orders,0,2\norders,1,5\n", encoding="utf-8")
    assert read_reset_plan(plan, "g1") == {P0: 2, P1: 5}
    assert read_reset_plan("-", "g1", stdin=io.StringIO("orders,1,7\n")) == {P1: 7}
    with pytest.raises(InvalidResetArgumentError, match=r"^<stdin>:1: expected"):
        read_reset_plan("-", "g1", stdin=io.StringIO("x\n"))
    plan.write_bytes(b"orders,0,\xff\n")
    with pytest.raises(InvalidResetArgumentError,
                       match=r"plan.csv: not a CSV reset plan \(not UTF-8 text at byte 9\)$"):
        read_reset_plan(plan, "g1")
    with pytest.raises(FileNotFoundError):
        read_reset_plan(tmp_path / "missing.csv", "g1")


# -- a real Kafka log directory (read-only) -------------------------------------------------------

#: From ``plog dump --offsets-decoder`` of __consumer_offsets-19/00000000000000000000.log: the
#: group's last GroupMetadata (offset 186795: generation 9, protocol range, two rdkafka members
#: at /172.18.0.7, one per topic, each assigned partitions 0-4) and its six OffsetCommit
#: records (offsets 258480..258526, leader epoch 8); log start/end offsets from the partition
#: folders (``plog topics describe``).
MEMBER_CREATED = "rdkafka-1bc005e0-f563-4fca-bed5-1b8a0c9691d4"
MEMBER_STATUS = "rdkafka-68d84c5d-68c8-4027-955a-b24c32315bcc"
KAFKA_ROWS = [
    ("oms_order_created", 0, None, 12427, None, MEMBER_CREATED),
    ("oms_order_created", 1, 81731, 94646, 12915, MEMBER_CREATED),
    ("oms_order_created", 2, 40705, 53222, 12517, MEMBER_CREATED),
    ("oms_order_created", 3, 82261, 95134, 12873, MEMBER_CREATED),
    ("oms_order_created", 4, None, 12456, None, MEMBER_CREATED),
    ("oms_order_status_changed", 0, None, 3298, None, MEMBER_STATUS),
    ("oms_order_status_changed", 1, 21188, 24651, 3463, MEMBER_STATUS),
    ("oms_order_status_changed", 2, 10889, 14175, 3286, MEMBER_STATUS),
    ("oms_order_status_changed", 3, 21677, 24979, 3302, MEMBER_STATUS),
    ("oms_order_status_changed", 4, None, 3315, None, MEMBER_STATUS),
]


def _kafka_dir(corpus) -> DataDir:
    dd = DataDir.open(KAFKA_DIR)
    assert dd.kafka_log_dir
    return dd


def test_kafka_log_dir_describe(corpus):
    before = {p: p.stat().st_mtime_ns for p in KAFKA_DIR.rglob("*")}
    dd = _kafka_dir(corpus)
    d = describe_group(dd, KAFKA_GROUP)
    assert (d.state, d.protocol_type, d.protocol, d.generation, d.live) == ("Stable", "consumer", "range", 9, False)
    assert [(m.member_id, m.client_id, m.host) for m in d.members] == [
        (MEMBER_STATUS, "rdkafka", "/172.18.0.7"), (MEMBER_CREATED, "rdkafka", "/172.18.0.7")]
    assert [(p.topic, p.partition, p.current_offset, p.log_end_offset, p.lag, p.consumer_id)
            for p in d.partitions] == KAFKA_ROWS
    assert {p.leader_epoch for p in d.partitions if p.current_offset is not None} == {8}
    assert {(p.host, p.client_id) for p in d.partitions} == {("/172.18.0.7", "rdkafka")}
    assert list_groups(dd) == [GroupListing(KAFKA_GROUP, "Stable", "consumer", "range", 2)]
    with pytest.raises(GroupIdNotFoundError):
        describe_group(dd, "nope")
    assert {p: p.stat().st_mtime_ns for p in KAFKA_DIR.rglob("*")} == before  # nothing written


def test_kafka_log_dir_reset_is_a_plan_only(corpus):
    dd = _kafka_dir(corpus)
    # Retention moved the log start past the committed offsets: a reset clamps to it.
    plan = plan_offset_reset(dd, KAFKA_GROUP, ResetStrategy.to_offset(0), all_topics=True)
    assert _new(plan) == {("oms_order_created", 1): 81908, ("oms_order_created", 2): 40821,
                          ("oms_order_created", 3): 82506, ("oms_order_status_changed", 1): 21236,
                          ("oms_order_status_changed", 2): 10917, ("oms_order_status_changed", 3): 21748}
    assert _new(plan_offset_reset(dd, KAFKA_GROUP, ResetStrategy.to_current(), topics=["oms_order_created:0,1"])) \
        == {("oms_order_created", 0): 12427, ("oms_order_created", 1): 81731}
    with pytest.raises(ReadOnlyDataDirError, match="Kafka log directory"):
        reset_offsets(dd, KAFKA_GROUP, ResetStrategy.to_earliest(), all_topics=True, execute=True)
    with pytest.raises(ReadOnlyDataDirError):
        delete_groups(dd, [KAFKA_GROUP])
