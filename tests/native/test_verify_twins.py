"""``plog verify``'s hot loop, native (``plog._native.verify_hot``) against the reference
(engine/storage/segment_check.py, ``SegmentWalk._hot_reference``): the same findings
(messages, positions, order), the same stats and the same segment offsets, on every corpus
log directory and on generated log directories with random damage in their ``.log``,
``.index`` and ``.timeindex`` files, read in small chunks (so batches straddle the
buffer's end) with small index chunks (so entries run out and refill mid-walk).
"""

from __future__ import annotations

import os
import random
import shutil
import sys
import uuid
from contextlib import contextmanager
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from native_twins import native_module  # noqa: E402,F401

from conftest import CORPUS  # noqa: E402
from plog.engine.inspect import verify as V  # noqa: E402
from plog.engine.storage import discovery, segment_check  # noqa: E402
from plog.engine.storage.findings import MIN_CHUNK_SIZE, VerifyOptions, VerifyStats  # noqa: E402
from plog.formats.record_batch import encode_batch  # noqa: E402


@contextmanager
def _path(module, native: bool):
    """Run SegmentWalk's hot loop on one path, whatever PLOG_NATIVE chose at import."""
    with pytest.MonkeyPatch.context() as mp:
        hot = segment_check.SegmentWalk._hot_native if native else segment_check.SegmentWalk._hot_reference
        mp.setattr(segment_check.SegmentWalk, "_hot", hot)
        mp.setattr(segment_check, "_verify_hot", module.verify_hot if native else None)
        yield


def _verify(paths, options: VerifyOptions) -> tuple:
    stats = VerifyStats()
    findings = list(V.verify_paths([str(p) for p in paths], options, stats=stats))
    return findings, stats


def both_paths_agree(module, paths, *, chunk_size: int = MIN_CHUNK_SIZE, index_chunk_bytes: int | None = None,
                     mp: pytest.MonkeyPatch | None = None) -> tuple:
    """Verify ``paths`` on both paths; assert identical findings and stats; return them."""
    options = VerifyOptions(chunk_size=chunk_size, max_findings_per_check=0)
    with pytest.MonkeyPatch.context() as m:
        if index_chunk_bytes is not None:
            m.setattr(V, "INDEX_CHUNK_BYTES", index_chunk_bytes)
        with _path(module, False):
            reference = _verify(paths, options)
        with _path(module, True):
            native = _verify(paths, options)
    assert native[0] == reference[0]
    assert native[1] == reference[1]
    return reference


def _corpus_log_dirs() -> list[Path]:
    if not CORPUS.is_dir():
        return []
    found = []
    for top in sorted(CORPUS.iterdir()):
        if top.name != "vectors" and top.is_dir():
            found += [Path(ld.path) for ld in discovery.log_dirs(str(top))]
    return found


@pytest.mark.parametrize("log_dir", _corpus_log_dirs(), ids=lambda p: str(p.relative_to(CORPUS)))
def test_corpus_log_dir_verifies_the_same(native_module, corpus, log_dir):
    both_paths_agree(native_module, [log_dir])
    both_paths_agree(native_module, [log_dir], index_chunk_bytes=64)


def _build(root: Path, *, batches: int = 400, value_size: int = 150, interval: int = 1000,
           segment_bytes: int = 100_000) -> Path:
    """A log directory of 2 partitions in ``segment_bytes`` segments with dense indexes."""
    from plog.engine.storage.log_manager import LogManager

    config = {"segment.bytes": str(segment_bytes), "index.interval.bytes": str(interval), "plog.fsync.on.produce": "false"}
    rnd = random.Random(23)
    with LogManager([root], cluster_id="verify-twins") as lm:
        for partition in range(2):
            log = lm.get_or_create_log(("t", partition), config=config, topic_id=uuid.UUID(int=23))
            ts, seq = 1_700_000_000_000, 0
            for _ in range(batches):
                n = rnd.randint(1, 6)
                records = [(j, ts + j, b"k%d" % j, rnd.randbytes(rnd.randint(0, value_size))) for j in range(n)]
                log.append_as_leader(encode_batch(records, producer_id=7, producer_epoch=0, base_sequence=seq))
                seq += n
                ts += rnd.choice((0, 1, 10))
    os.remove(root / ".lock")
    return root


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    return _build(tmp_path_factory.mktemp("verify-twins") / "logdir")


def test_a_clean_generated_log_dir_verifies_the_same(native_module, pristine):
    findings, stats = both_paths_agree(native_module, [pristine], index_chunk_bytes=64)
    assert stats.batches == 800 and not [f for f in findings if f.severity == V.ERROR]


def test_sparse_and_missing_indexes(native_module, tmp_path):
    sparse = _build(tmp_path / "sparse", batches=200, interval=10_000)
    both_paths_agree(native_module, [sparse])
    for index in sparse.rglob("*.index"):
        os.remove(index)
    for index in sparse.rglob("*.timeindex"):
        index.write_bytes(b"")
    both_paths_agree(native_module, [sparse], index_chunk_bytes=48)


def _damage(rnd: random.Random, path: Path) -> None:
    data = bytearray(path.read_bytes())
    if not data:
        return
    for _ in range(rnd.randint(1, 4)):
        at = rnd.randrange(len(data))
        kind = rnd.random()
        if kind < 0.5:
            data[at] ^= 1 << rnd.randrange(8)
        elif kind < 0.7:
            data[at:at + 8] = rnd.randbytes(8)
        elif kind < 0.85:
            del data[at:at + rnd.randint(1, 64)]
        else:
            data[at:] = b"\0" * (len(data) - at)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("seed", range(24))
def test_damaged_log_dirs_verify_the_same(native_module, pristine, tmp_path, seed):
    rnd = random.Random(seed)
    logdir = Path(shutil.copytree(pristine, tmp_path / "logdir"))
    files = sorted(p for p in logdir.rglob("*") if p.suffix in (".log", ".index", ".timeindex"))
    for path in rnd.sample(files, rnd.randint(1, 3)):
        _damage(rnd, path)
    findings, _ = both_paths_agree(native_module, [logdir], index_chunk_bytes=rnd.choice((32, 64, 4096)))
    assert findings  # the damage is found (and found the same way)


def test_batches_larger_than_the_chunk(native_module, tmp_path):
    """Batches that straddle the 64 KiB buffer, or do not fit in it at all."""
    big = _build(tmp_path / "big", batches=40, value_size=40_000, interval=100, segment_bytes=2_000_000)
    both_paths_agree(native_module, [big])
    seg = sorted(big.rglob("*.log"))[0]
    _damage(random.Random(5), seg)
    both_paths_agree(native_module, [big])
