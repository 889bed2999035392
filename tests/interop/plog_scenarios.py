"""What the interop suite makes plog's engine write for real Kafka to read ("plog writes,
Kafka reads", issue 5 item 4), and the manifest of every record it wrote.

:func:`write_plog_scenario` drives plog's :class:`~plog.engine.storage.log_manager.LogManager`
the way a broker's request handlers would (``append_as_leader`` for producer batches,
``append_end_txn_marker`` for the coordinator's markers) into a fresh data directory,
then closes it (checkpoints and the clean-shutdown marker). Everything is deterministic
(seeded) except the base time, which is "now" (Kafka expires producers idle for a day
and deletes segments older than the retention on load, so the data must be recent).

Topics (each a :class:`~plog.engine.storage.log_config.LogConfig`, given to Kafka as the same topic
configs, so that a broker's recovery rebuilds indexes with the same interval):

* ``codec-<c>`` for every codec: keyed and keyless records, null and empty values
  (tombstones), headers (UTF-8 keys, empty and null values), batches of 1-12 records;
  small segments (several segments each).
* ``segments``: tiny segments (dozens of them) of small batches in all five codecs, and
  a second leader epoch from a segment in the middle on (``leader-epoch-checkpoint``
  with two entries). A broker restarted on a topic it created elects leader epoch 2
  (created at 0, bumped by the controlled shutdown of its only replica, bumped again by
  the election), above plog's epochs, so it keeps them and appends its own.
* ``idempotent``: two idempotent producers (one with a large producer id, one bumping its
  epoch half way, sequences restarting at 0), interleaved; snapshots at every roll.
* ``txn`` (2 partitions): two transactional producers with committed and aborted
  transactions, overlapping (one transaction open while the other aborts, so the aborted
  entry's last stable offset is the other's first offset), an idempotent and a plain
  producer writing into open transactions; small segments, so ``.txnindex`` entries and
  producer snapshots with open transactions land in several segments.
* ``log-append-time``: ``message.timestamp.type=LogAppendTime`` (plog stamps the batches).
* ``empty``: a partition nothing was written to.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from pathlib import Path

from plog.engine.storage.log_config import LogConfig
from plog.engine.storage.log_manager import LogManager
from plog.formats.compression import codec_id
from plog.formats.record_batch import encode_batch
from plog.formats.records import CREATE_TIME, LOG_APPEND_TIME

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
TXN_TOPIC = "txn"
IDEMPOTENT_TOPIC = "idempotent"
LOG_APPEND_TIME_TOPIC = "log-append-time"
SEGMENTS_TOPIC = "segments"
EMPTY_TOPIC = "empty"
LEADER_EPOCH = 0
COORDINATOR_EPOCH = 7


@dataclass(frozen=True)
class Written:
    """One record plog appended. ``txn``: None (not transactional), "committed", "aborted"."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple  # ((str, bytes | None), ...)
    timestamp: int  # what a consumer sees (the batch max timestamp for LogAppendTime)
    timestamp_type: int  # 0 CreateTime, 1 LogAppendTime
    txn: str | None = None

    @property
    def tp(self) -> tuple[str, int]:
        return (self.topic, self.partition)


@dataclass
class PlogScenario:
    data_dir: Path
    #: name -> {"partitions": n, "configs": {plog/Kafka topic config name: value}}
    topics: dict[str, dict]
    records: list[Written] = field(default_factory=list)
    #: (topic, partition) -> (producer id, first offset, last offset) of each aborted transaction
    aborted: dict[tuple[str, int], list[tuple[int, int, int]]] = field(default_factory=dict)
    #: (topic, partition) -> offsets of the COMMIT/ABORT markers
    markers: dict[tuple[str, int], list[int]] = field(default_factory=dict)
    end_offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    segment_counts: dict[tuple[str, int], int] = field(default_factory=dict)
    base_time: int = 0

    def written_to(self, tp) -> list[Written]:
        return sorted((r for r in self.records if r.tp == tuple(tp)), key=lambda r: r.offset)

    def partitions(self) -> list[tuple[str, int]]:
        return sorted((t, p) for t, d in self.topics.items() for p in range(d["partitions"]))

    def kafka_topic_configs(self, segment_bytes_name: str) -> dict[str, dict[str, str]]:
        """The topic configs to create the topics with on a broker; ``segment.bytes`` under
        the version's name for small segments (``kafka_versions.small_segment_config``)."""
        out = {}
        for name, d in self.topics.items():
            out[name] = {(segment_bytes_name if k == "segment.bytes" else k): v for k, v in d["configs"].items()}
        return out


