"""Differential tests of the write side's fast paths (engine/storage/append_fast.py, native
checks in native/src/append.rs) against the reference loops they replace.

Leader: the same scripts of produce requests (generated batch lists: every codec, keys,
nulls, headers, idempotent producers and their retries, transactions and their markers,
log-append-time and compacted topics, refused batches mid-list, tiny segments and index
intervals) run through ``Log.append_batches_as_leader`` with ``append_fast.enabled`` off
(the loop over ``append_as_leader``: the reference) and on, the lists also as one request's
``MemoryRecords`` (stamped in place); the data directories must be byte-identical after close (segments, indexes, producer snapshots, checkpoints), with the
same infos and the same typed errors at the same places.

Follower: a follower log catches up with such a leader through ``Log.read`` and
``Log.append_as_follower``, both ways: identical directories.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from native_twins import native_module  # noqa: E402,F401
from plog.engine.errors import EngineError  # noqa: E402
from plog.engine.storage import append_fast  # noqa: E402
from plog.engine.storage.log import Log  # noqa: E402
from plog.engine.storage.log_config import LogConfig  # noqa: E402
from plog.formats.errors import FormatError  # noqa: E402
from plog.formats.memory_records import MemoryRecords  # noqa: E402
from plog.formats.record_batch import encode_batch  # noqa: E402

NOW = 1_700_000_000_000
CODECS = (0, 1, 2, 3, 4)


def _clock():
    return NOW


def _files(directory: Path) -> dict:
    return {p.relative_to(directory).as_posix(): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def _info(info) -> tuple:
    return (info.first_offset, info.last_offset, info.max_timestamp, info.offset_of_max_timestamp,
            info.log_append_time, info.log_start_offset, info.records_count, info.valid_bytes, info.duplicate)


def _request(batches: list) -> MemoryRecords:
    """``batches`` as a producer's request carries them: back to back in one buffer."""
    return MemoryRecords(bytearray().join(batches), [len(b) for b in batches])


def run_script(directory: Path, config: LogConfig, script: list, fast: bool, monkeypatch,
               request: bool = False) -> tuple:
    """Run ``script`` (steps: ("batches", list, leader_epoch), ("marker", pid, epoch,
    commit), ("roll",)) on a new log; returns (outcomes, files, offsets). ``request``: each
    list goes as one :class:`MemoryRecords` (stamped in place by the fast path)."""
    monkeypatch.setattr(append_fast, "enabled", fast)
    log = Log.open(directory, config, time_source=_clock)
    outcomes = []
    for step in script:
        try:
            if step[0] == "batches":
                batches = _request(step[1]) if request else step[1]
                outcomes.append([_info(i) for i in log.append_batches_as_leader(batches, leader_epoch=step[2])])
            elif step[0] == "marker":
                outcomes.append(_info(log.append_end_txn_marker(step[1], step[2], commit=step[3])))
            else:
                log.roll()
                outcomes.append("rolled")
        except (EngineError, FormatError) as e:
            outcomes.append((type(e).__name__, str(e)))
        outcomes.append((log.log_end_offset, log.high_watermark, log._unflushed_messages, len(log.segments)))
    log.close()
    return outcomes, _files(directory)


class Producer:
    """Batches as a client sends them: idempotent (sequences), transactional, or plain."""

    def __init__(self, rng: random.Random, pid: int = -1, epoch: int = -1, transactional: bool = False,
                 compact: bool = False):
        self.rng, self.pid, self.epoch, self.transactional, self.compact = rng, pid, epoch, transactional, compact
        self.seq = 0

    def batch(self, n: int | None = None, codec: int | None = None, *, keyless: bool = False,
              ts: int | None = None) -> bytes:
        rng = self.rng
        n = n or rng.randint(1, 40)
        base_ts = NOW - 10_000 + rng.randint(0, 20_000) if ts is None else ts
        records = []
        for i in range(n):
            keyed = not keyless and (self.compact or rng.random() >= 0.3)
            key = rng.randbytes(rng.randint(0, 8)) if keyed else None
            value = None if rng.random() < 0.1 else rng.randbytes(rng.randint(0, 120))
            headers = [(f"h{j}", None if rng.random() < 0.3 else b"v%d" % j) for j in range(rng.randint(0, 2))]
            records.append((i, base_ts + rng.randint(-50, 50), key, value, headers))
        raw = encode_batch(records, compression_codec=rng.choice(CODECS) if codec is None else codec,
                           producer_id=self.pid, producer_epoch=self.epoch,
                           base_sequence=self.seq if self.pid >= 0 else -1, is_transactional=self.transactional)
        if self.pid >= 0:
            self.seq += n
        return raw


