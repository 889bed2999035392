"""``engine.recovery``: planned, parallel recovery with salvage, on constructed log dirs.

Each test builds a real log directory with ``LogManager`` (many small segments), damages it
the way crashes and bad disks do, and checks that the read-only plan predicts exactly what
``recover`` then does, that every batch before the damage survives byte for byte (with
salvage: every valid batch after it too, and the quarantine file holds exactly the damaged
bytes), and that the result passes ``plog verify`` and needs no further recovery.
"""

from __future__ import annotations

import os
import random
import shutil
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plog.engine.maintenance import recovery
from plog.engine.storage.checkpoints import CleanShutdownFile, OffsetCheckpointFile
from plog.engine.storage.log_config import LogConfig
from plog.engine.errors import EngineError, LogDirInUseError, LogDirLockedError
from plog.engine.storage.lock import LogDirLock
from plog.engine.storage.log import Log
from plog.engine.storage.log_manager import LogManager
from plog.engine.maintenance.recovery import plan_recovery, recover
from plog.engine.maintenance.salvage import quarantine_file_name
from plog.engine.storage.file_names import TopicPartition
from plog.engine.inspect.verify import ERROR, verify_path
from plog.formats.batches import iter_batches
from plog.formats.record_batch import encode_batch

TS = 1700000000000
TOPIC_CONFIG = {"segment.bytes": "4000", "index.interval.bytes": "300"}
CONFIG = LogConfig.from_properties(TOPIC_CONFIG)


# -- building and inspecting log dirs ---------------------------------------------------------


def make_log_dir(root: Path, *, partitions: int = 1, batches: int = 60, seed: int = 0) -> Path:
    """A cleanly shut down log dir: ``t-0``.. with 6 segments of 10 batches (3 records each)."""
    d = root / "logs"
    rnd = random.Random(seed)
    with LogManager(d) as lm:
        for p in range(partitions):
            # A topic config (kept in .plog-topics.json) is what recovery reads back.
            log = lm.get_or_create_log(("t", p), config=TOPIC_CONFIG)
            for i in range(batches):
                recs = [(j, TS + i, b"k%d" % j, rnd.randbytes(100)) for j in range(3)]
                log.append_as_leader(encode_batch(recs), leader_epoch=1)
    return d


def make_unclean(d: Path, recovery_point: int = 0) -> None:
    os.remove(d / ".kafka_cleanshutdown")
    cp = OffsetCheckpointFile(d / "recovery-point-offset-checkpoint")
    cp.write({tp: recovery_point for tp in cp.read()})


def segs(part: Path) -> list[Path]:
    return sorted(part.glob("*.log"))


def batch_list(part: Path) -> list[tuple[str, int, bytes]]:
    """(segment name, position, bytes) of every batch of the partition, in order."""
    out = []
    for seg in segs(part):
        data = seg.read_bytes()
        for b in iter_batches(data):
            out.append((seg.name, b.position, bytes(b.buffer)))
    return out


def batch_bytes(part: Path) -> list[bytes]:
    return [b for _, _, b in batch_list(part)]


def snapshot_files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name != ".lock"}


def errors(path: Path) -> list:
    return [f for f in verify_path(str(path)) if f.severity == ERROR]


def assert_recovered(d: Path) -> None:
    """Verify finds no error, and a second plan (even --all) has nothing to do."""
    assert errors(d) == []
    again = plan_recovery(d)
    assert not again.has_work, again.to_dict()
    assert not plan_recovery(d, all_segments=True).has_work
    assert CleanShutdownFile(d).exists()


def flip(path: Path, position: int) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= 0xFF
    path.write_bytes(bytes(data))


def assert_plan_matches(plan, report) -> None:
    """The plan's truncation, deletions and salvage are what recovery did."""
    by_path = {p.path: p for p in report.partitions}
    for p in plan.partitions:
        r = by_path[p.path]
        assert r.status in ("recovered", "skipped"), r.reason
        if p.skipped:
            continue
        planned = [(p.truncation.file, p.truncation.position, p.truncation.bytes, p.truncation.kind)] \
            if p.truncation else []
        assert [(t.file, t.position, t.bytes, t.kind) for t in r.truncations] == planned
        assert [(q.file, q.position, q.length, q.quarantine_file) for q in r.quarantined] == \
            [(q.file, q.position, q.length, q.quarantine_file) for q in p.salvage]
        planned_deleted = {a.file for a in p.deleted_segments if a.file.endswith(".log")}
        assert planned_deleted <= set(r.deleted_files)
        assert r.log_end_offset == p.log_end_offset
        assert r.recovery_point == p.new_recovery_point
        assert r.log_start_offset == p.new_log_start_offset
        snaps = {n for n in os.listdir(p.path) if n.endswith(".snapshot")}
        assert not {d.file for d in p.snapshots_deleted} & snaps
        if p.snapshot_written:
            assert p.snapshot_written in snaps
        # The run revalidates the segments the plan names (but those a truncation deletes),
        # rebuilds the very indexes the plan lists and leaves the damage it names.
        deleted = {a.file for a in p.deleted_segments}
        assert r.revalidated == [s.file for s in p.revalidate if s.file not in deleted]
        assert sorted(r.rebuilt_indexes) == sorted(a.file for a in p.index_rebuilds if a.action == "rebuild")
        assert r.untouched == p.untouched


