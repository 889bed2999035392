"""Kafka's ``AbstractIndex``: the mapped offset and time indexes a writer keeps per segment
(:mod:`~plog.engine.storage.offset_index`, :mod:`~plog.engine.storage.time_index`; the
transaction index is :mod:`~plog.engine.storage.transaction_index`, and read-only tools read
index files with :mod:`~plog.engine.storage.index_file` instead of mapping them).

What is on disk (byte layouts: :mod:`plog.formats.indexes`; facts: kafka-format.md §7):

    <base>.index       8-byte entries (offset - base, position), preallocated, mmapped
    <base>.timeindex   12-byte entries (timestamp, offset - base), preallocated, mmapped
    <base>.txnindex    34-byte AbortedTxn entries, append-only, never preallocated

Lifecycle of an offset or time index (Kafka's ``AbstractIndex`` and ``LazyIndex`` in one class):

1. **Construct**: nothing touches the disk. A log with thousands of segments builds thousands
   of index objects at load; only the ones that are read open and map their file (§7.5 item 1).
2. **First use** (any lookup, append, count, resize, flush, sanity check):
   * a missing file is created and set to ``max_index_size`` rounded down to the entry size
     (10485760 / 10485756 bytes by default) and ``entries = 0``;
   * an existing file is trusted as Kafka trusts it: ``entries = max_entries =
     floor(length / entry_size)``, zero-filled slots included (no scan). The segment calls
     ``resize(max_index_size)`` on the active segment to make room again (§7.5 items 2-4).
3. **Use**: lookups run the §7.6 warm-section binary search of :mod:`plog.formats.indexes`
   directly on the mmap, bounded by the tracked entry count. Appends write through the
   mmap too, except the first entry to touch a page the file may not yet have storage for:
   that one is written with ``pwrite`` (see "Full file systems" below).
4. **Trim** (roll, close, after recovery): the file is cut to ``entries * entry_size``, so
   inactive segments have exact-size indexes and a crash leaves only the active one padded.
5. **Close**: trim, unmap. The object goes back to state 1; a later use reopens the file
   and counts entries from its length again.

Between uses the process's descriptor budget (:mod:`plog.engine.storage.descriptor_budget`) may
*evict* a mapped index, least recently used first, when it needs room for other files: the
map (and its descriptor) is closed, and everything else is kept in memory: the entry count,
the length, the last entry, which pages have storage. The next use maps the file again and
goes on with those, so an evicted active index keeps its true entry count: its preallocated
zero slots never become entries, and nothing is trimmed or rewritten. A length that shrank
meanwhile (another process trimmed a file a read-only view maps) is mapped as it is now, the
count clamped to it. Counts and sizes (``entries``, ``is_full``, ``last_offset``...),
``resize``/trim and ``flush`` of an evicted index do not map it again (a flush syncs what
the old map wrote with ``fsync``: the pages stay dirty in the page cache after an unmap).

Read-only indexes (``writable=False``: a reader of a log directory a writer may be using)
map the file read-only, never create, resize, trim or write it, and raise
:class:`ReadOnlyIndexError` for mutations. A missing file raises ``FileNotFoundError`` on
first use, not at construction. A view that follows a live writer (``live_reader``, set
from construction: ``LogSegment(live_reader=True)``, a consumer's ``DataDir.open_reader``)
holds a ``pread`` copy of the entries before the zero-filled tail
(:func:`~plog.engine.storage.index_file.preallocated_prefix`) instead of a map, so a writer
trimming the file cannot fault it (:func:`_snapshot`).
Lookups on either kind run the search of :mod:`plog.formats.indexes`, as the pread reader does.

File descriptors: like Kafka (which closes its ``RandomAccessFile`` right after mapping),
the descriptor used to map is closed at once; Python's ``mmap`` keeps its own duplicate,
so an open index costs one descriptor and one mapping, both counted by the budget. A resize
reopens the file by path. A zero-length file cannot be mapped in Python; it is held as "no
map, 0 entries" and costs nothing.

Kafka's ``LazyIndex`` is folded into ``OffsetIndex`` and ``TimeIndex`` (they open on first
use), so there is no separate wrapper class.

None of these classes is thread-safe: the owner (a segment, under its log's lock) calls
them from one thread at a time; code that shares an index across threads locks around it.

Full file systems: a preallocated index is a sparse file. Storing into a page of the map
that has no block behind it makes the kernel allocate one at fault time, and when the file
system is full that fault is SIGBUS, which kills the process (tmpfs allocates even to read a
hole). So the first entry written into each page goes through ``pwrite``, which allocates the
page or fails with ENOSPC as an ``OSError`` naming the file; later entries in that page go
through the map (the page cache page is shared). Reads of slots that may be holes (the last
slot of a file opened with its zero tail, the sanity check's ends) use ``pread``, which reads
a hole as zeros without allocating it.

A mapping is only as stable as the file: if another process shrinks a mapped index (a live
Kafka broker trimming its active index at roll while plog reads it read-only), touching a
slot past the new end raises SIGBUS. Kafka's own readers share the broker's process and
lock; offline readers of a live log directory should expect to see the files change.
"""

