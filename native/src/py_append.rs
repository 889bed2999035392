//! Python bindings of append.rs: `append_producer_batches` and `append_replica_batches`,
//! called by engine/storage/append_fast.py.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyList};

use crate::append::{self, Chain, Limits, Plain, Replica, RunSegment};
use crate::append_follower::IndexState;
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

/// What `leader_run` returns: `(appended, offset index entries, time index entries, state,
/// the chain's last sequence)`.
type LeaderRun<'py> = (usize, Bound<'py, PyBytes>, Bound<'py, PyBytes>, Vec<Option<i64>>, Option<i64>);

/// append.rs's `leader_run` for engine/storage/append_fast.py's `_Run.append`: `data` the
/// joined batches (stamped in place from `pos`), `plain[start:]` their numbers, `state` the
/// run's segment fields in `_Run._native_run`'s order (base, size, bytes_since, interval,
/// mts_ts, mts_off, off_entries, off_max, off_last, time_entries, time_max, t_last_ts,
/// t_last_off, rolling_ts, first_rolling, now, created, jitter, seg_bytes, seg_ms; None only
/// for the two rolling fields), handed back updated.
#[pyfunction]
#[pyo3(signature = (data, plain, start, pos, leo, epoch, state, chain))]
#[allow(clippy::too_many_arguments)]
fn leader_run<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyByteArray>,
    plain: &Bound<'py, PyList>,
    start: usize,
    pos: usize,
    leo: i64,
    epoch: i32,
    state: Vec<Option<i64>>,
    chain: Option<Chain>,
) -> PyResult<LeaderRun<'py>> {
    if state.len() != 20 {
        return Err(PyValueError::new_err("20 segment fields"));
    }
    let int = |i: usize| state[i].ok_or_else(|| PyValueError::new_err("a segment field is None"));
    let mut seg = RunSegment {
        index: IndexState {
            base: int(0)?,
            position: int(1)?,
            since: int(2)?,
            interval: int(3)?,
            mts_ts: int(4)?,
            mts_off: int(5)?,
            off_entries: int(6)?,
            off_max: int(7)?,
            off_last: int(8)?,
            time_entries: int(9)?,
            time_max: int(10)?,
            t_ts: int(11)?,
        },
        t_last_off: int(12)?,
        rolling_ts: state[13],
        first_rolling: state[14],
        now: int(15)?,
        created: int(16)?,
        jitter: int(17)?,
        seg_bytes: int(18)?,
        seg_ms: int(19)?,
    };
    let mut chain = chain;
    let (mut off_buf, mut time_buf) = (Vec::new(), Vec::new());
    let done = guarded(None, || {
        // SAFETY: the GIL is held for the whole call and no Python code runs in it, so
        // nothing else can resize or write the bytearray while this slice is in use.
        let bytes = unsafe { data.as_bytes_mut() };
        // `plain[start:]`, read as the loop goes (a run that stops early reads no further).
        let items = (start..plain.len()).map_while(|i| plain.get_item(i).ok()?.extract::<Plain>().ok());
        Ok(append::leader_run(bytes, items, pos, leo, epoch, &mut seg, &mut chain, &mut off_buf, &mut time_buf))
    })?;
    let i = &seg.index;
    let out = vec![
        Some(i.base), Some(i.position), Some(i.since), Some(i.interval), Some(i.mts_ts), Some(i.mts_off),
        Some(i.off_entries), Some(i.off_max), Some(i.off_last), Some(i.time_entries), Some(i.time_max),
        Some(i.t_ts), Some(seg.t_last_off), seg.rolling_ts, seg.first_rolling, Some(seg.now), Some(seg.created),
        Some(seg.jitter), Some(seg.seg_bytes), Some(seg.seg_ms),
    ];
    Ok((done, PyBytes::new(py, &off_buf), PyBytes::new(py, &time_buf), out, chain.map(|c| c.2)))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(leader_run, m)?)?;
    m.add_function(wrap_pyfunction!(append_producer_batches, m)?)?;
    m.add_function(wrap_pyfunction!(append_replica_batches, m)?)
}
