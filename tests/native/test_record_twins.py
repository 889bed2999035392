"""The v2 record decoders' native twins against the reference (formats/default_record.py):
``decode_records`` and ``record_heads`` give the same records and heads, or the same typed
error with the same message and position, on well-formed regions of every shape and on
regions mutated at random; and the results keep the reference's types (Record tuples,
``bytes`` keys and values, ``str`` header keys with surrogateescape, Python ints beyond
int64).
"""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))

from native_twins import decode_outcomes, mutate_region, native_module  # noqa: E402,F401

from kafka_vectors import VEC  # noqa: E402
from plog.formats import default_record  # noqa: E402
from plog.formats.default_record import encode_records  # noqa: E402
from plog.formats.errors import CorruptRecordError, FormatError, VarintError  # noqa: E402
from plog.formats.record_batch import RecordBatch, encode_batch  # noqa: E402
from plog.formats.records import Record  # noqa: E402
from plog.formats.varint import encode_varint  # noqa: E402

SEED = int(os.environ.get("PLOG_FUZZ_SEED", random.randrange(1 << 30)))
BASE_OFFSET, BASE_TS = 1000, 1_700_000_000_000

NATIVE_DECODE = default_record._native_decode_records
NATIVE_HEADS = default_record._native_record_heads


def _region(records, base_offset=BASE_OFFSET, base_ts=BASE_TS) -> bytes:
    return bytes(encode_records(records, base_offset, base_ts)[0])


def _same(payload, count, base_offset=BASE_OFFSET, base_ts=BASE_TS, lat=None):
    ref, nat = decode_outcomes((payload, count, base_offset, base_ts, lat))
    assert nat == ref, (payload.hex(), count)
    return nat


@pytest.mark.parametrize("name", sorted(n for n in VEC if n.startswith(("v2", "lz4_rawblock_magic2"))))
def test_format_vector_records(native_module, name):
    batch = RecordBatch(memoryview(VEC[name]))
    payload = batch.records_payload()
    (decoded, heads) = _same(payload, batch.records_count, batch.base_offset, batch.base_timestamp)
    assert decoded[0] == "ok" and heads[0] == "ok"
    assert all(type(r) is Record for r in decoded[1])


def test_types_are_the_references(native_module):
    records = [(BASE_OFFSET, BASE_TS, b"k", b"v", (("h", b"x"), ("n", None))), (BASE_OFFSET + 1, BASE_TS, None, None)]
    payload = _region(records)
    got = NATIVE_DECODE(payload, 2, BASE_OFFSET, BASE_TS)
    assert got == [Record(*records[0]), Record(*records[1], ())]
    assert all(type(r) is Record for r in got)
    assert type(got[0].key) is bytes and type(got[0].headers) is tuple and type(got[0].headers[0][0]) is str
    assert got[1].headers == () and got[1].key is None and got[1].value is None
    heads = NATIVE_HEADS(payload, 2, BASE_OFFSET, BASE_TS)
    assert heads == default_record.reference_record_heads(payload, 2, BASE_OFFSET, BASE_TS)
    assert all(type(h) is tuple for h in heads)


def test_header_keys_that_are_not_utf8_survive(native_module):
    key = b"\xff\xfeh".decode("utf-8", "surrogateescape")
    payload = _region([(BASE_OFFSET, BASE_TS, b"k", b"v", ((key, b"x"), ("é", None)))])
    assert NATIVE_DECODE(payload, 1, BASE_OFFSET, BASE_TS)[0].headers == ((key, b"x"), ("é", None))
    _same(payload, 1)


def test_log_append_time_replaces_every_timestamp(native_module):
    payload = _region([(BASE_OFFSET + i, BASE_TS + i, None, b"v") for i in range(3)])
    (decoded, _) = _same(payload, 3, lat=42)
    assert [r.timestamp for r in decoded[1]] == [42, 42, 42]


@pytest.mark.parametrize("base_offset, base_ts", [
    ((1 << 63) - 1, 0), (-(1 << 63), 0), (0, (1 << 63) - 1), (0, -(1 << 63)),
])
def test_sums_past_int64_are_python_ints(native_module, base_offset, base_ts):
    """The reference adds Python ints: base + delta may leave int64 (hostile bases)."""
    payload = _region([(0, 10_000, b"k", b"v"), (100, 5000, b"k", b"v")], base_offset=0, base_ts=10_000)
    (decoded, heads) = _same(payload, 2, base_offset, base_ts)
    assert decoded[1][1].offset == base_offset + 100 and decoded[1][1].timestamp == base_ts - 5000
    assert heads[1][1][2] == base_offset + 100


