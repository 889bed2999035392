//! Protobuf's wire format of one message rendered as the JSON text
//! engine/schemas/protobuf_codec.py's `ProtobufCodec.render` writes (the `protobuf` runtime's
//! parse, then `json_format.MessageToDict(..., always_print_fields_with_no_presence=True)`,
//! then `json.dumps(..., ensure_ascii=False, separators=(",", ":"))`).
//!
//! The schema comes in as a plan the Python side compiles once per schema
//! (`protobuf_codec._native_plan`): one entry per message type (fields in declaration
//! order, each with its number, pre-rendered JSON name, kind, presence and oneof), one per
//! enum type (number -> pre-rendered JSON name), and the Confluent message-index paths of the
//! schema's messages. Message types point to each other by index, so recursion needs nothing
//! special.
//!
//! What `MessageToDict` prints, and so what is printed here: first the fields the runtime
//! lists as set (`ListFields`, in field-number order: a field with presence when it was on
//! the wire, the winning member of a oneof, a field without presence when its value is not
//! the default (bits, so -0.0 counts as set), a repeated field with elements), then every
//! field without presence not printed yet in declaration order, with its default (`[]` for
//! repeated, `{}` for maps). Scalars: 64-bit integers as strings, 32-bit ones as numbers,
//! enums by name (an unknown number of an open enum as the number), bytes in base64,
//! doubles as Python's `repr`, floats as `ToShortestFloat` (the first of 6, 7, ... digits that
//! reads back: not the shortest digits, e.g. `1.4013e-45` for the smallest subnormal), NaN and
//! the infinities as strings.
//!
//! Only the plain case is rendered: whenever the bytes are anything but what the reference
//! reads one way only (truncated, a varint beyond 64 bits, a tag or length beyond 5 bytes,
//! field number 0, a group or a wire type 6/7, a wire type other than the field's (the runtime
//! keeps those as unknown fields), a 32-bit value out of its range, a bool other than 0/1,
//! invalid UTF-8, a singular message field twice (the runtime merges them), a map with more
//! than one entry (the runtime's map order is its hash table's), a well-known type or any type
//! the plan marks unsupported on the wire, nesting deeper than `MAX_DEPTH`), the answer is None
//! and the caller runs the reference path, which says why, in its words. So the output is the
//! reference's text or nothing.

use std::fmt::Write;

use crate::avro_json::{push_f64, push_json_str, push_sci_as_repr, short_normal_f32};

/// Deeper messages go to the reference path (the runtime's own recursion limit is 100).
const MAX_DEPTH: usize = 64;

/// A field's type; children are indexes into the plan's message or enum table.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Kind {
    Int32,
    Int64,
    UInt32,
    UInt64,
    SInt32,
    SInt64,
    Fixed32,
    Fixed64,
    SFixed32,
    SFixed64,
    Bool,
    Float,
    Double,
    Str,
    Bytes,
    Enum(usize),
    Message(usize),
    /// Anything the plan does not render (a group, a closed enum, a custom default, ...):
    /// the reference path renders a message where it is on the wire or needs its default.
    Unsupported,
}

