//! Scan statistics over a segment's bytes: the twin of engine/inspect/scan_stats.py's
//! per-batch loop (`_batch_stats`, `_v2_record_stats`, `_add_records`, `add_producer`).
//!
//! A [`Stats`] accumulates what the reference's `PartitionStats` holds, for the batches it
//! takes; the caller turns it into a `PartitionStats` and merges it with the one its
//! reference loop filled for the rest (the summary is commutative and associative, so the
//! split changes nothing). It takes a v2 batch when its CRC-32C holds and it is either an
//! uncompressed data batch whose records region frames exactly (`records::frame_records`'s
//! steps, [`frame_heads`]),
//! or a control batch outside a range scan. It hands back, untouched:
//!
//! * `Verdict::Decompress`: a compressed data batch: the caller decompresses it (bounded,
//!   in Python) and hands the records region to [`Stats::add_region`];
//! * `Verdict::Reference`: anything else (a CRC failure, a legacy entry, a region that does
//!   not frame, a control batch in a range scan): the reference loop counts it and writes
//!   the problem it reports.
//!
//! A batch is all or nothing: every check runs before anything is counted. Offsets and
//! timestamps are `i128` (a base plus a delta may leave int64, as Python ints do); the
//! HyperLogLog hash is the reference's: zlib's CRC-32 of the key (of a producer id's 8
//! big-endian bytes), spread by MurmurHash3's 32-bit finalizer.

use std::collections::BTreeSet;

use crate::records::{self, Head};
use crate::walk::{self, Header, V2Header, RECORD_BATCH_OVERHEAD};

pub const HLL_P: u32 = 12;
pub const HLL_M: usize = 1 << HLL_P;
const HLL_SHIFT: u32 = 32 - HLL_P;
const HLL_MASK: u32 = (1 << HLL_SHIFT) - 1;
pub const SIZE_BUCKETS: usize = 32;
pub const MAX_PRODUCERS_LISTED: usize = 1024;
const NO_TIMESTAMP: i128 = -1;

const COMPRESSION_CODEC_MASK: i16 = 0x07;
const TIMESTAMP_TYPE_MASK: i16 = 0x08;
const TRANSACTIONAL_FLAG_MASK: i16 = 0x10;
const CONTROL_FLAG_MASK: i16 = 0x20;

/// The offset and time ranges of a `ScanFilter` (half-open, None unbounded).
#[derive(Clone, Copy, Debug, Default)]
pub struct Ranges {
    pub offset_lo: Option<i128>,
    pub offset_hi: Option<i128>,
    pub time_lo: Option<i128>,
    pub time_hi: Option<i128>,
}

impl Ranges {
    /// `has_offset_range or has_time_range`: the reference's `check_range`.
    pub fn any(&self) -> bool {
        self.offset_lo.is_some() || self.offset_hi.is_some() || self.time_lo.is_some() || self.time_hi.is_some()
    }

    /// `ScanFilter.wants_offsets`.
    pub fn wants_offsets(&self, first: i128, last: i128) -> bool {
        if self.offset_lo.is_some_and(|lo| last < lo) {
            return false;
        }
        !self.offset_hi.is_some_and(|hi| first >= hi)
    }

    /// `ScanFilter.matches(offset, timestamp, None, None, ())` (no record predicate).
    pub fn matches(&self, offset: i128, timestamp: i128) -> bool {
        !(self.offset_lo.is_some_and(|lo| offset < lo)
            || self.offset_hi.is_some_and(|hi| offset >= hi)
            || self.time_lo.is_some_and(|lo| timestamp < lo)
            || self.time_hi.is_some_and(|hi| timestamp >= hi))
    }
}

