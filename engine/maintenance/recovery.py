"""``plog recover``: Kafka's log recovery run offline, planned first, in parallel, with salvage.

Two entry points over any Kafka path (a segment file, a partition folder, a log directory
or a data directory of several log directories; see ``engine.discovery``):

* :func:`plan_recovery` is strictly read-only. For every partition it works out what a
  broker's start-up (kafka-format.md §13) would do to it (:mod:`.recovery_plan`: temporary
  files, revalidated segments and why, the truncation and what it loses, the snapshots
  dropped, the new offsets and checkpoint values), validating the batches of the segments
  recovery revalidates (streamed, never loaded whole).
* :func:`recover` does it: per log directory it takes the ``.lock``, reads and deletes
  ``.kafka_cleanshutdown`` (as the broker: a crash during recovery means recovery again),
  reads the checkpoints, recovers the partitions in worker processes
  (:mod:`.recovery_workers`; each one ``load_log(writable=True)`` then ``close()``), writes
  the recovery-point and log-start-offset checkpoints (high watermarks are clamped to the
  new log end offsets), and writes the clean-shutdown marker back when every partition of
  the directory is recovered. On the native path the plan's walk of a segment (batches
  validated, index entries and producer runs gathered) is handed to the load, which applies
  it instead of reading the segment again when it still holds
  (:class:`~plog.engine.storage.recovery_walk.Prevalidated`): one pass over the bytes.

Which segments are revalidated is decided by the loader's
:func:`~plog.engine.storage.loader.startup_recovery`, the one rule the loader acts on, the plan
predicts with and ``plog verify`` judges damage by (Kafka's rules, plus two of plog's):

* after an unclean shutdown (no marker), every segment from the one holding the checkpointed
  recovery point to the end; ``all_segments`` (``--all``) revalidates every segment; a
  segment path revalidates from that segment on;
* whatever the shutdown, a segment without an offset index or with a transaction index that
  fails its sanity check (Kafka);
* plog also revalidates a segment whose offset or time index has a zero-filled tail (an
  index preallocated by a broker that did not trim it) or a length that is not a whole
  number of entries: Kafka (>= 2.3) trusts such files as they are, and their zero entries
  break offset and timestamp lookups. (A missing time index is created empty, as Kafka does,
  without revalidating the segment.)

Every other segment is trusted as a broker trusts it, and read with ``plog verify``'s checks:
damage found there is named in the plan and the report
(:class:`~.recovery_report.UntouchedDamage`: where, why it is left, and the command that
repairs it), which makes ``plog recover`` exit 3. A truncation and each segment deleted after
it carry their :class:`~.recovery_report.Loss` (records and offsets of the valid batches
thrown away, damaged bytes, how many ``--salvage`` keeps); each producer snapshot deleted
carries Kafka's reason (:class:`~.recovery_report.SnapshotDeletion`). The values returned are
:mod:`.recovery_report`'s.

The KRaft metadata log (``__cluster_metadata-0``) is skipped, as Kafka's ``LogManager`` skips
it (the Raft layer recovers it); ``-delete`` and ``-stray`` folders are skipped (the broker
deletes them).

**Salvage** (``salvage=True``, beyond Kafka; :mod:`.salvage` plans it): each damaged range
followed by valid data is moved aside into a quarantine file and the segment is rewritten
without it through Kafka's own swap protocol, here, so a crash at any step is completed or
rolled back by the next load (see :func:`_rewrite_segment`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Mapping

from plog.formats.errors import FormatError

from plog.engine.errors import EngineError, LogDirInUseError, LogDirLockedError, RecoveryError
from plog.engine.maintenance.recovery_plan import (
    LogDirState,
    LogDirTarget,
    checkpoint_changes,
    plan_partition,
    resolve_targets,
    skip_reason,
)
from plog.engine.maintenance.recovery_report import (
    REVALIDATED,  # the reason of a routine index rebuild, which readers of a plan compare with
    DamagedRange,
    LogDirPlan,
    LogDirRecovery,
    PartitionPlan,
    PartitionRecovery,
    RecoveryPlan,
    RecoveryReport,
    Truncation,
)
from plog.engine.maintenance.recovery_workers import run_partitions
from plog.engine.maintenance.salvage import QUARANTINE_SUFFIX, StrictScan
from plog.engine.maintenance.segment_recovery import kind_of
from plog.engine.storage.checkpoints import CleanShutdownFile, OffsetCheckpointFile, fsync_dir
from plog.engine.storage.file_names import (
    CLEANED_FILE_SUFFIX as CLEANED,
    DELETED_FILE_SUFFIX as DELETED,
    INDEX_FILE_SUFFIXES as INDEX_SUFFIXES,
    LOG_FILE_SUFFIX,
    SEGMENT_FILE_SUFFIXES as SEGMENT_SUFFIXES,
    SWAP_FILE_SUFFIX as SWAP,
    TMP_FILE_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
    file_name,
    parse_partition_dir_name,
)
from plog.engine.storage.loader import complete_swaps_and_remove_temp_files
from plog.engine.storage.lock import LogDirLock
from plog.engine.storage.log import load_log

Progress = Callable[[int], None]

_CHUNK = 1 << 20


# -- planning ---------------------------------------------------------------------------------------


def plan_recovery(path: str | os.PathLike, *, all_segments: bool = False, salvage: bool = False,
                  progress: Progress | None = None, overrides: Mapping[str, str] | None = None) -> RecoveryPlan:
    """What :func:`recover` would do to ``path``, without changing anything (no lock is
    taken, no file is written). ``progress(nbytes)`` follows the batch validation.
    ``overrides``: topic configs (Kafka names, e.g. ``index.interval.bytes``) over what the
    log directory says (``engine.topic_configs``), for every topic."""
    kind, targets = resolve_targets(path)
    plan = RecoveryPlan(os.fspath(path), kind, all_segments, salvage)
    for target in targets:
        state = LogDirState.read(target, overrides=overrides)
        marker = ("present: deleted at the start, written again at the end" if state.clean else
                  "absent: written at the end" if target.whole else
                  "absent: stays absent (the other partitions of the log directory are not recovered)")
        dir_plan = LogDirPlan(str(target.path), state.clean, marker, writes_marker=target.whole or state.clean)
        done = []
        for part in target.partitions:
            p, extra = plan_partition(part, state, all_segments=all_segments, salvage=salvage, progress=progress,
                                       check_progress=progress)
            dir_plan.partitions.append(p)
            if not p.skipped:
                done.append((p.topic_partition, p.log_end_offset, p.new_log_start_offset, extra["first_base"]))
        dir_plan.checkpoint_changes = checkpoint_changes(state, done)[0]
        plan.log_dirs.append(dir_plan)
    return plan


# -- salvage: quarantine and rewrite ---------------------------------------------------------------


def _copy_range(src_fd: int, dst_fd: int, start: int, end: int) -> None:
    pos = start
    while pos < end:
        chunk = os.pread(src_fd, min(_CHUNK, end - pos), pos)
        if not chunk:
            raise EngineError(f"the segment ended at byte {pos} while copying up to {end}", position=pos)
        view = memoryview(chunk)
        while view:
            view = view[os.write(dst_fd, view):]
        pos += len(chunk)


def _write_file(path: Path, src_fd: int, ranges: Iterable[tuple[int, int]]) -> None:
    """Write the bytes of ``ranges`` of ``src_fd`` to ``path`` durably (tmp, fsync, rename)."""
    tmp = path.with_name(path.name + TMP_FILE_SUFFIX)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for start, end in ranges:
            _copy_range(src_fd, fd, start, end)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def _unique_quarantine(directory: Path, name: str, src_fd: int, start: int, end: int) -> str:
    """The name to use: ``name`` unless a different file holds it (a re-run after a crash
    finds its own earlier copy and reuses it; damage found in an already rewritten segment
    may fall at the same position and gets ``-2``, ``-3``...)."""
    stem = name[: -len(QUARANTINE_SUFFIX)]
    candidate, n = name, 1
    while (directory / candidate).exists():
        existing = directory / candidate
        if existing.stat().st_size == end - start and existing.read_bytes() == os.pread(src_fd, end - start, start):
            return candidate
        n += 1
        candidate = f"{stem}-{n}{QUARANTINE_SUFFIX}"
    return candidate


def _rewrite_segment(directory: Path, base: int, keep: list[tuple[int, int]], quarantine: list[DamagedRange],
                     actions: list[str]) -> None:
    """Move ``quarantine`` ranges aside and rewrite the segment with the ``keep`` spans only.

    Crash safety is Kafka's swap protocol (``LocalLog.replaceSegments``), which the loader
    completes or rolls back (kafka-format.md §13.2 passes 1-4):

    1. each quarantine file is written whole (tmp, fsync, rename) before anything else;
    2. ``<base>.log.cleaned`` (the kept bytes) and empty ``.index.cleaned`` /
       ``.timeindex.cleaned`` (and ``.txnindex.cleaned`` if the segment has one) are written
       and fsynced -- a crash now leaves ``.cleaned`` files, which the loader deletes;
    3. they are renamed to ``.swap`` -- while any ``.cleaned`` remains, the loader deletes the
       ``.swap`` files at or above its offset too, so a half-done step rolls back;
    4. the old files are renamed to ``.deleted`` -- from here a load completes the swap:
       ``.deleted`` files are removed and old files still in the swap's offset range are
       deleted (an empty swap replaces them by name, hence the empty index files of step 2);
    5. the ``.swap`` files are renamed to their final names (the ``.log`` first), and
    6. the ``.deleted`` files removed. The directory is fsynced after every step.

    The new segment's indexes are empty; the caller has the loader recover the segment,
    which rebuilds them from the kept batches.
    """
    prefix = file_name(base)
    old = {s: directory / f"{prefix}{s}" for s in SEGMENT_SUFFIXES}
    src_fd = os.open(old[LOG_FILE_SUFFIX], os.O_RDONLY)
    try:
        for q in quarantine:
            name = _unique_quarantine(directory, q.quarantine_file, src_fd, q.position, q.position + q.length)
            q.quarantine_file = name
            _write_file(directory / name, src_fd, [(q.position, q.position + q.length)])
            actions.append(f"quarantined {q.length} bytes at position {q.position} of {prefix}{LOG_FILE_SUFFIX} "
                           f"({q.kind}) in {name}")
        fsync_dir(directory)
        news = [s for s in SEGMENT_SUFFIXES if s != TXN_INDEX_FILE_SUFFIX or old[s].exists()]
        for suffix in news:
            target = directory / f"{prefix}{suffix}{CLEANED}"
            if suffix == LOG_FILE_SUFFIX:
                _write_file(target, src_fd, keep)
            else:
                _write_file(target, src_fd, [])
    finally:
        os.close(src_fd)
    fsync_dir(directory)
    for suffix in news:
        os.replace(directory / f"{prefix}{suffix}{CLEANED}", directory / f"{prefix}{suffix}{SWAP}")
    fsync_dir(directory)
    for suffix in SEGMENT_SUFFIXES:
        if old[suffix].exists():
            os.replace(old[suffix], directory / f"{prefix}{suffix}{DELETED}")
    fsync_dir(directory)
    for suffix in news:
        os.replace(directory / f"{prefix}{suffix}{SWAP}", old[suffix])
    fsync_dir(directory)
    for suffix in SEGMENT_SUFFIXES:
        (directory / f"{prefix}{suffix}{DELETED}").unlink(missing_ok=True)
    fsync_dir(directory)
    kept = sum(e - s for s, e in keep)
    actions.append(f"rewrote {prefix}{LOG_FILE_SUFFIX} through {CLEANED}/{SWAP} with its {kept} valid bytes")


def _salvage(part: Path, plan: PartitionPlan, extra: dict, report: PartitionRecovery) -> list[int]:
    """Carry out the plan's salvage rewrites; returns the bases rewritten."""
    done = []
    by_name = {s.name: s for s in extra["segments"]}
    for name in plan.rewritten_segments:
        seg = by_name[name]
        strict: StrictScan = extra["scans"][name]
        quarantine = [d for d in plan.salvage if d.file == name]
        keep = [(s, e) for s, e in strict.spans if e > s]
        _rewrite_segment(part, seg.base, keep, quarantine, report.actions)
        report.quarantined.extend(quarantine)
        if plan.truncation is not None and plan.truncation.file == name:
            report.truncations.append(plan.truncation)
            report.actions.append(f"dropped {plan.truncation.bytes} bytes at position {plan.truncation.position} "
                                  f"of {name} ({plan.truncation.kind}): nothing valid follows")
        done.append(seg.base)
    return done


