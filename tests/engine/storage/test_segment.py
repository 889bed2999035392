"""``LogSegment`` on its own (kafka-format.md §7.7, §7.8, §8, §14), without a ``Log`` around it.

Every expectation is worked out here from the batches appended: their sizes, offsets and
timestamps give the index entries Kafka's append rule writes, the positions reads and
lookups must land on, and what a recovery or a truncation keeps.
"""

from __future__ import annotations

import os

import pytest

from plog.engine.errors import OffsetOverflowError
from plog.engine.storage.segment import LogSegment, RollParams
from plog.formats.batches import iter_batches
from plog.formats.record_batch import encode_batch

TS = 1_700_000_000_000
BASE = 100


def batch(base_offset: int, count: int, ts: int, value: bytes = b"v" * 200) -> bytes:
    """``count`` records from ``base_offset``, record i stamped ``ts + i``."""
    return encode_batch([(base_offset + i, ts + i, b"k%d" % i, value) for i in range(count)],
                        base_offset=base_offset)


def append(seg: LogSegment, data: bytes) -> None:
    """Append one batch as ``Log`` does: its last offset, max timestamp and its offset."""
    (b,) = list(iter_batches(data))
    seg.append(b.last_offset, b.max_timestamp, b.last_offset, data)


def fill(seg: LogSegment, n: int, count: int = 4) -> list[tuple[int, int, int, int]]:
    """Append ``n`` batches; returns ``(base offset, last offset, position, size)`` of each.
    Timestamps go up by 10 per batch (record i of batch k is ``TS + 10k + i``)."""
    out, offset = [], seg.base_offset
    for k in range(n):
        data = batch(offset, count, TS + 10 * k)
        out.append((offset, offset + count - 1, seg.size, len(data)))
        append(seg, data)
        offset += count
    return out


def expected_index(batches, interval: int) -> tuple[list, list]:
    """Kafka's append rule (§8.1): an append starting more than ``interval`` bytes after the
    last indexed one gets ``(its last offset, its position)`` in the offset index and, when
    its max timestamp is new, ``(max timestamp so far, its offset)`` in the time index."""
    index, times, since = [], [], 0
    for k, (_, last, position, size) in enumerate(batches):
        if since > interval:
            index.append((last, position))
            times.append((TS + 10 * k + 3, last))
            since = 0
        since += size
    return index, times


@pytest.fixture
def seg(tmp_path):
    s = LogSegment(tmp_path, BASE, index_interval_bytes=1000, max_index_size=4096, time_source=lambda: TS)
    yield s
    s.close()


# -- append and the index rule ---------------------------------------------------------------


def test_append_indexes_as_kafka_does(seg):
    batches = fill(seg, 12)
    index, times = expected_index(batches, 1000)
    assert index and index[0][1] > 0  # the first append is never indexed
    assert [tuple(seg.offset_index.entry(i)) for i in range(seg.offset_index.entries)] == index
    assert [tuple(seg.time_index.entry(i)) for i in range(seg.time_index.entries)] == times
    assert seg.size == sum(b[3] for b in batches) == os.path.getsize(seg.log_path)
    assert tuple(seg.max_timestamp_so_far) == (TS + 10 * 11 + 3, batches[-1][1])


def test_an_offset_beyond_31_bits_of_the_base_is_refused(seg):
    data = batch(BASE + (1 << 31), 1, TS)
    with pytest.raises(OffsetOverflowError):
        append(seg, data)
    assert seg.size == 0


# -- reads -----------------------------------------------------------------------------------


def test_translate_offset_finds_the_batch_holding_the_offset(seg):
    batches = fill(seg, 12)
    for base, last, position, size in batches:
        for offset in (base, last):
            found = seg.translate_offset(offset)
            assert (found.offset, found.position, found.size) == (last, position, size)
    # starting at a later position skips the batches before it
    assert seg.translate_offset(BASE, starting_position=batches[5][2]).position == batches[5][2]
    assert seg.translate_offset(batches[-1][1] + 1) is None


