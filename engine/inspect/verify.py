"""``plog verify``: check Kafka log files like a linter, without modifying anything.

Entry points (each yields :class:`Finding` values as soon as they are found):

* :func:`verify_paths` / :func:`verify_path`: any mix of segment files, partition folders,
  log directories and data directories, in order, optionally over ``jobs`` processes;
* :func:`verify_partition`: one partition folder (a :class:`~plog.engine.storage.discovery.PartitionInfo`);
* :func:`verify_segment`: one segment (its ``.log`` with ``.index``/``.timeindex``/``.txnindex``);
* :func:`verify_log_dir`: the files of a log directory itself (checkpoints, ``meta.properties``,
  the clean-shutdown marker) and the per-partition :class:`PartitionContext` they imply.

Nothing is written, no ``.lock`` is taken, and no file is mapped: every file is read with
``pread`` into reused buffers (a broker truncating a segment under us gives a short read,
not a SIGBUS), so memory stays at one log chunk (``chunk_size``, about 1 MiB) plus one index
chunk (1 MiB) whatever the file sizes. A batch longer than the chunk is CRC-checked in
pieces; a hostile length field never sizes an allocation.

The checks (``Finding.check``), with the severity they normally have. Warnings are
conditions a broker handles by itself; they do not make ``plog verify`` fail unless
``--strict``.

================================  ========  =============================================================
check                             severity  meaning
================================  ========  =============================================================
``crc``                           error     a whole batch whose CRC-32C (v2) or CRC-32 (v0/v1) is wrong;
                                            the entries around it are intact
``framing``                       error     bytes in the middle of a ``.log`` that are not batches (bad
                                            size field or magic, garbage); the walk resynchronises on the
                                            next valid batch and reports the skipped range once
``torn-tail``                     error     the file ends in bytes that are not whole valid batches and
                                            nothing valid follows (an incomplete last batch, a bad last
                                            batch, garbage); *warning* for zeros at the end of the active
                                            segment (``log.preallocate=true`` after a crash)
``offsets``                       error     batch offsets not increasing, below the segment's base offset,
                                            reaching the next segment's base offset, or more than 2^31-1
                                            above the base offset
``segment-size``                  error     a ``.log`` longer than 2^31-1 bytes (Kafka refuses to open it)
``index-missing``                 warning   no ``.index`` (Kafka rebuilds it on load)
``timeindex-missing``             warning   no ``.timeindex`` (Kafka creates it empty on load)
``index-preallocated``            warning   the zero-filled preallocated tail of an index (an untrimmed
                                            index of a segment that was active when the broker stopped)
``index-sanity``                  error     Kafka's ``sanityCheck()`` fails (length not a multiple of the
                                            entry size, last offset below the base offset, last timestamp
                                            below the first, txn entry below the base offset)
``index-entry``                   error     an ``.index`` entry not at a batch boundary, past the end of the
                                            log, not increasing, or whose offset is not among the offsets of
                                            the batches from its position to the next entry's
``timeindex-order``               error     time index timestamps not strictly increasing, or offsets
                                            decreasing
``timeindex-entry``               error     a time index offset that is in no batch of the segment
``timeindex-timestamp``           error     a time index timestamp that is not the max timestamp of the
                                            batch holding its offset
``txnindex-entry``                error     a ``.txnindex`` entry with a bad version, first offset above
                                            last offset, last offsets not increasing, or past the segment
``txnindex-partial``              warning   a trailing partial ``.txnindex`` entry (Kafka ignores it)
``orphan-index``                  warning   an index file without its ``.log``: that segment's data is missing
                                            (Kafka deletes the orphan on load). When it is the last segment,
                                            the checkpoint and epoch checks against the log end offset are
                                            warnings too (the files end early)
``in-flight-file``                warning   a ``.deleted``/``.cleaned``/``.swap`` file (Kafka completes or
                                            removes the operation on load)
``snapshot-crc``                  error     a producer snapshot whose CRC-32C is wrong
``snapshot-format``               error     a producer snapshot that fails its schema or version
``snapshot-entry``                error     a snapshot entry whose last offset or open transaction is at or
                                            after the snapshot's offset
``snapshot-offset``               warning   a snapshot above the log end offset (Kafka deletes it on load)
``leader-epoch-checkpoint``       error     a malformed ``leader-epoch-checkpoint``, epochs not increasing,
                                            start offsets decreasing or above the log end offset (a warning
                                            after an unclean shutdown, where the broker truncates them, or
                                            when the last segment's ``.log`` is missing)
``partition-metadata``            error     a malformed ``partition.metadata``
``partition-metadata-missing``    error     no ``partition.metadata`` in a KRaft log directory (the broker
                                            takes the log for a stray one and removes it); *warning* in a
                                            ZooKeeper-mode one whose other partitions have one (the broker
                                            writes it)
``partition-missing``             error     plog's ``cluster.json`` assigns a partition to a broker whose
                                            log directory has no folder for it
``not-a-segment``                 error     a ``.log`` with no valid batch anywhere and no entry header at its
                                            start (random or foreign data, not a torn write)
``no-segments``                   warning   a partition folder without any ``.log`` (Kafka creates one)
``meta-properties``               error     a malformed ``meta.properties``
``meta-properties-missing``       warning   a log directory without ``meta.properties``
``clean-shutdown-missing``        warning   no ``.kafka_cleanshutdown`` (the broker will recover from the
                                            recovery point on its next start)
``clean-shutdown``                warning   a malformed clean-shutdown marker (Kafka treats it as clean)
``checkpoint-format``             error     a malformed offset checkpoint file
``checkpoint-recovery-point``     error     a recovery point above the log end offset (*warning* below the
                                            first segment's base offset)
``checkpoint-log-start-offset``   error     a log start offset above the log end offset (the broker would
                                            delete every segment; *warning* below the first segment)
``checkpoint-high-watermark``     warning   a high watermark above the log end offset
``checkpoint-cleaner-offset``     warning   a cleaner checkpoint above the log end offset
``checkpoint-partition-missing``  warning   a checkpoint lists a partition that has no folder here
``io``                            error     a file that could not be read (*warning* when it vanished,
                                            e.g. deleted by a running broker's retention)
================================  ========  =============================================================

A damage finding (an error of the ``.log`` checks or the index checks) of a segment whose log
directory is known ends with what a broker's start-up does about it, by the loader's own rule
(:func:`~plog.engine.storage.loader.startup_recovery`, which ``plog recover`` plans with): it truncates
(or rebuilds the index of) a segment it revalidates, and trusts the others as they are (below
the recovery point, or every segment after a clean shutdown), where ``plog recover --all``
(``--salvage``) repairs it. ``plog recover`` names the same damage as left untouched.

Positions are byte positions in the file named by ``Finding.path`` (for text files, the
start of the offending line); ``Finding.offset`` is the Kafka offset concerned, when known.

Speed. The ``.log`` walk works on batch headers only: one ``struct`` unpack of the fields
it needs and one ``crc32c`` call on a memoryview slice of the chunk per batch, with the
offset and time index entries merged in as the walk passes their positions/offsets. Every
batch that is clean, in order and whose index entries agree is handled by a tight loop
(:meth:`_LogWalk._hot`); anything else falls through to the general per-batch code
(:meth:`_LogWalk._step`), which is the reference behaviour. Records are never decoded
(v0/v1 compressed wrappers are, when a time index entry needs their max timestamp).
"""

from __future__ import annotations

import bisect
import os
import re
import struct
import zlib
from array import array
from collections import deque
from dataclasses import dataclass, fields
from typing import Callable, Iterable, Iterator, NamedTuple

from crc32c import crc32c

from plog.formats.checkpoints import (
    parse_clean_shutdown,
    parse_leader_epoch_checkpoint,
    parse_meta_properties,
    parse_offset_checkpoint,
    parse_partition_metadata,
)
from plog.formats.errors import CorruptIndexError, FormatError
from plog.formats.indexes import (
    OFFSET_INDEX_ENTRY_SIZE,
    TIME_INDEX_ENTRY_SIZE,
    TXN_INDEX_ENTRY_SIZE,
    iter_txn_entries,
    offset_entry_columns,
    time_entry_columns,
)
from plog.formats.producer_snapshot import ENTRIES_OFFSET, ENTRY_SIZE, decode_snapshot
from plog.formats.record_batch import HEADER

from plog.engine.errors import EngineError
from plog.engine.storage.discovery import (
    LOG_DIR_FILES,
    LogDirInfo,
    NotAKafkaPathError,
    PartitionInfo,
    SegmentFiles,
    classify,
    log_dirs,
    scan_partition,
    segment_base_offset,
)
from plog.engine.storage.batch_resync import EntryRules, all_zero, find_next_entry, stream_crc
from plog.engine.storage.index_file import IndexFile
from plog.engine.storage.file_names import (
    BOOTSTRAP_CHECKPOINT,
    CLEAN_SHUTDOWN,
    CLEANER_OFFSET_CHECKPOINT,
    INDEX_FILE_SUFFIX,
    INDEX_FILE_SUFFIXES,
    LEADER_EPOCH_CHECKPOINT,
    LOG_FILE_SUFFIX,
    LOG_START_OFFSET_CHECKPOINT,
    META_PROPERTIES,
    PARTITION_METADATA,
    PRODUCER_SNAPSHOT_FILE_SUFFIX,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    TIME_INDEX_FILE_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
    file_name,
    is_kraft_snapshot_file,
    partition_dir_name,
    sibling_file,
)

ERROR = "error"
WARNING = "warning"

INT32_MAX = (1 << 31) - 1
_INF = 1 << 80  # above every offset, position and timestamp a file can hold
# Appended to each in-memory chunk of index entries: a position no batch has, and a
# relative offset / timestamp below every real one, so the hot loop stops there and the
# general code loads the next chunk.
_SENTINEL_POS = -1
_SENTINEL_REL = -(1 << 31)
_SENTINEL_TS = -(1 << 63)
_NO_PENDING = -_INF

#: 1 MiB + 64 KiB: a batch of Kafka's default max.message.bytes (1048588) fits in one read,
#: and the chunk stays in cache between the read's copy and the CRC pass (measured against
#: 512 KiB-8 MiB chunks: 2 MiB is ~10% slower per byte, 4 MiB ~20%, 8 MiB ~30%).
DEFAULT_CHUNK_SIZE = (1 << 20) + (64 << 10)
MIN_CHUNK_SIZE = 64 << 10
INDEX_CHUNK_BYTES = 1 << 20
#: Text files (checkpoints, metadata) and snapshots larger than this are not parsed.
MAX_TEXT_FILE = 64 << 20
MAX_SNAPSHOT_FILE = 64 << 20
#: v0/v1 compressed wrappers larger than this are not decompressed for a timestamp check.
MAX_LEGACY_DECODE = 64 << 20

