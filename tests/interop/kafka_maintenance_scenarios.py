"""The maintenance scenario: what a real broker writes so that its own cleaner and
retention can judge ``plog compact`` and ``plog retention``.

One broker per Kafka version, with its cleaner **disabled** and its retention task
**never due** while it is fed (:data:`PRODUCING_BROKER_SETTINGS`), gets four topics
(:func:`maintenance_topics`), all with 2 KiB segments (so there are many non-active
segments; Kafka 4.x only takes that through ``internal.segment.bytes``):

* :data:`COMPACTED` (``cleanup.policy=compact``, no ratio of its own): keys overwritten
  round after round by several idempotent producers (a new producer id per round), one
  codec per round (none, gzip, zstd, lz4), headers on some records, explicit timestamps on
  some; tombstones that later values supersede and tombstones that are the key's last word;
  a committed transaction, an aborted one (whose values must not shadow the older committed
  ones) with a plain producer writing into the open transaction's span, a last committed
  one; then unique-key padding so that all of that lies below the active segment. A key-less
  record is offered first and must be refused (``INVALID_RECORD``).
* :data:`RETAIN_TIME` (``retention.ms`` 1 hour): records stamped 5 hours ago, then current
  ones: the oldest segments are expired, the segment where the two meet is not.
* :data:`RETAIN_BYTES` (``retention.bytes`` 8000): current records, ~12 segments.
* :data:`RETAIN_ALL` (``retention.ms`` 1 hour): only old records, so every segment -
  the active one included - is expired: Kafka rolls a new empty segment first.

The broker is then stopped cleanly; the tests copy its directory and let a second broker
with :data:`JUDGE_BROKER_SETTINGS` (cleaner on at ratio 0.01, retention every 500 ms) do
the maintenance on one copy while plog does it on another.

Nothing here imports plog: this side describes what Kafka did.
"""

from __future__ import annotations

import os
import random
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path

from kafka_scenarios import Sent, _create_topics, _producer, _Recorder
from kafka_versions import small_segment_config

COMPACTED = "mt-compacted"
RETAIN_TIME = "mt-retain-time"
RETAIN_BYTES = "mt-retain-bytes"
RETAIN_ALL = "mt-retain-all"
RETENTION_TOPICS = (RETAIN_TIME, RETAIN_BYTES, RETAIN_ALL)

SEGMENT_BYTES = 2048
RETENTION_MS = 3_600_000
RETENTION_BYTES = 8000
OLD_AGE_MS = 5 * 3_600_000  # the "old" records: 5 hours before the scenario ran
TXN_ID = "plog-maintenance-txn"

#: The producing broker: its cleaner off and its retention task not run before the stop
#: (the first run would come after log.initial.task.delay.ms; the clean shutdown writes
#: every checkpoint anyway), so the copies hold the dirty, unexpired logs.
PRODUCING_BROKER_SETTINGS = {
    "log.cleaner.enable": "false",
    "log.initial.task.delay.ms": "3600000",
    "log.retention.check.interval.ms": "3600000",
}

#: The judging broker, started on copy A: the cleaner cleans any compacted log with a
#: dirty ratio above 0.01 (so the topic needs no ratio of its own and plog gets the same
#: threshold through --min-cleanable-dirty-ratio), retention runs every 500 ms. The files
#: it replaces or deletes stay as ``*.deleted`` for an hour (``log.segment.delete.delay.ms``,
#: the broker default of ``file.delete.delay.ms``), so they are still there, whatever the
#: machine's speed, when the tests compare them with plog's (which keeps them for the
#: topic default, a minute, and is compared right after it ran).
JUDGE_MIN_CLEANABLE_RATIO = "0.01"
JUDGE_BROKER_SETTINGS = {
    "log.cleaner.enable": "true",
    "log.cleaner.min.cleanable.ratio": JUDGE_MIN_CLEANABLE_RATIO,
    "log.cleaner.backoff.ms": "200",
    "log.retention.check.interval.ms": "500",
    "log.initial.task.delay.ms": "500",
    "log.segment.delete.delay.ms": "3600000",
}

