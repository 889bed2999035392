//! DumpLogSegments' per-record text (engine/inspect/dump_render.py, `TextRenderer.records`,
//! the common case: a v2 data batch, metadata shown, default decoders) and the JDK's
//! `new String(bytes, UTF_8)` it prints keys and values with (formats/java.py,
//! `utf8_decode`: the reference this file ports, malformed input included).

const REPLACEMENT: char = '\u{FFFD}';

fn cont(b: u8) -> bool {
    (b & 0xC0) == 0x80
}

/// Append `new String(src, UTF_8)` as the JDK (17+) decodes it. Valid UTF-8 decodes the
/// same everywhere; malformed input follows the JDK's String decoder (see formats/java.py).
pub fn push_jdk_utf8(src: &[u8], out: &mut String) {
    match std::str::from_utf8(src) {
        Ok(text) => out.push_str(text),
        Err(_) => push_slow(src, out),
    }
}

fn push_char(out: &mut String, code: u32) {
    out.push(char::from_u32(code).unwrap_or(REPLACEMENT));
}

fn push_slow(src: &[u8], out: &mut String) {
    let sl = src.len();
    let mut sp = 0usize;
    while sp < sl {
        let b1 = src[sp];
        sp += 1;
        if b1 < 0x80 {
            out.push(b1 as char);
        } else if (0xC2..=0xDF).contains(&b1) {
            if sp < sl {
                let b2 = src[sp];
                if !cont(b2) {
                    out.push(REPLACEMENT);
                } else {
                    sp += 1;
                    push_char(out, (u32::from(b1 & 0x1F) << 6) | u32::from(b2 & 0x3F));
                }
                continue;
            }
            out.push(REPLACEMENT);
            break;
        } else if (0xE0..=0xEF).contains(&b1) {
            if sp + 1 < sl {
                let (b2, b3) = (src[sp], src[sp + 1]);
                let bad2 = (b1 == 0xE0 && (b2 & 0xE0) == 0x80) || !cont(b2);
                if bad2 || !cont(b3) {
                    // malformed3: the bad sequence spans b1 alone, or b1 and b2
                    out.push(REPLACEMENT);
                    sp += if bad2 { 0 } else { 1 };
                } else {
                    sp += 2;
                    let c = (u32::from(b1 & 0x0F) << 12) | (u32::from(b2 & 0x3F) << 6) | u32::from(b3 & 0x3F);
                    if (0xD800..=0xDFFF).contains(&c) {
                        out.push(REPLACEMENT);
                    } else {
                        push_char(out, c);
                    }
                }
                continue;
            }
            if sp < sl && ((b1 == 0xE0 && (src[sp] & 0xE0) == 0x80) || !cont(src[sp])) {
                out.push(REPLACEMENT);
                continue;
            }
            out.push(REPLACEMENT);
            break;
        } else if (0xF0..=0xF7).contains(&b1) {
            if sp + 2 < sl {
                let (b2, b3, b4) = (src[sp], src[sp + 1], src[sp + 2]);
                let uc = (u32::from(b1 & 0x07) << 18)
                    | (u32::from(b2 & 0x3F) << 12)
                    | (u32::from(b3 & 0x3F) << 6)
                    | u32::from(b4 & 0x3F);
                if !(cont(b2) && cont(b3) && cont(b4) && (0x10000..=0x10FFFF).contains(&uc)) {
                    out.push(REPLACEMENT);
                    sp = sp - 1 + malformed4(src, sp - 1);
                } else {
                    sp += 3;
                    push_char(out, uc);
                }
                continue;
            }
            if b1 > 0xF4 || (sp < sl && malformed4_2(b1, src[sp])) {
                out.push(REPLACEMENT);
                continue;
            }
            sp += 1;
            out.push(REPLACEMENT);
            if sp < sl && !cont(src[sp]) {
                continue;
            }
            break;
        } else {
            out.push(REPLACEMENT);
        }
    }
}

fn malformed4_2(b1: u8, b2: u8) -> bool {
    (b1 == 0xF0 && !(0x90..=0xBF).contains(&b2)) || (b1 == 0xF4 && (b2 & 0xF0) != 0x80) || !cont(b2)
}

/// How many bytes a bad 4-byte sequence starting at `sp` spans (at least 3 bytes follow).
fn malformed4(src: &[u8], sp: usize) -> usize {
    let (b1, b2) = (src[sp], src[sp + 1]);
    if b1 > 0xF4 || malformed4_2(b1, b2) {
        return 1;
    }
    if !cont(src[sp + 2]) {
        return 2;
    }
    3
}

/// One record's fields, as the renderer prints them.
pub struct RecordLine<'a> {
    pub offset: i64,
    pub timestamp: i64,
    pub sequence: i64,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
}

fn size(field: Option<&[u8]>) -> i64 {
    field.map_or(-1, |b| b.len() as i64)
}

/// Append one line (no newline): `| offset: O TT: T keySize: K valueSize: V sequence: S
/// headerKeys: [h1,h2]` and, with `print_data`, ` key: ...` (non-null key) and ` payload: ...`
/// (non-null value). `header_keys` are already Java strings.
pub fn push_line(out: &mut String, r: &RecordLine, tt: &str, header_keys: &[&str], print_data: bool) {
    use std::fmt::Write;
    let _ = write!(
        out,
        "| offset: {} {}: {} keySize: {} valueSize: {} sequence: {} headerKeys: [",
        r.offset,
        tt,
        r.timestamp,
        size(r.key),
        size(r.value),
        r.sequence
    );
    for (i, k) in header_keys.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(k);
    }
    out.push(']');
    if print_data {
        if let Some(key) = r.key {
            out.push_str(" key: ");
            push_jdk_utf8(key, out);
        }
        if let Some(value) = r.value {
            out.push_str(" payload: ");
            push_jdk_utf8(value, out);
        }
    }
}
