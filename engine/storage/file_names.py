"""Names on disk: topics, partition directories and segment files, with Kafka's exact rules.

Sources: ``Topic.java`` (topic names), ``LocalLog.scala`` (partition directory names),
``LogFileUtils.java`` (segment file names). See ``docs/kafka-format.md`` §7.1 and §9.

Topic names (``Topic.validate``): 1..249 UTF-16 code units of ``[a-zA-Z0-9._-]``, not ``.``
or ``..``. Two topics *collide* when they are equal after replacing ``.`` with ``_``
(metric names cannot tell them apart); Kafka refuses to create the second one.

Partition directories::

    <topic>-<partition>                       current log
    <topic>-<partition>.<uuid32>-delete       marked for deletion; length capped at 255
    <topic>-<partition>.<uuid32>-future       alter-log-dirs move in progress; not capped
    <topic>-<partition>.<uuid32>-stray        KRaft stray log (Kafka >= 3.6); capped at 255

``uuid32`` is a random UUID's 32 lowercase hex digits. Capping truncates the *topic*, so
parsing a capped name gives a truncated topic; Kafka accepts that (a deleted or stray log is
only ever deleted) and so do we.

Segment files: ``<offset as 20 zero-padded digits><suffix>[<temporary suffix>]``, e.g.
``00000000000000368769.timeindex`` or ``00000000000000000000.log.swap``. The offset of a file
is the decimal number before the first ``.``. Three readings of that rule, each for its
callers (every other module calls these, none re-parses a name):

* :func:`offset_from_file_name`: ``Long.parseLong`` exactly, raising (Kafka's
  ``LogFileUtils.offsetFromFileName``; ``dump`` names Kafka's error with it);
* :func:`file_offset`: the decimal digits before the first ``.``, or None: what the loader,
  ``plog recover``'s plan and the producer-snapshot listing take for "a file of this log"
  (a name that does not parse is simply not one, where Kafka would throw);
* :func:`parse_segment_file_name`: exactly 20 digits and one lowercase suffix, what the
  offline tools (discovery, verify, lookup) recognise as a segment-family file.

State files (``recovery-point-offset-checkpoint``, ``leader-epoch-checkpoint``, ``.lock``...)
are named here too; their byte layouts are :mod:`plog.formats.checkpoints`', which keeps the
names it documents, re-exported here so engine code has one place to import every name from.
"""

from __future__ import annotations

import os
import re
import uuid as _uuid
from pathlib import Path

from plog.formats import checkpoints as _checkpoints
from plog.formats.checkpoints import (
    CLEAN_SHUTDOWN,
    CLEANER_OFFSET_CHECKPOINT,
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    META_PROPERTIES,
    PARTITION_METADATA,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
)

from plog.engine.errors import InvalidFileNameError, InvalidTopicError

# -- TopicPartition ----------------------------------------------------------------------

_FormatsTopicPartition = _checkpoints.TopicPartition

if "__str__" in vars(_FormatsTopicPartition):
    # The formats layer already prints it as Kafka does: one class for the whole code base.
    TopicPartition = _FormatsTopicPartition
else:

    class TopicPartition(_FormatsTopicPartition):  # type: ignore[no-redef]
        """A partition of a topic: ``(topic, partition)``, printed ``topic-partition``.

        A subclass of the formats layer's ``TopicPartition`` (the key type of offset
        checkpoints) that only adds Kafka's ``toString``. Both are plain tuples for
        equality and hashing, so they are interchangeable as dict keys and
        ``TopicPartition("a", 0) == ("a", 0)``.
        """

        __slots__ = ()

        def __str__(self) -> str:
            return f"{self.topic}-{self.partition}"


# -- topic names (Topic.java) ------------------------------------------------------------

MAX_NAME_LENGTH = 249
LEGAL_CHARS = "[a-zA-Z0-9._-]"
GROUP_METADATA_TOPIC_NAME = "__consumer_offsets"
TRANSACTION_STATE_TOPIC_NAME = "__transaction_state"
SHARE_GROUP_STATE_TOPIC_NAME = "__share_group_state"
CLUSTER_METADATA_TOPIC = "__cluster_metadata"
CLUSTER_METADATA_TOPIC_PARTITION = TopicPartition(CLUSTER_METADATA_TOPIC, 0)
INTERNAL_TOPICS = frozenset(
    {GROUP_METADATA_TOPIC_NAME, TRANSACTION_STATE_TOPIC_NAME, SHARE_GROUP_STATE_TOPIC_NAME}
)

_LEGAL_NAME = re.compile(r"[a-zA-Z0-9._-]*")


