"""The batch walk's native twin against the reference (formats/batches.py): every record file
of the corpus, the held format vectors, generated segments of every format and codec, and
the walk's edges (trailing bytes, corrupt headers, size limits, sub-ranges, buffer types).

Each comparison is the whole outcome: the batches with every header field and their bytes,
``valid_end``, the trailing bytes and the typed error, through ``BatchIterator`` on both
paths; and the native unit on its own (``walk_entries`` with checksums) against the
reference's batches and their ``is_valid()``. Then every v2 batch's records decode the same
on both paths (test_record_twins.py covers the decoders in depth).
"""

from __future__ import annotations

import mmap
import random
import sys
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))

from native_twins import compare_segment, native_module, record_files, walk_outcome  # noqa: E402,F401

from conftest import CORPUS  # noqa: E402
from kafka_vectors import VEC  # noqa: E402
from plog.formats.batches import BatchIterator  # noqa: E402
from plog.formats.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD  # noqa: E402
from plog.formats.control import ControlRecordType, encode_control_key, encode_end_txn_marker  # noqa: E402
from plog.formats.legacy import encode_legacy_batch, encode_message  # noqa: E402
from plog.formats.record_batch import encode_batch, encode_empty_batch  # noqa: E402
from plog.formats.records import LOG_APPEND_TIME  # noqa: E402


RECORD_FILES = record_files(CORPUS)


def test_the_corpus_has_record_files(corpus):
    assert len(RECORD_FILES) > 100


@pytest.mark.parametrize("path", RECORD_FILES, ids=lambda p: str(p.relative_to(CORPUS)))
def test_corpus_file_walks_and_decodes_the_same(native_module, path):
    compare_segment(native_module, path.read_bytes())


def test_corpus_file_through_mmap_as_through_bytes(native_module, corpus):
    """The file-reading engine hands the walk an mmap (or a memoryview of one)."""
    path = max(RECORD_FILES, key=lambda p: p.stat().st_size)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        from_mmap, _ = walk_outcome(BatchIterator._iter_native, mm)
        headers, crc_ok, _, _, _ = native_module.walk_entries(mm, verify_crc=True)
        assert all(crc_ok)
    from_bytes, _ = walk_outcome(BatchIterator._iter_reference, path.read_bytes())
    assert from_mmap == from_bytes
    assert len(headers) == len(crc_ok) == len(from_bytes[0])


@pytest.mark.parametrize("name", sorted(VEC))
def test_format_vector_walks_and_decodes_the_same(native_module, name):
    compare_segment(native_module, VEC[name])


def test_a_segment_of_every_vector_with_a_partial_tail(native_module):
    segment = b"".join(VEC[name] for name in sorted(VEC))
    assert compare_segment(native_module, segment) == 0
    for cut in (1, 5, 17, 18, 30, 61, 62):
        compare_segment(native_module, segment[:-cut])


# -- the walk's edges ---------------------------------------------------------------------

_V2 = VEC["v2_two_none_nullkey"]
_V0 = VEC["v0_none"]


def _with_size(entry: bytes, size: int) -> bytes:
    return entry[:8] + size.to_bytes(4, "big", signed=True) + entry[12:]


def _shrunk(entry: bytes, by: int) -> bytes:
    """The entry less its last ``by`` bytes, its size field saying so."""
    return _with_size(entry[:-by], len(entry) - by - 12)


@pytest.mark.parametrize("buf", [
    b"",
    b"\x00" * 17,  # a fragment too short to have a magic byte
    b"\x00" * 18,  # size 0: smaller than any entry
    _with_size(_V2, 13),
    _with_size(_V2, -1),
    _with_size(_V2, -(1 << 31)),
    _with_size(_V2, 48),  # a v2 batch below its 61-byte header
    _with_size(_V2, (1 << 31) - 1),  # a partial entry that declares 2 GiB
    _V2[:16] + b"\x03" + _V2[17:],  # unknown magic
    _V2[:16] + b"\xfe" + _V2[17:],  # reported as int8 -2
    _V2 + _V2[:40],  # a partial batch after a whole one
    _V2 + _V2[:17],
    _V2[:60],
    _V0 + _V0[:-1],
    _V0[:16] + b"\x01" + _V0[17:],  # v0 bytes read as v1: the timestamp eats the key
    _with_size(_V0, 14) [:26],  # a v0 message with no room for its key length
    _shrunk(encode_message(5, 1, b"k", b"value"), 1),  # a v1 value that runs past its message
    _shrunk(encode_message(5, 1, b"key", None), 8),  # a v1 message below its 22-byte minimum
    _V2 + b"\xff" * 200,
], ids=lambda b: f"{len(b)}-bytes-{zlib.crc32(b) & 0xFFFF:04x}")  # hash() differs per process: xdist workers must agree
def test_walk_edge(native_module, buf):
    compare_segment(native_module, buf)


