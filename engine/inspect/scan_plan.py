"""Scan plans: which bytes of which segments a scan reads, cut into work units, and the
reader of one unit's byte ranges (the planning half of :mod:`plog.engine.inspect.scan`).

* Partitions come from :mod:`plog.engine.storage.discovery`; only ``current`` partition folders
  are scanned (``-delete``/``-future``/stray copies would count records twice).
* A segment is a :class:`ScanSlice`, a byte range ``[start, end)`` of its ``.log`` file.
  A segment larger than the unit size is cut at batch boundaries taken from its sparse
  ``.index``; each cut is checked against the entry found at that position (a whole
  v2/v1/v0 entry with a valid CRC whose offsets agree with the index entry), so a stale
  index cannot cut a batch in half — a cut that does not check out is simply not made.
* Filters are pushed down to segment selection: offset ranges through the segment file
  names and the offset index, time ranges through each closed segment's largest
  timestamp (the last time index entry, which Kafka itself trusts for ListOffsets) and
  the time index lookup for the first position worth reading. Pushdown only skips bytes
  that cannot match; every record is still checked against the filter.
* Slices are bin-packed, in partition and offset order, into :class:`ScanUnit` s of
  about ``unit_bytes`` (one Spark task each: a task costs ~28 ms, so thousands of small
  segments must not become thousands of tasks).

:func:`walk_slice` reads a slice through :class:`plog.engine.storage.file_records.FileBatches`
(bounded chunks, never a whole file); an entry whose header is impossible ends that slice's
walk and is reported as a :class:`SliceProblem` with file and position (the bytes after it
cannot be framed without an index).
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from typing import Iterable, Iterator, NamedTuple

from plog.formats import native
from plog.formats.batch_header import V2_HEADER_SIZE, entry_offsets
from plog.formats.batches import TrailingBytes
from plog.formats.errors import FormatError
from plog.formats.legacy import LegacyBatch
from plog.formats.record_batch import RecordBatch
from plog.formats.indexes import (
    OFFSET_INDEX_ENTRY_SIZE,
    OFFSET_INDEX_KEY,
    OFFSET_INDEX_VALUE,
    TIME_INDEX_ENTRY_SIZE,
    TIME_INDEX_KEY,
)

from plog.engine.errors import ScanError
from plog.engine.inspect.scan_filter import ScanFilter
from plog.engine.storage.batch_resync import EntryRules, valid_entry_at
from plog.engine.storage.discovery import NotAKafkaPathError, PartitionInfo, classify, partitions as list_partitions
from plog.engine.storage.file_names import LOG_FILE_SUFFIX
from plog.engine.storage.descriptor_budget import ReopenableFile
from plog.engine.storage.file_records import FileBatches, _read_into
from plog.engine.storage.index_file import IndexFile, largest_lower_bound

#: Bytes per work unit when the caller does not choose: big enough that the ~28 ms fixed
#: cost of a Spark task is noise, small enough that a 1 GiB segment gives 8 units to
#: spread over the cores.
DEFAULT_UNIT_BYTES = 128 << 20
#: Smallest unit the automatic sizing picks (below this, task overhead dominates).
MIN_AUTO_UNIT_BYTES = 4 << 20
#: Chunk size of the reads inside a unit: memory per running task is about this much.
CHUNK_BYTES = 8 << 20

INT64_MAX = (1 << 63) - 1


class ScanSlice(NamedTuple):
    """Bytes ``[start, end)`` of one segment's ``.log``; ``end`` None reads to the end of
    the file as it is when read (the active segment may grow)."""

    topic: str
    partition: int
    log_dir: str  # the partition folder's parent: replicas of one partition differ here
    segment: str
    base_offset: int
    start: int
    end: int | None
    size: int


class ScanUnit(NamedTuple):
    """One task: slices in partition and offset order. ``index`` orders units in a plan."""

    index: int
    slices: tuple[ScanSlice, ...]
    size: int


@dataclass
class ScanPlan:
    units: list[ScanUnit]
    partitions: list[tuple[str, int, str]]  # (topic, partition, log dir) of every replica scanned
    skipped_folders: list[str]  # partition folders not scanned (-delete, -future, unparsable)
    total_bytes: int
    pruned_segments: int  # segments left out by offset/time pushdown


def _file_size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return 0


_SPLIT_POINT_RULES = EntryRules(min_offset=0, legacy=True)


def _entry_at(fd: int, position: int, file_size: int) -> tuple[int, int] | None:
    """``(first offset, last offset)`` of the entry at ``position`` when a whole entry
    with a valid CRC starts there (:func:`~plog.engine.storage.batch_resync.valid_entry_at`),
    else None. (v0/v1 compressed wrappers carry their last offset.) A header alone is not
    enough: inside a batch, bytes that read as a plausible v0/v1 header are common (a zero
    byte at +16 is magic 0), so only the CRC tells a batch start from the middle of one."""
    head = os.pread(fd, V2_HEADER_SIZE, position)
    if not valid_entry_at(fd, head, 0, position, file_size, _SPLIT_POINT_RULES):
        return None
    return entry_offsets(head)


def _open_log(seg) -> int:
    return os.open(seg.log, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))


def _checked_position(seg, idx, slot: int, max_offset: int, file_size: int, tries: int = 8) -> int:
    """The position of the offset index entry at ``slot`` if an entry whose offsets agree
    with it starts there, else of the nearest earlier entry that checks out (up to
    ``tries``), else 0. Entries with an offset above ``max_offset`` are passed over."""
    fd = _open_log(seg)
    try:
        for s in range(slot, max(-1, slot - tries), -1):
            entry = idx.offset_entry(s)
            if entry.offset > max_offset or not 0 < entry.position < file_size:
                continue
            found = _entry_at(fd, entry.position, file_size)
            if found is not None and found[0] <= entry.offset:
                return entry.position
        return 0
    finally:
        os.close(fd)


def _split_points(seg, size: int, unit_bytes: int) -> list[int]:
    """Positions (ascending, excluding 0 and ``size``) at which ``seg`` may be cut into
    pieces of about ``unit_bytes``: offset index entries whose batch headers check out."""
    if size <= unit_bytes or seg.index is None:
        return []
    cuts: list[int] = []
    with IndexFile(seg.index, OFFSET_INDEX_ENTRY_SIZE, seg.base_offset) as idx:
        if idx.entries == 0:
            return []
        fd = _open_log(seg)
        try:
            want = unit_bytes
            slot = 0
            while want < size - unit_bytes // 4 and slot < idx.entries:
                # The first entry at or after `want` bytes (Kafka's index search, by position).
                lo = max(slot, largest_lower_bound(idx, want - 1, OFFSET_INDEX_VALUE) + 1)
                if lo >= idx.entries:
                    break
                entry = idx.offset_entry(lo)
                slot = lo + 1
                last_cut = cuts[-1] if cuts else 0
                if entry.position <= last_cut or entry.position >= size:
                    continue
                found = _entry_at(fd, entry.position, size)
                # Kafka indexes an append's largest offset at the position of the append's
                # first batch, so the entry's offset is at or after the batch's base.
                if found is not None and found[0] <= entry.offset:
                    cuts.append(entry.position)
                    want = entry.position + unit_bytes
                else:
                    want += unit_bytes // 8 or 1  # try the next stretch; never cut blindly
        finally:
            os.close(fd)
    return cuts


def _segment_max_timestamp(seg) -> int | None:
    """A closed segment's largest timestamp from its time index, or None when unknown."""
    if seg.timeindex is None:
        return None
    with IndexFile(seg.timeindex, TIME_INDEX_ENTRY_SIZE, seg.base_offset) as tidx:
        entry = tidx.last_time_entry()
    return entry.timestamp if entry is not None and entry.timestamp >= 0 else None


