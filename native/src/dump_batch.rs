//! `plog dump`'s record lines for one v2 data batch, straight from its records region:
//! DumpLogSegments' text (`render_dump_batch`) or `--format jsonl` objects
//! (`render_dump_jsonl_batch`). The decode of native/src/records.rs and the line of
//! native/src/dump_text.rs (or the JSON of native/src/consume_render.rs) fused, so no Python
//! object is built per record.
//!
//! The reference is engine/inspect/dump.py (`DumpRun._dump_log`: `batch.records()`, the
//! offsets' continuity check, `_sequences`) with engine/inspect/dump_render.py
//! (`TextRenderer.records`, the common case). This unit only renders what it can render
//! exactly as they do: at any fault (a record that does not decode, an offset or a timestamp
//! beyond int64, a header key that is not UTF-8) it returns `None` and the caller takes the
//! reference path for the batch, which raises the reference's typed error or renders the
//! unusual record. A fault is therefore never reported from here.

use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::consume_render::{push_bytes_json, push_int, push_json_str};
use crate::dump_text::{push_line, RecordLine};
use crate::records::{decode_records, Decoded, RecordHeader};
use crate::{guarded, run_region, ByteView};

/// Java's Integer.MAX_VALUE: a producer sequence wraps past it (DefaultRecordBatch's
/// `incrementSequence`).
const INT32_MAX: i64 = i32::MAX as i64;

/// The batch fields the lines need (a v2 header's, as engine/inspect/dump.py reads them).
pub struct BatchContext<'a> {
    pub base_offset: i64,
    pub base_timestamp: i64,
    pub log_append_time: Option<i64>,
    pub base_sequence: i64,
    pub timestamp_type: &'a str,
    pub print_data: bool,
}

/// What a rendered batch hands back: its lines joined by newlines, its first and last
/// record offsets, and each `(previous, next)` pair of consecutive records whose offsets
/// are not contiguous (the caller checks the pair across batches itself).
pub struct Rendered {
    pub text: String,
    pub first_offset: i64,
    pub last_offset: i64,
    pub gaps: Vec<(i64, i64)>,
}

/// `record.sequence()` for a record at `offset_delta`: -1 without a base sequence, else the
/// base plus the delta, wrapping at Integer.MAX_VALUE (engine/inspect/dump.py, `_sequences`).
fn sequence(base_sequence: i64, offset_delta: i64) -> Option<i64> {
    if base_sequence < 0 {
        return Some(-1);
    }
    let seq = base_sequence.checked_add(offset_delta)?;
    Some(if seq > INT32_MAX { seq - INT32_MAX - 1 } else { seq })
}

/// Walk the records of `decoded` as the dump does: each record's fields (offset, timestamp,
/// sequence, key, value), its header keys (as UTF-8 text) and its headers go to `emit`, in
/// order; returns the first and last offsets and the gaps, or `None` where the reference
/// would render differently (see the module docs).
fn walk_batch<'d>(
    data: &'d [u8],
    decoded: &'d Decoded,
    ctx: &BatchContext,
    mut emit: impl FnMut(&RecordLine<'d>, &[&'d str], &'d [RecordHeader]),
) -> Option<(i64, i64, Vec<(i64, i64)>)> {
    let mut keys: Vec<&str> = Vec::new();
    let mut gaps = Vec::new();
    let (mut first_offset, mut last_offset) = (0i64, 0i64);
    for (i, r) in decoded.records.iter().enumerate() {
        let offset = ctx.base_offset.checked_add(r.offset_delta)?;
        let timestamp = match ctx.log_append_time {
            Some(t) => t,
            None => ctx.base_timestamp.checked_add(r.timestamp_delta)?,
        };
        let headers = &decoded.headers[r.first_header..r.end_header];
        keys.clear();
        for h in headers {
            keys.push(std::str::from_utf8(&data[h.key.0..h.key.1]).ok()?);
        }
        if i == 0 {
            first_offset = offset;
        } else if last_offset.checked_add(1) != Some(offset) {
            gaps.push((last_offset, offset));
        }
        last_offset = offset;
        let line = RecordLine {
            offset,
            timestamp,
            sequence: sequence(ctx.base_sequence, offset.checked_sub(ctx.base_offset)?)?,
            key: r.key.map(|(a, b)| &data[a..b]),
            value: r.value.map(|(a, b)| &data[a..b]),
        };
        emit(&line, &keys, headers);
    }
    Some((first_offset, last_offset, gaps))
}

/// The text lines of every record of `decoded` (DumpLogSegments'), or `None` where the
/// reference would render differently (see the module docs).
pub fn render(data: &[u8], decoded: &Decoded, ctx: &BatchContext) -> Option<Rendered> {
    let mut text = String::with_capacity(decoded.records.len() * 160);
    let (first_offset, last_offset, gaps) = walk_batch(data, decoded, ctx, |line, keys, _| {
        if !text.is_empty() {
            text.push('\n');
        }
        push_line(&mut text, line, ctx.timestamp_type, keys, ctx.print_data);
    })?;
    Some(Rendered { text, first_offset, last_offset, gaps })
}

