//! The recovery walk: the batch loop of `LogSegment.recover` (engine/storage/segment.py,
//! kafka-format.md §8.5) and of the plan's `kafka_scan` (engine/maintenance/segment_recovery.py)
//! over one chunk of a segment's bytes at a time.
//!
//! For each whole entry (walk.rs: header checks and checksum), in the reference's order:
//!
//! 1. the checksum must hold;
//! 2. its last offset must lie in `base ..= base + 2^31 - 1`;
//! 3. the running max timestamp (and the offset it was first seen at) moves up;
//! 4. more than `interval` bytes after the last indexed position, an offset index entry
//!    `(last offset - base, position)` and, when the max timestamp is new, a time index entry
//!    `(max timestamp, its offset - base)` are added, under the index rules
//!    (offsets strictly increasing, a free slot, the time index's reserved last slot);
//! 5. a v2 batch moves the leader epoch (`assign` when above the latest) and the producer
//!    state: the map end offset, and a producer's epoch, last five batches, last timestamp
//!    and the transaction its first transactional batch opens.
//!
//! Everything unusual is left to the reference, one entry at a time: the walk stops *before*
//! an entry whose checksum fails, a header fault, an offset out of the segment's range, an
//! index append the index would refuse (full, going backwards, a position past 2^31 - 1), a
//! control batch, a producer epoch going backwards (the reference logs it), or a
//! non-transactional batch of a producer with an open transaction (the reference raises).
//! The caller flushes what was gathered (`take`), runs the reference body on that entry,
//! hands the state back (`resume`) and walks on. So the native walk only ever does what
//! the reference would do without an exception or a log line, and the rest is the
//! reference's.
//!
//! Producer updates are kept per producer (first touched first), not per batch: applying a
//! producer's run of data batches at once gives the same entry (its epoch only moves up here,
//! a new epoch clears the kept batches, five are kept, the last timestamp and open
//! transaction are the last batch's) and the map gets producers in the same order.

use std::collections::{HashMap, VecDeque};

use crate::walk::{self, Header, WalkSpec};

/// Offsets of a segment lie within this distance of its base.
pub const INT_MAX: i64 = (1 << 31) - 1;
const TRANSACTIONAL_FLAG: i16 = 0x10;
const CONTROL_FLAG: i16 = 0x20;
const NO_SEQUENCE: i32 = -1;
/// `ProducerStateEntry.NUM_BATCHES_TO_RETAIN`.
const BATCHES_KEPT: usize = 5;

/// What does not change during a walk.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    pub base: i64,
    pub interval: i64,
    /// Keep the index entries' bytes (recovery writes them; the plan only counts).
    pub collect: bool,
    /// Track the producer state (recovery with a producer state manager).
    pub producers: bool,
    /// Track leader epochs (recovery with a leader epoch cache).
    pub epochs: bool,
}

/// The loop's state, the reference's local variables plus what its indexes know.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct State {
    pub valid: i64,
    pub last_index_entry: i64,
    pub max_ts: i64,
    pub max_ts_offset: i64,
    pub count: i64,
    pub next_offset: Option<i64>,
    pub off_entries: i64,
    pub off_max: i64,
    pub off_last: i64,
    pub time_entries: i64,
    pub time_max: i64,
    pub time_last_ts: i64,
    pub time_last_offset: i64,
    pub latest_epoch: Option<i64>,
    /// The map end offset after the last v2 batch (None: no v2 batch walked since `take`).
    pub map_end: Option<i64>,
}

/// One producer's data batches since the last `take`: its final epoch, its last (up to five)
/// batches as `(last_seq, last_offset, offset_delta, timestamp)`, its last timestamp, and the
/// transaction its batches opened (at most one: only the reference closes transactions).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducerRun {
    pub producer_id: i64,
    pub epoch: i64,
    pub batches: VecDeque<[i64; 4]>,
    pub last_timestamp: i64,
    pub started: Option<i64>,
}

/// What a walk gathered: offset index entries, time index entries (packed as the files hold
/// them), leader epochs assigned `(epoch, start offset)`, producer runs, the map end offset.
pub type Gathered = (Vec<u8>, Vec<u8>, Vec<(i64, i64)>, Vec<ProducerRun>, Option<i64>);

/// Where a walk over a buffer stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// Every byte from `start` was walked.
    End,
    /// The bytes from `at` do not hold a whole entry (`declared`: the `12 + size` a header
    /// announced, when 18 bytes or more remained).
    Partial { at: usize, declared: Option<i64> },
    /// The entry at `at` is the reference's to handle.
    Bail { at: usize },
}

