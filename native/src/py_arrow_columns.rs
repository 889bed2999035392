//! Python bindings of arrow_columns.rs: `arrow_record_columns`, called by
//! spark_tasks/arrow_native.py, which wraps the returned `bytes` with `pyarrow.py_buffer`
//! (no copy) into the data source's RecordBatch.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};

use crate::arrow_columns::{self, BatchIn, Bits, Built, Filter, Source, VarColumn};
use crate::{guarded, DETACH_THRESHOLD};

/// Items per batch tuple (see `arrow_record_columns`).
const BATCH_ITEMS: usize = 14;

fn bytes_opt(obj: &Bound<'_, PyAny>) -> PyResult<Option<Vec<u8>>> {
    if obj.is_none() {
        return Ok(None);
    }
    Ok(Some(obj.cast::<PyBytes>()?.as_bytes().to_vec()))
}

fn filter_from(filter: &Bound<'_, PyTuple>) -> PyResult<Filter> {
    if filter.len() != 7 {
        return Err(PyValueError::new_err("filter: expected 7 items"));
    }
    let bound = |i: usize| -> PyResult<Option<i128>> { filter.get_item(i)?.extract() };
    let mut headers = Vec::new();
    for pair in filter.get_item(6)?.cast::<PyList>()?.iter() {
        let pair = pair.cast::<PyTuple>()?;
        if pair.len() != 2 {
            return Err(PyValueError::new_err("filter headers: expected (key, value) pairs"));
        }
        let key = pair.get_item(0)?.cast::<PyBytes>()?.as_bytes().to_vec();
        headers.push((key, bytes_opt(&pair.get_item(1)?)?));
    }
    Ok(Filter {
        offset_lo: bound(0)?,
        offset_hi: bound(1)?,
        time_lo: bound(2)?,
        time_hi: bound(3)?,
        key: bytes_opt(&filter.get_item(4)?)?,
        value_contains: bytes_opt(&filter.get_item(5)?)?,
        headers,
    })
}

/// The Python objects behind one batch tuple, held while their bytes are borrowed.
struct Held<'py> {
    region: Bound<'py, PyBytes>,
    codec: Bound<'py, PyString>,
    item: Bound<'py, PyTuple>,
}

fn batch_in<'a>(held: &'a Held<'_>) -> PyResult<BatchIn<'a>> {
    let t = &held.item;
    let lat = t.get_item(4)?;
    Ok(BatchIn {
        region: held.region.as_bytes(),
        count: t.get_item(1)?.extract()?,
        base_offset: t.get_item(2)?.extract()?,
        base_timestamp: t.get_item(3)?.extract()?,
        log_append_time: if lat.is_none() { None } else { Some(lat.extract()?) },
        timestamp_type: t.get_item(5)?.extract()?,
        producer_id: t.get_item(6)?.extract()?,
        producer_epoch: t.get_item(7)?.extract()?,
        base_sequence: t.get_item(8)?.extract()?,
        codec: held.codec.to_str()?,
        is_transactional: t.get_item(10)?.extract()?,
        is_control: t.get_item(11)?.extract()?,
        position: t.get_item(12)?.extract()?,
        source: t.get_item(13)?.extract()?,
    })
}

fn bitmap<'py>(py: Python<'py>, bits: &Bits) -> (Option<Bound<'py, PyBytes>>, usize) {
    // Arrow takes a missing bitmap for "no nulls": the reference's pa.array leaves it out too.
    if bits.zeros == 0 { (None, 0) } else { (Some(PyBytes::new(py, &bits.bytes)), bits.zeros) }
}

fn var_column<'py>(py: Python<'py>, c: &VarColumn) -> PyResult<Bound<'py, PyTuple>> {
    let (validity, nulls) = bitmap(py, &c.validity);
    (validity, nulls, PyBytes::new(py, &c.offsets), PyBytes::new(py, &c.data)).into_pyobject(py)
}

fn fixed<'py>(py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyTuple>> {
    (py.None(), 0usize, PyBytes::new(py, data)).into_pyobject(py)
}

fn booleans<'py>(py: Python<'py>, bits: &Bits) -> PyResult<Bound<'py, PyTuple>> {
    (py.None(), 0usize, PyBytes::new(py, &bits.bytes)).into_pyobject(py)
}

