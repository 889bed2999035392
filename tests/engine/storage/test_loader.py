"""The loader (``LogLoader.load``, kafka-format.md §13) on its own: each numbered pass of
``plog.engine.storage.loader``, on partition folders built with ``Log`` and then changed on
disk the way an interrupted broker leaves them. ``load`` returns what it loaded; nothing
here goes through ``Log.open``.
"""

from __future__ import annotations

import ast
import inspect
import os
import shutil
from pathlib import Path

import pytest

from plog.engine.storage import loader
from plog.engine.storage.file_names import file_name
from plog.engine.storage.log import Log
from plog.engine.storage.log_config import LogConfig
from plog.formats.batches import iter_batches
from plog.formats.record_batch import encode_batch

TS = 1_700_000_000_000
CONFIG = LogConfig(segment_bytes=4000, index_interval_bytes=500, fsync_on_produce=False)
PER_BATCH = 4


def build(directory: Path, batches: int = 30) -> list[int]:
    """A partition of several segments (``batches`` batches of 4 records); returns the
    segment base offsets."""
    with Log.open(directory, CONFIG, time_source=lambda: TS) as log:
        for k in range(batches):
            records = [(i, TS + 10 * k + i, b"k%d" % i, b"v" * 150) for i in range(PER_BATCH)]
            log.append_as_leader(encode_batch(records))
        return list(log.segments.base_offsets)


def listing(directory: Path) -> dict[str, int]:
    return {name: os.path.getsize(directory / name) for name in sorted(os.listdir(directory))}


def load(directory: Path, **kw) -> loader.LoadedLog:
    return loader.load(directory, CONFIG, time_source=lambda: TS, **kw)


@pytest.fixture
def part(tmp_path) -> Path:
    d = tmp_path / "t-0"
    build(d)
    return d


def close(loaded: loader.LoadedLog) -> None:
    for seg in loaded.segments:
        seg.close()


# -- passes 1-4: temporary files -----------------------------------------------------------


def test_deleted_and_cleaned_files_and_an_interrupted_split_go(part):
    bases = sorted({int(n[:20]) for n in os.listdir(part) if n.endswith(".log")})
    second = bases[1]
    for name in (file_name(0, ".log.deleted"), file_name(second, ".log.cleaned"),
                 file_name(second, ".index.swap"), file_name(0, ".checkpoint.deleted")):
        (part / name).write_bytes(b"x")
    before = listing(part)
    actions, bounds = loader.temp_file_actions(part, sorted(before))
    assert bounds is None
    assert [(a.name, a.action, a.why) for a in actions] == [
        (file_name(0, ".log.deleted"), "delete", "deleted"),
        (file_name(second, ".index.swap"), "delete", "split"),  # at or above the smallest .cleaned
        (file_name(second, ".log.cleaned"), "delete", "cleaned"),
    ]
    loaded = load(part)
    assert set(before) - set(listing(part)) == {a.name for a in actions}
    assert file_name(0, ".checkpoint.deleted") in listing(part)  # the Raft layer's, not the loader's
    assert loaded.report.deleted_files == [a.name for a in actions]
    close(loaded)


def test_a_swap_replaces_the_segments_it_covers(part, tmp_path):
    bases = sorted({int(n[:20]) for n in os.listdir(part) if n.endswith(".log")})
    first, second, third = bases[:3]
    # A compaction of the first two segments into one, interrupted before its swap: the
    # .swap holds both segments' batches.
    merged = (part / file_name(first, ".log")).read_bytes() + (part / file_name(second, ".log")).read_bytes()
    (part / file_name(first, ".log.swap")).write_bytes(merged)
    actions, bounds = loader.temp_file_actions(part, sorted(os.listdir(part)))
    assert bounds == (first, third)
    replaced = sorted(a.name for a in actions if a.why == "replaced")
    assert replaced == sorted(n for n in os.listdir(part)
                              if not n.endswith(".swap") and n[:20].isdigit() and first <= int(n[:20]) < third)
    assert actions[-1] == loader.TempFileAction(file_name(first, ".log.swap"), "rename", "swap",
                                                file_name(first, ".log"))
    loaded = load(part)
    assert loaded.segments.base_offsets[:2] == [first, third]
    assert (part / file_name(first, ".log")).read_bytes() == merged
    assert not (part / file_name(second, ".log")).exists()
    assert loaded.log_end_offset == 30 * PER_BATCH
    close(loaded)


# -- pass 5: segments, orphan indexes ---------------------------------------------------------


def test_orphan_indexes_go_and_a_segment_without_offset_index_is_recovered(part):
    bases = sorted({int(n[:20]) for n in os.listdir(part) if n.endswith(".log")})
    (part / file_name(9999, ".index")).write_bytes(b"")
    (part / file_name(9999, ".timeindex")).write_bytes(b"")
    os.remove(part / file_name(bases[1], ".index"))
    names = sorted(os.listdir(part))
    assert loader.orphan_index_files(names) == [file_name(9999, ".index"), file_name(9999, ".timeindex")]
    assert loader.log_file_names(names) == [file_name(b, ".log") for b in bases]
    loaded = load(part)  # a clean shutdown: only the segment without its index is recovered
    assert not (part / file_name(9999, ".index")).exists()
    assert [r.base_offset for r in loaded.report.recovered_segments] == [bases[1]]
    assert (part / file_name(bases[1], ".index")).exists()
    assert f"{file_name(bases[1], '.log')}: no offset index, will rebuild" in loaded.report.actions
    close(loaded)