/// The `--format jsonl` objects of every record of `decoded`, one per line, each starting
/// with `prefix` (`{"type":"record","file":"…",`), in the reference's field order
/// (engine/inspect/dump_render.py, `JsonRenderer.records`): offset, timestamp_type,
/// timestamp, key_size, value_size, sequence, header_keys, headers, key, value; keys, values
/// and header values binary-safe (a string, or `{"base64": …}` when not UTF-8).
pub fn render_jsonl(data: &[u8], decoded: &Decoded, ctx: &BatchContext, prefix: &[u8]) -> Option<Rendered> {
    let mut out: Vec<u8> = Vec::with_capacity(decoded.records.len() * (prefix.len() + 260));
    let size = |f: Option<&[u8]>| f.map_or(-1i128, |b| b.len() as i128);
    let (first_offset, last_offset, gaps) = walk_batch(data, decoded, ctx, |line, keys, headers| {
        if !out.is_empty() {
            out.push(b'\n');
        }
        out.extend_from_slice(prefix);
        out.extend_from_slice(b"\"offset\":");
        push_int(&mut out, i128::from(line.offset));
        out.extend_from_slice(b",\"timestamp_type\":");
        push_json_str(&mut out, ctx.timestamp_type.as_bytes());
        out.extend_from_slice(b",\"timestamp\":");
        push_int(&mut out, i128::from(line.timestamp));
        out.extend_from_slice(b",\"key_size\":");
        push_int(&mut out, size(line.key));
        out.extend_from_slice(b",\"value_size\":");
        push_int(&mut out, size(line.value));
        out.extend_from_slice(b",\"sequence\":");
        push_int(&mut out, i128::from(line.sequence));
        out.extend_from_slice(b",\"header_keys\":[");
        for (i, k) in keys.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            push_json_str(&mut out, k.as_bytes());
        }
        out.extend_from_slice(b"],\"headers\":[");
        for (i, (h, k)) in headers.iter().zip(keys.iter()).enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(b"{\"key\":");
            push_json_str(&mut out, k.as_bytes());
            out.extend_from_slice(b",\"value\":");
            push_bytes_json(&mut out, h.value.map(|(a, b)| &data[a..b]));
            out.push(b'}');
        }
        out.extend_from_slice(b"],\"key\":");
        push_bytes_json(&mut out, line.key);
        out.extend_from_slice(b",\"value\":");
        push_bytes_json(&mut out, line.value);
        out.push(b'}');
    })?;
    // Valid UTF-8 by construction (UTF-8 strings escaped, the rest base64); checked anyway.
    let text = String::from_utf8(out).ok()?;
    Some(Rendered { text, first_offset, last_offset, gaps })
}

/// Python: `render_dump_batch(data, count, base_offset, base_timestamp, log_append_time,
/// base_sequence, timestamp_type, print_data) -> (text, first_offset, last_offset, gaps) | None`
/// for a batch of `count` ≥ 1 records whose (decompressed) records region is `data`.
#[pyfunction]
#[pyo3(signature = (data, count, base_offset, base_timestamp, log_append_time, base_sequence, timestamp_type,
                    print_data))]
#[allow(clippy::too_many_arguments)]
fn render_dump_batch<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    count: i64,
    base_offset: i64,
    base_timestamp: i64,
    log_append_time: Option<i64>,
    base_sequence: i64,
    timestamp_type: &str,
    print_data: bool,
) -> PyResult<PyRendered<'py>> {
    let ctx = BatchContext { base_offset, base_timestamp, log_append_time, base_sequence, timestamp_type, print_data };
    render_region(py, data, count, |d, decoded| render(d, decoded, &ctx))
}

/// What both bindings return.
type PyRendered<'py> = Option<(Bound<'py, PyString>, i64, i64, Vec<(i64, i64)>)>;

/// Decode the records region `data` (`count` records) and render it with `pass`, with the
/// GIL released over a read-only buffer; None where the region does not decode or `pass`
/// declines (the caller takes the reference path).
fn render_region<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    count: i64,
    pass: impl Fn(&[u8], &Decoded) -> Option<Rendered> + Sync,
) -> PyResult<PyRendered<'py>> {
    guarded(None, || {
        let view = ByteView::new(data)?;
        let run = |d: &[u8]| decode_records(d, count).ok().and_then(|decoded| pass(d, &decoded));
        let rendered = if view.readonly() { run_region(py, view.bytes(), run) } else { run(view.bytes()) };
        Ok(rendered.map(|r| (PyString::new(py, &r.text), r.first_offset, r.last_offset, r.gaps)))
    })
}

/// Python: `render_dump_jsonl_batch(data, count, base_offset, base_timestamp,
/// log_append_time, base_sequence, timestamp_type, prefix) -> (text, first_offset,
/// last_offset, gaps) | None`: [`render_jsonl`] of a batch's (decompressed) records region.
#[pyfunction]
#[pyo3(signature = (data, count, base_offset, base_timestamp, log_append_time, base_sequence, timestamp_type,
                    prefix))]
#[allow(clippy::too_many_arguments)]
fn render_dump_jsonl_batch<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    count: i64,
    base_offset: i64,
    base_timestamp: i64,
    log_append_time: Option<i64>,
    base_sequence: i64,
    timestamp_type: &str,
    prefix: &[u8],
) -> PyResult<PyRendered<'py>> {
    let ctx = BatchContext { base_offset, base_timestamp, log_append_time, base_sequence, timestamp_type, print_data: true };
    render_region(py, data, count, |d, decoded| render_jsonl(d, decoded, &ctx, prefix))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(render_dump_batch, m)?)?;
    m.add_function(wrap_pyfunction!(render_dump_jsonl_batch, m)?)
}
