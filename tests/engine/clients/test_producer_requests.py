"""A produce request that fails part way (here: a segment roll refused by the disk). The
batches before the failing one are in the log; an idempotent producer sends the last of
them again, a duplicate the log acknowledges with its offsets, so they are acknowledged
once each. On the native path the request's buffer was stamped in place by the append
(formats/memory_records.py): the batch sent again must be the one the client encoded
(base offset 0), not the stamped copy, or the log would refuse it."""

from __future__ import annotations

import pytest

from plog.engine.cluster.data_dir import DataDir
from plog.engine.clients.producer import Producer
from plog.engine.errors import KafkaStorageError, ProducerError
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
