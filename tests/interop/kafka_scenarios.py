"""What the interop suite makes a real broker write, with kafka-python, and what it sent.

Two scenarios, each against its own freshly formatted broker:

* :func:`run_written_scenario` ("Kafka writes, plog reads"; the broker is then stopped
  cleanly): one topic per codec (none, gzip, snappy, lz4, zstd) with keyed and keyless
  records, headers, tombstones and explicit timestamps; a topic with 4 KiB segments (many
  segments); a three-partition topic; an idempotent producer; transactions committed and
  aborted (a plain producer writes into the open aborted transaction's partition); a
  compacted topic whose cleaner is made to run (small segments, dirty ratio 0.01, short
  ``delete.retention.ms``/``segment.ms``) and waited for; a ``LogAppendTime`` topic (plain
  and gzip batches); a consumer group that consumes and commits. Afterwards kafka-python
  consumers read every partition back (read_uncommitted, and read_committed for the
  transactional topic).
* :func:`run_crash_scenario` (the broker is then SIGKILLed): a smaller mix without a
  compacted topic of our own (the cleaner would change a restarted copy), and topics that
  :func:`damage_killed_dir` damages after the kill (a torn tail, a missing offset index, a
  missing time index, an unreadable producer snapshot).

Every acknowledged record is a :class:`Sent` in the :class:`ScenarioResult` manifest, with
the offset and timestamp of its ``RecordMetadata`` (for ``LogAppendTime``, the broker's).
"""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

from kafka_versions import small_segment_config

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
GROUP_ID = "plog-interop-group"
TXN_TOPIC = "txn"
COMPACTED_TOPIC = "compacted"
LOG_APPEND_TIME_TOPIC = "log-append-time"
MULTI_TOPIC = "multi"
TORN_TOPIC = "crash-torn"


