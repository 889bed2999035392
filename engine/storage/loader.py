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
Every step is recorded in the :class:`LoadReport` of the returned :class:`LoadedLog`, which
``Log`` is built from (``Log.load_report``): this module never imports ``log``.
"""

from __future__ import annotations

import bisect
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping, NamedTuple

from plog.formats.errors import CorruptIndexError, FormatError

from plog.engine.storage.checkpoints import fsync_dir
from plog.engine.storage.log_config import LogConfig
from plog.engine.storage.discovery import log_start_offset_at_load
from plog.engine.storage.leader_epoch_cache import LeaderEpochCache
from plog.engine.errors import InvalidOffsetError, OffsetOverflowError
from plog.engine.storage.file_names import (
    CLEANED_FILE_SUFFIX,
    DELETED_FILE_SUFFIX,
    INDEX_FILE_SUFFIXES,
    LOG_FILE_SUFFIX,
    PRODUCER_SNAPSHOT_FILE_SUFFIX,
    SEGMENT_FILE_SUFFIXES,
    SWAP_FILE_SUFFIX,
    file_name,
    file_offset,
    is_deleted_file,
    sibling_file,
    strip_temporary_suffix,
)
from plog.engine.storage.file_records import FileBatches
from plog.engine.storage.transaction_index import TransactionIndex
from plog.engine.storage.producer_state import ProducerStateManager, load_producers_from_batches
from plog.engine.storage.segment import LogSegment, SegmentRecovery
from plog.engine.storage.segments import LogSegments

MAX_SPLIT_ROUNDS = 64


@dataclass
class LoadReport:
    """What opening the log found and did (filled by :func:`load`)."""

    directory: str
    clean_shutdown: bool
    actions: list[str] = field(default_factory=list)
    recovered_segments: list = field(default_factory=list)  # SegmentRecovery reports
    deleted_files: list[str] = field(default_factory=list)
    truncated_bytes: int = 0
    log_start_offset: int = 0
    log_end_offset: int = 0
    recovery_point: int = 0
    segments: int = 0


@dataclass
class LoadedLog:
    """What :func:`load` loaded, which ``Log`` is built from (Kafka's ``LoadedLogOffsets``
    with the segments and the state next to them). ``loaded_at_ms`` is the clock reading a
    log built from it starts its flush schedule at."""

    directory: Path
    config: LogConfig
    segments: LogSegments
    log_start_offset: int
    recovery_point: int
    log_end_offset: int
    producer_state: ProducerStateManager | None
    epoch_cache: LeaderEpochCache
    writable: bool
    time_source: Callable[[], int]
    loaded_at_ms: int
    report: LoadReport


# -- the files of a partition directory (passes 1-5, shared with plog recover's plan) ---------


class TempFileAction(NamedTuple):
    """What passes 1-4 do to one file: ``action`` is ``"delete"`` or ``"rename"`` (to
    ``target``); ``why`` is ``"deleted"`` (a ``*.deleted`` file), ``"split"`` (a ``.swap``
    at or above the smallest ``.cleaned`` offset: an interrupted split), ``"cleaned"``,
    ``"replaced"`` (a file the swap segments supersede) or ``"swap"`` (a swap completed)."""

    name: str
    action: str
    why: str
    target: str | None = None


def temp_file_actions(directory: Path, names: Iterable[str]) -> tuple[list[TempFileAction], tuple[int, int] | None]:
    """Passes 1-4 on paper over the regular files ``names`` of ``directory`` (taken in the
    order given): the actions in the order the loader takes them, and the offset range
    ``[lo, hi)`` the swap segments replace (None without a swap log). Only the swap logs
    are read (for their next offset)."""
    actions: list[TempFileAction] = []
    cleaned, swaps, rest = [], [], []
    for name in names:
        if is_deleted_file(name):
            actions.append(TempFileAction(name, "delete", "deleted"))
        elif name.endswith(CLEANED_FILE_SUFFIX):
            cleaned.append(name)
        elif name.endswith(SWAP_FILE_SUFFIX):
            swaps.append(name)
        else:
            rest.append(name)
    min_cleaned = min((o for o in map(file_offset, cleaned) if o is not None), default=None)
    kept = []
    for name in swaps:
        off = file_offset(name)
        if min_cleaned is not None and off is not None and off >= min_cleaned:
            actions.append(TempFileAction(name, "delete", "split"))
        else:
            kept.append(name)
    actions += [TempFileAction(name, "delete", "cleaned") for name in cleaned]
    swap_logs = [n for n in kept if strip_temporary_suffix(n).endswith(LOG_FILE_SUFFIX) and file_offset(n) is not None]
    bounds = None
    if swap_logs:
        lo = min(file_offset(n) for n in swap_logs)
        hi = max(next_offset_of_file(directory / n, file_offset(n)) for n in swap_logs)
        bounds = (lo, hi)
        for name in rest:
            off = file_offset(name)
            if off is not None and lo <= off < hi and name.endswith((*SEGMENT_FILE_SUFFIXES,
                                                                     PRODUCER_SNAPSHOT_FILE_SUFFIX)):
                actions.append(TempFileAction(name, "delete", "replaced"))
    actions += [TempFileAction(name, "rename", "swap", strip_temporary_suffix(name)) for name in kept]
    return actions, bounds


def log_file_names(names: Iterable[str]) -> list[str]:
    """The ``.log`` files among ``names`` that the loader opens as segments, in name order."""
    return sorted(n for n in names if n.endswith(LOG_FILE_SUFFIX) and file_offset(n) is not None)


def orphan_index_files(names: Iterable[str]) -> list[str]:
    """The index files among ``names`` whose segment has no ``.log`` (pass 5 deletes them)."""
    names = list(names)
    logs = set(log_file_names(names))
    return [n for n in names if n.endswith(INDEX_FILE_SUFFIXES) and file_offset(n) is not None
            and sibling_file(n, LOG_FILE_SUFFIX) not in logs]


def next_offset_of_file(path: Path, base: int) -> int:
    """The offset after the last valid batch of a ``.log`` file (its base when it has none)."""
    nxt = base
    try:
        for batch in FileBatches(path):
            nxt = batch.next_offset
    except FormatError:
        # A damaged swap segment ends where its valid batches end; its own recovery
        # (the segment is opened again after the rename) truncates the rest.
        pass
    return nxt


# -- what a broker's start-up recovers (shared with plog recover's plan and plog verify) -------


def txn_index_problem(path: str | os.PathLike, base_offset: int) -> str | None:
    """Why ``TransactionIndex.sanityCheck`` fails on the file (None: it passes)."""
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


def load(directory: Path, config: LogConfig, *, log_start_offset: int = 0, recovery_point: int = 0,
         had_clean_shutdown: bool = True, writable: bool = True, time_source=None,
         force_recovery: Iterable[int] = (), progress: Callable[[int], None] | None = None,
         prevalidated: Mapping[int, object] | None = None, live_reader: bool = False) -> LoadedLog:
    """Open ``directory`` as Kafka's broker does at start-up; see the module docstring.
    ``Log`` builds itself from what this returns (``plog.engine.storage.log.load_log``).

    ``writable=False`` opens without changing anything on disk (no recovery, no
    deletions, no index resizing): what the offline inspection commands need. With
    ``live_reader`` too, a view of a directory a writer may be using (a consumer's): its
    indexes are read as copies from the start, as the load itself reads them (a writer trims
    a mapped index under it at roll and close, which would fault).
    ``force_recovery``: base offsets of segments to recover in pass 6 whatever the
    shutdown was (``plog recover`` asks this for segments with a zero-filled index);
    bases with no segment are ignored. ``progress(nbytes)`` is called with each recovered
    segment's size once it is validated. ``prevalidated``: by base offset, the native walks
    ``plog recover``'s plan made of segments it recovers (``LogSegment.recover`` applies one
    instead of walking the file again when it holds).
    """
    report = LoadReport(str(directory), had_clean_shutdown)
    now = time_source or (lambda: int(time.time() * 1000))
    forced = frozenset(force_recovery)
    for _round in range(MAX_SPLIT_ROUNDS):
        try:
            return _load(directory, config, log_start_offset, recovery_point, had_clean_shutdown, writable, now,
                         report, forced, progress, prevalidated or {}, live_reader)
        except OffsetOverflowError as e:
            if not writable:
                raise
            _split_overflowed_segment(directory, config, e.segment_base, report, now)
    raise OffsetOverflowError(f"Gave up splitting overflowed segments in {directory}", path=str(directory))


def _load(directory, config, log_start_checkpoint, recovery_point_checkpoint, clean, writable, now, report,
          forced=frozenset(), progress=None, prevalidated=None, live_reader=False) -> LoadedLog:
    if writable:
        directory.mkdir(parents=True, exist_ok=True)
        _complete_swaps_and_remove_temp_files(directory, config, report, now)
    segments, file_reasons = _open_segments(directory, config, writable, now, report, forced, live_reader)
    loaded = LoadedLog(directory, config, segments, log_start_offset=log_start_checkpoint,
                       recovery_point=recovery_point_checkpoint, log_end_offset=0,
                       producer_state=ProducerStateManager(directory) if writable else None,
                       epoch_cache=LeaderEpochCache(directory, persist=writable), writable=writable,
                       time_source=now, loaded_at_ms=now(), report=report)
    # Pass 6: recovery from the recovery point.
    if writable:
        needs_recovery = startup_recovery(segments.base_offsets, file_reasons, had_clean_shutdown=clean,
                                          recovery_point=recovery_point_checkpoint)
        _recover_segments(loaded, list(needs_recovery), report, progress, prevalidated or {})
    # Passes 7-8: the log end offset (an empty log gets an empty segment).
    log_end = _log_end_offset(loaded, log_start_checkpoint)
    loaded.log_end_offset = log_end
    # Pass 9: recovery point.
    loaded.recovery_point = log_end if clean else min(recovery_point_checkpoint, log_end)
    # Pass 10: the active segment's indexes get their preallocated size back.
    if writable:
        segments.last.resize_indexes(config.segment_index_bytes)
    # Pass 11: leader epochs and the log start offset.
    loaded.log_start_offset = log_start_offset_at_load(log_start_checkpoint, segments.first.base_offset)
    if writable:
        loaded.epoch_cache.truncate_from_end(log_end)
        loaded.epoch_cache.truncate_from_start(loaded.log_start_offset)
    # Pass 12: producer state.
    producer_state = loaded.producer_state
    if producer_state is not None:
        producer_state.remove_stray_snapshots(segments.base_offsets)
        rebuild_producer_state(producer_state, segments, loaded.log_start_offset, log_end,
                               reload_from_clean_shutdown=clean)
    report.log_start_offset = loaded.log_start_offset
    report.log_end_offset = log_end
    report.recovery_point = loaded.recovery_point
    report.segments = len(segments)
    return loaded


def _open_segments(directory: Path, config: LogConfig, writable: bool, now, report: LoadReport,
                   forced: frozenset, live_reader: bool = False) -> tuple[LogSegments, dict[int, list[str]]]:
    """Pass 5: delete orphan indexes, open every segment, and say which ones a start-up
    recovers whatever the shutdown was (``{base offset: reasons}``)."""
    segments = LogSegments()
    file_reasons: dict[int, list[str]] = {}
    names = sorted(os.listdir(directory))
    if writable:
        for name in orphan_index_files(names):
            os.unlink(directory / name)
            report.deleted_files.append(name)
            report.actions.append(f"deleted orphan index {name}")
    for name in log_file_names(names):
        base = file_offset(name)
        segment = LogSegment.open(directory, base, config, writable=writable, live_reader=live_reader,
                                  time_source=now)
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
    return segments, file_reasons


def _log_end_offset(loaded: LoadedLog, log_start_checkpoint: int) -> int:
    """Passes 7-8: the last segment's next offset. Below the checkpointed log start offset,
    every segment is deleted; a log left without segments gets an empty one there."""
    segments, report = loaded.segments, loaded.report
    last = segments.last
    log_end = last.read_next_offset() if last is not None else log_start_checkpoint
    if last is not None and log_end < log_start_checkpoint and loaded.writable:
        report.actions.append(f"log end offset {log_end} is below the log start offset {log_start_checkpoint}: "
                              "deleting every segment")
        for seg in list(segments):
            segments.remove(seg.base_offset)
            seg.delete_if_exists()
        loaded.epoch_cache.clear()
        last = None
    if last is None:
        if not loaded.writable:
            raise FileNotFoundError(f"no segments in {loaded.directory}")
        segments.add(LogSegment.open(loaded.directory, log_start_checkpoint, loaded.config,
                                     time_source=loaded.time_source))
        log_end = log_start_checkpoint
        report.actions.append(f"created an empty segment at {log_start_checkpoint}")
    return log_end


def _recover_segments(loaded: LoadedLog, bases: list[int], report: LoadReport, progress=None,
                      prevalidated: Mapping[int, object] | None = None) -> None:
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
    segments = loaded.segments
    for base in bases:
        segment = segments.get(base)
        if segment is None:
            continue
        psm = ProducerStateManager(loaded.directory)
        rebuild_producer_state(psm, segments, loaded.log_start_offset, base, reload_from_clean_shutdown=False)
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
                later.change_file_suffixes("", DELETED_FILE_SUFFIX)
                doomed.append(later)
            if doomed:
                fsync_dir(loaded.directory)

        try:
            result = segment.recover(psm, loaded.epoch_cache, before_truncate=doom_later_segments,
                                     prevalidated=(prevalidated or {}).get(base))
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
    :func:`load` with ``writable=True`` runs them first anyway. Returns the report it filled."""
    report = report if report is not None else LoadReport(str(directory), False)
    _complete_swaps_and_remove_temp_files(Path(directory), LogConfig(), report, None)
    return report


