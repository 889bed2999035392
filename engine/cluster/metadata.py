"""plog's cluster metadata, ``cluster.json``: what Kafka's controller keeps for a cluster.

* Brokers (id, rack, state), topics (topic id, configs, replica assignment) and, per
  partition, the controller's state (leader, leader epoch, ISR: Kafka's ``PartitionRecord``),
  plus the next producer id and the broker settings the engine honours.
* The file is read whole and replaced atomically (tmp, fsync, rename) under the metadata
  lock (:func:`exclusive_flock` on ``.plog-meta.lock``): concurrent processes never see half
  a file and never lose each other's updates. Reading and locking live here; the
  read-modify-write is :meth:`plog.engine.cluster.data_dir.DataDir.update`.
* A plain Kafka log directory has no ``cluster.json``: :func:`kafka_dir_metadata` builds the
  same objects from what the directory records (its KRaft metadata log, else its partition
  folders), and ``source`` on topics and partition states says which.
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

from plog.engine.storage.checkpoints import read_meta_properties
from plog.engine.errors import EngineError, LockTimeoutError, LogDirError, bad_document_reason
from plog.engine.storage.file_names import CLUSTER_METADATA_TOPIC, parse_partition_dir_name

METADATA_FILE = "cluster.json"
META_LOCK_FILE = ".plog-meta.lock"
METADATA_VERSION = 1
DEFAULT_LOCK_TIMEOUT_S = 30.0

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
def exclusive_flock(path: Path, timeout_s: float) -> Iterator[None]:
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


def id_list(ids) -> str:
    """Broker ids as the controller's messages print them: ``[1,2,3]``."""
    return "[" + ",".join(map(str, ids)) + "]"


def read_metadata(path: Path) -> ClusterMetadata:
    """The cluster file at ``path``; :class:`LogDirError` naming it when it is not one."""
    try:
        data = json.loads(path.read_text())
    except ValueError as e:
        raise LogDirError(f"{path} is not a plog cluster file: {e}") from None
    if not isinstance(data, dict):
        raise LogDirError(f"{path} is not a plog cluster file: not a JSON object")
    return ClusterMetadata.from_json(data, path)


def dump_metadata(metadata: ClusterMetadata) -> str:
    """The text of ``metadata``'s cluster file (what ``read_metadata`` reads back)."""
    return json.dumps(metadata.to_json(), indent=2) + "\n"


def looks_like_kafka_log_dir(path: Path) -> bool:
    """Whether ``path`` holds a ``meta.properties`` or a partition folder."""
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


def kafka_dir_metadata(path: Path) -> ClusterMetadata:
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


__all__ = [
    "BROKER_STATES",
    "DEFAULT_LOCK_TIMEOUT_S",
    "METADATA_FILE",
    "META_LOCK_FILE",
    "SOURCE_METADATA_LOG",
    "SOURCE_PARTITION_FOLDERS",
    "SOURCE_PLOG",
    "Broker",
    "ClusterMetadata",
    "PartitionState",
    "TopicMetadata",
    "dump_metadata",
    "exclusive_flock",
    "id_list",
    "kafka_dir_metadata",
    "looks_like_kafka_log_dir",
    "read_metadata",
]
