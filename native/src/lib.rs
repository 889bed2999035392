//! `plog._native`: the Rust twins of plog's hot pure-Python units (see DESIGN.md, "native").
//!
//! Buffers in, values out; no file I/O. The pure-Python units stay the reference:
//! formats/native.py loads this module (or not, with `PLOG_NATIVE=0`), and the formats
//! modules dispatch to it once, at import. Differential tests (tests/native) hold the two
//! identical, hostile bytes included.
//!
//! Python API:
//!
//! * `walk_entries(buf, start=0, end=None, base_position=0, max_batch_size=None,
//!   verify_crc=False, limit=None) -> (headers, crc_ok, next, trailing, fault)`: the batch
//!   walk of formats/batches.py over any object with the buffer protocol (bytes, bytearray,
//!   memoryview, mmap). The entries walked are contiguous from `start`; `headers` holds one
//!   tuple each: the 13-tuple record_batch.HEADER unpacks for a v2 batch, or
//!   `(offset, message_size, crc, magic, attributes, timestamp)` for a legacy message (magic
//!   at index 3 and the entry's size less 12 at index 1 in both, so entry k ends at its
//!   start + 12 + `headers[k][1]`). `crc_ok` is None, or with `verify_crc` one byte per
//!   entry, 1 when its checksum holds. `next` is where to go on after `limit` entries (None
//!   when the walk is over); `trailing` is `(position, length, declared_size)` or None;
//!   `fault` is `(kind, reason, position)` or None: the walk stops at a fault and hands back
//!   the entries before it, so the caller yields them first, as the reference does.
//! * `decode_records(data, count, base_offset, base_timestamp, log_append_time=None)` ->
//!   a list of `(offset, timestamp, key, value, headers)` tuples (formats/default_record.py).
//! * `record_heads(data, count, base_offset=0, base_timestamp=0)` -> a list of
//!   `(size, end, offset, timestamp, key, value_position)` tuples.
//! * `verify_hot(buf, p, n, bp, prev_last, seg_max, seg_base, pend_off, iprel, ii, ioff, apos,
//!   arel, ti, toff, tts, prev_tts, trel, ats) -> (count, p, prev_last, lastp, ii, pend_off, ti)`:
//!   the hot loop of `plog verify`'s segment walk (engine/storage/segment_check.py,
//!   `SegmentWalk._hot_reference`, names as there; native/src/verify.rs).
//! * `render_dump_records(records, sequences, timestamp_type, print_data) -> str | None`: the
//!   per-record lines of `plog dump` for one v2 data batch (engine/inspect/dump_render.py,
//!   `TextRenderer.records`), joined by newlines; None when a record is unusual (a header key
//!   that is not valid UTF-8, a field that is not bytes, an int beyond int64): the caller then
//!   renders it on the reference path (native/src/dump_text.rs).
//! * `render_dump_batch(data, count, base_offset, base_timestamp, log_append_time,
//!   base_sequence, timestamp_type, print_data) -> (text, first_offset, last_offset, gaps) | None`:
//!   the same lines for a whole v2 data batch straight from its records region, with the
//!   offsets the dump's continuity check needs; None where the reference path must run
//!   (native/src/dump_batch.rs).
//! * `NativeFormatError(kind, reason, position)`: what the decoders raise; formats/native.py
//!   turns it into plog's typed error (`kind` is "corrupt", "invalid" or "varint").
//! * `arrow_record_columns(batches, sources, filter, plain) -> (rows, columns) | (None, why)`:
//!   the Arrow column buffers (as `bytes`) of the Spark data source's record rows for a run
//!   of v2 batches (regions decompressed by Python), the scan filter's record predicates
//!   applied; `(None, why)` when a row is one the caller builds on the reference path
//!   (native/src/arrow_columns.rs, spark_tasks/arrow_batches.py).
//! * `ScanStats(offset_lo=None, offset_hi=None, time_lo=None, time_hi=None)`: a scan
//!   unit's statistics accumulator (engine/inspect/scan_stats.py): `.scan(buf, start, end,
//!   base_position) -> (declined, valid_end, trailing, fault)` walks a chunk and counts
//!   the batches it takes, `.add_region(entry, region) -> bool` a decompressed batch,
//!   `.fields()` the figures (native/src/scan_stats.rs, py_scan.rs).
//! * `ScanSearch(offset_lo=None, offset_hi=None, time_lo=None, time_hi=None, key=None,
//!   value_contains=None, headers=[])`: a search's predicate (engine/inspect/scan.py):
//!   `.scan(buf, start, end, base_position) -> (hits, valid_end, trailing, fault)` gives
//!   the indexes of the matching records of each batch of a chunk, `.region(entry, region)`
//!   those of a decompressed batch (native/src/scan_search.rs, py_scan.rs).
//! * `ConsumeFormat(ops)`: `plog consume`'s output format compiled once (a list of
//!   `(code, literal)`: literal bytes and record fields; native/src/consume_render.rs).
//! * `ConsumeDecoders(keys, values)`: the Confluent schemas compiled so far for `plog
//!   consume`'s decoded keys and values, each a list of `(id bytes, AvroProgram |
//!   ProtobufPlan, schema id)` (native/src/py_consume_decode.rs).
//! * `ConsumeOutput()`: the bytes `render_consume` appends to (`take()` -> bytes,
//!   `extend(bytes)`, `len()`).
//! * `render_consume(fmt, out, data, count, base_offset, base_timestamp, log_append_time,
//!   first_index, lo, hi, max_take, end=None, max_render=None, decoders=None) -> (next_index,
//!   taken, rendered, first_taken, last_taken, first_unconsumed, past_end, reached_hi,
//!   needs_reference)`: the JSON
//!   lines or kcat template output of one v2 batch's records region, taken and cut as the
//!   consume loop does, appended to `out` (engine/clients/record_io.py;
//!   native/src/py_consume_render.rs).
//! * `RecoveryWalk(base_offset, interval, collect, producers, epochs)`: the batch loop of
//!   segment recovery and of the recovery plan's scan, one chunk at a time (`walk`, `take`,
//!   `resume`, `set_producer`, `stop_gathering`); it stops before anything unusual, which the
//!   reference handles (native/src/recovery.rs, driven by engine/storage/recovery_walk.py).
//! * `avro_program(nodes, root) -> AvroProgram` and `avro_render_json(program, payload,
//!   start=0) -> str | None`: a Confluent Avro payload's datum as Avro's JSON text, exactly as
//!   engine/schemas/avro_codec.py renders it; None where that reference must run
//!   (native/src/avro_json.rs).
//! * `avro_extract(program, payload, start, path) -> (found, value) | None`: the scalar at a
//!   field path of that JSON, as `scan --where` walks it, without building the value
//!   (native/src/avro_json.rs).
//! * `avro_where(programs, values, conditions) -> bytes | None`: `scan --where` conditions on
//!   a list of framed Avro values at once, one byte per value: 0 no, 1 yes, 2 ask the
//!   reference (native/src/avro_json.rs).
//! * `protobuf_plan(messages, enums, roots) -> ProtobufPlan` and `protobuf_render_json(plan,
//!   payload, start=0, root=None) -> str | None`: a Confluent Protobuf payload (message indexes
//!   first when `root` is None) as the JSON text engine/schemas/protobuf_codec.py renders;
//!   None where that reference must run (native/src/protobuf_json.rs).
//! * `append_producer_batches(batches, start, max_message_bytes, segment_bytes, compact)`
//!   -> a list of `(size, last_offset_delta, max_timestamp, producer_id, producer_epoch,
//!   base_sequence, transactional)`, one per producer batch of `batches[start:]` a leader
//!   appends on the fast path (engine/storage/append_fast.py), up to the first it leaves to
//!   the reference loop (native/src/append.rs).
//! * `append_replica_batches(buf, expected) -> list | None`: the batches of a follower's
//!   fetch as `(size, base_offset, last_offset, max_timestamp, partition_leader_epoch,
//!   producer_id, producer_epoch, base_sequence, attributes, records_count)`, or None when
//!   the reference must append them (native/src/append.rs).
//! * `CleanerMap(memory)`: the log cleaner's offset map (Kafka's `SkimpyOffsetMap`, MD5
//!   keys, same probing and counters as engine/maintenance/offset_map.py) with its per-batch
//!   loops `map_records(data, count, base_offset, start, max_desired) -> (counted, filled)`
//!   and `retained(data, count, base_offset, latest, retain_deletes) -> (keep, tombstones
//!   kept, keyless removed, tombstones removed, tombstones expired)`, each None where the
//!   reference must run (native/src/compact.rs, py_compact.rs).
//! * `compact_md5(data) -> bytes`: the MD5 digest the map keys with.
//! * `compact_rebuild_v2(data, count, keep, base_offset, partition_leader_epoch, attributes,
//!   base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence,
//!   last_offset_delta, delete_horizon) -> (bytes, max_ts, last_delta) | None`: an
//!   uncompressed v2 batch of the kept records as `encode_batch` writes it
//!   (engine/maintenance/batch_filter.py).
//! * `RecordsBuilder()`: an open producer batch, its v2 records encoded as they arrive
//!   (`append`, `append_raw`, `count`, `size`, `records()`, `batch(...)` -> the whole batch
//!   with its CRC); engine/clients/producer.py (native/src/produce.rs, py_produce.rs).
//! * `ProduceFill(mode, partitions, partition, ignore_keys, batch_size, limit, key_separator,
//!   null_marker, ignore_error, clock)`: the producer's accumulate loop over lines or a list
//!   of records, `.run(builders, source, pos, last, max_records, sticky, produced)` up to the
//!   next event the Python producer acts on (native/src/py_produce.rs).
//! * `murmur2(data) -> int`: Kafka's murmur2 (engine/clients/partitioner.py).
//! * `crc32c(data, value=0) -> int`: the CRC-32C of any contiguous buffer, continuing
//!   `value`; the `crc32c` package's twin (formats/crc.py; native/src/crc.rs).
//! * `follower_walk(buf, expected, latest_epoch, retain) -> (first, last, max_timestamp,
//!   offset_of_max_timestamp, records, epochs, runs) | None` and `follower_index(buf, base,
//!   position, since, interval, mts_ts, mts_off, t_ts, off_entries, off_max, off_last,
//!   time_entries, time_max) -> (offset_entries, time_entries, position, since, mts_ts,
//!   mts_off) | None`: a follower's fetch summed up for its append, and the index entries it
//!   adds (engine/storage/append_fast.py; native/src/append_follower.rs).
//!
//! Safety: the only `unsafe` is the view of a Python buffer's bytes (`ByteView`). Panics
//! cannot cross into Python: every entry point runs under `guarded`, which turns one into a
//! `corrupt` fault. Long loops run with the GIL released (over buffers their exporter hands
//! out read-only: bytes, an mmap opened for reading).

