//! Zig-zag varints and varlongs as Kafka's `ByteUtils` reads them (formats/varint.py's
//! `read_varint` / `read_varlong`, same limits and same faults).
//!
//! Positions are `i64` so that arithmetic on them matches the reference's Python ints:
//! a length read from hostile bytes may carry a position far past the buffer, and a read
//! there is simply "past the end", never an overflow.

use crate::fault::Fault;

/// The byte at `pos`, or `None` outside `data` (the reference's `IndexError`).
#[inline]
pub fn byte_at(data: &[u8], pos: i64) -> Option<u8> {
    usize::try_from(pos).ok().and_then(|p| data.get(p).copied())
}

/// Zig-zag decoding of a raw unsigned value (at most 64 bits).
#[inline]
pub fn unzigzag(raw: u64) -> i64 {
    // raw >> 1 < 2^63 fits; -(raw & 1) is 0 or -1.
    ((raw >> 1) as i64) ^ -((raw & 1) as i64)
}

/// A zig-zag varint (int32) at `pos`: `(value, position after it)`.
pub fn read_varint(data: &[u8], pos: i64) -> Result<(i64, i64), Fault> {
    let start = pos;
    let mut pos = pos;
    let mut raw: u64 = 0;
    let mut shift = 0u32;
    loop {
        let Some(b) = byte_at(data, pos) else {
            return Err(Fault::varint("Varint runs past the end of the buffer", start));
        };
        pos += 1;
        if shift == 28 {
            if b & 0x80 != 0 {
                return Err(Fault::varint(
                    "Varint is too long, the most significant bit in the 5th byte is set",
                    start,
                ));
            }
            // Java: raw |= b << 28 into an int; bits above 31 fall off.
            raw |= (u64::from(b) << 28) & 0xFFFF_FFFF;
            break;
        }
        raw |= u64::from(b & 0x7F) << shift;
        if b & 0x80 == 0 {
            break;
        }
        shift += 7;
    }
    Ok((unzigzag(raw), pos))
}

/// A zig-zag varlong (int64) at `pos`: `(value, position after it)`.
pub fn read_varlong(data: &[u8], pos: i64) -> Result<(i64, i64), Fault> {
    let start = pos;
    let mut pos = pos;
    let mut raw: u64 = 0;
    let mut shift = 0u32;
    loop {
        let Some(b) = byte_at(data, pos) else {
            return Err(Fault::varint("Varlong runs past the end of the buffer", start));
        };
        pos += 1;
        // At shift 63 only the group's lowest bit lands inside 64 bits: the shift drops
        // the rest, as the reference's mask (result &= 2^64 - 1) does. shift <= 63 here.
        raw |= u64::from(b & 0x7F) << shift;
        if b & 0x80 == 0 {
            break;
        }
        shift += 7;
        if shift > 63 {
            return Err(Fault::varint("Varlong is too long, most significant bit in the 10th byte is set", start));
        }
    }
    Ok((unzigzag(raw), pos))
}
