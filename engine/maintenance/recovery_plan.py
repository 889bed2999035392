"""The recovery plan: what a broker's start-up (kafka-format.md §13) would do to each
partition, worked out read-only (:func:`~plog.engine.maintenance.recovery.plan_recovery`).

For every partition: the temporary files of an interrupted clean/split/swap and what
becomes of each, orphan indexes, which segments are revalidated and why, the indexes
rebuilt, and, by actually validating those segments' batches (streamed, never loaded
whole), the truncation recovery will make, the segments deleted after it, the
producer-state snapshots dropped, the new log end offset, recovery point and log start
offset, and the checkpoint values that change. Segments that are not revalidated are read
with ``plog verify``'s checks, and the damage found there is named
(:class:`~plog.engine.maintenance.recovery_report.UntouchedDamage`).

The plan made here is also what :func:`~plog.engine.maintenance.recovery.recover` acts on:
the loader's arguments are decided once, in :func:`plan_partition`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from plog.formats.errors import FormatError
from plog.formats.indexes import OFFSET_INDEX_ENTRY_SIZE, TIME_INDEX_ENTRY_SIZE

from plog.engine.errors import EngineError, RecoveryError
from plog.engine.maintenance.recovery_report import (
    REVALIDATED,
    CheckpointChange,
    FileAction,
    PartitionPlan,
    SegmentRevalidation,
    SnapshotDeletion,
    Truncation,
    UntouchedDamage,
)
from plog.engine.maintenance.salvage import MIN_CANDIDATE_CAP, loss_of_cut, plan_salvage, strict_scan
from plog.engine.maintenance.segment_recovery import (
    PlannedSegment,
    index_problem,
    kafka_scan,
    read_next_offset,
)
from plog.engine.storage.checkpoints import CleanShutdownFile
from plog.engine.storage.discovery import (
    classify,
    log_dirs,
    log_start_offset_at_load,
    read_checkpoints,
    segment_base_offset,
)
from plog.engine.storage.file_names import (
    CLUSTER_METADATA_TOPIC,
    INDEX_FILE_SUFFIXES as INDEX_SUFFIXES,
    LOG_FILE_SUFFIX,
    LOG_START_OFFSET_CHECKPOINT,
    PRODUCER_SNAPSHOT_FILE_SUFFIX,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    InvalidTopicError,
    file_name,
    file_offset,
    parse_partition_dir_name,
)
from plog.engine.storage.loader import (
    log_file_names,
    orphan_index_files,
    segment_recovery_reasons,
    startup_recovery,
    temp_file_actions,
    txn_index_problem,
)
from plog.engine.storage.log_config import LogConfig
from plog.engine.storage.recovery_walk import KEEP_BUDGET

Progress = Callable[[int], None]


# -- what a path designates ---------------------------------------------------------------------------


@dataclass
class LogDirTarget:
    path: Path
    partitions: list[Path]
    whole: bool  # every partition of the log dir (the marker is rewritten)
    from_segment: dict[str, int] = field(default_factory=dict)  # partition path -> base offset


def resolve_targets(path: str | os.PathLike) -> tuple[str, list[LogDirTarget]]:
    p = os.fspath(path)
    kind = classify(p)
    if kind == "segment":
        base = segment_base_offset(p)
        if base is None:
            raise RecoveryError(f"{p}: not a segment file (<20-digit base offset>.log and its indexes)", path=p)
        part = Path(os.path.abspath(p)).parent
        return kind, [LogDirTarget(part.parent, [part], False, {str(part): base})]
    if kind == "partition":
        part = Path(os.path.abspath(p))
        return kind, [LogDirTarget(part.parent, [part], False)]
    return kind, [LogDirTarget(Path(os.path.abspath(d.path)), [Path(os.path.abspath(x.path)) for x in d.partitions],
                                True) for d in log_dirs(p)]


def skip_reason(part: Path) -> tuple[str | None, str, str | None]:
    """(topic-partition, folder kind, why it is skipped or None)."""
    try:
        tp, kind = parse_partition_dir_name(part.name)
    except InvalidTopicError as e:
        return None, "unknown", f"not a partition folder ({e})"
    if tp.topic == CLUSTER_METADATA_TOPIC:
        return str(tp), kind, "the KRaft metadata log: Kafka's LogManager skips it, the Raft layer recovers it"
    if kind == "delete":
        return str(tp), kind, "marked for deletion (the broker deletes it)"
    if kind == "stray":
        return str(tp), kind, "a stray log (the broker deletes it)"
    return str(tp), kind, None


def _config_resolver(log_dir: Path, overrides: Mapping[str, str] | None):
    from plog.engine.storage.topic_configs import ConfigResolver

    try:
        return ConfigResolver(log_dir, overrides=overrides)
    except Exception:  # noqa: BLE001 - any unreadable metadata: Kafka's defaults still recover correctly
        return None


def _topic_config(resolver, topic: str | None) -> LogConfig:
    if resolver is None or topic is None:
        return LogConfig()
    try:
        return resolver.resolve(topic).config
    except Exception:  # noqa: BLE001 - see _config_resolver
        return LogConfig()


@dataclass
class LogDirState:
    target: LogDirTarget
    clean: bool
    recovery_points: dict
    log_starts: dict
    high_watermarks: dict
    resolver: object

    @classmethod
    def read(cls, target: LogDirTarget, clean: bool | None = None,
             overrides: Mapping[str, str] | None = None) -> "LogDirState":
        d = target.path
        if clean is None:
            clean = CleanShutdownFile(d).exists()
        if overrides:
            from plog.engine.storage.topic_configs import ConfigResolver

            ConfigResolver(d, overrides=overrides)  # unknown names raise ConfigError here, not later
        # Kafka treats an unreadable recovery-point or log-start checkpoint as empty, as
        # read_checkpoints does; the maps are copied because recovery changes them.
        checkpoints = read_checkpoints(d)
        return cls(target, clean, dict(checkpoints.recovery_points), dict(checkpoints.log_starts),
                   dict(checkpoints.high_watermarks), _config_resolver(d, overrides))


# -- planning one partition -------------------------------------------------------------------------


#: What the plan says of each kind of the loader's :class:`TempFileAction`.
_TEMP_FILE_REASONS = {
    "deleted": "a file deleted asynchronously (.deleted)",
    "split": "an interrupted split or clean (a .cleaned file at or below its offset): discarded",
    "cleaned": "an unfinished clean or split (.cleaned)",
    "replaced": "replaced by the swap segment(s) covering offsets [{lo}, {hi})",
    "swap": "completes an interrupted swap",
}


def _virtual_listing(directory: Path, plan: PartitionPlan) -> dict[str, str]:
    """Passes 1-4 of the loader on paper (:func:`~plog.engine.storage.loader.temp_file_actions`):
    record what happens to the temporary files and return the folder as it will be
    afterwards, ``{final name: name on disk now}``."""
    names = sorted(e.name for e in os.scandir(directory) if e.is_file())
    view = {n: n for n in names}
    actions, bounds = temp_file_actions(directory, names)
    lo, hi = bounds or (None, None)
    for action in actions:
        reason = _TEMP_FILE_REASONS[action.why].format(lo=lo, hi=hi)
        if action.action == "rename":
            plan.temp_files.append(FileAction(action.name, "rename", reason, action.target))
            view.pop(action.name)
            view[action.target] = action.name
        else:
            plan.temp_files.append(FileAction(action.name, "delete", reason))
            view.pop(action.name)
    return dict(sorted(view.items()))


def _partition_segments(directory: Path, view: dict[str, str], plan: PartitionPlan) -> list[PlannedSegment]:
    """The segments as the loader will open them, with their file-level reasons to be
    recovered: Kafka's (``loader.segment_recovery_reasons``) and plog's (an index with a
    zero-filled tail or a partial entry)."""
    for name in orphan_index_files(view):
        plan.orphan_indexes.append(FileAction(view[name], "delete", "an index without its .log"))
    segments = []
    for name in log_file_names(view):
        base = file_offset(name)
        prefix = name[: -len(LOG_FILE_SUFFIX)]
        seg = PlannedSegment(name, view[name], base, os.path.getsize(directory / view[name]))
        index, timeindex, txnindex = (f"{prefix}{s}" for s in INDEX_SUFFIXES)
        txn_problem = txn_index_problem(directory / view[txnindex], base) if txnindex in view else None
        seg.kafka = segment_recovery_reasons(has_offset_index=index in view, txn_index_problem=txn_problem)
        if index in view:
            problem = index_problem(directory / view[index], OFFSET_INDEX_ENTRY_SIZE, 1)
            if problem:
                seg.extra.append(f"offset index: {problem}")
        if timeindex in view:
            problem = index_problem(directory / view[timeindex], TIME_INDEX_ENTRY_SIZE, 2)
            if problem:
                seg.extra.append(f"time index: {problem}")
        segments.append(seg)
    return segments


def _index_actions(directory: Path, view: dict[str, str], plan: PartitionPlan, segments: list[PlannedSegment],
                   kept: int) -> None:
    """What happens to the indexes of the ``kept`` first segments: every index of a
    revalidated segment is rebuilt (``LogSegment.recover`` resets and refills them), saying
    why when the file is missing or unusable; a missing time index of a segment that is not
    revalidated is created empty, as Kafka's loader does."""
    for seg in segments[:kept]:
        prefix = seg.name[: -len(LOG_FILE_SUFFIX)]
        index, timeindex, txnindex = (f"{prefix}{s}" for s in INDEX_SUFFIXES)
        if not seg.reasons:
            if timeindex not in view:
                plan.index_rebuilds.append(FileAction(timeindex, "create", "missing: created empty, as Kafka does"))
            continue
        for name, entry, min_entries in ((index, OFFSET_INDEX_ENTRY_SIZE, 1), (timeindex, TIME_INDEX_ENTRY_SIZE, 2)):
            problem = "missing" if name not in view else index_problem(directory / view[name], entry, min_entries)
            plan.index_rebuilds.append(FileAction(name, "rebuild", problem or REVALIDATED))
        if txnindex in view:
            problem = next((r for r in seg.kafka if r.startswith("corrupt transaction index")), None)
            plan.index_rebuilds.append(FileAction(txnindex, "rebuild", problem or REVALIDATED))


