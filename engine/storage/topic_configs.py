"""Effective topic configs of a log directory, with where each value came from.

Maintenance (retention, compaction) needs a partition's ``retention.ms``,
``cleanup.policy`` ... A plog data directory keeps them in ``.plog-topics.json`` beside
the partitions (and ``cluster.json``). A real Kafka log directory does not hold a
broker's static ``server.properties``, but in KRaft mode it holds the cluster's metadata
log, ``__cluster_metadata-0``, whose ``ConfigRecord`` s carry every topic config set with
``kafka-topics --config`` / ``kafka-configs`` and the dynamic broker defaults. Layers,
later ones winning (the order in which Kafka itself resolves a topic config):

1. Kafka's defaults (``LogConfig()``);
2. broker settings from a ``server.properties`` given by the user (``log.retention.hours``
   ... mapped to their topic names as Kafka's ``LogConfig`` does);
3. dynamic cluster-wide broker configs (``ConfigRecord`` BROKER ``""``), then this
   broker's own (BROKER ``"<node.id>"``), from the metadata log;
4. the topic's configs (``ConfigRecord`` TOPIC ``<name>``), or plog's topics file;
5. overrides given on the command line.

The metadata log is replayed from the newest KRaft snapshot (``<offset>-<epoch>.checkpoint``)
and the log records at or after its offset (:func:`read_metadata_image`). Records that do
not decode (a newer Kafka's types) are skipped: only topics, partitions and configs matter
here. The same replay gives ``topics list``/``describe`` of a KRaft log directory the
controller's last known topic ids, partition leaders, leader epochs, replicas and ISRs.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from plog.engine.errors import ConfigError
from plog.engine.storage.log_config import TOPIC_CONFIG_NAMES, LogConfig
from plog.engine.storage.file_names import (
    CLUSTER_METADATA_TOPIC,
    LOG_FILE_SUFFIX,
    is_kraft_snapshot_file,
    kraft_snapshot_end_offset,
    parse_segment_file_name,
)

KAFKA_DEFAULT = "kafka default"
SERVER_PROPERTIES = "server.properties"
DYNAMIC_CLUSTER = "dynamic cluster default (metadata log)"
DYNAMIC_BROKER = "dynamic broker config (metadata log)"
TOPIC_METADATA = "topic config (metadata log)"
PLOG_TOPICS = "topic config (plog)"
COMMAND_LINE = "command line"

INTERNAL_SEGMENT_BYTES = "internal.segment.bytes"
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4

#: Broker setting -> topic config (Kafka's ``ServerTopicConfigSynonyms``). Several broker
#: names may feed one topic name; the first listed that is set wins (ms over minutes over hours).
BROKER_SYNONYMS: dict[str, tuple[str, ...]] = {
    "segment.bytes": ("log.segment.bytes",),
    "segment.ms": ("log.roll.ms", "log.roll.hours"),
    "segment.jitter.ms": ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    "segment.index.bytes": ("log.index.size.max.bytes",),
    "flush.messages": ("log.flush.interval.messages",),
    "flush.ms": ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    "retention.bytes": ("log.retention.bytes",),
    "retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "max.message.bytes": ("message.max.bytes",),
    "index.interval.bytes": ("log.index.interval.bytes",),
    "delete.retention.ms": ("log.cleaner.delete.retention.ms",),
    "min.compaction.lag.ms": ("log.cleaner.min.compaction.lag.ms",),
    "max.compaction.lag.ms": ("log.cleaner.max.compaction.lag.ms",),
    "file.delete.delay.ms": ("log.segment.delete.delay.ms",),
    "min.cleanable.dirty.ratio": ("log.cleaner.min.cleanable.ratio",),
    "cleanup.policy": ("log.cleanup.policy",),
    "unclean.leader.election.enable": ("unclean.leader.election.enable",),
    "min.insync.replicas": ("min.insync.replicas",),
    "compression.type": ("compression.type",),
    "preallocate": ("log.preallocate",),
    "message.timestamp.type": ("log.message.timestamp.type",),
}
_UNIT_MS = {"minutes": 60_000, "hours": 3_600_000}


def topic_settings_from_broker(props: Mapping[str, str]) -> dict[str, str]:
    """Broker properties (``log.retention.hours=168`` ...) as topic configs."""
    out: dict[str, str] = {}
    for topic_name, synonyms in BROKER_SYNONYMS.items():
        for name in synonyms:
            value = props.get(name)
            if value is None or value == "":
                continue
            unit = name.rsplit(".", 1)[-1]
            if unit in _UNIT_MS:
                try:
                    value = str(int(value) * _UNIT_MS[unit]) if int(value) >= 0 else "-1"
                except ValueError:
                    raise ConfigError(f"invalid value {value!r} for broker setting {name}") from None
            out[topic_name] = str(value).strip()
            break
    return out


def read_properties(path: str | os.PathLike) -> dict[str, str]:
    """A Java ``.properties`` file: ``key=value`` or ``key: value``, ``#``/``!`` comments,
    backslash line continuations. Unicode escapes are left as written (config values do
    not use them)."""
    props: dict[str, str] = {}
    pending = ""
    with open(path, encoding="utf-8", errors="replace") as f:
        for raw in f:
            line = pending + raw.strip()
            pending = ""
            if not line or line[0] in "#!":
                continue
            if line.endswith("\\") and not line.endswith("\\\\"):
                pending = line[:-1]
                continue
            for i, ch in enumerate(line):
                if ch in "=:" or ch.isspace():
                    key, value = line[:i], line[i + 1:].lstrip(" \t=:")
                    break
            else:
                key, value = line, ""
            props[key] = value.strip()
    return props


#: ``PartitionChangeRecord.leader`` when the leader did not change (Kafka's ``NO_LEADER_CHANGE``).
NO_LEADER_CHANGE = -2


@dataclass
class PartitionRegistration:
    """The controller's state of one partition, as Kafka's ``PartitionRegistration`` keeps it:
    set by a ``PartitionRecord``, then changed by each ``PartitionChangeRecord``."""

    replicas: list[int]
    isr: list[int]
    leader: int  # -1 (Kafka's NO_LEADER): offline
    leader_epoch: int
    partition_epoch: int

    @classmethod
    def from_record(cls, f: Mapping) -> "PartitionRegistration":
        return cls(list(f["replicas"]), list(f["isr"]), f["leader"], f["leaderEpoch"], f["partitionEpoch"])

    def merge(self, f: Mapping) -> None:
        """Apply a ``PartitionChangeRecord`` (Kafka's ``PartitionRegistration.merge``): null
        fields keep their value; a leader other than NO_LEADER_CHANGE (-2), even the same
        one or none (-1), starts a new leader epoch; every change is a new partition epoch."""
        if f.get("replicas") is not None:
            self.replicas = list(f["replicas"])
        if f.get("isr") is not None:
            self.isr = list(f["isr"])
        if f.get("leader", NO_LEADER_CHANGE) != NO_LEADER_CHANGE:
            self.leader = f["leader"]
            self.leader_epoch += 1
        self.partition_epoch += 1


@dataclass
class MetadataImage:
    """What a KRaft metadata log says about topics, partitions and configs (Kafka's
    ``MetadataImage``, the parts plog uses), replayed from ``__cluster_metadata-0``."""

    topics: dict[str, str] = field(default_factory=dict)  # name -> topic id (Kafka's text form)
    topic_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    broker_configs: dict[str, dict[str, str]] = field(default_factory=dict)  # "" = cluster default
    partitions: dict[str, dict[int, PartitionRegistration]] = field(default_factory=dict)  # topic -> p -> state
    source: str | None = None  # the metadata log folder read (None: the log dir has none)
    last_offset: int | None = None  # offset of the last record applied


_IMAGES: dict[str, tuple] = {}


def read_metadata_image(log_dir: str | os.PathLike) -> MetadataImage:
    """Replay ``<log_dir>/__cluster_metadata-0`` (newest snapshot, then the log after it).

    The replay is kept per log directory and done again only when the folder's files change
    (``topics describe`` and a consumer ask for it for every partition); the image returned
    is shared: read it, do not modify it."""
    part = Path(log_dir) / f"{CLUSTER_METADATA_TOPIC}-0"
    try:
        stamp = tuple(sorted((e.name, e.stat().st_size, e.stat().st_mtime_ns) for e in os.scandir(part)))
    except OSError:
        stamp = None
    key = os.path.abspath(log_dir)
    cached = _IMAGES.get(key)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    image = _replay(part) if stamp is not None else MetadataImage()
    _IMAGES[key] = (stamp, image)
    return image


def _replay(part: Path) -> MetadataImage:
    from plog.formats.cluster_metadata import decode_metadata_value
    from plog.formats.errors import FormatError

    from plog.engine.storage.file_records import FileBatches

    found = MetadataImage()
    names = sorted(os.listdir(part))
    snapshots = [n for n in names if is_kraft_snapshot_file(n)]
    start = 0
    files: list[Path] = []
    if snapshots:
        newest = max(snapshots, key=kraft_snapshot_end_offset)
        start = kraft_snapshot_end_offset(newest)
        files.append(part / newest)
    files += [part / n for n in names if (parse_segment_file_name(n) or (0, ""))[1] == LOG_FILE_SUFFIX]
    ids: dict[str, str] = {}
    for path in files:
        is_snapshot = is_kraft_snapshot_file(path.name)
        if is_snapshot and start:
            found.last_offset = start - 1  # a snapshot holds the state up to its end offset
        try:
            for batch in FileBatches(path):
                if getattr(batch, "is_control", False):
                    continue
                if not is_snapshot and batch.last_offset < start:
                    continue
                for record in batch.records():
                    if not is_snapshot and record.offset < start:
                        continue
                    try:
                        m = decode_metadata_value(record.value)
                    except FormatError:
                        continue
                    _apply(found, ids, m)
                    if not is_snapshot:
                        found.last_offset = record.offset
        except (FormatError, OSError):
            # A torn metadata log tail: what was read so far is the best available answer.
            continue
    found.source = str(part)
    return found


def _apply(found: MetadataImage, ids: dict[str, str], m) -> None:
    from plog.formats.checkpoints import uuid_to_base64url

    f = m.fields
    if m.type == "TOPIC_RECORD":
        found.topics[f["name"]] = uuid_to_base64url(f["topicId"])
        ids[str(f["topicId"])] = f["name"]
    elif m.type == "REMOVE_TOPIC_RECORD":
        name = ids.pop(str(f["topicId"]), None)
        if name is not None:
            found.topics.pop(name, None)
            found.topic_configs.pop(name, None)
            found.partitions.pop(name, None)
    elif m.type == "PARTITION_RECORD":
        name = ids.get(str(f["topicId"]))
        if name is not None:
            found.partitions.setdefault(name, {})[f["partitionId"]] = PartitionRegistration.from_record(f)
    elif m.type == "PARTITION_CHANGE_RECORD":
        name = ids.get(str(f["topicId"]))
        registration = found.partitions.get(name, {}).get(f["partitionId"]) if name is not None else None
        if registration is not None:
            registration.merge(f)
    elif m.type == "CONFIG_RECORD":
        if f["resourceType"] == RESOURCE_TOPIC:
            target = found.topic_configs.setdefault(f["resourceName"], {})
        elif f["resourceType"] == RESOURCE_BROKER:
            target = found.broker_configs.setdefault(f["resourceName"], {})
        else:
            return
        if f["value"] is None:
            target.pop(f["name"], None)
        else:
            target[f["name"]] = f["value"]


@dataclass
class EffectiveConfig:
    """A topic's ``LogConfig`` and, for every value that is not Kafka's default, its source."""

    topic: str
    config: LogConfig
    sources: dict[str, str]

    def source_of(self, name: str) -> str:
        return self.sources.get(name, KAFKA_DEFAULT)

    def describe(self, name: str) -> str:
        """``retention.ms=604800000 (kafka default)``."""
        value = self.config.to_properties(all_values=True)[name]
        return f"{name}={value} ({self.source_of(name)})"


class ConfigResolver:
    """Resolves the effective config of each topic of one log directory (see module docstring).

    ``overrides`` are topic config names (``{"retention.ms": "3600000"}``) applied to every
    topic; ``server_properties`` a broker ``server.properties`` file.
    """

    def __init__(self, log_dir: str | os.PathLike, *, overrides: Mapping[str, str] | None = None,
                 server_properties: str | os.PathLike | None = None, node_id: int | None = None):
        self.log_dir = Path(log_dir)
        self.overrides = {k: str(v) for k, v in (overrides or {}).items()}
        for name in self.overrides:
            if name not in TOPIC_CONFIG_NAMES:
                raise ConfigError(f"unknown topic config {name!r}")
        self.broker = topic_settings_from_broker(read_properties(server_properties)) if server_properties else {}
        if node_id is None and server_properties:
            raw = read_properties(server_properties)
            node = raw.get("node.id") or raw.get("broker.id")
            node_id = int(node) if node and node.strip().lstrip("-").isdigit() else None
        self.node_id = node_id if node_id is not None else _node_id_of(self.log_dir)
        self.metadata = read_metadata_image(self.log_dir)
        self.plog_topics = _plog_topics(self.log_dir)

    def resolve(self, topic: str) -> EffectiveConfig:
        layers: list[tuple[str, Mapping[str, str]]] = [
            (SERVER_PROPERTIES, self.broker),
            (DYNAMIC_CLUSTER, _known(self.metadata.broker_configs.get("", {}))),
            (DYNAMIC_BROKER, _known(self.metadata.broker_configs.get(str(self.node_id), {}))
             if self.node_id is not None else {}),
            (TOPIC_METADATA, self.metadata.topic_configs.get(topic, {})),
            (PLOG_TOPICS, self.plog_topics.get(topic, {})),
            (COMMAND_LINE, self.overrides),
        ]
        merged: dict[str, str] = {}
        sources: dict[str, str] = {}
        internal_segment_bytes = None
        for source, values in layers:
            for name, value in values.items():
                if name in TOPIC_CONFIG_NAMES:
                    merged[name] = value
                    sources[name] = source
                elif name == INTERNAL_SEGMENT_BYTES:
                    internal_segment_bytes = (value, source)
        if internal_segment_bytes is not None:
            # Kafka 4.x: LogConfig.segmentSize() is internal.segment.bytes when it is set (how
            # tests get segments below the 1 MiB minimum of segment.bytes); rolls and the
            # cleaner's grouping follow it.
            merged["segment.bytes"], source = internal_segment_bytes
            sources["segment.bytes"] = f"{source}, internal.segment.bytes"
        try:
            config = LogConfig.from_properties(merged)
        except ConfigError as e:
            raise ConfigError(f"topic {topic}: {e}") from None
        return EffectiveConfig(topic, config, sources)


def _known(broker_dynamic: Mapping[str, str]) -> dict[str, str]:
    """Dynamic broker configs use broker names (``log.retention.ms``): map them."""
    return topic_settings_from_broker(broker_dynamic)


def _plog_topics(log_dir: Path) -> dict[str, dict[str, str]]:
    from plog.engine.storage.log_manager import TOPICS_FILE

    path = log_dir / TOPICS_FILE
    try:
        data = json.loads(path.read_text())
        return {name: dict(entry.get("configs", {})) for name, entry in data["topics"].items()}
    except FileNotFoundError:
        return {}
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise ConfigError(f"{path} is not a plog topics file: {e}", path=str(path)) from None


def _node_id_of(log_dir: Path) -> int | None:
    from plog.engine.storage.checkpoints import read_meta_properties

    try:
        meta = read_meta_properties(log_dir)
    except (OSError, ValueError):
        return None
    return getattr(meta, "node_id", None) if meta is not None else None
