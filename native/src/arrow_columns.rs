//! Arrow column buffers of the `plog` Spark data source's record rows (the twin of
//! spark_tasks/arrow_reference.py, which builds the same RecordBatch from
//! `plog.engine.inspect.scan.unit_records` rows).
//!
//! Python walks a unit's slices (CRC and offset/time pruning as the reference does) and
//! hands in the v2 batches it keeps, each with its records region (decompressed by Python,
//! bounded) and its facts. [`build`] decodes every region with records.rs, applies the
//! scan filter's record predicates, and appends the rows that pass to one set of columns,
//! laid out as Arrow's buffers (little-endian values, int32 offsets, LSB-first bitmaps),
//! in the schema's order (spark_tasks/schema.py, `RECORD_FIELDS`).
//!
//! A batch whose region does not decode is skipped whole, as the reference skips it.
//! Rows the reference cannot represent either (a header key that is not UTF-8, an offset
//! beyond int64: pyarrow refuses them) or a column past Arrow's int32 offsets make the
//! whole call [`Built::Unusual`]: the caller then builds those batches on the reference
//! path, which behaves as it always did. Nothing is allocated by a size read from the
//! bytes: columns grow with the rows actually decoded.

use crate::records::{self, Span};

/// Where a batch comes from: its slice's topic, partition and segment file.
pub struct Source<'a> {
    pub topic: &'a str,
    pub partition: i32,
    pub segment: &'a str,
}

/// One v2 batch to decode, as Python hands it in.
pub struct BatchIn<'a> {
    pub region: &'a [u8],
    pub count: i64,
    pub base_offset: i64,
    pub base_timestamp: i64,
    /// The batch's max timestamp when it is LogAppendTime (every record's timestamp then).
    pub log_append_time: Option<i64>,
    pub timestamp_type: i32,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub codec: &'a str,
    pub is_transactional: bool,
    pub is_control: bool,
    pub position: i64,
    pub source: usize,
}

/// The record predicates of engine/inspect/scan_filter.py's `ScanFilter.matches` (all but
/// `where`, which the caller never hands here). Header keys are the UTF-8 (surrogateescape)
/// bytes of the filter's keys: equal bytes are equal decoded keys.
#[derive(Default)]
pub struct Filter {
    pub offset_lo: Option<i128>,
    pub offset_hi: Option<i128>,
    pub time_lo: Option<i128>,
    pub time_hi: Option<i128>,
    pub key: Option<Vec<u8>>,
    pub value_contains: Option<Vec<u8>>,
    pub headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    if needle.is_empty() {
        return true;
    }
    let Some((&first, rest)) = needle.split_first() else { return true };
    let last_start = match haystack.len().checked_sub(needle.len()) {
        Some(n) => n,
        None => return false,
    };
    let mut i = 0;
    while i <= last_start {
        match haystack[i..=last_start].iter().position(|&b| b == first) {
            None => return false,
            Some(k) => {
                let at = i + k;
                if &haystack[at + 1..at + needle.len()] == rest {
                    return true;
                }
                i = at + 1;
            }
        }
    }
    false
}

impl Filter {
    fn matches(&self, offset: i128, timestamp: i128, key: Option<&[u8]>, value: Option<&[u8]>,
               headers: &[(&[u8], Option<&[u8]>)]) -> bool {
        if self.offset_lo.is_some_and(|lo| offset < lo) || self.offset_hi.is_some_and(|hi| offset >= hi) {
            return false;
        }
        if self.time_lo.is_some_and(|lo| timestamp < lo) || self.time_hi.is_some_and(|hi| timestamp >= hi) {
            return false;
        }
        if let Some(want) = &self.key {
            if key != Some(want.as_slice()) {
                return false;
            }
        }
        if let Some(needle) = &self.value_contains {
            match value {
                Some(v) if contains(v, needle) => {}
                _ => return false,
            }
        }
        self.headers.iter().all(|(hk, hv)| {
            headers.iter().any(|(k, v)| *k == hk.as_slice() && *v == hv.as_deref())
        })
    }
}

