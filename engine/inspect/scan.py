"""Scans of whole log directories in parallel work units: the engine half of ``plog scan``.

A scan is planned once, where the paths are listed (the Spark driver, or the ``plog``
process), and run anywhere the files are visible at the same paths (Spark executors, or
local worker processes). Nothing here imports pyspark: ``plog.spark_tasks`` ships these
plans and functions to executors, and ``plog scan`` without ``--spark`` runs the very same
functions in a process pool, so the two paths agree by construction.

This module is the scan engine's API; its parts, one concept each:

* :mod:`~plog.engine.inspect.scan_filter`: :class:`ScanFilter`, what a scan keeps;
* :mod:`~plog.engine.inspect.scan_plan`: :func:`plan_scan`, segments as byte ranges
  (:class:`ScanSlice`) bin-packed into :class:`ScanUnit` s, with filters pushed down to
  segment selection, and the reader of a slice;
* :mod:`~plog.engine.inspect.scan_stats`: :func:`unit_stats` / :func:`merge_stats`,
  per-partition :class:`PartitionStats`, a commutative and associative summary, so any
  split of the work merges to the same answer;
* here: :func:`unit_records` yields the records that match a :class:`ScanFilter`, as
  :class:`ScanRecord` tuples, in offset order within each slice (:func:`unit_batches`,
  :func:`unit_jsonl` likewise), and :func:`run_units` runs a plan in local processes
  (:func:`scan_stats`, :func:`scan_records`, :func:`scan_jsonl`).

A search's predicates (offset and time ranges, key, value, headers) have a native twin
(``plog._native.ScanSearch``, native/src/scan_search.rs), chosen once at import
(formats/native.py; ``PLOG_NATIVE=0`` keeps the reference): it walks each chunk and tests
every record there, and only the batches with matches are decoded here, into
:class:`ScanRecord` s of their matches (a ``--where`` is then applied to those).

Every read goes through :class:`plog.engine.storage.file_records.FileBatches`: bounded
chunks, never a whole file, whatever the segment size. Damage: a batch whose CRC fails is
counted (``corrupt_batches``) and its records are skipped; an entry whose header is
impossible ends that slice's walk and is reported in ``problems`` with file and position
(the bytes after it cannot be framed without an index).
"""

from __future__ import annotations

from typing import Iterable, Iterator, NamedTuple

from plog.formats import native
from plog.formats.errors import FormatError

from plog.engine.inspect.inventory import codec_name
from plog.engine.inspect.scan_filter import ScanFilter
from plog.engine.inspect.scan_plan import (
    DEFAULT_UNIT_BYTES,
    ScanPlan,
    ScanSlice,
    ScanUnit,
    SliceProblem,
    first_offset_bound,
    plan_scan,
    walk_slice,
    walk_slice_native,
)
from plog.engine.inspect.scan_stats import PartitionStats, hll_estimate, merge_stats, unit_stats


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


def _unit_records_reference(unit: ScanUnit, flt: ScanFilter | None = None,
                            problems: list | None = None) -> Iterator[ScanRecord]:
    flt = flt or ScanFilter()
    problems = problems if problems is not None else []
    plain = not (flt.has_offset_range or flt.has_time_range or flt.has_record_predicate)
    for s in unit.slices:
        for batch in walk_slice(s, problems):
            yield from _batch_records(s, batch, flt, plain, problems)


def _batch_records(s: ScanSlice, batch, flt: ScanFilter, plain: bool, problems: list) -> Iterator[ScanRecord]:
    """The records of one entry of slice ``s`` that ``flt`` keeps (the reference, per batch)."""
    if flt.has_offset_range and not flt.wants_offsets(first_offset_bound(batch), batch.last_offset):
        return
    if flt.time_lo is not None and batch.max_timestamp < flt.time_lo and batch.magic == 2 \
            and batch.timestamp_type == 1:
        return
    if not batch.is_valid():
        problems.append(SliceProblem(s.topic, s.partition, s.segment, batch.position,
                                     f"batch at offset {batch.last_offset} fails its CRC check; skipped"))
        return
    try:
        records = batch.records()
    except FormatError as e:
        problems.append(SliceProblem(s.topic, s.partition, s.segment, batch.position,
                                     f"batch at offset {batch.last_offset}: {e}; skipped"))
        return
    ts_type = _ts_type(batch)
    facts = _batch_facts(s, batch, records)
    for r in (records if plain else _kept(flt, records)):
        yield _scan_record(s, r, ts_type, facts)


def _batch_facts(s: ScanSlice, batch, records: list) -> tuple:
    """The batch's fields of a :class:`ScanRecord` (``records``: the batch's records)."""
    return (
        batch.base_offset if batch.magic == 2 else (records[0].offset if records else batch.offset),
        batch.producer_id, batch.producer_epoch, batch.base_sequence, codec_name(batch.compression),
        batch.is_transactional, batch.is_control, s.segment, batch.position,
    )