def _start_position(seg, flt: ScanFilter, size: int) -> int:
    """The first byte of ``seg`` worth reading for ``flt`` (0 unless the indexes say more).

    Offset index positions are checked like split points (a stale or garbage ``.index``
    must not make the scan start past matching records, or inside a batch)."""
    position = 0
    if flt.offset_lo is not None and seg.index is not None and flt.offset_lo > seg.base_offset:
        with IndexFile(seg.index, OFFSET_INDEX_ENTRY_SIZE, seg.base_offset) as idx:
            # Entry (o, p): the append whose largest offset is o starts at p; every offset
            # below the entry's is in a batch before p or in the batch at p, so the entry
            # for the largest o < offset_lo is a safe start.
            slot = largest_lower_bound(idx, flt.offset_lo - seg.base_offset - 1, OFFSET_INDEX_KEY)
            if slot >= 0:
                position = max(position, _checked_position(seg, idx, slot, flt.offset_lo - 1, size))
    if flt.time_lo is not None and seg.timeindex is not None and seg.index is not None:
        with IndexFile(seg.timeindex, TIME_INDEX_ENTRY_SIZE, seg.base_offset) as tidx:
            # Entries hold the largest timestamp so far: (t, o) with t < time_lo means no
            # record up to offset o can match, so reading may start at o's batch.
            slot = largest_lower_bound(tidx, flt.time_lo - 1, TIME_INDEX_KEY)
            entry = tidx.time_entry(slot) if slot >= 0 else None
        if entry is not None and entry.timestamp < flt.time_lo:
            with IndexFile(seg.index, OFFSET_INDEX_ENTRY_SIZE, seg.base_offset) as idx:
                oslot = largest_lower_bound(idx, entry.offset - seg.base_offset, OFFSET_INDEX_KEY)
                if oslot >= 0:
                    position = max(position, _checked_position(seg, idx, oslot, entry.offset, size))
    return position


