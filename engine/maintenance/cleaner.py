"""Kafka's log cleaner (compaction) for one partition (kafka-format.md §16).

The caller opens the :class:`~plog.engine.storage.log.Log` writable (holding the log directory's
``.lock``), reads the partition's ``cleaner-offset-checkpoint`` entry and passes it as
``first_dirty_offset``; it writes the returned :attr:`CleanResult.checkpoint_offset` back.

What happens, as Kafka's ``LogCleanerManager`` + ``Cleaner`` do it:

1. **Cleanability** (:func:`log_to_clean`, §16.2). The first dirty offset is the checkpoint
   (reset to the log start offset when it is outside ``[log start, LEO]``). Nothing at or
   past the *first uncleanable offset* is touched: ``min(last stable offset, active segment
   base, first segment younger than min.compaction.lag.ms)``, rounded down to a segment
   base. The log qualifies when ``cleanable / (clean + cleanable) > min.cleanable.dirty.ratio``
   or when a dirty segment is older than ``max.compaction.lag.ms`` (and there is something
   cleanable).
2. **Offset map** (§16.3): key -> latest offset for the dirty section in a
   :class:`~plog.engine.maintenance.offset_map.SkimpyOffsetMap` of ``buffer_size`` bytes. Records of
   aborted transactions are not mapped; control batches only move the transaction state.
   When the map reaches its load factor the *round* ends early: everything up to the last
   fully read batch is cleaned, and the next round starts there.
3. **Grouping and filtering** (§16.4, §16.5): the segments below the round's end offset
   (clean ones included) are grouped (``segment.bytes``, ``segment.index.bytes``, 31-bit
   offsets) and each group is filtered into one ``<base>.log.cleaned`` segment (with its
   ``.index``/``.timeindex``/``.txnindex``). A record survives when it is the latest for its
   key, or past the mapped range; tombstones until their delete horizon; key-less records
   never; aborted transactional data never; markers until nothing of their transaction is
   left and their horizon passed; the last batch of every active producer as at least an
   empty header. Batches whose records all survive (and need no horizon) are copied byte
   for byte; others are rebuilt with the same header fields.
4. **Swap** (``replaceSegments``), crash-safe at every step (the loader, §13.2, finishes or
   rolls back whatever a crash leaves): fsync the ``.cleaned`` files and give them the last
   source segment's mtime; rename ``.cleaned`` -> ``.swap``; rename the old segments'
   files -> ``.deleted``; rename ``.swap`` -> final names; fsync the directory. Old
   producer snapshots of replaced segments go to ``.snapshot.deleted``. ``.deleted`` files
   are removed at once only with ``file_delete_delay_ms=0``.

A crash before the ``.swap`` renames leaves ``.cleaned`` files (deleted on load: the old
log stands). A crash after them leaves ``.swap`` files, and the loader deletes every
non-swap file in the swap segment's offset range and completes the renames (the new log
stands). Either way no surviving record is lost.

Read-only planning: :func:`explain_compaction` simulates one full clean without writing.
The engine never prints; long operations report bytes through ``progress(nbytes)``.
"""

from __future__ import annotations

import hashlib
import heapq
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from plog.formats.batches import BatchIterator
from plog.formats.control import ControlRecordType, parse_control_key
from plog.formats.default_record import HEAD_VALUE_POSITION, RecordHead, record_heads
from plog.formats.errors import CorruptRecordError, FormatError
from plog.formats.legacy import encode_legacy_batch
from plog.formats.record_batch import encode_batch, encode_empty_batch
from plog.formats.records import CREATE_TIME, LOG_APPEND_TIME

from plog.engine.storage.checkpoints import fsync_dir
from plog.engine.errors import EngineError
from plog.engine.storage.log import Log
from plog.engine.maintenance.offset_map import DEFAULT_LOAD_FACTOR, SkimpyOffsetMap
from plog.engine.storage.segment import LogSegment
from plog.engine.storage.file_names import (
    CLEANED_FILE_SUFFIX as CLEANED_SUFFIX,
    DELETED_FILE_SUFFIX as DELETED_SUFFIX,
    SEGMENT_FILE_SUFFIXES,
    SWAP_FILE_SUFFIX as SWAP_SUFFIX,
    file_name,
)

DEFAULT_BUFFER_SIZE = 128 * 1024 * 1024  # log.cleaner.dedupe.buffer.size
DEFAULT_IO_BUFFER_SIZE = 512 * 1024  # log.cleaner.io.buffer.size
INT_MAX = (1 << 31) - 1

# BatchRetention (MemoryRecords.RecordFilter)
DELETE = "delete"
RETAIN_EMPTY = "retain-empty"
DELETE_EMPTY = "delete-empty"

Progress = Callable[[int], None]


class CleanerError(EngineError):
    """The cleaner cannot make progress on this log (e.g. the offset map is too small)."""


class CleanerBufferTooSmallError(CleanerError):
    """The offset map filled before a single batch of the dirty section was mapped."""


# =====================================================================================
# Cleanability (LogCleanerManager / LogToClean)


@dataclass
class LogToClean:
    """Kafka's ``LogToClean`` for one log, plus why it does or does not qualify.

    Offsets: ``first_dirty_offset`` is the (maybe reset) start of the dirty section;
    ``first_uncleanable_offset`` a segment base offset; nothing at or past it is cleaned.
    Byte counts are ``.log`` sizes (Kafka double-counts the segment holding the first
    dirty offset when it is not a segment base, and so do we).
    """

    directory: str
    checkpoint_offset: int | None
    first_dirty_offset: int
    first_dirty_reset: str | None  # why the checkpoint was not used, or None
    first_uncleanable_offset: int
    uncleanable_bound: str  # which limit won: last-stable-offset / active-segment / min-compaction-lag
    log_start_offset: int
    log_end_offset: int
    last_stable_offset: int
    active_segment_base: int
    clean_bytes: int
    cleanable_bytes: int
    total_bytes: int
    dirty_ratio: float
    min_cleanable_dirty_ratio: float
    max_compaction_delay_ms: int
    needs_compaction_now: bool
    compact_policy: bool
    qualifies: bool
    reason: str

    def to_dict(self) -> dict:
        return asdict(self)