/// The walker: configuration, state, and what was gathered since the last `take`.
#[derive(Debug)]
pub struct Walker {
    pub cfg: Config,
    pub state: State,
    pub offset_entries: Vec<u8>,
    pub time_entries: Vec<u8>,
    pub assigns: Vec<(i64, i64)>,
    pub runs: Vec<ProducerRun>,
    run_index: HashMap<i64, usize>,
    /// Every producer's `(epoch, has an open transaction)` as the map holds it.
    known: HashMap<i64, (i64, bool)>,
}

/// Kafka's `DefaultRecordBatch.incrementSequence`.
fn increment_sequence(sequence: i32, increment: i32) -> i64 {
    let (s, i) = (i64::from(sequence), i64::from(increment));
    if s > INT_MAX - i {
        i - (INT_MAX - s) - 1
    } else {
        s + i
    }
}

/// What one entry does, worked out before anything is changed (so a bail changes nothing).
struct Effects {
    last: i64,
    max_ts: i64,
    max_ts_offset: i64,
    index: bool,
    time_append: bool,
}

impl Walker {
    pub fn new(cfg: Config, state: State) -> Walker {
        Walker {
            cfg,
            state,
            offset_entries: Vec::new(),
            time_entries: Vec::new(),
            assigns: Vec::new(),
            runs: Vec::new(),
            run_index: HashMap::new(),
            known: HashMap::new(),
        }
    }

    /// The map's view of one producer (after the reference changed it, or from the start).
    pub fn set_producer(&mut self, producer_id: i64, epoch: i64, txn_open: bool) {
        self.known.insert(producer_id, (epoch, txn_open));
    }

    /// Walk `buf` from `start` (file position `base_position + start`, which must be the
    /// state's valid bytes: the caller checks).
    pub fn walk(&mut self, buf: &[u8], start: usize, base_position: i64) -> Stop {
        let mut pos = start;
        loop {
            if pos >= buf.len() {
                return Stop::End;
            }
            let spec = WalkSpec {
                start: pos as i64,
                end: buf.len() as i64,
                base_position,
                max_batch_size: None,
                verify_crc: true,
                limit: 1,
            };
            let outcome = walk::walk(buf, spec);
            let Some(entry) = outcome.entries.first() else {
                if outcome.fault.is_some() {
                    return Stop::Bail { at: pos };
                }
                return match outcome.trailing {
                    Some(t) => Stop::Partial { at: pos, declared: t.declared_size },
                    None => Stop::End,
                };
            };
            if entry.crc_ok != Some(true) {
                return Stop::Bail { at: pos };
            }
            let size = (entry.stop - entry.position) as i64;
            match self.effects(&entry.header) {
                Some(fx) => self.commit(&entry.header, &fx, size),
                None => return Stop::Bail { at: pos },
            }
            pos = entry.stop;
        }
    }

    /// Steps 2-5's checks; None when the reference must handle the entry.
    fn effects(&self, header: &Header) -> Option<Effects> {
        let s = &self.state;
        let (last, max_ts) = match header {
            Header::V2(h) => (i128::from(h.base_offset) + i128::from(h.last_offset_delta), h.max_timestamp),
            Header::Legacy(h) => (i128::from(h.offset), h.timestamp),
        };
        let base = i128::from(self.cfg.base);
        if last < base || last > base + i128::from(INT_MAX) {
            return None;
        }
        let last = last as i64;
        let (max_ts, max_ts_offset) = if max_ts > s.max_ts { (max_ts, last) } else { (s.max_ts, s.max_ts_offset) };
        let index = s.valid - s.last_index_entry > self.cfg.interval;
        let mut time_append = false;
        if index {
            // OffsetIndex.append's checks, then TimeIndex.maybe_append's, in their order.
            if s.off_entries >= s.off_max || (s.off_entries != 0 && last <= s.off_last) || s.valid > INT_MAX {
                return None;
            }
            if s.time_entries >= s.time_max - 1
                || (s.time_entries != 0 && (max_ts_offset < s.time_last_offset || max_ts < s.time_last_ts))
            {
                return None;
            }
            time_append = max_ts > s.time_last_ts;
            let relative = i128::from(max_ts_offset) - base;
            if time_append && (s.time_entries >= s.time_max || relative < 0 || relative > i128::from(INT_MAX)) {
                return None;
            }
        }
        if let Header::V2(h) = header {
            if self.cfg.producers && h.producer_id >= 0 {
                if h.attributes & CONTROL_FLAG != 0 {
                    return None;
                }
                let (epoch, txn_open) = self.known.get(&h.producer_id).copied().unwrap_or((-1, false));
                if i64::from(h.producer_epoch) < epoch {
                    return None; // the reference logs a warning
                }
                if txn_open && h.attributes & TRANSACTIONAL_FLAG == 0 {
                    return None; // the reference raises InvalidTxnStateError
                }
            }
        }
        Some(Effects { last, max_ts, max_ts_offset, index, time_append })
    }