def _corrupt(raw: bytes) -> bytes:
    b = bytearray(raw)
    b[-1] ^= 0x5A
    return bytes(b)


def _with_base_offset(raw: bytes, offset: int) -> bytes:
    return offset.to_bytes(8, "big") + raw[8:]


def generated_script(seed: int, *, compact: bool = False, hostile: bool = True) -> list:
    rng = random.Random(seed)
    plain = Producer(rng, compact=compact)
    idem = Producer(rng, 7, 0, compact=compact)
    idem2 = Producer(rng, 8, 3, compact=compact)
    txn = Producer(rng, 9, 1, transactional=True, compact=compact)
    script = []
    sent = []
    for _round in range(14):
        batches = []
        for _ in range(rng.randint(1, 12)):
            pick = rng.random()
            if pick < 0.25:
                b = plain.batch()
            elif pick < 0.6:
                b = idem.batch()
            elif pick < 0.75:
                b = idem2.batch()
            elif pick < 0.85:
                b = txn.batch()
            elif hostile and sent and pick < 0.9:
                b = rng.choice(sent)  # a retry: a duplicate, or out of sequence
            elif hostile:
                kind = rng.randrange(7)
                b = [_corrupt(plain.batch()), _with_base_offset(plain.batch(), 5), plain.batch(900, 0),
                     plain.batch() + plain.batch(), plain.batch(keyless=True, codec=0), plain.batch()[:70],
                     encode_batch([(0, NOW, b"k", b"v")], is_control=True)][kind]
            else:
                b = plain.batch()
            batches.append(b)
            sent.append(b)
        script.append(("batches", batches, rng.choice((0, 0, 1, 2))))
        if rng.random() < 0.3:
            script.append(("marker", 9, 1, rng.random() < 0.5))
        if rng.random() < 0.1:
            script.append(("roll",))
    return script


CONFIGS = {
    "default": LogConfig(),
    "tiny": LogConfig(segment_bytes=6000, index_interval_bytes=100, max_message_bytes=8000),
    "tiny-index": LogConfig(segment_bytes=40000, index_interval_bytes=1, segment_index_bytes=64),
    "segment-ms": LogConfig(segment_ms=3000, index_interval_bytes=500),
    "log-append-time": LogConfig(message_timestamp_type="LogAppendTime", segment_bytes=20000, index_interval_bytes=300),
    "compacted": LogConfig(cleanup_policy="compact", segment_bytes=20000, index_interval_bytes=300),
}


def _compare(tmp_path: Path, config: LogConfig, script: list, monkeypatch) -> None:
    ref = run_script(tmp_path / "ref" / "t-0", config, script, False, monkeypatch)
    for request in (False, True):
        where = tmp_path / ("fast-request" if request else "fast") / "t-0"
        fast = run_script(where, config, script, True, monkeypatch, request=request)
        assert fast[0] == ref[0], request
        assert sorted(fast[1]) == sorted(ref[1])
        for name in ref[1]:
            assert fast[1][name] == ref[1][name], (name, request)


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_generated_requests_append_identically(native_module, tmp_path, monkeypatch, name, seed):
    _compare(tmp_path, CONFIGS[name], generated_script(seed, compact=name == "compacted"), monkeypatch)


def test_plain_rounds_of_16k_batches(native_module, tmp_path, monkeypatch):
    """The produce path's shape: rounds of ~64 batches of 16 KiB from one idempotent producer,
    across segment rolls."""
    rng = random.Random(5)
    idem = Producer(rng, 11, 0)
    script = [("batches", [idem.batch(140, codec=0) for _ in range(16)], 0) for _ in range(6)]
    _compare(tmp_path, LogConfig(segment_bytes=600_000), script, monkeypatch)


