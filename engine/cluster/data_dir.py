"""A plog data directory: a small Kafka cluster on one disk.

Layout::

    <data dir>/
        cluster.json          plog's metadata: brokers (id, rack), topics (id, configs,
                              replica assignment), the next producer id. Kafka never reads it.
        .plog-meta.lock       flock'ed while cluster.json is read-modified-written
        broker-<id>/          one Kafka log directory per broker (meta.properties, .lock,
                              checkpoints, partition folders): hand it to a broker as a log.dirs entry
        groups/               live consumer-group membership (engine.groups)

Invariants:

* ``cluster.json`` is replaced atomically (tmp, fsync, rename) under ``.plog-meta.lock``,
  so concurrent processes never see half a file and never lose each other's updates.
* A partition's replicas are folders ``broker-<id>/<topic>-<p>`` on each broker of its
  assignment. ``cluster.json`` holds each partition's leader, leader epoch and ISR (the
  controller's state, engine.replication) and each broker's state. Writes go through
  :class:`ClusterWriter`, which holds the Kafka ``.lock`` of every running broker directory
  it writes, appends to the leader and runs the followers' fetchers before acknowledging;
  followers hold the leader's exact batches up to their log end offset.
* Readers (consumers, describe) never take a lock and never modify anything.

A plain Kafka log directory (``meta.properties`` or partition folders, no ``cluster.json``)
also opens, read-only: one broker, topics discovered from the folders. That is how
``plog consume``/``plog groups describe`` read a stopped broker's ``log.dirs``.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from plog.formats.checkpoints import base64url_to_uuid, uuid_to_base64url

from plog.engine.storage.checkpoints import atomic_write, fsync_dir, read_meta_properties
from plog.engine.storage.log_config import ConfigError, LogConfig
from plog.engine.errors import (
    BrokerNotAvailableError,
    EngineError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    LeaderNotAvailableError,
    LockTimeoutError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    LogDirError,
    LogDirLockedError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
    bad_document_reason,
)
from plog.engine.storage.log import Log, LogAppendInfo
from plog.engine.storage.log_manager import LogManager, random_base64_uuid
from plog.engine.storage.file_names import (
    CLUSTER_METADATA_TOPIC,
    INTERNAL_TOPICS,
    LOCK_FILE_NAME,
    TopicPartition,
    has_collision,
    parse_partition_dir_name,
    partition_dir_name,
    validate_topic_name,
)

METADATA_FILE = "cluster.json"
META_LOCK_FILE = ".plog-meta.lock"
DEFAULT_DATA_DIR = "plog-data"
METADATA_VERSION = 1
DEFAULT_LOCK_TIMEOUT_S = 30.0


class ReadOnlyDataDirError(EngineError):
    """A write to a Kafka log directory opened as a data directory (plog writes only its own)."""


BROKER_STATES = ("running", "stopped", "crashed")

#: Where a topic's or a partition's metadata was read (``TopicMetadata.source``,
#: ``PartitionState.source``): plog's cluster.json; a KRaft log directory's metadata log
#: (the controller's last known state); or, with no controller record on disk (a
#: ZooKeeper-era log directory, or a topic missing from the metadata log), only this
#: broker's partition folders, which say nothing of configs, other replicas, leaders or ISRs.
SOURCE_PLOG = "cluster.json"
SOURCE_METADATA_LOG = "metadata log"
SOURCE_PARTITION_FOLDERS = "partition folders"


@dataclass(frozen=True)
class Broker:
    """A broker of the embedded cluster. ``state``: ``running``; ``stopped`` (a controlled
    shutdown: out of every ISR, fenced at once); ``crashed`` (its process died: still in the
    ISRs until ``broker.session.timeout.ms`` after ``since_ms``, when the controller fences it).
    ``fenced``: the controller no longer counts it as alive."""

    id: int
    rack: str | None = None
    state: str = "running"
    fenced: bool = False
    since_ms: int | None = None

    @property
    def dir_name(self) -> str:
        return f"broker-{self.id}"

    @property
    def running(self) -> bool:
        return self.state == "running"

    def to_json(self) -> dict:
        data: dict = {"id": self.id, "rack": self.rack}
        if self.state != "running" or self.fenced:
            data.update(state=self.state, fenced=self.fenced, since_ms=self.since_ms)
        return data


@dataclass
class PartitionState:
    """What Kafka's controller keeps per partition (a KRaft ``PartitionRecord``): the leader
    (-1 when no replica can lead: the partition is offline), the leader epoch (bumped at every
    leader change) and the in-sync replicas. ISR is never empty: when its last member goes
    away it stays there and the partition has no leader, as in KRaft."""

    leader: int
    leader_epoch: int
    isr: list[int]
    source: str = field(default=SOURCE_PLOG, compare=False)  # not stored

    def to_json(self) -> dict:
        return {"leader": self.leader, "leader_epoch": self.leader_epoch, "isr": list(self.isr)}

    @classmethod
    def initial(cls, replicas: list[int]) -> "PartitionState":
        return cls(replicas[0], 0, list(replicas))


@dataclass
class TopicMetadata:
    """A topic as plog's metadata keeps it: ``replicas[p]`` is partition p's replica list,
    leader first."""

    name: str
    topic_id: str
    replicas: list[list[int]]
    configs: dict[str, str] = field(default_factory=dict)
    #: ``states[p]``: partition p's leader, leader epoch and ISR (missing entries: the initial
    #: state, leader = first replica, epoch 0, ISR = replicas; files written before replication).
    states: list[PartitionState] = field(default_factory=list)
    #: Where ``configs`` and ``replicas`` were read (SOURCE_*; not stored). With
    #: SOURCE_PARTITION_FOLDERS the configs are unknown, not empty.
    source: str = field(default=SOURCE_PLOG, compare=False)

    def __post_init__(self) -> None:
        self.sync_states()

    def sync_states(self) -> None:
        """One state per partition: new partitions start in their initial state."""
        while len(self.states) < len(self.replicas):
            self.states.append(PartitionState.initial(self.replicas[len(self.states)]))
        del self.states[len(self.replicas):]

    @property
    def partitions(self) -> int:
        return len(self.replicas)

    @property
    def replication_factor(self) -> int:
        return len(self.replicas[0]) if self.replicas else 0

    @property
    def kafka_topic_id(self) -> str | None:
        """The topic id as Kafka prints it (``Uuid.toString``: URL-safe base64, as ``ls`` and
        ``dump`` show it), or None when unknown."""
        if not self.topic_id:
            return None
        try:
            return uuid_to_base64url(uuid.UUID(self.topic_id))
        except ValueError:
            return self.topic_id  # already Kafka's form

    def to_json(self) -> dict:
        self.sync_states()
        return {"topic_id": self.topic_id, "configs": dict(sorted(self.configs.items())),
                "replicas": [list(r) for r in self.replicas],
                "partition_states": [st.to_json() for st in self.states]}


@dataclass
class ClusterMetadata:
    cluster_id: str
    brokers: list[Broker]
    topics: dict[str, TopicMetadata]
    next_producer_id: int = 0
    #: Broker settings in Kafka's names that the engine honours (engine.maintenance.ENGINE_DEFAULTS:
    #: log.retention.check.interval.ms, log.cleaner.enable, ...); absent means Kafka's default.
    broker_configs: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict:
        data = {
            "version": METADATA_VERSION,
            "cluster_id": self.cluster_id,
            "brokers": [b.to_json() for b in self.brokers],
            "topics": {name: t.to_json() for name, t in sorted(self.topics.items())},
            "next_producer_id": self.next_producer_id,
        }
        if self.broker_configs:
            data["broker_configs"] = dict(sorted(self.broker_configs.items()))
        return data

    @classmethod
    def from_json(cls, data: dict, path: Path) -> "ClusterMetadata":
        where = ""  # what was being read ("topic orders: "), for the error: never a Python message alone
        try:
            if data.get("version") != METADATA_VERSION:
                raise ValueError(f"unsupported version {data.get('version')!r}")
            brokers = []
            where = "brokers: "
            for b in data["brokers"]:
                where = f"brokers: {json.dumps(b)[:60]}: "
                state = str(b.get("state", "running"))
                if state not in BROKER_STATES:
                    raise ValueError(f"broker {b['id']} has unknown state {state!r}")
                since = b.get("since_ms")
                brokers.append(Broker(int(b["id"]), b.get("rack"), state, bool(b.get("fenced", False)),
                                      None if since is None else int(since)))
            topics = {}
            where = "topics: "
            for name, t in data["topics"].items():
                where = f"topic {name}: "
                replicas = [[int(x) for x in r] for r in t["replicas"]]
                states = [PartitionState(int(st["leader"]), int(st["leader_epoch"]), [int(x) for x in st["isr"]])
                          for st in t.get("partition_states", [])]
                topics[name] = TopicMetadata(name, t["topic_id"], replicas,
                                             {str(k): str(v) for k, v in t.get("configs", {}).items()}, states)
            where = ""
            broker_configs = {str(k): str(v) for k, v in (data.get("broker_configs") or {}).items()}
            return cls(str(data["cluster_id"]), brokers, topics, int(data.get("next_producer_id", 0)),
                       broker_configs)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
            raise LogDirError(f"{path} is not a plog cluster file: {where}{bad_document_reason(e)}") from None


@contextlib.contextmanager
def _flock(path: Path, timeout_s: float) -> Iterator[None]:
    """An exclusive ``flock`` on ``path`` (created if needed), waiting up to ``timeout_s``."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666)
    try:
        deadline = time.monotonic() + timeout_s
        delay = 0.002
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as e:
                if e.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                if time.monotonic() >= deadline:
                    raise LockTimeoutError(f"timed out after {timeout_s:g}s waiting for {path}") from None
                time.sleep(delay)
                delay = min(delay * 2, 0.05)
        yield
    finally:
        os.close(fd)  # closing drops the flock


