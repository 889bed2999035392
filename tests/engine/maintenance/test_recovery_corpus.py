"""``engine.recovery`` on every partition of the real Kafka log dirs in the shared corpus.

Each partition is copied (with its log dir's checkpoints and ``meta.properties``) and damaged
three ways, at a point chosen deterministically from its own batches:

* **A** (unclean shutdown, the checkpointed recovery point): a torn last batch, leftover
  ``.deleted``/``.cleaned`` files, deleted indexes and a zero-filled one;
* **B** (unclean, recovery point 0): a corrupt batch in the middle, recovered as Kafka does;
* **C** the same corruption plus a garbage tail, recovered with ``salvage``.

Every time the plan predicts the truncation and salvage exactly, every batch before the
damage survives byte for byte (with salvage every valid batch after it too, and the
quarantine file holds exactly the damaged batch), ``plog verify`` finds no error, and a
second plan has nothing to do. Partitions recovery skips (the KRaft metadata log) and a
partition without batches are asserted as such, not silently passed over.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from conftest import CORPUS, corpus_files
from plog.engine.storage.checkpoints import CleanShutdownFile, OffsetCheckpointFile
from plog.engine.storage.discovery import log_dirs
from plog.engine.maintenance.recovery import plan_recovery, recover
from plog.engine.inspect.verify import ERROR, verify_path
from plog.formats.batches import iter_batches

LOG_DIR_FILES = ("meta.properties", "recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
                 "replication-offset-checkpoint", "cleaner-offset-checkpoint", ".plog-topics.json")


def corpus_partitions() -> list[Path]:
    """Every partition folder of every corpus log dir, empty ones included."""
    if not CORPUS.is_dir():
        return []
    return sorted(Path(p.path) for d in log_dirs(str(CORPUS)) for p in d.partitions)


PARTITIONS = corpus_partitions()


def _id(p: Path) -> str:
    return str(p.relative_to(CORPUS))


def test_the_corpus_partitions_are_all_listed(corpus):
    assert len(PARTITIONS) > 50
    # Every segment file of the corpus lies in a listed partition.
    holders = {p.parent for p in corpus_files(lambda n: n.endswith(".log") and n[:20].isdigit())}
    assert holders <= set(PARTITIONS)


def copy_partition(src: Path, root: Path) -> Path:
    """``root/<log dir>/<partition>`` with the log dir's own files; everything writable
    (the corpus is read-only). Returns the copied log dir."""
    log_dir = root / src.parent.name
    log_dir.mkdir(parents=True)
    for name in LOG_DIR_FILES:
        if (src.parent / name).exists():
            shutil.copyfile(src.parent / name, log_dir / name)
    shutil.copytree(src, log_dir / src.name, copy_function=shutil.copyfile)
    for p in [log_dir, *log_dir.rglob("*")]:
        p.chmod(p.stat().st_mode | stat.S_IWUSR)
    return log_dir


def segments(part: Path) -> list[Path]:
    return sorted(part.glob("*.log"))


def batches(part: Path) -> list[tuple[str, int, bytes]]:
    out = []
    for seg in segments(part):
        for b in iter_batches(seg.read_bytes()):
            out.append((seg.name, b.position, bytes(b.buffer)))
    return out


def set_recovery_point(log_dir: Path, part: Path, offset: int | None) -> None:
    cp = OffsetCheckpointFile(log_dir / "recovery-point-offset-checkpoint")
    entries = cp.read() if cp.exists() else {}
    topic, _, partition = part.name.rpartition("-")
    if offset is not None:
        entries[(topic, int(partition))] = offset
    cp.write(entries)


def flip_last_byte(seg: Path, position: int, size: int) -> bytes:
    """Corrupt the batch at ``position`` (its last byte is inside the CRC); returns its bytes."""
    data = bytearray(seg.read_bytes())
    data[position + size - 1] ^= 0xFF
    seg.write_bytes(bytes(data))
    return bytes(data[position:position + size])


def no_errors(log_dir: Path) -> None:
    found = [f.format_text() for f in verify_path(str(log_dir)) if f.severity == ERROR]
    assert found == []


def recovered_and_settled(log_dir: Path, plan, report) -> None:
    assert report.ok, report.to_dict()
    [p], [r] = plan.partitions, report.partitions
    planned = [(p.truncation.file, p.truncation.position, p.truncation.bytes)] if p.truncation else []
    assert [(t.file, t.position, t.bytes) for t in r.truncations] == planned
    assert [(q.file, q.position, q.length) for q in r.quarantined] == [(q.file, q.position, q.length)
                                                                       for q in p.salvage]
    assert (r.log_end_offset, r.log_start_offset) == (p.log_end_offset, p.new_log_start_offset)
    no_errors(log_dir)
    assert not plan_recovery(log_dir).has_work
    assert CleanShutdownFile(log_dir).exists()


def victim_of(original: list[tuple[str, int, bytes]]) -> tuple[str, int, bytes]:
    """The damage point: the middle batch of the middle segment that holds batches."""
    names = sorted({n for n, _, _ in original})
    seg = names[len(names) // 2]
    in_seg = [b for b in original if b[0] == seg]
    return in_seg[len(in_seg) // 2]


@pytest.mark.parametrize("src", PARTITIONS, ids=_id)
def test_recover_a_damaged_copy_of_every_corpus_partition(tmp_path, src):
    if src.name.startswith("__cluster_metadata-"):
        log_dir = copy_partition(src, tmp_path / "skip")
        before = {p.name: p.read_bytes() for p in (log_dir / src.name).iterdir()}
        report = recover(log_dir / src.name, jobs=1)
        assert report.partitions[0].status == "skipped"
        assert {p.name: p.read_bytes() for p in (log_dir / src.name).iterdir()} == before
        return
    original = batches(src)
    if not original:
        # Nothing to tear or corrupt: recovery must still succeed and keep the empty log.
        log_dir = copy_partition(src, tmp_path / "empty")
        set_recovery_point(log_dir, log_dir / src.name, 0)
        plan = plan_recovery(log_dir)
        report = recover(log_dir, jobs=1)
        assert plan.partitions[0].truncation is None and batches(log_dir / src.name) == []
        recovered_and_settled(log_dir, plan, report)
        return
    _scenario_a(tmp_path / "a", src, original)
    _scenario_b(tmp_path / "b", src, original)
    _scenario_c(tmp_path / "c", src, original)


def _scenario_a(root: Path, src: Path, original) -> None:
    """Unclean shutdown: torn last batch, temp files, missing and zero-filled indexes."""
    log_dir = copy_partition(src, root)
    part = log_dir / src.name
    segs = segments(part)
    last_name, last_pos, last_bytes = original[-1]
    seg = part / last_name
    cut = last_pos + len(last_bytes) // 2
    with open(seg, "r+b") as f:
        f.truncate(cut)
    first = segs[0].name[:20]
    (part / f"{first}.log.deleted").write_bytes(b"an old segment")
    (part / f"{int(first) + 1:020d}.log.cleaned").write_bytes(original[0][2])
    if len(segs) > 1:
        index = part / f"{segs[0].name[:20]}.index"
        index.unlink(missing_ok=True)
        tindex = part / f"{segs[-2].name[:20]}.timeindex"
        if tindex.exists():
            tindex.write_bytes(tindex.read_bytes() + bytes(12 * 50))
    # The recovery point of the log dir's checkpoint, but no clean-shutdown marker.
    set_recovery_point(log_dir, part, None)
    plan = plan_recovery(log_dir)
    p = plan.partitions[0]
    assert {a.file for a in p.temp_files} == {f"{first}.log.deleted", f"{int(first) + 1:020d}.log.cleaned"}
    if last_name in {r.file for r in p.revalidate}:
        assert (p.truncation.file, p.truncation.position, p.truncation.bytes) == (last_name, last_pos, cut - last_pos)
        expected = original[:-1]
    else:
        # The torn segment lies below the checkpointed recovery point: Kafka trusts it.
        assert p.truncation is None
        expected = batches(part)
    report = recover(log_dir, jobs=1)
    recovered_and_settled(log_dir, plan, report)
    assert batches(part) == expected
    assert not [n for n in os.listdir(part) if n.endswith((".deleted", ".cleaned", ".swap"))]


def _scenario_b(root: Path, src: Path, original) -> None:
    """A corrupt batch in the middle, recovered from offset 0 as Kafka does."""
    log_dir = copy_partition(src, root)
    part = log_dir / src.name
    name, pos, data = victim_of(original)
    flip_last_byte(part / name, pos, len(data))
    set_recovery_point(log_dir, part, 0)
    plan = plan_recovery(log_dir)
    p = plan.partitions[0]
    assert (p.truncation.file, p.truncation.position, p.truncation.kind) == (name, pos, "crc mismatch")
    later = {s.name for s in segments(part) if s.name > name}
    kept = [b for b in original if (b[0], b[1]) < (name, pos)]
    if p.log_end_offset < p.log_start_offset or p.empty_segment_created:
        # The log now ends below its checkpointed log start offset (a topic whose records
        # were deleted up to there): Kafka deletes every segment and starts empty there.
        assert p.empty_segment_created and p.log_end_offset == p.log_start_offset
        later, kept = {s.name for s in segments(part)}, []
    assert {a.file for a in p.deleted_segments if a.file.endswith(".log")} == later
    report = recover(log_dir, jobs=1)
    recovered_and_settled(log_dir, plan, report)
    assert batches(part) == kept


def _scenario_c(root: Path, src: Path, original) -> None:
    """The same corruption plus a garbage tail, with salvage."""
    log_dir = copy_partition(src, root)
    part = log_dir / src.name
    name, pos, data = victim_of(original)
    damaged = flip_last_byte(part / name, pos, len(data))
    last = segments(part)[-1]
    garbage = bytes(range(256))[::-1] * 3
    with open(last, "ab") as f:
        f.write(garbage)
    set_recovery_point(log_dir, part, 0)
    plan = plan_recovery(log_dir, salvage=True)
    p = plan.partitions[0]
    report = recover(log_dir, jobs=1, salvage=True)
    recovered_and_settled(log_dir, plan, report)
    valid_after = any((b[0], b[1]) > (name, pos) for b in original)
    if valid_after:
        [q] = report.partitions[0].quarantined
        assert (q.file, q.position, q.length, q.kind) == (name, pos, len(data), "crc mismatch")
        assert (part / q.quarantine_file).read_bytes() == damaged
        assert (p.truncation.file, p.truncation.bytes) == (last.name, len(garbage))
        # Positions after the hole moved (the segment was rewritten without it): compare bytes.
        assert [b for _, _, b in batches(part)] == [b for n, q, b in original if (n, q) != (name, pos)]
    else:
        # The corrupt batch is the last one: with the garbage it is a damaged tail, truncated.
        assert report.partitions[0].quarantined == []
        assert (p.truncation.file, p.truncation.position) == (name, pos)
        assert batches(part) == original[:-1]
