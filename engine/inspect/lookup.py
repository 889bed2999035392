"""``lookup``: where an offset or a timestamp lives in a Kafka partition, found as Kafka finds it.

Read-only and offline: nothing is locked, written or memory-mapped. Index entries are read
one by one with ``os.pread`` (:mod:`plog.engine.storage.index_file`: a binary search touches
about twenty of them), so a file that a live broker truncates under us gives a short read,
never a SIGBUS.

**By offset** (the fetch path: ``UnifiedLog.read`` → ``LocalLog.read`` →
``LogSegment.read`` → ``translateOffset``, kafka-format.md §7.6-§7.7):

1. The offset must lie in ``[log start offset, log end offset)``; anything else is Kafka's
   ``OffsetOutOfRangeException`` (:class:`~plog.engine.errors.OffsetOutOfRangeError`).
2. The segment is the floor segment: the greatest base offset <= the offset.
3. ``OffsetIndex.lookup``: the largest entry with offset <= target (Kafka's binary search
   with its 8 KiB warm section), or position 0 when there is none.
4. Batches are read forward from that position; the answer is the first batch whose last
   offset >= target. If the segment has none (the offset fell in a gap that compaction
   left at the segment's end), Kafka moves on to the next segment and answers its first
   batch: the next available offset.
5. The batch is decoded to name the first record with offset >= target (equal to it unless
   compaction removed that record).

**By timestamp** (``UnifiedLog.fetchOffsetByTimestamp``, ListOffsets semantics):

* ``-2`` (earliest): the log start offset; ``-1`` (latest): the log end offset; ``-3``
  (max timestamp, KIP-734): the segment with the greatest max timestamp, its first batch
  carrying that timestamp, the first record in it with that timestamp (Kafka >= 3.8).
* A real timestamp T: the first segment whose largest timestamp >= T;
  ``TimeIndex.lookup(T)`` (largest entry with timestamp <= T, else ``(-1, base)``);
  ``OffsetIndex.lookup(max(entry offset, log start))`` gives a position; batches are read
  from it, and in the first batch(es) whose max timestamp >= T the first record with
  timestamp >= T and offset >= log start is the answer. None when there is no such record.

Offline differences, each chosen so the answer is the one the running broker would give:

* A segment's largest timestamp is the last time-index entry (what Kafka keeps in memory
  for a rolled segment). For the last (active) segment the batches after that entry are
  also read, since a live broker's in-memory maximum is ahead of its sparse index. When a
  segment has no time-index entry, Kafka would fall back to the file's mtime; plog reads
  the batch headers instead (an mtime says nothing once files are copied).
* A preallocated index (a crashed or running broker's active segment: 10 MiB of zeros
  after the real entries) is read up to its zero-filled tail, which is the entry count
  the broker had in memory. Kafka would have rebuilt such an index during recovery.
* Segments wholly below the log start offset (the next segment's base <= log start) are
  skipped by timestamp lookups: Kafka deletes them at its next retention check.
* A ``.index``/``.timeindex`` pair without a ``.log`` is ignored (Kafka deletes orphans).

Every lookup returns a result dataclass whose ``steps`` list says what was done, in order,
with the index entries probed by each binary search; ``plog lookup --explain`` prints it.
"""

from __future__ import annotations

import os
import re
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Iterator

from plog.formats.compression import CODEC_NAMES
from plog.formats.errors import FormatError
from plog.formats.indexes import (
    OFFSET_INDEX_ENTRY_SIZE,
    OFFSET_INDEX_KEY,
    TIME_INDEX_ENTRY_SIZE,
    TIME_INDEX_KEY,
    TimestampOffset,
)
from plog.formats.legacy import LegacyBatch
from plog.formats.record_batch import RecordBatch
from plog.formats.records import TIMESTAMP_TYPE_NAMES

from plog.engine.storage.discovery import (
    NotAKafkaPathError,
    PartitionInfo,
    SegmentFiles,
    classify,
    log_dirs,
    partition_facts,
    read_checkpoints,
    scan_partition,
    segment_base_offset,
)
from plog.engine.errors import InvalidOffsetSpecError, LogDirError, OffsetOutOfRangeError
from plog.engine.offset_spec import INT64_MAX, parse_offset, parse_time
from plog.engine.storage.file_names import (
    INDEX_FILE_SUFFIX,
    LOG_START_OFFSET_CHECKPOINT,
    TIME_INDEX_FILE_SUFFIX,
    file_name,
)
from plog.engine.storage.file_records import FileBatches
# The read-only index reader; named here too (``lookup.IndexFile``) for older callers.
from plog.engine.storage.index_file import IndexFile, largest_lower_bound

EARLIEST_TIMESTAMP = -2  # ListOffsetsRequest.EARLIEST_TIMESTAMP
LATEST_TIMESTAMP = -1  # ListOffsetsRequest.LATEST_TIMESTAMP
MAX_TIMESTAMP = -3  # ListOffsetsRequest.MAX_TIMESTAMP (KIP-734)
SPECIAL_TIMESTAMPS = {EARLIEST_TIMESTAMP: "earliest", LATEST_TIMESTAMP: "latest", MAX_TIMESTAMP: "max-timestamp"}

