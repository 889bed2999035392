"""``LogManager``: the log directories of one broker, as Kafka's ``LogManager`` keeps them.

A log directory (one ``log.dirs`` entry) holds, besides partition folders::

    .lock                               one writer per directory (engine.lock)
    meta.properties                     cluster id, node id, directory id
    .kafka_cleanshutdown                written on clean close, deleted on open
    recovery-point-offset-checkpoint    per partition: everything below is fsynced
    log-start-offset-checkpoint         partitions whose log start is above their first segment
    replication-offset-checkpoint       per partition high watermark
    .plog-topics.json                   plog's own: topic ids and topic configs

A Kafka broker only looks at the directories of a log dir and at the files it knows, so
``.plog-topics.json`` is ignored by Kafka, and a partition folder written here can be
handed to a broker (and the reverse). Checkpoint files are written with Kafka's protocol
(tmp file, fsync, atomic rename, directory fsync).

Start-up follows Kafka (kafka-format.md §13.1): take the lock; read and delete the clean
shutdown marker; read the checkpoints; load every partition folder (``-delete`` folders
are removed, ``-stray`` and ``-future`` ones are left alone, ``__cluster_metadata-*`` is
skipped), recovering from the recovery point when the shutdown was not clean.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from plog.formats.checkpoints import MetaProperties

from .checkpoint_files import (
    CleanShutdownFile,
    OffsetCheckpointFile,
    PartitionMetadataFile,
    atomic_write,
    read_meta_properties,
    write_meta_properties,
)
from .config import LogConfig
from .errors import InvalidTopicError, LogDirError
from .lock import LogDirLock
from .log import LoadReport, Log
from .topics import (
    CLUSTER_METADATA_TOPIC,
    TopicPartition,
    delete_dir_name,
    parse_partition_dir_name,
    partition_dir_name,
    validate_topic_name,
)

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
TOPICS_FILE = ".plog-topics.json"


def random_base64_uuid() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


@dataclass
class StartupReport:
    """What opening the log directories found and did."""

    clean_shutdown: dict[str, bool] = field(default_factory=dict)
    logs: list[LoadReport] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)


class LogManager:
    """Owns the logs of one broker's log directories; one writer per directory.

    Use as a context manager, or call :meth:`close`: closing writes the checkpoints and
    the clean-shutdown marker, so the next open skips recovery.
    """

    def __init__(self, log_dirs, *, default_config: LogConfig | None = None, node_id: int = 1,
                 cluster_id: str | None = None, time_source=None, lazy: bool = False):
        self.log_dirs = [Path(d).resolve() for d in ([log_dirs] if isinstance(log_dirs, (str, os.PathLike)) else log_dirs)]
        if not self.log_dirs:
            raise LogDirError("no log directory given")
        self.default_config = default_config or LogConfig()
        self.node_id = node_id
        self.cluster_id = cluster_id
        self._now = time_source
        self._locks: list[LogDirLock] = []
        self.logs: dict[TopicPartition, Log] = {}
        self._log_dir_of: dict[TopicPartition, Path] = {}
        self._topics: dict[str, dict] = {}
        # lazy: after a clean shutdown, partition folders are opened on first use; until
        # then their checkpointed values are carried over unchanged.
        self.lazy = lazy
        self._unloaded: dict[TopicPartition, tuple[Path, Path]] = {}
        self._checkpoints: dict[Path, tuple[dict, dict, dict]] = {}
        self.report = StartupReport()
        self.closed = False
        try:
            self._startup()
        except BaseException:
            self._release_locks()
            raise

    # -- start-up ---------------------------------------------------------------------------------

    def _startup(self) -> None:
        for log_dir in self.log_dirs:
            if log_dir.exists() and not log_dir.is_dir():
                raise LogDirError(f"log directory {log_dir} is not a directory")
            log_dir.mkdir(parents=True, exist_ok=True)
            self._locks.append(LogDirLock(log_dir))
            self._ensure_meta_properties(log_dir)
            self._load_topics_file(log_dir)
        for log_dir in self.log_dirs:
            self._load_log_dir(log_dir)

    def _ensure_meta_properties(self, log_dir: Path) -> None:
        meta = read_meta_properties(log_dir)
        if meta is None:
            if self.cluster_id is None:
                self.cluster_id = random_base64_uuid()
            write_meta_properties(log_dir, MetaProperties(version=1, cluster_id=self.cluster_id, node_id=self.node_id,
                                                          directory_id=uuid.uuid4()))
            self.report.actions.append(f"wrote {log_dir / 'meta.properties'}")
            return
        if self.cluster_id is None:
            self.cluster_id = meta.cluster_id
        elif meta.cluster_id and meta.cluster_id != self.cluster_id:
            raise LogDirError(f"{log_dir}/meta.properties has cluster.id {meta.cluster_id}, "
                              f"but the other log directories belong to {self.cluster_id}")

    def _load_topics_file(self, log_dir: Path) -> None:
        path = log_dir / TOPICS_FILE
        if not path.exists():
            return
        try:
            data = json.loads(path.read_text())
            topics = data["topics"]
        except (ValueError, KeyError, TypeError) as e:
            raise LogDirError(f"{path} is not a plog topics file: {e}") from None
        for name, entry in topics.items():
            self._topics.setdefault(name, entry)

    def _load_log_dir(self, log_dir: Path) -> None:
        marker = CleanShutdownFile(log_dir)
        clean = marker.exists()
        if clean:
            marker.delete()  # as Kafka: a crash during loading means recovery next time
        self.report.clean_shutdown[str(log_dir)] = clean
        recovery_points = OffsetCheckpointFile(log_dir / RECOVERY_POINT_CHECKPOINT).read() \
            if (log_dir / RECOVERY_POINT_CHECKPOINT).exists() else {}
        log_starts = OffsetCheckpointFile(log_dir / LOG_START_OFFSET_CHECKPOINT).read() \
            if (log_dir / LOG_START_OFFSET_CHECKPOINT).exists() else {}
        high_watermarks = OffsetCheckpointFile(log_dir / REPLICATION_OFFSET_CHECKPOINT).read() \
            if (log_dir / REPLICATION_OFFSET_CHECKPOINT).exists() else {}
        self._checkpoints[log_dir] = (recovery_points, log_starts, high_watermarks)
        for entry in sorted(os.listdir(log_dir)):
            path = log_dir / entry
            if not path.is_dir() or entry == "remote-log-index-cache":
                continue
            try:
                tp, kind = parse_partition_dir_name(entry)
            except InvalidTopicError as e:
                self.report.actions.append(f"skipped {path}: {e}")
                continue
            if tp.topic == CLUSTER_METADATA_TOPIC:
                continue
            if kind == "delete":
                shutil.rmtree(path, ignore_errors=True)
                self.report.actions.append(f"removed {entry} (marked for deletion)")
                continue
            if kind in ("stray", "future"):
                self.report.actions.append(f"left {entry} alone ({kind})")
                continue
            if tp in self.logs or tp in self._unloaded:
                raise LogDirError(f"Duplicate log directories for {tp} are found in both "
                                  f"{self._log_dir_of[tp] / entry} and {path}")
            self._log_dir_of[tp] = log_dir
            if self.lazy and clean:
                self._unloaded[tp] = (log_dir, path)
                continue
            self._open_log(tp, log_dir, path, clean)

    def _open_log(self, tp: TopicPartition, log_dir: Path, path: Path, clean: bool) -> Log:
        recovery_points, log_starts, high_watermarks = self._checkpoints.get(log_dir, ({}, {}, {}))
        log = Log.open(path, self.topic_config(tp.topic), log_start_offset=log_starts.get(tp, 0),
                       recovery_point=recovery_points.get(tp, 0), had_clean_shutdown=clean,
                       time_source=self._now)
        hw = high_watermarks.get(tp)
        if hw is not None:
            log.high_watermark = max(log.log_start_offset, min(hw, log.log_end_offset))
        self.logs[tp] = log
        self._log_dir_of[tp] = log_dir
        self.report.logs.append(log.load_report)
        return log

    def partitions(self) -> list[TopicPartition]:
        """Every partition of these log directories, opened or not (lazy mode)."""
        return sorted({*self.logs, *self._unloaded})

    # -- topics ---------------------------------------------------------------------------------------

    def topic_config(self, topic: str) -> LogConfig:
        entry = self._topics.get(topic)
        if entry is None:
            return self.default_config
        return LogConfig.from_properties(entry.get("configs", {}), self.default_config)

    def topic_id(self, topic: str) -> uuid.UUID | None:
        entry = self._topics.get(topic)
        return uuid.UUID(entry["topic_id"]) if entry and entry.get("topic_id") else None

    def topics(self) -> dict[str, dict]:
        return dict(self._topics)

    def set_topic_config(self, topic: str, configs: dict[str, str]) -> LogConfig:
        """Replace a topic's non-default configs (validated); open logs take them at once."""
        validate_topic_name(topic)
        config = LogConfig.from_properties(configs, self.default_config)
        entry = self._topics.setdefault(topic, {"topic_id": str(uuid.uuid4()), "configs": {}})
        entry["configs"] = {k: str(v) for k, v in configs.items()}
        self._write_topics_file()
        for tp, log in self.logs.items():
            if tp.topic == topic:
                log.config = config
        return config

    def adopt_topics(self, topics: dict[str, dict]) -> None:
        """Take topic ids and configs from an outer source of truth (a plog data directory's
        metadata) before any partition opens; the topics file is rewritten only if it differs."""
        for name, entry in topics.items():
            LogConfig.from_properties(entry.get("configs", {}), self.default_config)
        if topics != self._topics:
            self._topics = {name: {"topic_id": e.get("topic_id"), "configs": dict(e.get("configs", {}))}
                            for name, e in topics.items()}
            self._write_topics_file()
        for tp, log in self.logs.items():
            log.config = self.topic_config(tp.topic)

    def _write_topics_file(self) -> None:
        body = json.dumps({"version": 1, "topics": self._topics}, indent=2, sort_keys=True) + "\n"
        for log_dir in self.log_dirs:
            atomic_write(log_dir / TOPICS_FILE, body)

    # -- logs -----------------------------------------------------------------------------------------

    def get_log(self, tp: TopicPartition) -> Log | None:
        tp = TopicPartition(*tp)
        log = self.logs.get(tp)
        if log is None and tp in self._unloaded:
            log_dir, path = self._unloaded.pop(tp)
            log = self._open_log(tp, log_dir, path, True)
        return log

    def get_or_create_log(self, tp, *, config: dict[str, str] | None = None, topic_id: uuid.UUID | None = None,
                          log_dir: str | os.PathLike | None = None) -> Log:
        """The log of ``tp``, creating its folder (with ``partition.metadata``) if needed."""
        tp = TopicPartition(*tp)
        existing = self.get_log(tp)
        if existing is not None:
            return existing
        validate_topic_name(tp.topic)
        if tp.partition < 0:
            raise InvalidTopicError(f"Invalid partition {tp.partition} for topic {tp.topic}")
        if tp.topic not in self._topics or config is not None:
            entry = self._topics.setdefault(tp.topic, {"topic_id": str(topic_id or uuid.uuid4()), "configs": {}})
            if config is not None:
                LogConfig.from_properties(config, self.default_config)  # validate before writing
                entry["configs"] = {k: str(v) for k, v in config.items()}
            self._write_topics_file()
        target_dir = Path(log_dir).resolve() if log_dir else self._least_loaded_dir()
        if target_dir not in self.log_dirs:
            raise LogDirError(f"{target_dir} is not one of this broker's log directories")
        path = target_dir / partition_dir_name(tp)
        path.mkdir(parents=True, exist_ok=True)
        tid = self.topic_id(tp.topic)
        if tid is not None:
            PartitionMetadataFile(path / "partition.metadata").write(tid)
        log = Log.open(path, self.topic_config(tp.topic), time_source=self._now)
        self.logs[tp] = log
        self._log_dir_of[tp] = target_dir
        return log

    def _least_loaded_dir(self) -> Path:
        counts = {d: 0 for d in self.log_dirs}
        for d in self._log_dir_of.values():
            counts[d] += 1
        return min(self.log_dirs, key=lambda d: (counts[d], self.log_dirs.index(d)))

    def log_dir_of(self, tp) -> Path | None:
        return self._log_dir_of.get(TopicPartition(*tp))

    def delete_log(self, tp) -> None:
        """Kafka's delete: rename the folder to ``<tp>.<uuid>-delete``, then remove it."""
        tp = TopicPartition(*tp)
        self.get_log(tp)
        log = self.logs.pop(tp, None)
        log_dir = self._log_dir_of.pop(tp, None)
        if log is None:
            return
        log.close()
        doomed = log_dir / delete_dir_name(tp)
        os.replace(log.dir, doomed)
        shutil.rmtree(doomed, ignore_errors=True)
        if not any(t.topic == tp.topic for t in self.partitions()):
            self._topics.pop(tp.topic, None)
            self._write_topics_file()

    # -- checkpoints and shutdown ---------------------------------------------------------------------

    def checkpoint(self) -> None:
        """Write the recovery-point, log-start-offset and replication-offset checkpoints."""
        for log_dir in self.log_dirs:
            mine = {tp: log for tp, log in self.logs.items() if self._log_dir_of[tp] == log_dir}
            # Partitions never opened (lazy mode) keep their checkpointed values.
            old_rp, old_ls, old_hw = self._checkpoints.get(log_dir, ({}, {}, {}))
            untouched = [tp for tp, (d, _) in self._unloaded.items() if d == log_dir]
            recovery = {tp: old_rp[tp] for tp in untouched if tp in old_rp}
            recovery.update({tp: log.recovery_point for tp, log in mine.items()})
            starts = {tp: old_ls[tp] for tp in untouched if tp in old_ls}
            starts.update({tp: log.log_start_offset for tp, log in mine.items()
                           if log.log_start_offset > log.segments.first.base_offset})
            hws = {tp: old_hw[tp] for tp in untouched if tp in old_hw}
            hws.update({tp: log.high_watermark for tp, log in mine.items()})
            OffsetCheckpointFile(log_dir / RECOVERY_POINT_CHECKPOINT).write(recovery)
            OffsetCheckpointFile(log_dir / LOG_START_OFFSET_CHECKPOINT).write(starts)
            OffsetCheckpointFile(log_dir / REPLICATION_OFFSET_CHECKPOINT).write(hws)

    def checkpoint_high_watermarks(self) -> None:
        """Write only ``replication-offset-checkpoint`` (what readers bound consumption by),
        keeping the values of partitions this manager has not opened."""
        for log_dir in self.log_dirs:
            old_hw = self._checkpoints.get(log_dir, ({}, {}, {}))[2]
            hws = {tp: old_hw[tp] for tp, (d, _) in self._unloaded.items() if d == log_dir and tp in old_hw}
            hws.update({tp: log.high_watermark for tp, log in self.logs.items() if self._log_dir_of[tp] == log_dir})
            OffsetCheckpointFile(log_dir / REPLICATION_OFFSET_CHECKPOINT).write(hws)

    def abandon(self) -> None:
        """A crash: give up the locks without closing logs, writing checkpoints or the
        clean-shutdown marker, so the next start recovers as after a killed process."""
        if self.closed:
            return
        for log in self.logs.values():
            for segment in log.segments:
                segment.close_handlers()  # no trimming, no final index entry: as killed
            log.closed = True
        self._release_locks()
        self.closed = True

    def close(self) -> None:
        """Close every log, write the checkpoints and the clean-shutdown markers, unlock."""
        if self.closed:
            return
        try:
            for log in self.logs.values():
                log.close()
            self.checkpoint()
            for log_dir in self.log_dirs:
                CleanShutdownFile(log_dir).write()
        finally:
            self._release_locks()
            self.closed = True

    def _release_locks(self) -> None:
        for lock in self._locks:
            lock.release()
        self._locks = []

    def __enter__(self) -> "LogManager":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
