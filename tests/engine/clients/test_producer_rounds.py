"""Pipelined produce rounds: with ``hold_lock``, a full round's flush (fsyncs, checkpoints)
runs on the writer's thread while the producer fills the next round. Its records are
acknowledged only once that flush is done, its failure reaches the caller at the next round
or flush (and fails the round appended beside it), and nothing else the writer does runs
beside it but the next round's appends when the round only fsyncs (no followers)."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from plog.engine.cluster.data_dir import DataDir
from plog.engine.cluster.writer import ClusterWriter
from plog.engine.clients.producer import Producer
from plog.engine.errors import NotEnoughReplicasAfterAppendError, ProducerError

# A round of 1 request of 2 KiB: a few dozen 100-byte records fill one.
SMALL_ROUNDS = dict(batch_size=1024, max_request_size=2048, max_in_flight_requests_per_connection=1, linger_ms=60_000)


@pytest.fixture
def dd(tmp_path):
    d = DataDir.init(tmp_path / "d", brokers=1)
    d.create_topic("t", replica_assignment={0: [1]})
    return d


def _patch_background_flush(monkeypatch, before=None, after=None):
    """Call ``before(self)`` and ``after(self)`` around the writer's flushes in the
    background: a round with followers (``_flush`` off the main thread, or the replication
    of a round in two phases, ``_replicate_round``) and a round that only fsyncs, beside the
    next appends (``_flush_round``)."""
    real_flush, real_round = ClusterWriter._flush, ClusterWriter._flush_round
    real_replicate = ClusterWriter._replicate_round

    def replicate(self, *args):
        if before:
            before(self)
        real_replicate(self, *args)

    monkeypatch.setattr(ClusterWriter, "_replicate_round", replicate)

    def around(self, real, *args):
        if before:
            before(self)
        real(self, *args)
        if after:
            after(self)

    def flush(self):
        if threading.current_thread() is threading.main_thread():
            return real_flush(self)
        around(self, real_flush)

    monkeypatch.setattr(ClusterWriter, "_flush", flush)
    monkeypatch.setattr(ClusterWriter, "_flush_round", lambda self, *args: around(self, real_round, *args))


@pytest.fixture
def gated_flush(monkeypatch):
    """The writer's flush waits for ``gate`` when it runs in the background; ``started`` is
    set when it began (a foreground flush is not held)."""
    gate, started = threading.Event(), threading.Event()

    def hold(_):
        started.set()
        assert gate.wait(10)

    _patch_background_flush(monkeypatch, before=hold)
    return gate, started


def _values(n, start=0):
    return [b"v%04d" % i + b"." * 95 for i in range(start, start + n)]


def test_a_round_is_acknowledged_only_after_its_flush(dd, gated_flush):
    gate, started = gated_flush
    p = Producer(dd, hold_lock=True, **SMALL_ROUNDS)
    futures = [p.send("t", v, partition=0) for v in _values(40)]
    assert started.wait(10)  # a round went to the background flush...
    in_flight = [f for f in futures if not f.done()]
    assert in_flight and p.records_sent == 0  # ...and none of it counts yet
    # The producer went on filling the next round meanwhile.
    more = [p.send("t", v, partition=0) for v in _values(3, 40)]
    gate.set()
    p.flush()
    assert all(f.done() for f in futures + more)
    assert [f.get().offset for f in futures + more] == list(range(43))
    assert p.records_sent == 43 and p.stats[next(iter(p.stats))] == [0, 42, 43]
    p.close()


def test_sending_the_next_round_waits_for_the_one_in_flight(dd, gated_flush):
    gate, started = gated_flush
    p = Producer(dd, hold_lock=True, **SMALL_ROUNDS)
    p.send_values("t", _values(40), partition=0)
    assert started.wait(10)
    threading.Timer(0.3, gate.set).start()
    t0 = time.monotonic()
    p.send_values("t", _values(40, 40), partition=0)  # its round waits for the gate
    assert gate.is_set() and time.monotonic() - t0 >= 0.25
    p.close()
    assert p.records_sent == 80


def test_a_failed_background_flush_fails_its_round_and_what_follows(dd, monkeypatch):
    calls = []

    def fail_first(self):
        calls.append(threading.current_thread() is threading.main_thread())
        if len(calls) == 1:
            raise NotEnoughReplicasAfterAppendError("acks=all: the ISR shrank meanwhile")

    _patch_background_flush(monkeypatch, after=fail_first)
    p = Producer(dd, hold_lock=True, **SMALL_ROUNDS)
    first = [p.send("t", v, partition=0) for v in _values(25)]
    sent = []
    with pytest.raises(NotEnoughReplicasAfterAppendError):
        for v in _values(200, 25):
            sent.append(p.send("t", v, partition=0))
    assert calls[0] is False  # the failing flush ran in the background
    failed = [f for f in first if f.done() and isinstance(_error(f), NotEnoughReplicasAfterAppendError)]
    assert failed
    # The round appended beside the failed one is not acknowledged either: none of the
    # records after the failure counts, whatever its own flush did.
    assert p.records_sent == 0
    assert all(_error(f) is not None for f in sent if f.done())
    # The partition stays failed: later batches to it are not sent (no gap before them).
    with pytest.raises(ProducerError):
        p.close()
    assert p.records_sent == 0


def test_the_next_round_is_appended_beside_a_round_that_only_fsyncs(dd, gated_flush):
    """RF 1: the next round is in the log while the one before is being fsynced, but neither
    is acknowledged, nor counted by the recovery point or the high watermark checkpoint
    (what other processes read up to), before its own flush."""
    from plog.engine.storage.checkpoints import OffsetCheckpointFile

    gate, started = gated_flush
    p = Producer(dd, hold_lock=True, **SMALL_ROUNDS)
    futures = [p.send("t", v, partition=0) for v in _values(25)]
    assert started.wait(10)
    writer = p._writer
    assert writer.appends_beside_flush
    with writer.beside_flush():
        log = writer.leader_log(("t", 0))[0]
    round_end = log.log_end_offset
    more: list = []
    sender = threading.Thread(target=lambda: more.extend(p.send("t", v, partition=0) for v in _values(40, 25)))
    sender.start()
    deadline = time.monotonic() + 10
    while log.log_end_offset <= round_end and time.monotonic() < deadline:
        time.sleep(0.001)
    assert log.log_end_offset > round_end  # appended beside the round in flight...
    assert not any(f.done() for f in futures) and p.records_sent == 0  # ...and nothing acknowledged
    assert log.recovery_point <= round_end
    hw = OffsetCheckpointFile(dd.broker_log_dir(1) / "replication-offset-checkpoint").read()
    assert all(v <= round_end for v in hw.values())
    gate.set()
    sender.join(10)
    p.flush()
    assert [f.get().offset for f in futures + more] == list(range(65))
    p.close()


def test_a_round_with_followers_is_appended_beside_only_once_replicated(tmp_path, gated_flush):
    d = DataDir.init(tmp_path / "d", brokers=3)
    d.create_topic("t", replica_assignment={0: [1, 2, 3]})
    gate, started = gated_flush
    w = d.writer(5)
    w.append(("t", 0), _batch())
    w.flush_in_background()
    assert started.wait(10)
    assert w.flushes_in_phases
    threading.Timer(0.3, gate.set).start()
    with w.beside_flush():
        t0 = time.monotonic()
        w.append_batches(("t", 0), [_batch()])  # the followers' fetches: it waits
    assert time.monotonic() - t0 >= 0.25
    w.close()


def test_a_replicated_round_commits_beside_the_next_one(tmp_path, monkeypatch):
    """A round in two phases: once replicated, the next round is appended and replicated
    while the first one's fsyncs and checkpoint wait (here for a gate); neither round is
    acknowledged before its own commit, the first checkpoint holds the first round's high
    watermark although the second's replication moved it on, and the commits end in order."""
    from plog.engine.storage.checkpoints import OffsetCheckpointFile

    d = DataDir.init(tmp_path / "d", brokers=3)
    d.create_topic("t", replica_assignment={0: [1, 2, 3]})
    gates = [threading.Event(), threading.Event()]
    committing: list[threading.Event] = [threading.Event(), threading.Event()]
    real_commit = ClusterWriter._commit_round

    def commit(self, *args):
        k = sum(e.is_set() for e in committing)
        committing[k].set()
        assert gates[k].wait(10)
        real_commit(self, *args)

    def checkpointed():
        return [list(OffsetCheckpointFile(d.broker_log_dir(b) / "replication-offset-checkpoint").read().values())
                for b in (1, 2, 3)]

    monkeypatch.setattr(ClusterWriter, "_commit_round", commit)
    w = d.writer(5)
    w.append(("t", 0), _batch())
    first = w.flush_in_background()
    assert committing[0].wait(10)  # replicated; its commit waits
    t0 = time.monotonic()
    with w.beside_flush():
        w.append_batches(("t", 0), [_batch()])  # beside the first commit: no wait
    second = w.flush_in_background()  # its replication runs now, beside the first commit
    assert time.monotonic() - t0 < 5
    time.sleep(0.2)
    assert not first.done() and not second.done()
    assert checkpointed() == [[0], [0], [0]]  # nothing checkpointed before a commit
    gates[0].set()
    assert first.exception() is None
    assert not second.done()  # its replication may be over, its commit is not
    assert checkpointed() == [[1], [1], [1]]  # the first round's high watermark, not the second's
    gates[1].set()
    assert second.exception() is None
    assert checkpointed() == [[2], [2], [2]]
    w.close()


