//! The write side's batch checks (engine/storage/append_fast.py): which producer batches a
//! leader may append on the fast path, and what a follower's fetched bytes hold.
//!
//! Both answer "plain, and here are the numbers the append needs" or "not plain": the
//! Python side hands anything that is not plain to the reference loop (`Log.append_as_leader`,
//! `Log.append_as_follower`), which raises the typed error or handles the unusual batch. So
//! these checks must be at least as strict as the reference's: a batch they call plain is
//! one the reference appends without raising, with these very numbers.

use crate::append_follower::{index_batch, IndexState};
use crate::crc::crc32c;
use crate::records::decode_records;

/// v2 batch header size (Kafka's `RECORD_BATCH_OVERHEAD`).
pub const OVERHEAD: usize = 61;
const LOG_OVERHEAD: usize = 12;
const CRC_START: usize = 21;
const COMPRESSION_MASK: i16 = 0x07;
const TRANSACTIONAL: i16 = 0x10;
const CONTROL: i16 = 0x20;

fn be<const N: usize>(b: &[u8], at: usize) -> Option<[u8; N]> {
    b.get(at..at + N)?.try_into().ok()
}

fn i64_at(b: &[u8], at: usize) -> Option<i64> {
    be(b, at).map(i64::from_be_bytes)
}

fn i32_at(b: &[u8], at: usize) -> Option<i32> {
    be(b, at).map(i32::from_be_bytes)
}

fn i16_at(b: &[u8], at: usize) -> Option<i16> {
    be(b, at).map(i16::from_be_bytes)
}

/// The header fields the appends use (a whole v2 batch of at least 61 bytes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Head {
    pub base_offset: i64,
    pub batch_length: i64,
    pub partition_leader_epoch: i64,
    pub magic: u8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i64,
    pub base_sequence: i64,
    pub records_count: i64,
}

pub fn head(b: &[u8]) -> Option<Head> {
    Some(Head {
        base_offset: i64_at(b, 0)?,
        batch_length: i64::from(i32_at(b, 8)?),
        partition_leader_epoch: i64::from(i32_at(b, 12)?),
        magic: *b.get(16)?,
        crc: u32::from_be_bytes(be(b, 17)?),
        attributes: i16_at(b, 21)?,
        last_offset_delta: i64::from(i32_at(b, 23)?),
        max_timestamp: i64_at(b, 35)?,
        producer_id: i64_at(b, 43)?,
        producer_epoch: i64::from(i16_at(b, 51)?),
        base_sequence: i64::from(i32_at(b, 53)?),
        records_count: i64::from(i32_at(b, 57)?),
    })
}

/// What `Log._validate_producer_batch` checks, against these limits.
pub struct Limits {
    pub max_message_bytes: i64,
    pub segment_bytes: i64,
    pub compact: bool,
}

/// A producer batch the fast path appends: `(size, last_offset_delta, max_timestamp,
/// producer_id, producer_epoch, base_sequence, transactional)` (the last 1 or 0).
pub type Plain = (i64, i64, i64, i64, i64, i64, i64);

/// `Some` when `data` is exactly one v2 producer batch that `_validate_producer_batch`
/// accepts (origin "client") and that is not a control batch, whose sequence range does
/// not wrap; `None` for anything else (the reference loop decides).
pub fn producer_batch(data: &[u8], limits: &Limits) -> Option<Plain> {
    if data.len() < OVERHEAD {
        return None;
    }
    let h = head(data)?;
    let size = i64::try_from(data.len()).ok()?;
    if h.magic != 2 || h.batch_length + LOG_OVERHEAD as i64 != size || h.base_offset != 0 {
        return None;
    }
    if size > limits.max_message_bytes || size > limits.segment_bytes {
        return None;
    }
    if h.attributes & CONTROL != 0 {
        return None;
    }
    if h.records_count < 1 || h.last_offset_delta + 1 != h.records_count {
        return None;
    }
    if h.producer_id >= 0 && (h.base_sequence < 0 || h.base_sequence + h.last_offset_delta > i64::from(i32::MAX)) {
        return None;
    }
    if crc32c(&data[CRC_START..]) != h.crc {
        return None;
    }
    if limits.compact {
        // Every record needs a key; only an uncompressed batch's records are read here,
        // with the reference's decoder (a record it refuses is the reference loop's to raise).
        if h.attributes & COMPRESSION_MASK != 0 {
            return None;
        }
        match decode_records(&data[OVERHEAD..], h.records_count) {
            Ok(decoded) if decoded.records.iter().all(|r| r.key.is_some()) => {}
            _ => return None,
        }
    }
    let transactional = i64::from(h.attributes & TRANSACTIONAL != 0);
    Some((size, h.last_offset_delta, h.max_timestamp, h.producer_id, h.producer_epoch, h.base_sequence, transactional))
}

