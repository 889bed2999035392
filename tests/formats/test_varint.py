"""Zig-zag varints: known encodings, Kafka's length limits, hypothesis round trips."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from plog.formats.errors import VarintError
from plog.formats.varint import (
    encode_unsigned_varint,
    encode_varint,
    encode_varlong,
    read_unsigned_varint,
    read_varint,
    read_varlong,
    size_of_varint,
    size_of_varlong,
)

KNOWN = {-1: "01", 0: "00", 1: "02", 63: "7e", -64: "7f", 64: "8001", 2**31 - 1: "feffffff0f", -(2**31): "ffffffff0f"}


@pytest.mark.parametrize("value,hexed", sorted(KNOWN.items()))
def test_known_encodings(value, hexed):
    assert encode_varint(value).hex() == hexed
    assert read_varint(bytes.fromhex(hexed), 0) == (value, len(hexed) // 2)


def test_varint_too_long():
    with pytest.raises(VarintError, match="5th byte is set"):
        read_varint(bytes.fromhex("ffffffff8f01"), 0)


def test_varint_fifth_byte_high_bits_fall_off():
    # Java shifts the 5th byte left by 28 into an int: bits above bit 3 are lost.
    assert read_varint(bytes.fromhex("ffffffff7f"), 0) == read_varint(bytes.fromhex("ffffffff0f"), 0)


def test_varlong_too_long():
    with pytest.raises(VarintError, match="too long"):
        read_varlong(b"\xff" * 10 + b"\x01", 0)


def test_truncated():
    for reader in (read_varint, read_varlong, read_unsigned_varint):
        with pytest.raises(VarintError) as e:
            reader(b"\x00\x80\x80", 1)
        assert e.value.position == 1


def test_range_checks():
    with pytest.raises(ValueError):
        encode_varint(2**31)
    with pytest.raises(ValueError):
        encode_varlong(2**63)


@given(st.integers(-(2**31), 2**31 - 1))
def test_varint_round_trip(n):
    enc = encode_varint(n)
    assert len(enc) == size_of_varint(n)
    assert read_varint(b"\xaa" + enc + b"\xbb", 1) == (n, 1 + len(enc))


@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_round_trip(n):
    enc = encode_varlong(n)
    assert len(enc) == size_of_varlong(n)
    assert read_varlong(enc, 0) == (n, len(enc))


@given(st.integers(0, 2**32 - 1))
def test_unsigned_round_trip(n):
    enc = encode_unsigned_varint(n)
    assert read_unsigned_varint(enc, 0) == (n, len(enc))


@given(st.binary(max_size=12))
def test_random_bytes_only_varint_errors(data):
    for reader in (read_varint, read_varlong, read_unsigned_varint):
        try:
            reader(data, 0)
        except VarintError:
            pass
