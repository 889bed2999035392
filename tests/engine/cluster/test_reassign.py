"""Partition reassignment (engine.reassign): Kafka's plan JSON, generate, execute without
losing a record (also across crashes between its steps), verify, preferred leaders, report."""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from cli_run import plog_exe
from plog.engine.cluster import reassignment as reassign
from plog.engine.storage.checkpoints import OffsetCheckpointFile
from plog.engine.cluster.data_dir import DataDir
from plog.engine.clients.consumer import Consumer
from plog.engine.errors import (
    BrokerNotAvailableError,
    InvalidReplicaAssignmentError,
    UnknownTopicOrPartitionError,
)
from plog.engine.clients.producer import Producer
from plog.engine.cluster.reassignment import execute_reassignment, preferred_leaders, verify_reassignment
from plog.engine.cluster.reassignment_plan import (
    format_reassignment_json,
    generate_reassignment,
    parse_reassignment_json,
    parse_topics_to_move,
    plan_from_assignment,
)
from plog.engine.storage.file_names import TopicPartition

ASSIGNMENT = {0: [1, 2], 1: [2, 3], 2: [3, 1]}
#: every replica to brokers that did not hold the partition
MOVE_ALL = {0: [3, 4], 1: [4, 1], 2: [4, 2]}


def _setup(tmp_path, n=30, **produce_kw) -> tuple[DataDir, dict[int, list[bytes]]]:
    dd = DataDir.init(tmp_path / "d", brokers=4)
    dd.create_topic("t", replica_assignment=ASSIGNMENT)
    sent = _produce(dd, n, "a", **produce_kw)
    return dd, sent


def _produce(dd, n, tag, **kw) -> dict[int, list[bytes]]:
    sent: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
    with Producer(dd, **kw) as p:
        for i in range(n):
            value = f"{tag}-{i}".encode() * (1 + i % 5)
            p.send("t", value, key=f"k{i}".encode(), partition=i % 3)
            sent[i % 3].append(value)
    return sent


def _read_all(path) -> dict[int, list[bytes]]:
    """Every record, from a fresh DataDir (what another process would see)."""
    dd = DataDir.open(path)
    c = Consumer(dd, auto_offset_reset="earliest", max_poll_records=100000)
    c.assign(dd.partitions("t"))
    out: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
    while True:
        got = c.poll(0)
        if not got:
            break
        for r in got:
            out[r.partition].append(r.value)
    c.close()
    return out


def _plan(assignment):
    return plan_from_assignment({TopicPartition("t", p): r for p, r in assignment.items()})


def _hashes(folder: Path) -> dict[str, str]:
    """Every file's hash, producer snapshots aside from the newest: a writer that closed and
    reopened the log (writers give locks back to take them in broker order) left older
    snapshots that the next open removes as stray, exactly as Kafka's loader does."""
    files = [f for f in sorted(folder.iterdir()) if f.is_file()]
    snapshots = [f for f in files if f.name.endswith(".snapshot")]
    stray = {f.name for f in snapshots[:-1]}
    return {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in files if f.name not in stray}


def _folders(dd: DataDir) -> dict[int, set[str]]:
    return {b: {e.name for e in dd.broker_log_dir(b).iterdir() if e.is_dir()} for b in dd.broker_ids}


def _merge(*dicts):
    out = {p: [] for p in range(3)}
    for d in dicts:
        for p, v in d.items():
            out[p].extend(v)
    return out


def _cluster_json(dd) -> bytes:
    return (dd.path / "cluster.json").read_bytes()


# -- the move -------------------------------------------------------------------------------------