def test_bases_beyond_int64_go_to_the_reference(native_module):
    payload = _region([(0, 0, b"k", b"v")], base_offset=0, base_ts=0)
    assert NATIVE_DECODE(payload, 1, 1 << 70, 0)[0].offset == 1 << 70
    assert NATIVE_HEADS(payload, 1, 0, -(1 << 70))[0][3] == -(1 << 70)


def test_other_buffers_go_to_the_reference(native_module):
    """The reference slices what it is given (a memoryview gives memoryview keys)."""
    payload = _region([(BASE_OFFSET, BASE_TS, b"key", b"value")])
    for data in (memoryview(payload), bytearray(payload)):
        got = NATIVE_DECODE(data, 1, BASE_OFFSET, BASE_TS)
        want = default_record.reference_decode_records(data, 1, BASE_OFFSET, BASE_TS)
        assert got == want and type(got[0].key) is type(want[0].key)
        assert NATIVE_HEADS(data, 1) == default_record.reference_record_heads(data, 1)


def test_a_long_region_releases_the_gil_and_agrees(native_module):
    """A region above the detach threshold (256 KiB), with 1-, 2- and 3-byte varints."""
    rnd = random.Random(5)
    records = [(BASE_OFFSET + i * 3, BASE_TS + i * 70_000, rnd.randbytes(rnd.choice([0, 70, 9000])),
                rnd.randbytes(rnd.choice([1, 100, 20000])), (("h", b"1"),) * (i % 3)) for i in range(200)]
    payload = _region(records)
    assert len(payload) > 256 * 1024
    (decoded, heads) = _same(payload, len(records))
    assert [tuple(r) for r in decoded[1]] == [(*r[:4], r[4]) for r in records]
    truncated = payload[: len(payload) // 2]
    (decoded, heads) = _same(truncated, len(records))
    assert decoded[0] == "CorruptRecordError"


@pytest.mark.parametrize("region, count", [
    (b"", 0), (b"", 1), (b"\x00", 0), (b"\x00", 1), (b"\x01", 1), (b"\x80", 1), (b"\x80\x80", 1),
    (b"\xff\xff\xff\xff\x7f", 1), (b"\xff\xff\xff\xff\xff", 1),
    (encode_varint(-3) + bytes(8), 1),
    (encode_varint(5) + b"\x00\x00\x00" + encode_varint(9) + bytes(12), 1),
    (encode_varint(6) + b"\x00\x00\x00\x01\x01\x00", 2),
    (encode_varint(6) + b"\x00\x00\x00\x01\x01\x00", -1),
    (encode_varint(6) + b"\x00\x00\x00\x01\x01\x00", 1 << 40),
    # a timestamp varlong of 10 bytes with the continuation bit on its last
    (encode_varint(14) + b"\x00" + b"\xff" * 10 + b"\x00\x01\x01\x00", 1),
    # header counts: negative, larger than the record, and a header running past it
    (encode_varint(7) + b"\x00\x00\x00\x01\x01" + encode_varint(-2), 1),
    (encode_varint(7) + b"\x00\x00\x00\x01\x01" + encode_varint(50), 1),
    (encode_varint(9) + b"\x00\x00\x00\x01\x01" + encode_varint(1) + encode_varint(-1) + b"\x00", 1),
    (encode_varint(9) + b"\x00\x00\x00\x01\x01" + encode_varint(1) + encode_varint(9) + b"\x00", 1),
    (encode_varint(10) + b"\x00\x00\x00\x01\x01" + encode_varint(1) + b"\x02h" + encode_varint(40), 1),
    (encode_varint(10) + b"\x00\x00\x00\x01\x01" + encode_varint(1) + b"\x02h" + b"\x80", 1),
])
def test_faulty_region(native_module, region, count):
    (decoded, heads) = _same(region, count)
    assert decoded[0] != "ok" or count <= 0 or region


def test_errors_are_typed_with_reasons_and_positions(native_module):
    region = encode_varint(14) + b"\x00" + b"\xff" * 10 + b"\x00\x01\x01\x00"
    with pytest.raises(VarintError) as e:
        NATIVE_DECODE(region, 1, 0, 0)
    assert (e.value.reason, e.value.position) == ("Varlong is too long, most significant bit in the 10th byte is set", 2)
    with pytest.raises(CorruptRecordError) as e:
        NATIVE_HEADS(encode_varint(6) + b"\x00\x00\x00\x01\x01\x00", 2)
    assert str(e.value) == "Incorrect declared batch size, premature EOF reached" and e.value.position is None


def test_a_batch_reports_native_errors_at_its_position(native_module):
    """RecordBatch.records adds the batch position to a position-less error, whichever path."""
    batch_bytes = bytearray(encode_batch([(0, BASE_TS, b"k", b"v")]))
    batch_bytes[61] = 0x7F  # the record's length: far past the region
    batch = RecordBatch(memoryview(bytes(batch_bytes)), position=4096)
    payload = batch.records_payload()
    with pytest.raises(FormatError) as e:
        NATIVE_DECODE(payload, 1, 0, 0)
    assert e.value.at(batch.position).position == 4096


# -- generated and mutated regions ---------------------------------------------------------

_BYTES = st.one_of(st.none(), st.binary(max_size=30),
                   st.builds(lambda n, s: random.Random(s).randbytes(n), st.sampled_from([64, 300, 8192, 20000]),
                             st.integers(0, 9)))
# Header keys: any text, and bytes that are not UTF-8 (kept by surrogateescape).
_HEADER_KEY = st.one_of(st.text(st.characters(blacklist_categories=("Cs",)), max_size=6),
                        st.binary(max_size=6).map(lambda b: b.decode("utf-8", "surrogateescape")))
_HEADER = st.tuples(_HEADER_KEY, st.one_of(st.none(), st.binary(max_size=9)))


@st.composite
def _regions(draw):
    n = draw(st.integers(0, 8))
    offset, records = BASE_OFFSET, []
    last_at_int32_max = draw(st.booleans())  # the largest offset delta a record can hold
    for i in range(n):
        offset += draw(st.sampled_from([0, 1, 64, 8191, 8192, 1 << 20]))
        if i == n - 1 and last_at_int32_max:
            offset = BASE_OFFSET + (1 << 31) - 1
        ts = BASE_TS + draw(st.sampled_from([0, -1, 63, 64, 1 << 14, 1 << 35, -(1 << 40)]))
        records.append((offset, ts, draw(_BYTES), draw(_BYTES), tuple(draw(st.lists(_HEADER, max_size=3)))))
        offset += 1
    return _region(records) if records else b"", n


@settings(max_examples=300, deadline=None)
@given(_regions())
def test_generated_regions_decode_the_same(native_module, region):
    payload, count = region
    (decoded, heads) = _same(payload, count)
    assert decoded[0] == "ok" and heads[0] == "ok"


def test_mutated_regions_decode_the_same(native_module):
    """Random mutations of encoded regions (as tests/formats/test_record_decoding.py makes
    them): the same records or the same typed error, and the error paths are reached."""
    print(f"PLOG_FUZZ_SEED={SEED}")
    rnd = random.Random(SEED)
    errors = 0
    for _ in range(3000):
        step = rnd.choice([1, 100, 70000])
        records = [(BASE_OFFSET + i * step, BASE_TS + rnd.choice([0, 5, 9000, 10**9]) * i,
                    None if rnd.random() < 0.2 else rnd.randbytes(rnd.choice([0, 1, 5, 70, 200])),
                    None if rnd.random() < 0.2 else rnd.randbytes(rnd.choice([0, 3, 100, 300, 9000])),
                    tuple((f"h{j}", None if rnd.random() < 0.3 else b"x" * rnd.choice([0, 2, 150]))
                          for j in range(rnd.choice([0, 0, 1, 2]))))
                   for i in range(rnd.randrange(1, 6))]
        payload, count = _region(records), len(records)
        if rnd.random() < 0.9:
            payload, count = mutate_region(rnd, payload, count)
        (decoded, _) = _same(payload, count)
        errors += decoded[0] != "ok"
    assert errors > 1000
