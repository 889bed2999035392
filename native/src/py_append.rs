//! Python bindings of append.rs: `append_producer_batches` and `append_replica_batches`,
//! called by engine/storage/append_fast.py.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::append::{self, Limits, Plain, Replica};
use crate::{guarded, ByteView, DETACH_THRESHOLD};

/// `(size, last_offset_delta, max_timestamp, producer_id, producer_epoch, base_sequence,
/// transactional)` of
/// each of `batches[start:]` (one producer batch each) up to the first that is not plain
/// (append.rs, `producer_batch`): the list is shorter than `batches[start:]` exactly when
/// the batch after its last is the reference loop's to append (or refuse).
#[pyfunction]
#[pyo3(signature = (batches, start, max_message_bytes, segment_bytes, compact))]
fn append_producer_batches(py: Python<'_>, batches: &Bound<'_, PyList>, start: usize, max_message_bytes: i64,
                           segment_bytes: i64, compact: bool) -> PyResult<Vec<Plain>> {
    let n = batches.len();
    if start > n {
        return Err(PyValueError::new_err("start is past the end of the list"));
    }
    let mut views = Vec::new();
    let mut total = 0usize;
    let mut readonly = true;
    for i in start..n {
        // An element without the buffer protocol is the reference's to refuse.
        let Ok(view) = ByteView::new(&batches.get_item(i)?) else { break };
        total = total.saturating_add(view.bytes().len());
        readonly &= view.readonly();
        views.push(view);
    }
    let limits = Limits { max_message_bytes, segment_bytes, compact };
    guarded(None, || {
        let slices: Vec<&[u8]> = views.iter().map(|v| v.bytes()).collect();
        let pass = || {
            let mut out = Vec::new();
            for data in &slices {
                match append::producer_batch(data, &limits) {
                    Some(plain) => out.push(plain),
                    None => break,
                }
            }
            out
        };
        // Bytes objects cannot change under us: the CRC pass runs without the GIL.
        Ok(if total >= DETACH_THRESHOLD && readonly { py.detach(pass) } else { pass() })
    })
}

/// The batches of a follower's fetch (append.rs, `replica_batches`), or None when the
/// reference must append them.
#[pyfunction]
#[pyo3(signature = (buf, expected))]
fn append_replica_batches(py: Python<'_>, buf: &Bound<'_, PyAny>, expected: i64) -> PyResult<Option<Vec<Replica>>> {
    let view = ByteView::new(buf)?;
    guarded(None, || {
        let bytes = view.bytes();
        Ok(if bytes.len() >= DETACH_THRESHOLD && view.readonly() {
            py.detach(|| append::replica_batches(bytes, expected))
        } else {
            append::replica_batches(bytes, expected)
        })
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(append_producer_batches, m)?)?;
    m.add_function(wrap_pyfunction!(append_replica_batches, m)?)
}
