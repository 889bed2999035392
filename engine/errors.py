"""Typed errors of the engine, every one of them in this module (one place to look), grouped
by the folder that raises them. Each message is one line naming the file and numbers.

They mirror Kafka's exceptions by name. All derive from :class:`EngineError`, itself a
:class:`~plog.formats.errors.PlogError`: the fields ``path``, ``position``, ``offset`` and
``kind`` say for code what the message says for a user, and the CLI's one error boundary
(``cli/app.py``) turns ``kind`` into the exit status (1 unless a class says otherwise).
The one family kept apart is ``engine/schemas/errors.py`` (schema sources, codecs): see there.
A few classes are also ``ValueError``s, because callers written before them catch that.
"""

from __future__ import annotations

import io

from plog.formats.errors import CorruptIndexError  # noqa: F401  (re-exported: indexes raise it)
from plog.formats.errors import PlogError


class EngineError(PlogError):
    """Base class of engine errors."""


class InvalidOffsetError(EngineError):
    """An index append out of order, or an offset the log cannot take (``InvalidOffsetException``)."""


class IndexFullError(EngineError):
    """An append to an index that has no free slot."""


class OffsetOverflowError(EngineError):
    """An offset whose distance from the segment base does not fit in 31 bits
    (``LogSegmentOffsetOverflowException``); the segment must be rolled or split."""

    def __init__(self, message: str, segment_base: int | None = None, offset: int | None = None, **fields):
        super().__init__(message, offset=offset, **fields)
        self.segment_base = segment_base


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
    """An I/O failure while writing; the log is not known to be intact past this point.
    ``errno``: the operating system's error number when an ``OSError`` caused it (None
    otherwise), e.g. ``errno.ENOSPC`` for a full disk."""

    errno: int | None = None

    @classmethod
    def from_os_error(cls, e: OSError, action: str, path) -> "KafkaStorageError":
        """Kafka's ``maybeHandleIOException``: the ``OSError`` ``e`` raised while ``action``
        (e.g. "appending to") the log at ``path``, as "Error while appending to FILE:
        REASON", naming the file ``e`` names, else ``path``."""
        where = e.filename if e.filename is not None else path
        error = cls(f"Error while {action} {where}: {e.strerror or e}", path=where)
        error.errno = e.errno
        return error

    def offline(self, action: str, path) -> "KafkaStorageError":
        """The error of a later ``action`` on the log this error took offline (Kafka's
        KAFKA_STORAGE_ERROR for a log directory it marked offline): it names this one, its
        ``errno`` is this one's and ``offline_since`` is this one."""
        error = KafkaStorageError(f"Error while {action} {path}: the log is offline since an I/O error ({self})",
                                  path=str(path))
        error.errno = self.errno
        error.offline_since = self
        return error

    #: :meth:`offline`'s errors: the error that took the log offline (None otherwise).
    offline_since: "KafkaStorageError | None" = None


def close_after(close, error: BaseException | None, what: str) -> None:
    """``close()`` at the end of a ``with`` block that ``error`` ended (None: it ended
    well). With an error, the error is what goes on out of the block: a close that fails
    too, often for the same reason (a full disk refusing a checkpoint after a segment), adds
    ``"<what> also failed: ..."`` to it as a note (the CLI's one line shows it after the
    error) instead of replacing it. Without one, the close's failure is raised."""
    if error is None:
        close()
        return
    try:
        close()
    except Exception as e:
        error.add_note(f"{what} also failed: {e}")


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

    def __init__(self, line_number: int, message: str, **fields):
        super().__init__(f"line {line_number}: {message}", **fields)
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


# -- storage ---------------------------------------------------------------------------------


class InvalidFileNameError(ValueError, EngineError):
    """A file name whose offset prefix ``Long.parseLong`` would reject."""


class IndexOffsetOverflowError(InvalidOffsetError, ValueError):
    """An offset whose distance from the index base does not fit 0..2^31-1
    (``IndexOffsetOverflowException``). Also a ``ValueError``, so callers may catch either."""


class InvalidTimestampError(EngineError, ValueError):
    """A time index append whose timestamp is below the last entry's (Kafka's
    ``IllegalStateException`` in ``TimeIndex.maybeAppend``)."""


