//! Decoding a v2 records region (Kafka's `DefaultRecord.readFrom`), the twin of
//! formats/default_record.py: same passes, same checks in the same order, same faults.
//!
//! Record layout (varints zig-zag, see `varint`)::
//!
//!     length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
//!     keyLength varint (-1 null) | key | valueLength varint (-1 null) | value |
//!     headersCount varint | (headerKeyLength varint | headerKey |
//!                            headerValueLength varint (-1 null) | headerValue) * count
//!
//! Three passes, as in the reference:
//!
//! * [`frame_records`], the heads pass: where each record ends, its offset and timestamp
//!   deltas and its key, or `None` at anything that is not a well-formed head.
//! * [`decode_tails`]: each framed record's value and headers.
//! * [`decode_checked`]: the plain record-by-record decoder, run when the heads pass gave
//!   up; it raises the fault Kafka raises at the first bad record.
//!
//! The reference tells two kinds of failure apart: a `FormatError` raised by a check, and
//! a Python `IndexError` from reading a byte past the end, which it turns into "premature
//! EOF" or "invalid record structure" depending on where the read started. [`Miss`] keeps
//! that distinction so every fault comes out with the reference's sentence.
//!
//! Nothing here allocates by a count read from the bytes: vectors grow with the records
//! actually framed (each at least 6 bytes), and a header count is checked against the
//! bytes left in its record before the loop. Values are spans into the region; the
//! binding copies them into Python objects.

use crate::fault::Fault;
use crate::varint::{byte_at, read_varint, read_varlong, unzigzag};

/// A byte range `[start, stop)` of the region, clamped to it (a Python slice).
pub type Span = (usize, usize);

/// A record head: the reference's `(size, end, offset, timestamp, key, value_position)`
/// with offset and timestamp as deltas (the binding adds the batch's bases).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Head {
    pub size: i64,
    pub end: i64,
    pub offset_delta: i64,
    pub timestamp_delta: i64,
    pub key: Option<Span>,
    pub value_position: i64,
}

/// One record header: key bytes (UTF-8, decoded by the binding) and value (None = null).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordHeader {
    pub key: Span,
    pub value: Option<Span>,
}

/// One decoded record; its headers are `headers[first_header..end_header]` of [`Decoded`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordParts {
    pub offset_delta: i64,
    pub timestamp_delta: i64,
    pub key: Option<Span>,
    pub value: Option<Span>,
    pub first_header: usize,
    pub end_header: usize,
}

/// Every record of a region, headers in one vector (no allocation per record).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Decoded {
    pub records: Vec<RecordParts>,
    pub headers: Vec<RecordHeader>,
}

/// How a read failed: the reference's `IndexError` (turned into a fault by the caller,
/// which knows the position it reports) or a fault raised where it happened.
enum Miss {
    Index,
    Fault(Fault),
}

impl From<Fault> for Miss {
    fn from(f: Fault) -> Miss {
        Miss::Fault(f)
    }
}

/// A record length the heads pass reads as negative maps past any region (the reference's
/// `_PAST_ANY_REGION`), so one `end > n` test rejects both.
const PAST_ANY_REGION: i64 = 1 << 62;

/// Smallest framed record (length, attributes, timestamp, offset, key length, and one more
/// byte at least): bounds the capacity reserved for a declared count.
const MIN_FRAMED_RECORD: usize = 6;

fn span(data: &[u8], start: i64, stop: i64) -> Span {
    let n = data.len() as i64;
    let a = start.clamp(0, n);
    let b = stop.clamp(a, n);
    (a as usize, b as usize)
}

fn capacity_for(count: i64, data: &[u8]) -> usize {
    let most = data.len() / MIN_FRAMED_RECORD + 1;
    usize::try_from(count).map_or(0, |c| c.min(most))
}

/// One varint as the reference's passes read it (`_read_checked`): the one- and two-byte
/// forms by indexing (a [`Miss::Index`] past the end), longer ones by the full reader.
fn read_checked(data: &[u8], pos: i64, long: bool) -> Result<(i64, i64), Miss> {
    let b = byte_at(data, pos).ok_or(Miss::Index)?;
    if b < 0x80 {
        return Ok((unzigzag(u64::from(b)), pos + 1));
    }
    let c = byte_at(data, pos + 1).ok_or(Miss::Index)?;
    if c < 0x80 {
        return Ok((unzigzag(u64::from(b & 0x7F) | (u64::from(c) << 7)), pos + 2));
    }
    let read = if long { read_varlong(data, pos) } else { read_varint(data, pos) };
    read.map_err(Miss::Fault)
}