V2_HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12
MIN_ENTRY_SIZE = 14  # RECORD_OVERHEAD_V0: the smallest size field any entry may have
MIN_V2_SIZE = V2_HEADER_SIZE - LOG_OVERHEAD  # 49
HEADER_UP_TO_MAGIC = 17
V2_CRC_START = 21
LEGACY_CRC_START = 16

# baseOffset, batchLength, [leader epoch], magic, crc, [attributes], lastOffsetDelta,
# [baseTimestamp], maxTimestamp: what the hot loop needs of a v2 header, in one unpack.
_HOT = struct.Struct(">qi4xbI2xi8xq")
_ENTRY_HEAD = struct.Struct(">qi")
_LEGACY_HEAD = struct.Struct(">qiIbb")
_LEGACY_TS = struct.Struct(">q")


# -- values --------------------------------------------------------------------------------


class Finding(NamedTuple):
    """One problem (or warning) in one file."""

    severity: str  # "error" or "warning"
    check: str  # see the module docstring
    path: str
    position: int | None  # byte position in ``path``
    offset: int | None  # Kafka offset concerned, when known
    message: str

    def format_text(self) -> str:
        """``path:position: severity[check]: message`` (linter style)."""
        where = self.path if self.position is None else f"{self.path}:{self.position}"
        return f"{where}: {self.severity}[{self.check}]: {self.message}"

    def to_dict(self) -> dict:
        return {"severity": self.severity, "check": self.check, "path": self.path,
                "position": self.position, "offset": self.offset, "message": self.message}


@dataclass(frozen=True)
class VerifyOptions:
    chunk_size: int = DEFAULT_CHUNK_SIZE  # bytes of .log read at a time (one reused buffer)
    max_findings_per_check: int = 100  # per file and check; the rest are counted; 0 = no limit


@dataclass
class VerifyStats:
    """What was checked and found. ``errors``/``warnings`` count every finding, shown or not."""

    log_dirs: int = 0
    partitions: int = 0
    segments: int = 0
    files: int = 0
    bytes: int = 0
    batches: int = 0
    errors: int = 0
    warnings: int = 0

    def add(self, other: "VerifyStats") -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


class CheckpointMark(NamedTuple):
    """An offset read from a checkpoint file, and where (for the finding's position)."""

    offset: int
    path: str
    position: int


@dataclass(frozen=True)
class PartitionContext:
    """What the log directory says about one partition (its checkpoint entries, ...)."""

    recovery_point: CheckpointMark | None = None
    log_start_offset: CheckpointMark | None = None
    high_watermark: CheckpointMark | None = None
    cleaner_offset: CheckpointMark | None = None
    had_clean_shutdown: bool | None = None  # None: unknown (no log directory around it)
    expect_partition_metadata: bool = False
    kraft: bool = False  # meta.properties version 1: a KRaft broker's log directory


Progress = Callable[[int], None]


# -- findings plumbing -----------------------------------------------------------------------


class _Reporter:
    """Counts every finding in ``stats`` and keeps at most ``cap`` per (file, check)."""

    def __init__(self, stats: VerifyStats, cap: int):
        self.stats = stats
        self.cap = cap if cap > 0 else _INF
        self.counts: dict = {}
        self.out: list[Finding] = []
        #: While a segment is checked: what a broker's start-up does about its damage
        #: (:class:`_Repair`), said at the end of each damage finding; None: nothing is said.
        self.repair: _Repair | None = None

    def __call__(self, severity: str, check: str, path: str, position: int | None, offset: int | None,
                 message: str) -> None:
        if severity == ERROR:
            self.stats.errors += 1
            if self.repair is not None:
                message += self.repair.note(check)
        else:
            self.stats.warnings += 1
        key = (path, check, severity)
        count = self.counts.get(key, 0) + 1
        self.counts[key] = count
        if count <= self.cap:
            self.out.append(Finding(severity, check, path, position, offset, message))

    def take(self) -> list[Finding]:
        out, self.out = self.out, []
        return out

    def overflow(self) -> list[Finding]:
        """One summary finding per (file, check) that went over the cap (not counted again)."""
        out = []
        for (path, check, severity), count in self.counts.items():
            if count > self.cap:
                out.append(Finding(severity, check, path, None, None,
                                   f"{count - self.cap} more {check} {severity}s in this file are not shown "
                                   f"({count} in all)"))
        self.counts.clear()
        return out


#: Damage a truncation of the .log repairs, and damage a rebuild of the indexes repairs.
_LOG_DAMAGE = frozenset(("crc", "framing", "torn-tail", "not-a-segment", "offsets"))
_INDEX_DAMAGE = frozenset(("index-entry", "index-sanity", "timeindex-order", "timeindex-entry",
                           "timeindex-timestamp", "txnindex-entry"))


class _Repair(NamedTuple):
    """Whether a broker's start-up recovers one segment (``loader.startup_recovery``, the
    rule ``plog recover`` plans with), why not, and how many segments follow it."""

    at_startup: bool
    why_not: str
    later: int

    def note(self, check: str) -> str:
        """What a broker, and ``plog recover``, do about damage of this kind, as a clause
        appended to the finding's message ("" for checks recovery does not repair)."""
        if check in _INDEX_DAMAGE:
            if self.at_startup:
                return "; a broker's start-up recovery rebuilds this index"
            return f"; a broker would not rebuild this index at start-up ({self.why_not}): plog recover --all does"
        if check not in _LOG_DAMAGE:
            return ""
        if not self.at_startup:
            return (f"; a broker would not repair it at start-up ({self.why_not}): plog recover --all --salvage "
                    "quarantines the damaged bytes and keeps the rest (--all alone truncates the log here)")
        if check == "offsets":
            return ("; a broker's start-up recovery checks offsets only where it writes index entries and may keep "
                    "it: plog recover --salvage quarantines it")
        later = (f" and deletes the {self.later} later segment{'s' * (self.later != 1)}" if self.later else "")
        salvage = ("; plog recover --salvage keeps the valid batches after it" if check != "torn-tail" or self.later
                   else "")
        return f"; a broker's start-up recovery truncates the segment here{later}{salvage}"


def _io_finding(rep: _Reporter, path: str, e: OSError, what: str = "read") -> None:
    if isinstance(e, FileNotFoundError):
        rep(WARNING, "io", path, None, None, f"the file vanished while being verified ({what})")
    else:
        rep(ERROR, "io", path, None, None, f"cannot {what} the file: {e.strerror or e}")


# -- index files -----------------------------------------------------------------------------


def _index_chunk(index: IndexFile, slot: int) -> tuple[int, array, array]:
    """Up to ``INDEX_CHUNK_BYTES`` of the index's entries from ``slot`` on (its ``entries``
    are those before a zero-filled tail): ``(count, first, second)`` where the two arrays
    hold positions and relative offsets (offset index) or relative offsets and timestamps
    (time index), each followed by one sentinel."""
    data = next(index.chunks(slot, chunk_bytes=INDEX_CHUNK_BYTES), (slot, b""))[1]
    k = len(data) // index.entry_size
    if index.entry_size == OFFSET_INDEX_ENTRY_SIZE:
        second, first = offset_entry_columns(data)  # relative offsets, positions
        first.append(_SENTINEL_POS)
        second.append(0)
    else:
        second, first = time_entry_columns(data)  # timestamps, relative offsets
        first.append(_SENTINEL_REL)
        second.append(_SENTINEL_TS)
    return k, first, second


def _open_index(path: str, kind: str, seg_base: int, is_last: bool, rep: _Reporter,
                stats: VerifyStats) -> IndexFile | None:
    """Open an offset (``kind="offset"``) or time index and run the whole-file checks:
    Kafka's ``sanityCheck()`` (on the whole file, zero tail included) and the zero-filled
    preallocated tail. The index returned counts the entries before that tail."""
    size = OFFSET_INDEX_ENTRY_SIZE if kind == "offset" else TIME_INDEX_ENTRY_SIZE
    try:
        index = IndexFile(path, size, seg_base, trim_zero_tail=False, missing_ok=False)
    except OSError as e:
        _io_finding(rep, path, e, "open")
        return None
    try:
        length, entries = index.file_length, index.slots
        stats.files += 1
        stats.bytes += length
        problems = index.sanity_problems(path)
        for p in problems:
            if p.rule == "length":
                rep(ERROR, "index-sanity", path, entries * size, None, p.message)
        first, last = index.first_and_last()
        effective = index.trailing_zero_start() if last is not None else 0
        tail = entries - effective if last is not None else 0
        kafka_sanity_fails = None
        for p in problems:
            if p.rule == "timestamps":
                kafka_sanity_fails = p.message
                if tail:
                    continue
            if p.rule != "length":
                rep(ERROR, "index-sanity", path, (entries - 1) * size, p.offset, p.message)
        if tail:
            what = ("the active segment's index (preallocated to segment.index.bytes and not trimmed: the broker "
                    "did not shut down cleanly, or is running)" if is_last else
                    "an inactive segment's index (Kafka trims indexes at roll: this one was left untrimmed)")
            extra = ""
            if kafka_sanity_fails:
                extra = ("; kafka-dump-log --index-sanity-check fails on it (last timestamp 0), while a broker "
                         "(>= 2.3) loads it and rebuilds the index when it recovers the segment")
            rep(WARNING, "index-preallocated", path, effective * size, None,
                f"{tail} of {entries} entries are zero from slot {effective} on: the zero-filled tail of "
                f"{what}{extra}")
        index.entries = effective
        return index
    except OSError as e:
        index.close()
        _io_finding(rep, path, e)
        return None
    except BaseException:
        index.close()
        raise


# -- the .log walk ---------------------------------------------------------------------------


