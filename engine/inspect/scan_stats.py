"""Scan statistics: a mergeable summary of each partition replica's records
(:class:`PartitionStats`: counts, sums, min/max, a fixed size histogram, HyperLogLog sketches
with a deterministic hash), so any split of the work into units merges to the same answer.

:func:`unit_stats` summarises one unit of a :class:`~plog.engine.inspect.scan_plan.ScanPlan`;
:func:`merge_stats` folds the units' summaries into one per replica. v2 records are counted
from their heads (sizes, timestamps and keys; no values, no record objects). Damage: a batch
whose CRC fails is counted (``corrupt_batches``) and its records are skipped.

The per-batch loop has a native twin (``plog._native.ScanStats``, native/src/scan_stats.rs),
chosen once at import (formats/native.py; ``PLOG_NATIVE=0`` keeps the reference): it walks
each chunk of a slice, CRC included, and counts the batches it can read (uncompressed and
decompressed data batches, control batches); every other entry goes through the reference
(:func:`_batch_stats`), and the two summaries merge. Both give identical stats, sketches
included (tests/native/test_scan_twins.py).
"""

from __future__ import annotations

import zlib
from collections import Counter
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Iterable

from plog.formats import native
from plog.formats.batch_header import LOG_OVERHEAD, legacy_min_size
from plog.formats.default_record import HEAD_KEY, HEAD_OFFSET, HEAD_SIZE, HEAD_TIMESTAMP, record_heads
from plog.formats.errors import FormatError

from plog.engine.inspect.inventory import codec_name
from plog.engine.inspect.scan_filter import ScanFilter
from plog.engine.inspect.scan_plan import (
    ScanSlice,
    ScanUnit,
    SliceProblem,
    first_offset_bound,
    walk_slice,
    walk_slice_native,
)

#: Distinct producer ids kept per partition (the smallest ones); beyond it only the count
#: estimate grows, so hostile logs with millions of producer ids stay in bounded memory.
MAX_PRODUCERS_LISTED = 1024
#: Problems kept per partition.
MAX_PROBLEMS = 100

NO_TIMESTAMP = -1


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
    sizes = [LOG_OVERHEAD + legacy_min_size(r.magic) + len(r.key or b"") + len(r.value or b"") for r in records]
    _add_records(st, sizes, [r.timestamp for r in records], [r.key for r in records])


def _batch_stats(st: PartitionStats, segment: str, batch, flt: ScanFilter | None, check_range: bool) -> None:
    """Count one entry of a slice into ``st`` (the reference, per batch)."""
    if check_range and not flt.wants_offsets(first_offset_bound(batch), batch.last_offset):
        return
    if not batch.is_valid():
        st.corrupt_batches += 1
        _add_problem(st, segment, batch.position, f"batch at offset {batch.last_offset} fails its CRC check; "
                                                  f"its records are not counted")
        return
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
        _add_problem(st, segment, batch.position, f"batch at offset {batch.last_offset}: {e}")
        return
    if check_range and st.records == before:
        return  # no record of this batch is in range
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


def _slice_stats_reference(s: ScanSlice, st: PartitionStats, flt: ScanFilter | None) -> None:
    problems: list[SliceProblem] = []
    check_range = flt is not None and (flt.has_offset_range or flt.has_time_range)
    for batch in walk_slice(s, problems):
        _batch_stats(st, s.segment, batch, flt, check_range)
    for p in problems:
        _add_problem(st, p.segment, p.position, p.message)


_INT64 = range(-(1 << 63), 1 << 63)

#: Codes of the entries the native scanner hands back (``plog._native.ScanStats.scan``).
_DECOMPRESS = 1


def _native_ranges(flt: ScanFilter | None) -> tuple | None:
    """``flt``'s offset and time bounds for ``plog._native.ScanStats``, or None when one
    is beyond int64 (the reference compares Python ints)."""
    ranges = (None, None, None, None) if flt is None else (flt.offset_lo, flt.offset_hi, flt.time_lo, flt.time_hi)
    return None if any(r is not None and r not in _INT64 for r in ranges) else ranges