from __future__ import annotations

import errno
import io
import mmap
import os
import threading
from pathlib import Path

from plog.formats import indexes as ix
from plog.formats.indexes import DEFAULT_MAX_INDEX_SIZE

from plog.engine.storage.descriptor_budget import budget, open_fd
from plog.engine.storage.index_file import preallocated_prefix
# Sanity checks raise plog.engine.errors.CorruptIndexError (the formats error, re-exported).
from plog.engine.errors import ReadOnlyIndexError

_PAGE = mmap.PAGESIZE
#: Held while an index is opened (``AbstractIndex._open_once``): opens are rare, one per
#: index and process, so one lock for all of them costs nothing.
_OPENING = threading.RLock()


def rename_if_exists(old: Path, new: Path) -> None:
    """``Utils.atomicMoveWithFallback`` as ``LazyIndex`` uses it: a missing source is fine."""
    try:
        os.replace(old, new)
    except FileNotFoundError:
        # The source may simply not exist yet (a lazy index never used); anything else
        # (a missing target directory) is a real error, as in Kafka.
        if old.exists():
            raise


def _snapshot(fd: int, length: int) -> bytes:
    """The first ``length`` bytes of a live writer's index, read with ``pread``: what a view
    that follows a live writer holds instead of a map. The writer trims its active index at
    roll and close, and may trim one with no entry to nothing; a map of even that first
    page then faults (SIGBUS, seen as a consumer process killed by signal 7) on the next
    read. A copy cannot fault; the writer only appends past it (a truncation's zeroed
    entries, which the copy still shows, point at positions the log read then finds gone)."""
    parts, got = [], 0
    while got < length:
        chunk = os.pread(fd, length - got, got)
        if not chunk:
            break  # cut meanwhile: the copy is what was there
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


