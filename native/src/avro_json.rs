//! Avro's binary encoding of one datum rendered as Avro's JSON encoding, the text
//! engine/schemas/avro_codec.py's `AvroCodec.render` writes (fastavro's read, then
//! `to_avro_json`, then `json.dumps(..., ensure_ascii=False, separators=(",", ":"))`).
//!
//! The schema comes in as a node table the Python side compiles once per schema
//! (`avro_codec._native_program`): named types are nodes that other nodes point to by index,
//! so recursive types need nothing special. Only the plain case is rendered here: whenever
//! the bytes are anything but a well-formed datum read the one way the reference reads it
//! (truncated, bytes left over, an index out of range, a length beyond the payload, invalid
//! UTF-8, a varint beyond 64 bits, a boolean byte other than 0 or 1, a map with a repeated
//! key, nesting deeper than `MAX_DEPTH`), the answer is None and the caller runs the
//! reference path, which says why, in its words. So the output is the reference's text or
//! nothing.
//!
//! Numbers as Python prints them: a double is `repr(float)` (shortest round-trip digits,
//! exponent form below 1e-4 and from 1e16 on); a float the shortest decimal of 1 to 9
//! significant digits (correctly rounded, ties to even) that reads back to the same 32-bit
//! value, printed as that double's repr; NaN and the infinities are the strings "NaN",
//! "Infinity", "-Infinity".

use std::fmt::Write;
use std::collections::HashSet;

/// Deeper values go to the reference path (its own recursion limits apply there).
const MAX_DEPTH: usize = 100;
/// A map key `to_avro_json` would take for its float wrapper: left to the reference.
const F32_FIELD: &[u8] = b"\x00f32";

/// One schema node; children are indexes into the program's node table.
#[derive(Debug, Clone)]
pub(crate) enum Node {
    Null,
    Boolean,
    /// `int` and `long`: both a zig-zag varint, printed as read.
    Long,
    Float,
    Double,
    Bytes,
    Str,
    Fixed(usize),
    /// The symbols: each as a JSON string and as itself.
    Enum(Vec<(String, String)>),
    Array(usize),
    Map(usize),
    /// Per branch: its label as a JSON string (None for the null branch) and its node.
    Union(Vec<(Option<String>, usize)>),
    /// Per field: its name as a JSON string and its node.
    Record(Vec<(String, usize)>),
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.remaining() {
            return None;
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Some(out)
    }

    /// A zig-zag varint of at most 64 bits (longer encodings: None).
    fn long(&mut self) -> Option<i64> {
        let mut n: u64 = 0;
        let mut shift: u32 = 0;
        loop {
            let b = *self.buf.get(self.pos)?;
            self.pos += 1;
            if shift == 63 && b > 1 {
                return None;
            }
            n |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                break;
            }
            shift += 7;
            if shift > 63 {
                return None;
            }
        }
        Some(((n >> 1) as i64) ^ -((n & 1) as i64))
    }

    /// A length prefix that fits in what is left.
    fn length(&mut self) -> Option<usize> {
        let n = self.long()?;
        if n < 0 || n as u64 > self.remaining() as u64 {
            return None;
        }
        Some(n as usize)
    }

    /// An array or map block count (absolute value; a negative count is followed by the
    /// block's byte size, read and ignored as the reference does). Counts larger than the
    /// whole payload are left to the reference (zero-width items could make them legal).
    fn block_count(&mut self) -> Option<usize> {
        let n = self.long()?;
        if n == i64::MIN {
            return None;
        }
        if n < 0 {
            self.long()?;
        }
        let count = n.unsigned_abs();
        if count > self.buf.len() as u64 {
            return None;
        }
        Some(count as usize)
    }
}

/// Render `payload` with `nodes` from `root`: the JSON text, or None (module docstring).
pub(crate) fn render(nodes: &[Node], root: usize, payload: &[u8]) -> Option<String> {
    let mut out = String::with_capacity(payload.len() * 2 + 16);
    render_into(nodes, root, payload, &mut out)?;
    Some(out)
}

/// [`render`] appended to `out`; on None, `out` holds part of it (the caller drops it).
pub(crate) fn render_into(nodes: &[Node], root: usize, payload: &[u8], out: &mut String) -> Option<()> {
    let mut reader = Reader { buf: payload, pos: 0 };
    value(nodes, root, &mut reader, out, 0)?;
    (reader.remaining() == 0).then_some(())
}