/// A v2 batch header from its 61 bytes (walk.rs keeps its own reader private).
pub(crate) fn v2_header(b: &[u8; RECORD_BATCH_OVERHEAD as usize]) -> V2Header {
    let i64_at = |at: usize| i64::from_be_bytes(b[at..at + 8].try_into().unwrap_or([0; 8]));
    let i32_at = |at: usize| i32::from_be_bytes(b[at..at + 4].try_into().unwrap_or([0; 4]));
    let i16_at = |at: usize| i16::from_be_bytes(b[at..at + 2].try_into().unwrap_or([0; 2]));
    V2Header {
        base_offset: i64_at(0),
        batch_length: i32_at(8),
        partition_leader_epoch: i32_at(12),
        magic: b[16] as i8,
        crc: i32_at(17) as u32,
        attributes: i16_at(21),
        last_offset_delta: i32_at(23),
        base_timestamp: i64_at(27),
        max_timestamp: i64_at(35),
        producer_id: i64_at(43),
        producer_epoch: i16_at(51),
        base_sequence: i32_at(53),
        records_count: i32_at(57),
    }
}

/// What became of one entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Counted, or left out by the ranges (as the reference leaves it out).
    Done,
    /// A compressed data batch: decompress it and call [`Stats::add_region`].
    Decompress,
    /// For the reference loop.
    Reference,
}

/// MurmurHash3's 32-bit finalizer, then the register update (the reference's `_hll_add_all`).
#[inline]
pub fn hll_add(registers: &mut [u8], crc: u32) {
    let mut h = crc;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85EB_CA6B);
    h ^= h >> 13;
    h = h.wrapping_mul(0xC2B2_AE35);
    h ^= h >> 16;
    let bit_length = 32 - (h & HLL_MASK).leading_zeros();
    let rank = (HLL_SHIFT + 1 - bit_length) as u8;
    let idx = (h >> HLL_SHIFT) as usize;
    if registers[idx] < rank {
        registers[idx] = rank;
    }
}

fn min_opt<T: Ord + Copy>(a: Option<T>, b: T) -> Option<T> {
    Some(a.map_or(b, |a| a.min(b)))
}

fn max_opt<T: Ord + Copy>(a: Option<T>, b: T) -> Option<T> {
    Some(a.map_or(b, |a| a.max(b)))
}

/// The fields of the reference's `PartitionStats` that the native loop fills (it never
/// counts corrupt batches nor writes problems: those batches go to the reference loop).
#[derive(Clone, Debug)]
pub struct Stats {
    pub ranges: Ranges,
    pub records: i64,
    pub batches: i64,
    pub bytes: i64,
    pub first_offset: Option<i128>,
    pub last_offset: Option<i128>,
    pub min_timestamp: Option<i128>,
    pub max_timestamp: Option<i128>,
    /// Batches by compression codec (attributes & 7); every native batch is magic 2.
    pub codecs: [i64; 8],
    pub null_keys: i64,
    pub key_registers: Vec<u8>,
    pub size_histogram: [i64; SIZE_BUCKETS],
    pub min_record_size: Option<i64>,
    pub max_record_size: Option<i64>,
    pub total_record_size: i64,
    pub transactional_batches: i64,
    pub control_batches: i64,
    pub control_records: i64,
    /// The smallest `MAX_PRODUCERS_LISTED` distinct producer ids.
    pub producer_ids: BTreeSet<i64>,
    pub producer_registers: Vec<u8>,
    /// Scratch: the heads of the region being counted (reused, batch after batch).
    heads: Vec<Head>,
}

/// One region's records, summed before anything is committed to [`Stats`].
struct RegionSums {
    kept: i64,
    total_size: i64,
    min_size: Option<i64>,
    max_size: Option<i64>,
    min_ts: Option<i128>,
    max_ts: Option<i128>,
    null_keys: i64,
}

impl Stats {
    pub fn new(ranges: Ranges) -> Stats {
        Stats {
            ranges,
            records: 0,
            batches: 0,
            bytes: 0,
            first_offset: None,
            last_offset: None,
            min_timestamp: None,
            max_timestamp: None,
            codecs: [0; 8],
            null_keys: 0,
            key_registers: vec![0; HLL_M],
            size_histogram: [0; SIZE_BUCKETS],
            min_record_size: None,
            max_record_size: None,
            total_record_size: 0,
            transactional_batches: 0,
            control_batches: 0,
            control_records: 0,
            producer_ids: BTreeSet::new(),
            producer_registers: vec![0; HLL_M],
            heads: Vec::new(),
        }
    }