use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};

mod append;
mod append_follower;
mod arrow_columns;
mod avro_json;
mod compact;
mod consume_render;
mod crc;
mod dump_batch;
mod dump_text;
mod fault;
mod produce;
mod protobuf_json;
mod py_append;
mod py_arrow_columns;
mod py_avro_json;
mod py_compact;
mod py_consume_decode;
mod py_consume_render;
mod py_produce;
mod py_protobuf_json;
mod py_recovery;
mod py_scan;
mod records;
mod recovery;
mod scan_search;
mod scan_stats;
mod varint;
mod verify;
mod walk;

use fault::Fault;

pyo3::create_exception!(
    _native,
    NativeFormatError,
    PyException,
    "Bytes that do not decode: args are (kind, reason, position); formats/native.py raises \
     plog's typed error for it."
);

/// Regions and walks at least this long run with the GIL released; below it, releasing
/// and taking the GIL back costs more than the work (and may wait a switch interval).
pub(crate) const DETACH_THRESHOLD: usize = 256 * 1024;

/// A read-only view of the bytes behind a Python buffer (bytes, bytearray, memoryview,
/// mmap). The exporter cannot free or resize the memory while the view holds the buffer
/// (bytearray and mmap refuse with BufferError), so the slice stays valid for the view's
/// life, with or without the GIL.
pub(crate) struct ByteView {
    buffer: PyBuffer<u8>,
}

