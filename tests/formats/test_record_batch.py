"""v2 batches: the §21 vectors decode to their fields and re-encode byte for byte."""

from __future__ import annotations

import pytest
from crc32c import crc32c

from kafka_vectors import TS, VEC
from plog.formats import compression
from plog.formats.batches import iter_batches
from plog.formats.errors import CorruptRecordError, InvalidRecordError
from plog.formats.record_batch import (
    RecordBatch,
    encode_batch,
    encode_empty_batch,
    set_base_offset,
    set_max_timestamp,
    set_partition_leader_epoch,
)
from plog.formats.records import CREATE_TIME, LOG_APPEND_TIME, Record


def batch(name: str) -> RecordBatch:
    return RecordBatch(memoryview(VEC[name]))


def test_crc32c_check_value():
    assert crc32c(b"123456789") == 0xE3069283


def test_v2_one_none_fields():
    b = batch("v2_one_none")
    assert (b.base_offset, b.batch_length, b.partition_leader_epoch, b.magic) == (0, 58, -1, 2)
    assert b.crc == 3919285720 and b.is_valid()
    assert (b.last_offset, b.records_count, b.size_in_bytes) == (0, 1, 70)
    assert (b.base_timestamp, b.max_timestamp, b.timestamp_type) == (TS, TS, CREATE_TIME)
    assert (b.producer_id, b.producer_epoch, b.base_sequence, b.last_sequence) == (-1, -1, -1, -1)
    assert not b.is_transactional and not b.is_control and b.delete_horizon_ms is None
    assert b.compression_name == "none"
    assert b.records() == [Record(0, TS, b"k", b"v", ())]