def test_moving_every_replica_keeps_every_record_and_the_bytes(tmp_path):
    dd, sent = _setup(tmp_path, n=60)
    before = {p: _hashes(dd.partition_path(("t", p))) for p in range(3)}
    assert all(any(n.endswith(".log") for n in h) and "partition.metadata" in h for h in before.values())

    report = execute_reassignment(dd, _plan(MOVE_ALL))

    assert report.previous == {TopicPartition("t", p): r for p, r in ASSIGNMENT.items()}
    for m in report.moves:
        assert m.action == "move"
        assert m.source == ASSIGNMENT[m.tp.partition][0]  # copied from the old leader
        assert sorted(m.copied_to) == sorted(MOVE_ALL[m.tp.partition])
        assert sorted(m.removed_from) == sorted(ASSIGNMENT[m.tp.partition])
        assert m.log_end_offset == 20 and m.bytes_copied > 0
    assert DataDir.open(dd.path).topic("t").replicas == [MOVE_ALL[p] for p in range(3)]
    assert _read_all(dd.path) == sent

    # Each new replica holds byte-identical files; nothing of the old ones is left.
    for p, replicas in MOVE_ALL.items():
        for b in replicas:
            assert _hashes(dd.partition_path(("t", p), b)) == before[p], (p, b)
    folders = _folders(dd)
    for p in range(3):
        for b in dd.broker_ids:
            assert (f"t-{p}" in folders[b]) == (b in MOVE_ALL[p])
    assert not any(n.endswith(("-delete", "-future")) for names in folders.values() for n in names)

    # Kafka's own checks are clean on the new replicas.
    for p, replicas in MOVE_ALL.items():
        for b in replicas:
            r = subprocess.run([plog_exe(), "verify", str(dd.partition_path(("t", p), b))],
                               capture_output=True, text=True, timeout=120)
            assert r.returncode == 0, r.stdout + r.stderr

    assert verify_reassignment(dd, _plan(MOVE_ALL)).complete
    more = _produce(dd, 30, "b")
    assert _read_all(dd.path) == _merge(sent, more)
    states = verify_reassignment(dd, _plan(MOVE_ALL)).partitions
    assert [s.state for s in states] == ["completed"] * 3
    assert all({r.log_end_offset for r in s.replicas} == {30} for s in states)


def test_a_second_run_changes_nothing(tmp_path):
    dd, sent = _setup(tmp_path)
    execute_reassignment(dd, _plan(MOVE_ALL))
    before = _cluster_json(dd)
    report = execute_reassignment(dd, _plan(MOVE_ALL))
    assert [m.action for m in report.moves] == ["none"] * 3
    assert report.bytes_copied == 0 and _cluster_json(dd) == before
    assert _read_all(dd.path) == sent


def test_adding_and_removing_one_replica_copies_only_to_the_new_one(tmp_path):
    dd, sent = _setup(tmp_path)
    report = execute_reassignment(dd, _plan({0: [2, 4], 1: [2, 3], 2: [3, 1, 4]}))
    by_p = {m.tp.partition: m for m in report.moves}
    assert by_p[0].copied_to == [4] and by_p[0].removed_from == [1] and by_p[0].source == 1
    assert by_p[1].action == "none" and by_p[1].bytes_copied == 0
    assert by_p[2].copied_to == [4] and by_p[2].removed_from == []
    assert DataDir.open(dd.path).leader(("t", 0)) == 2
    assert _read_all(dd.path) == sent
    more = _produce(dd, 9, "b")
    assert _read_all(dd.path) == _merge(sent, more)
    assert verify_reassignment(dd, _plan({0: [2, 4], 1: [2, 3], 2: [3, 1, 4]})).complete


def test_reordering_replicas_changes_the_leader_only(tmp_path):
    dd, sent = _setup(tmp_path)
    inodes = {(p, b): os.stat(dd.partition_path(("t", p), b) / "partition.metadata").st_ino
              for p, r in ASSIGNMENT.items() for b in r}
    report = execute_reassignment(dd, _plan({0: [2, 1], 1: [3, 2], 2: [1, 3]}))
    assert [m.action for m in report.moves] == ["leader"] * 3 and report.bytes_copied == 0
    dd2 = DataDir.open(dd.path)
    # As in Kafka, a leader kept in the replica set stays leader; the preferred leader
    # election moves leadership to the new first replicas.
    assert [dd2.leader(("t", p)) for p in range(3)] == [1, 2, 3]
    from plog.engine.cluster.brokers import elect_preferred_leaders

    elect_preferred_leaders(dd2)
    assert [dd2.leader(("t", p)) for p in range(3)] == [2, 3, 1]
    assert inodes == {(p, b): os.stat(dd.partition_path(("t", p), b) / "partition.metadata").st_ino
                      for p, r in ASSIGNMENT.items() for b in r}
    assert _read_all(dd.path) == sent


