"""Salvage (``plog recover --salvage``, beyond Kafka): the strict walk of a segment, the
resynchronisation after damage, what a cut loses, and the quarantine plan.

Kafka truncates a segment at its first bad batch and deletes every later segment, even when
the damage is one flipped bit in the middle of the log. With salvage, each revalidated
segment is walked with stricter rules than Kafka's (CRC, sizes, magic, and offsets that
increase and stay below the next segment's base offset); after a bad entry the walk
resynchronises on the next position holding a valid batch (see :func:`resync`). Each
damaged range followed by valid data (later in the segment, or in a later segment) is moved
aside into a quarantine file (see :func:`quarantine_file_name`) and the segment is rewritten
without it through Kafka's own swap protocol (``recovery``'s rewrite), so a crash at any
step is completed or rolled back by the next load. Offsets are kept as they are: the
rewritten segment has a gap where the damage was, as compaction leaves. A damaged tail of
the last segment (nothing valid after it) is truncated as usual.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from plog.formats.crc import crc32c

from plog.formats.errors import FormatError
from plog.formats.legacy import LegacyBatch, header_first_offset
from plog.formats.record_batch import CRC_START

from plog.engine.maintenance.recovery_report import DamagedRange, Loss, PartitionPlan, Truncation
from plog.engine.maintenance.segment_recovery import PlannedSegment, kind_of
from plog.engine.storage.batch_resync import EntryRules, all_zero, find_next_entry
from plog.engine.storage.file_names import file_name
from plog.engine.storage.file_records import FileBatches

QUARANTINE_PREFIX = "quarantine-"
QUARANTINE_SUFFIX = ".bin"

#: A resync candidate larger than this is not CRC-checked (bounded work on garbage); see resync.
MIN_CANDIDATE_CAP = 16 << 20


@dataclass
class _Damage:
    start: int
    end: int
    kind: str
    reason: str
    offset_before: int | None
    offset_after: int | None


@dataclass
class StrictScan:
    """One segment walked with salvage's rules: the valid spans and the damaged ranges."""

    spans: list[tuple[int, int]] = field(default_factory=list)  # [start, end) of valid batches
    damage: list[_Damage] = field(default_factory=list)
    next_offset: int | None = None
    kafka_tail: bool = False  # the last damage is one Kafka's own recovery truncates
    # The valid batches at or after the scan's ``count_from`` position: how many records
    # (from their headers), and their first and last offsets.
    records: int = 0
    first_offset: int | None = None
    last_offset: int | None = None


#: Damage kinds that Kafka's recovery does not see (it truncates only at CRC and framing errors).
_STRICT_ONLY = ("offsets going backwards", "offsets beyond the segment")


def _batch_problem(batch, expected: int, upper: int | None) -> tuple[str, str] | None:
    """``(kind, reason)`` when salvage cannot keep a batch (CRC, offsets), else None."""
    try:
        if batch.magic != 2 or crc32c(batch.buffer[CRC_START:]) != batch.crc:
            batch.ensure_valid()
    except FormatError as e:
        return kind_of(e.reason), e.reason
    if isinstance(batch, LegacyBatch):
        first = last = batch.last_offset  # a compressed wrapper carries its last inner offset
    else:
        if batch.last_offset_delta < 0:
            return "offsets beyond the segment", f"negative last offset delta {batch.last_offset_delta}"
        first, last = batch.base_offset, batch.last_offset
    if first < expected:
        return ("offsets going backwards",
                f"offsets going backwards: offset {first} at position {batch.position} is below the next expected "
                f"offset {expected}")
    if upper is not None and last > upper:
        return ("offsets beyond the segment",
                f"offset {last} at position {batch.position} reaches the next segment's base offset {upper + 1}")
    return None


def strict_scan(path: Path, base: int, size: int, upper: int | None, cap: int,
                 count_from: int | None = None) -> StrictScan:
    """Walk the segment, resynchronising after each bad entry (see :func:`resync`).
    With ``count_from``, the valid batches from that position on are counted (records,
    first and last offsets: what a cut there would lose, and salvage would keep)."""
    out = StrictScan()
    expected, last_good = base, None
    pos = 0
    largest = 0
    legacy = False
    with open(path, "rb") as f:
        fd = f.fileno()
        while pos < size:
            bad, kind, reason, natural = None, None, None, None
            batches = FileBatches(path, pos, size)
            span_start = pos
            try:
                for batch in batches:
                    problem = _batch_problem(batch, expected, upper)
                    if problem is not None:
                        bad, (kind, reason) = batch.position, problem
                        natural = batch.position + batch.size_in_bytes
                        break
                    legacy = legacy or isinstance(batch, LegacyBatch)
                    largest = max(largest, batch.size_in_bytes)
                    if count_from is not None and batch.position >= count_from:
                        _count(out, batch)
                    expected = last_good = batch.last_offset
                    expected += 1
                    pos = batch.position + batch.size_in_bytes
                else:
                    if batches.trailing is not None:
                        # A partial entry: the end of a torn write, or a damaged size field
                        # in the middle (valid batches may follow: resync decides).
                        t = batches.trailing
                        bad, kind = t.position, "torn tail"
                        reason = (f"partial batch at the end of the segment ({t.length} bytes"
                                  + (f" of {t.declared_size})" if t.declared_size else ")"))
                    else:
                        pos = size
            except FormatError as e:
                bad, kind, reason = (e.position if e.position is not None else pos), kind_of(e.reason), e.reason
            if pos > span_start:
                out.spans.append((span_start, pos))
            if bad is None:
                break
            found = resync(fd, bad, natural, size, expected, upper, legacy, max(cap, 2 * largest))
            if found is None:
                out.kafka_tail = kind not in _STRICT_ONLY
                if all_zero(fd, bad, size):
                    kind = "zeros"
                out.damage.append(_Damage(bad, size, kind, reason, last_good, None))
                break
            if kind == "torn tail":
                kind = "invalid size"  # a size field pointing past the end, with valid batches after it
            out.damage.append(_Damage(bad, found, kind, reason, last_good, _first_offset_at(path, found)))
            pos = found
    out.next_offset = expected if last_good is not None else base
    return out


