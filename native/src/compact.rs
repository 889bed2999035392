//! The log cleaner's per-record work (engine/maintenance/offset_map.py, batch_filter.py,
//! cleaner.py): MD5 of keys, Kafka's `SkimpyOffsetMap` table and probing, the retention
//! check of a data batch's records and the rebuild of a v2 batch from its survivors.
//!
//! Every function is the twin of a reference loop and gives its exact results; anything
//! the reference would reject or treat specially (a records region that does not frame, an
//! offset beyond int64, a record the encoder refuses) makes it return `None` *before* any
//! change, and the caller runs the reference for that batch (which raises the same typed
//! error). The table is this module's own zeroed buffer (`vec![0; n]`: the allocator hands
//! out fresh zero pages for a large one, so an untouched table costs no memory).

use crate::records::decode_records;
use crate::varint::{read_varint, read_varlong, unzigzag};

// -------------------------------------------------------------------------------------
// MD5 (RFC 1321), the hash Kafka's cleaner keys its map with

const S: [u32; 64] = [
    7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14,
    20, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6,
    10, 15, 21,
];

const K: [u32; 64] = [
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501, 0x698098d8,
    0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821, 0xf61e2562, 0xc040b340,
    0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8, 0x21e1cde6, 0xc33707d6, 0xf4d50d87,
    0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a, 0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c,
    0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70, 0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039,
    0xe6db99e5, 0x1fa27cf8, 0xc4ac5665, 0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92,
    0xffeff47d, 0x85845dd1, 0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb,
    0xeb86d391,
];

const MD5_INIT: [u32; 4] = [0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476];

/// One 64-byte block into the state. The loop over a constant range with constant tables
/// is fully unrolled by the compiler.
#[inline(always)]
fn md5_block(state: &mut [u32; 4], block: &[u8; 64]) {
    let mut m = [0u32; 16];
    for (i, w) in m.iter_mut().enumerate() {
        *w = u32::from_le_bytes([block[4 * i], block[4 * i + 1], block[4 * i + 2], block[4 * i + 3]]);
    }
    let [mut a, mut b, mut c, mut d] = *state;
    for i in 0..64 {
        let (f, g) = match i / 16 {
            0 => ((b & c) | (!b & d), i),
            1 => ((d & b) | (!d & c), (5 * i + 1) % 16),
            2 => (b ^ c ^ d, (3 * i + 5) % 16),
            _ => (c ^ (b | !d), (7 * i) % 16),
        };
        let t = d;
        d = c;
        c = b;
        b = b.wrapping_add(a.wrapping_add(f).wrapping_add(K[i]).wrapping_add(m[g]).rotate_left(S[i]));
        a = t;
    }
    state[0] = state[0].wrapping_add(a);
    state[1] = state[1].wrapping_add(b);
    state[2] = state[2].wrapping_add(c);
    state[3] = state[3].wrapping_add(d);
}

/// How many one-block MD5s run side by side.
const LANES: usize = 4;

