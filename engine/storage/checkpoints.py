"""Checkpoint-style files of a log directory, read and written the way Kafka does.

The bytes are :mod:`plog.formats.checkpoints`' business; this module adds files: paths,
Kafka's write protocol, and which errors mean what.

Write protocol (``CheckpointFile`` / ``PartitionMetadataFile`` / ``PropertiesUtils``,
``docs/kafka-format.md`` §10.4), implemented once in :func:`atomic_write`:

1. write the whole content to ``<file>.tmp`` (truncating a leftover from an earlier crash);
2. fsync it;
3. rename it onto ``<file>`` (``os.replace``: atomic on POSIX);
4. fsync the parent directory, so the rename itself survives a power loss.

At every instant ``<file>`` holds either the complete old content or the complete new one;
a crash can at worst leave a stale ``<file>.tmp``, which Kafka and we ignore on read and
overwrite on the next write.

Reading never modifies anything: a missing file reads as empty (or ``None``), unlike Kafka's
``CheckpointFile`` constructor, which creates an empty file. Writers that want Kafka's
behaviour pass ``create_if_missing=True``.

Errors: malformed content raises :class:`CheckpointError` naming the absolute path (Kafka's
messages); an ``OSError`` while reading or writing raises :class:`KafkaStorageError` naming
the file (Kafka's ``KafkaStorageException``), with the ``OSError`` as ``__cause__``.
"""

from __future__ import annotations

import os
import time
import uuid as _uuid
from typing import Callable, Iterable, Mapping, TypeVar

from plog.formats import checkpoints as _ck
from plog.formats.checkpoints import OFFSET_CHECKPOINT_FILES, EpochEntry, MetaProperties, PartitionMetadata
from plog.formats.errors import CheckpointError

from plog.engine.errors import KafkaStorageError
from plog.engine.storage.file_names import (
    CLEAN_SHUTDOWN,
    CLEANER_OFFSET_CHECKPOINT,
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    META_PROPERTIES,
    PARTITION_METADATA,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    TMP_FILE_SUFFIX,
    TopicPartition,
)

__all__ = [
    "CLEAN_SHUTDOWN", "CLEANER_OFFSET_CHECKPOINT", "LEADER_EPOCH_CHECKPOINT",
    "LOG_START_OFFSET_CHECKPOINT", "META_PROPERTIES", "OFFSET_CHECKPOINT_FILES",
    "PARTITION_METADATA", "RECOVERY_POINT_CHECKPOINT", "REPLICATION_OFFSET_CHECKPOINT",
    "TMP_SUFFIX", "CleanShutdownFile", "EpochEntry", "LeaderEpochCheckpointFile",
    "MetaProperties", "OffsetCheckpointFile", "PartitionMetadata", "PartitionMetadataFile",
    "atomic_write", "fsync_dir", "read_meta_properties", "write_meta_properties",
]

#: Suffix of the temporary file a write goes through (``<file>.tmp``, as Kafka names it).
TMP_SUFFIX = TMP_FILE_SUFFIX

_T = TypeVar("_T")


# -- the write protocol ------------------------------------------------------------------


