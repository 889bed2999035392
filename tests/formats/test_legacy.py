"""Legacy v0/v1 messages: §21 vectors, wrappers, offsets and CRC-32."""

from __future__ import annotations

import pytest

from kafka_vectors import TS, VEC
from plog.formats import compression
from plog.formats.batches import iter_batches
from plog.formats.errors import CorruptRecordError, InvalidRecordError
from plog.formats.legacy import LegacyBatch, encode_legacy_batch, encode_message
from plog.formats.records import CREATE_TIME, LOG_APPEND_TIME, NO_TIMESTAMP_TYPE


def entries(name):
    return list(iter_batches(VEC[name]))


def kv(batches):
    return [(r.offset, r.timestamp, r.key, r.value) for b in batches for r in b.records()]


def test_v0_none():
    es = entries("v0_none")
    assert [e.magic for e in es] == [0, 0] and all(e.is_valid() for e in es)
    assert es[0].timestamp_type == NO_TIMESTAMP_TYPE and es[0].max_timestamp == -1
    assert kv(es) == [(0, -1, b"k", b"v"), (1, -1, None, b"w")]
    assert encode_legacy_batch([(0, -1, b"k", b"v"), (1, -1, None, b"w")], magic=0) == VEC["v0_none"]


def test_v1_none():
    es = entries("v1_none")
    assert [e.timestamp_type for e in es] == [CREATE_TIME, CREATE_TIME]
    assert kv(es) == [(0, TS, b"k", b"v"), (1, TS + 1, None, b"w")]
    assert encode_legacy_batch([(0, TS, b"k", b"v"), (1, TS + 1, None, b"w")], magic=1) == VEC["v1_none"]
    assert es[0].crc == 0x39268C33


def test_v1_gzip_wrapper_relative_offsets():
    (w,) = entries("v1_gzip")
    assert w.is_valid() and w.compression_name == "gzip" and w.offset == 11 and w.max_timestamp == TS + 1
    assert compression.decompress(compression.GZIP, w.value, 1 << 20, magic=1) == VEC["v1_gzip_inner"]
    assert kv([w]) == [(10, TS, b"k", b"v"), (11, TS + 1, None, b"w")]
    assert w.base_offset == 10 and w.last_offset == 11
    assert encode_legacy_batch([(10, TS, b"k", b"v"), (11, TS + 1, None, b"w")], magic=1,
                               compression_codec=compression.GZIP) == VEC["v1_gzip"]


def test_v0_gzip_wrapper_absolute_offsets():
    (w,) = entries("v0_gzip")
    assert w.is_valid() and w.offset == 11
    assert kv([w]) == [(10, -1, b"k", b"v"), (11, -1, None, b"w")]
    assert encode_legacy_batch([(10, -1, b"k", b"v"), (11, -1, None, b"w")], magic=0,
                               compression_codec=compression.GZIP) == VEC["v0_gzip"]


@pytest.mark.parametrize("name,magic,ts", [("lz4_rawblock_magic0", 0, -1), ("lz4_rawblock_magic1", 1, TS)])
def test_lz4_wrappers(name, magic, ts):
    (w,) = entries(name)
    assert w.is_valid() and w.magic == magic and w.compression_name == "lz4"
    assert kv([w]) == [(0, ts, b"k", b"v")]


def test_log_append_time_wrapper():
    raw = encode_legacy_batch([(5, TS, b"a", b"1"), (6, TS + 3, b"b", b"2")], magic=1,
                              compression_codec=compression.GZIP, timestamp_type=LOG_APPEND_TIME,
                              log_append_time=TS + 99)
    (w,) = iter_batches(raw)
    assert w.timestamp_type == LOG_APPEND_TIME and w.max_timestamp == TS + 99
    assert [(r.offset, r.timestamp) for r in w.records()] == [(5, TS + 99), (6, TS + 99)]


def test_legacy_crc_mismatch():
    raw = bytearray(VEC["v1_none"])
    raw[30] ^= 1
    e = list(iter_batches(bytes(raw)))[0]
    assert not e.is_valid()
    with pytest.raises(CorruptRecordError, match="Record is corrupt"):
        e.ensure_valid()


def test_key_length_past_end():
    raw = bytearray(encode_message(0, 1, b"k", b"v", timestamp=TS))
    raw[26:30] = (1000).to_bytes(4, "big")
    with pytest.raises(CorruptRecordError, match="key length 1000"):
        LegacyBatch(memoryview(bytes(raw)))


def test_nested_compression_rejected():
    inner = encode_legacy_batch([(0, TS, b"a", b"1")], magic=1, compression_codec=compression.GZIP)
    outer = encode_message(0, 1, None, compression.compress(compression.GZIP, inner), timestamp=TS, attributes=1)
    with pytest.raises(InvalidRecordError, match="Inner messages must not be compressed"):
        LegacyBatch(memoryview(outer)).records()


def test_wrapper_offset_below_inner():
    raw = encode_legacy_batch([(10, TS, b"k", b"v"), (11, TS, b"k", b"w"), (12, TS, b"k", b"x")], magic=1,
                              compression_codec=compression.GZIP, base_offset=0)
    # inner offsets 10..12 relative to base 0, wrapper offset 12: fine
    assert [r.offset for r in LegacyBatch(memoryview(raw)).records()] == [10, 11, 12]
    bad = bytearray(raw)
    bad[0:8] = (5).to_bytes(8, "big")
    with pytest.raises(InvalidRecordError, match="wrapper offset '5' is less than"):
        LegacyBatch(memoryview(bytes(bad))).records()