#: First read when scanning forward from an index entry: Kafka indexes every 4 KiB, so the
#: batch sought is almost always within the first read.
SCAN_CHUNK = 64 * 1024

#: Batches listed one by one in a step's data (the count is always exact).
MAX_LISTED_BATCHES = 50


# -- results -----------------------------------------------------------------------------


@dataclass
class LookupStep:
    """One step of a lookup: a short ``name``, a sentence, and the numbers behind it."""

    name: str
    text: str
    data: dict = field(default_factory=dict)


@dataclass
class BatchHeader:
    """The header of one batch (v2) or legacy entry (v0/v1), as found on disk."""

    segment_base_offset: int
    position: int
    size: int
    magic: int
    base_offset: int
    last_offset: int
    records_count: int | None
    base_timestamp: int | None
    max_timestamp: int
    timestamp_type: str
    codec: str
    producer_id: int
    producer_epoch: int
    base_sequence: int
    last_sequence: int
    partition_leader_epoch: int
    is_transactional: bool
    is_control: bool
    crc: int
    crc_valid: bool

    @classmethod
    def of(cls, batch, segment_base_offset: int) -> "BatchHeader":
        legacy = isinstance(batch, LegacyBatch)
        codec_id = batch.compression
        return cls(
            segment_base_offset=segment_base_offset,
            position=batch.position,
            size=batch.size_in_bytes,
            magic=batch.magic,
            base_offset=batch.base_offset,
            last_offset=batch.last_offset,
            records_count=batch.records_count,
            base_timestamp=None if legacy else batch.base_timestamp,
            max_timestamp=batch.max_timestamp,
            timestamp_type=TIMESTAMP_TYPE_NAMES.get(batch.timestamp_type, str(batch.timestamp_type)),
            codec=CODEC_NAMES.get(codec_id, f"unknown({codec_id})"),
            producer_id=batch.producer_id,
            producer_epoch=batch.producer_epoch,
            base_sequence=batch.base_sequence,
            last_sequence=batch.last_sequence,
            partition_leader_epoch=batch.partition_leader_epoch,
            is_transactional=batch.is_transactional,
            is_control=batch.is_control,
            crc=batch.crc,
            crc_valid=batch.is_valid(),
        )


@dataclass
class IndexProbe:
    """One binary search of an index: the entry it settled on and every entry compared."""

    path: str | None
    kind: str  # "offset" or "time"
    target: int
    entries: int
    slots: int
    missing: bool
    slot: int  # -1: no entry <= target
    entry: tuple[int, int] | None  # (offset, position) or (timestamp, offset)
    probes: list[tuple[int, int]]  # (slot, compared value: absolute offset or timestamp)


@dataclass
class OffsetLookupResult:
    """Where an offset lives. ``batch`` holds it (or, in a compaction gap, holds the next
    available offset); ``record_offset`` is the first record at or after the target."""

    partition_path: str
    topic: str | None
    partition: int | None
    target: int
    log_start_offset: int
    log_end_offset: int
    segment_base_offset: int  # the segment holding ``batch``
    segment_path: str
    segment_size: int
    floor_segment_base_offset: int  # the segment chosen first (greatest base <= target)
    index: IndexProbe  # the floor segment's offset index lookup
    scan_start_position: int
    batches_scanned: int
    batch: BatchHeader
    record_offset: int | None
    record_timestamp: int | None
    record_batch_position: int | None  # position of the batch holding record_offset
    record_segment_base_offset: int | None
    record_error: str | None
    steps: list[LookupStep]

    @property
    def exact(self) -> bool:
        return self.record_offset == self.target


@dataclass
class TimestampLookupResult:
    """The answer ListOffsets would give for ``target`` (-2, -1, -3 or a timestamp)."""

    partition_path: str
    topic: str | None
    partition: int | None
    target: int
    kind: str  # "earliest", "latest", "max-timestamp" or "timestamp"
    found: bool
    offset: int | None
    timestamp: int | None  # -1 for earliest/latest, as Kafka answers
    leader_epoch: int | None
    log_start_offset: int
    log_end_offset: int
    segment_base_offset: int | None = None
    segment_path: str | None = None
    segment_largest_timestamp: int | None = None
    time_index: IndexProbe | None = None
    offset_index: IndexProbe | None = None
    scan_start_position: int | None = None
    batches_scanned: int = 0
    batch: BatchHeader | None = None
    steps: list[LookupStep] = field(default_factory=list)


# -- the partition being looked at -------------------------------------------------------


