"""A follower's copy of a partition, written by plog's replication, read by real Kafka (issue 9).

plog's engine runs a 3-broker data directory, topic ``replicated`` (replicas [1, 2, 3],
``min.insync.replicas`` 2, small segments) through three leader epochs
(:func:`write_replicated`):

* **epoch 0**, leader 1: idempotent ``acks=all`` produces (no compression), replicated to 2
  and 3; then broker 1 appends one more batch as leader (``acks=1``, another idempotent
  producer) that no follower fetches, and crashes (``stop_broker(crash=True)``);
* **epoch 1**: the controller fences broker 1 after ``broker.session.timeout.ms``
  (``controller_tick``) and elects broker 2; produces (lz4) go to broker 2, ISR [2, 3];
* broker 1 starts again (``start_broker``): it recovers its directory (no clean-shutdown
  marker), truncates away its unreplicated batch with the leader-epoch protocol (the new
  leader's end offset for epoch 0), fetches epoch 1 and rejoins the ISR;
* **epoch 2**: a preferred leader election makes broker 1 leader again; produces (zstd).

Then real Apache Kafka (every version of ``kafka_versions.VERSIONS``) loads each broker's
folder of the partition: a broker creates topics ``from-broker-1``, ``-2``, ``-3`` and is
stopped cleanly; each of their partition folders gets the contents of plog's
``broker-<n>/replicated-0`` (the broker's ``partition.metadata``, which holds its topic id,
and its ``meta.properties`` are kept, as in test_plog_writes_kafka_reads.py) and plog's
offsets go into the log dir checkpoints. One broker start serves the three copies (broker 3
only ever followed; broker 2 led epoch 1 and followed again; broker 1 led, crashed,
truncated and led again):

* a kafka-python consumer reads every acknowledged record of each copy with plog's offsets,
  keys, values, headers and timestamps, and nothing of the truncated batch; the end offsets
  are plog's log end offsets;
* Kafka's ``leader-epoch-checkpoint`` of each copy, after the broker stopped, equals plog's
  entries [(0, 0), (1, ...), (2, ...)] exactly: the restarted broker elects leader epoch 2
  for a topic it created (see plog_scenarios.py), the epoch plog's copies end with, so
  Kafka's ``makeLeader`` adds nothing;
* Kafka loaded the copies without a WARN or ERROR about them and left their segments,
  indexes and producer snapshots as plog wrote them; Kafka's DumpLogSegments finds the
  crashed leader's producer in no snapshot (the truncation removed its state too).

``plog verify --strict`` passes on every broker directory of the data directory.
"""

from __future__ import annotations

import os
import random
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from cli_run import plog as run_plog
from kafka_broker import CLEAN_SHUTDOWN_FILE, copy_log_dir
from kafka_files import (
    first_difference,
    folder_differences,
    partition_files,
    read_epochs,
    read_offset_checkpoint,
    write_offset_checkpoint,
)
from kafka_scenarios import _create_topics, consume_all
from kafka_versions import once_per_version, small_segment_config

from plog.engine.cluster import brokers as engine_brokers
from plog.engine.cluster.data_dir import DataDir
from plog.engine.clients.producer import Producer
from plog.engine.storage.file_names import TopicPartition
from plog.formats.record_batch import encode_batch

pytestmark = pytest.mark.interop

TOPIC = "replicated"
TP = TopicPartition(TOPIC, 0)
BROKERS = (1, 2, 3)
#: Small segments and a dense index, so each copy has several segments and index entries.
TOPIC_CONFIGS = {"segment.bytes": "6000", "index.interval.bytes": "700"}
PER_EPOCH = 90  # acknowledged records produced in each leader epoch
DIVERGENT = 7  # records the crashed leader appended that no follower fetched
RECOVERY_POINTS = "recovery-point-offset-checkpoint"
LOG_STARTS = "log-start-offset-checkpoint"
HIGH_WATERMARKS = "replication-offset-checkpoint"
COMPARED = (".log", ".index", ".timeindex", ".txnindex", ".snapshot")