# -- recovering one partition (in a worker) ------------------------------------------------------------


@dataclass
class _Task:
    index: int
    part: str
    state: LogDirState
    all_segments: bool
    salvage: bool


def _recover_partition(task: _Task, progress: Progress | None) -> PartitionRecovery:
    part = Path(task.part)
    state = task.state
    tp_name, _, skipped = skip_reason(part)
    report = PartitionRecovery(str(part), tp_name, "recovered")
    validated = checked = 0

    def counted(n: int) -> None:
        nonlocal validated
        validated += n
        if progress is not None:
            progress(n)

    def checking(n: int) -> None:
        nonlocal checked
        checked += n
        if progress is not None:
            progress(n)

    try:
        # The plan the dry run prints, made again here: what the load revalidates, the
        # indexes it rebuilds, what a truncation costs and the damage left untouched all
        # come from it (the load's own validation then does the truncating).
        plan, extra = plan_partition(part, state, all_segments=task.all_segments, salvage=task.salvage,
                                      check_progress=checking)
        forced = list(extra["forced"])
        if plan.rewritten_segments:
            # The swap protocol of a salvage rewrite must not meet another interrupted swap:
            # finish those first, then plan again on the settled folder.
            if plan.temp_files:
                temp = complete_swaps_and_remove_temp_files(part)
                report.actions.extend(temp.actions)
                report.deleted_files.extend(temp.deleted_files)
                plan, extra = plan_partition(part, state, all_segments=task.all_segments, salvage=True)
                forced = list(extra["forced"])
            forced += _salvage(part, plan, extra, report)
        tp = parse_partition_dir_name(part.name)[0]
        start = extra["start"]
        # The plan's native walks of the segments it validated: the load applies them
        # instead of reading and checking the same bytes again (when they still hold).
        ahead = {s.base: getattr(extra["scans"].get(s.name), "prevalidated", None) for s in extra["segments"]}
        log = load_log(part, extra["config"], log_start_offset=state.log_starts.get(tp, 0),
                       recovery_point=start["recovery_point"], had_clean_shutdown=start["had_clean_shutdown"],
                       writable=True, force_recovery=forced, progress=counted,
                       prevalidated={b: p for b, p in ahead.items() if p is not None})
        try:
            _fill_from_load(report, log, plan)
        finally:
            log.close()
        report.recovery_point = log.recovery_point
        fsync_dir(part)
    except Exception as e:  # noqa: BLE001 - one bad partition must not stop the others; reported as failed
        report.status = "failed"
        report.reason = _failure_reason(e)
    report.bytes_validated = validated
    report.bytes_checked = checked
    return report


