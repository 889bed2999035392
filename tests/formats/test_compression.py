"""Tests for plog.formats.compression (and XXH32, from the xxhash package, as its lz4 framing uses it).

Byte-exactness against Kafka comes from the kafka-format.md §21 vectors (made by Kafka's own
classes); interoperability from kafka-python's codecs; robustness from random, truncated
and bit-flipped streams and from decompression bombs built small.
"""

from __future__ import annotations

import gzip
import io
import random
import struct
import time
import tracemalloc
import zlib

import lz4.block
import lz4.frame
import pytest
import snappy
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plog.formats import compression as C
from plog.formats.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD, compress, decompress
from plog.formats.errors import (
    CompressionError,
    DecompressionLimitError,
    UnsupportedCodecError,
)
from xxhash import xxh32_intdigest as xxh32

kafka_codec = pytest.importorskip("kafka.codec")

MiB = 1 << 20
CODECS = (NONE, GZIP, SNAPPY, LZ4, ZSTD)
# (codec, magic) pairs Kafka allows: zstd only in v2 batches.
CODEC_MAGICS = [(c, m) for c in CODECS for m in (0, 1, 2) if not (c == ZSTD and m < 2)]

# --------------------------------------------------------------------------- §21 vectors

INNER_V2 = bytes.fromhex("10000000026b027600")  # the one record of v2_one_none
V2_ONE_GZIP = bytes.fromhex(
    "00000000000000000000004effffffff02d83f31140001000000000000018bcfe568000000018bcfe568"
    "00ffffffffffffffffffffffffffff000000011f8b08000000000000ff1360606060ca662a630000a37f"
    "cfa609000000"
)
V2_ONE_ZSTD = bytes.fromhex(
    "000000000000000000000046ffffffff02af79f96d0004000000000000018bcfe568000000018bcfe568"
    "00ffffffffffffffffffffffffffff0000000128b52ffd005848000010000000026b027600010000"
)
LZ4_RAWBLOCK_MAGIC2 = bytes.fromhex(
    "000000000000000000000049ffffffff02924fa7900003000000000000018bcfe568000000018bcfe568"
    "00ffffffffffffffffffffffffffff0000000104224d186040820900008010000000026b027600000000"
    "00"
)
V1_GZIP = bytes.fromhex(
    "000000000000000b00000052a4310b9701010000018bcfe56801ffffffff0000003c1f8b080000000000"
    "00ff63608003094bb51e63462083b1fbfcd30c90086336882883ca83a4c4231715e6c2d530fe070210a7"
    "1c00cfb44b8d47000000"
)
V1_GZIP_INNER = bytes.fromhex(
    "00000000000000000000001839268c3301000000018bcfe56800000000016b0000000176000000000000"
    "00010000001759a2716d01000000018bcfe56801ffffffff0000000177"
)
V0_GZIP = bytes.fromhex(
    "000000000000000b00000045773dcb930001ffffffff000000371f8b08000000000000ff636000032e20"
    "16907f739d0bcc63cc0611651029066e20e65fcadd9fccc0f01f084052e500dbee23b737000000"
)
V0_NONE = bytes.fromhex(
    "0000000000000000000000101fecd70a0000000000016b000000017600000000000000010000000fa50b"
    "8f630000ffffffff0000000177"
)
V1_NONE = bytes.fromhex(
    "00000000000000000000001839268c3301000000018bcfe56800000000016b0000000176000000000000"
    "00010000001759a2716d01000000018bcfe56801ffffffff0000000177"
)
LZ4_RAWBLOCK_MAGIC0 = bytes.fromhex(
    "0000000000000000000000398dfc7a460003ffffffff0000002b04224d1860401a1c0000800000000000"
    "000000000000101fecd70a0000000000016b000000017600000000"
)
LZ4_RAWBLOCK_MAGIC1 = bytes.fromhex(
    "0000000000000000000000491eccb20501030000018bcfe56800ffffffff0000003304224d1860408224"
    "00008000000000000000000000001839268c3301000000018bcfe56800000000016b0000000176000000"
    "00"
)


def legacy_value(entry: bytes) -> bytes:
    """The value of a single legacy log entry whose key is null (wrapper messages)."""
    magic = entry[16]
    key_at = 18 if magic == 0 else 26
    assert entry[key_at : key_at + 4] == b"\xff\xff\xff\xff"  # null key
    (value_len,) = struct.unpack_from(">i", entry, key_at + 4)
    value = entry[key_at + 8 :]
    assert len(value) == value_len
    return value


def with_offsets(message_set: bytes, offsets: list[int]) -> bytes:
    """A legacy message set with its entries' offset fields replaced (CRC is unaffected)."""
    out = bytearray(message_set)
    pos = 0
    for offset in offsets:
        struct.pack_into(">q", out, pos, offset)
        (size,) = struct.unpack_from(">i", out, pos + 8)
        pos += 12 + size
    assert pos == len(out)
    return bytes(out)


