"""``new String(bytes, UTF_8)`` as the JDK (17+) decodes malformed input.

Valid UTF-8 decodes the same everywhere. Malformed input does not: Python's ``"replace"``
handler follows Unicode's "maximal subpart" rule, while the JDK's String decoder has its
own (``String.decodeUTF8_UTF16``): a bad 3- or 4-byte sequence may be one U+FFFD or
several depending on which byte is wrong, an encoded surrogate (``ED A0..BF ..``) is one
U+FFFD rather than three, and a sequence cut off by the end of the input is a single
U+FFFD (its remaining continuation bytes are dropped). Kafka's tools print keys, values
and header keys this way, so plog's text output must too.

Invariant: for valid UTF-8 this equals ``data.decode("utf-8")``; it never raises.
"""

from __future__ import annotations

REPL = "\ufffd"


def _cont(b: int) -> bool:
    return (b & 0xC0) == 0x80


def java_utf8_decode(data: bytes | bytearray | memoryview) -> str:
    raw = bytes(data)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return _decode_slow(raw)


def _decode_slow(src: bytes) -> str:
    out: list[str] = []
    append = out.append
    sp, sl = 0, len(src)
    while sp < sl:
        b1 = src[sp]
        sp += 1
        if b1 < 0x80:
            append(chr(b1))
        elif 0xC2 <= b1 <= 0xDF:
            if sp < sl:
                b2 = src[sp]
                sp += 1
                if not _cont(b2):
                    append(REPL)
                    sp -= 1
                else:
                    append(chr(((b1 & 0x1F) << 6) | (b2 & 0x3F)))
                continue
            append(REPL)
            break
        elif 0xE0 <= b1 <= 0xEF:
            if sp + 1 < sl:
                b2, b3 = src[sp], src[sp + 1]
                sp += 2
                if (b1 == 0xE0 and (b2 & 0xE0) == 0x80) or not _cont(b2) or not _cont(b3):
                    append(REPL)
                    sp -= 3
                    # malformed3: how many bytes the bad sequence spans
                    sp += 1 if ((b1 == 0xE0 and (b2 & 0xE0) == 0x80) or not _cont(b2)) else 2
                else:
                    c = ((b1 & 0x0F) << 12) | ((b2 & 0x3F) << 6) | (b3 & 0x3F)
                    append(REPL if 0xD800 <= c <= 0xDFFF else chr(c))
                continue
            if sp < sl and ((b1 == 0xE0 and (src[sp] & 0xE0) == 0x80) or not _cont(src[sp])):
                append(REPL)
                continue
            append(REPL)
            break
        elif 0xF0 <= b1 <= 0xF7:
            if sp + 2 < sl:
                b2, b3, b4 = src[sp], src[sp + 1], src[sp + 2]
                sp += 3
                uc = ((b1 & 0x07) << 18) | ((b2 & 0x3F) << 12) | ((b3 & 0x3F) << 6) | (b4 & 0x3F)
                if not (_cont(b2) and _cont(b3) and _cont(b4)) or not 0x10000 <= uc <= 0x10FFFF:
                    append(REPL)
                    sp -= 4
                    sp += _malformed4(src, sp)
                else:
                    append(chr(uc))
                continue
            if b1 > 0xF4 or (sp < sl and _malformed4_2(b1, src[sp])):
                append(REPL)
                continue
            sp += 1
            append(REPL)
            if sp < sl and not _cont(src[sp]):
                continue
            break
        else:
            append(REPL)
    return "".join(out)


def _malformed4_2(b1: int, b2: int) -> bool:
    return (b1 == 0xF0 and not 0x90 <= b2 <= 0xBF) or (b1 == 0xF4 and (b2 & 0xF0) != 0x80) or not _cont(b2)


def _malformed4(src: bytes, sp: int) -> int:
    b1, b2 = src[sp], src[sp + 1]
    if b1 > 0xF4 or (b1 == 0xF0 and not 0x90 <= b2 <= 0xBF) or (b1 == 0xF4 and (b2 & 0xF0) != 0x80) or not _cont(b2):
        return 1
    if not _cont(src[sp + 2]):
        return 2
    return 3


__all__ = ["java_utf8_decode"]


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode``: ``h = 31*h + c`` over UTF-16 code units, int32 wrap."""
    data = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h
