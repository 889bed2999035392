"""The embedded consumer: positions, offsets for times, read_committed, following a writer,
consumer groups in one process and across processes, commits and the at-least-once window."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from plog.engine.cluster.data_dir import DataDir
from plog.engine.clients.consumer import Consumer
from plog.engine.errors import NoOffsetForPartitionError
from plog.engine.groups.committed_offsets import read_group_state
from plog.engine.groups.coordinator import GroupCoordinator
from plog.engine.clients.producer import Producer
from plog.engine.storage.file_names import TopicPartition
from plog.formats.record_batch import encode_batch



def _dd(tmp_path, partitions=3, brokers=1):
    dd = DataDir.init(tmp_path / "d", brokers=brokers)
    dd.create_topic("t", replica_assignment={p: [1 + p % brokers] for p in range(partitions)})
    return dd


def _produce(dd, n, topic="t", start=0):
    with Producer(dd) as p:
        for i in range(start, start + n):
            p.send(topic, b"%d" % i, key=b"k%d" % i, timestamp_ms=1_700_000_000_000 + i)


def _drain(c, idle_polls=3):
    out, idle = [], 0
    while idle < idle_polls:
        got = c.poll(0)
        if got:
            out.extend(got)
            idle = 0
        else:
            idle += 1
    return out


def test_assign_seek_and_positions(tmp_path):
    dd = _dd(tmp_path)
    _produce(dd, 300)
    c = Consumer(dd, auto_offset_reset="earliest")
    tps = dd.partitions("t")
    c.assign(tps)
    got = _drain(c)
    assert sorted(int(r.value) for r in got) == list(range(300))
    ends = c.end_offsets(tps)
    assert sum(ends.values()) == 300
    assert all(c.position(tp) == ends[tp] for tp in tps)
    tp = max(tps, key=lambda t: ends[t])
    c.seek(tp, ends[tp] - 2)
    again = _drain(c)
    assert [r.offset for r in again] == [ends[tp] - 2, ends[tp] - 1]
    assert c.beginning_offsets([tp]) == {tp: 0}


def test_latest_and_none_reset_policies(tmp_path):
    dd = _dd(tmp_path, partitions=1)
    _produce(dd, 10)
    c = Consumer(dd, auto_offset_reset="latest")
    c.assign([("t", 0)])
    assert c.poll(0) == [] and c.position(("t", 0)) == 10
    _produce(dd, 2, start=10)
    assert [int(r.value) for r in _drain(c)] == [10, 11]
    n = Consumer(dd, auto_offset_reset="none")
    n.assign([("t", 0)])
    with pytest.raises(NoOffsetForPartitionError):
        n.poll(0)


def test_offsets_for_times(tmp_path):
    dd = _dd(tmp_path, partitions=1)
    _produce(dd, 50)
    c = Consumer(dd)
    c.assign([("t", 0)])
    assert c.offsets_for_times({("t", 0): 1_700_000_000_020}) == {TopicPartition("t", 0): 20}
    assert c.offsets_for_times({("t", 0): 1_800_000_000_000}) == {TopicPartition("t", 0): None}


def test_follows_a_writer(tmp_path):
    dd = _dd(tmp_path, partitions=1)
    c = Consumer(dd, auto_offset_reset="earliest")
    c.assign([("t", 0)])
    assert c.poll(0) == []
    for round_ in range(3):
        _produce(dd, 5, start=round_ * 5)
        assert [int(r.value) for r in _drain(c)] == list(range(round_ * 5, round_ * 5 + 5))


def test_read_committed_skips_aborted_and_stops_at_the_lso(tmp_path):
    dd = _dd(tmp_path, partitions=1)
    tp = ("t", 0)

    def txn_batch(pid, values, seq):
        return encode_batch([(i, 1000, None, v) for i, v in enumerate(values)], producer_id=pid, producer_epoch=0,
                            base_sequence=seq, is_transactional=True)

    with dd.writer() as w:
        w.append(tp, txn_batch(100, [b"c1", b"c2"], 0))
        w.append(tp, txn_batch(200, [b"a1"], 0))
        w.append(tp, encode_batch([(0, 1000, None, b"plain")]))
        w.append_control(tp, 100, 0, commit=True)
        w.append_control(tp, 200, 0, commit=False)
        w.append(tp, txn_batch(300, [b"open"], 0))
        w.append(tp, encode_batch([(0, 1000, None, b"after-open")]))
    committed = Consumer(dd, auto_offset_reset="earliest", isolation_level="read_committed")
    committed.assign([tp])
    assert [r.value for r in _drain(committed)] == [b"c1", b"c2", b"plain"]
    assert committed.end_offsets([tp]) == {TopicPartition("t", 0): 6}  # the open transaction's first offset
    everything = Consumer(dd, auto_offset_reset="earliest")
    everything.assign([tp])
    assert [r.value for r in _drain(everything)] == [b"c1", b"c2", b"a1", b"plain", b"open", b"after-open"]
    with dd.writer() as w:
        w.append_control(tp, 300, 0, commit=True)
    assert [r.value for r in _drain(committed)] == [b"open", b"after-open"]


def test_two_members_split_partitions_and_hand_over_on_leave(tmp_path):
    dd = _dd(tmp_path, partitions=4)
    _produce(dd, 400)
    a = Consumer(dd, group_id="g", auto_offset_reset="earliest", heartbeat_interval_ms=10)
    a.subscribe(["t"])
    assert len(a.assignment()) == 4
    b = Consumer(dd, group_id="g", auto_offset_reset="earliest", heartbeat_interval_ms=10)
    b.subscribe(["t"])
    seen: list = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and len(seen) < 400:
        seen += [(r.partition, r.offset, "a") for r in a.poll(0)]
        seen += [(r.partition, r.offset, "b") for r in b.poll(0)]
    assert len(seen) == 400 and len({(p, o) for p, o, _ in seen}) == 400  # every record exactly once
    assert set(a.assignment()).isdisjoint(b.assignment())
    assert len(a.assignment()) + len(b.assignment()) == 4
    a.close()
    _produce(dd, 40, start=400)
    more = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and len(more) < 40:
        more += b.poll(10)
    assert sorted(int(r.value) for r in more) == list(range(400, 440))
    assert len(b.assignment()) == 4
    b.close()
    state = read_group_state(dd.log_dirs(), "g")["g"]
    assert sum(o.offset for o in state.offsets.values()) == 440
    # Both left: the last GroupMetadata record is the Empty group, as Kafka's coordinator stores it.
    assert state.metadata is not None and state.metadata.members == () and state.metadata.protocol is None


def test_commit_and_resume_from_committed_offsets(tmp_path):
    dd = _dd(tmp_path, partitions=2)
    _produce(dd, 100)
    c = Consumer(dd, group_id="g", auto_offset_reset="earliest", enable_auto_commit=False)
    c.subscribe(["t"])
    first = c.poll(0, max_records=30)
    c.commit()
    c.close()  # no auto-commit: what was polled after the commit is not committed
    again = Consumer(dd, group_id="g", auto_offset_reset="earliest")
    again.subscribe(["t"])
    rest = _drain(again)
    again.close()
    assert {(r.partition, r.offset) for r in first}.isdisjoint({(r.partition, r.offset) for r in rest})
    assert len(first) + len(rest) == 100
    committed = GroupCoordinator(dd).committed("g")
    assert sum(o.offset for o in committed.values()) == 100


def test_cooperative_sticky_moves_partitions_only_after_release(tmp_path):
    dd = _dd(tmp_path, partitions=6)
    kw = dict(group_id="g", auto_offset_reset="earliest", heartbeat_interval_ms=10,
              partition_assignment_strategy=["cooperative-sticky"])
    a = Consumer(dd, **kw)
    a.subscribe(["t"])
    before = set(a.assignment())
    b = Consumer(dd, **kw)
    b.subscribe(["t"])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and len(b.assignment()) < 3:
        a.poll(0)
        b.poll(0)
    assert len(a.assignment()) == 3 and len(b.assignment()) == 3
    assert set(a.assignment()) <= before  # a kept its partitions and gave three away
    a.close()
    b.close()


WORKER = textwrap.dedent("""
    import sys, time
    from plog.engine.clients.consumer import Consumer
    out = open(sys.argv[2], "a", buffering=1)
    c = Consumer(sys.argv[1], group_id="g", auto_offset_reset="earliest", session_timeout_ms=1500,
                 heartbeat_interval_ms=50, auto_commit_interval_ms=int(sys.argv[3]), max_poll_records=7)
    c.subscribe(["t"])
    print("joined", flush=True)
    idle = 0
    while idle < int(sys.argv[4]):
        records = c.poll(50)
        for r in records:
            out.write(f"{r.partition} {r.offset}\\n")
        idle = 0 if records else idle + 1
        time.sleep(0.002)
    c.close()