def _error(future):
    try:
        future.get()
    except Exception as e:  # noqa: BLE001 - the future's own error
        return e
    return None


def test_a_lingered_replicated_round_goes_in_flight_like_a_full_one(tmp_path, gated_flush):
    """linger.ms up with ``hold_lock``, the partition replicated: what lingers goes as a
    round whose flush runs in the background while the caller goes on (Kafka's sender sends
    it as the caller sends more), acknowledged only once that flush is done, at the next
    round or flush."""
    d = DataDir.init(tmp_path / "d", brokers=3)
    d.create_topic("t", replica_assignment={0: [1, 2, 3]})
    gate, started = gated_flush
    p = Producer(d, hold_lock=True, linger_ms=0)
    p.send_values("t", _values(5), partition=0)  # (send_values' rule: the first call starts the clock)
    p.send_values("t", _values(5, 5), partition=0)  # linger.ms is up: the 10 records go, the
    assert p.records_sent == 10                    # first time through the writer it opens
    p.send_values("t", _values(5, 10), partition=0)
    p.send_values("t", _values(5, 15), partition=0)  # ...and now in flight:
    assert started.wait(10)
    assert p.records_sent == 10  # the call returned before their fsyncs
    gate.set()
    p.flush()
    assert p.records_sent == 20 and p.stats[next(iter(p.stats))] == [0, 19, 20]
    p.close()