class _LogWalk:
    """One pass over a ``.log`` (or a KRaft ``.checkpoint``) with its indexes merged in.

    State between batches: the last valid batch (``prev_*``), the next unchecked offset
    index entry (``ipos``/``ioff``, slot ``islot``) and the *pending* one (``pend_*``: the
    last entry found at a batch boundary; its offset must be reached by a batch before the
    next entry's position), the next time index entry (``toff``/``tts``) and the byte
    ranges found corrupt (``bad``), inside which index entries are not judged.
    """

    def __init__(self, path: str, seg_base: int, next_base: int | None, is_last: bool, rep: _Reporter,
                 stats: VerifyStats, options: VerifyOptions, progress: Progress | None,
                 offset_index: IndexFile | None = None, time_index: IndexFile | None = None,
                 kind: str = "segment"):
        self.path = path
        self.seg_base = seg_base
        self.next_base = next_base
        self.is_last = is_last
        self.rep = rep
        self.stats = stats
        self.options = options
        self.progress = progress
        self.kind = kind
        if kind == "segment":
            self.seg_max = seg_base + INT32_MAX if next_base is None else min(seg_base + INT32_MAX, next_base - 1)
        else:
            self.seg_max = _INF
        # last valid batch
        self.prev_base = None
        self.prev_last = seg_base - 1
        self.prev_mts = -1
        self.prev_pos = -1
        self.first_offset: int | None = None
        self.batches = 0
        self.seen_legacy = False
        self.bad: list[tuple[int, int]] = []
        self.gap_bad = False
        # offset index merge
        self.oidx = offset_index
        self.islot = 0  # slot of (ipos, ioff); entry ii of the in-memory chunk (apos, arel, ilen)
        self.ii, self.ilen = 0, _INF
        self.apos = self.arel = array("i")
        self.ipos = self.ioff = _INF
        if offset_index is not None:
            self._index_refill()
        self.last_ipos = -1
        self.last_ioff = -_INF
        self.pend_off = _NO_PENDING
        self.pend_pos = 0
        self.pend_slot = -1
        self.bad_pend = False
        self.past_end: list | None = None  # entries past the end of the log, reported as one finding
        # time index merge
        self.tidx = time_index
        self.tslot = 0  # slot of (toff, tts); entry ti of the in-memory chunk (trel, ats, tlen)
        self.ti, self.tlen = 0, _INF
        self.trel = self.ats = array("q")
        self.toff = self.tts = _INF
        if time_index is not None:
            self._time_refill()
        self.prev_toff = -_INF
        self.prev_tts = -1
        # buffer
        self.fd = -1
        self.fsize = 0
        self.buf = bytearray()
        self.mv = memoryview(self.buf)
        self.bp = 0  # file position of buf[0]
        self.n = 0  # valid bytes in buf
        self.p = 0  # cursor in buf
        self.reported = 0

    # -- driver ------------------------------------------------------------------------------

    def run(self) -> Iterator[Finding]:
        rep = self.rep
        try:
            self.fd = os.open(self.path, os.O_RDONLY)
        except OSError as e:
            _io_finding(rep, self.path, e, "open")
            yield from rep.take()
            return
        try:
            self.fsize = os.fstat(self.fd).st_size
            self.stats.files += 1
            self.stats.bytes += self.fsize
            if self.fsize > INT32_MAX:
                rep(ERROR, "segment-size", self.path, None, None,
                    f"the file is {self.fsize} bytes, above Kafka's limit of {INT32_MAX} bytes per segment")
            if self.fsize:
                size = min(max(self.options.chunk_size, MIN_CHUNK_SIZE), self.fsize)
                self.buf = bytearray(size)
                self.mv = memoryview(self.buf)
                more = True
                while more:
                    if self.first_offset is not None:
                        self._hot()
                    more = self._step()
                    if rep.out:
                        yield from rep.take()
            self._finish()
            self._progress_to(self.fsize)
            self.stats.batches += self.batches
            yield from rep.take()
        except OSError as e:
            _io_finding(rep, self.path, e)
            yield from rep.take()
        finally:
            try:
                self.mv.release()
            except BufferError:  # a view still exported (only on an exception path): let GC free it
                pass
            os.close(self.fd)

    @property
    def next_offset(self) -> int:
        """The segment's next offset (Kafka's ``readNextOffset``): after its last valid batch."""
        return self.prev_last + 1

    # -- buffer ------------------------------------------------------------------------------

    def _progress_to(self, pos: int) -> None:
        if self.progress is not None and pos > self.reported:
            self.progress(pos - self.reported)
            self.reported = pos

    def _seek(self, pos: int) -> None:
        if self.bp <= pos <= self.bp + self.n:
            self.p = pos - self.bp
        else:
            self.bp, self.n, self.p = pos, 0, 0

    def _ensure(self, k: int) -> bool:
        """Make ``k`` bytes available at the cursor, refilling the buffer from the file."""
        if self.n - self.p >= k:
            return True
        start = self.bp + self.p
        if start + k > self.fsize or k > len(self.buf):
            return False
        got = os.preadv(self.fd, [self.mv], start)
        want = min(len(self.buf), self.fsize - start)
        if got < want:  # the file shrank under us: what was read is all there is
            self.fsize = start + got
        self.bp, self.n, self.p = start, got, 0
        self._progress_to(start)
        return got >= k

    def _read_at(self, pos: int, size: int) -> bytes:
        """A small read that does not disturb the buffer."""
        return os.pread(self.fd, size, pos)

    def _stream_crc(self, start: int, end: int, crc_func, value: int) -> int:
        """Continue a CRC over ``[start, end)`` of the file (-1 if it ends first)."""
        return stream_crc(self.fd, start, end, crc_func, value)

    # -- the hot loop ----------------------------------------------------------------------------

    def _hot(self) -> None:
        """Consume, in the current buffer, every batch that is a whole valid v2 batch, in
        offset order and range, whose index entries agree. Stops (without consuming) at the
        first batch that needs anything else; :meth:`_step` handles that one.

        The loop keeps only what its checks need in locals (literals, not module constants:
        a global lookup per batch is measurable); the rest of the state (previous batch's
        base offset and max timestamp, slots, the pending entry's position) is derived from
        the buffer and the entry lists once, on exit.
        """
        mv, n, p, bp = self.mv, self.n, self.p, self.bp
        prev_last, seg_max = self.prev_last, self.seg_max
        apos, arel, ii, ipos, ioff = self.apos, self.arel, self.ii, self.ipos, self.ioff
        sb = self.seg_base
        pend_off = self.pend_off
        # The entry's position relative to the buffer. Opening an entry here needs the last
        # entry looked at to be the pending one, and no corruption since it: otherwise -1,
        # which sends the batch at the entry's position (or any batch) to the general code.
        iprel = ipos - bp if not self.bad_pend and self.last_ioff == pend_off else -1
        trel, ats, ti, toff, tts, prev_tts = self.trel, self.ats, self.ti, self.toff, self.tts, self.prev_tts
        ii0, ti0 = ii, ti
        unpack = _HOT.unpack_from
        crc = crc32c
        count = 0
        lastp = -1
        lim = n - 61  # a whole v2 header must be in the buffer
        while p <= lim:
            base, length, magic, stored, lod, mts = unpack(mv, p)
            stop = p + 12 + length  # 12: offset and length fields; 49: smallest v2 batchLength
            if magic != 2 or length < 49 or stop > n or crc(mv[p + 21:stop]) != stored:
                break
            last = base + lod
            if base <= prev_last or lod < 0 or last > seg_max:
                break
            if last >= toff:
                if toff < base or tts != mts or tts <= prev_tts:
                    break
                if p >= iprel:
                    if p != iprel or ioff < base or pend_off > prev_last:
                        break
                    pend_off = ioff
                    ii += 1
                    ipos = apos[ii]
                    ioff = sb + arel[ii]
                    iprel = ipos - bp
                prev_tts = tts
                ti += 1
                toff = sb + trel[ti]
                tts = ats[ti]
            elif p >= iprel:
                if p != iprel or ioff < base or pend_off > prev_last:
                    break
                pend_off = ioff
                ii += 1
                ipos = apos[ii]
                ioff = sb + arel[ii]
                iprel = ipos - bp
            prev_last = last
            lastp = p
            count += 1
            p = stop
        if not count:
            return
        self.p = p
        self.prev_last = prev_last
        self.prev_pos = bp + lastp
        self.prev_base, _, _, _, _, self.prev_mts = unpack(mv, lastp)
        self.batches += count
        self.gap_bad = False
        if ii != ii0:
            self.islot += ii - ii0
            self.ii, self.ipos, self.ioff = ii, ipos, ioff
            self.pend_off = pend_off
            self.pend_pos = apos[ii - 1]
            self.pend_slot = self.islot - 1
            self.last_ipos, self.last_ioff = self.pend_pos, pend_off
        if ti != ti0:
            self.tslot += ti - ti0
            self.ti, self.toff, self.tts = ti, toff, tts
            self.prev_toff, self.prev_tts = sb + trel[ti - 1], ats[ti - 1]

    # -- one entry, every case -------------------------------------------------------------------

    def _step(self) -> bool:
        """Check the entry at the cursor in full. Returns False when the walk is over."""
        if self.ii >= self.ilen:
            self._index_refill()
        if self.ti >= self.tlen:
            self._time_refill()
        if not self._ensure(HEADER_UP_TO_MAGIC + 1):
            pos = self.bp + self.p
            left = self.fsize - pos
            if left > 0:
                self._corrupt(pos, f"{left} bytes are too few for an entry header")
            return False
        mv, p = self.mv, self.p
        pos = self.bp + p
        _, size = _ENTRY_HEAD.unpack_from(mv, p)
        magic = mv[p + 16]
        if size < MIN_ENTRY_SIZE:
            return self._corrupt(pos, f"the size field is {size}, below the minimum entry size of "
                                      f"{MIN_ENTRY_SIZE}")
        if magic > 2:
            return self._corrupt(pos, f"the magic byte is {magic - 256 if magic > 127 else magic}, not 0, 1 or 2")
        if magic == 2 and size < MIN_V2_SIZE:
            return self._corrupt(pos, f"the v2 batch size {size + LOG_OVERHEAD} is below the minimum of "
                                      f"{V2_HEADER_SIZE} bytes")
        length = LOG_OVERHEAD + size
        if pos + length > self.fsize:
            what = "batch" if magic == 2 else "message"
            return self._corrupt(pos, f"a {what} of {length} bytes runs past the end of the file "
                                      f"({self.fsize - pos} bytes left)")
        if magic == 2:
            return self._v2(pos, length)
        return self._legacy(pos, length, magic)

    def _v2(self, pos: int, length: int) -> bool:
        if self._ensure(length):
            p = self.p
            header = HEADER.unpack_from(self.mv, p)
            computed = crc32c(self.mv[p + V2_CRC_START:p + length])
        elif self._ensure(V2_HEADER_SIZE) and self.bp + self.n < pos + length:
            p = self.p
            header = HEADER.unpack_from(self.mv, p)
            computed = self._stream_crc(self.bp + self.n, pos + length, crc32c,
                                        crc32c(self.mv[p + V2_CRC_START:self.n]))
        else:  # the file shrank under us
            return self._corrupt(pos, "the file ended inside the batch")
        base, stored, lod, mts = header[0], header[4], header[6], header[8]
        if computed != stored:
            return self._bad_crc(pos, length, base, base + lod,
                                 f"CRC-32C mismatch: stored {stored}, computed {computed & 0xFFFFFFFF}")
        self._accept(pos, length, base, base + lod, lod, mts)
        self._seek(pos + length)
        return True

    def _legacy(self, pos: int, length: int, magic: int) -> bool:
        if length < LOG_OVERHEAD + 22 and magic == 1:
            return self._corrupt(pos, f"a v1 message of {length} bytes is below the minimum of "
                                      f"{LOG_OVERHEAD + 22} bytes")
        whole = self._ensure(length)
        if not whole and not self._ensure(LOG_OVERHEAD + 14 + 8 * magic):
            return self._corrupt(pos, "the file ended inside the message")
        mv, p = self.mv, self.p
        offset, _, stored, _, attributes = _LEGACY_HEAD.unpack_from(mv, p)
        mts = _LEGACY_TS.unpack_from(mv, p + 18)[0] if magic == 1 else -1
        if whole:
            computed = zlib.crc32(mv[p + LEGACY_CRC_START:p + length])
        else:
            computed = self._stream_crc(self.bp + self.n, pos + length, zlib.crc32,
                                        zlib.crc32(mv[p + LEGACY_CRC_START:self.n]))
        if computed != stored:
            return self._bad_crc(pos, length, offset, offset,
                                 f"CRC-32 mismatch: stored {stored}, computed {computed & 0xFFFFFFFF}")
        self.seen_legacy = True
        self._accept(pos, length, offset, offset, 0, mts, legacy_compressed=bool(attributes & 0x07))
        self._seek(pos + length)
        return True

    def _plausible(self, pos: int) -> bool:
        """Whether an entry header that could be whole starts at ``pos`` (CRC not checked)."""
        head = self._read_at(pos, V2_HEADER_SIZE)
        if len(head) < HEADER_UP_TO_MAGIC + 1:
            return False
        _, size = _ENTRY_HEAD.unpack_from(head, 0)
        magic = head[16]
        if size < MIN_ENTRY_SIZE or magic > 2 or pos + LOG_OVERHEAD + size > self.fsize:
            return False
        if magic == 2:
            if size < MIN_V2_SIZE or len(head) < V2_HEADER_SIZE:
                return False
            attributes, lod = HEADER.unpack_from(head, 0)[5:7]
            return not attributes & ~0x7F and (attributes & 7) <= 4 and lod >= 0
        return True

    def _plausible_header(self, pos: int) -> bool:
        """Whether the bytes at ``pos`` start like an entry of this segment (sizes, magic,
        attributes, offset), however long the file is: a torn first batch does, random
        bytes almost never."""
        head = self._read_at(pos, V2_HEADER_SIZE)
        if len(head) < HEADER_UP_TO_MAGIC + 1:
            return False
        offset, size = _ENTRY_HEAD.unpack_from(head, 0)
        magic = head[16]
        if size < MIN_ENTRY_SIZE or magic > 2 or offset < self.seg_base or offset > self.seg_max:
            return False
        if magic == 2 and len(head) == V2_HEADER_SIZE:
            attributes, lod = HEADER.unpack_from(head, 0)[5:7]
            return size >= MIN_V2_SIZE and not attributes & ~0x7F and (attributes & 7) <= 4 and lod >= 0
        return True

    def _bad_crc(self, pos: int, length: int, base: int, last: int, reason: str) -> bool:
        stop = pos + length
        if stop < self.fsize and not self._plausible(stop):
            return self._corrupt(pos, f"{reason}, and no entry header follows at position {stop}")
        if stop >= self.fsize:
            self.rep(ERROR, "torn-tail", self.path, pos, base,
                     f"the last batch (offsets {base}..{last}, {length} bytes) fails its check ({reason}): "
                     f"a torn write at the end of the file")
            self._mark_bad(pos, self.fsize)
            return False
        self.rep(ERROR, "crc", self.path, pos, base,
                 f"the batch of {length} bytes at this position (offsets {base}..{last}) is corrupt: {reason}")
        self._mark_bad(pos, stop)
        self._seek(stop)
        return True

    def _mark_bad(self, start: int, end: int) -> None:
        self.bad.append((start, end))
        self.gap_bad = True
        if self.pend_off != _NO_PENDING:
            self.bad_pend = True

    def _in_bad(self, pos: int) -> bool:
        i = bisect.bisect_right(self.bad, (pos, _INF)) - 1
        return i >= 0 and self.bad[i][0] <= pos < self.bad[i][1]

    def _corrupt(self, pos: int, reason: str) -> bool:
        """Bytes at ``pos`` are not a valid entry: classify the damage and resynchronise."""
        left = self.fsize - pos
        if self._all_zero(pos):
            if self.is_last and self.kind == "segment":
                self.rep(WARNING, "torn-tail", self.path, pos, None,
                         f"the last {left} bytes of the active segment are zeros: a preallocated segment "
                         f"(log.preallocate=true) not trimmed after an unclean shutdown; recovery truncates them")
            else:
                self.rep(ERROR, "torn-tail", self.path, pos, None,
                         f"the last {left} bytes are zeros, not batches ({reason})")
            self._mark_bad(pos, self.fsize)
            return False
        found = self._resync(pos + 1)
        if found is None:
            if pos == 0 and self.first_offset is None and left > HEADER_UP_TO_MAGIC and not self._plausible_header(0):
                # Nothing in the file is a batch, not even its first bytes: not a torn write.
                self.rep(ERROR, "not-a-segment", self.path, 0, None,
                         f"no valid batch anywhere in the file's {left} bytes, and its first bytes are no entry "
                         f"header ({reason}): this is not a Kafka segment (random or foreign data)")
            else:
                self.rep(ERROR, "torn-tail", self.path, pos, None,
                         f"the last {left} bytes are not valid batches ({reason}) and nothing valid follows: "
                         f"a torn write at the end of the file")
            self._mark_bad(pos, self.fsize)
            return False
        self.rep(ERROR, "framing", self.path, pos, None,
                 f"{found - pos} bytes (positions {pos}..{found - 1}) are not valid batches ({reason}); "
                 f"resynchronised on the valid batch at position {found}")
        self._mark_bad(pos, found)
        self._seek(found)
        return True

    def _all_zero(self, pos: int) -> bool:
        return all_zero(self.fd, pos, self.fsize)

    def _resync(self, start: int) -> int | None:
        """The position of the next whole entry with a valid checksum at or after ``start``
        (legacy entries too once the segment held one), or None."""
        found = find_next_entry(self.fd, start, self.fsize, EntryRules(legacy=self.seen_legacy))
        if found is None:
            self.bp, self.n, self.p = self.fsize, 0, 0
        return found

    # -- a valid entry ---------------------------------------------------------------------------

    def _accept(self, pos: int, length: int, base: int, last: int, lod: int, mts: int,
                legacy_compressed: bool = False) -> None:
        rep, path = self.rep, self.path
        if self.first_offset is None:
            self.first_offset = base
        in_range = True
        if lod < 0:
            rep(ERROR, "offsets", path, pos, base, f"the batch's last offset delta is {lod}, negative")
            last = base
        if base < self.seg_base:
            rep(ERROR, "offsets", path, pos, base,
                f"base offset {base} is below the segment's base offset {self.seg_base} (its file name)")
            in_range = False
        elif last > self.seg_max:
            if self.next_base is not None and last >= self.next_base:
                why = f"reaches the next segment's base offset {self.next_base}"
            else:
                why = (f"is more than {INT32_MAX} above the segment's base offset {self.seg_base} "
                       f"(index offsets are 32-bit)")
            rep(ERROR, "offsets", path, pos, base, f"the batch's last offset {last} {why}")
            in_range = False
        elif base <= self.prev_last and self.prev_pos >= 0:
            rep(ERROR, "offsets", path, pos, base,
                f"base offset {base} is not above the last offset {self.prev_last} of the previous batch "
                f"(at position {self.prev_pos})")
        self.batches += 1
        if not in_range:
            # Offsets that cannot be right (the base offset is outside the CRC): the batch is
            # a hole of unknown offsets for the index checks, as a corrupt range is.
            self._mark_bad(pos, pos + length)
            while self.ipos <= pos:
                self._index_stray(self.islot, self.ipos, self.ioff, pos)
                self._index_next()
            return
        if self.ipos <= pos:
            self._index_at(pos, base, last)
        if self.toff <= last:
            self._time_at(pos, base, last, mts, legacy_compressed)
        self.prev_base, self.prev_last, self.prev_mts, self.prev_pos = base, last, mts, pos
        self.gap_bad = False

    # -- offset index --------------------------------------------------------------------------

    def _index_next(self) -> None:
        self.islot += 1
        self.ii += 1
        if self.ii >= self.ilen:
            self._index_refill()
        else:
            self.ipos, self.ioff = self.apos[self.ii], self.seg_base + self.arel[self.ii]

    def _index_refill(self) -> None:
        """Load the chunk of entries from ``islot`` on; after the last, ``ipos`` is infinite."""
        self.ii = 0
        self.ilen, self.apos, self.arel = _index_chunk(self.oidx, self.islot)
        if self.ilen:
            self.ipos, self.ioff = self.apos[0], self.seg_base + self.arel[0]
        else:
            self.ilen, self.ipos, self.ioff = _INF, _INF, _INF

    def _time_next(self) -> None:
        self.tslot += 1
        self.ti += 1
        if self.ti >= self.tlen:
            self._time_refill()
        else:
            self.toff, self.tts = self.seg_base + self.trel[self.ti], self.ats[self.ti]

    def _time_refill(self) -> None:
        self.ti = 0
        self.tlen, self.trel, self.ats = _index_chunk(self.tidx, self.tslot)
        if self.tlen:
            self.toff, self.tts = self.seg_base + self.trel[0], self.ats[0]
        else:
            self.tlen, self.toff, self.tts = _INF, _INF, _INF

    def _index_at(self, pos: int, base: int, last: int) -> None:
        while self.ipos <= pos:
            if self.ipos < pos:
                self._index_stray(self.islot, self.ipos, self.ioff, pos)
            else:
                self._index_open(self.islot, self.ipos, self.ioff, base, last)
            self._index_next()

    def _index_order(self, slot: int, ipos: int, ioff: int) -> bool:
        if ipos <= self.last_ipos or ioff <= self.last_ioff:
            self.rep(ERROR, "index-entry", self.oidx.path, slot * OFFSET_INDEX_ENTRY_SIZE, ioff,
                     f"entry {slot} (offset {ioff}, position {ipos}) is not above the previous entry "
                     f"(offset {self.last_ioff}, position {self.last_ipos}): offsets and positions must increase")
            self.last_ipos, self.last_ioff = ipos, ioff
            return False
        self.last_ipos, self.last_ioff = ipos, ioff
        return True

    def _index_stray(self, slot: int, ipos: int, ioff: int, next_pos: int | None) -> None:
        """An entry whose position is not the start of a valid batch."""
        if not self._index_order(slot, ipos, ioff) or self._in_bad(ipos):
            return
        where = self.oidx.path, slot * OFFSET_INDEX_ENTRY_SIZE
        if ipos >= self.fsize:
            # One finding for the run of entries a short .log leaves dangling (_finish).
            if self.past_end is None:
                self.past_end = [slot, ioff, ipos, 0, slot, ioff, ipos]
            run = self.past_end
            run[3] += 1
            run[4:] = slot, ioff, ipos
            return
        around = f"batches start at {self.prev_pos}" if self.prev_pos >= 0 else "no batch starts before it"
        if next_pos is not None:
            around += f" and {next_pos}"
        self.rep(ERROR, "index-entry", *where, ioff,
                 f"entry {slot} (offset {ioff}, position {ipos}) does not point at the start of a batch "
                 f"({around})")

    def _report_past_end(self) -> None:
        if self.past_end is None:
            return
        first, first_off, first_pos, count, last, last_off, last_pos = self.past_end
        self.past_end = None
        where = self.oidx.path, first * OFFSET_INDEX_ENTRY_SIZE
        if count == 1:
            self.rep(ERROR, "index-entry", *where, first_off,
                     f"entry {first} (offset {first_off}, position {first_pos}) points past the end of the log "
                     f"({self.fsize} bytes)")
            return
        self.rep(ERROR, "index-entry", *where, first_off,
                 f"{count} entries, {first} (offset {first_off}, position {first_pos}) to {last} (offset {last_off}, "
                 f"position {last_pos}), point past the end of the log ({self.fsize} bytes): the .log is shorter "
                 f"than its index says")

    def _close_pending(self, until: str) -> None:
        if self.pend_off == _NO_PENDING:
            return
        if not self.bad_pend and self.pend_off > self.prev_last:
            slot = self.pend_slot
            self.rep(ERROR, "index-entry", self.oidx.path, slot * OFFSET_INDEX_ENTRY_SIZE, self.pend_off,
                     f"entry {slot} (offset {self.pend_off}, position {self.pend_pos}): no batch from position "
                     f"{self.pend_pos} to {until} reaches offset {self.pend_off} (the last offset there is "
                     f"{self.prev_last})")
        self.pend_off, self.bad_pend = _NO_PENDING, False

    def _index_open(self, slot: int, ipos: int, ioff: int, base: int, last: int) -> None:
        """An entry at the start of the valid batch ``base..last``."""
        self._close_pending(f"the next entry's position {ipos}")
        if not self._index_order(slot, ipos, ioff):
            return
        if ioff < base:
            self.rep(ERROR, "index-entry", self.oidx.path, slot * OFFSET_INDEX_ENTRY_SIZE, ioff,
                     f"entry {slot} (offset {ioff}, position {ipos}): the batch at position {ipos} holds offsets "
                     f"{base}..{last}, above the entry's offset")
            return
        self.pend_off, self.pend_pos, self.pend_slot, self.bad_pend = ioff, ipos, slot, False

    # -- time index ----------------------------------------------------------------------------

    def _time_at(self, pos: int, base: int, last: int, mts: int, legacy_compressed: bool) -> None:
        rep, tpath = self.rep, self.tidx.path
        while self.toff <= last:
            slot, toff, tts = self.tslot, self.toff, self.tts
            where = slot * TIME_INDEX_ENTRY_SIZE
            ordered = True
            if toff < self.prev_toff or tts <= self.prev_tts:
                rep(ERROR, "timeindex-order", tpath, where, toff,
                    f"entry {slot} (timestamp {tts}, offset {toff}) is not above the previous entry (timestamp "
                    f"{self.prev_tts}, offset {self.prev_toff if self.prev_toff > -_INF else 'none'}): timestamps "
                    f"must increase and offsets must not decrease")
                ordered = False
            batch_pos = batch_mts = None
            if toff >= base:
                batch_pos, batch_mts = pos, mts
                if legacy_compressed and mts != tts:
                    batch_mts = self._legacy_max_timestamp(pos, mts)
            elif self.prev_pos >= 0 and self.prev_base <= toff <= self.prev_last:
                batch_pos, batch_mts = self.prev_pos, self.prev_mts
                if self.seen_legacy and batch_mts != tts:
                    batch_mts = self._legacy_max_timestamp(batch_pos, batch_mts)
            elif ordered and not (self.gap_bad and toff > self.prev_last):
                rep(ERROR, "timeindex-entry", tpath, where, toff,
                    f"entry {slot} (timestamp {tts}, offset {toff}): offset {toff} is in no batch of the "
                    f"segment (the batch at position {pos} starts at offset {base})")
            if batch_pos is not None and batch_mts != tts:
                rep(ERROR, "timeindex-timestamp", tpath, where, toff,
                    f"entry {slot} (timestamp {tts}, offset {toff}): the batch holding offset {toff} (at position "
                    f"{batch_pos} of the log) has max timestamp {batch_mts}")
            self.prev_toff, self.prev_tts = toff, tts
            self._time_next()

    def _legacy_max_timestamp(self, pos: int, fallback: int) -> int:
        """The max record timestamp of the v0/v1 entry at ``pos`` (decompressing a wrapper)."""
        head = self._read_at(pos, LOG_OVERHEAD + 5)
        if len(head) < LOG_OVERHEAD + 5 or head[16] > 1:
            return fallback
        size = _ENTRY_HEAD.unpack_from(head, 0)[1]
        if size > MAX_LEGACY_DECODE:
            return fallback
        from plog.formats.legacy import LegacyBatch  # only for v0/v1 logs with a time index

        data = self._read_at(pos, LOG_OVERHEAD + size)
        try:
            timestamps = [r.timestamp for r in LegacyBatch(memoryview(data), pos).records()]
        except (FormatError, ValueError):
            return fallback
        return max(timestamps, default=fallback)

    # -- end of the file -----------------------------------------------------------------------

    def _finish(self) -> None:
        rep = self.rep
        if self.ii >= self.ilen:
            self._index_refill()
        if self.ti >= self.tlen:
            self._time_refill()
        if self.oidx is not None:
            while self.ipos < _INF:
                self._index_stray(self.islot, self.ipos, self.ioff, None)
                self._index_next()
            self._report_past_end()
            self._close_pending("the end of the segment")
        if self.tidx is not None:
            tpath = self.tidx.path
            while self.toff < _INF:
                slot, toff, tts = self.tslot, self.toff, self.tts
                where = slot * TIME_INDEX_ENTRY_SIZE
                if toff < self.prev_toff or tts <= self.prev_tts:
                    rep(ERROR, "timeindex-order", tpath, where, toff,
                        f"entry {slot} (timestamp {tts}, offset {toff}) is not above the previous entry (timestamp "
                        f"{self.prev_tts}, offset {self.prev_toff if self.prev_toff > -_INF else 'none'}): "
                        f"timestamps must increase and offsets must not decrease")
                elif not self.gap_bad:
                    if self.prev_pos >= 0:
                        why = f"past the last offset {self.prev_last} of the segment"
                    else:
                        why = "in no batch: the segment has no valid batch"
                    rep(ERROR, "timeindex-entry", tpath, where, toff,
                        f"entry {slot} (timestamp {tts}, offset {toff}): offset {toff} is {why}")
                self.prev_toff, self.prev_tts = toff, tts
                self._time_next()