def fsync_dir(directory: str | os.PathLike) -> None:
    """fsync a directory, making renames, creations and deletions in it durable."""
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove_quietly(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass  # nothing to clean, or nothing we can do: the original error matters more


def atomic_write(path: str | os.PathLike, data: bytes | str) -> None:
    """Replace ``path`` with ``data`` through ``<path>.tmp``, fsync, rename, fsync of the dir.

    ``str`` data is encoded as UTF-8 (Kafka's writers). On success no ``.tmp`` remains; on
    failure (an interrupt too) the ``.tmp`` is removed, ``path`` keeps its previous content (unless the failure
    was the final directory fsync, after the rename) and :class:`KafkaStorageError` is
    raised naming the file.
    """
    target = os.path.abspath(os.fspath(path))
    tmp = target + TMP_SUFFIX
    payload = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    try:
        # O_TRUNC: a .tmp left by a crash mid-write is overwritten, never appended to.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o666)
        try:
            view = memoryview(payload)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except OSError as e:
        _remove_quietly(tmp)
        raise KafkaStorageError(f"Error while writing to file {target}: {e.strerror or e}") from e
    except BaseException:  # Ctrl-C or SIGTERM mid-write: no .tmp is left behind either
        _remove_quietly(tmp)
        raise
    _sync_directory_of(target)


def _sync_directory_of(path: str) -> None:
    """fsync the directory holding ``path`` (after a rename or a removal there)."""
    try:
        fsync_dir(os.path.dirname(path))
    except OSError as e:
        raise KafkaStorageError(
            f"Error while syncing the directory of file {path}: {e.strerror or e}"
        ) from e


def _read_bytes(path: str, what: str) -> bytes | None:
    """The file's bytes, or None when it does not exist; other OSErrors -> KafkaStorageError."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise KafkaStorageError(f"Error while reading {what} {path}: {e.strerror or e}") from e


def _create_empty(path: str) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
    except FileExistsError:
        return
    except OSError as e:
        raise KafkaStorageError(f"Error while creating file {path}: {e.strerror or e}") from e
    os.close(fd)


# -- the files -----------------------------------------------------------------------------


class _StateFile:
    """A small state file at an absolute path: it exists or not, and its content parses with
    one of :mod:`plog.formats.checkpoints`' parsers (see the module docstring for the rules)."""

    #: What the file is, in the message of an I/O error.
    _what = "file"

    def __init__(self, path: str | os.PathLike):
        self.path = os.path.abspath(os.fspath(path))

    def exists(self) -> bool:
        return os.path.isfile(self.path)

    def _read_parsed(self, parse: Callable[[bytes, str], _T]) -> _T | None:
        """``parse(content, path)``, or None when the file does not exist."""
        data = _read_bytes(self.path, self._what)
        return None if data is None else parse(data, self.path)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.path!r})"


# -- offset and leader-epoch checkpoints -------------------------------------------------


class _CheckpointFile(_StateFile):
    """A ``CheckpointFile`` at an absolute path; see the module docstring for the rules."""

    _what = "checkpoint file"

    def __init__(self, path: str | os.PathLike, *, create_if_missing: bool = False):
        super().__init__(path)
        if create_if_missing:
            _create_empty(self.path)


class OffsetCheckpointFile(_CheckpointFile):
    """One of the four offset checkpoints of a log dir (:data:`OFFSET_CHECKPOINT_FILES`).

    ``read()`` returns ``{TopicPartition: offset}`` (empty when the file is missing or
    empty); ``write()`` replaces the file atomically with entries sorted by
    (topic, partition). Kafka writes them in hash order, so compare contents, not bytes.
    """

    @classmethod
    def in_log_dir(cls, log_dir: str | os.PathLike, name: str, *,
                   create_if_missing: bool = False) -> "OffsetCheckpointFile":
        """The checkpoint ``name`` (one of :data:`OFFSET_CHECKPOINT_FILES`) of ``log_dir``."""
        if name not in OFFSET_CHECKPOINT_FILES:
            raise ValueError(f"{name!r} is not an offset checkpoint file name")
        return cls(os.path.join(log_dir, name), create_if_missing=create_if_missing)

    def read(self) -> dict[TopicPartition, int]:
        parsed = self._read_parsed(_ck.parse_offset_checkpoint)
        if parsed is None:
            return {}
        if TopicPartition is _ck.TopicPartition:
            return parsed
        return {TopicPartition(*tp): offset for tp, offset in parsed.items()}

    def write(self, offsets: Mapping[tuple[str, int], int]) -> None:
        atomic_write(self.path, _ck.format_offset_checkpoint(offsets))


class LeaderEpochCheckpointFile(_CheckpointFile):
    """A partition's ``leader-epoch-checkpoint``: ``read()`` gives the entries in file
    order (empty when missing), ``write()`` replaces them atomically in the given order."""

    @classmethod
    def in_dir(cls, partition_dir: str | os.PathLike, *,
               create_if_missing: bool = False) -> "LeaderEpochCheckpointFile":
        return cls(os.path.join(partition_dir, LEADER_EPOCH_CHECKPOINT),
                   create_if_missing=create_if_missing)

    def read(self) -> list[EpochEntry]:
        return self._read_parsed(_ck.parse_leader_epoch_checkpoint) or []

    def write(self, entries: Iterable[tuple[int, int]]) -> None:
        atomic_write(self.path, _ck.format_leader_epoch_checkpoint(entries))


# -- partition.metadata ------------------------------------------------------------------


