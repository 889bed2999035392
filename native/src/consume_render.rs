//! `plog consume`'s record output for one v2 batch: the binary-safe JSON lines of
//! engine/clients/record_io.py (`format_jsonl`) and the kcat templates of
//! engine/clients/console_io.py (`compile_template`), rendered straight from a records
//! region to bytes, without a Python object per record.
//!
//! The format is compiled once in Python into a list of [`Op`]s (literal bytes and record
//! fields; the topic and partition are literals, one list per partition). The region is
//! decoded by records.rs's `decode_records` (the same checks and faults as the reference's
//! `RecordBatch.records()`), then the records in a [`Window`] are taken and rendered as the
//! consume loop does it record by record: the window mirrors the reference's fetch (records
//! before the position are skipped, a record at or past the fetch limit ends the read, a
//! poll takes at most a budget of records) and the loop's rules (a record at or past the
//! range end is not printed; after `--count` records nothing more is).
//!
//! Byte-exactness with the reference:
//!
//! * JSON strings are what Python's `json.encoder.encode_basestring` (ensure_ascii=False)
//!   writes: `"` `\` and the C0 controls escaped (`\n \r \t \b \f` short, others
//!   `\u00xx` in lower-case hex), everything else as is, UTF-8.
//! * A key, value or header value that is valid UTF-8 (Python's strict decoder and Rust's
//!   `from_utf8` accept exactly the same bytes) is a JSON string, any other bytes
//!   `{"base64":"<padded standard base64>"}`; a null is `null`. A header key is the same
//!   (its surrogateescape'd text encodes back to its bytes).
//! * Offsets and timestamps are the batch's base plus the record's delta as Python adds
//!   them (no overflow: i128).
//!
//! Memory: the output grows with the records rendered (at most `max_take` of the region's
//! records, each at most ~6 times its bytes plus the literals); nothing is allocated by a
//! count read from the bytes.

use crate::fault::Fault;
use crate::records::{self, Decoded, RecordParts, Span};

/// One step of a compiled format.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Bytes written as they are (the template's literal text, the topic, the partition).
    Lit(Vec<u8>),
    /// `%o`: the offset in decimal.
    Offset,
    /// `%T`: the timestamp in decimal.
    Timestamp,
    /// `%k`: the key's bytes (nothing for a null key).
    Key,
    /// `%v` / `%s`: the value's bytes (nothing for a null value).
    Value,
    /// `%K`: the key's length in decimal, -1 for null.
    KeyLen,
    /// `%S`: the value's length in decimal, -1 for null.
    ValueLen,
    /// `%R`: the value's length as a 4-byte big-endian int32, -1 for null.
    ValueLenBe32,
    /// `%h`: the headers as `k=v` joined by `,`, a null value as `NULL`.
    HeadersKcat,
    /// The key as binary-safe JSON (string, base64 object or null).
    KeyJson,
    /// The value as binary-safe JSON.
    ValueJson,
    /// The headers as the JSON list `[{"key":...,"value":...}]`.
    HeadersJson,
    /// `"CreateTime"` or `"LogAppendTime"` (with the quotes), by the batch's timestamp type.
    TimestampTypeJson,
    /// The key decoded by its Confluent schema (a [`FieldDecoders`]'s): its JSON followed by
    /// `,"key_schema_id":N`; a null key `null`. A key the decoders cannot render exactly
    /// stops the region there: the caller renders that record on the reference path.
    KeyDecoded,
    /// The value, as [`Op::KeyDecoded`] (`,"value_schema_id":N`).
    ValueDecoded,
}

/// Confluent-framed keys and values rendered as JSON by the schemas known so far
/// (py_consume_decode.rs holds the compiled schemas): `push` appends the field's JSON and
/// returns its schema id, or None (nothing appended) where the reference must decide (an
/// unknown id, a payload the native renderer leaves to the reference, ...).
pub trait FieldDecoders: Sync {
    /// `scratch`: a buffer the renderer reuses from record to record.
    fn push(&self, is_key: bool, field: &[u8], out: &mut Vec<u8>, scratch: &mut String) -> Option<i64>;
}

