"""``java_utf8_decode`` equals ``new String(bytes, UTF_8)`` on malformed input.

``data/java_utf8_vectors.txt`` was printed by ``data/JavaUtf8Vectors.java`` (run with
OpenJDK 17: ``javac JavaUtf8Vectors.java && java JavaUtf8Vectors | head -3000``): random
byte strings biased towards lead and continuation bytes, and the UTF-16 code units Java
decoded them to.
"""

from pathlib import Path

from hypothesis import given, strategies as st

from plog.formats.java import utf8_decode as java_utf8_decode

VECTORS = Path(__file__).parent / "data" / "java_utf8_vectors.txt"


def test_matches_java_on_malformed_input():
    lines = VECTORS.read_text().splitlines()
    assert len(lines) == 3000
    for line in lines:
        hex_in, _, hex_out = line.partition(" ")
        got = java_utf8_decode(bytes.fromhex(hex_in)).encode("utf-16-be", "surrogatepass").hex()
        assert got == hex_out, line


@given(st.text())
def test_valid_utf8_is_plain_decoding(text):
    data = text.encode("utf-8", "surrogatepass") if not any(0xD800 <= ord(c) <= 0xDFFF for c in text) else b""
    assert java_utf8_decode(data) == data.decode("utf-8")


@given(st.binary(max_size=64))
def test_never_raises(data):
    assert isinstance(java_utf8_decode(data), str)