@pytest.mark.parametrize(
    "batch, codec", [(V2_ONE_GZIP, GZIP), (V2_ONE_ZSTD, ZSTD), (LZ4_RAWBLOCK_MAGIC2, LZ4)]
)
def test_v2_vectors_decompress(batch, codec):
    assert batch[21:23] == struct.pack(">h", codec)
    assert decompress(codec, batch[61:], 1024) == INNER_V2
    assert decompress(codec, memoryview(batch)[61:], len(INNER_V2)) == INNER_V2


@pytest.mark.parametrize("batch, codec", [(V2_ONE_GZIP, GZIP), (V2_ONE_ZSTD, ZSTD)])
def test_v2_vectors_reproduced_byte_for_byte(batch, codec):
    assert compress(codec, INNER_V2) == batch[61:]


def test_v1_gzip_wrapper():
    value = legacy_value(V1_GZIP)
    assert decompress(GZIP, value, 1024, magic=1) == V1_GZIP_INNER
    assert V1_GZIP_INNER == V1_NONE
    assert compress(GZIP, V1_GZIP_INNER, magic=1) == value


def test_v0_gzip_wrapper():
    # Inner offsets are absolute (10, 11); otherwise the messages are v0_none's.
    value = legacy_value(V0_GZIP)
    inner = decompress(GZIP, value, 1024, magic=0)
    assert inner == with_offsets(V0_NONE, [10, 11])
    assert compress(GZIP, inner, magic=0) == value


def test_lz4_rawblock_magic0_wrapper():
    value = legacy_value(LZ4_RAWBLOCK_MAGIC0)
    assert value[:7] == bytes.fromhex("04224d1860401a")  # the KAFKA-3160 HC
    assert decompress(LZ4, value, 1024, magic=0) == V0_NONE[:28]  # first v0 message
    with pytest.raises(CompressionError, match="descriptor corrupted"):
        decompress(LZ4, value, 1024, magic=1)
    with pytest.raises(CompressionError, match="descriptor corrupted"):
        decompress(LZ4, value, 1024, magic=2)


def test_lz4_rawblock_magic1_wrapper():
    value = legacy_value(LZ4_RAWBLOCK_MAGIC1)
    assert value[:7] == bytes.fromhex("04224d18604082")
    assert decompress(LZ4, value, 1024, magic=1) == V1_NONE[:36]  # first v1 message
    # Magic 0 readers skip the HC check, so the correct HC is accepted too.
    assert decompress(LZ4, value, 1024, magic=0) == V1_NONE[:36]


# --------------------------------------------------------------------------- names, ids


def test_codec_names_and_ids():
    assert C.CODEC_NAMES == {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
    for codec, name in C.CODEC_NAMES.items():
        assert C.codec_name(codec) == name
        assert C.codec_id(name) == codec
        assert C.codec_id(name.upper()) == codec
    assert (NONE, GZIP, SNAPPY, LZ4, ZSTD) == (0, 1, 2, 3, 4)


@pytest.mark.parametrize("bad", [-1, 5, 7, 100])
def test_unknown_codec_id(bad):
    with pytest.raises(UnsupportedCodecError, match=f"Unknown compression type id: {bad}"):
        C.codec_name(bad)
    with pytest.raises(UnsupportedCodecError):
        compress(bad, b"x")
    with pytest.raises(UnsupportedCodecError):
        decompress(bad, b"x", 10)


def test_unknown_codec_name():
    with pytest.raises(UnsupportedCodecError, match="Unknown compression name: brotli"):
        C.codec_id("brotli")


@pytest.mark.parametrize("magic", [0, 1])
def test_zstd_needs_magic_2(magic):
    message = f"ZStandard compression is not supported for magic {magic}"
    with pytest.raises(UnsupportedCodecError, match=message):
        compress(ZSTD, b"abc", magic=magic)
    with pytest.raises(UnsupportedCodecError, match=message):
        decompress(ZSTD, compress(ZSTD, b"abc"), 10, magic=magic)


# --------------------------------------------------------------------------- xxh32


@pytest.mark.parametrize(
    "data, expected",
    [(b"", 0x02CC5D05), (b"a", 0x550D7456), (b"abc", 0x32D153FF)],
)
def test_xxh32_known_values(data, expected):
    assert xxh32(data) == expected
    assert xxh32(bytearray(data)) == expected
    assert xxh32(memoryview(data)) == expected


def test_xxh32_lz4_descriptor_bytes():
    assert (xxh32(bytes([0x60, 0x40])) >> 8) & 0xFF == 0x82
    assert (xxh32(bytes.fromhex("04224d186040")) >> 8) & 0xFF == 0x1A


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=300))
def test_xxh32_matches_liblz4(data):
    # An LZ4 frame's content checksum is XXH32(content, seed 0), computed by liblz4.
    frame = lz4.frame.compress(data, content_checksum=True, store_size=False)
    assert xxh32(data) == struct.unpack("<I", frame[-4:])[0]