fn value(nodes: &[Node], node: usize, r: &mut Reader<'_>, out: &mut String, depth: usize) -> Option<()> {
    if depth > MAX_DEPTH {
        return None;
    }
    match nodes.get(node)? {
        Node::Null => out.push_str("null"),
        Node::Boolean => match r.take(1)?[0] {
            0 => out.push_str("false"),
            1 => out.push_str("true"),
            _ => return None,
        },
        Node::Long => {
            let v = r.long()?;
            out.push_str(&v.to_string());
        }
        Node::Float => {
            let raw: [u8; 4] = r.take(4)?.try_into().ok()?;
            push_f32(out, f32::from_le_bytes(raw))?;
        }
        Node::Double => {
            let raw: [u8; 8] = r.take(8)?.try_into().ok()?;
            push_f64(out, f64::from_le_bytes(raw));
        }
        Node::Bytes => {
            let n = r.length()?;
            push_latin1(out, r.take(n)?);
        }
        Node::Str => {
            let n = r.length()?;
            push_json_str(out, std::str::from_utf8(r.take(n)?).ok()?);
        }
        Node::Fixed(size) => push_latin1(out, r.take(*size)?),
        Node::Enum(symbols) => {
            let i = r.long()?;
            out.push_str(&symbols.get(usize::try_from(i).ok()?)?.0);
        }
        Node::Array(item) => array(nodes, *item, r, out, depth)?,
        Node::Map(item) => map(nodes, *item, r, out, depth)?,
        Node::Union(branches) => {
            let i = r.long()?;
            let (label, child) = branches.get(usize::try_from(i).ok()?)?;
            match label {
                None => value(nodes, *child, r, out, depth + 1)?,
                Some(label) => {
                    out.push('{');
                    out.push_str(label);
                    out.push(':');
                    value(nodes, *child, r, out, depth + 1)?;
                    out.push('}');
                }
            }
        }
        Node::Record(fields) => {
            out.push('{');
            for (k, (name, child)) in fields.iter().enumerate() {
                if k > 0 {
                    out.push(',');
                }
                out.push_str(name);
                out.push(':');
                value(nodes, *child, r, out, depth + 1)?;
            }
            out.push('}');
        }
    }
    Some(())
}

/// Whether the datum of `node` at `r` is one [`render`] renders, moving `r` past it: the
/// same checks as [`value`] without the text (what `--where` needs of the fields it skips).
fn check(nodes: &[Node], node: usize, r: &mut Reader<'_>, depth: usize) -> Option<()> {
    if depth > MAX_DEPTH {
        return None;
    }
    match nodes.get(node)? {
        Node::Null => {}
        Node::Boolean => {
            if r.take(1)?[0] > 1 {
                return None;
            }
        }
        Node::Long | Node::Enum(_) | Node::Union(_) => {
            let i = r.long()?;
            match nodes.get(node)? {
                Node::Enum(symbols) => {
                    symbols.get(usize::try_from(i).ok()?)?;
                }
                Node::Union(branches) => check(nodes, branches.get(usize::try_from(i).ok()?)?.1, r, depth + 1)?,
                _ => {}
            }
        }
        Node::Float => {
            r.take(4)?;
        }
        Node::Double => {
            r.take(8)?;
        }
        Node::Bytes => {
            let n = r.length()?;
            r.take(n)?;
        }
        Node::Str => {
            let n = r.length()?;
            std::str::from_utf8(r.take(n)?).ok()?;
        }
        Node::Fixed(size) => {
            r.take(*size)?;
        }
        Node::Array(item) => loop {
            let count = r.block_count()?;
            if count == 0 {
                break;
            }
            for _ in 0..count {
                check(nodes, *item, r, depth + 1)?;
            }
        },
        Node::Map(item) => {
            let mut keys: HashSet<&[u8]> = HashSet::new();
            loop {
                let count = r.block_count()?;
                if count == 0 {
                    break;
                }
                for _ in 0..count {
                    let n = r.length()?;
                    let key = r.take(n)?;
                    if key == F32_FIELD || !keys.insert(key) {
                        return None;
                    }
                    std::str::from_utf8(key).ok()?;
                    check(nodes, *item, r, depth + 1)?;
                }
            }
        }
        Node::Record(fields) => {
            for (_, child) in fields {
                check(nodes, *child, r, depth + 1)?;
            }
        }
    }
    Some(())
}

