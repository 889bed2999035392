"""kafka-python's record classes as an independent oracle (test-only dependency).

Batches plog encodes decode identically with kafka-python's DefaultRecordBatch /
LegacyRecordBatch, and batches kafka-python builds decode identically with plog, for
every codec, with headers, null and empty keys/values and producer ids.
"""

from __future__ import annotations

import random

import pytest

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from plog.formats import compression
from plog.formats.batches import iter_batches
from plog.formats.legacy import encode_legacy_batch
from plog.formats.record_batch import RecordBatch, encode_batch

CODECS = [compression.NONE, compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD]
LEGACY_CODECS = CODECS[:4]
TS0 = 1700000000000


def workload(seed: int, n: int = 200, base: int = 0):
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        key = rnd.choice([None, b"", rnd.randbytes(rnd.randint(1, 40))])
        value = rnd.choice([None, b"", rnd.randbytes(rnd.randint(1, 300)), b"x" * rnd.randint(0, 5000)])
        headers = tuple(
            (rnd.choice(["h", "trace-id", "ünï", ""]) + str(j), rnd.choice([None, b"", rnd.randbytes(8)]))
            for j in range(rnd.choice([0, 0, 1, 3]))
        )
        out.append((base + i, TS0 + rnd.randint(-1000, 100000), key, value, headers))
    return out


def kp_records(raw: bytes):
    assert DefaultRecordBatch(bytearray(raw)).validate_crc()
    batch = DefaultRecordBatch(bytearray(raw))
    out = []
    for r in batch:
        out.append((r.offset, r.timestamp, r.key, r.value, tuple((k, v) for k, v in r.headers)))
    return batch, out


@pytest.mark.parametrize("codec", CODECS)
def test_plog_encodes_kafka_python_decodes(codec):
    records = workload(codec, base=1000)
    raw = encode_batch(records, base_offset=1000, compression_codec=codec, producer_id=77, producer_epoch=3,
                       base_sequence=500, partition_leader_epoch=4)
    batch, decoded = kp_records(raw)
    assert batch.compression_type == codec
    assert (batch.base_offset, batch.producer_id, batch.producer_epoch, batch.base_sequence) == (1000, 77, 3, 500)
    assert batch.max_timestamp == max(r[1] for r in records)
    expected = [(o, t, None if k is None else bytes(k), None if v is None else bytes(v),
                 tuple((hk, hv) for hk, hv in h)) for o, t, k, v, h in records]
    assert decoded == expected


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("transactional", [False, True])
def test_kafka_python_encodes_plog_decodes(codec, transactional):
    records = workload(100 + codec)
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=transactional,
                                        producer_id=5 if transactional else -1, producer_epoch=1 if transactional else -1,
                                        base_sequence=0 if transactional else -1, batch_size=1 << 30)
    for o, t, k, v, h in records:
        assert builder.append(o, t, k, v, list(h)) is not None
    raw = bytes(builder.build())
    (batch,) = list(iter_batches(raw))
    assert isinstance(batch, RecordBatch) and batch.is_valid()
    assert batch.compression == codec and batch.is_transactional == transactional
    assert [tuple(r) for r in batch.records()] == [(o, t, k, v, h) for o, t, k, v, h in records]
    # and kafka-python agrees with itself on the same bytes
    _, decoded = kp_records(raw)
    assert decoded == [tuple(r) for r in batch.records()]


# kafka-python reads and writes magic-0 lz4 (the KAFKA-3160 header checksum) only with the
# optional xxhash package, which is not a dependency; that case is judged by Kafka's own
# vector `lz4_rawblock_magic0` in test_legacy.py instead.
LEGACY_CASES = [(m, c) for m in (0, 1) for c in LEGACY_CODECS if (m, c) != (0, compression.LZ4)]


@pytest.mark.parametrize("magic,codec", LEGACY_CASES)
def test_legacy_both_directions(magic, codec):
    rnd = random.Random(magic * 10 + codec)
    records = [(i, TS0 + i if magic else -1, rnd.choice([None, rnd.randbytes(5)]), rnd.randbytes(rnd.randint(0, 200)))
               for i in range(50)]
    _kafka_python_builds_plog_reads(magic, codec, records)
    # plog builds, kafka-python reads
    mine = encode_legacy_batch(records, magic=magic, compression_codec=codec)
    mr = MemoryRecords(mine)
    back = []
    while (kp := mr.next_batch()) is not None:
        assert kp.validate_crc()
        back += [(r.offset, r.timestamp if magic else -1, r.key, r.value) for r in kp]
    assert back == records


def _kafka_python_builds_plog_reads(magic, codec, records):
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 30)
    for o, t, k, v in records:
        builder.append(o, t if magic else None, k, v)
    raw = bytes(builder.build())
    got = [(r.offset, r.timestamp, r.key, r.value) for b in iter_batches(raw) for r in b.records()]
    assert all(b.is_valid() for b in iter_batches(raw))
    assert got == records