impl Op {
    /// The op a code from Python names (see py_consume_render.rs); literals are `Lit`.
    pub fn from_code(code: u8) -> Option<Op> {
        Some(match code {
            1 => Op::Offset,
            2 => Op::Timestamp,
            3 => Op::Key,
            4 => Op::Value,
            5 => Op::KeyLen,
            6 => Op::ValueLen,
            7 => Op::ValueLenBe32,
            8 => Op::HeadersKcat,
            9 => Op::KeyJson,
            10 => Op::ValueJson,
            11 => Op::HeadersJson,
            12 => Op::TimestampTypeJson,
            13 => Op::KeyDecoded,
            14 => Op::ValueDecoded,
            _ => return None,
        })
    }
}

/// The batch facts the fields need.
#[derive(Clone, Copy, Debug)]
pub struct BatchFacts {
    pub base_offset: i64,
    pub base_timestamp: i64,
    /// The batch's max timestamp when it has LogAppendTime (every record's timestamp then).
    pub log_append_time: Option<i64>,
}

/// Which records of the region to take and which of those to render (module docs).
#[derive(Clone, Copy, Debug)]
pub struct Window {
    /// Record index to start at (a batch cut by an earlier poll's budget goes on there).
    pub first_index: usize,
    /// Records with an offset below this are skipped (the read's start position).
    pub lo: i128,
    /// A record with an offset at or past this ends the read (the fetch limit).
    pub hi: i128,
    /// Take at most this many records (the poll's budget left, at least 1).
    pub max_take: usize,
    /// Records taken at or past this offset are not rendered (the range end), if any.
    pub end: Option<i128>,
    /// Render at most this many records (the count left), if any.
    pub max_render: Option<usize>,
}

/// What a window over one region gave.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// The record index after the last one looked at (the region's count when all were).
    pub next_index: usize,
    pub taken: usize,
    pub rendered: usize,
    /// The offset of the first record taken.
    pub first_taken: Option<i128>,
    /// The offset of the last record taken.
    pub last_taken: Option<i128>,
    /// The offset of the first record taken and not rendered.
    pub first_unconsumed: Option<i128>,
    /// A record taken at or past `end` while the count was not yet reached.
    pub past_end: bool,
    /// A record at or past `hi` was reached: the read is over.
    pub reached_hi: bool,
    /// The record at `next_index` is one the decoders cannot render: the caller renders it
    /// on the reference path (it was neither taken nor rendered here), then goes on after it.
    pub needs_reference: bool,
}

/// Decode `data` (`count` records, the reference's checks) and render the window's records
/// with `ops`, appending to `out`.
pub fn render_region(
    data: &[u8],
    count: i64,
    facts: BatchFacts,
    ops: &[Op],
    window: Window,
    decoders: Option<&dyn FieldDecoders>,
    out: &mut Vec<u8>,
) -> Result<Outcome, Fault> {
    let decoded = records::decode_records(data, count)?;
    Ok(render_decoded(data, &decoded, facts, ops, window, decoders, out))
}