def last_stable_offset(log: Log) -> int:
    """``UnifiedLog.lastStableOffset``: the first offset of the earliest transaction that is
    open (or whose marker is not below the high watermark), else the high watermark."""
    hw = log.high_watermark
    psm = log.producer_state
    if psm is None:
        return hw
    firsts = [t.first_offset for t in psm.ongoing_txns]
    firsts += [t.first_offset for t in psm.unreplicated_txns if t.last_offset is None or t.last_offset >= hw]
    return min(min(firsts), hw) if firsts else hw


def _non_active_segments_from(log: Log, offset: int) -> list[LogSegment]:
    active = log.active_segment
    return [s for s in log.segments.values(offset, active.base_offset)]


def _first_batch_timestamp(segment: LogSegment) -> int | None:
    return segment.rolling_based_timestamp


def log_to_clean(log: Log, *, first_dirty_offset: int | None, now: int) -> LogToClean:
    """Kafka's ``cleanableOffsets`` + ``LogToClean`` + ``maxCompactionDelay`` for ``log``."""
    cfg = log.config
    start, leo = log.log_start_offset, log.log_end_offset
    reset = None
    dirty = start if first_dirty_offset is None else first_dirty_offset
    if dirty < start:
        reset = f"the checkpointed offset {dirty} is below the log start offset {start}"
        dirty = start
    elif dirty > leo:
        reset = f"the checkpointed offset {dirty} is above the log end offset {leo}"
        dirty = start
    lso = last_stable_offset(log)
    active_base = log.active_segment.base_offset
    bounds = [(lso, "last-stable-offset"), (active_base, "active-segment")]
    min_lag = max(cfg.min_compaction_lag_ms, 0)
    if min_lag > 0:
        for seg in _non_active_segments_from(log, dirty):
            if seg.largest_timestamp > now - min_lag:
                bounds.append((seg.base_offset, "min-compaction-lag"))
                break
    raw, bound = min(bounds, key=lambda b: b[0])
    raw = max(raw, dirty)
    # calculateCleanableBytes: round down to the base of the segment holding it.
    non_active = _non_active_segments_from(log, raw)
    first_uncleanable = non_active[0].base_offset if non_active else active_base
    clean_bytes = sum(s.size for s in log.segments.values(-1, dirty))
    cleanable_bytes = sum(s.size for s in log.segments.values(min(dirty, first_uncleanable), first_uncleanable)) \
        if min(dirty, first_uncleanable) != first_uncleanable else 0
    total = clean_bytes + cleanable_bytes
    ratio = cleanable_bytes / total if total else 0.0
    # maxCompactionDelay
    earliest = None
    for seg in _non_active_segments_from(log, dirty):
        ts = _first_batch_timestamp(seg)
        if ts is not None and ts > 0 and (earliest is None or ts < earliest):
            earliest = ts
    clean_until = now - max(cfg.max_compaction_lag_ms, 0)
    delay = clean_until - earliest if earliest is not None and earliest < clean_until else 0
    needs_now = delay > 0
    compact = cfg.compact
    min_ratio = cfg.min_cleanable_dirty_ratio
    if not compact:
        qualifies, reason = False, f"cleanup.policy is {cfg.cleanup_policy!r}, not compact"
    elif total == 0 and log.size == 0:
        qualifies, reason = False, "the log is empty"
    elif needs_now and cleanable_bytes > 0:
        qualifies, reason = True, (f"a dirty segment is {delay} ms past max.compaction.lag.ms "
                                   f"({cfg.max_compaction_lag_ms} ms)")
    elif ratio > min_ratio:
        qualifies, reason = True, f"dirty ratio {ratio:.4f} > min.cleanable.dirty.ratio {min_ratio}"
    elif cleanable_bytes == 0:
        qualifies, reason = False, f"nothing is cleanable below offset {first_uncleanable} ({bound})"
    else:
        qualifies, reason = False, f"dirty ratio {ratio:.4f} <= min.cleanable.dirty.ratio {min_ratio}"
    return LogToClean(str(log.dir), first_dirty_offset, dirty, reset, first_uncleanable, bound, start, leo, lso,
                      active_base, clean_bytes, cleanable_bytes, total, ratio, min_ratio, delay, needs_now, compact,
                      qualifies, reason)


# =====================================================================================
# Results


@dataclass
class CleanStats:
    """Counters of one or several rounds (Kafka's ``CleanerStats`` and more)."""

    map_bytes_read: int = 0
    map_records_read: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_kept: int = 0
    batches_read: int = 0
    batches_kept: int = 0
    batches_rebuilt: int = 0
    batches_copied: int = 0
    empty_batches_retained: int = 0
    tombstones_removed: int = 0
    tombstones_expired: int = 0  # latest for their key but past their delete horizon
    tombstones_given_horizon: int = 0
    txn_markers_removed: int = 0
    txn_markers_given_horizon: int = 0
    aborted_records_removed: int = 0
    keyless_records_removed: int = 0

    @property
    def records_removed(self) -> int:
        return self.records_read - self.records_kept

    @property
    def batches_removed(self) -> int:
        return self.batches_read - self.batches_kept

    def to_dict(self) -> dict:
        d = asdict(self)
        d["records_removed"] = self.records_removed
        d["batches_removed"] = self.batches_removed
        return d