/// `LANES` one-block MD5s at once: `m[w][lane]` is message word `w` of each lane's block.
/// The lanes' dependency chains are independent, so the CPU overlaps them (four lanes
/// measured best here: ~3.5x one hash at a time; more lanes spill registers).
fn md5_block_lanes(m: &[[u32; LANES]; 16]) -> [[u32; 4]; LANES] {
    let mut a = [MD5_INIT[0]; LANES];
    let mut b = [MD5_INIT[1]; LANES];
    let mut c = [MD5_INIT[2]; LANES];
    let mut d = [MD5_INIT[3]; LANES];
    // The 64 steps written out (round, step, message word, rotation as literals).
    macro_rules! step {
        ($round:literal, $i:literal, $g:literal, $s:literal) => {
            let mut nb = [0u32; LANES];
            for l in 0..LANES {
                let f = match $round {
                    0 => (b[l] & c[l]) | (!b[l] & d[l]),
                    1 => (d[l] & b[l]) | (!d[l] & c[l]),
                    2 => b[l] ^ c[l] ^ d[l],
                    _ => c[l] ^ (b[l] | !d[l]),
                };
                let t = a[l].wrapping_add(f).wrapping_add(K[$i]).wrapping_add(m[$g][l]);
                nb[l] = b[l].wrapping_add(t.rotate_left($s));
            }
            a = d;
            d = c;
            c = b;
            b = nb;
        };
    }
    step!(0, 0, 0, 7);
    step!(0, 1, 1, 12);
    step!(0, 2, 2, 17);
    step!(0, 3, 3, 22);
    step!(0, 4, 4, 7);
    step!(0, 5, 5, 12);
    step!(0, 6, 6, 17);
    step!(0, 7, 7, 22);
    step!(0, 8, 8, 7);
    step!(0, 9, 9, 12);
    step!(0, 10, 10, 17);
    step!(0, 11, 11, 22);
    step!(0, 12, 12, 7);
    step!(0, 13, 13, 12);
    step!(0, 14, 14, 17);
    step!(0, 15, 15, 22);
    step!(1, 16, 1, 5);
    step!(1, 17, 6, 9);
    step!(1, 18, 11, 14);
    step!(1, 19, 0, 20);
    step!(1, 20, 5, 5);
    step!(1, 21, 10, 9);
    step!(1, 22, 15, 14);
    step!(1, 23, 4, 20);
    step!(1, 24, 9, 5);
    step!(1, 25, 14, 9);
    step!(1, 26, 3, 14);
    step!(1, 27, 8, 20);
    step!(1, 28, 13, 5);
    step!(1, 29, 2, 9);
    step!(1, 30, 7, 14);
    step!(1, 31, 12, 20);
    step!(2, 32, 5, 4);
    step!(2, 33, 8, 11);
    step!(2, 34, 11, 16);
    step!(2, 35, 14, 23);
    step!(2, 36, 1, 4);
    step!(2, 37, 4, 11);
    step!(2, 38, 7, 16);
    step!(2, 39, 10, 23);
    step!(2, 40, 13, 4);
    step!(2, 41, 0, 11);
    step!(2, 42, 3, 16);
    step!(2, 43, 6, 23);
    step!(2, 44, 9, 4);
    step!(2, 45, 12, 11);
    step!(2, 46, 15, 16);
    step!(2, 47, 2, 23);
    step!(3, 48, 0, 6);
    step!(3, 49, 7, 10);
    step!(3, 50, 14, 15);
    step!(3, 51, 5, 21);
    step!(3, 52, 12, 6);
    step!(3, 53, 3, 10);
    step!(3, 54, 10, 15);
    step!(3, 55, 1, 21);
    step!(3, 56, 8, 6);
    step!(3, 57, 15, 10);
    step!(3, 58, 6, 15);
    step!(3, 59, 13, 21);
    step!(3, 60, 4, 6);
    step!(3, 61, 11, 10);
    step!(3, 62, 2, 15);
    step!(3, 63, 9, 21);
    let mut out = [[0u32; 4]; LANES];
    for l in 0..LANES {
        out[l] = [
            MD5_INIT[0].wrapping_add(a[l]),
            MD5_INIT[1].wrapping_add(b[l]),
            MD5_INIT[2].wrapping_add(c[l]),
            MD5_INIT[3].wrapping_add(d[l]),
        ];
    }
    out
}

/// The longest message that fits in one padded MD5 block.
const ONE_BLOCK: usize = 55;

/// MD5 of each of `keys` into `out` (same length), `LANES` one-block keys at a time.
pub fn md5_many(keys: &[&[u8]], out: &mut [[u8; 16]]) {
    let mut lanes: [usize; LANES] = [0; LANES];
    let mut filled = 0;
    let flush = |lanes: &[usize; LANES], n: usize, out: &mut [[u8; 16]]| {
        let mut m = [[0u32; LANES]; 16];
        for (l, &k) in lanes.iter().enumerate().take(n) {
            let key = keys[k];
            let mut block = [0u8; 64];
            block[..key.len()].copy_from_slice(key);
            block[key.len()] = 0x80;
            block[56..].copy_from_slice(&((key.len() as u64) * 8).to_le_bytes());
            for (w, word) in m.iter_mut().enumerate() {
                word[l] = u32::from_le_bytes([block[4 * w], block[4 * w + 1], block[4 * w + 2], block[4 * w + 3]]);
            }
        }
        let digests = md5_block_lanes(&m);
        for (l, &k) in lanes.iter().enumerate().take(n) {
            for (w, v) in digests[l].iter().enumerate() {
                out[k][4 * w..4 * w + 4].copy_from_slice(&v.to_le_bytes());
            }
        }
    };
    for (k, key) in keys.iter().enumerate() {
        if key.len() > ONE_BLOCK {
            out[k] = md5(key);
            continue;
        }
        lanes[filled] = k;
        filled += 1;
        if filled == LANES {
            flush(&lanes, LANES, out);
            filled = 0;
        }
    }
    if filled > 0 {
        flush(&lanes, filled, out);
    }
}

