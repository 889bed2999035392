"""Scans of whole log directories in parallel work units: the engine half of ``plog scan``.

A scan is planned once, where the paths are listed (the Spark driver, or the ``plog``
process), and run anywhere the files are visible at the same paths (Spark executors, or
local worker processes). Nothing here imports pyspark: ``plog.spark_tasks`` ships these
plans and functions to executors, and ``plog scan`` without ``--spark`` runs the very same
functions in a process pool, so the two paths agree by construction.

Planning (:func:`plan_scan`)
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

Running
  * :func:`unit_stats` returns per-partition :class:`PartitionStats`, a commutative and
    associative summary (counts, sums, min/max, a fixed histogram, a HyperLogLog sketch
    with a deterministic hash), so any split of the work merges to the same answer.
  * :func:`unit_records` yields the records that match a :class:`ScanFilter`, as
    :class:`ScanRecord` tuples, in offset order within each slice.
  * Every read goes through :class:`plog.engine.storage.file_records.FileBatches`: bounded chunks,
    never a whole file, whatever the segment size.

Damage: a batch whose CRC fails is counted (``corrupt_batches``) and its records are
skipped; an entry whose header is impossible ends that slice's walk and is reported in
``problems`` with file and position (the bytes after it cannot be framed without an index).
"""

from __future__ import annotations

import os
import struct
import zlib
from collections import Counter
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Iterable, Iterator, NamedTuple

from plog.formats.default_record import HEAD_KEY, HEAD_OFFSET, HEAD_SIZE, HEAD_TIMESTAMP, record_heads
from plog.formats.errors import FormatError
from plog.formats.indexes import OFFSET_INDEX_ENTRY_SIZE, OFFSET_INDEX_KEY, TIME_INDEX_ENTRY_SIZE, TIME_INDEX_KEY

from plog.engine.storage.discovery import NotAKafkaPathError, PartitionInfo, classify, partitions as list_partitions
from plog.engine.errors import EngineError
from plog.engine.storage.file_names import LOG_FILE_SUFFIX
from plog.engine.storage.file_records import FileBatches
from plog.engine.inspect.inventory import codec_name
from plog.engine.storage.batch_resync import EntryRules, valid_entry_at
from plog.engine.storage.index_file import IndexFile, largest_lower_bound

#: Bytes per work unit when the caller does not choose: big enough that the ~28 ms fixed
#: cost of a Spark task is noise, small enough that a 1 GiB segment gives 8 units to
#: spread over the cores.
DEFAULT_UNIT_BYTES = 128 << 20
#: Smallest unit the automatic sizing picks (below this, task overhead dominates).
MIN_AUTO_UNIT_BYTES = 4 << 20
#: Chunk size of the reads inside a unit: memory per running task is about this much.
CHUNK_BYTES = 8 << 20
#: Distinct producer ids kept per partition (the smallest ones); beyond it only the count
#: estimate grows, so hostile logs with millions of producer ids stay in bounded memory.
MAX_PRODUCERS_LISTED = 1024
#: Problems kept per partition.
MAX_PROBLEMS = 100

NO_TIMESTAMP = -1
INT64_MAX = (1 << 63) - 1


class ScanError(EngineError, ValueError):
    """A scan could not be planned or run (bad filter, no such path)."""