def _java_length(text: str) -> int:
    """``String.length()``: UTF-16 code units (a character above U+FFFF counts twice)."""
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def validate_topic_name(name: str) -> None:
    """Raise :class:`InvalidTopicError` with Kafka's message unless ``name`` is a legal topic.

    Checks run in Kafka's order, so a name that breaks several rules gets the first message.
    """
    if not name:
        raise InvalidTopicError("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicError('Topic name cannot be "." or ".."')
    if _java_length(name) > MAX_NAME_LENGTH:
        raise InvalidTopicError(
            f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, "
            f"topic name: {name}"
        )
    if not _LEGAL_NAME.fullmatch(name):
        raise InvalidTopicError(
            f'Topic name "{name}" is illegal, it contains a character other than '
            "ASCII alphanumerics, '.', '_' and '-'"
        )


def is_valid_topic_name(name: str) -> bool:
    """True when :func:`validate_topic_name` accepts ``name``."""
    try:
        validate_topic_name(name)
    except InvalidTopicError:
        return False
    return True


def has_collision_chars(name: str) -> bool:
    """True when ``name`` contains ``.`` or ``_`` and so could collide with another topic."""
    return "." in name or "_" in name


def unify_collision_chars(name: str) -> str:
    """``name`` with every ``.`` replaced by ``_``; used only to compare, never to rename."""
    return name.replace(".", "_")


def has_collision(a: str, b: str) -> bool:
    """True when topics ``a`` and ``b`` differ at most by ``.`` versus ``_`` (or are equal)."""
    return unify_collision_chars(a) == unify_collision_chars(b)


def is_internal(name: str) -> bool:
    """True for Kafka's internal topics (``__consumer_offsets``, ``__transaction_state``,
    ``__share_group_state``). ``__cluster_metadata`` is not one: it is the KRaft log."""
    return name in INTERNAL_TOPICS


# -- partition directories (LocalLog) ----------------------------------------------------

DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
STRAY_DIR_SUFFIX = "-stray"
#: A log dir subdirectory that is not a partition (tiered storage); LogManager skips it.
REMOTE_LOG_INDEX_CACHE_DIR = "remote-log-index-cache"
#: The longest file name most file systems accept; delete and stray names are capped to it.
MAX_DIR_NAME_LENGTH = 255

DIR_KINDS = ("current", "delete", "future", "stray")
_SUFFIX_KINDS = {DELETE_DIR_SUFFIX: "delete", FUTURE_DIR_SUFFIX: "future", STRAY_DIR_SUFFIX: "stray"}
# Java's \S without flags: anything but [ \t\n\x0B\f\r].
_NS = r"[^ \t\n\x0b\f\r]+"
_SUFFIX_PATTERNS = {
    suffix: re.compile(rf"({_NS})-({_NS})\.({_NS}){re.escape(suffix)}") for suffix in _SUFFIX_KINDS
}
# Integer.parseInt: optional sign, decimal digits (Character.digit accepts Unicode Nd, as \d does).
_JAVA_INT = re.compile(r"[+-]?\d+")
_UUID32 = re.compile(r"[0-9a-f]{32}")


def _dir_name_error(dir_name: str, path: str | os.PathLike | None) -> InvalidTopicError:
    # Kafka prints the canonical path, then (on a second line, joined here to keep errors
    # one line) its advice.
    canonical = os.path.realpath(path if path is not None else dir_name)
    return InvalidTopicError(
        f"Found directory {canonical}, '{dir_name}' is not in the form of topic-partition or "
        "topic-partition.uniqueId-delete (if marked for deletion). "
        "Kafka's log directories (and children) should only contain Kafka topic data."
    )


def partition_dir_name(tp: tuple[str, int]) -> str:
    """``<topic>-<partition>`` (``LocalLog.logDirName``)."""
    topic, partition = tp
    return f"{topic}-{partition}"


def parse_partition_dir_name(name: str | os.PathLike) -> tuple[TopicPartition, str]:
    """The partition a directory holds and its kind: current, delete, future or stray.

    ``name`` is a directory name or a path (its last component is parsed). Rules of
    ``LocalLog.parseTopicPartitionName``: the name must contain ``-``; a name ending in
    ``-delete``/``-future``/``-stray`` must match ``^(\\S+)-(\\S+)\\.(\\S+)<suffix>$`` and
    is cut at its last ``.``; the rest is split at its last ``-`` into a non-empty topic and
    an ``int`` partition (``Integer.parseInt``: a ``+`` sign is accepted). Anything else
    raises :class:`InvalidTopicError` with Kafka's message. The topic is *not* validated
    against the topic-name rules, as Kafka does not.
    """
    path = os.fspath(name)
    dir_name = os.path.basename(path.rstrip("/")) if "/" in path else path
    if not dir_name or "-" not in dir_name:
        raise _dir_name_error(dir_name, path)
    kind = "current"
    base = dir_name
    for suffix, suffix_kind in _SUFFIX_KINDS.items():
        if dir_name.endswith(suffix):
            if not _SUFFIX_PATTERNS[suffix].fullmatch(dir_name):
                raise _dir_name_error(dir_name, path)
            kind = suffix_kind
            # The pattern guarantees a '-' before the last '.', so the cut keeps one.
            base = dir_name[: dir_name.rindex(".")]
            break
    index = base.rindex("-")
    topic, partition_text = base[:index], base[index + 1 :]
    if not topic or not _JAVA_INT.fullmatch(partition_text):
        raise _dir_name_error(dir_name, path)
    partition = int(partition_text)
    if not -(1 << 31) <= partition < (1 << 31):
        raise _dir_name_error(dir_name, path)
    return TopicPartition(topic, partition), kind


def _unique_id(unique_id: _uuid.UUID | str | None) -> str:
    if unique_id is None:
        return _uuid.uuid4().hex
    if isinstance(unique_id, _uuid.UUID):
        return unique_id.hex
    if not _UUID32.fullmatch(unique_id):
        raise ValueError(f"A unique id is 32 lowercase hex digits, not {unique_id!r}")
    return unique_id


def _capped_dir_name(tp: tuple[str, int], suffix: str, unique_id) -> str:
    topic, partition = tp
    full_suffix = f"-{partition}.{_unique_id(unique_id)}{suffix}"
    prefix_length = min(len(topic), MAX_DIR_NAME_LENGTH - len(full_suffix))
    return topic[:prefix_length] + full_suffix


def delete_dir_name(tp: tuple[str, int], unique_id: _uuid.UUID | str | None = None) -> str:
    """``<topic>-<p>.<uuid32>-delete``, the topic truncated so the name is <= 255 chars.

    ``unique_id`` defaults to a random UUID (``UUID.randomUUID`` without dashes).
    """
    return _capped_dir_name(tp, DELETE_DIR_SUFFIX, unique_id)


def stray_dir_name(tp: tuple[str, int], unique_id: _uuid.UUID | str | None = None) -> str:
    """``<topic>-<p>.<uuid32>-stray``, capped at 255 chars like :func:`delete_dir_name`."""
    return _capped_dir_name(tp, STRAY_DIR_SUFFIX, unique_id)


def future_dir_name(tp: tuple[str, int], unique_id: _uuid.UUID | str | None = None) -> str:
    """``<topic>-<p>.<uuid32>-future``. Not capped (as in Kafka): for topics longer than
    213 chars the name exceeds 255 and most file systems will refuse it."""
    return f"{partition_dir_name(tp)}.{_unique_id(unique_id)}{FUTURE_DIR_SUFFIX}"


# -- segment file names (LogFileUtils) ---------------------------------------------------

LOG_FILE_SUFFIX = ".log"
INDEX_FILE_SUFFIX = ".index"
TIME_INDEX_FILE_SUFFIX = ".timeindex"
TXN_INDEX_FILE_SUFFIX = ".txnindex"
PRODUCER_SNAPSHOT_FILE_SUFFIX = ".snapshot"
DELETED_FILE_SUFFIX = ".deleted"
CLEANED_FILE_SUFFIX = ".cleaned"
SWAP_FILE_SUFFIX = ".swap"
#: KRaft snapshots (``<offset>-<epoch>.checkpoint`` in ``__cluster_metadata-0``).
CHECKPOINT_FILE_SUFFIX = ".checkpoint"

#: Suffixes appended to a file name while an operation is in flight, checked first.
TEMPORARY_SUFFIXES = (DELETED_FILE_SUFFIX, CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX)
#: The three indexes of a segment, and the four files a segment may have, in Kafka's order.
INDEX_FILE_SUFFIXES = (INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX)
SEGMENT_FILE_SUFFIXES = (LOG_FILE_SUFFIX, *INDEX_FILE_SUFFIXES)

FILE_KINDS = ("log", "index", "timeindex", "txnindex", "snapshot", "checkpoint",
              "deleted", "cleaned", "swap", "other")
_KIND_BY_SUFFIX = (
    (DELETED_FILE_SUFFIX, "deleted"),
    (CLEANED_FILE_SUFFIX, "cleaned"),
    (SWAP_FILE_SUFFIX, "swap"),
    (LOG_FILE_SUFFIX, "log"),
    (INDEX_FILE_SUFFIX, "index"),
    (TIME_INDEX_FILE_SUFFIX, "timeindex"),
    (TXN_INDEX_FILE_SUFFIX, "txnindex"),
    (PRODUCER_SNAPSHOT_FILE_SUFFIX, "snapshot"),
    (CHECKPOINT_FILE_SUFFIX, "checkpoint"),
)

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def filename_prefix_from_offset(offset: int) -> str:
    """The offset as at least 20 decimal digits (``NumberFormat``, no grouping).

    A negative offset (never written by Kafka) keeps 20 digits after its sign, as Java does.
    """
    if not _INT64_MIN <= offset <= _INT64_MAX:
        raise ValueError(f"Offset {offset} does not fit a long")
    return f"-{-offset:020d}" if offset < 0 else f"{offset:020d}"


def _in_dir(directory: str | os.PathLike, name: str) -> Path:
    return Path(directory, name)


def log_file_name(directory: str | os.PathLike, offset: int, suffix: str = "") -> Path:
    """``<dir>/<20 digits>.log<suffix>`` (``LogFileUtils.logFile``)."""
    return _in_dir(directory, filename_prefix_from_offset(offset) + LOG_FILE_SUFFIX + suffix)


def offset_index_file_name(directory: str | os.PathLike, offset: int, suffix: str = "") -> Path:
    """``<dir>/<20 digits>.index<suffix>``."""
    return _in_dir(directory, filename_prefix_from_offset(offset) + INDEX_FILE_SUFFIX + suffix)


def time_index_file_name(directory: str | os.PathLike, offset: int, suffix: str = "") -> Path:
    """``<dir>/<20 digits>.timeindex<suffix>``."""
    return _in_dir(directory, filename_prefix_from_offset(offset) + TIME_INDEX_FILE_SUFFIX + suffix)


def txn_index_file_name(directory: str | os.PathLike, offset: int, suffix: str = "") -> Path:
    """``<dir>/<20 digits>.txnindex<suffix>``."""
    return _in_dir(directory, filename_prefix_from_offset(offset) + TXN_INDEX_FILE_SUFFIX + suffix)


def producer_snapshot_file_name(directory: str | os.PathLike, offset: int) -> Path:
    """``<dir>/<20 digits>.snapshot``; the offset is the snapshot's, not a segment base."""
    return _in_dir(directory, filename_prefix_from_offset(offset) + PRODUCER_SNAPSHOT_FILE_SUFFIX)


def offset_from_file_name(name: str | os.PathLike) -> int:
    """The offset before the first ``.`` of a file name (``LogFileUtils.offsetFromFileName``).

    Accepts what ``Long.parseLong`` accepts (an optional sign, decimal digits, within a
    long); anything else, or a name without ``.``, raises :class:`InvalidFileNameError`.
    KRaft snapshot names (``<offset>-<epoch>.checkpoint``) are not segment names and fail.
    """
    file_name = os.path.basename(os.fspath(name))
    dot = file_name.find(".")
    prefix = file_name[:dot] if dot >= 0 else None
    if prefix is None or not _JAVA_INT.fullmatch(prefix):
        raise InvalidFileNameError(f"File name {file_name!r} does not start with an offset")
    value = int(prefix)
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise InvalidFileNameError(f"File name {file_name!r} has an offset that does not fit a long")
    return value


def is_index_file(name: str | os.PathLike) -> bool:
    """True for names ending ``.index``, ``.timeindex`` or ``.txnindex`` (not temporaries)."""
    file_name = os.fspath(name)
    return file_name.endswith((INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX))


def is_log_file(name: str | os.PathLike) -> bool:
    """True for names ending ``.log`` (not ``.log.deleted`` and the like)."""
    return os.fspath(name).endswith(LOG_FILE_SUFFIX)


def classify_file_name(name: str | os.PathLike) -> str:
    """The kind of a partition-directory entry, from its suffix alone: one of
    :data:`FILE_KINDS`. A temporary suffix wins (``x.log.swap`` is ``swap``); see
    :func:`strip_temporary_suffix` for what is underneath. Names without a known suffix
    (``leader-epoch-checkpoint``, ``partition.metadata``, ``*.tmp``) are ``other``."""
    file_name = os.path.basename(os.fspath(name))
    for suffix, kind in _KIND_BY_SUFFIX:
        if file_name.endswith(suffix):
            return kind
    return "other"


def strip_temporary_suffix(name: str) -> str:
    """``name`` without a trailing ``.deleted``/``.cleaned``/``.swap`` (one level)."""
    for suffix in TEMPORARY_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def file_name(offset: int, suffix: str = "") -> str:
    """``<20 digits><suffix>``: the name (no directory) of a segment-family file, e.g.
    ``file_name(42, ".log")`` or ``file_name(42, ".index" + ".swap")``."""
    return filename_prefix_from_offset(offset) + suffix


def file_offset(name: str | os.PathLike) -> int | None:
    """The decimal digits before the first ``.`` of a file name as an offset, or None.

    The loader's reading of a name (and ``plog recover``'s, and the producer-snapshot
    listing's): where Kafka's ``Long.parseLong`` would throw on a stray file, plog treats a
    name without a plain decimal prefix as no file of the log (no sign, no other characters).
    """
    head = os.path.basename(os.fspath(name)).split(".", 1)[0]
    return int(head) if head.isdecimal() else None


_SEGMENT_FAMILY_NAME = re.compile(r"(\d{20})(\.[a-z]+)")


def parse_segment_file_name(name: str | os.PathLike) -> tuple[int, str] | None:
    """``(offset, suffix)`` of a name that is exactly 20 digits and one lowercase suffix
    (``00000000000000000042.index`` → ``(42, ".index")``), else None: what the offline tools
    (discovery, verify, lookup, inventory) recognise as a file of a segment or a producer
    snapshot. A temporary suffix (``.log.swap``) does not match."""
    m = _SEGMENT_FAMILY_NAME.fullmatch(os.path.basename(os.fspath(name)))
    return (int(m.group(1)), m.group(2)) if m else None


def segment_file_offset(name: str | os.PathLike) -> int | None:
    """The offset of :func:`parse_segment_file_name`, or None."""
    parsed = parse_segment_file_name(name)
    return parsed[0] if parsed else None


def sibling_file(path: str, suffix: str) -> str:
    """The file of the same segment with another suffix: ``.../00..42.log`` and ``".index"``
    give ``.../00..42.index`` (the name is cut at its first ``.``)."""
    directory, name = os.path.split(path)
    return os.path.join(directory, name.split(".", 1)[0] + suffix)


def is_deleted_file(name: str | os.PathLike) -> bool:
    """A file renamed ``*.deleted`` for asynchronous deletion, which a log's load deletes.
    A KRaft snapshot's ``.checkpoint.deleted`` is not one: the Raft layer owns those."""
    file_name_ = os.fspath(name)
    return file_name_.endswith(DELETED_FILE_SUFFIX) and not file_name_.endswith(
        CHECKPOINT_FILE_SUFFIX + DELETED_FILE_SUFFIX)


def is_kraft_snapshot_file(name: str | os.PathLike) -> bool:
    """``<20-digit end offset>-<epoch>.checkpoint``, a KRaft snapshot of ``__cluster_metadata-0``."""
    file_name_ = os.path.basename(os.fspath(name))
    return file_name_.endswith(CHECKPOINT_FILE_SUFFIX) and file_name_[:20].isdigit()


def kraft_snapshot_end_offset(name: str | os.PathLike) -> int:
    """The end offset of a KRaft snapshot name (see :func:`is_kraft_snapshot_file`)."""
    return int(os.path.basename(os.fspath(name))[:20])


# -- state files of a log directory and a partition directory ----------------------------

#: The broker's exclusive lock on a log directory (``LogManager.LockFileName``).
LOCK_FILE_NAME = ".lock"
#: The KRaft bootstrap snapshot a formatted log directory may hold.
BOOTSTRAP_CHECKPOINT = "bootstrap.checkpoint"
#: Suffix of the temporary file a state file is written through (``<file>.tmp``).
TMP_FILE_SUFFIX = ".tmp"
#: The four offset checkpoints of a log directory, in the order tools list them.
OFFSET_CHECKPOINT_FILE_NAMES = (
    RECOVERY_POINT_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    CLEANER_OFFSET_CHECKPOINT,
)
#: The files whose presence marks a log directory (``meta.properties``, the checkpoints...).
LOG_DIR_FILES = (
    META_PROPERTIES,
    *OFFSET_CHECKPOINT_FILE_NAMES,
    CLEAN_SHUTDOWN,
    BOOTSTRAP_CHECKPOINT,
)
#: The text state files of a log or partition directory (``dump`` prints them).
TEXT_STATE_FILES = (
    *OFFSET_CHECKPOINT_FILE_NAMES,
    LEADER_EPOCH_CHECKPOINT,
    PARTITION_METADATA,
    META_PROPERTIES,
    CLEAN_SHUTDOWN,
)