class PartitionView:
    """A partition folder (or one segment of it) as a lookup sees it: the segments that
    have a ``.log``, the log start offset and, lazily, the log end offset.

    Open one with :func:`open_partition` and pass it to several lookups to avoid listing
    the folder and reading the last segment's tail each time.
    """

    def __init__(self, info: PartitionInfo, segments: list[SegmentFiles], *, log_start_offset: int,
                 log_start_source: str, single_segment: bool = False, notes: list[str] | None = None,
                 leader_epochs=()):
        if not segments:
            raise LogDirError(f"{info.path}: the partition has no segment (.log) files")
        self.info = info
        self.path = info.path
        self.segments = segments
        self.bases = [s.base_offset for s in segments]
        self.log_start_offset = log_start_offset
        self.log_start_source = log_start_source
        self.single_segment = single_segment
        self.notes = list(notes or [])
        self._leader_epochs = list(leader_epochs)
        self._leo: int | None = None
        self._leo_steps: list[LookupStep] = []
        self._largest: dict[int, tuple[int, int, str]] = {}

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def topic(self) -> str | None:
        return self.info.topic_partition.topic if self.info.topic_partition else None

    @property
    def partition(self) -> int | None:
        return self.info.topic_partition.partition if self.info.topic_partition else None

    @property
    def log_end_offset(self) -> int:
        """Kafka's ``readNextOffset`` of the last segment (§8.7)."""
        if self._leo is None:
            self._leo, self._leo_steps = segment_next_offset(self.segments[-1])
        return self._leo

    def floor_segment(self, offset: int) -> int:
        """Index of the segment with the greatest base offset <= ``offset``, or -1."""
        return bisect_right(self.bases, offset) - 1

    def live_segments(self) -> list[int]:
        """Indexes of the segments not wholly below the log start offset."""
        live = []
        for i, seg in enumerate(self.segments):
            nxt = self.bases[i + 1] if i + 1 < len(self.bases) else None
            if nxt is not None and nxt <= self.log_start_offset:
                continue
            live.append(i)
        return live

    def largest_timestamp(self, i: int) -> tuple[int, int, str]:
        """``(largest timestamp, offset of it, how it was found)`` of segment ``i``; see
        the module docstring. The offset is where the running maximum was first reached
        (a batch's last offset, or what the time index holds)."""
        if i not in self._largest:
            self._largest[i] = _segment_largest_timestamp(self.segments[i], last=i == len(self.segments) - 1)
        return self._largest[i]

    def leader_epochs(self) -> list:
        """The partition's ``leader-epoch-checkpoint`` (none for a one-segment view)."""
        return [] if self.single_segment else list(self._leader_epochs)

    def __repr__(self) -> str:
        return f"PartitionView({self.path!r}, segments={len(self.segments)})"


def open_partition(path: str | os.PathLike, topic: str | None = None, partition: int | None = None) -> PartitionView:
    """A :class:`PartitionView` of ``path``: a partition folder, one segment file (any of
    ``.log``/``.index``/``.timeindex`` of it: the lookup is then confined to that segment,
    from its base offset to its end), or a log/data directory with ``topic`` and
    ``partition`` naming the partition (its current folder; several replicas under one
    data directory are ambiguous).

    Raises ``FileNotFoundError``, :class:`~plog.engine.storage.discovery.NotAKafkaPathError` or
    :class:`~plog.engine.errors.LogDirError` (with a one-line message).
    """
    path = os.fspath(path)
    kind = classify(path)
    if kind == "segment":
        base = segment_base_offset(path)
        if base is None:
            raise NotAKafkaPathError(
                f"{path}: not a segment file (expected <20-digit base offset>.log, .index or .timeindex)")
        info = scan_partition(os.path.dirname(os.path.abspath(path)))
        seg = next((s for s in info.segments if s.base_offset == base), None)
        if seg is None or seg.log is None:
            raise LogDirError(f"{path}: segment {file_name(base)} has no .log file")
        return PartitionView(info, [seg], log_start_offset=base, log_start_source="segment base offset",
                             single_segment=True)
    if kind == "partition":
        info = scan_partition(path)
        if (topic is not None or partition is not None) and info.topic_partition is not None:
            tp = info.topic_partition
            if (topic is not None and topic != tp.topic) or (partition is not None and partition != tp.partition):
                raise LogDirError(f"{path} holds {tp.topic}-{tp.partition}, not the partition asked for")
    else:
        if topic is None or partition is None:
            raise LogDirError(f"{path} is a {'log' if kind == 'logdir' else 'data'} directory: "
                              "name the partition with --topic and --partition, or pass its folder")
        matches = [p for d in log_dirs(path) for p in d.partitions
                   if p.topic_partition is not None and tuple(p.topic_partition) == (topic, partition)]
        current = [p for p in matches if p.kind == "current"] or matches
        if not current:
            raise LogDirError(f"{path}: no folder for partition {topic}-{partition}")
        if len(current) > 1:
            where = ", ".join(p.path for p in current)
            raise LogDirError(f"{path}: {topic}-{partition} is in {len(current)} folders ({where}); pass one of them")
        info = current[0]
    segments = [s for s in info.segments if s.log is not None]
    notes = []
    orphans = [s for s in info.segments if s.log is None]
    if orphans:
        notes.append("index files without a .log are ignored (Kafka deletes them as orphans): "
                     + ", ".join(s.name for s in orphans))
    if not segments:
        raise LogDirError(f"{info.path}: the partition has no segment (.log) files")
    checkpoints = read_checkpoints(os.path.dirname(os.path.abspath(info.path)))
    if LOG_START_OFFSET_CHECKPOINT in checkpoints.problems:
        notes.append(checkpoints.problems[LOG_START_OFFSET_CHECKPOINT])
    facts = partition_facts(info, checkpoints)
    return PartitionView(info, segments, log_start_offset=facts.log_start_offset,
                         log_start_source=facts.log_start_source, notes=notes, leader_epochs=facts.leader_epochs)