class PartitionMetadataFile(_StateFile):
    """A partition's ``partition.metadata`` (its topic id).

    ``read()`` returns :class:`PartitionMetadata`, or None when the file does not exist
    (ZooKeeper-era partitions and those of topics without an id have none). ``write()``
    stores version 0 atomically.
    """

    _what = "partition metadata file"

    @classmethod
    def in_dir(cls, partition_dir: str | os.PathLike) -> "PartitionMetadataFile":
        return cls(os.path.join(partition_dir, PARTITION_METADATA))

    def read(self) -> PartitionMetadata | None:
        return self._read_parsed(_ck.parse_partition_metadata)

    def write(self, topic_id: _uuid.UUID) -> None:
        if topic_id == _ck.ZERO_UUID:
            # Kafka's reader rejects it, so writing it would make the partition unreadable.
            raise ValueError("The all-zero UUID is not a topic id")
        atomic_write(self.path, _ck.format_partition_metadata(topic_id))


# -- meta.properties ---------------------------------------------------------------------


def read_meta_properties(log_dir: str | os.PathLike) -> MetaProperties | None:
    """The ``meta.properties`` of ``log_dir``, or None when it has none.

    Invalid content raises :class:`CheckpointError` naming the file and the reason.
    """
    path = os.path.abspath(os.path.join(log_dir, META_PROPERTIES))
    data = _read_bytes(path, "properties file")
    if data is None:
        return None
    try:
        # bytes, so the formats layer decodes ISO-8859-1 as Properties.load(InputStream) does
        return _ck.parse_meta_properties(data)
    except CheckpointError as e:
        raise CheckpointError(f"Invalid properties file [{path}]: {e.reason}") from None


def _local_java_date(epoch_seconds: float) -> str:
    # java.util.Date.toString uses the JVM's default zone, which is the system's.
    import datetime  # (here: the date line of a properties file is the only use, ~1 ms of start-up)

    return _ck.java_date_string(epoch_seconds, datetime.datetime.now().astimezone().tzinfo)


def write_meta_properties(log_dir: str | os.PathLike, meta: MetaProperties, *,
                          date: str | None = None, order: str = "sorted") -> None:
    """Write ``meta.properties`` atomically as Kafka >= 3.x on Java >= 18 does.

    The second comment line is ``java.util.Date.toString()`` of now, in the local zone,
    unless ``date`` gives it; ``order`` is the key order (see
    :func:`plog.formats.checkpoints.format_properties`; "sorted" is what current JDKs write).
    """
    text = _ck.format_meta_properties(meta, date if date is not None else _local_java_date(time.time()), order)
    atomic_write(os.path.join(log_dir, META_PROPERTIES), text)


# -- .kafka_cleanshutdown ----------------------------------------------------------------


class CleanShutdownFile(_StateFile):
    """The clean-shutdown marker of a log dir (``CleanShutdownFileHandler``).

    Present means the last shutdown was clean and recovery can be skipped. ``read()`` gives
    the broker epoch (None when the file is missing, empty as Kafka <= 3.6 writes it, or
    has no epoch); malformed JSON raises :class:`CheckpointError`, which callers mirroring
    the broker treat as "clean, epoch unknown".
    """

    _what = "clean shutdown file"

    def __init__(self, log_dir: str | os.PathLike):
        self.log_dir = os.path.abspath(os.fspath(log_dir))
        super().__init__(os.path.join(self.log_dir, CLEAN_SHUTDOWN))

    def read(self) -> int | None:
        return self._read_parsed(_ck.parse_clean_shutdown)

    def write(self, broker_epoch: int = -1) -> None:
        """Write ``{"version":0,"brokerEpoch":N}`` (Kafka >= 3.7). Kafka writes in place;
        we go through :func:`atomic_write` so a crash never leaves a half-written marker."""
        atomic_write(self.path, _ck.format_clean_shutdown(broker_epoch))

    def delete(self) -> bool:
        """Remove the marker; True if it existed. The directory is fsynced because a marker
        that reappears after a crash would make the next start skip recovery (KAFKA-10471)."""
        try:
            os.remove(self.path)
        except FileNotFoundError:
            return False
        except OSError as e:
            raise KafkaStorageError(f"Error while deleting file {self.path}: {e.strerror or e}") from e
        _sync_directory_of(self.path)
        return True

    def __repr__(self) -> str:
        return f"CleanShutdownFile({self.log_dir!r})"