#: Kafka's partition ids are 32-bit signed integers (``TopicPartition.partition``, the
#: ``NumPartitions`` of CreateTopics): no topic has more partitions than this.
MAX_PARTITIONS = (1 << 31) - 1


def _check_partition_count(n: int) -> None:
    if n > MAX_PARTITIONS:
        raise InvalidPartitionsError(f"Number of partitions {n} is more than Kafka's partition ids allow "
                                     f"({MAX_PARTITIONS}: they are 32-bit integers).")


def _replicas_per_broker(replica_lists) -> dict[int, int]:
    out: dict[int, int] = {}
    for replicas in replica_lists:
        for b in replicas:
            out[b] = out.get(b, 0) + 1
    return out


def _check_topic_is_new(meta: "ClusterMetadata", name: str) -> None:
    if name in meta.topics:
        raise TopicExistsError(f"Topic '{name}' already exists.")
    for other in meta.topics:
        if has_collision(name, other):
            raise TopicExistsError(f"Topic '{name}' collides with existing topic: {other}")


def _metadata_bytes_per_partition(replication_factor: int) -> int:
    """What one more partition adds to cluster.json (its replica list and state), measured
    on the file's own format, with 10-digit broker ids (at most what they take)."""
    replicas = [10 ** 9 + i for i in range(replication_factor)]
    sizes = []
    for n in (1, 2):
        t = TopicMetadata("t", str(uuid.UUID(int=0)), [list(replicas) for _ in range(n)])
        sizes.append(len(_dump_metadata(ClusterMetadata("c", [], {"t": t}))))
    return sizes[1] - sizes[0]


class _HeldSignals:
    """SIGINT and SIGTERM arriving inside :meth:`holding` are kept until :meth:`deliver`
    (then raised again, to the handlers there were before), so that a short sequence of
    writes that must not be cut in the middle (a commit and the renames after it) runs to its
    end, and the caller decides what an interrupt then means. Only the main thread can install
    handlers; elsewhere the block runs as it is."""

    def __init__(self) -> None:
        self.pending: list[int] = []

    @contextlib.contextmanager
    def holding(self) -> Iterator[None]:
        import signal
        import threading

        if threading.current_thread() is not threading.main_thread():
            yield
            return
        saved = {}
        try:
            for sig in (signal.SIGINT, signal.SIGTERM):
                previous = signal.getsignal(sig)
                if previous in (signal.SIG_IGN, None):
                    continue
                saved[sig] = previous
                signal.signal(sig, lambda signum, frame: self.pending.append(signum))
            yield
        finally:
            for sig, previous in saved.items():
                signal.signal(sig, previous)

    def deliver(self) -> None:
        import signal

        pending, self.pending = self.pending, []
        for sig in dict.fromkeys(pending):
            signal.raise_signal(sig)


@dataclass(frozen=True)
class ReplicaDescription:
    """One replica of a partition as its folder is on disk now."""

    broker: int
    state: str
    in_sync: bool | None  # None: unknown (no controller record on disk)
    folder: bool
    log_end_offset: int | None
    high_watermark: int | None
    leader_epoch: int | None


@dataclass(frozen=True)
class PartitionDescription:
    """``plog topics describe`` for one partition: the controller's view (leader, leader
    epoch, ISR) and the leader replica's offsets as on disk now. ``offline``: no leader;
    ``under_replicated``: fewer in-sync replicas than replicas; ``under_min_isr``: fewer than
    ``min.insync.replicas`` (``acks=all`` produces fail)."""

    tp: TopicPartition
    leader: int | None
    replicas: list[int]
    isr: list[int] | None
    log_start_offset: int | None
    log_end_offset: int | None
    size: int | None
    segments: int
    leader_epoch: int = 0
    high_watermark: int | None = None
    offline: bool = False
    under_replicated: bool = False
    under_min_isr: bool = False
    replica_states: tuple = ()
    #: Where leader, epoch, replicas and ISR come from (SOURCE_*). With SOURCE_PARTITION_FOLDERS
    #: only this broker's replica is known: ``leader`` and ``isr`` are None, the epoch is the
    #: latest of its leader-epoch-checkpoint, and no status flag is raised.
    source: str = SOURCE_PLOG


