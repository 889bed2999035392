"""Kafka's log cleaner (compaction) for one partition (kafka-format.md §16).

The caller opens the :class:`~plog.engine.storage.log.Log` writable (holding the log directory's
``.lock``), reads the partition's ``cleaner-offset-checkpoint`` entry and passes it as
``first_dirty_offset``; it writes the returned :attr:`CleanResult.checkpoint_offset` back.

What happens, as Kafka's ``LogCleanerManager`` + ``Cleaner`` do it:

1. **Cleanability** (:func:`~plog.engine.maintenance.cleaner_manager.log_to_clean`, §16.2):
   the dirty section runs from the checkpointed first dirty offset to the first uncleanable
   offset, and the log qualifies by its dirty ratio or ``max.compaction.lag.ms``.
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
   for byte; others are rebuilt with the same header fields
   (:mod:`~plog.engine.maintenance.batch_filter`).
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

Native path: with the native module active the offset map is a
:class:`~plog.engine.maintenance.offset_map.NativeOffsetMap`, and the per-record work runs
natively one batch at a time (the map build's key hashing and puts, the filter's retention
check, the rebuild of an uncompressed v2 batch); control batches, legacy and empty
batches, compressed rebuilds and any batch the native framing refuses go through the
reference code (which raises its typed errors). Both paths write the same bytes.

Read-only planning: :func:`explain_compaction` simulates one full clean without writing.
The engine never prints; long operations report bytes through ``progress(nbytes)``.
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path
from typing import Callable

from plog.formats.batches import BatchIterator
from plog.formats.errors import CorruptRecordError
from plog.formats.record_keys import NULL_VALUE, keyed_records

from plog.engine.errors import CleanerBufferTooSmallError, CleanerError
from plog.engine.maintenance.batch_filter import RecordFilter, records_region
from plog.engine.maintenance.cleaned_transactions import CleanedTransactionMetadata, collect_aborted_transactions
from plog.engine.maintenance.cleaner_manager import (
    DEFAULT_BUFFER_SIZE,
    DEFAULT_IO_BUFFER_SIZE,
    LogToClean,
    log_to_clean,
)
from plog.engine.maintenance.cleaner_stats import CleanResult, CleanStats, CompactionPlan, SegmentGroup
from plog.engine.maintenance.offset_map import (
    BYTES_PER_ENTRY,
    DEFAULT_LOAD_FACTOR,
    ExactOffsetMap,
    NativeOffsetMap,
    new_offset_map,
)
from plog.engine.storage.checkpoints import fsync_dir
from plog.engine.storage.file_names import (
    CLEANED_FILE_SUFFIX as CLEANED_SUFFIX,
    DELETED_FILE_SUFFIX as DELETED_SUFFIX,
    SEGMENT_FILE_SUFFIXES,
    SWAP_FILE_SUFFIX as SWAP_SUFFIX,
    file_name,
)
from plog.engine.storage.log import Log
from plog.engine.storage.log_config import INT_MAX
from plog.engine.storage.segment import LogSegment

Progress = Callable[[int], None]


# =====================================================================================
# Keys without values (formats.record_keys): what the map and the retention check read


def scan_keys(batch) -> list[tuple[int, bytes | None, bool]]:
    """``(offset, key, has_value)`` of every record of a batch (see
    :func:`~plog.formats.record_keys.keyed_records`). Raises CorruptRecordError when the
    records region does not hold ``records_count`` records exactly."""
    flags, rows = keyed_records(batch)
    return [(offset, key, flags[value_at] != NULL_VALUE) for _, _, offset, _, key, value_at in rows]


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
        self.filter = RecordFilter(omap, now=now, config=self.cfg, stats=stats)
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
        tracker = CleanedTransactionMetadata()
        tracker.add_aborted(collect_aborted_transactions(log, start, end))
        max_desired = omap.capacity
        md5 = hashlib.md5
        put = omap.put_hash
        stats = self.stats
        progress = self.progress
        native_map = isinstance(omap, NativeOffsetMap)
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
                            mapped = self._map_native(batch, start, max_desired) if native_map else None
                            if mapped is not None:
                                counted, filled = mapped
                                stats.map_records_read += counted
                                if filled:
                                    self.reader.restore()
                                    return True
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

    def _map_native(self, batch, start: int, max_desired: int):
        """The native loop over one v2 data batch's records: ``(records counted, filled)``,
        or None where the reference loop runs (legacy or empty batches, a region the native
        framing refuses: the reference raises its typed error)."""
        count = batch.records_count
        if batch.magic < 2 or count is None or count <= 0:
            return None
        return self.map.map_records(records_region(batch), count, batch.base_offset, start, max_desired)

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
        tracker = CleanedTransactionMetadata()
        out = []
        for group in groups:
            out.append(SegmentGroup(group[0].base_offset, [s.base_offset for s in group], sum(s.size for s in group)))
            self.clean_segments(group, tracker, legacy_horizon, first_uncleanable)
        return end_offset, out

    def clean_segments(self, group: list[LogSegment], tracker: CleanedTransactionMetadata, legacy_horizon: int,
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

    def clean_into(self, source: LogSegment, dest: LogSegment | None, tracker: CleanedTransactionMetadata, active: dict,
                   retain_legacy: bool, upper_bound: int) -> None:
        stats = self.stats
        progress = self.progress
        capacity = self.io_capacity
        filter_batch = self.filter.filter_batch
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
                    result = filter_batch(batch, tracker, active, retain_legacy, upper_bound)
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
    omap = new_offset_map(buffer_size, load_factor)
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


def explain_compaction(log: Log, *, first_dirty_offset: int | None, now: int | None = None,
                       buffer_size: int = DEFAULT_BUFFER_SIZE, io_buffer_size: int = DEFAULT_IO_BUFFER_SIZE,
                       load_factor: float = DEFAULT_LOAD_FACTOR, progress: Progress | None = None) -> CompactionPlan:
    """What :func:`clean_log` would do, without writing anything: the cleanability numbers,
    how many rounds ``buffer_size`` needs, and the removals of a complete clean (the record
    survivors of several rounds are those of one round with a large enough map)."""
    now = log._now() if now is None else now
    ltc = log_to_clean(log, first_dirty_offset=first_dirty_offset, now=now)
    plan = CompactionPlan(ltc, ltc.qualifies, 0, buffer_size, int((buffer_size // BYTES_PER_ENTRY) * load_factor), 0)
    if ltc.total_bytes == 0 or ltc.first_uncleanable_offset <= ltc.first_dirty_offset or not ltc.compact_policy:
        return plan
    exact = ExactOffsetMap()
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
    omap = new_offset_map(buffer_size, load_factor)
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
    "CleanerBufferTooSmallError",
    "CleanerError",
    "clean_log",
    "explain_compaction",
    "group_segments_by_size",
    "scan_keys",
]
