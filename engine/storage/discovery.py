"""Find the log directories, partition folders and segment files under any path, and read
what their small state files say about each partition.

The inspection commands (``verify``, ``ls``, ``lookup``, ``dump`` of a directory) accept a
segment file, a partition folder, a log directory (one ``log.dirs`` entry) or a data
directory that holds several log directories (one per broker). This module turns such a
path into :class:`LogDirInfo` / :class:`PartitionInfo` / :class:`SegmentFiles` values and
never opens a segment: it only lists directories, so it is cheap on a directory with
thousands of segments.

:func:`partition_facts` is the one place every command reads a partition's facts from its
files, as a broker reads them at start-up: the topic id (``partition.metadata``), the leader
epochs (``leader-epoch-checkpoint``), and the log directory's four offset checkpoints
(:func:`read_checkpoints`) — recovery point, log start, high watermark, cleaner offset. The
log start offset is Kafka's ``LogLoader`` rule: the larger of the checkpointed entry and the
base offset of the first segment (the checkpoint only holds an entry when the start is above
that segment's base, after DeleteRecords or while retention deletes). ``ls``, ``topics
list``/``describe`` and ``lookup`` read these facts here; ``consume`` and ``groups`` open a
replica through ``DataDir.open_reader``, which reads :func:`read_checkpoints` and whose
loader applies the same rule.

Rules (Kafka's ``LogManager.loadLogs`` and ``LocalLog``):

* A partition folder is a directory whose name parses as ``<topic>-<partition>`` (or the
  ``-delete``/``-future``/``-stray`` forms); ``remote-log-index-cache`` and hidden
  directories are not partitions.
* A log directory is a directory that holds ``meta.properties``, one of the offset
  checkpoint files, or at least one partition folder.
* A data directory is a directory whose children include log directories.
* A segment is named ``<20-digit base offset>.log``; its companions share the base name.
  ``.deleted``/``.cleaned``/``.swap`` files are listed separately as in-flight files.
"""

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass, field

from plog.formats.checkpoints import EpochEntry, uuid_to_base64url
from plog.formats.errors import FormatError

from plog.engine.storage import checkpoints as _ckf
from plog.engine.errors import EngineError, InvalidTopicError, NotAKafkaPathError
from plog.engine.storage.file_names import (
    CLEANER_OFFSET_CHECKPOINT,
    INDEX_FILE_SUFFIX,
    LEADER_EPOCH_CHECKPOINT,
    LOG_DIR_FILES,
    LOG_FILE_SUFFIX,
    LOG_START_OFFSET_CHECKPOINT,
    OFFSET_CHECKPOINT_FILE_NAMES,
    PARTITION_METADATA,
    PRODUCER_SNAPSHOT_FILE_SUFFIX,
    RECOVERY_POINT_CHECKPOINT,
    REMOTE_LOG_INDEX_CACHE_DIR,
    REPLICATION_OFFSET_CHECKPOINT,
    TEMPORARY_SUFFIXES,
    TIME_INDEX_FILE_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
    TopicPartition,
    file_name,
    is_kraft_snapshot_file,
    parse_partition_dir_name,
    parse_segment_file_name,
    segment_file_offset,
)

#: The four offset checkpoints of a log directory (the name other modules import from here).
CHECKPOINT_FILES = OFFSET_CHECKPOINT_FILE_NAMES


@dataclass(frozen=True)
class SegmentFiles:
    """The files of one segment; a companion is ``None`` when absent."""

    base_offset: int
    log: str | None
    index: str | None = None
    timeindex: str | None = None
    txnindex: str | None = None

    @property
    def name(self) -> str:
        return file_name(self.base_offset)


@dataclass(frozen=True)
class PartitionInfo:
    path: str
    topic_partition: TopicPartition | None  # None when the folder name does not parse
    kind: str  # "current", "delete", "future", "stray", or "unknown"
    segments: tuple[SegmentFiles, ...]
    snapshots: tuple[tuple[int, str], ...]  # (offset, path), ascending
    in_flight: tuple[str, ...]  # .deleted/.cleaned/.swap files
    kraft_snapshots: tuple[str, ...]  # <offset>-<epoch>.checkpoint (``__cluster_metadata``)
    other_files: tuple[str, ...]

    @property
    def name(self) -> str:
        return os.path.basename(self.path)


@dataclass(frozen=True)
class LogDirInfo:
    path: str
    partitions: tuple[PartitionInfo, ...]
    files: dict = field(default_factory=dict)  # name in LOG_DIR_FILES -> path, when present

    @property
    def name(self) -> str:
        return os.path.basename(self.path)


def _listdir(path: str) -> list[os.DirEntry]:
    with os.scandir(path) as it:
        return sorted(it, key=lambda e: e.name)