fn render_decoded(
    data: &[u8],
    decoded: &Decoded,
    facts: BatchFacts,
    ops: &[Op],
    window: Window,
    decoders: Option<&dyn FieldDecoders>,
    out: &mut Vec<u8>,
) -> Outcome {
    let mut o = Outcome { next_index: window.first_index, ..Outcome::default() };
    let mut scratch = String::new();
    let records = decoded.records.get(window.first_index..).unwrap_or(&[]);
    for (i, r) in records.iter().enumerate() {
        let offset = i128::from(facts.base_offset) + i128::from(r.offset_delta);
        if offset >= window.hi {
            o.reached_hi = true;
            o.next_index = window.first_index + i;
            return o;
        }
        o.next_index = window.first_index + i + 1;
        if offset < window.lo {
            continue;
        }
        let counted_out = window.max_render.is_some_and(|m| o.rendered >= m);
        if counted_out || window.end.is_some_and(|e| offset >= e) {
            o.first_unconsumed.get_or_insert(offset);
            o.past_end |= !counted_out;
        } else {
            let record = Record { data, parts: r, decoded, offset, facts, decoders };
            let mark = out.len();
            if !ops.iter().all(|op| record.push(op, out, &mut scratch)) {
                // Not this one: the record is left, untaken, to the reference.
                out.truncate(mark);
                o.next_index = window.first_index + i;
                o.needs_reference = true;
                return o;
            }
            o.rendered += 1;
        }
        o.taken += 1;
        o.first_taken.get_or_insert(offset);
        o.last_taken = Some(offset);
        if o.taken >= window.max_take {
            return o;
        }
    }
    o
}

/// One record as the ops see it.
struct Record<'a> {
    data: &'a [u8],
    parts: &'a RecordParts,
    decoded: &'a Decoded,
    offset: i128,
    facts: BatchFacts,
    decoders: Option<&'a dyn FieldDecoders>,
}

impl Record<'_> {
    fn field(&self, span: Option<Span>) -> Option<&[u8]> {
        span.map(|(a, b)| &self.data[a..b])
    }

    fn timestamp(&self) -> i128 {
        match self.facts.log_append_time {
            Some(t) => i128::from(t),
            None => i128::from(self.facts.base_timestamp) + i128::from(self.parts.timestamp_delta),
        }
    }

    fn headers(&self) -> &[records::RecordHeader] {
        self.decoded.headers.get(self.parts.first_header..self.parts.end_header).unwrap_or(&[])
    }

    /// Append the op's output; false (something appended, which the caller drops) where a
    /// decoded field must be left to the reference.
    fn push(&self, op: &Op, out: &mut Vec<u8>, scratch: &mut String) -> bool {
        match op {
            Op::Lit(bytes) => out.extend_from_slice(bytes),
            Op::Offset => push_int(out, self.offset),
            Op::Timestamp => push_int(out, self.timestamp()),
            Op::Key => out.extend_from_slice(self.field(self.parts.key).unwrap_or(&[])),
            Op::Value => out.extend_from_slice(self.field(self.parts.value).unwrap_or(&[])),
            Op::KeyLen => push_len(out, self.field(self.parts.key)),
            Op::ValueLen => push_len(out, self.field(self.parts.value)),
            Op::ValueLenBe32 => {
                // The reference packs with struct ">i": a length past int32 cannot come from
                // a region Python could hold decompressed (256 MiB cap), so -1 or the length.
                let n = self.field(self.parts.value).map_or(-1i64, |v| v.len() as i64);
                out.extend_from_slice(&(n as i32).to_be_bytes());
            }
            Op::HeadersKcat => {
                for (i, h) in self.headers().iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    out.extend_from_slice(&self.data[h.key.0..h.key.1]);
                    out.push(b'=');
                    match self.field(h.value) {
                        Some(v) => out.extend_from_slice(v),
                        None => out.extend_from_slice(b"NULL"),
                    }
                }
            }
            Op::KeyJson => push_bytes_json(out, self.field(self.parts.key)),
            Op::ValueJson => push_bytes_json(out, self.field(self.parts.value)),
            Op::HeadersJson => {
                out.push(b'[');
                for (i, h) in self.headers().iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    out.extend_from_slice(b"{\"key\":");
                    push_bytes_json(out, Some(&self.data[h.key.0..h.key.1]));
                    out.extend_from_slice(b",\"value\":");
                    push_bytes_json(out, self.field(h.value));
                    out.push(b'}');
                }
                out.push(b']');
            }
            Op::TimestampTypeJson => out.extend_from_slice(if self.facts.log_append_time.is_some() {
                b"\"LogAppendTime\""
            } else {
                b"\"CreateTime\""
            }),
            Op::KeyDecoded => return self.push_decoded(true, out, scratch),
            Op::ValueDecoded => return self.push_decoded(false, out, scratch),
        }
        true
    }

    /// A decoded key or value (`Op::KeyDecoded`): a null stays null; a record with headers
    /// is the reference's (a header may carry another schema id).
    fn push_decoded(&self, is_key: bool, out: &mut Vec<u8>, scratch: &mut String) -> bool {
        let span = if is_key { self.parts.key } else { self.parts.value };
        let Some(field) = self.field(span) else {
            out.extend_from_slice(b"null");
            return true;
        };
        let Some(decoders) = self.decoders else { return false };
        if !self.headers().is_empty() {
            return false;
        }
        let Some(id) = decoders.push(is_key, field, out, scratch) else { return false };
        out.extend_from_slice(if is_key { b",\"key_schema_id\":" } else { b",\"value_schema_id\":" });
        push_int(out, i128::from(id));
        true
    }
}