class DataDir:
    """A plog data directory (or, read-only, one Kafka log directory). See the module doc."""

    def __init__(self, path: Path, metadata: ClusterMetadata, *, kafka_log_dir: bool = False):
        self.path = path
        self.metadata = metadata
        self.kafka_log_dir = kafka_log_dir

    # -- opening ----------------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | os.PathLike = DEFAULT_DATA_DIR, *, create: bool = False) -> "DataDir":
        """Open ``path``; with ``create``, a missing or empty directory becomes a 1-broker
        data directory. Raises :class:`LogDirError` when ``path`` is neither."""
        p = Path(path).absolute()
        meta_file = p / METADATA_FILE
        if meta_file.is_file():
            return cls(p, _read_metadata(meta_file))
        if p.is_dir() and _looks_like_kafka_log_dir(p):
            return cls(p, _kafka_dir_metadata(p), kafka_log_dir=True)
        if create:
            return cls.init(p)
        if p.exists() and not p.is_dir():
            raise LogDirError(f"{p} is not a directory")
        if not p.exists():
            raise LogDirError(f"no plog data directory at {p} (create one with `plog init` or "
                              f"`plog topics create`, or choose one with --data-dir / PLOG_DATA_DIR)")
        raise LogDirError(f"{p} is neither a plog data directory (no {METADATA_FILE}) nor a Kafka log directory")

    @classmethod
    def init(cls, path: str | os.PathLike, brokers: int = 1, racks: list[str] | None = None,
             *, first_broker_id: int = 1, broker_configs: dict[str, str] | None = None) -> "DataDir":
        """Create a data directory of ``brokers`` brokers (ids from ``first_broker_id``),
        with ``racks`` given per broker (all or none). Refuses an existing one.
        ``broker_configs``: the broker settings the engine honours (validated)."""
        p = Path(path).absolute()
        if broker_configs:
            from plog.engine.maintenance.runner import ENGINE_DEFAULTS, engine_settings

            unknown = sorted(set(broker_configs) - set(ENGINE_DEFAULTS))
            if unknown:
                raise ConfigError(f"unknown broker config {unknown[0]!r} (the engine honours "
                                  f"{', '.join(sorted(ENGINE_DEFAULTS))})")
            engine_settings(broker_configs)
        if brokers < 1:
            raise BrokerNotAvailableError(f"a data directory needs at least one broker, not {brokers}")
        if racks is not None and len(racks) != brokers:
            raise BrokerNotAvailableError(f"--rack was given {len(racks)} time(s) for {brokers} broker(s): "
                                          "give one rack per broker or none")
        if (p / METADATA_FILE).exists():
            raise LogDirError(f"{p} is already a plog data directory")
        if p.exists() and (not p.is_dir() or any(p.iterdir())):
            raise LogDirError(f"{p} exists and is not empty; plog init needs a new or empty directory")
        created = not p.exists()
        p.mkdir(parents=True, exist_ok=True)
        metadata = ClusterMetadata(random_base64_uuid(),
                                   [Broker(first_broker_id + i, racks[i] if racks else None) for i in range(brokers)],
                                   {}, broker_configs={k: str(v) for k, v in (broker_configs or {}).items()})
        made: list[Path] = []
        try:
            with _flock(p / META_LOCK_FILE, DEFAULT_LOCK_TIMEOUT_S):
                if (p / METADATA_FILE).exists():  # another process won the race
                    return cls(p, _read_metadata(p / METADATA_FILE))
                for b in metadata.brokers:
                    if not (p / b.dir_name).exists():
                        (p / b.dir_name).mkdir()
                        made.append(p / b.dir_name)
                atomic_write(p / METADATA_FILE, _dump_metadata(metadata))
        except BaseException:
            # A full disk or Ctrl-C before cluster.json is written: take back what this call
            # made, so the directory is not left "not empty" for the next plog init.
            if not (p / METADATA_FILE).exists():
                for d in made:
                    with contextlib.suppress(OSError):
                        d.rmdir()
                with contextlib.suppress(OSError):
                    (p / META_LOCK_FILE).unlink()
                if created:
                    with contextlib.suppress(OSError):
                        p.rmdir()
            raise
        return cls(p, metadata)

    def reload(self) -> None:
        if not self.kafka_log_dir:
            self.metadata = _read_metadata(self.path / METADATA_FILE)
        else:
            self.metadata = _kafka_dir_metadata(self.path)

    @contextlib.contextmanager
    def update(self, timeout_s: float = DEFAULT_LOCK_TIMEOUT_S) -> Iterator[ClusterMetadata]:
        """Read-modify-write ``cluster.json`` under the metadata lock; written only when the
        block ends without an exception."""
        self._check_writable()
        with _flock(self.path / META_LOCK_FILE, timeout_s):
            self.metadata = _read_metadata(self.path / METADATA_FILE)
            yield self.metadata
            atomic_write(self.path / METADATA_FILE, _dump_metadata(self.metadata))

    def _check_writable(self) -> None:
        if self.kafka_log_dir:
            raise ReadOnlyDataDirError(
                f"{self.path} is a Kafka log directory: plog reads it but writes only to its own data "
                "directories (plog init)")

    # -- facts ------------------------------------------------------------------------------

    @property
    def brokers(self) -> list[Broker]:
        return list(self.metadata.brokers)

    @property
    def broker_ids(self) -> list[int]:
        return [b.id for b in self.metadata.brokers]

    def broker_log_dir(self, broker_id: int) -> Path:
        if self.kafka_log_dir:
            return self.path
        if broker_id not in self.broker_ids:
            raise BrokerNotAvailableError(f"broker {broker_id} is not in this data directory "
                                          f"(brokers: {', '.join(map(str, self.broker_ids))})")
        return self.path / f"broker-{broker_id}"

    def log_dirs(self) -> list[Path]:
        return [self.broker_log_dir(b) for b in self.broker_ids]

    def topics(self, *, include_internal: bool = True) -> list[str]:
        return sorted(t for t in self.metadata.topics if include_internal or t not in INTERNAL_TOPICS)

    def topic(self, name: str) -> TopicMetadata:
        t = self.metadata.topics.get(name)
        if t is None:
            raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist in {self.path}")
        return t

    def has_topic(self, name: str) -> bool:
        return name in self.metadata.topics

    def partitions(self, topic: str) -> list[TopicPartition]:
        return [TopicPartition(topic, p) for p in range(self.topic(topic).partitions)]

    def readable_partitions(self, topic: str) -> list[TopicPartition]:
        """The partitions of ``topic`` a consumer can read here: all of them in a plog data
        directory; in a Kafka log directory those it holds a folder of (its metadata log also
        names partitions whose replicas are on other brokers). Raises
        :class:`UnknownTopicOrPartitionError` when that leaves none."""
        tps = self.partitions(topic)
        if not self.kafka_log_dir:
            return tps
        held = [tp for tp in tps if self.partition_path(tp).is_dir()]
        if not held:
            raise UnknownTopicOrPartitionError(
                f"{self.path} holds no partition folder of topic '{topic}' (its replicas are on other brokers, "
                "or this copy of the log directory left them out)")
        return held

    def replicas(self, tp) -> list[int]:
        tp = TopicPartition(*tp)
        t = self.topic(tp.topic)
        if not 0 <= tp.partition < t.partitions:
            raise UnknownTopicOrPartitionError(
                f"Partition {tp.partition} of topic '{tp.topic}' does not exist (it has {t.partitions})")
        return list(t.replicas[tp.partition])

    def partition_state(self, tp) -> PartitionState:
        """``tp``'s leader, leader epoch and ISR as the metadata holds them now."""
        tp = TopicPartition(*tp)
        self.replicas(tp)  # validates the partition
        t = self.topic(tp.topic)
        t.sync_states()
        return t.states[tp.partition]

    def leader(self, tp) -> int:
        """The leader broker of ``tp``; raises :class:`LeaderNotAvailableError` when the
        partition is offline (no replica that may lead is running)."""
        tp = TopicPartition(*tp)
        state = self.partition_state(tp)
        if state.leader < 0:
            raise LeaderNotAvailableError(
                f"{tp} has no leader: ISR {_id_list(state.isr)} "
                f"({', '.join(f'broker {b} {self.broker(b).state}' for b in state.isr)}); "
                f"start one of them with `plog brokers start ID`")
        return state.leader

    def broker(self, broker_id: int) -> Broker:
        for b in self.metadata.brokers:
            if b.id == broker_id:
                return b
        raise BrokerNotAvailableError(f"broker {broker_id} is not in this data directory "
                                      f"(brokers: {', '.join(map(str, self.broker_ids))})")

    def running_brokers(self) -> list[int]:
        return [b.id for b in self.metadata.brokers if b.running]

    def topic_config(self, topic: str) -> LogConfig:
        """The topic's effective config: cluster.json's configs, or in a Kafka log directory what
        ``plog retention``/``compact`` resolve (engine.topic_configs: the metadata log's topic
        and dynamic broker configs over Kafka's defaults)."""
        if self.kafka_log_dir:
            from plog.engine.storage.topic_configs import ConfigResolver

            return ConfigResolver(self.path).resolve(topic).config
        t = self.metadata.topics.get(topic)
        return LogConfig.from_properties(t.configs if t else {})

    @property
    def node_id(self) -> int | None:
        """A Kafka log directory's broker (its ``meta.properties`` node id, else 0); None for a
        plog data directory, which has several."""
        return self.metadata.brokers[0].id if self.kafka_log_dir else None

    def metadata_note(self) -> str | None:
        """For a Kafka log directory, one line saying where its topic metadata was read and what
        is not on disk; None for a plog data directory (cluster.json holds everything)."""
        if not self.kafka_log_dir:
            return None
        from plog.engine.storage.topic_configs import read_metadata_image

        image = read_metadata_image(self.path)
        if image.source is not None:
            upto = f", up to offset {image.last_offset}" if image.last_offset is not None else ""
            return (f"{self.path} is a Kafka log directory: topic ids, configs, leaders, leader epochs, replicas "
                    f"and ISRs as last recorded in its metadata log ({image.source}{upto}); offsets from the "
                    "partition folders")
        meta = read_meta_properties(self.path) if (self.path / "meta.properties").is_file() else None
        what = ("a ZooKeeper-era Kafka log directory: topic configs, leaders, replicas and ISRs are kept in "
                "ZooKeeper, not on disk" if meta is None or meta.version == 0 else
                "a Kafka log directory without its metadata log (__cluster_metadata-0; metadata.log.dir is "
                "elsewhere?): topic configs, leaders, replicas and ISRs are not here")
        return (f"{self.path} is {what}; shown: this broker's partition folders (topic id from partition.metadata, "
                "leader epoch from leader-epoch-checkpoint)")

    def partition_path(self, tp, broker_id: int | None = None) -> Path:
        """The folder of ``tp``'s replica on ``broker_id`` (default: the leader). In a Kafka log
        directory, always this broker's folder, whoever the controller last named leader."""
        tp = TopicPartition(*tp)
        if self.kafka_log_dir:
            return self.path / partition_dir_name(tp)
        broker = self.leader(tp) if broker_id is None else broker_id
        return self.broker_log_dir(broker) / partition_dir_name(tp)

    def partition_facts(self, tp, broker_id: int | None = None):
        """What the state files of ``tp``'s replica say (:func:`plog.engine.storage.discovery.partition_facts`:
        topic id, leader epochs, log start offset, high watermark...), or None without a folder."""
        from plog.engine.storage.discovery import partition_facts

        path = self.partition_path(tp, broker_id)
        return partition_facts(str(path)) if path.is_dir() else None

    def open_reader(self, tp, broker_id: int | None = None) -> Log:
        """A read-only view of a replica (default: the leader) of ``tp`` as it is on disk now."""
        tp = TopicPartition(*tp)
        path = self.partition_path(tp, broker_id)
        if not path.is_dir():
            if self.kafka_log_dir:
                raise UnknownTopicOrPartitionError(f"{self.path} holds no folder for {tp} (this broker has no "
                                                   "replica of it)")
            raise UnknownTopicOrPartitionError(f"no folder for {tp} at {path}")
        from plog.engine.storage.discovery import read_checkpoints

        # The log start offset may sit above the first segment (DeleteRecords, retention in
        # progress): the broker directory's checkpoint says so, and the loader takes the larger.
        checkpoints = read_checkpoints(path.parent)
        log = Log.open(path, self.topic_config(tp.topic), writable=False,
                       log_start_offset=checkpoints.log_starts.get(tp, 0))
        for segment in log.segments:
            # A writer may trim these indexes while this view is open (roll, close).
            for index in (segment.offset_index, segment.time_index):
                index.live_reader = True
                if index._loaded:
                    index._forget()
        if not self.kafka_log_dir:
            # Consumers see only what the ISR has: the high watermark the replica's broker
            # directory checkpointed (written at every produce round). A plain Kafka log
            # directory is read to its end: offline inspection wants every record on disk.
            hw = checkpoints.high_watermarks.get(tp)
            if hw is not None:
                log.high_watermark = max(log.log_start_offset, min(hw, log.log_end_offset))
        return log

    def describe_partitions(self, topic: str) -> list["PartitionDescription"]:
        """Per partition: leader, replicas, ISR, and the leader replica's offsets and size as
        on disk now (read-only). In a Kafka log directory the offsets are this broker's
        replica's whoever leads, its high watermark the replication-offset-checkpoint's and its
        log start Kafka's (discovery.partition_facts); the other brokers' replicas are elsewhere."""
        t = self.topic(topic)
        t.sync_states()
        min_isr = self.topic_config(topic).min_insync_replicas
        # A Kafka log directory's broker is in the state its files show (plog ls's shutdown).
        here = _kafka_broker_state(self.path) if self.kafka_log_dir else None
        out = []
        for p, replicas in enumerate(t.replicas):
            tp = TopicPartition(topic, p)
            state = t.states[p]
            leader = state.leader if state.leader >= 0 else None
            # Whose offsets the row shows: the leader's, or in a Kafka log directory the one replica here.
            shown = self.node_id if self.kafka_log_dir else leader
            start = end = size = hw = None
            segments = 0
            reps = []
            for b in replicas:
                local = not self.kafka_log_dir or b == self.node_id
                path = self.partition_path(tp, b)
                folder = local and path.is_dir()
                r_end = r_hw = r_epoch = None
                if folder:
                    facts = self.partition_facts(tp, b)
                    log = self.open_reader(tp, b)
                    try:
                        # A plog reader's high watermark is the checkpoint's, kept within the log;
                        # a Kafka log directory's is shown as its checkpoint holds it.
                        r_end, r_epoch = log.log_end_offset, facts.leader_epoch
                        r_hw = facts.high_watermark if self.kafka_log_dir else log.high_watermark
                        if b == shown:
                            start, end, size, segments = (facts.log_start_offset, log.log_end_offset, log.size,
                                                          len(log.segments))
                            hw = r_hw
                    finally:
                        log.close()
                broker_state = here if local and here else self.broker(b).state if b in self.broker_ids \
                    else "unknown"
                in_sync = None if state.source == SOURCE_PARTITION_FOLDERS else b in state.isr
                reps.append(ReplicaDescription(b, broker_state, in_sync, folder, r_end, r_hw, r_epoch))
            if state.source == SOURCE_PARTITION_FOLDERS:
                out.append(PartitionDescription(
                    tp, None, list(replicas), None, start, end, size, segments, leader_epoch=state.leader_epoch,
                    high_watermark=hw, replica_states=tuple(reps), source=state.source))
                continue
            out.append(PartitionDescription(
                tp, leader, list(replicas), list(state.isr), start, end, size, segments,
                leader_epoch=state.leader_epoch, high_watermark=hw, offline=leader is None,
                under_replicated=len(state.isr) < len(replicas),
                under_min_isr=leader is None or len(state.isr) < min_isr,
                replica_states=tuple(reps), source=state.source))
        return out

    # -- topic administration ---------------------------------------------------------------

    def create_topic(self, name: str, partitions: int | None = None, replication_factor: int | None = None, *,
                     configs: dict[str, str] | None = None, replica_assignment: dict[int, list[int]] | None = None,
                     if_not_exists: bool = False, internal_ok: bool = False, rng=None,
                     progress=None) -> TopicMetadata | None:
        """Kafka's CreateTopics: validate, place replicas (§17.2) on the running brokers (as
        Kafka's controller places them on the brokers it can use), create every replica folder.

        All or nothing (:meth:`_create_partitions`): a request that cannot fit (more partitions
        than Kafka's 32-bit partition ids allow, more than the free inodes or bytes of a broker
        directory's file system hold, a replica on a broker that is not running, more locks
        than this process may open) is refused before anything is written, and a failure or
        Ctrl-C while the folders are made leaves no trace of the topic. ``progress(n)`` is
        called as the replicas of ``n`` more partitions are made.

        Returns the new topic, or ``None`` when it exists and ``if_not_exists``."""
        validate_topic_name(name)
        if name in INTERNAL_TOPICS and not internal_ok:
            raise InvalidTopicError(f"Creation of internal topic {name} is prohibited.")
        configs = {str(k): str(v) for k, v in (configs or {}).items()}
        try:
            LogConfig.from_properties(configs)
        except ConfigError as e:
            raise InvalidTopicError(f"Invalid config for topic {name}: {e}") from None
        self._check_writable()
        self.reload()
        meta = self.metadata
        try:
            _check_topic_is_new(meta, name)
        except TopicExistsError:
            if if_not_exists and name in meta.topics:
                return None
            raise
        from plog.engine.cluster import placement as _placement  # noqa: PLC0415

        running = [b for b in meta.brokers if b.running]
        if replica_assignment is not None:
            if partitions is not None and partitions != len(replica_assignment):
                raise InvalidReplicaAssignmentError(
                    "--partitions cannot be used with --replica-assignment (the assignment gives the count)")
            _placement.validate_manual_assignment(replica_assignment, {b.id for b in meta.brokers})
            self._check_room(name, len(replica_assignment), _replicas_per_broker(replica_assignment.values()))
            assignment = replica_assignment
        else:
            n = 1 if partitions is None else partitions
            rf = 1 if replication_factor is None else replication_factor
            if n < 1:
                raise InvalidPartitionsError(f"Number of partitions must be larger than 0, not {n}.")
            if rf < 1:
                raise InvalidReplicationFactorError(f"Replication factor must be larger than 0, not {rf}.")
            _check_partition_count(n)
            if rf <= len(running):
                # Before placing them (a placement of millions of partitions is itself minutes
                # and gigabytes): Kafka's placement spreads n * rf replicas evenly, so no broker
                # gets more than its share rounded up.
                share = -(-n * rf // len(running))
                self._check_room(name, n, {b.id: share for b in running})
            assignment = _placement.assign_replicas_to_brokers(
                [_placement.BrokerMetadata(b.id, b.rack) for b in running], n, rf, rng=rng)
        topic = TopicMetadata(name, str(uuid.uuid4()), [list(assignment[p]) for p in range(len(assignment))],
                              configs)

        def commit() -> None:
            with self.update() as current:
                _check_topic_is_new(current, name)
                current.topics[name] = topic

        def uncommit() -> None:
            with self.update() as current:
                current.topics.pop(name, None)

        try:
            self._create_partitions(topic, range(topic.partitions), commit, uncommit, progress)
        except TopicExistsError:
            if if_not_exists and self.has_topic(name):
                return None  # another process created it meanwhile
            raise
        return topic

    def alter_topic(self, name: str, *, partitions: int | None = None, set_configs: dict[str, str] | None = None,
                    delete_configs: list[str] | None = None,
                    replica_assignment: dict[int, list[int]] | None = None, rng=None,
                    progress=None) -> TopicMetadata:
        """Add partitions (never remove: Kafka cannot) and change configs.

        New partitions are placed on the running brokers and made all or nothing, with the
        limits of :meth:`create_topic`; the configs change with them, in the same commit, or
        not at all. ``progress(n)`` as for :meth:`create_topic`."""
        from plog.engine.cluster.placement import BrokerMetadata, add_partitions_assignment

        self._check_writable()
        self.reload()
        meta = self.metadata
        current = meta.topics.get(name)
        if current is None:
            raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist in {self.path}")
        old_count = current.partitions
        extra: dict[int, list[int]] = {}
        if partitions is not None:
            if partitions <= old_count:
                raise InvalidPartitionsError(
                    f"Topic currently has {old_count} partitions, which is higher than or equal "
                    f"to the requested {partitions}.")
            _check_partition_count(partitions)
            rf = current.replication_factor
            running = [b for b in meta.brokers if b.running]
            if replica_assignment is not None:
                extra = replica_assignment
                for p, reps in extra.items():
                    unknown = set(reps) - {b.id for b in meta.brokers}
                    if unknown or len(set(reps)) != len(reps) or len(reps) != rf:
                        raise InvalidReplicaAssignmentError(
                            f"invalid replicas {reps} for new partition {p} of {name}")
                self._check_room(name, partitions - old_count,
                                 _replicas_per_broker(extra[p] for p in range(old_count, partitions)), adding=True)
            else:
                if 0 < rf <= len(running):
                    share = -(-(partitions - old_count) * rf // len(running))
                    self._check_room(name, partitions - old_count, {b.id: share for b in running}, adding=True)
                extra = add_partitions_assignment([BrokerMetadata(b.id, b.rack) for b in running],
                                                  dict(enumerate(current.replicas)), partitions, rng=rng)
        new_configs = None
        if set_configs or delete_configs:
            new_configs = dict(current.configs)
            for k in delete_configs or []:
                new_configs.pop(k, None)
            new_configs.update({str(k): str(v) for k, v in (set_configs or {}).items()})
            try:
                LogConfig.from_properties(new_configs)
            except ConfigError as e:
                raise InvalidTopicError(f"Invalid config for topic {name}: {e}") from None
        added = [list(extra[p]) for p in range(old_count, old_count + len(extra))] if extra else []
        target = TopicMetadata(name, current.topic_id, [*current.replicas, *added],
                               current.configs if new_configs is None else new_configs)
        old_configs = dict(current.configs)

        def commit() -> None:
            with self.update() as meta_now:
                t = meta_now.topics.get(name)
                if t is None:
                    raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist in {self.path}")
                if t.partitions != old_count:
                    raise InvalidPartitionsError(
                        f"Topic {name} has {t.partitions} partitions now, not {old_count}: another process "
                        "altered it meanwhile; nothing was changed")
                t.replicas.extend(list(r) for r in added)
                t.sync_states()
                if new_configs is not None:
                    t.configs = dict(new_configs)

        def uncommit() -> None:
            with self.update() as meta_now:
                t = meta_now.topics.get(name)
                if t is not None and t.partitions == old_count + len(added):
                    del t.replicas[old_count:]
                    t.sync_states()
                    t.configs = old_configs

        if added:
            self._create_partitions(target, range(old_count, target.partitions), commit, uncommit, progress)
        else:
            commit()
            # The broker directories' copies of the configs (.plog-topics.json, which
            # a LogManager opened on one of them alone reads) follow at once.
            with self.writer() as w:
                w.acquire(sorted({b for reps in target.replicas for b in reps} & set(self.running_brokers())))
        self.reload()
        return self.topic(name)

    # -- making partition folders, all or nothing -------------------------------------------

    def _check_room(self, name: str, count: int, per_broker: dict[int, int], *, adding: bool = False) -> None:
        """Refuse, before anything is written, ``count`` new partitions of ``name`` whose
        replicas land ``per_broker[b]`` on broker ``b`` (or each broker's even share, before
        placement) when their folders and their lines of cluster.json do not fit the free
        inodes and bytes of the file systems."""
        from plog.engine.storage.log_manager import check_room_for_new_logs, new_log_bytes

        new_logs: dict[Path, tuple[int, int]] = {}
        sample = TopicPartition(name, max(count - 1, 0))  # the longest folder name
        for b, k in per_broker.items():
            log_dir = self.broker_log_dir(b)
            if not log_dir.is_dir():
                continue  # made by its first writer: its file system is the data directory's
            block = os.statvfs(log_dir).f_frsize
            n, nbytes = new_logs.get(log_dir, (0, 0))
            new_logs[log_dir] = (n + k, nbytes + k * new_log_bytes(sample, block))
        # cluster.json is rewritten whole through a tmp file: the old file and the new one.
        rf = max(1, -(-sum(per_broker.values()) // max(count, 1)))
        metadata = self.path / METADATA_FILE
        size = metadata.stat().st_size if metadata.exists() else 0
        n, nbytes = new_logs.get(self.path, (0, 0))
        new_logs[self.path] = (n, nbytes + size + count * _metadata_bytes_per_partition(rf))
        plural = "s" if count != 1 else ""
        what = f"adding {count} partition{plural} to topic {name}" if adding else \
            f"creating {count} partition{plural} of topic {name}"
        check_room_for_new_logs(new_logs, what)

    def _create_partitions(self, topic: TopicMetadata, partitions: range, commit, uncommit, progress=None) -> None:
        """Make the replica folders of ``partitions`` of ``topic`` and ``commit()`` the topic's
        metadata, all or nothing.

        1. Refuse, before writing: a replica on a broker that is not running (its directory is
           not opened), more locks than the process may open (``descriptor_budget``).
        2. Under the ``.lock`` of every broker involved (a writer opens no folder meanwhile),
           make each folder under a ``-delete`` name, which every start-up removes (Kafka's
           too), then make them durable (``LogManager.sync_new_logs``: one ``syncfs`` for many).
        3. With SIGINT and SIGTERM held back: ``commit()`` (cluster.json), rename the folders
           to their names, fsync each broker directory.

        A failure or an interrupt in 2 removes the folders; a failure in 3 calls
        ``uncommit()`` as well. A crash in 2 leaves ``-delete`` folders the next writer
        removes; a crash in 3, between the commit and a rename, leaves partitions whose
        folders the first writer creates (:meth:`ClusterWriter.replica_log`)."""
        from plog.engine.storage.descriptor_budget import budget

        self.reload()
        tps = [(TopicPartition(topic.name, p), topic.replicas[p]) for p in partitions]
        brokers = sorted({b for _, reps in tps for b in reps})
        for tp, reps in tps:
            for b in reps:
                broker = self.broker(b)
                if not broker.running:
                    raise BrokerNotAvailableError(f"broker {b} is {broker.state}: its replica of {tp} cannot be "
                                                  f"written (plog brokers start {b}); nothing was written")
        budget().require(len(brokers))
        topic_id = uuid.UUID(topic.topic_id)
        committed = False
        signals = _HeldSignals()
        with self.writer() as w:
            try:
                w.acquire(brokers)
                managers = [w.manager(b) for b in brokers]
                for tp, reps in tps:
                    for b in reps:
                        lm = w.manager(b)
                        lm.stage_new_log(tp, topic_id, log_dir=lm.log_dirs[0])
                    if progress is not None:
                        progress(1)
                for lm in managers:
                    lm.sync_new_logs()
                with signals.holding():
                    commit()
                    committed = True
                    for lm in managers:
                        lm.adopt_new_logs()
                        fsync_dir(lm.log_dirs[0])
                    w.adopt_metadata_topics()
                    for lm in managers:
                        lm.keep_new_logs()
            except BaseException:
                try:
                    if committed:
                        uncommit()
                finally:
                    for lm in list(w._managers.values()):
                        lm.discard_new_logs()
                    signals.deliver()  # an interrupt held back meanwhile wins over the failure
                raise
        # Complete: an interrupt that came during the commit stops the command now.
        signals.deliver()

    def delete_topic(self, name: str) -> TopicMetadata:
        """Kafka's delete: each replica folder is renamed ``<tp>.<uuid>-delete``, then removed;
        the topic leaves the metadata first, so no reader or writer picks it up again."""
        if name in INTERNAL_TOPICS:
            raise InvalidTopicError(f"Topic {name} is an internal topic and cannot be deleted")
        with self.update() as meta:
            topic = meta.topics.pop(name, None)
            if topic is None:
                raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist in {self.path}")
        with self.writer() as w:
            for broker in self.broker_ids:
                manager = w.manager(broker)
                for tp in manager.partitions():
                    if tp.topic == name:
                        manager.delete_log(tp)
        return topic

    def allocate_producer_id(self) -> int:
        """A producer id never handed out before in this data directory."""
        with self.update() as meta:
            pid = meta.next_producer_id
            meta.next_producer_id += 1
        return pid

    # -- writing ----------------------------------------------------------------------------

    def writer(self, timeout_s: float = DEFAULT_LOCK_TIMEOUT_S, **options) -> "ClusterWriter":
        """A :class:`ClusterWriter`; ``options``: ``clock``, ``truncation``, ``paused``,
        ``maintenance``."""
        self._check_writable()
        return ClusterWriter(self, timeout_s, **options)


class ClusterWriter:
    """Holds the ``.lock`` of the broker directories it touches (taken on first use, waiting up
    to ``timeout_s`` for another plog process) and appends through their ``LogManager``s.

    Appends go to the partition's leader (with its leader epoch); at :meth:`flush` the
    followers on running brokers fetch from it (engine.replication), the high watermark
    moves, ISRs shrink or grow, and ``acks=all`` appends are checked against it. A stopped
    or crashed broker's directory is never opened.

    Use as a context manager: closing writes the checkpoints and the clean-shutdown marker of
    every broker directory it opened and releases the locks, so the next writer (in this or
    another process) opens only the partitions it needs.
    """

    def __init__(self, data_dir: DataDir, timeout_s: float, *, maintenance: bool = True, clock=None,
                 truncation: str = "leader-epoch", paused: set[int] | None = None):
        from plog.engine.cluster.replication import ReplicaFetcher

        self.data_dir = data_dir
        self.timeout_s = timeout_s
        # Run due retention/compaction on the touched logs when the locks are given back.
        self.maintenance = maintenance
        self.clock = clock or (lambda: int(time.time() * 1000))
        #: Brokers whose replica fetchers are paused (a slow or partitioned follower): they
        #: fetch nothing and fall out of the ISR after replica.lag.time.max.ms.
        self.paused: set[int] = set(paused or ())
        settings = self._settings()
        self.fetcher = ReplicaFetcher(self.clock, truncation=truncation,
                                      lag_time_max_ms=int(settings["replica.lag.time.max.ms"]))
        self.session_timeout_ms = int(settings["broker.session.timeout.ms"])
        #: Controller events (elections, ISR changes) this writer caused, oldest first.
        self.events: list = []
        self._managers: dict[int, LogManager] = {}
        self._dirty: dict[TopicPartition, list[Log]] = {}
        self._acks: list[tuple[TopicPartition, int, int]] = []
        self._reordering = False

    def _settings(self) -> dict[str, str]:
        from plog.engine.maintenance.runner import engine_settings

        return engine_settings(self.data_dir.metadata.broker_configs)

    def manager(self, broker_id: int) -> LogManager:
        lm = self._managers.get(broker_id)
        if lm is None:
            self.acquire([broker_id])
            lm = self._managers[broker_id]
        return lm

    def acquire(self, broker_ids) -> bool:
        """Hold the ``.lock`` of every broker in ``broker_ids``, taking locks in ascending broker
        id only (so writers in several processes never wait for each other in a cycle): a
        lower id than one already held means giving everything back and starting over.

        Returns True when the metadata was re-read, which happens each time the first lock is
        taken: leaders and ISRs change only under the locks of every running replica of the
        partition (this writer's ISR updates, or controller work that holds every lock), so
        metadata read then stays true for the partitions whose replicas it holds."""
        need = sorted(set(broker_ids) - set(self._managers))
        if not need:
            return False
        from plog.engine.storage.descriptor_budget import budget

        # Each lock is a descriptor held to the end: refuse now, naming ulimit -n, rather than
        # fail on EMFILE half-way through the writes.
        budget().require(len(need))
        opened = {}
        if self._managers and need[0] < max(self._managers):
            # Out of order: free locks can still be taken without waiting (no cycle can
            # form without a wait); a busy one means giving everything back.
            try:
                for b in need:
                    opened[b] = self._open_manager(b, wait=False)
            except LogDirLockedError:
                for lm in opened.values():
                    lm.close()
                opened = {}
                held = set(self._managers)
                self._reorder_close()
                need = sorted(held | set(broker_ids))
        first = not self._managers
        opened.update({b: self._open_manager(b) for b in need if b not in opened})
        self._managers.update(opened)
        if first:
            self.data_dir.reload()
        self.adopt_metadata_topics(opened.values())
        if first and not self.data_dir.kafka_log_dir:
            from plog.engine.cluster.replication import needs_tick

            if needs_tick(self.data_dir.metadata, self.clock(), self.session_timeout_ms):
                self.controller_tick()
        return first

    def adopt_metadata_topics(self, managers=None) -> None:
        """plog's metadata is the source of topic ids and configs for every log directory:
        hand them to ``managers`` (default: every one this writer holds)."""
        topics = {name: {"topic_id": t.topic_id, "configs": dict(t.configs)}
                  for name, t in self.data_dir.metadata.topics.items()}
        for lm in (self._managers.values() if managers is None else managers):
            lm.adopt_topics(topics)

    def acquire_all(self) -> None:
        """Hold the lock of every running broker (controller work)."""
        while True:
            self.data_dir.reload()
            running = self.data_dir.running_brokers()
            if not self.acquire(running) and set(running) <= set(self._managers):
                return

    def controller_tick(self) -> list:
        """Fence brokers whose session timed out and elect leaders for offline partitions,
        holding every running broker's lock (so no other writer works from stale leaders)."""
        from plog.engine.cluster.replication import tick

        self.acquire_all()
        with self.data_dir.update() as meta:
            events = tick(meta, self.clock(), self.session_timeout_ms)
        self._after_controller(events)
        return events

    def _after_controller(self, events) -> None:
        self.events.extend(events)
        for e in events:
            if e.kind == "broker" and e.broker in self._managers and not self.data_dir.broker(e.broker).running:
                self._drop_manager(e.broker, crash=e.reason.startswith("crashed"))
        for e in events:
            # Kafka's makeLeader: the new leader's epoch starts at its LEO in its
            # leader-epoch-checkpoint now, not at its first append.
            if e.kind == "leader" and e.leader is not None and e.leader >= 0 and e.leader in self._managers:
                try:
                    self.leader_log(e.tp)
                except EngineError:
                    pass  # the partition went away or its leader stopped since: nothing to start

    def _drop_manager(self, broker_id: int, *, crash: bool) -> None:
        lm = self._managers.pop(broker_id, None)
        if lm is None:
            return
        for tp in list(self._dirty):
            self._dirty[tp] = [log for log in self._dirty[tp] if log.dir.parent != lm.log_dirs[0]]
        if crash:
            lm.abandon()
        else:
            lm.close()

    def _reorder_close(self) -> None:
        """Give back every lock to retake them in order: appended data is flushed, and its
        replication and acks checks wait for the next :meth:`flush` (after the retake)."""
        dirty, acks = list(self._dirty), self._acks
        self._reordering = True
        try:
            self._close_managers()
        finally:
            self._reordering = False
        self._dirty = {tp: [] for tp in dirty}
        self._acks = acks

    def _open_manager(self, broker_id: int, *, wait: bool = True) -> LogManager:
        log_dir = self.data_dir.broker_log_dir(broker_id)
        deadline = time.monotonic() + self.timeout_s
        delay = 0.002
        while True:
            try:
                lm = LogManager([log_dir], node_id=broker_id, cluster_id=self.data_dir.metadata.cluster_id, lazy=True)
                break
            except LogDirLockedError:
                if not wait:
                    raise
                if time.monotonic() >= deadline:
                    raise LockTimeoutError(
                        f"timed out after {self.timeout_s:g}s waiting for the lock of {log_dir} "
                        "(another plog process or a Kafka broker is writing it)") from None
                time.sleep(delay)
                delay = min(delay * 2, 0.05)
        return lm

    def _running(self, replicas: list[int]) -> list[int]:
        if self.data_dir.kafka_log_dir:
            return list(replicas)
        return [b for b in replicas if self.data_dir.broker(b).running]

    def _replicas(self, tp: TopicPartition) -> list[int]:
        """``tp``'s replicas, with the locks of those on running brokers held (metadata current)."""
        while True:
            replicas = self.data_dir.replicas(tp)
            if not self.acquire(self._running(replicas)):
                return replicas

    def replica_log(self, tp, broker_id: int) -> Log:
        """The writable log of ``tp``'s replica on ``broker_id`` (folder created if needed).
        Only a current replica on a running broker: a folder elsewhere would be a write
        nobody reads, and a stopped broker's directory is not touched."""
        tp = TopicPartition(*tp)
        if broker_id not in self._replicas(tp):
            raise BrokerNotAvailableError(f"broker {broker_id} holds no replica of {tp} "
                                          f"(replicas: {self.data_dir.replicas(tp)})")
        if not self.data_dir.kafka_log_dir and not self.data_dir.broker(broker_id).running:
            raise BrokerNotAvailableError(f"broker {broker_id} is {self.data_dir.broker(broker_id).state}: "
                                          f"its replica of {tp} cannot be written (plog brokers start {broker_id})")
        lm = self.manager(broker_id)
        log = lm.get_log(tp)
        if log is None:
            t = self.data_dir.topic(tp.topic)
            log = lm.get_or_create_log(tp, topic_id=uuid.UUID(t.topic_id))
        if not self.data_dir.kafka_log_dir:
            log.replicated = True
        return log

    def leader_log(self, tp) -> tuple[Log, "PartitionState"]:
        """The leader replica of ``tp`` and its partition state; raises
        :class:`LeaderNotAvailableError` when it has none or its broker crashed."""
        tp = TopicPartition(*tp)
        self._replicas(tp)
        state = self.data_dir.partition_state(tp)
        leader_id = self.data_dir.leader(tp)
        broker = self.data_dir.broker(leader_id) if not self.data_dir.kafka_log_dir else None
        if broker is not None and not broker.running:
            raise LeaderNotAvailableError(
                f"the leader of {tp}, broker {leader_id}, {broker.state}; the controller fences it "
                f"{self.session_timeout_ms} ms after (broker.session.timeout.ms) and elects another leader")
        log = self.replica_log(tp, leader_id)
        latest = log.epoch_cache.latest_epoch
        if latest is None or latest < state.leader_epoch:
            # Kafka's makeLeader: the new epoch starts at the leader's LEO, so followers that
            # ask for an older epoch learn where it ended here.
            log.epoch_cache.assign(state.leader_epoch, log.log_end_offset)
        return log, state

    def append(self, tp, batch: bytes, *, flush: bool = False, acks: int = -1) -> LogAppendInfo:
        """Append one producer batch to the leader of ``tp`` (its followers fetch it at
        :meth:`flush`). ``acks``: 0, 1 or -1 (all). With ``acks=-1`` the ISR must hold
        ``min.insync.replicas`` members (else :class:`NotEnoughReplicasError`, nothing
        written) and :meth:`flush` fails unless every ISR member replicated the batch.
        With ``flush=False`` call :meth:`flush` before acknowledging."""
        tp = TopicPartition(*tp)
        leader, state = self.leader_log(tp)
        if acks == -1 and not self.data_dir.kafka_log_dir:
            min_isr = self.data_dir.topic_config(tp.topic).min_insync_replicas
            if len(state.isr) < min_isr:
                raise NotEnoughReplicasError(
                    f"The size of the current ISR {_id_list(state.isr)} is insufficient to satisfy the min.isr "
                    f"requirement of {min_isr} for partition {tp}")
        info = leader.append_as_leader(batch, leader_epoch=state.leader_epoch, flush=flush)
        self._dirty.setdefault(tp, [leader])
        if acks == -1:
            self._acks.append((tp, info.last_offset + 1, len(state.isr)))
        if flush:
            self._replicate_dirty()
        return info

    def append_control(self, tp, producer_id: int, producer_epoch: int, *, commit: bool) -> LogAppendInfo:
        """Write a transaction marker to the leader of ``tp``; followers fetch it at flush."""
        tp = TopicPartition(*tp)
        leader, state = self.leader_log(tp)
        info = leader.append_end_txn_marker(producer_id, producer_epoch, commit=commit,
                                            leader_epoch=state.leader_epoch)
        self._dirty.setdefault(tp, [leader])
        return info

    # -- replication ----------------------------------------------------------------------------

    def replicate(self, tp, *, brokers=None, until_caught_up: bool = True):
        """Run the fetchers of ``tp``'s followers on running, unpaused brokers (``brokers``:
        only those): truncate first when they have not yet in this session, then fetch until
        they have the leader's log and high watermark. Shrinks the ISR by
        ``replica.lag.time.max.ms``, grows it when a follower caught up. Returns a
        :class:`~plog.engine.cluster.replication.ReplicationReport`."""
        from plog.engine.cluster.replication import CatchUp, ReplicationReport, advance_high_watermark

        tp = TopicPartition(*tp)
        report = ReplicationReport()
        replicas = self._replicas(tp)
        leader, state = self.leader_log(tp)
        leader_id = state.leader
        fetcher = self.fetcher
        active = [b for b in replicas if b != leader_id and self.data_dir.broker(b).running
                  and b not in self.paused and (brokers is None or b in brokers)]
        followers = {b: fetcher.follower_state(tp, b, state.leader_epoch) for b in replicas if b != leader_id}
        logs = {}
        touched = self._dirty.setdefault(tp, [leader])
        for b in active:
            log = logs[b] = self.replica_log(tp, b)
            if log not in touched:
                touched.append(log)
            c = CatchUp(tp, b)
            report.catch_ups.append(c)
            fs = followers[b]
            if not fs.truncated:
                c.truncation = fetcher.truncate(tp, b, log, leader)
                fs.truncated = True
        catch = {c.broker: c for c in report.catch_ups}
        for _ in range(1 << 20):
            leader_hw = leader.high_watermark
            progressed = False
            for b in active:
                log, fs, c = logs[b], followers[b], catch[b]
                before_hw = log.high_watermark
                nbytes, nrecords = fetcher.fetch(tp, leader, log, fs, state.isr, leader_id, followers)
                c.fetches += 1
                if nbytes:
                    c.bytes += nbytes
                    if c.records_from is None:
                        c.records_from = log.log_end_offset - nrecords
                    c.records_to = log.log_end_offset - 1
                progressed |= bool(nbytes) or log.high_watermark != before_hw
            # A round that only moved the leader's high watermark needs one more, in which
            # the followers learn it.
            progressed |= leader.high_watermark != leader_hw
            if not progressed or not until_caught_up:
                break
        if len(state.isr) == 1 and state.isr[0] == leader_id:
            advance_high_watermark(leader, state.isr, leader_id, followers)
        report.events.extend(self._update_isr(tp, leader, state, followers))
        return report

    def _update_isr(self, tp: TopicPartition, leader: Log, state, followers) -> list:
        """Kafka's maybeShrinkIsr / maybeExpandIsr for ``tp`` (AlterPartition: applied only if
        the leader epoch is still the one this writer worked with)."""
        from plog.engine.cluster.replication import ControllerEvent, advance_high_watermark

        now = self.clock()
        lag_max = self.fetcher.lag_time_max_ms
        out_of_sync = [b for b in state.isr if b != state.leader and b in followers
                       and followers[b].log_end_offset < leader.log_end_offset
                       and now - followers[b].last_caught_up_ms > lag_max]
        epoch_start = None
        for e in leader.epoch_cache.entries:
            if e.epoch == state.leader_epoch:
                epoch_start = e.start_offset
        caught_up = [b for b, fs in followers.items() if b not in state.isr and fs.log_end_offset >= 0
                     and self.data_dir.broker(b).running
                     and fs.log_end_offset >= leader.high_watermark
                     and (epoch_start is None or fs.log_end_offset >= epoch_start)]
        if not out_of_sync and not caught_up:
            return []
        events = []
        with self.data_dir.update() as meta:
            t = meta.topics.get(tp.topic)
            if t is None:
                return []
            t.sync_states()
            current = t.states[tp.partition]
            if current.leader_epoch != state.leader_epoch or current.leader != state.leader:
                return []
            old = list(current.isr)
            if out_of_sync:
                current.isr = [b for b in current.isr if b not in out_of_sync]
                events.append(ControllerEvent(
                    "isr", f"replica(s) {_id_list(out_of_sync)} not caught up for {lag_max} ms "
                           "(replica.lag.time.max.ms)", tp, isr=tuple(current.isr), previous_isr=tuple(old)))
            if caught_up:
                before = list(current.isr)
                current.isr = [b for b in t.replicas[tp.partition] if b in current.isr or b in caught_up]
                events.append(ControllerEvent("isr", f"replica(s) {_id_list(caught_up)} caught up", tp,
                                              isr=tuple(current.isr), previous_isr=tuple(before)))
        state.isr = list(self.data_dir.partition_state(tp).isr)
        advance_high_watermark(leader, state.isr, state.leader, followers)
        self.events.extend(events)
        return events

    def _replicate_dirty(self) -> None:
        for tp in list(self._dirty):
            if self.data_dir.kafka_log_dir or not self.data_dir.has_topic(tp.topic):
                continue
            try:
                self.replicate(tp)
            except LeaderNotAvailableError:
                continue

    def flush(self) -> None:
        """Replicate what was appended, apply each written log's durability policy (fsync
        with ``plog.fsync.on.produce``), checkpoint the high watermarks readers bound
        consumption by, and fail if an ``acks=all`` append is not below the high watermark."""
        if not self._dirty:
            return
        if self._reordering:
            for logs in self._dirty.values():
                for log in logs:
                    if not log.closed:
                        log.maybe_flush()
            return
        self._replicate_dirty()
        brokers = set()
        for logs in self._dirty.values():
            for log in logs:
                if not log.closed:
                    log.maybe_flush()
                    brokers.add(log.dir.parent)
        self._dirty.clear()
        for lm in self._managers.values():
            if lm.log_dirs[0] in brokers:
                lm.checkpoint_high_watermarks()
        acks, self._acks = self._acks, []
        required_by_tp: dict[TopicPartition, int] = {}
        for tp, required, _ in acks:  # one check per partition: its last acks=all append
            required_by_tp[tp] = max(required, required_by_tp.get(tp, 0))
        for tp, required in required_by_tp.items():
            try:
                leader, _ = self.leader_log(tp)
            except LeaderNotAvailableError as e:
                raise NotEnoughReplicasAfterAppendError(
                    f"acks=all: {tp} lost its leader before the write was replicated ({e})") from None
            if leader.high_watermark < required:
                state = self.data_dir.partition_state(tp)
                raise NotEnoughReplicasAfterAppendError(
                    f"acks=all: offset {required - 1} of {tp} is written on the leader (broker {state.leader}) but "
                    f"not replicated by every in-sync replica (ISR {_id_list(state.isr)}, high watermark "
                    f"{leader.high_watermark}); not acknowledged")

    def close(self) -> None:
        self._close_managers()

    def _close_managers(self) -> None:
        try:
            self.flush()
        finally:
            managers, self._managers = self._managers, {}
            error = None
            settings = None
            if self.maintenance and managers and not self.data_dir.kafka_log_dir:
                try:
                    from plog.engine.maintenance.runner import engine_settings

                    settings = engine_settings(self.data_dir.metadata.broker_configs)
                except Exception as e:
                    error = e
            for lm in managers.values():
                try:
                    if settings is not None:
                        from plog.engine.maintenance.runner import run_due

                        # What a broker's cleaner and retention threads would have done by
                        # now, on the logs this writer touched, before letting go.
                        run_due(lm, settings)
                except Exception as e:
                    error = error or e
                try:
                    lm.close()
                except Exception as e:  # close every manager, then report the first failure
                    error = error or e
            if error is not None:
                raise error

    def __enter__(self) -> "ClusterWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# -- helpers ----------------------------------------------------------------------------------


def _id_list(ids) -> str:
    return "[" + ",".join(map(str, ids)) + "]"


def _read_metadata(path: Path) -> ClusterMetadata:
    try:
        data = json.loads(path.read_text())
    except ValueError as e:
        raise LogDirError(f"{path} is not a plog cluster file: {e}") from None
    if not isinstance(data, dict):
        raise LogDirError(f"{path} is not a plog cluster file: not a JSON object")
    return ClusterMetadata.from_json(data, path)


def _dump_metadata(metadata: ClusterMetadata) -> str:
    return json.dumps(metadata.to_json(), indent=2) + "\n"


def _looks_like_kafka_log_dir(path: Path) -> bool:
    if (path / "meta.properties").is_file():
        return True
    for entry in os.scandir(path):
        if entry.is_dir():
            try:
                parse_partition_dir_name(entry.name)
                return True
            except EngineError:
                continue
    return False


def _kafka_dir_metadata(path: Path) -> ClusterMetadata:
    """The cluster as a Kafka log directory records it: one broker (this directory's node), and
    every topic that its metadata log or its partition folders name.

    A topic in the KRaft metadata log (``__cluster_metadata-0``) has the controller's last
    known topic id, configs and, per partition, replicas, leader, leader epoch and ISR
    (``PartitionRecord`` then each ``PartitionChangeRecord``): SOURCE_METADATA_LOG. A topic
    only in partition folders (a ZooKeeper-era directory keeps all of that in ZooKeeper) has
    the topic id of its ``partition.metadata`` and, per partition, this broker as its one
    known replica at the latest epoch of its ``leader-epoch-checkpoint``:
    SOURCE_PARTITION_FOLDERS, configs unknown."""
    from plog.engine.storage.discovery import partition_facts, read_checkpoints, scan_log_dir
    from plog.engine.storage.topic_configs import read_metadata_image

    meta = read_meta_properties(path) if (path / "meta.properties").is_file() else None
    node = meta.node_id if meta is not None and meta.node_id is not None else 0
    image = read_metadata_image(path)
    folders: dict[str, dict[int, object]] = {}
    for info in scan_log_dir(str(path)).partitions:
        tp = info.topic_partition
        if info.kind == "current" and tp is not None and tp.topic != CLUSTER_METADATA_TOPIC:
            folders.setdefault(tp.topic, {})[tp.partition] = info
    checkpoints = read_checkpoints(path)
    topics = {}
    for name in sorted((set(image.topics) | set(folders)) - {CLUSTER_METADATA_TOPIC}):
        registrations = image.partitions.get(name, {}) if name in image.topics else {}
        facts = {p: partition_facts(info, checkpoints) for p, info in folders.get(name, {}).items()}
        # Folders only say which partitions this broker holds; the others are known only to
        # the controller's records (or, without them, absent here).
        count = max([*registrations, *facts], default=-1) + 1
        replicas, states = [], []
        for p in range(count):
            reg = registrations.get(p)
            if reg is not None:
                replicas.append(list(reg.replicas))
                states.append(PartitionState(reg.leader, reg.leader_epoch, list(reg.isr), SOURCE_METADATA_LOG))
            else:
                epoch = facts[p].leader_epoch if p in facts else None
                replicas.append([node])
                states.append(PartitionState(node, 0 if epoch is None else epoch, [node], SOURCE_PARTITION_FOLDERS))
        known = name in image.topics
        topic_id = image.topics.get(name) or next((f.topic_id for f in facts.values() if f.topic_id), None)
        topics[name] = TopicMetadata(
            name, str(base64url_to_uuid(topic_id)) if topic_id else "", replicas,
            dict(image.topic_configs.get(name, {})) if known else {}, states,
            SOURCE_METADATA_LOG if known else SOURCE_PARTITION_FOLDERS)
    cluster_id = meta.cluster_id if meta is not None and meta.cluster_id else ""
    return ClusterMetadata(cluster_id, [Broker(node)], topics)


def _kafka_broker_state(log_dir: Path) -> str:
    """This directory's broker, in ``plog ls``'s words: ``running`` while a process holds its
    ``.lock``, ``stopped`` after a clean shutdown (``.kafka_cleanshutdown``), else ``unclean``
    (it crashed, this is a copy of a running broker, or it never finished starting)."""
    from plog.engine.storage.checkpoints import CleanShutdownFile
    from plog.engine.inspect.inventory import lock_holder

    if (log_dir / LOCK_FILE_NAME).is_file() and lock_holder(str(log_dir / LOCK_FILE_NAME))[1] is not None:
        return "running"
    return "stopped" if CleanShutdownFile(log_dir).exists() else "unclean"


__all__ = [
    "Broker",
    "ClusterMetadata",
    "ClusterWriter",
    "DataDir",
    "DEFAULT_DATA_DIR",
    "PartitionDescription",
    "PartitionState",
    "ReplicaDescription",
    "ReadOnlyDataDirError",
    "TopicMetadata",
]