impl ByteView {
    pub(crate) fn new(obj: &Bound<'_, PyAny>) -> PyResult<ByteView> {
        let buffer = PyBuffer::<u8>::get(obj)?;
        if !buffer.is_c_contiguous() {
            return Err(PyValueError::new_err("the buffer must be contiguous"));
        }
        Ok(ByteView { buffer })
    }

    /// Whether the exporter hands the bytes out read-only (bytes, an mmap opened for
    /// reading). Only such buffers are read with the GIL released: a writable one (a
    /// bytearray) could be written by another Python thread meanwhile.
    pub(crate) fn readonly(&self) -> bool {
        self.buffer.readonly()
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        let len = self.buffer.len_bytes();
        if len == 0 {
            return &[];
        }
        // SAFETY: PyBuffer::get checked the item size (1) and format ('B'), the buffer is
        // C-contiguous (checked in new), so `len` bytes from buf_ptr are the buffer's memory,
        // kept alive and in place until `self.buffer` is released (on drop, after every use
        // of this slice, whose lifetime is tied to &self). The memory is only read, and read
        // without the GIL only when the exporter says it is read-only (`readonly`), so no
        // Python code writes it meanwhile.
        unsafe { std::slice::from_raw_parts(self.buffer.buf_ptr() as *const u8, len) }
    }
}

