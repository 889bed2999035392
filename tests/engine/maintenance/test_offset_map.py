"""SkimpyOffsetMap against Kafka's SkimpyOffsetMap rules (kafka-format.md §16.3).

The probe sequence is recomputed here from the rule as written (Java int arithmetic,
``Utils.abs``), and the table bytes are checked slot by slot, so the layout is Kafka's:
24-byte slots of MD5 + big-endian offset at the probed position.
"""

from __future__ import annotations

import hashlib
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plog.engine.errors import OffsetMapFullError
from plog.engine.maintenance.offset_map import BYTES_PER_ENTRY, SkimpyOffsetMap


def java_int(n: int) -> int:
    n &= 0xFFFFFFFF
    return n - (1 << 32) if n >= 1 << 31 else n


def reference_position(h: bytes, attempt: int, slots: int) -> int:
    """Kafka's positionOf, spelled out."""
    window = min(attempt, 16 - 4)
    probe = java_int(struct.unpack(">i", h[window:window + 4])[0] + max(0, attempt - 16 + 4))
    if probe == -(1 << 31):
        absolute = 0
    else:
        absolute = abs(probe)
    return (absolute % slots) * 24


def test_slot_layout_is_md5_then_big_endian_offset():
    m = SkimpyOffsetMap(24 * 1000)
    m.put(b"hello", 0x0102030405060708)
    h = hashlib.md5(b"hello").digest()
    pos = reference_position(h, 0, 1000)
    raw = bytes(m._buf[pos:pos + 24])
    assert raw == h + bytes.fromhex("0102030405060708")
    # Everything else is still zero.
    assert bytes(m._buf[:pos]) == bytes(pos) and bytes(m._buf[pos + 24:]) == bytes(24 * 1000 - pos - 24)


@pytest.mark.parametrize("h", [
    bytes(range(16)),
    b"\xff" * 16,
    b"\x80\x00\x00\x00" + b"\x00" * 12,           # Integer.MIN_VALUE window -> slot 0
    b"\x00" * 12 + b"\x7f\xff\xff\xff",           # the linear tail wraps past Integer.MAX_VALUE
    hashlib.md5(b"k").digest(),
])
def test_probe_sequence_matches_kafka(h):
    for slots in (1, 3, 7, 1000, 5592405):
        m = SkimpyOffsetMap(24 * slots)
        got = m._slot_positions(h)
        for attempt in range(40):
            assert next(got) == reference_position(h, attempt, slots), (slots, attempt)


def test_put_get_overwrite_size_and_latest_offset():
    m = SkimpyOffsetMap(24 * 100)
    assert m.slots == 100 and m.capacity == 90 and m.latest_offset == -1
    assert m.get(b"a") == -1
    m.put(b"a", 5)
    m.put(b"b", 7)
    assert (m.get(b"a"), m.get(b"b"), m.size, m.latest_offset) == (5, 7, 2, 7)
    m.put(b"a", 9)
    assert (m.get(b"a"), m.size, m.latest_offset) == (9, 2, 9)
    assert m.utilization == pytest.approx(0.02)
    m.update_latest_offset(42)
    assert m.latest_offset == 42
    m.clear()
    assert (m.size, m.latest_offset, m.get(b"a")) == (0, -1, -1)
    assert bytes(m._buf) == bytes(2400)


def test_collisions_probe_onward_and_a_full_map_refuses_new_keys():
    m = SkimpyOffsetMap(24 * 3)
    keys = [b"x%d" % i for i in range(3)]
    for i, k in enumerate(keys):
        m.put(k, i * 10)
    assert [m.get(k) for k in keys] == [0, 10, 20]
    assert m.size == 3 and m.capacity == 2 and m.is_full
    # A missing key on a full map: the bounded search gives up with -1.
    assert m.get(b"missing") == -1


def test_put_on_a_full_map_raises_like_kafka():
    # Kafka checks entries >= slots before looking the key up, so even an overwrite fails.
    m = SkimpyOffsetMap(24 * 2)
    m.put(b"a", 1)
    m.put(b"b", 2)
    with pytest.raises(OffsetMapFullError):
        m.put(b"a", 3)


def test_memory_is_one_bytearray_of_the_given_size():
    m = SkimpyOffsetMap(1000)
    assert m.slots == 1000 // BYTES_PER_ENTRY and len(m._buf) == 1000
    with pytest.raises(ValueError):
        SkimpyOffsetMap(10)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.binary(max_size=6), st.integers(0, 1 << 40)), max_size=80),
       st.integers(100, 400))
def test_random_puts_agree_with_a_dict(ops, slots):
    m = SkimpyOffsetMap(24 * slots)
    expected: dict[bytes, int] = {}
    for key, offset in ops:
        m.put(key, offset)
        expected[key] = offset
    assert m.size == len(expected)
    for key, offset in expected.items():
        assert m.get(key) == offset
    if ops:
        assert m.latest_offset == ops[-1][1]
    # Every used slot sits at a position of its key's probe sequence.
    for key in expected:
        h = hashlib.md5(key).digest()
        positions = [reference_position(h, a, slots) for a in range(slots + 12)]
        assert any(bytes(m._buf[p:p + 16]) == h for p in positions)