def kafka_topic(broker: int) -> str:
    return f"from-broker-{broker}"


# -- plog's side ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Acked:
    """One record plog acknowledged (acks=all)."""

    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple
    timestamp: int


@dataclass
class Replicated:
    data_dir: Path
    acked: list[Acked]
    #: the leader epoch each acknowledged range was produced in: [(epoch, first offset)]
    epochs: list[tuple[int, int]]
    divergent_producer_id: int
    divergent_offsets: tuple[int, int]  # [first, last] on the crashed leader, before truncation
    #: what start_broker(1) did: [(broker, log end offset, truncated to, reason)]
    truncations: list[tuple[int, int, int, str]]
    events: list[str] = field(default_factory=list)
    end_offset: int = 0

    def folder(self, broker: int) -> Path:
        return self.data_dir / f"broker-{broker}" / f"{TOPIC}-0"


def _records(rng: random.Random, n: int, first: int, base_ts: int) -> list[tuple]:
    """(key, value, headers, timestamp): keyed and keyless, null values, headers."""
    out = []
    for i in range(first, first + n):
        key = None if i % 4 == 3 else f"key-{rng.randrange(30)}".encode()
        value = None if i % 13 == 6 else (f"record {i} " * rng.randint(1, 12)).encode() + rng.randbytes(4)
        headers = (("n", str(i).encode()), ("empty", b"")) if i % 5 == 0 else ()
        out.append((key, value, headers, base_ts + i * 3))
    return out


def _produce(dd: DataDir, records, compression: str) -> list[Acked]:
    """acks=all, idempotent; small batches so every epoch spans several batches."""
    with Producer(dd, acks="all", enable_idempotence=True, compression_type=compression, batch_size=900,
                  linger_ms=10_000) as producer:
        futures = [(producer.send(TOPIC, value=v, key=k, headers=h, partition=0, timestamp_ms=ts), (k, v, h, ts))
                   for k, v, h, ts in records]
        producer.flush()
    out = []
    for fut, (k, v, h, ts) in futures:
        md = fut.get()
        out.append(Acked(md.offset, k, v, tuple(h), ts))
    return out


def write_replicated(base: Path, *, seed: int = 909) -> Replicated:
    """The three-epoch story of the module docstring, in a fresh data directory."""
    rng = random.Random(seed)
    dd = DataDir.init(base / "data", len(BROKERS))
    dd.create_topic(TOPIC, replica_assignment={0: list(BROKERS)}, configs={"min.insync.replicas": "2",
                                                                           **TOPIC_CONFIGS})
    base_ts = int(time.time() * 1000) - 60_000  # recent: Kafka must not expire or delete anything
    acked = _produce(dd, _records(rng, PER_EPOCH, 0, base_ts), "none")
    epochs = [(0, 0)]
    assert dd.partition_state(TP).leader == 1

    # Broker 1 appends a batch as leader (acks=1: nobody waits for the followers), then dies
    # before any follower fetched it.
    now = [int(time.time() * 1000)]

    def clock() -> int:
        return now[0]

    divergent_pid = dd.allocate_producer_id()
    with dd.writer(clock=clock) as w:
        batch = encode_batch([(i, base_ts + 500_000 + i, b"lost", b"never replicated %d" % i)
                              for i in range(DIVERGENT)], producer_id=divergent_pid, producer_epoch=0,
                             base_sequence=0)
        info = w.append(TP, batch, acks=1)
        divergent = (info.first_offset, info.last_offset)
        change = engine_brokers.stop_broker(dd, 1, crash=True, writer=w)
    events = [e.describe() for e in change.events]
    # The controller fences it once its session timed out and elects broker 2 (epoch 1).
    session_ms = int(dd.metadata.broker_configs.get("broker.session.timeout.ms", 9000))
    now[0] += session_ms + 1
    events += [e.describe() for e in engine_brokers.controller_tick(dd, clock=clock)]
    dd.reload()
    assert dd.partition_state(TP).leader == 2, events
    epochs.append((1, len(acked)))
    acked += _produce(dd, _records(rng, PER_EPOCH, len(acked), base_ts), "lz4")

    # Broker 1 comes back: recovers, truncates its divergent batch, catches up, rejoins the ISR.
    now[0] += 1000
    change = engine_brokers.start_broker(dd, 1, clock=clock)
    events += [e.describe() for e in change.events + change.replication.events]
    truncations = [(c.broker, c.truncation.log_end_offset, c.truncation.truncated_to, c.truncation.reason)
                   for c in change.replication.catch_ups if c.truncation is not None]
    _, elect_events = engine_brokers.elect_preferred_leaders(dd, [TOPIC])
    events += [e.describe() for e in elect_events]
    dd.reload()
    assert dd.partition_state(TP).leader == 1, events
    epochs.append((2, len(acked)))
    acked += _produce(dd, _records(rng, PER_EPOCH, len(acked), base_ts), "zstd")
    return Replicated(base / "data", acked, epochs, divergent_pid, divergent, truncations, events,
                      end_offset=len(acked))