#: The codecs of the compacted topic's rounds. Not snappy: plog's snappy blocks come from
#: a different implementation than snappy-java's and are documented as not byte-identical,
#: and the cleaned segments are compared byte for byte.
COMPACTED_CODECS = (None, "gzip", "zstd", "lz4")


@dataclass
class MaintenanceScenario:
    version: str
    topics: dict[str, dict]
    manifest: list[Sent] = field(default_factory=list)
    keyless_error: str | None = None  # how the broker refused the key-less record
    aborted_keys: tuple[bytes, ...] = ()
    produced_at_ms: int = 0

    def sent_to(self, tp: tuple[str, int]) -> list[Sent]:
        return sorted((s for s in self.manifest if s.tp == tp), key=lambda s: s.offset)


def maintenance_topics(version: str) -> dict[str, dict]:
    seg = small_segment_config(version)
    return {
        COMPACTED: {"partitions": 1, "configs": {"cleanup.policy": "compact", seg: str(SEGMENT_BYTES)}},
        RETAIN_TIME: {"partitions": 1, "configs": {"retention.ms": str(RETENTION_MS), seg: str(SEGMENT_BYTES)}},
        RETAIN_BYTES: {"partitions": 1, "configs": {"retention.bytes": str(RETENTION_BYTES),
                                                     seg: str(SEGMENT_BYTES)}},
        RETAIN_ALL: {"partitions": 1, "configs": {"retention.ms": str(RETENTION_MS), seg: str(SEGMENT_BYTES)}},
    }


def _headers(i: int) -> tuple:
    if i % 3 == 0:
        return (("h", f"v{i}".encode()), ("empty", b""))
    if i % 7 == 1:
        return (("ключ", "значение ✓".encode()),)
    return ()


def _value(rng: random.Random, label: str) -> bytes:
    return f"{label}:".encode() + rng.randbytes(rng.randint(8, 40)).hex().encode()


def _refuse_keyless(bootstrap: str) -> str | None:
    """Offer one key-less record to the compacted topic on its own (a refused batch fails
    as a whole); returns the error the producer got, None if it was accepted."""
    # Retries only cover transient errors (a leader not known yet): INVALID_RECORD is final.
    p = _producer(bootstrap, enable_idempotence=False, linger_ms=0, client_id="plog-keyless")
    try:
        fut = p.send(COMPACTED, key=None, value=b"no key")
        p.flush()
        try:
            fut.get(timeout=30)
        except Exception as e:  # noqa: BLE001  (the refusal is what we want to see)
            return f"{type(e).__name__}: {e}"
        return None
    finally:
        p.close()