class ReadOnlyIndexError(EngineError, io.UnsupportedOperation):
    """A mutation (append, truncate, resize, reset) of an index opened with ``writable=False``."""


class InvalidTxnStateError(EngineError):
    """A non-transactional batch from a producer with an open transaction (``InvalidTxnStateException``)."""


class TransactionCoordinatorFencedError(EngineError):
    """An end marker from an older coordinator epoch (``TransactionCoordinatorFencedException``)."""


class ConfigError(EngineError, ValueError):
    """An unknown config name or a value out of Kafka's range. Also a ``ValueError``, as it
    was before it joined this hierarchy: config values are parsed under ``except ValueError``
    in many places."""


# -- maintenance -----------------------------------------------------------------------------


class RecoveryError(EngineError):
    """A path ``plog recover`` cannot work on."""


class LogDirInUseError(LogDirLockedError):
    """The ``.lock`` of a log directory is held: a broker or another writer is using it."""


class MaintenanceError(EngineError):
    """A maintenance run that cannot start (locked directory, bad config, bad path)."""


class CleanerError(EngineError):
    """The cleaner cannot make progress on this log (e.g. the offset map is too small)."""


class CleanerBufferTooSmallError(CleanerError):
    """The offset map filled before a single batch of the dirty section was mapped."""


class OffsetMapFullError(EngineError):
    """``put`` of a new key into a map whose every slot is used (Kafka's IllegalArgumentException)."""


class RetentionError(EngineError):
    """Retention cannot run on this log (closed, read-only, bad arguments)."""


class StaleRetentionPlanError(RetentionError):
    """A plan made for a different state of the log (segments, offsets or sizes changed)."""


# -- cluster ---------------------------------------------------------------------------------


class ReadOnlyDataDirError(EngineError):
    """A write to a Kafka log directory opened as a data directory (plog writes only its own)."""


class ScenarioError(EngineError):
    """A scenario file that is not valid: a one-line message naming the step and the key."""

    kind = "usage"
    #: The status a usage error exits with, from before errors had kinds; library callers
    #: read it. The CLI decides from ``kind``, which says the same.
    exit_code = 2


class ReassignmentJsonError(InvalidReplicaAssignmentError):
    """A topics-to-move or reassignment JSON document that does not parse as Kafka's."""


# -- clients ---------------------------------------------------------------------------------


class TemplateError(EngineError, ValueError):
    """A ``--template`` format string with an unknown ``%`` token or a bad escape."""


class PropertyError(EngineError, ValueError):
    """A ``--property NAME=VALUE`` the console tool's reader or formatter does not have, or a
    value it cannot take (a boolean property that is not true or false): a usage error."""

    kind = "usage"


class ProducerError(EngineError):
    """A send that was not acknowledged; wraps the engine error of the failed batch."""


# -- groups ----------------------------------------------------------------------------------


class GroupOffsetsError(EngineError):
    """A ``__consumer_offsets`` partition that cannot be replayed (corrupt data before
    its last segment)."""


class IllegalGenerationError(GroupError):
    """A commit or heartbeat from a member of an older generation."""


class UnknownMemberIdError(GroupError):
    """A member the group does not know (expired, or never joined)."""


class UnknownAssignorError(GroupError):
    """An assignment strategy name that is not one of Kafka's built-in assignors."""


class AssignmentFailedError(GroupError):
    """The sticky algorithm reached a state Kafka reports with ``IllegalStateException``
    (only corrupt previous assignments in the user data get there)."""


class GroupIdNotFoundError(GroupError):
    """A group the data directory knows nothing of (Kafka: ``Consumer group 'x' does not exist.``)."""


class GroupNotInactiveError(GroupNotEmptyError):
    """A reset of a group with live members (Kafka's ``Assignments can only be reset ...``)."""


class InvalidResetArgumentError(GroupError, ValueError):
    """A ``--topic``, ``--to-datetime``, ``--by-duration`` or plan-file text that does not parse."""


# -- inspect ---------------------------------------------------------------------------------


class ScanError(EngineError, ValueError):
    """A scan could not be planned or run (bad filter, no such path)."""


class DecoderError(EngineError, ValueError):
    """An unknown decoder name (``--key-decoder`` ...): a usage error. Also a ``ValueError``,
    as it was before it joined this hierarchy."""

    kind = "usage"


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
