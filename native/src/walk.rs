//! Walking the entries of a `.log` file's bytes (Kafka's `FileLogInputStream`), the twin
//! of formats/batches.py's `BatchIterator` (and of the header checks `LegacyBatch` makes
//! when it is built). Same steps, same faults:
//!
//! 1. If 17 or fewer bytes remain, stop: a trailing fragment (reported, no declared size).
//! 2. Read offset (0-7), size (8-11) and magic (16).
//! 3. `size < 14` cannot be any entry: a corrupt fault naming the position.
//! 4. With a maximum batch size, `12 + size` above it is a corrupt fault.
//! 5. If the entry runs past the end, stop: a partial trailing entry (declared `12 + size`).
//! 6. Magic 2 is a v2 batch (at least 61 bytes), 0/1 a legacy entry whose message must
//!    frame its key and value, anything else a corrupt header. Advance by `12 + size`.
//!
//! Optionally each entry's checksum is computed: CRC-32C of a v2 batch's bytes from its
//! attributes (+21) to its end, CRC-32 (IEEE) of a legacy message from its magic (+16).
//!
//! Positions in entries are indexes into the walked buffer; positions in faults and
//! trailing bytes are file positions (`base_position` added), as the reference reports.

use crate::fault::Fault;

/// Every entry starts with `offset int64 | size int32`.
pub const LOG_OVERHEAD: i64 = 12;
/// An entry is only looked at when more than this many bytes remain (offset, size, and the
/// 5 bytes up to and including the magic byte).
pub const HEADER_SIZE_UP_TO_MAGIC: i64 = 17;
/// The smallest `size` of any entry (a v0 message: crc, magic, attributes, key and value
/// lengths).
pub const RECORD_OVERHEAD_V0: i64 = 14;
/// A v2 batch's header (`RECORD_BATCH_OVERHEAD`).
pub const RECORD_BATCH_OVERHEAD: i64 = 61;
/// Where a v2 batch's CRC-32C coverage starts (its attributes).
pub const CRC_START: usize = 21;
/// Where a legacy message's CRC-32 coverage starts (its magic byte).
pub const LEGACY_CRC_START: usize = 16;

/// A v2 batch header, the fields in the order formats/record_batch.py's `HEADER` unpacks
/// them (`>qiibIhiqqqhii`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct V2Header {
    pub base_offset: i64,
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub records_count: i32,
}

/// A legacy (v0/v1) message's header, as `LegacyBatch` reads it (`>qiIbb`, then the v1
/// timestamp: -1 in v0).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LegacyHeader {
    pub offset: i64,
    pub message_size: i32,
    pub crc: u32,
    pub magic: i8,
    pub attributes: i8,
    pub timestamp: i64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Header {
    V2(V2Header),
    Legacy(LegacyHeader),
}

/// One whole entry: `buf[position..stop]`; `crc_ok` when checksums were asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub position: usize,
    pub stop: usize,
    pub header: Header,
    pub crc_ok: Option<bool>,
}

/// Bytes after the last whole entry (file position, length, and the `12 + size` a
/// partial header announced when 18 or more bytes remained).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trailing {
    pub position: i64,
    pub length: i64,
    pub declared_size: Option<i64>,
}

/// What one call walked. `next` is where to go on when the walk stopped at the entry
/// limit; `None` when it is over (at the end, at trailing bytes, or at a fault).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Walk {
    pub entries: Vec<Entry>,
    pub next: Option<i64>,
    pub trailing: Option<Trailing>,
    pub fault: Option<Fault>,
}

/// What to walk and how.
#[derive(Clone, Copy, Debug)]
pub struct WalkSpec {
    /// First entry's index in the buffer (>= 0).
    pub start: i64,
    /// End of the walk: the reference's `min(end, len(buf))`.
    pub end: i64,
    /// Added to buffer indexes to give file positions.
    pub base_position: i64,
    /// Entries larger than this (`12 + size`) are corrupt (Kafka's in-memory reader).
    pub max_batch_size: Option<i64>,
    /// Compute each entry's checksum.
    pub verify_crc: bool,
    /// Stop after this many entries (`next` then says where to go on).
    pub limit: usize,
}

fn be<const N: usize>(entry: &[u8], at: usize) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&entry[at..at + N]);
    out
}

fn i64_at(entry: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(be(entry, at))
}

fn i32_at(entry: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(be(entry, at))
}

fn u32_at(entry: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(be(entry, at))
}

fn i16_at(entry: &[u8], at: usize) -> i16 {
    i16::from_be_bytes(be(entry, at))
}

/// The 61-byte header of a v2 batch (`entry` is the whole batch, at least 61 bytes).
fn v2_header(entry: &[u8]) -> V2Header {
    V2Header {
        base_offset: i64_at(entry, 0),
        batch_length: i32_at(entry, 8),
        partition_leader_epoch: i32_at(entry, 12),
        magic: entry[16] as i8,
        crc: u32_at(entry, 17),
        attributes: i16_at(entry, 21),
        last_offset_delta: i32_at(entry, 23),
        base_timestamp: i64_at(entry, 27),
        max_timestamp: i64_at(entry, 35),
        producer_id: i64_at(entry, 43),
        producer_epoch: i16_at(entry, 51),
        base_sequence: i32_at(entry, 53),
        records_count: i32_at(entry, 57),
    }
}