def _as_view(target, topic, partition) -> PartitionView:
    return target if isinstance(target, PartitionView) else open_partition(target, topic, partition)


# -- segment-level helpers ---------------------------------------------------------------


def _log_size(seg: SegmentFiles) -> int:
    return os.path.getsize(seg.log)


def _batches(seg: SegmentFiles, position: int) -> FileBatches:
    return FileBatches(seg.log, position, chunk_size=SCAN_CHUNK)


def segment_next_offset(seg: SegmentFiles) -> tuple[int, list[LookupStep]]:
    """``LogSegment.readNextOffset``: the offset after the segment's last batch (its base
    offset when empty), reading from the last offset-index entry to the end."""
    steps = []
    with IndexFile(seg.index, OFFSET_INDEX_ENTRY_SIZE, seg.base_offset) as idx:
        last = idx.last_offset_entry()
    size = _log_size(seg)
    start = last.position if last is not None and 0 <= last.position < size else 0
    try:
        next_offset, batches = _read_to_end(seg, start)
    except FormatError:
        if not start:
            raise
        next_offset = None  # the entry points inside a batch: a damaged index
    if start and next_offset is None:
        # The index points past the batches or into one (an index ahead of its .log, or
        # damaged): read the whole segment instead.
        next_offset, batches = _read_to_end(seg, 0)
        start = 0
    if next_offset is None:
        next_offset = seg.base_offset
    where = (f"last offset index entry {tuple(last)} → position {start}" if last is not None and start
             else "no offset index entry: from position 0")
    steps.append(LookupStep("log-end-offset",
                            f"log end offset {next_offset}: read {seg.name}.log from {where} to its end "
                            f"({batches} batches); the next offset after the last batch",
                            {"segment": seg.base_offset, "position": start, "batches": batches,
                             "log_end_offset": next_offset}))
    return next_offset, steps


def _read_to_end(seg: SegmentFiles, start: int) -> tuple[int | None, int]:
    next_offset, n = None, 0
    for batch in FileBatches(seg.log, start):
        next_offset = batch.next_offset
        n += 1
    return next_offset, n


def _segment_largest_timestamp(seg: SegmentFiles, last: bool) -> tuple[int, int, str]:
    with IndexFile(seg.timeindex, TIME_INDEX_ENTRY_SIZE, seg.base_offset) as tidx:
        entry = tidx.last_time_entry()
    if entry is not None and entry.timestamp >= 0 and not last:
        return entry.timestamp, entry.offset, "last time index entry"
    if entry is not None and entry.timestamp >= 0:
        with IndexFile(seg.index, OFFSET_INDEX_ENTRY_SIZE, seg.base_offset) as idx:
            slot = largest_lower_bound(idx, entry.offset - seg.base_offset, OFFSET_INDEX_KEY)
            position = idx.offset_entry(slot).position if slot >= 0 else 0
        best, best_offset = entry.timestamp, entry.offset
        how = "last time index entry, then the batches after it (active segment)"
    else:
        position, best, best_offset = 0, -1, seg.base_offset
        how = "batch headers (no time index entry)"
    for batch in _batches(seg, position):
        if batch.max_timestamp > best:
            best, best_offset = batch.max_timestamp, batch.last_offset
    return best, best_offset, how


def _copy(batch):
    """A batch that outlives the reader's reused buffer."""
    data = memoryview(bytes(batch.buffer))
    return LegacyBatch(data, batch.position) if isinstance(batch, LegacyBatch) else RecordBatch(data, batch.position)


def _listed(batch) -> dict:
    return {"position": batch.position, "base_offset": batch.base_offset if not isinstance(batch, LegacyBatch)
            or batch.compression == 0 else None, "last_offset": batch.last_offset,
            "max_timestamp": batch.max_timestamp, "size": batch.size_in_bytes}


def _index_probe(index: IndexFile, kind: str, target: int, slot: int, probes: list) -> IndexProbe:
    if kind == "offset":
        entry = tuple(index.offset_entry(slot)) if slot >= 0 else None
        shown = [(s, v + index.base_offset) for s, v in probes]
    else:
        entry = tuple(index.time_entry(slot)) if slot >= 0 else None
        shown = list(probes)
    return IndexProbe(index.path, kind, target, index.entries, index.slots, index.missing, slot, entry, shown)


def _probe_text(p: IndexProbe, base: int) -> str:
    name = os.path.basename(p.path) if p.path else file_name(
        base, INDEX_FILE_SUFFIX if p.kind == "offset" else TIME_INDEX_FILE_SUFFIX)
    if p.missing:
        return f"{name} is missing: no entry"
    probes = ", ".join(f"[{s}]={v}" for s, v in p.probes) or "none"
    what = "offset" if p.kind == "offset" else "timestamp"
    if p.slot < 0:
        found = f"no entry with {what} <= {p.target}"
    elif p.kind == "offset":
        found = f"slot {p.slot} = (offset {p.entry[0]}, position {p.entry[1]})"
    else:
        found = f"slot {p.slot} = (timestamp {p.entry[0]}, offset {p.entry[1]})"
    return f"{name} ({p.entries} entries), binary search for {what} {p.target}: probed {probes} → {found}"