/// The reference's `_ran_off_error`: a read that ran off the end at `pos`.
fn ran_off(pos: i64, n: i64) -> Fault {
    if pos >= n {
        Fault::corrupt("Incorrect declared batch size, premature EOF reached", None)
    } else {
        Fault::corrupt("Found invalid record structure", None)
    }
}

/// Resolve a [`Miss`] at `pos` into the fault the reference raises.
fn resolve(miss: Miss, pos: i64, n: i64) -> Fault {
    match miss {
        Miss::Index => ran_off(pos, n),
        Miss::Fault(f) => f,
    }
}

/// The reference's `_size_mismatch` for the record at `start` whose fields ended at `pos`.
fn size_mismatch(data: &[u8], start: i64, pos: i64) -> Fault {
    let n = data.len() as i64;
    match read_checked(data, start, false) {
        Ok((length, body)) => Fault::corrupt(
            format!(
                "Invalid record size: expected to read {length} bytes in record payload, but instead read {}",
                pos - body
            ),
            None,
        ),
        // Evaluated inside the reference's try: an IndexError there is its ran-off error.
        Err(miss) => resolve(miss, pos, n),
    }
}

/// The heads pass (the reference's `_frame_records`): the heads of `count` records, or
/// `None` at anything that is not a well-formed head or when bytes are left over.
///
/// Every varint read here is equivalent to the reference's inlined one- and two-byte
/// forms: they give the same values, and a read past the end fails either way (an
/// `IndexError` or a `VarintError`, both of which the reference turns into `None`).
pub fn frame_records(data: &[u8], count: i64) -> Option<Vec<Head>> {
    let mut out = Vec::with_capacity(capacity_for(count, data));
    frame_records_into(data, count, &mut out).then_some(out)
}

/// [`frame_records`] into a vector the caller reuses from batch to batch (the scan's loop):
/// `out` holds the heads when it returns true; false where `frame_records` gives `None`.
pub fn frame_records_into(data: &[u8], count: i64, out: &mut Vec<Head>) -> bool {
    out.clear();
    match frame_into(data, count, out) {
        Some(()) => true,
        None => false,
    }
}

fn frame_into(data: &[u8], count: i64, out: &mut Vec<Head>) -> Option<()> {
    let n = data.len() as i64;
    let mut pos = 0i64;
    let mut left = count;
    while left > 0 {
        left -= 1;
        let start = pos;
        let (length, p) = read_varint(data, pos).ok()?;
        pos = p;
        let end = if length >= 0 { pos + length } else { PAST_ANY_REGION };
        if end > n {
            return None;
        }
        // The attributes byte (unused, always 0) is skipped unread.
        let (timestamp_delta, p) = read_varlong(data, pos + 1).ok()?;
        let (offset_delta, p) = read_varint(data, p).ok()?;
        let (key_length, p) = read_varint(data, p).ok()?;
        pos = p;
        let key = if key_length >= 0 {
            let k = span(data, pos, pos + key_length);
            pos += key_length;
            Some(k)
        } else {
            None
        };
        if pos >= end {
            // No room left for the value length and the headers count.
            return None;
        }
        out.push(Head { size: end - start, end, offset_delta, timestamp_delta, key, value_position: pos });
        pos = end;
    }
    (pos == n).then_some(())
}

/// The headers of one record, from its headers count at `pos`; `end` is where the record
/// ends. Appends to `headers`; returns the position after them.
fn decode_headers(data: &[u8], pos: i64, end: i64, headers: &mut Vec<RecordHeader>) -> Result<i64, Fault> {
    let (count, mut pos) = read_varint(data, pos)?;
    if count < 0 {
        return Err(Fault::invalid(format!("Found invalid number of record headers {count}"), None));
    }
    if count > end - pos {
        return Err(Fault::corrupt(format!("Found invalid number of record headers {count}"), None));
    }
    for _ in 0..count {
        let (key_length, p) = read_varint(data, pos)?;
        pos = p;
        if key_length < 0 {
            return Err(Fault::invalid(format!("Invalid negative header key size {key_length}"), None));
        }
        if pos + key_length > end {
            return Err(Fault::corrupt("Found invalid record structure", None));
        }
        let key = span(data, pos, pos + key_length);
        pos += key_length;
        let (value_length, p) = read_varint(data, pos)?;
        pos = p;
        let value = if value_length >= 0 {
            if pos + value_length > end {
                return Err(Fault::corrupt("Found invalid record structure", None));
            }
            let v = span(data, pos, pos + value_length);
            pos += value_length;
            Some(v)
        } else {
            None
        };
        headers.push(RecordHeader { key, value });
        if pos > end {
            return Err(Fault::corrupt("Found invalid record structure", None));
        }
    }
    Ok(pos)
}

