"""Compaction on the native path (engine/maintenance: the native offset map, record filter
and batch rebuild, native/src/compact.rs) against the pure-Python reference.

Each case compacts two identical copies of a log directory with ``run_compaction`` (a
pinned ``now``, ``force``): once with the reference :class:`SkimpyOffsetMap` (which keeps
the whole clean on the reference loops) and once with the native map. The directories must
then be byte-identical (every file: segments, indexes, snapshots, checkpoints) and the
reports equal (every counter of every round; only the elapsed time differs). A run that
fails must fail on both paths with the same typed error.

Workloads: generated compacted topics (every codec, keys of every length class the MD5
lanes treat differently, null keys, tombstones with and without a delete horizon, headers,
plain, idempotent and transactional producers with commits and aborts, an open
transaction, several segments and groups), cleaned at several ``now`` so tombstones get a
horizon and later expire, with a map large enough for one round and one so small it needs
many; the corpus's real log directories; and hostile copies with bytes flipped in a
segment.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from native_twins import native_module  # noqa: E402,F401  (fixture)

from conftest import corpus_log_dirs  # noqa: E402
from plog.engine.errors import EngineError, OffsetMapFullError  # noqa: E402
from plog.engine.maintenance import cleaner as cleaner_mod  # noqa: E402
from plog.engine.maintenance.offset_map import NativeOffsetMap, SkimpyOffsetMap  # noqa: E402
from plog.engine.maintenance.runner import MaintenanceOptions, run_compaction  # noqa: E402
from plog.engine.storage.log_manager import LogManager  # noqa: E402
from plog.formats.batches import BatchIterator  # noqa: E402
from plog.formats.errors import FormatError  # noqa: E402
from plog.formats.record_batch import encode_batch  # noqa: E402

SECOND = 1000
TS0 = 1_700_000_000_000
RETENTION = 50 * SECOND
CODECS = (0, 0, 0, 1, 2, 3, 4)  # none (most), gzip, snappy, lz4, zstd
IDEMPOTENT = (4000, 4001)
TXN = (5000, 5001)


def _key(rnd: random.Random, keys: int) -> bytes | None:
    """Keys of the lengths the native MD5 treats differently: empty, short (8 lanes of one
    block), 55/56 bytes (the one-block limit), long (several blocks); sometimes null."""
    r = rnd.random()
    if r < 0.03:
        return None
    n = int(keys * rnd.random() ** 2)
    if r < 0.06:
        return b""
    if r < 0.12:
        return (b"long-%d-" % n).ljust(55 + n % 3, b"L")
    if r < 0.16:
        return (b"huge-%d-" % n) * 40
    return b"key-%03d" % n


def fill(log, rnd: random.Random, clock: list, *, records: int, keys: int, leave_open: bool) -> None:
    """``records`` records in batches of 1-8 (plain, idempotent, transactional; every codec;
    ~12% tombstones; headers on some), markers at random moments, rolls now and then."""
    seq: dict[int, int] = {}
    open_txn: dict[int, bool] = {}
    while log.log_end_offset < records:
        base = log.log_end_offset
        count = rnd.randint(1, 8)
        recs = []
        for j in range(count):
            offset = base + j
            key = _key(rnd, keys)
            value = None if rnd.random() < 0.12 else b"v%d-" % offset + bytes(rnd.randrange(256) for _ in range(
                rnd.randint(0, 40)))
            headers = (("h", b"%d" % offset), ("n\xff".encode("latin-1").decode("utf-8", "surrogateescape"), None)) \
                if offset % 7 == 0 else ()
            recs.append((j, TS0 + offset * SECOND + rnd.randint(-3000, 3000), key, value, headers))
        codec = rnd.choice(CODECS)
        r = rnd.random()
        pid = -1 if r < 0.45 else rnd.choice(IDEMPOTENT) if r < 0.65 else rnd.choice(TXN)
        clock[0] = TS0 + (base + count) * SECOND
        if any(rec[2] is None for rec in recs):
            # A leader refuses key-less records on a compacted topic; they are in logs written
            # before the topic became compacted, and arrive here as a replica's would.
            log.append_as_follower(encode_batch([(base + j, *rec[1:]) for j, rec in enumerate(recs)],
                                                base_offset=base, compression_codec=codec))
        elif pid < 0:
            log.append_as_leader(encode_batch(recs, compression_codec=codec))
        else:
            s = seq.get(pid, 0)
            seq[pid] = s + count
            log.append_as_leader(encode_batch(recs, compression_codec=codec, producer_id=pid, producer_epoch=0,
                                              base_sequence=s, is_transactional=pid in TXN))
            if pid in TXN:
                open_txn[pid] = True
        for t in TXN:
            if open_txn.get(t) and rnd.random() < 0.3:
                log.append_end_txn_marker(t, 0, commit=rnd.random() < 0.6)
                open_txn[t] = False
        if rnd.random() < 0.04:
            log.roll()
    for i, t in enumerate(TXN):
        if open_txn.get(t) and not (leave_open and i == 0):
            log.append_end_txn_marker(t, 0, commit=True)
    for _ in range(2):
        offset = log.log_end_offset
        log.append_as_leader(encode_batch([(0, TS0 + offset * SECOND, b"tail", b"t%d" % offset)]))


def build(root: Path, seed: int, *, records: int = 700, keys: int = 90) -> Path:
    rnd = random.Random(seed)
    clock = [TS0]
    common = {"cleanup.policy": "compact", "segment.bytes": str(rnd.choice((3000, 6144, 20000))),
              "index.interval.bytes": "500", "delete.retention.ms": str(RETENTION)}
    with LogManager([root], time_source=lambda: clock[0]) as lm:
        for topic, leave_open in (("kv", False), ("open", True)):
            log = lm.get_or_create_log((topic, 0), config=common)
            fill(log, rnd, clock, records=records, keys=keys, leave_open=leave_open)
    return root


# -- running both paths ---------------------------------------------------------------------


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _report(report, root: Path):
    """The report without timings and with the directory's path as ``ROOT`` (the only
    things the two paths may differ in)."""
    return _strip(report.to_dict(), str(root))


def _strip(value, root: str):
    if isinstance(value, dict):
        return {k: _strip(v, root) for k, v in value.items() if "elapsed" not in k}
    if isinstance(value, (list, tuple)):
        return [_strip(v, root) for v in value]
    if isinstance(value, str):
        return value.replace(root, "ROOT")
    return value


def _compact(root: Path, now: int, buffer_size: int):
    try:
        report = run_compaction(root, MaintenanceOptions(now_ms=now, buffer_size=buffer_size, force=True,
                                                         file_delete_delay_ms=0))
    except (FormatError, EngineError) as e:
        return ("error", type(e).__name__, str(e).replace(str(root), "ROOT"))
    return ("ok", _report(report, root))


def compact_both(monkeypatch, src: Path, tmp: Path, nows, buffer_size: int) -> tuple[Path, Path, list]:
    """Copies of ``src`` compacted at each of ``nows`` on the reference and the native map;
    returns both directories and the outcomes (asserted equal)."""
    ref, nat = tmp / "ref", tmp / "nat"
    shutil.copytree(src, ref)
    shutil.copytree(src, nat)
    outcomes = []
    for now in nows:
        with monkeypatch.context() as mp:
            mp.setattr(cleaner_mod, "new_offset_map", SkimpyOffsetMap)
            expected = _compact(ref, now, buffer_size)
        with monkeypatch.context() as mp:
            made = []
            mp.setattr(cleaner_mod, "new_offset_map", lambda *a: made.append(NativeOffsetMap(*a)) or made[-1])
            got = _compact(nat, now, buffer_size)
        assert got == expected, f"now={now}"
        if expected[0] == "ok" and any(p["result"] and p["result"].get("cleaned") for p in expected[1]["partitions"]):
            assert made, "the native path did not run"
        outcomes.append(expected)
    a, b = _files(ref), _files(nat)
    assert sorted(a) == sorted(b)
    for name in a:
        assert a[name] == b[name], f"{name} differs"
    return ref, nat, outcomes


NOWS = (TS0 + 900 * SECOND, TS0 + 900 * SECOND + RETENTION // 2, TS0 + 900 * SECOND + 3 * RETENTION)


# -- the tests --------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(6))
def test_generated_partitions_compact_identically(native_module, monkeypatch, tmp_path, seed):
    src = build(tmp_path / "src", seed)
    _ref, _nat, outcomes = compact_both(monkeypatch, src, tmp_path, NOWS, 1 << 20)
    assert all(o[0] == "ok" for o in outcomes)


@pytest.mark.parametrize("buffer_size", [24 * 40, 24 * 97 + 5])
def test_a_map_too_small_for_one_round_takes_several_identically(native_module, monkeypatch, tmp_path, buffer_size):
    src = build(tmp_path / "src", 100 + buffer_size, records=500, keys=150)
    _ref, _nat, outcomes = compact_both(monkeypatch, src, tmp_path, NOWS, buffer_size)
    rounds = [p["result"].get("rounds", 0) for o in outcomes if o[0] == "ok" for p in o[1]["partitions"] if p["result"]]
    assert rounds and max(rounds) > 1


@pytest.mark.parametrize("buffer_size", [24, 48, 24 * 4])
def test_tiny_maps_compact_or_fail_identically(native_module, monkeypatch, tmp_path, buffer_size):
    src = build(tmp_path / "src", 7, records=120)
    _ref, _nat, outcomes = compact_both(monkeypatch, src, tmp_path, NOWS[:1], buffer_size)
    if buffer_size == 24:  # one slot: at load factor 0.9 not a single key
        assert outcomes[0][:2] == ("error", "CleanerBufferTooSmallError")


def test_corpus_log_dirs_compact_identically(native_module, monkeypatch, tmp_path, corpus):
    dirs = corpus_log_dirs()
    assert dirs
    for i, d in enumerate(dirs):
        case = tmp_path / f"c{i}"
        case.mkdir()
        compact_both(monkeypatch, d, case, (TS0 + 10**12,), 1 << 20)


def _hostile_case(monkeypatch, tmp: Path, seed: int) -> tuple:
    """Bytes flipped in one segment of a generated partition; both paths compacted."""
    src = build(tmp / "src", 1000 + seed, records=300)
    rnd = random.Random(seed)
    logs = sorted(p for p in (src / "kv-0").glob("*.log") if p.stat().st_size > 0)
    target = logs[rnd.randrange(len(logs) - 1 if len(logs) > 1 else 1)]
    data = bytearray(target.read_bytes())
    # Half the cases hit anywhere (headers, lengths), half inside records regions, where
    # the native framing must hand the batch to the reference for its error.
    starts = [b.position for b in BatchIterator(bytes(data))]
    for _ in range(rnd.randint(1, 4)):
        if seed % 2:
            at = rnd.randrange(len(data))
        else:
            at = min(rnd.choice(starts) + 61 + rnd.randrange(12), len(data) - 1)
        data[at] ^= 1 << rnd.randrange(8)
    target.write_bytes(bytes(data))
    _ref, _nat, outcomes = compact_both(monkeypatch, src, tmp, NOWS[:2], 1 << 20)
    return outcomes[0][:2] if outcomes[0][0] == "error" else ("ok",)


def test_hostile_segments_fail_or_compact_identically(native_module, monkeypatch, tmp_path):
    """Corrupted segments (CRCs left stale): both paths give the same typed error, or the
    same directory; both kinds of outcome occur among the cases."""
    outcomes = []
    for seed in range(14):
        case = tmp_path / f"h{seed}"
        case.mkdir()
        outcomes.append(_hostile_case(monkeypatch, case, seed))
    assert ("ok",) in outcomes and any(o[0] == "error" for o in outcomes), outcomes


def test_the_map_matches_the_reference_slot_for_slot(native_module):
    """put/get through both maps: the same sizes, probe counters and answers, over a map
    filled to its load factor (collisions, the wrap of the probe arithmetic)."""
    rnd = random.Random(5)
    for memory in (24 * 7, 24 * 100 + 5, 4096, 1 << 16):
        a, b = NativeOffsetMap(memory), SkimpyOffsetMap(memory)
        keys = []
        for _ in range(a.capacity):
            key = os.urandom(rnd.randint(0, 80))
            offset = rnd.randint(-5, 1 << 40)
            keys.append(key)
            a.put(key, offset)
            b.put(key, offset)
        assert [a.get(k) for k in keys] == [b.get(k) for k in keys]
        assert a.get(b"absent") == b.get(b"absent")
        assert (a.size, a.lookups, a.probes, a.latest_offset) == (b.size, b.lookups, b.probes, b.latest_offset)
        a.clear()
        b.clear()
        assert (a.size, a.latest_offset, a.get(keys[0])) == (b.size, b.latest_offset, b.get(keys[0]))


def test_a_full_map_refuses_any_put_as_the_reference(native_module):
    a, b = NativeOffsetMap(24 * 3), SkimpyOffsetMap(24 * 3)
    for i in range(3):
        a.put(b"k%d" % i, i)
        b.put(b"k%d" % i, i)
    for m in (a, b):
        # Kafka's put checks the size first: a full map refuses even a key it holds.
        for key in (b"k9", b"k1"):
            with pytest.raises(OffsetMapFullError, match="entries: 3, slots: 3"):
                m.put(key, 9)
        assert (m.get(b"k1"), m.get(b"k9"), m.latest_offset) == (1, -1, 2)


def test_md5_matches_hashlib(native_module):
    rnd = random.Random(3)
    for n in list(range(0, 140)) + [1000, 4097]:
        data = bytes(rnd.randrange(256) for _ in range(n))
        assert native_module.compact_md5(data) == hashlib.md5(data).digest()


@pytest.mark.parametrize("count, value_size", [(600, 8), (3000, 120)])
def test_the_batch_loops_hash_keys_as_md5_and_agree_with_the_reference(native_module, count, value_size):
    """``map_records`` (the keys hashed four at a time, long keys alone) stores exactly the
    MD5 of each key: the reference's ``get`` (hashlib) finds every key at its latest
    offset, with the same probe counters as the reference map fed the same keys; and
    ``retained`` keeps what the reference ``retained_indexes`` keeps. The second case's
    region is long enough for the loops to run with the GIL released."""
    from plog.engine.maintenance.batch_filter import RecordFilter
    from plog.engine.maintenance.cleaner_stats import CleanStats
    from plog.engine.storage.log_config import LogConfig
    from plog.formats.batches import iter_batches
    from plog.formats.record_keys import keyed_records

    rnd = random.Random(11)
    keys = [bytes(rnd.randrange(256) for _ in range(n)) for n in list(range(0, 70)) + [119, 120, 200, 1000]]
    records = []
    for i in range(count):
        key = rnd.choice(keys + [None])
        records.append((1000 + i, TS0 + i, key, None if rnd.random() < 0.2 else b"v%d" % i * value_size))
    batch = next(iter(iter_batches(encode_batch(records, base_offset=1000))))
    assert (len(batch.records_payload()) >= 256 * 1024) == (count == 3000)
    a, b = NativeOffsetMap(1 << 16), SkimpyOffsetMap(1 << 16)
    assert a.map_records(batch.records_payload(), batch.records_count, 1000, 1100, 10**6) == (count, False)
    for offset, _ts, key, _v in records:
        if key is not None and offset >= 1100:
            b.put(key, offset)
    assert (a.size, a.lookups, a.probes, a.latest_offset) == (b.size, b.lookups, b.probes, b.latest_offset)
    for key in keys:
        assert a.get(key) == b.get(key)
    horizon = TS0 + 5
    expired = next(iter(iter_batches(encode_batch(records, base_offset=1000, delete_horizon_ms=horizon))))
    for latest in (1100, 1400, 999 + count):
        a.update_latest_offset(latest)
        b.update_latest_offset(latest)
        for one in (batch, expired):
            stats_b = CleanStats()
            ref = RecordFilter(b, now=horizon + 1, config=LogConfig.from_properties({"cleanup.policy": "compact"}),
                               stats=stats_b)
            flags, rows = keyed_records(one)
            want = ref.retained_indexes(one, flags, rows, True)
            got = a.retained(one.records_payload(), one.records_count, 1000, latest, one is batch)
            assert got[0] == want, latest
            assert (got[2], got[3], got[4]) == (stats_b.keyless_records_removed, stats_b.tombstones_removed,
                                                stats_b.tombstones_expired)
            assert got[1] == sum(1 for i in want if flags[rows[i][5]] == 1)
            assert (a.lookups, a.probes) == (b.lookups, b.probes)
        assert stats_b.tombstones_expired > 0 or latest != 999 + count