#: What the load report says of each kind of :class:`TempFileAction`.
_TEMP_FILE_REPORTS = {
    "deleted": "deleted {name}",
    "split": "deleted {name} (an interrupted split)",
    "cleaned": "deleted {name}",
    "replaced": "deleted {name}, replaced by a swap segment",
    "swap": "renamed {name} to {target}",
}


def _complete_swaps_and_remove_temp_files(directory: Path, config: LogConfig, report: LoadReport, now) -> None:
    names = [name for name in os.listdir(directory) if (directory / name).is_file()]
    actions, _ = temp_file_actions(directory, names)
    for action in actions:
        if action.action == "rename":
            os.replace(directory / action.name, directory / action.target)
        else:
            (directory / action.name).unlink()
            report.deleted_files.append(action.name)
        report.actions.append(_TEMP_FILE_REPORTS[action.why].format(name=action.name, target=action.target))


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
                current = LogSegment(directory, batch.base_offset, file_suffix=CLEANED_FILE_SUFFIX,
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
        seg.change_file_suffixes(CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX)
        seg.close()
    for suffix in SEGMENT_FILE_SUFFIXES:
        path = directory / file_name(base, suffix)
        if path.exists():
            os.replace(path, directory / f"{path.name}{DELETED_FILE_SUFFIX}")
    report.actions.append(f"split overflowed segment {file_name(base, LOG_FILE_SUFFIX)} into {len(created)} segments")