/// One batch of a follower's fetch: `(size, base_offset, last_offset, max_timestamp,
/// partition_leader_epoch, producer_id, producer_epoch, base_sequence, attributes,
/// records_count)`.
pub type Replica = (i64, i64, i64, i64, i64, i64, i64, i64, i64, i64);

/// The batches of `buf` when it is made of whole v2 batches with valid CRCs and offsets
/// increasing from at least `expected` (what `Log.append_as_follower` accepts without
/// raising); `None` for anything else (legacy entries, trailing bytes, a fault...), which
/// the reference handles.
pub fn replica_batches(buf: &[u8], mut expected: i64) -> Option<Vec<Replica>> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while pos < buf.len() {
        let rest = &buf[pos..];
        if rest.len() < OVERHEAD {
            return None;
        }
        let h = head(rest)?;
        let size = h.batch_length.checked_add(LOG_OVERHEAD as i64)?;
        if h.magic != 2 || size < OVERHEAD as i64 || size > rest.len() as i64 {
            return None;
        }
        let n = usize::try_from(size).ok()?;
        if crc32c(&rest[CRC_START..n]) != h.crc || h.base_offset < expected {
            return None;
        }
        let last = h.base_offset.checked_add(h.last_offset_delta)?;
        expected = last.checked_add(1)?;
        out.push((size, h.base_offset, last, h.max_timestamp, h.partition_leader_epoch, h.producer_id,
                  h.producer_epoch, h.base_sequence, i64::from(h.attributes), h.records_count));
        pos += n;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(records: i32, delta: i32) -> Vec<u8> {
        let mut b = vec![0u8; OVERHEAD];
        b[8..12].copy_from_slice(&((OVERHEAD - LOG_OVERHEAD) as i32).to_be_bytes());
        b[16] = 2;
        b[23..27].copy_from_slice(&delta.to_be_bytes());
        b[43..51].copy_from_slice(&(-1i64).to_be_bytes());
        b[57..61].copy_from_slice(&records.to_be_bytes());
        let crc = crc32c(&b[CRC_START..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        b
    }

    #[test]
    fn plain_and_not() {
        let limits = Limits { max_message_bytes: 1 << 20, segment_bytes: 1 << 30, compact: false };
        assert_eq!(producer_batch(&batch(1, 0), &limits), Some((61, 0, 0, -1, 0, 0, 0)));
        assert_eq!(producer_batch(&batch(2, 0), &limits), None);
        let mut bad = batch(1, 0);
        bad[60] ^= 1;
        assert_eq!(producer_batch(&bad, &limits), None);
        assert_eq!(producer_batch(&bad[..30], &limits), None);
        let mut two = batch(1, 0);
        two.extend(batch(1, 0));
        assert_eq!(producer_batch(&two, &limits), None);
        assert!(replica_batches(&two, 0).is_none()); // both at offset 0
        assert_eq!(replica_batches(&batch(1, 0), 0).map(|v| v.len()), Some(1));
        assert!(replica_batches(&batch(1, 0)[..60], 0).is_none());
    }
}

/// The active segment's state a leader's run of plain batches goes through (append_fast.py's
/// `_Run` fields): the index rule's (`IndexState`, `position` being the segment's size) and
/// the roll rule's.
#[derive(Clone, Debug)]
pub struct RunSegment {
    pub index: IndexState,
    pub t_last_off: i64,
    pub rolling_ts: Option<i64>,
    pub first_rolling: Option<i64>,
    pub now: i64,
    pub created: i64,
    pub jitter: i64,
    pub seg_bytes: i64,
    pub seg_ms: i64,
}

/// The one producer a run's producer batches may come from, as its entry stands:
/// `(producer_id, producer_epoch, last_seq, txn_open, [(first_seq, last_seq)...])`, the
/// pairs being the batches the entry remembers (a batch equal to one is a retry).
pub type Chain = (i64, i64, i64, bool, Vec<(i64, i64)>);

/// `_Run._should_roll` (`Log._maybe_roll`'s rule) for a batch of `size` bytes.
fn should_roll(s: &RunSegment, size: i64, ts: i64, last: i64) -> bool {
    let i = &s.index;
    let waited = match s.rolling_ts {
        Some(r) if r >= 0 => ts - r,
        _ => s.now - s.created,
    };
    i.position > s.seg_bytes - size
        || (i.position > 0 && waited > s.seg_ms - s.jitter)
        || i.off_entries >= i.off_max
        || i.time_entries >= i.time_max - 1
        || !(0..=i64::from(i32::MAX)).contains(&(last - i.base))
}

/// The plain CreateTime batches `plain` (their bytes from `pos` in `data`, one after the
/// other) appended to the run from the log end offset `leo`, as `_Run.append`'s loop does
/// for each: base offset and leader epoch stamped in, the index rule applied. Stops before
/// the first batch that needs a roll, or whose producer is not `chain`'s next batch in
/// sequence outside a transaction (its producer checks are the loop's): returns how many
/// were appended. `chain`'s last sequence follows the batches taken.
#[allow(clippy::too_many_arguments)]
pub fn leader_run(
    data: &mut [u8],
    plain: impl IntoIterator<Item = Plain>,
    mut pos: usize,
    mut leo: i64,
    epoch: i32,
    seg: &mut RunSegment,
    chain: &mut Option<Chain>,
    off_buf: &mut Vec<u8>,
    time_buf: &mut Vec<u8>,
) -> usize {
    let mut done = 0;
    for (size, delta, max_ts, pid, p_epoch, base_seq, transactional) in plain {
        // The chain's last sequence moves only with a batch taken (below).
        let mut next_seq = None;
        if pid >= 0 {
            let Some((c_pid, c_epoch, last_seq, txn_open, retained)) = chain.as_ref() else { break };
            let new_last = base_seq + delta;
            if pid != *c_pid
                || p_epoch != *c_epoch
                || base_seq != *last_seq + 1
                || transactional != 0
                || *txn_open
                || retained.iter().any(|&(first, last)| first == base_seq && last == new_last)
            {
                break;
            }
            next_seq = Some(new_last);
        }
        let last = leo + delta;
        if should_roll(seg, size, max_ts, last) {
            break;
        }
        let (Ok(n), Some(end)) = (usize::try_from(size), pos.checked_add(size as usize)) else { break };
        if end > data.len() || n < OVERHEAD {
            break;
        }
        // `LogSegment.append`'s rule, the follower's too: an entry an index could refuse
        // (the roll rule keeps that from happening) leaves the batch to the Python loop.
        let first_in_segment = seg.index.position == 0;
        let time_entries = seg.index.time_entries;
        if index_batch(&mut seg.index, size, max_ts, last, off_buf, time_buf).is_none() {
            break;
        }
        if first_in_segment {
            seg.rolling_ts = Some(max_ts);
            seg.first_rolling = Some(max_ts);
        }
        if seg.index.time_entries > time_entries {
            seg.t_last_off = seg.index.mts_off;
        }
        data[pos..pos + 8].copy_from_slice(&leo.to_be_bytes());
        data[pos + 12..pos + 16].copy_from_slice(&epoch.to_be_bytes());
        if let (Some(seq), Some(c)) = (next_seq, chain.as_mut()) {
            c.2 = seq;
        }
        leo = last + 1;
        pos = end;
        done += 1;
    }
    done
}

#[cfg(test)]
mod run_tests {
    use super::*;

    fn segment(seg_bytes: i64) -> RunSegment {
        RunSegment {
            index: IndexState {
                base: 0,
                position: 0,
                since: 0,
                interval: 100,
                mts_ts: -1,
                mts_off: -1,
                off_entries: 0,
                off_max: 100,
                off_last: 0,
                time_entries: 0,
                time_max: 100,
                t_ts: -1,
            },
            t_last_off: -1,
            rolling_ts: None,
            first_rolling: None,
            now: 0,
            created: 0,
            jitter: 0,
            seg_bytes,
            seg_ms: i64::MAX,
        }
    }

    #[test]
    fn a_run_stops_before_a_roll_without_moving_the_producer_on() {
        // Three 61-byte batches of producer 7 (one record each, sequences 0, 1, 2); the
        // segment takes two before it must roll.
        let plain: Vec<Plain> = (0..3).map(|i| (61, 0, 10 + i, 7, 0, i, 0)).collect();
        let mut data = vec![0u8; 183];
        let mut seg = segment(130);
        let mut chain = Some((7, 0, -1, false, vec![]));
        let (mut off, mut time) = (Vec::new(), Vec::new());
        let done = leader_run(&mut data, plain, 0, 50, 3, &mut seg, &mut chain, &mut off, &mut time);
        assert_eq!(done, 2);
        assert_eq!(chain.unwrap().2, 1, "the batch left for the roll is not counted");
        assert_eq!(i64::from_be_bytes(data[61..69].try_into().unwrap()), 51);
        assert_eq!(i32::from_be_bytes(data[73..77].try_into().unwrap()), 3);
        assert_eq!(&data[122..130], &[0; 8], "the third batch is not stamped");
        assert_eq!((seg.index.position, seg.first_rolling), (122, Some(10)));
    }

    #[test]
    fn a_retry_or_another_producer_ends_the_run() {
        let mut data = vec![0u8; 122];
        let mut seg = segment(1 << 30);
        let (mut off, mut time) = (Vec::new(), Vec::new());
        let mut chain = Some((7, 0, 4, false, vec![(5, 5)]));
        let retry = vec![(61, 0, 10, 7, 0, 5, 0)];
        assert_eq!(leader_run(&mut data, retry, 0, 0, 0, &mut seg, &mut chain, &mut off, &mut time), 0);
        let other = vec![(61, 0, 10, 8, 0, 0, 0)];
        assert_eq!(leader_run(&mut data, other, 0, 0, 0, &mut seg, &mut chain, &mut off, &mut time), 0);
        assert_eq!(chain.unwrap().2, 4);
    }
}