def test_read_returns_whole_batches_from_the_one_holding_the_offset(seg):
    batches = fill(seg, 6)
    _, _, position, size = batches[2]
    data = seg.read(batches[2][0] + 1, max_size=2 * size + 10)
    assert (data.position, data.segment_base_offset) == (position, BASE)
    assert [b.base_offset for b in iter_batches(data.records)] == [batches[2][0], batches[3][0]]
    # a limit below one batch gives nothing, unless min_one_message
    assert seg.read(batches[2][0], max_size=10).records == b""
    assert len(seg.read(batches[2][0], max_size=10, min_one_message=True).records) == size
    # never past max_position
    assert len(seg.read(BASE, max_size=1 << 20, max_position=batches[1][2]).records) == batches[0][3]
    assert seg.read(batches[-1][1] + 1, max_size=1 << 20) is None


def test_find_offset_by_timestamp(seg):
    fill(seg, 12)
    # record i of batch k carries TS + 10k + i and offset BASE + 4k + i
    found = seg.find_offset_by_timestamp(TS + 10 * 7 + 2)
    assert (found.timestamp, found.offset) == (TS + 72, BASE + 4 * 7 + 2)
    found = seg.find_offset_by_timestamp(TS + 10 * 7 + 5)  # between batches: the next record
    assert (found.timestamp, found.offset) == (TS + 80, BASE + 32)
    found = seg.find_offset_by_timestamp(TS, starting_offset=BASE + 13)
    assert found.offset == BASE + 13
    assert seg.find_offset_by_timestamp(TS + 10 * 12) is None


def test_read_next_offset(seg):
    assert seg.read_next_offset() == BASE
    batches = fill(seg, 9)
    assert seg.read_next_offset() == batches[-1][1] + 1


# -- recovery and truncation -----------------------------------------------------------------


def test_recover_rebuilds_the_indexes_and_cuts_a_torn_tail(tmp_path):
    seg = LogSegment(tmp_path, BASE, index_interval_bytes=1000, time_source=lambda: TS)
    batches = fill(seg, 12)
    seg.on_become_inactive_segment()
    index = [tuple(seg.offset_index.entry(i)) for i in range(seg.offset_index.entries)]
    times = [tuple(seg.time_index.entry(i)) for i in range(seg.time_index.entries)]
    seg.close()
    with open(seg.log_path, "ab") as f:
        f.write(batch(BASE + 48, 4, TS)[:100])  # a torn write
    os.truncate(seg.offset_index.path, 0)  # an index lost

    seg = LogSegment(tmp_path, BASE, index_interval_bytes=1000, time_source=lambda: TS)
    result = seg.recover()
    assert (result.batches, result.valid_bytes, result.truncated_bytes) == (12, seg.size, 100)
    assert result.error_position == seg.size and "partial batch" in result.error
    assert result.next_offset == batches[-1][1] + 1
    assert [tuple(seg.offset_index.entry(i)) for i in range(seg.offset_index.entries)] == index
    assert [tuple(seg.time_index.entry(i)) for i in range(seg.time_index.entries)] == times
    assert os.path.getsize(seg.log_path) == sum(b[3] for b in batches)
    seg.close()


def test_recover_stops_at_a_corrupt_batch(tmp_path):
    seg = LogSegment(tmp_path, BASE, time_source=lambda: TS)
    batches = fill(seg, 5)
    seg.close()
    with open(seg.log_path, "r+b") as f:
        f.seek(batches[3][2] + 70)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))
    seg = LogSegment(tmp_path, BASE, time_source=lambda: TS)
    result = seg.recover()
    assert (result.batches, result.error_position) == (3, batches[3][2])
    assert result.truncated_bytes == batches[3][3] + batches[4][3]
    assert seg.read_next_offset() == batches[2][1] + 1