def test_refused_batches_mid_list(native_module, tmp_path, monkeypatch):
    """Each kind of refused batch in the middle of a list: the ones before it appended, the
    same typed error, then the next request goes on."""
    rng = random.Random(9)
    plain = Producer(rng)
    idem = Producer(rng, 3, 0)
    first = idem.batch()
    bad = [_corrupt(plain.batch()), _with_base_offset(plain.batch(), 1), plain.batch(2000, 0),
           plain.batch() + plain.batch(), plain.batch()[:64], encode_batch([(0, NOW, b"k", b"v")], is_control=True),
           b"", bytearray(plain.batch())]
    script = []
    for b in bad:
        script.append(("batches", [plain.batch(), idem.batch(), b, plain.batch()], 0))
    script.append(("batches", [first], 0))  # a retry of the producer's first batch: out of sequence now
    gap = Producer(rng, 3, 0)
    gap.seq = 10_000
    script.append(("batches", [idem.batch(), gap.batch(), idem.batch()], 0))
    script.append(("batches", [idem.batch(), Producer(rng, 3, 5).batch()], 0))  # a new epoch must start at 0
    _compare(tmp_path, LogConfig(max_message_bytes=20000), script, monkeypatch)


def test_duplicate_retries_mid_list(native_module, tmp_path, monkeypatch):
    rng = random.Random(4)
    idem = Producer(rng, 21, 2)
    a, b, c = idem.batch(), idem.batch(), idem.batch()
    d = idem.batch()
    script = [("batches", [a, b, c, b, d, c, a], 0), ("batches", [c, d, idem.batch()], 1)]
    _compare(tmp_path, LogConfig(index_interval_bytes=10), script, monkeypatch)


def _catch_up(leader: Log, follower: Log, max_bytes: int) -> None:
    while follower.log_end_offset < leader.log_end_offset:
        data = leader.read(follower.log_end_offset, max_bytes).records
        follower.append_as_follower(data, flush=False)


def _leader_from_script(tmp_path, config, seed: int, monkeypatch) -> Log:
    """A leader's log written by the reference path from ``generated_script(seed)``."""
    monkeypatch.setattr(append_fast, "enabled", False)
    leader = Log.open(tmp_path / "leader" / "t-0", config, time_source=_clock)
    for step in generated_script(seed, hostile=False):
        if step[0] == "batches":
            leader.append_batches_as_leader(step[1], leader_epoch=step[2])
        elif step[0] == "marker":
            leader.append_end_txn_marker(step[1], step[2], commit=step[3])
    return leader


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("name", ["default", "tiny", "tiny-index", "log-append-time"])
def test_follower_catches_up_identically(native_module, tmp_path, monkeypatch, seed, name):
    config = CONFIGS[name]
    leader = _leader_from_script(tmp_path, config, seed, monkeypatch)
    files = {}
    for fast in (False, True):
        monkeypatch.setattr(append_fast, "enabled", fast)
        d = tmp_path / f"follower-{fast}" / "t-0"
        follower = Log.open(d, config, time_source=_clock)
        _catch_up(leader, follower, 3000 if name == "tiny" else 64 * 1024)
        follower.close()
        files[fast] = _files(d)
    leader.close()
    assert sorted(files[True]) == sorted(files[False])
    for n in files[False]:
        assert files[True][n] == files[False][n], n


def _follower_state(log: Log) -> tuple:
    psm = log.producer_state
    producers = sorted((pid, e.producer_epoch, e.current_txn_first_offset, e.last_timestamp,
                        [(m.first_seq, m.last_seq, m.offset_delta, m.timestamp) for m in e.batch_metadata])
                       for pid, e in psm.producers.items())
    seg = log.active_segment
    mts = seg.max_timestamp_so_far
    return (log.log_end_offset, psm.map_end_offset, producers, [(e.epoch, e.start_offset) for e in log.epoch_cache.entries],
            seg.base_offset, seg.size, seg._bytes_since_last_index_entry, (mts.timestamp, mts.offset),
            seg.offset_index.entries, seg.time_index.entries)


