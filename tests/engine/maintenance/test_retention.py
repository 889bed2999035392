"""Retention (kafka-format.md §15): the exact selection rules, deletion, the sweep, crash safety.

Every case injects ``now`` and writes records with explicit timestamps, so the rules are
checked to the millisecond and byte. The hypothesis test compares the selection with a
separate, deliberately plain oracle of the rules (``oracle`` below).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from plog.engine.storage.log_config import LogConfig
from plog.engine.storage.log import Log
from plog.engine.errors import RetentionError, StaleRetentionPlanError
from plog.engine.maintenance.retention import (
    RULE_LOG_START,
    RULE_SIZE,
    RULE_TIME,
    TS_MTIME,
    TS_RECORD,
    delete_old_segments,
    format_bytes,
    format_duration,
    format_timestamp,
    plan_retention,
    sweep_deleted_files,
)
from plog.engine.inspect.verify import ERROR, verify_path
from plog.formats.legacy import encode_legacy_batch
from plog.formats.record_batch import encode_batch

DAY = 86_400_000
HOUR = 3_600_000
NOW = 1_800_000_000_000  # 2027-01-15T08:00:00Z
WEEK = 7 * DAY
VALUE = b"v" * 100  # one record per batch: 61 + 14 + 100 bytes
BATCH_SIZE = len(encode_batch([(0, NOW, b"k", VALUE)]))


def config(**kw) -> LogConfig:
    kw.setdefault("fsync_on_produce", False)
    kw.setdefault("segment_ms", 100 * 365 * DAY)  # rolls happen where the test says, not by time
    return LogConfig(**kw)


def append(log: Log, ts: int, *, value: bytes = VALUE) -> None:
    o = log.log_end_offset
    log.append_as_follower(encode_batch([(o, ts, b"k", value)], base_offset=o))


def build(directory: Path, layout, cfg: LogConfig | None = None, *, mtimes=None) -> Log:
    """A log with one segment per ``layout`` entry, each a list of batch timestamps
    (one record per batch; -1 = no timestamp). ``mtimes``: the ``.log`` mtime per segment."""
    log = Log.open(directory, cfg or config(), time_source=lambda: NOW)
    for i, stamps in enumerate(layout):
        if i:
            log.roll()
        for ts in stamps:
            append(log, ts)
    if mtimes is not None:
        for seg, m in zip(list(log.segments), mtimes):
            if m is not None:
                os.utime(seg.log_path, ns=(m * 1_000_000, m * 1_000_000))
    return log


def decisions(plan):
    return {d.base_offset: d for d in plan.segments}


def verify_errors(path: Path) -> list:
    return [f for f in verify_path(str(path)) if f.severity == ERROR]


def records(log: Log) -> list[tuple[int, bytes]]:
    return [(r.offset, bytes(r.value)) for r in log.read_records()]


# ------------------------------------------------------------------------------ text helpers


def test_human_formats():
    assert format_timestamp(NOW) == "2027-01-15T08:00:00Z"
    assert format_timestamp(NOW + 5) == "2027-01-15T08:00:00.005Z"
    assert format_duration(20 * DAY + HOUR + 5) == "20d 1h"
    assert format_duration(WEEK) == "7d"
    assert format_duration(4 * 365 * DAY + 3 * DAY) == "4y 3d"
    assert format_duration(250) == "250ms"
    assert format_duration(0) == "0ms"
    assert format_bytes(812) == "812 B"
    assert format_bytes(5 << 20) == "5.0 MiB"
    assert format_bytes(1536) == "1.5 KiB"


# ------------------------------------------------------------------------------ time


def test_time_retention_deletes_old_segments_oldest_first_and_stops(tmp_path):
    log = build(tmp_path / "t-0", [[NOW - 20 * DAY - HOUR], [NOW - 10 * DAY], [NOW - 2 * DAY - 3 * HOUR],
                                   [NOW - 20 * DAY], [NOW - HOUR]])
    plan = plan_retention(log, now=NOW)  # retention.ms from the config: 7 days
    assert plan.retention_ms == WEEK and plan.retention_ms_source == "log.config"
    assert plan.deletable_bases == [0, 1]
    d = decisions(plan)
    assert d[0].rule == RULE_TIME and d[0].timestamp_source == TS_RECORD
    assert d[0].largest_timestamp == NOW - 20 * DAY - HOUR
    assert d[0].reason == ("deletable: largest timestamp 2026-12-26T07:00:00Z is 20d 1h old, "
                           "over retention.ms 7d")
    assert d[2].reason == ("kept: 2d 3h old (largest timestamp 2027-01-13T05:00:00Z), under retention.ms 7d; "
                           "retention by time stops here")
    # Segment 3 is old enough, but Kafka stops at the first segment it cannot delete.
    assert not d[3].deletable
    assert d[3].reason.startswith("kept: behind a kept segment (Kafka stops at the first segment it cannot delete: "
                                  "00000000000000000002.log")
    assert plan.new_log_start_offset == 2 and plan.bytes_to_free == 2 * BATCH_SIZE and not plan.roll
    assert plan.segments_to_delete == 2


def test_time_limit_is_strictly_greater(tmp_path):
    log = build(tmp_path / "t-0", [[NOW - WEEK], [NOW - WEEK - 1], [NOW]])
    plan = plan_retention(log, now=NOW)
    assert plan.deletable_bases == []  # exactly retention.ms old: kept
    assert "exactly at (Kafka deletes only when older than) retention.ms 7d" in decisions(plan)[0].reason
    assert plan_retention(log, now=NOW + 1).deletable_bases == [0, 1]


def test_largest_timestamp_is_the_max_over_the_segment_not_the_last_record(tmp_path):
    log = build(tmp_path / "t-0", [[NOW - 30 * DAY, NOW - 2 * DAY, NOW - 30 * DAY], [NOW]])
    plan = plan_retention(log, now=NOW)
    assert decisions(plan)[0].largest_timestamp == NOW - 2 * DAY
    assert plan.deletable_bases == []


def test_infinite_retention_ms_deletes_nothing(tmp_path):
    log = build(tmp_path / "t-0", [[NOW - 900 * DAY], [NOW]])
    plan = plan_retention(log, now=NOW, retention_ms=-1)
    assert plan.deletable_bases == [] and plan.retention_ms_source == "argument"
    assert [p.ran for p in plan.passes] == [True, False, False]
    assert decisions(plan)[0].reason.startswith("kept: the log start offset 0 is below")


def test_future_timestamp_holds_back_everything_after_it(tmp_path):
    future = NOW + 4 * 365 * DAY
    log = build(tmp_path / "t-0", [[NOW - 30 * DAY], [future], [NOW - 30 * DAY], [NOW - 30 * DAY], [NOW]])
    plan = plan_retention(log, now=NOW)
    assert plan.deletable_bases == [0]
    d = decisions(plan)
    assert d[1].reason == (
        f"kept: held by a FUTURE timestamp {format_timestamp(future)} (the segment's newest record is 4y in the "
        "future); time-based retention cannot pass this segment until then, and every later segment waits behind it")
    for base in (2, 3):
        assert "behind a kept segment" in d[base].reason and "future timestamp" in d[base].reason
    # Years later, once the clock passes the bad timestamp + retention.ms, the jam clears.
    assert plan_retention(log, now=future + WEEK + 1).deletable_bases == [0, 1, 2, 3, 4]


def test_no_record_timestamps_falls_back_to_the_log_mtime(tmp_path):
    log = build(tmp_path / "t-0", [[-1, -1], [-1], [NOW]], mtimes=[NOW - 9 * DAY, NOW - DAY, None])
    plan = plan_retention(log, now=NOW)
    d = decisions(plan)
    assert d[0].timestamp_source == TS_MTIME and d[0].max_record_timestamp == -1
    assert d[0].largest_timestamp == NOW - 9 * DAY
    assert d[0].reason == ("deletable: file modification time (the segment has no record timestamps) "
                           "2027-01-06T08:00:00Z is 9d old, over retention.ms 7d")
    assert d[2].timestamp_source == TS_MTIME and not d[2].deletable  # a day old by its mtime
    assert d[3].timestamp_source == TS_RECORD
    assert plan.deletable_bases == [0]


def test_legacy_v0_and_v1_segments(tmp_path):
    log = Log.open(tmp_path / "t-0", config(), time_source=lambda: NOW)
    log.append_as_follower(encode_legacy_batch([(0, -1, b"k", VALUE), (1, -1, b"k", VALUE)], magic=0))
    log.roll()
    log.append_as_follower(encode_legacy_batch([(2, NOW - 8 * DAY, b"k", VALUE)], magic=1))
    log.roll()
    log.append_as_follower(encode_legacy_batch([(3, NOW - DAY, b"k", VALUE)], magic=1))
    os.utime(log.segments.get(0).log_path, ns=((NOW - 30 * DAY) * 10**6,) * 2)
    plan = plan_retention(log, now=NOW)
    d = decisions(plan)
    assert d[0].timestamp_source == TS_MTIME and d[0].largest_timestamp == NOW - 30 * DAY  # v0: no timestamps
    assert d[2].timestamp_source == TS_RECORD and d[2].largest_timestamp == NOW - 8 * DAY
    assert plan.deletable_bases == [0, 2]
    result = delete_old_segments(log, plan, now=NOW)
    assert [s.base_offset for s in result.deleted] == [0, 2] and log.log_start_offset == 3
    log.close()
    assert verify_errors(tmp_path / "t-0") == []


# ------------------------------------------------------------------------------ size


def test_size_retention_deletes_while_the_excess_covers_the_segment(tmp_path):
    log = build(tmp_path / "t-0", [[NOW]] * 5)  # five segments of BATCH_SIZE bytes
    total = 5 * BATCH_SIZE
    # Excess 2.5 segments: two segments go, the third would take the log below the limit.
    plan = plan_retention(log, now=NOW, retention_bytes=total - 2 * BATCH_SIZE - BATCH_SIZE // 2)
    assert plan.deletable_bases == [0, 1]
    d = decisions(plan)
    assert d[0].rule == RULE_SIZE
    assert d[0].reason == (f"deletable: partition is {format_bytes(total)}, retention.bytes "
                           f"{format_bytes(total - 2 * BATCH_SIZE - BATCH_SIZE // 2)}; deleting this "
                           f"{format_bytes(BATCH_SIZE)} segment leaves {format_bytes(BATCH_SIZE + BATCH_SIZE // 2)} "
                           "still over")
    assert "retention by size stops here" in d[2].reason
    # Exactly two segments over: both go (diff - size >= 0 includes equality).
    plan = plan_retention(log, now=NOW, retention_bytes=total - 2 * BATCH_SIZE)
    assert plan.deletable_bases == [0, 1]
    assert decisions(plan)[1].reason.endswith("leaves the partition exactly at retention.bytes")
    # One byte less over: only one goes.
    assert plan_retention(log, now=NOW, retention_bytes=total - 2 * BATCH_SIZE + 1).deletable_bases == [0]
    # Under the limit: the pass does not run at all.
    plan = plan_retention(log, now=NOW, retention_bytes=total + 1)
    assert plan.deletable_bases == [] and not plan.passes[1].ran
    assert decisions(plan)[0].reason == (f"kept: partition is {format_bytes(total)}, under retention.bytes "
                                         f"{format_bytes(total + 1)}; 0ms old (largest timestamp "
                                         f"{format_timestamp(NOW)}), under retention.ms 7d; "
                                         "retention by time stops here")


def test_size_retention_at_exactly_the_limit_deletes_nothing_of_size(tmp_path):
    log = build(tmp_path / "t-0", [[NOW]] * 3)
    plan = plan_retention(log, now=NOW, retention_bytes=3 * BATCH_SIZE)
    assert plan.passes[1].ran and plan.deletable_bases == []


def test_time_and_size_together_whichever_comes_first(tmp_path):
    # Size (which runs first) takes segments 0 and 1; time then takes 2 from what is left.
    log = build(tmp_path / "t-0", [[NOW - DAY], [NOW - DAY], [NOW - 30 * DAY], [NOW - DAY], [NOW]])
    plan = plan_retention(log, now=NOW, retention_bytes=3 * BATCH_SIZE)
    assert plan.deletable_bases == [0, 1, 2]
    assert [decisions(plan)[b].rule for b in (0, 1, 2)] == [RULE_SIZE, RULE_SIZE, RULE_TIME]
    assert plan.new_log_start_offset == 3
    # The size pass saw 5 segments; the time pass only the 3 the size pass left.
    assert plan.passes[1].log_size_before == 5 * BATCH_SIZE
    assert plan.passes[1].deleted_bases == [0, 1] and plan.passes[2].deleted_bases == [2]
    # Time alone would stop at segment 0 (1 day old): the size limit came first.
    assert plan_retention(log, now=NOW).deletable_bases == []


# ------------------------------------------------------------------------------ log start offset, HW, active


def test_log_start_offset_pass_after_delete_records(tmp_path):
    log = build(tmp_path / "t-0", [[NOW, NOW], [NOW, NOW], [NOW, NOW], [NOW]])  # bases 0, 2, 4, 6
    log.delete_records_before(5)
    plan = plan_retention(log, now=NOW)
    assert plan.deletable_bases == [0, 2]
    d = decisions(plan)
    assert d[0].rule == RULE_LOG_START
    assert d[0].reason == ("deletable: the log start offset 5 is at or past the next segment's base offset 2, "
                           "so every record here is below it")
    assert not d[4].deletable  # it holds offset 5
    assert plan.new_log_start_offset == 5  # never lowered to the first remaining base (4)
    result = delete_old_segments(log, plan, now=NOW)
    assert result.new_log_start_offset == 5 and log.log_start_offset == 5
    assert log.segments.base_offsets == [4, 6]
    assert records(log)[0][0] == 5


def test_log_start_offset_at_a_segment_boundary(tmp_path):
    log = build(tmp_path / "t-0", [[NOW, NOW], [NOW, NOW], [NOW]])
    log.delete_records_before(4)
    assert plan_retention(log, now=NOW).deletable_bases == [0, 2]  # next base 4 <= 4


def test_high_watermark_bounds_deletion(tmp_path):
    log = build(tmp_path / "t-0", [[NOW - 30 * DAY] * 2, [NOW - 30 * DAY] * 2, [NOW - 30 * DAY] * 2])
    # HW inside segment 2 (offsets 2-3): its upper bound 4 is past the HW.
    plan = plan_retention(log, now=NOW, high_watermark=3)
    assert plan.deletable_bases == [0] and plan.high_watermark_source == "argument"
    d = decisions(plan)
    assert d[2].reason == "kept: above the high watermark (its offsets reach 4, the high watermark is 3)"
    assert "behind a kept segment" in d[4].reason
    # HW at the next base: the segment is wholly below it.
    assert plan_retention(log, now=NOW, high_watermark=4).deletable_bases == [0, 2]
    # HW below the LEO protects the active segment.
    assert plan_retention(log, now=NOW, high_watermark=5).deletable_bases == [0, 2]
    with pytest.raises(RetentionError):
        plan_retention(log, now=NOW, high_watermark=7)


def test_empty_active_segment_is_kept_without_a_roll(tmp_path):
    log = build(tmp_path / "t-0", [[NOW - 30 * DAY], [NOW - 30 * DAY]])
    log.roll()  # empty active segment at 2
    plan = plan_retention(log, now=NOW)
    assert plan.deletable_bases == [0, 1] and not plan.roll
    assert decisions(plan)[2].reason == "kept: active segment and empty"
    result = delete_old_segments(log, plan, now=NOW)
    assert not result.rolled and log.segments.base_offsets == [2] and log.log_start_offset == 2


def test_everything_deletable_rolls_first_and_the_new_segment_remains(tmp_path):
    log = build(tmp_path / "t-0", [[NOW - 30 * DAY], [NOW - 30 * DAY] * 3])  # LEO 4, active non-empty
    plan = plan_retention(log, now=NOW)
    assert plan.deletable_bases == [0, 1] and plan.roll and plan.roll_base_offset == 4
    assert plan.new_log_start_offset == 4
    assert any("roll" in line for line in plan.explain_lines())
    result = delete_old_segments(log, plan, now=NOW, file_delete_delay_ms=0)
    assert result.rolled and result.rolled_base_offset == 4
    assert log.segments.base_offsets == [4] and log.log_start_offset == 4 and log.log_end_offset == 4
    assert log.active_segment.size == 0
    append(log, NOW)  # the log goes on at 4
    assert records(log) == [(4, VALUE)]
    log.close()
    assert sorted(os.listdir(tmp_path / "t-0")) == [
        "00000000000000000004.index", "00000000000000000004.log", "00000000000000000004.snapshot",
        "00000000000000000004.timeindex", "00000000000000000005.snapshot"]
    assert verify_errors(tmp_path / "t-0") == []


def test_roll_then_later_pass_sees_only_the_new_segment(tmp_path):
    log = build(tmp_path / "t-0", [[NOW - 30 * DAY], [NOW - 30 * DAY]])
    plan = plan_retention(log, now=NOW, retention_bytes=0)
    assert plan.passes[1].rolled and plan.passes[1].deleted_bases == [0, 1]
    assert plan.passes[2].deleted_bases == []  # time pass: only the new empty segment is left
    assert [d.rule for d in plan.segments] == [RULE_SIZE, RULE_SIZE]


def test_compact_policy_runs_only_the_log_start_offset_pass(tmp_path):
    log = build(tmp_path / "t-0", [[NOW - 30 * DAY] * 2] * 3, config(cleanup_policy="compact", retention_bytes=1))
    plan = plan_retention(log, now=NOW)
    assert plan.deletable_bases == []
    assert [(p.rule, p.ran) for p in plan.passes] == [(RULE_LOG_START, True), (RULE_SIZE, False), (RULE_TIME, False)]
    assert "has no delete" in plan.passes[2].note
    log.delete_records_before(3)
    assert plan_retention(log, now=NOW).deletable_bases == [0]
    both = build(tmp_path / "t-1", [[NOW - 30 * DAY]] * 3, config(cleanup_policy="compact,delete"))
    plan = plan_retention(both, now=NOW)
    assert plan.deletable_bases == [0, 1, 2] and plan.roll


# ------------------------------------------------------------------------------ deletion, files, sweep


def test_delete_renames_to_deleted_with_the_deletion_time_and_sweeps_after_the_delay(tmp_path):
    d = tmp_path / "t-0"
    log = build(d, [[NOW - 30 * DAY], [NOW - 30 * DAY], [NOW]])
    log.producer_state.take_snapshot()  # a snapshot at the LEO, which is kept
    before = sorted(os.listdir(d))
    assert "00000000000000000001.snapshot" in before
    result = delete_old_segments(log, now=NOW)  # file.delete.delay.ms from the config: 60000
    assert result.file_delete_delay_ms == 60000 and result.removed_files == []
    assert sorted(result.pending_files) == sorted([
        "00000000000000000000.log.deleted", "00000000000000000000.index.deleted",
        "00000000000000000000.timeindex.deleted", "00000000000000000001.log.deleted",
        "00000000000000000001.index.deleted", "00000000000000000001.timeindex.deleted",
        "00000000000000000001.snapshot.deleted"])
    for name in result.pending_files:
        assert (d / name).stat().st_mtime_ns == NOW * 1_000_000
    for gone in ("00000000000000000000.log", "00000000000000000001.log", "00000000000000000001.snapshot"):
        assert not (d / gone).exists()
    assert sweep_deleted_files(d, now=NOW + 59_999, file_delete_delay_ms=60_000) == []
    (d / "00000000000000000009.checkpoint.deleted").write_bytes(b"")  # KRaft's: not ours to remove
    removed = sweep_deleted_files(d, now=NOW + 60_000, file_delete_delay_ms=60_000)
    assert removed == sorted(result.pending_files)
    assert sorted(n for n in os.listdir(d) if n.endswith(".deleted")) == ["00000000000000000009.checkpoint.deleted"]
    assert result.to_dict()["bytes_freed"] == 2 * BATCH_SIZE
    json.dumps(result.to_dict())
    log.close()


def test_zero_delay_removes_the_files_at_once(tmp_path):
    d = tmp_path / "t-0"
    log = build(d, [[NOW - 30 * DAY], [NOW - 30 * DAY], [NOW]])
    result = delete_old_segments(log, now=NOW, file_delete_delay_ms=0)
    assert result.pending_files == [] and len(result.removed_files) == 7
    assert not [n for n in os.listdir(d) if n.endswith(".deleted")]


def test_leader_epochs_and_producer_state_follow_the_new_log_start(tmp_path):
    d = tmp_path / "t-0"
    log = Log.open(d, config(), time_source=lambda: NOW)
    for epoch in range(3):
        for seq in range(2):
            log.append_as_leader(encode_batch([(0, NOW - 30 * DAY, b"k", VALUE)], producer_id=7, producer_epoch=0,
                                              base_sequence=epoch * 2 + seq), leader_epoch=epoch)
        log.roll()
    append(log, NOW)
    assert [(e.epoch, e.start_offset) for e in log.epoch_cache.entries] == [(0, 0), (1, 2), (2, 4)]
    result = delete_old_segments(log, now=NOW)
    assert [s.base_offset for s in result.deleted] == [0, 2, 4] and log.log_start_offset == 6
    assert [(e.epoch, e.start_offset) for e in log.epoch_cache.entries] == [(2, 6)]
    assert 7 in log.producer_state.producers  # producer state is not lost with the segments
    log.close()
    reopened = Log.open(d, config(), log_start_offset=6)
    assert reopened.log_start_offset == 6 and 7 in reopened.producer_state.producers
    reopened.close()
    assert verify_errors(d) == []


def test_stale_plan_is_refused(tmp_path):
    log = build(tmp_path / "t-0", [[NOW - 30 * DAY], [NOW]])
    plan = plan_retention(log, now=NOW)
    append(log, NOW)
    with pytest.raises(StaleRetentionPlanError):
        delete_old_segments(log, plan, now=NOW)
    log.close()
    with pytest.raises(RetentionError):
        delete_old_segments(log, now=NOW)


def test_plan_is_read_only_and_serialisable(tmp_path):
    d = tmp_path / "t-0"
    log = build(d, [[NOW - 30 * DAY], [NOW - 30 * DAY], [NOW]])
    before = {n: (d / n).stat().st_mtime_ns for n in os.listdir(d)}
    plan = plan_retention(log, now=NOW, retention_bytes=10)
    assert {n: (d / n).stat().st_mtime_ns for n in os.listdir(d)} == before
    assert log.segments.base_offsets == [0, 1, 2]
    data = json.loads(json.dumps(plan.to_dict()))
    assert data["config"]["retention.bytes"] == {"value": 10, "source": "argument"}
    assert data["config"]["retention.ms"] == {"value": WEEK, "source": "log.config"}
    assert data["segments"][0]["largest_timestamp_iso"] == format_timestamp(NOW - 30 * DAY)
    assert data["new_log_start_offset"] == 2 and data["segments_to_delete"] == 2
    lines = plan.explain_lines()
    assert lines[-1] == f"result: delete 2 segment(s), {format_bytes(2 * BATCH_SIZE)}; log start offset 0 -> 2"
    assert any(line.startswith("00000000000000000002.log") and "[keep] kept: " in line for line in lines)
    assert any(line.startswith("00000000000000000000.log") and "[DELETE by retention.bytes] deletable: " in line
               for line in lines)


def test_reopen_after_deletion_gives_a_valid_log_at_the_new_start(tmp_path):
    d = tmp_path / "t-0"
    log = build(d, [[NOW - 30 * DAY] * 3, [NOW - 20 * DAY] * 3, [NOW - DAY] * 3, [NOW]])
    original = records(log)
    result = delete_old_segments(log, now=NOW)
    assert result.new_log_start_offset == 6
    log.close()
    # Unclean, with the old log-start checkpoint (the caller had not written the new one yet).
    reopened = Log.open(d, config(), log_start_offset=0, recovery_point=0, had_clean_shutdown=False)
    assert reopened.log_start_offset == 6 and reopened.segments.base_offsets == [6, 9]
    assert records(reopened) == [r for r in original if r[0] >= 6]
    reopened.close()
    assert not [n for n in os.listdir(d) if n.endswith(".deleted")]  # the loader removed them
    assert verify_errors(d) == []


def test_a_real_kafka_partition(corpus, tmp_path):
    src = corpus / "dipendrasaini__kafka-learnning-series/tmp/kafka-logs-1/invoice-0"
    d = tmp_path / "invoice-0"
    shutil.copytree(src, d, copy_function=shutil.copyfile)
    os.chmod(d, 0o755)
    log = Log.open(d, config(retention_ms=-1, retention_bytes=1_400_000))
    plan = plan_retention(log, now=NOW)
    # 3,297,969 bytes, 1,897,969 over: segment 0 (999,252) fits the excess, segment 1 (989,360) does not.
    assert plan.log_size == 3_297_969 and plan.deletable_bases == [0]
    assert plan.new_log_start_offset == 30626
    by_time = plan_retention(log, now=decisions(plan)[30626].largest_timestamp + WEEK + 1,
                             retention_ms=WEEK, retention_bytes=-1)
    assert by_time.deletable_bases[:2] == [0, 30626]
    delete_old_segments(log, plan, now=NOW, file_delete_delay_ms=0)
    log.close()
    reopened = Log.open(d, config(), log_start_offset=30626)
    assert reopened.log_start_offset == 30626 and reopened.log_end_offset == 100294
    reopened.close()
    assert verify_errors(d) == []


# ------------------------------------------------------------------------------ crash safety


def _template(directory: Path, layout, cfg) -> list[tuple[int, bytes]]:
    log = Log.open(directory, cfg, time_source=lambda: NOW)
    seq = 0
    for i, stamps in enumerate(layout):
        if i:
            log.roll()
        for ts in stamps:
            log.append_as_leader(encode_batch([(0, ts, b"k", b"%d" % seq)], producer_id=3, producer_epoch=0,
                                              base_sequence=seq), leader_epoch=i)
            seq += 1
    recs = records(log)
    log.close()
    return recs


_MUTATORS = ("replace", "rename", "unlink", "utime", "fsync", "ftruncate", "open", "write", "pwrite")


def _run_until_crash_point(work: Path, cfg: LogConfig, crash_at: int, delay: int) -> bool:
    """Fork a child that opens ``work`` and deletes old segments, killed (``os._exit``) just
    before its ``crash_at``-th file-system call. True when it finished before that."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 70
        try:
            log = Log.open(work, cfg, time_source=lambda: NOW)
            calls = [0]

            def hook(real):
                def wrapper(*a, **kw):
                    if calls[0] == crash_at:
                        os._exit(9)
                    calls[0] += 1
                    return real(*a, **kw)
                return wrapper

            for name in _MUTATORS:
                setattr(os, name, hook(getattr(os, name)))
            delete_old_segments(log, now=NOW, file_delete_delay_ms=delay)
            code = 3
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    assert code in (3, 9), code
    return code == 3