/// An LSB-first bitmap (Arrow's validity and boolean layout).
#[derive(Default)]
pub struct Bits {
    pub bytes: Vec<u8>,
    len: usize,
    /// How many bits are 0 (the null count of a validity bitmap).
    pub zeros: usize,
}

impl Bits {
    fn push(&mut self, bit: bool) {
        if self.len % 8 == 0 {
            self.bytes.push(0);
        }
        if bit {
            if let Some(last) = self.bytes.last_mut() {
                *last |= 1 << (self.len % 8);
            }
        } else {
            self.zeros += 1;
        }
        self.len += 1;
    }
}

/// A string or binary column: validity, int32 offsets (little-endian bytes) and data.
pub struct VarColumn {
    pub validity: Bits,
    pub offsets: Vec<u8>,
    pub data: Vec<u8>,
}

impl VarColumn {
    fn new() -> VarColumn {
        VarColumn { validity: Bits::default(), offsets: 0i32.to_le_bytes().to_vec(), data: Vec::new() }
    }

    /// Append a value (None: null); false when the data would pass int32 offsets.
    fn push(&mut self, value: Option<&[u8]>) -> bool {
        if let Some(v) = value {
            self.data.extend_from_slice(v);
        }
        let Ok(end) = i32::try_from(self.data.len()) else { return false };
        self.offsets.extend_from_slice(&end.to_le_bytes());
        self.validity.push(value.is_some());
        true
    }
}

/// The record level's columns, in `RECORD_FIELDS` order. Fixed-width columns are their
/// little-endian value bytes; `timestamp` has a validity bitmap, `headers` is a list
/// (`header_offsets`, int32) of structs of `header_keys` (never null) and `header_values`.
pub struct Columns {
    pub rows: usize,
    pub topic: VarColumn,
    pub partition: Vec<u8>,
    pub offset: Vec<u8>,
    pub timestamp: Vec<u8>,
    pub timestamp_valid: Bits,
    pub timestamp_type: Vec<u8>,
    pub key: VarColumn,
    pub value: VarColumn,
    pub header_offsets: Vec<u8>,
    pub header_keys: VarColumn,
    pub header_values: VarColumn,
    pub base_offset: Vec<u8>,
    pub producer_id: Vec<u8>,
    pub producer_epoch: Vec<u8>,
    pub base_sequence: Vec<u8>,
    pub codec: VarColumn,
    pub is_transactional: Bits,
    pub is_control: Bits,
    pub segment: VarColumn,
    pub position: Vec<u8>,
}

impl Columns {
    fn new() -> Columns {
        Columns {
            rows: 0,
            topic: VarColumn::new(),
            partition: Vec::new(),
            offset: Vec::new(),
            timestamp: Vec::new(),
            timestamp_valid: Bits::default(),
            timestamp_type: Vec::new(),
            key: VarColumn::new(),
            value: VarColumn::new(),
            header_offsets: 0i32.to_le_bytes().to_vec(),
            header_keys: VarColumn::new(),
            header_values: VarColumn::new(),
            base_offset: Vec::new(),
            producer_id: Vec::new(),
            producer_epoch: Vec::new(),
            base_sequence: Vec::new(),
            codec: VarColumn::new(),
            is_transactional: Bits::default(),
            is_control: Bits::default(),
            segment: VarColumn::new(),
            position: Vec::new(),
        }
    }
}

