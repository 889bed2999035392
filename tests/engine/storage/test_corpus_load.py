"""Real broker partitions, opened on copies: offsets, segments, and rebuilt indexes.

* A clean open finds the log end offset, log start offset and segment list the files imply.
* A full recovery rebuilds each `.index`/`.timeindex` entry for entry as Kafka's recovery
  rule (§8.5) says, recomputed here independently from the batch headers.
* Every entry of Kafka's original `.index` resolves, through the rebuilt index, to the
  batch it pointed at.
"""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import pytest

from conftest import CORPUS
from plog.engine.storage.log_config import LogConfig
from plog.engine.storage.log import Log
from plog.formats.batches import iter_batches
from plog.formats.checkpoints import parse_offset_checkpoint


def partition_dirs() -> list[Path]:
    if not CORPUS.is_dir():
        return []
    dirs = {p.parent for p in CORPUS.rglob("*.log") if "vectors" not in p.parts}
    return sorted(dirs)


PARTITIONS = partition_dirs()


def _ids(p: Path) -> str:
    return str(p.relative_to(CORPUS))


def _copy(src: Path, dst: Path) -> Path:
    target = dst / src.name
    shutil.copytree(src, target)
    return target


def _checkpointed_log_start(part: Path) -> int:
    cp = part.parent / "log-start-offset-checkpoint"
    if not cp.exists():
        return 0
    topic, _, partition = part.name.rpartition("-")
    return parse_offset_checkpoint(cp.read_text()).get((topic, int(partition)), 0)


def _recovery_oracle(data: bytes, base: int, interval: int = 4096):
    """§8.5 worked through from batch headers: (index entries, time index entries)."""
    index, times = [], []
    valid = last_entry = 0
    max_ts, max_off = -1, base
    for b in iter_batches(data):
        if b.max_timestamp > max_ts:
            max_ts, max_off = b.max_timestamp, b.last_offset
        if valid - last_entry > interval:
            index.append((b.last_offset, valid))
            if max_ts > (times[-1][0] if times else -1):
                times.append((max_ts, max_off))
            last_entry = valid
        valid += b.size_in_bytes
    if max_ts > (times[-1][0] if times else -1):
        times.append((max_ts, max_off))
    return index, times


@pytest.mark.parametrize("part", PARTITIONS, ids=_ids)
def test_clean_open_finds_what_the_files_imply(tmp_path, part):
    copy = _copy(part, tmp_path)
    logs = sorted(copy.glob("*.log"))
    last_batches = list(iter_batches(logs[-1].read_bytes()))
    expected_end = last_batches[-1].next_offset if last_batches else int(logs[-1].name[:20])
    log = Log.open(copy, LogConfig(), log_start_offset=_checkpointed_log_start(part))
    try:
        assert log.segments.base_offsets == [int(p.name[:20]) for p in logs]
        assert log.log_end_offset == expected_end
        assert log.log_start_offset == max(_checkpointed_log_start(part), int(logs[0].name[:20]))
        # After a clean shutdown only segments without an offset index are rebuilt (Kafka's
        # sanity check; the corpus lacks some active segments' preallocated indexes).
        missing = sorted(int(p.name[:20]) for p in logs if not (part / f"{p.name[:20]}.index").exists())
        assert [r.base_offset for r in log.load_report.recovered_segments] == missing
    finally:
        log.close()


@pytest.mark.parametrize("part", PARTITIONS, ids=_ids)
def test_full_recovery_rebuilds_indexes_by_kafkas_rule(tmp_path, part):
    copy = _copy(part, tmp_path)
    originals = {p.name: p.read_bytes() for p in copy.glob("*.index")}
    log = Log.open(copy, LogConfig(), log_start_offset=_checkpointed_log_start(part), recovery_point=0,
                   had_clean_shutdown=False)
    try:
        report = log.load_report
        assert report.truncated_bytes == 0
        assert len(report.recovered_segments) == len(log.segments)
        for seg in log.segments:
            data = seg.log_path.read_bytes()
            index, times = _recovery_oracle(data, seg.base_offset)
            got_index = [(seg.offset_index.entry(i).offset, seg.offset_index.entry(i).position)
                         for i in range(seg.offset_index.entries)]
            got_times = [(seg.time_index.entry(i).timestamp, seg.time_index.entry(i).offset)
                         for i in range(seg.time_index.entries)]
            assert got_index == index
            if seg is not log.active_segment:
                assert got_times == times
            original = originals.get(seg.offset_index.path.name, b"")
            for i in range(len(original) // 8):
                rel, pos = struct.unpack_from(">ii", original, i * 8)
                if i > 0 and rel == 0:
                    break  # zero-filled preallocated tail
                # Kafka's lookup through the original entry: scan from its position to the
                # first batch holding the offset. (A follower indexes whole fetched chunks,
                # so the entry's position may be a few batches before that batch.)
                offset = seg.base_offset + rel
                via_original = next(b.position for b in iter_batches(data, pos) if b.last_offset >= offset)
                found = seg.translate_offset(offset)
                assert found is not None and found.position == via_original, (offset, pos)
    finally:
        log.close()