/// The MD5 digest of `data`.
pub fn md5(data: &[u8]) -> [u8; 16] {
    let mut state = MD5_INIT;
    let mut chunks = data.chunks_exact(64);
    for chunk in &mut chunks {
        let mut block = [0u8; 64];
        block.copy_from_slice(chunk);
        md5_block(&mut state, &block);
    }
    let rest = chunks.remainder();
    let mut block = [0u8; 64];
    block[..rest.len()].copy_from_slice(rest);
    block[rest.len()] = 0x80;
    let bits = (data.len() as u64).wrapping_mul(8).to_le_bytes();
    if rest.len() >= 56 {
        md5_block(&mut state, &block);
        block = [0u8; 64];
    }
    block[56..].copy_from_slice(&bits);
    md5_block(&mut state, &block);
    let mut out = [0u8; 16];
    for (i, w) in state.iter().enumerate() {
        out[4 * i..4 * i + 4].copy_from_slice(&w.to_le_bytes());
    }
    out
}

// -------------------------------------------------------------------------------------
// SkimpyOffsetMap

const HASH_SIZE: usize = 16;
const BYTES_PER_ENTRY: usize = 24;
/// Probes reading their own window of the hash (byte positions 0 ..= 12).
const HASH_WINDOWS: u64 = 13;

/// Kafka's table: `slots` entries of `md5 (16) | offset (int64 BE)`; see offset_map.py.
pub struct Table {
    buf: Vec<u8>,
    /// Per-batch scratch, reused: record heads, their rows and key hashes.
    spans: Vec<(usize, usize)>,
    firsts: Vec<usize>,
    rows: Vec<Row>,
    hashes: Vec<[u8; 16]>,
    pub memory: usize,
    pub slots: usize,
    pub entries: usize,
    pub latest: i64,
    /// Lemire's constant for `% slots` (`u64::MAX / slots + 1`), when `slots` fits in u32.
    fastmod: Option<u64>,
    pub lookups: u64,
    pub probes: u64,
    written: bool,
}

/// Where a probe loop ended: the slot holding the hash, the first empty slot on its
/// sequence, or neither within the allowed attempts.
enum Probe {
    Found(usize),
    Empty(usize),
    GaveUp,
}

impl Table {
    /// A table of `memory` bytes (the caller checked `memory >= 24`).
    pub fn new(memory: usize) -> Table {
        Table {
            buf: vec![0u8; memory],
            spans: Vec::new(),
            firsts: Vec::new(),
            rows: Vec::new(),
            hashes: Vec::new(),
            memory,
            slots: memory / BYTES_PER_ENTRY,
            fastmod: u32::try_from(memory / BYTES_PER_ENTRY)
                .ok()
                .filter(|&d| d > 0)
                .map(|d| (u64::MAX / u64::from(d)).wrapping_add(1)),
            entries: 0,
            latest: -1,
            lookups: 0,
            probes: 0,
            written: false,
        }
    }

    /// Forget every key; a written table is replaced by fresh zero pages (the old one is
    /// freed first, so only one exists at a time).
    pub fn clear(&mut self) {
        if self.written {
            self.buf = Vec::new();
            self.buf = vec![0u8; self.memory];
            self.written = false;
        }
        self.entries = 0;
        self.latest = -1;
        self.lookups = 0;
        self.probes = 0;
    }

    /// Byte position of probe `attempt` for hash `h` (Kafka's `positionOf`).
    #[inline]
    fn position(&self, h: &[u8; 16], attempt: u64) -> usize {
        let window = |i: usize| i32::from_be_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
        let probe = if attempt < HASH_WINDOWS {
            window(attempt as usize)
        } else {
            // Java int arithmetic: the sum wraps at 32 bits.
            window(12).wrapping_add((attempt - (HASH_WINDOWS - 1)) as u32 as i32)
        };
        let probe = if probe == i32::MIN { 0 } else { probe.unsigned_abs() };
        self.slot_of(probe) * BYTES_PER_ENTRY
    }

