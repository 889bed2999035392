"""``plog verify`` of a partition folder: its segments in order
(:mod:`plog.engine.storage.segment_check`), its producer snapshots, ``leader-epoch-checkpoint``
and ``partition.metadata``, and its log directory's checkpoint entries
(:class:`~plog.engine.inspect.verify_log_dir.PartitionContext`) against its log end offset.
The checks by name are listed in :mod:`plog.engine.inspect.verify`.

A damage finding of a segment whose log directory is known ends with what a broker's start-up
does about it (:func:`startup_repairs`, by the loader's own rule).
"""

from __future__ import annotations

import os
from typing import Iterator

from plog.formats.checkpoints import parse_leader_epoch_checkpoint, parse_partition_metadata
from plog.formats.errors import FormatError
from plog.formats.producer_snapshot import ENTRIES_OFFSET, ENTRY_SIZE, decode_snapshot

from plog.engine.inspect.verify_log_dir import CheckpointMark, PartitionContext, line_starts, read_text
from plog.engine.storage.discovery import PartitionInfo, SegmentFiles
from plog.engine.storage.file_names import LEADER_EPOCH_CHECKPOINT, PARTITION_METADATA, file_name
from plog.engine.storage.findings import ERROR, WARNING, Finding, Progress, Repair, Reporter, VerifyOptions, VerifyStats
from plog.engine.storage.index_check import INDEX_CHUNK_BYTES
from plog.engine.storage.segment_check import SegmentResult, segment_findings, verify_batch_file

#: Producer snapshots larger than this are not parsed.
MAX_SNAPSHOT_FILE = 64 << 20


def startup_repairs(info: PartitionInfo, segments: list[SegmentFiles],
                     context: PartitionContext) -> dict[int, Repair] | None:
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
    return {b: Repair(b in chosen, why, len(bases) - 1 - i) for i, b in enumerate(bases)}


# -- producer snapshots ----------------------------------------------------------------------


def check_snapshot(path: str, offset: int, leo: int | None, rep: Reporter, stats: VerifyStats) -> None:
    data = read_text(path, rep, stats, "snapshot-format", MAX_SNAPSHOT_FILE,
                     "the snapshot is {size} bytes, too large to be a producer snapshot")
    if data is None:
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


# -- leader epochs ---------------------------------------------------------------------------


def _check_leader_epochs(path: str, leo: int, clean: bool | None, rep: Reporter, stats: VerifyStats,
                         note: str | None = None) -> None:
    data = read_text(path, rep, stats, "leader-epoch-checkpoint")
    if data is None:
        return
    try:
        entries = parse_leader_epoch_checkpoint(data, path)
    except FormatError as e:
        rep(ERROR, "leader-epoch-checkpoint", path, None, None, e.reason)
        return
    lines = [pos for pos, parts in line_starts(data)[2:] if parts]
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
                     progress: Progress | None = None, *,
                     index_chunk_bytes: int = INDEX_CHUNK_BYTES) -> Iterator[Finding]:
    """Verify a partition folder: every segment, then the partition's own files (snapshots,
    ``leader-epoch-checkpoint``, ``partition.metadata``) and the log directory's checkpoint
    entries for it (``context``) against its log end offset. ``index_chunk_bytes``: bytes of
    index entries read at a time."""
    options = options or VerifyOptions()
    stats = stats if stats is not None else VerifyStats()
    context = context or PartitionContext()
    rep = Reporter(stats, options.max_findings_per_check)
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
    repairs = startup_repairs(info, segments, context) or {}
    for k, seg in enumerate(segments):
        next_base = segments[k + 1].base_offset if k + 1 < len(segments) else None
        yield from segment_findings(seg, rep, stats, options, is_last=next_base is None, next_base=next_base,
                                    progress=progress, result=results, repair=repairs.get(seg.base_offset),
                                    index_chunk_bytes=index_chunk_bytes)
    for path in info.kraft_snapshots:
        yield from verify_batch_file(path, rep, stats, options, progress)
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
        check_snapshot(path, offset, leo, rep, stats)
    yield from rep.take()
    others = {os.path.basename(p): p for p in info.other_files}
    if LEADER_EPOCH_CHECKPOINT in others and leo is not None:
        _check_leader_epochs(others[LEADER_EPOCH_CHECKPOINT], leo, context.had_clean_shutdown, rep, stats, note)
    _check_partition_metadata(info, others, context, rep, stats)
    if leo is not None:
        _check_checkpoint_marks(context, first_base, leo, rep, note)
    yield from rep.take()
    yield from rep.overflow()


def _check_checkpoint_marks(context: PartitionContext, first_base: int, leo: int, rep: Reporter,
                            note: str | None = None) -> None:
    if note:
        def rep(severity, check, path, position, offset, message, _rep=rep):  # noqa: F811
            _rep(WARNING, check, path, position, offset, message + note)

    rp, lso, hw, cleaner = (context.recovery_point, context.log_start_offset, context.high_watermark,
                            context.cleaner_offset)
    span = f"the log holds offsets {first_base} (first segment's base offset) to {leo} (log end offset)"
    if rp is not None:
        _check_mark(rep, "checkpoint-recovery-point", rp, leo, first_base,
                    f"recovery point {rp.offset} is above the log end offset {leo}: data the broker flushed is "
                    f"missing ({span})",
                    f"recovery point {rp.offset} is below the first segment's base offset {first_base}; the broker "
                    f"recovers every segment after an unclean shutdown")
    if lso is not None:
        _check_mark(rep, "checkpoint-log-start-offset", lso, leo, first_base,
                    f"log start offset {lso.offset} is above the log end offset {leo}: on load the broker deletes "
                    f"every segment ({span})",
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


def _check_mark(rep, check: str, mark: CheckpointMark, leo: int, first_base: int, above: str, below: str) -> None:
    """A checkpointed offset above the log end offset is an error (``above``), one below the
    first segment's base offset a warning (``below``)."""
    if mark.offset > leo:
        rep(ERROR, check, mark.path, mark.position, mark.offset, above)
    elif mark.offset < first_base:
        rep(WARNING, check, mark.path, mark.position, mark.offset, below)


def _check_partition_metadata(info: PartitionInfo, others: dict[str, str], context: PartitionContext,
                              rep: Reporter, stats: VerifyStats) -> None:
    """``partition.metadata``: well formed, or missing where the broker expects one."""
    is_metadata_log = info.topic_partition is not None and info.topic_partition.topic == "__cluster_metadata"
    if PARTITION_METADATA in others:
        data = read_text(others[PARTITION_METADATA], rep, stats, "partition-metadata")
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


__all__ = ["check_snapshot", "startup_repairs", "verify_partition"]