def test_a_lingered_round_with_one_replica_is_flushed_at_once(dd, gated_flush):
    """The same with one replica: the lingered round (the small tail of what was sent) is
    flushed before the call returns, with ``hold_lock`` too (Producer._linger_send)."""
    gate, started = gated_flush
    p = Producer(dd, hold_lock=True, linger_ms=0)
    for k in range(4):
        p.send_values("t", _values(5, 5 * k), partition=0)
    assert not started.is_set()  # no flush went to the background
    assert p.records_sent == 20
    p.close()


def test_without_hold_lock_a_lingered_round_is_acknowledged_before_the_call_returns(dd):
    p = Producer(dd, linger_ms=0)
    p.send_values("t", _values(5), partition=0)
    assert p.records_sent == 0
    p.send_values("t", _values(5, 5), partition=0)
    assert p.records_sent == 10  # the round, flushed by the call: nothing is left in flight
    p.close()


def test_a_failed_replicated_round_fails_the_round_committing_after_it(tmp_path, monkeypatch):
    """Two replicated rounds in flight (the second replicated beside the first's commit):
    the first's commit fails, so the second, appended after it, is not acknowledged
    either, whatever its own commit did, and the partition stays failed."""
    d = DataDir.init(tmp_path / "d", brokers=3)
    d.create_topic("t", replica_assignment={0: [1, 2, 3]})
    real_commit = ClusterWriter._commit_round
    commits = []

    def commit(self, previous, early, ends, captured, dirty, acks, done):
        commits.append(previous)
        if len(commits) == 1:
            self._join([f for _, f in early], raise_first=False)
            done.finish(NotEnoughReplicasAfterAppendError("acks=all: the ISR shrank meanwhile"))
            return
        real_commit(self, previous, early, ends, captured, dirty, acks, done)

    monkeypatch.setattr(ClusterWriter, "_commit_round", commit)
    p = Producer(d, hold_lock=True, **SMALL_ROUNDS)
    with pytest.raises(NotEnoughReplicasAfterAppendError):
        for v in _values(300):
            p.send("t", v, partition=0)
    assert len(commits) >= 2 and commits[1] is not None  # the second committed after the first
    assert p.records_sent == 0
    with pytest.raises(ProducerError):
        p.close()
    assert p.records_sent == 0