fn push_len(out: &mut Vec<u8>, field: Option<&[u8]>) {
    match field {
        Some(f) => push_int(out, f.len() as i128),
        None => out.extend_from_slice(b"-1"),
    }
}

/// Two decimal digits for each of 0..100.
const DIGIT_PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// `n` in decimal, as Python's `%d` writes it.
pub fn push_int(out: &mut Vec<u8>, n: i128) {
    let mut digits = [0u8; 40];
    let mut i = digits.len();
    let mut m = n.unsigned_abs();
    // Offsets and timestamps fit in 64 bits: divide in u64 (an i128 division is a call).
    while m > u128::from(u64::MAX) {
        i -= 1;
        digits[i] = b'0' + (m % 10) as u8;
        m /= 10;
    }
    let mut m = m as u64;
    while m >= 100 {
        let pair = (m % 100) as usize * 2;
        m /= 100;
        i -= 2;
        digits[i..i + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    }
    if m >= 10 {
        let pair = m as usize * 2;
        i -= 2;
        digits[i..i + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    } else {
        i -= 1;
        digits[i] = b'0' + m as u8;
    }
    if n < 0 {
        i -= 1;
        digits[i] = b'-';
    }
    out.extend_from_slice(&digits[i..]);
}

/// The binary-safe JSON of a key, value or header value (module docs).
pub fn push_bytes_json(out: &mut Vec<u8>, field: Option<&[u8]>) {
    match field {
        None => out.extend_from_slice(b"null"),
        Some(bytes) => match std::str::from_utf8(bytes) {
            Ok(_) => push_json_str(out, bytes),
            Err(_) => {
                out.extend_from_slice(b"{\"base64\":\"");
                push_base64(out, bytes);
                out.extend_from_slice(b"\"}");
            }
        },
    }
}

/// What a byte of valid UTF-8 becomes in a JSON string: 0 as is, else the escape's second
/// character (`u` for `\u00xx`).
const fn escape_table() -> [u8; 256] {
    let mut t = [0u8; 256];
    let mut c = 0;
    while c < 0x20 {
        t[c] = b'u';
        c += 1;
    }
    t[0x08] = b'b';
    t[0x09] = b't';
    t[0x0A] = b'n';
    t[0x0C] = b'f';
    t[0x0D] = b'r';
    t[b'"' as usize] = b'"';
    t[b'\\' as usize] = b'\\';
    t
}

static ESCAPES: [u8; 256] = escape_table();
const HEX: &[u8; 16] = b"0123456789abcdef";

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// The high bit of each byte of `w` (8 bytes, little-endian) that JSON escapes (below
/// 0x20, `"` or `\\`), exact up to the lowest one: a borrow only runs on past a byte
/// that matched, and bytes from 0x80 up never match (non-ASCII passes as is).
#[inline]
fn escape_flags(w: u64) -> u64 {
    let control = w.wrapping_sub(ONES * 0x20) & !w;
    let quote = w ^ (ONES * u64::from(b'"'));
    let backslash = w ^ (ONES * u64::from(b'\\'));
    (control | (quote.wrapping_sub(ONES) & !quote) | (backslash.wrapping_sub(ONES) & !backslash)) & HIGHS
}

/// The next byte at or after `from` that JSON escapes, 8 bytes at a time.
#[inline]
fn next_escape(text: &[u8], mut from: usize) -> Option<usize> {
    while let Some(word) = text.get(from..from + 8) {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(word);
        let flags = escape_flags(u64::from_le_bytes(bytes));
        if flags != 0 {
            return Some(from + (flags.trailing_zeros() / 8) as usize);
        }
        from += 8;
    }
    text.get(from..)?.iter().position(|&b| ESCAPES[b as usize] != 0).map(|i| from + i)
}

/// `text` (valid UTF-8) as `encode_basestring` writes it, quotes included.
pub fn push_json_str(out: &mut Vec<u8>, text: &[u8]) {
    out.push(b'"');
    // Up to the first byte to escape in one copy (all of it for most keys and values), then
    // the rest a block at a time through a buffer (values with many quotes: JSON in JSON).
    let first = next_escape(text, 0).unwrap_or(text.len());
    out.extend_from_slice(&text[..first]);
    let mut buf = [0u8; 6 * 64];
    for block in text[first..].chunks(64) {
        let mut n = 0;
        let mut words = block.chunks_exact(8);
        for word in &mut words {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(word);
            if escape_flags(u64::from_le_bytes(bytes)) == 0 {
                buf[n..n + 8].copy_from_slice(word);
                n += 8;
            } else {
                n = escape_bytes(word, &mut buf, n);
            }
        }
        n = escape_bytes(words.remainder(), &mut buf, n);
        out.extend_from_slice(&buf[..n]);
    }
    out.push(b'"');
}

/// `bytes` escaped into `buf` from `n` (room for 6 bytes each); returns the new end.
#[inline]
fn escape_bytes(bytes: &[u8], buf: &mut [u8], mut n: usize) -> usize {
    for &b in bytes {
        let e = ESCAPES[b as usize];
        if e == 0 {
            buf[n] = b;
            n += 1;
        } else if e == b'u' {
            buf[n..n + 6].copy_from_slice(&[b'\\', b'u', b'0', b'0', HEX[(b >> 4) as usize], HEX[(b & 0xF) as usize]]);
            n += 6;
        } else {
            buf[n] = b'\\';
            buf[n + 1] = e;
            n += 2;
        }
    }
    n
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard padded base64 (Python's `base64.b64encode`).
pub fn push_base64(out: &mut Vec<u8>, data: &[u8]) {
    let mut chunks = data.chunks_exact(3);
    for c in &mut chunks {
        let n = (u32::from(c[0]) << 16) | (u32::from(c[1]) << 8) | u32::from(c[2]);
        out.extend_from_slice(&[
            B64[(n >> 18) as usize & 63],
            B64[(n >> 12) as usize & 63],
            B64[(n >> 6) as usize & 63],
            B64[n as usize & 63],
        ]);
    }
    match *chunks.remainder() {
        [a] => {
            let n = u32::from(a) << 16;
            out.extend_from_slice(&[B64[(n >> 18) as usize & 63], B64[(n >> 12) as usize & 63], b'=', b'=']);
        }
        [a, b] => {
            let n = (u32::from(a) << 16) | (u32::from(b) << 8);
            out.extend_from_slice(&[
                B64[(n >> 18) as usize & 63],
                B64[(n >> 12) as usize & 63],
                B64[(n >> 6) as usize & 63],
                b'=',
            ]);
        }
        _ => {}
    }
}