# -- segments --------------------------------------------------------------------------------


class SegmentResult(NamedTuple):
    """What a segment walk learnt: offsets of its first and after its last valid batch."""

    first_offset: int | None
    next_offset: int


def _check_txn_index(path: str, seg_base: int, seg_next: int, rep: _Reporter, stats: VerifyStats) -> None:
    try:
        index = IndexFile(path, TXN_INDEX_ENTRY_SIZE, seg_base, trim_zero_tail=False, missing_ok=False)
    except OSError as e:
        _io_finding(rep, path, e, "open")
        return
    try:
        length = index.file_length
        stats.files += 1
        stats.bytes += length
        if length % TXN_INDEX_ENTRY_SIZE:
            rep(WARNING, "txnindex-partial", path, length - length % TXN_INDEX_ENTRY_SIZE, None,
                f"{length % TXN_INDEX_ENTRY_SIZE} trailing bytes are a partial entry (Kafka ignores them)")
        prev_last = None
        for slot, data in index.chunks(chunk_bytes=INDEX_CHUNK_BYTES):
            view = memoryview(data)
            for i in range(len(data) // TXN_INDEX_ENTRY_SIZE):
                where = slot * TXN_INDEX_ENTRY_SIZE
                raw = view[i * TXN_INDEX_ENTRY_SIZE:(i + 1) * TXN_INDEX_ENTRY_SIZE]
                try:
                    # The formats layer's reader, one entry at a time: a version Kafka
                    # rejects (byte 0, signed, above 0) is reported and the walk goes on.
                    txn = next(iter_txn_entries(raw, os.path.abspath(path)))
                except CorruptIndexError as e:
                    # Kafka's index iterator throws here: its load fails rather than
                    # rebuilding the index, so no word on what a start-up does about it.
                    repair, rep.repair = rep.repair, None
                    rep(ERROR, "txnindex-entry", path, where, None, e.reason)
                    rep.repair = repair
                    slot += 1
                    continue
                pid, first, last, lso = txn.producer_id, txn.first_offset, txn.last_offset, txn.last_stable_offset
                entry = (f"entry {slot} (producerId {pid}, firstOffset {first}, lastOffset {last}, "
                         f"lastStableOffset {lso})")
                if last < seg_base:
                    rep(ERROR, "index-sanity", path, where, last,
                        f"{entry}: last offset {last} is less than the segment's start offset {seg_base} "
                        f"(Kafka's sanity check fails and the broker recovers the segment)")
                elif last >= seg_next:
                    rep(ERROR, "txnindex-entry", path, where, last,
                        f"{entry}: the abort marker offset {last} is past the segment's last offset {seg_next - 1}")
                elif first > last:
                    rep(ERROR, "txnindex-entry", path, where, last,
                        f"{entry}: the first offset is above the last offset")
                elif prev_last is not None and last <= prev_last:
                    rep(ERROR, "txnindex-entry", path, where, last,
                        f"{entry}: last offsets must increase (the previous entry's is {prev_last})")
                prev_last = last
                slot += 1
    except OSError as e:
        _io_finding(rep, path, e)
    finally:
        index.close()


def _segment_findings(seg: SegmentFiles, rep: _Reporter, stats: VerifyStats, options: VerifyOptions, *,
                      is_last: bool, next_base: int | None, progress: Progress | None,
                      result: list, repair: _Repair | None = None) -> Iterator[Finding]:
    """Verify one segment; appends its :class:`SegmentResult` to ``result``. ``repair``:
    what a broker's start-up does about this segment's damage (said in each damage finding)."""
    stats.segments += 1
    base = seg.base_offset
    oidx = tidx = None
    rep.repair = repair
    try:
        if seg.index is None:
            rep(WARNING, "index-missing", sibling_file(seg.log, INDEX_FILE_SUFFIX), None, None,
                "the segment has no offset index; Kafka rebuilds it (recovers the segment) on load")
        else:
            oidx = _open_index(seg.index, "offset", base, is_last, rep, stats)
        if seg.timeindex is None:
            rep(WARNING, "timeindex-missing", sibling_file(seg.log, TIME_INDEX_FILE_SUFFIX), None, None,
                "the segment has no time index; Kafka creates an empty one on load")
        else:
            tidx = _open_index(seg.timeindex, "time", base, is_last, rep, stats)
        yield from rep.take()
        walk = _LogWalk(seg.log, base, next_base, is_last, rep, stats, options, progress, oidx, tidx)
        yield from walk.run()
        if seg.txnindex is not None:
            _check_txn_index(seg.txnindex, base, walk.next_offset, rep, stats)
            yield from rep.take()
    finally:
        rep.repair = None
        if oidx is not None:
            oidx.close()
        if tidx is not None:
            tidx.close()
    result.append(SegmentResult(walk.first_offset, walk.next_offset))


def _startup_repairs(info: PartitionInfo, segments: list[SegmentFiles],
                     context: PartitionContext) -> dict[int, _Repair] | None:
    """For each segment (by base offset), whether a broker's start-up recovers it: the
    loader's :func:`~plog.engine.storage.loader.startup_recovery` on what the log directory says
    (clean-shutdown marker, recovery point) and the segment's own files. None when that is
    unknown (no log directory around the partition) or the broker does not recover the
    folder this way (the KRaft metadata log, ``-delete``/``-stray`` folders)."""
    from plog.engine.storage.loader import segment_recovery_reasons, startup_recovery, txn_index_problem

    tp = info.topic_partition
    if (context.had_clean_shutdown is None or info.kind not in ("current", "future") or tp is None
            or tp.topic == "__cluster_metadata"):
        return None
    reasons = {}
    for s in segments:
        try:
            txn = txn_index_problem(s.txnindex, s.base_offset) if s.txnindex else None
        except OSError:
            txn = None  # verify reports the file it cannot read
        reasons[s.base_offset] = segment_recovery_reasons(has_offset_index=s.index is not None,
                                                          txn_index_problem=txn)
    rp = context.recovery_point.offset if context.recovery_point is not None else 0
    bases = [s.base_offset for s in segments]
    chosen = startup_recovery(bases, reasons, had_clean_shutdown=context.had_clean_shutdown, recovery_point=rp)
    why = ("the log directory was shut down cleanly" if context.had_clean_shutdown else
           f"the segment lies below the recovery point {rp}")
    return {b: _Repair(b in chosen, why, len(bases) - 1 - i) for i, b in enumerate(bases)}


def verify_segment(seg: SegmentFiles, options: VerifyOptions | None = None, *, is_last: bool = True,
                   next_base_offset: int | None = None, stats: VerifyStats | None = None,
                   progress: Progress | None = None) -> Iterator[Finding]:
    """Verify one segment: its ``.log`` against its indexes (no partition-level checks).

    ``is_last``: the segment is the partition's active one (a zero-filled tail is then a
    warning); ``next_base_offset``: the next segment's base offset, which no offset here may reach.
    """
    options = options or VerifyOptions()
    stats = stats if stats is not None else VerifyStats()
    rep = _Reporter(stats, options.max_findings_per_check)
    yield from _segment_findings(seg, rep, stats, options, is_last=is_last, next_base=next_base_offset,
                                 progress=progress, result=[])
    yield from rep.overflow()


def _verify_batch_file(path: str, rep: _Reporter, stats: VerifyStats, options: VerifyOptions,
                       progress: Progress | None) -> Iterator[Finding]:
    """A file of batches that is not a segment: a KRaft snapshot (``.checkpoint``)."""
    walk = _LogWalk(path, 0, None, False, rep, stats, options, progress, kind="batches")
    yield from walk.run()


# -- producer snapshots ----------------------------------------------------------------------


def _check_snapshot(path: str, offset: int, leo: int | None, rep: _Reporter, stats: VerifyStats) -> None:
    try:
        with open(path, "rb", buffering=0) as f:
            size = os.fstat(f.fileno()).st_size
            stats.files += 1
            stats.bytes += size
            if size > MAX_SNAPSHOT_FILE:
                rep(ERROR, "snapshot-format", path, None, None,
                    f"the snapshot is {size} bytes, too large to be a producer snapshot")
                return
            data = f.read(MAX_SNAPSHOT_FILE + 1)
    except OSError as e:
        _io_finding(rep, path, e)
        return
    try:
        entries = decode_snapshot(data, strict=False)
    except FormatError as e:
        check = "snapshot-crc" if "CRC" in e.reason else "snapshot-format"
        rep(ERROR, check, path, 2 if check == "snapshot-crc" else 0, offset, e.reason)
        return
    end = ENTRIES_OFFSET + len(entries) * ENTRY_SIZE
    if end != len(data):
        rep(WARNING, "snapshot-format", path, end, offset,
            f"{len(data) - end} bytes follow the {len(entries)} producer entries (Kafka ignores them)")
    for i, e in enumerate(entries):
        where = ENTRIES_OFFSET + i * ENTRY_SIZE
        if e.last_offset >= offset:
            rep(ERROR, "snapshot-entry", path, where, e.last_offset,
                f"producer {e.producer_id}: last offset {e.last_offset} is not below the snapshot's offset {offset}")
        elif e.current_txn_first_offset >= offset:
            rep(ERROR, "snapshot-entry", path, where, e.current_txn_first_offset,
                f"producer {e.producer_id}: the open transaction's first offset {e.current_txn_first_offset} is "
                f"not below the snapshot's offset {offset}")
    if leo is not None and offset > leo:
        rep(WARNING, "snapshot-offset", path, None, offset,
            f"the snapshot's offset {offset} is above the log end offset {leo}; Kafka deletes it on load")


# -- text files ------------------------------------------------------------------------------


def _read_text(path: str, rep: _Reporter, stats: VerifyStats, check: str) -> bytes | None:
    try:
        with open(path, "rb", buffering=0) as f:
            size = os.fstat(f.fileno()).st_size
            stats.files += 1
            stats.bytes += size
            if size > MAX_TEXT_FILE:
                rep(ERROR, check, path, None, None, f"the file is {size} bytes, too large for this kind of file")
                return None
            return f.read(MAX_TEXT_FILE + 1)
    except OSError as e:
        _io_finding(rep, path, e)
        return None


def _line_starts(data: bytes) -> list[tuple[int, list[bytes]]]:
    """``(byte position, whitespace-split parts)`` of each line (checkpoint framing)."""
    out, pos = [], 0
    for line in re.split(rb"\r\n|\r|\n", data):
        out.append((pos, line.split()))
        pos += len(line) + 1
    return out


def _checkpoint_positions(data: bytes) -> dict[tuple[str, int], int]:
    positions = {}
    for pos, parts in _line_starts(data)[2:]:
        if len(parts) == 3:
            try:
                positions[(parts[0].decode("utf-8", "replace"), int(parts[1]))] = pos
            except ValueError:
                continue
    return positions


def _check_leader_epochs(path: str, leo: int, clean: bool | None, rep: _Reporter, stats: VerifyStats,
                         note: str | None = None) -> None:
    data = _read_text(path, rep, stats, "leader-epoch-checkpoint")
    if data is None:
        return
    try:
        entries = parse_leader_epoch_checkpoint(data, path)
    except FormatError as e:
        rep(ERROR, "leader-epoch-checkpoint", path, None, None, e.reason)
        return
    lines = [pos for pos, parts in _line_starts(data)[2:] if parts]
    prev = None
    for i, (epoch, start) in enumerate(entries):
        where = lines[i] if i < len(lines) else None
        if prev is not None and epoch <= prev[0]:
            rep(ERROR, "leader-epoch-checkpoint", path, where, start,
                f"epoch {epoch} (start offset {start}) follows epoch {prev[0]}: epochs must increase")
        elif prev is not None and start < prev[1]:
            rep(ERROR, "leader-epoch-checkpoint", path, where, start,
                f"epoch {epoch} starts at offset {start}, below the start offset {prev[1]} of epoch {prev[0]}")
        if start > leo:
            if note:
                rep(WARNING, "leader-epoch-checkpoint", path, where, start,
                    f"epoch {epoch} starts at offset {start}, above the log end offset {leo}{note}")
            elif clean is False:
                rep(WARNING, "leader-epoch-checkpoint", path, where, start,
                    f"epoch {epoch} starts at offset {start}, above the log end offset {leo}; after an unclean "
                    f"shutdown the broker truncates such entries on load")
            else:
                rep(ERROR, "leader-epoch-checkpoint", path, where, start,
                    f"epoch {epoch} starts at offset {start}, above the log end offset {leo}")
        prev = (epoch, start)


# -- partitions ------------------------------------------------------------------------------


def verify_partition(info: PartitionInfo, options: VerifyOptions | None = None,
                     context: PartitionContext | None = None, stats: VerifyStats | None = None,
                     progress: Progress | None = None) -> Iterator[Finding]:
    """Verify a partition folder: every segment, then the partition's own files (snapshots,
    ``leader-epoch-checkpoint``, ``partition.metadata``) and the log directory's checkpoint
    entries for it (``context``) against its log end offset."""
    options = options or VerifyOptions()
    stats = stats if stats is not None else VerifyStats()
    context = context or PartitionContext()
    rep = _Reporter(stats, options.max_findings_per_check)
    stats.partitions += 1
    for path in info.in_flight:
        rep(WARNING, "in-flight-file", path, None, None,
            "an interrupted delete, clean or swap left this file; Kafka completes or removes it on load")
    segments = [s for s in info.segments if s.log is not None]
    orphans = [s.base_offset for s in info.segments if s.log is None]
    for s in info.segments:
        if s.log is None:
            for path in (s.index, s.timeindex, s.txnindex):
                if path:
                    rep(WARNING, "orphan-index", path, None, s.base_offset,
                        f"there is no {s.name}.log for this index: the segment's data is missing; Kafka deletes "
                        f"the orphan index on load")
    yield from rep.take()
    results: list[SegmentResult] = []
    repairs = _startup_repairs(info, segments, context) or {}
    for k, seg in enumerate(segments):
        next_base = segments[k + 1].base_offset if k + 1 < len(segments) else None
        yield from _segment_findings(seg, rep, stats, options, is_last=next_base is None, next_base=next_base,
                                     progress=progress, result=results, repair=repairs.get(seg.base_offset))
    for path in info.kraft_snapshots:
        yield from _verify_batch_file(path, rep, stats, options, progress)
    leo = results[-1].next_offset if results else None
    first_base = segments[0].base_offset if segments else None
    # A .log missing at the end (its index files are here) explains offsets above the log end
    # offset the remaining files show: the checks against it become warnings that say so.
    lost = [b for b in orphans if leo is not None and b >= leo]
    note = (f" (the .log of segment {file_name(lost[0])} is missing: only its index files are here, so the files "
            f"end early)" if lost else None)
    if not segments:
        rep(WARNING, "no-segments", info.path, None, None,
            "the partition has no segment; Kafka creates an empty one at the log start offset on load")
    for offset, path in info.snapshots:
        _check_snapshot(path, offset, leo, rep, stats)
    yield from rep.take()
    others = {os.path.basename(p): p for p in info.other_files}
    if LEADER_EPOCH_CHECKPOINT in others and leo is not None:
        _check_leader_epochs(others[LEADER_EPOCH_CHECKPOINT], leo, context.had_clean_shutdown, rep, stats, note)
    is_metadata_log = info.topic_partition is not None and info.topic_partition.topic == "__cluster_metadata"
    if PARTITION_METADATA in others:
        data = _read_text(others[PARTITION_METADATA], rep, stats, "partition-metadata")
        if data is not None:
            try:
                parse_partition_metadata(data, others[PARTITION_METADATA])
            except FormatError as e:
                rep(ERROR, "partition-metadata", others[PARTITION_METADATA], 0, None, e.reason)
    elif context.expect_partition_metadata and not is_metadata_log and info.kind != "delete":
        where = os.path.join(info.path, PARTITION_METADATA)
        if context.kraft:
            # LogManager.isStrayKraftReplica: no topic id, no way to match the metadata image.
            rep(ERROR, "partition-metadata-missing", where, None, None,
                "the partition has no partition.metadata (its topic id) in a KRaft log directory: a KRaft broker "
                "takes a log without a topic id for a stray log and removes it at start-up")
        else:
            rep(WARNING, "partition-metadata-missing", where, None, None,
                "the partition has no partition.metadata (its topic id) while other partitions of this log "
                "directory have one; a ZooKeeper-mode broker writes it when it next leads or follows the partition")
    if leo is not None:
        _check_checkpoint_marks(context, first_base, leo, rep, note)
    yield from rep.take()
    yield from rep.overflow()


def _check_checkpoint_marks(context: PartitionContext, first_base: int, leo: int, rep: _Reporter,
                            note: str | None = None) -> None:
    if note:
        def rep(severity, check, path, position, offset, message, _rep=rep):  # noqa: F811
            _rep(WARNING, check, path, position, offset, message + note)

    rp, lso, hw, cleaner = (context.recovery_point, context.log_start_offset, context.high_watermark,
                            context.cleaner_offset)
    span = f"the log holds offsets {first_base} (first segment's base offset) to {leo} (log end offset)"
    if rp is not None:
        if rp.offset > leo:
            rep(ERROR, "checkpoint-recovery-point", rp.path, rp.position, rp.offset,
                f"recovery point {rp.offset} is above the log end offset {leo}: data the broker flushed is "
                f"missing ({span})")
        elif rp.offset < first_base:
            rep(WARNING, "checkpoint-recovery-point", rp.path, rp.position, rp.offset,
                f"recovery point {rp.offset} is below the first segment's base offset {first_base}; the broker "
                f"recovers every segment after an unclean shutdown")
    if lso is not None:
        if lso.offset > leo:
            rep(ERROR, "checkpoint-log-start-offset", lso.path, lso.position, lso.offset,
                f"log start offset {lso.offset} is above the log end offset {leo}: on load the broker deletes "
                f"every segment ({span})")
        elif lso.offset < first_base:
            rep(WARNING, "checkpoint-log-start-offset", lso.path, lso.position, lso.offset,
                f"log start offset {lso.offset} is below the first segment's base offset {first_base}; the "
                f"broker uses the base offset")
    if hw is not None and hw.offset > leo:
        rep(WARNING, "checkpoint-high-watermark", hw.path, hw.position, hw.offset,
            f"high watermark {hw.offset} is above the log end offset {leo} (the broker lowers it to the log end "
            f"offset; unflushed data was lost in a crash, or this replica is behind)")
    if cleaner is not None and cleaner.offset > leo:
        rep(WARNING, "checkpoint-cleaner-offset", cleaner.path, cleaner.position, cleaner.offset,
            f"the cleaner's first dirty offset {cleaner.offset} is above the log end offset {leo} (the cleaner "
            f"resets it)")


# -- log directories -------------------------------------------------------------------------

_CHECKPOINT_FIELDS = {
    RECOVERY_POINT_CHECKPOINT: "recovery_point",
    LOG_START_OFFSET_CHECKPOINT: "log_start_offset",
    REPLICATION_OFFSET_CHECKPOINT: "high_watermark",
    CLEANER_OFFSET_CHECKPOINT: "cleaner_offset",
}


def _log_dir_context(path: str, files: dict, partitions: Iterable[PartitionInfo] | None,
                     rep: _Reporter, stats: VerifyStats, *, report_dir: bool) -> dict:
    """Read a log directory's own files. Returns ``{(topic, partition): {field: mark}}`` and
    the directory-wide facts under the key ``None``; emits findings into ``rep``."""
    marks: dict = {}
    clean = CLEAN_SHUTDOWN in files
    expect_ids = kraft = False
    meta_path = files.get(META_PROPERTIES)
    if meta_path is None:
        if report_dir:
            rep(WARNING, "meta-properties-missing", os.path.join(path, META_PROPERTIES), None, None,
                "the log directory has no meta.properties (a ZooKeeper-mode broker writes one on start; a KRaft "
                "broker refuses an unformatted directory)")
    else:
        data = _read_text(meta_path, rep, stats, "meta-properties")
        if data is not None:
            try:
                meta = parse_meta_properties(data)
                expect_ids = kraft = meta.version >= 1
            except FormatError as e:
                if report_dir:
                    rep(ERROR, "meta-properties", meta_path, None, None, e.reason)
    if report_dir:
        if not clean:
            rep(WARNING, "clean-shutdown-missing", os.path.join(path, CLEAN_SHUTDOWN), None, None,
                "no clean-shutdown marker: the broker did not shut down cleanly (or is running); on its next start "
                "it recovers every partition from its recovery point")
        else:
            data = _read_text(files[CLEAN_SHUTDOWN], rep, stats, "clean-shutdown")
            if data is not None:
                try:
                    parse_clean_shutdown(data, files[CLEAN_SHUTDOWN])
                except FormatError as e:
                    rep(WARNING, "clean-shutdown", files[CLEAN_SHUTDOWN], 0, None,
                        f"{e.reason} (Kafka treats an unreadable marker as a clean shutdown)")
    present = None
    if partitions is not None:
        present = {p.topic_partition for p in partitions if p.topic_partition is not None and p.kind in
                   ("current", "future")}
        if not expect_ids:
            expect_ids = any(os.path.basename(f) == PARTITION_METADATA for p in partitions for f in p.other_files)
    for name, field_name in _CHECKPOINT_FIELDS.items():
        cp = files.get(name)
        if cp is None:
            continue
        data = _read_text(cp, rep, stats, "checkpoint-format")
        if data is None:
            continue
        try:
            offsets = parse_offset_checkpoint(data, cp)
        except FormatError as e:
            if report_dir:
                rep(ERROR, "checkpoint-format", cp, None, None, e.reason)
            continue
        positions = _checkpoint_positions(data)
        missing = []
        for tp, offset in offsets.items():
            key = (tp[0], tp[1])
            mark = CheckpointMark(offset, cp, positions.get(key, 0))
            marks.setdefault(key, {})[field_name] = mark
            if present is not None and key not in present:
                missing.append((mark.position, f"{tp[0]}-{tp[1]}"))
        if report_dir and missing:
            missing.sort()
            names = ", ".join(name for _, name in missing[:5])
            more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
            rep(WARNING, "checkpoint-partition-missing", cp, missing[0][0], None,
                f"lists {len(missing)} partition{'s' if len(missing) > 1 else ''} with no folder in this log "
                f"directory: {names}{more} (moved, deleted, or not copied)")
    marks[None] = {"had_clean_shutdown": clean, "expect_partition_metadata": expect_ids, "kraft": kraft}
    return marks


def _context_for(marks: dict, info: PartitionInfo) -> PartitionContext:
    facts = marks[None]
    tp = info.topic_partition
    own = marks.get((tp.topic, tp.partition), {}) if tp is not None and info.kind in ("current", "future") else {}
    return PartitionContext(**own, **facts)


def verify_log_dir(log_dir: LogDirInfo, options: VerifyOptions | None = None, stats: VerifyStats | None = None,
                   ) -> tuple[list[Finding], dict[str, PartitionContext]]:
    """Check a log directory's own files; returns the findings and each partition's context
    (keyed by the partition folder's path) for :func:`verify_partition`."""
    options = options or VerifyOptions()
    stats = stats if stats is not None else VerifyStats()
    rep = _Reporter(stats, options.max_findings_per_check)
    stats.log_dirs += 1
    marks = _log_dir_context(log_dir.path, log_dir.files, log_dir.partitions, rep, stats, report_dir=True)
    bootstrap = os.path.join(log_dir.path, BOOTSTRAP_CHECKPOINT)
    findings = rep.take()
    if BOOTSTRAP_CHECKPOINT in log_dir.files:
        findings += list(_verify_batch_file(bootstrap, rep, stats, options, None))
    findings += rep.overflow()
    return findings, {p.path: _context_for(marks, p) for p in log_dir.partitions}


def _parent_context(info: PartitionInfo, stats: VerifyStats, options: VerifyOptions) -> PartitionContext:
    """The context of a partition verified on its own: its parent log directory's files,
    when the parent is one (no finding about the directory itself is reported)."""
    parent = os.path.dirname(os.path.abspath(info.path))
    try:
        names = set(os.listdir(parent))
    except OSError:
        return PartitionContext()
    files = {n: os.path.join(parent, n) for n in LOG_DIR_FILES if n in names}
    if not files:
        return PartitionContext()
    rep = _Reporter(VerifyStats(), options.max_findings_per_check)
    marks = _log_dir_context(parent, files, None, rep, VerifyStats(), report_dir=False)
    if not marks[None]["expect_partition_metadata"]:
        # A few siblings tell whether this broker writes partition.metadata.
        siblings = [n for n in sorted(names) if n != os.path.basename(info.path)][:50]
        marks[None]["expect_partition_metadata"] = any(
            os.path.isfile(os.path.join(parent, n, PARTITION_METADATA)) for n in siblings)
    return _context_for(marks, info)


# -- paths, plans and processes --------------------------------------------------------------


class _Task(NamedTuple):
    kind: str  # "findings", "partition", "segment", "snapshot", "batches", "text"
    args: tuple
    size: int  # bytes, for progress


def _file_size(path: str | None) -> int:
    try:
        return os.stat(path).st_size if path else 0
    except OSError:
        return 0


def _partition_size(info: PartitionInfo) -> int:
    """Bytes of batch files (``.log``, KRaft ``.checkpoint``): what the progress callback counts."""
    return sum(_file_size(s.log) for s in info.segments) + sum(_file_size(p) for p in info.kraft_snapshots)


def _plan_file(path: str, options: VerifyOptions, stats: VerifyStats) -> list[_Task]:
    path = os.path.normpath(path)
    name = os.path.basename(path)
    base = segment_base_offset(path)
    info = scan_partition(os.path.dirname(os.path.abspath(path)))
    if name.endswith(PRODUCER_SNAPSHOT_FILE_SUFFIX) and base is not None:
        return [_Task("snapshot", (path, base), 0)]
    if name == BOOTSTRAP_CHECKPOINT or is_kraft_snapshot_file(name):
        return [_Task("batches", (path,), _file_size(path))]
    if base is not None and name.endswith((LOG_FILE_SUFFIX, *INDEX_FILE_SUFFIXES)):
        segments = [s for s in info.segments if s.log is not None]
        for k, s in enumerate(segments):
            if s.base_offset == base:
                prefix = os.path.join(os.path.dirname(path), s.name)
                seg = SegmentFiles(base, prefix + LOG_FILE_SUFFIX, s.index and prefix + INDEX_FILE_SUFFIX,
                                   s.timeindex and prefix + TIME_INDEX_FILE_SUFFIX,
                                   s.txnindex and prefix + TXN_INDEX_FILE_SUFFIX)
                next_base = segments[k + 1].base_offset if k + 1 < len(segments) else None
                # What a broker's start-up does about this segment, from its log directory.
                repairs = _startup_repairs(info, segments, _parent_context(info, stats, options)) or {}
                return [_Task("segment", (seg, next_base is None, next_base, repairs.get(base)),
                              _file_size(seg.log))]
        raise NotAKafkaPathError(f"{path}: the segment has no .log file")
    if name.endswith(LOG_FILE_SUFFIX):
        return [_Task("segment", (SegmentFiles(0, path), True, None, None), _file_size(path))]
    raise NotAKafkaPathError(f"{path}: not a Kafka segment file (.log, .index, .timeindex, .txnindex, .snapshot, "
                             f".checkpoint)")


def plan(paths: Iterable[str], options: VerifyOptions | None = None, *,
         errors: list | None = None) -> list[_Task]:
    """Turn paths into an ordered list of verification tasks. Raises ``FileNotFoundError``
    (or another ``OSError``) or :class:`NotAKafkaPathError` before anything is verified;
    with an ``errors`` list, each path that cannot be verified is appended to it as
    ``(path, error)`` instead, and the other paths are planned."""
    options = options or VerifyOptions()
    tasks: list[_Task] = []
    seen: set[str] = set()
    for path in paths:
        try:
            tasks += _plan_path(path, options, seen)
        except (OSError, EngineError) as e:
            if errors is None:
                raise
            errors.append((path, e))
    return tasks


def _plan_path(path: str, options: VerifyOptions, seen: set[str]) -> list[_Task]:
    kind = classify(path)
    if kind == "segment":
        return _plan_file(path, options, VerifyStats())
    tasks: list[_Task] = []
    if kind == "partition":
        info = scan_partition(path)
        if info.path not in seen:
            seen.add(info.path)
            context = _parent_context(info, VerifyStats(), options)
            tasks.append(_Task("partition", (info, context), _partition_size(info)))
        return tasks
    lds = log_dirs(path)
    assignment = _assignment_findings(path, kind, options)
    if assignment is not None:
        tasks.append(_Task("findings", assignment, 0))
    for ld in lds:
        stats = VerifyStats()
        findings, contexts = verify_log_dir(ld, options, stats)
        tasks.append(_Task("findings", (findings, stats), 0))
        for info in ld.partitions:
            if info.path in seen:
                continue
            seen.add(info.path)
            tasks.append(_Task("partition", (info, contexts[info.path]), _partition_size(info)))
    return tasks


def _assignment_findings(path: str, kind: str, options: VerifyOptions) -> tuple[list[Finding], VerifyStats] | None:
    """plog's own data directory: every replica ``cluster.json`` assigns has its partition
    folder in its broker's log directory (a topic creation cut short leaves some out). For a
    data directory every broker is checked; for one ``broker-<id>`` log directory inside a
    data directory, that broker. None for a path with no ``cluster.json`` (a Kafka log dir)."""
    from plog.engine.cluster.data_dir import METADATA_FILE, DataDir

    root = os.path.abspath(path)
    only = None
    if kind == "logdir":
        parent, name = os.path.dirname(root), os.path.basename(root)
        if not (name.startswith("broker-") and name[7:].isdigit()):
            return None
        root, only = parent, int(name[7:])
    cluster_file = os.path.join(root, METADATA_FILE)
    if not os.path.isfile(cluster_file):
        return None
    stats = VerifyStats()
    rep = _Reporter(stats, options.max_findings_per_check)
    try:
        metadata = DataDir.open(root).metadata
    except (EngineError, OSError) as e:
        rep(ERROR, "cluster-metadata", cluster_file, None, None, str(e))
        return rep.take() + rep.overflow(), stats
    stats.files += 1
    for topic in sorted(metadata.topics):
        missing: dict[int, list[int]] = {}
        for partition, replicas in enumerate(metadata.topics[topic].replicas):
            for broker in replicas:
                if only is not None and broker != only:
                    continue
                if not os.path.isdir(os.path.join(root, f"broker-{broker}", partition_dir_name((topic, partition)))):
                    missing.setdefault(broker, []).append(partition)
        for broker, parts in sorted(missing.items()):
            shown = ", ".join(map(str, parts[:5])) + (f" and {len(parts) - 5} more" if len(parts) > 5 else "")
            rep(ERROR, "partition-missing", os.path.join(root, f"broker-{broker}"), None, None,
                f"{METADATA_FILE} assigns {len(parts)} partition{'s' * (len(parts) != 1)} of topic {topic} "
                f"({shown}) to broker {broker}, whose log directory has no folder for "
                f"{'them' if len(parts) != 1 else 'it'}: the topic cannot be read or written there")
    return rep.take() + rep.overflow(), stats


def _run_task(task: _Task, options: VerifyOptions, stats: VerifyStats,
              progress: Progress | None) -> Iterator[Finding]:
    kind, args = task.kind, task.args
    if kind == "findings":
        findings, own = args
        stats.add(own)
        yield from findings
        return
    if kind == "partition":
        yield from verify_partition(args[0], options, args[1], stats, progress)
        return
    rep = _Reporter(stats, options.max_findings_per_check)
    if kind == "segment":
        seg, is_last, next_base, repair = args
        yield from _segment_findings(seg, rep, stats, options, is_last=is_last, next_base=next_base,
                                     progress=progress, result=[], repair=repair)
    elif kind == "batches":
        yield from _verify_batch_file(args[0], rep, stats, options, progress)
    elif kind == "snapshot":
        _check_snapshot(args[0], args[1], None, rep, stats)
        yield from rep.take()
    yield from rep.overflow()


def run_task_collected(task: _Task, options: VerifyOptions) -> tuple[list[Finding], VerifyStats]:
    """One planned task's findings as a list, and its stats: the entry point of worker
    processes and of Spark executors (``plog scan --mode verify``)."""
    stats = VerifyStats()
    return list(_run_task(task, options, stats, None)), stats


def default_jobs() -> int:
    return os.cpu_count() or 1


def verify_paths(paths: Iterable[str], options: VerifyOptions | None = None, *, jobs: int = 1,
                 stats: VerifyStats | None = None, progress: Progress | None = None,
                 tasks: list | None = None) -> Iterator[Finding]:
    """Verify every path, yielding findings in path order then partition order.

    With ``jobs > 1``, partitions are verified in that many processes; their findings are
    still yielded in partition order, each partition's as soon as it and every partition
    before it are done. ``stats`` accumulates what was checked and the counts;
    ``progress(n)`` is called with byte counts as files are checked.
    """
    options = options or VerifyOptions()
    stats = stats if stats is not None else VerifyStats()
    tasks = plan(paths, options) if tasks is None else tasks
    heavy = sum(1 for t in tasks if t.kind == "partition")
    if jobs <= 1 or heavy <= 1:
        for task in tasks:
            yield from _run_task(task, options, stats, progress)
        return
    from plog.engine.workers import WorkerPool

    window = max(2, jobs * 4)
    with WorkerPool(min(jobs, heavy)) as pool:
        pending: deque = deque()
        todo = iter(tasks)
        in_flight = 0
        while True:
            while in_flight < window:
                task = next(todo, None)
                if task is None:
                    break
                if task.kind == "partition":
                    pending.append((task, pool.submit(run_task_collected, task, options)))
                    in_flight += 1
                else:
                    pending.append((task, None))
            if not pending:
                break
            task, future = pending.popleft()
            if future is None:
                yield from _run_task(task, options, stats, progress)
                continue
            in_flight -= 1
            findings, own = future.result()
            stats.add(own)
            if progress is not None:
                progress(task.size)
            yield from findings


def verify_path(path: str, options: VerifyOptions | None = None, **kwargs) -> Iterator[Finding]:
    """:func:`verify_paths` for one path."""
    return verify_paths([path], options, **kwargs)


def planned_bytes(tasks: list) -> int:
    """Total bytes the progress callback will be called with: the batch files' sizes."""
    return sum(t.size for t in tasks)


__all__ = [
    "ERROR",
    "WARNING",
    "CheckpointMark",
    "Finding",
    "NotAKafkaPathError",
    "PartitionContext",
    "SegmentResult",
    "VerifyOptions",
    "VerifyStats",
    "default_jobs",
    "plan",
    "planned_bytes",
    "run_task_collected",
    "verify_log_dir",
    "verify_partition",
    "verify_path",
    "verify_paths",
    "verify_segment",
]
