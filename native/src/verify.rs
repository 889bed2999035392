//! The hot loop of `plog verify`'s segment walk: the twin of
//! engine/storage/segment_check.py's `SegmentWalk._hot_reference`.
//!
//! Over the bytes of one buffered chunk of a `.log`, it consumes every entry that is a
//! whole v2 batch with a valid CRC-32C, in offset order and in the segment's range, whose
//! offset and time index entries (merged in as the walk passes their positions/offsets)
//! agree with it. It stops, without consuming it, at the first entry that needs anything
//! else: the Python walk's general code (`_step`) judges that one and reports. So the loop
//! never reports anything itself, and its result is only "how far, and the state there".
//!
//! Numbers are i128: the Python walk uses ±2^80 as "no entry" / "no limit", and offsets
//! plus deltas may pass int64; i128 holds all of them exactly, as Python ints do.

use crate::walk::{CRC_START, LOG_OVERHEAD, RECORD_BATCH_OVERHEAD};

/// The smallest `length` of a v2 batch (`RECORD_BATCH_OVERHEAD` less the 12-byte entry head).
const MIN_V2_LENGTH: i64 = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD;

/// The walk's state on entry, named as in `SegmentWalk._hot_reference`.
#[derive(Clone, Copy, Debug)]
pub struct HotState {
    /// Cursor in the buffer, and the number of valid bytes in it.
    pub p: usize,
    pub n: usize,
    /// File position of the buffer's first byte.
    pub bp: i128,
    pub prev_last: i128,
    pub seg_max: i128,
    pub seg_base: i128,
    /// The pending offset index entry's offset.
    pub pend_off: i128,
    /// The next offset index entry: its position relative to the buffer (-1 when the
    /// general code must open it), its index in the chunk columns, and its offset.
    pub iprel: i128,
    pub ii: usize,
    pub ioff: i128,
    /// The next time index entry: index in the chunk columns, offset, timestamp; and the
    /// previous entry's timestamp.
    pub ti: usize,
    pub toff: i128,
    pub tts: i128,
    pub prev_tts: i128,
}

/// Where the loop stopped: `count` batches consumed, the cursor `p`, the last consumed
/// batch's position `lastp` and last offset, and the index entries' state there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HotEnd {
    pub count: usize,
    pub p: usize,
    pub prev_last: i128,
    pub lastp: usize,
    pub ii: usize,
    pub pend_off: i128,
    pub ti: usize,
}

fn i64_at(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().unwrap())
}

fn i32_at(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}

/// The loop. `apos`/`arel` are the offset index chunk's positions and relative offsets,
/// `trel`/`ats` the time index chunk's relative offsets and timestamps (each column ends
/// with a sentinel, so entry `ii + 1` exists whenever entry `ii` is a real one; a missing
/// one stops the loop as a sentinel would).
pub fn hot(
    buf: &[u8],
    s: HotState,
    apos: impl Fn(usize) -> Option<i128>,
    arel: impl Fn(usize) -> Option<i128>,
    trel: impl Fn(usize) -> Option<i128>,
    ats: impl Fn(usize) -> Option<i128>,
) -> HotEnd {
    let n = s.n.min(buf.len());
    let HotState { mut p, bp, mut prev_last, seg_max, seg_base, mut pend_off, mut iprel, mut ii, mut ioff, .. } = s;
    let HotState { mut ti, mut toff, mut tts, mut prev_tts, .. } = s;
    let mut count = 0;
    let mut lastp = 0;
    // A whole v2 header must be in the buffer.
    while n >= RECORD_BATCH_OVERHEAD as usize && p <= n - RECORD_BATCH_OVERHEAD as usize {
        let base = i128::from(i64_at(buf, p));
        let length = i64::from(i32_at(buf, p + 8));
        let magic = buf[p + 16];
        let stored = u32::from_be_bytes(buf[p + 17..p + 21].try_into().unwrap());
        let lod = i128::from(i32_at(buf, p + 23));
        let mts = i128::from(i64_at(buf, p + 35));
        if magic != 2 || length < MIN_V2_LENGTH {
            break;
        }
        // length >= 49, so stop > p.
        let stop = p + (LOG_OVERHEAD + length) as usize;
        if stop > n || crate::crc::crc32c(&buf[p + CRC_START..stop]) != stored {
            break;
        }
        let last = base + lod;
        if base <= prev_last || lod < 0 || last > seg_max {
            break;
        }
        // The next time index entry's offset is in this batch.
        let timed = last >= toff;
        if timed && (toff < base || tts != mts || tts <= prev_tts) {
            break;
        }
        // The next time entry, looked up before any state changes (a missing one, never
        // met with the sentinel column, stops the loop as the sentinel would).
        let next_time = if timed {
            let (Some(nrel), Some(nts)) = (trel(ti + 1), ats(ti + 1)) else { break };
            Some((nrel, nts))
        } else {
            None
        };
        let at = p as i128;
        if at >= iprel {
            // The next offset index entry is at (or before) this batch.
            if at != iprel || ioff < base || pend_off > prev_last {
                break;
            }
            let (Some(npos), Some(nrel)) = (apos(ii + 1), arel(ii + 1)) else { break };
            pend_off = ioff;
            ii += 1;
            ioff = seg_base + nrel;
            iprel = npos - bp;
        }
        if let Some((nrel, nts)) = next_time {
            prev_tts = tts;
            ti += 1;
            toff = seg_base + nrel;
            tts = nts;
        }
        prev_last = last;
        lastp = p;
        count += 1;
        p = stop;
    }
    HotEnd { count, p, prev_last, lastp, ii, pend_off, ti }
}
