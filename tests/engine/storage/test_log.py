"""Log and LogSegment against Kafka's rules, worked through independently.

The oracle below recomputes, from nothing but the sequence of appended batch sizes and
offsets, the `.index` and `.timeindex` entries Kafka's append rule (kafka-format.md §8.1,
§8.4) produces, and the segment boundaries of its roll rule (§14, size only); the files
plog writes must hold exactly those bytes.
"""

from __future__ import annotations

import os
import random
import struct

import pytest

from plog.engine.storage.log_config import LogConfig
from plog.engine.errors import (
    InvalidProducerBatchError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
)
from plog.engine.storage.log import Log
from plog.formats.batches import iter_batches
from plog.formats.record_batch import encode_batch

TS = 1700000000000


def producer_batch(n: int, value_size: int, ts: int, rnd: random.Random, **kw) -> bytes:
    recs = [(i, ts + i, b"key-%d" % rnd.randrange(1000), rnd.randbytes(value_size)) for i in range(n)]
    return encode_batch(recs, **kw)


def oracle(appends: list[tuple[int, int, int]], segment_bytes: int, interval: int):
    """appends: (size, last_offset_delta+1 = count, max_ts). Returns per segment:
    (base_offset, [(offset, position)], [(ts, offset)], log size)."""
    segments = []
    cur = None
    next_offset = 0
    for size, count, max_ts in appends:
        if cur is None or cur["size"] > segment_bytes - size:
            if cur is not None:
                # roll: final time index entry for the max so far
                if cur["max"][0] > (cur["time"][-1][0] if cur["time"] else -1):
                    cur["time"].append(cur["max"])
            cur = {"base": next_offset, "size": 0, "since": 0, "index": [], "time": [], "max": (-1, next_offset)}
            segments.append(cur)
        last = next_offset + count - 1
        pos = cur["size"]
        if max_ts > cur["max"][0]:
            cur["max"] = (max_ts, last)
        if cur["since"] > interval:
            cur["index"].append((last, pos))
            if cur["max"][0] > (cur["time"][-1][0] if cur["time"] else -1):
                cur["time"].append(cur["max"])
            cur["since"] = 0
        cur["since"] += size
        cur["size"] += size
        next_offset = last + 1
    # close() gives the active segment its final time-index entry too (§8.4)
    if cur is not None and cur["max"][0] > (cur["time"][-1][0] if cur["time"] else -1):
        cur["time"].append(cur["max"])
    return segments


@pytest.fixture
def rnd():
    return random.Random(1234)


def test_rolls_and_index_bytes_follow_kafka_rules(tmp_path, rnd):
    config = LogConfig(segment_bytes=64 * 1024, index_interval_bytes=4096)
    log = Log.open(tmp_path / "t-0", config)
    appends = []
    for i in range(300):
        n = rnd.randint(1, 20)
        raw = producer_batch(n, rnd.randint(10, 400), TS + i * 100, rnd)
        info = log.append_as_leader(raw)
        assert info.first_offset == (appends and sum(a[1] for a in appends) or 0)
        appends.append((len(raw), n, TS + i * 100 + n - 1))
    log.close()
    expected = oracle(appends, config.segment_bytes, config.index_interval_bytes)
    files = sorted(os.listdir(tmp_path / "t-0"))
    assert [f for f in files if f.endswith(".log")] == [f"{s['base']:020d}.log" for s in expected]
    for seg in expected:
        prefix = tmp_path / "t-0" / f"{seg['base']:020d}"
        assert os.path.getsize(f"{prefix}.log") == seg["size"]
        want_index = b"".join(struct.pack(">ii", o - seg["base"], p) for o, p in seg["index"])
        want_time = b"".join(struct.pack(">qi", t, o - seg["base"]) for t, o in seg["time"])
        assert open(f"{prefix}.index", "rb").read() == want_index, seg["base"]
        assert open(f"{prefix}.timeindex", "rb").read() == want_time, seg["base"]


def _filled_log(tmp_path, rnd, n_batches=200, **cfg):
    log = Log.open(tmp_path / "p-0", LogConfig(**cfg))
    for i in range(n_batches):
        log.append_as_leader(producer_batch(rnd.randint(1, 10), rnd.randint(50, 300), TS + i * 1000, rnd))
    return log


def test_read_from_every_offset_across_segments(tmp_path, rnd):
    log = _filled_log(tmp_path, rnd, segment_bytes=16 * 1024, index_interval_bytes=1024)
    assert len(log.segments) > 5
    every = list(log.read_records())
    assert [r.offset for r in every] == list(range(log.log_end_offset))
    for offset in range(0, log.log_end_offset, 7):
        data = log.read(offset, max_bytes=1)
        first = next(iter(iter_batches(data.records)))
        assert first.base_offset <= offset <= first.last_offset
        seg, pos = log.translate_offset(offset)
        assert seg.base_offset <= offset and pos.offset >= offset
    with pytest.raises(OffsetOutOfRangeError):
        log.read(log.log_end_offset + 1)
    assert log.read(log.log_end_offset).records == b""
    log.close()


