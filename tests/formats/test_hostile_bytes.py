"""Hostile bytes: mutations and truncations of real batches give only typed errors.

Thousands of random mutations of corpus batches (every codec the corpus holds, v0/v1/v2)
go through the entry iterator, CRC validation and record decoding. The only exceptions
allowed are plog's FormatError subclasses; nothing may hang or allocate from an
unchecked length field. The seed is printed so a failure can be replayed.
"""

from __future__ import annotations

import os
import random
import struct
import tracemalloc

import pytest

from conftest import CORPUS
from kafka_vectors import VEC
from plog.formats import compression
from plog.formats.batches import iter_batches
from plog.formats.errors import DecompressionLimitError, FormatError
from plog.formats.record_batch import RecordBatch, encode_batch

SEED = int(os.environ.get("PLOG_FUZZ_SEED", random.randrange(1 << 30)))

SAMPLES = [
    "berkayakcay__toy-node-log-collector/kafka-data/topic-logx-001-0/00000000000000000000.log",  # gzip
    "ArthurArutunyan04__Backend_labs/kafka-data/oms_order_status_changed-0/00000000000000000000.log",  # snappy
    "rjmfernandes__flink-on-prem/data/_confluent-command-0/00000000000000000000.log",  # lz4
    "ItumelengMogase__Real-Time-Data-Pipeline-for-Patient-Admissions/kafka-data/_confluent-ksql-default__command_topic-0/00000000000000000000.log",
    "BiggerBrain__kafka/data/lsx1-0/00000000000000000000.log",
    "vectors/extracted_record_sets/segmentio__kafka-go__v1-v1c-v2-v2c-v2b-v2b-v2b-v2bc-v1b-v1bc__p0.records",
    "vectors/extracted_record_sets/tulios__kafkajs__v0_response_gzip__p0.records",
]


def _seed_batches() -> list[bytes]:
    out = [v for k, v in VEC.items() if not k.endswith("_inner")]
    out.append(encode_batch([(i, 1, b"k%d" % i, b"v" * i, (("h", b"x"),)) for i in range(20)], compression_codec=4))
    for rel in SAMPLES:
        data = (CORPUS / rel).read_bytes()
        for b in list(iter_batches(data))[:6]:
            out.append(bytes(b.buffer))
    return out


def _exercise(data: bytes) -> None:
    it = iter_batches(data)
    for b in it:
        b.is_valid()
        b.records(max_decompressed=4 << 20)
        _ = (b.base_offset, b.last_offset, b.max_timestamp, b.compression_name)


def _mutate(rnd: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    kind = rnd.randrange(6)
    if kind == 0 and b:  # bit flips
        for _ in range(rnd.randint(1, 4)):
            i = rnd.randrange(len(b))
            b[i] ^= 1 << rnd.randrange(8)
    elif kind == 1 and b:  # random byte overwrite anywhere after the header fields we want to keep
        for _ in range(rnd.randint(1, 8)):
            b[rnd.randrange(len(b))] = rnd.randrange(256)
    elif kind == 2:  # truncation
        del b[rnd.randrange(len(b) + 1):]
    elif kind == 3 and len(b) > 61:  # lie in a length/count field
        field = rnd.choice([(8, ">i"), (57, ">i"), (61, ">b"), (61, ">i")])
        val = rnd.choice([0x7FFFFFFF, -1, -2, 0, 1, 1 << 20, 0x7FFFFFF0])
        try:
            struct.pack_into(field[1], b, field[0], val if field[1] != ">b" else max(-128, min(127, val)))
        except struct.error:
            pass
    elif kind == 4:  # insert junk
        i = rnd.randrange(len(b) + 1)
        b[i:i] = rnd.randbytes(rnd.randint(1, 32))
    else:  # set bytes of the records region to the longest varints
        for _ in range(rnd.randint(1, 5)):
            i = rnd.randrange(len(b))
            b[i:i + 5] = b"\xfe\xff\xff\xff\x0f"[: max(0, len(b) - i)]
    return bytes(b)


def test_random_mutations_raise_only_typed_errors(corpus):
    rnd = random.Random(SEED)
    seeds = _seed_batches()
    typed = 0
    for i in range(6000):
        original = rnd.choice(seeds)
        data = _mutate(rnd, original)
        try:
            _exercise(data)
        except FormatError:
            typed += 1
        except Exception as e:  # pragma: no cover - this is the failure being hunted
            pytest.fail(f"seed {SEED} iteration {i}: {type(e).__name__}: {e} on {data.hex()}")
    assert typed > 500, "mutations should mostly be detected"


def test_batch_claiming_2gib_is_a_partial_tail_not_an_allocation():
    raw = bytearray(VEC["v2_one_none"])
    struct.pack_into(">i", raw, 8, 0x7FFFFFFF)
    it = iter_batches(bytes(raw))
    assert list(it) == [] and it.trailing.declared_size == 0x7FFFFFFF + 12


def test_varint_length_of_2_31_is_rejected_cheaply():
    # A record whose key length varint says 2^31-1 inside a tiny batch.
    body = b"\x00\x00\x00" + b"\xfe\xff\xff\xff\x0f" + b"k"
    payload = bytes([len(body) << 1]) + body
    raw = bytearray(encode_batch([(0, 1, b"k", b"v")]))
    raw[61:] = payload
    struct.pack_into(">i", raw, 8, len(raw) - 12)
    tracemalloc.start()
    try:
        with pytest.raises(FormatError):
            RecordBatch(memoryview(bytes(raw))).records()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


@pytest.mark.parametrize("codec", [compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD])
def test_decompression_bomb_is_bounded(codec):
    zeros = b"\x00" * (64 << 20)
    raw = bytearray(encode_batch([(0, 1, None, b"x")]))
    bomb = compression.compress(codec, zeros)
    raw[21:23] = struct.pack(">h", codec)
    raw[61:] = bomb
    struct.pack_into(">i", raw, 8, len(raw) - 12)
    del zeros
    tracemalloc.start()
    try:
        with pytest.raises(DecompressionLimitError):
            RecordBatch(memoryview(bytes(raw))).records(max_decompressed=1 << 20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20, f"peak {peak} bytes while refusing a bomb"


def test_seed_is_reported():
    print(f"hostile-bytes seed: {SEED} (replay with PLOG_FUZZ_SEED={SEED})")