def run(d: Path, **kw):
    plan = plan_recovery(d, all_segments=kw.get("all_segments", False), salvage=kw.get("salvage", False))
    report = recover(d, jobs=kw.pop("jobs", 1), **kw)
    assert report.ok, report.to_dict()
    assert_plan_matches(plan, report)
    return plan, report


# -- nothing to do ----------------------------------------------------------------------------


def test_clean_log_dir_plans_nothing_and_recover_changes_no_segment_file(tmp_path):
    d = make_log_dir(tmp_path, partitions=2)
    plan = plan_recovery(d)
    assert not plan.has_work
    assert plan.bytes_to_validate == 0
    assert all(p.revalidate == [] for p in plan.partitions)
    before = snapshot_files(d)
    report = recover(d, jobs=1)
    assert report.ok
    assert [p.revalidated for p in report.partitions] == [[], []]
    after = snapshot_files(d)
    assert after == before
    assert_recovered(d)


def test_plan_is_read_only(tmp_path):
    d = make_log_dir(tmp_path)
    make_unclean(d)
    part = d / "t-0"
    seg = segs(part)[2]
    flip(seg, 500)
    (part / "00000000000000000000.log.cleaned").write_bytes(b"x" * 100)
    os.remove(part / "00000000000000000030.index")
    before = snapshot_files(d)
    mtimes = {p: p.stat().st_mtime_ns for p in d.rglob("*")}
    plan = plan_recovery(d, salvage=True)
    plan_recovery(d, all_segments=True)
    assert plan.has_work
    assert snapshot_files(d) == before
    assert {p: p.stat().st_mtime_ns for p in d.rglob("*")} == mtimes


# -- truncated tails ----------------------------------------------------------------------------


@pytest.mark.parametrize("damage", ["torn", "garbage", "zeros"])
def test_damaged_tail_is_truncated_as_kafka_does(tmp_path, damage):
    d = make_log_dir(tmp_path)
    make_unclean(d, recovery_point=150)
    part = d / "t-0"
    original = batch_list(part)
    last = segs(part)[-1]
    data = last.read_bytes()
    if damage == "torn":
        last_batch = list(iter_batches(data))[-1]
        cut = last_batch.position + last_batch.size_in_bytes // 2
        last.write_bytes(data[:cut])
        expected = (last_batch.position, cut - last_batch.position, "torn tail")
        kept = original[:-1]
    else:
        extra = random.Random(3).randbytes(777) if damage == "garbage" else bytes(5000)
        last.write_bytes(data + extra)
        expected = (len(data), len(extra), None)
        kept = original
    plan = plan_recovery(d)
    t = plan.partitions[0].truncation
    assert (t.file, t.position, t.bytes) == (last.name, expected[0], expected[1])
    if expected[2]:
        assert t.kind == expected[2]
    assert plan.partitions[0].deleted_segments == []
    assert [r.file for r in plan.partitions[0].revalidate] == [last.name]
    _, report = run(d)
    assert batch_list(part) == kept
    assert report.partitions[0].log_end_offset == (177 if damage == "torn" else 180)
    assert_recovered(d)


def test_torn_tail_with_salvage_is_still_a_truncation(tmp_path):
    d = make_log_dir(tmp_path)
    make_unclean(d, recovery_point=150)
    part = d / "t-0"
    last = segs(part)[-1]
    data = last.read_bytes()
    last.write_bytes(data[:-20])
    plan, report = run(d, salvage=True)
    p = plan.partitions[0]
    assert p.salvage == [] and p.rewritten_segments == []
    assert p.truncation.bytes == len(data) - 20 - p.truncation.position
    assert not list(part.glob("quarantine-*"))
    assert_recovered(d)


# -- a corrupt batch in the middle ---------------------------------------------------------------