def _slice_into(s: ScanSlice, st: PartitionStats, flt: ScanFilter | None, acc) -> None:
    """Count slice ``s``: the batches the native accumulator ``acc`` takes into it
    (native/src/scan_stats.rs), compressed data batches decompressed here (bounded,
    formats/compression.py) and counted there, every other entry (CRC failures, legacy
    messages, regions that do not frame...) into ``st`` by :func:`_batch_stats`, the
    reference, with the problems."""
    problems: list[SliceProblem] = []
    check_range = flt is not None and (flt.has_offset_range or flt.has_time_range)
    add_region = acc.add_region
    for batch, (code,) in walk_slice_native(s, problems, acc.scan):
        if code == _DECOMPRESS:
            try:
                if add_region(batch.buffer, batch.records_payload()):
                    continue
            except FormatError:
                pass  # the reference counts the batch as corrupt and says why
        _batch_stats(st, s.segment, batch, flt, check_range)
    for p in problems:
        _add_problem(st, p.segment, p.position, p.message)


def _slice_stats_native(s: ScanSlice, st: PartitionStats, flt: ScanFilter | None) -> None:
    """:func:`_slice_stats_reference`'s twin (:func:`_slice_into`, then the native figures
    merged into ``st``: the summary is commutative, so the split changes nothing)."""
    ranges = _native_ranges(flt)
    if ranges is None:
        _slice_stats_reference(s, st, flt)
        return
    acc = native.module.ScanStats(*ranges)
    _slice_into(s, st, flt, acc)
    st.merge(_native_part(acc, st))


def _unit_stats_native(unit: ScanUnit, flt: ScanFilter | None) -> dict[tuple[str, int, str], PartitionStats]:
    """:func:`_unit_stats_reference`'s twin: one native accumulator per partition of the
    unit (a unit of many small segments pays one merge per partition, not per slice)."""
    ranges = _native_ranges(flt)
    if ranges is None:
        return _unit_stats_reference(unit, flt)
    out: dict[tuple[str, int, str], PartitionStats] = {}
    accs: dict = {}
    for s in unit.slices:
        tp = (s.topic, s.partition, s.log_dir)
        st = out.get(tp)
        if st is None:
            st = out[tp] = PartitionStats(*tp)
            accs[tp] = native.module.ScanStats(*ranges)
        _slice_into(s, st, flt, accs[tp])
    # The reference's share is usually empty: merged into the native one, its sketches cost nothing.
    return {tp: _native_part(accs[tp], st).merge(st) for tp, st in out.items()}


def _native_part(acc, st: PartitionStats) -> PartitionStats:
    """The figures of a native accumulator as a :class:`PartitionStats` of ``st``'s replica."""
    (records, batches, nbytes, first, last, tmin, tmax, codecs, null_keys, key_registers, histogram,
     smin, smax, stotal, transactional, control_batches, control_records, producer_ids,
     producer_registers) = acc.fields()
    return PartitionStats(
        st.topic, st.partition, st.log_dir, records=records, batches=batches, bytes=nbytes,
        first_offset=first, last_offset=last, min_timestamp=tmin, max_timestamp=tmax,
        codecs={codec_name(c): n for c, n in enumerate(codecs) if n}, magics={2: batches} if batches else {},
        null_keys=null_keys, key_registers=bytearray(key_registers), size_histogram=histogram,
        min_record_size=smin, max_record_size=smax, total_record_size=stotal,
        transactional_batches=transactional, control_batches=control_batches, control_records=control_records,
        producer_ids=producer_ids, producer_registers=bytearray(producer_registers))


def _add_problem(st: PartitionStats, segment: str, position: int, message: str) -> None:
    item = (segment, position, message)
    if len(st.problems) < MAX_PROBLEMS:
        st.problems.append(item)
        st.problems.sort()
    elif item < st.problems[-1]:
        st.problems[-1] = item
        st.problems.sort()


def _unit_stats_reference(unit: ScanUnit, flt: ScanFilter | None) -> dict[tuple[str, int, str], PartitionStats]:
    out: dict[tuple[str, int], PartitionStats] = {}
    for s in unit.slices:
        tp = (s.topic, s.partition, s.log_dir)
        st = out.get(tp)
        if st is None:
            st = out[tp] = PartitionStats(*tp)
        _slice_stats_reference(s, st, flt)
    return out


# One path for the life of the process (formats/native.py decides; PLOG_NATIVE=0 picks the reference).
_unit_stats = _unit_stats_native if native.active() else _unit_stats_reference


def unit_stats(unit: ScanUnit, flt: ScanFilter | None = None) -> dict[tuple[str, int, str], PartitionStats]:
    """The stats of one unit, per partition. Record predicates (key, value, headers) are
    not applied here (stats describe partitions); topic and offset/time ranges are."""
    return _unit_stats(unit, flt)


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


__all__ = ["PartitionStats", "hll_estimate", "merge_stats", "unit_stats"]