def is_partition_dir_name(name: str) -> bool:
    if name.startswith(".") or name == REMOTE_LOG_INDEX_CACHE_DIR:
        return False
    try:
        parse_partition_dir_name(name)
    except InvalidTopicError:
        return False
    return True


def scan_partition(path: str) -> PartitionInfo:
    """List a partition folder's files, grouped by segment base offset."""
    path = os.path.normpath(path)
    name = os.path.basename(path)
    try:
        tp, kind = parse_partition_dir_name(name)
    except InvalidTopicError:
        tp, kind = None, "unknown"
    by_base: dict[int, dict[str, str]] = {}
    snapshots, in_flight, kraft, other = [], [], [], []
    for entry in _listdir(path):
        if not entry.is_file():
            continue
        fname, fpath = entry.name, entry.path
        if fname.endswith(TEMPORARY_SUFFIXES):
            in_flight.append(fpath)
            continue
        parsed = parse_segment_file_name(fname)
        if parsed is None:
            if is_kraft_snapshot_file(fname):
                kraft.append(fpath)
            else:
                other.append(fpath)
            continue
        base, suffix = parsed
        if suffix == PRODUCER_SNAPSHOT_FILE_SUFFIX:
            snapshots.append((base, fpath))
        elif suffix in (LOG_FILE_SUFFIX, INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX):
            by_base.setdefault(base, {})[suffix] = fpath
        else:
            other.append(fpath)
    segments = tuple(
        SegmentFiles(
            base,
            files.get(LOG_FILE_SUFFIX),
            files.get(INDEX_FILE_SUFFIX),
            files.get(TIME_INDEX_FILE_SUFFIX),
            files.get(TXN_INDEX_FILE_SUFFIX),
        )
        for base, files in sorted(by_base.items())
    )
    return PartitionInfo(path, tp, kind, segments, tuple(sorted(snapshots)), tuple(in_flight),
                         tuple(kraft), tuple(other))


def _looks_like_log_dir(path: str, entries: list[os.DirEntry]) -> bool:
    names = {e.name for e in entries}
    if names.intersection(LOG_DIR_FILES):
        return True
    return any(e.is_dir() and is_partition_dir_name(e.name) and _has_segment_files(e.path) for e in entries)


def _has_segment_files(path: str) -> bool:
    try:
        with os.scandir(path) as it:
            return any(parse_segment_file_name(e.name) or e.name == PARTITION_METADATA for e in it)
    except OSError:
        return False


def scan_log_dir(path: str) -> LogDirInfo:
    path = os.path.normpath(path)
    entries = _listdir(path)
    partitions = tuple(scan_partition(e.path) for e in entries if e.is_dir() and is_partition_dir_name(e.name))
    files = {e.name: e.path for e in entries if e.is_file() and e.name in LOG_DIR_FILES}
    return LogDirInfo(path, partitions, files)


#: How deep below a data directory log directories are looked for (``data/broker-0/...``
#: is depth 1; a folder of copied incident directories is depth 2 or 3).
MAX_DATA_DIR_DEPTH = 3


def _find_log_dirs(path: str, depth: int) -> list[str]:
    found = []
    for e in _listdir(path):
        if not e.is_dir(follow_symlinks=False) or e.name.startswith("."):
            continue
        try:
            sub = _listdir(e.path)
        except OSError:
            continue
        if _looks_like_log_dir(e.path, sub):
            found.append(e.path)
        elif depth > 1 and not is_partition_dir_name(e.name):
            found.extend(_find_log_dirs(e.path, depth - 1))
    return found


def classify(path: str) -> str:
    """``"segment"``, ``"partition"``, ``"logdir"`` or ``"datadir"``.

    Raises ``FileNotFoundError`` for a missing path, ``PermissionError`` for one behind a
    directory we may not enter, and :class:`NotAKafkaPathError` for a directory that holds
    no Kafka data at any of the levels.
    """
    try:
        st = os.stat(path)  # a directory above it we may not enter is "Permission denied", not missing
    except FileNotFoundError:
        raise FileNotFoundError(2, "No such file or directory", path) from None
    if stat.S_ISREG(st.st_mode):
        return "segment"
    entries = _listdir(path)
    name = os.path.basename(os.path.normpath(path))
    if is_partition_dir_name(name) and (
        _has_segment_files(path) or not any(e.is_dir() for e in entries)
    ):
        return "partition"
    if _looks_like_log_dir(path, entries):
        return "logdir"
    if _find_log_dirs(path, MAX_DATA_DIR_DEPTH):
        return "datadir"
    raise NotAKafkaPathError(
        f"{path}: not a segment, partition folder, log directory or data directory "
        "(no meta.properties, checkpoint files or <topic>-<partition> folders found)",
        path=path,
    )


