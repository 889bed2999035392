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

Every lookup returns a result dataclass (:mod:`~plog.engine.inspect.lookup_results`) whose
``steps`` list says what was done, in order, with the index entries probed by each binary
search; ``plog lookup --explain`` prints it. The partition looked at is a
:class:`~plog.engine.inspect.partition_view.PartitionView`.
"""

from __future__ import annotations

import os
from typing import Callable, Iterator

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

from plog.engine.errors import InvalidOffsetSpecError, OffsetOutOfRangeError
from plog.engine.inspect.lookup_results import (
    BatchHeader,
    IndexProbe,
    LookupStep,
    OffsetLookupResult,
    TimestampLookupResult,
)
from plog.engine.inspect.partition_view import (
    PartitionView,
    log_size,
    open_partition,
    segment_batches,
    segment_next_offset,
)
from plog.engine.offset_spec import (EARLIEST_TIMESTAMP, INT64_MAX, LATEST_TIMESTAMP, MAX_TIMESTAMP,
                                     SPECIAL_TIMESTAMPS, OffsetSpec, parse_list_offsets_timestamp, parse_offset)
from plog.engine.storage.discovery import SegmentFiles
from plog.engine.storage.file_names import INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, file_name
# The read-only index reader; named here too (``lookup.IndexFile``) for older callers.
from plog.engine.storage.index_file import IndexFile, largest_lower_bound


#: Batches listed one by one in a step's data (the count is always exact).
MAX_LISTED_BATCHES = 50


def _as_view(target, topic, partition) -> PartitionView:
    return target if isinstance(target, PartitionView) else open_partition(target, topic, partition)


# -- batches and index probes ------------------------------------------------------------


def _copy(batch):
    """A batch that outlives the reader's reused buffer."""
    data = memoryview(bytes(batch.buffer))
    return LegacyBatch(data, batch.position) if isinstance(batch, LegacyBatch) else RecordBatch(data, batch.position)


def _listed(batch) -> dict:
    return {"position": batch.position, "base_offset": batch.base_offset if not isinstance(batch, LegacyBatch)
            or batch.compression == 0 else None, "last_offset": batch.last_offset,
            "max_timestamp": batch.max_timestamp, "size": batch.size_in_bytes}




def _scan(seg: SegmentFiles, position: int, hit: Callable) -> tuple[int, list[dict], object]:
    """Read the batches of ``seg`` from ``position`` until ``hit(batch)`` is not None:
    ``(batches read, the first MAX_LISTED_BATCHES of them listed, that value or None)``."""
    n, listed = 0, []
    for batch in segment_batches(seg, position):
        n += 1
        if len(listed) < MAX_LISTED_BATCHES:
            listed.append(_listed(batch))
        found = hit(batch)
        if found is not None:
            return n, listed, found
    return n, listed, None


def _more(n: int) -> str:
    return f" (first {MAX_LISTED_BATCHES} listed in the data)" if n > MAX_LISTED_BATCHES else ""


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

def parse_lookup_offset(spec: str) -> OffsetSpec:
    """The part of the offset language a lookup by offset takes
    (:func:`plog.engine.offset_spec.parse_offset`): an absolute offset, ``earliest``,
    ``latest``, ``+N`` or ``-N``. Raises ``ValueError`` (:class:`InvalidOffsetSpecError`)
    for anything else, times and ``committed`` included."""
    try:
        parsed = parse_offset(spec)
    except InvalidOffsetSpecError:
        parsed = None
    if parsed is None or parsed.kind not in ("offset", "earliest", "from_start", "latest", "from_end"):
        raise InvalidOffsetSpecError(f"invalid offset {spec!r}: expected N, +N, -N (N up to {INT64_MAX}), earliest or "
                                     "latest; a time goes to a lookup by timestamp")
    return parsed


def resolve_offset(view: PartitionView, spec: int | str) -> int:
    """An offset of the partition from :func:`parse_lookup_offset`'s forms (``earliest``:
    the log start offset, ``latest``: the log end offset, ``+N`` after the log start, ``-N``
    before the log end). Not clamped to the log: an offset outside it is the lookup's "out of
    range" answer. Raises ``ValueError`` (:class:`InvalidOffsetSpecError`)."""
    if isinstance(spec, int):
        return spec
    parsed = parse_lookup_offset(spec)
    if parsed.kind == "offset":
        return parsed.value
    if parsed.kind in ("earliest", "from_start"):
        return view.log_start_offset + parsed.value
    return view.log_end_offset - parsed.value


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
    floor = view.floor_segment(offset)
    seg = view.segments[floor]
    steps.append(LookupStep("segment", f"segment {seg.name}: the greatest base offset <= {offset} "
                            f"among {len(view.segments)} segment(s)", {"segment": seg.base_offset, "index": floor}))
    seg_i, batch, first_probe, first_scan_start, scanned_total = _batch_holding(view, floor, offset, steps)
    seg = view.segments[seg_i]
    header = BatchHeader.of(batch, seg.base_offset)
    steps.append(LookupStep("batch", f"batch at position {header.position} of {seg.name}.log: base offset "
                            f"{header.base_offset}, last offset {header.last_offset}, "
                            f"{header.records_count if header.records_count is not None else '?'} record(s), "
                            f"{header.codec}, crc {'valid' if header.crc_valid else 'INVALID'}"))
    rec_seg, rec_pos, rec_offset, rec_ts, rec_error = _record_step(view, seg_i, batch, offset, decode, header, steps)
    return OffsetLookupResult(
        partition_path=view.path, topic=view.topic, partition=view.partition, target=offset,
        log_start_offset=start, log_end_offset=leo, segment_base_offset=seg.base_offset, segment_path=seg.log,
        segment_size=log_size(seg), floor_segment_base_offset=view.bases[floor], index=first_probe,
        scan_start_position=first_scan_start, batches_scanned=scanned_total, batch=header,
        record_offset=rec_offset, record_timestamp=rec_ts, record_batch_position=rec_pos,
        record_segment_base_offset=rec_seg, record_error=rec_error, steps=steps)