def _corrupt_middle(d: Path, seg_index: int = 1) -> tuple[Path, int, int, bytes]:
    """Flip a payload byte of the middle batch of a segment; returns (segment, position,
    length, the damaged bytes)."""
    part = d / "t-0"
    seg = segs(part)[seg_index]
    batches = list(iter_batches(seg.read_bytes()))
    victim = batches[len(batches) // 2]
    flip(seg, victim.position + 80)
    data = seg.read_bytes()
    return seg, victim.position, victim.size_in_bytes, data[victim.position:victim.position + victim.size_in_bytes]


def test_corrupt_middle_batch_truncates_and_deletes_later_segments(tmp_path):
    d = make_log_dir(tmp_path)
    make_unclean(d)
    part = d / "t-0"
    original = batch_list(part)
    seg, pos, length, _ = _corrupt_middle(d)
    size = seg.stat().st_size
    later = [s.name for s in segs(part)[2:]]
    plan, report = run(d)
    p = plan.partitions[0]
    assert (p.truncation.file, p.truncation.position, p.truncation.kind) == (seg.name, pos, "crc mismatch")
    assert p.truncation.bytes == size - pos
    assert [a.file for a in p.deleted_segments if a.file.endswith(".log")] == later
    # Every batch before the damage is kept, byte for byte; nothing after it.
    before = [b for b in original if (b[0], b[1]) < (seg.name, pos)]
    assert batch_list(part) == before
    assert report.partitions[0].log_end_offset == 45
    assert [s.name for s in segs(part)] == ["00000000000000000000.log", seg.name]
    assert_recovered(d)


def test_corrupt_middle_batch_with_salvage_keeps_everything_else(tmp_path):
    d = make_log_dir(tmp_path)
    make_unclean(d)
    part = d / "t-0"
    original = batch_list(part)
    seg, pos, length, damaged = _corrupt_middle(d)
    plan, report = run(d, salvage=True)
    p = plan.partitions[0]
    assert p.truncation is None and p.deleted_segments == []
    [q] = report.partitions[0].quarantined
    assert (q.file, q.position, q.length, q.kind) == (seg.name, pos, length, "crc mismatch")
    assert (q.offset_before, q.offset_after) == (44, 48)
    assert q.quarantine_file == quarantine_file_name(30, pos)
    assert (part / q.quarantine_file).read_bytes() == damaged
    survivors = [b for b in original if (b[0], b[1]) != (seg.name, pos)]
    assert batch_bytes(part) == [b for _, _, b in survivors]
    assert report.partitions[0].log_end_offset == 180
    # The hole is an offset gap, as compaction leaves; a read from inside it gets the next batch.
    log = Log.open(part, CONFIG, writable=False)
    try:
        found = log.translate_offset(45)
        assert found is not None and found[1].offset == 50  # the batch holding 48..50
    finally:
        log.close()
    assert not [n for n in os.listdir(part) if n.endswith((".cleaned", ".swap", ".deleted"))]
    assert_recovered(d)


def test_several_damaged_ranges_in_several_segments(tmp_path):
    d = make_log_dir(tmp_path)
    make_unclean(d)
    part = d / "t-0"
    original = batch_list(part)
    rnd = random.Random(7)
    s1, s3, last = segs(part)[1], segs(part)[3], segs(part)[-1]
    b1 = list(iter_batches(s1.read_bytes()))
    # segment 1: a CRC failure in batch 2 and garbage inserted before batch 7
    flip(s1, b1[2].position + 100)
    data = s1.read_bytes()
    garbage = rnd.randbytes(333)
    s1.write_bytes(data[:b1[7].position] + garbage + data[b1[7].position:])
    # segment 3: a size field made huge (the walk would stop there) in batch 4
    b3 = list(iter_batches(s3.read_bytes()))
    data = bytearray(s3.read_bytes())
    struct.pack_into(">i", data, b3[4].position + 8, 10_000_000)
    s3.write_bytes(bytes(data))
    # the last segment: a torn tail
    bl = list(iter_batches(last.read_bytes()))
    last.write_bytes(last.read_bytes()[:bl[-1].position + 30])
    damaged = {(s1.name, b1[2].position), (s3.name, b3[4].position), (last.name, bl[-1].position)}
    plan, report = run(d, salvage=True)
    p = plan.partitions[0]
    assert [(q.file, q.position, q.length) for q in p.salvage] == [
        (s1.name, b1[2].position, b1[2].size_in_bytes),
        (s1.name, b1[7].position, len(garbage)),
        (s3.name, b3[4].position, b3[4].size_in_bytes),
    ]
    assert (p.truncation.file, p.truncation.position) == (last.name, bl[-1].position)
    qs = report.partitions[0].quarantined
    assert (part / qs[1].quarantine_file).read_bytes() == garbage
    assert (part / qs[0].quarantine_file).read_bytes()[:80] == original[12][2][:80]
    survivors = [b for b in original if (b[0], b[1]) not in damaged]
    assert batch_bytes(part) == [b for _, _, b in survivors]
    assert_recovered(d)


def test_damage_at_the_end_of_a_middle_segment_is_quarantined_with_salvage(tmp_path):
    d = make_log_dir(tmp_path)
    make_unclean(d)
    part = d / "t-0"
    original = batch_list(part)
    s2 = segs(part)[2]
    data = s2.read_bytes()
    s2.write_bytes(data + b"\xde\xad" * 60)
    plan, report = run(d, salvage=True)
    [q] = plan.partitions[0].salvage
    assert (q.file, q.position, q.length, q.offset_after) == (s2.name, len(data), 120, 90)
    assert plan.partitions[0].truncation is None
    assert batch_list(part) == original
    assert_recovered(d)


def test_offsets_going_backwards(tmp_path):
    """A batch whose base offset (outside the CRC) goes backwards at an index point: Kafka's
    index refuses it and the whole segment is emptied; salvage quarantines just that batch."""
    for salvage in (False, True):
        root = tmp_path / str(salvage)
        d = make_log_dir(root)
        make_unclean(d)
        part = d / "t-0"
        original = batch_list(part)
        seg = segs(part)[1]
        data = bytearray(seg.read_bytes())
        victim = list(iter_batches(bytes(data)))[5]
        struct.pack_into(">q", data, victim.position, 31)
        seg.write_bytes(bytes(data))
        plan, report = run(d, salvage=salvage)
        p = plan.partitions[0]
        if salvage:
            [q] = p.salvage
            assert (q.position, q.kind) == (victim.position, "offsets going backwards")
            assert batch_bytes(part) == [b for n, pos, b in original if (n, pos) != (seg.name, victim.position)]
        else:
            assert (p.truncation.file, p.truncation.position, p.truncation.bytes) == (seg.name, 0, len(data))
            assert p.truncation.kind == "offsets going backwards"
            assert batch_list(part) == original[:10]
        assert_recovered(d)


# -- indexes ----------------------------------------------------------------------------------------


def test_deleted_indexes_are_rebuilt_identically(tmp_path):
    d = make_log_dir(tmp_path)
    part = d / "t-0"
    originals = {p.name: p.read_bytes() for p in sorted(part.glob("*.*index"))}
    doomed = sorted(originals)[1:6]  # offset and time indexes of several segments
    for name in doomed:
        os.remove(part / name)
    plan = plan_recovery(d)
    p = plan.partitions[0]
    assert plan.has_work and p.clean_shutdown
    assert {a.file for a in p.index_rebuilds} == set(doomed)
    assert all(r.reasons for r in p.revalidate)
    run(d)
    # A segment whose offset index is gone is revalidated and gets both indexes back byte for
    # byte; a time index missing alone is created empty, as Kafka's loader does, without
    # revalidating the segment.
    expected = dict(originals)
    for name in doomed:
        if name.endswith(".timeindex") and name.replace(".timeindex", ".index") not in doomed:
            expected[name] = b""
    assert {p.name: p.read_bytes() for p in part.glob("*.*index")} == expected
    assert any(v == b"" for v in expected.values())
    assert_recovered(d)


def test_zero_filled_preallocated_indexes_are_rebuilt(tmp_path):
    d = make_log_dir(tmp_path)
    part = d / "t-0"
    idx, tidx = part / "00000000000000000030.index", part / "00000000000000000030.timeindex"
    originals = {idx: idx.read_bytes(), tidx: tidx.read_bytes()}
    idx.write_bytes(originals[idx] + bytes(8 * 100))
    tidx.write_bytes(originals[tidx] + bytes(12 * 100))
    plan = plan_recovery(d)
    p = plan.partitions[0]
    assert [r.file for r in p.revalidate] == ["00000000000000000030.log"]
    assert {(a.file, "zero-filled" in a.reason) for a in p.index_rebuilds} == {(idx.name, True), (tidx.name, True)}
    run(d)
    assert idx.read_bytes() == originals[idx] and tidx.read_bytes() == originals[tidx]
    assert_recovered(d)


def test_stale_recovery_point_revalidates_everything_and_moves_it(tmp_path):
    d = make_log_dir(tmp_path, partitions=2)
    make_unclean(d, recovery_point=0)
    before = {p: batch_list(d / p) for p in ("t-0", "t-1")}
    plan, report = run(d)
    assert plan.has_work
    assert all(len(p.revalidate) == 6 and p.truncation is None for p in plan.partitions)
    assert all(r.reasons[0].startswith("holds or follows the recovery point 0")
               for p in plan.partitions for r in p.revalidate)
    changes = {(c.file, c.topic_partition, c.old, c.new) for c in plan.log_dirs[0].checkpoint_changes}
    assert changes == {("recovery-point-offset-checkpoint", "t-0", 0, 180),
                       ("recovery-point-offset-checkpoint", "t-1", 0, 180)}
    assert OffsetCheckpointFile(d / "recovery-point-offset-checkpoint").read() == \
        {TopicPartition("t", 0): 180, TopicPartition("t", 1): 180}
    assert {p: batch_list(d / p) for p in ("t-0", "t-1")} == before
    assert_recovered(d)


def test_high_watermark_is_clamped_and_other_entries_kept(tmp_path):
    d = make_log_dir(tmp_path)
    make_unclean(d, recovery_point=0)
    hw = OffsetCheckpointFile(d / "replication-offset-checkpoint")
    hw.write({("t", 0): 180, ("gone", 3): 42})
    rp = OffsetCheckpointFile(d / "recovery-point-offset-checkpoint")
    rp.write({("t", 0): 0, ("gone", 3): 40})
    seg = segs(d / "t-0")[3]
    flip(seg, 300)
    run(d)
    assert hw.read() == {("t", 0): 90, ("gone", 3): 42}
    assert rp.read() == {("t", 0): 90, ("gone", 3): 40}


# -- temporary files of an interrupted clean, split or swap --------------------------------------------


def _make_swap(part: Path, bases: list[int], suffix: str) -> list[bytes]:
    """Write, as the cleaner would, one segment at bases[0] holding the batches of the
    segments ``bases``, under ``suffix`` (``.cleaned`` or ``.swap``)."""
    from plog.engine.storage.segment import LogSegment

    seg = LogSegment(part, bases[0], index_interval_bytes=CONFIG.index_interval_bytes, file_suffix=suffix)
    merged = []
    for base in bases:
        for b in iter_batches((part / f"{base:020d}.log").read_bytes()):
            seg.append(b.last_offset, b.max_timestamp, b.last_offset, bytes(b.buffer))
            merged.append(bytes(b.buffer))
    seg.on_become_inactive_segment()
    seg.flush()
    seg.close()
    return merged


def test_leftover_swap_is_completed(tmp_path):
    d = make_log_dir(tmp_path)
    part = d / "t-0"
    original = batch_bytes(part)
    _make_swap(part, [0, 30], ".swap")  # crashed after .cleaned -> .swap, before old -> .deleted
    (part / "00000000000000000090.log.deleted").write_bytes(b"old")  # a pending async delete
    plan = plan_recovery(d)
    actions = {(a.file, a.action) for a in plan.partitions[0].temp_files}
    assert ("00000000000000000000.log.swap", "rename") in actions
    assert ("00000000000000000030.log", "delete") in actions and ("00000000000000000000.log", "delete") in actions
    assert ("00000000000000000090.log.deleted", "delete") in actions
    run(d)
    assert [s.name for s in segs(part)] == [f"{b:020d}.log" for b in (0, 60, 90, 120, 150)]
    assert batch_bytes(part) == original
    assert not [n for n in os.listdir(part) if n.endswith((".swap", ".deleted", ".cleaned"))]
    assert_recovered(d)


def test_leftover_cleaned_and_interrupted_split_are_rolled_back(tmp_path):
    d = make_log_dir(tmp_path)
    part = d / "t-0"
    before = snapshot_files(part)
    _make_swap(part, [60], ".cleaned")
    _make_swap(part, [90], ".swap")  # a .swap above a .cleaned: an interrupted split, discarded
    plan = plan_recovery(d)
    files = {a.file: a.action for a in plan.partitions[0].temp_files}
    assert files["00000000000000000060.log.cleaned"] == "delete"
    assert files["00000000000000000090.log.swap"] == "delete"
    run(d)
    assert snapshot_files(part) == before
    assert_recovered(d)


def test_orphan_index_is_deleted(tmp_path):
    d = make_log_dir(tmp_path)
    part = d / "t-0"
    shutil.copy(part / "00000000000000000030.index", part / "00000000000000000999.index")
    plan = plan_recovery(d)
    assert [a.file for a in plan.partitions[0].orphan_indexes] == ["00000000000000000999.index"]
    run(d)
    assert not (part / "00000000000000000999.index").exists()
    assert_recovered(d)


# -- paths, markers, locks, skipping, parallelism, progress --------------------------------------------


def test_segment_path_recovers_from_that_segment(tmp_path):
    d = make_log_dir(tmp_path)
    part = d / "t-0"
    seg = segs(part)[4]
    flip(seg, 200)
    plan = plan_recovery(seg)
    p = plan.partitions[0]
    assert [r.file for r in p.revalidate] == [s.name for s in segs(part)[4:]]
    assert p.truncation.file == seg.name
    report = recover(seg, jobs=1)
    assert report.kind == "segment"
    assert report.partitions[0].revalidated == [seg.name]  # truncated: the next one is deleted
    assert [s.name for s in segs(part)] == [f"{b:020d}.log" for b in (0, 30, 60, 90, 120)]
    assert CleanShutdownFile(d).exists()  # it was there before: written back
    assert_recovered(d)


def test_partition_path_keeps_an_absent_marker_absent(tmp_path):
    d = make_log_dir(tmp_path, partitions=2)
    make_unclean(d, recovery_point=0)
    plan = plan_recovery(d / "t-1")
    assert not plan.log_dirs[0].writes_marker
    report = recover(d / "t-1", jobs=1)
    assert [p.topic_partition for p in report.partitions] == ["t-1"]
    assert not CleanShutdownFile(d).exists()
    rp = OffsetCheckpointFile(d / "recovery-point-offset-checkpoint").read()
    assert rp == {("t", 0): 0, ("t", 1): 180}


def test_lock_held_is_a_typed_error_and_changes_nothing(tmp_path):
    d = make_log_dir(tmp_path)
    make_unclean(d)
    before = snapshot_files(d)
    with LogDirLock(d):
        with pytest.raises(LogDirInUseError) as e:
            recover(d, jobs=1)
    assert isinstance(e.value, LogDirLockedError) and isinstance(e.value, EngineError)
    assert "in use" in str(e.value)
    assert snapshot_files(d) == before


def test_cluster_metadata_log_is_skipped(tmp_path):
    d = make_log_dir(tmp_path)
    meta = d / "__cluster_metadata-0"
    shutil.copytree(d / "t-0", meta)
    (meta / "00000000000000000150.log").write_bytes((meta / "00000000000000000150.log").read_bytes() + b"junk" * 9)
    before = snapshot_files(meta)
    make_unclean(d)
    plan = plan_recovery(d)
    assert [p.skipped is not None for p in plan.partitions] == [True, False]
    report = recover(d, jobs=1)
    assert report.partitions[0].status == "skipped" and "Raft" in report.partitions[0].reason
    assert snapshot_files(meta) == before
    assert CleanShutdownFile(d).exists()


def _damaged_data_dir(root: Path) -> Path:
    """Two log dirs (a data dir), several partitions, several kinds of damage."""
    data = root / "data"
    data.mkdir(parents=True)
    for broker in (0, 1):
        d = make_log_dir(root / f"b{broker}", partitions=3, seed=broker)
        shutil.move(str(d), data / f"broker-{broker}")
        d = data / f"broker-{broker}"
        make_unclean(d, recovery_point=30)
        flip(segs(d / "t-0")[2], 700)
        last = segs(d / "t-1")[-1]
        last.write_bytes(last.read_bytes()[:-77])
        os.remove(d / "t-2" / "00000000000000000060.index")
    return data


def test_parallel_recovery_equals_serial_byte_for_byte(tmp_path):
    a = _damaged_data_dir(tmp_path / "a")
    b = tmp_path / "b"
    shutil.copytree(a, b)
    seen_a, seen_b = [], []
    plan = plan_recovery(a, salvage=True)
    ra = recover(a, jobs=1, salvage=True, progress=seen_a.append)
    rb = recover(b, jobs=2, salvage=True, progress=seen_b.append)
    assert ra.ok and rb.ok
    assert snapshot_files(a) == snapshot_files(b)
    assert_plan_matches(plan, ra)
    # Progress counts the bytes revalidated and those read for damage left untouched.
    assert sum(seen_a) == sum(seen_b) == sum(p.bytes_validated + p.bytes_checked for p in rb.partitions) > 0
    assert sum(p.bytes_checked for p in rb.partitions) > 0  # segment 0 lies below the recovery point 30
    for d in (a / "broker-0", a / "broker-1"):
        assert_recovered(d)


def test_progress_counts_every_validated_byte(tmp_path):
    d = make_log_dir(tmp_path, partitions=3)
    make_unclean(d)
    plan = plan_recovery(d)
    seen = []
    recover(d, jobs=2, progress=seen.append)
    assert sum(seen) == plan.bytes_to_validate == sum(s.stat().st_size for p in d.glob("t-*") for s in segs(p))


def test_to_dict_is_json_friendly(tmp_path):
    import json

    d = make_log_dir(tmp_path)
    make_unclean(d)
    flip(segs(d / "t-0")[1], 400)
    plan = plan_recovery(d, salvage=True)
    report = recover(d, jobs=1, salvage=True)
    for obj in (plan, report):
        out = json.loads(json.dumps(obj.to_dict()))
        assert out["log_dirs"][0]["partitions"][0]["topic_partition"] == "t-0"
    assert plan.to_dict()["has_work"] is True and report.to_dict()["ok"] is True


# -- crash safety of the salvage rewrite -----------------------------------------------------------------


def test_crash_at_every_step_of_a_salvage_rewrite_is_completed_or_rolled_back(tmp_path, monkeypatch):
    reference = make_log_dir(tmp_path / "ref")
    make_unclean(reference)
    _, _, _, damaged = _corrupt_middle(reference)
    pristine = tmp_path / "pristine"
    shutil.copytree(reference, pristine)
    recover(reference, jobs=1, salvage=True)
    expected = batch_bytes(reference / "t-0")
    real_fsync = recovery.fsync_dir
    step = 0
    while True:
        step += 1
        d = tmp_path / f"crash{step}"
        shutil.copytree(pristine, d)
        calls = {"n": 0}

        def crashing(path, _limit=step, _calls=calls):
            _calls["n"] += 1
            if _calls["n"] == _limit:
                raise OSError("simulated crash")
            real_fsync(path)

        monkeypatch.setattr(recovery, "fsync_dir", crashing)
        first = recover(d, jobs=1, salvage=True)
        monkeypatch.setattr(recovery, "fsync_dir", real_fsync)
        crashed = not first.ok
        # Whatever state the crash left, a second run (as after a restart) ends in the result
        # of an uninterrupted salvage.
        recover(d, jobs=1, salvage=True)
        part = d / "t-0"
        assert batch_bytes(part) == expected, step
        assert not [n for n in os.listdir(part) if n.endswith((".cleaned", ".swap", ".deleted", ".tmp"))]
        quarantined = sorted(part.glob("quarantine-*"))
        assert [q.read_bytes() for q in quarantined] == [damaged]
        assert_recovered(d)
        if not crashed:
            break
    assert step > 6  # every fsync of the protocol was a crash point


# -- random damage -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pristine_dir(tmp_path_factory):
    d = make_log_dir(tmp_path_factory.mktemp("pristine"))
    make_unclean(d)
    return d


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 9), st.integers(12, 200), st.booleans()),
                min_size=1, max_size=4))