    /// The reference's `add_producer`: the sketch always, the list when among the smallest.
    fn add_producer(&mut self, pid: i64) {
        hll_add(&mut self.producer_registers, crc32fast::hash(&pid.to_be_bytes()));
        self.producer_ids.insert(pid);
        if self.producer_ids.len() > MAX_PRODUCERS_LISTED {
            self.producer_ids.pop_last();
        }
    }

    /// One entry of a walk (`entry` is its bytes, `crc_ok` whether its checksum holds).
    pub fn entry(&mut self, entry: &[u8], header: &Header, crc_ok: bool) -> Verdict {
        match header {
            Header::V2(h) => self.v2_batch(entry, h, crc_ok),
            Header::Legacy(_) => Verdict::Reference,
        }
    }

    fn v2_batch(&mut self, entry: &[u8], h: &V2Header, crc_ok: bool) -> Verdict {
        let check = self.ranges.any();
        let first = i128::from(h.base_offset);
        if check && !self.ranges.wants_offsets(first, first + i128::from(h.last_offset_delta)) {
            return Verdict::Done;
        }
        if !crc_ok || entry.len() < RECORD_BATCH_OVERHEAD as usize {
            return Verdict::Reference;
        }
        if h.attributes & CONTROL_FLAG_MASK != 0 {
            if check {
                return Verdict::Reference; // the reference decodes them (tiny, rare)
            }
            let kept = i64::from(h.records_count);
            self.control_batches += 1;
            self.control_records += kept;
            self.records += kept;
            self.batch_facts(entry.len(), h);
            return Verdict::Done;
        }
        if h.attributes & COMPRESSION_CODEC_MASK != 0 {
            return Verdict::Decompress;
        }
        self.data_region(&entry[RECORD_BATCH_OVERHEAD as usize..], entry.len(), h)
    }

    /// A compressed data batch's records region, decompressed by the caller: `head` is
    /// the batch's 61-byte header and `size` its length (a batch whose CRC the walk
    /// checked and whose offsets the ranges want: the caller only hands those over).
    pub fn add_region(&mut self, head: &[u8; RECORD_BATCH_OVERHEAD as usize], size: usize, region: &[u8]) -> Verdict {
        let h = v2_header(head);
        if h.magic != 2 || h.attributes & CONTROL_FLAG_MASK != 0 || size < RECORD_BATCH_OVERHEAD as usize {
            return Verdict::Reference;
        }
        self.data_region(region, size, &h)
    }

    /// A data batch's records: counted, and the batch with them, when the region frames
    /// exactly `records_count` records; else nothing is counted.
    fn data_region(&mut self, region: &[u8], size: usize, h: &V2Header) -> Verdict {
        let Some(sums) = self.region_sums(region, h) else { return Verdict::Reference };
        if self.ranges.any() && sums.kept == 0 {
            return Verdict::Done; // no record of this batch is in range
        }
        self.records += sums.kept;
        self.total_record_size += sums.total_size;
        self.null_keys += sums.null_keys;
        if let Some(s) = sums.min_size {
            self.min_record_size = min_opt(self.min_record_size, s);
        }
        if let Some(s) = sums.max_size {
            self.max_record_size = max_opt(self.max_record_size, s);
        }
        if let Some(t) = sums.min_ts {
            self.min_timestamp = min_opt(self.min_timestamp, t);
        }
        if let Some(t) = sums.max_ts {
            self.max_timestamp = max_opt(self.max_timestamp, t);
        }
        self.batch_facts(size, h);
        Verdict::Done
    }