def test_xxh32_seed():
    # Reference values of the xxHash test suite (seed = PRIME32_1).
    assert xxh32(b"", 2654435761) == 0x36B78AE7
    assert xxh32(b"a", 0) != xxh32(b"a", 1)


# --------------------------------------------------------------------------- writer layouts


def sample(size: int, seed: int = 0, kind: str = "mixed") -> bytes:
    """Deterministic test data: random, repetitive, or a mix (JSON-ish runs + noise)."""
    rng = random.Random(seed)
    if kind == "random":
        return rng.randbytes(size)
    if kind == "zeros":
        return bytes(size)
    words = [b'{"id":', b'"user":"', b"alice", b"bob", b'"event":"click"', b"}", b",", b"\n"]
    out = bytearray()
    while len(out) < size:
        out += rng.choice(words) if rng.random() < 0.8 else rng.randbytes(rng.randint(1, 9))
    return bytes(out[:size])


def test_gzip_writer_header_and_trailer():
    data = sample(100_000)
    out = compress(GZIP, data)
    assert out[:10] == bytes.fromhex("1f8b08000000000000ff")
    assert struct.unpack("<II", out[-8:]) == (zlib.crc32(data), len(data))
    # Level 6 deflate; Python's gzip module differs only in the OS byte.
    assert out[10:] == gzip.compress(data, compresslevel=6, mtime=0)[10:]


def test_gzip_levels():
    data = sample(50_000)
    outs = {level: compress(GZIP, data, level=level) for level in range(1, 10)}
    assert outs[6] == compress(GZIP, data) == compress(GZIP, data, level=-1)
    assert outs[1] != outs[9]
    for out in outs.values():
        assert decompress(GZIP, out, len(data)) == data
    for bad in (0, 10, -2):
        with pytest.raises(ValueError):
            compress(GZIP, data, level=bad)


def snappy_chunks(stream: bytes) -> list[bytes]:
    assert stream[:16] == bytes.fromhex("82534e415050590000000001" "00000001")
    chunks, pos = [], 16
    while pos < len(stream):
        (length,) = struct.unpack_from(">i", stream, pos)
        chunks.append(stream[pos + 4 : pos + 4 + length])
        pos += 4 + length
    assert pos == len(stream)
    return chunks


@pytest.mark.parametrize("size", [0, 1, 32767, 32768, 32769, 65536, 100_000])
def test_snappy_writer_framing(size):
    data = sample(size, seed=size)
    chunks = snappy_chunks(compress(SNAPPY, data))
    assert [len(snappy.uncompress(c)) for c in chunks] == [
        min(32768, size - start) for start in range(0, size, 32768)
    ]
    assert b"".join(snappy.uncompress(c) for c in chunks) == data


def lz4_blocks(frame: bytes) -> list[tuple[bool, bytes]]:
    blocks, pos = [], 7
    while True:
        (word,) = struct.unpack_from("<I", frame, pos)
        pos += 4
        if word == 0:
            assert pos == len(frame)
            return blocks
        size = word & 0x7FFFFFFF
        blocks.append((bool(word >> 31), frame[pos : pos + size]))
        pos += size


@pytest.mark.parametrize("magic, hc", [(0, 0x1A), (1, 0x82), (2, 0x82)])
def test_lz4_writer_header(magic, hc):
    for data in (b"", b"x", sample(70_000)):
        out = compress(LZ4, data, magic=magic)
        assert out[:7] == bytes([0x04, 0x22, 0x4D, 0x18, 0x60, 0x40, hc])
        assert out[-4:] == b"\0\0\0\0"
        assert decompress(LZ4, out, len(data), magic=magic) == data
    assert compress(LZ4, b"") == bytes.fromhex("04224d18604082" "00000000")


def test_lz4_writer_blocks():
    data = sample(65536 * 2 + 10, kind="mixed") + sample(70_000, kind="random")
    blocks = lz4_blocks(compress(LZ4, data))
    # 64 KiB chunks; compressible ones are compressed, random ones stored with bit 31 set.
    assert [(raw, len(b) if raw else None) for raw, b in blocks] == [
        (False, None), (False, None), (True, 65536), (True, len(data) - 3 * 65536)
    ]
    assert b"".join(b for raw, b in blocks if raw) == data[2 * 65536 :]
    assert blocks[0][1] == lz4.block.compress(data[:65536], mode="default", store_size=False)


def test_lz4_levels():
    data = sample(200_000)
    fast = compress(LZ4, data)
    assert fast == compress(LZ4, data, level=9)
    for level in (1, 4, 12, 17):
        out = compress(LZ4, data, level=level)
        assert decompress(LZ4, out, len(data)) == data
    assert compress(LZ4, data, level=12) != fast
    for bad in (0, 18):
        with pytest.raises(ValueError):
            compress(LZ4, data, level=bad)


