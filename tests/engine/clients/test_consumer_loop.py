"""The consume loop (``engine/clients/consumer_loop.py``) as a library: range ends per
partition, ``count``, exit at the end, a group's subscription, and the at-least-once rule:
what the caller did not finish with is sought back before the commit at close."""

from __future__ import annotations

import pytest

from plog.engine.clients.consumer import Consumer
from plog.engine.clients.consumer_loop import ConsumeLoop
from plog.engine.clients.producer import Producer
from plog.engine.cluster.data_dir import DataDir
from plog.engine.errors import UnknownTopicOrPartitionError
from plog.engine.groups.coordinator import GroupCoordinator
from plog.engine.offset_spec import parse_offset_range
from plog.engine.storage.file_names import TopicPartition


def _dd(tmp_path, partitions=2, records=20):
    dd = DataDir.init(tmp_path / "d", brokers=1)
    dd.create_topic("t", replica_assignment={p: [1] for p in range(partitions)})
    with Producer(dd) as p:
        for i in range(records):
            p.send("t", b"%d" % i, partition=i % partitions, timestamp_ms=1_700_000_000_000 + i)
    return dd


def _run(loop, stop_after=None):
    """The values the caller finished with; ``stop_after``: fail while handling that many."""
    got = []
    try:
        for i, rec in enumerate(loop):
            if stop_after is not None and i == stop_after:
                raise KeyboardInterrupt
            got.append((rec.partition, rec.offset))
    finally:
        loop.close()
    return got


def _committed(dd, group):
    """The group's committed offset per partition number."""
    found = GroupCoordinator(dd).committed(group, [TopicPartition("t", 0), TopicPartition("t", 1)])
    return {tp.partition: c.offset for tp, c in found.items()}


def test_a_range_per_partition_ends_the_loop(tmp_path):
    dd = _dd(tmp_path)
    loop = ConsumeLoop.open(dd, "t", parse_offset_range("2:+3"))
    got = _run(loop)
    assert sorted(got) == [(0, 2), (0, 3), (0, 4), (1, 2), (1, 3), (1, 4)]
    assert loop.consumed == 6


def test_exit_at_end_and_partitions(tmp_path):
    dd = _dd(tmp_path)
    loop = ConsumeLoop.open(dd, "t", parse_offset_range("-2"), partitions=[1], exit_at_end=True)
    assert _run(loop) == [(1, 8), (1, 9)]


def test_an_empty_range_reads_nothing(tmp_path):
    dd = _dd(tmp_path)
    loop = ConsumeLoop.open(dd, "t", parse_offset_range("5:5"))
    assert _run(loop) == [] and loop.consumed == 0


def test_count_stops_and_commits_only_what_was_consumed(tmp_path):
    dd = _dd(tmp_path)
    loop = ConsumeLoop.open(dd, "t", parse_offset_range("earliest"), group_id="g", partitions=[0],
                            count=4, exit_at_end=True)
    assert _run(loop) == [(0, 0), (0, 1), (0, 2), (0, 3)]
    # The poll fetched all 10 records of partition 0: the 6 not consumed are not committed.
    assert _committed(dd, "g").get(0) == 4


def test_an_interrupted_caller_gets_the_record_again(tmp_path):
    """The caller fails while handling the 3rd record of a subscription: the commit at
    close stops before it (at least once), so the next consumer starts with it."""
    dd = _dd(tmp_path, partitions=1)
    loop = ConsumeLoop.open(dd, "t", parse_offset_range("earliest"), group_id="g", exit_at_end=True)
    with pytest.raises(KeyboardInterrupt):
        _run(loop, stop_after=2)
    assert loop.consumed == 2
    assert _committed(dd, "g").get(0) == 2
    again = ConsumeLoop.open(dd, "t", parse_offset_range("earliest"), group_id="g", exit_at_end=True)
    assert _run(again)[0] == (0, 2)


def test_after_poll_is_called_between_polls(tmp_path):
    dd = _dd(tmp_path, partitions=1, records=3)
    calls = []
    loop = ConsumeLoop(Consumer(dd, auto_offset_reset="earliest"), "t", parse_offset_range("earliest"),
                       exit_at_end=True, after_poll=lambda: calls.append(loop.consumed))
    assert len(_run(loop)) == 3 and calls  # once per poll that returned records


def test_an_unknown_topic_fails_on_open(tmp_path):
    dd = _dd(tmp_path)
    with pytest.raises(UnknownTopicOrPartitionError):
        ConsumeLoop.open(dd, "nope", parse_offset_range("earliest"))