@pytest.mark.parametrize("layout,delay,expected_start", [
    ([[NOW - 30 * DAY] * 2, [NOW - 20 * DAY] * 2, [NOW - DAY] * 2, [NOW]], 60_000, 4),
    ([[NOW - 30 * DAY] * 2, [NOW - 20 * DAY] * 2, [NOW - 10 * DAY]], 0, 5),  # rolls first
])
def test_a_crash_at_any_point_leaves_a_loadable_suffix(tmp_path, layout, delay, expected_start):
    cfg = config()
    template = tmp_path / "template" / "t-0"
    original = _template(template, layout, cfg)
    crash_points = 0
    for crash_at in range(500):
        work = tmp_path / f"run{crash_at}" / "t-0"
        shutil.copytree(template, work)
        finished = _run_until_crash_point(work, cfg, crash_at, delay)
        # The caller never got to write the new log-start checkpoint: load with the old one.
        log = Log.open(work, cfg, log_start_offset=0, recovery_point=0, had_clean_shutdown=False)
        got = records(log)
        start = log.log_start_offset
        assert start in (0, *[b for b in log.segments.base_offsets]) and start <= expected_start
        assert got == [r for r in original if r[0] >= start], f"crash at call {crash_at}"
        assert log.log_end_offset == original[-1][0] + 1
        log.close()
        assert verify_errors(work) == [], f"crash at call {crash_at}"
        shutil.rmtree(work.parent)
        if finished:
            assert start == expected_start
            break
        crash_points += 1
    assert crash_points > 10  # the deletion really was interrupted at many places