    /// `probe % slots`, by Lemire's exact multiply-shift remainder when `slots` fits in 32
    /// bits (a 64-bit division per probe was a fifth of the map's time).
    #[inline]
    fn slot_of(&self, probe: u32) -> usize {
        match self.fastmod {
            Some(m) => {
                let low = m.wrapping_mul(u64::from(probe));
                ((u128::from(low) * self.slots as u128) >> 64) as usize
            }
            None => probe as usize % self.slots,
        }
    }

    /// The reference's `_position_of`, counters included; `first` is probe 0's position
    /// when the caller has it already.
    fn position_of(&mut self, h: &[u8; 16], max_attempts: u64, first: Option<usize>) -> Probe {
        self.lookups += 1;
        let mut attempt = 0u64;
        let mut pos = match first {
            Some(pos) => pos,
            None => self.position(h, 0),
        };
        loop {
            self.probes += 1;
            let slot = &self.buf[pos..pos + BYTES_PER_ENTRY];
            if slot[..HASH_SIZE] == h[..] {
                return Probe::Found(pos);
            }
            if slot.iter().all(|&b| b == 0) {
                return Probe::Empty(pos);
            }
            attempt += 1;
            if attempt >= max_attempts {
                return Probe::GaveUp;
            }
            pos = self.position(h, attempt);
        }
    }

    /// `put_hash`; false (nothing changed) when the table has no free slot, where the
    /// reference raises OffsetMapFullError.
    pub fn put(&mut self, h: &[u8; 16], offset: i64, first: Option<usize>) -> bool {
        if self.entries >= self.slots {
            return false;
        }
        let pos = match self.position_of(h, u64::MAX, first) {
            Probe::Found(pos) => pos,
            Probe::Empty(pos) => {
                self.buf[pos..pos + HASH_SIZE].copy_from_slice(h);
                self.entries += 1;
                self.written = true;
                pos
            }
            // Not reached: the sequence ends in linear probing over every slot, one is free.
            Probe::GaveUp => return false,
        };
        self.buf[pos + HASH_SIZE..pos + BYTES_PER_ENTRY].copy_from_slice(&offset.to_be_bytes());
        self.latest = offset;
        true
    }

    /// `get_hash`: the offset stored for `h`, or -1.
    pub fn get(&mut self, h: &[u8; 16], first: Option<usize>) -> i64 {
        let bound = (self.slots + HASH_SIZE - 4) as u64;
        match self.position_of(h, bound, first) {
            Probe::Found(pos) => {
                let mut raw = [0u8; 8];
                raw.copy_from_slice(&self.buf[pos + HASH_SIZE..pos + BYTES_PER_ENTRY]);
                i64::from_be_bytes(raw)
            }
            _ => -1,
        }
    }
}

// -------------------------------------------------------------------------------------
// The cleaner's loops over one data batch's records

/// One record of a batch as the cleaner reads it: its offset, whether it has a key (whose
/// hash is at the same index of `Table::hashes`) and whether it is a tombstone.
#[derive(Clone, Copy)]
struct Row {
    offset: i64,
    keyed: bool,
    tombstone: bool,
}

/// A null value's length byte (-1 zig-zag) at a head's value position.
const NULL_VALUE: u8 = 1;

impl Table {
    /// Fill `rows` and `hashes` for a v2 records region; false when the region does not
    /// frame or an offset leaves int64 (the reference handles those). Then touch each
    /// hash's first slot: independent loads, so the cache misses of a batch overlap
    /// instead of each probe waiting for its own.
    fn load_batch(&mut self, data: &[u8], count: i64, base_offset: i64) -> bool {
        let mut spans = std::mem::take(&mut self.spans);
        let ok = frame_keyed(data, count, base_offset, &mut self.rows, &mut spans);
        if ok {
            let keys: Vec<&[u8]> = spans.iter().map(|&(a, b)| &data[a..b]).collect();
            self.hashes.clear();
            self.hashes.resize(keys.len(), [0u8; 16]);
            md5_many(&keys, &mut self.hashes);
            let mut firsts = std::mem::take(&mut self.firsts);
            firsts.clear();
            let mut touched = 0u8;
            for h in &self.hashes {
                let pos = self.position(h, 0);
                touched ^= self.buf[pos];
                firsts.push(pos);
            }
            std::hint::black_box(touched);
            self.firsts = firsts;
        }
        self.spans = spans;
        ok
    }
}