def plan_partition(part: Path, state: LogDirState, *, all_segments: bool, salvage: bool,
                    progress: Progress | None = None, validate: bool = True,
                    check_progress: Progress | None = None) -> tuple[PartitionPlan, dict]:
    """Plan one partition; returns the plan and the private facts recovery needs
    (``forced`` bases, ``scans`` by segment name, ``first_base`` after recovery, and the
    ``start`` arguments of the loader's :func:`~plog.engine.storage.loader.startup_recovery`).
    ``validate=False`` stops after the file-level facts (no batch is read).
    ``progress(n)`` follows the validation of revalidated segments, ``check_progress(n)``
    the read of the others for damage recovery leaves untouched."""
    tp_name, kind, skipped = skip_reason(part)
    plan = PartitionPlan(str(part), tp_name, kind, skipped, clean_shutdown=state.clean)
    extra: dict = {"forced": [], "scans": {}, "segments": []}
    if tp_name is not None:
        tp = parse_partition_dir_name(part.name)[0]
        plan.recovery_point = state.recovery_points.get(tp, 0)
        plan.log_start_checkpoint = state.log_starts.get(tp)
        plan.log_start_offset = plan.log_start_checkpoint or 0
    if skipped:
        return plan, extra
    config = _topic_config(state.resolver, tp.topic if tp_name is not None else None)
    extra["config"] = config
    view = _virtual_listing(part, plan)
    segments = _partition_segments(part, view, plan)
    extra["segments"] = segments
    if segments:
        plan.log_start_offset = log_start_offset_at_load(plan.log_start_checkpoint, segments[0].base)
    from_segment = state.target.from_segment.get(str(part))
    # The loader's arguments, decided once: the run passes these very values to load_log.
    if all_segments:
        start = {"had_clean_shutdown": False, "recovery_point": 0, "why": "--all"}
    elif from_segment is not None:
        start = {"had_clean_shutdown": False, "recovery_point": from_segment,
                 "why": f"at or after the requested segment {file_name(from_segment)}"}
    else:
        start = {"had_clean_shutdown": state.clean, "recovery_point": plan.recovery_point, "why": None}
    extra["start"] = start
    if not start["had_clean_shutdown"]:
        plan.revalidate_from = start["recovery_point"]
    revalidated = startup_recovery([s.base for s in segments], {s.base: s.kafka + s.extra for s in segments},
                                   **start)
    for seg in segments:
        seg.reasons = revalidated.get(seg.base, [])
        if seg.extra and seg.reasons:
            extra["forced"].append(seg.base)  # plog's own reasons: the loader is told
        if seg.reasons:
            plan.revalidate.append(SegmentRevalidation(seg.name, seg.base, seg.size, list(seg.reasons)))
    plan.bytes_to_validate = sum(r.size for r in plan.revalidate)
    plan.bytes_to_check = sum(s.size for s in segments if not s.reasons)
    if not validate:
        _index_actions(part, view, plan, segments, len(segments))
        return plan, extra
    _predict_validation(part, plan, segments, config, salvage, extra, progress)
    kept = extra["cut"] + 1 if "cut" in extra else len(segments)
    _index_actions(part, view, plan, segments, kept)
    _predict_end_state(part, plan, segments, view, extra)
    _check_untouched(part, plan, segments[:kept], view, start, check_progress)
    return plan, extra