# -- filters -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScanFilter:
    """What a scan keeps. Ranges are half-open ``[lo, hi)``; None means unbounded.

    ``key`` matches a record whose key equals it; ``value_contains`` one whose value
    contains it; ``headers`` one that has every ``(key, value)`` pair among its headers
    (``value`` None matches a null header value). ``topics`` restricts the partitions.
    """

    topics: frozenset[str] | None = None
    offset_lo: int | None = None
    offset_hi: int | None = None
    time_lo: int | None = None
    time_hi: int | None = None
    key: bytes | None = None
    value_contains: bytes | None = None
    headers: tuple[tuple[str, bytes | None], ...] = ()

    @property
    def has_offset_range(self) -> bool:
        return self.offset_lo is not None or self.offset_hi is not None

    @property
    def has_time_range(self) -> bool:
        return self.time_lo is not None or self.time_hi is not None

    @property
    def has_record_predicate(self) -> bool:
        return self.key is not None or self.value_contains is not None or bool(self.headers)

    def wants_topic(self, topic: str) -> bool:
        return self.topics is None or topic in self.topics

    def wants_offsets(self, first: int, last: int) -> bool:
        """Whether any offset in ``[first, last]`` can match."""
        if self.offset_lo is not None and last < self.offset_lo:
            return False
        return not (self.offset_hi is not None and first >= self.offset_hi)

    def matches(self, offset: int, timestamp: int, key, value, headers) -> bool:
        if self.offset_lo is not None and offset < self.offset_lo:
            return False
        if self.offset_hi is not None and offset >= self.offset_hi:
            return False
        if self.time_lo is not None and timestamp < self.time_lo:
            return False
        if self.time_hi is not None and timestamp >= self.time_hi:
            return False
        if self.key is not None and (key is None or bytes(key) != self.key):
            return False
        if self.value_contains is not None and (value is None or self.value_contains not in value):
            return False
        for hk, hv in self.headers:
            if not any(k == hk and (v if v is None else bytes(v)) == hv for k, v in headers):
                return False
        return True

    # Spark data source options are strings: a filter travels as these.
    def to_options(self) -> dict[str, str]:
        from plog.formats.binary_json import encode_bytes
        import json

        out: dict[str, str] = {}
        if self.topics is not None:
            out["topics"] = ",".join(sorted(self.topics))
        for name in ("offset_lo", "offset_hi", "time_lo", "time_hi"):
            value = getattr(self, name)
            if value is not None:
                out[name] = str(value)
        if self.key is not None:
            out["key"] = json.dumps(encode_bytes(self.key))
        if self.value_contains is not None:
            out["value_contains"] = json.dumps(encode_bytes(self.value_contains))
        if self.headers:
            out["headers"] = json.dumps([[k, encode_bytes(v)] for k, v in self.headers])
        return out

    @classmethod
    def from_options(cls, options) -> "ScanFilter":
        """The inverse of :meth:`to_options`, also accepting what a PySpark user writes by
        hand: ``topics`` comma-separated, ``key``/``value_contains`` as plain text, and
        ``offset_lo``/``offset_hi``/``time_lo``/``time_hi`` (``time_*`` in epoch ms)."""
        from plog.formats.binary_json import decode_bytes
        import json

        def get(name):
            value = options.get(name)
            return None if value is None or value == "" else str(value)

        def integer(name):
            text = get(name)
            if text is None:
                return None
            try:
                return int(text)
            except ValueError:
                raise ScanError(f"option {name}: expected an integer, got {text!r}") from None

        def binary(name):
            text = get(name)
            if text is None:
                return None
            # plog's binary-safe JSON forms ("text" or {"base64": ...}) when the value is one;
            # anything else is the text itself (a hand-written {"id":1} key stays that text).
            if text[:1] in ('"', "{"):
                try:
                    parsed = json.loads(text)
                except ValueError:
                    parsed = None
                if isinstance(parsed, str) or (isinstance(parsed, dict) and set(parsed) == {"base64"}):
                    try:
                        return decode_bytes(parsed)
                    except (ValueError, TypeError) as e:
                        raise ScanError(f"option {name}: {e}") from None
            return text.encode("utf-8", "surrogateescape")

        topics = get("topics")
        headers: tuple = ()
        raw_headers = get("headers")
        if raw_headers is not None:
            try:
                headers = tuple((str(k), decode_bytes(v)) for k, v in json.loads(raw_headers))
            except (ValueError, TypeError) as e:
                raise ScanError(f"option headers: expected a JSON list of [key, value] pairs ({e})") from None
        return cls(
            topics=frozenset(t.strip() for t in topics.split(",") if t.strip()) if topics is not None else None,
            offset_lo=integer("offset_lo"), offset_hi=integer("offset_hi"),
            time_lo=integer("time_lo"), time_hi=integer("time_hi"),
            key=binary("key"), value_contains=binary("value_contains"), headers=headers,
        )


# -- plans ---------------------------------------------------------------------------------


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


_ENTRY_HEAD = struct.Struct(">qi")  # offset/base offset, size
_LAST_OFFSET_DELTA = struct.Struct(">i")
_SPLIT_POINT_RULES = EntryRules(min_offset=0, legacy=True)


def _entry_at(fd: int, position: int, file_size: int) -> tuple[int, int] | None:
    """``(first offset, last offset)`` of the entry at ``position`` when a whole entry
    with a valid CRC starts there (:func:`~plog.engine.storage.batch_resync.valid_entry_at`),
    else None. (v0/v1 compressed wrappers carry their last offset.) A header alone is not
    enough: inside a batch, bytes that read as a plausible v0/v1 header are common (a zero
    byte at +16 is magic 0), so only the CRC tells a batch start from the middle of one."""
    head = os.pread(fd, 61, position)
    if not valid_entry_at(fd, head, 0, position, file_size, _SPLIT_POINT_RULES):
        return None
    offset, _ = _ENTRY_HEAD.unpack_from(head, 0)
    if head[16] == 2:
        return offset, offset + _LAST_OFFSET_DELTA.unpack_from(head, 23)[0]
    return offset, offset


def _checked_position(idx, slot: int, max_offset: int, fd: int, file_size: int, tries: int = 8) -> int:
    """The position of the offset index entry at ``slot`` if an entry whose offsets agree
    with it starts there, else of the nearest earlier entry that checks out (up to
    ``tries``), else 0. Entries with an offset above ``max_offset`` are passed over."""
    for s in range(slot, max(-1, slot - tries), -1):
        entry = idx.offset_entry(s)
        if entry.offset > max_offset or not 0 < entry.position < file_size:
            continue
        found = _entry_at(fd, entry.position, file_size)
        if found is not None and found[0] <= entry.offset:
            return entry.position
    return 0