def test_timestamp_lookup_matches_linear_scan(tmp_path, rnd):
    log = _filled_log(tmp_path, rnd, segment_bytes=16 * 1024, index_interval_bytes=512)
    records = list(log.read_records())
    for target in [TS - 5, TS, TS + 1, TS + 50_000, TS + 123_456, records[-1].timestamp, records[-1].timestamp + 1]:
        want = next(((r.timestamp, r.offset) for r in records if r.timestamp >= target), None)
        got = log.fetch_offset_by_timestamp(target)
        assert (None if got is None else (got.timestamp, got.offset)) == want, target
    log.close()


def test_reopen_after_clean_close(tmp_path, rnd):
    log = _filled_log(tmp_path, rnd, segment_bytes=16 * 1024)
    end, bases = log.log_end_offset, log.segments.base_offsets
    log.close()
    again = Log.open(tmp_path / "p-0", LogConfig(segment_bytes=16 * 1024))
    assert again.log_end_offset == end and again.segments.base_offsets == bases
    assert not again.load_report.recovered_segments
    more = again.append_as_leader(producer_batch(3, 10, TS, rnd))
    assert more.first_offset == end
    again.close()


def test_unclean_open_recovers_from_recovery_point_and_truncates_garbage(tmp_path, rnd):
    log = _filled_log(tmp_path, rnd, segment_bytes=16 * 1024, index_interval_bytes=1024)
    end = log.log_end_offset
    active = log.active_segment.log_path
    bases = log.segments.base_offsets
    log.close()
    size = os.path.getsize(active)
    with open(active, "ab") as f:
        f.write(os.urandom(500))  # torn tail / garbage
    again = Log.open(tmp_path / "p-0", LogConfig(segment_bytes=16 * 1024, index_interval_bytes=1024),
                     recovery_point=bases[-1], had_clean_shutdown=False)
    assert again.log_end_offset == end
    assert os.path.getsize(active) == size
    assert again.load_report.truncated_bytes == 500
    assert [r.base_offset for r in again.load_report.recovered_segments] == [bases[-1]]
    again.close()