def test_random_damage_with_salvage_keeps_every_intact_batch(tmp_path_factory, pristine_dir, damage):
    """Flips inside the CRC-covered part of batches, or garbage inserted between batches:
    every batch whose bytes were not touched survives, and the result verifies."""
    d = tmp_path_factory.mktemp("rnd") / "logs"
    shutil.copytree(pristine_dir, d)
    part = d / "t-0"
    touched = set()
    edits: dict[int, list] = {}
    for seg_i, batch_i, where, insert in set(damage):  # the same flip twice would undo itself
        edits.setdefault(seg_i, []).append((batch_i, where, insert))
    for seg_i, todo in edits.items():
        seg = segs(part)[seg_i]
        data = bytearray(seg.read_bytes())
        batches = list(iter_batches(bytes(data)))
        # Highest position first, so earlier edits do not move later ones.
        for batch_i, where, insert in sorted(todo, key=lambda e: (-e[0], e[2])):
            b = batches[batch_i]
            if insert:
                data[b.position:b.position] = random.Random(where).randbytes(where)
            else:
                touched.add(bytes(b.buffer))
                data[b.position + 21 + where % (b.size_in_bytes - 21)] ^= 0x5A
        seg.write_bytes(bytes(data))
    original = batch_bytes(pristine_dir / "t-0")
    run(d, salvage=True)
    assert batch_bytes(part) == [b for b in original if b not in touched]
    assert_recovered(d)