/// A varint at `pos` (`read_varint`), its one- and two-byte forms inline.
#[inline(always)]
fn varint_at(data: &[u8], pos: i64, long: bool) -> Option<(i64, i64)> {
    if let Ok(p) = usize::try_from(pos) {
        if let Some(&b) = data.get(p) {
            if b < 0x80 {
                return Some((unzigzag(u64::from(b)), pos + 1));
            }
            if let Some(&c) = data.get(p + 1) {
                if c < 0x80 {
                    return Some((unzigzag(u64::from(b & 0x7F) | (u64::from(c) << 7)), pos + 2));
                }
            }
        }
    }
    let read = if long { read_varlong(data, pos) } else { read_varint(data, pos) };
    read.ok()
}

/// records.rs's heads pass (`frame_records`: the same reads, the same refusals, so it
/// succeeds exactly where that does) keeping only what the cleaner reads: each record's
/// offset, whether it has a key (its span in `spans`, empty when null) and whether its
/// value is null. False where `frame_records` gives None, or an offset leaves int64.
fn frame_keyed(data: &[u8], count: i64, base_offset: i64, rows: &mut Vec<Row>,
               spans: &mut Vec<(usize, usize)>) -> bool {
    rows.clear();
    spans.clear();
    let n = data.len() as i64;
    let mut pos = 0i64;
    let mut left = count;
    while left > 0 {
        left -= 1;
        let Some((length, p)) = varint_at(data, pos, false) else { return false };
        pos = p;
        let end = if length >= 0 { pos + length } else { PAST_ANY_REGION };
        if end > n {
            return false;
        }
        // The attributes byte is skipped unread; the timestamp delta is read (a bad one
        // fails the pass) but not kept.
        let Some((_ts, p)) = varint_at(data, pos + 1, true) else { return false };
        let Some((offset_delta, p)) = varint_at(data, p, false) else { return false };
        let Some((key_length, p)) = varint_at(data, p, false) else { return false };
        pos = p;
        let key = if key_length >= 0 {
            let a = pos.clamp(0, n);
            let b = (pos + key_length).clamp(a, n);
            pos += key_length;
            Some((a as usize, b as usize))
        } else {
            None
        };
        if pos >= end {
            return false;
        }
        let Some(offset) = base_offset.checked_add(offset_delta) else { return false };
        // pos < end <= n, and pos >= 0: the value's length byte is in the region.
        let tombstone = data[pos as usize] == NULL_VALUE;
        rows.push(Row { offset, keyed: key.is_some(), tombstone });
        spans.push(key.unwrap_or((0, 0)));
        pos = end;
    }
    pos == n
}

/// A record length read as negative maps past any region (records.rs does the same).
const PAST_ANY_REGION: i64 = 1 << 62;

/// The map build's loop over one data batch (cleaner.py `build_offset_map`): put each keyed
/// record at or past `start` while the map holds fewer than `max_desired` keys. Returns
/// `(records counted, filled)`: `filled` when a key found the map at its limit (that
/// record is not counted and nothing after it is put).
pub fn map_records(table: &mut Table, data: &[u8], count: i64, base_offset: i64, start: i64,
                   max_desired: usize) -> Option<(u64, bool)> {
    if !table.load_batch(data, count, base_offset) {
        return None;
    }
    let rows = std::mem::take(&mut table.rows);
    let hashes = std::mem::take(&mut table.hashes);
    let firsts = std::mem::take(&mut table.firsts);
    let mut result = Some((rows.len() as u64, false));
    for (i, ((row, h), &first)) in rows.iter().zip(&hashes).zip(&firsts).enumerate() {
        if row.keyed && row.offset >= start {
            if table.entries >= max_desired {
                result = Some((i as u64, true));
                break;
            }
            if !table.put(h, row.offset, Some(first)) {
                result = None;
                break;
            }
        }
    }
    table.rows = rows;
    table.hashes = hashes;
    table.firsts = firsts;
    result
}

/// What `retained` found besides the kept indexes (batch_filter.py's stats).
#[derive(Default)]
pub struct Retained {
    pub keep: Vec<u32>,
    pub tombstones_kept: u64,
    pub keyless_removed: u64,
    pub tombstones_removed: u64,
    pub tombstones_expired: u64,
}