def _count(scan: StrictScan, batch) -> None:
    """Add a valid batch to the scan's counts (a compressed v0/v1 wrapper, whose inner
    messages are not decoded here, counts as one record)."""
    count = batch.records_count
    scan.records += count if count is not None else 1
    first = header_first_offset(batch)
    if scan.first_offset is None:
        scan.first_offset = first
    scan.last_offset = batch.last_offset


def loss_of_cut(path: Path, seg: PlannedSegment, upper: int | None, cap: int, start: int) -> Loss:
    """What cutting ``seg`` at byte ``start`` loses; salvage's walk tells the valid batches
    (which ``--salvage`` keeps) from the damaged bytes."""
    strict = strict_scan(path, seg.base, seg.size, upper, cap, count_from=start)
    damaged = sum(d.end - max(d.start, start) for d in strict.damage if d.end > start)
    return Loss(seg.size - start, strict.records, strict.first_offset, strict.last_offset, damaged, strict.records)


def _first_offset_at(path: Path, position: int) -> int | None:
    for batch in FileBatches(path, position, None, chunk_size=64 * 1024):
        return header_first_offset(batch)
    return None


def resync(fd: int, bad: int, natural: int | None, size: int, expected: int, upper: int | None,
            legacy: bool, cap: int) -> int | None:
    """The position of the first batch after ``bad`` that salvage can keep, or None
    (:func:`~plog.engine.storage.batch_resync.find_next_entry`). The position the bad entry's
    own size field points to is tried first (a batch damaged inside keeps its length). A
    candidate must have a base offset at or above ``expected`` (and below the next segment),
    a size under ``cap``, and then a valid checksum; legacy candidates are only considered in
    a segment that already held legacy entries. Each resync scans forward from ``bad`` only:
    the work stays linear in the file size."""
    return find_next_entry(fd, bad + 1, size, EntryRules(expected, upper, cap, legacy), first_try=natural)


def plan_salvage(plan: PartitionPlan, seg: PlannedSegment, strict: StrictScan, is_last: bool,
                  next_base: int | None) -> None:
    if not strict.damage:
        return
    tail = strict.damage[-1] if strict.damage[-1].end == seg.size else None
    quarantined = [d for d in strict.damage if d is not tail or not is_last]
    for d in quarantined:
        plan.salvage.append(DamagedRange(seg.name, d.start, d.end - d.start, d.kind, d.reason, d.offset_before,
                                         d.offset_after if d.offset_after is not None else next_base,
                                         quarantine_file_name(seg.base, d.start)))
    dropped_tail = tail is not None and is_last
    if quarantined or (dropped_tail and not strict.kafka_tail):
        plan.rewritten_segments.append(seg.name)
    if dropped_tail:
        first = seg.base if tail.offset_before is None else tail.offset_before + 1
        plan.truncation = Truncation(seg.name, tail.start, tail.end - tail.start, tail.kind, tail.reason, first,
                                     Loss(tail.end - tail.start, damaged_bytes=tail.end - tail.start))


def quarantine_file_name(base_offset: int, position: int) -> str:
    """``quarantine-<20-digit segment base offset>-<byte position>.bin``.

    The damaged bytes of a segment are kept in the partition folder under this name. Kafka's
    ``LogLoader`` (and plog's loader, cleaner and retention) only act on files whose names
    end in ``.log``, ``.index``, ``.timeindex``, ``.txnindex``, ``.snapshot``, ``.deleted``,
    ``.cleaned`` or ``.swap`` and read a file's offset from its leading digits: a name that
    starts with letters and ends in ``.bin`` is none of those, so a broker loads the
    partition as if the file were not there, and it is never deleted, renamed or replayed.
    The position is the range's byte position in the segment as it was before salvage.
    """
    return f"{QUARANTINE_PREFIX}{file_name(base_offset)}-{position}{QUARANTINE_SUFFIX}"


__all__ = ["MIN_CANDIDATE_CAP", "QUARANTINE_PREFIX", "QUARANTINE_SUFFIX", "StrictScan", "loss_of_cut",
           "plan_salvage", "quarantine_file_name", "resync", "strict_scan"]
