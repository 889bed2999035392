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
def test_a_full_disk_during_an_append_is_a_storage_error_and_the_log_goes_on(tmp_path, monkeypatch, bulk):
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
    monkeypatch.undo()
    # Room again: the next append writes over the torn bytes; the log holds what was appended.
    log.append_batches_as_leader(more)
    assert _values(log) == [b"value-%06d" % i for i in range(30)] + [b"value-%06d" % i for i in range(30, 60)]
    log.close()
    reopened = Log.open(tmp_path / "t-0", LogConfig())
    assert reopened.log_end_offset == 60 and len(_values(reopened)) == 60
    reopened.close()


def test_a_failed_fsync_is_a_storage_error(tmp_path, monkeypatch):
    log = Log.open(tmp_path / "t-0", LogConfig(fsync_on_produce=False))
    log.append_batches_as_leader(_batches(2))

    def fsync(fd):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(KafkaStorageError) as e:
        log.flush()
    assert e.value.errno == errno.EIO and "Error while flushing" in str(e.value)
    assert log.recovery_point == 0  # not moved: nothing was made durable
    monkeypatch.undo()
    log.flush()
    assert log.recovery_point == 20
    log.close()


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
