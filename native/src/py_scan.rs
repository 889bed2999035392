//! Python bindings of scan_stats.rs and scan_search.rs: `plog._native.ScanStats`, one
//! accumulator per slice of a scan (engine/inspect/scan_stats.py, `_slice_stats_native`),
//! and `plog._native.ScanSearch`, a search's predicate (engine/inspect/scan.py,
//! `_unit_records_native`).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};

use crate::scan_search::{self, Found, Predicate};
use crate::scan_stats::{self, Ranges, Stats, Verdict};
use crate::walk::RECORD_BATCH_OVERHEAD;
use crate::{guarded, ByteView, DETACH_THRESHOLD};

/// `ScanStats(offset_lo=None, offset_hi=None, time_lo=None, time_hi=None)`: see the module
/// docs of lib.rs and scan_stats.rs.
#[pyclass(module = "plog._native", name = "ScanStats")]
pub struct PyScanStats {
    stats: Stats,
}

fn verdict_code(v: Verdict) -> u8 {
    match v {
        Verdict::Done => 0,
        Verdict::Decompress => 1,
        Verdict::Reference => 2,
    }
}

#[pymethods]
impl PyScanStats {
    #[new]
    #[pyo3(signature = (offset_lo=None, offset_hi=None, time_lo=None, time_hi=None))]
    fn new(offset_lo: Option<i64>, offset_hi: Option<i64>, time_lo: Option<i64>, time_hi: Option<i64>) -> Self {
        let ranges = Ranges {
            offset_lo: offset_lo.map(i128::from),
            offset_hi: offset_hi.map(i128::from),
            time_lo: time_lo.map(i128::from),
            time_hi: time_hi.map(i128::from),
        };
        PyScanStats { stats: Stats::new(ranges) }
    }

    /// Walk `buf[start:end]` (entries contiguous from `start`, file positions
    /// `base_position` + index) and count the entries taken. Returns `(declined,
    /// valid_end, trailing, fault)`: `declined` lists `(position, stop, code)` of the
    /// entries left to the caller (code 1: decompress and call `add_region`, 2: the
    /// reference loop), `valid_end` the index after the last whole entry, `trailing` and
    /// `fault` as `walk_entries` gives them.
    fn scan<'py>(
        &mut self,
        py: Python<'py>,
        buf: &Bound<'py, PyAny>,
        start: i64,
        end: i64,
        base_position: i64,
    ) -> PyResult<Bound<'py, PyTuple>> {
        if start < 0 {
            return Err(PyValueError::new_err("start must not be negative"));
        }
        let view = ByteView::new(buf)?;
        let len = view.bytes().len() as i64;
        if base_position.checked_add(len).is_none() {
            return Err(PyValueError::new_err("base_position + the buffer's length must fit in int64"));
        }
        let stats = &mut self.stats;
        guarded(Some(base_position + start.min(len)), || {
            let bytes = view.bytes();
            let end = end.min(len);
            let span = usize::try_from(end - start).unwrap_or(0);
            let out = if span >= DETACH_THRESHOLD && view.readonly() {
                py.detach(|| scan_stats::scan_chunk(stats, bytes, start, end, base_position))
            } else {
                scan_stats::scan_chunk(stats, bytes, start, end, base_position)
            };
            let declined = PyList::empty(py);
            for d in &out.declined {
                declined.append((d.position, d.stop, verdict_code(d.verdict)))?;
            }
            let trailing = out.trailing.map(|t| (t.position, t.length, t.declared_size));
            let fault = out.fault.as_ref().map(|f| (f.kind.name(), f.reason.as_str(), f.position));
            (declined, out.valid_end, trailing, fault).into_pyobject(py)
        })
    }

    /// Count a compressed data batch from its decompressed records region: `entry` holds
    /// the batch's bytes (its header at least), `region` the records. True when counted
    /// (or left out by the ranges), False when the reference loop must take the batch.
    fn add_region(&mut self, py: Python<'_>, entry: &Bound<'_, PyAny>, region: &Bound<'_, PyBytes>) -> PyResult<bool> {
        let view = ByteView::new(entry)?;
        let stats = &mut self.stats;
        guarded(None, || {
            let bytes = view.bytes();
            let Some(head) = batch_head(bytes) else { return Ok(false) };
            let size = bytes.len();
            let data = region.as_bytes();
            let verdict = if data.len() >= DETACH_THRESHOLD {
                py.detach(|| stats.add_region(&head, size, data))
            } else {
                stats.add_region(&head, size, data)
            };
            Ok(verdict == Verdict::Done)
        })
    }

    /// The figures, for a `PartitionStats`: `(records, batches, bytes, first_offset,
    /// last_offset, min_timestamp, max_timestamp, codecs, null_keys, key_registers,
    /// size_histogram, min_record_size, max_record_size, total_record_size,
    /// transactional_batches, control_batches, control_records, producer_ids,
    /// producer_registers)`; `codecs` lists batches by codec id 0-7, the registers are bytes.
    fn fields<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let s = &self.stats;
        let items: Vec<Bound<'py, PyAny>> = vec![
            s.records.into_pyobject(py)?.into_any(),
            s.batches.into_pyobject(py)?.into_any(),
            s.bytes.into_pyobject(py)?.into_any(),
            s.first_offset.into_pyobject(py)?.into_any(),
            s.last_offset.into_pyobject(py)?.into_any(),
            s.min_timestamp.into_pyobject(py)?.into_any(),
            s.max_timestamp.into_pyobject(py)?.into_any(),
            PyList::new(py, s.codecs)?.into_any(),
            s.null_keys.into_pyobject(py)?.into_any(),
            PyBytes::new(py, &s.key_registers).into_any(),
            PyList::new(py, s.size_histogram)?.into_any(),
            s.min_record_size.into_pyobject(py)?.into_any(),
            s.max_record_size.into_pyobject(py)?.into_any(),
            s.total_record_size.into_pyobject(py)?.into_any(),
            s.transactional_batches.into_pyobject(py)?.into_any(),
            s.control_batches.into_pyobject(py)?.into_any(),
            s.control_records.into_pyobject(py)?.into_any(),
            PyList::new(py, s.producer_ids.iter())?.into_any(),
            PyBytes::new(py, &s.producer_registers).into_any(),
        ];
        PyTuple::new(py, items)
    }
}