@dataclass
class SegmentGroup:
    """Source segments cleaned into one new segment at ``base_offset``."""

    base_offset: int
    segments: list[int]
    log_bytes: int

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class CleanResult:
    """What :func:`clean_log` did. ``checkpoint_offset`` is the new ``cleaner-offset-checkpoint``
    entry (the end offset of the last round; the reset first dirty offset when nothing was
    cleaned); the caller writes it."""

    directory: str
    cleaned: bool
    reason: str
    checkpoint_offset: int
    rounds: int = 0
    round_end_offsets: list[int] = field(default_factory=list)
    first_dirty_offset: int = 0
    first_uncleanable_offset: int = 0
    segments_before: int = 0
    segments_after: int = 0
    size_before: int = 0
    size_after: int = 0
    map_slots: int = 0
    map_utilization: float = 0.0  # of the last round
    elapsed_ms: float = 0.0
    stats: CleanStats = field(default_factory=CleanStats)
    cleanability: LogToClean | None = None
    groups: list[SegmentGroup] = field(default_factory=list)  # every round's, in order
    deleted_files: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        d = {k: v for k, v in asdict(self).items() if k not in ("stats", "cleanability")}
        d["stats"] = self.stats.to_dict()
        d["cleanability"] = None if self.cleanability is None else self.cleanability.to_dict()
        return d


# =====================================================================================
# Transaction state while cleaning (CleanedTransactionMetadata)


class _TxnTracker:
    """Which data batches belong to aborted transactions, and when markers may go.

    Aborted transactions (from the txn indexes) are consumed in first-offset order as the
    cleaner walks past their first offset. An ABORT marker is kept (and re-indexed into the
    cleaned segment's ``.txnindex``) while a batch of its transaction was seen in this
    pass; a COMMIT marker while a batch of its transaction was seen in this pass.
    """

    __slots__ = ("_heap", "_seq", "_committed", "_aborted", "cleaned_index")

    def __init__(self) -> None:
        self._heap: list = []
        self._seq = 0
        self._committed: set[int] = set()
        self._aborted: dict[int, list] = {}  # pid -> [AbortedTxn, last observed batch offset or None]
        self.cleaned_index = None

    def add_aborted(self, txns) -> None:
        for txn in txns:
            self._seq += 1
            heapq.heappush(self._heap, (txn.first_offset, self._seq, txn))

    def _consume_up_to(self, offset: int) -> None:
        heap = self._heap
        while heap and heap[0][0] <= offset:
            txn = heapq.heappop(heap)[2]
            if txn.producer_id not in self._aborted:
                self._aborted[txn.producer_id] = [txn, None]

    def on_control_batch(self, batch) -> bool:
        """True if the control batch may be discarded."""
        self._consume_up_to(batch.last_offset)
        records = batch.records()
        if not records:
            return True  # an empty control batch was already cleaned
        key = records[0].key
        try:
            _version, ctype = parse_control_key(key) if key is not None else (0, ControlRecordType.UNKNOWN)
        except Exception:
            return False
        pid = batch.producer_id
        if ctype == ControlRecordType.ABORT:
            meta = self._aborted.pop(pid, None)
            if meta is not None and meta[1] is not None:
                if self.cleaned_index is not None:
                    self.cleaned_index.append(meta[0])
                return False
            return True
        if ctype == ControlRecordType.COMMIT:
            if pid in self._committed:
                self._committed.discard(pid)
                return False
            return True
        return False

    def on_batch(self, batch) -> bool:
        """True if the data batch belongs to an aborted transaction."""
        heap = self._heap
        if heap and heap[0][0] <= batch.last_offset:
            self._consume_up_to(batch.last_offset)
        if batch.is_transactional:
            meta = self._aborted.get(batch.producer_id)
            if meta is not None:
                meta[1] = batch.last_offset
                return True
            self._committed.add(batch.producer_id)
        return False


def collect_aborted_transactions(log: Log, start_offset: int, upper_bound_offset: int) -> list:
    """``UnifiedLog.collectAbortedTransactions``: from the segment holding ``start_offset``
    on, the aborted transactions with ``last offset >= log start`` and ``first offset <
    upper_bound_offset``, stopping at the first segment whose search is complete."""
    found = []
    first = log.segments.floor(start_offset)
    if first is None:
        return found
    for seg in log.segments.values(first.base_offset):
        result = seg.txn_index.collect_aborted_txns(log.log_start_offset, upper_bound_offset)
        found.extend(result.aborted_transactions)
        if result.is_complete:
            break
    return found


# =====================================================================================
# Keys without values: what the map and the retention check need


def scan_keys(batch) -> list[tuple[int, bytes | None, bool]]:
    """``(offset, key, has_value)`` of every record of a batch (see :func:`keyed_records`).
    Raises CorruptRecordError when the records region does not hold ``records_count``
    records exactly."""
    flags, rows = keyed_records(batch)
    return [(offset, key, flags[value_at] != NULL_VALUE) for _, _, offset, _, key, value_at in rows]


#: ``flags[row[HEAD_VALUE_POSITION]] == NULL_VALUE`` marks a null value (a tombstone): in a v2
#: records region, valueLength -1 is the single byte 0x01 (zig-zag).
NULL_VALUE = 1
# A legacy record's value flag: index 1 of this holds NULL_VALUE, index 0 does not.
_LEGACY_VALUE_FLAGS = bytes((0, NULL_VALUE))


def keyed_records(batch) -> tuple[bytes, list[RecordHead]]:
    """``(flags, rows)``: what the offset map and the retention check read of a data batch,
    without values or headers (a batch is decoded in full only when it must be rebuilt).

    For a v2 batch the rows are its record heads and ``flags`` its records region; a
    legacy batch is decoded and its records given the heads' shape (offset, timestamp,
    key, and a value position into a two-byte flag table), so one loop reads both.
    """
    if batch.magic < 2:
        rows = [(None, None, r.offset, r.timestamp, r.key, 1 if r.value is None else 0) for r in batch.records()]
        return _LEGACY_VALUE_FLAGS, rows
    count = batch.records_count
    if count <= 0:
        return b"", []
    data = batch.records_payload()
    try:
        return data, record_heads(data, count, batch.base_offset, batch.base_timestamp)
    except FormatError as e:
        raise e.at(batch.position) if e.position is None else e


# =====================================================================================
# Reading segments in Kafka's I/O-buffer-sized chunks