def _predict_validation(part: Path, plan: PartitionPlan, segments: list[PlannedSegment], config: LogConfig,
                        salvage: bool, extra: dict, progress: Progress | None) -> None:
    revalidated = {r.base_offset for r in plan.revalidate}
    cap = max(MIN_CANDIDATE_CAP, 2 * config.max_message_bytes)
    kept = 0  # bytes of native walks kept for the load (recovery_walk.KEEP_BUDGET)
    for i, seg in enumerate(segments):
        if seg.base not in revalidated:
            continue
        path = part / seg.disk
        is_last = i == len(segments) - 1
        if salvage:
            upper = None if is_last else segments[i + 1].base - 1
            strict = strict_scan(path, seg.base, seg.size, upper, cap)
            extra["scans"][seg.name] = strict
            if progress is not None:
                progress(seg.size)
            plan_salvage(plan, seg, strict, is_last, None if is_last else segments[i + 1].base)
            continue
        scan = kafka_scan(path, seg.base, seg.size, config.index_interval_bytes)
        if scan.prevalidated is not None:
            kept += scan.prevalidated.nbytes
            if kept > KEEP_BUDGET:
                scan.prevalidated = None  # the load walks this one again: memory stays bounded
        extra["scans"][seg.name] = scan
        if progress is not None:
            progress(seg.size)
        if scan.overflow:
            plan.offset_overflow.append(f"{seg.name}: {scan.overflow}")
        truncated = seg.size - scan.valid_bytes
        if truncated > 0:
            upper = None if is_last else segments[i + 1].base - 1
            plan.truncation = Truncation(seg.name, scan.valid_bytes, truncated, scan.kind or "invalid batch",
                                         scan.error or "", scan.next_offset,
                                         loss_of_cut(path, seg, upper, cap, scan.valid_bytes))
            for j, later in enumerate(segments[i + 1:], i + 1):
                prefix = later.name[: -len(LOG_FILE_SUFFIX)]
                nxt = segments[j + 1].base - 1 if j + 1 < len(segments) else None
                plan.deleted_segments.append(FileAction(later.name, "delete", f"follows the truncation in {seg.name}",
                                                        loss=loss_of_cut(part / later.disk, later, nxt, cap, 0)))
                for suffix in INDEX_SUFFIXES:
                    if (part / f"{prefix}{suffix}").exists():
                        plan.deleted_segments.append(FileAction(f"{prefix}{suffix}", "delete",
                                                                f"follows the truncation in {seg.name}"))
            extra["cut"] = i
            break