/// `arrow_record_columns(batches, sources, filter, plain) -> (rows, columns) | (None, why)`.
///
/// `batches`: tuples `(region bytes, count, base_offset, base_timestamp, log_append_time |
/// None, timestamp_type, producer_id, producer_epoch, base_sequence, codec str,
/// is_transactional, is_control, position, source index)`; `sources`: `(topic, partition,
/// segment)` tuples; `filter`: `(offset_lo, offset_hi, time_lo, time_hi, key, value_contains,
/// [(header key bytes, value bytes | None)])` with None for "any"; `plain`: no predicate at
/// all. `columns` has one tuple per field of `RECORD_FIELDS`: `(validity | None, null count,
/// data)` for fixed-width and boolean columns, `(validity | None, null count, offsets, data)`
/// for strings and binaries, and for `headers` `(list offsets, key column, value column)`.
#[pyfunction]
pub fn arrow_record_columns<'py>(
    py: Python<'py>,
    batches: &Bound<'py, PyList>,
    sources: &Bound<'py, PyList>,
    filter: &Bound<'py, PyTuple>,
    plain: bool,
) -> PyResult<Bound<'py, PyTuple>> {
    guarded(None, || {
        let filter = filter_from(filter)?;
        let mut held_sources = Vec::with_capacity(sources.len());
        for s in sources.iter() {
            let s = s.cast_into::<PyTuple>()?;
            let (topic, segment) = (s.get_item(0)?.cast_into::<PyString>()?, s.get_item(2)?.cast_into::<PyString>()?);
            held_sources.push((topic, s.get_item(1)?.extract::<i32>()?, segment));
        }
        let mut source_views = Vec::with_capacity(held_sources.len());
        for (topic, partition, segment) in &held_sources {
            source_views.push(Source { topic: topic.to_str()?, partition: *partition, segment: segment.to_str()? });
        }
        let mut held = Vec::with_capacity(batches.len());
        for item in batches.iter() {
            let item = item.cast_into::<PyTuple>()?;
            if item.len() != BATCH_ITEMS {
                return Err(PyValueError::new_err(format!("a batch: expected {BATCH_ITEMS} items")));
            }
            let region = item.get_item(0)?.cast_into::<PyBytes>()?;
            let codec = item.get_item(9)?.cast_into::<PyString>()?;
            held.push(Held { region, codec, item });
        }
        let mut views = Vec::with_capacity(held.len());
        let mut total = 0usize;
        for h in &held {
            let b = batch_in(h)?;
            total = total.saturating_add(b.region.len());
            views.push(b);
        }
        let built = if total >= DETACH_THRESHOLD {
            py.detach(|| arrow_columns::build(&views, &source_views, &filter, plain))
        } else {
            arrow_columns::build(&views, &source_views, &filter, plain)
        };
        let c = match built {
            Built::Unusual(why) => return (py.None(), why).into_pyobject(py),
            Built::Columns(c) => c,
        };
        let (ts_validity, ts_nulls) = bitmap(py, &c.timestamp_valid);
        let headers = (PyBytes::new(py, &c.header_offsets), var_column(py, &c.header_keys)?,
                       var_column(py, &c.header_values)?);
        let columns: Vec<Bound<'py, PyAny>> = vec![
            var_column(py, &c.topic)?.into_any(),
            fixed(py, &c.partition)?.into_any(),
            fixed(py, &c.offset)?.into_any(),
            (ts_validity, ts_nulls, PyBytes::new(py, &c.timestamp)).into_pyobject(py)?.into_any(),
            fixed(py, &c.timestamp_type)?.into_any(),
            var_column(py, &c.key)?.into_any(),
            var_column(py, &c.value)?.into_any(),
            headers.into_pyobject(py)?.into_any(),
            fixed(py, &c.base_offset)?.into_any(),
            fixed(py, &c.producer_id)?.into_any(),
            fixed(py, &c.producer_epoch)?.into_any(),
            fixed(py, &c.base_sequence)?.into_any(),
            var_column(py, &c.codec)?.into_any(),
            booleans(py, &c.is_transactional)?.into_any(),
            booleans(py, &c.is_control)?.into_any(),
            var_column(py, &c.segment)?.into_any(),
            fixed(py, &c.position)?.into_any(),
        ];
        (c.rows, PyTuple::new(py, columns)?).into_pyobject(py)
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(arrow_record_columns, m)?)
}