def _partitions_to_scan(paths: list[str], flt: ScanFilter
                        ) -> tuple[list[PartitionInfo], list[PartitionInfo], list[str]]:
    """Every partition folder under ``paths`` (once), the ones to scan in (topic,
    partition, path) order, and the folders skipped (not ``current``, or unparsable)."""
    infos: list[PartitionInfo] = []
    seen: set[str] = set()
    for path in paths:
        path = os.path.abspath(path)  # rows name segments by absolute path, wherever they run
        if os.path.isfile(path):
            if path.endswith(LOG_FILE_SUFFIX):
                raise NotAKafkaPathError(f"{path}: a segment file; scan reads directories (plog dump reads one "
                                         f"segment)")
            raise NotAKafkaPathError(f"{path}: not a directory; scan reads data directories, log directories or "
                                     f"partition folders")
        classify(path)  # raises for a path that is no Kafka directory
        for info in list_partitions(path):
            if info.path not in seen:
                seen.add(info.path)
                infos.append(info)
    skipped: list[str] = []
    chosen: list[PartitionInfo] = []
    for info in infos:
        if info.kind != "current" or info.topic_partition is None:
            skipped.append(info.path)
        elif flt.wants_topic(info.topic_partition.topic):
            chosen.append(info)
    chosen.sort(key=lambda i: (i.topic_partition.topic, i.topic_partition.partition, i.path))
    return infos, chosen, skipped


def _check_topics(paths: list[str], flt: ScanFilter, infos: list[PartitionInfo]) -> None:
    """A topic asked for by name that is not there is a mistake to report (kcat's "Unknown
    topic"), not an empty result that looks like a topic without records."""
    if flt.topics is None:
        return
    present = {i.topic_partition.topic for i in infos if i.topic_partition is not None}
    missing = sorted(flt.topics - present)
    if missing:
        there = ", ".join(sorted(present)[:20]) or "none"
        raise ScanError(f"no topic {', '.join(map(repr, missing))} in {', '.join(paths)} (topics there: {there})")


def _segments_to_scan(chosen: list[PartitionInfo], flt: ScanFilter) -> tuple[list[tuple], int]:
    """``(info, segment, size)`` of every non-empty segment the filter's ranges can match,
    and how many segments the ranges pruned."""
    segments = []
    pruned = 0
    for info in chosen:
        segs = [s for s in info.segments if s.log is not None]
        for k, seg in enumerate(segs):
            size = _file_size(seg.log)
            is_last = k == len(segs) - 1
            next_base = segs[k + 1].base_offset if not is_last else None
            if size == 0:
                continue
            if flt.has_offset_range:
                last = next_base - 1 if next_base is not None else INT64_MAX
                if not flt.wants_offsets(seg.base_offset, last):
                    pruned += 1
                    continue
            if flt.time_lo is not None and not is_last:
                largest = _segment_max_timestamp(seg)
                if largest is not None and largest < flt.time_lo:
                    pruned += 1
                    continue
            segments.append((info, seg, size))
    return segments, pruned


