"""The ``.lock`` file of a log directory: one writer per directory, as Kafka enforces it.

Kafka (``kafka.utils.FileLock``) opens ``<log dir>/.lock`` read-write, creating an empty file
if needed, and calls ``FileChannel.tryLock()``. On Linux and macOS the JDK implements that
with a POSIX record lock (``fcntl(F_SETLK)``, exclusive, from byte 0 to ``Long.MAX_VALUE``),
not ``flock``. The two lock kinds do not see each other on Linux, so we take the same POSIX
lock (``fcntl.lockf``, exclusive, whole file): a plog writer and a Kafka broker exclude each
other, and the kernel drops the lock when the holding process dies (even by SIGKILL).

POSIX locks belong to the *process*, with two traps this module guards against:

* a second lock attempt from the same process succeeds at the kernel level, so held
  directories are tracked in a module-level registry keyed by real path and a second
  :class:`LogDirLock` is refused before touching the file;
* closing *any* descriptor of the file drops the process's lock, so a refused attempt must
  never open (and close) ``.lock``; the registry check happens first for that reason too.
  Other code in a process that holds a lock must not open ``.lock`` either.

The descriptor of a held lock counts against the process's descriptor budget
(:mod:`plog.engine.storage.descriptor_budget`) as a pinned one: it is never closed to make room, and
the budget closes idle segment files and index maps instead.

Readers (dump, verify, lookup, scan) never take the lock; :func:`lock_holder` tells whether
another process holds it, from ``/proc/locks``.
"""

from __future__ import annotations

import errno
import fcntl
import os
import threading

from plog.engine.storage.descriptor_budget import budget, open_fd
from plog.engine.errors import LogDirError, LogDirLockedError
from plog.engine.storage.file_names import LOCK_FILE_NAME

# real path of a log dir -> the LogDirLock holding it in this process
_held: dict[str, "LogDirLock"] = {}
_registry_lock = threading.Lock()


def _locked_message(log_dir: str) -> str:
    return (
        f"Failed to acquire lock on file {LOCK_FILE_NAME} in {log_dir}. "
        "A Kafka instance in another process or thread is using this directory."
    )


class LogDirLock:
    """An exclusive lock on ``<log_dir>/.lock``, taken by the constructor.

    Invariants: while :attr:`locked` is true this process holds the POSIX lock and the
    registry maps :attr:`log_dir` to this object; after :meth:`release` (idempotent) neither
    holds. Raises :class:`LogDirLockedError` (Kafka's message) when another process or
    another ``LogDirLock`` of this process holds the directory, and :class:`LogDirError`
    when the directory or its ``.lock`` cannot be used. Use as a context manager, or call
    :meth:`release`; the lock also ends with the process.
    """

    def __init__(self, log_dir: str | os.PathLike):
        # Kafka names the canonical directory; it is also the registry key, so two spellings
        # of one directory (a symlink, "a/../a") are the same lock.
        self.log_dir = os.path.realpath(log_dir)
        self.path = os.path.join(self.log_dir, LOCK_FILE_NAME)
        self._fd: int | None = None
        with _registry_lock:
            if self.log_dir in _held:
                raise LogDirLockedError(_locked_message(self.log_dir), path=self.log_dir)
            if not os.path.isdir(self.log_dir):
                raise LogDirError(f"Log directory {self.log_dir} does not exist or is not a directory",
                                  path=self.log_dir)
            fd = self._open()
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                os.close(fd)
                if e.errno in (errno.EACCES, errno.EAGAIN):
                    raise LogDirLockedError(_locked_message(self.log_dir), path=self.log_dir) from None
                raise LogDirError(f"Cannot lock {self.path}: {e.strerror}", path=self.path) from e
            self._fd = fd
            _held[self.log_dir] = self
            budget().pin(1)

    def _open(self) -> int:
        try:
            # Read-write because an exclusive POSIX lock needs a descriptor open for writing.
            return open_fd(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666)
        except OSError as e:
            raise LogDirError(f"Cannot open {self.path}: {e.strerror}", path=self.path) from e

    @property
    def locked(self) -> bool:
        """True until :meth:`release`."""
        return self._fd is not None

    def release(self) -> None:
        """Unlock and close ``.lock`` (the file stays, as in Kafka). Safe to call twice."""
        with _registry_lock:
            fd = self._fd
            if fd is None:
                return
            self._fd = None
            if _held.get(self.log_dir) is self:
                del _held[self.log_dir]
            budget().unpin(1)
            try:
                fcntl.lockf(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)

    def __enter__(self) -> "LogDirLock":
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"LogDirLock({self.log_dir!r}, locked={self.locked})"


def _after_fork_in_child() -> None:
    # POSIX locks are not inherited by a forked child: forget what the parent held (closing
    # the inherited descriptors here does not touch the parent's locks).
    global _registry_lock
    _registry_lock = threading.Lock()
    for lock in _held.values():
        fd, lock._fd = lock._fd, None
        if fd is not None:
            budget().unpin(1)
            try:
                os.close(fd)
            except OSError:
                pass
    _held.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def held_log_dirs() -> list[str]:
    """Real paths of the log directories this process holds, sorted."""
    with _registry_lock:
        return sorted(_held)


def lock_holder(lock_path: str) -> tuple[bool, int | None]:
    """``(checked, pid)``: the process holding a POSIX or flock lock on ``lock_path`` per
    ``/proc/locks`` (Linux), without taking any lock (so without the traps above: nothing is
    opened but ``/proc/locks``). ``checked`` is False when ``/proc/locks`` is unavailable.
    The pid is as seen from the lock owner's namespace."""
    try:
        st = os.stat(lock_path)
        with open("/proc/locks", encoding="ascii", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return False, None
    want = (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
    for line in lines:
        parts = line.split()
        if "->" in parts:  # a waiter, not a holder
            continue
        for i, part in enumerate(parts):
            bits = part.split(":")
            if len(bits) == 3 and i > 0:
                try:
                    dev = (int(bits[0], 16), int(bits[1], 16), int(bits[2]))
                except ValueError:
                    continue
                if dev == want:
                    try:
                        return True, int(parts[i - 1])
                    except ValueError:
                        return True, -1
    return True, None