def offset_index_lookup(seg: SegmentFiles, offset: int) -> tuple[IndexProbe, int]:
    """``OffsetIndex.lookup(offset)`` on ``seg``: the probe and the position it gives."""
    with IndexFile(seg.index, OFFSET_INDEX_ENTRY_SIZE, seg.base_offset) as idx:
        probes: list = []
        slot = largest_lower_bound(idx, offset - seg.base_offset, OFFSET_INDEX_KEY, probes)
        probe = _index_probe(idx, "offset", offset, slot, probes)
    return probe, probe.entry[1] if probe.entry is not None else 0


def time_index_lookup(seg: SegmentFiles, timestamp: int) -> tuple[IndexProbe, TimestampOffset]:
    """``TimeIndex.lookup(timestamp)`` on ``seg``: the probe and the entry, or
    ``(-1, base offset)`` when there is none."""
    with IndexFile(seg.timeindex, TIME_INDEX_ENTRY_SIZE, seg.base_offset) as idx:
        probes: list = []
        slot = largest_lower_bound(idx, timestamp, TIME_INDEX_KEY, probes)
        probe = _index_probe(idx, "time", timestamp, slot, probes)
    entry = TimestampOffset(*probe.entry) if probe.entry is not None else TimestampOffset(-1, seg.base_offset)
    return probe, entry


# -- offset specs ------------------------------------------------------------------------

def resolve_offset(view: PartitionView, spec: int | str) -> int:
    """An offset from the offset language (:func:`plog.engine.offset_spec.parse_offset`): an
    absolute offset, ``earliest`` (the log start offset), ``latest`` (the log end offset),
    ``+N`` (N after the log start offset) or ``-N`` (N before the log end offset). Not
    clamped to the log: an offset outside it is the lookup's "out of range" answer. Raises
    ``ValueError`` (:class:`InvalidOffsetSpecError`) for anything else, times included."""
    if isinstance(spec, int):
        return spec
    try:
        parsed = parse_offset(spec)
    except InvalidOffsetSpecError:
        parsed = None
    kind, value = (parsed.kind, parsed.value) if parsed is not None else ("invalid", 0)
    if kind == "offset":
        return value
    if kind in ("earliest", "from_start"):
        return view.log_start_offset + value
    if kind in ("latest", "from_end"):
        return view.log_end_offset - value
    # Times and "committed" are the offset language too, but not a lookup by offset's.
    raise InvalidOffsetSpecError(f"invalid offset {spec!r}: expected N, +N, -N (N up to {INT64_MAX}), earliest or "
                                 "latest; a time goes to a lookup by timestamp")


# -- lookup by offset --------------------------------------------------------------------


def _context_steps(view: PartitionView) -> list[LookupStep]:
    steps = [LookupStep("partition", f"{view.path}: {len(view.segments)} segment(s)"
                        + (" (this segment only)" if view.single_segment else ""),
                        {"path": view.path, "segments": len(view.segments)})]
    for note in view.notes:
        steps.append(LookupStep("note", note))
    steps.append(LookupStep("log-start-offset", f"log start offset {view.log_start_offset} "
                            f"({view.log_start_source})",
                            {"log_start_offset": view.log_start_offset, "source": view.log_start_source}))
    view.log_end_offset  # computed once per view; its steps are kept with it
    steps.extend(view._leo_steps)
    return steps