@pytest.mark.parametrize("seed", [3, 4, 5])
def test_follower_state_agrees_fetch_by_fetch(native_module, tmp_path, monkeypatch, seed):
    """Random fetch sizes over a history of plain, idempotent and transactional producers,
    epoch changes and markers: after every fetch the producer entries, the epoch cache and
    the active segment's index state agree with the reference (not only the files at close)."""
    rng = random.Random(seed)
    config = CONFIGS["tiny-index"]
    leader = _leader_from_script(tmp_path, config, seed, monkeypatch)
    followers = {fast: Log.open(tmp_path / f"follower-{fast}" / "t-0", config, time_source=_clock)
                 for fast in (False, True)}
    while followers[False].log_end_offset < leader.log_end_offset:
        data = leader.read(followers[False].log_end_offset, rng.choice((200, 3000, 20_000, 1 << 20))).records
        infos = {}
        for fast, follower in followers.items():
            monkeypatch.setattr(append_fast, "enabled", fast)
            infos[fast] = _info(follower.append_as_follower(bytearray(data), flush=False))
        assert infos[True] == infos[False]
        assert _follower_state(followers[True]) == _follower_state(followers[False])
    files = {}
    for fast, follower in followers.items():
        follower.close()
        files[fast] = _files(tmp_path / f"follower-{fast}" / "t-0")
    leader.close()
    assert files[True] == files[False]


def test_follower_walk_and_index_answer_hostile_bytes_without_raising(native_module):
    """The follower's native summary over mutated fetches (headers changed, CRCs valid or
    not, cut anywhere): a summary agreeing with the batch walk, or None; never an exception."""
    from crc32c import crc32c

    from plog.formats.record_batch import CRC_START

    rng = random.Random(91)
    idem = Producer(rng, 6, 0)
    plain = Producer(rng)
    for _ in range(1500):
        raw = bytearray()
        offset = 0
        for _ in range(rng.randint(1, 4)):
            b = bytearray(_with_base_offset((idem if rng.random() < 0.5 else plain).batch(rng.randint(1, 4)), offset))
            offset += int.from_bytes(b[23:27], "big") + 1
            raw += b
        for _ in range(rng.randint(0, 3)):
            at = rng.randrange(len(raw))
            raw[at] = rng.choice((0, 1, 0x7F, 0x80, 0xFF, rng.randrange(256)))
        if rng.random() < 0.7:  # valid CRCs again, batch by batch where the lengths still allow
            pos = 0
            while pos + 61 <= len(raw):
                end = pos + 12 + int.from_bytes(raw[pos + 8:pos + 12], "big", signed=True)
                if not pos + 61 <= end <= len(raw):
                    break
                raw[pos + 17:pos + 21] = crc32c(bytes(raw[pos + CRC_START:end])).to_bytes(4, "big")
                pos = end
        if rng.random() < 0.2:
            raw = raw[:rng.randrange(len(raw) + 1)]
        data = bytes(raw)
        walk = native_module.follower_walk(data, 0, rng.choice((-1, 0, 5)), 5)
        found = native_module.append_replica_batches(data, 0)
        assert (walk is None) == (not found)
        if walk is not None:
            assert (walk[0], walk[1], walk[4]) == (found[0][1], found[-1][2], sum(b[9] or 1 for b in found))
        state = [rng.choice((0, 1, 5, 1 << 31, -1)) for _ in range(12)]
        out = native_module.follower_index(data, *state)
        assert out is None or (isinstance(out[0], bytes) and len(out[0]) % 8 == 0 and len(out[1]) % 12 == 0)


def test_follower_refusals_agree(native_module, tmp_path, monkeypatch):
    """Bytes the native walk declines go to the reference: the same errors."""
    rng = random.Random(3)
    plain = Producer(rng)
    source = Log.open(tmp_path / "src" / "t-0", LogConfig(), time_source=_clock)
    source.append_batches_as_leader([plain.batch() for _ in range(5)])
    good = source.read(0, 1 << 20).records
    source.close()
    cases = [good, good[:-3], _corrupt(good), b"", good[:40]]
    for fast in (False, True):
        monkeypatch.setattr(append_fast, "enabled", fast)
        outcomes = []
        for i, data in enumerate(cases):
            log = Log.open(tmp_path / f"f-{fast}-{i}" / "t-0", LogConfig(), time_source=_clock)
            try:
                outcomes.append(_info(log.append_as_follower(data)))
                outcomes.append(_info(log.append_as_follower(good)))  # offsets that went backwards
            except (EngineError, FormatError) as e:
                outcomes.append((type(e).__name__, str(e)))
            log.close()
        if fast:
            assert outcomes == reference
        reference = outcomes