def zstd_frame_header(frame: bytes) -> int:
    assert frame[:4] == bytes.fromhex("28b52ffd")
    return frame[4]


@pytest.mark.parametrize("size", [0, 9, 1000, 131072, 300_000])
def test_zstd_writer_frame(size):
    data = sample(size, seed=size)
    out = compress(ZSTD, data)
    # FHD 0: no content size, no checksum, not single-segment (window descriptor follows).
    assert zstd_frame_header(out) == 0
    assert zstandard.get_frame_parameters(out).content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert out.endswith(b"\x01\x00\x00")  # empty last raw block: ZSTD_e_end after a flush
    assert decompress(ZSTD, out, size) == data


def test_zstd_levels():
    data = sample(20_000)
    assert compress(ZSTD, data) == compress(ZSTD, data, level=3)
    for level in (-5, 1, 12):
        assert decompress(ZSTD, compress(ZSTD, data, level=level), len(data)) == data
    for bad in (23, -131073):
        with pytest.raises(ValueError):
            compress(ZSTD, data, level=bad)


def test_none_codec():
    assert compress(NONE, memoryview(b"abc")) == b"abc"
    assert decompress(NONE, bytearray(b"abc"), 3) == b"abc"
    with pytest.raises(DecompressionLimitError):
        decompress(NONE, b"abcd", 3)


def test_inputs_of_every_buffer_type():
    data = sample(5000)
    for codec, magic in CODEC_MAGICS:
        out = compress(codec, data, magic=magic)
        assert compress(codec, bytearray(data), magic=magic) == out
        assert compress(codec, memoryview(data), magic=magic) == out
        padded = b"pad" + out + b"pad"
        assert decompress(codec, memoryview(padded)[3:-3], len(data), magic=magic) == data
        assert decompress(codec, bytearray(out), len(data), magic=magic) == data


# --------------------------------------------------------------------------- round trips

BOUNDARY_SIZES = [0, 1, 2, 15, 16, 17, 32767, 32768, 32769, 65535, 65536, 65537,
                  98304, 131072, 131073, 196608, 262144, 300 * 1024]


@st.composite
def payloads(draw):
    size = draw(st.sampled_from(BOUNDARY_SIZES) | st.integers(0, 300 * 1024))
    kind = draw(st.sampled_from(["random", "zeros", "mixed"]))
    return sample(size, seed=draw(st.integers(0, 2**16)), kind=kind)


@pytest.mark.parametrize("codec, magic", CODEC_MAGICS)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=payloads())
def test_round_trip(codec, magic, data):
    out = compress(codec, data, magic=magic)
    assert decompress(codec, out, len(data), magic=magic) == data
    if data:
        with pytest.raises(DecompressionLimitError):
            decompress(codec, out, len(data) - 1, magic=magic)


@settings(max_examples=40, deadline=None)
@given(data=st.binary(max_size=2000), codec=st.sampled_from(CODECS))
def test_round_trip_small_binary(data, codec):
    assert decompress(codec, compress(codec, data), len(data)) == data


# --------------------------------------------------------------------------- kafka-python


KP_ENCODERS = {
    GZIP: kafka_codec.gzip_encode,
    SNAPPY: kafka_codec.snappy_encode,
    LZ4: kafka_codec.lz4_encode,
    ZSTD: kafka_codec.zstd_encode,
}
KP_DECODERS = {
    GZIP: kafka_codec.gzip_decode,
    SNAPPY: kafka_codec.snappy_decode,
    LZ4: kafka_codec.lz4_decode,
    ZSTD: kafka_codec.zstd_decode,
}
KP_SIZES = [1, 100, 32768, 32769, 65536, 65537, 200_000]


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
@pytest.mark.parametrize("size", KP_SIZES)
def test_kafka_python_encodes_we_decode(codec, size):
    data = sample(size, seed=size)
    assert decompress(codec, KP_ENCODERS[codec](data), size) == data


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
@pytest.mark.parametrize("size", KP_SIZES)
def test_we_encode_kafka_python_decodes(codec, size):
    data = sample(size, seed=size)
    assert KP_DECODERS[codec](compress(codec, data)) == data


def test_kafka_python_raw_snappy_and_lz4_content_size():
    data = sample(50_000)
    # Non-xerial snappy (what some clients write) is one raw block.
    assert decompress(SNAPPY, kafka_codec.snappy_encode(data, xerial_compatible=False), 50_000) == data
    # kafka-python's LZ4 frames store the content size: FLG 0x68, HC over 10 bytes.
    frame = kafka_codec.lz4_encode(data)
    assert frame[4] & 0x08
    assert decompress(LZ4, frame, 50_000) == data


