//! Python bindings of the cleaner's native loops (native/src/compact.rs): `CleanerMap`, the
//! offset map with its per-batch loops, `compact_rebuild_v2` and `compact_md5`, driven by
//! engine/maintenance/offset_map.py and batch_filter.py.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use crate::compact::{map_records, md5, rebuild_v2, retained, RebuildSpec, Table};
use crate::{guarded, ByteView, DETACH_THRESHOLD};

/// A region long enough to run with the GIL released (and exported read-only, so no Python
/// code can change it meanwhile: records regions are `bytes`).
fn long_pass(view: &ByteView) -> bool {
    view.bytes().len() >= DETACH_THRESHOLD && view.readonly()
}

fn hash16(h: &[u8]) -> PyResult<[u8; 16]> {
    <[u8; 16]>::try_from(h).map_err(|_| PyValueError::new_err("a key hash is 16 bytes"))
}

/// `retained`'s answer: kept indexes and four counters.
type RetainedTuple<'py> = (Bound<'py, PyList>, u64, u64, u64, u64);

/// Kafka's `SkimpyOffsetMap` table (engine/maintenance/offset_map.py has the reference).
#[pyclass(module = "plog._native", name = "CleanerMap")]
pub struct CleanerMap {
    table: Table,
}

#[pymethods]
impl CleanerMap {
    #[new]
    fn new(memory: usize) -> PyResult<CleanerMap> {
        if memory < 24 {
            return Err(PyValueError::new_err("an offset map needs at least 24 bytes"));
        }
        Ok(CleanerMap { table: Table::new(memory) })
    }

    fn clear(&mut self) {
        self.table.clear();
    }

    #[getter]
    fn slots(&self) -> usize {
        self.table.slots
    }

    #[getter]
    fn entries(&self) -> usize {
        self.table.entries
    }

    #[getter]
    fn latest(&self) -> i64 {
        self.table.latest
    }

    #[setter]
    fn set_latest(&mut self, offset: i64) {
        self.table.latest = offset;
    }

    #[getter]
    fn lookups(&self) -> u64 {
        self.table.lookups
    }

    #[getter]
    fn probes(&self) -> u64 {
        self.table.probes
    }

    /// `put_hash`: False (nothing changed) when every slot is taken.
    fn put_hash(&mut self, h: &[u8], offset: i64) -> PyResult<bool> {
        let h = hash16(h)?;
        guarded(None, || Ok(self.table.put(&h, offset, None)))
    }

    fn get_hash(&mut self, h: &[u8]) -> PyResult<i64> {
        let h = hash16(h)?;
        guarded(None, || Ok(self.table.get(&h, None)))
    }

    /// The map build's loop over one v2 data batch's records region: `(counted, filled)`,
    /// or None where the reference must run (compact.rs `map_records`).
    fn map_records(&mut self, py: Python<'_>, data: &Bound<'_, PyAny>, count: i64, base_offset: i64, start: i64,
                   max_desired: usize) -> PyResult<Option<(u64, bool)>> {
        let view = ByteView::new(data)?;
        let table = &mut self.table;
        guarded(None, || {
            let bytes = view.bytes();
            let mut pass = || map_records(table, bytes, count, base_offset, start, max_desired);
            Ok(if long_pass(&view) { py.detach(pass) } else { pass() })
        })
    }

    /// `retained_indexes` over one v2 data batch's records region: `(keep, tombstones kept,
    /// keyless removed, tombstones removed, tombstones expired)`, or None where the
    /// reference must run (compact.rs `retained`).
    fn retained<'py>(&mut self, py: Python<'py>, data: &Bound<'py, PyAny>, count: i64, base_offset: i64,
                     latest: i64, retain_deletes: bool)
                     -> PyResult<Option<RetainedTuple<'py>>> {
        let view = ByteView::new(data)?;
        let table = &mut self.table;
        guarded(None, || {
            let bytes = view.bytes();
            let mut pass = || retained(table, bytes, count, base_offset, latest, retain_deletes);
            let Some(r) = (if long_pass(&view) { py.detach(pass) } else { pass() }) else {
                return Ok(None);
            };
            let keep = PyList::new(py, &r.keep)?;
            Ok(Some((keep, r.tombstones_kept, r.keyless_removed, r.tombstones_removed, r.tombstones_expired)))
        })
    }
}

/// The MD5 digest of `data` (the map's hash; tests compare it with hashlib).
#[pyfunction]
fn compact_md5<'py>(py: Python<'py>, data: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
    let view = ByteView::new(data)?;
    guarded(None, || Ok(PyBytes::new(py, &md5(view.bytes()))))
}

/// The uncompressed v2 batch of the records `keep` of `data` with the given header fields,
/// as `encode_batch` writes it: `(bytes, max record timestamp, last kept offset delta)`, or None where the
/// reference must run (compact.rs `rebuild_v2`).
#[pyfunction]
#[pyo3(signature = (data, count, keep, base_offset, partition_leader_epoch, attributes, base_timestamp,
                    max_timestamp, producer_id, producer_epoch, base_sequence, last_offset_delta, delete_horizon))]
#[allow(clippy::too_many_arguments)]
fn compact_rebuild_v2<'py>(py: Python<'py>, data: &Bound<'py, PyAny>, count: i64, keep: Vec<u32>, base_offset: i64,
                           partition_leader_epoch: i32, attributes: i16, base_timestamp: i64, max_timestamp: i64,
                           producer_id: i64, producer_epoch: i16, base_sequence: i32, last_offset_delta: i32,
                           delete_horizon: Option<i64>) -> PyResult<Option<(Bound<'py, PyBytes>, i64, i64)>> {
    let view = ByteView::new(data)?;
    guarded(None, || {
        let spec = RebuildSpec { base_offset, partition_leader_epoch, attributes, base_timestamp, max_timestamp,
                                 producer_id, producer_epoch, base_sequence, last_offset_delta, delete_horizon };
        if keep.is_empty() {
            return Ok(None);
        }
        let rebuilt = rebuild_v2(view.bytes(), count, &keep, &spec);
        Ok(rebuilt.map(|(out, max_ts, last)| (PyBytes::new(py, &out), max_ts, last)))
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<CleanerMap>()?;
    m.add_function(wrap_pyfunction!(compact_md5, m)?)?;
    m.add_function(wrap_pyfunction!(compact_rebuild_v2, m)?)?;
    Ok(())
}