/// A record's value and headers from its valueLength at `pos` (shared by the tails pass
/// and the plain decoder, which read them identically). On a [`Miss::Index`], `*pos` is
/// the position the reference reports.
fn decode_value_and_headers(
    data: &[u8],
    pos: &mut i64,
    end: i64,
    out: &mut Decoded,
) -> Result<(Option<Span>, usize, usize), Miss> {
    let (value_length, p) = read_checked(data, *pos, false)?;
    *pos = p;
    let value = if value_length >= 0 {
        let v = span(data, *pos, *pos + value_length);
        *pos += value_length;
        Some(v)
    } else {
        None
    };
    let first = out.headers.len();
    if byte_at(data, *pos).ok_or(Miss::Index)? == 0 {
        *pos += 1;
    } else {
        *pos = decode_headers(data, *pos, end, &mut out.headers)?;
    }
    Ok((value, first, out.headers.len()))
}

/// The tails pass (the reference's `_decode_tails`): each framed record's value and
/// headers, in order, with the plain decoder's checks.
pub fn decode_tails(data: &[u8], heads: &[Head]) -> Result<Decoded, Fault> {
    let n = data.len() as i64;
    let mut out = Decoded { records: Vec::with_capacity(heads.len()), headers: Vec::new() };
    for head in heads {
        let mut pos = head.value_position;
        let (value, first_header, end_header) =
            decode_value_and_headers(data, &mut pos, head.end, &mut out).map_err(|m| resolve(m, pos, n))?;
        if pos != head.end {
            return Err(size_mismatch(data, head.end - head.size, pos));
        }
        out.records.push(RecordParts {
            offset_delta: head.offset_delta,
            timestamp_delta: head.timestamp_delta,
            key: head.key,
            value,
            first_header,
            end_header,
        });
    }
    Ok(out)
}

/// The plain decoder (the reference's `_decode_checked`): record by record, each check
/// where Kafka makes it, then no bytes may be left over.
pub fn decode_checked(data: &[u8], count: i64) -> Result<Decoded, Fault> {
    let n = data.len() as i64;
    let mut out = Decoded { records: Vec::with_capacity(capacity_for(count, data)), headers: Vec::new() };
    let mut pos = 0i64;
    let mut left = count;
    while left > 0 {
        left -= 1;
        let start = pos;
        let (length, p) = read_checked(data, pos, false).map_err(|m| resolve(m, pos, n))?;
        pos = p;
        let end = pos + length;
        if end > n {
            return Err(Fault::corrupt(
                format!(
                    "Invalid record size: expected {length} bytes in record payload, but instead the buffer \
                     has only {} remaining bytes",
                    n - pos
                ),
                None,
            ));
        }
        pos += 1; // attributes: unused, always 0
        let (timestamp_delta, p) = read_checked(data, pos, true).map_err(|m| resolve(m, pos, n))?;
        pos = p;
        let (offset_delta, p) = read_checked(data, pos, false).map_err(|m| resolve(m, pos, n))?;
        pos = p;
        let (key_length, p) = read_checked(data, pos, false).map_err(|m| resolve(m, pos, n))?;
        pos = p;
        let key = (key_length >= 0).then(|| span(data, pos, pos + key_length));
        pos += key_length.max(0);
        let (value, first_header, end_header) =
            decode_value_and_headers(data, &mut pos, end, &mut out).map_err(|m| resolve(m, pos, n))?;
        if pos != end {
            return Err(size_mismatch(data, start, pos));
        }
        out.records.push(RecordParts { offset_delta, timestamp_delta, key, value, first_header, end_header });
    }
    if pos != n {
        return Err(Fault::corrupt("Incorrect declared batch size, records still remaining in file", None));
    }
    Ok(out)
}

/// The reference's `decode_records` (without the bases, which the binding adds): the
/// heads pass and the tails pass, or the plain decoder when the heads pass gives up.
pub fn decode_records(data: &[u8], count: i64) -> Result<Decoded, Fault> {
    match frame_records(data, count) {
        Some(heads) => decode_tails(data, &heads),
        None => decode_checked(data, count),
    }
}

/// The reference's `record_heads`: the heads, or the plain decoder's fault when the heads
/// pass gives up (and "invalid record structure" should the plain decoder accept it).
pub fn record_heads(data: &[u8], count: i64) -> Result<Vec<Head>, Fault> {
    match frame_records(data, count) {
        Some(heads) => Ok(heads),
        None => {
            decode_checked(data, count)?;
            Err(Fault::corrupt("Found invalid record structure", None))
        }
    }
}
