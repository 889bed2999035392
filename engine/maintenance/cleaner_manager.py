"""Kafka's ``LogCleanerManager`` for one log: is it cleanable, from where to where, and the
``cleaner-offset-checkpoint`` that remembers where the last clean ended (kafka-format.md §16.2).

The first dirty offset is the checkpoint (reset to the log start offset when it is outside
``[log start, LEO]``). Nothing at or past the *first uncleanable offset* is touched:
``min(last stable offset, active segment base, first segment younger than
min.compaction.lag.ms)``, rounded down to a segment base. The log qualifies when
``cleanable / (clean + cleanable) > min.cleanable.dirty.ratio`` or when a dirty segment is
older than ``max.compaction.lag.ms`` (and there is something cleanable).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Mapping

from plog.engine.storage.checkpoints import OffsetCheckpointFile
from plog.engine.storage.discovery import read_checkpoints
from plog.engine.storage.file_names import CLEANER_OFFSET_CHECKPOINT, TopicPartition
from plog.engine.storage.log import Log
from plog.engine.storage.segment import LogSegment

DEFAULT_BUFFER_SIZE = 128 * 1024 * 1024  # log.cleaner.dedupe.buffer.size
DEFAULT_IO_BUFFER_SIZE = 512 * 1024  # log.cleaner.io.buffer.size


# -- cleanability (LogToClean) ------------------------------------------------------------------


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


# -- the cleaner-offset-checkpoint ------------------------------------------------------------------


def read_cleaner_offsets(log_dir: str | os.PathLike) -> dict[TopicPartition, int]:
    """The first dirty offset of each partition of ``log_dir`` (its ``cleaner-offset-checkpoint``):
    a missing or unreadable file is empty; malformed content raises its CheckpointError (a
    broker would take the log directory offline rather than clean from scratch). The caller
    owns the dict it gets."""
    checkpoints = read_checkpoints(log_dir)
    checkpoints.raise_malformed(CLEANER_OFFSET_CHECKPOINT)
    return dict(checkpoints.cleaner_offsets)


def update_cleaner_offsets(log_dir: str | os.PathLike, offsets: Mapping[TopicPartition, int],
                           present: set[TopicPartition]) -> None:
    """Write ``log_dir``'s ``cleaner-offset-checkpoint`` with the ``offsets`` of the partitions
    in ``present``: Kafka drops the entries of partitions no longer on this log directory."""
    OffsetCheckpointFile.in_log_dir(log_dir, CLEANER_OFFSET_CHECKPOINT).write(
        {tp: off for tp, off in offsets.items() if tp in present})


__all__ = [
    "DEFAULT_BUFFER_SIZE",
    "DEFAULT_IO_BUFFER_SIZE",
    "LogToClean",
    "last_stable_offset",
    "log_to_clean",
    "read_cleaner_offsets",
    "update_cleaner_offsets",
]
