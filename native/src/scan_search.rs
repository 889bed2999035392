//! Search predicates over a segment's bytes: the twin of engine/inspect/scan.py's
//! `unit_records` batch loop and `ScanFilter.matches` for the predicates that need no
//! schema: offset and time ranges, key equality, value containment, header presence.
//!
//! For each entry of a walk, [`Predicate::entry`] says which records of it match (their
//! indexes in the batch), or that the batch has none (or is left out by the ranges, as the
//! reference leaves it out), or hands it back: `Found::Decompress` for a compressed batch
//! (the caller decompresses it, bounded, in Python, and calls [`Predicate::region`]),
//! `Found::Reference` for anything else the reference must see (a CRC failure, a legacy
//! entry, records that do not decode: the reference reports the problem). The caller
//! builds its record objects for the matching records only.
//!
//! Records decode with `records::decode_records` (the twin of the decoder
//! `RecordBatch.records` runs), after the same count checks `records` makes.

use crate::records;
use crate::scan_stats::Ranges;
use crate::walk::{self, Header, V2Header, RECORD_BATCH_OVERHEAD};

const COMPRESSION_CODEC_MASK: i16 = 0x07;
const TIMESTAMP_TYPE_MASK: i16 = 0x08;
/// record_batch.py's `MIN_RECORD_SIZE`: a count above `len // 7 + 1` is refused unread.
const MIN_RECORD_SIZE: usize = 7;

/// What a search keeps, besides `where` (which the caller applies to the matches).
#[derive(Clone, Debug, Default)]
pub struct Predicate {
    pub ranges: Ranges,
    pub key: Option<Vec<u8>>,
    pub value_contains: Option<Vec<u8>>,
    /// `(key, value)` pairs that must all be among a record's headers; keys as the UTF-8
    /// (surrogateescape) bytes of the filter's strings, `None` a null value.
    pub headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

/// What became of one entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found {
    /// No record of it is kept (or the ranges leave the whole batch out).
    Nothing,
    /// The indexes of the records kept, ascending (at least one).
    Matches(Vec<u32>),
    /// A compressed batch: decompress it and call [`Predicate::region`].
    Decompress,
    /// For the reference loop.
    Reference,
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    if needle.is_empty() {
        return true;
    }
    let first = needle[0];
    let last_start = match haystack.len().checked_sub(needle.len()) {
        Some(n) => n,
        None => return false,
    };
    (0..=last_start).any(|i| haystack[i] == first && &haystack[i..i + needle.len()] == needle)
}

impl Predicate {
    /// One entry of a walk (`entry` its bytes, `crc_ok` whether its checksum holds).
    pub fn entry(&self, entry: &[u8], header: &Header, crc_ok: bool) -> Found {
        let Header::V2(h) = header else { return Found::Reference };
        let first = i128::from(h.base_offset);
        let r = &self.ranges;
        if (r.offset_lo.is_some() || r.offset_hi.is_some())
            && !r.wants_offsets(first, first + i128::from(h.last_offset_delta))
        {
            return Found::Nothing;
        }
        if r.time_lo.is_some_and(|lo| i128::from(h.max_timestamp) < lo) && h.attributes & TIMESTAMP_TYPE_MASK != 0 {
            return Found::Nothing; // LogAppendTime: every record has the batch's max timestamp
        }
        if !crc_ok || entry.len() < RECORD_BATCH_OVERHEAD as usize {
            return Found::Reference;
        }
        if h.attributes & COMPRESSION_CODEC_MASK != 0 {
            return Found::Decompress;
        }
        self.region(&entry[RECORD_BATCH_OVERHEAD as usize..], h)
    }

    /// The records of a batch's (decompressed) records region that match.
    pub fn region(&self, region: &[u8], h: &V2Header) -> Found {
        let count = h.records_count;
        if count < 0 || count as usize > region.len() / MIN_RECORD_SIZE + 1 {
            return Found::Reference; // the reference raises (and reports) these
        }
        if count == 0 {
            return Found::Nothing;
        }
        let Ok(decoded) = records::decode_records(region, i64::from(count)) else { return Found::Reference };
        let log_append = (h.attributes & TIMESTAMP_TYPE_MASK != 0).then_some(i128::from(h.max_timestamp));
        let (base_offset, base_ts) = (i128::from(h.base_offset), i128::from(h.base_timestamp));
        let mut out = Vec::new();
        for (i, rec) in decoded.records.iter().enumerate() {
            let ts = log_append.unwrap_or(base_ts + i128::from(rec.timestamp_delta));
            if !self.ranges.matches(base_offset + i128::from(rec.offset_delta), ts) {
                continue;
            }
            if let Some(key) = &self.key {
                if rec.key.map(|(a, b)| &region[a..b]) != Some(key.as_slice()) {
                    continue;
                }
            }
            if let Some(needle) = &self.value_contains {
                match rec.value {
                    Some((a, b)) if contains(&region[a..b], needle) => {}
                    _ => continue,
                }
            }
            let headers = &decoded.headers[rec.first_header..rec.end_header];
            let has = |(k, v): &(Vec<u8>, Option<Vec<u8>>)| {
                headers.iter().any(|hd| {
                    &region[hd.key.0..hd.key.1] == k.as_slice()
                        && hd.value.map(|(a, b)| &region[a..b]) == v.as_deref()
                })
            };
            if !self.headers.iter().all(has) {
                continue;
            }
            // A batch holds fewer than 2^31 records (its count is an int32).
            out.push(i as u32);
        }
        if out.is_empty() {
            Found::Nothing
        } else {
            Found::Matches(out)
        }
    }
}

/// One entry handed back: `buf[position..stop]` and what became of it.
pub struct Hit {
    pub position: usize,
    pub stop: usize,
    pub found: Found,
}

/// What one chunk gave (see scan_stats.rs's `ChunkScan`): every entry that is not
/// `Found::Nothing`, in walk order.
pub struct ChunkSearch {
    pub hits: Vec<Hit>,
    pub valid_end: i64,
    pub trailing: Option<walk::Trailing>,
    pub fault: Option<crate::fault::Fault>,
}

/// Walk `buf` (walk.rs, checksums on) and test every entry against `pred`.
pub fn search_chunk(pred: &Predicate, buf: &[u8], start: i64, end: i64, base_position: i64) -> ChunkSearch {
    let walked = walk::walk(buf, walk::WalkSpec {
        start,
        end,
        base_position,
        max_batch_size: None,
        verify_crc: true,
        limit: usize::MAX,
    });
    let mut hits = Vec::new();
    let mut valid_end = start;
    for e in &walked.entries {
        let found = pred.entry(&buf[e.position..e.stop], &e.header, e.crc_ok == Some(true));
        if found != Found::Nothing {
            hits.push(Hit { position: e.position, stop: e.stop, found });
        }
        valid_end = e.stop as i64;
    }
    ChunkSearch { hits, valid_end, trailing: walked.trailing, fault: walked.fault }
}