# ------------------------------------------------------------------------------ oracle


def oracle(segs, *, leo, hw, lso, now, retention_ms, retention_bytes, delete):
    """The §15 rules, written plainly: ``segs`` is a list of (base, size, largest ts).
    Returns ({base: rule}, rolled, new log start offset)."""
    live = list(segs)
    chosen: dict[int, str] = {}
    rolled = False

    def walk(rule, ok):
        picked = []
        for i, (base, size, ts) in enumerate(live):
            last = i == len(live) - 1
            upper = leo if last else live[i + 1][0]
            if hw < upper:
                break
            if not ok(i, base, size, ts):
                break
            if last and size == 0:
                break
            picked.append(base)
        return picked

    passes = ["lso"] + (["size", "time"] if delete else [])
    for rule in passes:
        if rule == "lso":
            picked = walk(RULE_LOG_START, lambda i, b, s, t: i + 1 < len(live) and live[i + 1][0] <= lso)
            name = RULE_LOG_START
        elif rule == "size":
            total = sum(s for _, s, _ in live)
            if retention_bytes < 0 or total < retention_bytes:
                continue
            excess = [total - retention_bytes]

            def fits(i, b, s, t):
                if excess[0] - s >= 0:
                    excess[0] -= s
                    return True
                return False

            picked = walk(RULE_SIZE, fits)
            name = RULE_SIZE
        else:
            if retention_ms < 0:
                continue
            picked = walk(RULE_TIME, lambda i, b, s, t: now - t > retention_ms)
            name = RULE_TIME
        if not picked:
            continue
        if len(picked) == len(live):
            rolled = True
            live.append((leo, 0, now))
        for b in picked:
            chosen[b] = name
        live = [x for x in live if x[0] not in picked]
        lso = max(lso, live[0][0])
    return chosen, rolled, lso