/// The header of a batch's bytes, copied (so only the region is read without the GIL).
fn batch_head(entry: &[u8]) -> Option<[u8; RECORD_BATCH_OVERHEAD as usize]> {
    let mut head = [0u8; RECORD_BATCH_OVERHEAD as usize];
    head.copy_from_slice(entry.get(..RECORD_BATCH_OVERHEAD as usize)?);
    Some(head)
}

/// `ScanSearch(offset_lo, offset_hi, time_lo, time_hi, key, value_contains, headers)`:
/// see the module docs of lib.rs and scan_search.rs. `headers` is a list of `(key bytes,
/// value bytes or None)`.
#[pyclass(module = "plog._native", name = "ScanSearch", frozen)]
pub struct PyScanSearch {
    pred: Predicate,
}

/// `(code, indexes)` of a [`Found`]: 0 and the matching indexes, 1 decompress, 2 the
/// reference (indexes None for both).
fn found_code<'py>(py: Python<'py>, found: &Found) -> PyResult<(u8, Option<Bound<'py, PyList>>)> {
    Ok(match found {
        Found::Nothing => (0, Some(PyList::empty(py))),
        Found::Matches(indexes) => (0, Some(PyList::new(py, indexes)?)),
        Found::Decompress => (1, None),
        Found::Reference => (2, None),
    })
}

#[pymethods]
impl PyScanSearch {
    #[new]
    #[pyo3(signature = (offset_lo=None, offset_hi=None, time_lo=None, time_hi=None, key=None, value_contains=None,
                        headers=Vec::new()))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        offset_lo: Option<i64>,
        offset_hi: Option<i64>,
        time_lo: Option<i64>,
        time_hi: Option<i64>,
        key: Option<Vec<u8>>,
        value_contains: Option<Vec<u8>>,
        headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    ) -> Self {
        let ranges = Ranges {
            offset_lo: offset_lo.map(i128::from),
            offset_hi: offset_hi.map(i128::from),
            time_lo: time_lo.map(i128::from),
            time_hi: time_hi.map(i128::from),
        };
        PyScanSearch { pred: Predicate { ranges, key, value_contains, headers } }
    }

    /// Walk `buf[start:end]` as `ScanStats.scan` does; returns `(hits, valid_end,
    /// trailing, fault)` where `hits` lists `(position, stop, code, indexes)` of every
    /// entry with matching records (code 0, their indexes in the batch), to decompress
    /// (code 1) or for the reference loop (code 2), in walk order.
    fn scan<'py>(
        &self,
        py: Python<'py>,
        buf: &Bound<'py, PyAny>,
        start: i64,
        end: i64,
        base_position: i64,
    ) -> PyResult<Bound<'py, PyTuple>> {
        if start < 0 {
            return Err(PyValueError::new_err("start must not be negative"));
        }
        let view = ByteView::new(buf)?;
        let len = view.bytes().len() as i64;
        if base_position.checked_add(len).is_none() {
            return Err(PyValueError::new_err("base_position + the buffer's length must fit in int64"));
        }
        let pred = &self.pred;
        guarded(Some(base_position + start.min(len)), || {
            let bytes = view.bytes();
            let end = end.min(len);
            let span = usize::try_from(end - start).unwrap_or(0);
            let out = if span >= DETACH_THRESHOLD && view.readonly() {
                py.detach(|| scan_search::search_chunk(pred, bytes, start, end, base_position))
            } else {
                scan_search::search_chunk(pred, bytes, start, end, base_position)
            };
            let hits = PyList::empty(py);
            for hit in &out.hits {
                let (code, indexes) = found_code(py, &hit.found)?;
                hits.append((hit.position, hit.stop, code, indexes))?;
            }
            let trailing = out.trailing.map(|t| (t.position, t.length, t.declared_size));
            let fault = out.fault.as_ref().map(|f| (f.kind.name(), f.reason.as_str(), f.position));
            (hits, out.valid_end, trailing, fault).into_pyobject(py)
        })
    }

    /// The matching records of a compressed batch from its decompressed records region
    /// (`entry` holds the batch, whose CRC and ranges the walk checked): `(code,
    /// indexes)` as in `scan`, code 0 or 2.
    fn region<'py>(
        &self,
        py: Python<'py>,
        entry: &Bound<'py, PyAny>,
        region: &Bound<'py, PyBytes>,
    ) -> PyResult<(u8, Option<Bound<'py, PyList>>)> {
        let view = ByteView::new(entry)?;
        let pred = &self.pred;
        guarded(None, || {
            let Some(head) = batch_head(view.bytes()) else { return found_code(py, &Found::Reference) };
            let h = scan_stats::v2_header(&head);
            if h.magic != 2 {
                return found_code(py, &Found::Reference);
            }
            let data = region.as_bytes();
            let found = if data.len() >= DETACH_THRESHOLD {
                py.detach(|| pred.region(data, &h))
            } else {
                pred.region(data, &h)
            };
            found_code(py, &found)
        })
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyScanStats>()?;
    m.add_class::<PyScanSearch>()
}
