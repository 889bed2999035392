"""The Arrow record batches the ``plog`` data source yields for one work unit: the
reference path (rows from :func:`plog.engine.inspect.scan.unit_records` through
:class:`~plog.spark_tasks.schema.ArrowBuilder`) and its native twin (the column buffers of
``plog._native.arrow_record_columns``, wrapped by pyarrow without a copy).

:func:`unit_arrow_batches` picks the path once per call: the native one for record rows
when :func:`plog.formats.native.active` is true in the process that reads (a Spark
executor without the module, or with ``PLOG_NATIVE=0``, reads on the reference path). The
two give the same rows in the same order, cut into batches at different places (the
native path's batches hold up to ``MAX_ROWS`` rows or ``MAX_BYTES`` of records regions, plus
one Kafka batch); tests/native/test_arrow_twins.py holds them equal.

The native path walks the unit's slices with the same engine functions as the reference
(:func:`~plog.engine.inspect.scan_plan.walk_slice`, the same CRC and offset/time pruning)
and hands runs of v2 batches to Rust. What it does not decode itself goes to the reference,
over the bytes in question only (sub-slices of the unit, read again): legacy v0/v1 entries,
runs the native builder calls unusual (a header key that is not UTF-8, an offset beyond
int64), and whole units whose filter has a ``where`` expression.
"""

from __future__ import annotations

from typing import Iterator

from plog.engine.inspect.inventory import codec_name
from plog.engine.inspect.scan import ScanFilter, ScanUnit, first_offset_bound, unit_batches, unit_records, walk_slice
from plog.formats import native
from plog.formats.errors import FormatError
from plog.formats.record_batch import MIN_RECORD_SIZE

from .schema import ArrowBuilder, arrow_schema, fields_for

#: A native RecordBatch closes once its run of Kafka batches holds this many records...
MAX_ROWS = 64 * 1024
#: ... or this many bytes of (decompressed) records regions: memory stays bounded whatever
#: the unit's size (one run's regions, its columns, and one Kafka batch more at most).
MAX_BYTES = 8 << 20

#: Filter bounds the native side compares as int128 (beyond: the reference, exactly).
_BOUND = 1 << 120
#: Partition numbers are int32 in the schema (a folder name beyond: the reference's error).
_INT32 = 1 << 31


def reference_arrow_batches(unit: ScanUnit, flt: ScanFilter | None, level: str = "record") -> Iterator:
    """The reference path: the unit's rows, column by column into bounded RecordBatches."""
    builder = ArrowBuilder(arrow_schema(level), fields_for(level))
    rows = unit_records(unit, flt) if level == "record" else unit_batches(unit, flt)
    for row in rows:
        builder.add(row)
        if builder.full:
            yield builder.flush()
    batch = builder.flush()
    if batch is not None:
        yield batch


def unit_arrow_batches(unit: ScanUnit, flt: ScanFilter | None, level: str = "record") -> Iterator:
    """The RecordBatches of ``unit`` at ``level``: native for record rows when the native
    module is active in this process, else the reference."""
    if level == "record" and native.active():
        return native_arrow_batches(unit, flt, native.module)
    return reference_arrow_batches(unit, flt, level)


def _filter_spec(flt: ScanFilter):
    """``flt``'s record predicates as ``arrow_record_columns`` takes them, or None when the
    native side cannot evaluate them (a ``where`` expression, a header key no record key
    decodes to, a bound beyond int128)."""
    if flt.where:
        return None
    bounds = (flt.offset_lo, flt.offset_hi, flt.time_lo, flt.time_hi)
    if any(b is not None and not -_BOUND < b < _BOUND for b in bounds):
        return None
    try:
        headers = [(k.encode("utf-8", "surrogateescape"), None if v is None else bytes(v)) for k, v in flt.headers]
    except UnicodeEncodeError:
        return None
    key = None if flt.key is None else bytes(flt.key)
    value = None if flt.value_contains is None else bytes(flt.value_contains)
    return (*bounds, key, value, headers)


class _Extents:
    """Byte ranges of a unit's slices, one per slice at most (a run's first batch start to
    its last batch end: what lies between was walked, and the reference walks it alike)."""

    def __init__(self):
        self.ranges: dict[int, list[int]] = {}

    def add(self, si: int, start: int, end: int) -> None:
        r = self.ranges.get(si)
        if r is None:
            self.ranges[si] = [start, end]
        else:
            r[1] = end

    def unit(self, unit: ScanUnit) -> ScanUnit:
        slices = tuple(unit.slices[si]._replace(start=a, end=b, size=b - a) for si, (a, b) in self.ranges.items())
        return ScanUnit(unit.index, slices, sum(s.size for s in slices))


class _NativeRun:
    """The v2 batches waiting for one ``arrow_record_columns`` call."""

    def __init__(self):
        self.batches: list[tuple] = []
        self.extents = _Extents()
        self.rows = 0
        self.bytes = 0

    @property
    def full(self) -> bool:
        return self.rows >= MAX_ROWS or self.bytes >= MAX_BYTES


