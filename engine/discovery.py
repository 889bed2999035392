"""Find the log directories, partition folders and segment files under any path.

The inspection commands (``verify``, ``ls``, ``lookup``, ``dump`` of a directory) accept a
segment file, a partition folder, a log directory (one ``log.dirs`` entry) or a data
directory that holds several log directories (one per broker). This module turns such a
path into :class:`LogDirInfo` / :class:`PartitionInfo` / :class:`SegmentFiles` values and
never opens a segment: it only lists directories, so it is cheap on a directory with
thousands of segments.

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
import re
from dataclasses import dataclass, field

from .errors import InvalidTopicError
from .topics import (
    CHECKPOINT_FILE_SUFFIX,
    INDEX_FILE_SUFFIX,
    LOG_FILE_SUFFIX,
    PRODUCER_SNAPSHOT_FILE_SUFFIX,
    REMOTE_LOG_INDEX_CACHE_DIR,
    TEMPORARY_SUFFIXES,
    TIME_INDEX_FILE_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
    TopicPartition,
    parse_partition_dir_name,
)

LOG_DIR_FILES = (
    "meta.properties",
    "recovery-point-offset-checkpoint",
    "log-start-offset-checkpoint",
    "replication-offset-checkpoint",
    "cleaner-offset-checkpoint",
    ".kafka_cleanshutdown",
    "bootstrap.checkpoint",
)
CHECKPOINT_FILES = (
    "recovery-point-offset-checkpoint",
    "log-start-offset-checkpoint",
    "replication-offset-checkpoint",
    "cleaner-offset-checkpoint",
)
_OFFSET_NAME = re.compile(r"(\d{20})(\.[a-z]+)")


class NotAKafkaPathError(ValueError):
    """The path is none of: segment file, partition folder, log directory, data directory."""


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
        return f"{self.base_offset:020d}"


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
        m = _OFFSET_NAME.fullmatch(fname)
        if m is None:
            if fname.endswith(CHECKPOINT_FILE_SUFFIX) and fname[:20].isdigit():
                kraft.append(fpath)
            else:
                other.append(fpath)
            continue
        base, suffix = int(m.group(1)), m.group(2)
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
            return any(_OFFSET_NAME.fullmatch(e.name) or e.name == "partition.metadata" for e in it)
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

    Raises ``FileNotFoundError`` for a missing path and :class:`NotAKafkaPathError` for a
    directory that holds no Kafka data at any of the levels.
    """
    if not os.path.exists(path):
        raise FileNotFoundError(2, "No such file or directory", path)
    if os.path.isfile(path):
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
        "(no meta.properties, checkpoint files or <topic>-<partition> folders found)"
    )


def log_dirs(path: str) -> list[LogDirInfo]:
    """Every log directory at or under ``path`` (a log dir, or a data dir of log dirs)."""
    kind = classify(path)
    if kind == "logdir":
        return [scan_log_dir(path)]
    if kind == "datadir":
        return [scan_log_dir(p) for p in _find_log_dirs(path, MAX_DATA_DIR_DEPTH)]
    raise NotAKafkaPathError(f"{path}: is a {kind}, not a log directory or data directory")


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
    m = _OFFSET_NAME.fullmatch(os.path.basename(path))
    return int(m.group(1)) if m else None


__all__ = [
    "CHECKPOINT_FILES",
    "LOG_DIR_FILES",
    "LogDirInfo",
    "NotAKafkaPathError",
    "PartitionInfo",
    "SegmentFiles",
    "classify",
    "is_partition_dir_name",
    "log_dirs",
    "partitions",
    "scan_log_dir",
    "scan_partition",
    "segment_base_offset",
]