def log_dirs(path: str) -> list[LogDirInfo]:
    """Every log directory at or under ``path`` (a log dir, or a data dir of log dirs)."""
    kind = classify(path)
    if kind == "logdir":
        return [scan_log_dir(path)]
    if kind == "datadir":
        return [scan_log_dir(p) for p in _find_log_dirs(path, MAX_DATA_DIR_DEPTH)]
    raise NotAKafkaPathError(f"{path}: is a {kind}, not a log directory or data directory", path=path)


def partitions(path: str) -> list[PartitionInfo]:
    """Every partition folder at or under ``path``, in log-dir then name order."""
    kind = classify(path)
    if kind == "segment":
        return [scan_partition(os.path.dirname(os.path.abspath(path)))]
    if kind == "partition":
        return [scan_partition(path)]
    return [p for d in log_dirs(path) for p in d.partitions]


def segment_base_offset(path: str) -> int | None:
    """The base offset in a segment-family file name (``00000000000000000042.index`` → 42)."""
    return segment_file_offset(path)


# -- what the state files say ------------------------------------------------------------


@dataclass(frozen=True)
class LogDirCheckpoints:
    """The four offset checkpoints of one log directory, ``{TopicPartition: offset}`` each.

    Read as ``LogManager.loadLogs`` reads them: a missing file is empty, and so is one that
    cannot be read or parsed (Kafka logs a warning and goes on), with the reason in
    ``problems`` (file name -> one line naming the file) and the error itself in ``errors``.
    """

    path: str
    recovery_points: dict = field(default_factory=dict)
    log_starts: dict = field(default_factory=dict)
    high_watermarks: dict = field(default_factory=dict)
    cleaner_offsets: dict = field(default_factory=dict)
    problems: dict = field(default_factory=dict)
    errors: dict = field(default_factory=dict, repr=False, compare=False)

    def raise_malformed(self, *names: str) -> None:
        """Raise the parse error of the first of the checkpoints ``names`` whose content is
        malformed, for a caller that stops there rather than go on as if it were empty (a
        file that could not be read at all still reads as empty)."""
        for name in names:
            error = self.errors.get(name)
            if isinstance(error, FormatError):
                raise error


def read_checkpoints(log_dir: str | os.PathLike) -> LogDirCheckpoints:
    """The offset checkpoints of ``log_dir`` (see :class:`LogDirCheckpoints`). Opening each
    of 20,000 partitions must not parse 20,000-line files each time: the files are read again
    only when one changed (they are replaced by rename: another inode, size or mtime), and a
    result is kept only once every file is older than the file system's timestamps can tell
    apart (two versions written within one clock tick may share all of that). The result is
    shared between callers; do not change it."""
    log_dir = os.fspath(log_dir)
    stamp = []
    settled = True
    now = time.time_ns()
    for name in CHECKPOINT_FILES:
        try:
            st = os.stat(os.path.join(log_dir, name))
        except OSError:
            stamp.append(None)
            continue
        stamp.append((st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns))
        settled = settled and now - st.st_mtime_ns > _SETTLED_NS
    cached = _CHECKPOINTS.get(log_dir)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    result = _read_checkpoints(log_dir)
    if settled:
        if len(_CHECKPOINTS) >= 64:
            _CHECKPOINTS.clear()
        _CHECKPOINTS[log_dir] = (stamp, result)
    return result


_CHECKPOINTS: dict[str, tuple[list, LogDirCheckpoints]] = {}
_SETTLED_NS = 2_000_000_000


def _read_checkpoints(log_dir: str) -> LogDirCheckpoints:
    found: dict[str, dict] = {}
    problems = {}
    errors = {}
    for name in CHECKPOINT_FILES:
        try:
            found[name] = _ckf.OffsetCheckpointFile.in_log_dir(log_dir, name).read()
        except (FormatError, EngineError, OSError) as e:
            problems[name] = f"{os.path.join(log_dir, name)}: {e} (Kafka treats it as empty)"
            errors[name] = e
            found[name] = {}
    return LogDirCheckpoints(log_dir, found[RECOVERY_POINT_CHECKPOINT], found[LOG_START_OFFSET_CHECKPOINT],
                             found[REPLICATION_OFFSET_CHECKPOINT], found[CLEANER_OFFSET_CHECKPOINT], problems,
                             errors)


#: Where :attr:`PartitionFacts.log_start_offset` came from.
LOG_START_FROM_CHECKPOINT = LOG_START_OFFSET_CHECKPOINT
LOG_START_FROM_SEGMENT = "base offset of the first segment"