def _buf(b):
    import pyarrow as pa

    return None if b is None else pa.py_buffer(b)


def _var_array(typ, n: int, column):
    import pyarrow as pa

    validity, nulls, offsets, data = column
    return pa.Array.from_buffers(typ, n, [_buf(validity), _buf(offsets), _buf(data)], null_count=nulls)


def _arrays(schema, rows: int, columns) -> list:
    """pyarrow arrays over the native buffers (``pa.py_buffer`` wraps ``bytes`` in place)."""
    import pyarrow as pa

    arrays = []
    for field, column in zip(schema, columns):
        typ = field.type
        if pa.types.is_list(typ):
            offsets, keys, values = column
            struct_type = typ.value_type
            n_headers = len(keys[2]) // 4 - 1
            children = [_var_array(struct_type.field(0).type, n_headers, keys),
                        _var_array(struct_type.field(1).type, n_headers, values)]
            element = pa.Array.from_buffers(struct_type, n_headers, [None], children=children)
            arrays.append(pa.Array.from_buffers(typ, rows, [None, _buf(offsets)], children=[element]))
        elif len(column) == 4:
            arrays.append(_var_array(typ, rows, column))
        else:
            validity, nulls, data = column
            arrays.append(pa.Array.from_buffers(typ, rows, [_buf(validity), _buf(data)], null_count=nulls))
    return arrays


def _flush_native(module, unit, flt, spec, plain, sources, run: _NativeRun, schema) -> Iterator:
    import pyarrow as pa

    rows, columns = module.arrow_record_columns(run.batches, sources, spec, plain)
    if rows is None:  # a row the reference builds (and fails on) its own way: let it
        yield from reference_arrow_batches(run.extents.unit(unit), flt)
    elif rows:
        yield pa.RecordBatch.from_arrays(_arrays(schema, rows, columns), schema=schema)


def _batch_item(batch, si: int):
    """The tuple ``arrow_record_columns`` takes for a v2 batch, or None when the reference
    yields no record of it (a CRC that fails, no records, a region that does not decompress or
    cannot hold the records it declares)."""
    if not batch.is_valid():
        return None
    count = batch.records_count
    if count <= 0:
        return None
    try:
        region = batch.records_payload()
    except FormatError:
        return None
    if count > len(region) // MIN_RECORD_SIZE + 1:
        return None
    lat = batch.max_timestamp if batch.timestamp_type == 1 else None
    return (region, count, batch.base_offset, batch.base_timestamp, lat, batch.timestamp_type, batch.producer_id,
            batch.producer_epoch, batch.base_sequence, codec_name(batch.compression), batch.is_transactional,
            batch.is_control, batch.position, si)


def native_arrow_batches(unit: ScanUnit, flt: ScanFilter | None, module) -> Iterator:
    """The native path of :func:`unit_arrow_batches` (record rows), through ``module``."""
    flt = flt or ScanFilter()
    spec = _filter_spec(flt)
    if spec is None or any(not -_INT32 <= s.partition < _INT32 for s in unit.slices):
        yield from reference_arrow_batches(unit, flt)
        return
    plain = not (flt.has_offset_range or flt.has_time_range or flt.has_record_predicate)
    schema = arrow_schema("record")
    sources = [(s.topic, s.partition, s.segment) for s in unit.slices]
    run = _NativeRun()
    legacy = None  # the extents of a run of v0/v1 entries, read by the reference
    problems: list = []  # damage: the reference's rows leave it out silently too
    for si, s in enumerate(unit.slices):
        for batch in walk_slice(s, problems):
            end = batch.position + batch.size_in_bytes
            if batch.magic != 2:
                if run.batches:
                    yield from _flush_native(module, unit, flt, spec, plain, sources, run, schema)
                    run = _NativeRun()
                legacy = legacy or _Extents()
                legacy.add(si, batch.position, end)
                continue
            if legacy is not None:
                yield from reference_arrow_batches(legacy.unit(unit), flt)
                legacy = None
            if flt.has_offset_range and not flt.wants_offsets(first_offset_bound(batch), batch.last_offset):
                continue
            if flt.time_lo is not None and batch.timestamp_type == 1 and batch.max_timestamp < flt.time_lo:
                continue
            item = _batch_item(batch, si)
            if item is None:
                continue
            run.batches.append(item)
            run.extents.add(si, batch.position, end)
            run.rows += item[1]
            run.bytes += len(item[0])
            if run.full:
                yield from _flush_native(module, unit, flt, spec, plain, sources, run, schema)
                run = _NativeRun()
    if legacy is not None:
        yield from reference_arrow_batches(legacy.unit(unit), flt)
    if run.batches:
        yield from _flush_native(module, unit, flt, spec, plain, sources, run, schema)
