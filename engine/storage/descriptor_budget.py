"""The process's budget of open file descriptors and memory mappings (``DescriptorBudget``).

Why: a partition being written holds its active segment's ``.log`` open and its offset and
time indexes mapped, and each mapping keeps a descriptor of its own (Python's ``mmap`` dups
the one it was given). Kafka keeps all of them open for every partition and asks operators
for a ``ulimit -n`` of 100000 or more; plog runs where its user runs it, under the soft
``RLIMIT_NOFILE`` (often 1024), so 500 partitions were enough to fail with EMFILE half-way.
Kafka's ``LazyIndex`` opens an index at its first use; plog does that too, and on top of it
closes what has been idle longest once the budget is spent, as a cache would.

What the budget holds: *holders*, objects that keep descriptors or mappings between calls
and can give them back and take them again on their next use: a :class:`ReopenableFile`
(a segment's ``.log``, a ``.txnindex``, a reader of a ``.log``), and a mapped offset or
time index (``engine.storage.abstract_index``; an evicted index keeps its entry count in memory and maps the
file again, never trusting the preallocated zero tail). Descriptors held for good (the
``.lock`` of each locked log directory: closing it would drop the lock) are *pinned*: they
count against the budget and are never closed. Descriptors opened and closed within one
call (atomic checkpoint writes, a ``pwrite`` to an index page) are not held, and are what
the headroom is for.

Invariants:

* registered holders hold at most ``capacity - pinned`` descriptors and ``map_capacity``
  mappings; room is made *before* a holder opens (:meth:`DescriptorBudget.admit`);
* the holder evicted is the least recently used one; never the one being admitted or
  touched, and only one last used by the calling thread (so a thread never closes a
  descriptor another thread is in the middle of using: the engine's objects are used from
  one thread at a time, and distinct objects from distinct threads stay independent); the
  one object two threads use at once, a segment's ``.log`` fsynced by a writer's flush thread
  while the next round is appended, is never evicted during :meth:`ReopenableFile.fsync`
  (and an index map evicted under that thread's flush is fsynced through the file instead);
* eviction takes place under the budget's lock, and a holder's :meth:`DescriptorBudget.touch`
  succeeds only while it is registered: once touched, a holder's descriptor stays valid
  until the same thread admits another holder;
* a :class:`ReopenableFile` reopened by path is the same file (device and inode) it first
  opened, or the reopen fails with ``ESTALE`` naming the file: bytes are never read from or
  written to a file that replaced it.

When the process runs out anyway (EMFILE or ENFILE from ``open``, ENOMEM from ``mmap``:
other code holds more than the headroom assumed), :func:`open_fd` and the index mapper
close the older half of the calling thread's holders, lower the capacity to what fitted,
and try again.
"""

from __future__ import annotations

import errno
import os
import threading
import weakref
from collections import OrderedDict

__all__ = [
    "DescriptorBudget",
    "MIN_WORKING_SET",
    "ReopenableFile",
    "budget",
    "open_fd",
    "reset_budget",
]

#: Descriptors one writer needs at once besides its pinned locks: a segment's ``.log`` and
#: its two index mappings, a ``.txnindex``, a reader of the ``.log``, and at a roll the next
#: segment's ``.log`` and mappings. Below this the budget cannot work; see :meth:`require`.
MIN_WORKING_SET = 8

#: Descriptors outside the budget: the standard streams and the interpreter's own, those
#: plog opens and closes within one call (an atomic checkpoint write holds the file and its
#: directory, the metadata lock one more, a snapshot read one), pipes of worker processes
#: (``verify``/``scan -j``), and whatever an embedding application holds. An eighth of the
#: limit, at least 32: generous for plog itself, and the EMFILE fallback covers the rest.
_MIN_HEADROOM = 32
_HEADROOM_SHARE = 8

_FD_EXHAUSTED = (errno.EMFILE, errno.ENFILE)


def _soft_nofile() -> int:
    try:
        import resource
    except ImportError:  # not a Unix: nothing to read, assume the common default
        return 1024
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft < 0:
        # No per-process limit (macOS can say so): the kernel's real one still applies.
        try:
            soft = os.sysconf("SC_OPEN_MAX")
        except (ValueError, OSError):
            soft = -1
        if soft <= 0:
            soft = 1 << 16
    return int(soft)


def _count_entries(path: str) -> int | None:
    try:
        return len(os.listdir(path))
    except OSError:
        return None


def _descriptors_in_use() -> int:
    """Descriptors this process has open now (Linux ``/proc/self/fd``, BSD/macOS ``/dev/fd``;
    the directory listing's own descriptor is counted too, harmlessly)."""
    for path in ("/proc/self/fd", "/dev/fd"):
        n = _count_entries(path)
        if n is not None:
            return n
    return 16