@dataclass(frozen=True)
class Sent:
    """One acknowledged record. ``txn``: None (not transactional), "committed", "aborted"."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple
    timestamp: int
    txn: str | None = None

    @property
    def tp(self) -> tuple[str, int]:
        return (self.topic, self.partition)


@dataclass(frozen=True)
class Consumed:
    """One record as a kafka-python consumer returned it."""

    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple
    timestamp: int
    timestamp_type: int


@dataclass
class ScenarioResult:
    version: str
    manifest: list[Sent] = field(default_factory=list)
    topics: dict[str, dict] = field(default_factory=dict)  # name -> {"partitions": n, "configs": {...}}
    consumed: dict[str, dict[tuple[str, int], list[Consumed]]] = field(default_factory=dict)  # isolation -> tp
    end_offsets: dict[tuple[str, int], int] = field(default_factory=dict)  # high watermarks before the stop
    committed: dict[tuple[str, int], int] = field(default_factory=dict)  # the group's committed offsets
    notes: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)

    def sent_to(self, tp: tuple[str, int]) -> list[Sent]:
        return sorted((s for s in self.manifest if s.tp == tp), key=lambda s: s.offset)

    def partitions(self) -> list[tuple[str, int]]:
        return sorted((t, p) for t, d in self.topics.items() for p in range(d["partitions"]))


# -- helpers --------------------------------------------------------------------------------


def _create_topics(bootstrap: str, topics: dict[str, dict]) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000, client_id="plog-scenario")
    try:
        admin.create_topics([NewTopic(name, d["partitions"], 1, topic_configs=d["configs"])
                             for name, d in topics.items()], timeout_ms=30000)
    finally:
        admin.close()


def _producer(bootstrap: str, **kw):
    from kafka import KafkaProducer

    kw.setdefault("acks", "all")
    kw.setdefault("linger_ms", 20)
    kw.setdefault("request_timeout_ms", 30000)
    kw.setdefault("retries", 5)
    return KafkaProducer(bootstrap_servers=bootstrap, client_id=kw.pop("client_id", "plog-scenario"), **kw)


class _Recorder:
    """Sends records and turns the futures into :class:`Sent` entries."""

    def __init__(self, result: ScenarioResult):
        self.result = result
        self.pending: list = []

    def send(self, producer, topic, *, key=None, value=None, headers=(), timestamp=None, partition=None,
             txn=None):
        fut = producer.send(topic, key=key, value=value, headers=list(headers), timestamp_ms=timestamp,
                            partition=partition)
        self.pending.append((fut, key, value, tuple(headers), txn))
        return fut

    def collect(self, txn_outcome: dict | None = None, timeout: float = 60) -> None:
        """Wait for every pending future; ``txn_outcome`` maps a txn label to its outcome."""
        for fut, key, value, headers, txn in self.pending:
            md = fut.get(timeout=timeout)
            outcome = txn_outcome.get(txn, txn) if (txn and txn_outcome) else txn
            self.result.manifest.append(Sent(md.topic, md.partition, md.offset, key, value, headers, md.timestamp,
                                             outcome))
        self.pending = []


def _value(rng: random.Random, i: int, size: int) -> bytes:
    """Mostly compressible text with a random tail, so codecs have something to do."""
    text = (f"record {i} " * (size // 10 + 1)).encode()[: max(0, size - 16)]
    return text + rng.randbytes(min(16, size))


def _headers(i: int) -> tuple:
    if i % 5 == 0:
        return (("trace", f"t-{i}".encode()), ("empty", b""), ("hé-ключ", "välue ✓".encode()))
    if i % 5 == 1:
        return (("n", str(i).encode()),)
    return ()


def _mixed_records(rng: random.Random, n: int, *, base_ts: int, big_every: int = 50):
    """(key, value, headers, timestamp) tuples: keyed/keyless, tombstones, headers,
    explicit (some out of order) and producer-assigned timestamps, a few larger values."""
    out = []
    for i in range(n):
        key = None if i % 4 == 3 else f"key-{i % 37}".encode()
        if key is not None and i % 11 == 7:
            value = None  # a tombstone
        else:
            value = _value(rng, i, 1500 if i % big_every == big_every - 1 else rng.randint(10, 200))
        ts = base_ts + (i * 7919) % 1000 if i % 3 == 0 else None
        out.append((key, value, _headers(i), ts))
    return out


def _send_all(rec: _Recorder, producer, topic, records, *, flush_every: int = 40, partition=None) -> None:
    for i, (key, value, headers, ts) in enumerate(records):
        rec.send(producer, topic, key=key, value=value, headers=headers, timestamp=ts, partition=partition)
        if (i + 1) % flush_every == 0:
            producer.flush()
    producer.flush()
    rec.collect()


def consume_all(bootstrap: str, partitions, isolation: str = "read_uncommitted",
                timeout: float = 60, ends: dict | None = None) -> tuple[dict, dict]:
    """Every record of ``partitions`` from the beginning, as a kafka-python consumer sees it;
    returns ``({tp: [Consumed]}, {tp: end offset})`` (end offset: HW, or LSO for read_committed,
    as the broker reports it when the read starts; or ``ends``, ``{(topic, partition): offset}``,
    when the caller knows where each partition ends)."""
    from kafka import KafkaConsumer
    from kafka.structs import TopicPartition

    tps = [TopicPartition(t, p) for t, p in partitions]
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False,
                             client_id=f"plog-readback-{isolation}", request_timeout_ms=30000,
                             fetch_max_wait_ms=100)
    try:
        consumer.assign(tps)
        if ends is None:
            ends = consumer.end_offsets(tps)
        else:
            ends = {TopicPartition(t, p): off for (t, p), off in ends.items()}
        consumer.seek_to_beginning(*tps)
        out = {(tp.topic, tp.partition): [] for tp in tps}
        deadline = time.monotonic() + timeout
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            if time.monotonic() > deadline:
                left = {str(tp): (consumer.position(tp), ends[tp]) for tp in tps if consumer.position(tp) < ends[tp]}
                raise TimeoutError(f"{isolation} read-back did not reach the end offsets: {left}")
            for tp, msgs in consumer.poll(timeout_ms=500).items():
                for m in msgs:
                    out[(tp.topic, tp.partition)].append(
                        Consumed(m.offset, m.key, m.value, tuple(m.headers or ()), m.timestamp, m.timestamp_type))
        return out, {(tp.topic, tp.partition): off for tp, off in ends.items()}
    finally:
        consumer.close()


def _consume_and_commit(bootstrap: str, topic: str, partitions: int, timeout: float = 60) -> dict:
    """A consumer group member that reads ``topic`` to its end and commits (sync)."""
    from kafka import KafkaConsumer
    from kafka.structs import TopicPartition

    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=GROUP_ID, enable_auto_commit=False,
                             auto_offset_reset="earliest", client_id="plog-group-member",
                             request_timeout_ms=30000, session_timeout_ms=10000, heartbeat_interval_ms=1000,
                             fetch_max_wait_ms=100)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        deadline = time.monotonic() + timeout
        ends = None
        while True:
            if time.monotonic() > deadline:
                raise TimeoutError(f"group {GROUP_ID} did not consume {topic} to its end")
            consumer.poll(timeout_ms=500)
            if len(consumer.assignment()) < partitions:
                continue
            if ends is None:
                ends = consumer.end_offsets(tps)
                # commit once half way, so __consumer_offsets holds more than one commit
                consumer.commit()
            if all(consumer.position(tp) >= ends[tp] for tp in tps):
                break
        consumer.commit()
        return {(tp.topic, tp.partition): consumer.committed(tp) for tp in tps}
    finally:
        consumer.close()


def partition_dir(log_dir: Path, topic: str, partition: int) -> Path:
    return Path(log_dir) / f"{topic}-{partition}"


def read_offset_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """A log dir offset checkpoint (version 0), parsed by hand: the scenarios watch a live
    broker's files and must not depend on the code under test."""
    if not path.exists():
        return {}
    lines = path.read_text().splitlines()
    if len(lines) < 2:
        return {}
    out = {}
    for line in lines[2: 2 + int(lines[1])]:
        topic, part, off = line.rsplit(" ", 2)
        out[(topic, int(part))] = int(off)
    return out