/// Run `f`, turning a panic into a `corrupt` fault at `position` (a bug in this crate must
/// be one clear error line for the user, never a crash or a PanicException).
pub(crate) fn guarded<T>(position: Option<i64>, f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown cause".to_string());
            Err(raise(Fault::corrupt(format!("Native decoder failed ({what})"), position)))
        }
    }
}

fn fault_args(fault: &Fault) -> (&'static str, &str, Option<i64>) {
    (fault.kind.name(), fault.reason.as_str(), fault.position)
}

pub(crate) fn raise(fault: Fault) -> PyErr {
    NativeFormatError::new_err((fault.kind.name(), fault.reason, fault.position))
}

/// `a + b` as Python adds them: an int64 when it fits, else a Python int.
fn py_sum<'py>(py: Python<'py>, a: i64, b: i64) -> PyResult<Bound<'py, PyAny>> {
    match a.checked_add(b) {
        Some(sum) => Ok(sum.into_pyobject(py)?.into_any()),
        None => a.into_pyobject(py)?.add(b),
    }
}

/// `data[span]` as bytes, or None.
fn py_bytes_opt<'py>(py: Python<'py>, data: &[u8], span: Option<records::Span>) -> Bound<'py, PyAny> {
    match span {
        Some((a, b)) => PyBytes::new(py, &data[a..b]).into_any(),
        None => py.None().into_bound(py),
    }
}

/// A header key, as formats/records.py's `decode_header_key`: UTF-8 with surrogateescape.
fn header_key<'py>(py: Python<'py>, raw: &[u8]) -> PyResult<Bound<'py, PyAny>> {
    match std::str::from_utf8(raw) {
        Ok(text) => Ok(PyString::new(py, text).into_any()),
        Err(_) => PyBytes::new(py, raw).call_method1("decode", ("utf-8", "surrogateescape")),
    }
}

// -------------------------------------------------------------------------------------
// The batch walk