/// Whether `payload` is one datum [`render`] renders, nothing left over.
fn renders(nodes: &[Node], root: usize, payload: &[u8]) -> bool {
    let mut r = Reader { buf: payload, pos: 0 };
    check(nodes, root, &mut r, 0).is_some() && r.remaining() == 0
}

fn array(nodes: &[Node], item: usize, r: &mut Reader<'_>, out: &mut String, depth: usize) -> Option<()> {
    out.push('[');
    let mut first = true;
    loop {
        let count = r.block_count()?;
        if count == 0 {
            break;
        }
        for _ in 0..count {
            if !first {
                out.push(',');
            }
            first = false;
            value(nodes, item, r, out, depth + 1)?;
        }
    }
    out.push(']');
    Some(())
}

fn map(nodes: &[Node], item: usize, r: &mut Reader<'_>, out: &mut String, depth: usize) -> Option<()> {
    out.push('{');
    let mut keys: HashSet<&[u8]> = HashSet::new();
    loop {
        let count = r.block_count()?;
        if count == 0 {
            break;
        }
        for _ in 0..count {
            let n = r.length()?;
            let key = r.take(n)?;
            // A repeated key keeps its first place and its last value in the reference's
            // dict: left to it, as is the float wrapper's field name.
            if key == F32_FIELD {
                return None;
            }
            if !keys.is_empty() {
                out.push(',');
            }
            if !keys.insert(key) {
                return None;
            }
            push_json_str(out, std::str::from_utf8(key).ok()?);
            out.push(':');
            value(nodes, item, r, out, depth + 1)?;
        }
    }
    out.push('}');
    Some(())
}

// -------------------------------------------------------------------------------------
// One field of the rendered value, without building it

/// A scalar of the rendered value as `json.loads` gives it back.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Scalar {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
}

/// What [`extract`] finds at a path.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Extracted {
    Value(Scalar),
    Missing,
    /// Not answered here (a map on the way, a record or array at the end, a payload the
    /// renderer leaves to the reference): the caller takes the whole way.
    Bail,
}

enum Step {
    At(usize),
    Missing,
    Bail,
}

/// The value at `path` (names as JSON strings, as the program holds them) in the rendered
/// JSON of `payload`, walked as plog's `--where` walks
/// it (engine/inspect/scan_filter.py, `_walk`): a field of an object; through an object of
/// one member whose key is not the name (a union branch `{"string": ...}`, a one-field
/// record); at the end, an object of one member is its member. The payload must render
/// (checked first, so a payload the reference would not decode is never answered here).
pub(crate) fn extract(nodes: &[Node], root: usize, payload: &[u8], path: &[String]) -> Extracted {
    if !renders(nodes, root, payload) {
        return Extracted::Bail;
    }
    extract_rendered(nodes, root, payload, path)
}

/// [`extract`] on a payload known to render.
fn extract_rendered(nodes: &[Node], root: usize, payload: &[u8], path: &[String]) -> Extracted {
    let mut r = Reader { buf: payload, pos: 0 };
    let mut scratch = String::new();
    let mut node = root;
    for name in path {
        match lookup(nodes, node, &mut r, name, true, &mut scratch) {
            Some(Step::At(child)) => node = child,
            Some(Step::Missing) => return Extracted::Missing,
            Some(Step::Bail) | None => return Extracted::Bail,
        }
    }
    match scalar(nodes, node, &mut r, &mut scratch, true) {
        Some(found) => found,
        None => Extracted::Bail,
    }
}

