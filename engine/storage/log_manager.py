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

New partitions in bulk (a topic's creation, added partitions): :meth:`LogManager.stage_new_log`
makes each folder, with the files a new partition has, under a ``-delete`` name (which
start-up removes, here and in Kafka: a crash leaves nothing that looks like a partition);
the caller commits the topic elsewhere and then :meth:`LogManager.adopt_new_logs` renames the
folders to their names, or :meth:`LogManager.discard_new_logs` removes them (under whichever
name they have). :func:`check_room_for_new_logs` says beforehand whether the file systems
can hold them.
"""

from __future__ import annotations

import base64
import json
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from plog.formats.checkpoints import MetaProperties, format_partition_metadata

from plog.engine.storage.checkpoints import (
    CleanShutdownFile,
    OffsetCheckpointFile,
    PartitionMetadataFile,
    atomic_write,
    fsync_dir,
    read_meta_properties,
    write_meta_properties,
)
from plog.engine.storage.log_config import LogConfig
from plog.engine.errors import EngineError, InvalidTopicError, LogDirError, ResourceLimitError, close_after
from plog.engine.interrupts import uninterrupted, whole
from plog.engine.storage.lock import LogDirLock
from plog.engine.storage.loader import LoadReport
from plog.engine.storage.log import Log
from plog.engine.storage.file_names import (
    CLUSTER_METADATA_TOPIC,
    INDEX_FILE_SUFFIX,
    LOG_FILE_SUFFIX,
    LOG_START_OFFSET_CHECKPOINT,
    PARTITION_METADATA,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    TIME_INDEX_FILE_SUFFIX,
    TopicPartition,
    delete_dir_name,
    file_name,
    parse_partition_dir_name,
    partition_dir_name,
    validate_topic_name,
)

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
                 cluster_id: str | None = None, time_source=None, lazy: bool = False, format_missing: bool = True,
                 on_open=None):
        """``on_open(manager)`` is called first of all, before any lock or file is touched: an
        owner that must close what it opened (a writer) learns of the manager even when a
        stop lands between the end of this constructor and the owner's next line."""
        if on_open is not None:
            on_open(self)
        self.closed = True  # until the start-up has succeeded: closing is then a no-op
        self.log_dirs = [Path(d).resolve() for d in ([log_dirs] if isinstance(log_dirs, (str, os.PathLike)) else log_dirs)]
        if not self.log_dirs:
            raise LogDirError("no log directory given")
        self.default_config = default_config or LogConfig()
        self.node_id = node_id
        self.cluster_id = cluster_id
        #: Write a meta.properties into a log directory that has none (plog's own directories,
        #: as `kafka-storage format` would); False for existing directories being maintained.
        self.format_missing = format_missing
        self._now = time_source
        self._locks: list[LogDirLock] = []
        self.logs: dict[TopicPartition, Log] = {}
        self._log_dir_of: dict[TopicPartition, Path] = {}
        self._topics: dict[str, dict] = {}
        # lazy: after a clean shutdown, partition folders are opened on first use; until
        # then their checkpointed values are carried over unchanged.
        self.lazy = lazy
        self._unloaded: dict[TopicPartition, tuple[Path, Path]] = {}
        #: new partitions being made (module docstring): tp -> [staged folder, adopted folder or None]
        self._new_logs: dict[TopicPartition, list] = {}
        self._checkpoints: dict[Path, tuple[dict, dict, dict]] = {}
        #: checkpoint file -> the offsets it holds (read at start-up or written since)
        self._on_disk: dict[Path, dict] = {}
        self.report = StartupReport()
        self.closed = False
        try:
            self._startup()
        except KeyboardInterrupt:
            # A stop (Ctrl-C, SIGTERM) while loading: the directories are left as found, a
            # cleanly shut down one clean (its logs closed again, its marker back), not as a
            # crash during loading would leave them.
            with uninterrupted():
                self._close(clean_only=True)
            raise
        except BaseException:
            self._release_locks()
            self.closed = True
            raise

    # -- start-up ---------------------------------------------------------------------------------

    def _startup(self) -> None:
        for log_dir in self.log_dirs:
            if log_dir.exists() and not log_dir.is_dir():
                raise LogDirError(f"log directory {log_dir} is not a directory", path=str(log_dir))
            log_dir.mkdir(parents=True, exist_ok=True)
            self._locks.append(LogDirLock(log_dir))
            self._ensure_meta_properties(log_dir)
            self._load_topics_file(log_dir)
        for log_dir in self.log_dirs:
            self._load_log_dir(log_dir)

    def _ensure_meta_properties(self, log_dir: Path) -> None:
        meta = read_meta_properties(log_dir)
        if meta is None and not self.format_missing:
            return
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
            raise LogDirError(f"{path} is not a plog topics file: {e}", path=str(path)) from None
        for name, entry in topics.items():
            self._topics.setdefault(name, entry)

    def _load_log_dir(self, log_dir: Path) -> None:
        marker = CleanShutdownFile(log_dir)
        clean = marker.exists()
        self.report.clean_shutdown[str(log_dir)] = clean  # before the delete: see __init__
        if clean:
            marker.delete()  # as Kafka: a crash during loading means recovery next time
        recovery_points, log_starts, high_watermarks = (
            self._read_checkpoint(log_dir / name)
            for name in (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT))
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
                _rmtree(path, ignore_errors=True)
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

    def _read_checkpoint(self, path: Path) -> dict:
        """A checkpoint file's offsets ({} when there is none), noted as what it holds."""
        if not path.exists():
            return {}
        offsets = OffsetCheckpointFile(path).read()
        self._on_disk[path] = dict(offsets)
        return offsets

    def _open_log(self, tp: TopicPartition, log_dir: Path, path: Path, clean: bool) -> Log:
        if not clean:
            return self._open_log_unheld(tp, log_dir, path, clean)
        # Opening a cleanly closed log is quick (no recovery) and preallocates its active
        # indexes: a stop waits until it is registered, so that closing trims them.
        with uninterrupted():
            return self._open_log_unheld(tp, log_dir, path, clean)

    def _open_log_unheld(self, tp: TopicPartition, log_dir: Path, path: Path, clean: bool) -> Log:
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
            with uninterrupted():  # taken off the unloaded ones only once it is open
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
            PartitionMetadataFile(path / PARTITION_METADATA).write(tid)
        log = Log.open(path, self.topic_config(tp.topic), time_source=self._now)
        self.logs[tp] = log
        self._log_dir_of[tp] = target_dir
        return log

    # -- new partitions in bulk (module docstring) -----------------------------------------------

    def stage_new_log(self, tp, topic_id: uuid.UUID, *, log_dir: str | os.PathLike | None = None) -> Path:
        """Make the folder of the new partition ``tp`` under a ``<tp>.<uuid>-delete`` name, with
        what a new partition holds once its first writer closed it: ``partition.metadata``
        and an empty first segment (``.log``, ``.index``, ``.timeindex``). Nothing is
        fsynced (:meth:`sync_new_logs` does it for all at once). The folder is this
        manager's to adopt or discard from the moment its name is chosen, so an interrupt at
        any point leaves nothing :meth:`discard_new_logs` misses. Returns the folder."""
        tp = TopicPartition(*tp)
        target_dir = Path(log_dir).resolve() if log_dir else self._least_loaded_dir()
        if target_dir not in self.log_dirs:
            raise LogDirError(f"{target_dir} is not one of this broker's log directories")
        final = target_dir / partition_dir_name(tp)
        if tp in self.logs or tp in self._unloaded or tp in self._new_logs or final.exists():
            raise LogDirError(f"{final} exists already: a partition of a topic that is not in the metadata "
                              "(left there by hand, or by an older plog interrupted while creating it); "
                              "move it away to create the topic")
        path = target_dir / delete_dir_name(tp)
        self._new_logs[tp] = [path, None]
        os.mkdir(path)
        _write_new_file(path / PARTITION_METADATA, format_partition_metadata(topic_id).encode())
        for suffix in (LOG_FILE_SUFFIX, INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX):
            _write_new_file(path / file_name(0, suffix), b"")
        return path

    def sync_new_logs(self) -> None:
        """Make the folders :meth:`stage_new_log` made durable. A few: ``partition.metadata``
        and the folder of each are fsynced (the segment files are empty: their entries in the
        folder are what counts). Many: one ``syncfs`` of the file system, as thousands of
        fsyncs would take minutes (:func:`sync_file_systems`)."""
        staged = [entry[0] for entry in self._new_logs.values() if entry[1] is None]
        if len(staged) > _FSYNC_EACH_UP_TO:
            sync_file_systems(self.log_dirs)
            return
        for path in staged:
            fd = os.open(path / PARTITION_METADATA, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            fsync_dir(path)

    def adopt_new_logs(self) -> list[Path]:
        """Rename every folder :meth:`stage_new_log` made to its partition's name and count
        them among this manager's partitions (unopened, at offset 0 in the checkpoints).
        The log directory is fsynced by the caller, once for all. Returns the new paths."""
        out = []
        for tp, entry in self._new_logs.items():
            if entry[1] is not None:
                continue
            staged = entry[0]
            log_dir = staged.parent
            final = log_dir / partition_dir_name(tp)
            if final.exists():  # rename(2) would replace an empty folder: never take another's
                raise LogDirError(f"{final} exists already")
            os.rename(staged, final)
            entry[1] = final
            self._log_dir_of[tp] = log_dir
            self._unloaded[tp] = (log_dir, final)
            recovery_points, _log_starts, high_watermarks = self._checkpoints.setdefault(log_dir, ({}, {}, {}))
            recovery_points[tp] = 0
            high_watermarks[tp] = 0
            out.append(final)
        return out

    def discard_new_logs(self) -> None:
        """Undo :meth:`stage_new_log` and :meth:`adopt_new_logs`: every new folder is removed,
        under whichever name it has, and its partition forgotten."""
        new, self._new_logs = self._new_logs, {}
        for tp, (staged, final) in new.items():
            if final is not None:
                self._unloaded.pop(tp, None)
                self._log_dir_of.pop(tp, None)
                for values in self._checkpoints.get(final.parent, ()):
                    values.pop(tp, None)
                _rmtree(final, ignore_errors=True)
            _rmtree(staged, ignore_errors=True)

    def keep_new_logs(self) -> None:
        """The new partitions are committed: they are ordinary partitions from now on."""
        self._new_logs = {}

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
        _rmtree(doomed, ignore_errors=True)
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
            self._write_checkpoint(log_dir / RECOVERY_POINT_CHECKPOINT, recovery)
            self._write_checkpoint(log_dir / LOG_START_OFFSET_CHECKPOINT, starts)
            self._write_checkpoint(log_dir / REPLICATION_OFFSET_CHECKPOINT, hws)

    def _write_checkpoint(self, path: Path, offsets: dict) -> None:
        """Write ``offsets`` to the checkpoint file ``path`` (tmp file, fsync, rename, folder
        fsync) unless it already holds exactly them: this manager holds the folder's lock,
        so the file says what it last wrote or read there (:attr:`_on_disk`). A close after
        a produce round, or a round that moved nothing, then costs no fsync for it."""
        if self._on_disk.get(path) == offsets:
            return
        self._on_disk.pop(path, None)  # unknown until the write has succeeded
        OffsetCheckpointFile(path).write(offsets)
        self._on_disk[path] = dict(offsets)

    def high_watermarks(self) -> dict:
        """Each open log's high watermark now: what :meth:`checkpoint_high_watermarks` may be
        given later, when the logs have moved on (a writer's round flushed in two phases)."""
        return {tp: log.high_watermark for tp, log in list(self.logs.items())}

    def checkpoint_high_watermarks(self, captured: dict | None = None) -> None:
        """Write only ``replication-offset-checkpoint`` (what readers bound consumption by),
        keeping the values of partitions this manager has not opened. ``captured``: the
        values of :meth:`high_watermarks` taken earlier, written instead of the logs' current
        ones (a log opened since keeps its checkpointed value): a round made durable up to
        then checkpoints no more, while the next round's replication moves them on."""
        # Copies of the maps, taken at once: this may run on a writer's flush thread beside
        # appends (ClusterWriter.flush_in_background), where nothing opens a log, but a
        # dictionary walked while another thread adds to it would raise.
        unloaded, logs, dir_of = list(self._unloaded.items()), list(self.logs.items()), dict(self._log_dir_of)
        for log_dir in self.log_dirs:
            old_hw = self._checkpoints.get(log_dir, ({}, {}, {}))[2]
            hws = {tp: old_hw[tp] for tp, (d, _) in unloaded if d == log_dir and tp in old_hw}
            for tp, log in logs:
                if dir_of[tp] != log_dir:
                    continue
                hw = log.high_watermark if captured is None else captured.get(tp, old_hw.get(tp))
                if hw is None:
                    continue
                # An offline log (an I/O error) vouches for no more than it made durable before it.
                hws[tp] = hw if log.failure is None else min(hw, log.recovery_point)
            self._write_checkpoint(log_dir / REPLICATION_OFFSET_CHECKPOINT, hws)

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

    @whole
    def close(self) -> None:
        """Close every log, write the checkpoints and the clean-shutdown markers, unlock.
        A stop (Ctrl-C, SIGTERM) waits for the end: a close cut short leaves no marker."""
        self._close(clean_only=False)

    def _close(self, *, clean_only: bool) -> None:
        """``clean_only`` (a start-up cut short): the markers only where the directory had
        one at start-up (the others may be half recovered), and no checkpoints (the files on
        disk still hold every partition's; the loaded part alone would drop the others')."""
        if self.closed:
            return
        try:
            # Every log is closed, even after one fails (a full disk refusing a producer
            # snapshot); then no checkpoint and no clean-shutdown marker: the next start
            # recovers these logs rather than trusting them.
            failed = None
            for log in self.logs.values():
                try:
                    log.close()
                except (EngineError, OSError) as e:
                    failed = failed or e
            if failed is not None:
                raise failed
            if any(log.failure is not None for log in self.logs.values()):
                # A log went offline (an I/O error, raised when it happened): nothing here is
                # vouched for, so neither checkpoints past what was last written nor the
                # markers; the next start recovers from the recovery points written before.
                return
            if not clean_only:
                self.checkpoint()
            for log_dir in self.log_dirs:
                if not clean_only or self.report.clean_shutdown.get(str(log_dir)):
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

    def __exit__(self, exc_type, exc, tb) -> None:
        close_after(self.close, exc, "closing the log directory")


#: Up to this many new folders, each is fsynced (two fsyncs a folder); beyond, one syncfs of
#: the file system, which costs as much as a few fsyncs but waits for all of its dirty data,
#: other programs' included.
_FSYNC_EACH_UP_TO = 16


def _write_new_file(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def sync_file_systems(directories) -> None:
    """Make everything written on the file systems of ``directories`` durable: one
    ``syncfs(2)`` per file system (Linux), instead of an fsync of every file and folder of
    thousands of new partitions; ``sync(2)`` where there is no ``syncfs``. A write error is
    raised naming the directory (kernels since 5.8 report them to ``syncfs``)."""
    seen: dict[int, str] = {}
    for d in directories:
        seen.setdefault(os.stat(d).st_dev, os.fspath(d))
    syncfs = _syncfs()
    for d in seen.values():
        if syncfs is None:
            os.sync()
            return
        fd = os.open(d, os.O_RDONLY)
        try:
            if syncfs(fd) != 0:
                import ctypes

                err = ctypes.get_errno()
                raise OSError(err, os.strerror(err), d)
        finally:
            os.close(fd)


def _syncfs():
    try:
        import ctypes

        fn = ctypes.CDLL(None, use_errno=True).syncfs
    except (ImportError, OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


#: The inodes a new partition folder takes (:meth:`LogManager.stage_new_log`): the folder,
#: ``partition.metadata``, and the first segment's ``.log``, ``.index`` and ``.timeindex``.
NEW_LOG_INODES = 5


def new_log_bytes(tp, block_size: int) -> int:
    """The bytes a new partition folder takes on a file system of ``block_size`` blocks: the
    folder's first block and ``partition.metadata``'s (43 bytes hold a block); the folder's
    entry in its log directory (ext4: 8 bytes and the name, 4-aligned); its lines in the
    three offset checkpoints of the log directory, twice (each is rewritten through a tmp
    file). The segment files are empty: a writer preallocates the indexes sparse, which takes
    no block until entries are written."""
    name = partition_dir_name(TopicPartition(*tp))
    entry = (8 + len(name.encode()) + 3) // 4 * 4
    checkpoint_line = len(f"{tp[0]} {tp[1]} 0\n".encode())
    return 2 * block_size + entry + 2 * 3 * checkpoint_line


def check_room_for_new_logs(new_logs: dict, what: str) -> None:
    """Raise :class:`ResourceLimitError` unless the file systems can hold the new partition
    folders: ``new_logs`` maps each log directory to ``(count, bytes)``, the number of new
    folders and their bytes (:func:`new_log_bytes`). Log directories on one file system are
    summed; a file system that counts no inodes (btrfs, ZFS) is judged on bytes alone.
    ``what`` names the request in the message ("creating 9 partitions of topic t")."""
    by_fs: dict[int, list] = {}
    for log_dir, (count, nbytes) in new_logs.items():
        st = os.stat(log_dir)
        need = by_fs.setdefault(st.st_dev, [os.fspath(log_dir), 0, 0])
        need[1] += count
        need[2] += nbytes
    for where, count, nbytes in by_fs.values():
        vfs = os.statvfs(where)
        inodes = count * NEW_LOG_INODES
        problems = []
        if vfs.f_files > 0 and inodes > vfs.f_favail:
            problems.append(f"{inodes} inodes ({NEW_LOG_INODES} a partition folder: the folder, partition.metadata, "
                            f".log, .index, .timeindex) where {vfs.f_favail} are free")
        free = vfs.f_bavail * vfs.f_frsize
        if nbytes > free:
            problems.append(f"{_human(nbytes)} where {_human(free)} are free")
        if problems:
            raise ResourceLimitError(f"{what} needs {' and '.join(problems)} on the file system of {where}; "
                                     "nothing was written")


def _human(n: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _rmtree(path, ignore_errors: bool = False) -> None:
    """``shutil.rmtree`` (imported here: it imports bz2 and lzma, ~2 ms of every start-up)."""
    import shutil

    shutil.rmtree(path, ignore_errors=ignore_errors)