@pytest.mark.parametrize("key_len, value_len", [(-1, 5), (9, 0), (2, 9), (0, -2), (-7, -1), (1 << 30, 0)])
def test_legacy_key_and_value_lengths(native_module, key_len, value_len):
    """A legacy message whose key or value length runs past it (or is oddly negative)."""
    body = b"\x00\x00" + key_len.to_bytes(4, "big", signed=True) + b"kk" + value_len.to_bytes(4, "big", signed=True) + b"v"
    entry = (7).to_bytes(8, "big") + (len(body) + 4).to_bytes(4, "big") + b"\x00\x00\x00\x00" + body
    compare_segment(native_module, entry + _V0)


@pytest.mark.parametrize("kwargs", [
    dict(base_position=1000),
    dict(max_batch_size=len(_V2)),
    dict(max_batch_size=len(_V2) - 1, base_position=7),
    dict(start=len(_V2)),
    dict(start=len(_V2), end=len(_V2) + 20),
    dict(end=len(_V2) * 2 - 3),
    dict(end=10**12),
    dict(end=-5),
    dict(start=10**6),
    dict(max_batch_size=-5),  # named in the error as given
    dict(max_batch_size=1 << 70),
    dict(end=-(1 << 70)),
    dict(base_position=(1 << 63) - 100),  # positions past int64: Python ints, on both paths
    dict(base_position=-(1 << 64)),
])
def test_walk_options(native_module, kwargs):
    buf = _V2 * 3 + _V0 * 2
    compare_segment(native_module, buf, **kwargs)


def test_buffer_types(native_module):
    buf = _V2 * 2 + _V0 + _V2[:30]
    want, _ = walk_outcome(BatchIterator._iter_reference, buf)
    for other in (bytearray(buf), memoryview(buf), memoryview(bytearray(buf))[1:][:-1], memoryview(buf).cast("B", (1, len(buf)))):
        if isinstance(other, memoryview) and other.ndim == 1 and len(other) < len(buf):
            assert walk_outcome(BatchIterator._iter_native, other)[0] == walk_outcome(
                BatchIterator._iter_reference, other)[0]
        else:
            assert walk_outcome(BatchIterator._iter_native, other)[0] == want


def test_an_early_stop_leaves_valid_end_where_the_reference_does(native_module):
    buf = _V2 * 40
    for iterate in (BatchIterator._iter_reference, BatchIterator._iter_native):
        it = BatchIterator(buf, base_position=3)
        for i, _ in enumerate(iterate(it)):
            if i == 20:
                break
        assert it.valid_end == 3 + 20 * len(_V2) and it.trailing is None


def test_a_long_walk_with_checksums_releases_the_gil_and_agrees(native_module):
    """More than the detach threshold (256 KiB) of batches in one call: read-only buffers are
    walked without the GIL."""
    records = [(i, 1_700_000_000_000 + i, b"k%d" % i, bytes(1000)) for i in range(300)]
    segment = b"".join(encode_batch(records[i:i + 30], base_offset=i) for i in range(0, 300, 30)) * 40
    assert len(segment) > 300 * 1024
    compare_segment(native_module, segment)
    headers, crc_ok, nxt, trailing, fault = native_module.walk_entries(segment, verify_crc=True)
    assert len(headers) == 400 and crc_ok == b"\x01" * 400 and (nxt, trailing, fault) == (None, None, None)
    # A writable buffer is walked holding the GIL (another thread could write it), alike.
    assert native_module.walk_entries(bytearray(segment), verify_crc=True) == (headers, crc_ok, None, None, None)


# -- generated segments -------------------------------------------------------------------

_HEADER_KEYS = st.one_of(st.text(st.characters(blacklist_categories=("Cs",)), max_size=8),
                         st.binary(max_size=8).map(lambda b: b.decode("utf-8", "surrogateescape")))
_PAYLOAD_SIZES = st.sampled_from([0, 1, 5, 63, 64, 100, 300, 8191, 8192, 20000])
_BYTES = st.one_of(st.none(), st.binary(max_size=40),
                   st.builds(lambda n, seed: random.Random(seed).randbytes(n), _PAYLOAD_SIZES, st.integers(0, 99)))
_HEADERS = st.lists(st.tuples(_HEADER_KEYS, st.one_of(st.none(), st.binary(max_size=20))), max_size=3).map(tuple)


