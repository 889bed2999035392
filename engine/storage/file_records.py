"""Reading the entries of a ``.log`` file in bounded chunks (Kafka's ``FileRecords.batchesFrom``).

The file is read with ``preadv`` into a reused buffer, never mapped: a segment
truncated by another process while we read it gives a short read here, not a SIGBUS,
and memory stays at one chunk (8 MiB by default, or the size of the largest batch if
that is bigger) whatever the file size.

The descriptor is a :class:`~plog.engine.storage.descriptor_budget.ReopenableFile`, held from the
first batch to the end of the iteration: an iteration suspended between two batches (a
consumer with thousands of partitions) lets the descriptor budget close it, and the next
read reopens the same file (or fails with ``ESTALE`` if the path now names another file).

Each chunk is walked by :class:`plog.formats.batches.BatchIterator`; an entry cut by the
chunk boundary is carried over to the next read. Batches are yielded with their file
positions. A batch's ``buffer`` is only valid until the next batch is requested (the
chunk buffer is reused); copy it (``bytes(batch.buffer)``) to keep it.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import Iterator

from plog.formats.batches import BatchIterator, TrailingBytes
from plog.formats.errors import FormatError

from plog.engine.storage.descriptor_budget import ReopenableFile

DEFAULT_CHUNK_SIZE = 8 << 20


class FileBatches:
    """Iterate the entries of ``path`` from byte ``start`` to ``end`` (default: EOF).

    After iteration, ``valid_end`` is the file position after the last whole entry and
    ``trailing`` describes bytes left after it (a partial entry or a short fragment).
    Raises ``CorruptRecordError`` (with the file position) for an impossible header.
    """

    def __init__(self, path: str | os.PathLike, start: int = 0, end: int | None = None, *,
                 chunk_size: int = DEFAULT_CHUNK_SIZE, max_batch_size: int | None = None):
        self.path = os.fspath(path)
        self.start = start
        self.end = end
        self.chunk_size = chunk_size
        self.max_batch_size = max_batch_size
        self.valid_end = start
        self.trailing: TrailingBytes | None = None

    def __iter__(self) -> Iterator:
        f = ReopenableFile(self.path, os.O_RDONLY)
        try:
            if stat.S_ISDIR(f.stat.st_mode):  # open(2) takes a directory; reading it cannot
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), self.path)
            yield from self._iter(f)
        except FormatError as e:
            if e.path is None:  # its position is in this file: say which (an error names its file)
                e.path = self.path
            raise
        finally:
            f.close()

    def _iter(self, f: ReopenableFile) -> Iterator:
        file_end = f.stat.st_size
        end = file_end if self.end is None else min(self.end, file_end)
        pos = self.start
        buf = bytearray(min(self.chunk_size, max(end - pos, 0)) or 1)
        while pos < end:
            want = min(len(buf), end - pos)
            got = _read_into(f.fd, memoryview(buf)[:want], pos)
            if got <= 0:
                break  # the file shrank under us: what was read is all there is
            view = memoryview(buf)[:got]
            it = BatchIterator(view, 0, got, base_position=pos, max_batch_size=self.max_batch_size)
            try:
                yield from it
            finally:
                view.release()
            self.valid_end = it.valid_end
            tail = it.trailing
            # A short read means the file shrank while we read it: treat it as the end.
            at_eof = pos + got >= end or got < want
            if tail is None:
                pos = it.valid_end
                if at_eof:
                    return
                continue
            if at_eof:
                self.trailing = tail
                return
            # The chunk ended inside an entry: read again from its start, with a buffer
            # large enough for it if it announced its size (bounded by the file's end).
            if tail.position == pos and tail.declared_size is not None and tail.declared_size > len(buf):
                buf = bytearray(min(tail.declared_size, end - pos))
            elif tail.position == pos and tail.declared_size is None:
                # Fewer than 18 bytes in a whole chunk can only happen at EOF; guard anyway.
                self.trailing = tail
                return
            pos = tail.position


def _read_into(fd: int, view: memoryview, position: int) -> int:
    """Fill ``view`` from ``position`` as far as the file goes (a short count at EOF)."""
    done = 0
    while done < len(view):
        n = os.preadv(fd, [view[done:]], position + done) if _HAS_PREADV else _pread_into(fd, view[done:],
                                                                                         position + done)
        if n <= 0:
            break
        done += n
    return done


def _pread_into(fd: int, view: memoryview, position: int) -> int:
    data = os.pread(fd, len(view), position)
    view[:len(data)] = data
    return len(data)


_HAS_PREADV = hasattr(os, "preadv")


# -- writeback ------------------------------------------------------------------------------------

#: ``SYNC_FILE_RANGE_WRITE`` (linux/fs.h): start writeback of the range's dirty pages, do not wait.
_SYNC_FILE_RANGE_WRITE = 2
_sync_file_range = None  # resolved on first use: the libc function, or False where there is none


def start_writeback(fd: int, position: int, size: int) -> None:
    """Ask the kernel to start writing ``size`` bytes of ``fd`` from ``position`` to disk
    now, without waiting (``sync_file_range(SYNC_FILE_RANGE_WRITE)``; a no-op where libc has
    none). Durability is unchanged: this is no fsync (it writes no metadata and promises
    nothing); the fsync that follows only has the rest left to wait for. A follower
    catching up writes hundreds of MB fsynced once at the end: started early, that writeback
    overlaps the fetching instead of following it. Errors are ignored (the fsync reports
    them)."""
    global _sync_file_range
    fn = _sync_file_range
    if fn is None:
        fn = _sync_file_range = _resolve_sync_file_range()
    if fn and size > 0:
        fn(fd, position, size, _SYNC_FILE_RANGE_WRITE)


class _WritebackThread:
    """The thread that makes :class:`WritebackTrail`'s ``sync_file_range`` calls, so that
    starting the writeback (the file system's block allocation and I/O submission, ~15% of
    a catch-up's time in the caller) runs beside the fetches instead of between them. Each
    call gets a duplicate of the descriptor, closed after it: the segment may be closed (its
    number reused) before the call is made. A daemon thread, idle between calls; a forked
    child starts its own."""

    def __init__(self):
        import queue
        import threading

        self.pid = os.getpid()
        self.queue: queue.Queue = queue.Queue(maxsize=64)
        self.thread = threading.Thread(target=self._run, name="plog-writeback", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            fd, position, size = self.queue.get()
            try:
                start_writeback(fd, position, size)
            finally:
                os.close(fd)
                self.queue.task_done()

    def submit(self, fd: int, position: int, size: int) -> None:
        try:
            dup = os.dup(fd)
        except OSError:
            return  # no descriptor to spare: the hint is skipped, the fsync still decides
        self.queue.put((dup, position, size))


_writeback_thread: _WritebackThread | None = None


def start_writeback_in_background(fd: int, position: int, size: int) -> None:
    """:func:`start_writeback` on the writeback thread (see :class:`_WritebackThread`)."""
    global _writeback_thread
    thread = _writeback_thread
    if thread is None or thread.pid != os.getpid():
        thread = _writeback_thread = _WritebackThread()
    thread.submit(fd, position, size)


def writeback_submitted() -> None:
    """Wait until the writeback thread has made every call submitted so far (tests)."""
    thread = _writeback_thread
    if thread is not None and thread.pid == os.getpid():
        thread.queue.join()


class WritebackTrail:
    """Starts the writeback of a segment being appended to in bulk (a follower catching up),
    ``lag`` bytes behind its end, ``step`` bytes at a time, so the fsync at the end of the
    run finds little left to write. Behind the end, not at it: measured here, writeback of
    the pages just written slows the next writes down about as much as it saves, while a
    trail 16 MiB behind takes the final fsync of 295 MB from ~0.12 s to ~0.015 s at no cost
    to the writes. 8 MiB behind in 8 MiB steps leaves the fsync less (at most 16 MiB instead
    of 32: 0.011 s instead of 0.015 s, 16 interleaved catch-ups each) and the fetches are
    as fast; 4 MiB steps slowed them. Only ever touches the segment last appended to (a roll or a truncation
    starts the trail again there). ``background``: the calls are made on the writeback
    thread (:func:`start_writeback_in_background`), else here."""

    def __init__(self, lag: int = 8 << 20, step: int = 8 << 20, *, background: bool = True):
        self.lag = lag
        self.step = step
        self.background = background
        self._segment = None
        self._started = 0  # writeback was started below this position

    def appended(self, segment, size: int) -> None:
        """``segment`` (the log's active segment) just got ``size`` bytes at its end."""
        end = segment.size
        if segment is not self._segment or end - size < self._started:
            # A new segment, or it was truncated: what lies before this append is durable
            # already or the fsync's business.
            self._segment, self._started = segment, max(0, end - size)
        upto = end - self.lag
        if upto - self._started >= self.step:
            start = start_writeback_in_background if self.background else start_writeback
            start(segment._fd, self._started, upto - self._started)
            self._started = upto


def _resolve_sync_file_range():
    try:
        import ctypes

        fn = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (ImportError, OSError, AttributeError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn
