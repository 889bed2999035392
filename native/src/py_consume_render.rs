//! Python bindings of consume_render.rs: `ConsumeFormat` (a compiled format),
//! `ConsumeOutput` (the bytes rendered so far) and `render_consume` (one batch's records
//! region rendered into it). The caller is engine/clients/record_io.py's `RenderedPoll`.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};

use crate::consume_render::{self, BatchFacts, FieldDecoders, Op, Window};
use crate::py_consume_decode::ConsumeDecoders;
use crate::{guarded, raise, run_region, ByteView};

/// A compiled output format: `ConsumeFormat([(code, literal), ...])`, code 0 with a bytes
/// literal, or an op code of consume_render.rs's `Op::from_code` with None.
#[pyclass(frozen, module = "plog._native")]
pub struct ConsumeFormat {
    ops: Vec<Op>,
}

#[pymethods]
impl ConsumeFormat {
    #[new]
    fn new(ops: &Bound<'_, PyList>) -> PyResult<ConsumeFormat> {
        let mut out = Vec::with_capacity(ops.len());
        for item in ops.iter() {
            let (code, literal): (u8, Option<Vec<u8>>) = item.extract()?;
            let op = match (code, literal) {
                (0, Some(bytes)) => Op::Lit(bytes),
                (c, None) => Op::from_code(c).ok_or_else(|| PyValueError::new_err(format!("unknown op code {c}")))?,
                (c, Some(_)) => return Err(PyValueError::new_err(format!("op code {c} takes no literal"))),
            };
            out.push(op);
        }
        Ok(ConsumeFormat { ops: out })
    }
}

/// An output buffer the renderer appends to, batch after batch: one copy into a Python bytes
/// object when taken, rather than a bytes object per batch and a join.
#[pyclass(module = "plog._native")]
pub struct ConsumeOutput {
    buf: Vec<u8>,
}

/// A buffer that grew past this is let go when taken (one huge poll does not pin its size).
const KEEP_CAPACITY: usize = 16 << 20;

#[pymethods]
impl ConsumeOutput {
    #[new]
    fn new() -> ConsumeOutput {
        ConsumeOutput { buf: Vec::new() }
    }

    fn __len__(&self) -> usize {
        self.buf.len()
    }

    /// Append `data` (output rendered elsewhere, in its place in the order).
    fn extend(&mut self, data: &Bound<'_, PyBytes>) {
        self.buf.extend_from_slice(data.as_bytes());
    }

    /// The output so far as bytes; the buffer is then empty.
    fn take<'py>(&mut self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let out = PyBytes::new(py, &self.buf);
        if self.buf.capacity() > KEEP_CAPACITY {
            self.buf = Vec::new();
        } else {
            self.buf.clear();
        }
        out
    }
}

/// `render_consume(fmt, out, data, count, base_offset, base_timestamp, log_append_time,
/// first_index, lo, hi, max_take, end, max_render, decoders=None)` -> `(next_index, taken,
/// rendered, first_taken, last_taken, first_unconsumed, past_end, reached_hi,
/// needs_reference)`, the output appended to `out` (a `ConsumeOutput`); see consume_render.rs
/// (`Window`, `Outcome`; `decoders`, a `ConsumeDecoders`, for the decoded-field ops). Raises
/// NativeFormatError (position None) when the region does not decode, `out` left as it was.
#[pyfunction]
#[pyo3(signature = (fmt, out, data, count, base_offset, base_timestamp, log_append_time, first_index, lo, hi,
                    max_take, end=None, max_render=None, decoders=None))]
#[allow(clippy::too_many_arguments)]
fn render_consume<'py>(
    py: Python<'py>,
    fmt: &Bound<'py, ConsumeFormat>,
    out: &Bound<'py, ConsumeOutput>,
    data: &Bound<'py, PyAny>,
    count: i64,
    base_offset: i64,
    base_timestamp: i64,
    log_append_time: Option<i64>,
    first_index: usize,
    lo: i128,
    hi: i128,
    max_take: usize,
    end: Option<i128>,
    max_render: Option<usize>,
    decoders: Option<&Bound<'py, ConsumeDecoders>>,
) -> PyResult<Bound<'py, PyTuple>> {
    if max_take == 0 {
        return Err(PyValueError::new_err("max_take must be at least 1"));
    }
    let view = ByteView::new(data)?;
    let ops = &fmt.get().ops;
    let decoders: Option<&dyn FieldDecoders> = decoders.map(|d| d.get() as &dyn FieldDecoders);
    let mut out = out.try_borrow_mut()?;
    guarded(None, || {
        let facts = BatchFacts { base_offset, base_timestamp, log_append_time };
        let window = Window { first_index, lo, hi, max_take, end, max_render };
        let bytes = view.bytes();
        let buf = &mut out.buf;
        let mut pass = |d: &[u8]| {
            // The output grows with the records rendered (never by a count read from the
            // bytes); the region is decoded whole before any of it is rendered.
            consume_render::render_region(d, count, facts, ops, window, decoders, buf)
        };
        let outcome = if view.readonly() { run_region(py, bytes, pass) } else { pass(bytes) }.map_err(raise)?;
        (
            outcome.next_index,
            outcome.taken,
            outcome.rendered,
            outcome.first_taken,
            outcome.last_taken,
            outcome.first_unconsumed,
            outcome.past_end,
            outcome.reached_hi,
            outcome.needs_reference,
        )
            .into_pyobject(py)
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<ConsumeFormat>()?;
    m.add_class::<ConsumeOutput>()?;
    m.add_function(wrap_pyfunction!(render_consume, m)?)?;
    Ok(())
}