# -- the end state -----------------------------------------------------------------------------------


def _predict_end_state(part: Path, plan: PartitionPlan, segments: list[PlannedSegment], view: dict[str, str],
                       extra: dict) -> None:
    kept = segments[: extra["cut"] + 1] if "cut" in extra else list(segments)
    lso_ckpt = plan.log_start_checkpoint or 0  # LogManager: getOrElse(tp, 0)
    if kept:
        last = kept[-1]
        scan = extra["scans"].get(last.name)
        leo = scan.next_offset if scan is not None and scan.next_offset is not None else \
            read_next_offset(part, last, view)
        if leo < lso_ckpt:
            for seg in kept:
                plan.deleted_segments.append(FileAction(seg.name, "delete",
                                                        f"the log end offset {leo} is below the log start offset "
                                                        f"{lso_ckpt}"))
            kept = []
    if not kept:
        leo = lso_ckpt
        plan.empty_segment_created = True
        bases = [lso_ckpt]
    else:
        bases = [s.base for s in kept]
    extra["first_base"] = bases[0]
    plan.log_end_offset = leo
    plan.new_recovery_point = leo
    plan.new_log_start_offset = log_start_offset_at_load(plan.log_start_checkpoint, bases[0])
    names = {o: n for o, n in ((file_offset(n), n) for n in view if n.endswith(PRODUCER_SNAPSHOT_FILE_SUFFIX))
             if o is not None}
    deleted = _snapshot_deletions(part, view, names, bases, leo, plan.new_log_start_offset)
    plan.snapshots_deleted = [deleted[o] for o in sorted(deleted)]
    if leo > plan.new_log_start_offset and leo not in set(names) - set(deleted):
        plan.snapshot_written = file_name(leo, PRODUCER_SNAPSHOT_FILE_SUFFIX)