/// `RecordFilter.retained_indexes` over one v2 data batch: the records past `latest`, and
/// the latest of each key (tombstones only while `retain_deletes`).
pub fn retained(table: &mut Table, data: &[u8], count: i64, base_offset: i64, latest: i64,
                retain_deletes: bool) -> Option<Retained> {
    if !table.load_batch(data, count, base_offset) {
        return None;
    }
    let rows = std::mem::take(&mut table.rows);
    let hashes = std::mem::take(&mut table.hashes);
    let firsts = std::mem::take(&mut table.firsts);
    let mut r = Retained::default();
    for (i, ((row, h), &first)) in rows.iter().zip(&hashes).zip(&firsts).enumerate() {
        let index = i as u32; // a region holds fewer than 2^32 records (each is bytes long)
        let tombstone = row.tombstone;
        if row.offset > latest {
            r.keep.push(index);
            r.tombstones_kept += u64::from(tombstone);
            continue;
        }
        if !row.keyed {
            r.keyless_removed += 1;
            continue;
        }
        if row.offset >= table.get(h, Some(first)) {
            if retain_deletes || !tombstone {
                r.keep.push(index);
                r.tombstones_kept += u64::from(tombstone);
            } else {
                r.tombstones_removed += 1;
                r.tombstones_expired += 1;
            }
        } else if tombstone {
            r.tombstones_removed += 1;
        }
    }
    table.rows = rows;
    table.hashes = hashes;
    table.firsts = firsts;
    Some(r)
}

// -------------------------------------------------------------------------------------
// Rebuilding a v2 batch from its survivors (record_batch.encode_batch)

/// The header fields a rebuilt batch keeps (batch_filter.py `_rebuild_v2`).
pub struct RebuildSpec {
    pub base_offset: i64,
    pub partition_leader_epoch: i32,
    /// Timestamp type, transactional and control bits of the source (codec and horizon
    /// bits are set here).
    pub attributes: i16,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub last_offset_delta: i32,
    pub delete_horizon: Option<i64>,
}

fn push_varlong(out: &mut Vec<u8>, n: i64) {
    let mut raw = ((n << 1) ^ (n >> 63)) as u64;
    while raw >= 0x80 {
        out.push((raw as u8 & 0x7F) | 0x80);
        raw >>= 7;
    }
    out.push(raw as u8);
}

/// A varint (int32) field; None outside int32 (the reference's ValueError).
fn push_varint(out: &mut Vec<u8>, n: i64) -> Option<()> {
    i32::try_from(n).ok()?;
    push_varlong(out, n);
    Some(())
}

fn push_bytes(out: &mut Vec<u8>, data: &[u8], span: Option<(usize, usize)>) -> Option<()> {
    match span {
        None => out.push(1),
        Some((a, b)) => {
            push_varint(out, (b - a) as i64)?;
            out.extend_from_slice(&data[a..b]);
        }
    }
    Some(())
}

const TIMESTAMP_TYPE_MASK: i16 = 0x08;
const DELETE_HORIZON_FLAG_MASK: i16 = 0x40;
const KEPT_ATTRIBUTE_BITS: i16 = 0x08 | 0x10 | 0x20;