# -- pass 6: recovery from the recovery point -------------------------------------------------


def test_an_unclean_shutdown_recovers_from_the_segment_holding_the_recovery_point(part):
    bases = sorted({int(n[:20]) for n in os.listdir(part) if n.endswith(".log")})
    recovery_point = bases[2] + 1
    loaded = load(part, had_clean_shutdown=False, recovery_point=recovery_point)
    assert [r.base_offset for r in loaded.report.recovered_segments] == bases[2:]
    assert loaded.recovery_point == recovery_point  # min(checkpoint, log end offset)
    close(loaded)
    loaded = load(part, had_clean_shutdown=True, recovery_point=recovery_point)
    assert loaded.report.recovered_segments == []
    assert loaded.recovery_point == loaded.log_end_offset == 30 * PER_BATCH
    close(loaded)


def test_damage_truncates_its_segment_and_deletes_the_later_ones(part):
    bases = sorted({int(n[:20]) for n in os.listdir(part) if n.endswith(".log")})
    damaged = part / file_name(bases[1], ".log")
    size = os.path.getsize(damaged)
    positions = [b.position for b in iter_batches(damaged.read_bytes())]
    hit = max(p for p in positions if p <= 1500)  # the batch the flipped byte is in
    with open(damaged, "r+b") as f:
        f.seek(1500)
        byte = f.read(1)
        f.seek(1500)
        f.write(bytes([byte[0] ^ 0x55]))
    loaded = load(part, had_clean_shutdown=False, recovery_point=0)
    recovered = loaded.report.recovered_segments
    assert [r.base_offset for r in recovered] == bases[:2]  # stops at the truncation
    assert (recovered[1].valid_bytes, recovered[1].truncated_bytes) == (hit, size - hit)
    assert 0 < hit == os.path.getsize(damaged)
    assert loaded.segments.base_offsets == bases[:2]
    assert all(not (part / file_name(b, ".log")).exists() for b in bases[2:])
    assert loaded.log_end_offset == recovered[1].next_offset == loaded.segments.last.read_next_offset()
    close(loaded)


# -- passes 7-11: offsets -----------------------------------------------------------------------


def test_a_log_end_below_the_log_start_deletes_every_segment(part):
    loaded = load(part, log_start_offset=10_000)
    assert loaded.segments.base_offsets == [10_000]
    assert (loaded.log_start_offset, loaded.log_end_offset) == (10_000, 10_000)
    assert sorted(n for n in os.listdir(part) if n.endswith(".log")) == [file_name(10_000, ".log")]
    close(loaded)


def test_an_empty_folder_gets_an_empty_segment_at_the_log_start(tmp_path):
    loaded = load(tmp_path / "t-0", log_start_offset=42)
    assert loaded.segments.base_offsets == [42]
    assert (loaded.log_start_offset, loaded.log_end_offset, loaded.recovery_point) == (42, 42, 42)
    assert loaded.report.actions == ["created an empty segment at 42"]
    close(loaded)


def test_the_log_start_is_the_larger_of_the_checkpoint_and_the_first_base(part):
    bases = sorted({int(n[:20]) for n in os.listdir(part) if n.endswith(".log")})
    for name in os.listdir(part):
        if name[:20].isdigit() and int(name[:20]) == bases[0]:
            os.remove(part / name)
    loaded = load(part, log_start_offset=3)
    assert loaded.log_start_offset == bases[1]
    close(loaded)
    loaded = load(part, log_start_offset=bases[1] + 5)
    assert loaded.log_start_offset == bases[1] + 5
    assert loaded.report.log_start_offset == bases[1] + 5
    close(loaded)


def test_the_active_segment_gets_its_index_room_back(part):
    loaded = load(part)
    active = loaded.segments.last
    assert active.offset_index.length == CONFIG.segment_index_bytes
    assert all(s.offset_index.length == s.offset_index.entries * 8 for s in list(loaded.segments)[:-1])
    close(loaded)


# -- read-only, and what Log is built from -----------------------------------------------------


def test_read_only_changes_nothing(part, tmp_path):
    (part / file_name(0, ".log.deleted")).write_bytes(b"x")
    (part / file_name(9999, ".index")).write_bytes(b"")
    before = listing(part)
    snapshot = tmp_path / "copy"
    shutil.copytree(part, snapshot)
    loaded = load(part, writable=False, had_clean_shutdown=False)
    assert loaded.producer_state is None and loaded.report.recovered_segments == []
    assert loaded.log_end_offset == 30 * PER_BATCH
    close(loaded)
    assert listing(part) == before
    for name in before:
        assert (part / name).read_bytes() == (snapshot / name).read_bytes()


def test_log_is_built_from_what_the_loader_loaded(part):
    loaded = load(part, had_clean_shutdown=False, recovery_point=7)
    log = Log.from_loaded(loaded)
    assert log.segments is loaded.segments and log.load_report is loaded.report
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark, log.recovery_point) == \
        (loaded.log_start_offset, loaded.log_end_offset, loaded.log_end_offset, 7)
    log.close()


def test_the_loader_does_not_import_the_log():
    tree = ast.parse(inspect.getsource(loader))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {a.name for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names}
    assert "plog.engine.storage.log" not in imported