# -- bounded work, legacy entries, failures, overrides ------------------------------------------------


@pytest.mark.parametrize("filler", ["random", "zeros"])
def test_big_damaged_region_is_resynchronised_in_bounded_time(tmp_path, filler):
    import time

    d = make_log_dir(tmp_path)
    make_unclean(d)
    part = d / "t-0"
    original = batch_bytes(part)
    seg = segs(part)[2]
    data = seg.read_bytes()
    at = list(iter_batches(data))[4].position
    junk = random.Random(5).randbytes(3 << 20) if filler == "random" else bytes(3 << 20)
    seg.write_bytes(data[:at] + junk + data[at:])
    started = time.monotonic()
    _, report = run(d, salvage=True)
    assert time.monotonic() - started < 30
    [q] = report.partitions[0].quarantined
    assert (q.position, q.length) == (at, len(junk))
    assert (part / q.quarantine_file).read_bytes() == junk
    assert batch_bytes(part) == original
    assert_recovered(d)


def test_legacy_entries_are_resynchronised(tmp_path):
    """A v1 partition (written by a pre-0.11 broker) with garbage between two messages."""
    from plog.formats.legacy import encode_legacy_batch

    d = tmp_path / "logs"
    part = d / "old-0"
    part.mkdir(parents=True)
    msgs = [encode_legacy_batch([(i, TS + i, b"k", b"v" * 50)], magic=1) for i in range(20)]
    garbage = random.Random(9).randbytes(500)
    (part / "00000000000000000000.log").write_bytes(b"".join(msgs[:10]) + garbage + b"".join(msgs[10:]))
    plan, report = run(d, salvage=True)
    [q] = report.partitions[0].quarantined
    assert (q.position, q.length, q.offset_before, q.offset_after) == (sum(map(len, msgs[:10])), 500, 9, 10)
    assert batch_bytes(part) == msgs
    assert report.partitions[0].log_end_offset == 20
    assert_recovered(d)