impl Kind {
    /// The wire type of one value of this kind (None: no wire form rendered here).
    fn wire_type(self) -> Option<u8> {
        Some(match self {
            Kind::Int32 | Kind::Int64 | Kind::UInt32 | Kind::UInt64 | Kind::SInt32 | Kind::SInt64 | Kind::Bool
            | Kind::Enum(_) => 0,
            Kind::Fixed64 | Kind::SFixed64 | Kind::Double => 1,
            Kind::Str | Kind::Bytes | Kind::Message(_) => 2,
            Kind::Fixed32 | Kind::SFixed32 | Kind::Float => 5,
            Kind::Unsupported => return None,
        })
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Field {
    pub(crate) number: u32,
    /// The name as a JSON string (quotes included).
    pub(crate) name: String,
    pub(crate) kind: Kind,
    pub(crate) repeated: bool,
    /// A map field: `kind` is the map entry message (key field 1, value field 2).
    pub(crate) map: bool,
    pub(crate) presence: bool,
    pub(crate) oneof: Option<usize>,
}

#[derive(Debug, Clone)]
pub(crate) struct Message {
    /// False for a type the reference renders in its own way (well-known types...).
    pub(crate) supported: bool,
    /// Declaration order.
    pub(crate) fields: Vec<Field>,
    /// (number, field index), sorted by number.
    pub(crate) by_number: Vec<(u32, usize)>,
    pub(crate) oneofs: usize,
}

impl Message {
    pub(crate) fn new(supported: bool, fields: Vec<Field>) -> Message {
        let mut by_number: Vec<(u32, usize)> = fields.iter().enumerate().map(|(i, f)| (f.number, i)).collect();
        by_number.sort_unstable();
        let oneofs = fields.iter().filter_map(|f| f.oneof).map(|o| o + 1).max().unwrap_or(0);
        Message { supported, fields, by_number, oneofs }
    }

    /// The rank (position in number order) of the field numbered `number`.
    fn rank(&self, number: u32) -> Option<usize> {
        self.by_number.binary_search_by_key(&number, |&(n, _)| n).ok()
    }
}

pub(crate) struct Plan {
    pub(crate) messages: Vec<Message>,
    /// Per enum: (number, name as a JSON string), sorted by number.
    pub(crate) enums: Vec<Vec<(i32, String)>>,
    /// (message indexes, message): the Confluent index paths the schema's messages answer to.
    pub(crate) roots: Vec<(Vec<u64>, usize)>,
}

/// One value of a known field on the wire: `val` the varint or fixed bits, or for wire
/// type 2 the content at `start..end`.
#[derive(Clone, Copy)]
struct Occ {
    rank: u32,
    wt: u8,
    val: u64,
    start: usize,
    end: usize,
}

/// A varint of at most 64 bits at `buf[*pos..]` (longer or truncated: None).
fn varint(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let mut n: u64 = 0;
    for shift in (0..64).step_by(7) {
        let b = *buf.get(*pos)?;
        *pos += 1;
        if shift == 63 && b > 1 {
            return None;
        }
        n |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(n);
        }
    }
    None
}

/// A tag or a length: the runtime reads those as at most 5 bytes (longer: None).
fn varint32(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let start = *pos;
    let v = varint(buf, pos)?;
    if *pos - start > 5 {
        return None;
    }
    Some(v)
}

fn fixed(buf: &[u8], pos: &mut usize, width: usize) -> Option<u64> {
    let end = pos.checked_add(width)?;
    let raw = buf.get(*pos..end)?;
    *pos = end;
    let mut v: u64 = 0;
    for (i, &b) in raw.iter().enumerate() {
        v |= u64::from(b) << (8 * i);
    }
    Some(v)
}

/// Every value of a known field in `buf`, in wire order, or None. Unknown fields are
/// skipped where `unknown_ok`, else None (a map entry with one is kept by the runtime as an
/// unknown field of the map's message, not as an entry).
fn scan(msg: &Message, buf: &[u8], unknown_ok: bool) -> Option<Vec<Occ>> {
    // Room for one value per field (the common message) before any growth.
    let mut occs = Vec::with_capacity(msg.fields.len().min(buf.len()) + 1);
    let mut pos = 0usize;
    while pos < buf.len() {
        let tag = varint32(buf, &mut pos)?;
        let number = tag >> 3;
        if number == 0 || number > 0x1fff_ffff {
            return None;
        }
        let wt = (tag & 7) as u8;
        let (val, start, end) = match wt {
            0 => (varint(buf, &mut pos)?, 0, 0),
            1 => (fixed(buf, &mut pos, 8)?, 0, 0),
            5 => (fixed(buf, &mut pos, 4)?, 0, 0),
            2 => {
                let n = varint32(buf, &mut pos)?;
                if n > (buf.len() - pos) as u64 {
                    return None;
                }
                let start = pos;
                pos += n as usize;
                (0, start, pos)
            }
            _ => return None, // groups, and wire types 6 and 7
        };
        let Some(rank) = msg.rank(number as u32) else {
            if !unknown_ok {
                return None;
            }
            continue; // an unknown field: kept by the runtime, not printed
        };
        let field = &msg.fields[msg.by_number[rank].1];
        let expected = field.kind.wire_type()?;
        let packed = field.repeated && !field.map && wt == 2 && expected != 2;
        if wt != expected && !packed {
            return None;
        }
        occs.push(Occ { rank: rank as u32, wt, val, start, end });
    }
    Some(occs)
}

/// Render the message `root` of `plan` from `payload`: the JSON text, or None (module docstring).
pub(crate) fn render(plan: &Plan, root: usize, payload: &[u8]) -> Option<String> {
    let mut out = String::with_capacity(payload.len() * 2 + 64);
    message(plan, root, payload, &mut out, 0)?;
    Some(out)
}

/// [`render`] appended to `out`; on None, `out` holds part of it (the caller drops it).
pub(crate) fn render_into(plan: &Plan, root: usize, payload: &[u8], out: &mut String) -> Option<()> {
    message(plan, root, payload, out, 0)
}

/// The message indexes at `buf[*pos..]` as the Confluent serializers write them (a zig-zag
/// count, 0 the short form of `[0]`, then zig-zag indexes), then the root they name.
pub(crate) fn root_of(plan: &Plan, buf: &[u8], pos: &mut usize) -> Option<usize> {
    // formats/confluent_wire.py's read_message_indexes, through varint.rs's twin of its varints.
    let next = |pos: &mut usize| -> Option<i64> {
        let (v, after) = crate::varint::read_varint(buf, *pos as i64).ok()?;
        *pos = usize::try_from(after).ok()?;
        Some(v)
    };
    let count = next(pos)?;
    if count == 0 {
        return plan.roots.iter().find(|(p, _)| p.as_slice() == [0]).map(|(_, m)| *m);
    }
    if count < 0 || count as u64 > (buf.len() - *pos) as u64 {
        return None;
    }
    // Short paths (every real schema's) on the stack.
    let mut short = [0u64; 8];
    let mut long: Vec<u64> = Vec::new();
    for i in 0..count as usize {
        let index = u64::try_from(next(pos)?).ok()?;
        if count <= 8 {
            short[i] = index;
        } else {
            long.push(index);
        }
    }
    let path: &[u64] = if count <= 8 { &short[..count as usize] } else { &long };
    plan.roots.iter().find(|(p, _)| p.as_slice() == path).map(|(_, m)| *m)
}

fn unzigzag(n: u64) -> i64 {
    ((n >> 1) as i64) ^ -((n & 1) as i64)
}

fn message(plan: &Plan, index: usize, buf: &[u8], out: &mut String, depth: usize) -> Option<()> {
    if depth > MAX_DEPTH {
        return None;
    }
    let msg = plan.messages.get(index)?;
    if !msg.supported {
        return None;
    }
    let mut occs = scan(msg, buf, true)?;
    // The winning member of each oneof: the last one on the wire.
    let mut winners: Vec<Option<u32>> = vec![None; msg.oneofs];
    for o in &occs {
        if let Some(k) = msg.fields[msg.by_number[o.rank as usize].1].oneof {
            winners[k] = Some(o.rank);
        }
    }
    if !occs.windows(2).all(|w| w[0].rank <= w[1].rank) {
        occs.sort_by_key(|o| o.rank); // stable: wire order kept within a field
    }
    let mut printed = Printed::new(msg.fields.len());
    out.push('{');
    let mut first = true;
    let mut i = 0;
    while i < occs.len() {
        let rank = occs[i].rank;
        let mut j = i;
        while j < occs.len() && occs[j].rank == rank {
            j += 1;
        }
        let group = &occs[i..j];
        i = j;
        let fi = msg.by_number[rank as usize].1;
        let field = &msg.fields[fi];
        if let Some(k) = field.oneof {
            if winners[k] != Some(rank) {
                // A member another one replaced: not printed, but the runtime parsed it (and
                // fails where it does not parse).
                let mut scratch = String::new();
                singular_field(plan, field, group, buf, &mut scratch, depth)?;
                continue;
            }
        }
        let mark = out.len();
        if !first {
            out.push(',');
        }
        out.push_str(&field.name);
        out.push(':');
        let shown = if field.map {
            map_field(plan, field, group, buf, out, depth)?
        } else if field.repeated {
            repeated_field(plan, field, group, buf, out, depth)?
        } else {
            singular_field(plan, field, group, buf, out, depth)?
        };
        if shown {
            printed.set(fi);
            first = false;
        } else {
            out.truncate(mark);
        }
    }
    push_defaults(plan, msg, &printed, first, out)?;
    out.push('}');
    Some(())
}

/// Which fields of a message were printed: bits on the stack for up to 128 fields (no
/// allocation per message), a vector beyond.
struct Printed {
    bits: u128,
    more: Vec<bool>,
}

impl Printed {
    fn new(fields: usize) -> Printed {
        Printed { bits: 0, more: if fields > 128 { vec![false; fields] } else { Vec::new() } }
    }

