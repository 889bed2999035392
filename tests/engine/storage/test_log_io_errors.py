"""A log's writes that the operating system refuses (a full disk, an I/O error) raise the
engine's typed :class:`KafkaStorageError` (Kafka's ``KafkaStorageException``), naming the
file and carrying the ``errno``; the log stays usable as the failed operation left it, and
closing a log or a manager after such a failure gives every descriptor back and never marks
the directory clean. Runs on whichever path ``PLOG_NATIVE`` selects (CI runs both)."""

from __future__ import annotations

import errno
import os

import pytest

from plog.engine.errors import KafkaStorageError
from plog.engine.storage import producer_state
from plog.engine.storage.log import Log
from plog.engine.storage.log_config import LogConfig
from plog.engine.storage.log_manager import LogManager
from plog.formats.record_batch import encode_batch

NO_SPACE = OSError(errno.ENOSPC, "No space left on device")


def _batches(n: int, start: int = 0, per: int = 10) -> list[bytes]:
    return [encode_batch([(j, 1_700_000_000_000, b"k", b"value-%06d" % (start + i * per + j)) for j in range(per)],
                         producer_id=7, producer_epoch=0, base_sequence=start + i * per)
            for i in range(n)]


def _values(log: Log) -> list[bytes]:
    return [r.value for r in log.read_records()]


def _refuse_segment_writes(monkeypatch, log: Log, after_bytes: int) -> list[int]:
    """Make the log's segment writes fail with ENOSPC once ``after_bytes`` more bytes went
    in (the part that fits is written first, as a real full disk does). Returns a list that
    gets one item per refused write."""
    real = os.pwrite
    fds = {s._fd for s in log.segments}
    room = [after_bytes]
    refused: list[int] = []

    def pwrite(fd, data, position):
        if fd not in fds:
            return real(fd, data, position)
        if room[0] <= 0:
            refused.append(fd)
            raise NO_SPACE
        n = real(fd, memoryview(data)[:room[0]], position)
        room[0] -= n
        return n

    monkeypatch.setattr(os, "pwrite", pwrite)
    return refused


@pytest.mark.parametrize("bulk", [True, False], ids=["append_batches_as_leader", "append_as_leader"])
def test_a_full_disk_during_an_append_is_a_storage_error_that_takes_the_log_offline(tmp_path, monkeypatch, bulk):
    log = Log.open(tmp_path / "t-0", LogConfig(fsync_on_produce=False))
    first = _batches(3)
    log.append_batches_as_leader(first)
    end, size = log.log_end_offset, log.active_segment.size
    refused = _refuse_segment_writes(monkeypatch, log, after_bytes=100)  # a torn batch: 100 bytes of it
    more = _batches(3, start=30)
    with pytest.raises(KafkaStorageError) as e:
        if bulk:
            log.append_batches_as_leader(more)
        else:
            log.append_as_leader(more[0])
    assert refused
    err = e.value
    segment_file = str(log.active_segment.log_path)
    assert err.errno == errno.ENOSPC and err.path == segment_file
    assert str(err) == f"Error while appending to {segment_file}: No space left on device"
    assert isinstance(err.__cause__, OSError)
    # Nothing of the failed append counts: the LEO and the segment's size are as before it.
    assert (log.log_end_offset, log.active_segment.size) == (end, size)
    # The log is offline (Kafka's offline log directory): no write until it is opened
    # again, each refusal naming the failure, also once there is room again...
    monkeypatch.undo()
    assert log.failure is err
    for attempt in (lambda: log.append_batches_as_leader(more), lambda: log.roll(100), lambda: log.truncate_to(5)):
        with pytest.raises(KafkaStorageError) as again:
            attempt()
        assert again.value.offline_since is err and again.value.errno == errno.ENOSPC
        assert f"the log is offline since an I/O error ({err})" in str(again.value)
    # ...but what was written before the failed append can still be made durable (a round
    # in flight is acknowledged after its fsync, not lost with the round that failed).
    assert log.recovery_point == 0
    log.flush()
    assert log.recovery_point == 30
    assert _values(log) == [b"value-%06d" % i for i in range(30)]  # reads go on
    segment = log.active_segment
    log.close()  # lets go of its files, writes nothing (no snapshot, no trim of the torn bytes)
    assert log.closed and segment._file.closed
    assert not list((tmp_path / "t-0").glob("*.snapshot"))
    assert (tmp_path / "t-0" / "00000000000000000000.log").stat().st_size == size + 100
    # Opened again after an unclean shutdown (its manager writes no marker for it): the
    # recovery cuts the torn batch, and the log takes appends again.
    reopened = Log.open(tmp_path / "t-0", LogConfig(), had_clean_shutdown=False)
    assert reopened.log_end_offset == 30 and reopened.active_segment.size == size
    reopened.append_batches_as_leader(more)
    assert _values(reopened) == [b"value-%06d" % i for i in range(60)]
    reopened.close()