def wait_for_cleaning(log_dir: Path, topic: str, partition: int, clean_up_to: int, timeout: float = 60) -> float:
    """Until the broker's cleaner checkpoint for the partition reaches ``clean_up_to`` and
    no ``.cleaned``/``.swap``/``.deleted`` file is left; returns the seconds waited."""
    start = time.monotonic()
    pdir = partition_dir(log_dir, topic, partition)
    last = None
    while time.monotonic() - start < timeout:
        cp = read_offset_checkpoint(Path(log_dir) / "cleaner-offset-checkpoint").get((topic, partition), -1)
        temp = [n for n in os.listdir(pdir) if n.endswith((".cleaned", ".swap", ".deleted"))]
        last = (cp, temp)
        if cp >= clean_up_to and not temp:
            return time.monotonic() - start
        time.sleep(0.2)
    raise TimeoutError(f"the log cleaner did not clean {topic}-{partition} up to {clean_up_to} within "
                       f"{timeout:.0f} s (cleaner checkpoint, temporary files: {last})")


# -- the "Kafka writes, plog reads" scenario ------------------------------------------------


def written_topics(version: str) -> dict[str, dict]:
    seg = small_segment_config(version)
    topics = {f"codec-{c}": {"partitions": 1, "configs": {seg: "8192"}} for c in CODECS}
    topics.update({
        "many-segments": {"partitions": 1, "configs": {seg: "4096"}},
        MULTI_TOPIC: {"partitions": 3, "configs": {}},
        "idempotent": {"partitions": 1, "configs": {}},
        TXN_TOPIC: {"partitions": 2, "configs": {}},
        COMPACTED_TOPIC: {"partitions": 1, "configs": {
            "cleanup.policy": "compact", seg: "4096", "min.cleanable.dirty.ratio": "0.01",
            "delete.retention.ms": "100", "segment.ms": "100", "min.compaction.lag.ms": "0",
            "file.delete.delay.ms": "100"}},
        LOG_APPEND_TIME_TOPIC: {"partitions": 1, "configs": {"message.timestamp.type": "LogAppendTime"}},
    })
    return topics


