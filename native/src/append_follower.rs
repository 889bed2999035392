//! A follower's fetch summed up for `Log.append_as_follower` (engine/storage/append_fast.py):
//! what the append needs of the fetched batches, without a Python object per batch.
//!
//! * [`follower_walk`]: the walk of `append::replica_batches` (whole v2 batches, CRCs,
//!   offsets increasing from the LEO) reduced to the append's numbers: first and last
//!   offsets, max timestamp and its offset, record count, the leader-epoch starts the
//!   epoch cache takes, and each run of one producer's plain data batches with only the
//!   last `retain` batches (all a producer entry keeps).
//! * [`follower_index`]: `LogSegment.append`'s offset- and time-index rule over the same
//!   batches, from a segment's index state: the packed entries, or `None` where an index
//!   could refuse one (the reference then appends and raises as it does).
//!
//! Both answer `None` for anything the reference must decide; neither trusts the other's
//! answer (each bounds-checks the buffer again).

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::append::{head, replica_batches, OVERHEAD};
use crate::{guarded, ByteView, DETACH_THRESHOLD};

const LOG_OVERHEAD: i64 = 12;
const INT_MAX: i64 = i32::MAX as i64;
/// Control or transactional: a batch the reference's producer update takes.
const CONTROL_OR_TXN: i64 = 0x30;

/// `(p_epoch, last_seq, last_offset, last_offset_delta, max_timestamp)`: what
/// `ProducerStateEntry.add_batch` takes for one batch.
pub type Added = (i64, i64, i64, i64, i64);

/// Consecutive plain data batches of one producer (batches without a producer between them
/// do not end a run): `(producer_id, producer_epoch, last batches)`.
pub type Run = (i64, i64, Vec<Added>);

#[derive(Debug, PartialEq, Eq)]
pub struct Walk {
    pub first: i64,
    pub last: i64,
    pub max_timestamp: i64,
    pub offset_of_max_timestamp: i64,
    pub records: i64,
    /// `(epoch, start_offset)` where a batch's partition leader epoch is above every before
    /// it (and above `latest_epoch`): what `LeaderEpochCache.assign` keeps.
    pub epochs: Vec<(i64, i64)>,
    /// `None` when a producer batch is control or transactional (the reference's update).
    pub runs: Option<Vec<Run>>,
}

/// Kafka's `DefaultRecordBatch.incrementSequence` (formats/records.py).
pub(crate) fn increment_sequence(sequence: i64, increment: i64) -> i64 {
    if sequence > INT_MAX - increment {
        increment - (INT_MAX - sequence) - 1
    } else {
        sequence + increment
    }
}

/// The fetch `buf` (appended at `expected`, the LEO) summed up; `None` when
/// `append::replica_batches` declines it or it holds no batch. `latest_epoch` is the
/// epoch cache's latest (-1 for none); `retain` how many batches a producer entry keeps.
pub fn follower_walk(buf: &[u8], expected: i64, latest_epoch: i64, retain: usize) -> Option<Walk> {
    let batches = replica_batches(buf, expected)?;
    let first = batches.first()?;
    let mut walk = Walk {
        first: first.1,
        last: batches.last()?.2,
        max_timestamp: -1,
        offset_of_max_timestamp: first.2,
        records: 0,
        epochs: Vec::new(),
        runs: Some(Vec::new()),
    };
    let mut latest = latest_epoch;
    for &(_size, base, last, max_ts, ple, pid, p_epoch, base_seq, attributes, count) in &batches {
        if max_ts > walk.max_timestamp {
            walk.max_timestamp = max_ts;
            walk.offset_of_max_timestamp = last;
        }
        walk.records += if count == 0 { 1 } else { count };
        if ple >= 0 && ple > latest {
            walk.epochs.push((ple, base));
            latest = ple;
        }
        if pid < 0 {
            continue;
        }
        let Some(runs) = walk.runs.as_mut() else { continue };
        if attributes & CONTROL_OR_TXN != 0 {
            walk.runs = None;
            continue;
        }
        let delta = last - base;
        let last_seq = if base_seq == -1 { -1 } else { increment_sequence(base_seq, delta) };
        match runs.last_mut() {
            Some((run_pid, run_epoch, added)) if *run_pid == pid && *run_epoch == p_epoch => {
                if added.len() >= retain.saturating_mul(2).max(1) {
                    added.drain(..added.len() - retain);
                }
                added.push((p_epoch, last_seq, last, delta, max_ts));
            }
            _ => runs.push((pid, p_epoch, vec![(p_epoch, last_seq, last, delta, max_ts)])),
        }
    }
    if let Some(runs) = walk.runs.as_mut() {
        for (_, _, added) in runs.iter_mut() {
            if added.len() > retain {
                added.drain(..added.len() - retain);
            }
        }
    }
    Some(walk)
}