@pytest.mark.parametrize("magic", [0, 1])
def test_a_batch_whose_magic_turned_legacy_is_cut_where_it_starts(tmp_path, magic):
    """A bit flip that makes a v2 batch's magic 0 or 1 turns it into a legacy message whose
    fields run past its end: the error names a field inside it, but the segment is cut (and
    the report says so) where the entry starts, as Kafka's recovery does."""
    seg = LogSegment(tmp_path, BASE, time_source=lambda: TS)
    batches = fill(seg, 5)
    seg.close()
    with open(seg.log_path, "r+b") as f:
        f.seek(batches[3][2] + 16)  # the magic byte
        f.write(bytes([magic]))
    seg = LogSegment(tmp_path, BASE, time_source=lambda: TS)
    result = seg.recover()
    assert (result.batches, result.valid_bytes, result.error_position) == (3, batches[3][2], batches[3][2])
    assert result.truncated_bytes == batches[3][3] + batches[4][3] and result.error
    seg.close()
    seg.close()


def test_truncate_to_cuts_at_the_batch_holding_the_offset(seg):
    batches = fill(seg, 12)
    removed = seg.truncate_to(batches[8][0] + 2)  # inside batch 8: the whole batch goes
    assert removed == sum(b[3] for b in batches[8:])
    assert seg.size == batches[8][2] == os.path.getsize(seg.log_path)
    assert seg.read_next_offset() == batches[7][1] + 1
    assert all(seg.offset_index.entry(i).offset < batches[8][0] for i in range(seg.offset_index.entries))
    assert all(seg.time_index.entry(i).offset < batches[8][0] for i in range(seg.time_index.entries))
    assert tuple(seg.max_timestamp_so_far) == (TS + 10 * 7 + 3, batches[7][1])
    assert seg.truncate_to(batches[-1][1] + 1) == 0  # past the end: nothing


# -- roll ------------------------------------------------------------------------------------


def roll_params(**kw) -> RollParams:
    values = dict(max_segment_ms=1 << 40, max_segment_bytes=1 << 30, max_timestamp_in_messages=TS,
                  max_offset_in_messages=BASE, messages_size=100, now=TS)
    values.update(kw)
    return RollParams(**values)


def test_roll_conditions(tmp_path):
    # 48-byte indexes: 6 offset index slots, 4 time index slots (the last kept for the roll)
    seg = LogSegment(tmp_path, BASE, max_index_size=48, index_interval_bytes=0, rolling_jitter_ms=5,
                     time_source=lambda: TS)
    assert not seg.should_roll(roll_params())
    fill(seg, 2)
    size = seg.size
    # size: the segment would go past segment.bytes
    assert seg.should_roll(roll_params(max_segment_bytes=size + 100 - 1))
    assert not seg.should_roll(roll_params(max_segment_bytes=size + 100))
    # time: the first batch's max timestamp (TS + 3) is older than segment.ms minus the jitter
    assert seg.should_roll(roll_params(max_segment_ms=1000, max_timestamp_in_messages=TS + 3 + 1000 - 5 + 1))
    assert not seg.should_roll(roll_params(max_segment_ms=1000, max_timestamp_in_messages=TS + 3 + 1000 - 5))
    # an offset that no longer fits 31 bits above the base
    assert seg.should_roll(roll_params(max_offset_in_messages=BASE + (1 << 31)))
    # a full index: every append after the first is indexed; 3 time index entries fill it
    append(seg, batch(BASE + 8, 4, TS + 50))
    assert not seg.time_index.is_full() and not seg.should_roll(roll_params())
    append(seg, batch(BASE + 12, 4, TS + 60))
    assert seg.time_index.entries == 3 and seg.time_index.is_full() and not seg.offset_index.is_full()
    assert seg.should_roll(roll_params())
    seg.close()


def test_an_empty_segment_never_rolls_on_time(tmp_path):
    seg = LogSegment(tmp_path, BASE, time_source=lambda: TS)
    assert not seg.should_roll(roll_params(max_segment_ms=0, now=TS + 10_000))
    seg.close()
