//! Python bindings of the recovery walk (native/src/recovery.rs): `RecoveryWalk`, driven by
//! engine/storage/recovery_walk.py one chunk of a segment at a time.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};

use crate::recovery::{Config, State, Stop, Walker};
use crate::{guarded, ByteView, DETACH_THRESHOLD};

/// See native/src/recovery.rs and engine/storage/recovery_walk.py.
#[pyclass(module = "plog._native", name = "RecoveryWalk")]
pub struct RecoveryWalk {
    inner: Walker,
}

#[pymethods]
impl RecoveryWalk {
    #[new]
    #[pyo3(signature = (base_offset, interval, collect, producers, epochs))]
    fn new(base_offset: i64, interval: i64, collect: bool, producers: bool, epochs: bool) -> RecoveryWalk {
        let cfg = Config { base: base_offset, interval, collect, producers, epochs };
        let state = State { max_ts: -1, max_ts_offset: base_offset, off_last: base_offset, time_last_ts: -1,
                            time_last_offset: base_offset, ..State::default() };
        RecoveryWalk { inner: Walker::new(cfg, state) }
    }

    /// Set the loop state (after the reference handled an entry, or at the start).
    #[pyo3(signature = (valid, last_index_entry, max_ts, max_ts_offset, count, next_offset, off_entries, off_max,
                        off_last, time_entries, time_max, time_last_ts, time_last_offset, latest_epoch))]
    #[allow(clippy::too_many_arguments)]
    fn resume(&mut self, valid: i64, last_index_entry: i64, max_ts: i64, max_ts_offset: i64, count: i64,
              next_offset: Option<i64>, off_entries: i64, off_max: i64, off_last: i64, time_entries: i64,
              time_max: i64, time_last_ts: i64, time_last_offset: i64, latest_epoch: Option<i64>) -> PyResult<()> {
        if valid < 0 || off_entries < 0 || time_entries < 0 {
            return Err(PyValueError::new_err("positions and entry counts must not be negative"));
        }
        let map_end = self.inner.state.map_end;
        self.inner.state = State { valid, last_index_entry, max_ts, max_ts_offset, count, next_offset, off_entries,
                                   off_max, off_last, time_entries, time_max, time_last_ts, time_last_offset,
                                   latest_epoch, map_end };
        Ok(())
    }

    /// Stop gathering (index bytes, producer runs, leader epochs) from here on: the plan's
    /// scan, once a batch only recovery would hand to the reference (a control batch...)
    /// means its walk cannot be kept, goes on natively with the scan's own checks only.
    fn stop_gathering(&mut self) {
        self.inner.cfg.collect = false;
        self.inner.cfg.producers = false;
        self.inner.cfg.epochs = false;
    }

    /// The producer map's `(epoch, open transaction?)` for one producer id.
    fn set_producer(&mut self, producer_id: i64, epoch: i64, txn_open: bool) {
        self.inner.set_producer(producer_id, epoch, txn_open);
    }

    /// Walk `buf[start:]`, whose first byte is at file position `base_position + start`
    /// (the state's valid bytes). Returns `(at, status, declared)`: status 0, every byte
    /// walked (`at` is the buffer's length); 1, the bytes from `at` hold no whole entry
    /// (`declared`: the size a header announced, or None); 2, the entry at `at` is the
    /// reference's to handle.
    fn walk<'py>(mut slf: PyRefMut<'py, Self>, py: Python<'py>, buf: &Bound<'py, PyAny>, start: usize,
                 base_position: i64) -> PyResult<(usize, u8, Option<i64>)> {
        let view = ByteView::new(buf)?;
        let len = view.bytes().len();
        if start > len {
            return Err(PyValueError::new_err("start is past the end of the buffer"));
        }
        let valid = slf.inner.state.valid;
        if base_position.checked_add(len as i64).is_none() || base_position + start as i64 != valid {
            return Err(PyValueError::new_err("the walk must go on where it stopped (base_position + start != valid)"));
        }
        let walker = &mut slf.inner;
        guarded(Some(valid), || {
            let bytes = view.bytes();
            let stop = if len - start >= DETACH_THRESHOLD && view.readonly() {
                py.detach(|| walker.walk(bytes, start, base_position))
            } else {
                walker.walk(bytes, start, base_position)
            };
            Ok(match stop {
                Stop::End => (len, 0, None),
                Stop::Partial { at, declared } => (at, 1, declared),
                Stop::Bail { at } => (at, 2, None),
            })
        })
    }

    /// What was gathered since the last call: `(offset_entries, time_entries, assigns, runs,
    /// map_end, state)`. The entries are packed as the index files hold them; `assigns` are
    /// `(epoch, start offset)` in order; `runs` are `(producer_id, epoch, batches,
    /// last_timestamp, started)` with `batches` as `(last_seq, last_offset, offset_delta,
    /// timestamp)` tuples and `started` the first offset of the transaction opened, or None;
    /// `map_end` is the map end offset after the last v2 batch, or None; `state` is the loop
    /// state in `resume`'s order.
    fn take<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let (offsets, times, assigns, runs, map_end) = self.inner.take();
        let runs_out = PyList::empty(py);
        for run in &runs {
            let batches: Vec<(i64, i64, i64, i64)> = run.batches.iter().map(|b| (b[0], b[1], b[2], b[3])).collect();
            runs_out.append((run.producer_id, run.epoch, batches, run.last_timestamp, run.started))?;
        }
        let s = &self.inner.state;
        let state = PyTuple::new(py, [
            s.valid.into_pyobject(py)?.into_any(), s.last_index_entry.into_pyobject(py)?.into_any(),
            s.max_ts.into_pyobject(py)?.into_any(), s.max_ts_offset.into_pyobject(py)?.into_any(),
            s.count.into_pyobject(py)?.into_any(), s.next_offset.into_pyobject(py)?.into_any(),
            s.off_entries.into_pyobject(py)?.into_any(), s.off_max.into_pyobject(py)?.into_any(),
            s.off_last.into_pyobject(py)?.into_any(), s.time_entries.into_pyobject(py)?.into_any(),
            s.time_max.into_pyobject(py)?.into_any(), s.time_last_ts.into_pyobject(py)?.into_any(),
            s.time_last_offset.into_pyobject(py)?.into_any(), s.latest_epoch.into_pyobject(py)?.into_any(),
        ])?;
        (PyBytes::new(py, &offsets), PyBytes::new(py, &times), assigns, runs_out, map_end, state).into_pyobject(py)
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<RecoveryWalk>()
}