def lookup_offset(target: "str | os.PathLike | PartitionView", offset: int | str, *,
                  topic: str | None = None, partition: int | None = None, decode: bool = True) -> OffsetLookupResult:
    """Where ``offset`` lives in the partition at ``target`` (a path or a
    :class:`PartitionView`), found by Kafka's fetch path; see the module docstring.

    ``offset`` may also be a spec (see :func:`resolve_offset`). With ``decode=False`` a
    batch whose records are dense (``recordsCount == lastOffsetDelta + 1``, so every offset
    in it exists) is not decoded and ``record_timestamp`` is None; a batch with gaps is
    always decoded, to name the next available offset.

    Raises :class:`~plog.engine.errors.OffsetOutOfRangeError` for an offset outside
    ``[log start offset, log end offset)``.
    """
    view = _as_view(target, topic, partition)
    offset = resolve_offset(view, offset)
    steps = _context_steps(view)
    start, leo = view.log_start_offset, view.log_end_offset
    if not start <= offset < leo:
        raise OffsetOutOfRangeError(f"offset {offset} is out of range [{start}, {leo}) of {view.path}")
    i = floor = view.floor_segment(offset)
    seg = view.segments[i]
    steps.append(LookupStep("segment", f"segment {seg.name}: the greatest base offset <= {offset} "
                            f"among {len(view.segments)} segment(s)", {"segment": seg.base_offset, "index": i}))
    first_probe = first_scan_start = None
    scanned_total = 0
    found = None
    while i < len(view.segments):
        seg = view.segments[i]
        probe, position = offset_index_lookup(seg, offset)
        if first_probe is None:
            first_probe, first_scan_start = probe, position
        steps.append(LookupStep("offset-index", _probe_text(probe, seg.base_offset)
                                + (f"; read from position {position}" if probe.entry is not None
                                   else "; read from position 0"),
                                {"segment": seg.base_offset, "slot": probe.slot, "entry": probe.entry,
                                 "probes": probe.probes, "position": position}))
        listed, n = [], 0
        for batch in _batches(seg, position):
            n += 1
            if len(listed) < MAX_LISTED_BATCHES:
                listed.append(_listed(batch))
            if batch.last_offset >= offset:
                found = (i, _copy(batch))
                break
        scanned_total += n
        more = f" (first {MAX_LISTED_BATCHES} listed in the data)" if n > MAX_LISTED_BATCHES else ""
        if found:
            b = found[1]
            steps.append(LookupStep("scan", f"read {n} batch(es) from position {position}{more}: the first with "
                                    f"last offset >= {offset} is at position {b.position} "
                                    f"(offsets {b.base_offset}..{b.last_offset})",
                                    {"segment": seg.base_offset, "from": position, "batches": n, "listed": listed}))
            break
        steps.append(LookupStep("scan", f"read {n} batch(es) from position {position}{more}: none reaches offset "
                                f"{offset} (a gap left by compaction); Kafka reads the next segment",
                                {"segment": seg.base_offset, "from": position, "batches": n, "listed": listed}))
        i += 1
    if found is None:  # only possible if the log end offset moved while we read
        raise OffsetOutOfRangeError(f"offset {offset}: no batch at or after it in {view.path}")
    seg_i, batch = found
    seg = view.segments[seg_i]
    header = BatchHeader.of(batch, seg.base_offset)
    steps.append(LookupStep("batch", f"batch at position {header.position} of {seg.name}.log: base offset "
                            f"{header.base_offset}, last offset {header.last_offset}, "
                            f"{header.records_count if header.records_count is not None else '?'} record(s), "
                            f"{header.codec}, crc {'valid' if header.crc_valid else 'INVALID'}"))
    rec_offset = rec_ts = rec_pos = rec_seg = None
    rec_error = None
    try:
        hit = _first_record_at_or_after(view, seg_i, batch, offset, decode)
    except FormatError as e:
        hit, rec_error = None, f"{seg.log}: {e}"
    if hit is not None:
        rec_seg, rec_pos, rec_offset, rec_ts = hit
        if rec_offset == offset and rec_ts is None:
            text = f"record {offset} is in the batch (its records are dense: not decoded)"
        elif rec_offset == offset:
            text = f"record {offset} is in the batch (timestamp {rec_ts})"
        else:
            text = (f"offset {offset} has no record (removed by compaction); the next available offset is "
                    f"{rec_offset}" + (f", in the batch at position {rec_pos}" if rec_pos != header.position else ""))
        steps.append(LookupStep("record", text, {"record_offset": rec_offset, "timestamp": rec_ts}))
    elif rec_error is None:
        steps.append(LookupStep("record", f"no record at or after offset {offset} (the rest of the log is "
                                "empty batches)"))
    else:
        steps.append(LookupStep("record", f"the batch's records do not decode: {rec_error}"))
    return OffsetLookupResult(
        partition_path=view.path, topic=view.topic, partition=view.partition, target=offset,
        log_start_offset=start, log_end_offset=leo, segment_base_offset=seg.base_offset, segment_path=seg.log,
        segment_size=_log_size(seg), floor_segment_base_offset=view.bases[floor], index=first_probe, scan_start_position=first_scan_start,
        batches_scanned=scanned_total, batch=header, record_offset=rec_offset, record_timestamp=rec_ts,
        record_batch_position=rec_pos, record_segment_base_offset=rec_seg, record_error=rec_error, steps=steps)


def _iter_from(view: PartitionView, seg_i: int, position: int) -> Iterator[tuple[int, object]]:
    """Batches from ``position`` of segment ``seg_i`` to the end of the log."""
    for i in range(seg_i, len(view.segments)):
        for batch in _batches(view.segments[i], position if i == seg_i else 0):
            yield i, batch


def _first_record_at_or_after(view: PartitionView, seg_i: int, batch, offset: int, decode: bool = True):
    """``(segment base, batch position, offset, timestamp)`` of the first record with
    offset >= ``offset``, starting with ``batch`` and going on through the log."""
    if (not decode and isinstance(batch, RecordBatch) and batch.records_count == batch.last_offset_delta + 1
            and batch.base_offset <= offset <= batch.last_offset):
        return view.bases[seg_i], batch.position, offset, None
    for record in batch.records():
        if record.offset >= offset:
            return view.bases[seg_i], batch.position, record.offset, record.timestamp
    for i, later in _iter_from(view, seg_i, batch.position + batch.size_in_bytes):
        for record in later.records():
            if record.offset >= offset:
                return view.bases[i], later.position, record.offset, record.timestamp
    return None


# -- lookup by timestamp -----------------------------------------------------------------