def test_a_failed_fsync_is_never_retried(tmp_path, monkeypatch):
    """fsyncgate: after a failed fsync the kernel may have dropped the pages it could not
    write and marked them clean, so a second fsync would succeed without them. The log goes
    offline instead: its recovery point stays, no later flush or close fsyncs it again."""
    log = Log.open(tmp_path / "t-0", LogConfig(fsync_on_produce=False))
    log.append_batches_as_leader(_batches(2))
    calls = []

    def fsync(fd):
        calls.append(fd)
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(KafkaStorageError) as e:
        log.flush()
    assert e.value.errno == errno.EIO and str(e.value).startswith("Error while flushing ")
    assert log.recovery_point == 0  # not moved: nothing was made durable
    failed_calls = len(calls)
    monkeypatch.undo()
    monkeypatch.setattr(os, "fsync", lambda fd: calls.append(fd))
    with pytest.raises(KafkaStorageError, match="offline since an I/O error"):
        log.flush()
    log.close()
    assert len(calls) == failed_calls and log.recovery_point == 0


def test_a_close_whose_snapshot_fails_still_closes_the_segments(tmp_path, monkeypatch):
    log = Log.open(tmp_path / "t-0", LogConfig())
    log.append_batches_as_leader(_batches(2))
    segment = log.active_segment
    real = producer_state.write_snapshot_file

    def refuse(path, data, sync):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(producer_state, "write_snapshot_file", refuse)
    with pytest.raises(KafkaStorageError) as e:
        log.close()
    assert e.value.errno == errno.ENOSPC and e.value.path.endswith("00000000000000000020.snapshot")
    assert str(e.value).startswith("Error while closing ")
    assert log.closed and segment._file.closed  # its descriptor given back all the same
    monkeypatch.setattr(producer_state, "write_snapshot_file", real)
    reopened = Log.open(tmp_path / "t-0", LogConfig())
    assert reopened.log_end_offset == 20
    reopened.close()


def test_a_manager_whose_log_fails_to_close_closes_the_others_and_is_not_marked_clean(tmp_path, monkeypatch):
    d = tmp_path / "logs"
    with LogManager([d]) as lm:
        for p in range(3):
            lm.get_or_create_log(("t", p)).append_batches_as_leader(_batches(1))
    lm = LogManager([d])
    logs = [lm.get_or_create_log(("t", p)) for p in range(3)]
    assert not (d / ".kafka_cleanshutdown").exists()  # removed at open, written at a clean close
    real_close = Log.close

    def close(self):
        if self is logs[1]:
            self.closed = True
            raise KafkaStorageError("Error while closing t-1: No space left on device (injected)")
        return real_close(self)

    monkeypatch.setattr(Log, "close", close)
    with pytest.raises(KafkaStorageError, match="injected"):
        lm.close()
    assert logs[0].closed and logs[2].closed
    assert not (d / ".kafka_cleanshutdown").exists()  # the next start recovers rather than trusts
    monkeypatch.undo()
    with LogManager([d]) as again:  # the lock was given back
        assert [again.get_or_create_log(("t", p)).log_end_offset for p in range(3)] == [10, 10, 10]


def test_the_error_that_ends_a_with_block_is_the_one_raised_when_closing_fails_too(tmp_path, monkeypatch):
    def refuse(path, data, sync):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    first = KafkaStorageError("Error while appending to t-0: No space left on device (injected)")
    with pytest.raises(KafkaStorageError) as e:
        with Log.open(tmp_path / "t-0", LogConfig()) as log:
            log.append_batches_as_leader(_batches(1))
            monkeypatch.setattr(producer_state, "write_snapshot_file", refuse)
            raise first
    assert e.value is first and log.closed
    assert len(e.value.__notes__) == 1
    assert e.value.__notes__[0].startswith("closing the log also failed: Error while closing ")
    monkeypatch.undo()
    with pytest.raises(KafkaStorageError, match="Error while closing"):  # no error of its own: the close's
        with Log.open(tmp_path / "t-0", LogConfig()) as log:
            log.append_batches_as_leader(_batches(1, start=10))
            monkeypatch.setattr(producer_state, "write_snapshot_file", refuse)


def test_a_manager_with_an_offline_log_vouches_only_for_what_it_made_durable(tmp_path, monkeypatch):
    """A log that went offline counts in the high watermark checkpoint only up to its
    recovery point (what was fsynced before the failure), and its manager's close writes no
    checkpoint and no clean-shutdown marker, without raising again (the failure was raised
    when it happened)."""
    from plog.formats.checkpoints import parse_offset_checkpoint

    d = tmp_path / "logs"
    lm = LogManager([d])
    log = lm.get_or_create_log(("t", 0), config={"plog.fsync.on.produce": "false"})
    log.append_batches_as_leader(_batches(1))
    log.flush()
    log.append_batches_as_leader(_batches(1, start=10))  # high watermark 20, durable 10

    def fsync(fd):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(KafkaStorageError):
        log.flush()
    monkeypatch.undo()
    assert (log.high_watermark, log.recovery_point) == (20, 10)
    lm.checkpoint_high_watermarks()
    hw = parse_offset_checkpoint((d / "replication-offset-checkpoint").read_bytes())
    assert hw == {("t", 0): 10}
    lm.close()
    assert lm.closed and log.closed
    assert not (d / ".kafka_cleanshutdown").exists()
    with LogManager([d]) as again:  # recovers, from the recovery point written before
        assert again.get_or_create_log(("t", 0)).log_end_offset == 20