/// The reference's `_sized`: an int32-length-prefixed field at `pos` that must end at or
/// before the message's end; returns the position after it.
fn sized_field(entry: &[u8], pos: usize, what: &str, position: i64) -> Result<usize, Fault> {
    let n = entry.len();
    if pos + 4 > n {
        return Err(Fault::corrupt(
            format!("Message is truncated: no room for the {what} length"),
            Some(position + pos as i64),
        ));
    }
    let length = i32_at(entry, pos);
    let pos = pos + 4;
    if length < 0 {
        return Ok(pos);
    }
    let left = (n - pos) as i64;
    if i64::from(length) > left {
        return Err(Fault::corrupt(
            format!("Message {what} length {length} runs past the end of the message ({left} bytes left)"),
            Some(position + pos as i64 - 4),
        ));
    }
    Ok(pos + length as usize)
}

/// A legacy entry's header, with the checks `LegacyBatch.__init__` makes (`entry` is
/// the whole entry, `12 + size` bytes; `position` its file position).
fn legacy_header(entry: &[u8], position: i64) -> Result<LegacyHeader, Fault> {
    let n = entry.len() as i64;
    if n < LOG_OVERHEAD + RECORD_OVERHEAD_V0 {
        return Err(Fault::corrupt(
            format!(
                "Record is corrupt (crc could not be retrieved as the record is too small, size = {})",
                n - LOG_OVERHEAD
            ),
            Some(position),
        ));
    }
    let magic = entry[16] as i8;
    let (timestamp, key_at) = match magic {
        0 => (-1, 18),
        1 => {
            if n < LOG_OVERHEAD + 22 {
                return Err(Fault::corrupt(
                    format!("Magic v1 message of size {} is below the minimum 22", n - LOG_OVERHEAD),
                    Some(position),
                ));
            }
            (i64_at(entry, 18), 26)
        }
        _ => {
            return Err(Fault::corrupt(format!("Invalid magic found in record: {magic}"), Some(position)));
        }
    };
    let value_at = sized_field(entry, key_at, "key", position)?;
    sized_field(entry, value_at, "value", position)?;
    Ok(LegacyHeader {
        offset: i64_at(entry, 0),
        message_size: i32_at(entry, 8),
        crc: u32_at(entry, 12),
        magic,
        attributes: entry[17] as i8,
        timestamp,
    })
}

/// Walk `buf` as the reference's `BatchIterator.__iter__` does (see the module docs).
pub fn walk(buf: &[u8], spec: WalkSpec) -> Walk {
    let mut pos = spec.start.max(0);
    // An end before the start walks nothing and leaves no trailing bytes, as at the start.
    let end = spec.end.min(buf.len() as i64).max(pos);
    let base = spec.base_position;
    let mut out = Walk::default();
    let mut declared = None;
    while end - pos > HEADER_SIZE_UP_TO_MAGIC {
        if out.entries.len() >= spec.limit {
            out.next = Some(pos);
            return out;
        }
        // pos + 17 < end <= buf.len(): the 17 bytes up to the magic are there.
        let p = pos as usize;
        let magic = buf[p + 16];
        let size = i64::from(i32_at(buf, p + 8));
        if size < RECORD_OVERHEAD_V0 {
            out.fault = Some(Fault::corrupt(
                format!("Found record size {size} smaller than minimum record overhead ({RECORD_OVERHEAD_V0})"),
                Some(base + pos),
            ));
            return out;
        }
        if let Some(max) = spec.max_batch_size {
            if size + LOG_OVERHEAD > max {
                out.fault = Some(Fault::corrupt(
                    format!("Record size {} exceeds the largest allowable message size ({max})", size + LOG_OVERHEAD),
                    Some(base + pos),
                ));
                return out;
            }
        }
        let stop = pos + LOG_OVERHEAD + size;
        if stop > end {
            declared = Some(LOG_OVERHEAD + size);
            break;
        }
        let entry = &buf[p..stop as usize];
        let (header, crc_ok) = if magic == 2 {
            if size + LOG_OVERHEAD < RECORD_BATCH_OVERHEAD {
                out.fault = Some(Fault::corrupt(
                    format!(
                        "Record batch is corrupt (the size {} is smaller than the minimum allowed overhead \
                         {RECORD_BATCH_OVERHEAD})",
                        size + LOG_OVERHEAD
                    ),
                    Some(base + pos),
                ));
                return out;
            }
            let header = v2_header(entry);
            let crc_ok = spec.verify_crc.then(|| crate::crc::crc32c(&entry[CRC_START..]) == header.crc);
            (Header::V2(header), crc_ok)
        } else if magic < 2 {
            match legacy_header(entry, base + pos) {
                Ok(header) => {
                    let crc_ok = spec.verify_crc.then(|| crc32fast::hash(&entry[LEGACY_CRC_START..]) == header.crc);
                    (Header::Legacy(header), crc_ok)
                }
                Err(fault) => {
                    out.fault = Some(fault);
                    return out;
                }
            }
        } else {
            // Reported as Kafka's signed int8.
            out.fault =
                Some(Fault::corrupt(format!("Invalid magic found in record: {}", magic as i8), Some(base + pos)));
            return out;
        };
        out.entries.push(Entry { position: p, stop: stop as usize, header, crc_ok });
        pos = stop;
    }
    if pos < end {
        out.trailing = Some(Trailing { position: base + pos, length: end - pos, declared_size: declared });
    }
    out
}