def test_the_log_start_offset_moves_with_the_partition(tmp_path):
    dd, sent = _setup(tmp_path, n=30)
    with dd.writer() as w:
        for b in ASSIGNMENT[0]:
            assert w.replica_log(("t", 0), b).delete_records_before(4) == 4
    execute_reassignment(dd, _plan(MOVE_ALL))
    # The log start above the first segment is in the broker's checkpoint, not in the folder.
    for b in MOVE_ALL[0]:
        starts = OffsetCheckpointFile(dd.broker_log_dir(b) / "log-start-offset-checkpoint").read()
        assert starts.get(TopicPartition("t", 0)) == 4
    with dd.writer() as w:
        for b in MOVE_ALL[0]:
            log = w.replica_log(("t", 0), b)
            assert (log.log_start_offset, log.log_end_offset) == (4, 10)
    assert verify_reassignment(dd, _plan(MOVE_ALL)).complete


def test_compressed_and_transactional_data_moves_intact(tmp_path):
    dd, sent = _setup(tmp_path, n=40, compression_type="gzip", batch_size=200)
    before = {p: _hashes(dd.partition_path(("t", p))) for p in range(3)}
    execute_reassignment(dd, _plan(MOVE_ALL))
    assert _read_all(dd.path) == sent
    for p, replicas in MOVE_ALL.items():
        assert _hashes(dd.partition_path(("t", p), replicas[0])) == before[p]


# -- crashes between the steps --------------------------------------------------------------------


class Crash(Exception):
    pass


def _crash(*args, **kwargs):
    raise Crash("simulated crash")


def test_a_crash_after_the_copy_before_the_switch_loses_nothing(tmp_path, monkeypatch):
    dd, sent = _setup(tmp_path)
    before = _cluster_json(dd)
    monkeypatch.setattr(reassign, "_switch_assignment", _crash)
    with pytest.raises(Crash):
        execute_reassignment(dd, _plan(MOVE_ALL))
    monkeypatch.undo()

    # The metadata still names the old replicas, which are untouched; the copies are extra.
    assert _cluster_json(dd) == before
    for p, replicas in MOVE_ALL.items():
        for b in replicas + ASSIGNMENT[p]:
            assert dd.partition_path(("t", p), b).is_dir()
    assert _read_all(dd.path) == sent
    states = verify_reassignment(dd, _plan(MOVE_ALL)).partitions
    assert [s.message for s in states] == [f"Reassignment of partition t-{p} is still in progress." for p in range(3)]
    assert "interrupted execute" in states[0].problems[0]

    # Writers keep using the old replicas; the copies are now stale, and a second run
    # replaces them with fresh ones.
    more = _produce(dd, 12, "b")
    assert _read_all(dd.path) == _merge(sent, more)
    report = execute_reassignment(dd, _plan(MOVE_ALL))
    assert all(m.log_end_offset == 14 for m in report.moves)
    assert _read_all(dd.path) == _merge(sent, more)
    assert verify_reassignment(dd, _plan(MOVE_ALL)).complete