def _cluster_run(path: Path, requests: list, fast: bool, monkeypatch) -> tuple:
    from plog.engine.cluster.data_dir import DataDir

    monkeypatch.setattr(append_fast, "enabled", fast)
    dd = DataDir.init(path, brokers=3)
    dd.create_topic("t", replica_assignment={0: [1, 2, 3]},
                    configs={"min.insync.replicas": "2", "segment.bytes": "30000", "index.interval.bytes": "700"})
    outcomes = []
    with dd.writer(5) as w:
        for batches in requests:
            try:
                if fast:
                    outcomes.append([_info(i) for i in w.append_batches(("t", 0), batches)])
                else:
                    infos = []
                    try:
                        for b in batches:
                            infos.append(_info(w.append(("t", 0), b)))
                    finally:
                        outcomes.append(infos)
            except (EngineError, FormatError) as e:
                outcomes.append((type(e).__name__, str(e)))
            w.flush()
    files = {}
    for broker in (1, 2, 3):
        part = dd.partition_path(("t", 0), broker)
        # partition.metadata holds the topic id, random per data directory.
        files.update({f"{broker}/{k}": v for k, v in _files(part).items() if k != "partition.metadata"})
    return outcomes, files


def test_cluster_writer_append_batches_replicates_identically(native_module, tmp_path, monkeypatch):
    """``ClusterWriter.append_batches`` on the fast path (RF 3, acks=all) against ``append``
    of each batch on the reference path: the three replicas' files are the same, also after
    a request that fails mid-list (the batches before it are replicated either way)."""
    rng = random.Random(12)
    idem = Producer(rng, 4, 0)
    plain = Producer(rng)
    requests = [[idem.batch(80, codec=0) for _ in range(6)], [plain.batch(), _corrupt(plain.batch()), plain.batch()],
                [idem.batch() for _ in range(10)]]
    ref = _cluster_run(tmp_path / "ref", requests, False, monkeypatch)
    fast = _cluster_run(tmp_path / "fast", requests, True, monkeypatch)
    # The reference's infos of a failed request are the ones before the failure; the fast
    # path's error comes instead (as the loop of append_as_leader gives it).
    assert [o for o in fast[0] if not isinstance(o, list)] == [o for o in ref[0] if not isinstance(o, list)]
    assert sorted(fast[1]) == sorted(ref[1])
    for name in ref[1]:
        assert fast[1][name] == ref[1][name], name


def _mutate(rng: random.Random, raw: bytes) -> bytes:
    """A hostile producer batch: a few bytes changed (mostly in the header), the CRC
    usually made valid again so the checks after it are reached."""
    from plog.formats.record_batch import CRC_START
    from crc32c import crc32c

    b = bytearray(raw)
    for _ in range(rng.randint(1, 3)):
        at = rng.randrange(61) if rng.random() < 0.8 else rng.randrange(len(b))
        b[at] = rng.choice((0, 1, 0x7F, 0x80, 0xFF, rng.randrange(256)))
    if rng.random() < 0.8 and len(b) >= 61:
        b[17:21] = crc32c(bytes(b[CRC_START:])).to_bytes(4, "big")
    return bytes(b)


@pytest.mark.parametrize("name", ["default", "compacted", "log-append-time"])
def test_mutated_batches_append_identically(native_module, tmp_path, monkeypatch, name):
    """Hostile bytes: whatever the native check takes or declines, the same files, infos
    and typed errors as the reference loop."""
    rng = random.Random(77)
    idem = Producer(rng, 6, 0, compact=name == "compacted")
    plain = Producer(rng, compact=name == "compacted")
    script = []
    for _ in range(25):
        batches = []
        for _ in range(rng.randint(1, 5)):
            good = (idem if rng.random() < 0.5 else plain).batch(rng.randint(1, 6), codec=rng.choice((0, 0, 1)))
            batches.append(_mutate(rng, good) if rng.random() < 0.5 else good)
        script.append(("batches", batches, 0))
    _compare(tmp_path, CONFIGS[name], script, monkeypatch)