    fn commit(&mut self, header: &Header, fx: &Effects, size: i64) {
        let base = self.cfg.base;
        let s = &mut self.state;
        s.max_ts = fx.max_ts;
        s.max_ts_offset = fx.max_ts_offset;
        if fx.index {
            if self.cfg.collect {
                // Checked above: 0 <= last - base <= 2^31 - 1 and 0 <= valid <= 2^31 - 1.
                self.offset_entries.extend_from_slice(&((fx.last - base) as i32).to_be_bytes());
                self.offset_entries.extend_from_slice(&(s.valid as i32).to_be_bytes());
            }
            s.off_entries += 1;
            s.off_last = fx.last;
            if fx.time_append {
                if self.cfg.collect {
                    self.time_entries.extend_from_slice(&fx.max_ts.to_be_bytes());
                    self.time_entries.extend_from_slice(&((fx.max_ts_offset - base) as i32).to_be_bytes());
                }
                s.time_entries += 1;
                s.time_last_ts = fx.max_ts;
                s.time_last_offset = fx.max_ts_offset;
            }
            s.last_index_entry = s.valid;
        }
        s.valid += size;
        s.count += 1;
        s.next_offset = Some(fx.last + 1);
        let Header::V2(h) = header else { return };
        if self.cfg.epochs {
            let epoch = i64::from(h.partition_leader_epoch);
            if epoch >= 0 && s.latest_epoch.map_or(true, |latest| epoch > latest) {
                self.assigns.push((epoch, h.base_offset));
                s.latest_epoch = Some(epoch);
            }
        }
        if !self.cfg.producers {
            return;
        }
        s.map_end = Some(fx.last + 1);
        if h.producer_id < 0 {
            return;
        }
        let pid = h.producer_id;
        let (known_epoch, txn_open) = self.known.get(&pid).copied().unwrap_or((-1, false));
        let i = match self.run_index.get(&pid) {
            Some(&i) => i,
            None => {
                self.runs.push(ProducerRun {
                    producer_id: pid,
                    epoch: known_epoch,
                    batches: VecDeque::new(),
                    last_timestamp: 0,
                    started: None,
                });
                self.run_index.insert(pid, self.runs.len() - 1);
                self.runs.len() - 1
            }
        };
        let run = &mut self.runs[i];
        let epoch = i64::from(h.producer_epoch);
        if epoch != run.epoch {
            run.batches.clear();
            run.epoch = epoch;
        }
        let last_seq = if h.base_sequence == NO_SEQUENCE {
            i64::from(NO_SEQUENCE)
        } else {
            increment_sequence(h.base_sequence, h.last_offset_delta)
        };
        if run.batches.len() == BATCHES_KEPT {
            run.batches.pop_front();
        }
        run.batches.push_back([last_seq, fx.last, i64::from(h.last_offset_delta), h.max_timestamp]);
        run.last_timestamp = h.max_timestamp;
        let mut open = txn_open;
        if h.attributes & TRANSACTIONAL_FLAG != 0 && !txn_open {
            run.started = Some(h.base_offset);
            open = true;
        }
        self.known.insert(pid, (epoch, open));
    }

    /// Hand over what was gathered since the last call and start gathering afresh.
    pub fn take(&mut self) -> Gathered {
        self.run_index.clear();
        let map_end = self.state.map_end.take();
        (
            std::mem::take(&mut self.offset_entries),
            std::mem::take(&mut self.time_entries),
            std::mem::take(&mut self.assigns),
            std::mem::take(&mut self.runs),
            map_end,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequences_wrap_as_kafka() {
        assert_eq!(increment_sequence(5, 3), 8);
        assert_eq!(increment_sequence(i32::MAX, 1), 0);
        assert_eq!(increment_sequence(i32::MAX - 1, 3), 1);
    }
}