def test_kafka_python_old_kafka_lz4_header():
    # kafka-python's lz4_encode_old_kafka needs the xxhash package; build the same bytes:
    # no content size, HC over magic + FLG + BD.
    data = sample(10_000)
    frame = lz4.frame.compress(data, block_linked=False, store_size=False)
    broken = frame[:6] + bytes([(xxh32(frame[:6]) >> 8) & 0xFF]) + frame[7:]
    assert decompress(LZ4, broken, 10_000, magic=0) == data
    with pytest.raises(CompressionError):
        decompress(LZ4, broken, 10_000, magic=1)
    assert compress(LZ4, data, magic=0)[:7] == broken[:7]


def test_kafka_python_v2_batches():
    from kafka.record.default_records import DefaultRecordBatchBuilder

    for codec in (GZIP, SNAPPY, LZ4, ZSTD):
        builder = DefaultRecordBatchBuilder(
            magic=2, compression_type=codec, is_transactional=False,
            producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 20,
        )
        for i in range(200):
            builder.append(i, timestamp=1700000000000 + i, key=b"k%d" % i,
                           value=b"value-%d" % i * 5, headers=[])
        batch = bytes(builder.build())
        assert struct.unpack_from(">h", batch, 21)[0] & 7 == codec
        records = decompress(codec, batch[61:], 1 << 20)
        # The first record: length varint, attributes 0, timestamp delta 0, offset delta 0.
        assert records[1:4] == b"\x00\x00\x00"
        assert b"value-199" in records


# --------------------------------------------------------------------------- stream details


def test_gzip_concatenated_members_and_trailing_bytes():
    a, b = sample(40_000, 1), sample(30_000, 2)
    two = compress(GZIP, a) + gzip.compress(b)
    assert decompress(GZIP, two, 70_000) == a + b
    with pytest.raises(DecompressionLimitError):
        decompress(GZIP, two, 69_999)
    # GZIPInputStream ignores bytes after a member that are not a gzip header.
    assert decompress(GZIP, compress(GZIP, a) + b"junk", 40_000) == a
    # A following member with a valid header but a corrupt body is an error.
    bad = bytearray(compress(GZIP, b))
    bad[-8] ^= 1  # its CRC
    with pytest.raises(CompressionError):
        decompress(GZIP, compress(GZIP, a) + bytes(bad), 70_000)


def test_gzip_optional_header_fields():
    data = sample(1000)
    buf = io.BytesIO()
    with gzip.GzipFile(filename="name.txt", mode="wb", fileobj=buf, mtime=1) as f:
        f.write(data)
    assert decompress(GZIP, buf.getvalue(), 1000) == data
    # FEXTRA + FCOMMENT + FHCRC, built by hand.
    extra = b"\x01\x02" + struct.pack("<H", 3) + b"abc"
    header = bytes([0x1F, 0x8B, 8, 0x04 | 0x10 | 0x02, 0, 0, 0, 0, 0, 0xFF])
    header += struct.pack("<H", len(extra)) + extra + b"comment\0"
    header += struct.pack("<H", zlib.crc32(header) & 0xFFFF)
    body = compress(GZIP, data)[10:]
    assert decompress(GZIP, header + body, 1000) == data


def test_gzip_rejects_non_gzip_and_empty():
    for bad in (b"", b"\x1f", b"\x1f\x8b\x08", b"not gzip at all", zlib.compress(b"abc")):
        with pytest.raises(CompressionError):
            decompress(GZIP, bad, 100)


def test_snappy_raw_block_fallback():
    data = sample(100_000)
    assert decompress(SNAPPY, snappy.compress(data), 100_000) == data
    # Shorter than the 16-byte header but starting with the magic: still a raw block.
    short = snappy.compress(b"\x82SNAPPY")
    assert decompress(SNAPPY, short, 100) == b"\x82SNAPPY"
    with pytest.raises(CompressionError, match="empty"):
        decompress(SNAPPY, b"", 100)


def test_snappy_concatenated_streams():
    a, b = sample(40_000, 1), sample(50_000, 2)
    assert decompress(SNAPPY, compress(SNAPPY, a) + compress(SNAPPY, b), 90_000) == a + b
    # An empty stream's header appended is skipped too.
    assert decompress(SNAPPY, compress(SNAPPY, a) + compress(SNAPPY, b""), 40_000) == a
    # The magic's first int followed by something other than "PPY\0" ends the stream.
    assert decompress(SNAPPY, compress(SNAPPY, a) + b"\x82SNAxxxx" + bytes(8), 40_000) == a
    # A concatenated header that is cut short is an error.
    with pytest.raises(CompressionError):
        decompress(SNAPPY, compress(SNAPPY, a) + b"\x82SNAPPY\x00\x00", 40_000)


