"""Decoding a v2 records region: the two fast passes (heads, then tails) agree with the
plain record-by-record decoder on every input, well-formed or not.

decode_records frames every record first (record_heads' pass) and decodes values and
headers in a second pass; anything unusual sends the region to _decode_checked, which
reads one record at a time with Kafka's checks in Kafka's order. These tests mutate
encoded regions at random and require the same records, or the same error type and
message, from both; and the same heads from record_heads as from the decoded records.
The seed is printed so a failure can be replayed.
"""

from __future__ import annotations

import os
import random

import pytest

from plog.formats.errors import FormatError
from plog.formats.default_record import (
    HEAD_END,
    HEAD_KEY,
    HEAD_OFFSET,
    HEAD_SIZE,
    HEAD_TIMESTAMP,
    _decode_checked,
    decode_records,
    record_heads,
)
from plog.formats.record_batch import RecordBatch, encode_batch
from plog.formats.varint import encode_varint

SEED = int(os.environ.get("PLOG_FUZZ_SEED", random.randrange(1 << 30)))
BASE_OFFSET, BASE_TIMESTAMP = 1000, 1_700_000_000_000


def _outcome(fn, *args):
    try:
        return "ok", fn(*args)
    except FormatError as e:
        return type(e).__name__, str(e)


def _region(rnd: random.Random) -> tuple[bytes, int]:
    """An encoded records region with keys, values and headers of many sizes (one-,
    two- and three-byte varints), null keys and values, and offset and timestamp
    deltas of every varint width."""
    step = rnd.choice([1, 100, 70000])
    records = []
    for i in range(rnd.randrange(1, 6)):
        key = None if rnd.random() < 0.2 else rnd.randbytes(rnd.choice([0, 1, 5, 70, 200]))
        value = None if rnd.random() < 0.2 else rnd.randbytes(rnd.choice([0, 3, 100, 300, 9000]))
        headers = tuple((f"h{j}", None if rnd.random() < 0.3 else b"x" * rnd.choice([0, 2, 150]))
                        for j in range(rnd.choice([0, 0, 1, 2])))
        records.append((i * step, BASE_TIMESTAMP + rnd.choice([0, 5, 9000, 10**9]) * i, key, value, headers))
    batch = RecordBatch(memoryview(encode_batch(records)))
    return batch.records_payload(), batch.records_count


def _mutate(rnd: random.Random, data: bytes, count: int) -> tuple[bytes, int]:
    b = bytearray(data)
    for _ in range(rnd.randint(1, 3)):
        kind = rnd.randrange(4)
        if kind == 0 and b:
            b[rnd.randrange(len(b))] = rnd.getrandbits(8)
        elif kind == 1 and b:
            del b[rnd.randrange(len(b)):]
        elif kind == 2:
            b.insert(rnd.randrange(len(b) + 1), rnd.getrandbits(8))
        else:
            count += rnd.choice([-1, 1])
    return bytes(b), count


def test_fast_passes_agree_with_the_plain_decoder():
    print(f"PLOG_FUZZ_SEED={SEED}")
    rnd = random.Random(SEED)
    failures = 0
    for _ in range(3000):
        data, count = _region(rnd)
        if rnd.random() < 0.9:
            data, count = _mutate(rnd, data, count)
        fast = _outcome(decode_records, data, count, BASE_OFFSET, BASE_TIMESTAMP)
        plain = _outcome(_decode_checked, data, count, BASE_OFFSET, BASE_TIMESTAMP)
        assert fast == plain, (data.hex(), count)
        heads = _outcome(record_heads, data, count, BASE_OFFSET, BASE_TIMESTAMP)
        if fast[0] == "ok":
            assert heads[0] == "ok"
            assert [(h[HEAD_OFFSET], h[HEAD_TIMESTAMP], h[HEAD_KEY]) for h in heads[1]] == \
                [(r.offset, r.timestamp, r.key) for r in fast[1]]
            starts = [h[HEAD_END] - h[HEAD_SIZE] for h in heads[1]]
            ends = [h[HEAD_END] for h in heads[1]]
            assert starts == [0, *ends][:len(starts)] and (ends or [0])[-1] == len(data)
        elif heads[0] != "ok":
            # record_heads does not read values or headers; a fault it does see is the
            # decoder's first fault, reported the same way.
            assert heads == fast, (data.hex(), count)
        failures += fast[0] != "ok"
    assert failures > 1000  # the mutations reach the error paths


@pytest.mark.parametrize(
    "region, count, message",
    [
        # A negative length: the heads pass gives up; Kafka reads on and finds the size wrong.
        (encode_varint(-3) + bytes(8), 1, "Invalid record size: expected to read -3 bytes in record payload, but "
                                          "instead read 6"),
        # A key that runs past its record (length 5, key length 9).
        (encode_varint(5) + b"\x00\x00\x00" + encode_varint(9) + bytes(12), 1,
         "Invalid record size: expected to read 5 bytes in record payload, but instead read 15"),
        # The count promises a second record the region does not hold.
        (encode_varint(6) + b"\x00\x00\x00\x01\x01\x00", 2, "Incorrect declared batch size, premature EOF reached"),
    ],
)
def test_heads_refuse_what_the_decoder_refuses_with_its_error(region, count, message):
    for fn in (record_heads, decode_records):
        args = (region, count) if fn is record_heads else (region, count, 0, 0)
        with pytest.raises(FormatError) as e:
            fn(*args)
        assert str(e.value) == message
