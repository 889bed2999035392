"""Typed errors of the storage engine. Each message is one line naming the file and numbers.

They mirror Kafka's storage exceptions by name. The CLI maps every ``EngineError`` to
exit code 1 (``cli/app.py``); ``formats`` errors pass through unchanged.
"""

from __future__ import annotations

from plog.formats.errors import CorruptIndexError  # noqa: F401  (re-exported: indexes raise it)


class EngineError(Exception):
    """Base class of engine errors."""


class InvalidOffsetError(EngineError):
    """An index append out of order, or an offset the log cannot take (``InvalidOffsetException``)."""


class IndexFullError(EngineError):
    """An append to an index that has no free slot."""


class OffsetOverflowError(EngineError):
    """An offset whose distance from the segment base does not fit in 31 bits
    (``LogSegmentOffsetOverflowException``); the segment must be rolled or split."""

    def __init__(self, message: str, segment_base: int | None = None, offset: int | None = None):
        super().__init__(message)
        self.segment_base = segment_base
        self.offset = offset


class OffsetOutOfRangeError(EngineError):
    """A read or lookup of an offset outside [log start offset, log end offset]."""


class RecordTooLargeError(EngineError):
    """A batch above ``max.message.bytes`` (``RecordTooLargeException``)."""


class RecordBatchTooLargeError(EngineError):
    """An append larger than ``segment.bytes`` (``RecordBatchTooLargeException``)."""


class InvalidProducerBatchError(EngineError):
    """A producer batch that breaks the broker's validation rules (``LogValidator``)."""


class OutOfOrderSequenceError(EngineError):
    """An idempotent producer batch whose sequence does not follow the last one."""


class InvalidProducerEpochError(EngineError):
    """A batch from a fenced (older) producer epoch."""


class LogDirLockedError(EngineError):
    """Another process holds the ``.lock`` of a log directory."""


class InvalidTopicError(EngineError):
    """A topic name Kafka would reject, or a partition folder name that does not parse."""


class LogDirError(EngineError):
    """A log directory that cannot be used (not a directory, unreadable, inconsistent)."""


class NotAKafkaPathError(LogDirError, ValueError):
    """A path that is none of: segment file, partition folder, log directory, data directory
    (``engine.discovery``). A user error, so the CLI prints it as one line (exit 1); also a
    ``ValueError``, which callers that predate this class catch."""


class KafkaStorageError(EngineError):
    """An I/O failure while writing; the log is not known to be intact past this point."""


class ResourceLimitError(EngineError):
    """A request refused before anything is written because this machine cannot hold it: the
    free inodes or bytes of a log directory's file system, or the files this process may open
    (``ulimit -n``). The message names the limit and the numbers."""


# -- the embedded cluster's front (topics, produce, consume, groups, reassignment) ----------


class TopicExistsError(EngineError):
    """A create of a topic that exists, or collides with one (``TopicExistsException``)."""


class UnknownTopicOrPartitionError(EngineError):
    """A topic or partition the data directory does not have (``UnknownTopicOrPartitionException``)."""


class InvalidPartitionsError(EngineError):
    """A partition count Kafka rejects: not positive, or not above the current count (``InvalidPartitionsException``)."""


class InvalidReplicationFactorError(EngineError):
    """A replication factor Kafka rejects: not positive, or above the broker count (``InvalidReplicationFactorException``)."""


class InvalidReplicaAssignmentError(EngineError):
    """A hand-given replica assignment or reassignment plan Kafka rejects (``InvalidReplicaAssignmentException``)."""


class BrokerNotAvailableError(EngineError):
    """A broker id the data directory does not have."""


class InvalidOffsetSpecError(EngineError, ValueError):
    """An ``--offset``/``--to-datetime`` text outside the offset language (DESIGN.md)."""


class InputRecordError(EngineError, ValueError):
    """A producer input line that does not parse; names the line number."""

    def __init__(self, line_number: int, message: str):
        super().__init__(f"line {line_number}: {message}")
        self.line_number = line_number


class NoOffsetForPartitionError(EngineError):
    """No committed offset and ``auto.offset.reset=none`` (``NoOffsetForPartitionException``)."""


class GroupError(EngineError):
    """A consumer group operation that cannot proceed (unknown member, non-empty group, bad state)."""


class GroupNotEmptyError(GroupError):
    """Deleting or resetting a group that has active members (``GroupNotEmptyException``)."""


class LockTimeoutError(EngineError):
    """Waiting for another plog process to release a log directory took too long."""


class NotEnoughReplicasError(EngineError):
    """An ``acks=all`` produce while the ISR is smaller than ``min.insync.replicas``
    (Kafka's ``NotEnoughReplicasException``); nothing was written."""


class NotEnoughReplicasAfterAppendError(EngineError):
    """An ``acks=all`` produce written to the leader whose in-sync replicas did not all
    replicate it (Kafka's ``NotEnoughReplicasAfterAppendException``): not acknowledged,
    though a later high watermark may still expose it, as in Kafka."""


class LeaderNotAvailableError(EngineError):
    """A partition with no leader: every replica that may lead is on a stopped broker
    (Kafka's ``LeaderNotAvailableException``)."""


def bad_document_reason(e: Exception) -> str:
    """Why one of plog's own JSON files (``cluster.json``, a group file) does not read, in a
    user's words, for the one-line error that names the file: a reader of the parsed
    document got ``e`` from a missing field or a value of the wrong type, and Python's own
    message for that names Python's types ("'NoneType' object is not iterable")."""
    import json

    if isinstance(e, json.JSONDecodeError):
        return f"not JSON: {e}"
    if isinstance(e, KeyError):
        return f"the field {e} is missing"
    text = str(e)
    if isinstance(e, ValueError) and text.startswith("invalid literal for int()"):
        return f"{text.rsplit(': ', 1)[-1]} is not a whole number"
    if isinstance(e, (TypeError, AttributeError, IndexError)):
        return "a value of the wrong type (a list, an object, a number or a string where another is expected)"
    return text