/// The uncompressed v2 batch holding the records `keep` (increasing indexes) of `data`, as
/// `encode_batch` writes it, its records' max timestamp and the last kept record's offset
/// delta. None where the reference
/// raises (offsets not increasing, a negative timestamp other than -1, a field out of
/// range) or the region does not decode.
pub fn rebuild_v2(data: &[u8], count: i64, keep: &[u32], spec: &RebuildSpec) -> Option<(Vec<u8>, i64, i64)> {
    let decoded = decode_records(data, count).ok()?;
    let lat = spec.attributes & TIMESTAMP_TYPE_MASK != 0;
    let mut payload = Vec::with_capacity(data.len());
    let mut body = Vec::new();
    let mut last_delta: i64 = -1;
    let mut max_ts: i64 = -1;
    let mut base_ts: Option<i64> = spec.delete_horizon;
    for &k in keep {
        let r = decoded.records.get(k as usize)?;
        let ts = if lat { spec.max_timestamp } else { spec.base_timestamp.checked_add(r.timestamp_delta)? };
        let base = *base_ts.get_or_insert(ts);
        let delta = r.offset_delta;
        if delta <= last_delta || (ts < 0 && ts != -1) {
            return None;
        }
        body.clear();
        body.push(0);
        push_varlong(&mut body, ts.checked_sub(base)?);
        push_varint(&mut body, delta)?;
        push_bytes(&mut body, data, r.key)?;
        push_bytes(&mut body, data, r.value)?;
        let headers = &decoded.headers[r.first_header..r.end_header];
        push_varint(&mut body, headers.len() as i64)?;
        for h in headers {
            push_bytes(&mut body, data, Some(h.key))?;
            push_bytes(&mut body, data, h.value)?;
        }
        push_varint(&mut payload, body.len() as i64)?;
        payload.extend_from_slice(&body);
        last_delta = delta;
        max_ts = max_ts.max(ts);
    }
    let base_ts = base_ts?; // keep is never empty here
    if i64::from(spec.last_offset_delta) < last_delta {
        return None;
    }
    let batch_max_ts = if lat { spec.max_timestamp } else { max_ts };
    let mut attributes = spec.attributes & KEPT_ATTRIBUTE_BITS;
    if spec.delete_horizon.is_some() {
        attributes |= DELETE_HORIZON_FLAG_MASK;
    }
    let size = 61 + payload.len();
    let batch_length = i32::try_from(size - 12).ok()?;
    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(&spec.base_offset.to_be_bytes());
    out.extend_from_slice(&batch_length.to_be_bytes());
    out.extend_from_slice(&spec.partition_leader_epoch.to_be_bytes());
    out.push(2);
    out.extend_from_slice(&[0u8; 4]);
    out.extend_from_slice(&attributes.to_be_bytes());
    out.extend_from_slice(&spec.last_offset_delta.to_be_bytes());
    out.extend_from_slice(&base_ts.to_be_bytes());
    out.extend_from_slice(&batch_max_ts.to_be_bytes());
    out.extend_from_slice(&spec.producer_id.to_be_bytes());
    out.extend_from_slice(&spec.producer_epoch.to_be_bytes());
    out.extend_from_slice(&spec.base_sequence.to_be_bytes());
    out.extend_from_slice(&i32::try_from(keep.len()).ok()?.to_be_bytes());
    out.extend_from_slice(&payload);
    let crc = crate::crc::crc32c(&out[21..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    Some((out, max_ts, last_delta))
}

#[cfg(test)]
mod tests {
    use super::{md5, md5_many};

    #[test]
    fn fastmod_is_the_remainder() {
        for slots in [1usize, 2, 3, 7, 24, 1000, 2730, 5_592_405, 89_478_485, u32::MAX as usize] {
            let t = super::Table { slots, ..super::Table::new(24) };
            let t = super::Table { fastmod: Some((u64::MAX / slots as u64).wrapping_add(1)), ..t };
            let mut x: u32 = 12345;
            for probe in [0u32, 1, 2, slots as u32 - 1, slots as u32, 1 << 31, (1 << 31) - 1] {
                assert_eq!(t.slot_of(probe), probe as usize % slots, "{probe} % {slots}");
            }
            for _ in 0..10_000 {
                x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                let probe = x >> 1;
                assert_eq!(t.slot_of(probe), probe as usize % slots, "{probe} % {slots}");
            }
        }
    }

    #[test]
    fn lanes_equal_one_at_a_time() {
        // Every length around the one-block limit, in runs that leave partial lane groups.
        let keys: Vec<Vec<u8>> = (0..130usize).map(|n| (0..n).map(|i| (i * 31 + n) as u8).collect()).collect();
        for take in [1, 3, 4, 5, 9, 130] {
            let slices: Vec<&[u8]> = keys.iter().take(take).map(|k| k.as_slice()).collect();
            let mut out = vec![[0u8; 16]; slices.len()];
            md5_many(&slices, &mut out);
            for (k, d) in slices.iter().zip(&out) {
                assert_eq!(*d, md5(k), "key of {} bytes", k.len());
            }
        }
    }

    fn hex(d: [u8; 16]) -> String {
        d.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn rfc1321_vectors() {
        assert_eq!(hex(md5(b"")), "d41d8cd98f00b204e9800998ecf8427e");
        assert_eq!(hex(md5(b"abc")), "900150983cd24fb0d6963f7d28e17f72");
        assert_eq!(hex(md5(b"12345678901234567890123456789012345678901234567890123456789012345678901234567890")),
                   "57edf4a22be3c955ac49da2e2107b67a");
    }
}