""")


def _spawn(tmp_path, dd, name, commit_ms, idle_polls):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    proc = subprocess.Popen([sys.executable, str(script), str(dd.path), str(tmp_path / name), str(commit_ms),
                             str(idle_polls)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "joined"
    return proc


def _lines(path):
    return [tuple(map(int, line.split())) for line in Path(path).read_text().splitlines()] if path.exists() else []


@pytest.mark.parametrize("commit_ms", [100, 100000])
def test_two_processes_share_a_group_and_a_killed_one_resumes_from_its_commit(tmp_path, commit_ms):
    """Auto-commit every 100 ms, or effectively never (only on revoke and close): after a
    SIGKILL the restarted member re-reads exactly the records after the last commit (the
    at-least-once window) and, together, every record is read at least once and, apart
    from that window, exactly once."""
    dd = _dd(tmp_path, partitions=4)
    _produce(dd, 2000)
    a = _spawn(tmp_path, dd, "a.txt", commit_ms, 100)
    b = _spawn(tmp_path, dd, "b.txt", commit_ms, 1000000)
    time.sleep(1.0)
    b.send_signal(signal.SIGKILL)
    b.wait()
    before_kill = set(_lines(tmp_path / "b.txt"))
    committed_before = GroupCoordinator(dd).committed("g")
    b2 = _spawn(tmp_path, dd, "b2.txt", commit_ms, 40)
    _produce(dd, 500, start=2000)
    assert a.wait(timeout=60) == 0 and b2.wait(timeout=60) == 0
    reads = _lines(tmp_path / "a.txt") + list(before_kill) + _lines(tmp_path / "b2.txt")
    unique = set(reads)
    assert len(unique) == 2500  # nothing lost
    duplicates = len(reads) - len(unique)
    # Every duplicate is a record the killed member read after its partition's last commit.
    window = {(p, o) for p, o in before_kill
              if o >= (committed_before.get(TopicPartition("t", p)).offset
                       if committed_before.get(TopicPartition("t", p)) else 0)}
    assert duplicates <= len(window)
    final = GroupCoordinator(dd).committed("g")
    assert sum(o.offset for o in final.values()) == 2500