@st.composite
def _records(draw, with_headers: bool = True):
    n = draw(st.integers(1, 6))
    gaps = draw(st.lists(st.sampled_from([1, 1, 2, 70, 100_000]), min_size=n, max_size=n))
    ts0 = draw(st.sampled_from([0, 1_700_000_000_000, (1 << 62)]))
    out, offset = [], draw(st.sampled_from([0, 5, 1 << 40]))
    for gap in gaps:
        ts = ts0 + draw(st.sampled_from([0, 1, 9000, 10**9]))
        headers = draw(_HEADERS) if with_headers else ()
        out.append((offset, ts, draw(_BYTES), draw(_BYTES), headers))
        offset += gap
    return out


@st.composite
def _v2_batch(draw):
    records = draw(_records())
    codec = draw(st.sampled_from([NONE, GZIP, SNAPPY, LZ4, ZSTD]))
    kind = draw(st.sampled_from(["data", "data", "transactional", "control", "empty"]))
    base = records[0][0] - draw(st.sampled_from([0, 0, 3]))
    common = dict(partition_leader_epoch=draw(st.sampled_from([-1, 0, 7])))
    if kind == "empty":
        return encode_empty_batch(base_offset=base, last_offset=records[-1][0], producer_id=9, producer_epoch=1,
                                  max_timestamp=records[-1][1], **common)
    if kind == "control":
        marker = [(records[0][0], records[0][1], encode_control_key(ControlRecordType.COMMIT), encode_end_txn_marker(3))]
        return encode_batch(marker, base_offset=base, producer_id=9, producer_epoch=1, is_transactional=True,
                            is_control=True, **common)
    txn = kind == "transactional"
    log_append = draw(st.booleans())
    return encode_batch(
        records, base_offset=base, compression_codec=codec,
        timestamp_type=LOG_APPEND_TIME if log_append else 0, log_append_time=1_800_000_000_000 if log_append else None,
        producer_id=9 if txn else draw(st.sampled_from([-1, 4])), producer_epoch=1 if txn else -1,
        base_sequence=draw(st.sampled_from([-1, 0, (1 << 31) - 2])), is_transactional=txn,
        delete_horizon_ms=draw(st.sampled_from([None, None, 1_700_000_000_000])) if not txn else None, **common)


@st.composite
def _legacy_batch(draw):
    records = [r[:4] for r in draw(_records(with_headers=False))]
    magic = draw(st.sampled_from([0, 1]))
    codec = draw(st.sampled_from([NONE, GZIP, SNAPPY, LZ4]))
    log_append = magic == 1 and draw(st.booleans())
    return encode_legacy_batch(records, magic=magic, compression_codec=codec,
                               timestamp_type=LOG_APPEND_TIME if log_append else 0,
                               log_append_time=1_800_000_000_000 if log_append else None)


_SEGMENTS = st.tuples(st.lists(st.one_of(_v2_batch(), _legacy_batch()), min_size=1, max_size=5),
                      st.one_of(st.just(b""), st.binary(max_size=80)))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_SEGMENTS)
def test_generated_segment_walks_and_decodes_the_same(native_module, segment):
    batches, tail = segment
    assert compare_segment(native_module, b"".join(batches) + tail) == 0 or tail


# -- v2_batches_end: the fetch path's whole-batch hop (engine/storage/segment.py) ------------


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_the_whole_batch_hop_of_a_fetch_is_the_reference(native_module, data):
    """Whole v2 batches (every codec), a legacy entry, a tail cut anywhere and bytes flipped
    anywhere: the native hop stops where the reference's does, for the same reason."""
    from plog.engine.storage.segment import _v2_batches_end

    batches = [encode_batch([(10 * n, 1000 + n, b"k%d" % n, b"v" * data.draw(st.integers(0, 300)))], base_offset=10 * n,
                            compression_codec=data.draw(st.sampled_from([NONE, GZIP, LZ4, SNAPPY, ZSTD])))
               for n in range(data.draw(st.integers(0, 6)))]
    if data.draw(st.booleans()):
        batches.insert(data.draw(st.integers(0, len(batches))), encode_message(99, 1, None, b"x"))
    buf = bytearray(b"".join(batches))
    buf = buf[:data.draw(st.integers(0, len(buf)))]
    for _ in range(data.draw(st.integers(0, 3))):
        if buf:
            buf[data.draw(st.integers(0, len(buf) - 1))] = data.draw(st.integers(0, 255))
    assert native_module.v2_batches_end(bytes(buf)) == _v2_batches_end(bytes(buf))
    assert native_module.v2_batches_end(buf) == _v2_batches_end(buf)  # a writable buffer too
