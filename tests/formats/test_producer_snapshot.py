"""Producer state snapshots (plog.formats.producer_snapshot).

The §21 vector (Java HashMap order puts pid 7 before pid 1000), Kafka's read order and
messages (schema, then version, then CRC), every corpus snapshot (CRC valid, re-encoded
byte for byte), round trips and hostile bytes.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plog.formats import producer_snapshot as ps
from plog.formats.errors import CorruptSnapshotError

from conftest import CORPUS  # noqa: E402
# The corpus is part of the project contract: a missing one fails (the `corpus` fixture).
needs_corpus = pytest.mark.usefixtures("corpus")

VECTOR = bytes.fromhex(
    "000134ee9a8b00000002"
    "0000000000000007000000000000000000000000008c000000000000018bcfe568c8ffffffff000000000000008c"
    "00000000000003e80002000000130000000000000066000000020000018bcfe5686400000005ffffffffffffffff"
)
PID_1000 = ps.ProducerSnapshotEntry(1000, 2, 19, 102, 2, 1700000000100, 5, -1)
PID_7 = ps.ProducerSnapshotEntry(7, 0, 0, 140, 0, 1700000000200, -1, 140)


def corpus_snapshots() -> list[Path]:
    if not CORPUS.is_dir():
        return []
    found = []
    for root, _dirs, files in os.walk(CORPUS):
        found.extend(Path(root, f) for f in files if f.endswith(".snapshot"))
    return sorted(found)


def schema_error(detail: str) -> str:
    return f"Snapshot failed schema validation: {detail}"


def expect(buf: bytes, message: str, **kwargs) -> None:
    with pytest.raises(CorruptSnapshotError) as e:
        ps.decode_snapshot(buf, **kwargs)
    assert str(e.value) == message


def with_crc(buf: bytes) -> bytes:
    out = bytearray(buf)
    struct.pack_into(">I", out, 2, crc32c.crc32c(bytes(out[6:])))
    return bytes(out)


# -- §21 vector --------------------------------------------------------------------------


def test_vector_decodes():
    assert ps.decode_snapshot(VECTOR) == [PID_7, PID_1000]
    assert PID_1000.first_sequence == 17 and PID_7.first_sequence == 0
    assert PID_1000.has_batch_metadata


def test_vector_encodes_in_java_hash_map_order():
    # Inserted 1000 first, Java's HashMap still iterates 7 (bucket 7) before 1000 (bucket 8).
    assert ps.encode_snapshot([PID_1000, PID_7]) == VECTOR
    assert ps.encode_snapshot([PID_7, PID_1000], order="given") == VECTOR
    assert ps.encode_snapshot([PID_1000, PID_7], order="given") != VECTOR
    assert ps.snapshot_crc(VECTOR) == 0x34EE9A8B


def test_empty_snapshot():
    empty = ps.encode_snapshot([])
    assert empty == bytes.fromhex("0001") + struct.pack(">I", crc32c.crc32c(bytes(4))) + bytes(4)
    assert ps.decode_snapshot(empty) == []


def test_first_sequence_follows_decrement_sequence():
    assert ps.decrement_sequence(10, 3) == 7
    assert ps.decrement_sequence(1, 5) == 2147483644  # wraps at Integer.MAX_VALUE
    assert ps.decrement_sequence(0, 0) == 0
    no_batch = ps.ProducerSnapshotEntry(5, 0, -1, -1, 0, 0, -1, -1)
    assert no_batch.first_sequence == -1 and not no_batch.has_batch_metadata
    wrapped = ps.ProducerSnapshotEntry(5, 0, 2, 100, 4, 0, -1, -1)
    assert wrapped.first_sequence == 2147483646


# -- Kafka's read order and messages -----------------------------------------------------


def test_schema_errors_for_short_headers():
    underflow = "java.nio.BufferUnderflowException"
    for size in (0, 1):
        expect(VECTOR[:size], schema_error(f"Error reading field 'version': {underflow}"))
    for size in (2, 5):
        expect(VECTOR[:size], schema_error(f"Error reading field 'crc': {underflow}"))
    for size in (6, 9):
        expect(VECTOR[:size], schema_error(f"Error reading field 'producer_entries': {underflow}"))


def test_schema_errors_for_counts():
    header = bytes.fromhex("0001") + bytes(4)
    expect(header + struct.pack(">i", -1),
           schema_error("Error reading field 'producer_entries': Array size -1 cannot be negative"))
    expect(header + struct.pack(">i", 50) + bytes(20),
           schema_error("Error reading field 'producer_entries': Error reading array of size 50, only 20 bytes available"))
    expect(header + struct.pack(">i", 2**31 - 1),
           schema_error("Error reading field 'producer_entries': Error reading array of size 2147483647, only 0 bytes available"))


@pytest.mark.parametrize(
    "short, field",
    [(0, "producer_id"), (7, "producer_id"), (8, "epoch"), (13, "last_sequence"), (21, "last_offset"),
     (25, "offset_delta"), (33, "timestamp"), (37, "coordinator_epoch"), (45, "current_txn_first_offset")],
)
def test_schema_error_names_the_field_that_runs_off_the_end(short, field):
    # Two entries announced, one whole entry plus `short` bytes present (count <= bytes left).
    buf = VECTOR[: 10 + 46 + short]
    expect(buf, schema_error(
        f"Error reading field 'producer_entries': Error reading field '{field}': java.nio.BufferUnderflowException"
    ))


def test_version_is_checked_after_the_schema_and_before_the_crc():
    bad_version = b"\x00\x02" + VECTOR[2:]
    expect(bad_version, "Snapshot contained an unknown file version 2")
    expect(b"\xff\xff" + VECTOR[2:], "Snapshot contained an unknown file version -1")
    # A schema failure wins over a bad version.
    expect(b"\x00\x02" + VECTOR[2:8], schema_error(
        "Error reading field 'producer_entries': java.nio.BufferUnderflowException"
    ))
    expect(b"\x00\x02" + VECTOR[2:20], schema_error(
        "Error reading field 'producer_entries': Error reading field 'last_sequence': "
        "java.nio.BufferUnderflowException"
    ))


def test_crc_mismatch_message():
    corrupt = bytearray(VECTOR)
    corrupt[-1] ^= 0x01
    computed = crc32c.crc32c(bytes(corrupt[6:]))
    expect(bytes(corrupt),
           f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {0x34EE9A8B}. Computed crc: {computed}")


def test_trailing_bytes():
    trailing = with_crc(VECTOR + b"junk")
    # Kafka's Schema.read ignores them (and so does strict=False); strict mode rejects them.
    assert ps.decode_snapshot(trailing, strict=False) == [PID_7, PID_1000]
    expect(trailing, schema_error("4 bytes follow the 2 producer entries of 46 bytes each"))
    # Junk left by an overwrite without truncation fails the CRC first, as in Kafka.
    with pytest.raises(CorruptSnapshotError, match="CRC is no longer valid"):
        ps.decode_snapshot(VECTOR + b"junk")


# -- Java HashMap order ------------------------------------------------------------------


def test_java_hash_map_order():
    assert ps.java_hash_map_order([1000, 7]) == [7, 1000]
    assert ps.java_hash_map_order([16, 0, 1]) == [16, 0, 1]  # bucket 0 keeps insertion order
    assert ps.java_hash_map_order(range(12, -1, -1)) == list(range(13))
    # 13 entries exceed 0.75 * 16: the table doubles, and 16 leaves bucket 0 for bucket 16.
    assert ps.java_hash_map_order([16, 0, *range(1, 12)]) == [0, *range(1, 12), 16]
    assert ps.java_hash_map_order([16, 0], capacity=32) == [0, 16]
    # Long.hashCode folds the high word: -1 hashes to 0, 2**32 to 1.
    assert ps.java_hash_map_order([2**32, -1]) == [-1, 2**32]
    assert ps.java_hash_map_order([5, 5, 3]) == [3, 5]
    with pytest.raises(ValueError):
        ps.java_hash_map_order([1], capacity=12)


def test_encode_java_order_keeps_last_entry_of_a_repeated_producer():
    newer = PID_1000._replace(last_sequence=25)
    assert ps.decode_snapshot(ps.encode_snapshot([PID_1000, PID_7, newer])) == [PID_7, newer]


def test_encode_rejects_out_of_range_fields_and_orders():
    with pytest.raises(ValueError):
        ps.encode_snapshot([PID_7._replace(producer_epoch=2**15)])
    with pytest.raises(ValueError):
        ps.encode_snapshot([PID_7], order="sorted")


# -- round trips -------------------------------------------------------------------------

int16 = st.integers(-(2**15), 2**15 - 1)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
entries_strategy = st.lists(st.builds(ps.ProducerSnapshotEntry, int64, int16, int32, int64, int32, int64, int32, int64),
                            max_size=40)


@settings(max_examples=150, deadline=None)
@given(entries_strategy)
def test_round_trip_given_order(entries):
    data = ps.encode_snapshot(entries, order="given")
    assert len(data) == 10 + 46 * len(entries)
    assert ps.decode_snapshot(data) == entries
    assert ps.encode_snapshot(ps.decode_snapshot(data), order="given") == data


@settings(max_examples=150, deadline=None)
@given(entries_strategy)
def test_round_trip_java_order(entries):
    decoded = ps.decode_snapshot(ps.encode_snapshot(entries))
    latest = {e.producer_id: e for e in entries}
    assert [e.producer_id for e in decoded] == ps.java_hash_map_order(latest)
    assert sorted(decoded) == sorted(latest.values())


# -- real files --------------------------------------------------------------------------


@needs_corpus
def test_every_corpus_snapshot_decodes_and_re_encodes_exactly():
    files = corpus_snapshots()
    assert files
    for path in files:
        data = path.read_bytes()
        entries = ps.decode_snapshot(data)
        assert struct.unpack_from(">I", data, 2)[0] == ps.snapshot_crc(data)
        assert ps.encode_snapshot(entries, order="given") == data, path
        # Written by Java HashMap brokers: inserting in producer-id order reproduces the file.
        assert ps.encode_snapshot(sorted(entries), order="java") == data, path


# -- hostile bytes -----------------------------------------------------------------------


def _hostile_sources() -> list[bytes]:
    files = corpus_snapshots()
    by_size = sorted(files, key=lambda p: p.stat().st_size)
    return [VECTOR, *(p.read_bytes() for p in by_size[-3:]), *(p.read_bytes() for p in by_size[:1])]


HOSTILE_SOURCES = _hostile_sources()


@settings(max_examples=300, deadline=None)
@given(
    source=st.sampled_from(HOSTILE_SOURCES),
    cut=st.integers(0, 400),
    flips=st.lists(st.tuples(st.integers(0, 400), st.integers(0, 255)), max_size=6),
    extra=st.binary(max_size=60),
    fix_crc=st.booleans(),
    strict=st.booleans(),
)
def test_hostile_snapshot_bytes_raise_only_corrupt_snapshot_error(source, cut, flips, extra, fix_crc, strict):
    buf = bytearray(source[: cut % (len(source) + 1)] + extra)
    for pos, value in flips:
        if buf:
            buf[pos % len(buf)] = value
    data = with_crc(bytes(buf)) if fix_crc and len(buf) >= 6 else bytes(buf)
    try:
        entries = ps.decode_snapshot(data, strict=strict)
    except CorruptSnapshotError:
        return
    assert len(entries) == struct.unpack_from(">i", data, 6)[0]