CASES = {
    "v2_one_none": (dict(), [(0, TS, b"k", b"v")]),
    "v2_two_none_nullkey": (
        dict(base_offset=5, partition_leader_epoch=3),
        [(5, TS, None, b"hello"), (6, TS + 1, b"key2", None)],
    ),
    "v2_hdr_none": (dict(partition_leader_epoch=0), [(0, TS, b"k", b"v", (("h1", b"x"), ("h2", None)))]),
    "v2_one_gzip": (dict(compression_codec=compression.GZIP), [(0, TS, b"k", b"v")]),
    "v2_one_zstd": (dict(compression_codec=compression.ZSTD), [(0, TS, b"k", b"v")]),
    "v2_txn_3rec": (
        dict(base_offset=100, producer_id=1000, producer_epoch=2, base_sequence=17, is_transactional=True,
             partition_leader_epoch=7),
        [(100, TS, b"a", b"1"), (101, TS - 10, b"b", b"2"), (102, TS + 100, b"c", b"3")],
    ),
    "v2_tombstone_deletehorizon": (
        dict(partition_leader_epoch=0, delete_horizon_ms=1700086400000), [(0, TS, b"k", None)]
    ),
    "v2_commit_marker": (
        dict(base_offset=42, partition_leader_epoch=7, producer_id=1000, producer_epoch=2, is_transactional=True,
             is_control=True),
        [(42, TS, bytes.fromhex("00000001"), bytes.fromhex("000000000005"))],
    ),
    "v2_abort_marker": (
        dict(base_offset=43, partition_leader_epoch=7, producer_id=1000, producer_epoch=2, is_transactional=True,
             is_control=True),
        [(43, TS + 1, bytes.fromhex("00000000"), bytes.fromhex("000000000005"))],
    ),
    "v2_leader_change": (
        dict(partition_leader_epoch=1, is_control=True),
        [(0, TS, bytes.fromhex("00000002"), bytes.fromhex("000000000001030000000100000000020002000000010000"))],
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_vector_decodes_and_reencodes(name):
    kwargs, records = CASES[name]
    b = batch(name)
    assert b.is_valid()
    expected = [Record(r[0], r[1], r[2], r[3], r[4] if len(r) > 4 else ()) for r in records]
    assert b.records() == expected
    assert encode_batch(records, **kwargs) == VEC[name]


def test_txn_batch_header():
    b = batch("v2_txn_3rec")
    assert (b.base_offset, b.last_offset, b.last_sequence, b.max_timestamp) == (100, 102, 19, TS + 100)
    assert b.is_transactional and not b.is_control


def test_delete_horizon_batch():
    b = batch("v2_tombstone_deletehorizon")
    assert b.has_delete_horizon and b.delete_horizon_ms == 1700086400000
    # The stored delta is relative to the horizon, so the record still reports TS.
    assert b.records()[0].timestamp == TS


def test_markers_are_control():
    for name in ("v2_commit_marker", "v2_abort_marker"):
        b = batch(name)
        assert b.is_control and b.is_transactional and b.size_in_bytes == 78 and b.base_sequence == -1


def test_lz4_raw_block_decodes():
    b = batch("lz4_rawblock_magic2")
    assert b.is_valid() and b.compression_name == "lz4"
    assert b.records() == [Record(0, TS, b"k", b"v", ())]


def test_empty_header_vector():
    b = batch("v2_empty_header")
    assert b.records_count == 0 and b.records() == [] and b.is_valid()
    assert (b.base_offset, b.last_offset, b.base_timestamp, b.max_timestamp) == (100, 102, -1, TS + 100)
    assert (b.producer_id, b.producer_epoch, b.base_sequence, b.last_sequence) == (1000, 2, 17, 19)
    assert encode_empty_batch(base_offset=100, last_offset=102, producer_id=1000, producer_epoch=2, base_sequence=17,
                              max_timestamp=TS + 100, is_transactional=True,
                              partition_leader_epoch=7) == VEC["v2_empty_header"]


def test_empty_builder_writes_nothing():
    assert encode_batch([]) == b""


def test_log_append_time_reports_max_timestamp():
    raw = encode_batch([(0, TS, b"k", b"v"), (1, TS + 5, None, b"w")], timestamp_type=LOG_APPEND_TIME,
                       log_append_time=TS + 1000)
    b = RecordBatch(memoryview(raw))
    assert b.timestamp_type == LOG_APPEND_TIME and b.max_timestamp == TS + 1000
    assert [r.timestamp for r in b.records()] == [TS + 1000, TS + 1000]


def test_broker_rewrites_keep_crc_valid():
    raw = bytearray(VEC["v2_one_none"])
    set_base_offset(raw, 12345)
    set_partition_leader_epoch(raw, 9)
    b = RecordBatch(memoryview(bytes(raw)))
    assert b.is_valid() and b.base_offset == 12345 and b.partition_leader_epoch == 9
    set_max_timestamp(raw, LOG_APPEND_TIME, TS + 7)
    b = RecordBatch(memoryview(bytes(raw)))
    assert b.is_valid() and b.timestamp_type == LOG_APPEND_TIME and b.records()[0].timestamp == TS + 7


def test_crc_mismatch_is_reported():
    raw = bytearray(VEC["v2_one_none"])
    raw[-2] ^= 0xFF
    b = RecordBatch(memoryview(bytes(raw)), position=100)
    assert not b.is_valid()
    with pytest.raises(CorruptRecordError, match=r"Record is corrupt \(stored crc = 3919285720, computed crc = \d+\)") as e:
        b.ensure_valid()
    assert e.value.position == 100


def test_record_count_mismatch():
    raw = bytearray(VEC["v2_one_none"])
    raw[60] = 2  # claims 2 records, holds 1
    with pytest.raises(CorruptRecordError, match="premature EOF"):
        RecordBatch(memoryview(bytes(raw))).records()
    raw[60] = 0
    raw[57:61] = b"\xff\xff\xff\xff"
    with pytest.raises(InvalidRecordError, match="invalid record count -1"):
        RecordBatch(memoryview(bytes(raw))).records()


def test_records_remaining():
    two = VEC["v2_two_none_nullkey"]
    raw = bytearray(two)
    raw[60] = 1
    with pytest.raises(CorruptRecordError, match="records still remaining"):
        RecordBatch(memoryview(bytes(raw))).records()


def test_negative_header_key_size():
    raw = bytearray(VEC["v2_hdr_none"])
    # headers count 2 at byte 69 ("04"), first header key length "04" at 70 -> make it -2 ("03")
    assert raw[69] == 0x04 and raw[70] == 0x04
    raw[70] = 0x03
    with pytest.raises(InvalidRecordError, match="Invalid negative header key size -2"):
        RecordBatch(memoryview(bytes(raw))).records()


def test_iterator_positions_and_partial_tail():
    data = VEC["v2_one_none"] + VEC["v2_txn_3rec"] + VEC["v2_commit_marker"]
    it = iter_batches(data + VEC["v2_one_none"][:40])
    batches = list(it)
    assert [b.position for b in batches] == [0, 70, 70 + 89]
    assert it.valid_end == len(data)
    assert it.trailing.position == len(data) and it.trailing.length == 40 and it.trailing.declared_size == 70


def test_iterator_short_fragment():
    it = iter_batches(VEC["v2_one_none"] + b"\x00" * 17)
    assert len(list(it)) == 1
    assert it.trailing == (70, 17, None)


def test_iterator_impossible_headers():
    bad = bytearray(VEC["v2_one_none"])
    bad[8:12] = (5).to_bytes(4, "big")
    with pytest.raises(CorruptRecordError, match="Found record size 5 smaller than minimum record overhead") as e:
        list(iter_batches(VEC["v2_one_none"] + bytes(bad)))
    assert e.value.position == 70
    bad = bytearray(VEC["v2_one_none"])
    bad[16] = 7
    with pytest.raises(CorruptRecordError, match="Invalid magic found in record: 7"):
        list(iter_batches(bytes(bad)))
    bad[16] = 2
    bad[8:12] = (20).to_bytes(4, "big")
    with pytest.raises(CorruptRecordError, match="smaller than the minimum allowed overhead 61"):
        list(iter_batches(bytes(bad)))


def test_iterator_base_position():
    it = iter_batches(VEC["v2_one_none"] * 2, base_position=1000)
    assert [b.position for b in it] == [1000, 1070]
    assert it.valid_end == 1140 and it.trailing is None