def test_snappy_stream_errors():
    header = compress(SNAPPY, b"")
    with pytest.raises(CompressionError, match="negative"):
        decompress(SNAPPY, header + struct.pack(">i", -5) + b"xxxxx", 100)
    with pytest.raises(CompressionError, match="failed to read chunk"):
        decompress(SNAPPY, header + struct.pack(">i", 100) + b"short", 100)
    with pytest.raises(CompressionError, match="version"):
        decompress(SNAPPY, b"\x82SNAPPY\x00" + struct.pack(">ii", 0, 1) + b"\0\0\0\0", 100)
    with pytest.raises(CompressionError):
        decompress(SNAPPY, header + struct.pack(">i", 0), 100)  # empty chunk
    # Up to 3 stray bytes where a chunk length belongs end the stream (snappy-java).
    assert decompress(SNAPPY, compress(SNAPPY, b"abc") + b"\0\0", 100) == b"abc"
    assert decompress(SNAPPY, header, 100) == b""


def lz4_frame(flg: int, bd: int, blocks: list[bytes], *, hc: int | None = None,
              content_size: int | None = None, tail: bytes = b"\0\0\0\0") -> bytes:
    descriptor = bytes([flg, bd]) + (struct.pack("<Q", content_size) if content_size is not None else b"")
    if hc is None:
        hc = (xxh32(descriptor) >> 8) & 0xFF
    return b"\x04\x22\x4d\x18" + descriptor + bytes([hc]) + b"".join(blocks) + tail


def lz4_block(data: bytes, *, checksum: bool = False, raw: bool = False) -> bytes:
    payload = data if raw else lz4.block.compress(data, store_size=False)
    word = len(payload) | (0x80000000 if raw else 0)
    out = struct.pack("<I", word) + payload
    return out + (struct.pack("<I", xxh32(payload)) if checksum else b"")


def test_lz4_reader_options():
    data = sample(3000)
    plain = lz4_block(data)
    assert decompress(LZ4, lz4_frame(0x60, 0x40, [plain]), 3000) == data
    # Content size (skipped), all four block sizes, dependent-block flag unset.
    assert decompress(LZ4, lz4_frame(0x68, 0x70, [plain], content_size=3000), 3000) == data
    assert decompress(LZ4, lz4_frame(0x40, 0x50, [plain]), 3000) == data
    # Block checksums are verified, on short and long blocks.
    big = sample(200_000, kind="random")
    frame = lz4_frame(0x70, 0x60, [lz4_block(data, checksum=True), lz4_block(big, checksum=True, raw=True)])
    assert decompress(LZ4, frame, 203_000) == data + big
    for flip in (12, len(frame) - 10):
        broken = bytearray(frame)
        broken[flip] ^= 0x40
        with pytest.raises(CompressionError):
            decompress(LZ4, bytes(broken), 203_000)
    # A content checksum is read and ignored, but must be there.
    assert decompress(LZ4, lz4_frame(0x64, 0x40, [plain], tail=b"\0" * 8), 3000) == data
    with pytest.raises(CompressionError, match="prematurely"):
        decompress(LZ4, lz4_frame(0x64, 0x40, [plain], tail=b"\0" * 6), 3000)
    # Bytes after the end mark are ignored.
    assert decompress(LZ4, lz4_frame(0x60, 0x40, [plain], tail=b"\0" * 4 + b"junk"), 3000) == data


@pytest.mark.parametrize(
    "frame, match",
    [
        (b"\x04\x22\x4d\x18\x60", "prematurely"),
        (b"\x05\x22\x4d\x18\x60\x40\x82\0\0\0\0", "invalid magic"),
        (lz4_frame(0xA0, 0x40, []), "version"),
        (lz4_frame(0x61, 0x40, []), "reserved"),
        (lz4_frame(0x60, 0x41, []), "reserved"),
        (lz4_frame(0x60, 0x30, []), "block size code 3"),
        (lz4_frame(0x60, 0x40, [], hc=0x00), "descriptor corrupted"),
        (lz4_frame(0x60, 0x40, [], tail=b""), "prematurely"),
        (lz4_frame(0x60, 0x40, [lz4_block(bytes(65537), raw=True)]), "exceeded max"),
        (lz4_frame(0x60, 0x40, [b"\x10\0\0\0abc"]), "prematurely"),
        (lz4_frame(0x60, 0x40, [b"\x03\0\0\0\xff\xff\xff"]), "does not decode"),
    ],
)
def test_lz4_reader_errors(frame, match):
    with pytest.raises(CompressionError, match=match):
        decompress(LZ4, frame, 1 << 20)


def test_zstd_reader_frames():
    a, b = sample(200_000, 1), sample(1000, 2)
    two = compress(ZSTD, a) + zstandard.ZstdCompressor(write_checksum=True).compress(b)
    assert decompress(ZSTD, two, 201_000) == a + b
    skippable = struct.pack("<II", 0x184D2A53, 5) + b"hello"
    assert decompress(ZSTD, skippable + compress(ZSTD, b) + skippable, 1000) == b
    assert decompress(ZSTD, b"", 0) == b""  # zstd-jni returns EOF on empty input
    with pytest.raises(CompressionError, match="Truncated|prematurely"):
        decompress(ZSTD, compress(ZSTD, a)[:-1], 200_000)
    with pytest.raises(CompressionError, match="unknown frame"):
        decompress(ZSTD, compress(ZSTD, b) + b"junkjunk", 1000)
    corrupt = bytearray(compress(ZSTD, a))
    corrupt[20] ^= 0xFF
    with pytest.raises(CompressionError):
        decompress(ZSTD, bytes(corrupt), 200_000)