/// Move `r` to member `name` of the value of `node` at `r` (an object in the JSON).
fn lookup(nodes: &[Node], node: usize, r: &mut Reader<'_>, name: &str, unwrap: bool, scratch: &mut String)
          -> Option<Step> {
    match nodes.get(node)? {
        Node::Record(fields) => {
            for (k, (field, child)) in fields.iter().enumerate() {
                if field == name {
                    for (_, before) in &fields[..k] {
                        check(nodes, *before, r, 0)?;
                    }
                    return Some(Step::At(*child));
                }
            }
            if unwrap && fields.len() == 1 {
                return lookup(nodes, fields[0].1, r, name, false, scratch);
            }
            Some(Step::Missing)
        }
        Node::Union(branches) => {
            let i = r.long()?;
            let (label, child) = branches.get(usize::try_from(i).ok()?)?;
            match label {
                None => Some(Step::Missing), // null
                Some(label) if label == name => Some(Step::At(*child)),
                Some(_) if unwrap => lookup(nodes, *child, r, name, false, scratch),
                Some(_) => Some(Step::Missing),
            }
        }
        Node::Map(_) => Some(Step::Bail),
        _ => Some(Step::Missing), // not an object
    }
}

/// The scalar of `node` at `r`; an object of one member is its member (`first`: once).
fn scalar(nodes: &[Node], node: usize, r: &mut Reader<'_>, scratch: &mut String, first: bool) -> Option<Extracted> {
    let found = match nodes.get(node)? {
        Node::Null => Scalar::Null,
        Node::Boolean => Scalar::Bool(r.take(1)?[0] == 1),
        Node::Long => Scalar::Int(r.long()?),
        Node::Float | Node::Double => {
            scratch.clear();
            value(nodes, node, r, scratch, 0)?;
            match scratch.as_str() {
                "\"NaN\"" => Scalar::Str("NaN".into()),
                "\"Infinity\"" => Scalar::Str("Infinity".into()),
                "\"-Infinity\"" => Scalar::Str("-Infinity".into()),
                text => Scalar::Float(text.parse().ok()?),
            }
        }
        Node::Bytes => {
            let n = r.length()?;
            Scalar::Str(r.take(n)?.iter().map(|&b| char::from(b)).collect())
        }
        Node::Fixed(size) => Scalar::Str(r.take(*size)?.iter().map(|&b| char::from(b)).collect()),
        Node::Str => {
            let n = r.length()?;
            Scalar::Str(std::str::from_utf8(r.take(n)?).ok()?.to_string())
        }
        Node::Enum(symbols) => {
            let i = r.long()?;
            Scalar::Str(symbols.get(usize::try_from(i).ok()?)?.1.clone())
        }
        Node::Union(branches) => {
            let i = r.long()?;
            let (label, child) = branches.get(usize::try_from(i).ok()?)?;
            return match label {
                None => Some(Extracted::Value(Scalar::Null)),
                Some(_) if first => scalar(nodes, *child, r, scratch, false),
                Some(_) => Some(Extracted::Bail), // an object left: the reference compares it
            };
        }
        Node::Record(fields) if first && fields.len() == 1 => return scalar(nodes, fields[0].1, r, scratch, false),
        Node::Record(_) | Node::Array(_) | Node::Map(_) => return Some(Extracted::Bail),
    };
    Some(Extracted::Value(found))
}

// -------------------------------------------------------------------------------------
// `--where` conditions over many values at once

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// One `value.path op literal` (engine/inspect/scan_filter.py's `Condition`); the literal
/// is a [`Scalar`] (an integer literal beyond 64 bits is never given here).
#[derive(Debug, Clone)]
pub(crate) struct Cond {
    pub(crate) path: Vec<String>,
    pub(crate) op: Op,
    pub(crate) literal: Scalar,
}

fn is_number(v: &Scalar) -> bool {
    matches!(v, Scalar::Int(_) | Scalar::Float(_))
}

/// Python's exact comparison of an int and a float (None with NaN).
fn cmp_int_float(i: i64, f: f64) -> Option<std::cmp::Ordering> {
    use std::cmp::Ordering;
    if f.is_nan() {
        return None;
    }
    if f >= 9_223_372_036_854_775_808.0 {
        return Some(Ordering::Less);
    }
    if f < -9_223_372_036_854_775_808.0 {
        return Some(Ordering::Greater);
    }
    let whole = f.trunc();
    match i.cmp(&(whole as i64)) {
        Ordering::Equal => (0.0f64).partial_cmp(&(f - whole)),
        other => Some(other),
    }
}

fn cmp_numbers(a: &Scalar, b: &Scalar) -> Option<std::cmp::Ordering> {
    match (a, b) {
        (Scalar::Int(x), Scalar::Int(y)) => Some(x.cmp(y)),
        (Scalar::Float(x), Scalar::Float(y)) => x.partial_cmp(y),
        (Scalar::Int(x), Scalar::Float(y)) => cmp_int_float(*x, *y),
        (Scalar::Float(x), Scalar::Int(y)) => cmp_int_float(*y, *x).map(std::cmp::Ordering::reverse),
        _ => None,
    }
}

/// `holds` of scan_filter.py on the value its walk found; None where the reference must
/// decide (a digit string beyond 64 bits compared with a number).
pub(crate) fn holds(cond: &Cond, got: Scalar) -> Option<bool> {
    use std::cmp::Ordering;
    let lit = &cond.literal;
    let mut got = got;
    if let Scalar::Str(text) = &got {
        let digits = text.strip_prefix('-').unwrap_or(text);
        if is_number(lit) && !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
            got = Scalar::Int(text.parse().ok()?); // Protobuf's JSON writes 64-bit integers as text
        }
    }
    if matches!(cond.op, Op::Eq | Op::Ne) {
        let equal = if is_number(&got) && is_number(lit) {
            cmp_numbers(&got, lit) == Some(Ordering::Equal)
        } else {
            match (&got, lit) {
                (Scalar::Null, Scalar::Null) => true,
                (Scalar::Bool(a), Scalar::Bool(b)) => a == b,
                (Scalar::Str(a), Scalar::Str(b)) => a == b,
                _ => false,
            }
        };
        return Some(if cond.op == Op::Eq { equal } else { !equal });
    }
    let order = if is_number(&got) && is_number(lit) {
        cmp_numbers(&got, lit)
    } else if let (Scalar::Str(a), Scalar::Str(b)) = (&got, lit) {
        Some(a.as_str().cmp(b.as_str())) // UTF-8 byte order is code point order
    } else {
        return Some(false);
    };
    Some(match order {
        None => false,
        Some(o) => match cond.op {
            Op::Lt => o == Ordering::Less,
            Op::Le => o != Ordering::Greater,
            Op::Gt => o == Ordering::Greater,
            Op::Ge => o != Ordering::Less,
            Op::Eq | Op::Ne => unreachable!("handled above"),
        },
    })
}