def _snapshot_deletions(part: Path, view: dict[str, str], names: dict[int, str], bases: list[int], leo: int,
                        log_start: int) -> dict[int, SnapshotDeletion]:
    """The producer snapshots the load deletes, by offset, with Kafka's reason:
    ``ProducerStateManager.removeStraySnapshots`` (stray), then ``truncateAndReload`` (out
    of range), then loading the latest (one that does not parse is deleted, unreadable)."""
    from plog.engine.storage.producer_state import read_snapshot, snapshot_out_of_range, stray_snapshots

    def name(o: int) -> str:
        return file_name(o, PRODUCER_SNAPSHOT_FILE_SUFFIX)

    out: dict[int, SnapshotDeletion] = {}
    for o, later in stray_snapshots(names, bases).items():
        why = (f"the later snapshot {name(later)} supersedes it" if later is not None else
               f"it lies below the last segment's base offset {max(bases)}")
        out[o] = SnapshotDeletion(name(o), "stray", f"stray: no segment starts at offset {o}, and {why}",
                                  routine=True)
    for o in sorted(names):
        if o in out or not snapshot_out_of_range(o, log_start, leo):
            continue
        if o > leo:
            out[o] = SnapshotDeletion(name(o), "out of range", f"out of range: above the log end offset {leo} "
                                      "(the producer state it holds covers records the log no longer has)")
        else:
            out[o] = SnapshotDeletion(name(o), "out of range", f"out of range: at or below the log start offset "
                                      f"{log_start}", routine=True)
    # A snapshot that does not parse is deleted when the producer state loads it (Kafka's
    # CorruptSnapshotException handling), and the one before it is used instead.
    for o in sorted(names):
        if o not in out:
            try:
                read_snapshot(part / view[names[o]])
            except (FormatError, OSError, ValueError, EngineError) as e:
                why = e.reason if isinstance(e, FormatError) else str(e)
                out[o] = SnapshotDeletion(name(o), "unreadable", f"unreadable: {why}")
    return out