def test_mutated_fetches_append_identically(native_module, tmp_path, monkeypatch):
    """Hostile fetched bytes on a follower: the same outcome on both paths."""
    from plog.formats.record_batch import CRC_START
    from crc32c import crc32c

    rng = random.Random(78)
    idem = Producer(rng, 6, 0)
    source = Log.open(tmp_path / "src" / "t-0", LogConfig(), time_source=_clock)
    source.append_batches_as_leader([idem.batch(rng.randint(1, 5)) for _ in range(6)])
    good = bytes(source.read(0, 1 << 20).records)
    source.close()
    cases = []
    for _ in range(40):
        b = bytearray(good)
        at = rng.randrange(len(b))
        batch_start = max(p for p in _batch_starts(good) if p <= at)
        b[at] = rng.randrange(256)
        if rng.random() < 0.7 and batch_start + 61 <= len(b):
            end = batch_start + 12 + int.from_bytes(good[batch_start + 8:batch_start + 12], "big")
            b[batch_start + 17:batch_start + 21] = crc32c(bytes(b[batch_start + CRC_START:end])).to_bytes(4, "big")
        cases.append(bytes(b))
    results = {}
    for fast in (False, True):
        monkeypatch.setattr(append_fast, "enabled", fast)
        outcomes = []
        for i, data in enumerate(cases):
            d = tmp_path / f"f-{fast}-{i}" / "t-0"
            log = Log.open(d, LogConfig(index_interval_bytes=50), time_source=_clock)
            try:
                outcomes.append(_info(log.append_as_follower(data)))
            except (EngineError, FormatError) as e:
                outcomes.append((type(e).__name__, str(e)))
            log.close()
            outcomes.append(_files(d))
        results[fast] = outcomes
    assert results[True] == results[False]


def _batch_starts(data: bytes) -> list[int]:
    starts, pos = [], 0
    while pos + 12 <= len(data):
        starts.append(pos)
        pos += 12 + int.from_bytes(data[pos + 8:pos + 12], "big")
    return starts


def test_transactions_mid_list(native_module, tmp_path, monkeypatch):
    """Transactional batches open a transaction (fast path included); a plain batch of the
    same producer inside it is refused; markers close it; then it goes on."""
    rng = random.Random(31)
    txn = Producer(rng, 30, 0, transactional=True)
    plain_same = Producer(rng, 30, 0)

    def plain():
        plain_same.seq = txn.seq
        b = plain_same.batch()
        txn.seq = plain_same.seq
        return b

    script = [("batches", [txn.batch(), txn.batch(), txn.batch()], 0)]
    script.append(("batches", [txn.batch(), plain(), txn.batch()], 0))
    script.append(("marker", 30, 0, False))
    script.append(("batches", [plain(), plain(), txn.batch(), txn.batch()], 0))
    script.append(("marker", 30, 0, True))
    script.append(("batches", [plain(), plain()], 0))
    _compare(tmp_path, LogConfig(index_interval_bytes=20), script, monkeypatch)


def test_fetch_trim_agrees_with_the_batch_walk():
    """``segment._whole_batches_end`` (the fetch's in-place trim) against the batch walk it
    shortcuts: the same end, or the same typed error, on cut and damaged fetches."""
    from plog.engine.storage.segment import _whole_batches_end
    from plog.formats.batches import BatchIterator
    from plog.formats.legacy import encode_legacy_batch

    rng = random.Random(8)
    plain = Producer(rng)
    good = b"".join(plain.batch(rng.randint(1, 4)) for _ in range(5))

    def reference(data):
        it = BatchIterator(data)
        try:
            for _ in it:
                pass
        except FormatError as e:
            return (type(e).__name__, e.reason, e.position)
        return it.valid_end if it.trailing is not None else len(data)

    def fast(data):
        try:
            return _whole_batches_end(data)
        except FormatError as e:
            return (type(e).__name__, e.reason, e.position)

    legacy = encode_legacy_batch([(0, NOW, b"k", b"v")], magic=1)
    cases = [good, good + legacy, legacy + good, b"", b"\0" * 17, b"\0" * 30]
    for _ in range(300):
        b = bytearray(good[:rng.randint(0, len(good))])
        if b and rng.random() < 0.5:
            b[rng.randrange(len(b))] = rng.randrange(256)
        cases.append(bytes(b))
    for data in cases:
        assert fast(bytearray(data)) == reference(data)