_INT64 = range(-(1 << 63), 1 << 63)
#: Codes of the entries the native search hands back (``plog._native.ScanSearch.scan``).
_DECOMPRESS, _REFERENCE = 1, 2


def _native_search(flt: ScanFilter):
    """A ``plog._native.ScanSearch`` for ``flt``'s ranges and plain predicates, or None when
    the native side cannot hold them (bounds beyond int64, a header key with surrogates
    that are no escaped bytes)."""
    ranges = (flt.offset_lo, flt.offset_hi, flt.time_lo, flt.time_hi)
    if any(r is not None and r not in _INT64 for r in ranges):
        return None
    try:
        headers = [(k.encode("utf-8", "surrogateescape"), v) for k, v in flt.headers]
    except UnicodeEncodeError:
        return None  # no header key decodes to it: the reference says so
    return native.module.ScanSearch(*ranges, flt.key, flt.value_contains, headers)


def _unit_records_native(unit: ScanUnit, flt: ScanFilter | None = None,
                         problems: list | None = None) -> Iterator[ScanRecord]:
    """:func:`_unit_records_reference`'s twin: ``plog._native.ScanSearch`` walks each
    slice's chunks and tests every record of the batches it can read against the ranges,
    the key, the value and the headers (native/src/scan_search.rs); only the batches with
    matches are decoded here, and only their matches become :class:`ScanRecord` s (a
    ``--where`` is then applied to those). Compressed batches are decompressed here
    (bounded) and tested there; every other entry goes through :func:`_batch_records`."""
    flt = flt or ScanFilter()
    problems = problems if problems is not None else []
    plain = not (flt.has_offset_range or flt.has_time_range or flt.has_record_predicate)
    search = None if plain else _native_search(flt)
    if search is None:  # every record matches (all are decoded anyway), or bounds beyond int64
        yield from _unit_records_reference(unit, flt, problems)
        return
    for s in unit.slices:
        for batch, (code, indexes) in walk_slice_native(s, problems, search.scan):
            if code == _DECOMPRESS:
                try:
                    code, indexes = search.region(batch.buffer, batch.records_payload())
                except FormatError:
                    code = _REFERENCE  # the reference reports why it does not decompress
            if code == _REFERENCE:
                yield from _batch_records(s, batch, flt, plain, problems)
            elif indexes:
                records = batch.records()
                ts_type, facts = _ts_type(batch), _batch_facts(s, batch, records)
                chosen = [records[i] for i in indexes]
                if flt.where:  # the native search tested every other predicate
                    chosen = _kept(flt, chosen)
                for r in chosen:
                    yield _scan_record(s, r, ts_type, facts)


def _kept(flt: ScanFilter, records: list) -> list:
    """The records ``flt`` keeps: the ``--where`` tested a batch at a time where the resolver
    can (``ScanFilter.where_mask``, native: a 0 fails the record), then :meth:`matches`."""
    mask = flt.where_mask(records)
    if mask is not None:
        records = [r for r, m in zip(records, mask) if m]
    return [r for r in records if flt.matches(r.offset, r.timestamp, r.key, r.value, r.headers)]


def _scan_record(s: ScanSlice, r, ts_type: str, facts: tuple) -> ScanRecord:
    return ScanRecord(s.topic, s.partition, r.offset, r.timestamp, ts_type,
                      None if r.key is None else bytes(r.key),
                      None if r.value is None else bytes(r.value),
                      tuple((k, None if v is None else bytes(v)) for k, v in r.headers),
                      *facts)


def unit_records(unit: ScanUnit, flt: ScanFilter | None = None, problems: list | None = None) -> Iterator[ScanRecord]:
    """The records of ``unit`` that ``flt`` keeps, in slice order and offset order.

    Batches failing their CRC are skipped and, like impossible entries, reported to
    ``problems`` (a list of :class:`SliceProblem`) when given.
    """
    return _unit_records(unit, flt, problems)


# One path for the life of the process (formats/native.py decides; PLOG_NATIVE=0 picks the reference).
_unit_records = _unit_records_native if native.active() else _unit_records_reference


def unit_batches(unit: ScanUnit, flt: ScanFilter | None = None, problems: list | None = None) -> Iterator[ScanBatch]:
    """The batches of ``unit`` within ``flt``'s offset range (``level=batch``); record
    predicates are not applied (a batch row has no single key or value)."""
    flt = flt or ScanFilter()
    problems = problems if problems is not None else []
    for s in unit.slices:
        for batch in walk_slice(s, problems):
            v2 = batch.magic == 2
            first = batch.base_offset if v2 else batch.offset
            if flt.has_offset_range and not flt.wants_offsets(first_offset_bound(batch), batch.last_offset):
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
