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
  assignment; the leader is the first replica (preferred leadership; replication proper
  is a later layer). Writes go through :class:`ClusterWriter`, which holds the Kafka
  ``.lock`` of every broker directory it writes, appends to the leader and copies the
  exact bytes to each follower before it returns, so every replica is byte-identical.
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

from .checkpoint_files import atomic_write, read_meta_properties
from .config import ConfigError, LogConfig
from .errors import (
    BrokerNotAvailableError,
    EngineError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    LockTimeoutError,
    LogDirError,
    LogDirLockedError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from .log import Log, LogAppendInfo
from .log_manager import LogManager, random_base64_uuid
from .topics import (
    INTERNAL_TOPICS,
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


@dataclass(frozen=True)
class Broker:
    id: int
    rack: str | None = None

    @property
    def dir_name(self) -> str:
        return f"broker-{self.id}"


@dataclass
class TopicMetadata:
    """A topic as plog's metadata keeps it: ``replicas[p]`` is partition p's replica list,
    leader first."""

    name: str
    topic_id: str
    replicas: list[list[int]]
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def partitions(self) -> int:
        return len(self.replicas)

    @property
    def replication_factor(self) -> int:
        return len(self.replicas[0]) if self.replicas else 0

    def to_json(self) -> dict:
        return {"topic_id": self.topic_id, "configs": dict(sorted(self.configs.items())),
                "replicas": [list(r) for r in self.replicas]}


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
            "brokers": [{"id": b.id, "rack": b.rack} for b in self.brokers],
            "topics": {name: t.to_json() for name, t in sorted(self.topics.items())},
            "next_producer_id": self.next_producer_id,
        }
        if self.broker_configs:
            data["broker_configs"] = dict(sorted(self.broker_configs.items()))
        return data

    @classmethod
    def from_json(cls, data: dict, path: Path) -> "ClusterMetadata":
        try:
            if data.get("version") != METADATA_VERSION:
                raise ValueError(f"unsupported version {data.get('version')!r}")
            brokers = [Broker(int(b["id"]), b.get("rack")) for b in data["brokers"]]
            topics = {name: TopicMetadata(name, t["topic_id"], [[int(x) for x in r] for r in t["replicas"]],
                                          {str(k): str(v) for k, v in t.get("configs", {}).items()})
                      for name, t in data["topics"].items()}
            broker_configs = {str(k): str(v) for k, v in (data.get("broker_configs") or {}).items()}
            return cls(str(data["cluster_id"]), brokers, topics, int(data.get("next_producer_id", 0)),
                       broker_configs)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise LogDirError(f"{path} is not a plog cluster file: {e}") from None


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


@dataclass(frozen=True)
class PartitionDescription:
    """``plog topics describe`` for one partition. ``isr``: the replicas whose folder
    exists (every replica is written synchronously; replication lag comes later)."""

    tp: TopicPartition
    leader: int | None
    replicas: list[int]
    isr: list[int]
    log_start_offset: int | None
    log_end_offset: int | None
    size: int | None
    segments: int


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
            from .maintenance import ENGINE_DEFAULTS, engine_settings

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
        p.mkdir(parents=True, exist_ok=True)
        metadata = ClusterMetadata(random_base64_uuid(),
                                   [Broker(first_broker_id + i, racks[i] if racks else None) for i in range(brokers)],
                                   {}, broker_configs={k: str(v) for k, v in (broker_configs or {}).items()})
        with _flock(p / META_LOCK_FILE, DEFAULT_LOCK_TIMEOUT_S):
            if (p / METADATA_FILE).exists():  # another process won the race
                return cls(p, _read_metadata(p / METADATA_FILE))
            for b in metadata.brokers:
                (p / b.dir_name).mkdir(exist_ok=True)
            atomic_write(p / METADATA_FILE, _dump_metadata(metadata))
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

    def replicas(self, tp) -> list[int]:
        tp = TopicPartition(*tp)
        t = self.topic(tp.topic)
        if not 0 <= tp.partition < t.partitions:
            raise UnknownTopicOrPartitionError(
                f"Partition {tp.partition} of topic '{tp.topic}' does not exist (it has {t.partitions})")
        return list(t.replicas[tp.partition])

    def leader(self, tp) -> int:
        """The leader broker of ``tp``: its first (preferred) replica."""
        return self.replicas(tp)[0]

    def topic_config(self, topic: str) -> LogConfig:
        t = self.metadata.topics.get(topic)
        return LogConfig.from_properties(t.configs if t else {})

    def partition_path(self, tp, broker_id: int | None = None) -> Path:
        tp = TopicPartition(*tp)
        broker = self.leader(tp) if broker_id is None else broker_id
        return self.broker_log_dir(broker) / partition_dir_name(tp)

    def open_reader(self, tp, broker_id: int | None = None) -> Log:
        """A read-only view of a replica (default: the leader) of ``tp`` as it is on disk now."""
        tp = TopicPartition(*tp)
        path = self.partition_path(tp, broker_id)
        if not path.is_dir():
            raise UnknownTopicOrPartitionError(f"no folder for {tp} at {path}")
        # The log start offset may sit above the first segment (DeleteRecords, retention in
        # progress): the broker directory's checkpoint says so.
        start = 0
        checkpoint = path.parent / "log-start-offset-checkpoint"
        if checkpoint.is_file():
            from .checkpoint_files import OffsetCheckpointFile

            start = OffsetCheckpointFile(checkpoint).read().get(tp, 0)
        return Log.open(path, self.topic_config(tp.topic), writable=False, log_start_offset=start)

    def describe_partitions(self, topic: str) -> list["PartitionDescription"]:
        """Per partition: leader, replicas, ISR, and the leader replica's offsets and size as
        on disk now (read-only)."""
        t = self.topic(topic)
        out = []
        for p, replicas in enumerate(t.replicas):
            tp = TopicPartition(topic, p)
            online = [b for b in replicas if self.partition_path(tp, b).is_dir()]
            start = end = size = None
            segments = 0
            if replicas[0] in online:
                log = self.open_reader(tp, replicas[0])
                try:
                    start, end, size, segments = log.log_start_offset, log.log_end_offset, log.size, len(log.segments)
                finally:
                    log.close()
            out.append(PartitionDescription(tp, replicas[0] if replicas[0] in online else None, list(replicas),
                                            online, start, end, size, segments))
        return out

    # -- topic administration ---------------------------------------------------------------

    def create_topic(self, name: str, partitions: int | None = None, replication_factor: int | None = None, *,
                     configs: dict[str, str] | None = None, replica_assignment: dict[int, list[int]] | None = None,
                     if_not_exists: bool = False, internal_ok: bool = False, rng=None) -> TopicMetadata | None:
        """Kafka's CreateTopics: validate, place replicas (§17.2), create every replica folder.

        Returns the new topic, or ``None`` when it exists and ``if_not_exists``."""
        validate_topic_name(name)
        if name in INTERNAL_TOPICS and not internal_ok:
            raise InvalidTopicError(f"Creation of internal topic {name} is prohibited.")
        configs = {str(k): str(v) for k, v in (configs or {}).items()}
        try:
            LogConfig.from_properties(configs)
        except ConfigError as e:
            raise InvalidTopicError(f"Invalid config for topic {name}: {e}") from None
        with self.update() as meta:
            if name in meta.topics:
                if if_not_exists:
                    return None
                raise TopicExistsError(f"Topic '{name}' already exists.")
            for other in meta.topics:
                if has_collision(name, other):
                    raise TopicExistsError(f"Topic '{name}' collides with existing topic: {other}")
            broker_ids = {b.id for b in meta.brokers}
            from . import placement as _placement  # noqa: PLC0415

            if replica_assignment is not None:
                if partitions is not None and partitions != len(replica_assignment):
                    raise InvalidReplicaAssignmentError(
                        "--partitions cannot be used with --replica-assignment (the assignment gives the count)")
                _placement.validate_manual_assignment(replica_assignment, broker_ids)
                assignment = replica_assignment
            else:
                n = 1 if partitions is None else partitions
                rf = 1 if replication_factor is None else replication_factor
                if n < 1:
                    raise InvalidPartitionsError(f"Number of partitions must be larger than 0, not {n}.")
                if rf < 1:
                    raise InvalidReplicationFactorError(f"Replication factor must be larger than 0, not {rf}.")
                assignment = _placement.assign_replicas_to_brokers(
                    [_placement.BrokerMetadata(b.id, b.rack) for b in meta.brokers],
                    n, rf, rng=rng)
            topic = TopicMetadata(name, str(uuid.uuid4()), [list(assignment[p]) for p in range(len(assignment))],
                                  configs)
            meta.topics[name] = topic
        # The folders are created after the metadata is committed: a crash in between leaves a
        # topic whose missing folders the first writer creates (ClusterWriter.log).
        with self.writer() as w:
            for p, replicas in enumerate(topic.replicas):
                for b in replicas:
                    w.replica_log(TopicPartition(name, p), b)
        return topic

    def alter_topic(self, name: str, *, partitions: int | None = None, set_configs: dict[str, str] | None = None,
                    delete_configs: list[str] | None = None,
                    replica_assignment: dict[int, list[int]] | None = None, rng=None) -> TopicMetadata:
        """Add partitions (never remove: Kafka cannot) and change configs."""
        from .placement import BrokerMetadata, add_partitions_assignment

        with self.update() as meta:
            topic = meta.topics.get(name)
            if topic is None:
                raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist in {self.path}")
            if partitions is not None:
                if partitions <= topic.partitions:
                    raise InvalidPartitionsError(
                        f"Topic currently has {topic.partitions} partitions, which is higher than or equal "
                        f"to the requested {partitions}.")
                if replica_assignment is not None:
                    extra = replica_assignment
                    for p, reps in extra.items():
                        unknown = set(reps) - {b.id for b in meta.brokers}
                        if unknown or len(set(reps)) != len(reps) or len(reps) != topic.replication_factor:
                            raise InvalidReplicaAssignmentError(
                                f"invalid replicas {reps} for new partition {p} of {name}")
                else:
                    existing = dict(enumerate(topic.replicas))
                    extra = add_partitions_assignment([BrokerMetadata(b.id, b.rack) for b in meta.brokers],
                                                      existing, partitions, rng=rng)
                for p in range(topic.partitions, partitions):
                    topic.replicas.append(list(extra[p]))
            if set_configs or delete_configs:
                new = dict(topic.configs)
                for k in delete_configs or []:
                    new.pop(k, None)
                new.update({str(k): str(v) for k, v in (set_configs or {}).items()})
                try:
                    LogConfig.from_properties(new)
                except ConfigError as e:
                    raise InvalidTopicError(f"Invalid config for topic {name}: {e}") from None
                topic.configs = new
        with self.writer() as w:
            for p, replicas in enumerate(topic.replicas):
                for b in replicas:
                    w.replica_log(TopicPartition(name, p), b)
        return topic

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

    def writer(self, timeout_s: float = DEFAULT_LOCK_TIMEOUT_S) -> "ClusterWriter":
        self._check_writable()
        return ClusterWriter(self, timeout_s)


class ClusterWriter:
    """Holds the ``.lock`` of the broker directories it touches (taken on first use, waiting up
    to ``timeout_s`` for another plog process) and appends through their ``LogManager``s.

    Use as a context manager: closing writes the checkpoints and the clean-shutdown marker of
    every broker directory it opened and releases the locks, so the next writer (in this or
    another process) opens only the partitions it needs.
    """

    def __init__(self, data_dir: DataDir, timeout_s: float, *, maintenance: bool = True):
        self.data_dir = data_dir
        self.timeout_s = timeout_s
        # Run due retention/compaction on the touched logs when the locks are given back.
        self.maintenance = maintenance
        self._managers: dict[int, LogManager] = {}
        self._dirty: dict[TopicPartition, list[Log]] = {}

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
        taken: nobody can move replicas (``plog assign execute`` holds every lock) while this
        writer holds one, so metadata read then stays true until it lets go."""
        need = sorted(set(broker_ids) - set(self._managers))
        if not need:
            return False
        if self._managers and need[0] < max(self._managers):
            held = set(self._managers)
            self._close_managers()
            need = sorted(held | set(broker_ids))
        first = not self._managers
        opened = {b: self._open_manager(b) for b in need}
        self._managers.update(opened)
        if first:
            self.data_dir.reload()
        # plog's metadata is the source of topic ids and configs for every log directory.
        topics = {name: {"topic_id": t.topic_id, "configs": dict(t.configs)}
                  for name, t in self.data_dir.metadata.topics.items()}
        for lm in opened.values():
            lm.adopt_topics(topics)
        return first

    def _open_manager(self, broker_id: int) -> LogManager:
        log_dir = self.data_dir.broker_log_dir(broker_id)
        deadline = time.monotonic() + self.timeout_s
        delay = 0.002
        while True:
            try:
                lm = LogManager([log_dir], node_id=broker_id, cluster_id=self.data_dir.metadata.cluster_id, lazy=True)
                break
            except LogDirLockedError:
                if time.monotonic() >= deadline:
                    raise LockTimeoutError(
                        f"timed out after {self.timeout_s:g}s waiting for the lock of {log_dir} "
                        "(another plog process or a Kafka broker is writing it)") from None
                time.sleep(delay)
                delay = min(delay * 2, 0.05)
        return lm

    def _replicas(self, tp: TopicPartition) -> list[int]:
        """``tp``'s replicas with every one of their locks held (metadata current)."""
        while True:
            replicas = self.data_dir.replicas(tp)
            if not self.acquire(replicas):
                return replicas

    def replica_log(self, tp, broker_id: int) -> Log:
        """The writable log of ``tp``'s replica on ``broker_id`` (folder created if needed).
        Only a current replica: a folder on another broker would be a write nobody reads."""
        tp = TopicPartition(*tp)
        if broker_id not in self._replicas(tp):
            raise BrokerNotAvailableError(f"broker {broker_id} holds no replica of {tp} "
                                          f"(replicas: {self.data_dir.replicas(tp)})")
        lm = self.manager(broker_id)
        log = lm.get_log(tp)
        if log is None:
            t = self.data_dir.topic(tp.topic)
            log = lm.get_or_create_log(tp, topic_id=uuid.UUID(t.topic_id))
        return log

    def append(self, tp, batch: bytes, *, flush: bool = False) -> LogAppendInfo:
        """Append one producer batch to the leader of ``tp`` and copy the written bytes to
        every follower. With ``flush=False`` call :meth:`flush` before acknowledging."""
        tp = TopicPartition(*tp)
        replicas = self._replicas(tp)
        leader = self.replica_log(tp, replicas[0])
        info = leader.append_as_leader(batch, flush=flush)
        touched = self._dirty.setdefault(tp, [leader])
        if len(replicas) > 1 and not info.duplicate:
            written = leader.read(info.first_offset, max_bytes=len(batch) + 64,
                                  max_offset=info.last_offset + 1).records
            for broker in replicas[1:]:
                follower = self.replica_log(tp, broker)
                follower.append_as_follower(bytes(written), flush=flush)
                if follower not in touched:
                    touched.append(follower)
        return info

    def append_control(self, tp, producer_id: int, producer_epoch: int, *, commit: bool) -> LogAppendInfo:
        """Write a transaction marker to every replica of ``tp`` (leader first)."""
        tp = TopicPartition(*tp)
        replicas = self._replicas(tp)
        leader = self.replica_log(tp, replicas[0])
        info = leader.append_end_txn_marker(producer_id, producer_epoch, commit=commit)
        written = leader.read(info.first_offset, max_offset=info.last_offset + 1).records
        for broker in replicas[1:]:
            self.replica_log(tp, broker).append_as_follower(bytes(written))
        return info

    def flush(self) -> None:
        """Apply each written log's durability policy (fsync with ``plog.fsync.on.produce``)."""
        for logs in self._dirty.values():
            for log in logs:
                log.maybe_flush()
        self._dirty.clear()

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
                    from .maintenance import engine_settings

                    settings = engine_settings(self.data_dir.metadata.broker_configs)
                except Exception as e:
                    error = e
            for lm in managers.values():
                try:
                    if settings is not None:
                        from .maintenance import run_due

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
    """One broker and the topics whose partition folders are in ``path``."""
    meta = read_meta_properties(path) if (path / "meta.properties").is_file() else None
    node = meta.node_id if meta is not None and meta.node_id is not None else 0
    partitions: dict[str, set[int]] = {}
    for entry in os.scandir(path):
        if not entry.is_dir():
            continue
        try:
            tp, kind = parse_partition_dir_name(entry.name)
        except EngineError:
            continue
        if kind == "current" and tp.topic != "__cluster_metadata":
            partitions.setdefault(tp.topic, set()).add(tp.partition)
    topics = {}
    for name, parts in partitions.items():
        # Folders only say which partitions this broker holds; missing ones are absent here.
        n = max(parts) + 1
        topics[name] = TopicMetadata(name, "", [[node] for _ in range(n)])
    cluster_id = meta.cluster_id if meta is not None and meta.cluster_id else ""
    return ClusterMetadata(cluster_id, [Broker(node)], topics)


__all__ = [
    "Broker",
    "ClusterMetadata",
    "ClusterWriter",
    "DataDir",
    "DEFAULT_DATA_DIR",
    "PartitionDescription",
    "ReadOnlyDataDirError",
    "TopicMetadata",
]