segment_kinds = st.sampled_from(["old", "middle", "recent", "future", "none-old", "none-recent"])
layouts = st.lists(st.tuples(st.integers(1, 3), segment_kinds), min_size=1, max_size=5)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layout=layouts, empty_active=st.booleans(), policy=st.sampled_from(["delete", "compact", "compact,delete"]),
       retention_ms=st.sampled_from([-1, 3 * DAY, 10 * DAY]), size_limit=st.floats(-0.2, 1.1),
       hw_pick=st.one_of(st.just(1.0), st.floats(0, 1)), lso_pick=st.one_of(st.just(0.0), st.floats(0, 1)),
       do_delete=st.booleans())
def test_selection_matches_the_oracle(layout, empty_active, policy, retention_ms, size_limit, hw_pick, lso_pick,
                                      do_delete):
    ages = {"old": 20 * DAY, "middle": 5 * DAY, "recent": DAY, "future": -30 * DAY}
    with tempfile.TemporaryDirectory() as tmp:
        stamps, mtimes = [], []
        for count, kind in layout:
            if kind.startswith("none"):
                stamps.append([-1] * count)
                mtimes.append(NOW - (20 * DAY if kind == "none-old" else DAY))
            else:
                stamps.append([NOW - ages[kind] - j for j in range(count)])
                mtimes.append(NOW - 1000 * DAY)  # must not matter: the records have timestamps
        if empty_active:
            stamps.append([])
            mtimes.append(NOW - 1000 * DAY)
        log = build(Path(tmp) / "t-0", stamps, config(cleanup_policy=policy, retention_ms=retention_ms), mtimes=mtimes)
        leo = log.log_end_offset
        hw = round(hw_pick * leo)
        lso = round(lso_pick * hw)
        log.delete_records_before(lso)
        total = sum(os.path.getsize(s.log_path) for s in log.segments)
        retention_bytes = -1 if size_limit < 0 else int(size_limit * total)
        segs = []
        for seg, st_, m in zip(list(log.segments), stamps, mtimes):
            real = [t for t in st_ if t >= 0]
            segs.append((seg.base_offset, os.path.getsize(seg.log_path), max(real) if real else m))
        expected, rolled, new_lso = oracle(segs, leo=leo, hw=hw, lso=lso, now=NOW, retention_ms=retention_ms,
                                           retention_bytes=retention_bytes, delete="delete" in policy)
        event("rolls" if rolled else "deletes some" if expected else "deletes none")
        plan = plan_retention(log, now=NOW, retention_bytes=retention_bytes, high_watermark=hw)
        assert {d.base_offset: d.rule for d in plan.segments if d.deletable} == expected
        assert plan.roll == rolled and plan.new_log_start_offset == new_lso
        assert all(d.reason.startswith("deletable: " if d.deletable else "kept") for d in plan.segments)
        if do_delete:
            log.high_watermark = hw
            result = delete_old_segments(log, plan, now=NOW, file_delete_delay_ms=0)
            remaining = [b for b, _, _ in segs if b not in expected] + ([leo] if rolled else [])
            assert log.segments.base_offsets == remaining
            assert log.log_start_offset == new_lso == result.new_log_start_offset
        log.close()