def _failure_reason(e: Exception) -> str:
    """Why a partition failed, in one line: an I/O error as "what: file" (the file is the
    useful part: a full disk, a permission), anything else with its type."""
    if isinstance(e, OSError) and e.strerror:
        return f"{e.strerror}: {e.filename}" if e.filename else e.strerror
    return " ".join(f"{type(e).__name__}: {e}".split())


def _fill_from_load(report: PartitionRecovery, log, plan: PartitionPlan) -> None:
    load = log.load_report
    report.actions.extend(load.actions)
    # Segments deleted after a truncation are renamed to .deleted first: report their names.
    report.deleted_files.extend(n.removesuffix(DELETED) for n in load.deleted_files)
    rebuilt = {a.file for a in plan.index_rebuilds if a.action == "rebuild"}
    for r in load.recovered_segments:
        name = file_name(r.base_offset, LOG_FILE_SUFFIX)
        report.revalidated.append(name)
        report.rebuilt_indexes.extend(n for n in (file_name(r.base_offset, s) for s in INDEX_SUFFIXES)
                                      if n in rebuilt)
        if r.truncated_bytes:
            position = r.valid_bytes
            reason = r.error or ""
            kind, loss, first = kind_of(reason), None, r.next_offset
            planned = plan.truncation
            if planned is not None and planned.file == name and planned.position == position:
                kind, loss, first = planned.kind, planned.loss, planned.first_offset
            report.truncations.append(Truncation(name, position, r.truncated_bytes, kind, reason, first, loss))
    present = {p.name for p in log.dir.iterdir()}
    report.untouched = [u for u in plan.untouched if u.segment in present]
    report.log_end_offset = log.log_end_offset
    report.log_start_offset = log.log_start_offset
    report.first_segment_base = log.segments.first.base_offset