def _why_untouched(start: dict) -> str:
    """Why recovery leaves a segment as it is (the loader's ``startup_recovery`` arguments)."""
    if start["had_clean_shutdown"]:
        return ("the log directory was shut down cleanly (.kafka_cleanshutdown): a broker's start-up revalidates no "
                "segment")
    if start["why"] and start["why"].startswith("at or after"):
        return f"it lies before the requested segment {file_name(start['recovery_point'])}"
    return (f"it lies below the recovery point {start['recovery_point']}: a broker's start-up trusts what it "
            "flushed and does not revalidate it")


def _check_untouched(part: Path, plan: PartitionPlan, segments: list[PlannedSegment], view: dict[str, str], start: dict,
                     progress: Progress | None) -> None:
    """Read every segment recovery keeps without revalidating it with ``plog verify``'s
    checks, and name the damage found there (:class:`UntouchedDamage`): recovery leaves it
    as it is, as a broker's start-up would."""
    from plog.engine.storage.discovery import SegmentFiles
    from plog.engine.storage.findings import ERROR, VerifyStats
    from plog.engine.storage.segment_check import verify_segment

    for i, seg in enumerate(segments):
        if seg.reasons:
            continue
        prefix = seg.name[: -len(LOG_FILE_SUFFIX)]
        companion = [str(part / view[n]) if n in view else None for n in (f"{prefix}{s}" for s in INDEX_SUFFIXES)]
        files = SegmentFiles(seg.base, str(part / seg.disk), *companion)
        is_last = i == len(segments) - 1
        stats = VerifyStats()
        found = [f for f in verify_segment(files, is_last=is_last, next_base_offset=None if is_last else
                                           segments[i + 1].base, stats=stats, progress=progress)
                 if f.severity == ERROR]
        if not found:
            continue
        first = found[0]
        in_log = any(f.path == files.log for f in found)
        remedy = ("plog recover --all --salvage revalidates it, quarantines the damaged bytes and keeps every valid "
                  "batch (--all alone truncates the log at the damage and deletes what follows)" if in_log else
                  "plog recover --all revalidates it and rebuilds its indexes from its batches")
        plan.untouched.append(UntouchedDamage(seg.name, os.path.basename(first.path), first.position, first.offset,
                                              first.check, first.message, stats.errors, _why_untouched(start),
                                              remedy))


# -- planning a whole path ---------------------------------------------------------------------------


def checkpoint_changes(state: LogDirState, results: list[tuple[str, int, int, int]]) -> tuple[list, dict]:
    """The checkpoint entries that change, from ``(topic-partition, LEO, log start, first
    base)`` of the recovered partitions; also returns the new maps by file name."""
    rp, ls, hw = dict(state.recovery_points), dict(state.log_starts), dict(state.high_watermarks)
    for tp_name, leo, lso, first_base in results:
        key = parse_partition_dir_name(tp_name)[0]
        rp[key] = leo
        if lso > first_base:
            ls[key] = lso
        else:
            ls.pop(key, None)
        if key in hw and hw[key] > leo:
            hw[key] = leo
    changes = []
    for name, old, new in ((RECOVERY_POINT_CHECKPOINT, state.recovery_points, rp),
                           (LOG_START_OFFSET_CHECKPOINT, state.log_starts, ls),
                           (REPLICATION_OFFSET_CHECKPOINT, state.high_watermarks, hw)):
        for key in sorted(set(old) | set(new), key=lambda k: (k[0], k[1])):
            if old.get(key) != new.get(key):
                changes.append(CheckpointChange(name, f"{key[0]}-{key[1]}", old.get(key), new.get(key)))
    return changes, {RECOVERY_POINT_CHECKPOINT: rp, LOG_START_OFFSET_CHECKPOINT: ls, REPLICATION_OFFSET_CHECKPOINT: hw}


__all__ = ["LogDirState", "LogDirTarget", "RecoveryError", "checkpoint_changes", "plan_partition",
           "resolve_targets", "skip_reason"]