def topics() -> dict[str, dict]:
    small = {"segment.bytes": "6000", "index.interval.bytes": "700"}
    out = {f"codec-{c}": {"partitions": 1, "configs": dict(small)} for c in CODECS}
    out.update({
        SEGMENTS_TOPIC: {"partitions": 1, "configs": {"segment.bytes": "1200", "index.interval.bytes": "150"}},
        IDEMPOTENT_TOPIC: {"partitions": 1, "configs": {"segment.bytes": "3000", "index.interval.bytes": "400"}},
        TXN_TOPIC: {"partitions": 2, "configs": {"segment.bytes": "3500", "index.interval.bytes": "500"}},
        LOG_APPEND_TIME_TOPIC: {"partitions": 1, "configs": {"message.timestamp.type": "LogAppendTime",
                                                             "index.interval.bytes": "300"}},
        EMPTY_TOPIC: {"partitions": 1, "configs": {}},
    })
    return out


class _Clock:
    """The broker clock plog's engine sees: starts at ``start``, 3 ms later at every call
    (LogAppendTime stamps and marker timestamps differ from batch to batch)."""

    def __init__(self, start: int):
        self.now = start

    def __call__(self) -> int:
        self.now += 3
        return self.now


def _value(rng: random.Random, i: int) -> bytes | None:
    r = rng.random()
    if r < 0.05:
        return b""
    size = rng.choice((5, 20, 60, 120, 300))
    text = (f"value {i} " * (size // 8 + 1)).encode()[:size]
    return text[: max(0, size - 8)] + _binary(rng, min(8, size))


def _binary(rng: random.Random, n: int) -> bytes:
    """Random bytes (invalid UTF-8 for the dump tools to replace), without CR and LF: the
    interop fixtures read a tool's output as text with universal newlines, which would
    turn a CR inside a printed payload into a line break on Kafka's side only."""
    return bytes(rng.choice(_BINARY_ALPHABET) for _ in range(n))


_BINARY_ALPHABET = bytes(b for b in range(256) if b not in (0x0A, 0x0D))


def _headers(rng: random.Random, i: int) -> tuple:
    r = i % 6
    if r == 0:
        return (("trace", f"t-{i}".encode()), ("empty", b""), ("hé-ключ", "välue ✓".encode()))
    if r == 1:
        return (("n", str(i).encode()),)
    if r == 2:
        return (("null-value", None),)
    return ()


def _record(rng: random.Random, i: int, ts: int):
    """(key, value, headers, timestamp): keyed/keyless, tombstones, headers."""
    key = None if i % 4 == 3 else f"key-{rng.randrange(40)}".encode()
    value = None if (key is not None and i % 9 == 5) else _value(rng, i)
    return key, value, _headers(rng, i), ts


class _Writer:
    """Appends producer batches and markers through plog's engine, records the manifest."""

    def __init__(self, manager: LogManager, scenario: PlogScenario, rng: random.Random):
        self.manager = manager
        self.scenario = scenario
        self.rng = rng
        self.counter = 0
        self.ts = scenario.base_time
        self.seq: dict[tuple, int] = {}  # (pid, epoch, tp) -> next sequence
        self.open_txn: dict[tuple[int, tuple], tuple[int, list]] = {}  # (pid, tp) -> (first offset, records)

    def log(self, tp):
        return self.manager.get_log(tp)

    def records(self, n: int) -> list:
        out = []
        for _ in range(n):
            self.counter += 1
            # mostly increasing timestamps with some out of order, all within minutes
            self.ts += self.rng.choice((1, 2, 5, 17))
            ts = self.ts - self.rng.randrange(4000) if self.counter % 7 == 0 else self.ts
            out.append(_record(self.rng, self.counter, ts))
        return out

    def append(self, tp, recs, *, codec: str = "none", pid: int = -1, epoch: int = -1, transactional=False,
               leader_epoch: int = LEADER_EPOCH):
        seq = -1
        if pid >= 0:
            seq = self.seq.get((pid, epoch, tp), 0)
            self.seq[(pid, epoch, tp)] = seq + len(recs)
        raw = encode_batch([(i, ts, k, v, h) for i, (k, v, h, ts) in enumerate(recs)],
                           compression_codec=codec_id(codec), producer_id=pid, producer_epoch=epoch,
                           base_sequence=seq, is_transactional=transactional)
        log = self.log(tp)
        info = log.append_as_leader(raw, leader_epoch=leader_epoch)
        assert not info.duplicate and info.last_offset - info.first_offset + 1 == len(recs)
        lat = log.config.log_append_time
        written = [Written(tp[0], tp[1], info.first_offset + i, k, v, tuple(h),
                           info.log_append_time if lat else ts, LOG_APPEND_TIME if lat else CREATE_TIME,
                           "open" if transactional else None)
                   for i, (k, v, h, ts) in enumerate(recs)]
        if transactional:
            first, pending = self.open_txn.setdefault((pid, tp), (info.first_offset, []))
            pending.extend(written)
        else:
            self.scenario.records.extend(written)
        return info

    def end_txn(self, pid: int, epoch: int, tps, *, commit: bool) -> None:
        for tp in tps:
            first, pending = self.open_txn.pop((pid, tp))
            info = self.log(tp).append_end_txn_marker(pid, epoch, commit=commit, coordinator_epoch=COORDINATOR_EPOCH,
                                                      leader_epoch=LEADER_EPOCH)
            outcome = "committed" if commit else "aborted"
            self.scenario.records.extend(
                Written(w.topic, w.partition, w.offset, w.key, w.value, w.headers, w.timestamp, w.timestamp_type,
                        outcome) for w in pending)
            self.scenario.markers.setdefault(tp, []).append(info.first_offset)
            if not commit:
                self.scenario.aborted.setdefault(tp, []).append((pid, first, info.first_offset))


def write_plog_scenario(data_dir: Path, *, seed: int = 4_2024, base_time: int | None = None) -> PlogScenario:
    """Write the scenario into ``data_dir`` (created) with plog's engine and close it."""
    if base_time is None:
        base_time = (int(time.time()) - 600) * 1000
    scenario = PlogScenario(Path(data_dir), topics(), base_time=base_time)
    rng = random.Random(seed)
    # Kafka's flush policy (the page cache; fsync on roll and close): the files are the
    # same, and the scenario writes in a second instead of fsyncing every append.
    manager = LogManager([data_dir], node_id=1, default_config=LogConfig(fsync_on_produce=False),
                         time_source=_Clock(base_time + 600_000))
    try:
        for name, d in scenario.topics.items():
            for p in range(d["partitions"]):
                manager.get_or_create_log((name, p), config=d["configs"])
        w = _Writer(manager, scenario, rng)

        # 1. One topic per codec: batches of 1-12 records.
        for codec in CODECS:
            tp = (f"codec-{codec}", 0)
            for _ in range(40):
                w.append(tp, w.records(rng.randint(1, 12)), codec=codec)

        # 2. Tiny segments, every codec in turn; a new leader epoch half way (two entries in
        #    leader-epoch-checkpoint; below the epoch a restarted broker elects, see the test).
        for i in range(120):
            w.append((SEGMENTS_TOPIC, 0), w.records(rng.randint(1, 3)), codec=CODECS[i % len(CODECS)],
                     leader_epoch=LEADER_EPOCH + (i >= 70))

        # 3. Idempotent producers: a large producer id, and one that bumps its epoch.
        big, small = 9_000_000_123, 17
        for i in range(60):
            if i % 3 == 0:
                w.append((IDEMPOTENT_TOPIC, 0), w.records(rng.randint(1, 5)), codec="zstd", pid=small,
                         epoch=0 if i < 30 else 1)
            else:
                w.append((IDEMPOTENT_TOPIC, 0), w.records(rng.randint(1, 5)), codec="snappy", pid=big, epoch=4)

        # 4. Transactions on both partitions of the txn topic.
        t0 = (TXN_TOPIC, 0)
        t1 = (TXN_TOPIC, 1)
        both = [t0, t1]
        ta, tb, idem = 4242, 31337, 555  # transactional A (epoch 3), B (epoch 0), idempotent
        plain_codecs = iter(CODECS * 20)

        def plain(tp):
            w.append(tp, w.records(rng.randint(1, 3)), codec=next(plain_codecs))

        def txn_batches(pid, epoch, tps, n, codec):
            for _ in range(n):
                for tp in tps:
                    w.append(tp, w.records(rng.randint(1, 6)), codec=codec, pid=pid, epoch=epoch, transactional=True)

        for round_ in range(3):
            # A commits
            txn_batches(ta, 3, both, 3, "gzip")
            plain(t0)
            w.end_txn(ta, 3, both, commit=True)
            # A aborts while an idempotent and a plain producer write in the same partitions
            txn_batches(ta, 3, both, 2, "lz4")
            w.append(t0, w.records(2), pid=idem, epoch=0)
            plain(t1)
            txn_batches(ta, 3, both, 2, "zstd")
            w.end_txn(ta, 3, both, commit=False)
            # A and B overlap: B opens first on t1, A aborts on t1 while B is open, B commits
            txn_batches(tb, 0, [t1], 2, "none")
            txn_batches(ta, 3, both, 2, "snappy")
            w.append(t1, w.records(2), pid=idem, epoch=0)
            w.end_txn(ta, 3, both, commit=round_ != 1)
            txn_batches(tb, 0, [t1, t0], 1, "gzip")
            w.end_txn(tb, 0, [t1, t0], commit=round_ != 2)
            plain(t0)
            plain(t1)

        # 5. LogAppendTime: plog stamps every batch.
        for i in range(40):
            w.append((LOG_APPEND_TIME_TOPIC, 0), w.records(rng.randint(1, 8)), codec=CODECS[i % len(CODECS)])

        assert not w.open_txn, w.open_txn
        for tp, log in manager.logs.items():
            scenario.end_offsets[tuple(tp)] = log.log_end_offset
            scenario.segment_counts[tuple(tp)] = len(log.segments)
    finally:
        manager.close()
    return scenario
