"""``plog verify``: check Kafka log files like a linter, without modifying anything.

Entry points (each yields :class:`Finding` values as soon as they are found):

* :func:`verify_paths` / :func:`verify_path`: any mix of segment files, partition folders,
  log directories and data directories, in order, optionally over ``jobs`` processes;
* :func:`verify_partition`: one partition folder (a :class:`~plog.engine.storage.discovery.PartitionInfo`);
* :func:`verify_segment`: one segment (its ``.log`` with ``.index``/``.timeindex``/``.txnindex``);
* :func:`verify_log_dir`: the files of a log directory itself (checkpoints, ``meta.properties``,
  the clean-shutdown marker) and the per-partition :class:`PartitionContext` they imply.

Where each check lives: the report model (:class:`Finding`, :class:`VerifyStats`, the cap
per file and check) in :mod:`plog.engine.storage.findings`; a segment's ``.log`` and indexes
in :mod:`plog.engine.storage.segment_check` and :mod:`plog.engine.storage.index_check`
(``plog recover`` runs them too); a partition's own files in
:mod:`~plog.engine.inspect.verify_partition`; a log directory's in
:mod:`~plog.engine.inspect.verify_log_dir`. This module plans the paths into tasks and runs
them, in order, optionally in worker processes. Nothing is written, no ``.lock`` is taken, and
no file is mapped; memory stays at one log chunk plus one index chunk per process whatever
the file sizes.

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
"""

from __future__ import annotations

import os
from collections import deque
from typing import Iterable, Iterator, NamedTuple

from plog.engine.errors import EngineError
from plog.engine.inspect.verify_log_dir import (
    CheckpointMark,
    PartitionContext,
    assignment_findings,
    parent_context,
    verify_log_dir,
)
from plog.engine.inspect.verify_partition import check_snapshot, startup_repairs, verify_partition
from plog.engine.storage.discovery import NotAKafkaPathError, PartitionInfo, SegmentFiles, classify, log_dirs
from plog.engine.storage.discovery import scan_partition, segment_base_offset
from plog.engine.storage.file_names import (
    BOOTSTRAP_CHECKPOINT,
    INDEX_FILE_SUFFIX,
    INDEX_FILE_SUFFIXES,
    LOG_FILE_SUFFIX,
    PRODUCER_SNAPSHOT_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
    is_kraft_snapshot_file,
)
# The report model and the segment checks are storage's (plog recover runs them too); they are
# named here as well, as parts of plog verify's API.
from plog.engine.storage.findings import (
    DEFAULT_CHUNK_SIZE,
    ERROR,
    MIN_CHUNK_SIZE,
    WARNING,
    Finding,
    Progress,
    Reporter,
    VerifyOptions,
    VerifyStats,
)
# Read at each call (not bound as a default): the bytes of index entries read at a time.
from plog.engine.storage.index_check import INDEX_CHUNK_BYTES
from plog.engine.storage.segment_check import SegmentResult, segment_findings, verify_batch_file, verify_segment
# The layout of .txnindex entries verify checks is the formats layer's (storage.index_check reads them).
from plog.formats.indexes import iter_txn_entries  # noqa: F401


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
                repairs = startup_repairs(info, segments, parent_context(info, stats, options)) or {}
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
            context = parent_context(info, VerifyStats(), options)
            tasks.append(_Task("partition", (info, context), _partition_size(info)))
        return tasks
    lds = log_dirs(path)
    assignment = assignment_findings(path, kind, options)
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




def _run_task(task: _Task, options: VerifyOptions, stats: VerifyStats,
              progress: Progress | None) -> Iterator[Finding]:
    kind, args = task.kind, task.args
    if kind == "findings":
        findings, own = args
        stats.add(own)
        yield from findings
        return
    if kind == "partition":
        yield from verify_partition(args[0], options, args[1], stats, progress,
                                    index_chunk_bytes=INDEX_CHUNK_BYTES)
        return
    rep = Reporter(stats, options.max_findings_per_check)
    if kind == "segment":
        seg, is_last, next_base, repair = args
        yield from segment_findings(seg, rep, stats, options, is_last=is_last, next_base=next_base,
                                    progress=progress, result=[], repair=repair, index_chunk_bytes=INDEX_CHUNK_BYTES)
    elif kind == "batches":
        yield from verify_batch_file(args[0], rep, stats, options, progress)
    elif kind == "snapshot":
        check_snapshot(args[0], args[1], None, rep, stats)
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
    "DEFAULT_CHUNK_SIZE",
    "ERROR",
    "MIN_CHUNK_SIZE",
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