class _ChunkReader:
    """Reads whole batches from a ``.log`` into a reused buffer of ``capacity`` bytes, the
    way the cleaner's ``readInto`` + ``MemoryRecords.batches()`` do: a chunk is the run of
    whole batches that fits in the buffer from a position. A batch larger than the buffer
    grows it (doubling, as ``growBuffers``); :meth:`restore` shrinks it back."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._buf = bytearray(capacity)

    def restore(self) -> None:
        if len(self._buf) > self.capacity:
            self._buf = bytearray(self.capacity)

    def read(self, f, position: int, end: int) -> list:
        """The whole batches at ``[position, end)`` that fit in the buffer (at least one if
        any batch starts at ``position``); [] at the end."""
        while True:
            want = min(len(self._buf), end - position)
            if want <= 0:
                return []
            f.seek(position)
            view = memoryview(self._buf)[:want]
            got = f.readinto(view)
            it = BatchIterator(view[:got], base_position=position)
            batches = list(it)
            if batches:
                return batches
            tail = it.trailing
            if tail is None or tail.declared_size is None or position + tail.declared_size > end:
                raise CorruptRecordError(
                    f"Log segment may be corrupt: no whole batch at position {position} of {f.name}", position)
            size = len(self._buf)
            while size < tail.declared_size:
                size *= 2
            self._buf = bytearray(size)


# =====================================================================================
# The cleaner


class _ExactOffsetMap:
    """A dict with :class:`SkimpyOffsetMap`'s interface and no size limit (for planning)."""

    def __init__(self) -> None:
        self._d: dict[bytes, int] = {}
        self._latest = -1
        self.slots = 0

    size = property(lambda self: len(self._d))
    latest_offset = property(lambda self: self._latest)
    capacity = property(lambda self: 1 << 62)
    utilization = property(lambda self: 0.0)

    def clear(self) -> None:
        self._d.clear()
        self._latest = -1

    def update_latest_offset(self, offset: int) -> None:
        self._latest = offset

    def put_hash(self, h: bytes, offset: int) -> None:
        self._d[h] = offset
        self._latest = offset

    def get_hash(self, h: bytes) -> int:
        return self._d.get(h, -1)


def _index_bytes(index) -> int:
    """``sizeInBytes`` of an index; 0 for one whose file does not exist (never written),
    without creating it (planning must not touch the directory)."""
    exists = getattr(index, "exists", True)
    return index.size_in_bytes if exists else 0


def group_segments_by_size(segments: list[LogSegment], max_size: int, max_index_size: int,
                           first_uncleanable_offset: int) -> list[list[LogSegment]]:
    """Kafka's ``groupSegmentsBySize``: greedy runs of segments whose ``.log`` sizes sum to at
    most ``segment.bytes``, whose offset and time index sizes each sum to at most
    ``segment.index.bytes``, and whose offsets stay within 2^31-1 of the group's base (an
    empty segment always joins)."""
    groups = []
    i, n = 0, len(segments)
    while i < n:
        first = segments[i]
        group = [first]
        log_size = first.size
        index_size = _index_bytes(first.offset_index)
        time_size = _index_bytes(first.time_index)
        i += 1
        while i < n:
            cand = segments[i]
            last_offset = segments[i + 1].base_offset - 1 if i + 1 < n else first_uncleanable_offset - 1
            if not (log_size + cand.size <= max_size
                    and index_size + _index_bytes(cand.offset_index) <= max_index_size
                    and time_size + _index_bytes(cand.time_index) <= max_index_size
                    and (cand.size == 0 or last_offset - first.base_offset <= INT_MAX)):
                break
            group.append(cand)
            log_size += cand.size
            index_size += _index_bytes(cand.offset_index)
            time_size += _index_bytes(cand.time_index)
            i += 1
        groups.append(group)
    return groups


class _Crash(BaseException):
    """Raised by test hooks to simulate a kill; never caught here."""