/// What [`build`] made: the columns, or the reason the caller must use the reference path.
pub enum Built {
    Columns(Box<Columns>),
    Unusual(&'static str),
}

/// Epoch milliseconds above this overflow microseconds: the reference makes them null.
const MAX_MS: i128 = (i64::MAX / 1000) as i128;

fn slice(data: &[u8], span: Option<Span>) -> Option<&[u8]> {
    span.map(|(a, b)| &data[a..b])
}

/// Append the rows of one decoded batch that `filter` keeps; Err when one is unusual.
fn append_batch(out: &mut Columns, b: &BatchIn<'_>, src: &Source<'_>, decoded: &records::Decoded,
                filter: &Filter, plain: bool) -> Result<(), &'static str> {
    let data = b.region;
    let mut headers: Vec<(&[u8], Option<&[u8]>)> = Vec::new();
    for r in &decoded.records {
        let offset = i128::from(b.base_offset) + i128::from(r.offset_delta);
        let timestamp = match b.log_append_time {
            Some(t) => i128::from(t),
            None => i128::from(b.base_timestamp) + i128::from(r.timestamp_delta),
        };
        let (key, value) = (slice(data, r.key), slice(data, r.value));
        headers.clear();
        for h in decoded.headers.get(r.first_header..r.end_header).unwrap_or(&[]) {
            headers.push((&data[h.key.0..h.key.1], slice(data, h.value)));
        }
        if !plain && !filter.matches(offset, timestamp, key, value, &headers) {
            continue;
        }
        let Ok(offset) = i64::try_from(offset) else { return Err("an offset beyond int64") };
        let mut fits = out.topic.push(Some(src.topic.as_bytes()))
            && out.key.push(key)
            && out.value.push(value)
            && out.codec.push(Some(b.codec.as_bytes()))
            && out.segment.push(Some(src.segment.as_bytes()));
        for (k, v) in &headers {
            if std::str::from_utf8(k).is_err() {
                return Err("a header key that is not UTF-8");
            }
            fits = fits && out.header_keys.push(Some(k)) && out.header_values.push(*v);
        }
        let Ok(header_end) = i32::try_from(out.header_keys.validity.len) else { return Err("too many headers") };
        if !fits {
            return Err("a column beyond int32 offsets");
        }
        out.header_offsets.extend_from_slice(&header_end.to_le_bytes());
        out.partition.extend_from_slice(&src.partition.to_le_bytes());
        out.offset.extend_from_slice(&offset.to_le_bytes());
        let in_range = (0..=MAX_MS).contains(&timestamp);
        let micros = if in_range { timestamp as i64 * 1000 } else { 0 };
        out.timestamp.extend_from_slice(&micros.to_le_bytes());
        out.timestamp_valid.push(in_range);
        out.timestamp_type.extend_from_slice(&b.timestamp_type.to_le_bytes());
        out.base_offset.extend_from_slice(&b.base_offset.to_le_bytes());
        out.producer_id.extend_from_slice(&b.producer_id.to_le_bytes());
        out.producer_epoch.extend_from_slice(&b.producer_epoch.to_le_bytes());
        out.base_sequence.extend_from_slice(&b.base_sequence.to_le_bytes());
        out.is_transactional.push(b.is_transactional);
        out.is_control.push(b.is_control);
        out.position.extend_from_slice(&b.position.to_le_bytes());
        out.rows += 1;
    }
    Ok(())
}

/// The columns of every row of `batches` that `filter` keeps, in order. A batch whose
/// region does not decode exactly `count` records is skipped (the reference skips it).
pub fn build(batches: &[BatchIn<'_>], sources: &[Source<'_>], filter: &Filter, plain: bool) -> Built {
    let mut out = Columns::new();
    for b in batches {
        let Some(src) = sources.get(b.source) else { return Built::Unusual("a batch without its slice") };
        if b.count <= 0 {
            continue;
        }
        let Ok(decoded) = records::decode_records(b.region, b.count) else { continue };
        if let Err(why) = append_batch(&mut out, b, src, &decoded, filter, plain) {
            return Built::Unusual(why);
        }
    }
    Built::Columns(Box::new(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contains_finds_what_python_in_finds() {
        assert!(contains(b"abc", b""));
        assert!(contains(b"", b""));
        assert!(!contains(b"", b"a"));
        assert!(contains(b"xxabab", b"abab"));
        assert!(contains(b"aab", b"ab"));
        assert!(!contains(b"ab", b"abc"));
        assert!(contains(b"ERROR x", b"ERROR"));
    }

    #[test]
    fn bits_are_lsb_first() {
        let mut bits = Bits::default();
        for bit in [true, false, true, true, false, false, false, false, true] {
            bits.push(bit);
        }
        assert_eq!(bits.bytes, vec![0b0000_1101, 1]);
        assert_eq!(bits.zeros, 5);
    }
}