fn v2_header_tuple<'py>(py: Python<'py>, h: &walk::V2Header) -> PyResult<Bound<'py, PyTuple>> {
    let fields: [Bound<'py, PyAny>; 13] = [
        h.base_offset.into_pyobject(py)?.into_any(),
        h.batch_length.into_pyobject(py)?.into_any(),
        h.partition_leader_epoch.into_pyobject(py)?.into_any(),
        h.magic.into_pyobject(py)?.into_any(),
        h.crc.into_pyobject(py)?.into_any(),
        h.attributes.into_pyobject(py)?.into_any(),
        h.last_offset_delta.into_pyobject(py)?.into_any(),
        h.base_timestamp.into_pyobject(py)?.into_any(),
        h.max_timestamp.into_pyobject(py)?.into_any(),
        h.producer_id.into_pyobject(py)?.into_any(),
        h.producer_epoch.into_pyobject(py)?.into_any(),
        h.base_sequence.into_pyobject(py)?.into_any(),
        h.records_count.into_pyobject(py)?.into_any(),
    ];
    PyTuple::new(py, fields)
}

fn header_tuple<'py>(py: Python<'py>, header: &walk::Header) -> PyResult<Bound<'py, PyAny>> {
    Ok(match header {
        walk::Header::V2(h) => v2_header_tuple(py, h)?.into_any(),
        walk::Header::Legacy(h) => {
            (h.offset, h.message_size, h.crc, h.magic, h.attributes, h.timestamp).into_pyobject(py)?.into_any()
        }
    })
}

/// How far whole v2 batches run from the start of `buf`, hopping from size field to size
/// field (engine/storage/segment.py's `_whole_batches_end` loop, its reference):
/// `(position, partial)`, where the hop stopped at the end, at an entry it does not take
/// (not v2, a size below a batch header's, under 61 bytes left), or (`partial`) at a v2
/// batch that runs past the end of `buf`.
#[pyfunction]
fn v2_batches_end(py: Python<'_>, buf: &Bound<'_, PyAny>) -> PyResult<(usize, bool)> {
    let view = ByteView::new(buf)?;
    let hop = |b: &[u8]| {
        let end = b.len();
        let mut pos = 0usize;
        while end - pos >= 61 && b[pos + 16] == 2 {
            let size = i32::from_be_bytes([b[pos + 8], b[pos + 9], b[pos + 10], b[pos + 11]]);
            if size < 49 {
                break;
            }
            let stop = pos + 12 + size as usize;
            if stop > end {
                return (pos, true);
            }
            pos = stop;
        }
        (pos, false)
    };
    let bytes = view.bytes();
    Ok(if view.readonly() { py.detach(|| hop(bytes)) } else { hop(bytes) })
}

/// See the module docs. `start` must be >= 0, `base_position` + the buffer's length must fit
/// in int64; `end` is clamped to the buffer.
#[pyfunction]
#[pyo3(signature = (buf, start=0, end=None, base_position=0, max_batch_size=None, verify_crc=false, limit=None))]
#[allow(clippy::too_many_arguments)]
fn walk_entries<'py>(
    py: Python<'py>,
    buf: &Bound<'py, PyAny>,
    start: i64,
    end: Option<i64>,
    base_position: i64,
    max_batch_size: Option<i64>,
    verify_crc: bool,
    limit: Option<usize>,
) -> PyResult<Bound<'py, PyTuple>> {
    if start < 0 {
        return Err(PyValueError::new_err("start must not be negative"));
    }
    if limit == Some(0) {
        return Err(PyValueError::new_err("limit must be at least 1"));
    }
    let view = ByteView::new(buf)?;
    let len = view.bytes().len() as i64;
    if base_position.checked_add(len).is_none() {
        // File positions are int64 (formats/batches.py walks such buffers on the reference path).
        return Err(PyValueError::new_err("base_position + the buffer's length must fit in int64"));
    }
    guarded(Some(base_position + start.min(len)), || {
        let bytes = view.bytes();
        let spec = walk::WalkSpec {
            start,
            end: end.map_or(len, |e| e.min(len)),
            base_position,
            max_batch_size,
            verify_crc,
            limit: limit.unwrap_or(usize::MAX),
        };
        let span = usize::try_from(spec.end - start).unwrap_or(0);
        let outcome = if verify_crc && span >= DETACH_THRESHOLD && view.readonly() {
            py.detach(|| walk::walk(bytes, spec))
        } else {
            walk::walk(bytes, spec)
        };
        let headers = PyList::empty(py);
        for e in &outcome.entries {
            headers.append(header_tuple(py, &e.header)?)?;
        }
        let crc_ok = verify_crc.then(|| {
            let flags: Vec<u8> = outcome.entries.iter().map(|e| u8::from(e.crc_ok == Some(true))).collect();
            PyBytes::new(py, &flags)
        });
        let trailing = outcome.trailing.map(|t| (t.position, t.length, t.declared_size));
        let fault = outcome.fault.as_ref().map(fault_args);
        (headers, crc_ok, outcome.next, trailing, fault).into_pyobject(py)
    })
}

