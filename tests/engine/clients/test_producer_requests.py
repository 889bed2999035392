"""A produce request that fails part way (here: a segment roll refused by the disk). The
batches before the failing one are in the log; an idempotent producer sends the last of
them again, a duplicate the log acknowledges with its offsets, so they are acknowledged
once each. On the native path the request's buffer was stamped in place by the append
(formats/memory_records.py): the batch sent again must be the one the client encoded
(base offset 0), not the stamped copy, or the log would refuse it."""

from __future__ import annotations

import errno
import os

import pytest

from plog.engine.cluster.data_dir import DataDir
from plog.engine.clients.producer import Producer
from plog.engine.errors import KafkaStorageError, ProducerError
from plog.engine.storage.file_names import TopicPartition
from plog.engine.storage.log import Log
from plog.formats.batches import BatchIterator


@pytest.fixture
def dd(tmp_path):
    d = DataDir.init(tmp_path / "d", brokers=1)
    # Segments of ~6 KiB: a request of 1 KiB batches rolls once in its middle.
    d.create_topic("t", replica_assignment={0: [1]}, configs={"segment.bytes": "6000"})
    return d


def _values(n):
    return [b"v%04d" % i + b"." * 95 for i in range(n)]


def _log_batches(dd) -> list:
    out = []
    for seg in sorted((dd.path / "broker-1" / "t-0").glob("*.log")):
        out.extend((b.base_offset, b.last_offset, b.base_sequence) for b in BatchIterator(memoryview(seg.read_bytes())))
    return out


@pytest.mark.parametrize("idempotent", [True, False])
def test_a_request_failing_at_a_roll(dd, monkeypatch, idempotent):
    real_roll = Log.roll
    calls = []

    def roll(self, *a, **k):
        calls.append(1)
        if len(calls) == 1:
            raise KafkaStorageError("No space left on device (injected)")
        return real_roll(self, *a, **k)

    monkeypatch.setattr(Log, "roll", roll)
    p = Producer(dd, batch_size=1024, linger_ms=60_000, enable_idempotence=idempotent,
                 acks="all" if idempotent else 1)
    futures = [p.send("t", v, partition=0) for v in _values(80)]
    with pytest.raises(KafkaStorageError):
        p.flush()
    assert all(f.done() for f in futures)
    acked, errors = [], []
    for f in futures:
        try:
            acked.append(f.get().offset)
        except (KafkaStorageError, ProducerError) as e:
            errors.append(e)
    assert errors, "the batches from the failing one on are not acknowledged"
    batches = _log_batches(dd)
    in_log = sum(last - base + 1 for base, last, _ in batches)
    if idempotent:
        # Every batch before the failing one acknowledged once, at the offsets the log holds.
        assert 0 < in_log and acked == list(range(in_log))
        assert [s for _, _, s in batches] == sorted({s for _, _, s in batches})  # no batch twice
    else:
        assert acked == []  # their outcome is unknown without idempotence
    p.close()


@pytest.mark.parametrize("replicas", [1, 3])
def test_a_full_disk_in_a_later_round_leaves_the_rounds_before_it_acknowledged(tmp_path, monkeypatch, replicas):
    """Rounds pipelined as ``plog produce`` sends them (``hold_lock``, a round's fsync
    beside the next round's filling): when the disk refuses a later round's segment write,
    that round fails with the engine's KafkaStorageError naming the segment, and every
    round before it is acknowledged (counted in ``stats``). The high watermark covers those,
    and at most the batches of the failed request appended before the one refused (the
    reference path appends a request batch by batch; the log, offline after the failure,
    takes no duplicate to acknowledge them): at least once, never fewer. With followers,
    their writes are refused too (one disk)."""
    d = DataDir.init(tmp_path / "d", brokers=replicas)
    d.create_topic("t", replica_assignment={0: list(range(1, replicas + 1))})
    real = os.pwrite
    written = [0]

    def pwrite(fd, data, position):
        # Segment files only: the first 200 KB of them fit, then the disk is full.
        if os.readlink(f"/proc/self/fd/{fd}").endswith(".log"):
            room = 200_000 - written[0]
            if room <= 0:
                raise OSError(errno.ENOSPC, "No space left on device")
            n = real(fd, memoryview(data)[:room], position)
            written[0] += n
            return n
        return real(fd, data, position)

    monkeypatch.setattr(os, "pwrite", pwrite)
    # Rounds of 64 KiB (max.request.size x max.in.flight): ~3 fit on a leader alone.
    p = Producer(d, max_request_size=65536, max_in_flight_requests_per_connection=1, hold_lock=True, linger_ms=60_000)
    values = _values(10_000)
    with pytest.raises(KafkaStorageError) as e:
        p.send_values("t", values, partition=0)
        p.flush()
    assert e.value.errno == errno.ENOSPC and e.value.path.endswith(".log")
    assert "No space left on device" in str(e.value)
    acknowledged = p.stats.get(TopicPartition("t", 0), [0, -1, 0])[2]
    if replicas == 1:
        assert acknowledged > 0
    with pytest.raises((KafkaStorageError, ProducerError)):
        p.close()  # the records held after the failure are not sent
    monkeypatch.undo()
    d.reload()
    assert d.partition_state(("t", 0)).leader == 1
    hw = d.describe_partitions("t")[0].high_watermark
    assert acknowledged <= hw
    log = d.open_reader(("t", 0))
    got = [r.value for r in log.read_records()][:hw]
    log.close()
    assert got == values[:hw]