def _slices(segments: list[tuple], flt: ScanFilter, unit_bytes: int) -> list[ScanSlice]:
    """Each segment from its first byte worth reading, cut at checked split points."""
    slices: list[ScanSlice] = []
    for info, seg, size in segments:
        tp = info.topic_partition
        start = _start_position(seg, flt, size) if (flt.offset_lo is not None or flt.time_lo is not None) else 0
        cuts = [c for c in _split_points(seg, size, unit_bytes) if c > start]
        bounds = [start] + cuts + [None]
        for a, b in zip(bounds, bounds[1:]):
            end_bytes = size if b is None else b
            slices.append(ScanSlice(tp.topic, tp.partition, os.path.dirname(info.path), seg.log, seg.base_offset,
                                    a, b, max(0, end_bytes - a)))
    return slices


def _pack(slices: list[ScanSlice], unit_bytes: int) -> list[ScanUnit]:
    """Slices in order, bin-packed into units of about ``unit_bytes``."""
    units: list[ScanUnit] = []
    current: list[ScanSlice] = []
    current_size = 0
    for s in slices:
        if current and current_size + s.size > unit_bytes:
            units.append(ScanUnit(len(units), tuple(current), current_size))
            current, current_size = [], 0
        current.append(s)
        current_size += s.size
    if current:
        units.append(ScanUnit(len(units), tuple(current), current_size))
    return units


def plan_scan(paths: Iterable[str], flt: ScanFilter | None = None, *, unit_bytes: int | None = None,
              parallelism: int = 2) -> ScanPlan:
    """Plan a scan of ``paths`` (data directories, log directories or partition folders).

    ``unit_bytes`` None sizes units so that every core gets about two (between
    :data:`MIN_AUTO_UNIT_BYTES` and :data:`DEFAULT_UNIT_BYTES`). Raises
    ``FileNotFoundError`` or :class:`NotAKafkaPathError` for a path that is not a Kafka
    directory, and :class:`ScanError` for a topic of ``flt.topics`` that no path holds,
    before anything is read.
    """
    flt = flt or ScanFilter()
    paths = list(paths)
    infos, chosen, skipped = _partitions_to_scan(paths, flt)
    _check_topics(paths, flt, infos)
    segments, pruned = _segments_to_scan(chosen, flt)
    total = sum(s[2] for s in segments)
    if unit_bytes is None:
        unit_bytes = max(MIN_AUTO_UNIT_BYTES, min(DEFAULT_UNIT_BYTES, total // max(1, 2 * parallelism) + 1))
    if unit_bytes <= 0:
        raise ScanError(f"unit size must be positive, got {unit_bytes}")
    units = _pack(_slices(segments, flt, unit_bytes), unit_bytes)
    tps = [(i.topic_partition.topic, i.topic_partition.partition, os.path.dirname(i.path)) for i in chosen]
    return ScanPlan(units, tps, skipped, total, pruned)


# -- reading a slice -------------------------------------------------------------------------


class SliceProblem(NamedTuple):
    topic: str
    partition: int
    segment: str
    position: int
    message: str


def first_offset_bound(batch) -> int:
    """A lower bound of the first offset in ``batch``, known without decompressing: a v2
    batch's base offset, a plain v0/v1 message's offset, and 0 for a compressed v0/v1
    wrapper (its offset is its *last* inner offset; the first is only known inside)."""
    if batch.magic == 2:
        return batch.base_offset
    return batch.offset if batch.compression == 0 else 0


def walk_slice(s: ScanSlice, problems: list) -> Iterator:
    """The entries of a slice; an impossible entry header ends the walk with a problem."""
    batches = FileBatches(s.segment, s.start, s.end, chunk_size=CHUNK_BYTES)
    try:
        yield from batches
    except FileNotFoundError:
        problems.append(SliceProblem(s.topic, s.partition, s.segment, s.start,
                                     "the segment file disappeared during the scan"))
        return
    except FormatError as e:
        position = e.position if e.position is not None else batches.valid_end
        problems.append(SliceProblem(s.topic, s.partition, s.segment, position,
                                     f"{e.message if hasattr(e, 'message') else e}; the rest of the slice "
                                     f"(up to {s.end if s.end is not None else 'the end of the file'}) is not read"))
        return
    if batches.trailing is not None:
        _trailing_problem(s, batches.trailing, problems)


def walk_slice_native(s: ScanSlice, problems: list, scan) -> Iterator:
    """:func:`walk_slice` with a native scanner in front: each chunk of the slice goes to
    ``scan(view, start, end, base_position)`` (``plog._native.ScanStats.scan``), which
    walks it, takes the entries it can and returns ``(declined, valid_end, trailing,
    fault)``, ``declined`` listing ``(position, stop, *rest)``; this yields ``(batch,
    rest)`` for each declined entry, then handles the walk's end exactly as :func:`walk_slice` and
    :class:`~plog.engine.storage.file_records.FileBatches` do (same chunks, same carry-over
    of an entry cut by a chunk's end, same problems).

    The chunk buffer is private to this generator (no other thread holds it), so it is
    handed over read-only and the scanner reads it with the GIL released."""
    try:
        f = ReopenableFile(s.segment, os.O_RDONLY)
    except FileNotFoundError:
        problems.append(SliceProblem(s.topic, s.partition, s.segment, s.start,
                                     "the segment file disappeared during the scan"))
        return
    try:
        if stat.S_ISDIR(f.stat.st_mode):  # as FileBatches: open(2) takes a directory
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), s.segment)
        yield from _native_chunks(s, f, problems, scan)
    except FileNotFoundError:  # a reopen found it gone, as walk_slice reports it
        problems.append(SliceProblem(s.topic, s.partition, s.segment, s.start,
                                     "the segment file disappeared during the scan"))
    finally:
        f.close()