/// A segment's index state before an append (append_fast.py, `_segment_append`).
#[derive(Clone, Copy, Debug)]
pub struct IndexState {
    pub base: i64,
    pub position: i64,
    pub since: i64,
    pub interval: i64,
    pub mts_ts: i64,
    pub mts_off: i64,
    pub t_ts: i64,
    pub off_entries: i64,
    pub off_max: i64,
    pub off_last: i64,
    pub time_entries: i64,
    pub time_max: i64,
}

/// What the append leaves: `(offset entries, time entries, position, since, mts_ts, mts_off)`.
pub type Indexed = (Vec<u8>, Vec<u8>, i64, i64, i64, i64);

/// `LogSegment.append`'s index rule for one batch of `size` bytes whose last offset is `last`
/// and max timestamp `max_ts`, appended at `s.position`: `s` moved past it and its entries
/// packed onto `off_buf`/`time_buf`; `None`, with nothing changed, where an index could refuse
/// the entry (full, an offset not above the last, a position or relative offset beyond int32).
pub fn index_batch(s: &mut IndexState, size: i64, max_ts: i64, last: i64, off_buf: &mut Vec<u8>,
                   time_buf: &mut Vec<u8>) -> Option<()> {
    let (mts_ts, mts_off) = if max_ts > s.mts_ts { (max_ts, last) } else { (s.mts_ts, s.mts_off) };
    let position = s.position.checked_add(size)?;
    let mut since = s.since.checked_add(size)?;
    let mut entries = None;
    if s.since > s.interval {
        if s.off_entries >= s.off_max || (s.off_entries != 0 && last <= s.off_last) || s.position > INT_MAX
            || s.time_entries >= s.time_max - 1
        {
            return None;
        }
        let relative = i32::try_from(last - s.base).ok()?;
        let time = if mts_ts > s.t_ts { Some(i32::try_from(mts_off - s.base).ok()?) } else { None };
        entries = Some((relative, s.position as i32, time));
        since = size;
    }
    if let Some((relative, at, time)) = entries {
        off_buf.extend_from_slice(&relative.to_be_bytes());
        off_buf.extend_from_slice(&at.to_be_bytes());
        s.off_entries += 1;
        s.off_last = last;
        if let Some(relative_ts) = time {
            time_buf.extend_from_slice(&mts_ts.to_be_bytes());
            time_buf.extend_from_slice(&relative_ts.to_be_bytes());
            s.time_entries += 1;
            s.t_ts = mts_ts;
        }
    }
    (s.mts_ts, s.mts_off, s.position, s.since) = (mts_ts, mts_off, position, since);
    Some(())
}

/// `LogSegment.append`'s index rule ([`index_batch`]) over the batches of `buf` from state
/// `s`; `None` when an index could refuse an entry, or `buf` is not whole v2 batch headers.
pub fn follower_index(buf: &[u8], s: IndexState) -> Option<Indexed> {
    let mut s = s;
    let mut off_buf = Vec::new();
    let mut time_buf = Vec::new();
    let mut pos = 0usize;
    while pos < buf.len() {
        let h = head(buf.get(pos..)?)?;
        let size = h.batch_length.checked_add(LOG_OVERHEAD)?;
        if size < OVERHEAD as i64 {
            return None;
        }
        pos = pos.checked_add(usize::try_from(size).ok()?)?;
        if pos > buf.len() {
            return None;
        }
        let last = h.base_offset.checked_add(h.last_offset_delta)?;
        index_batch(&mut s, size, h.max_timestamp, last, &mut off_buf, &mut time_buf)?;
    }
    Some((off_buf, time_buf, s.position, s.since, s.mts_ts, s.mts_off))
}

// -- Python bindings ------------------------------------------------------------------------------

type WalkTuple = (i64, i64, i64, i64, i64, Vec<(i64, i64)>, Option<Vec<Run>>);

/// `follower_walk(buf, expected, latest_epoch, retain) -> (first, last, max_timestamp,
/// offset_of_max_timestamp, records, epochs, runs) | None`.
#[pyfunction(name = "follower_walk")]
#[pyo3(signature = (buf, expected, latest_epoch, retain))]
fn py_follower_walk(py: Python<'_>, buf: &Bound<'_, PyAny>, expected: i64, latest_epoch: i64, retain: usize)
                    -> PyResult<Option<WalkTuple>> {
    let view = ByteView::new(buf)?;
    guarded(None, || {
        let bytes = view.bytes();
        let run = || follower_walk(bytes, expected, latest_epoch, retain);
        let walk = if bytes.len() >= DETACH_THRESHOLD && view.readonly() { py.detach(run) } else { run() };
        Ok(walk.map(|w| (w.first, w.last, w.max_timestamp, w.offset_of_max_timestamp, w.records, w.epochs, w.runs)))
    })
}

type IndexTuple<'py> = (Bound<'py, PyBytes>, Bound<'py, PyBytes>, i64, i64, i64, i64);

