"""Opening a partition directory: Kafka's ``LogLoader.load`` as numbered passes.

1. **Temporary files.** Delete ``*.deleted`` files. Collect ``*.cleaned`` and ``*.swap``
   files; a ``.swap`` at or above the smallest ``.cleaned`` offset is from an interrupted
   split and is deleted; then every ``.cleaned`` file is deleted.
2. **Swap bounds.** Open each remaining ``.swap`` log as a segment: ``[min base, max next
   offset)`` is the range it replaces.
3. **Superseded segments.** Delete every non-swap file whose offset lies in that range
   (segments that were compacted or split but not yet renamed to ``.deleted``).
4. **Complete the swaps.** Rename every ``*.swap`` to its final name.
5. **Open segments** in file-name order. An index without its ``.log`` is an orphan and is
   deleted. A segment without an offset index, or with a txn index that fails its sanity
   check, is recovered even after a clean shutdown.
6. **Recover** the segments :func:`startup_recovery` names (the rule ``plog recover`` plans
   with and ``plog verify`` judges damage by): those of pass 5 and, only after an unclean
   shutdown (no ``.kafka_cleanshutdown``), every segment from the one holding the recovery
   point to the end. When a segment had to be
   truncated, every later segment is deleted (its data follows a hole). An offset index
   that refuses an entry (offsets going backwards) makes the whole segment invalid: it is
   truncated to its base offset, as Kafka's ``InvalidOffsetException`` handler does.
7. **Log end offset** = the last segment's next offset. If it is below the checkpointed
   log start offset, every segment is deleted.
8. **Empty log**: create an empty segment at the log start offset.
9. **Recovery point** = LEO after a clean shutdown, else ``min(checkpoint, LEO)``.
10. **Active segment**: its indexes are resized back to ``segment.index.bytes``.
11. **Leader epochs**: truncated to ``[log start, LEO)``; the log start offset is
    ``max(checkpoint, first segment base)``.
12. **Producer state**: stray snapshots removed, state rebuilt from the latest snapshot
    by replaying batches up to the LEO.

Offset overflow (KAFKA-6264, a segment whose offsets span more than 2^31) is split into
segments that fit, through ``.cleaned`` → ``.swap`` files, and loading starts over.
Every step is recorded in the returned ``Log.load_report``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable, Iterable

from plog.formats.errors import CorruptIndexError, FormatError

from plog.engine.storage.checkpoints import fsync_dir
from plog.engine.storage.log_config import LogConfig
from plog.engine.storage.discovery import log_start_offset_at_load
from plog.engine.storage.leader_epoch_cache import LeaderEpochCache
from plog.engine.errors import InvalidOffsetError, OffsetOverflowError
from plog.engine.storage.file_records import FileBatches
from plog.engine.storage.log import LoadReport, Log
from plog.engine.storage.segment import LogSegment, SegmentRecovery, segment_file_prefix
from plog.engine.storage.segments import LogSegments

DELETED = ".deleted"
CLEANED = ".cleaned"
SWAP = ".swap"
LOG = ".log"
INDEX_SUFFIXES = (".index", ".timeindex", ".txnindex")
SEGMENT_SUFFIXES = (LOG, *INDEX_SUFFIXES)
MAX_SPLIT_ROUNDS = 64


def _offset_of(name: str) -> int | None:
    head = name.split(".", 1)[0]
    return int(head) if head.isdigit() else None


# -- what a broker's start-up recovers (shared with plog recover's plan and plog verify) -------


def txn_index_problem(path: str | os.PathLike, base_offset: int) -> str | None:
    """Why ``TransactionIndex.sanityCheck`` fails on the file (None: it passes)."""
    from plog.engine.storage.index import TransactionIndex

    try:
        TransactionIndex(path, base_offset).sanity_check()
    except CorruptIndexError as e:
        return e.reason
    return None


def segment_recovery_reasons(*, has_offset_index: bool, txn_index_problem: str | None = None) -> list[str]:
    """Why a broker's start-up recovers a segment whatever the shutdown was
    (``LogLoader.loadSegmentFiles``: ``sanityCheck`` finds no offset index, or a transaction
    index entry below the segment's base offset). Empty: the segment's files are trusted."""
    reasons = []
    if not has_offset_index:
        reasons.append("no offset index")
    if txn_index_problem:
        reasons.append(f"corrupt transaction index ({txn_index_problem})")
    return reasons


def unflushed_reason(recovery_point: int) -> str:
    return f"holds or follows the recovery point {recovery_point} (unclean shutdown)"


def startup_recovery(base_offsets: Iterable[int], file_reasons: dict[int, list[str]], *, had_clean_shutdown: bool,
                     recovery_point: int, why: str | None = None) -> dict[int, list[str]]:
    """The segments a broker's start-up recovers, ``{base offset: reasons}`` in base order.

    The one notion of "what start-up revalidates" that the loader acts on, ``plog recover``
    plans with and ``plog verify`` judges damage by: after an unclean shutdown, every segment
    from the one holding ``recovery_point`` (``LogSegments.values(recoveryPoint)``: its floor,
    or every segment when it lies below the first) to the end, for ``why`` (by default
    :func:`unflushed_reason`); whatever the shutdown, each segment with ``file_reasons``
    (:func:`segment_recovery_reasons`). A segment not returned is trusted as it is on disk,
    damage included.
    """
    import bisect

    bases = sorted(base_offsets)
    first = len(bases) if had_clean_shutdown else max(bisect.bisect_right(bases, recovery_point) - 1, 0)
    out: dict[int, list[str]] = {}
    for i, base in enumerate(bases):
        reasons = list(file_reasons.get(base, ()))
        if i >= first:
            reasons.insert(0, why or unflushed_reason(recovery_point))
        if reasons:
            out[base] = reasons
    return out


def _strip(name: str, suffix: str) -> str:
    return name[: -len(suffix)] if name.endswith(suffix) else name


def load_log(directory: Path, config: LogConfig, *, log_start_offset: int = 0, recovery_point: int = 0,
             had_clean_shutdown: bool = True, writable: bool = True, time_source=None,
             force_recovery: Iterable[int] = (), progress: Callable[[int], None] | None = None) -> Log:
    """Open ``directory`` as Kafka's broker does at start-up; see the module docstring.

    ``writable=False`` opens without changing anything on disk (no recovery, no
    deletions, no index resizing): what the offline inspection commands need.
    ``force_recovery``: base offsets of segments to recover in pass 6 whatever the
    shutdown was (``plog recover`` asks this for segments with a zero-filled index);
    bases with no segment are ignored. ``progress(nbytes)`` is called with each recovered
    segment's size once it is validated.
    """
    report = LoadReport(str(directory), had_clean_shutdown)
    now = time_source or (lambda: int(time.time() * 1000))
    forced = frozenset(force_recovery)
    for _round in range(MAX_SPLIT_ROUNDS):
        try:
            return _load(directory, config, log_start_offset, recovery_point, had_clean_shutdown, writable, now,
                         report, forced, progress)
        except OffsetOverflowError as e:
            if not writable:
                raise
            _split_overflowed_segment(directory, config, e.segment_base, report, now)
    raise OffsetOverflowError(f"Gave up splitting overflowed segments in {directory}")


def _load(directory, config, log_start_checkpoint, recovery_point_checkpoint, clean, writable, now, report,
          forced=frozenset(), progress=None) -> Log:
    from plog.engine.storage.producer_state import ProducerStateManager

    if writable:
        directory.mkdir(parents=True, exist_ok=True)
        _complete_swaps_and_remove_temp_files(directory, config, report, now)
    segments = LogSegments()
    file_reasons: dict[int, list[str]] = {}
    # Pass 5: open segments; orphan indexes go.
    names = sorted(os.listdir(directory))
    logs = {n for n in names if n.endswith(LOG) and _offset_of(n) is not None}
    for name in names:
        if name.endswith(INDEX_SUFFIXES) and _offset_of(name) is not None:
            if f"{name.rsplit('.', 1)[0]}{LOG}" not in logs and writable:
                os.unlink(directory / name)
                report.deleted_files.append(name)
                report.actions.append(f"deleted orphan index {name}")
    for name in sorted(logs):
        base = _offset_of(name)
        segment = LogSegment.open(directory, base, config, writable=writable, time_source=now)
        has_index = segment.offset_index.path.exists()
        if not has_index:
            report.actions.append(f"{name}: no offset index, will rebuild")
        elif writable and not segment.time_index.path.exists():
            segment.time_index.resize(0)  # Kafka: a newly created time index starts empty
        txn_problem = None
        try:
            segment.txn_index.sanity_check()
        except CorruptIndexError as e:
            txn_problem = e.reason
            report.actions.append(f"{name}: corrupt transaction index ({e}), will rebuild")
        reasons = segment_recovery_reasons(has_offset_index=has_index, txn_index_problem=txn_problem)
        if base in forced and not reasons:
            reasons.append("revalidation requested")
            report.actions.append(f"{name}: revalidation requested, will rebuild its indexes")
        if reasons:
            file_reasons[base] = reasons
        segments.add(segment)

    producer_state = ProducerStateManager(directory) if writable else None
    epoch_cache = LeaderEpochCache(directory, persist=writable)
    log = Log(directory, config, segments, log_start_offset=log_start_checkpoint, recovery_point=recovery_point_checkpoint,
              next_offset=0, producer_state=producer_state, epoch_cache=epoch_cache, time_source=now, writable=writable,
              load_report=report)

    # Pass 6: recovery from the recovery point.
    if writable:
        needs_recovery = startup_recovery(segments.base_offsets, file_reasons, had_clean_shutdown=clean,
                                          recovery_point=recovery_point_checkpoint)
        _recover_segments(log, list(needs_recovery), report, progress)

    # Pass 7: log end offset.
    last = segments.last
    log_end = last.read_next_offset() if last is not None else log_start_checkpoint
    if last is not None and log_end < log_start_checkpoint and writable:
        report.actions.append(f"log end offset {log_end} is below the log start offset {log_start_checkpoint}: "
                              "deleting every segment")
        for seg in list(segments):
            segments.remove(seg.base_offset)
            seg.delete_if_exists()
        epoch_cache.clear()
        last = None
    # Pass 8: an empty log gets an empty segment.
    if last is None:
        if not writable:
            raise FileNotFoundError(f"no segments in {directory}")
        segments.add(LogSegment.open(directory, log_start_checkpoint, config, time_source=now))
        log_end = log_start_checkpoint
        report.actions.append(f"created an empty segment at {log_start_checkpoint}")
    log.log_end_offset = log_end
    log.high_watermark = log_end
    # Pass 9: recovery point.
    log.recovery_point = log_end if clean else min(recovery_point_checkpoint, log_end)
    # Pass 10: the active segment's indexes get their preallocated size back.
    if writable:
        segments.last.resize_indexes(config.segment_index_bytes)
    # Pass 11: leader epochs and the log start offset.
    log.log_start_offset = log_start_offset_at_load(log_start_checkpoint, segments.first.base_offset)
    if writable:
        epoch_cache.truncate_from_end(log_end)
        epoch_cache.truncate_from_start(log.log_start_offset)
    # Pass 12: producer state.
    if producer_state is not None:
        producer_state.remove_stray_snapshots(segments.base_offsets)
        rebuild_producer_state(producer_state, segments, log.log_start_offset, log_end, reload_from_clean_shutdown=clean)
    report.log_start_offset = log.log_start_offset
    report.log_end_offset = log_end
    report.recovery_point = log.recovery_point
    report.segments = len(segments)
    return log


def _recover_segments(log: Log, bases: list[int], report: LoadReport, progress=None) -> None:
    """Pass 6: recover each segment in ``bases`` (ascending) as ``LogLoader.recoverSegment``.

    Each segment gets a fresh producer state rebuilt up to its base offset from the
    snapshots on disk (which deletes the snapshots above that base and writes new ones at
    the bases Kafka snapshots), is recovered against it, and leaves a snapshot at its end.
    Doing it per segment, rather than carrying one state forward, is what makes the
    snapshot files byte-identical to a broker's: a reload drops expired producers and the
    rebuild writes its snapshots at exactly the offsets Kafka's does.

    An ``InvalidOffsetError`` (an index refusing an offset that goes backwards) empties
    the segment (``truncateTo(baseOffset)``) and takes no snapshot, as Kafka's handler.
    """
    from plog.engine.storage.producer_state import ProducerStateManager

    segments = log.segments
    for base in bases:
        segment = segments.get(base)
        if segment is None:
            continue
        psm = ProducerStateManager(log.dir)
        rebuild_producer_state(psm, segments, log.log_start_offset, base, reload_from_clean_shutdown=False)
        size = segment.size
        doomed: list = []

        def doom_later_segments(base=base, doomed=doomed) -> None:
            # Crash safety: the segments after a truncation are renamed *.deleted (and the
            # directory fsynced) BEFORE the segment is cut. Cut first, a crash would leave a
            # clean-looking short segment followed by the later ones after a hole, and the
            # next recovery would keep them; renamed first, the next load removes them and
            # finds the damage again.
            if doomed:
                return
            for later in [s for s in segments if s.base_offset > base]:
                segments.remove(later.base_offset)
                later.change_file_suffixes("", DELETED)
                doomed.append(later)
            if doomed:
                fsync_dir(log.dir)

        try:
            result = segment.recover(psm, log.epoch_cache, before_truncate=doom_later_segments)
        except InvalidOffsetError as e:
            doom_later_segments()
            removed = segment.truncate_to(base)
            result = SegmentRecovery(base, valid_bytes=0, truncated_bytes=removed,
                                     error=f"invalid offset during recovery, the segment is emptied ({e})",
                                     error_position=0, next_offset=base)
        else:
            # Kafka snapshots once the segment's data is recovered so that recovering the
            # next segment does not replay this one again.
            psm.take_snapshot(sync=True)
        if progress is not None:
            progress(size)
        report.recovered_segments.append(result)
        report.actions.append(
            f"recovered {segment.log_path.name}: {result.batches} batches, {result.valid_bytes} valid bytes"
            + (f", truncated {result.truncated_bytes} bytes at position {result.error_position} ({result.error})"
               if result.truncated_bytes else ""))
        if result.truncated_bytes > 0:
            report.truncated_bytes += result.truncated_bytes
            doom_later_segments()
            for later in doomed:
                later.delete_if_exists()
                report.deleted_files.append(later.log_path.name)
                report.actions.append(f"deleted {later.log_path.name} after the truncation in {segment.log_path.name}")
            break


def rebuild_producer_state(psm, segments, log_start_offset: int, last_offset: int, *,
                           reload_from_clean_shutdown: bool, now_ms: int | None = None) -> None:
    """``UnifiedLog.rebuildProducerState``: bring ``psm`` to ``last_offset``.

    Snapshots are written at the base offsets of the last two segments (when the replay
    passes them) and at ``last_offset``, so the next load replays at most the active
    segment. After a clean shutdown with no snapshot at all (a log from before producer
    state existed) nothing is replayed; empty snapshots are written at those offsets.
    Otherwise the latest snapshot at or below ``last_offset`` is loaded (snapshots outside
    ``(log_start_offset, last_offset]`` are deleted) and the batches after it replayed.
    """
    from plog.engine.storage.producer_state import load_producers_from_batches

    bases = segments.base_offsets
    marks = [*bases[-2:], last_offset]
    if reload_from_clean_shutdown and psm.latest_snapshot_offset is None:
        for mark in marks:
            psm.update_map_end_offset(mark)
            psm.take_snapshot(sync=True)
        return
    # Kafka skips the replay when the state was empty and already at or past the target
    # (a truncation of a log no idempotent producer ever wrote to).
    was_empty = psm.is_empty() and psm.map_end_offset >= last_offset
    psm.truncate_and_reload(log_start_offset, last_offset, int(time.time() * 1000) if now_ms is None else now_ms)
    if last_offset > psm.map_end_offset and not was_empty:
        last_segment = segments.floor(last_offset)
        for segment in segments.values(psm.map_end_offset, last_offset):
            start = max(segment.base_offset, psm.map_end_offset, log_start_offset)
            psm.update_map_end_offset(start)
            if segment.base_offset in marks:
                psm.take_snapshot(sync=True)
            load_producers_from_batches(psm, _batches_between(segment, start, last_offset if segment is last_segment else None))
    psm.update_map_end_offset(last_offset)
    psm.take_snapshot(sync=True)


def _batches_between(segment, start_offset: int, stop_offset: int | None):
    """``segment.read(start_offset, maxPosition)``: the batches from the one holding
    ``start_offset`` up to, not including, the one holding ``stop_offset`` (to the end of
    the segment when None)."""
    first = segment.translate_offset(start_offset)
    if first is None:
        return
    for batch in segment.batches(first.position):
        if stop_offset is not None and batch.last_offset >= stop_offset:
            return
        yield batch


def complete_swaps_and_remove_temp_files(directory: Path, report: LoadReport | None = None) -> LoadReport:
    """Passes 1-4 alone (the temporary files of an interrupted clean, split or swap);
    ``load_log(writable=True)`` runs them first anyway. Returns the report it filled."""
    report = report if report is not None else LoadReport(str(directory), False)
    _complete_swaps_and_remove_temp_files(Path(directory), LogConfig(), report, None)
    return report


def _complete_swaps_and_remove_temp_files(directory: Path, config: LogConfig, report: LoadReport, now) -> None:
    names = os.listdir(directory)
    # Pass 1.
    cleaned, swaps = [], []
    for name in names:
        path = directory / name
        if not path.is_file():
            continue
        if name.endswith(DELETED) and not name.endswith(".checkpoint" + DELETED):
            path.unlink()
            report.deleted_files.append(name)
            report.actions.append(f"deleted {name}")
        elif name.endswith(CLEANED):
            cleaned.append(name)
        elif name.endswith(SWAP):
            swaps.append(name)
    min_cleaned = min((_offset_of(n) for n in cleaned if _offset_of(n) is not None), default=None)
    kept_swaps = []
    for name in swaps:
        off = _offset_of(name)
        if min_cleaned is not None and off is not None and off >= min_cleaned:
            (directory / name).unlink()
            report.deleted_files.append(name)
            report.actions.append(f"deleted {name} (an interrupted split)")
        else:
            kept_swaps.append(name)
    for name in cleaned:
        (directory / name).unlink()
        report.deleted_files.append(name)
        report.actions.append(f"deleted {name}")
    # Pass 2: the offset range the swap segments replace.
    swap_logs = [n for n in kept_swaps if _strip(n, SWAP).endswith(LOG)]
    if swap_logs:
        lo, hi = None, None
        for name in swap_logs:
            base = _offset_of(name)
            seg = LogSegment(directory, base, file_suffix=SWAP, writable=False)
            try:
                nxt = _next_offset_of_file(seg.log_path, base)
            finally:
                seg.close_handlers()
            lo = base if lo is None else min(lo, base)
            hi = nxt if hi is None else max(hi, nxt)
        # Pass 3: delete superseded non-swap files in [lo, hi).
        for name in os.listdir(directory):
            if name.endswith(SWAP) or not (directory / name).is_file():
                continue
            off = _offset_of(name)
            if off is not None and lo <= off < hi and name.endswith((*SEGMENT_SUFFIXES, ".snapshot")):
                (directory / name).unlink()
                report.deleted_files.append(name)
                report.actions.append(f"deleted {name}, replaced by a swap segment")
    # Pass 4: complete the swaps.
    for name in kept_swaps:
        os.replace(directory / name, directory / _strip(name, SWAP))
        report.actions.append(f"renamed {name} to {_strip(name, SWAP)}")


def _next_offset_of_file(path: Path, base: int) -> int:
    nxt = base
    try:
        for batch in FileBatches(path):
            nxt = batch.next_offset
    except FormatError:
        # A damaged swap segment ends where its valid batches end; its own recovery
        # (the segment is opened again after the rename) truncates the rest.
        pass
    return nxt


def _split_overflowed_segment(directory: Path, config: LogConfig, base: int | None, report: LoadReport, now) -> None:
    """KAFKA-6264: copy the batches of the segment at ``base`` into ``.cleaned`` segments
    whose offsets each fit 31 bits, then swap them in (``.cleaned`` → ``.swap`` →
    final) with the original renamed to ``.deleted``."""
    src = LogSegment(directory, base, writable=False)
    created: list[LogSegment] = []
    current: LogSegment | None = None
    try:
        for batch in FileBatches(src.log_path):
            if current is None or batch.last_offset - current.base_offset > (1 << 31) - 1:
                if current is not None:
                    current.on_become_inactive_segment()
                current = LogSegment(directory, batch.base_offset, file_suffix=CLEANED,
                                     index_interval_bytes=config.index_interval_bytes,
                                     max_index_size=config.segment_index_bytes)
                created.append(current)
            current.append(batch.last_offset, batch.max_timestamp, batch.last_offset, bytes(batch.buffer))
    finally:
        src.close_handlers()
    for seg in created:
        seg.on_become_inactive_segment()
        seg.flush()
    for seg in sorted(created, key=lambda s: -s.base_offset):
        seg.change_file_suffixes(CLEANED, SWAP)
        seg.close()
    for suffix in SEGMENT_SUFFIXES:
        path = directory / f"{segment_file_prefix(base)}{suffix}"
        if path.exists():
            os.replace(path, directory / f"{path.name}{DELETED}")
    report.actions.append(f"split overflowed segment {segment_file_prefix(base)}.log into {len(created)} segments")