def log_start_offset_at_load(log_start_checkpoint: int | None, first_segment_base: int) -> int:
    """``LogLoader``'s rule (the loader's pass 11): the log start offset is the larger of the
    checkpointed one (absent: none) and the first segment's base offset."""
    if log_start_checkpoint is None:
        return first_segment_base
    return max(log_start_checkpoint, first_segment_base)


@dataclass(frozen=True)
class PartitionFacts:
    """What one partition folder's state files, and its log directory's checkpoints, say.

    Every value is None when its file holds nothing for the partition. ``topic_id`` is
    Kafka's text form (``Uuid.toString``: 22 characters of URL-safe base64).
    ``leader_epochs`` is the ``leader-epoch-checkpoint`` in file order; the latest entry is
    the replica's current epoch. ``first_segment_offset`` is the base offset of the first
    segment that has a ``.log`` (index files without one are orphans Kafka deletes).
    """

    path: str
    topic_partition: TopicPartition | None
    topic_id: str | None
    leader_epochs: tuple[EpochEntry, ...]
    first_segment_offset: int | None
    log_start_checkpoint: int | None
    recovery_point: int | None
    high_watermark: int | None
    cleaner_offset: int | None
    problems: tuple[str, ...] = ()

    @property
    def leader_epoch(self) -> int | None:
        """The latest leader epoch of ``leader-epoch-checkpoint``."""
        return self.leader_epochs[-1].epoch if self.leader_epochs else None

    @property
    def leader_epoch_start_offset(self) -> int | None:
        return self.leader_epochs[-1].start_offset if self.leader_epochs else None

    @property
    def log_start_offset(self) -> int | None:
        """``LogLoader``: max(checkpointed log start, first segment's base offset); None
        when the folder holds no segment."""
        if self.first_segment_offset is None:
            return None
        return log_start_offset_at_load(self.log_start_checkpoint, self.first_segment_offset)

    @property
    def log_start_source(self) -> str | None:
        """Which file gave :attr:`log_start_offset`."""
        if self.first_segment_offset is None:
            return None
        if self.log_start_checkpoint is not None and self.log_start_checkpoint > self.first_segment_offset:
            return LOG_START_FROM_CHECKPOINT
        return LOG_START_FROM_SEGMENT


def partition_facts(partition: PartitionInfo | str | os.PathLike,
                    checkpoints: LogDirCheckpoints | None = None) -> PartitionFacts:
    """The :class:`PartitionFacts` of a partition folder (a :class:`PartitionInfo` or a path).

    ``checkpoints`` are those of its log directory (the parent folder), read here when not
    given; pass them when reading many partitions of one log directory (their own
    ``problems`` are the log directory's, not repeated here). A partition state file that
    cannot be read leaves its facts None and says why in ``problems``; nothing raises.
    """
    info = partition if isinstance(partition, PartitionInfo) else scan_partition(os.fspath(partition))
    if checkpoints is None:
        checkpoints = read_checkpoints(os.path.dirname(os.path.abspath(info.path)))
    problems = []
    topic_id = None
    try:
        meta = _ckf.PartitionMetadataFile.in_dir(info.path).read()
        topic_id = None if meta is None else uuid_to_base64url(meta.topic_id)
    except (FormatError, EngineError, OSError) as e:
        problems.append(f"{PARTITION_METADATA}: {e}")
    epochs: list[EpochEntry] = []
    try:
        epochs = _ckf.LeaderEpochCheckpointFile.in_dir(info.path).read()
    except (FormatError, EngineError, OSError) as e:
        problems.append(f"{LEADER_EPOCH_CHECKPOINT}: {e}")
    first = next((s.base_offset for s in info.segments if s.log is not None), None)
    tp = info.topic_partition

    def entry(offsets: dict) -> int | None:
        return None if tp is None else offsets.get(tp)

    return PartitionFacts(
        path=info.path, topic_partition=tp, topic_id=topic_id, leader_epochs=tuple(epochs),
        first_segment_offset=first, log_start_checkpoint=entry(checkpoints.log_starts),
        recovery_point=entry(checkpoints.recovery_points), high_watermark=entry(checkpoints.high_watermarks),
        cleaner_offset=entry(checkpoints.cleaner_offsets), problems=tuple(problems))


__all__ = [
    "CHECKPOINT_FILES",
    "LOG_DIR_FILES",
    "LOG_START_FROM_CHECKPOINT",
    "LOG_START_FROM_SEGMENT",
    "LogDirCheckpoints",
    "LogDirInfo",
    "NotAKafkaPathError",
    "PartitionFacts",
    "PartitionInfo",
    "SegmentFiles",
    "classify",
    "is_partition_dir_name",
    "log_dirs",
    "log_start_offset_at_load",
    "partition_facts",
    "partitions",
    "read_checkpoints",
    "scan_log_dir",
    "scan_partition",
    "segment_base_offset",
]