def lookup_timestamp(target: "str | os.PathLike | PartitionView", timestamp: int, *,
                     topic: str | None = None, partition: int | None = None) -> TimestampLookupResult:
    """What ListOffsets answers for ``timestamp`` in the partition at ``target``: ``-2``
    earliest, ``-1`` latest, ``-3`` max timestamp, or a timestamp in ms (the first record
    with timestamp >= it). See the module docstring."""
    view = _as_view(target, topic, partition)
    if timestamp < 0 and timestamp not in SPECIAL_TIMESTAMPS:
        raise ValueError(f"invalid timestamp {timestamp}: negative values other than "
                         "-1 (latest), -2 (earliest) and -3 (max timestamp) are not timestamps")
    steps = _context_steps(view)
    start, leo = view.log_start_offset, view.log_end_offset
    kind = SPECIAL_TIMESTAMPS.get(timestamp, "timestamp")
    result = TimestampLookupResult(partition_path=view.path, topic=view.topic, partition=view.partition,
                                   target=timestamp, kind=kind, found=False, offset=None, timestamp=None,
                                   leader_epoch=None, log_start_offset=start, log_end_offset=leo, steps=steps)
    if timestamp == EARLIEST_TIMESTAMP:
        epochs = view.leader_epochs()
        epoch = epochs[0].epoch if epochs and epochs[0].start_offset <= start else None
        result.found, result.offset, result.timestamp, result.leader_epoch = True, start, -1, epoch
        steps.append(LookupStep("answer", f"earliest (-2): the log start offset {start}"))
        return result
    if timestamp == LATEST_TIMESTAMP:
        epochs = view.leader_epochs()
        epoch = epochs[-1].epoch if epochs else None
        result.found, result.offset, result.timestamp, result.leader_epoch = True, leo, -1, epoch
        steps.append(LookupStep("answer", f"latest (-1): the log end offset {leo}"))
        return result
    if timestamp == MAX_TIMESTAMP:
        return _lookup_max_timestamp(view, result)
    return _lookup_real_timestamp(view, timestamp, result)


def _segment_step(view: PartitionView, i: int, largest: int, how: str, chosen: bool, timestamp: int) -> LookupStep:
    seg = view.segments[i]
    verdict = f">= {timestamp}: chosen" if chosen else f"< {timestamp}: skipped"
    return LookupStep("segment", f"segment {seg.name}: largest timestamp {largest} ({how}) {verdict}",
                      {"segment": seg.base_offset, "largest_timestamp": largest, "source": how, "chosen": chosen})


def _lookup_real_timestamp(view: PartitionView, timestamp: int, result: TimestampLookupResult) -> TimestampLookupResult:
    steps = result.steps
    start = view.log_start_offset
    live = view.live_segments()
    skipped = len(view.segments) - len(live)
    if skipped:
        steps.append(LookupStep("note", f"{skipped} segment(s) wholly below the log start offset {start} are "
                                "skipped (Kafka deletes them at its next retention check)"))
    chosen = None
    for i in live:
        largest, _off, how = view.largest_timestamp(i)
        ok = largest >= timestamp
        steps.append(_segment_step(view, i, largest, how, ok, timestamp))
        if ok:
            chosen = i
            break
    if chosen is None:
        steps.append(LookupStep("answer", f"no segment has a timestamp >= {timestamp}: no offset "
                                "(ListOffsets answers offset -1)"))
        return result
    seg = view.segments[chosen]
    largest = view.largest_timestamp(chosen)[0]
    tprobe, tentry = time_index_lookup(seg, timestamp)
    steps.append(LookupStep("time-index", _probe_text(tprobe, seg.base_offset)
                            + ("" if tprobe.entry is not None else f" → (-1, {seg.base_offset})"),
                            {"slot": tprobe.slot, "entry": tprobe.entry, "probes": tprobe.probes}))
    target_offset = max(tentry.offset, start)
    oprobe, position = offset_index_lookup(seg, target_offset)
    steps.append(LookupStep("offset-index", _probe_text(oprobe, seg.base_offset)
                            + f" (max(time index offset {tentry.offset}, log start {start}) = {target_offset}); "
                            f"read from position {position}",
                            {"slot": oprobe.slot, "entry": oprobe.entry, "probes": oprobe.probes,
                             "position": position}))
    result.segment_base_offset, result.segment_path = seg.base_offset, seg.log
    result.segment_largest_timestamp = largest
    result.time_index, result.offset_index, result.scan_start_position = tprobe, oprobe, position
    n, listed = 0, []
    for batch in _batches(seg, position):
        n += 1
        if len(listed) < MAX_LISTED_BATCHES:
            listed.append(_listed(batch))
        if batch.max_timestamp >= timestamp:
            for record in batch.records():
                if record.timestamp >= timestamp and record.offset >= start:
                    result.found, result.offset, result.timestamp = True, record.offset, record.timestamp
                    ple = batch.partition_leader_epoch
                    result.leader_epoch = ple if not isinstance(batch, LegacyBatch) and ple >= 0 else None
                    result.batch = BatchHeader.of(batch, seg.base_offset)
                    break
            if result.found:
                break
    result.batches_scanned = n
    more = f" (first {MAX_LISTED_BATCHES} listed in the data)" if n > MAX_LISTED_BATCHES else ""
    if result.found:
        steps.append(LookupStep("scan", f"read {n} batch(es) from position {position}{more}; the batch at position "
                                f"{result.batch.position} has max timestamp {result.batch.max_timestamp} >= "
                                f"{timestamp}", {"from": position, "batches": n, "listed": listed}))
        steps.append(LookupStep("answer", f"offset {result.offset}: the first record with timestamp >= {timestamp}"
                                f" (its timestamp is {result.timestamp})"))
    else:
        steps.append(LookupStep("scan", f"read {n} batch(es) from position {position}{more}: no record with "
                                f"timestamp >= {timestamp} and offset >= {start}",
                                {"from": position, "batches": n, "listed": listed}))
        steps.append(LookupStep("answer", "no offset (ListOffsets answers offset -1); Kafka does not look in "
                                "later segments"))
    return result