    /// The records of a region: sums in the result, histogram and key sketch updated
    /// (only once the region framed: nothing is touched when it does not).
    fn region_sums(&mut self, region: &[u8], h: &V2Header) -> Option<RegionSums> {
        // A record's size is at most the region's: below 2^31 it fits the 32 buckets.
        if region.len() >= 1 << 31 {
            return None;
        }
        let mut heads = std::mem::take(&mut self.heads);
        let framed = records::frame_records_into(region, i64::from(h.records_count), &mut heads);
        let sums = framed.then(|| self.count_heads(region, &heads, h));
        self.heads = heads;
        sums
    }

    fn count_heads(&mut self, region: &[u8], heads: &[Head], h: &V2Header) -> RegionSums {
        let log_append = (h.attributes & TIMESTAMP_TYPE_MASK != 0).then_some(i128::from(h.max_timestamp));
        let (base_offset, base_ts) = (i128::from(h.base_offset), i128::from(h.base_timestamp));
        let check = self.ranges.any();
        let mut sums = RegionSums {
            kept: 0, total_size: 0, min_size: None, max_size: None, min_ts: None, max_ts: None, null_keys: 0,
        };
        for head in heads {
            let ts = log_append.unwrap_or(base_ts + i128::from(head.timestamp_delta));
            if check && !self.ranges.matches(base_offset + i128::from(head.offset_delta), ts) {
                continue;
            }
            sums.kept += 1;
            let size = head.size;
            sums.total_size += size;
            sums.min_size = min_opt(sums.min_size, size);
            sums.max_size = max_opt(sums.max_size, size);
            // bit_length of a size below 2^31 (sizes are at least 1).
            let bucket = (64 - size.leading_zeros()) as usize;
            self.size_histogram[bucket] += 1;
            if ts != NO_TIMESTAMP {
                sums.min_ts = min_opt(sums.min_ts, ts);
                sums.max_ts = max_opt(sums.max_ts, ts);
            }
            match head.key {
                Some((a, b)) => hll_add(&mut self.key_registers, crc32fast::hash(&region[a..b])),
                None => sums.null_keys += 1,
            }
        }
        sums
    }

    /// The batch-level figures of a counted v2 batch (`size` its bytes).
    fn batch_facts(&mut self, size: usize, h: &V2Header) {
        self.batches += 1;
        self.bytes += size as i64;
        self.codecs[(h.attributes & COMPRESSION_CODEC_MASK) as usize] += 1;
        let first = i128::from(h.base_offset);
        self.first_offset = min_opt(self.first_offset, first);
        self.last_offset = max_opt(self.last_offset, first + i128::from(h.last_offset_delta));
        if h.attributes & TRANSACTIONAL_FLAG_MASK != 0 {
            self.transactional_batches += 1;
        }
        if h.producer_id >= 0 {
            self.add_producer(h.producer_id);
        }
    }
}

/// One declined entry: `buf[position..stop]` and what the caller does with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Declined {
    pub position: usize,
    pub stop: usize,
    pub verdict: Verdict,
}

/// What one chunk gave: the walk's outcome (trailing bytes, fault) with the entries the
/// native loop declined, and where the last whole entry ends (a buffer index).
pub struct ChunkScan {
    pub declined: Vec<Declined>,
    pub valid_end: i64,
    pub trailing: Option<walk::Trailing>,
    pub fault: Option<crate::fault::Fault>,
}

/// Walk `buf` (walk.rs, checksums on) and count every entry `stats` takes.
pub fn scan_chunk(stats: &mut Stats, buf: &[u8], start: i64, end: i64, base_position: i64) -> ChunkScan {
    let walked = walk::walk(buf, walk::WalkSpec {
        start,
        end,
        base_position,
        max_batch_size: None,
        verify_crc: true,
        limit: usize::MAX,
    });
    let mut declined = Vec::new();
    let mut valid_end = start;
    for e in &walked.entries {
        let verdict = stats.entry(&buf[e.position..e.stop], &e.header, e.crc_ok == Some(true));
        if verdict != Verdict::Done {
            declined.push(Declined { position: e.position, stop: e.stop, verdict });
        }
        valid_end = e.stop as i64;
    }
    ChunkScan { declined, valid_end, trailing: walked.trailing, fault: walked.fault }
}