/// `follower_index(buf, base, position, since, interval, mts_ts, mts_off, t_ts,
/// off_entries, off_max, off_last, time_entries, time_max) -> (offset_entries,
/// time_entries, position, since, mts_ts, mts_off) | None`.
#[pyfunction(name = "follower_index")]
#[pyo3(signature = (buf, base, position, since, interval, mts_ts, mts_off, t_ts, off_entries, off_max, off_last,
                    time_entries, time_max))]
#[allow(clippy::too_many_arguments)]
fn py_follower_index<'py>(py: Python<'py>, buf: &Bound<'py, PyAny>, base: i64, position: i64, since: i64,
                          interval: i64, mts_ts: i64, mts_off: i64, t_ts: i64, off_entries: i64, off_max: i64,
                          off_last: i64, time_entries: i64, time_max: i64) -> PyResult<Option<IndexTuple<'py>>> {
    let view = ByteView::new(buf)?;
    let state = IndexState { base, position, since, interval, mts_ts, mts_off, t_ts, off_entries, off_max, off_last,
                             time_entries, time_max };
    let found = guarded(None, || Ok(follower_index(view.bytes(), state)))?;
    Ok(found.map(|(off, time, position, since, mts_ts, mts_off)| {
        (PyBytes::new(py, &off), PyBytes::new(py, &time), position, since, mts_ts, mts_off)
    }))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(py_follower_walk, m)?)?;
    m.add_function(wrap_pyfunction!(py_follower_index, m)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crc::crc32c;

    fn batch(base: i64, delta: i32, ts: i64, ple: i32, pid: i64, seq: i32, attributes: i16) -> Vec<u8> {
        let mut b = vec![0u8; OVERHEAD];
        b[0..8].copy_from_slice(&base.to_be_bytes());
        b[8..12].copy_from_slice(&((OVERHEAD as i32) - 12).to_be_bytes());
        b[12..16].copy_from_slice(&ple.to_be_bytes());
        b[16] = 2;
        b[21..23].copy_from_slice(&attributes.to_be_bytes());
        b[23..27].copy_from_slice(&delta.to_be_bytes());
        b[35..43].copy_from_slice(&ts.to_be_bytes());
        b[43..51].copy_from_slice(&pid.to_be_bytes());
        b[53..57].copy_from_slice(&seq.to_be_bytes());
        b[57..61].copy_from_slice(&(delta + 1).to_be_bytes());
        let crc = crc32c(&b[21..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        b
    }

    #[test]
    fn runs_keep_the_last_batches_of_each_producer() {
        let mut buf = Vec::new();
        for i in 0..10 {
            buf.extend(batch(i * 2, 1, 100 + i, 3, 7, (i * 2) as i32, 0));
        }
        buf.extend(batch(20, 0, 50, 4, -1, -1, 0));
        buf.extend(batch(21, 0, 50, 4, 8, i32::MAX, 0));
        let w = follower_walk(&buf, 0, 3, 5).unwrap();
        assert_eq!((w.first, w.last, w.max_timestamp, w.offset_of_max_timestamp, w.records), (0, 21, 109, 19, 22));
        assert_eq!(w.epochs, vec![(4, 20)]);
        let runs = w.runs.unwrap();
        assert_eq!(runs.len(), 2);
        assert_eq!(runs[0].2.iter().map(|a| a.2).collect::<Vec<_>>(), vec![11, 13, 15, 17, 19]);
        assert_eq!(runs[1].2, vec![(0, i32::MAX as i64, 21, 0, 50)]);
        buf.extend(batch(22, 0, 50, 4, 8, 0, 0x10));
        assert_eq!(follower_walk(&buf, 0, -1, 5).unwrap().runs, None);
        assert_eq!(follower_walk(&buf, 1, -1, 5), None);
        assert_eq!(follower_walk(&[], 0, -1, 5), None);
    }

    #[test]
    fn index_entries_follow_the_interval() {
        let mut buf = Vec::new();
        for i in 0..4 {
            buf.extend(batch(10 + i, 0, 5 + i, 0, -1, -1, 0));
        }
        let s = IndexState { base: 10, position: 0, since: 0, interval: 100, mts_ts: -1, mts_off: -1, t_ts: -1,
                             off_entries: 0, off_max: 10, off_last: -1, time_entries: 0, time_max: 10 };
        let (off, time, position, since, mts_ts, mts_off) = follower_index(&buf, s).unwrap();
        // 61-byte batches, interval 100: an entry before the third batch
        assert_eq!(off, [0, 0, 0, 2, 0, 0, 0, 122]);
        assert_eq!(time.len(), 12);
        assert_eq!((position, since, mts_ts, mts_off), (244, 122, 8, 13));
        assert_eq!(follower_index(&buf, IndexState { off_max: 0, ..s }), None);
        assert_eq!(follower_index(&buf[..100], s), None);
    }
}