def test_a_failing_partition_is_reported_and_keeps_its_checkpoints(tmp_path, monkeypatch):
    d = make_log_dir(tmp_path, partitions=2)
    make_unclean(d, recovery_point=0)
    real = recovery.load_log

    def failing(directory, *a, **kw):
        if Path(directory).name == "t-1":
            raise OSError(5, "Input/output error")
        return real(directory, *a, **kw)

    monkeypatch.setattr(recovery, "load_log", failing)
    report = recover(d, jobs=1)
    assert not report.ok
    assert [p.status for p in report.partitions] == ["recovered", "failed"]
    assert "Input/output error" in report.partitions[1].reason
    assert OffsetCheckpointFile(d / "recovery-point-offset-checkpoint").read() == \
        {("t", 0): 180, ("t", 1): 0}
    assert not CleanShutdownFile(d).exists()  # not every partition is recovered


def test_overrides_shape_the_rebuilt_indexes(tmp_path):
    from plog.engine.errors import ConfigError

    d = make_log_dir(tmp_path)
    part = d / "t-0"
    for p in part.glob("*.index"):
        p.unlink()
    with pytest.raises(ConfigError):
        plan_recovery(d, overrides={"no.such.config": "1"})
    recover(d, jobs=1, overrides={"index.interval.bytes": "1000"})
    # 391-byte batches: an entry every third batch instead of every batch.
    assert (part / "00000000000000000000.index").stat().st_size == 3 * 8