def _run_transactions(rec, producer, outcomes, count: int, send, *, label: str, while_open_aborted=None) -> None:
    """One transaction per outcome ("committed"/"aborted"), ``count`` records each sent by
    ``send(n, i, label)``; ``while_open_aborted(n)`` runs while an aborted one is open."""
    producer.init_transactions()
    labels = {}
    for n, outcome in enumerate(outcomes):
        labels[label.format(n)] = outcome
        producer.begin_transaction()
        for i in range(count):
            send(n, i, label.format(n))
        producer.flush()
        if outcome == "aborted" and while_open_aborted is not None:
            while_open_aborted(n)
        if outcome == "committed":
            producer.commit_transaction()
        else:
            producer.abort_transaction()
    rec.collect(labels)


def run_written_scenario(bootstrap: str, log_dir: Path, version: str, *, seed: int = 20240611) -> ScenarioResult:
    """Produce the written scenario into the broker at ``bootstrap`` (whose log dir is
    ``log_dir``), wait for the cleaner, read everything back. Does not stop the broker."""
    t0 = time.monotonic()
    rng = random.Random(seed)
    result = ScenarioResult(version, topics=written_topics(version))
    _create_topics(bootstrap, result.topics)
    rec = _Recorder(result)
    now = int(time.time() * 1000)

    # 1. One topic per codec; keyed/keyless, tombstones, headers, explicit timestamps.
    for codec in CODECS:
        p = _producer(bootstrap, compression_type=None if codec == "none" else codec, batch_size=4096)
        try:
            _send_all(rec, p, f"codec-{codec}", _mixed_records(rng, 300, base_ts=now - 60_000))
        finally:
            p.close()

    # 2. Many segments: 4 KiB segments, batches below that (a batch above segment.bytes is refused).
    p = _producer(bootstrap, batch_size=1024, linger_ms=5)
    try:
        _send_all(rec, p, "many-segments", _mixed_records(rng, 900, base_ts=now - 50_000, big_every=10 ** 9),
                  flush_every=10)
    finally:
        p.close()

    # 3. Three partitions, keys spread by the default partitioner.
    p = _producer(bootstrap, compression_type="lz4")
    try:
        _send_all(rec, p, MULTI_TOPIC, [(f"user-{i}".encode(), _value(rng, i, 60), _headers(i), None)
                                        for i in range(240)])
    finally:
        p.close()

    # 4. Idempotent producer (producer id, epoch and sequences in every batch).
    p = _producer(bootstrap, enable_idempotence=True, compression_type="zstd", max_in_flight_requests_per_connection=5)
    try:
        _send_all(rec, p, "idempotent", _mixed_records(rng, 300, base_ts=now - 40_000))
    finally:
        p.close()

    # 5. Transactions: committed, aborted (with a plain producer writing into the open
    #    aborted transaction's partition), committed again.
    tp_ = _producer(bootstrap, transactional_id="plog-interop-txn", compression_type="gzip")
    plain = _producer(bootstrap)
    try:

        def send(n: int, i: int, label: str) -> None:
            rec.send(tp_, TXN_TOPIC, key=f"t{n}-{i}".encode(), value=_value(rng, i, 80), headers=_headers(i),
                     partition=i % 2, txn=label)

        def inside_aborted(n: int) -> None:
            for i in range(5):
                rec.send(plain, TXN_TOPIC, key=f"plain-{n}-{i}".encode(), value=b"outside the transaction",
                         partition=0)
            plain.flush()

        _run_transactions(rec, tp_, ("committed", "aborted", "committed", "aborted", "committed"), 25, send,
                          label="txn-{}", while_open_aborted=inside_aborted)
    finally:
        tp_.close()
        plain.close()

    # 6. A compacted topic, cleaned by the broker.
    p = _producer(bootstrap, batch_size=1024, linger_ms=5)
    try:
        keys = [f"ck-{k:02d}".encode() for k in range(25)]
        for r in range(24):
            for k, key in enumerate(keys):
                rec.send(p, COMPACTED_TOPIC, key=key, value=_value(rng, r * 100 + k, 60), headers=_headers(r + k))
            p.flush()
        for key in keys[:5]:  # tombstones
            rec.send(p, COMPACTED_TOPIC, key=key, value=None)
        p.flush()
        rec.collect()
        time.sleep(0.3)  # segment.ms=100: the next record rolls the segment; all before it is cleanable
        last_dirty = max(s.offset for s in result.manifest if s.topic == COMPACTED_TOPIC)
        rec.send(p, COMPACTED_TOPIC, key=b"roll", value=b"rolls the active segment")
        p.flush()
        rec.collect()
    finally:
        p.close()

    # 7. LogAppendTime: the broker stamps the batches (plain and gzip batches).
    for codec in (None, "gzip"):
        p = _producer(bootstrap, compression_type=codec)
        try:
            _send_all(rec, p, LOG_APPEND_TIME_TOPIC, _mixed_records(rng, 60, base_ts=now - 3_600_000), flush_every=15)
        finally:
            p.close()
    result.timings["produce"] = time.monotonic() - t0

    # 8. A consumer group that consumes and commits.
    result.committed = _consume_and_commit(bootstrap, MULTI_TOPIC, 3)

    # 9. The cleaner: wait until it has cleaned everything below the rolled segment.
    result.timings["cleaner_wait"] = wait_for_cleaning(log_dir, COMPACTED_TOPIC, 0, last_dirty + 1)

    # 10. Read everything back with kafka-python consumers.
    result.consumed["read_uncommitted"], result.end_offsets = consume_all(bootstrap, result.partitions())
    result.consumed["read_committed"], _ = consume_all(bootstrap, [(TXN_TOPIC, 0), (TXN_TOPIC, 1)],
                                                       "read_committed")
    result.timings["total"] = time.monotonic() - t0
    return result


