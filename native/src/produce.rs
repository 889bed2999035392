//! The producer's write side in Rust (engine/clients/producer.py, `_NativeBatch` and the
//! fill loop): v2 record encoding into an open batch (formats/default_record.py's
//! `encode_records`, record by record), the batch header and its CRC-32C
//! (formats/record_batch.py's `_assemble`), Kafka's murmur2 (engine/clients/partitioner.py)
//! and the console producer's line framing (engine/clients/console_io.py's `LineParser`
//! for plain and keyed lines).
//!
//! Nothing here builds Python objects; py_produce.rs binds it. A record this code cannot
//! encode exactly as the reference does (a length beyond int32, a timestamp the reference
//! rejects) is refused (`false`/`None`), and the caller runs the reference for it.

use crate::crc::crc32c;

/// The producer's per-record and per-batch size estimates (producer.py `_RECORD_OVERHEAD`,
/// `_BATCH_OVERHEAD`).
pub const RECORD_OVERHEAD: i64 = 12;
pub const BATCH_OVERHEAD: i64 = 61;
/// The v2 batch header's length and where the CRC-covered part starts.
const HEADER_LEN: usize = 61;
const CRC_START: usize = 21;

#[inline]
fn zz32(v: i32) -> u64 {
    u64::from(((v << 1) ^ (v >> 31)) as u32)
}

#[inline]
fn zz64(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

#[inline]
fn uvarint_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

#[inline]
fn put_uvarint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8 & 0x7F) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// The encoded length of a nullable byte field (varint length + bytes, or -1).
#[inline]
fn field_len(f: Option<&[u8]>) -> Option<usize> {
    match f {
        None => Some(1),
        Some(b) => Some(uvarint_len(zz32(i32::try_from(b.len()).ok()?)) + b.len()),
    }
}

#[inline]
fn put_field(out: &mut Vec<u8>, f: Option<&[u8]>) {
    match f {
        None => out.push(1),
        Some(b) => {
            // field_len checked the length fits in int32.
            put_uvarint(out, zz32(b.len() as i32));
            out.extend_from_slice(b);
        }
    }
}

/// One header: key bytes (UTF-8 of a str key) and a nullable value.
pub type Header<'a> = (&'a [u8], Option<&'a [u8]>);