def _lookup_max_timestamp(view: PartitionView, result: TimestampLookupResult) -> TimestampLookupResult:
    steps = result.steps
    best = None
    for i in view.live_segments():
        largest, off, how = view.largest_timestamp(i)
        steps.append(LookupStep("segment", f"segment {view.segments[i].name}: max timestamp {largest} at offset "
                                f"{off} ({how})", {"segment": view.bases[i], "max_timestamp": largest,
                                                   "offset": off}))
        if best is None or largest > best[1]:
            best = (i, largest, off)
    if best is None or best[1] < 0:
        steps.append(LookupStep("answer", "no batch has a timestamp: no offset"))
        return result
    i, ts, off = best
    seg = view.segments[i]
    steps.append(LookupStep("segment", f"segment {seg.name} has the greatest max timestamp ({ts})"))
    oprobe, position = offset_index_lookup(seg, off)
    steps.append(LookupStep("offset-index", _probe_text(oprobe, seg.base_offset) + f"; read from position {position}",
                            {"slot": oprobe.slot, "entry": oprobe.entry, "probes": oprobe.probes,
                             "position": position}))
    result.segment_base_offset, result.segment_path = seg.base_offset, seg.log
    result.segment_largest_timestamp = ts
    result.offset_index, result.scan_start_position = oprobe, position
    n = 0
    for batch in _batches(seg, position):
        n += 1
        if batch.max_timestamp == ts:
            if batch.magic > 0:  # RecordBatch.offsetOfMaxTimestamp: none for magic 0
                for record in batch.records():
                    if record.timestamp == ts:
                        result.found, result.offset, result.timestamp = True, record.offset, ts
                        ple = batch.partition_leader_epoch
                        result.leader_epoch = ple if not isinstance(batch, LegacyBatch) and ple >= 0 else None
                        break
            result.batch = BatchHeader.of(batch, seg.base_offset)
            break
    result.batches_scanned = n
    if result.found:
        steps.append(LookupStep("answer", f"offset {result.offset}: the first record with timestamp {ts} in the "
                                f"first batch whose max timestamp is {ts} (read {n} batch(es))"))
    else:
        steps.append(LookupStep("answer", f"no record carries the max timestamp {ts}: no offset"))
    return result


# -- timestamp specs ---------------------------------------------------------------------

_NAMED_TIMESTAMPS = {"earliest": EARLIEST_TIMESTAMP, "latest": LATEST_TIMESTAMP, "max": MAX_TIMESTAMP,
                     "max-timestamp": MAX_TIMESTAMP}
_TIMESTAMP_NUMBER = re.compile(r"-?\d+")


def parse_timestamp(spec: str, now_ms: int | None = None) -> int:
    """A timestamp in ms to look up: ListOffsets' special values by name (``earliest`` -2,
    ``latest`` -1, ``max`` -3), a number of ms with or without ``@`` (``-1``/``-2``/``-3``
    keep Kafka's meaning), else a time of the offset/time language
    (:func:`plog.engine.offset_spec.parse_time`: ``@<ISO-8601>``, UTC unless it names a zone,
    with or without the ``@``; ``@-<duration>`` such as ``@-15m`` or ``@-1h30m``). Raises
    ``ValueError`` (:class:`InvalidOffsetSpecError`)."""
    text = spec.strip()
    if text in _NAMED_TIMESTAMPS:
        return _NAMED_TIMESTAMPS[text]
    body = text[1:] if text.startswith("@") else text
    if _TIMESTAMP_NUMBER.fullmatch(body):
        return int(body)
    return parse_time(text, now_ms)


__all__ = [
    "BatchHeader",
    "EARLIEST_TIMESTAMP",
    "IndexFile",
    "IndexProbe",
    "LATEST_TIMESTAMP",
    "LookupStep",
    "MAX_TIMESTAMP",
    "OffsetLookupResult",
    "PartitionView",
    "TimestampLookupResult",
    "largest_lower_bound",
    "lookup_offset",
    "lookup_timestamp",
    "offset_index_lookup",
    "open_partition",
    "parse_timestamp",
    "resolve_offset",
    "segment_next_offset",
    "time_index_lookup",
]