class AbstractIndex:
    """Shared machinery of the mmapped offset and time indexes (Kafka's ``AbstractIndex``).

    Invariants while open:

    * ``0 <= entries <= max_entries == length // entry_size``;
    * the first ``entries`` slots are the valid entries, their keys strictly increasing
      for indexes this class wrote (Kafka trusts, and so searches, whatever a file holds);
    * bytes past ``entries * entry_size`` are unused: zeros for a fresh file, stale
      entries after a truncation (Kafka never zeroes them; a trim removes them).

    Not thread-safe, but for opening: a writer's flush thread may flush (and so load) an
    index beside the thread appending to it (:meth:`_open_once`). Subclasses define
    ``entry_size`` and keep their cached last entry in step through :meth:`_refresh_last`.
    """

    entry_size: int = 0
    _kind: str = "index"

    def __init__(
        self,
        path: str | os.PathLike,
        base_offset: int,
        max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
        writable: bool = True,
    ):
        self.path = Path(path)
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        self.writable = writable
        #: A read-only view that follows a live writer (consumers): see ``_open``.
        self.live_reader = False
        self._loaded = False
        self._mm: mmap.mmap | None = None
        self._length = 0
        self._entries = 0
        self._max_entries = 0
        #: Bytes from the start of the file whose pages are known to have storage (written
        #: by us through ``pwrite`` since the last open or shrink): the map may store there.
        self._backed = 0

    def __repr__(self) -> str:
        state = f"entries={self._entries}/{self._max_entries}" if self._loaded else "not loaded"
        return f"{type(self).__name__}({str(self.path)!r}, base_offset={self.base_offset}, {state})"

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- state that never opens the file ---------------------------------------------

    @property
    def exists(self) -> bool:
        """Whether the file is on disk (the index is not opened)."""
        return self.path.exists()

    @property
    def is_loaded(self) -> bool:
        """Whether the file was opened and its state is in memory (``LazyIndex`` loaded); the
        descriptor budget may have closed its map since (the next use maps it again)."""
        return self._loaded

    @property
    def _name(self) -> str:
        # Kafka's messages use file.getAbsolutePath().
        return os.path.abspath(self.path)

    # -- opening, mapping --------------------------------------------------------------

    def _ensure(self) -> None:
        """Loaded and mapped (a map is needed to read or store entries)."""
        if self._mm is not None and (type(self._mm) is bytes or budget().touch(self)):
            return  # (a live reader's copy is not counted by the budget: no map, no descriptor)
        if not self._loaded:
            self._open_once()
        elif self._length:
            self._remap()

    def _load(self) -> None:
        """Loaded: the counts and sizes are known (an evicted index is not mapped again)."""
        if not self._loaded:
            self._open_once()

    def _open_once(self) -> None:
        """:meth:`_open`, unless another thread has opened the index meanwhile. A writer's
        flush thread flushes (so loads) a new segment's index while the appending thread
        loads it for its first entry; of two opens at once, the second found the file the
        first had just created and counted every preallocated slot as an entry: a full
        index, and the next append failed. Kafka's ``LazyIndex`` opens under a lock too."""
        with _OPENING:
            if not self._loaded:
                self._open()

    def _open(self) -> None:
        size = self.entry_size
        # 1. Open, creating the file if missing (writable only). O_EXCL tells us whether we
        #    created it, as Kafka's createNewFile() does: a new file is preallocated and
        #    empty, an existing one is trusted by its length.
        created = False
        if self.writable:
            try:
                fd = open_fd(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o666)
                created = True
            except FileExistsError:
                fd = open_fd(self.path, os.O_RDWR)
        else:
            fd = open_fd(self.path, os.O_RDONLY)
        try:
            if created:
                # 2. Preallocate: max_index_size rounded down to the entry size.
                try:
                    length = ix.preallocated_length(self.max_index_size, size)
                except ValueError:
                    os.unlink(self.path)  # Kafka leaves an empty file; we leave nothing
                    raise
                os.ftruncate(fd, length)
            else:
                length = os.fstat(fd).st_size
                if not self.writable and self.live_reader:
                    # A live writer's active index is preallocated and trimmed when it rolls
                    # or closes: a page mapped past the trimmed end would fault (SIGBUS) on
                    # the next read. Map only up to the zero-filled tail, which trimming never
                    # cuts into. (Offline tools keep Kafka's count of every slot.)
                    length = preallocated_prefix(fd, length, size)
            # 3. Map. Our descriptor is closed right after; mmap holds its own duplicate.
            mm = self._map(fd, length)
        finally:
            os.close(fd)
        self._length = length
        self._max_entries = length // size
        # 4. Count: 0 for a new file, every whole slot for an existing one (§7.5 item 3).
        self._entries = 0 if created else self._max_entries
        self._flushed_entries = None
        self._backed = 0
        # The map after the counts, the loaded flag last: a thread that finds either set
        # (``_ensure``'s and ``_load``'s checks, without the lock) finds the counts whole.
        self._mm = mm
        self._refresh_last()
        self._loaded = True

    def _remap(self) -> None:
        """Map an evicted index again, keeping its state (module docstring). The file is
        mapped at the length this object knows, or shorter if it shrank meanwhile."""
        size = self.entry_size
        if self._mm is not None:  # mapped but not counted (a budget replaced): map anew
            self._unmap()
        fd = open_fd(self.path, os.O_RDWR if self.writable else os.O_RDONLY)
        try:
            length = os.fstat(fd).st_size
            if not self.writable and self.live_reader:
                length = preallocated_prefix(fd, length, size)
            if length >= self._length:
                length = self._length
            self._mm = self._map(fd, length)
        finally:
            os.close(fd)
        if length < self._length:
            # Cut under us (a read-only view of a live writer's index): what is gone is gone.
            self._length = length
            self._max_entries = length // size
            self._backed = min(self._backed, length // _PAGE * _PAGE)
            if self._entries > self._max_entries:
                self._entries = self._max_entries
                self._refresh_last()

    def _map(self, fd: int, length: int) -> mmap.mmap | None:
        """Map ``length`` bytes of ``fd``, counted by the descriptor budget (room is made
        first; when the kernel refuses a map or a descriptor anyway, idle holders are closed
        and the map is tried again)."""
        if length == 0:
            return None  # mmap cannot map an empty file; an empty index needs no map
        if not self.writable and self.live_reader:
            return _snapshot(fd, length)
        access = mmap.ACCESS_WRITE if self.writable else mmap.ACCESS_READ
        b = budget()
        b.admit(self, 1, 1)
        while True:
            try:
                return mmap.mmap(fd, length, access=access)
            except OSError as e:
                # ENOMEM: vm.max_map_count reached; EMFILE/ENFILE: no descriptor for mmap's dup.
                if e.errno not in (errno.ENOMEM, errno.EMFILE, errno.ENFILE) or not b.relieve(keep=self):
                    b.forget(self)
                    raise
            except BaseException:
                b.forget(self)
                raise

    def _unmap(self) -> None:
        if self._mm is not None:
            budget().forget(self)
            if isinstance(self._mm, mmap.mmap):
                self._mm.close()
            self._mm = None

    def _budget_evict(self) -> bool:
        """Close the map for the descriptor budget, keeping the state (module docstring)."""
        mm = self._mm
        if mm is not None:
            try:
                if isinstance(mm, mmap.mmap):
                    mm.close()
            except BufferError:
                return False  # a caller still holds a view of it: in use
            self._mm = None
        return True

    def _forget(self) -> None:
        """Back to the unloaded state: the next use reopens the file from disk."""
        self._unmap()
        self._loaded = False
        self._length = self._entries = self._max_entries = self._backed = 0

    @property
    def _buf(self):
        return self._mm if self._mm is not None else b""

    def _read_slots(self, first: int, count: int) -> bytes:
        """Slots ``first .. first+count-1`` read with ``pread`` rather than through the map:
        they may be holes of a preallocated file (see the module docstring)."""
        size = self.entry_size
        fd = open_fd(self.path, os.O_RDONLY, keep=self)
        try:
            return os.pread(fd, count * size, first * size)
        finally:
            os.close(fd)

    def _store(self, pos: int, entry: bytes) -> None:
        """Write one entry at byte ``pos`` of a page that may have no storage yet, with
        ``pwrite`` of the whole page(s) it falls in: that allocates every block of those pages
        or fails with ENOSPC, raised as an ``OSError`` naming the file, where a store through
        the map would be SIGBUS. The rest of the page is read with ``pread`` first (a hole
        reads as zeros without being allocated), so bytes past the entries stay as they were.
        Afterwards the map may store into those pages."""
        end = pos + len(entry)
        lo = pos // _PAGE * _PAGE
        hi = min(-(-end // _PAGE) * _PAGE, self._length)
        try:
            fd = open_fd(self.path, os.O_RDWR, keep=self)
            try:
                page = bytearray(os.pread(fd, hi - lo, lo))
                if len(page) < hi - lo:  # the file is shorter than we mapped: someone cut it
                    raise OSError(errno.EIO, f"index file shrank to {lo + len(page)} bytes under us")
                page[pos - lo:end - lo] = entry
                view = memoryview(page)
                at = lo
                while view:
                    written = os.pwrite(fd, view, at)
                    view, at = view[written:], at + written
            finally:
                os.close(fd)
        except OSError as e:
            raise OSError(e.errno, e.strerror, self._name) from None
        self._backed = max(self._backed, hi)

    def _require_writable(self, action: str) -> None:
        if not self.writable:
            raise ReadOnlyIndexError(f"Cannot {action} {self._kind} {self._name}: it is opened read-only")

    def _refresh_last(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    # -- counts ------------------------------------------------------------------------

    @property
    def entries(self) -> int:
        """Number of valid entries."""
        self._load()
        return self._entries

    @property
    def max_entries(self) -> int:
        """Slots in the file as currently sized (``length // entry_size``)."""
        self._load()
        return self._max_entries

    @property
    def length(self) -> int:
        """The file length as mapped (Kafka's ``length()``), not the bytes in use."""
        self._load()
        return self._length

    @property
    def size_in_bytes(self) -> int:
        """Bytes in use: ``entries * entry_size`` (``sizeInBytes``)."""
        self._load()
        return self._entries * self.entry_size

    def is_full(self) -> bool:
        """No free slot: ``entries >= max_entries``."""
        self._load()
        return self._entries >= self._max_entries

    # -- resizing, truncation ----------------------------------------------------------

    def resize(self, new_size: int) -> bool:
        """Set the file length to ``new_size`` rounded down to the entry size.

        Returns False (and does nothing) when the length is already that. Entries are
        kept, clamped to the new capacity. Used to trim an index (roll, close) and to give
        the active segment its preallocated room back (load, truncation).
        """
        if new_size < 0:
            raise ValueError(f"Invalid index size {new_size} for {self._name}")
        self._load()
        size = self.entry_size
        rounded = size * (new_size // size)
        if rounded == self._length:
            return False
        self._require_writable("resize")
        # Kafka's resize: reopen by path (our descriptor went with the first map), unmap,
        # set the length, map again. An index the budget evicted stays unmapped (the next
        # use maps it). On a failure after the unmap the index is forgotten, so the next use
        # reopens whatever the disk holds.
        mapped = self._mm is not None or self._length == 0  # (an empty file has no map to keep)
        fd = open_fd(self.path, os.O_RDWR, keep=self)
        try:
            self._unmap()
            try:
                os.ftruncate(fd, rounded)
                if mapped:
                    self._mm = self._map(fd, rounded)
            except BaseException:
                self._forget()
                raise
        finally:
            os.close(fd)
        self._length = rounded
        self._max_entries = rounded // size
        # Cutting the file frees the pages past the cut; growing it adds holes.
        self._backed = min(self._backed, rounded // _PAGE * _PAGE)
        self._flushed_entries = None  # a new map: the next flush syncs all of it
        if self._entries > self._max_entries:
            self._entries = self._max_entries
        self._refresh_last()
        return True

    def trim_to_valid_size(self) -> None:
        """Cut the file to ``entries * entry_size`` (``trimToValidSize``)."""
        self._load()
        self.resize(self._entries * self.entry_size)

    def _truncate_to_entries(self, entries: int) -> None:
        # The bytes past the new count stay as they are (Kafka only moves its position);
        # a trim or the next appends overwrite them.
        self._entries = entries
        self._refresh_last()

    def truncate(self) -> None:
        """Remove every entry; the file keeps its length."""
        self._ensure()
        self._require_writable("truncate")
        self._truncate_to_entries(0)

    def reset(self) -> None:
        """Remove every entry and resize the file to ``max_index_size`` (used by recovery)."""
        self.truncate()
        self.resize(self.max_index_size)

    def append_entries(self, packed: bytes) -> None:
        """Append whole entries already packed as the file holds them, in one write (segment
        recovery's native walk, engine/storage/recovery_walk.py, which applied the append
        rules entry by entry: this only checks that they fit). The write is the ``pwrite``
        of ``_store``, so a full file system is an ``OSError`` naming the file."""
        self._ensure()
        self._require_writable("append to")
        size = self.entry_size
        count, rest = divmod(len(packed), size)
        if rest or self._entries + count > self._max_entries:
            raise ValueError(f"{len(packed)} bytes are not whole entries that fit {self._name}")
        if count:
            self._store(self._entries * size, packed)
            self._entries += count
            self._refresh_last()

    def _truncate_to(self, offset: int, key: ix.IndexSearchKey) -> None:
        self._ensure()
        self._require_writable("truncate")
        # §7.5 item 9: keep the entries below ``offset``, found by the same search as lookups.
        kept = ix.truncate_slot_count(self._buf, self._entries, self.base_offset, offset, key)
        self._truncate_to_entries(kept)

    # -- durability, checks ------------------------------------------------------------

    def flush(self) -> None:
        """msync the map, so appended entries are durable. A read-only index has nothing
        to flush and is not opened."""
        if not self.writable:
            return
        self._load()
        if self._length == 0:
            return
        # msync only the pages holding entries appended since the last flush: the map is
        # preallocated (10 MiB by default) and a whole-map msync per produce round costs
        # milliseconds for nothing. After a truncation, everything is synced. Entries written
        # with pwrite (the first of each page) are covered too: msync(MS_SYNC) of a shared
        # file mapping syncs the file's dirty pages in that range, however they were dirtied.
        size = self.entry_size
        done = getattr(self, "_flushed_entries", None)
        entries = self._entries
        if done is not None and entries == done:
            return
        # One read of the map: on a writer's flush thread, the thread appending beside it may
        # evict it meanwhile (closed, or None), and then the fsync below does the same work.
        mm = self._mm
        synced = False
        if mm is not None:
            try:
                if done is None or entries < done:
                    mm.flush()
                else:
                    start = (done * size) // mmap.PAGESIZE * mmap.PAGESIZE
                    mm.flush(start, entries * size - start)
                synced = True
            except ValueError:
                pass  # closed by an eviction since it was read: as evicted
        if not synced:
            # Evicted: the entries the old map stored are dirty pages of the file, which an
            # fsync writes as an msync of the map would have (it is one on Linux).
            fd = open_fd(self.path, os.O_RDWR, keep=self)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self._flushed_entries = entries

    def _sanity_ends(self, length: int, first: bytes | None, last: bytes | None,
                     name: str) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def _slot(self, n: int) -> bytes:
        # Within the pages we wrote, the map; elsewhere pread (the slot may be a hole).
        size = self.entry_size
        if (n + 1) * size <= self._backed and self._mm is not None:
            return bytes(self._mm[n * size:(n + 1) * size])
        return self._read_slots(n, 1)

    def sanity_check(self) -> None:
        """Kafka's ``sanityCheck``; raises :class:`CorruptIndexError` naming the file.

        Kafka checks the *tracked* entries (last entry against the base offset, and for the
        time index against the first timestamp) and then the file length. Right after
        opening, the tracked count is every whole slot of the file, so a crashed active
        index with a zero tail is judged on that tail, exactly as Kafka judges it. Only the
        first and last tracked slots are read.
        """
        self._ensure()
        size = self.entry_size
        name = self._name
        n = self._entries
        first = self._slot(0) if n else None
        last = self._slot(n - 1) if n else None
        if n == self._length // size:
            self._sanity_ends(self._length, first, last, name)
            return
        # The tracked count differs from the file's slots (appends to or truncation of a
        # preallocated file): the entry rules see the tracked entries only...
        self._sanity_ends(n * size, first, last, name)
        if self._length % size:
            # ...and the length rule sees the real length, for Kafka's exact message.
            self._sanity_ends(self._length, first, last, name)

    # -- closing, files ----------------------------------------------------------------

    def close_handler(self) -> None:
        """Unmap without trimming (``closeHandler``); a later use reopens the file."""
        self._forget()

    def close(self) -> None:
        """Trim to the valid entries (writable only) and unmap. Idempotent; an index that
        was never used stays untouched (``LazyIndex.close``)."""
        if not self._loaded:
            return
        try:
            if self.writable:
                self.trim_to_valid_size()
        finally:
            self._forget()

    def delete_if_exists(self) -> bool:
        """Unmap and delete the file; True if a file was deleted."""
        self._forget()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            return False
        return True

    def rename_to(self, new_path: str | os.PathLike) -> None:
        """Rename the file (if it exists) and use ``new_path`` from now on. A mapped index
        keeps working: the map follows the file, not its name."""
        new = Path(new_path)
        try:
            rename_if_exists(self.path, new)
        finally:
            self.path = new

    def update_parent_dir(self, new_dir: str | os.PathLike) -> None:
        """Point at the same file name in ``new_dir`` (after the partition directory itself
        was renamed); nothing is moved."""
        self.path = Path(new_dir) / self.path.name