// -------------------------------------------------------------------------------------
// v2 records

/// Run a records-region pass over `data`, releasing the GIL when the region is long.
pub(crate) fn run_region<T: Send>(py: Python<'_>, data: &[u8], pass: impl FnOnce(&[u8]) -> T + Send) -> T {
    if data.len() >= DETACH_THRESHOLD {
        py.detach(|| pass(data))
    } else {
        pass(data)
    }
}

/// See the module docs (and formats/default_record.py's `decode_records`).
#[pyfunction]
#[pyo3(signature = (data, count, base_offset, base_timestamp, log_append_time=None))]
fn decode_records<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyBytes>,
    count: i64,
    base_offset: i64,
    base_timestamp: i64,
    log_append_time: Option<i64>,
) -> PyResult<Bound<'py, PyList>> {
    guarded(None, || {
        let bytes = data.as_bytes();
        let decoded = run_region(py, bytes, |d| records::decode_records(d, count)).map_err(raise)?;
        let log_append_time = log_append_time.map(|t| t.into_pyobject(py)).transpose()?;
        let empty = PyTuple::empty(py);
        let out = PyList::empty(py);
        for r in &decoded.records {
            let timestamp = match &log_append_time {
                Some(t) => t.clone().into_any(),
                None => py_sum(py, base_timestamp, r.timestamp_delta)?,
            };
            let headers = if r.first_header == r.end_header {
                empty.clone()
            } else {
                let mut items = Vec::with_capacity(r.end_header - r.first_header);
                for h in &decoded.headers[r.first_header..r.end_header] {
                    let key = header_key(py, &bytes[h.key.0..h.key.1])?;
                    items.push((key, py_bytes_opt(py, bytes, h.value)).into_pyobject(py)?);
                }
                PyTuple::new(py, items)?
            };
            let record = (
                py_sum(py, base_offset, r.offset_delta)?,
                timestamp,
                py_bytes_opt(py, bytes, r.key),
                py_bytes_opt(py, bytes, r.value),
                headers,
            );
            out.append(record)?;
        }
        Ok(out)
    })
}

/// See the module docs (and formats/default_record.py's `record_heads`).
#[pyfunction]
#[pyo3(signature = (data, count, base_offset=0, base_timestamp=0))]
fn record_heads<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyBytes>,
    count: i64,
    base_offset: i64,
    base_timestamp: i64,
) -> PyResult<Bound<'py, PyList>> {
    guarded(None, || {
        let bytes = data.as_bytes();
        let heads = run_region(py, bytes, |d| records::record_heads(d, count)).map_err(raise)?;
        let out = PyList::empty(py);
        for h in &heads {
            let head = (
                h.size,
                h.end,
                py_sum(py, base_offset, h.offset_delta)?,
                py_sum(py, base_timestamp, h.timestamp_delta)?,
                py_bytes_opt(py, bytes, h.key),
                h.value_position,
            );
            out.append(head)?;
        }
        Ok(out)
    })
}

// -------------------------------------------------------------------------------------
// verify's hot loop

/// A one-dimensional Python buffer of int32 or int64 items (an `array('i')` or
/// `array('q')` index column: the time index's relative offsets are the one, its
/// empty placeholder the other).
enum Column {
    I32(PyBuffer<i32>),
    I64(PyBuffer<i64>),
    /// An empty array (its buffer pointer need not be aligned, so PyBuffer refuses it).
    Empty,
}

