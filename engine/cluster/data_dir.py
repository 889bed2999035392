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
  so concurrent processes never see half a file and never lose each other's updates
  (engine.cluster.metadata: what the file holds).
* A partition's replicas are folders ``broker-<id>/<topic>-<p>`` on each broker of its
  assignment. ``cluster.json`` holds each partition's leader, leader epoch and ISR (the
  controller's state, engine.replication) and each broker's state. Writes go through
  :class:`~plog.engine.cluster.writer.ClusterWriter`, which holds the Kafka ``.lock`` of every
  running broker directory it writes, appends to the leader and runs the followers' fetchers
  before acknowledging; followers hold the leader's exact batches up to their log end offset.
* Topics are created, altered and deleted by engine.cluster.topic_admin (all or nothing).
* Readers (consumers, describe) never take a lock and never modify anything.

A plain Kafka log directory (``meta.properties`` or partition folders, no ``cluster.json``)
also opens, read-only: one broker, topics discovered from the folders. That is how
``plog consume``/``plog groups describe`` read a stopped broker's ``log.dirs``.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from plog.engine.storage.checkpoints import atomic_write, read_meta_properties
from plog.engine.storage.log_config import LogConfig
from plog.engine.cluster.metadata import (
    DEFAULT_LOCK_TIMEOUT_S,
    META_LOCK_FILE,
    METADATA_FILE,
    SOURCE_PARTITION_FOLDERS,
    SOURCE_PLOG,
    Broker,
    ClusterMetadata,
    PartitionState,
    TopicMetadata,
    dump_metadata,
    exclusive_flock,
    id_list,
    kafka_dir_metadata,
    looks_like_kafka_log_dir,
    read_metadata,
)
from plog.engine.cluster.topic_admin import TopicAdmin
from plog.engine.cluster.writer import ClusterWriter
from plog.engine.errors import (
    BrokerNotAvailableError,
    ConfigError,
    LeaderNotAvailableError,
    LogDirError,
    ReadOnlyDataDirError,
    UnknownTopicOrPartitionError,
)
from plog.engine.storage.log import Log
from plog.engine.storage.log_manager import random_base64_uuid
from plog.engine.storage.file_names import (
    INTERNAL_TOPICS,
    LOCK_FILE_NAME,
    TopicPartition,
    partition_dir_name,
)

DEFAULT_DATA_DIR = "plog-data"


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


class DataDir(TopicAdmin):
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
            return cls(p, read_metadata(meta_file))
        if p.is_dir() and looks_like_kafka_log_dir(p):
            return cls(p, kafka_dir_metadata(p), kafka_log_dir=True)
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
            with exclusive_flock(p / META_LOCK_FILE, DEFAULT_LOCK_TIMEOUT_S):
                if (p / METADATA_FILE).exists():  # another process won the race
                    return cls(p, read_metadata(p / METADATA_FILE))
                for b in metadata.brokers:
                    if not (p / b.dir_name).exists():
                        (p / b.dir_name).mkdir()
                        made.append(p / b.dir_name)
                atomic_write(p / METADATA_FILE, dump_metadata(metadata))
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
            self.metadata = read_metadata(self.path / METADATA_FILE)
        else:
            self.metadata = kafka_dir_metadata(self.path)

    @contextlib.contextmanager
    def update(self, timeout_s: float = DEFAULT_LOCK_TIMEOUT_S) -> Iterator[ClusterMetadata]:
        """Read-modify-write ``cluster.json`` under the metadata lock; written only when the
        block ends without an exception."""
        self._check_writable()
        with exclusive_flock(self.path / META_LOCK_FILE, timeout_s):
            self.metadata = read_metadata(self.path / METADATA_FILE)
            yield self.metadata
            atomic_write(self.path / METADATA_FILE, dump_metadata(self.metadata))

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
                f"{tp} has no leader: ISR {id_list(state.isr)} "
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
        # A writer may trim the indexes while this view opens and reads them (roll, close):
        # copies, from the load on, never maps.
        log = Log.open(path, self.topic_config(tp.topic), writable=False, live_reader=True,
                       log_start_offset=checkpoints.log_starts.get(tp, 0))
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

    # -- producer ids -------------------------------------------------------------------------

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


# -- helpers ----------------------------------------------------------------------------------


def _kafka_broker_state(log_dir: Path) -> str:
    """This directory's broker, in ``plog ls``'s words: ``running`` while a process holds its
    ``.lock``, ``stopped`` after a clean shutdown (``.kafka_cleanshutdown``), else ``unclean``
    (it crashed, this is a copy of a running broker, or it never finished starting)."""
    from plog.engine.storage.checkpoints import CleanShutdownFile
    from plog.engine.storage.lock import lock_holder

    if (log_dir / LOCK_FILE_NAME).is_file() and lock_holder(str(log_dir / LOCK_FILE_NAME))[1] is not None:
        return "running"
    return "stopped" if CleanShutdownFile(log_dir).exists() else "unclean"


__all__ = [
    "DataDir",
    "DEFAULT_DATA_DIR",
    "PartitionDescription",
    "ReplicaDescription",
    "ReadOnlyDataDirError",
]
