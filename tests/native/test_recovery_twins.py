"""Segment recovery's native walk (``plog._native.RecoveryWalk``, engine/storage/recovery_walk.py)
against the reference loops (``LogSegment._recover_batches``, the plan's ``kafka_scan``).

``plog recover`` runs on two copies of the same log directory, one per path (the walk is
switched with ``recovery_walk.enabled``, whatever ``PLOG_NATIVE`` chose), and the two must
leave byte-identical directories (every file: segments, indexes, transaction indexes,
producer snapshots, leader-epoch and offset checkpoints, quarantine files) and identical
reports; ``plan_recovery`` (the dry run) must give identical plans. Inputs: every partition
of the corpus, and generated partitions (torn tails, a corrupt batch mid-segment, offsets
going backwards or past 31 bits, idempotent and transactional producers with COMMIT/ABORT
markers, epochs going back, compressed batches, v0/v1 segments, a full index), and random
mutations of a generated segment (only plog's typed outcomes, identical on both paths).
"""

from __future__ import annotations

import os
import random
import shutil
import stat
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from native_twins import native_module  # noqa: E402,F401

from conftest import CORPUS  # noqa: E402
from plog.engine.maintenance.recovery import plan_recovery, recover  # noqa: E402
from plog.engine.maintenance.segment_recovery import kafka_scan  # noqa: E402
from plog.engine.errors import EngineError  # noqa: E402
from plog.engine.storage.discovery import log_dirs  # noqa: E402
from plog.engine.storage.leader_epoch_cache import LeaderEpochCache  # noqa: E402
from plog.engine.storage.producer_state import ProducerStateManager  # noqa: E402
from plog.engine.storage import recovery_walk  # noqa: E402
from plog.engine.storage.segment import LogSegment  # noqa: E402
from plog.formats import compression  # noqa: E402
from plog.formats.errors import FormatError  # noqa: E402
from plog.formats.control import ControlRecordType, encode_control_key, encode_end_txn_marker  # noqa: E402
from plog.formats.legacy import encode_legacy_batch  # noqa: E402
from plog.formats.record_batch import encode_batch  # noqa: E402

TS = 1_700_000_000_000
#: Small indexes and intervals: many entries per segment, and a full index within reach.
OVERRIDES = {"index.interval.bytes": "150"}


# -- running both paths ---------------------------------------------------------------------------------


def tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` by relative path, with its bytes."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _plain(value, root: str):
    """A report's dict with the copy's own path replaced (the two copies live apart)."""
    if isinstance(value, dict):
        return {k: _plain(v, root) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v, root) for v in value]
    if isinstance(value, str):
        return value.replace(root, "<dir>")
    return value


def run_path(module, src: Path, work: Path, native: bool, **kw) -> tuple[dict, dict, dict]:
    """Plan and recover a copy of ``src`` on one path: (plan, report, files after)."""
    copy = work / ("native" if native else "reference")
    shutil.copytree(src, copy)
    walks = []

    def counted(real):
        def run(*args, **kwargs):
            walks.append(real.__name__)
            return real(*args, **kwargs)
        return run

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(recovery_walk, "enabled", native)
        for name in ("recover_segment", "scan_prefix"):
            mp.setattr(recovery_walk, name, counted(getattr(recovery_walk, name)))
        plan = plan_recovery(copy, **kw).to_dict()
        report = recover(copy, jobs=1, **kw).to_dict()
    revalidated = any(p.get("revalidated") for d in report["log_dirs"] for p in d["partitions"])
    # The native walk ran where there was something to walk, and only on its path.
    assert bool(walks) == (native and revalidated) or (native and not revalidated)
    return _plain(plan, str(copy)), _plain(report, str(copy)), tree(copy)


def both_paths_agree(module, src: Path, work: Path, **kw) -> dict:
    """Recover ``src`` on both paths; assert the same plan, report and files; return the report."""
    reference = run_path(module, src, work, False, **kw)
    native = run_path(module, src, work, True, **kw)
    assert native[0] == reference[0], "plans differ"
    assert native[1] == reference[1], "reports differ"
    assert native[2].keys() == reference[2].keys(), "different files"
    for name in reference[2]:
        assert native[2][name] == reference[2][name], f"{name} differs"
    return reference[1]


# -- the corpus -------------------------------------------------------------------------------------------

LOG_DIR_FILES = ("meta.properties", "recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
                 "replication-offset-checkpoint", "cleaner-offset-checkpoint", ".plog-topics.json")
PARTITIONS = sorted(Path(p.path) for d in log_dirs(str(CORPUS)) for p in d.partitions) if CORPUS.is_dir() else []


def _id(p: Path) -> str:
    return str(p.relative_to(CORPUS))


def copy_partition(src: Path, root: Path) -> Path:
    """``root/<log dir>/<partition>`` with its log dir's own files, writable; returns the log dir."""
    log_dir = root / src.parent.name
    log_dir.mkdir(parents=True)
    for name in LOG_DIR_FILES:
        if (src.parent / name).exists():
            shutil.copyfile(src.parent / name, log_dir / name)
    shutil.copytree(src, log_dir / src.name, copy_function=shutil.copyfile)
    for p in [log_dir, *log_dir.rglob("*")]:
        p.chmod(p.stat().st_mode | stat.S_IWUSR)
    return log_dir


def test_the_corpus_is_there(corpus):
    assert len(PARTITIONS) > 50


@pytest.mark.parametrize("src", PARTITIONS, ids=_id)
def test_corpus_partitions_recover_identically(native_module, src, tmp_path):
    log_dir = copy_partition(src, tmp_path / "src")
    both_paths_agree(native_module, log_dir, tmp_path / "run", all_segments=True)


# -- generated partitions ---------------------------------------------------------------------------------


def data(offset: int, n: int = 3, ts: int = TS, size: int = 60) -> list[tuple]:
    return [(offset + i, ts + i, b"k%d" % (offset + i), bytes([offset % 251]) * size) for i in range(n)]


def marker(offset: int, kind: ControlRecordType, producer_id: int, epoch: int, coordinator_epoch: int = 0) -> bytes:
    return encode_batch([(offset, TS + offset, encode_control_key(kind), encode_end_txn_marker(coordinator_epoch))],
                        base_offset=offset, producer_id=producer_id, producer_epoch=epoch, is_transactional=True,
                        is_control=True)


def producers_segment(start: int) -> tuple[list[bytes], int]:
    """Idempotent and transactional producers interleaved, markers, an epoch bump and an
    epoch going back, plain batches, leader epochs moving up (and back), compressed
    batches. Returns the batches and the next offset."""
    out, o = [], start
    seq = {7: 0, 8: 0, 9: 0}
    codecs = [compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD]

    def add(batch: bytes, n: int) -> None:
        nonlocal o
        out.append(batch)
        o += n

    for i in range(12):
        add(encode_batch(data(o), base_offset=o, partition_leader_epoch=i // 4), 3)
        pid = 7 + i % 3
        epoch = 1 if i < 6 else 2
        if pid == 9 and i == 11:
            epoch = 0  # going back: the reference logs it and takes it
        add(encode_batch(data(o, 2), base_offset=o, producer_id=pid, producer_epoch=epoch,
                         base_sequence=seq[pid] if epoch == 1 else 0, partition_leader_epoch=1), 2)
        seq[pid] += 2
        if i % 4 == 1:  # a transaction of producer 20, committed or aborted later
            add(encode_batch(data(o, 2), base_offset=o, producer_id=20, producer_epoch=3, base_sequence=i,
                             is_transactional=True, partition_leader_epoch=2), 2)
            add(encode_batch(data(o, 1), base_offset=o, producer_id=21, producer_epoch=0, base_sequence=i,
                             is_transactional=True, partition_leader_epoch=2), 1)
        if i % 4 == 3:
            add(marker(o, ControlRecordType.ABORT if i % 8 == 3 else ControlRecordType.COMMIT, 20, 3), 1)
            add(marker(o, ControlRecordType.COMMIT, 21, 0), 1)
            add(marker(o, ControlRecordType.ABORT, 22, 0), 1)  # no transaction open: nothing completes
        codec = codecs[i % len(codecs)]
        add(encode_batch(data(o, 4), base_offset=o, compression_codec=codec, producer_id=30, producer_epoch=0,
                         base_sequence=i * 4, partition_leader_epoch=1), 4)
    return out, o


def legacy_segment(start: int) -> tuple[list[bytes], int]:
    out, o = [], start
    for i in range(10):
        magic = 0 if i < 4 else 1
        codec = compression.GZIP if i % 3 == 2 else 0
        out.append(encode_legacy_batch(data(o, 3), magic=magic, compression_codec=codec))
        o += 3
    return out, o


def write_partition(root: Path, segments: list[tuple[int, list[bytes]]], name: str = "gen-0") -> Path:
    """A crashed log dir holding one partition with these segments (base offset, batches)."""
    log_dir = root / "logs"
    part = log_dir / name
    part.mkdir(parents=True)
    (log_dir / "meta.properties").write_text("version=1\nnode.id=1\ncluster.id=plog-twins\n")
    for base, batches in segments:
        (part / f"{base:020d}.log").write_bytes(b"".join(batches))
    return log_dir


def generated(root: Path) -> Path:
    """Three segments: plain v2 with producers and transactions, legacy, producers again."""
    a, o = producers_segment(0)
    b, o2 = legacy_segment(o)
    c, _ = producers_segment(o2)
    return write_partition(root, [(0, a), (o, b), (o2, c)])


def _log(log_dir: Path, i: int) -> Path:
    return sorted((log_dir / "gen-0").glob("*.log"))[i]


def test_generated_partition_recovers_identically(native_module, tmp_path):
    log_dir = generated(tmp_path / "src")
    report = both_paths_agree(native_module, log_dir, tmp_path / "run", all_segments=True, overrides=OVERRIDES)
    part = report["log_dirs"][0]["partitions"][0]
    assert part["status"] == "recovered" and not part["truncations"]
    assert len(part["revalidated"]) == 3
    files = tree(tmp_path / "run" / "native")
    assert any(n.endswith(".txnindex") and files[n] for n in files)  # the aborts were indexed
    assert any(n.endswith(".snapshot") and files[n] for n in files)


def idempotent_segment(start: int, epoch: int) -> tuple[list[bytes], int]:
    """Idempotent producers only (no marker, no epoch going back): a walk the plan makes
    of it is whole, so the load may apply it."""
    out, o = [], start
    for i in range(15):
        out.append(encode_batch(data(o, 2), base_offset=o, producer_id=40 + i % 3, producer_epoch=epoch,
                                base_sequence=o, is_transactional=i % 3 == 2, partition_leader_epoch=epoch + i // 5))
        o += 2
    return out, o


def test_walks_kept_from_the_plan_apply_only_when_they_hold(native_module, tmp_path, monkeypatch):
    """The plan's walk of a segment is applied by the load (one pass) unless the producer
    state it meets already holds one of its producers (then the load walks again): both
    give the reference's files."""
    a, o = idempotent_segment(0, 1)
    b, o2 = idempotent_segment(o, 2)
    log_dir = write_partition(tmp_path / "src", [(0, a), (o, b), (o2, [encode_batch(data(o2), base_offset=o2)])])
    outcomes = []
    real = recovery_walk.Prevalidated.applies

    def applies(self, *args):
        outcomes.append(real(self, *args))
        return outcomes[-1]

    monkeypatch.setattr(recovery_walk.Prevalidated, "applies", applies)
    both_paths_agree(native_module, log_dir, tmp_path / "run", all_segments=True, overrides=OVERRIDES)
    assert True in outcomes and False in outcomes


@pytest.mark.parametrize("damage", ["torn", "crc", "garbage", "backwards", "overflow", "legacy-crc"])
def test_damaged_generated_partition_recovers_identically(native_module, tmp_path, damage):
    log_dir = generated(tmp_path / "src")
    first, legacy = _log(log_dir, 0), _log(log_dir, 1)
    blob = bytearray(first.read_bytes())
    if damage == "torn":
        blob = blob[:-7]
    elif damage == "crc":
        blob[len(blob) // 2] ^= 0x55
    elif damage == "garbage":
        blob += bytes(range(40))
    elif damage == "backwards":
        blob += encode_batch(data(3), base_offset=3)  # offsets 3.. again, after the end
    elif damage == "overflow":
        blob += encode_batch(data(1 << 32), base_offset=1 << 32)
    else:
        raw = bytearray(legacy.read_bytes())
        raw[len(raw) // 2] ^= 0x01
        legacy.write_bytes(bytes(raw))
    first.write_bytes(bytes(blob))
    both_paths_agree(native_module, log_dir, tmp_path / "run", all_segments=True, overrides=OVERRIDES)


@pytest.mark.parametrize("salvage", [False, True])
def test_corrupt_middle_with_or_without_salvage(native_module, tmp_path, salvage):
    log_dir = generated(tmp_path / "src")
    seg = _log(log_dir, 2)
    blob = bytearray(seg.read_bytes())
    blob[len(blob) // 3] ^= 0xFF
    seg.write_bytes(bytes(blob))
    both_paths_agree(native_module, log_dir, tmp_path / "run", all_segments=True, salvage=salvage,
                     overrides=OVERRIDES)


def test_a_full_offset_index_fails_the_partition_identically(native_module, tmp_path):
    log_dir = generated(tmp_path / "src")
    report = both_paths_agree(native_module, log_dir, tmp_path / "run", all_segments=True,
                              overrides={"index.interval.bytes": "1", "segment.index.bytes": "64"})
    assert report["log_dirs"][0]["partitions"][0]["status"] == "failed"


def test_a_batch_larger_than_the_read_chunk(native_module, tmp_path, monkeypatch):
    """Batches straddle the chunk's end and outgrow it (the buffer grows, as FileBatches')."""
    monkeypatch.setattr(recovery_walk, "CHUNK_SIZE", 1000)
    big = [encode_batch(data(o * 3, 3, size=900 if o % 5 == 0 else 50), base_offset=o * 3) for o in range(40)]
    log_dir = write_partition(tmp_path / "src", [(0, big)])
    both_paths_agree(native_module, log_dir, tmp_path / "run", all_segments=True, overrides=OVERRIDES)


def test_segment_recover_reports_agree_batch_by_batch(native_module, tmp_path):
    """``LogSegment.recover`` alone (no producer state, no epoch cache): the same report and
    index files for every prefix length of a segment (a torn tail at every byte of a batch)."""
    batches, _ = producers_segment(0)
    whole = b"".join(batches)
    cuts = sorted({len(whole)} | set(random.Random(1).sample(range(len(whole)), 40)))
    for cut in cuts:
        results = []
        for native in (False, True):
            d = tmp_path / f"{cut}-{native}"
            d.mkdir()
            (d / f"{0:020d}.log").write_bytes(whole[:cut])
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(recovery_walk, "enabled", native)
                seg = LogSegment(d, 0, index_interval_bytes=100)
                report = seg.recover()
                seg.close()
            results.append((report, tree(d)))
        assert results[1] == results[0], cut


# -- hostile bytes ------------------------------------------------------------------------------------------


def mutate(blob: bytearray, rnd: random.Random) -> bytearray:
    """One random change: flipped bytes, a field overwritten, a cut, or bytes inserted."""
    out = bytearray(blob)
    kind = rnd.randrange(4)
    at = rnd.randrange(len(out))
    if kind == 0:
        for _ in range(rnd.randint(1, 4)):
            out[rnd.randrange(len(out))] ^= 1 << rnd.randrange(8)
    elif kind == 1:
        out[at:at + 4] = rnd.randbytes(4)
    elif kind == 2:
        del out[at:]
    else:
        out[at:at] = rnd.randbytes(rnd.randint(1, 30))
    return out


def segment_outcome(d: Path, blob: bytes, native: bool, interval: int = 100) -> tuple:
    """The plan's scan, then ``LogSegment.recover`` of ``blob`` with a producer state and a
    leader epoch cache, on one path: the scan, the report (or the typed error raised), the
    producer map, the epochs, the files."""
    d.mkdir()
    (d / f"{0:020d}.log").write_bytes(blob)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(recovery_walk, "enabled", native)
        planned = kafka_scan(d / f"{0:020d}.log", 0, len(blob), interval)
        planned = (planned.valid_bytes, planned.next_offset, planned.error, planned.kind, planned.overflow)
        seg = LogSegment(d, 0, index_interval_bytes=interval, max_index_size=4096)
        psm, cache = ProducerStateManager(d), LeaderEpochCache(d, persist=False)  # (no fsync per assign)
        try:
            outcome = seg.recover(psm, cache)
        except (EngineError, FormatError) as e:
            outcome = (type(e).__name__, str(e).replace(str(d), "<dir>"))
        seg.close()
        psm.take_snapshot(sync=False)
    return (planned, outcome, psm.snapshot_entries(), psm.ongoing_txns, psm.unreplicated_txns, psm.map_end_offset,
            cache.entries, tree(d))


#: Mutations per run of the campaign (``PLOG_RECOVERY_MUTATIONS=100000`` for the long one).
MUTATIONS = int(os.environ.get("PLOG_RECOVERY_MUTATIONS", "300"))


def test_mutated_segments_recover_identically(native_module, tmp_path):
    """Random mutations of a segment with producers, transactions and markers through
    ``LogSegment.recover``: only the reference's outcomes (a report, or the typed error it
    raises), the same files and producer state on both paths."""
    batches, _ = producers_segment(0)
    original = bytearray(b"".join(batches))
    rnd = random.Random(int(os.environ.get("PLOG_RECOVERY_SEED", "23")))
    for n in range(MUTATIONS):
        blob = bytes(mutate(original, rnd))
        reference = segment_outcome(tmp_path / f"{n}-r", blob, False)
        native = segment_outcome(tmp_path / f"{n}-n", blob, True)
        assert native == reference, n
        shutil.rmtree(tmp_path / f"{n}-r")
        shutil.rmtree(tmp_path / f"{n}-n")


def test_mutated_partitions_recover_identically(native_module, tmp_path):
    """A few mutations through the whole of ``plog recover`` (plan, kept walks, load)."""
    base = generated(tmp_path / "base")
    segs = [_log(base, i) for i in range(3)]
    originals = [bytearray(p.read_bytes()) for p in segs]
    rnd = random.Random(29)
    for n in range(12):
        i = rnd.randrange(3)
        segs[i].write_bytes(bytes(mutate(originals[i], rnd)))
        work = tmp_path / f"run-{n}"
        both_paths_agree(native_module, base, work, all_segments=True, overrides=OVERRIDES)
        shutil.rmtree(work)
        segs[i].write_bytes(bytes(originals[i]))


def test_the_walk_refuses_to_skip_ahead(native_module):
    """The walk goes on only where it stopped (its state's valid bytes)."""
    walker = native_module.RecoveryWalk(0, 4096, True, True, True)
    with pytest.raises(ValueError):
        walker.walk(b"\0" * 100, 10, 0)
    with pytest.raises(ValueError):
        walker.walk(b"\0" * 100, 101, -101)
    assert walker.walk(b"", 0, 0) == (0, 0, None)