def test_the_writer_settles_the_background_flush_before_anything_else(dd, gated_flush):
    gate, started = gated_flush
    w = dd.writer(5)
    w.append(("t", 0), _batch())
    future = w.flush_in_background()
    assert started.wait(10)
    threading.Timer(0.3, gate.set).start()
    w.append(("t", 0), _batch())  # waits for the flush in flight
    assert future.done() and future.exception() is None
    w.close()
    log = dd.open_reader(("t", 0))
    try:
        assert log.log_end_offset == 2
    finally:
        log.close()


def _batch():
    from plog.formats.record_batch import encode_batch

    return encode_batch([(0, 0, None, b"x")])


def test_a_stop_while_a_round_is_in_flight_still_acknowledges_it(dd, gated_flush, monkeypatch):
    from plog.engine import interrupts

    gate, started = gated_flush
    waiting = threading.Event()
    await_round = Producer._await_round

    def watched(self):
        if self._inflight is not None:
            waiting.set()
        await_round(self)

    monkeypatch.setattr(Producer, "_await_round", watched)

    def stop_then_open():
        # Ctrl-C once the next round waits (inside its hold) for the one in flight, then
        # the flush goes on: the wait is not cut short.
        assert waiting.wait(10)
        deadline = time.monotonic() + 10
        while not interrupts._depth and time.monotonic() < deadline:
            time.sleep(0.001)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.2)
        gate.set()

    p = Producer(dd, hold_lock=True, **SMALL_ROUNDS)
    futures = [p.send("t", v, partition=0) for v in _values(30)]
    assert started.wait(10)
    t = threading.Thread(target=stop_then_open)
    t.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            for v in _values(100, 30):
                p.send("t", v, partition=0)
    finally:
        t.join()
    assert gate.is_set()
    acknowledged = [f for f in futures if f.done()]
    assert acknowledged and all(_error(f) is None for f in acknowledged)
    p.close()
    log = dd.open_reader(("t", 0))
    try:
        assert log.log_end_offset >= len(acknowledged)
    finally:
        log.close()