@pytest.fixture(scope="session")
def replicated(tmp_path_factory) -> Replicated:
    """plog's data directory after the three epochs (closed cleanly); read-only."""
    return write_replicated(tmp_path_factory.mktemp("plog-replicated"))


def test_plog_replicas_went_through_three_epochs(replicated):
    """The scenario did what the Kafka checks are about: the crashed leader's batch was
    truncated by the leader-epoch protocol, every replica ends in sync with the same log
    end offset and high watermark, three epochs in every ``leader-epoch-checkpoint``."""
    r = replicated
    assert r.divergent_offsets == (PER_EPOCH, PER_EPOCH + DIVERGENT - 1)
    assert [(b, leo, to) for b, leo, to, _ in r.truncations] == [(1, PER_EPOCH + DIVERGENT, PER_EPOCH)], r.truncations
    assert "epoch 0" in r.truncations[0][3]
    assert [a.offset for a in r.acked] == list(range(3 * PER_EPOCH))
    dd = DataDir.open(r.data_dir)
    (desc,) = dd.describe_partitions(TOPIC)
    assert (desc.leader, desc.leader_epoch, desc.isr) == (1, 2, [1, 2, 3]), r.events
    assert not desc.offline and not desc.under_replicated
    for rep in desc.replica_states:
        assert (rep.log_end_offset, rep.high_watermark, rep.leader_epoch) == (r.end_offset, r.end_offset, 2), rep
    for b in BROKERS:
        assert read_epochs(r.folder(b) / "leader-epoch-checkpoint") == r.epochs, b
        assert len(list(r.folder(b).glob("*.log"))) >= 3, "small segments: several per replica"
        assert (r.data_dir / f"broker-{b}" / CLEAN_SHUTDOWN_FILE).exists()
    # Every replica holds the same records (the .log bytes may be cut into segments differently).
    logs = {b: b"".join(p.read_bytes() for p in sorted(r.folder(b).glob("*.log"))) for b in BROKERS}
    assert logs[1] == logs[2] == logs[3]


def test_plog_verify_every_broker_dir(replicated, capsys):
    """``plog verify --strict`` on each broker directory: no finding, exit 0."""
    for b in BROKERS:
        code, out, err = run_plog(capsys, "verify", "--strict", "--jobs", "1", str(replicated.data_dir / f"broker-{b}"))
        assert code == 0, f"broker-{b}: exit {code}\n{out}{err}"
        assert out == "", out


# -- Kafka's side -------------------------------------------------------------------------------------


@dataclass
class Served:
    version: str
    log_dir: Path  # the broker's log dir after it stopped cleanly
    ready_ends: dict  # ListOffsets answers once every copy was served
    consumed: dict  # (topic, 0) -> [Consumed]
    end_offsets: dict
    server_log: Path
    snapshot_dump: tuple  # DumpLogSegments on every .snapshot of plog's three copies: (out, err, code)