def test_a_crash_after_the_switch_before_the_delete_loses_nothing(tmp_path, monkeypatch):
    dd, sent = _setup(tmp_path)
    monkeypatch.setattr(reassign, "_delete_replica", _crash)
    with pytest.raises(Crash):
        execute_reassignment(dd, _plan(MOVE_ALL))
    monkeypatch.undo()
    assert DataDir.open(dd.path).topic("t").replicas == [MOVE_ALL[p] for p in range(3)]
    assert _read_all(dd.path) == sent
    states = verify_reassignment(dd, _plan(MOVE_ALL)).partitions
    assert all(s.state == "in_progress" and s.leftovers == sorted(ASSIGNMENT[s.tp.partition]) for s in states)
    report = execute_reassignment(dd, _plan(MOVE_ALL))
    assert all(m.bytes_copied == 0 and m.removed_from for m in report.moves)
    assert verify_reassignment(dd, _plan(MOVE_ALL)).complete
    assert _read_all(dd.path) == sent


def test_a_killed_process_between_copy_and_switch_loses_nothing(tmp_path):
    dd, sent = _setup(tmp_path)
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(format_reassignment_json({TopicPartition("t", p): r for p, r in MOVE_ALL.items()}))
    code = (
        "import os, sys\n"
        "from plog.engine.cluster import reassignment as reassign\n"
        "from plog.engine.cluster.data_dir import DataDir\n"
        "reassign._switch_assignment = lambda *a, **k: os._exit(9)\n"
        "plan = reassign.parse_reassignment_json(open(sys.argv[2]).read())\n"
        "reassign.execute_reassignment(DataDir.open(sys.argv[1]), plan)\n"
    )
    r = subprocess.run([sys.executable, "-c", code, str(dd.path), str(plan_file)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 9, r.stderr
    assert _read_all(dd.path) == sent
    # No clean-shutdown markers: the next writer recovers every broker directory, copies
    # included, and appends to the old replicas.
    more = _produce(dd, 6, "b")
    assert _read_all(dd.path) == _merge(sent, more)
    execute_reassignment(dd, parse_reassignment_json(plan_file.read_text()))
    assert _read_all(dd.path) == _merge(sent, more)
    assert verify_reassignment(dd, _plan(MOVE_ALL)).complete


def test_a_leftover_future_folder_is_ignored_and_replaced(tmp_path):
    dd, sent = _setup(tmp_path)
    half = dd.broker_log_dir(4) / "t-1.0123456789abcdef0123456789abcdef-future"
    half.mkdir()
    (half / "00000000000000000000.log").write_bytes(b"\0" * 7)
    stale = dd.broker_log_dir(2) / "t-0.fedcba9876543210fedcba9876543210-future"  # a broker that gets no copy
    stale.mkdir()
    assert _read_all(dd.path) == sent
    more = _produce(dd, 3, "b")  # a writer opens every broker directory, leaving -future folders alone
    assert half.is_dir() and stale.is_dir()
    states = verify_reassignment(dd, _plan(ASSIGNMENT)).partitions
    assert [s.state for s in states] == ["in_progress", "in_progress", "completed"]
    assert states[1].problems == [f"broker 4 holds an unfinished copy ({half.name})"]
    execute_reassignment(dd, _plan(MOVE_ALL))
    assert not half.exists() and not stale.exists()
    assert verify_reassignment(dd, _plan(MOVE_ALL)).complete
    assert _read_all(dd.path) == _merge(sent, more)


# -- validation -----------------------------------------------------------------------------------


@pytest.mark.parametrize("doc, error, message", [
    ({"version": 1, "partitions": []}, InvalidReplicaAssignmentError, "Partition reassignment list cannot be empty"),
    ({"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": []}]},
     InvalidReplicaAssignmentError, "Partition replica list cannot be empty"),
    ({"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1]},
                                   {"topic": "t", "partition": 0, "replicas": [2]}]},
     InvalidReplicaAssignmentError, "Partition reassignment contains duplicate topic partitions: t-0"),
    ({"version": 1, "partitions": [{"topic": "t", "partition": 1, "replicas": [1, 2, 1]}]},
     InvalidReplicaAssignmentError,
     "Partition replica lists may not contain duplicate entries: t-1 contains multiple entries for 1"),
    ({"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 9]}]},
     BrokerNotAvailableError, "Unknown broker id 9"),
    ({"version": 1, "partitions": [{"topic": "nope", "partition": 0, "replicas": [1]}]},
     UnknownTopicOrPartitionError, "Topic nope not found."),
    ({"version": 1, "partitions": [{"topic": "t", "partition": 5, "replicas": [1]}]},
     UnknownTopicOrPartitionError, "Unable to find partition: t-5"),
    ({"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["any"]}]},
     InvalidReplicaAssignmentError,
     "Size of replicas list [1, 2] is different from size of log dirs list [any] for partition t-0"),
    ({"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1], "log_dirs": ["/elsewhere"]}]},
     InvalidReplicaAssignmentError, "Log directory /elsewhere of replica 1 of t-0 is not a log directory of broker 1"),
    ({"version": 2, "partitions": []}, InvalidReplicaAssignmentError, "Not supported version field value 2"),
    ({"version": 1, "partitions": [{"topic": "t", "replicas": [1]}]},
     InvalidReplicaAssignmentError, "No such field exists: `partition`"),
])
def test_invalid_plans_are_rejected_with_kafkas_messages(tmp_path, doc, error, message):
    dd, sent = _setup(tmp_path, n=6)
    before = _cluster_json(dd)
    folders = _folders(dd)
    with pytest.raises(error) as e:
        execute_reassignment(dd, parse_reassignment_json(json.dumps(doc)))
    assert message in str(e.value) and "\n" not in str(e.value)
    assert _cluster_json(dd) == before and _folders(dd) == folders
    assert _read_all(dd.path) == sent


def test_a_log_dir_may_name_the_brokers_own_directory(tmp_path):
    dd, sent = _setup(tmp_path, n=6)
    doc = {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [4, 1],
                                         "log_dirs": [str(dd.broker_log_dir(4)), "any"]}]}
    execute_reassignment(dd, parse_reassignment_json(json.dumps(doc)))
    assert DataDir.open(dd.path).replicas(("t", 0)) == [4, 1]
    assert _read_all(dd.path) == sent


