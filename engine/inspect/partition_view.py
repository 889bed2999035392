"""A partition folder (or one segment of it) as ``plog lookup`` sees it: :class:`PartitionView`,
opened from a path by :func:`open_partition`, with the facts every lookup starts from (the
segments that have a ``.log``, the log start offset, the log end offset as Kafka's
``readNextOffset`` computes it, each segment's largest timestamp). See
:mod:`plog.engine.inspect.lookup` for the offline differences from a running broker.
"""

from __future__ import annotations

import os
from bisect import bisect_right

from plog.formats.errors import FormatError
from plog.formats.indexes import OFFSET_INDEX_ENTRY_SIZE, OFFSET_INDEX_KEY, TIME_INDEX_ENTRY_SIZE

from plog.engine.errors import LogDirError
from plog.engine.inspect.lookup_results import LookupStep
from plog.engine.storage.discovery import NotAKafkaPathError, PartitionInfo, SegmentFiles, classify, log_dirs
from plog.engine.storage.discovery import partition_facts, read_checkpoints, scan_partition, segment_base_offset
from plog.engine.storage.file_names import LOG_START_OFFSET_CHECKPOINT, file_name
from plog.engine.storage.file_records import FileBatches
from plog.engine.storage.index_file import IndexFile, largest_lower_bound

#: First read when scanning forward from an index entry: Kafka indexes every 4 KiB, so the
#: batch sought is almost always within the first read.
SCAN_CHUNK = 64 * 1024


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



# -- segment-level helpers ---------------------------------------------------------------


def log_size(seg: SegmentFiles) -> int:
    return os.path.getsize(seg.log)


def segment_batches(seg: SegmentFiles, position: int) -> FileBatches:
    """The batches of ``seg`` from ``position`` on, read in chunks of :data:`SCAN_CHUNK`."""
    return FileBatches(seg.log, position, chunk_size=SCAN_CHUNK)


def segment_next_offset(seg: SegmentFiles) -> tuple[int, list[LookupStep]]:
    """``LogSegment.readNextOffset``: the offset after the segment's last batch (its base
    offset when empty), reading from the last offset-index entry to the end."""
    steps = []
    with IndexFile(seg.index, OFFSET_INDEX_ENTRY_SIZE, seg.base_offset) as idx:
        last = idx.last_offset_entry()
    size = log_size(seg)
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
    for batch in segment_batches(seg, position):
        if batch.max_timestamp > best:
            best, best_offset = batch.max_timestamp, batch.last_offset
    return best, best_offset, how


__all__ = ["PartitionView", "log_size", "open_partition", "segment_batches", "segment_next_offset"]