def _batch_holding(view: PartitionView, i: int, offset: int, steps: list[LookupStep]) -> tuple:
    """The first batch whose last offset >= ``offset``, from the floor segment ``i`` on (a
    segment whose batches all end below it, a gap compaction left at its end, sends Kafka's
    read to the next segment): ``(segment index, the batch, the floor segment's index probe
    and scan start position, batches read)``."""
    first_probe = first_scan_start = None
    scanned_total = 0
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
        n, listed, b = _scan(seg, position, lambda batch: _copy(batch) if batch.last_offset >= offset else None)
        scanned_total += n
        data = {"segment": seg.base_offset, "from": position, "batches": n, "listed": listed}
        if b is not None:
            steps.append(LookupStep("scan", f"read {n} batch(es) from position {position}{_more(n)}: the first with "
                                    f"last offset >= {offset} is at position {b.position} "
                                    f"(offsets {b.base_offset}..{b.last_offset})", data))
            return i, b, first_probe, first_scan_start, scanned_total
        steps.append(LookupStep("scan", f"read {n} batch(es) from position {position}{_more(n)}: none reaches "
                                f"offset {offset} (a gap left by compaction); Kafka reads the next segment", data))
        i += 1
    # Only possible if the log end offset moved while we read.
    raise OffsetOutOfRangeError(f"offset {offset}: no batch at or after it in {view.path}")


def _record_step(view: PartitionView, seg_i: int, batch, offset: int, decode: bool, header: BatchHeader,
                 steps: list[LookupStep]) -> tuple:
    """The first record at or after ``offset`` and the step that says so: ``(segment base,
    batch position, offset, timestamp, error)``, None where unknown."""
    rec_offset = rec_ts = rec_pos = rec_seg = None
    rec_error = None
    try:
        hit = _first_record_at_or_after(view, seg_i, batch, offset, decode)
    except FormatError as e:
        hit, rec_error = None, f"{view.segments[seg_i].log}: {e}"
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
    return rec_seg, rec_pos, rec_offset, rec_ts, rec_error


def _iter_from(view: PartitionView, seg_i: int, position: int) -> Iterator[tuple[int, object]]:
    """Batches from ``position`` of segment ``seg_i`` to the end of the log."""
    for i in range(seg_i, len(view.segments)):
        for batch in segment_batches(view.segments[i], position if i == seg_i else 0):
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
    n, listed, hit = _scan(seg, position, lambda batch: _record_at_or_after_time(batch, timestamp, start, seg))
    result.batches_scanned = n
    data = {"from": position, "batches": n, "listed": listed}
    if hit is not None:
        result.found = True
        result.offset, result.timestamp, result.leader_epoch, result.batch = hit
        steps.append(LookupStep("scan", f"read {n} batch(es) from position {position}{_more(n)}; the batch at "
                                f"position {result.batch.position} has max timestamp {result.batch.max_timestamp} >= "
                                f"{timestamp}", data))
        steps.append(LookupStep("answer", f"offset {result.offset}: the first record with timestamp >= {timestamp}"
                                f" (its timestamp is {result.timestamp})"))
    else:
        steps.append(LookupStep("scan", f"read {n} batch(es) from position {position}{_more(n)}: no record with "
                                f"timestamp >= {timestamp} and offset >= {start}", data))
        steps.append(LookupStep("answer", "no offset (ListOffsets answers offset -1); Kafka does not look in "
                                "later segments"))
    return result


def _leader_epoch(batch) -> int | None:
    """The batch's partition leader epoch, as ListOffsets answers it (None for v0/v1)."""
    ple = batch.partition_leader_epoch
    return ple if not isinstance(batch, LegacyBatch) and ple >= 0 else None


def _record_at_or_after_time(batch, timestamp: int, start: int, seg: SegmentFiles) -> tuple | None:
    """``(offset, timestamp, leader epoch, batch header)`` of the first record of ``batch``
    with timestamp >= ``timestamp`` and offset >= ``start``, or None."""
    if batch.max_timestamp >= timestamp:
        for record in batch.records():
            if record.timestamp >= timestamp and record.offset >= start:
                return record.offset, record.timestamp, _leader_epoch(batch), BatchHeader.of(batch, seg.base_offset)
    return None


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
    for batch in segment_batches(seg, position):
        n += 1
        if batch.max_timestamp == ts:
            if batch.magic > 0:  # RecordBatch.offsetOfMaxTimestamp: none for magic 0
                for record in batch.records():
                    if record.timestamp == ts:
                        result.found, result.offset, result.timestamp = True, record.offset, ts
                        result.leader_epoch = _leader_epoch(batch)
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

#: A lookup's timestamps are ListOffsets': the offset language's parser for them.
parse_timestamp = parse_list_offsets_timestamp


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
    "parse_lookup_offset",
    "parse_timestamp",
    "resolve_offset",
    "segment_next_offset",
    "time_index_lookup",
]