# -- recover -----------------------------------------------------------------------------------------


def _lock(log_dir: Path) -> LogDirLock:
    try:
        return LogDirLock(log_dir)
    except LogDirLockedError as e:
        raise LogDirInUseError(f"{log_dir} is in use by a Kafka broker or another plog writer (its .lock is held); "
                               f"stop it before recovering: {e}", path=str(log_dir)) from None


def recover(path: str | os.PathLike, *, all_segments: bool = False, salvage: bool = False, jobs: int | None = None,
            progress: Progress | None = None, overrides: Mapping[str, str] | None = None) -> RecoveryReport:
    """Recover ``path`` as a broker's start-up would (see the module docstring), in
    ``jobs`` worker processes (default: the number of cores; 1 runs in this process).
    Each topic's config (index interval and size, which shape the rebuilt indexes) comes
    from the log directory (``engine.topic_configs``), with ``overrides`` on top.

    Raises :class:`LogDirInUseError` when a log directory's ``.lock`` is held (nothing is
    changed then). A partition that fails is reported with ``status="failed"``; its
    checkpoint entries are kept and the clean-shutdown marker of its log directory is not
    written. ``progress(nbytes)`` is called as segment bytes are validated.
    """
    kind, targets = resolve_targets(path)
    report = RecoveryReport(os.fspath(path), kind, all_segments, salvage)
    jobs = (os.cpu_count() or 1) if jobs is None else max(1, jobs)
    locks: list[LogDirLock] = []
    try:
        for target in targets:
            locks.append(_lock(target.path))
        states, epochs, tasks, skipped = [], [], [], {}
        for target in targets:
            marker = CleanShutdownFile(target.path)
            clean = marker.exists()
            epoch = -1
            if clean:
                try:
                    epoch = marker.read() or -1
                except FormatError:
                    epoch = -1  # a malformed marker still means clean (Kafka)
                marker.delete()  # as Kafka: a crash from here on means recovery next time
            state = LogDirState.read(target, clean, overrides)
            states.append(state)
            epochs.append(epoch)
            for part in target.partitions:
                tp_name, _, why = skip_reason(part)
                index = len(tasks) + len(skipped)
                if why:
                    skipped[index] = PartitionRecovery(str(part), tp_name, "skipped", why)
                else:
                    tasks.append(_Task(index, str(part), state, all_segments, salvage))
        results = {**skipped, **run_partitions(tasks, jobs, progress, _recover_partition)}
        index = 0
        for target, state, epoch in zip(targets, states, epochs):
            dir_report = LogDirRecovery(str(target.path), state.clean)
            for _ in target.partitions:
                dir_report.partitions.append(results[index])
                index += 1
            _finish_log_dir(target, state, epoch, dir_report)
            report.log_dirs.append(dir_report)
    finally:
        for lock in locks:
            lock.release()
    return report


def _finish_log_dir(target: LogDirTarget, state: LogDirState, epoch: int, report: LogDirRecovery) -> None:
    done = [(p.topic_partition, p.log_end_offset, p.log_start_offset, p.first_segment_base)
            for p in report.partitions if p.status == "recovered"]
    changes, maps = checkpoint_changes(state, done)
    report.checkpoint_changes = changes
    for name in {c.file for c in changes}:
        OffsetCheckpointFile(target.path / name).write(maps[name])
    failed = any(p.status == "failed" for p in report.partitions)
    if not failed and (target.whole or state.clean):
        CleanShutdownFile(target.path).write(epoch)
        report.clean_shutdown_written = True


__all__ = ["REVALIDATED", "LogDirInUseError", "RecoveryError", "plan_recovery", "recover"]
