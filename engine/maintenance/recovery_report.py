"""What ``plog recover`` plans and did: the values :func:`~plog.engine.maintenance.recovery.plan_recovery`
and :func:`~plog.engine.maintenance.recovery.recover` return, and what ``--format json`` prints.

A plan's ``has_work`` is repair: the housekeeping every broker start does on a healthy log
(deleting a superseded snapshot, rebuilding the indexes of a revalidated segment) is
listed but is not work.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, is_dataclass

#: The reason of an index rebuilt only because its segment is revalidated (Kafka's
#: ``LogSegment.recover`` resets and refills every index of the segment it recovers).
REVALIDATED = "rebuilt from the batches of the revalidated segment"


def _plain(value):
    if is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


class _ToDict:
    def to_dict(self) -> dict:
        """JSON-friendly nested dicts and lists (what ``--format json`` prints)."""
        out = _plain(self)
        for name in getattr(self, "_derived", ()):
            out[name] = _plain(getattr(self, name))
        return out


@dataclass
class Loss(_ToDict):
    """What cutting a range of a segment throws away.

    ``records`` are those of the whole, valid batches in the range (counted from their
    headers), at offsets ``first_offset``..``last_offset`` (None: no valid batch there);
    ``damaged_bytes`` are bytes that are not valid batches, whose records nobody can count.
    ``salvage_keeps`` is how many of ``records`` ``--salvage`` keeps (it quarantines only
    the damaged bytes, and keeps every valid batch after them).
    """

    bytes: int
    records: int = 0
    first_offset: int | None = None
    last_offset: int | None = None
    damaged_bytes: int = 0
    salvage_keeps: int = 0


@dataclass
class FileAction(_ToDict):
    """A file of a partition folder and what recovery does to it."""

    file: str
    action: str  # "delete", "rename", "rebuild" or "create"
    reason: str
    target: str | None = None  # the new name of a rename
    loss: Loss | None = None  # a deleted segment's .log: what goes with it


@dataclass
class SnapshotDeletion(_ToDict):
    """A producer snapshot recovery deletes, and why (Kafka's ``ProducerStateManager``).

    ``kind`` is ``"stray"`` (no segment starts at its offset and a later snapshot supersedes
    it, or it lies below the last segment: ``removeStraySnapshots``), ``"out of range"``
    (at or below the log start offset, or above the log end offset: ``truncateAndReload``)
    or ``"unreadable"`` (it does not parse: the state is rebuilt from the one before).
    ``routine``: every broker start deletes such a superseded snapshot of a healthy log, so
    it is not work for recovery to do (see :attr:`PartitionPlan.has_work`).
    """

    file: str
    kind: str
    reason: str
    routine: bool = False


@dataclass
class UntouchedDamage(_ToDict):
    """Damage in a segment recovery does not revalidate: ``plog verify``'s first error in it.

    ``errors`` counts every error ``verify`` finds in the segment and its indexes; ``why``
    says why recovery (as a broker's start-up) leaves the segment alone, ``remedy`` which
    command handles it.
    """

    segment: str  # the segment's .log
    file: str  # the file holding the first error (the .log or one of its indexes)
    position: int | None
    offset: int | None
    check: str  # verify's check name
    message: str
    errors: int
    why: str
    remedy: str


@dataclass
class SegmentRevalidation(_ToDict):
    """A segment whose batches recovery validates (and whose indexes it rebuilds)."""

    file: str
    base_offset: int
    size: int
    reasons: list[str]


@dataclass
class Truncation(_ToDict):
    """Bytes cut from the end of a segment: ``[position, position + bytes)`` of ``file``."""

    file: str
    position: int
    bytes: int
    kind: str  # "partial batch", "crc mismatch", "invalid size", "invalid magic", "zeros", ...
    reason: str
    first_offset: int | None = None  # the first offset the cut removes (the log end after it)
    loss: Loss | None = None


@dataclass
class DamagedRange(_ToDict):
    """Bytes of a segment that are not valid batches, with valid data after them (salvage).

    ``offset_before`` is the last offset of the valid batch before the range (None at the
    start of the segment); ``offset_after`` the base offset of the first valid batch after it
    (the next segment's base offset when the range ends the segment).
    """

    file: str
    position: int
    length: int
    kind: str
    reason: str
    offset_before: int | None
    offset_after: int | None
    quarantine_file: str | None = None


@dataclass
class CheckpointChange(_ToDict):
    file: str
    topic_partition: str
    old: int | None  # None: no entry
    new: int | None  # None: the entry is removed


@dataclass
class PartitionPlan(_ToDict):
    """What recovering one partition folder will do (see
    :func:`~plog.engine.maintenance.recovery.plan_recovery`)."""

    path: str
    topic_partition: str | None
    kind: str  # discovery's folder kind: current, future, delete, stray
    skipped: str | None = None  # why the partition is left alone, or None
    clean_shutdown: bool = False
    recovery_point: int = 0  # checkpointed (0 when absent, as Kafka reads it)
    log_start_offset: int = 0  # now, as a broker computes it (discovery.log_start_offset_at_load)
    log_start_checkpoint: int | None = None  # the checkpointed entry (None: absent)
    revalidate_from: int | None = None  # offset whose segment starts revalidation, None: none
    temp_files: list[FileAction] = field(default_factory=list)
    orphan_indexes: list[FileAction] = field(default_factory=list)
    revalidate: list[SegmentRevalidation] = field(default_factory=list)
    #: Every index recovery rebuilds (those of each revalidated segment that stays) or
    #: creates (a missing time index, created empty as Kafka does).
    index_rebuilds: list[FileAction] = field(default_factory=list)
    truncation: Truncation | None = None
    deleted_segments: list[FileAction] = field(default_factory=list)
    salvage: list[DamagedRange] = field(default_factory=list)
    rewritten_segments: list[str] = field(default_factory=list)  # salvage rewrites
    offset_overflow: list[str] = field(default_factory=list)  # segments split (KAFKA-6264)
    snapshots_deleted: list[SnapshotDeletion] = field(default_factory=list)
    snapshot_written: str | None = None  # the producer snapshot written at the new log end
    empty_segment_created: bool = False
    untouched: list[UntouchedDamage] = field(default_factory=list)  # damage recovery leaves as it is
    log_end_offset: int = 0  # predicted
    new_recovery_point: int = 0
    new_log_start_offset: int = 0
    bytes_to_validate: int = 0
    bytes_to_check: int = 0  # of the segments not revalidated, read for untouched damage

    _derived = ("has_work",)

    @property
    def has_work(self) -> bool:
        """True when recovering would repair something: a file changes for a reason other
        than the housekeeping every broker start does on a healthy log (rebuilding an index
        of a revalidated segment, deleting a superseded producer snapshot)."""
        if self.skipped:
            return False
        return bool(self.temp_files or self.orphan_indexes or self.truncation
                    or any(a.action != "rebuild" or a.reason != REVALIDATED for a in self.index_rebuilds)
                    or self.deleted_segments or self.salvage or self.rewritten_segments or self.offset_overflow
                    or any(not d.routine for d in self.snapshots_deleted) or self.snapshot_written
                    or self.empty_segment_created)


@dataclass
class LogDirPlan(_ToDict):
    path: str
    clean_shutdown: bool  # the marker is there now
    marker: str  # what happens to .kafka_cleanshutdown
    partitions: list[PartitionPlan] = field(default_factory=list)
    checkpoint_changes: list[CheckpointChange] = field(default_factory=list)
    writes_marker: bool = True

    _derived = ("has_work",)

    @property
    def has_work(self) -> bool:
        return bool((self.writes_marker and not self.clean_shutdown) or self.checkpoint_changes
                    or any(p.has_work for p in self.partitions))


@dataclass
class RecoveryPlan(_ToDict):
    path: str
    kind: str  # segment, partition, logdir, datadir
    all_segments: bool
    salvage: bool
    log_dirs: list[LogDirPlan] = field(default_factory=list)

    _derived = ("has_work", "has_untouched_damage", "bytes_to_validate")

    @property
    def has_work(self) -> bool:
        return any(d.has_work for d in self.log_dirs)

    @property
    def has_untouched_damage(self) -> bool:
        """Damage that recovery, as planned, leaves as it is (see :class:`UntouchedDamage`)."""
        return any(p.untouched for p in self.partitions)

    @property
    def bytes_to_validate(self) -> int:
        return sum(p.bytes_to_validate for d in self.log_dirs for p in d.partitions)

    @property
    def partitions(self) -> list[PartitionPlan]:
        return [p for d in self.log_dirs for p in d.partitions]


@dataclass
class PartitionRecovery(_ToDict):
    """What recovering one partition did."""

    path: str
    topic_partition: str | None
    status: str  # "recovered", "skipped" or "failed"
    reason: str | None = None  # why skipped, or the error
    actions: list[str] = field(default_factory=list)
    revalidated: list[str] = field(default_factory=list)
    truncations: list[Truncation] = field(default_factory=list)
    quarantined: list[DamagedRange] = field(default_factory=list)
    deleted_files: list[str] = field(default_factory=list)
    rebuilt_indexes: list[str] = field(default_factory=list)
    untouched: list[UntouchedDamage] = field(default_factory=list)  # damage left as it is
    log_end_offset: int | None = None
    recovery_point: int | None = None
    log_start_offset: int | None = None
    first_segment_base: int | None = None
    bytes_validated: int = 0
    bytes_checked: int = 0  # of the segments not revalidated, read for untouched damage


@dataclass
class LogDirRecovery(_ToDict):
    path: str
    had_clean_shutdown: bool
    partitions: list[PartitionRecovery] = field(default_factory=list)
    checkpoint_changes: list[CheckpointChange] = field(default_factory=list)
    clean_shutdown_written: bool = False


@dataclass
class RecoveryReport(_ToDict):
    path: str
    kind: str
    all_segments: bool
    salvage: bool
    log_dirs: list[LogDirRecovery] = field(default_factory=list)

    _derived = ("ok", "has_untouched_damage")

    @property
    def ok(self) -> bool:
        """No partition failed."""
        return all(p.status != "failed" for d in self.log_dirs for p in d.partitions)

    @property
    def has_untouched_damage(self) -> bool:
        """Damage recovery left as it is (see :class:`UntouchedDamage`)."""
        return any(p.untouched for p in self.partitions)

    @property
    def partitions(self) -> list[PartitionRecovery]:
        return [p for d in self.log_dirs for p in d.partitions]


__all__ = [
    "REVALIDATED",
    "CheckpointChange",
    "DamagedRange",
    "FileAction",
    "Loss",
    "LogDirPlan",
    "LogDirRecovery",
    "PartitionPlan",
    "PartitionRecovery",
    "RecoveryPlan",
    "RecoveryReport",
    "SegmentRevalidation",
    "SnapshotDeletion",
    "Truncation",
    "UntouchedDamage",
]