/// Whether every condition holds on the datum: Some(bool), or None where the reference
/// must decide (the datum or a path left to it).
pub(crate) fn all_hold(nodes: &[Node], root: usize, payload: &[u8], conds: &[Cond]) -> Option<bool> {
    if !renders(nodes, root, payload) {
        return None;
    }
    for cond in conds {
        match extract_rendered(nodes, root, payload, &cond.path) {
            Extracted::Bail => return None,
            Extracted::Missing => return Some(false),
            Extracted::Value(v) => {
                if !holds(cond, v)? {
                    return Some(false);
                }
            }
        }
    }
    Some(true)
}

/// A JSON string as Python's `json.dumps(s, ensure_ascii=False)` writes it.
pub(crate) fn push_json_str(out: &mut String, s: &str) {
    out.push('"');
    // Up to the first character to escape in one copy (all of most strings).
    let plain = s.bytes().position(|b| b < 0x20 || b == b'"' || b == b'\\').unwrap_or(s.len());
    out.push_str(&s[..plain]);
    for c in s[plain..].chars() {
        push_json_char(out, c);
    }
    out.push('"');
}

fn push_json_char(out: &mut String, c: char) {
    match c {
        '"' => out.push_str("\\\""),
        '\\' => out.push_str("\\\\"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\u{8}' => out.push_str("\\b"),
        '\u{c}' => out.push_str("\\f"),
        c if (c as u32) < 0x20 => {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            let v = c as u32;
            out.push_str("\\u00");
            out.push(HEX[(v >> 4) as usize] as char);
            out.push(HEX[(v & 15) as usize] as char);
        }
        c => out.push(c),
    }
}

/// Bytes as the JSON string of their latin-1 decoding (code point = byte).
fn push_latin1(out: &mut String, bytes: &[u8]) {
    out.push('"');
    for &b in bytes {
        push_json_char(out, char::from(b));
    }
    out.push('"');
}

/// A double as `json.dumps` writes it: `repr(x)`, or "NaN"/"Infinity"/"-Infinity" (strings
/// in Avro's JSON, as `to_avro_json` maps them).
pub(crate) fn push_f64(out: &mut String, x: f64) {
    if x.is_nan() {
        out.push_str("\"NaN\"");
    } else if x.is_infinite() {
        out.push_str(if x > 0.0 { "\"Infinity\"" } else { "\"-Infinity\"" });
    } else {
        push_py_repr(out, x);
    }
}

/// A float as `avro_codec._float32` picks it (module docstring); None if no decimal of up
/// to 9 digits reads back (cannot happen for a finite float: left to the reference).
pub(crate) fn push_f32(out: &mut String, x: f32) -> Option<()> {
    if x.is_nan() {
        out.push_str("\"NaN\"");
        return Some(());
    }
    if x.is_infinite() {
        out.push_str(if x > 0.0 { "\"Infinity\"" } else { "\"-Infinity\"" });
        return Some(());
    }
    if let Some(short) = short_normal_f32(x) {
        push_sci_as_repr(out, short.as_str());
        return Some(());
    }
    let wide = f64::from(x);
    // No decimal with fewer digits than the shortest that reads back as this float can read
    // back, so the reference's search (1, 2, ... digits) can start there.
    let mut shortest = Stack::new();
    write!(shortest, "{:e}", x).ok()?;
    let first = significant_digits(shortest.as_str()).max(1);
    for digits in first..=9usize {
        let mut text = Stack::new();
        write!(text, "{:.*e}", digits - 1, wide).ok()?;
        let short: f64 = text.as_str().parse().ok()?;
        let narrow = short as f32;
        if narrow.is_infinite() {
            continue; // rounded up past the largest float (3.403e+38): more digits
        }
        if narrow.to_bits() == x.to_bits() {
            push_py_repr(out, short);
            return Some(());
        }
    }
    None
}

/// A small text on the stack (a float's digits: never longer than ~30 bytes), for
/// `write!` without an allocation per number.
pub(crate) struct Stack {
    buf: [u8; 64],
    len: usize,
}

impl Stack {
    fn new() -> Stack {
        Stack { buf: [0; 64], len: 0 }
    }

    pub(crate) fn as_str(&self) -> &str {
        // Only whole `&str`s are written (write_str), so the bytes are UTF-8.
        std::str::from_utf8(&self.buf[..self.len]).unwrap_or("")
    }
}

impl std::fmt::Write for Stack {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.len + s.len();
        if end > self.buf.len() {
            return Err(std::fmt::Error);
        }
        self.buf[self.len..end].copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// The shortest digits that read back as `x` (`{:e}`) when `x` is a normal float and they
/// number at most 6: then they are what both references print. Avro's `_float32` takes the
/// first of 1, 2, ... correctly rounded digits whose value reads back, and protobuf's
/// `ToShortestFloat` the first of 6, 7, ...; fewer digits than the shortest never read back,
/// and rounded to n >= those digits (n <= 6) the value gives those digits padded with zeros
/// (a normal float lies within 2^-24 of them, relatively; half the 6-digit grid's spacing is
/// at least 5e-7), which read back. Both print the repr of the double nearest them: them.
/// None otherwise (a subnormal, more digits): the caller searches.
pub(crate) fn short_normal_f32(x: f32) -> Option<Stack> {
    if !x.is_normal() {
        return None;
    }
    let mut shortest = Stack::new();
    write!(shortest, "{:e}", x).ok()?;
    (significant_digits(shortest.as_str()) <= 6).then_some(shortest)
}

/// The mantissa digits of a `{:e}` text ("-1.2345e-7": 5).
fn significant_digits(sci: &str) -> usize {
    sci.split_once('e').map_or(0, |(m, _)| m.bytes().filter(u8::is_ascii_digit).count())
}

/// Whether the exact value of `x` (finite, not 0) lies halfway between two decimals of `n`
/// significant digits: its exact decimal expansion has `n + 1` significant digits, the last
/// a 5. Only then can the shortest digits (closest to `x` among those that read back) differ
/// from the correctly rounded ones (ties to even) that Python's repr takes.
fn may_tie(x: f64, n: usize) -> bool {
    let bits = x.abs().to_bits();
    let biased = (bits >> 52) as i32;
    let fraction = bits & ((1u64 << 52) - 1);
    let (mut m, mut e) = if biased == 0 { (fraction, -1074) } else { (fraction | (1u64 << 52), biased - 1075) };
    if m == 0 {
        return false;
    }
    let zeros = m.trailing_zeros();
    m >>= zeros;
    e += zeros as i32;
    // x = m * 2^e exactly, m odd. Past these bounds the expansion has more than 18
    // significant digits (n is at most 17): no tie.
    let mut v: u128 = if e >= 0 {
        if e > 70 {
            return false;
        }
        u128::from(m) << e
    } else {
        if -e > 27 {
            return false;
        }
        u128::from(m) * 5u128.pow((-e) as u32)
    };
    while v % 10 == 0 {
        v /= 10;
    }
    let last = v % 10;
    let mut digits = 0;
    while v > 0 {
        v /= 10;
        digits += 1;
    }
    digits == n + 1 && last == 5
}

/// Python's `repr` of a finite double: the shortest digits that read back, in fixed
/// notation when the decimal point falls within -4 < decpt <= 16, else `d.ddde±XX`.
fn push_py_repr(out: &mut String, x: f64) {
    if x == 0.0 {
        out.push_str(if x.is_sign_negative() { "-0.0" } else { "0.0" });
        return;
    }
    // The shortest digits that read back ("-1.2345e-7"); among strings of that length,
    // Python's repr takes the correctly rounded one (ties to even) when it reads back, where
    // the shortest algorithm may take the other neighbour of a tie (`may_tie`).
    let mut sci = Stack::new();
    if write!(sci, "{:e}", x).is_err() {
        return push_py_repr_slow(out, x);
    }
    let length = significant_digits(sci.as_str());
    if length > 0 && may_tie(x, length) {
        let mut rounded = Stack::new();
        if write!(rounded, "{:.*e}", length - 1, x).is_ok()
            && rounded.as_str() != sci.as_str()
            && rounded.as_str().parse::<f64>().ok() == Some(x)
        {
            sci = rounded;
        }
    }
    push_sci_as_repr(out, sci.as_str());
}

/// [`push_py_repr`] with heap strings (a text that did not fit the stack buffer).
fn push_py_repr_slow(out: &mut String, x: f64) {
    let mut sci = format!("{:e}", x);
    let length = significant_digits(&sci);
    if length > 0 {
        let rounded = format!("{:.*e}", length - 1, x);
        if rounded != sci && rounded.parse::<f64>().ok() == Some(x) {
            sci = rounded;
        }
    }
    push_sci_as_repr(out, &sci);
}

/// A `{:e}` text ("-1.2345e-7") written as Python's repr lays its digits out.
pub(crate) fn push_sci_as_repr(out: &mut String, sci: &str) {
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci, "0"));
    let exp: i64 = exp.parse().unwrap_or(0);
    let (negative, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, mantissa),
    };
    let mut digit_buf = [0u8; 40];
    let mut n = 0;
    for b in mantissa.bytes().filter(|b| *b != b'.').take(digit_buf.len()) {
        digit_buf[n] = b;
        n += 1;
    }
    let digits = std::str::from_utf8(&digit_buf[..n]).unwrap_or("0");
    let decpt = exp + 1;
    if negative {
        out.push('-');
    }
    if -4 < decpt && decpt <= 16 {
        if decpt <= 0 {
            out.push_str("0.");
            for _ in 0..(-decpt) {
                out.push('0');
            }
            out.push_str(digits);
        } else {
            let point = decpt as usize;
            if point >= digits.len() {
                out.push_str(digits);
                for _ in digits.len()..point {
                    out.push('0');
                }
                out.push_str(".0");
            } else {
                out.push_str(&digits[..point]);
                out.push('.');
                out.push_str(&digits[point..]);
            }
        }
    } else {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if exp < 0 { '-' } else { '+' });
        let magnitude = exp.unsigned_abs();
        if magnitude < 10 {
            out.push('0');
        }
        let _ = write!(out, "{magnitude}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repr(x: f64) -> String {
        let mut s = String::new();
        push_f64(&mut s, x);
        s
    }

    #[test]
    fn python_float_repr() {
        assert_eq!(repr(1e16), "1e+16");
        assert_eq!(repr(1e15), "1000000000000000.0");
        assert_eq!(repr(0.0001), "0.0001");
        assert_eq!(repr(0.00001), "1e-05");
        assert_eq!(repr(-1.5e-300), "-1.5e-300");
        assert_eq!(repr(123.456), "123.456");
        assert_eq!(repr(-0.0), "-0.0");
    }

    #[test]
    fn float32_shortest() {
        let mut s = String::new();
        push_f32(&mut s, 0.1f32).unwrap();
        assert_eq!(s, "0.1");
    }
}