impl Column {
    fn new(obj: &Bound<'_, PyAny>) -> PyResult<Column> {
        let column = match PyBuffer::<i32>::get(obj).map(Column::I32) {
            Ok(column) => column,
            Err(_) => match PyBuffer::<i64>::get(obj) {
                Ok(b) => Column::I64(b),
                Err(e) => {
                    if pyo3::types::PyMemoryView::from(obj)?.len()? == 0 {
                        return Ok(Column::Empty);
                    }
                    return Err(e);
                }
            },
        };
        let (dims, contiguous) = match &column {
            Column::I32(b) => (b.dimensions(), b.is_c_contiguous()),
            Column::I64(b) => (b.dimensions(), b.is_c_contiguous()),
            Column::Empty => (1, true),
        };
        if dims != 1 || !contiguous {
            return Err(PyValueError::new_err("an index column must be a one-dimensional contiguous array"));
        }
        Ok(column)
    }

    /// Item `i` as an i128 reader (None past the end).
    fn reader<'a>(&'a self, py: Python<'a>) -> Box<dyn Fn(usize) -> Option<i128> + 'a> {
        match self {
            Column::I32(b) => {
                let items = b.as_slice(py).unwrap_or(&[]);
                Box::new(move |i| items.get(i).map(|c| i128::from(c.get())))
            }
            Column::I64(b) => {
                let items = b.as_slice(py).unwrap_or(&[]);
                Box::new(move |i| items.get(i).map(|c| i128::from(c.get())))
            }
            Column::Empty => Box::new(|_| None),
        }
    }
}

/// See the module docs and native/src/verify.rs. `apos`/`arel` are the offset index
/// chunk's columns, `trel`/`ats` the time index chunk's (`array('i')` or `array('q')`).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn verify_hot<'py>(
    py: Python<'py>,
    buf: &Bound<'py, PyAny>,
    p: usize,
    n: usize,
    bp: i128,
    prev_last: i128,
    seg_max: i128,
    seg_base: i128,
    pend_off: i128,
    iprel: i128,
    ii: usize,
    ioff: i128,
    apos: &Bound<'py, PyAny>,
    arel: &Bound<'py, PyAny>,
    ti: usize,
    toff: i128,
    tts: i128,
    prev_tts: i128,
    trel: &Bound<'py, PyAny>,
    ats: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyTuple>> {
    let view = ByteView::new(buf)?;
    let columns = [Column::new(apos)?, Column::new(arel)?, Column::new(trel)?, Column::new(ats)?];
    guarded(None, || {
        let state = verify::HotState {
            p, n, bp, prev_last, seg_max, seg_base, pend_off, iprel, ii, ioff, ti, toff, tts, prev_tts,
        };
        let [apos, arel, trel, ats] = &columns;
        let end = verify::hot(view.bytes(), state, apos.reader(py), arel.reader(py), trel.reader(py), ats.reader(py));
        (end.count, end.p, end.prev_last, end.lastp, end.ii, end.pend_off, end.ti).into_pyobject(py)
    })
}

// -------------------------------------------------------------------------------------
// dump's record lines

/// `field` as bytes (`Some(None)` for None); `None` when it is neither.
fn bytes_field<'a>(field: &'a Bound<'_, PyAny>) -> Option<Option<&'a [u8]>> {
    if field.is_none() {
        return Some(None);
    }
    field.cast::<PyBytes>().ok().map(|b| Some(b.as_bytes()))
}