# -- the SIGKILL scenario ---------------------------------------------------------------------


def crash_topics(version: str) -> dict[str, dict]:
    seg = small_segment_config(version)
    return {
        "crash-segments": {"partitions": 1, "configs": {seg: "4096"}},
        "crash-codecs": {"partitions": 2, "configs": {seg: "16384"}},
        "crash-idempotent": {"partitions": 1, "configs": {}},
        "crash-txn": {"partitions": 1, "configs": {}},
        "crash-lat": {"partitions": 1, "configs": {"message.timestamp.type": "LogAppendTime"}},
        TORN_TOPIC: {"partitions": 1, "configs": {}},
        # Damaged after the kill (see damage_killed_dir): small segments so there are
        # segments below the recovery point, and producer snapshots (idempotent producer).
        "crash-noindex": {"partitions": 1, "configs": {seg: "4096"}},
        "crash-notimeindex": {"partitions": 1, "configs": {seg: "4096"}},
        "crash-badsnapshot": {"partitions": 1, "configs": {seg: "4096"}},
    }


#: The partitions :func:`damage_killed_dir` damages beyond a torn tail.
DAMAGED = [("crash-noindex", 0), ("crash-notimeindex", 0), ("crash-badsnapshot", 0)]


def run_crash_scenario(bootstrap: str, log_dir: Path, version: str, *, seed: int = 77) -> ScenarioResult:
    """Produce the crash scenario; the caller SIGKILLs the broker afterwards. Waits until
    the broker's checkpoint threads (1 s intervals) have written the recovery points, so
    the recovery point of ``crash-segments`` sits at its last roll and the others at 0
    (Kafka flushes only on roll, ``flush.messages`` being "never")."""
    t0 = time.monotonic()
    rng = random.Random(seed)
    result = ScenarioResult(version, topics=crash_topics(version))
    _create_topics(bootstrap, result.topics)
    rec = _Recorder(result)
    now = int(time.time() * 1000)

    p = _producer(bootstrap, batch_size=1024, linger_ms=5)
    try:
        _send_all(rec, p, "crash-segments", _mixed_records(rng, 500, base_ts=now - 10_000, big_every=10 ** 9),
                  flush_every=10)
    finally:
        p.close()
    # Every codec into the same two partitions: mixed codecs inside one segment.
    for codec in CODECS:
        p = _producer(bootstrap, compression_type=None if codec == "none" else codec, batch_size=8192)
        try:
            for part in (0, 1):
                _send_all(rec, p, "crash-codecs", _mixed_records(rng, 80, base_ts=now - 9_000), partition=part)
        finally:
            p.close()
    result.committed = _consume_and_commit(bootstrap, "crash-codecs", 2)
    p = _producer(bootstrap, enable_idempotence=True, compression_type="snappy")
    try:
        _send_all(rec, p, "crash-idempotent", _mixed_records(rng, 200, base_ts=now - 8_000))
    finally:
        p.close()
    tp_ = _producer(bootstrap, transactional_id="plog-crash-txn")
    try:
        _run_transactions(rec, tp_, ("committed", "aborted", "committed"), 20,
                          lambda n, i, label: rec.send(tp_, "crash-txn", key=f"c{n}-{i}".encode(),
                                                       value=_value(rng, i, 50), txn=label),
                          label="c{}")
    finally:
        tp_.close()
    p = _producer(bootstrap, compression_type="lz4")
    try:
        _send_all(rec, p, "crash-lat", _mixed_records(rng, 100, base_ts=now - 7_000), flush_every=20)
    finally:
        p.close()
    p = _producer(bootstrap)
    try:
        _send_all(rec, p, TORN_TOPIC, _mixed_records(rng, 100, base_ts=now - 6_000), flush_every=25)
    finally:
        p.close()
    for topic, idempotent in (("crash-noindex", False), ("crash-notimeindex", False), ("crash-badsnapshot", True)):
        p = _producer(bootstrap, batch_size=1024, linger_ms=5, enable_idempotence=idempotent)
        try:
            _send_all(rec, p, topic, _mixed_records(rng, 250, base_ts=now - 5_000, big_every=10 ** 9),
                      flush_every=10)
        finally:
            p.close()
    result.timings["produce"] = time.monotonic() - t0
    result.consumed["read_uncommitted"], result.end_offsets = consume_all(bootstrap, result.partitions())
    # Let the 1 s checkpoint threads catch up (recovery points, high watermarks).
    time.sleep(2.5)
    result.timings["total"] = time.monotonic() - t0
    return result