class _Cleaner:
    """One cleaning pass machinery shared by :func:`clean_log` and :func:`explain_compaction`.

    ``write=False`` runs every decision and encodes rebuilt batches (to count their bytes)
    but writes nothing.
    """

    def __init__(self, log: Log, omap, *, now: int, io_buffer_size: int, write: bool, progress: Progress | None,
                 stats: CleanStats):
        self.log = log
        self.cfg = log.config
        self.map = omap
        self.now = now
        self.write = write
        self.progress = progress
        self.stats = stats
        # Kafka splits log.cleaner.io.buffer.size into a read and a write buffer per thread.
        self.io_capacity = max(io_buffer_size // 2, 1)
        self.reader = _ChunkReader(self.io_capacity)
        self.deleted_files: list[str] = []
        self.file_delete_delay_ms = 0
        self.hook: Callable[[str], None] | None = None

    # -- 1. the offset map --------------------------------------------------------------

    def build_offset_map(self, start: int, end: int) -> bool:
        """Fill the map from ``[start, end)``; True if it filled up (the round ends early)."""
        omap = self.map
        omap.clear()
        log = self.log
        dirty = log.segments.values(start, end) if start != end else []
        if not dirty:
            return False
        nexts = [s.base_offset for s in dirty[1:]] + [end]
        tracker = _TxnTracker()
        tracker.add_aborted(collect_aborted_transactions(log, start, end))
        max_desired = omap.capacity
        md5 = hashlib.md5
        put = omap.put_hash
        stats = self.stats
        progress = self.progress
        for seg, next_start in zip(dirty, nexts):
            # An index file that does not exist has no entries: scan from the start.
            position = seg.offset_index.lookup(start).position if seg.offset_index.exists else 0
            end_pos = seg.size
            with open(seg.log_path, "rb", buffering=0) as f:
                while position < end_pos:
                    batches = self.reader.read(f, position, end_pos)
                    if not batches:
                        break
                    for batch in batches:
                        if batch.is_control:
                            tracker.on_control_batch(batch)
                            stats.map_records_read += 1
                        elif tracker.on_batch(batch):
                            stats.map_records_read += batch.records_count or 0
                        else:
                            for _, _, offset, _, key, _ in keyed_records(batch)[1]:
                                if key is not None and offset >= start:
                                    if omap.size < max_desired:
                                        put(md5(key).digest(), offset)
                                    else:
                                        self.reader.restore()
                                        return True
                                stats.map_records_read += 1
                        if batch.last_offset >= start:
                            omap.update_latest_offset(batch.last_offset)
                    read = batches[-1].position + batches[-1].size_in_bytes - position
                    position += read
                    stats.map_bytes_read += read
                    if progress is not None:
                        progress(read)
            omap.update_latest_offset(next_start - 1)
            self.reader.restore()
        return False

    # -- 2. one round -----------------------------------------------------------------------

    def clean_round(self, first_dirty: int, first_uncleanable: int) -> tuple[int, list[SegmentGroup]]:
        """Map ``[first_dirty, first_uncleanable)``, then clean the segments below the map's
        end. Returns (end offset, groups)."""
        log = self.log
        self.build_offset_map(first_dirty, first_uncleanable)
        end_offset = self.map.latest_offset + 1
        below = log.segments.values(0, first_dirty) if first_dirty > 0 else []
        legacy_horizon = below[-1].last_modified - self.cfg.delete_retention_ms if below else 0
        if end_offset <= first_dirty:
            return end_offset, []
        groups = group_segments_by_size(log.segments.values(0, end_offset), self.cfg.segment_bytes,
                                        self.cfg.segment_index_bytes, first_uncleanable)
        tracker = _TxnTracker()
        out = []
        for group in groups:
            out.append(SegmentGroup(group[0].base_offset, [s.base_offset for s in group], sum(s.size for s in group)))
            self.clean_segments(group, tracker, legacy_horizon, first_uncleanable)
        return end_offset, out

    def clean_segments(self, group: list[LogSegment], tracker: _TxnTracker, legacy_horizon: int,
                       upper_bound: int) -> None:
        log = self.log
        base = group[0].base_offset
        dest = None
        if self.write:
            _delete_cleaned_files(log.dir, base)
            dest = LogSegment(log.dir, base, index_interval_bytes=self.cfg.index_interval_bytes,
                              max_index_size=self.cfg.segment_index_bytes, file_suffix=CLEANED_SUFFIX,
                              time_source=log._now)
            tracker.cleaned_index = dest.txn_index
        else:
            tracker.cleaned_index = None
        swapping = False
        try:
            active = {}
            psm = log.producer_state
            if psm is not None:
                for pid, entry in psm.producers.items():
                    active[pid] = (entry.last_data_offset, entry.producer_epoch)
            for i, seg in enumerate(group):
                upper = group[i + 1].base_offset if i + 1 < len(group) else seg.read_next_offset()
                tracker.add_aborted(collect_aborted_transactions(log, seg.base_offset, upper))
                retain_legacy = seg.last_modified > legacy_horizon
                self.clean_into(seg, dest, tracker, active, retain_legacy, upper_bound)
            if dest is None:
                return
            self._step("cleaned-written")
            dest.on_become_inactive_segment()
            dest.flush()
            dest.set_last_modified(group[-1].last_modified)
            swapping = True
            self.replace_segments(dest, group)
        except BaseException as e:
            # Before the swap the old segments are untouched: drop the half-written
            # .cleaned files. Once renames began, the loader must finish them instead.
            if dest is not None and not swapping and not isinstance(e, _Crash):
                dest.delete_if_exists()
            raise

    # -- 3. filtering (MemoryRecords.filterTo with the cleaner's filter) ---------------------

    def clean_into(self, source: LogSegment, dest: LogSegment | None, tracker: _TxnTracker, active: dict,
                   retain_legacy: bool, upper_bound: int) -> None:
        stats = self.stats
        progress = self.progress
        capacity = self.io_capacity
        end_pos = source.size
        position = 0
        with open(source.log_path, "rb", buffering=0) as f:
            while position < end_pos:
                batches = self.reader.read(f, position, end_pos)
                if not batches:
                    break
                out = bytearray()
                max_offset = -1
                max_ts, max_ts_offset = -1, -1
                read = 0
                for batch in batches:
                    read += batch.size_in_bytes
                    result = self.filter_batch(batch, tracker, active, retain_legacy, upper_bound)
                    if result is None:
                        continue
                    data, b_max_offset, b_max_ts, b_ts_offset = result
                    out += data
                    if b_max_offset > max_offset:
                        max_offset = b_max_offset
                    if b_max_ts > max_ts:
                        max_ts, max_ts_offset = b_max_ts, b_ts_offset
                    if len(out) > capacity:
                        # KAFKA-5316: the write buffer had to grow; the chunk ends here.
                        break
                position += read
                stats.bytes_read += read
                if progress is not None:
                    progress(read)
                if out:
                    stats.bytes_written += len(out)
                    if dest is not None:
                        dest.append(max_offset, max_ts, max_ts_offset if max_ts_offset >= 0 else max_offset, out)
                        self._step("append")
        self.reader.restore()

    def filter_batch(self, batch, tracker: _TxnTracker, active: dict, retain_legacy: bool, upper_bound: int):
        """One batch through the cleaner's filter. Returns None when the batch goes, else
        (bytes, max offset, max timestamp, offset of max timestamp)."""
        stats = self.stats
        now = self.now
        stats.batches_read += 1
        is_control = batch.is_control
        if is_control:
            can_discard = tracker.on_control_batch(batch)
            horizon = batch.delete_horizon_ms
            discard_records = can_discard and horizon is not None and horizon <= now
        else:
            can_discard = tracker.on_batch(batch)
            discard_records = can_discard
        pid = batch.producer_id
        last = active.get(pid) if pid >= 0 else None
        is_last_of_producer = False
        if last is not None:
            last_data_offset, epoch = last
            if last_data_offset >= 0:
                is_last_of_producer = batch.last_offset == last_data_offset
            else:
                is_last_of_producer = is_control and batch.producer_epoch == epoch
        if pid >= 0 and is_last_of_producer:
            retention = RETAIN_EMPTY
        elif batch.next_offset == upper_bound:
            retention = RETAIN_EMPTY
        elif discard_records:
            retention = DELETE
        else:
            retention = DELETE_EMPTY
        marker_for_empty_txn = can_discard and is_control
        magic = batch.magic
        if retention == DELETE:
            if is_control:
                stats.txn_markers_removed += batch.records_count or 0
            else:
                stats.aborted_records_removed += batch.records_count or 0
            return None
        if is_control:
            records = batch.records()
            n = len(records)
            keep = [] if discard_records else list(range(n))
            tombstones = 0
        else:
            records = None
            flags, rows = keyed_records(batch)
            n = len(rows)
            keep = [] if discard_records else self._retained_indexes(batch, flags, rows, retain_legacy)
            tombstones = sum(1 for i in keep if flags[rows[i][HEAD_VALUE_POSITION]] == NULL_VALUE)
        stats.records_read += n
        if discard_records:
            if is_control:
                stats.txn_markers_removed += n
            else:
                stats.aborted_records_removed += n
        kept = len(keep)
        stats.records_kept += kept
        if kept:
            need_horizon = magic >= 2 and (tombstones or marker_for_empty_txn) and batch.delete_horizon_ms is None
            stats.batches_kept += 1
            if kept == n and not need_horizon:
                stats.batches_copied += 1
                return bytes(batch.buffer), batch.last_offset, batch.max_timestamp, batch.last_offset
            stats.batches_rebuilt += 1
            if records is None:
                records = batch.records()
            retained = records if kept == n else [records[i] for i in keep]
            max_offset = retained[-1][0]
            if magic >= 2:
                if need_horizon:
                    horizon = now + self.cfg.delete_retention_ms
                    stats.tombstones_given_horizon += tombstones
                    if is_control:
                        stats.txn_markers_given_horizon += kept
                else:
                    horizon = batch.delete_horizon_ms
                lat = batch.timestamp_type == LOG_APPEND_TIME
                data = encode_batch(
                    retained, base_offset=batch.base_offset, compression_codec=batch.compression,
                    timestamp_type=LOG_APPEND_TIME if lat else CREATE_TIME,
                    log_append_time=batch.max_timestamp if lat else None, producer_id=pid,
                    producer_epoch=batch.producer_epoch, base_sequence=batch.base_sequence,
                    is_transactional=batch.is_transactional, is_control=is_control,
                    partition_leader_epoch=batch.partition_leader_epoch, delete_horizon_ms=horizon,
                    last_offset_delta=batch.last_offset_delta)
                max_ts = max(r[1] for r in retained) if not lat else batch.max_timestamp
                return data, max_offset, max_ts, batch.last_offset
            return self._rebuild_legacy(batch, retained), max_offset, batch.max_timestamp, max_offset
        if retention == RETAIN_EMPTY and magic >= 2:
            stats.batches_kept += 1
            stats.empty_batches_retained += 1
            data = encode_empty_batch(
                base_offset=batch.base_offset, last_offset=batch.last_offset, producer_id=pid,
                producer_epoch=batch.producer_epoch, base_sequence=batch.base_sequence,
                max_timestamp=batch.max_timestamp, timestamp_type=batch.timestamp_type,
                is_transactional=batch.is_transactional, is_control=is_control,
                partition_leader_epoch=batch.partition_leader_epoch)
            return data, batch.last_offset, batch.max_timestamp, batch.last_offset
        return None

    def _retained_indexes(self, batch, flags: bytes, rows: list[RecordHead], retain_legacy: bool) -> list[int]:
        """``Cleaner.shouldRetainRecord`` over the :func:`keyed_records` of a data batch: the
        indexes of the records that stay."""
        omap = self.map
        latest = omap.latest_offset
        get = omap.get_hash
        md5 = hashlib.md5
        stats = self.stats
        if batch.magic >= 2:
            horizon = batch.delete_horizon_ms
            retain_deletes = horizon is None or self.now < horizon
        else:
            retain_deletes = retain_legacy
        keep = []
        append = keep.append
        for i, (_, _, offset, _, key, value_at) in enumerate(rows):
            if offset > latest:
                append(i)
                continue
            if key is None:
                stats.keyless_records_removed += 1
                continue
            if offset >= get(md5(key).digest()):
                if retain_deletes or flags[value_at] != NULL_VALUE:
                    append(i)
                else:
                    stats.tombstones_removed += 1
                    stats.tombstones_expired += 1
            elif flags[value_at] == NULL_VALUE:
                stats.tombstones_removed += 1
        return keep

    @staticmethod
    def _rebuild_legacy(batch, retained) -> bytes:
        lat = batch.timestamp_type == LOG_APPEND_TIME
        return encode_legacy_batch(
            [(r[0], r[1], r[2], r[3]) for r in retained], magic=batch.magic, compression_codec=batch.compression,
            timestamp_type=LOG_APPEND_TIME if lat else CREATE_TIME,
            log_append_time=batch.max_timestamp if lat else None, base_offset=retained[0][0])

    # -- 4. the swap (UnifiedLog/LocalLog.replaceSegments) ---------------------------------

    def _step(self, name: str) -> None:
        if self.hook is not None:
            self.hook(name)

    def replace_segments(self, new: LogSegment, old: list[LogSegment]) -> None:
        log = self.log
        directory = log.dir
        new.change_file_suffixes(CLEANED_SUFFIX, SWAP_SUFFIX)
        # The swap files must be durable before any old file is renamed away.
        fsync_dir(directory)
        self._step("swapped")
        replaced_not_new = []
        for seg in sorted(old, key=lambda s: s.base_offset):
            if seg.base_offset != new.base_offset:
                log.segments.remove(seg.base_offset)
                replaced_not_new.append(seg)
            seg.change_file_suffixes("", DELETED_SUFFIX)
            self._step("old-deleted")
            self._dispose(seg)
        new.change_file_suffixes(SWAP_SUFFIX, "")
        log.segments.add(new)
        fsync_dir(directory)
        self._step("renamed")
        psm = log.producer_state
        if psm is not None:
            for seg in replaced_not_new:
                path = psm.remove_and_mark_snapshot_for_deletion(seg.base_offset)
                if path is not None:
                    if self.file_delete_delay_ms == 0:
                        path.unlink(missing_ok=True)
                    self.deleted_files.append(path.name)

    def _dispose(self, seg: LogSegment) -> None:
        names = [p.name for p in (seg.log_path, seg.offset_index.path, seg.time_index.path, seg.txn_index.path)
                 if p.exists()]
        self.deleted_files.extend(names)
        if self.file_delete_delay_ms == 0:
            seg.delete_if_exists()
        else:
            seg.close_handlers()
            # A rename keeps the old mtime; the sweep (retention.sweep_deleted_files) counts
            # file.delete.delay.ms from the mtime, so it must be the time of the deletion.
            stamp = time.time_ns()
            for path in (seg.log_path, seg.offset_index.path, seg.time_index.path, seg.txn_index.path):
                try:
                    os.utime(path, ns=(stamp, stamp))
                except FileNotFoundError:
                    pass


def _delete_cleaned_files(directory: Path, base: int) -> None:
    for suffix in SEGMENT_FILE_SUFFIXES:
        (directory / file_name(base, suffix + CLEANED_SUFFIX)).unlink(missing_ok=True)


# =====================================================================================
# Public entry points


def clean_log(log: Log, *, first_dirty_offset: int | None, now: int | None = None,
              buffer_size: int = DEFAULT_BUFFER_SIZE, io_buffer_size: int = DEFAULT_IO_BUFFER_SIZE,
              load_factor: float = DEFAULT_LOAD_FACTOR, force: bool = False, max_rounds: int | None = None,
              file_delete_delay_ms: int | None = None, progress: Progress | None = None,
              _hook: Callable[[str], None] | None = None) -> CleanResult:
    """Compact ``log`` (opened writable; the caller holds its directory lock).

    ``first_dirty_offset``: the partition's ``cleaner-offset-checkpoint`` entry, or None.
    ``now``: the clean's wall-clock time in ms (delete horizons, compaction lags).
    ``buffer_size``: the offset map's bytes (``log.cleaner.dedupe.buffer.size``);
    ``io_buffer_size``: ``log.cleaner.io.buffer.size`` (half for reading, half for writing).
    ``force`` cleans even when the dirty ratio does not qualify (never a non-compacted log).
    Rounds repeat while the map filled before the first uncleanable offset, at most
    ``max_rounds`` (None: until done). ``file_delete_delay_ms`` (default: the log's
    ``file.delete.delay.ms``): 0 removes the replaced files at once, otherwise they are left
    as ``*.deleted`` for the caller to sweep.

    Raises :class:`CleanerBufferTooSmallError` when the map cannot hold even one batch.
    """
    started = time.perf_counter()
    now = log._now() if now is None else now
    ltc = log_to_clean(log, first_dirty_offset=first_dirty_offset, now=now)
    result = CleanResult(str(log.dir), False, ltc.reason, ltc.first_dirty_offset, cleanability=ltc,
                         first_dirty_offset=ltc.first_dirty_offset,
                         first_uncleanable_offset=ltc.first_uncleanable_offset,
                         segments_before=len(log.segments), size_before=log.size)
    can_force = force and ltc.compact_policy and ltc.total_bytes > 0
    if not ltc.qualifies and not can_force:
        result.segments_after, result.size_after = len(log.segments), log.size
        return _finish(result, started)
    if ltc.first_uncleanable_offset <= ltc.first_dirty_offset:
        result.reason = f"nothing is cleanable: the first uncleanable offset {ltc.first_uncleanable_offset} " \
                        f"is not above the first dirty offset {ltc.first_dirty_offset}"
        result.segments_after, result.size_after = len(log.segments), log.size
        return _finish(result, started)
    if not ltc.qualifies:
        result.reason = f"forced ({ltc.reason})"
    omap = SkimpyOffsetMap(buffer_size, load_factor)
    if omap.capacity < 1:
        raise CleanerBufferTooSmallError(
            f"offset map of {buffer_size} bytes holds {omap.slots} slots; at load factor {load_factor} it cannot "
            f"hold a single key")
    try:
        cleaner = _Cleaner(log, omap, now=now, io_buffer_size=io_buffer_size, write=True, progress=progress,
                           stats=result.stats)
        cleaner.file_delete_delay_ms = log.config.file_delete_delay_ms if file_delete_delay_ms is None \
            else file_delete_delay_ms
        cleaner.hook = _hook
        first_dirty, upper = ltc.first_dirty_offset, ltc.first_uncleanable_offset
        while True:
            end, groups = cleaner.clean_round(first_dirty, upper)
            result.groups.extend(groups)
            if end <= first_dirty:
                raise CleanerBufferTooSmallError(
                    f"the offset map ({buffer_size} bytes, {omap.capacity} keys) filled before the first batch at "
                    f"offset {first_dirty} of {log.dir} was mapped; give the cleaner a larger buffer")
            result.rounds += 1
            result.round_end_offsets.append(end)
            result.map_utilization = omap.utilization
            first_dirty = end
            if end >= upper or (max_rounds is not None and result.rounds >= max_rounds):
                break
    finally:
        omap.close()
    result.cleaned = True
    result.checkpoint_offset = first_dirty
    result.map_slots = omap.slots
    result.deleted_files = cleaner.deleted_files
    result.segments_after, result.size_after = len(log.segments), log.size
    return _finish(result, started)


def _finish(result: CleanResult, started: float) -> CleanResult:
    result.elapsed_ms = (time.perf_counter() - started) * 1000
    return result


@dataclass
class CompactionPlan:
    """A read-only simulation of one full clean (``--dry-run --explain``)."""

    cleanability: LogToClean
    would_clean: bool
    rounds_needed: int
    buffer_size: int
    map_capacity: int
    distinct_dirty_keys: int
    groups: list[SegmentGroup] = field(default_factory=list)
    stats: CleanStats = field(default_factory=CleanStats)

    def to_dict(self) -> dict:
        return {
            "cleanability": self.cleanability.to_dict(),
            "would_clean": self.would_clean,
            "rounds_needed": self.rounds_needed,
            "buffer_size": self.buffer_size,
            "map_capacity": self.map_capacity,
            "distinct_dirty_keys": self.distinct_dirty_keys,
            "groups": [g.to_dict() for g in self.groups],
            "stats": self.stats.to_dict(),
        }

    def explain_lines(self) -> list[str]:
        c, s = self.cleanability, self.stats
        lines = []
        if c.first_dirty_reset:
            lines.append(f"The first dirty offset is reset to {c.first_dirty_offset}: {c.first_dirty_reset}.")
        lines.append(f"Dirty section: offsets {c.first_dirty_offset} to {c.first_uncleanable_offset} "
                     f"(the first uncleanable offset, bounded by the {c.uncleanable_bound.replace('-', ' ')}).")
        lines.append(f"Clean bytes {c.clean_bytes}, cleanable bytes {c.cleanable_bytes}: dirty ratio "
                     f"{c.dirty_ratio:.4f} against min.cleanable.dirty.ratio {c.min_cleanable_dirty_ratio}.")
        if c.needs_compaction_now:
            lines.append(f"A dirty segment is {c.max_compaction_delay_ms} ms past max.compaction.lag.ms.")
        lines.append(("The log qualifies for cleaning: " if c.qualifies else "The log does not qualify: ") + c.reason
                     + ".")
        if not self.groups:
            return lines
        lines.append(f"{self.distinct_dirty_keys} distinct keys in the dirty section; the offset map holds "
                     f"{self.map_capacity} keys in {self.buffer_size} bytes, so the clean takes "
                     f"{self.rounds_needed} round{'s' if self.rounds_needed != 1 else ''}.")
        lines.append(f"{sum(len(g.segments) for g in self.groups)} segments would be rewritten into "
                     f"{len(self.groups)}.")
        lines.append(f"{s.records_removed} of {s.records_read} records ({s.bytes_read - s.bytes_written} of "
                     f"{s.bytes_read} bytes) would be removed; {s.batches_copied} batches copied unchanged, "
                     f"{s.batches_rebuilt} rebuilt, {s.batches_removed} removed.")
        if s.tombstones_expired:
            lines.append(f"{s.tombstones_expired} tombstones are past their delete horizon and would be removed.")
        if s.tombstones_given_horizon:
            lines.append(f"{s.tombstones_given_horizon} tombstones would get a delete horizon of now + "
                         f"delete.retention.ms.")
        if s.aborted_records_removed:
            lines.append(f"{s.aborted_records_removed} records of aborted transactions would be removed.")
        if s.txn_markers_removed:
            lines.append(f"{s.txn_markers_removed} transaction markers would be removed.")
        if s.keyless_records_removed:
            lines.append(f"{s.keyless_records_removed} records without a key would be removed.")
        if s.empty_batches_retained:
            lines.append(f"{s.empty_batches_retained} emptied batches would stay as headers (producer state).")
        return lines


def explain_compaction(log: Log, *, first_dirty_offset: int | None, now: int | None = None,
                       buffer_size: int = DEFAULT_BUFFER_SIZE, io_buffer_size: int = DEFAULT_IO_BUFFER_SIZE,
                       load_factor: float = DEFAULT_LOAD_FACTOR, progress: Progress | None = None) -> CompactionPlan:
    """What :func:`clean_log` would do, without writing anything: the cleanability numbers,
    how many rounds ``buffer_size`` needs, and the removals of a complete clean (the record
    survivors of several rounds are those of one round with a large enough map)."""
    now = log._now() if now is None else now
    ltc = log_to_clean(log, first_dirty_offset=first_dirty_offset, now=now)
    plan = CompactionPlan(ltc, ltc.qualifies, 0, buffer_size, int((buffer_size // 24) * load_factor), 0)
    if ltc.total_bytes == 0 or ltc.first_uncleanable_offset <= ltc.first_dirty_offset or not ltc.compact_policy:
        return plan
    exact = _ExactOffsetMap()
    sim = _Cleaner(log, exact, now=now, io_buffer_size=io_buffer_size, write=False, progress=progress,
                   stats=plan.stats)
    _end, groups = sim.clean_round(ltc.first_dirty_offset, ltc.first_uncleanable_offset)
    plan.groups = groups
    plan.distinct_dirty_keys = exact.size
    plan.rounds_needed = _count_rounds(log, ltc, buffer_size, load_factor, io_buffer_size)
    return plan


def _count_rounds(log: Log, ltc: LogToClean, buffer_size: int, load_factor: float, io_buffer_size: int) -> int:
    """Rounds a map of ``buffer_size`` bytes needs: map passes from the first dirty offset,
    each restarting where the previous one's map filled (no cleaning in between)."""
    omap = SkimpyOffsetMap(buffer_size, load_factor)
    if omap.capacity < 1:
        return 0
    mapper = _Cleaner(log, omap, now=0, io_buffer_size=io_buffer_size, write=False, progress=None,
                      stats=CleanStats())
    start, upper, rounds = ltc.first_dirty_offset, ltc.first_uncleanable_offset, 0
    try:
        while start < upper:
            mapper.build_offset_map(start, upper)
            end = omap.latest_offset + 1
            rounds += 1
            if end <= start:
                return 0  # the buffer cannot hold one key
            start = end
    finally:
        omap.close()
    return rounds


__all__ = [
    "CleanResult",
    "CleanStats",
    "CleanerBufferTooSmallError",
    "CleanerError",
    "CompactionPlan",
    "LogToClean",
    "SegmentGroup",
    "clean_log",
    "collect_aborted_transactions",
    "explain_compaction",
    "group_segments_by_size",
    "last_stable_offset",
    "log_to_clean",
]