def test_bad_json_is_one_line():
    with pytest.raises(InvalidReplicaAssignmentError, match="The input string is not a valid JSON"):
        parse_reassignment_json("{not json")
    with pytest.raises(InvalidReplicaAssignmentError, match=r"duplicate entries: \[a\]"):
        parse_topics_to_move('{"version":1,"topics":[{"topic":"a"},{"topic":"a"}]}')
    assert parse_topics_to_move('{"topics":[{"topic":"a"},{"topic":"b"}]}') == ["a", "b"]


# -- JSON and generate ----------------------------------------------------------------------------


def test_plans_are_written_as_kafka_writes_them():
    text = format_reassignment_json({TopicPartition("b", 0): [2], TopicPartition("a", 1): [1, 2],
                                     TopicPartition("a", 0): [3, 1]})
    assert text == ('{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[3,1],"log_dirs":["any","any"]},'
                    '{"topic":"a","partition":1,"replicas":[1,2],"log_dirs":["any","any"]},'
                    '{"topic":"b","partition":0,"replicas":[2],"log_dirs":["any"]}]}')
    plan = parse_reassignment_json(text)
    assert [(e.tp, e.replicas, e.log_dirs) for e in plan][0] == (TopicPartition("a", 0), (3, 1), ("any", "any"))