def test_a_replicated_round_whose_flush_cannot_start_fails_alone(tmp_path, monkeypatch):
    """The flush of a replicated round fails to start (no thread): that round fails, the
    rounds in flight before it are still acknowledged once, each record counted once."""
    d = DataDir.init(tmp_path / "d", brokers=3)
    d.create_topic("t", replica_assignment={0: [1, 2, 3]})
    real = ClusterWriter.flush_in_background
    calls = []

    def flaky(self):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("can't start new thread")
        return real(self)

    monkeypatch.setattr(ClusterWriter, "flush_in_background", flaky)
    p = Producer(d, hold_lock=True, **SMALL_ROUNDS)
    futures = []
    with pytest.raises(RuntimeError):
        for v in _values(400):
            futures.append(p.send("t", v, partition=0))
    with pytest.raises(ProducerError):  # the partition failed: what was still queued is not sent
        p.close()
    done = [f for f in futures if f.done() and _error(f) is None]
    offsets = [f.get().offset for f in done]
    assert len(calls) >= 3 and done
    assert offsets == list(range(len(offsets)))  # acknowledged in order, each once
    assert p.records_sent == len(done)


class _NoThread:
    """A writer's pool whose thread cannot start."""

    def submit(self, *args):
        raise RuntimeError("can't start new thread")

    def shutdown(self, wait=True):
        pass


def test_a_replicated_round_whose_commit_cannot_start_fails_and_is_flushed_again(tmp_path):
    """No thread for the second phase: the round's Task ends with that error (nothing waits
    for a commit that never runs), and its partitions go back to the writer, whose close
    flushes and checkpoints them."""
    d = DataDir.init(tmp_path / "d", brokers=3)
    d.create_topic("t", replica_assignment={0: [1, 2, 3]})

    w = d.writer(5)
    w._committer = _NoThread()
    w.append(("t", 0), _batch())
    task = w.flush_in_background()
    deadline = time.monotonic() + 10
    while not task.done() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert task.done() and isinstance(task.exception(), RuntimeError)
    w._committer = None
    w.close()
    from plog.engine.storage.checkpoints import OffsetCheckpointFile

    hws = [list(OffsetCheckpointFile(d.broker_log_dir(b) / "replication-offset-checkpoint").read().values())
           for b in (1, 2, 3)]
    assert hws == [[1], [1], [1]]


def test_a_replicated_round_whose_flush_thread_cannot_start_leaves_nothing_in_flight(tmp_path):
    d = DataDir.init(tmp_path / "d", brokers=3)
    d.create_topic("t", replica_assignment={0: [1, 2, 3]})

    w = d.writer(5)
    w._flusher = _NoThread()
    w.append(("t", 0), _batch())
    with pytest.raises(RuntimeError):
        w.flush_in_background()
    assert not w.flushes_in_phases and not w.appends_beside_flush
    w._flusher = None
    w.close()  # no flush in flight to wait for: the round is flushed here
    from plog.engine.storage.checkpoints import OffsetCheckpointFile

    hws = [list(OffsetCheckpointFile(d.broker_log_dir(b) / "replication-offset-checkpoint").read().values())
           for b in (1, 2, 3)]
    assert hws == [[1], [1], [1]]


def test_a_round_whose_flush_thread_cannot_start_stays_to_be_flushed(dd):
    """One replica: no flush thread for the round, so it is not in flight and stays dirty;
    the close fsyncs and checkpoints it."""
    w = dd.writer(5)
    w._flusher = _NoThread()
    w.append(("t", 0), _batch())
    with pytest.raises(RuntimeError):
        w.flush_in_background()
    assert not w.appends_beside_flush
    assert [tuple(tp) for tp in w._dirty] == [("t", 0)]  # still the writer's to flush
    w._flusher = None
    w.close()
    from plog.engine.storage.checkpoints import OffsetCheckpointFile

    assert list(OffsetCheckpointFile(dd.broker_log_dir(1) / "replication-offset-checkpoint").read().values()) == [1]