/// One record's line appended to `out`; false when the record is unusual (see the module docs).
fn push_record_line(out: &mut String, record: &Bound<'_, PyAny>, sequence: &Bound<'_, PyAny>, tt: &str,
                    print_data: bool) -> PyResult<bool> {
    let Ok(record) = record.cast::<PyTuple>() else { return Ok(false) };
    if record.len() != 5 {
        return Ok(false);
    }
    let (offset, timestamp, key, value, headers) = (
        record.get_borrowed_item(0)?, record.get_borrowed_item(1)?, record.get_borrowed_item(2)?,
        record.get_borrowed_item(3)?, record.get_borrowed_item(4)?,
    );
    let (Ok(offset), Ok(timestamp), Ok(sequence)) = (offset.extract::<i64>(), timestamp.extract::<i64>(), sequence.extract::<i64>()) else {
        return Ok(false);
    };
    let (Some(key), Some(value)) = (bytes_field(&key), bytes_field(&value)) else { return Ok(false) };
    let Ok(headers) = headers.cast::<PyTuple>() else { return Ok(false) };
    let mut keys: Vec<Bound<'_, PyString>> = Vec::with_capacity(headers.len());
    for header in headers.iter() {
        let Ok(pair) = header.cast::<PyTuple>() else { return Ok(false) };
        let Ok(k) = pair.get_item(0).and_then(|k| Ok(k.cast_into::<PyString>()?)) else { return Ok(false) };
        keys.push(k);
    }
    let mut texts: Vec<&str> = Vec::with_capacity(keys.len());
    for k in &keys {
        // A key with lone surrogates (from surrogateescape) is not valid UTF-8: unusual.
        let Ok(text) = k.to_str() else { return Ok(false) };
        texts.push(text);
    }
    let line = dump_text::RecordLine { offset, timestamp, sequence, key, value };
    dump_text::push_line(out, &line, tt, &texts, print_data);
    Ok(true)
}

/// See the module docs (and engine/inspect/dump_render.py).
#[pyfunction]
fn render_dump_records<'py>(
    py: Python<'py>,
    records: &Bound<'py, PyAny>,
    sequences: &Bound<'py, PyAny>,
    timestamp_type: &str,
    print_data: bool,
) -> PyResult<Option<Bound<'py, PyString>>> {
    guarded(None, || {
        let (Ok(records), Ok(sequences)) = (records.cast::<PyList>(), sequences.cast::<PyList>()) else {
            return Ok(None);
        };
        if records.len() != sequences.len() {
            return Ok(None);
        }
        let mut out = String::with_capacity(records.len() * 96);
        for (i, (record, sequence)) in records.iter().zip(sequences.iter()).enumerate() {
            if i > 0 {
                out.push('\n');
            }
            if !push_record_line(&mut out, &record, &sequence, timestamp_type, print_data)? {
                return Ok(None);
            }
        }
        Ok(Some(PyString::new(py, &out)))
    })
}

/// The panic guard's own test (tests/native/test_loader.py): a panic inside native code
/// must reach Python as a typed fault, never as a crash or a PanicException.
#[pyfunction]
fn _panic_guard_probe() -> PyResult<()> {
    guarded(Some(0), || panic!("the guard's probe"))
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // Panics are caught (guarded) and reported as typed errors: the default hook's message
    // on stderr would only repeat, out of place, what the error line says.
    std::panic::set_hook(Box::new(|_| {}));
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("NativeFormatError", m.py().get_type::<NativeFormatError>())?;
    m.add_function(wrap_pyfunction!(walk_entries, m)?)?;
    m.add_function(wrap_pyfunction!(v2_batches_end, m)?)?;
    m.add_function(wrap_pyfunction!(decode_records, m)?)?;
    m.add_function(wrap_pyfunction!(record_heads, m)?)?;
    m.add_function(wrap_pyfunction!(verify_hot, m)?)?;
    m.add_function(wrap_pyfunction!(render_dump_records, m)?)?;
    m.add_function(wrap_pyfunction!(_panic_guard_probe, m)?)?;
    // Each further unit registers its own functions from its own file (one line each here).
    crc::register(m)?;
    dump_batch::register(m)?;
    py_arrow_columns::register(m)?;
    py_scan::register(m)?;
    py_consume_render::register(m)?;
    py_consume_decode::register(m)?;
    py_recovery::register(m)?;
    py_avro_json::register(m)?;
    py_protobuf_json::register(m)?;
    py_append::register(m)?;
    py_compact::register(m)?;
    py_produce::register(m)?;
    append_follower::register(m)?;
    Ok(())
}