def install_replicas(r: Replicated, log_dir: Path) -> None:
    """plog's ``broker-<n>/replicated-0`` files into ``from-broker-<n>-0`` of a stopped
    broker's log dir (its ``partition.metadata`` kept), plog's offsets into the checkpoints;
    the broker's own clean-shutdown marker stays (every plog broker directory was closed
    cleanly, so Kafka loads the files as they are)."""
    ours = {(kafka_topic(b), 0): b for b in BROKERS}
    for (topic, _), b in ours.items():
        dest, src = log_dir / f"{topic}-0", r.folder(b)
        assert (dest / "partition.metadata").exists(), f"the broker did not create {dest}"
        for name in os.listdir(dest):
            if name != "partition.metadata":
                (dest / name).unlink()
        for name in os.listdir(src):
            if name != "partition.metadata":
                (dest / name).write_bytes((src / name).read_bytes())
    for name in (RECOVERY_POINTS, LOG_STARTS, HIGH_WATERMARKS):
        entries = {tp: o for tp, o in read_offset_checkpoint(log_dir / name).items() if tp not in ours}
        for tp, b in ours.items():
            plog_entry = read_offset_checkpoint(r.data_dir / f"broker-{b}" / name).get((TOPIC, 0))
            if plog_entry is not None:
                entries[tp] = plog_entry
        write_offset_checkpoint(log_dir / name, entries)
    assert (log_dir / CLEAN_SHUTDOWN_FILE).exists()


@pytest.fixture(scope="session")
def kafka_served_replicas(replicated, kafka_broker, dump_log_segments, tmp_path_factory):
    partitions = [(kafka_topic(b), 0) for b in BROKERS]

    def build(version: str) -> Served:
        base = tmp_path_factory.mktemp(f"kafka-{version}-replicas")
        broker = kafka_broker(version)
        try:
            configs = {(small_segment_config(version) if k == "segment.bytes" else k): v
                       for k, v in TOPIC_CONFIGS.items()}
            _create_topics(broker.bootstrap, {t: {"partitions": 1, "configs": configs} for t, _ in partitions})
            broker.wait_partitions_ready(partitions)
            broker.stop()
        except BaseException:
            broker.kill()
            raise
        log_dir = copy_log_dir(broker.log_dir, base / "served")
        install_replicas(replicated, log_dir)
        served = kafka_broker(version, log_dir=log_dir)
        try:
            ends = served.wait_partitions_ready(partitions)
            consumed, end_offsets = consume_all(served.bootstrap, partitions)
            served.stop()
        except BaseException:
            served.kill()
            raise
        snapshots = sorted(p for b in BROKERS for p in replicated.folder(b).glob("*.snapshot"))
        dumped = dump_log_segments(version, snapshots)
        return Served(version, log_dir, ends, consumed, end_offsets, served.server_log, dumped)

    return once_per_version(build, "serving plog's replicas")


@pytest.fixture(scope="session")
def served(kafka_served_replicas, kafka_version) -> Served:
    return kafka_served_replicas(kafka_version)


def test_kafka_serves_every_acknowledged_record(replicated, served):
    """Each copy, read from the beginning by kafka-python: every record plog acknowledged,
    with its offset, key, value, headers and timestamp (CreateTime), in order; nothing of
    the batch the crashed leader lost; the end offsets are plog's log end offsets."""
    want = [(a.offset, a.key, a.value, a.headers, a.timestamp, 0) for a in replicated.acked]
    problems = []
    for b in BROKERS:
        tp = (kafka_topic(b), 0)
        got = [(c.offset, c.key, c.value, tuple(c.headers), c.timestamp, c.timestamp_type) for c in served.consumed[tp]]
        if got != want:
            problems.append(f"broker-{b}'s copy: {first_difference(got, want, 'Kafka', 'plog')}")
        if any(c.key == b"lost" for c in served.consumed[tp]):
            problems.append(f"broker-{b}'s copy: Kafka serves the truncated batch")
    assert not problems, "\n".join(problems)
    assert served.ready_ends == {(kafka_topic(b), 0): replicated.end_offset for b in BROKERS}
    assert served.end_offsets == served.ready_ends