def test_zstd_frame_with_content_size_is_not_trusted():
    data = sample(50_000)
    frame = bytearray(zstandard.ZstdCompressor().compress(data))  # single segment, FCS
    assert decompress(ZSTD, bytes(frame), 50_000) == data
    with pytest.raises(DecompressionLimitError):
        decompress(ZSTD, bytes(frame), 49_999)


# --------------------------------------------------------------------------- hostile input

def decode_or_compression_error(codec: int, data: bytes, max_size: int, magic: int = 2):
    try:
        out = decompress(codec, data, max_size, magic=magic)
    except CompressionError:
        return None
    assert isinstance(out, bytes) and len(out) <= max_size
    return out


@settings(max_examples=300, deadline=None)
@given(
    codec_magic=st.sampled_from(CODEC_MAGICS),
    data=st.binary(max_size=200)
    | st.builds(lambda p, t: p + t, st.sampled_from(
        [b"\x1f\x8b\x08\x00", b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01",
         b"\x04\x22\x4d\x18\x60\x40\x82", b"\x04\x22\x4d\x18\x60\x70\x1a",
         b"\x28\xb5\x2f\xfd\x00\x58", b"\x28\xb5\x2f\xfd\x20"]), st.binary(max_size=200)),
    max_size=st.sampled_from([0, 10, 1000, 1 << 30]),
)
def test_random_bytes_raise_only_compression_errors(codec_magic, data, max_size):
    codec, magic = codec_magic
    decode_or_compression_error(codec, data, max_size, magic)


VALID_STREAMS = {
    (codec, magic): compress(codec, sample(70_000, seed=codec), magic=magic)
    for codec, magic in CODEC_MAGICS
    if codec != NONE
}


@pytest.mark.parametrize("codec, magic", sorted(VALID_STREAMS))
def test_truncations_raise_only_compression_errors(codec, magic):
    stream = VALID_STREAMS[(codec, magic)]
    data = sample(70_000, seed=codec)
    cuts = sorted(set(range(0, 40)) | set(range(0, len(stream), 97)) | set(range(len(stream) - 40, len(stream))))
    for cut in cuts:
        out = decode_or_compression_error(codec, stream[:cut], 1 << 20, magic)
        if out is None:
            continue
        # snappy-java ends a stream quietly at a chunk boundary; zstd-jni reads empty
        # input as no data. Anything decoded must be a prefix of the original.
        assert codec in (SNAPPY, ZSTD), (codec, cut)
        assert data.startswith(out)


@settings(max_examples=150, deadline=None)
@given(
    key=st.sampled_from(sorted(VALID_STREAMS)),
    flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 7)), min_size=1, max_size=3),
)
def test_bit_flips_raise_only_compression_errors(key, flips):
    codec, magic = key
    stream = bytearray(VALID_STREAMS[key])
    for pos, bit in flips:
        stream[pos % len(stream)] ^= 1 << bit
    decode_or_compression_error(codec, bytes(stream), 1 << 20, magic)


# --------------------------------------------------------------------------- bombs

GiB = 1 << 30


def gzip_gib_of_zeros() -> bytes:
    # Full flushes reset the deflate state, so every 1 MiB of zeros compresses to the
    # same ~1 KB; repeating it declares 1 GiB without compressing 1 GiB. The trailer is
    # never reached (and would not match), which also makes a missing bound fail loudly.
    deflater = zlib.compressobj(9, zlib.DEFLATED, 31)
    first = deflater.compress(bytes(MiB)) + deflater.flush(zlib.Z_FULL_FLUSH)
    again = deflater.compress(bytes(MiB)) + deflater.flush(zlib.Z_FULL_FLUSH)
    return first + again * 1023 + deflater.flush()


def zstd_gib_of_zeros() -> bytes:
    # 8192 RLE blocks of 128 KiB: 4 bytes each.
    header = b"\x28\xb5\x2f\xfd\x00\x58"
    block = struct.pack("<I", (131072 << 3) | (1 << 1))[:3] + b"\0"
    last = struct.pack("<I", (131072 << 3) | (1 << 1) | 1)[:3] + b"\0"
    return header + block * 8191 + last


def lz4_gib_of_zeros() -> bytes:
    # BD code 7: 256 blocks that each decode to 4 MiB of zeros.
    return lz4_frame(0x60, 0x70, [lz4_block(bytes(4 * MiB))] * 256)


