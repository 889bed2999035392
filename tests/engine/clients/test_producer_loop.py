"""The produce loop (``engine/clients/producer_loop.py``) as a library: plain lines take the
bulk path, keyed lines and JSON lines are parsed, a bad line stops the loop with its line
number, and input that pauses (a pipe) sends what lingers at once."""

from __future__ import annotations

import io
import os

import pytest

from plog.engine.clients.consumer_loop import ConsumeLoop
from plog.engine.clients.producer import Producer
from plog.engine.clients.producer_loop import ProduceLoop, ensure_topic, input_may_pause, lines_of
from plog.engine.clients.console_io import LineParser
from plog.engine.cluster.data_dir import DataDir
from plog.engine.errors import InputRecordError, UnknownTopicOrPartitionError
from plog.engine.offset_spec import parse_offset_range


def _records(dd, topic="t"):
    """(key, value, headers) of every record of ``topic``, partition by partition."""
    loop = ConsumeLoop.open(dd, topic, parse_offset_range("earliest"), exit_at_end=True)
    try:
        got = list(loop)
    finally:
        loop.close()
    return [(r.key, r.value, list(r.headers)) for r in sorted(got, key=lambda r: (r.partition, r.offset))]


@pytest.fixture
def dd(tmp_path):
    return DataDir.init(tmp_path / "d", brokers=1)


def test_plain_lines_take_the_bulk_path(dd, tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes(b"a\nb\r\nc")
    with Producer(dd) as producer:
        assert ensure_topic(producer, "t").partitions == 1  # created here
        assert ensure_topic(producer, "t") is None  # existed
        loop = ProduceLoop(producer, "t", parser=LineParser())
        assert loop.plain
        with open(path, "rb") as source:
            assert not input_may_pause(source)
            loop.run(source)
    assert loop.line_number == 3
    assert _records(dd) == [(None, b"a", []), (None, b"b", []), (None, b"c", [])]


def test_keys_and_static_headers(dd):
    with Producer(dd) as producer:
        loop = ProduceLoop(producer, "t", parser=LineParser(parse_key=True, key_separator=b":"),
                           headers=[("h", b"v")])
        assert not loop.plain
        loop.run(io.BytesIO(b"k1:v1\nk2:v2\n"))
    assert _records(dd) == [(b"k1", b"v1", [("h", b"v")]), (b"k2", b"v2", [("h", b"v")])]


def test_json_lines_and_a_bad_line(dd):
    with Producer(dd) as producer:
        loop = ProduceLoop(producer, "t")  # no parser: JSON lines
        with pytest.raises(InputRecordError):
            loop.run(io.BytesIO(b'{"value": "x", "key": "k"}\n{"value": \n{"value": "never"}\n'))
        assert loop.line_number == 2
    assert _records(dd) == [(b"k", b"x", [])]  # the record before the bad line was sent


def test_an_unknown_partition_fails_with_the_lines_before_it(dd):
    dd.create_topic("t", partitions=1)
    with Producer(dd) as producer:
        loop = ProduceLoop(producer, "t", parser=LineParser(), partition=5)
        with pytest.raises(UnknownTopicOrPartitionError):
            loop.run(io.BytesIO(b"a\n"))
        assert loop.line_number == 0


def test_input_that_pauses_sends_what_lingers_before_waiting():
    """From a pipe, before the loop blocks on input it sends what lingers and releases the
    data directory; while input keeps coming it does neither."""
    read_fd, write_fd = os.pipe()
    calls = []

    class Producer:  # what lines_of asks of the producer, recorded
        def flush(self):
            calls.append("flush")

        def release(self):
            calls.append("release")
            # Input comes again (and ends) only now: had the loop blocked first, this
            # test would hang instead of failing.
            os.write(write_fd, b"c\n")
            os.close(write_fd)

    os.write(write_fd, b"a\nb")
    with os.fdopen(read_fd, "rb", buffering=0) as source:
        assert input_may_pause(source)
        lines = lines_of(source, Producer())
        assert next(lines) == b"a\n" and calls == []
        assert list(lines) == [b"bc\n"] and calls == ["flush", "release"]