def _native_chunks(s: ScanSlice, f: ReopenableFile, problems: list, scan) -> Iterator:
    """The loop of :func:`walk_slice_native` (FileBatches._iter's, chunk by chunk)."""
    file_end = f.stat.st_size
    end = file_end if s.end is None else min(s.end, file_end)
    pos = s.start
    valid_end = pos
    buf = bytearray(min(CHUNK_BYTES, max(end - pos, 0)) or 1)
    while pos < end:
        want = min(len(buf), end - pos)
        got = _read_into(f.fd, memoryview(buf)[:want], pos)
        if got <= 0:
            return  # the file shrank under us: what was read is all there is
        view = memoryview(buf)[:got]
        # A read-only view, so the native walk runs without the GIL: ``buf`` is this
        # generator's own, referenced nowhere else, so no other thread can write it meanwhile.
        declined, stop, tail, fault = scan(view.toreadonly(), 0, got, pos)
        for start, entry_end, *rest in declined:
            entry = view[start:entry_end]
            yield (RecordBatch(entry, pos + start) if entry[16] == 2 else LegacyBatch(entry, pos + start)), rest
        valid_end = pos + stop
        if fault is not None:
            e = native.typed_error(fault)
            position = e.position if e.position is not None else valid_end
            problems.append(SliceProblem(s.topic, s.partition, s.segment, position,
                                         f"{e}; the rest of the slice (up to "
                                         f"{s.end if s.end is not None else 'the end of the file'}) is not read"))
            return
        at_eof = pos + got >= end or got < want
        if tail is None:
            pos = valid_end
            if at_eof:
                return
            continue
        tail = TrailingBytes(*tail)
        if at_eof:
            _trailing_problem(s, tail, problems)
            return
        if tail.position == pos and tail.declared_size is not None and tail.declared_size > len(buf):
            buf = bytearray(min(tail.declared_size, end - pos))
        elif tail.position == pos and tail.declared_size is None:
            _trailing_problem(s, tail, problems)
            return
        pos = tail.position


def _trailing_problem(s: ScanSlice, tail, problems: list) -> None:
    if s.end is None:
        # A partial entry at the end of a segment: what a crash leaves (recovery truncates it).
        problems.append(SliceProblem(s.topic, s.partition, s.segment, tail.position,
                                     f"{tail.length} trailing bytes are not a whole batch (a torn write?)"))
    else:
        problems.append(SliceProblem(s.topic, s.partition, s.segment, tail.position,
                                     f"{tail.length} bytes before the next slice at {s.end} are not a whole batch"))


__all__ = [
    "CHUNK_BYTES",
    "DEFAULT_UNIT_BYTES",
    "MIN_AUTO_UNIT_BYTES",
    "ScanPlan",
    "ScanSlice",
    "ScanUnit",
    "SliceProblem",
    "first_offset_bound",
    "plan_scan",
    "walk_slice",
    "walk_slice_native",
]