def snappy_bomb() -> bytes:
    # snappy expands at most ~21x, so 64 MiB of zeros: 2048 chunks of 32 KiB.
    return compress(SNAPPY, b"") + (struct.pack(">i", len(b := snappy.compress(bytes(32768)))) + b) * 2048


BOMBS = {
    GZIP: gzip_gib_of_zeros,
    ZSTD: zstd_gib_of_zeros,
    LZ4: lz4_gib_of_zeros,
    SNAPPY: snappy_bomb,
}


@pytest.mark.parametrize("codec", sorted(BOMBS))
def test_bombs_stop_at_max_size(codec):
    bomb = BOMBS[codec]()
    assert len(bomb) < 8 * MiB
    tracemalloc.start()
    try:
        start = time.perf_counter()
        with pytest.raises(DecompressionLimitError):
            decompress(codec, bomb, MiB)
        elapsed = time.perf_counter() - start
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert elapsed < 1.0
    # max_size plus one block (4 MiB for lz4 BD 7) plus slack for the joined output.
    assert peak < 12 * MiB, peak


def test_zstd_rle_construction_is_well_formed():
    # The same RLE construction, small enough to decode, checks the bomb is well formed.
    header = b"\x28\xb5\x2f\xfd\x00\x58"
    block = struct.pack("<I", (131072 << 3) | (1 << 1))[:3] + b"\0"
    last = struct.pack("<I", (131072 << 3) | (1 << 1) | 1)[:3] + b"\0"
    assert decompress(ZSTD, header + block * 7 + last, MiB) == bytes(MiB)


def test_snappy_bogus_declared_length_refused_before_allocation():
    bogus = bytes([0x80, 0x80, 0x80, 0x80, 0x08]) + b"\x00" * 20  # varint 2**31
    for max_size in (MiB, 1 << 40):
        tracemalloc.start()
        try:
            with pytest.raises(CompressionError):
                decompress(SNAPPY, bogus, max_size)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < MiB
    framed = compress(SNAPPY, b"") + struct.pack(">i", len(bogus)) + bogus
    with pytest.raises(CompressionError, match="declares 2147483648"):
        decompress(SNAPPY, framed, 1 << 40)
    # A plausible declared length beyond the limit is refused before decoding.
    block = snappy.compress(bytes(4 * MiB))
    with pytest.raises(DecompressionLimitError):
        decompress(SNAPPY, block, MiB)
    # A varint longer than 5 bytes or past 32 bits is corrupt.
    for bad in (b"\xff\xff\xff\xff\xff\x01", b"\xff\xff\xff\xff\x7f", b"\x80"):
        with pytest.raises(CompressionError, match="length varint"):
            decompress(SNAPPY, bad, 1 << 40)


def test_lz4_many_large_blocks_bounded():
    # BD code 7 (4 MiB blocks), many blocks of 64 KiB output each.
    frame = lz4_frame(0x60, 0x70, [lz4_block(bytes(65536))] * 1000)
    with pytest.raises(DecompressionLimitError):
        decompress(LZ4, frame, MiB)
    assert decompress(LZ4, frame, 1000 * 65536) == bytes(1000 * 65536)
    # A limit that falls inside a block: exactly at the boundary passes, one byte less fails.
    assert len(decompress(LZ4, lz4_frame(0x60, 0x70, [lz4_block(bytes(100_000))] * 3), 300_000)) == 300_000
    with pytest.raises(DecompressionLimitError):
        decompress(LZ4, lz4_frame(0x60, 0x70, [lz4_block(bytes(100_000))] * 3), 299_999)


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_limit_is_exact(codec):
    data = sample(150_000)
    out = compress(codec, data)
    assert decompress(codec, out, 150_000) == data
    for limit in (0, 1, 65536, 149_999):
        with pytest.raises(DecompressionLimitError, match=f"limit of {limit} bytes"):
            decompress(codec, out, limit)


def test_negative_max_size_is_a_caller_error():
    with pytest.raises(ValueError):
        decompress(GZIP, compress(GZIP, b"x"), -1)


def test_lz4_frame_headers_carry_their_checksums():
    """The header bytes written out in compression.py are xxh32's (KAFKA-3160 for magic 0)."""
    from plog.formats import compression as c

    assert c._LZ4_HEADER[6] == c._lz4_header_checksum(bytes([c._LZ4_FLG, c._LZ4_BD]))
    assert c._LZ4_HEADER_V0[6] == c._lz4_header_checksum(c._LZ4_HEADER[:6])
    assert c._LZ4_HEADER[:6] == c._LZ4_HEADER_V0[:6] == c._LZ4_MAGIC + bytes([c._LZ4_FLG, c._LZ4_BD])


def test_importing_the_codecs_loads_no_codec_library():
    """The codec libraries are loaded on first use (start-up time of every command)."""
    import subprocess
    import sys

    code = ("import sys; import plog.formats.compression; "
            "print(sorted(m for m in ('xxhash', 'lz4', 'lz4.block', 'snappy', 'zstandard') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