/// Append one record (length prefix included) as `DefaultRecord.writeTo`; None (nothing
/// written) when a length does not fit in int32.
pub fn encode_record(
    out: &mut Vec<u8>,
    offset_delta: i32,
    timestamp_delta: i64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    headers: &[Header<'_>],
) -> Option<()> {
    let mut body = 1 + uvarint_len(zz64(timestamp_delta)) + uvarint_len(zz32(offset_delta));
    body += field_len(key)? + field_len(value)?;
    body += uvarint_len(zz32(i32::try_from(headers.len()).ok()?));
    for (hk, hv) in headers {
        body += field_len(Some(hk))? + field_len(*hv)?;
    }
    let body32 = i32::try_from(body).ok()?;
    out.reserve(body + 5);
    put_uvarint(out, zz32(body32));
    out.push(0);
    put_uvarint(out, zz64(timestamp_delta));
    put_uvarint(out, zz32(offset_delta));
    put_field(out, key);
    put_field(out, value);
    put_uvarint(out, zz32(headers.len() as i32));
    for (hk, hv) in headers {
        put_field(out, Some(hk));
        put_field(out, *hv);
    }
    Some(())
}

/// An open batch: its records encoded so far, offsets 0.. and timestamps relative to the
/// first record's (what `encode_batch` makes of the same records), plus the producer's
/// size estimate (`_Batch.size`).
pub struct Builder {
    pub buf: Vec<u8>,
    pub count: i64,
    pub base_ts: i64,
    pub max_ts: i64,
    pub size: i64,
}

impl Default for Builder {
    fn default() -> Self {
        Builder { buf: Vec::new(), count: 0, base_ts: -1, max_ts: -1, size: BATCH_OVERHEAD }
    }
}

impl Builder {
    /// Append one record stamped `ts`; false (nothing changed) where the reference must
    /// encode it (it raises for a negative timestamp other than -1, or a length beyond int32).
    pub fn append(&mut self, ts: i64, key: Option<&[u8]>, value: Option<&[u8]>, headers: &[Header<'_>]) -> bool {
        if ts < -1 {
            return false;
        }
        let Ok(delta) = i32::try_from(self.count) else { return false };
        let base = if self.count == 0 { ts } else { self.base_ts };
        let Some(ts_delta) = ts.checked_sub(base) else { return false };
        if encode_record(&mut self.buf, delta, ts_delta, key, value, headers).is_none() {
            return false;
        }
        self.push_meta(ts);
        true
    }

    /// Count a record whose bytes the caller appended to `buf` (the reference's encoding).
    pub fn push_meta(&mut self, ts: i64) {
        if self.count == 0 {
            self.base_ts = ts;
        }
        self.count += 1;
        if ts > self.max_ts {
            self.max_ts = ts;
        }
    }
}

/// The batch fields `_assemble` packs besides the records.
pub struct BatchHead {
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub count: i32,
}

/// The size of the whole batch `assemble_into` writes around `payload`; None beyond int32.
pub fn batch_size(payload: &[u8]) -> Option<usize> {
    let size = HEADER_LEN.checked_add(payload.len())?;
    i32::try_from(size - 12).ok()?;
    Some(size)
}

/// A whole v2 batch (base offset 0, partition leader epoch -1) around `payload`, with its
/// CRC-32C, into `out` (exactly `batch_size(payload)` bytes): formats/record_batch.py's
/// `_assemble`.
pub fn assemble_into(head: &BatchHead, payload: &[u8], out: &mut [u8]) {
    let length = (out.len() - 12) as i32; // batch_size checked it fits
    let mut at = 0;
    let mut put = |b: &[u8]| {
        out[at..at + b.len()].copy_from_slice(b);
        at += b.len();
    };
    put(&0i64.to_be_bytes());
    put(&length.to_be_bytes());
    put(&(-1i32).to_be_bytes());
    put(&[2]);
    put(&0u32.to_be_bytes());
    put(&head.attributes.to_be_bytes());
    put(&head.last_offset_delta.to_be_bytes());
    put(&head.base_timestamp.to_be_bytes());
    put(&head.max_timestamp.to_be_bytes());
    put(&head.producer_id.to_be_bytes());
    put(&head.producer_epoch.to_be_bytes());
    put(&head.base_sequence.to_be_bytes());
    put(&head.count.to_be_bytes());
    put(payload);
    let crc = crc32c(&out[CRC_START..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
}

/// Kafka's `Utils.murmur2` (a Java int).
pub fn murmur2(data: &[u8]) -> i32 {
    const M: u32 = 0x5BD1_E995;
    let length = data.len();
    let mut h: u32 = 0x9747_B28C ^ (length as u32);
    let chunks = data.chunks_exact(4);
    let tail = chunks.remainder();
    for c in chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> 24;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M) ^ k;
    }
    if tail.len() == 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if !tail.is_empty() {
        h ^= u32::from(tail[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// `to_positive(murmur2(key)) % n` (n >= 1).
pub fn partition_for_key(key: &[u8], n: i64) -> i64 {
    i64::from(murmur2(key) & 0x7FFF_FFFF) % n
}

/// The next line of `data` from `pos`: `(line without its end of line, position after it)`,
/// None when no newline follows and the input may go on (`last` false), or at the end.
/// The end of line removed is `\n` then `\r` (console_io.py's `_strip_eol`, which the plain
/// path's `\r\n`/`\n`/`\r` cut equals on every line a file iteration yields).
pub fn next_line(data: &[u8], pos: usize, last: bool) -> Option<(&[u8], usize)> {
    let rest = data.get(pos..)?;
    if rest.is_empty() {
        return None;
    }
    let (mut line, next) = match memchr::memchr(b'\n', rest) {
        Some(i) => (&rest[..i], pos + i + 1),
        None if last => (rest, data.len()),
        None => return None,
    };
    if let [head @ .., b'\r'] = line {
        line = head;
    }
    Some((line, next))
}

/// The first occurrence of `needle` (non-empty) in `hay`.
pub fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    match needle {
        [] => None,
        [b] => memchr::memchr(*b, hay),
        _ => memchr::memmem::find(hay, needle),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur2_known() {
        // Kafka's UtilsTest.testMurmur2
        assert_eq!(murmur2(b"21"), -973932308);
        assert_eq!(murmur2(b"foobar"), -790332482);
        assert_eq!(murmur2(b"a-little-bit-long-string"), -985981536);
        assert_eq!(murmur2(b"a-little-bit-longer-string"), -1486304829);
        assert_eq!(murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8"), -58897971);
        assert_eq!(murmur2(&[b'a', b'b', b'c']), 479470107);
    }

    #[test]
    fn lines() {
        assert_eq!(next_line(b"a\r\nb", 0, false), Some((&b"a"[..], 3)));
        assert_eq!(next_line(b"a\r\nb", 3, false), None);
        assert_eq!(next_line(b"a\r\nb\r", 3, true), Some((&b"b"[..], 5)));
    }
}