    fn set(&mut self, i: usize) {
        if self.more.is_empty() {
            self.bits |= 1u128 << i;
        } else {
            self.more[i] = true;
        }
    }

    fn get(&self, i: usize) -> bool {
        if self.more.is_empty() {
            self.bits & (1u128 << i) != 0
        } else {
            self.more[i]
        }
    }
}

/// The fields without presence not printed yet, in declaration order, with their defaults.
fn push_defaults(plan: &Plan, msg: &Message, printed: &Printed, mut first: bool, out: &mut String) -> Option<()> {
    for (fi, field) in msg.fields.iter().enumerate() {
        if printed.get(fi) || field.presence {
            continue;
        }
        if !first {
            out.push(',');
        }
        first = false;
        out.push_str(&field.name);
        out.push(':');
        if field.map {
            out.push_str("{}");
        } else if field.repeated {
            out.push_str("[]");
        } else {
            default_value(plan, field.kind, out)?;
        }
    }
    Some(())
}

/// A singular field's value (the last on the wire); false when it counts as not set.
fn singular_field(plan: &Plan, field: &Field, group: &[Occ], buf: &[u8], out: &mut String, depth: usize)
    -> Option<bool> {
    let (last, earlier) = group.split_last()?;
    for o in earlier {
        // Replaced by the last value, but parsed by the runtime (a bad string fails there).
        scalar(plan, field.kind, o, buf, &mut String::new())?;
    }
    if let Kind::Message(m) = field.kind {
        if group.len() > 1 {
            return None; // merged by the runtime
        }
        message(plan, m, buf.get(last.start..last.end)?, out, depth + 1)?;
        return Some(true);
    }
    if !field.presence {
        let default = match field.kind {
            Kind::Str | Kind::Bytes => last.start == last.end,
            // Numbers: bits (so -0.0 is set); a varint the runtime would truncate to 32 bits
            // is not 0 here, and the render below leaves it to the reference.
            _ => last.val == 0,
        };
        if default {
            return Some(false);
        }
    }
    scalar(plan, field.kind, last, buf, out)?;
    Some(true)
}

fn repeated_field(plan: &Plan, field: &Field, group: &[Occ], buf: &[u8], out: &mut String, depth: usize)
    -> Option<bool> {
    out.push('[');
    let mut n = 0usize;
    for o in group {
        if o.wt == 2 && field.kind.wire_type() != Some(2) {
            // Packed: values back to back.
            let content = buf.get(o.start..o.end)?;
            let mut pos = 0;
            let wt = field.kind.wire_type()?;
            while pos < content.len() {
                let val = match wt {
                    0 => varint(content, &mut pos)?,
                    1 => fixed(content, &mut pos, 8)?,
                    _ => fixed(content, &mut pos, 4)?,
                };
                if n > 0 {
                    out.push(',');
                }
                n += 1;
                scalar(plan, field.kind, &Occ { rank: o.rank, wt, val, start: 0, end: 0 }, buf, out)?;
            }
            continue;
        }
        if n > 0 {
            out.push(',');
        }
        n += 1;
        match field.kind {
            Kind::Message(m) => message(plan, m, buf.get(o.start..o.end)?, out, depth + 1)?,
            kind => scalar(plan, kind, o, buf, out)?,
        }
    }
    out.push(']');
    Some(n > 0)
}

/// A map of one entry (more: None, as the runtime's order is its hash table's).
fn map_field(plan: &Plan, field: &Field, group: &[Occ], buf: &[u8], out: &mut String, depth: usize)
    -> Option<bool> {
    if group.len() != 1 {
        return None;
    }
    let Kind::Message(entry) = field.kind else { return None };
    let entry_msg = plan.messages.get(entry)?;
    if !entry_msg.supported {
        return None;
    }
    let content = buf.get(group[0].start..group[0].end)?;
    let occs = scan(entry_msg, content, false)?;
    let key_field = entry_msg.fields.iter().find(|f| f.number == 1)?;
    let value_field = entry_msg.fields.iter().find(|f| f.number == 2)?;
    let key_rank = entry_msg.rank(1)? as u32;
    let value_rank = entry_msg.rank(2)? as u32;
    out.push('{');
    // The key as MessageToDict records it: str(key), 'true'/'false' for a bool.
    match occs.iter().rev().find(|o| o.rank == key_rank) {
        Some(k) => match key_field.kind {
            Kind::Str => scalar(plan, Kind::Str, k, content, out)?,
            Kind::Bool => out.push_str(if scalar_val_bool(k)? { "\"true\"" } else { "\"false\"" }),
            kind => {
                let mut text = String::new();
                scalar(plan, kind, k, content, &mut text)?;
                if text.starts_with('"') {
                    out.push_str(&text);
                } else {
                    out.push('"');
                    out.push_str(&text);
                    out.push('"');
                }
            }
        },
        None => match key_field.kind {
            Kind::Str => out.push_str("\"\""),
            Kind::Bool => out.push_str("\"false\""),
            Kind::Unsupported => return None,
            _ => out.push_str("\"0\""),
        },
    }
    out.push(':');
    let values: Vec<&Occ> = occs.iter().filter(|o| o.rank == value_rank).collect();
    match (values.last(), value_field.kind) {
        (None, Kind::Message(m)) => message(plan, m, &[], out, depth + 1)?,
        (None, kind) => default_value(plan, kind, out)?,
        (Some(v), Kind::Message(m)) => {
            if values.len() > 1 {
                return None;
            }
            message(plan, m, content.get(v.start..v.end)?, out, depth + 1)?
        }
        (Some(v), kind) => scalar(plan, kind, v, content, out)?,
    }
    out.push('}');
    Some(true)
}

fn scalar_val_bool(o: &Occ) -> Option<bool> {
    match o.val {
        0 => Some(false),
        1 => Some(true),
        _ => None,
    }
}

fn default_value(plan: &Plan, kind: Kind, out: &mut String) -> Option<()> {
    match kind {
        Kind::Int32 | Kind::UInt32 | Kind::SInt32 | Kind::Fixed32 | Kind::SFixed32 => out.push('0'),
        Kind::Int64 | Kind::UInt64 | Kind::SInt64 | Kind::Fixed64 | Kind::SFixed64 => out.push_str("\"0\""),
        Kind::Bool => out.push_str("false"),
        Kind::Float | Kind::Double => out.push_str("0.0"),
        Kind::Str | Kind::Bytes => out.push_str("\"\""),
        Kind::Enum(e) => push_enum(plan, e, 0, out)?,
        Kind::Message(_) | Kind::Unsupported => return None,
    }
    Some(())
}

fn push_enum(plan: &Plan, e: usize, number: i32, out: &mut String) -> Option<()> {
    let values = plan.enums.get(e)?;
    match values.binary_search_by_key(&number, |(n, _)| *n) {
        Ok(i) => out.push_str(&values[i].1),
        Err(_) => push_num(out, number), // an open enum's unknown number
    }
    Some(())
}

/// A varint as the 32-bit signed value it encodes (sign-extended to 64 bits when negative).
fn int32_of(v: u64) -> Option<i32> {
    i32::try_from(v as i64).ok()
}

fn scalar(plan: &Plan, kind: Kind, o: &Occ, buf: &[u8], out: &mut String) -> Option<()> {
    let v = o.val;
    match kind {
        Kind::Int32 => push_num(out, int32_of(v)?),
        Kind::Int64 => push_quoted(out, v as i64),
        Kind::UInt32 => push_num(out, u32::try_from(v).ok()?),
        Kind::UInt64 | Kind::Fixed64 => push_quoted(out, v),
        Kind::SInt32 => {
            let n = u32::try_from(v).ok()?;
            push_num(out, ((n >> 1) as i32) ^ -((n & 1) as i32));
        }
        Kind::SInt64 => push_quoted(out, unzigzag(v)),
        Kind::Fixed32 => push_num(out, v as u32),
        Kind::SFixed32 => push_num(out, v as u32 as i32),
        Kind::SFixed64 => push_quoted(out, v as i64),
        Kind::Bool => out.push_str(if scalar_val_bool(o)? { "true" } else { "false" }),
        Kind::Float => push_f32(out, f32::from_bits(v as u32))?,
        Kind::Double => push_f64(out, f64::from_bits(v)),
        Kind::Str => push_json_str(out, std::str::from_utf8(buf.get(o.start..o.end)?).ok()?),
        Kind::Bytes => push_base64(out, buf.get(o.start..o.end)?),
        Kind::Enum(e) => push_enum(plan, e, int32_of(v)?, out)?,
        Kind::Message(_) | Kind::Unsupported => return None,
    }
    Some(())
}

/// A float as `json_format` gives it (`type_checkers.ToShortestFloat`: the first of 6, 7, ...
/// significant digits, correctly rounded, whose double reads back as the same 32-bit value),
/// printed as that double's repr. None where the reference's `struct.pack` would overflow.
fn push_f32(out: &mut String, x: f32) -> Option<()> {
    if x.is_nan() || x.is_infinite() {
        push_f64(out, f64::from(x)); // "NaN", "Infinity", "-Infinity", as MessageToDict maps them
        return Some(());
    }
    if let Some(short) = short_normal_f32(x) {
        push_sci_as_repr(out, short.as_str());
        return Some(());
    }
    let wide = f64::from(x);
    for digits in 6..=17usize {
        let short: f64 = format!("{:.*e}", digits - 1, wide).parse().ok()?;
        let narrow = short as f32;
        if narrow.is_infinite() {
            return None;
        }
        if f64::from(narrow) == wide {
            push_f64(out, short);
            return Some(());
        }
    }
    None
}

fn push_num(out: &mut String, n: impl std::fmt::Display) {
    let _ = write!(out, "{n}"); // writing to a String cannot fail
}

/// A 64-bit integer as MessageToDict gives it: a string.
fn push_quoted(out: &mut String, n: impl std::fmt::Display) {
    let _ = write!(out, "\"{n}\"");
}

/// Standard base64 with padding, in quotes (`base64.b64encode(value).decode()`).
fn push_base64(out: &mut String, data: &[u8]) {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    out.push('"');
    for chunk in data.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for k in 0..4 {
            if k <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * k)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_python() {
        for (data, want) in [(&b""[..], "\"\""), (b"f", "\"Zg==\""), (b"fo", "\"Zm8=\""), (b"foo", "\"Zm9v\""),
                             (b"\xff\xfe\x00\x01", "\"//4AAQ==\"")] {
            let mut s = String::new();
            push_base64(&mut s, data);
            assert_eq!(s, want);
        }
    }
}
