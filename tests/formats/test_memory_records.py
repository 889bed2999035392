"""MemoryRecords: a request's batches back to back in one buffer, one view per batch."""

from __future__ import annotations

import pytest

from plog.formats.memory_records import MemoryRecords


def test_views_tile_the_buffer():
    buf = bytearray(b"aaabbbbbc")
    m = MemoryRecords(buf, [3, 5, 1])
    assert [bytes(v) for v in m] == [b"aaa", b"bbbbb", b"c"]
    assert [m.start_of(i) for i in range(3)] == [0, 3, 8]
    assert m.buffer is buf
    m[1][0] = ord("X")  # a view writes the request's buffer: what the leader's append does
    assert buf == bytearray(b"aaaXbbbbc")


@pytest.mark.parametrize("sizes", [[3, 5], [3, 5, 2], []])
def test_sizes_must_cover_the_buffer_exactly(sizes):
    with pytest.raises(ValueError, match="batches of"):
        MemoryRecords(bytearray(9), sizes)