# -- what recovery leaves, what it costs, and the housekeeping it does (issue 21) -------------------


def _tear_middle_segment(part: Path, seg_index: int = 2) -> tuple[Path, int]:
    """Cut a closed segment's .log in the middle of a batch (its index now points past the
    end); returns (segment, position of the torn batch)."""
    seg = segs(part)[seg_index]
    victim = list(iter_batches(seg.read_bytes()))[6]
    os.truncate(seg, victim.position + 50)
    return seg, victim.position


@pytest.mark.parametrize("shutdown", ["unclean", "clean"])
def test_damage_a_broker_start_does_not_revalidate_is_named_as_untouched(tmp_path, shutdown):
    """Damage below the recovery point (or anywhere after a clean shutdown) is what a broker's
    start-up never looks at: the plan and the run name it, say why and which command repairs
    it; verify says the same of it; --all --salvage repairs it."""
    d = make_log_dir(tmp_path)
    if shutdown == "unclean":
        make_unclean(d, recovery_point=150)
    part = d / "t-0"
    crc_seg, crc_pos, _, _ = _corrupt_middle(d, seg_index=1)
    torn_seg, torn_pos = _tear_middle_segment(part)
    plan = plan_recovery(d)
    p = plan.partitions[0]
    assert [(u.segment, u.file, u.check, u.position) for u in p.untouched] == [
        (crc_seg.name, crc_seg.name, "crc", crc_pos), (torn_seg.name, torn_seg.name, "torn-tail", torn_pos)]
    why = ("it lies below the recovery point 150" if shutdown == "unclean" else
           "the log directory was shut down cleanly")
    assert all(u.why.startswith(why) and u.remedy.startswith("plog recover --all --salvage") for u in p.untouched)
    assert p.untouched[1].errors == 2  # the torn tail, and the index entries past the end of the .log
    assert plan.has_untouched_damage and p.truncation is None
    # verify judges each damage by the same rule
    found = [f for f in verify_path(str(d)) if f.severity == ERROR]
    assert [(Path(f.path).name, f.check) for f in found] == [
        (crc_seg.name, "crc"), (torn_seg.name, "torn-tail"), (torn_seg.name[:20] + ".index", "index-entry")]
    reason = "the segment lies below the recovery point 150" if shutdown == "unclean" else \
        "the log directory was shut down cleanly"
    assert all(f"a broker would not repair it at start-up ({reason}): plog recover --all --salvage" in f.message
               for f in found[:2])
    assert f"a broker would not rebuild this index at start-up ({reason})" in found[2].message
    _, report = run(d, jobs=1)
    assert report.has_untouched_damage and report.partitions[0].truncations == []
    trusted = segs(part)[:5] if shutdown == "unclean" else segs(part)  # every segment but the revalidated one
    assert report.partitions[0].bytes_checked == sum(s.stat().st_size for s in trusted)
    recover(d, jobs=1, all_segments=True, salvage=True)
    assert_recovered(d)