def test_kafka_leader_epoch_checkpoint_equals_plogs(replicated, served):
    """After loading each copy, serving it as leader and stopping cleanly, Kafka's
    ``leader-epoch-checkpoint`` holds exactly plog's entries (three epochs)."""
    for b in BROKERS:
        plog_epochs = read_epochs(replicated.folder(b) / "leader-epoch-checkpoint")
        kafka_epochs = read_epochs(served.log_dir / f"{kafka_topic(b)}-0" / "leader-epoch-checkpoint")
        assert plog_epochs == replicated.epochs
        assert kafka_epochs == plog_epochs, f"broker-{b}'s copy: Kafka {kafka_epochs}, plog {plog_epochs}"


def stray_snapshots(files) -> list[str]:
    """The producer snapshots Kafka's loader deletes (``ProducerStateManager.removeStraySnapshots``):
    those at an offset where no segment starts, except the largest of them when it is above
    every segment base (the snapshot a clean shutdown leaves at the log end offset).

    plog, like a running broker, leaves one such snapshot per clean close (each writer
    session); the older ones go at the next load, by Kafka's loader or by plog's."""
    bases = {int(n.split(".")[0]) for n in files if n.endswith(".log")}
    snaps = sorted(int(n.split(".")[0]) for n in files if n.endswith(".snapshot"))
    strays = [o for o in snaps if o not in bases]
    keep = strays[-1] if strays and strays[-1] > max(bases) else None
    return [f"{o:020d}.snapshot" for o in strays if o != keep]


def test_kafka_loaded_the_copies_as_written(replicated, served):
    """Kafka neither recovered nor rewrote anything: no WARN/ERROR line of its server.log
    names a copy, and after its clean stop every segment, index and producer snapshot of
    each copy is byte for byte plog's, with the same checkpointed offsets; the only change is
    Kafka's removal of the stray snapshots older sessions left (:func:`stray_snapshots`)."""
    names = {f"{kafka_topic(b)}-0" for b in BROKERS}
    noisy = [line for line in served.server_log.read_text(errors="replace").splitlines()
             if (" WARN " in line or " ERROR " in line)
             and any(re.search(rf"(?<![\w.-]){re.escape(n)}(?![\w-])", line) for n in names)]
    assert not noisy, "\n".join(noisy[:20])
    problems = []
    for b in BROKERS:
        name = f"{kafka_topic(b)}-0"
        a = {n: d for n, d in partition_files(replicated.folder(b)).items() if n.endswith(COMPARED)}
        k = {n: d for n, d in partition_files(served.log_dir / name).items() if n.endswith(COMPARED)}
        stray = stray_snapshots(a)
        assert stray, "each writer session leaves a snapshot at its log end offset: some are stray"
        for n in stray:
            a.pop(n)
        problems += folder_differences(f"broker-{b}'s copy ({name})", a, k)
    assert not problems, "\n".join(problems)
    for ckpt in (RECOVERY_POINTS, HIGH_WATERMARKS):
        got = read_offset_checkpoint(served.log_dir / ckpt)
        assert {b: got.get((kafka_topic(b), 0)) for b in BROKERS} == {b: replicated.end_offset for b in BROKERS}, ckpt


def test_truncated_producer_in_no_snapshot(replicated, served):
    """Kafka's DumpLogSegments reads every producer snapshot of the three copies; the
    producer whose batch was truncated from the crashed leader appears in none (the
    truncation rebuilt broker 1's producer state), the acknowledged producers do."""
    out, err, code = served.snapshot_dump
    assert code == 0, err[-3000:]
    dumped = [line.removeprefix("Dumping ") for line in out.splitlines() if line.startswith("Dumping ")]
    assert dumped and all(p.endswith(".snapshot") for p in dumped)
    pids = {int(m) for m in re.findall(r"producerId: (-?\d+)", out)}
    assert pids, out[-2000:]
    assert replicated.divergent_producer_id not in pids, out[-3000:]