def damage_killed_dir(log_dir: Path) -> list[str]:
    """Damage a killed broker's directory the way crashes and operators do, before it is
    copied for plog and for Kafka (both recover the same bytes); returns what was done.

    * ``crash-torn``: 7 bytes cut off the last segment (a torn write).
    * ``crash-noindex``: the ``.index`` of the second segment (below the recovery point)
      deleted: Kafka rebuilds it (recovers that segment) even below the recovery point.
    * ``crash-notimeindex``: the ``.timeindex`` of the second segment deleted: Kafka
      creates an empty one and does not rebuild it (the segment is below the recovery
      point and its offset index is fine).
    * ``crash-badsnapshot``: the newest producer snapshot cut to 10 bytes: Kafka deletes a
      snapshot it cannot read and loads the previous one.
    """
    done = []
    pdir = partition_dir(log_dir, TORN_TOPIC, 0)
    last = sorted(pdir.glob("*.log"))[-1]
    size = last.stat().st_size
    os.truncate(last, size - 7)
    done.append(f"cut {last.relative_to(log_dir)} from {size} to {size - 7} bytes")
    for topic, suffix in (("crash-noindex", ".index"), ("crash-notimeindex", ".timeindex")):
        segments = sorted(partition_dir(log_dir, topic, 0).glob("*.log"))
        assert len(segments) >= 3, f"{topic} has {len(segments)} segments; the scenario needs more"
        victim = segments[1].with_suffix(suffix)
        victim.unlink()
        done.append(f"deleted {victim.relative_to(log_dir)}")
    snapshots = sorted(partition_dir(log_dir, "crash-badsnapshot", 0).glob("*.snapshot"))
    assert len(snapshots) >= 2, f"crash-badsnapshot has {len(snapshots)} snapshots; the scenario needs two"
    os.truncate(snapshots[-1], 10)
    done.append(f"cut {snapshots[-1].relative_to(log_dir)} to 10 bytes")
    return done