def _descriptor_capacity() -> int:
    soft = _soft_nofile()
    headroom = max(_MIN_HEADROOM, soft // _HEADROOM_SHARE)
    return max(0, soft - _descriptors_in_use() - headroom)


def _mapping_capacity() -> int:
    """Half of what ``vm.max_map_count`` leaves (the other half is for the allocator and
    native code, which map memory as they run); unbounded where the kernel says nothing."""
    try:
        with open("/proc/sys/vm/max_map_count", "rb") as f:
            limit = int(f.read().split()[0])
        with open("/proc/self/maps", "rb") as f:
            in_use = sum(1 for _ in f)
    except (OSError, ValueError, IndexError):
        return 1 << 30
    return max(MIN_WORKING_SET, (limit - in_use) // 2)


class DescriptorBudget:
    """Open descriptors and mappings of the holders of one process; see the module docstring.

    Holders implement ``_budget_evict() -> bool``: give back their descriptors and mappings
    and keep what they need to take them again on their next use; False means "in use, cannot
    now" (a mapping with exported buffers), and the holder stays. ``_budget_evict`` runs with
    the budget's lock held and must not admit anything.

    Holders are referenced weakly: one dropped without being closed is no longer counted once
    it is collected (a mapping closes itself then; a :class:`ReopenableFile` closes its
    descriptor in its finalizer), so forgotten objects never pin the budget.
    """

    def __init__(self, capacity: int | None = None, map_capacity: int | None = None):
        self._lock = threading.RLock()
        #: id(holder) -> [weak reference, descriptors, mappings, ident of the thread that used
        #: it last], least recently used first
        self._lru: OrderedDict[int, list] = OrderedDict()
        self.capacity = _descriptor_capacity() if capacity is None else capacity
        self.map_capacity = _mapping_capacity() if map_capacity is None else map_capacity
        self.descriptors = 0  # held by registered holders
        self.mappings = 0
        self.pinned = 0
        self.evictions = 0  # holders closed to make room (diagnostics, tests)

    def __repr__(self) -> str:
        return (f"DescriptorBudget(capacity={self.capacity}, map_capacity={self.map_capacity}, "
                f"descriptors={self.descriptors}, mappings={self.mappings}, pinned={self.pinned}, "
                f"holders={len(self._lru)})")

    # -- the hot path ---------------------------------------------------------------------

    def touch(self, holder) -> bool:
        """Mark ``holder`` as just used; False when it is not registered (never admitted, or
        evicted: it must open again)."""
        key = id(holder)
        with self._lock:
            entry = self._lru.get(key)
            if entry is None or entry[0]() is not holder:
                return False
            self._lru.move_to_end(key)
            entry[3] = threading.get_ident()
            return True

    # -- registering ------------------------------------------------------------------------

    def admit(self, holder, descriptors: int = 1, mappings: int = 0) -> None:
        """Make room for ``holder`` about to open ``descriptors`` and ``mappings`` (closing
        idle holders), then register it. If its opening fails, :meth:`forget` it."""
        key = id(holder)
        with self._lock:
            self._drop(key)  # already registered: counted anew
            self._make_room(descriptors, mappings, keep=key)
            ref = weakref.ref(holder, lambda ref, key=key: self._collected(key, ref))
            self._lru[key] = [ref, descriptors, mappings, threading.get_ident()]
            self.descriptors += descriptors
            self.mappings += mappings

    def admit_open(self, holder, descriptors: int, mappings: int, owner: int) -> None:
        """Count ``holder``, already open, as if it had been admitted (a budget taking over
        from another); no room is made."""
        key = id(holder)
        with self._lock:
            self._drop(key)
            ref = weakref.ref(holder, lambda ref, key=key: self._collected(key, ref))
            self._lru[key] = [ref, descriptors, mappings, owner]
            self.descriptors += descriptors
            self.mappings += mappings

    def forget(self, holder) -> None:
        """``holder`` closed what it held (or never opened it): no longer counted."""
        with self._lock:
            entry = self._lru.get(id(holder))
            if entry is not None and entry[0]() is holder:
                self._drop(id(holder))

    def _drop(self, key: int) -> list | None:
        entry = self._lru.pop(key, None)
        if entry is not None:
            self.descriptors -= entry[1]
            self.mappings -= entry[2]
        return entry

    def _collected(self, key: int, ref) -> None:
        # A holder was garbage-collected while registered: what it held went with it.
        with self._lock:
            entry = self._lru.get(key)
            if entry is not None and entry[0] is ref:
                self._drop(key)

    def pin(self, descriptors: int = 1) -> None:
        """Count descriptors held for good (a log directory's ``.lock``); idle holders are
        closed to keep the total within the capacity."""
        with self._lock:
            self.pinned += descriptors
            self._make_room(0, 0, keep=None)

    def unpin(self, descriptors: int = 1) -> None:
        with self._lock:
            self.pinned = max(0, self.pinned - descriptors)

    # -- limits -----------------------------------------------------------------------------

    def room(self, pinned: int = 0) -> int:
        """Descriptors left for holders once ``pinned`` more are pinned."""
        return self.capacity - self.pinned - pinned

    def require(self, pinned: int) -> None:
        """Raise :class:`~plog.engine.errors.ResourceLimitError` unless ``pinned`` more
        pinned descriptors (locks) leave the working set one writer needs."""
        if self.room(pinned) >= MIN_WORKING_SET:
            return
        from plog.engine.errors import ResourceLimitError

        soft = _soft_nofile()
        # What is not the holders' room: the headroom and descriptors in use (the capacity
        # was sized from them), and the pinned ones.
        needed = soft - self.room(pinned) + MIN_WORKING_SET
        locks = self.pinned + pinned
        raise ResourceLimitError(
            f"writing while holding the .lock of {locks} log director{'y' if locks == 1 else 'ies'} needs about "
            f"{needed} open files, and this process may open {soft} (ulimit -n); raise it with ulimit -n {needed}")

    # -- making room ----------------------------------------------------------------------

    def _make_room(self, descriptors: int, mappings: int, keep) -> None:
        over_fds = self.descriptors + descriptors + self.pinned - self.capacity
        over_maps = self.mappings + mappings - self.map_capacity
        if over_fds <= 0 and over_maps <= 0:
            return
        me = threading.get_ident()
        skipped = []
        while (over_fds > 0 or over_maps > 0) and self._lru:
            key, entry = self._lru.popitem(last=False)
            if key == keep or entry[3] != me:
                skipped.append((key, entry))
                continue
            if not self._evict(entry):
                skipped.append((key, entry))
                continue
            over_fds -= entry[1]
            over_maps -= entry[2]
        # What could not be closed keeps its place, oldest first.
        for key, entry in reversed(skipped):
            self._lru[key] = entry
            self._lru.move_to_end(key, last=False)

    def _evict(self, entry) -> bool:
        """Close the holder of ``entry`` (already out of the LRU); False if it could not be
        closed now (then it goes back)."""
        holder = entry[0]()
        done = True
        if holder is not None:
            try:
                done = holder._budget_evict()
            except OSError:
                done = True  # close(2) failed: the descriptor is gone all the same
        if done:
            self.descriptors -= entry[1]
            self.mappings -= entry[2]
            self.evictions += holder is not None
        return done

    def relieve(self, keep=None) -> bool:
        """The process ran out (EMFILE, ENFILE, ENOMEM from mmap): close the older half of
        this thread's holders (never ``keep``) and lower the capacity to what was held then,
        so the budget stays under what the process can really open. False when there was
        nothing to close."""
        keep = None if keep is None else id(keep)
        with self._lock:
            me = threading.get_ident()
            mine = [k for k, e in self._lru.items() if e[3] == me and k != keep]
            if not mine:
                return False
            held = self.descriptors + self.pinned
            closed = 0
            for key in mine[:max(1, len(mine) // 2)]:
                entry = self._lru.pop(key, None)
                if entry is None:
                    continue
                if self._evict(entry):
                    closed += 1
                else:
                    self._lru[key] = entry
            self.capacity = max(self.pinned + MIN_WORKING_SET, min(self.capacity, held - 1))
            return closed > 0

    def close_all(self) -> None:
        """Close every idle holder of this thread (tests, and a process about to fork)."""
        with self._lock:
            me = threading.get_ident()
            for key in [k for k, e in self._lru.items() if e[3] == me]:
                entry = self._lru.pop(key, None)
                if entry is not None and not self._evict(entry):
                    self._lru[key] = entry


_budget: DescriptorBudget | None = None
_budget_lock = threading.Lock()


def budget() -> DescriptorBudget:
    """The process's budget, sized from the limits at its first use."""
    b = _budget
    if b is None:
        b = _create()
    return b


def _create() -> DescriptorBudget:
    global _budget
    with _budget_lock:
        if _budget is None:
            _budget = DescriptorBudget()
        return _budget


def reset_budget(capacity: int | None = None, map_capacity: int | None = None) -> DescriptorBudget:
    """Close this thread's idle holders and size a new budget (from the limits now, or the
    given capacities): for a process that changed its ``RLIMIT_NOFILE``, and for tests.
    Holders still open stay open and are counted in the new budget."""
    global _budget
    with _budget_lock:
        old = _budget
        new = DescriptorBudget(capacity, map_capacity)
        if old is not None:
            old.close_all()
            with old._lock:
                new.pinned = old.pinned
                for key, (ref, descriptors, mappings, owner) in list(old._lru.items()):
                    holder = ref()
                    if holder is not None:
                        new.admit_open(holder, descriptors, mappings, owner)
                old._lru.clear()
        _budget = new
        return new


def _after_fork_in_child() -> None:
    # A lock held by another thread at fork() stays held forever in the child.
    b = _budget
    if b is not None:
        b._lock = threading.RLock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def open_fd(path: str | os.PathLike, flags: int, mode: int = 0o666, *, keep=None) -> int:
    """``os.open``; when the process is out of descriptors (EMFILE, ENFILE), idle holders
    are closed (never ``keep``) and the open is tried again, until it works or there is
    nothing left to close (then the error is raised, naming ``path``)."""
    while True:
        try:
            return os.open(path, flags, mode)
        except OSError as e:
            if e.errno not in _FD_EXHAUSTED or not budget().relieve(keep):
                raise


_REOPEN_MASK = ~(os.O_CREAT | os.O_EXCL | os.O_TRUNC)


class ReopenableFile:
    """A descriptor of ``path`` that the budget may close while it is idle: :attr:`fd` opens
    the file again (same flags, never creating or truncating) on the next use.

    The file is identified by device and inode at the first open; a reopen that finds another
    file at ``path`` (replaced by a rename) raises ``OSError(ESTALE)``, and a missing one
    ``FileNotFoundError``, both naming the path. A rename of the file by its owner must be
    told with :meth:`moved_to`. :attr:`stat` is the ``os.stat_result`` of the first open.
    Closed for good by :meth:`close` (idempotent); :attr:`fd` then raises ``ValueError``.
    """

    __slots__ = ("path", "stat", "_flags", "_fd", "_closed", "_syncing", "__weakref__")

    def __init__(self, path: str | os.PathLike, flags: int, mode: int = 0o666):
        self.path = os.fspath(path)
        self._flags = flags & _REOPEN_MASK
        self._closed = False
        self._fd = -1
        self._syncing = 0  # fsyncs running (fsync): the descriptor is not evicted meanwhile
        b = budget()
        b.admit(self, 1, 0)
        fd = -1
        try:
            fd = open_fd(self.path, flags, mode, keep=self)
            self.stat = os.fstat(fd)
        except BaseException:
            b.forget(self)
            if fd >= 0:
                os.close(fd)
            self._closed = True
            raise
        self._fd = fd

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("open" if self._fd >= 0 else "idle-closed")
        return f"ReopenableFile({self.path!r}, {state})"

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def fd(self) -> int:
        """The descriptor, reopened if the budget closed it. Valid until this thread opens
        another budgeted file or mapping: fetch it again for every system call."""
        fd = self._fd
        if fd >= 0 and budget().touch(self):
            return fd
        return self._reopen()

    def _reopen(self) -> int:
        if self._closed:
            raise ValueError(f"{self.path} is closed")
        if self._fd >= 0:  # open but not counted (a budget replaced by reset_budget): start over
            fd, self._fd = self._fd, -1
            os.close(fd)
        b = budget()
        b.admit(self, 1, 0)
        fd = -1
        try:
            fd = open_fd(self.path, self._flags, keep=self)
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != (self.stat.st_dev, self.stat.st_ino):
                raise OSError(errno.ESTALE, "replaced by another file since plog opened it", self.path)
        except BaseException:
            b.forget(self)
            if fd >= 0:
                os.close(fd)
            raise
        self._fd = fd
        return fd

    def fsync(self) -> None:
        """fsync the file. Safe on a thread beside one that opens other budgeted files (a
        writer's flush thread beside the next appends): while the call runs the budget does
        not close the descriptor (:meth:`_budget_evict` says "in use"), so the number is not
        closed, nor reused for another file, between fetching it and the system call."""
        self._syncing += 1
        try:
            os.fsync(self.fd)
        finally:
            self._syncing -= 1

    def _budget_evict(self) -> bool:
        if self._syncing:
            return False  # in use by an fsync on another thread (fsync)
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)
        return True

    def moved_to(self, path: str | os.PathLike) -> None:
        """The file was renamed (by its owner): reopen it at ``path`` from now on."""
        self.path = os.fspath(path)

    def close(self) -> None:
        """Close for good. Idempotent."""
        if self._closed:
            return
        self._closed = True
        budget().forget(self)
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)

    def __del__(self) -> None:
        # Dropped without close() (an abandoned reader): its descriptor goes with it, as a
        # file object's does.
        fd = getattr(self, "_fd", -1)
        if fd >= 0:
            self._fd = -1
            try:
                os.close(fd)
            except OSError:
                pass