def _split_points(seg, size: int, unit_bytes: int) -> list[int]:
    """Positions (ascending, excluding 0 and ``size``) at which ``seg`` may be cut into
    pieces of about ``unit_bytes``: offset index entries whose batch headers check out."""
    if size <= unit_bytes or seg.index is None:
        return []
    cuts: list[int] = []
    with IndexFile(seg.index, OFFSET_INDEX_ENTRY_SIZE, seg.base_offset) as idx:
        if idx.entries == 0:
            return []
        fd = os.open(seg.log, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            want = unit_bytes
            slot = 0
            while want < size - unit_bytes // 4 and slot < idx.entries:
                # Binary search the first entry at or after `want` bytes.
                lo, hi = slot, idx.entries
                while lo < hi:
                    mid = (lo + hi) // 2
                    if idx.offset_entry(mid).position < want:
                        lo = mid + 1
                    else:
                        hi = mid
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
                fd = os.open(seg.log, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
                try:
                    position = max(position, _checked_position(idx, slot, flt.offset_lo - 1, fd, size))
                finally:
                    os.close(fd)
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
                    fd = os.open(seg.log, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
                    try:
                        position = max(position, _checked_position(idx, oslot, entry.offset, fd, size))
                    finally:
                        os.close(fd)
    return position


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
    if flt.topics is not None:
        # A topic asked for by name that is not there is a mistake to report (kcat's "Unknown
        # topic"), not an empty result that looks like a topic without records.
        present = {i.topic_partition.topic for i in infos if i.topic_partition is not None}
        missing = sorted(flt.topics - present)
        if missing:
            there = ", ".join(sorted(present)[:20]) or "none"
            raise ScanError(f"no topic {', '.join(map(repr, missing))} in {', '.join(paths)} (topics there: {there})")

    segments = []  # (info, seg, size, is_last, next_base)
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
            segments.append((info, seg, size, is_last))
    total = sum(s[2] for s in segments)
    if unit_bytes is None:
        unit_bytes = max(MIN_AUTO_UNIT_BYTES, min(DEFAULT_UNIT_BYTES, total // max(1, 2 * parallelism) + 1))
    if unit_bytes <= 0:
        raise ScanError(f"unit size must be positive, got {unit_bytes}")

    slices: list[ScanSlice] = []
    for info, seg, size, is_last in segments:
        tp = info.topic_partition
        start = _start_position(seg, flt, size) if (flt.offset_lo is not None or flt.time_lo is not None) else 0
        cuts = [c for c in _split_points(seg, size, unit_bytes) if c > start]
        bounds = [start] + cuts + [None]
        for a, b in zip(bounds, bounds[1:]):
            end_bytes = size if b is None else b
            slices.append(ScanSlice(tp.topic, tp.partition, os.path.dirname(info.path), seg.log, seg.base_offset,
                                    a, b, max(0, end_bytes - a)))

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
    tps = [(i.topic_partition.topic, i.topic_partition.partition, os.path.dirname(i.path)) for i in chosen]
    return ScanPlan(units, tps, skipped, total, pruned)


# -- walking slices ------------------------------------------------------------------------


class SliceProblem(NamedTuple):
    topic: str
    partition: int
    segment: str
    position: int
    message: str


def _first_offset_bound(batch) -> int:
    """A lower bound of the first offset in ``batch``, known without decompressing: a v2
    batch's base offset, a plain v0/v1 message's offset, and 0 for a compressed v0/v1
    wrapper (its offset is its *last* inner offset; the first is only known inside)."""
    if batch.magic == 2:
        return batch.base_offset
    return batch.offset if batch.compression == 0 else 0


def _walk(s: ScanSlice, problems: list) -> Iterator:
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
    tail = batches.trailing
    if tail is not None and s.end is None:
        # A partial entry at the end of a segment: what a crash leaves (recovery truncates it).
        problems.append(SliceProblem(s.topic, s.partition, s.segment, tail.position,
                                     f"{tail.length} trailing bytes are not a whole batch (a torn write?)"))
    elif tail is not None:
        problems.append(SliceProblem(s.topic, s.partition, s.segment, tail.position,
                                     f"{tail.length} bytes before the next slice at {s.end} are not a whole batch"))


# -- statistics ----------------------------------------------------------------------------

HLL_P = 12
HLL_M = 1 << HLL_P
_HLL_SHIFT = 32 - HLL_P
_HLL_MASK = (1 << _HLL_SHIFT) - 1
SIZE_BUCKETS = 32  # bucket b holds sizes in [2**(b-1), 2**b), bucket 0 holds 0

_HEAD_SIZE, _HEAD_TIMESTAMP, _HEAD_KEY = itemgetter(HEAD_SIZE), itemgetter(HEAD_TIMESTAMP), itemgetter(HEAD_KEY)


def hll_estimate(registers: bytes | bytearray) -> int:
    """HyperLogLog estimate (Flajolet et al.) with the small-range linear-counting
    correction; registers hold ranks of 32-bit hashes."""
    import math

    m = len(registers)
    zeros = registers.count(0)
    inverse = sum(2.0 ** -r for r in registers)
    alpha = 0.7213 / (1 + 1.079 / m)
    estimate = alpha * m * m / inverse
    if estimate <= 2.5 * m and zeros:
        estimate = m * math.log(m / zeros)
    elif estimate > (1 << 32) / 30:
        estimate = -(1 << 32) * math.log(1 - estimate / (1 << 32))
    return int(round(estimate))


@dataclass
class PartitionStats:
    """A mergeable summary of one partition replica's scanned records (see :meth:`merge`).
    Replicas of a partition in several log directories are summarised separately."""

    topic: str
    partition: int
    log_dir: str
    records: int = 0
    batches: int = 0
    bytes: int = 0
    first_offset: int | None = None
    last_offset: int | None = None
    min_timestamp: int | None = None
    max_timestamp: int | None = None
    codecs: dict = field(default_factory=dict)  # codec name -> batches
    magics: dict = field(default_factory=dict)  # magic -> batches
    null_keys: int = 0
    key_registers: bytearray = field(default_factory=lambda: bytearray(HLL_M))
    size_histogram: list = field(default_factory=lambda: [0] * SIZE_BUCKETS)
    min_record_size: int | None = None
    max_record_size: int | None = None
    total_record_size: int = 0
    transactional_batches: int = 0
    control_batches: int = 0
    control_records: int = 0
    corrupt_batches: int = 0
    producer_ids: list = field(default_factory=list)  # the smallest MAX_PRODUCERS_LISTED, sorted
    producer_registers: bytearray = field(default_factory=lambda: bytearray(HLL_M))
    problems: list = field(default_factory=list)  # (segment, position, message), sorted, capped

    def merge(self, other: "PartitionStats") -> "PartitionStats":
        """Fold ``other`` (the same partition) into this one. Commutative and associative:
        the result does not depend on how the partition was split or in which order."""
        self.records += other.records
        self.batches += other.batches
        self.bytes += other.bytes
        self.first_offset = _min(self.first_offset, other.first_offset)
        self.last_offset = _max(self.last_offset, other.last_offset)
        self.min_timestamp = _min(self.min_timestamp, other.min_timestamp)
        self.max_timestamp = _max(self.max_timestamp, other.max_timestamp)
        for mine, theirs in ((self.codecs, other.codecs), (self.magics, other.magics)):
            for k, v in theirs.items():
                mine[k] = mine.get(k, 0) + v
        self.null_keys += other.null_keys
        # (A sketch that saw nothing is all zeros: skip the 4096-element max for it.)
        if other.key_registers.count(0) != HLL_M:
            self.key_registers = bytearray(map(max, self.key_registers, other.key_registers))
        if other.producer_registers.count(0) != HLL_M:
            self.producer_registers = bytearray(map(max, self.producer_registers, other.producer_registers))
        self.size_histogram = [a + b for a, b in zip(self.size_histogram, other.size_histogram)]
        self.min_record_size = _min(self.min_record_size, other.min_record_size)
        self.max_record_size = _max(self.max_record_size, other.max_record_size)
        self.total_record_size += other.total_record_size
        self.transactional_batches += other.transactional_batches
        self.control_batches += other.control_batches
        self.control_records += other.control_records
        self.corrupt_batches += other.corrupt_batches
        self.producer_ids = sorted(set(self.producer_ids) | set(other.producer_ids))[:MAX_PRODUCERS_LISTED]
        self.problems = sorted(set(self.problems) | set(other.problems))[:MAX_PROBLEMS]
        return self

    def add_producer(self, pid: int) -> None:
        _hll_add(self.producer_registers, zlib.crc32(pid.to_bytes(8, "big", signed=True)))
        ids = self.producer_ids
        if pid in ids:
            return
        if len(ids) < MAX_PRODUCERS_LISTED:
            ids.append(pid)
            ids.sort()
        elif pid < ids[-1]:
            ids[-1] = pid
            ids.sort()

    def size_percentile(self, q: float) -> int | None:
        """The upper bound of the histogram bucket holding the ``q`` quantile (an estimate
        within a factor of two), clamped to the largest size seen."""
        n = sum(self.size_histogram)
        if n == 0:
            return None
        rank = max(1, int(q * n + 0.999999))
        seen = 0
        for b, count in enumerate(self.size_histogram):
            seen += count
            if seen >= rank:
                return min((1 << b) - 1 if b else 0, self.max_record_size)
        return self.max_record_size

    def to_dict(self) -> dict:
        """The JSON shape of ``plog scan`` stats (one object per partition)."""
        data_records = self.records - self.control_records
        sizes = {
            "min": self.min_record_size,
            "max": self.max_record_size,
            "mean": round(self.total_record_size / data_records, 1) if data_records else None,
            "p50": self.size_percentile(0.5),
            "p99": self.size_percentile(0.99),
            "histogram": {_bucket_name(b): c for b, c in enumerate(self.size_histogram) if c},
        }
        producers = hll_estimate(self.producer_registers) if len(self.producer_ids) >= MAX_PRODUCERS_LISTED \
            else len(self.producer_ids)
        return {
            "topic": self.topic,
            "partition": self.partition,
            "log_dir": self.log_dir,
            "records": self.records,
            "batches": self.batches,
            "bytes": self.bytes,
            "first_offset": self.first_offset,
            "last_offset": self.last_offset,
            "min_timestamp": self.min_timestamp,
            "max_timestamp": self.max_timestamp,
            "codecs": dict(sorted(self.codecs.items())),
            "magic": {str(k): v for k, v in sorted(self.magics.items())},
            "distinct_keys_estimate": hll_estimate(self.key_registers),
            "null_keys": self.null_keys,
            "record_size": sizes,
            "transactional_batches": self.transactional_batches,
            "control_batches": self.control_batches,
            "control_records": self.control_records,
            "corrupt_batches": self.corrupt_batches,
            "producers": producers,
            "producer_ids": list(self.producer_ids),
            "problems": [{"segment": s, "position": p, "message": m} for s, p, m in self.problems],
        }


def _bucket_name(b: int) -> str:
    return "0" if b == 0 else f"{1 << (b - 1)}-{(1 << b) - 1}"


def _min(a, b):
    return b if a is None else a if b is None else min(a, b)


def _max(a, b):
    return b if a is None else a if b is None else max(a, b)


def _hll_add(registers: bytearray, crc: int) -> None:
    _hll_add_all(registers, (crc,))


def _hll_add_all(registers: bytearray, crcs: Iterable[int]) -> None:
    """Add 32-bit hashes (CRC-32s) to a HyperLogLog sketch. Each is first spread by
    MurmurHash3's 32-bit finalizer over all bits (CRC-32 is linear); inlined, as this
    runs once per record."""
    shift, mask, top_rank = _HLL_SHIFT, _HLL_MASK, _HLL_SHIFT + 1
    for h in crcs:
        h ^= h >> 16
        h = (h * 0x85EBCA6B) & 0xFFFFFFFF
        h ^= h >> 13
        h = (h * 0xC2B2AE35) & 0xFFFFFFFF
        h ^= h >> 16
        rank = top_rank - (h & mask).bit_length()
        idx = h >> shift
        if registers[idx] < rank:
            registers[idx] = rank


def _add_records(st: PartitionStats, sizes: list[int], timestamps: list[int], keys: list) -> None:
    """Count records into ``st`` from their sizes, timestamps and keys (parallel lists).
    Aggregates over whole lists run in C; only the key sketch loops in Python."""
    if not sizes:
        return
    st.records += len(sizes)
    st.total_record_size += sum(sizes)
    smallest, largest = min(sizes), max(sizes)
    st.min_record_size = _min(st.min_record_size, smallest)
    st.max_record_size = _max(st.max_record_size, largest)
    hist = st.size_histogram
    if smallest.bit_length() == largest.bit_length():  # all in one bucket: the usual batch
        hist[largest.bit_length()] += len(sizes)
    else:
        for bucket, n in Counter(map(int.bit_length, sizes)).items():
            hist[bucket] += n
    if NO_TIMESTAMP in timestamps:
        timestamps = [t for t in timestamps if t != NO_TIMESTAMP]
    if timestamps:
        st.min_timestamp = _min(st.min_timestamp, min(timestamps))
        st.max_timestamp = _max(st.max_timestamp, max(timestamps))
    nulls = keys.count(None)
    if nulls:
        st.null_keys += nulls
        keys = [k for k in keys if k is not None]
    _hll_add_all(st.key_registers, map(zlib.crc32, keys))


def _v2_record_stats(payload, count: int, base_offset: int, base_ts: int, log_append_ts: int | None,
                     st: PartitionStats, flt: ScanFilter | None) -> None:
    """Add a v2 records region to the stats from its record heads (sizes, timestamps and
    keys; no values, no record objects). Raises CorruptRecordError (position None), before
    counting anything, when the region does not frame exactly ``count`` records."""
    heads = record_heads(payload, count, base_offset, base_ts)
    if log_append_ts is not None:
        timestamps = [log_append_ts] * len(heads)
    else:
        timestamps = list(map(_HEAD_TIMESTAMP, heads))
    if flt is not None and (flt.has_offset_range or flt.has_time_range):
        matches = flt.matches
        kept = [i for i, ts in enumerate(timestamps) if matches(heads[i][HEAD_OFFSET], ts, None, None, ())]
        heads = [heads[i] for i in kept]
        timestamps = [timestamps[i] for i in kept]
    sizes = list(map(_HEAD_SIZE, heads))
    _add_records(st, sizes, timestamps, list(map(_HEAD_KEY, heads)))


def _legacy_record_stats(batch, st: PartitionStats, flt: ScanFilter | None) -> None:
    records = batch.records()
    if flt is not None and (flt.has_offset_range or flt.has_time_range):
        records = [r for r in records if flt.matches(r.offset, r.timestamp, None, None, ())]
    # The inner message's entry size: LOG_OVERHEAD + the v0/v1 message overhead + key + value.
    sizes = [12 + (14 if r.magic == 0 else 22) + len(r.key or b"") + len(r.value or b"") for r in records]
    _add_records(st, sizes, [r.timestamp for r in records], [r.key for r in records])


def _slice_stats(s: ScanSlice, st: PartitionStats, flt: ScanFilter | None) -> None:
    problems: list[SliceProblem] = []
    check_range = flt is not None and (flt.has_offset_range or flt.has_time_range)
    for batch in _walk(s, problems):
        if check_range and not flt.wants_offsets(_first_offset_bound(batch), batch.last_offset):
            continue
        if not batch.is_valid():
            st.corrupt_batches += 1
            _add_problem(st, s.segment, batch.position, f"batch at offset {batch.last_offset} fails its CRC check; "
                                                      f"its records are not counted")
            continue
        before = st.records
        try:
            if batch.magic == 2:
                if batch.is_control:
                    if check_range:  # the same records a search keeps (control batches are tiny)
                        kept = sum(1 for r in batch.records() if flt.matches(r.offset, r.timestamp, None, None, ()))
                    else:
                        kept = batch.records_count
                    if kept or not check_range:
                        st.control_batches += 1
                        st.control_records += kept
                        st.records += kept
                else:
                    payload = batch.records_payload()  # bytes: indexing bytes is cheaper than a memoryview
                    _v2_record_stats(payload, batch.records_count, batch.base_offset, batch.base_timestamp,
                                     batch.max_timestamp if batch.timestamp_type == 1 else None, st, flt)
            else:
                _legacy_record_stats(batch, st, flt)
        except FormatError as e:
            st.records = before
            st.corrupt_batches += 1
            _add_problem(st, s.segment, batch.position, f"batch at offset {batch.last_offset}: {e}")
            continue
        if check_range and st.records == before:
            continue  # no record of this batch is in range
        st.batches += 1
        st.bytes += batch.size_in_bytes
        name = codec_name(batch.compression)
        st.codecs[name] = st.codecs.get(name, 0) + 1
        st.magics[batch.magic] = st.magics.get(batch.magic, 0) + 1
        # (A compressed legacy wrapper's base_offset decodes it for the first inner offset.)
        first = batch.base_offset
        st.first_offset = _min(st.first_offset, first)
        st.last_offset = _max(st.last_offset, batch.last_offset)
        if batch.magic == 2:
            if batch.is_transactional:
                st.transactional_batches += 1
            if batch.producer_id >= 0:
                st.add_producer(batch.producer_id)
    for p in problems:
        _add_problem(st, p.segment, p.position, p.message)


def _add_problem(st: PartitionStats, segment: str, position: int, message: str) -> None:
    item = (segment, position, message)
    if len(st.problems) < MAX_PROBLEMS:
        st.problems.append(item)
        st.problems.sort()
    elif item < st.problems[-1]:
        st.problems[-1] = item
        st.problems.sort()


def unit_stats(unit: ScanUnit, flt: ScanFilter | None = None) -> dict[tuple[str, int, str], PartitionStats]:
    """The stats of one unit, per partition. Record predicates (key, value, headers) are
    not applied here (stats describe partitions); topic and offset/time ranges are."""
    out: dict[tuple[str, int], PartitionStats] = {}
    for s in unit.slices:
        tp = (s.topic, s.partition, s.log_dir)
        st = out.get(tp)
        if st is None:
            st = out[tp] = PartitionStats(*tp)
        _slice_stats(s, st, flt)
    return out


def merge_stats(parts: Iterable[dict[tuple[str, int, str], PartitionStats]],
                partitions: Iterable[tuple[str, int, str]] = ()) -> list[PartitionStats]:
    """Merge per-unit stats into one :class:`PartitionStats` per partition replica, sorted
    by topic, partition and log dir; ``partitions`` lists replicas to report even when empty."""
    merged: dict[tuple[str, int, str], PartitionStats] = {}
    for part in parts:
        for tp, st in part.items():
            mine = merged.get(tp)
            if mine is None:
                merged[tp] = st  # the first part as it is: merging into an empty one costs a copy
            else:
                mine.merge(st)
    for tp in partitions:
        if tp not in merged:
            merged[tp] = PartitionStats(*tp)
    return [merged[tp] for tp in sorted(merged)]


# -- records -------------------------------------------------------------------------------


class ScanRecord(NamedTuple):
    """One record with its batch's facts: the row of the ``plog`` Spark data source."""

    topic: str
    partition: int
    offset: int
    timestamp: int  # epoch ms, -1 when the record has none (v0)
    timestamp_type: int  # 0 CreateTime, 1 LogAppendTime, -1 none (v0)
    key: bytes | None
    value: bytes | None
    headers: tuple  # ((key str, value bytes | None), ...)
    base_offset: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    codec: str
    is_transactional: bool
    is_control: bool
    segment: str
    position: int


class ScanBatch(NamedTuple):
    """One batch (``level=batch`` rows)."""

    topic: str
    partition: int
    base_offset: int
    last_offset: int
    records: int
    first_timestamp: int
    max_timestamp: int
    timestamp_type: int
    size: int
    magic: int
    codec: str
    producer_id: int
    producer_epoch: int
    base_sequence: int
    partition_leader_epoch: int
    is_transactional: bool
    is_control: bool
    crc_valid: bool
    segment: str
    position: int


def _ts_type(batch) -> int:
    return batch.timestamp_type if batch.magic > 0 else -1


def unit_records(unit: ScanUnit, flt: ScanFilter | None = None, problems: list | None = None) -> Iterator[ScanRecord]:
    """The records of ``unit`` that ``flt`` keeps, in slice order and offset order.

    Batches failing their CRC are skipped and, like impossible entries, reported to
    ``problems`` (a list of :class:`SliceProblem`) when given.
    """
    flt = flt or ScanFilter()
    problems = problems if problems is not None else []
    check_offsets = flt.has_offset_range
    plain = not (flt.has_offset_range or flt.has_time_range or flt.has_record_predicate)
    for s in unit.slices:
        topic, partition, segment = s.topic, s.partition, s.segment
        for batch in _walk(s, problems):
            if check_offsets and not flt.wants_offsets(_first_offset_bound(batch), batch.last_offset):
                continue
            if flt.time_lo is not None and batch.max_timestamp < flt.time_lo and batch.magic == 2 \
                    and batch.timestamp_type == 1:
                continue
            if not batch.is_valid():
                problems.append(SliceProblem(topic, partition, segment, batch.position,
                                             f"batch at offset {batch.last_offset} fails its CRC check; skipped"))
                continue
            try:
                records = batch.records()
            except FormatError as e:
                problems.append(SliceProblem(topic, partition, segment, batch.position,
                                             f"batch at offset {batch.last_offset}: {e}; skipped"))
                continue
            v2 = batch.magic == 2
            ts_type = _ts_type(batch)
            facts = (
                batch.base_offset if v2 else (records[0].offset if records else batch.offset),
                batch.producer_id, batch.producer_epoch, batch.base_sequence, codec_name(batch.compression),
                batch.is_transactional, batch.is_control, segment, batch.position,
            )
            for r in records:
                if plain or flt.matches(r.offset, r.timestamp, r.key, r.value, r.headers):
                    yield ScanRecord(topic, partition, r.offset, r.timestamp, ts_type,
                                     None if r.key is None else bytes(r.key),
                                     None if r.value is None else bytes(r.value),
                                     tuple((k, None if v is None else bytes(v)) for k, v in r.headers),
                                     *facts)


def unit_batches(unit: ScanUnit, flt: ScanFilter | None = None, problems: list | None = None) -> Iterator[ScanBatch]:
    """The batches of ``unit`` within ``flt``'s offset range (``level=batch``); record
    predicates are not applied (a batch row has no single key or value)."""
    flt = flt or ScanFilter()
    problems = problems if problems is not None else []
    for s in unit.slices:
        for batch in _walk(s, problems):
            v2 = batch.magic == 2
            first = batch.base_offset if v2 else batch.offset
            if flt.has_offset_range and not flt.wants_offsets(_first_offset_bound(batch), batch.last_offset):
                continue
            if flt.time_lo is not None and batch.max_timestamp < flt.time_lo:
                continue
            count = batch.records_count
            if count is None:  # a compressed legacy wrapper: count its inner messages
                try:
                    count = len(batch.records())
                    first = batch.base_offset
                except FormatError:
                    count = -1
                if count >= 0 and flt.has_offset_range and not flt.wants_offsets(first, batch.last_offset):
                    continue
            yield ScanBatch(s.topic, s.partition, first, batch.last_offset, count,
                            batch.base_timestamp if v2 else batch.timestamp, batch.max_timestamp, _ts_type(batch),
                            batch.size_in_bytes, batch.magic, codec_name(batch.compression), batch.producer_id,
                            batch.producer_epoch, batch.base_sequence, batch.partition_leader_epoch,
                            batch.is_transactional, batch.is_control, batch.is_valid(), s.segment, batch.position)


_TS_TYPE_NAMES = {0: "CreateTime", 1: "LogAppendTime", -1: "NoTimestampType"}


def format_record_jsonl(rec: ScanRecord) -> bytes:
    """One search result as a JSON line: ``plog consume --format jsonl``'s fields (so
    ``plog produce --input-format jsonl`` takes it back) followed by where the record is:
    ``segment``, ``position`` (of its batch), ``base_offset``, ``producer_id``, ``codec``."""
    from plog.engine.clients.record_io import ConsumerRecord, format_jsonl
    import json

    line = format_jsonl(ConsumerRecord(rec.topic, rec.partition, rec.offset, rec.timestamp,
                                       _TS_TYPE_NAMES.get(rec.timestamp_type, "NoTimestampType"),
                                       rec.key, rec.value, rec.headers))
    extra = (f',"segment":{json.dumps(rec.segment)},"position":{rec.position},'
             f'"base_offset":{rec.base_offset},"producer_id":{rec.producer_id},"codec":"{rec.codec}"}}\n')
    return line[:-2] + extra.encode("utf-8")


def unit_jsonl(unit: ScanUnit, flt: ScanFilter | None = None, *, problems: list | None = None,
               chunk_bytes: int = 1 << 20) -> Iterator[bytes]:
    """:func:`unit_records` as JSON lines, joined into chunks of about ``chunk_bytes``;
    damage goes to ``problems`` as in :func:`unit_records`."""
    out: list[bytes] = []
    size = 0
    for rec in unit_records(unit, flt, problems):
        line = format_record_jsonl(rec)
        out.append(line)
        size += len(line)
        if size >= chunk_bytes:
            yield b"".join(out)
            out, size = [], 0
    if out:
        yield b"".join(out)


# -- running a plan in local processes -----------------------------------------------------


def _stats_task(args):
    unit, flt = args
    return unit.index, unit_stats(unit, flt)


def _records_task(args):
    unit, flt = args
    problems: list = []
    return unit.index, list(unit_records(unit, flt, problems)), problems


def run_units(plan: ScanPlan, task, flt: ScanFilter | None, jobs: int = 1, progress=None) -> Iterator:
    """Run ``task((unit, flt))`` for every unit, in ``jobs`` processes, yielding results in
    unit order. ``progress(n)`` is called with each finished unit's byte size."""
    units = plan.units
    if jobs <= 1 or len(units) <= 1:
        for unit in units:
            result = task((unit, flt))
            if progress is not None:
                progress(unit.size)
            yield result
        return
    from plog.engine.workers import WorkerPool

    with WorkerPool(min(jobs, len(units))) as pool:
        futures = [pool.submit(task, (unit, flt)) for unit in units]
        for unit, future in zip(units, futures):
            result = future.result()
            if progress is not None:
                progress(unit.size)
            yield result


def _jsonl_task(args):
    """One unit's matches as JSON lines, in a worker process: one bytes object (not a
    record object each, which would cross back to the parent one by one)."""
    unit, flt = args
    problems: list = []
    return b"".join(unit_jsonl(unit, flt, problems=problems)), problems


def scan_jsonl(paths: Iterable[str], flt: ScanFilter | None = None, *, jobs: int = 1,
               unit_bytes: int | None = None, progress=None, problems: list | None = None,
               plan: ScanPlan | None = None) -> Iterator[bytes]:
    """The local search: the matching records under ``paths`` as JSON lines
    (:func:`format_record_jsonl`), one chunk of lines per unit that has matches, in
    (topic, partition, offset) order, computed in ``jobs`` processes; damage found goes to
    ``problems`` as in :func:`unit_records`."""
    plan = plan or plan_scan(paths, flt, unit_bytes=unit_bytes, parallelism=jobs)
    for data, found in run_units(plan, _jsonl_task, flt, jobs, progress):
        if problems is not None:
            problems.extend(found)
        if data:
            yield data


def scan_stats(paths: Iterable[str], flt: ScanFilter | None = None, *, jobs: int = 1,
               unit_bytes: int | None = None, progress=None, plan: ScanPlan | None = None) -> list[PartitionStats]:
    """The stats of every partition under ``paths``, computed in ``jobs`` local processes."""
    plan = plan or plan_scan(paths, flt, unit_bytes=unit_bytes, parallelism=jobs)
    parts = (stats for _i, stats in run_units(plan, _stats_task, flt, jobs, progress))
    return merge_stats(parts, plan.partitions)


def scan_records(paths: Iterable[str], flt: ScanFilter | None = None, *, jobs: int = 1,
                 unit_bytes: int | None = None, progress=None, problems: list | None = None,
                 plan: ScanPlan | None = None) -> Iterator[ScanRecord]:
    """The matching records under ``paths`` in (topic, partition, offset) order."""
    plan = plan or plan_scan(paths, flt, unit_bytes=unit_bytes, parallelism=jobs)
    if jobs <= 1:
        for unit in plan.units:
            yield from unit_records(unit, flt, problems)
            if progress is not None:
                progress(unit.size)
        return
    for _i, records, found in run_units(plan, _records_task, flt, jobs, progress):
        if problems is not None:
            problems.extend(found)
        yield from records


__all__ = [
    "DEFAULT_UNIT_BYTES",
    "PartitionStats",
    "ScanBatch",
    "ScanError",
    "ScanFilter",
    "ScanPlan",
    "ScanRecord",
    "ScanSlice",
    "ScanUnit",
    "SliceProblem",
    "format_record_jsonl",
    "hll_estimate",
    "merge_stats",
    "plan_scan",
    "run_units",
    "scan_jsonl",
    "scan_records",
    "scan_stats",
    "unit_batches",
    "unit_jsonl",
    "unit_records",
    "unit_stats",
]