def test_damage_in_a_revalidated_segment_is_what_verify_says_recovery_truncates(tmp_path):
    d = make_log_dir(tmp_path)
    make_unclean(d, recovery_point=150)
    last = segs(d / "t-0")[-1]
    last.write_bytes(last.read_bytes()[:-30])
    [f] = [f for f in verify_path(str(d)) if f.severity == ERROR]
    assert f.check == "torn-tail" and f.message.endswith("; a broker's start-up recovery truncates the segment here")
    p = plan_recovery(d).partitions[0]
    assert p.untouched == [] and p.truncation.file == last.name


def test_the_plan_says_what_a_truncation_loses_and_what_salvage_keeps(tmp_path):
    d = make_log_dir(tmp_path)
    make_unclean(d)
    seg, pos, length, _ = _corrupt_middle(d)  # batch 15 of 60: offsets 45..47
    p = plan_recovery(d).partitions[0]
    t = p.truncation
    assert (t.position, t.first_offset) == (pos, 45)
    # batches 16..19 of the segment follow the damage: 4 batches of 3 records
    assert (t.loss.records, t.loss.first_offset, t.loss.last_offset, t.loss.damaged_bytes, t.loss.salvage_keeps) \
        == (12, 48, 59, length, 12)
    assert [(a.file, a.loss.records, a.loss.first_offset, a.loss.last_offset, a.loss.damaged_bytes)
            for a in p.deleted_segments if a.loss] == [(f"{b:020d}.log", 30, b, b + 29, 0) for b in (60, 90, 120, 150)]
    _, report = run(d)
    [done] = report.partitions[0].truncations
    assert (done.first_offset, done.loss) == (45, t.loss)


def test_a_torn_tail_loses_only_its_damaged_bytes(tmp_path):
    d = make_log_dir(tmp_path)
    make_unclean(d, recovery_point=150)
    last = segs(d / "t-0")[-1]
    last.write_bytes(last.read_bytes()[:-20])
    for salvage in (False, True):
        t = plan_recovery(d, salvage=salvage).partitions[0].truncation
        assert (t.first_offset, t.loss.records, t.loss.damaged_bytes, t.loss.salvage_keeps) == (177, 0, t.bytes, 0)


def test_the_plan_lists_every_index_the_run_rebuilds(tmp_path):
    """An unclean shutdown with the recovery point at 0 revalidates six segments: their twelve
    indexes are rebuilt, which the plan says (it once listed only the missing one)."""
    d = make_log_dir(tmp_path)
    make_unclean(d)
    os.remove(d / "t-0" / "00000000000000000060.index")
    plan = plan_recovery(d)
    p = plan.partitions[0]
    assert len([a for a in p.index_rebuilds if a.action == "rebuild"]) == 12
    assert [(a.file, a.reason) for a in p.index_rebuilds if a.reason != recovery.REVALIDATED] == [
        ("00000000000000000060.index", "missing")]
    _, report = run(d)
    assert len(report.partitions[0].rebuilt_indexes) == 12


def test_snapshot_deletions_say_which_rule_and_superseded_ones_are_not_work(tmp_path):
    d = make_log_dir(tmp_path)
    part = d / "t-0"
    snap = part / "00000000000000000180.snapshot"
    # A broker stopped at 175 and started again: its snapshot at 175 is superseded by 180.
    shutil.copy(snap, part / "00000000000000000175.snapshot")
    plan = plan_recovery(d)
    [s] = plan.partitions[0].snapshots_deleted
    assert (s.file, s.kind, s.routine) == ("00000000000000000175.snapshot", "stray", True)
    assert s.reason == ("stray: no segment starts at offset 175, and the later snapshot "
                        "00000000000000000180.snapshot supersedes it")
    assert not plan.has_work
    (part / "00000000000000000150.snapshot").write_bytes(b"\x00\x01garbage")
    shutil.copy(snap, part / "00000000000000000999.snapshot")
    plan = plan_recovery(d)
    kinds = {s.file[:20].lstrip("0"): (s.kind, s.routine) for s in plan.partitions[0].snapshots_deleted}
    assert kinds == {"175": ("stray", True), "180": ("stray", True), "999": ("out of range", False),
                     "150": ("unreadable", False)}
    assert plan.has_work
    # (Not run(): rebuilding the producer state from 120 writes the snapshots at 150 and 180
    # again, as Kafka's rebuildProducerState does.)
    assert recover(d, jobs=1).ok
    assert sorted(p.name for p in part.glob("*.snapshot"))[-1] == "00000000000000000180.snapshot"
    assert_recovered(d)


def test_log_start_offset_is_the_first_segment_base_without_a_checkpoint_entry(tmp_path):
    d = make_log_dir(tmp_path)
    part = d / "t-0"
    for suffix in (".log", ".index", ".timeindex"):
        os.remove(part / f"00000000000000000000{suffix}")  # retention deleted the first segment
    OffsetCheckpointFile(d / "log-start-offset-checkpoint").write({})
    p = plan_recovery(d).partitions[0]
    assert (p.log_start_offset, p.log_start_checkpoint, p.new_log_start_offset) == (30, None, 30)
