"""``formats/java.py``: the JVM behaviours plog reproduces, each against values Java gives.

The orders are also checked where they are used (producer snapshots, assignors, the
replica-assignment parser, DumpLogSegments' reports, Properties files), against bytes and
output of real Kafka; these are the unit checks of the emulation itself.
"""

from __future__ import annotations

import re

import pytest

from plog.formats import java


@pytest.mark.parametrize(
    "text, expected",
    [
        ("", 0),
        ("my-group", -1906497762),
        ("polygenelubricants", -(1 << 31)),  # Integer.MIN_VALUE: why Utils.abs exists
        ("\U0001f600", 31 * 0xD83D + 0xDE00),  # two UTF-16 code units
    ],
)
def test_string_hash_code(text, expected):
    assert java.string_hash_code(text) == expected


def test_int_arithmetic_wraps():
    assert java.int32(1 << 31) == -(1 << 31)
    assert java.int32(-(1 << 31) - 1) == (1 << 31) - 1
    assert java.long_hash_code(-1) == 0 and java.long_hash_code(1 << 32) == 1
    assert java.integer_hash_code(-5) == -5
    assert java.topic_partition_hash_code(("t", 3)) == java.int32(31 * 34 + java.string_hash_code("t"))


def test_compare_key_orders_by_utf16_code_unit():
    # U+FB01 sorts after U+1F600's high surrogate (0xD83D) in Java, before it by code point.
    assert sorted(["\U0001f600", "\ufb01", "a"], key=java.compare_key) == ["a", "\U0001f600", "\ufb01"]


def test_trim_strips_control_characters_but_not_unicode_spaces():
    assert java.trim("\x00 \tabc\r\n\x1f") == "abc"
    assert java.trim("\u00a0abc\u2003") == "\u00a0abc\u2003"
    assert java.trim("   ") == ""


@pytest.mark.parametrize(
    "text, separator, expected",
    [
        ("", ",", [""]),
        (",", ",", []),
        ("a,,b,,", ",", ["a", "", "b"]),
        (",a", ",", ["", "a"]),
        ("a", ",", ["a"]),
        ("a  b\t", re.compile(r"[ \t]+"), ["a", "b"]),
    ],
)
def test_split_drops_trailing_empty_strings(text, separator, expected):
    assert java.split(text, separator) == expected


def test_parse_int_accepts_what_java_accepts():
    assert java.parse_int("+7") == 7 and java.parse_int("-2147483648") == -(1 << 31)
    assert java.parse_int("2147483648") is None and java.parse_int(" 1") is None and java.parse_int("1.0") is None
    assert java.parse_int("\uff11\uff12") == 12  # Character.digit takes every Unicode decimal digit
    assert java.parse_int("9223372036854775807", java.INT64_MIN, java.INT64_MAX) == (1 << 63) - 1


def test_hash_map_order_put_and_compute_if_absent():
    # Integer keys 16 and 0 share bucket 0 of a 16-bucket table: insertion order inside it.
    assert java.hash_map_order([16, 0, 1], java.integer_hash_code) == [16, 0, 1]
    assert java.hash_map_order([16, 0], java.integer_hash_code, capacity=32) == [0, 16]
    assert java.hash_map_order([5, 5, 3], java.integer_hash_code) == [3, 5]  # a repeated put keeps its place
    order = java.HashOrder(java.integer_hash_code)
    for key in (16, 0):
        order.add(key, at_head=True)  # computeIfAbsent links a new node at the head
    assert list(order) == [0, 16] and order.first() == 0 and 16 in order and len(order) == 2
    order.remove(0)
    assert list(order) == [16]
    # 13 keys grow the table to 32 buckets: key 16 leaves bucket 0.
    assert java.hash_map_order([16, *range(12)], java.integer_hash_code) == [*range(12), 16]


def test_scala_hash_order_sorts_a_bucket_by_hash():
    # Buckets of 16: 17 and 1 share bucket 1, ordered by hash whatever the insertion order.
    assert java.scala_hash_order([17, 1, 2], java.integer_hash_code, 16) == [1, 17, 2]


def test_properties_orders():
    keys = [f"k{i}" for i in range(20)]
    for order in (java.hashtable_order, java.concurrent_hash_map_order):
        got = order(keys + ["k3"])
        assert sorted(got) == sorted(keys)  # each key once, whatever the table's growth


def test_utf8_decode_and_escaped_strings():
    assert java.utf8_decode(b"caf\xc3\xa9") == "café"
    assert java.utf8_decode(b"\xed\xa0\x80x") == "\ufffdx"  # an encoded surrogate: one U+FFFD
    escaped = b"k\xed\xa0\x80".decode("utf-8", "surrogateescape")
    assert java.string_from_escaped(escaped) == "k\ufffd"
    assert java.string_from_escaped("plain") == "plain" and java.string_from_escaped("é") == "é"


def test_every_kafka_string_of_escaped_bytes_decodes_as_the_jdk_does():
    """Keys, header keys (dump), metadata strings (cluster_metadata) and Kafka-JSON strings
    (protocol) all show invalid UTF-8 as ``new String(bytes, UTF_8)`` does: checked against
    the JDK's own output (``data/java_utf8_vectors.txt``, see test_java_utf8.py). Python's
    "replace" differs on encoded surrogates (ED A0..BF ..: three U+FFFD, Java one)."""
    from pathlib import Path

    from plog.formats import cluster_metadata, protocol

    vectors = (Path(__file__).parent / "data" / "java_utf8_vectors.txt").read_text().splitlines()
    for line in vectors + ["6bedbfbf 006bfffd"]:  # "k" + an encoded surrogate: one U+FFFD
        hex_in, _, hex_out = line.partition(" ")
        escaped = bytes.fromhex(hex_in).decode("utf-8", "surrogateescape")
        for show in (java.string_from_escaped, cluster_metadata.java_text, protocol.java_string):
            assert show(escaped).encode("utf-16-be", "surrogatepass").hex() == hex_out, (show, line)