def _produce_compacted(bootstrap: str, rec: _Recorder, rng: random.Random, now: int) -> tuple[bytes, ...]:
    keys = [f"k-{k:02d}".encode() for k in range(24)]
    seq = [0]

    def round_(codec, round_no: int, which, *, tombstone=()):
        p = _producer(bootstrap, compression_type=codec, batch_size=1024, linger_ms=5,
                      client_id=f"plog-compact-r{round_no}")
        try:
            for key in which:
                i = seq[0]
                seq[0] += 1
                value = None if key in tombstone else _value(rng, f"r{round_no}")
                ts = now - 120_000 + i if i % 4 == 0 else None
                rec.send(p, COMPACTED, key=key, value=value, headers=_headers(i), timestamp=ts)
                if i % 9 == 8:
                    p.flush()
            p.flush()
            rec.collect()
        finally:
            p.close()

    for r in range(4):
        round_(COMPACTED_CODECS[r % len(COMPACTED_CODECS)], r, keys)

    txn = _producer(bootstrap, transactional_id=TXN_ID, batch_size=1024, linger_ms=5, client_id="plog-compact-txn")
    plain = _producer(bootstrap, batch_size=1024, linger_ms=5, client_id="plog-compact-plain")
    aborted_keys = tuple(keys[10:15])
    try:
        txn.init_transactions()
        # T1, committed: newer values for k-20..k-23 and a key only a transaction wrote.
        txn.begin_transaction()
        for key in [*keys[20:24], b"txn-only"]:
            rec.send(txn, COMPACTED, key=key, value=_value(rng, "t1"), txn="t1")
        txn.flush()
        txn.commit_transaction()
        rec.collect({"t1": "committed"})

        for r in (4, 5):  # round 4 tombstones k-00..k-05; rounds 6 and 7 write them again
            round_(COMPACTED_CODECS[r % len(COMPACTED_CODECS)], r, keys, tombstone=set(keys[:6]) if r == 4 else ())

        # T2, aborted: values for k-10..k-14 that must not shadow round 5's; a plain producer
        # writes k-15..k-17 while it is open (their newest values, inside its span).
        txn.begin_transaction()
        for key in aborted_keys:
            rec.send(txn, COMPACTED, key=key, value=_value(rng, "t2-aborted"), headers=(("txn", b"aborted"),),
                     txn="t2")
        txn.flush()
        for key in keys[15:18]:
            rec.send(plain, COMPACTED, key=key, value=_value(rng, "inside-t2"))
        plain.flush()
        txn.abort_transaction()
        rec.collect({"t2": "aborted"})

        for r in (6, 7):
            round_(COMPACTED_CODECS[r % len(COMPACTED_CODECS)], r, keys[:10])
        # Tombstones that are the key's last word: kept, with a delete horizon.
        round_(None, 8, keys[18:20], tombstone=set(keys[18:20]))

        # T3, committed, last transaction of the producer.
        txn.begin_transaction()
        for key in keys[20:22]:
            rec.send(txn, COMPACTED, key=key, value=_value(rng, "t3"), txn="t3")
        txn.flush()
        txn.commit_transaction()
        rec.collect({"t3": "committed"})
    finally:
        txn.close()
        plain.close()

    # Padding with unique keys: everything above lies in non-active (cleanable) segments.
    p = _producer(bootstrap, batch_size=1024, linger_ms=5, client_id="plog-compact-pad")
    try:
        for i in range(40):
            rec.send(p, COMPACTED, key=f"pad-{i:02d}".encode(), value=_value(rng, "pad") * 2)
            if i % 8 == 7:
                p.flush()
        p.flush()
        rec.collect()
    finally:
        p.close()
    return aborted_keys


def _produce_retention(bootstrap: str, rec: _Recorder, rng: random.Random, now: int) -> None:
    p = _producer(bootstrap, batch_size=1024, linger_ms=5, client_id="plog-retention")
    try:
        def send(topic: str, n: int, ts_of, label: str) -> None:
            for i in range(n):
                key = None if i % 5 == 4 else f"{label}-{i % 13}".encode()
                rec.send(p, topic, key=key, value=_value(rng, label), headers=_headers(i), timestamp=ts_of(i))
                if i % 10 == 9:
                    p.flush()
            p.flush()
            rec.collect()

        old = now - OLD_AGE_MS
        send(RETAIN_TIME, 150, lambda i: old + i * 1000, "old")
        send(RETAIN_TIME, 50, lambda i: None, "new")
        send(RETAIN_BYTES, 300, lambda i: None, "b")
        send(RETAIN_ALL, 120, lambda i: old + i * 1000, "gone")
    finally:
        p.close()


def run_maintenance_scenario(bootstrap: str, version: str, *, seed: int = 4711) -> MaintenanceScenario:
    """Create the topics and produce into the broker at ``bootstrap`` (whose cleaner is off);
    does not stop the broker."""
    rng = random.Random(seed)
    topics = maintenance_topics(version)
    _create_topics(bootstrap, topics)
    _wait_for_leaders(bootstrap, [(t, 0) for t in topics])
    scenario = MaintenanceScenario(version, topics)
    result_shim = _ManifestShim(scenario)
    rec = _Recorder(result_shim)
    now = int(time.time() * 1000)
    scenario.keyless_error = _refuse_keyless(bootstrap)
    scenario.aborted_keys = _produce_compacted(bootstrap, rec, rng, now)
    _produce_retention(bootstrap, rec, rng, now)
    scenario.produced_at_ms = now
    return scenario


