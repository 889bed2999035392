"""A segment as recovery sees it, read-only: Kafka's ``LogSegment.recover`` walk (what the
loader will keep and truncate), ``readNextOffset``, and the index facts that decide whether
a segment is revalidated.

Nothing here writes: the plan predicts with these what the loader then does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from plog.formats.crc import crc32c

from plog.formats.errors import FormatError
from plog.formats.indexes import OFFSET_INDEX_ENTRY_SIZE
from plog.formats.record_batch import CRC_START

from plog.engine.storage import recovery_walk
from plog.engine.storage.file_records import FileBatches
from plog.engine.storage.file_names import INDEX_FILE_SUFFIX, LOG_FILE_SUFFIX
from plog.engine.storage.index_file import IndexFile
from plog.engine.storage.segment import INT_MAX


@dataclass
class PlannedSegment:
    """A segment as the loader will open it, and why it is revalidated."""

    name: str  # final name of the .log
    disk: str  # its name on disk now (a .swap before the swap completes)
    base: int
    size: int
    kafka: list[str] = field(default_factory=list)  # why a broker's start-up recovers it anyway
    extra: list[str] = field(default_factory=list)  # why plog recovers it beyond Kafka's rules
    reasons: list[str] = field(default_factory=list)  # every reason it is revalidated (none: it is not)


def index_problem(path: Path, entry_size: int, min_entries: int) -> str | None:
    """Why an existing index file cannot be trusted, or None: a zero-filled tail (a
    preallocated index nobody trimmed) or a length that is not whole entries."""
    with IndexFile(path, entry_size, 0, trim_zero_tail=False) as index:
        if index.missing:
            return None
        if index.file_length % entry_size:
            return f"{index.file_length} bytes is not a whole number of {entry_size}-byte entries"
        if index.slots and index.slots >= min_entries and index.entry_bytes(index.slots - 1) == bytes(entry_size):
            return "zero-filled tail (preallocated, never trimmed)"
    return None


@dataclass
class KafkaScan:
    """One segment validated as ``LogSegment.recover`` would (Kafka's rules)."""

    valid_bytes: int = 0
    next_offset: int | None = None
    error: str | None = None
    kind: str | None = None
    overflow: str | None = None
    #: The native walk of the whole file, which the load may apply instead of walking it
    #: again (engine/storage/recovery_walk.py's ``Prevalidated``; None on the reference path).
    prevalidated: object | None = None


def kind_of(reason: str) -> str:
    """A short name for why validation stopped, from the error's message."""
    low = reason.lower()
    if "invalid offset" in low or "offsets going backwards" in low:
        return "offsets going backwards"
    if "crc" in low:
        return "crc mismatch"
    if "partial batch" in low:
        return "torn tail"
    if "magic" in low:
        return "invalid magic"
    if "size" in low or "overhead" in low:
        return "invalid size"
    if "offset" in low:
        return "invalid offsets"
    return "invalid batch"


@dataclass
class _ScanLoop:
    """The scan loop's state (see :func:`kafka_scan`), which the native walk hands over."""

    valid: int = 0
    last_index_entry: int = 0
    last_indexed: int | None = None
    time_ts: int = -1
    time_off: int = 0
    time_entries: int = 0
    max_ts: int = -1
    max_ts_off: int = 0


def kafka_scan(path: Path, base: int, size: int, interval: int) -> KafkaScan:
    """Validate ``path`` batch by batch exactly as ``LogSegment.recover`` does, including the
    index appends that refuse offsets going backwards (Kafka then empties the segment).

    The native walk (engine/storage/recovery_walk.py) scans up to the first unusual batch;
    this loop, the reference, goes on from there (or scans it all on the reference path)."""
    scan = KafkaScan()
    loop = _ScanLoop(time_off=base, max_ts_off=base)
    start = 0
    if recovery_walk.usable(base, interval):
        state, trailing, stopped, scan.prevalidated = recovery_walk.scan_prefix(path, base, size, interval)
        (loop.valid, loop.last_index_entry, loop.max_ts, loop.max_ts_off, _count, scan.next_offset, off_entries,
         _off_max, off_last, loop.time_entries, _time_max, loop.time_ts, loop.time_off) = state[:13]
        loop.last_indexed = off_last if off_entries else None
        if not stopped:
            return _scan_end(scan, loop, base, trailing)
        start = loop.valid
    batches = FileBatches(path, start, size)
    try:
        if _scan_batches(batches, scan, loop, base, interval):
            return scan
    except FormatError as e:
        scan.error = e.reason
        scan.kind = kind_of(e.reason)
    return _scan_end(scan, loop, base, batches.trailing)


def _scan_batches(batches: FileBatches, scan: KafkaScan, loop: _ScanLoop, base: int, interval: int) -> bool:
    """The reference loop of :func:`kafka_scan`; True when it decided the scan (offsets
    going backwards: Kafka empties the segment). ``loop`` holds its state afterwards, also
    when a batch raises."""
    valid, last_index_entry, last_indexed = loop.valid, loop.last_index_entry, loop.last_indexed
    time_ts, time_off, time_entries = loop.time_ts, loop.time_off, loop.time_entries
    max_ts, max_ts_off = loop.max_ts, loop.max_ts_off
    try:
        for batch in batches:
            if batch.magic != 2 or crc32c(batch.buffer[CRC_START:]) != batch.crc:
                batch.ensure_valid()
            last = batch.last_offset
            if not base <= last <= base + INT_MAX:
                scan.overflow = (f"offset {last} at position {batch.position} does not fit 31 bits above the base "
                                 f"offset {base}: the segment is split (KAFKA-6264)")
            if batch.max_timestamp > max_ts:
                max_ts, max_ts_off = batch.max_timestamp, last
            if valid - last_index_entry > interval and scan.overflow is None:
                if (last_indexed is not None and last <= last_indexed) or (time_entries and max_ts_off < time_off):
                    scan.valid_bytes, scan.next_offset = 0, base
                    scan.kind = "offsets going backwards"
                    scan.error = (f"invalid offset during recovery: offset {last} at position {batch.position} is not "
                                  "above an earlier indexed offset, so Kafka empties the segment")
                    return True
                last_indexed = last
                if max_ts > time_ts:
                    time_ts, time_off, time_entries = max_ts, max_ts_off, time_entries + 1
                last_index_entry = valid
            valid += batch.size_in_bytes
            scan.next_offset = last + 1
    finally:
        loop.valid, loop.last_index_entry, loop.last_indexed = valid, last_index_entry, last_indexed
        loop.time_ts, loop.time_off, loop.time_entries = time_ts, time_off, time_entries
        loop.max_ts, loop.max_ts_off = max_ts, max_ts_off
    return False


def _scan_end(scan: KafkaScan, loop: _ScanLoop, base: int, trailing) -> KafkaScan:
    """What :func:`kafka_scan` concludes after the loop (trailing bytes, the closing time
    index entry)."""
    if scan.error is None and trailing is not None:
        t = trailing
        scan.error = (f"partial batch at the end of the segment ({t.length} bytes"
                      + (f" of {t.declared_size})" if t.declared_size else ")"))
        scan.kind = kind_of(scan.error)
    if scan.error is None and scan.overflow is None and loop.time_entries and loop.max_ts_off < loop.time_off:
        # recover()'s closing time index entry goes backwards too: the same InvalidOffsetException
        scan.valid_bytes, scan.next_offset = 0, base
        scan.kind = "offsets going backwards"
        scan.error = "invalid offset during recovery: the time index's last entry would go backwards"
        return scan
    scan.valid_bytes = loop.valid
    if scan.next_offset is None:
        scan.next_offset = base
    return scan


def read_next_offset(part: Path, seg: PlannedSegment, view: dict[str, str]) -> int:
    """``readNextOffset`` read-only: from the offset index's last entry to the end."""
    prefix = seg.name[: -len(LOG_FILE_SUFFIX)]
    start = 0
    index = view.get(prefix + INDEX_FILE_SUFFIX)
    if index is not None and index_problem(part / index, OFFSET_INDEX_ENTRY_SIZE, 1) is None:
        with IndexFile(part / index, OFFSET_INDEX_ENTRY_SIZE, seg.base, trim_zero_tail=False) as idx:
            last = idx.last_offset_entry()
        if last is not None and 0 <= last.position < seg.size:
            start = last.position
    nxt = seg.base
    try:
        for batch in FileBatches(part / seg.disk, start, seg.size):
            nxt = batch.next_offset
    except FormatError:
        pass
    return nxt


__all__ = ["KafkaScan", "PlannedSegment", "index_problem", "kafka_scan", "kind_of", "read_next_offset"]