def test_generate_proposes_the_same_shape_on_the_listed_brokers(tmp_path):
    dd, _ = _setup(tmp_path, n=3)
    dd.create_topic("u", replica_assignment={0: [1], 1: [2], 2: [3], 3: [4]})
    before = _cluster_json(dd)
    plan = generate_reassignment(dd, ["t", "u"], [2, 3, 4], rng=random.Random(7))
    assert plan.current == {**{TopicPartition("t", p): r for p, r in ASSIGNMENT.items()},
                            **{TopicPartition("u", p): [p + 1] for p in range(4)}}
    assert sorted(plan.proposed) == sorted(plan.current)
    for tp, replicas in plan.proposed.items():
        assert set(replicas) <= {2, 3, 4} and len(replicas) == len(plan.current[tp])
        assert len(set(replicas)) == len(replicas)
    # Leaders spread over the listed brokers (Kafka's round robin).
    assert {plan.proposed[TopicPartition("t", p)][0] for p in range(3)} == {2, 3, 4}
    assert _cluster_json(dd) == before
    with pytest.raises(UnknownTopicOrPartitionError, match="Topic nope not found."):
        generate_reassignment(dd, ["nope"], [1, 2])
    with pytest.raises(BrokerNotAvailableError, match="Unknown broker id 7"):
        generate_reassignment(dd, ["t"], [1, 7])
    with pytest.raises(InvalidReplicaAssignmentError, match=r"Broker list contains duplicate entries: \[2\]"):
        generate_reassignment(dd, ["t"], [2, 2, 3])
    with pytest.raises(Exception, match="larger than available brokers"):
        generate_reassignment(dd, ["t"], [4])


# -- verify, preferred leaders, report -------------------------------------------------------------


def test_verify_before_execute_says_there_is_no_active_reassignment(tmp_path):
    dd, _ = _setup(tmp_path, n=3)
    report = verify_reassignment(dd, _plan({0: [3, 4], 1: [2, 3]}))
    assert [p.message for p in report.partitions] == [
        "There is no active reassignment of partition t-0, but replica set is 1,2 rather than 3,4.",
        "Reassignment of partition t-1 is completed.",
    ]
    assert not report.complete


def test_verify_sees_a_missing_or_diverged_replica(tmp_path):
    dd, _ = _setup(tmp_path, n=9)
    execute_reassignment(dd, _plan(MOVE_ALL))
    os.rename(dd.partition_path(("t", 1), 1), dd.broker_log_dir(1) / "elsewhere")
    with dd.writer() as w:  # a replica written behind plog's back
        w.replica_log(("t", 2), 2).truncate_to(1)
    states = {s.tp.partition: s for s in verify_reassignment(dd, _plan(MOVE_ALL)).partitions}
    assert states[0].state == "completed"
    assert states[1].state == "in_progress" and "broker 1 has no replica folder" in states[1].problems[0]
    assert states[2].state == "in_progress" and states[2].problems[0].startswith("replicas differ")
    # Executing the plan again repairs both from the leader.
    execute_reassignment(dd, _plan(MOVE_ALL))
    assert verify_reassignment(dd, _plan(MOVE_ALL)).complete


def test_preferred_leaders(tmp_path):
    dd, _ = _setup(tmp_path, n=3)
    states = preferred_leaders(dd)
    assert [(s.tp.partition, s.preferred_leader, s.leader, s.ok) for s in states] == [
        (0, 1, 1, True), (1, 2, 2, True), (2, 3, 3, True)]
    assert states[0].message == "Valid replica already elected"
    os.rename(dd.partition_path(("t", 2)), dd.broker_log_dir(3) / "gone")
    state = preferred_leaders(dd, ["t"])[2]
    assert not state.ok and state.message == "Preferred replica 3 has no replica folder"
    with pytest.raises(UnknownTopicOrPartitionError):
        preferred_leaders(dd, ["nope"])


def test_placement_report_counts_leaders_replicas_and_bytes(tmp_path):
    dd, _ = _setup(tmp_path, n=30)
    rows = {b.broker: b for b in reassign.placement(dd)}
    assert {b: (r.leaders, r.replicas, r.partitions_on_disk) for b, r in rows.items()} == {
        1: (1, 2, 2), 2: (1, 2, 2), 3: (1, 2, 2), 4: (0, 0, 0)}
    assert rows[4].size == 0 and all(rows[b].size > 0 for b in (1, 2, 3))
    execute_reassignment(dd, _plan(MOVE_ALL))
    rows = {b.broker: b for b in reassign.placement(dd)}
    assert {b: (r.leaders, r.replicas) for b, r in rows.items()} == {1: (0, 1), 2: (0, 1), 3: (1, 1), 4: (2, 3)}
    assert rows[4].partitions_on_disk == 3 and rows[4].size > rows[3].size