class _ManifestShim:
    """What ``_Recorder`` needs of a result: a ``manifest`` list."""

    def __init__(self, scenario: MaintenanceScenario):
        self.manifest = scenario.manifest


def _wait_for_leaders(bootstrap: str, partitions, timeout: float = 60) -> None:
    """Until every new partition answers ListOffsets (it has a leader with its log loaded)."""
    from kafka.errors import KafkaError

    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            got = earliest_offsets(bootstrap, partitions)
            if all(tp in got for tp in partitions):
                return
            last = got
        except KafkaError as e:
            last = repr(e)
        time.sleep(0.2)
    raise TimeoutError(f"the new topics have no leader after {timeout:.0f} s (last: {last})")


# -- watching the judging broker ------------------------------------------------------------


def earliest_offsets(bootstrap: str, partitions) -> dict[tuple[str, int], int]:
    """ListOffsets EARLIEST (the log start offsets) of ``partitions``."""
    from kafka import KafkaConsumer
    from kafka.structs import TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, request_timeout_ms=10000, client_id="plog-earliest")
    try:
        got = consumer.beginning_offsets([TopicPartition(t, p) for t, p in partitions])
        return {(tp.topic, tp.partition): off for tp, off in got.items()}
    finally:
        consumer.close()


def wait_for_retention(broker, partitions, timeout: float = 60) -> dict[tuple[str, int], int]:
    """Until the broker's retention task has raised the log start offset of every one of
    ``partitions`` above 0 (each loses segments to exactly one rule, in one
    ``deleteOldSegments`` call, so the first raise is the whole of it); returns them."""
    from kafka_broker import _NotYet

    def raised():
        got = earliest_offsets(broker.bootstrap, partitions)
        if all(got.get(tp, 0) > 0 for tp in partitions):
            return got
        raise _NotYet(f"log start offsets so far: {got}")

    return broker._poll(raised, time.monotonic() + timeout, "retention did not delete segments")


# -- reading a partition folder by hand --------------------------------------------------------


@dataclass(frozen=True)
class BatchHeader:
    """The fixed v2 batch header fields the tests look at (kafka-format.md §2.1)."""

    base_offset: int
    length: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    record_count: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & 0x40)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & 0x20)


def batch_headers(log_file: Path) -> list[BatchHeader]:
    """Every batch header of a ``.log`` file (magic 2 only; the scenario writes nothing else)."""
    data = Path(log_file).read_bytes()
    out = []
    pos = 0
    while pos + 61 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        magic = data[pos + 16]
        assert magic == 2, f"{log_file}: magic {magic} at {pos}"
        attributes, last_delta, base_ts, max_ts, pid = struct.unpack_from(">hiqqq", data, pos + 21)
        count = struct.unpack_from(">i", data, pos + 57)[0]
        out.append(BatchHeader(base, length, attributes, last_delta, base_ts, max_ts, pid, count))
        pos += 12 + length
    return out


def segment_bases(pdir: Path) -> list[int]:
    """Base offsets of the live segments (``<base>.log``; ``.deleted``/``.cleaned``/``.swap``
    files are not segments)."""
    return sorted(int(n[:-4]) for n in os.listdir(pdir) if n.endswith(".log") and n[:-4].isdigit())


def delete_horizons(pdir: Path) -> set[int]:
    """The delete horizons (base timestamps of batches with attribute bit 6) of a folder."""
    out = set()
    for base in segment_bases(pdir):
        out |= {b.base_timestamp for b in batch_headers(Path(pdir) / f"{base:020d}.log") if b.has_delete_horizon}
    return out