def test_corrupt_middle_batch_truncates_from_it(tmp_path, rnd):
    log = _filled_log(tmp_path, rnd, segment_bytes=1 << 20)
    seg = log.active_segment
    positions = [b.position for b in seg.batches()]
    log.close()
    victim = positions[len(positions) // 2]
    with open(seg.log_path, "r+b") as f:
        f.seek(victim + 70)
        f.write(b"\xff\xff\xff")
    again = Log.open(tmp_path / "p-0", LogConfig(segment_bytes=1 << 20), had_clean_shutdown=False)
    rec = again.load_report.recovered_segments[0]
    assert rec.valid_bytes == victim and rec.error_position == victim and "corrupt" in rec.error
    assert again.log_end_offset == max(r.offset for r in again.read_records()) + 1
    again.close()


def test_producer_batch_validation(tmp_path, rnd):
    log = Log.open(tmp_path / "v-0", LogConfig(max_message_bytes=2000))
    with pytest.raises(RecordTooLargeError):
        log.append_as_leader(producer_batch(10, 500, TS, rnd))
    shifted = bytearray(producer_batch(1, 5, TS, rnd))
    shifted[7] = 7  # baseOffset 7: outside the CRC, so only the offset rule catches it
    with pytest.raises(InvalidProducerBatchError, match="should be 0"):
        log.append_as_leader(bytes(shifted))
    bad = bytearray(producer_batch(1, 5, TS, rnd))
    bad[-1] ^= 1
    with pytest.raises(InvalidProducerBatchError, match="corrupt"):
        log.append_as_leader(bytes(bad))
    two = producer_batch(1, 5, TS, rnd) + producer_batch(1, 5, TS, rnd)
    with pytest.raises(InvalidProducerBatchError, match="exactly one"):
        log.append_as_leader(two)
    log.close()


def test_truncate_to_and_delete_records(tmp_path, rnd):
    log = _filled_log(tmp_path, rnd, segment_bytes=8 * 1024)
    mid = log.log_end_offset // 2
    log.truncate_to(mid)
    assert log.log_end_offset == mid
    assert max(r.offset for r in log.read_records()) == mid - 1
    log.delete_records_before(10)
    assert log.log_start_offset == 10
    with pytest.raises(OffsetOutOfRangeError):
        log.read(5)
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records_before(log.high_watermark + 1)
    info = log.append_as_leader(producer_batch(2, 5, TS, rnd))
    assert info.first_offset == mid
    log.close()


def test_a_flush_bounded_by_an_offset_runs_beside_appends_that_roll(tmp_path, rnd):
    """A producer's round is fsynced on another thread while the next round is appended
    (ClusterWriter.flush_in_background): flushes up to an offset taken before the appends
    meet rolls (the log's segments lock), never fail, and claim only that offset."""
    import threading

    log = Log.open(tmp_path / "p-0", LogConfig(segment_bytes=16 * 1024, index_interval_bytes=1024,
                                               fsync_on_produce=False))
    stop, errors, claims = threading.Event(), [], []

    def flusher():
        while not stop.is_set():
            end = log.log_end_offset
            try:
                log.flush(end)
            except Exception as e:  # noqa: BLE001 - the test's finding
                errors.append(e)
                return
            claims.append((end, log.recovery_point))

    t = threading.Thread(target=flusher)
    t.start()
    try:
        for i in range(300):
            log.append_as_leader(producer_batch(rnd.randint(1, 10), rnd.randint(50, 300), TS + i, rnd), flush=False)
    finally:
        stop.set()
        t.join(10)
    assert not errors and claims
    assert len(log.segments) > 5  # it rolled many times beside the flushes
    assert all(point >= end for end, point in claims)  # each flush's offset became durable...
    assert log.recovery_point <= log.log_end_offset  # ...and none claimed past the end
    end = log.log_end_offset
    log.close()
    again = Log.open(tmp_path / "p-0", LogConfig(segment_bytes=16 * 1024))
    assert again.log_end_offset == end
    assert [r.offset for r in again.read_records()] == list(range(end))
    again.close()


def test_messages_appended_past_a_bounded_flush_still_count_for_flush_messages(tmp_path, rnd):
    """flush.messages after a flush bounded by an offset (a round fsynced while the next one
    is appended): the messages past that offset are still unflushed, so the policy fsyncs
    once they and the next appends reach flush.messages, not as many again later."""
    log = Log.open(tmp_path / "p-0", LogConfig(fsync_on_produce=False, flush_messages=10))
    log.append_as_leader(producer_batch(8, 50, TS, rnd), flush=False)
    end = log.log_end_offset  # the round's end, taken when its flush starts
    log.append_as_leader(producer_batch(4, 50, TS, rnd), flush=False)  # the next round, beside it
    log.flush(end)
    assert log.recovery_point == end
    log.append_as_leader(producer_batch(6, 50, TS, rnd), flush=False)  # 4 + 6 unflushed: the policy's 10
    log.maybe_flush()
    assert log.recovery_point == log.log_end_offset == 18
    log.close()


def _follow(log, max_bytes: int, *, start: int = 0, use_positions: bool = True, position=None):
    """Read ``log`` to its end as a follower fetches it (each read from one past the last
    offset of the one before); returns [(start offset, position, bytes)] and the last
    ReadPosition."""
    reads = []
    offset = start
    while offset < log.log_end_offset:
        data = log.read(offset, max_bytes, max_offset=log.log_end_offset, at=position if use_positions else None)
        last = list(iter_batches(data.records))[-1].last_offset
        reads.append((offset, data.segment_base_offset, data.position, bytes(data.records)))
        position = log.position_after(data, last + 1)
        offset = last + 1
    return reads, position


@pytest.mark.parametrize("max_bytes", [1, 700, 4096, 1 << 20])
def test_reads_that_go_on_from_where_the_last_ended_read_what_lookups_read(tmp_path, rnd, max_bytes):
    log = _filled_log(tmp_path, rnd, segment_bytes=16 * 1024, index_interval_bytes=1024)
    assert len(log.segments) > 5
    with_positions, _ = _follow(log, max_bytes)
    assert with_positions == _follow(log, max_bytes, use_positions=False)[0]
    log.close()


def test_a_read_position_taken_before_a_truncation_is_not_used(tmp_path, rnd):
    """Truncate below where the last read ended and append other batches: the bytes at the
    old position are now another batch, or the middle of one. The read looks the offset up."""
    log = _filled_log(tmp_path, rnd, n_batches=40, segment_bytes=1 << 20)
    first = log.read(0, 3000, max_offset=log.log_end_offset)
    last = list(iter_batches(first.records))[-1].last_offset
    position = log.position_after(first, last + 1)
    log.truncate_to(3)
    for i in range(20):
        log.append_as_leader(producer_batch(rnd.randint(1, 3), 37, TS + i, rnd))
    assert position.truncations != log.truncations
    got = log.read(last + 1, 3000, max_offset=log.log_end_offset, at=position)
    want = log.read(last + 1, 3000, max_offset=log.log_end_offset)
    assert (got.position, bytes(got.records)) == (want.position, bytes(want.records))
    log.close()


def test_a_read_position_in_a_segment_the_log_no_longer_has_is_not_used(tmp_path, rnd):
    """A segment replaced (compaction swaps in a new object) or rolled away from: the
    position names a segment the read of that offset does not go to."""
    log = _filled_log(tmp_path, rnd, n_batches=60, segment_bytes=8 * 1024)
    reads, position = _follow(log, 2000)
    assert position.offset == log.log_end_offset
    log.roll()
    log.append_as_leader(producer_batch(2, 10, TS, rnd))
    # The next offset now lives in the new active segment; the position points past the
    # old one's end.
    got = log.read(position.offset, 2000, max_offset=log.log_end_offset, at=position)
    assert got.segment_base_offset == position.offset and got.position == 0
    log.close()
