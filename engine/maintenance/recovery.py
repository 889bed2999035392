"""``plog recover``: Kafka's log recovery run offline, planned first, in parallel, with salvage.

Two entry points over any Kafka path (a segment file, a partition folder, a log directory
or a data directory of several log directories; see ``engine.discovery``):

* :func:`plan_recovery` is strictly read-only. For every partition it works out what a
  broker's start-up (kafka-format.md §13) would do to it: the temporary files of an
  interrupted clean/split/swap and what becomes of each, orphan indexes, which segments are
  revalidated and why, the indexes rebuilt, and, by actually validating those segments'
  batches (streamed, never loaded whole), the truncation recovery will make, the segments
  deleted after it, the producer-state snapshots dropped, the new log end offset, recovery
  point and log start offset, and the checkpoint values that change.
* :func:`recover` does it: per log directory it takes the ``.lock``, reads and deletes
  ``.kafka_cleanshutdown`` (as the broker: a crash during recovery means recovery again),
  reads the checkpoints, recovers the partitions in worker processes (each one
  ``load_log(writable=True)`` then ``close()``), writes the recovery-point and
  log-start-offset checkpoints (high watermarks are clamped to the new log end offsets), and
  writes the clean-shutdown marker back when every partition of the directory is recovered.

Which segments are revalidated is decided by the loader's
:func:`~plog.engine.storage.loader.startup_recovery`, the one rule the loader acts on, the plan
predicts with and ``plog verify`` judges damage by (Kafka's rules, plus two of plog's):

* after an unclean shutdown (no marker), every segment from the one holding the checkpointed
  recovery point to the end; ``all_segments`` (``--all``) revalidates every segment; a
  segment path revalidates from that segment on;
* whatever the shutdown, a segment without an offset index or with a transaction index that
  fails its sanity check (Kafka);
* plog also revalidates a segment whose offset or time index has a zero-filled tail (an
  index preallocated by a broker that did not trim it) or a length that is not a whole
  number of entries: Kafka (>= 2.3) trusts such files as they are, and their zero entries
  break offset and timestamp lookups. (A missing time index is created empty, as Kafka does,
  without revalidating the segment.)

Every other segment is trusted as a broker trusts it, and read with ``plog verify``'s checks:
damage found there is named in the plan and the report (:class:`UntouchedDamage`: where,
why it is left, and the command that repairs it), which makes ``plog recover`` exit 3.
A truncation and each segment deleted after it carry their :class:`Loss` (records and offsets
of the valid batches thrown away, damaged bytes, how many ``--salvage`` keeps); each producer
snapshot deleted carries Kafka's reason (:class:`SnapshotDeletion`). A plan's ``has_work`` is
repair: the housekeeping every broker start does on a healthy log (deleting a superseded
snapshot, rebuilding the indexes of a revalidated segment) is listed but is not work.

The KRaft metadata log (``__cluster_metadata-0``) is skipped, as Kafka's ``LogManager`` skips
it (the Raft layer recovers it); ``-delete`` and ``-stray`` folders are skipped (the broker
deletes them).

**Salvage** (``salvage=True``, beyond Kafka). Kafka truncates a segment at its first bad
batch and deletes every later segment, even when the damage is one flipped bit in the middle
of the log. With salvage, each revalidated segment is walked with stricter rules than
Kafka's (CRC, sizes, magic, and offsets that increase and stay below the next segment's base
offset); after a bad entry the walk resynchronises on the next position holding a valid batch
(see :func:`_resync`). Each damaged range followed by valid data (later in the segment, or
in a later segment) is moved aside into a quarantine file (see :func:`quarantine_file_name`)
and the segment is rewritten without it through Kafka's own swap protocol, so a crash at any
step is completed or rolled back by the next load (see :func:`_rewrite_segment`). Offsets
are kept as they are: the rewritten segment has a gap where the damage was, as compaction
leaves. A damaged tail of the last segment (nothing valid after it) is truncated as usual.
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import FIRST_COMPLETED, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Callable, Iterable, Mapping

from crc32c import crc32c

from plog.formats.errors import FormatError
from plog.formats.indexes import OFFSET_INDEX_ENTRY_SIZE, TIME_INDEX_ENTRY_SIZE
from plog.formats.legacy import LegacyBatch
from plog.formats.record_batch import CRC_START

from plog.engine.storage.checkpoints import CleanShutdownFile, OffsetCheckpointFile, fsync_dir
from plog.engine.storage.log_config import LogConfig
from plog.engine.storage.discovery import classify, log_dirs, log_start_offset_at_load, segment_base_offset
from plog.engine.errors import EngineError, LogDirLockedError
from plog.engine.workers import WorkerPool, held
from plog.engine.storage.batch_resync import EntryRules, all_zero, find_next_entry
from plog.engine.storage.file_records import FileBatches
from plog.engine.storage.index_file import IndexFile
from plog.engine.storage.loader import (
    complete_swaps_and_remove_temp_files,
    log_file_names,
    orphan_index_files,
    segment_recovery_reasons,
    startup_recovery,
    temp_file_actions,
    txn_index_problem,
)
from plog.engine.storage.lock import LogDirLock
from plog.engine.storage.log import load_log
from plog.engine.storage.segment import INT_MAX
from plog.engine.storage.file_names import (
    CLEANED_FILE_SUFFIX as CLEANED,
    CLUSTER_METADATA_TOPIC,
    DELETED_FILE_SUFFIX as DELETED,
    INDEX_FILE_SUFFIX,
    INDEX_FILE_SUFFIXES as INDEX_SUFFIXES,
    LOG_FILE_SUFFIX,
    LOG_START_OFFSET_CHECKPOINT,
    PRODUCER_SNAPSHOT_FILE_SUFFIX,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    SEGMENT_FILE_SUFFIXES as SEGMENT_SUFFIXES,
    SWAP_FILE_SUFFIX as SWAP,
    TMP_FILE_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
    InvalidTopicError,
    file_name,
    file_offset,
    parse_partition_dir_name,
)

Progress = Callable[[int], None]

QUARANTINE_PREFIX = "quarantine-"
QUARANTINE_SUFFIX = ".bin"

_CHUNK = 1 << 20
#: A resync candidate larger than this is not CRC-checked (bounded work on garbage); see _resync.
_MIN_CANDIDATE_CAP = 16 << 20
#: The reason of an index rebuilt only because its segment is revalidated (Kafka's
#: ``LogSegment.recover`` resets and refills every index of the segment it recovers).
REVALIDATED = "rebuilt from the batches of the revalidated segment"


# -- errors ----------------------------------------------------------------------------------------


class RecoveryError(EngineError):
    """A path ``plog recover`` cannot work on."""


class LogDirInUseError(LogDirLockedError):
    """The ``.lock`` of a log directory is held: a broker or another writer is using it."""


# -- report values ---------------------------------------------------------------------------------


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
    """What recovering one partition folder will do (see :func:`plan_recovery`)."""

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


# -- what a path designates ---------------------------------------------------------------------------


@dataclass
class _LogDirTarget:
    path: Path
    partitions: list[Path]
    whole: bool  # every partition of the log dir (the marker is rewritten)
    from_segment: dict[str, int] = field(default_factory=dict)  # partition path -> base offset


def _resolve(path: str | os.PathLike) -> tuple[str, list[_LogDirTarget]]:
    p = os.fspath(path)
    kind = classify(p)
    if kind == "segment":
        base = segment_base_offset(p)
        if base is None:
            raise RecoveryError(f"{p}: not a segment file (<20-digit base offset>.log and its indexes)")
        part = Path(os.path.abspath(p)).parent
        return kind, [_LogDirTarget(part.parent, [part], False, {str(part): base})]
    if kind == "partition":
        part = Path(os.path.abspath(p))
        return kind, [_LogDirTarget(part.parent, [part], False)]
    return kind, [_LogDirTarget(Path(os.path.abspath(d.path)), [Path(os.path.abspath(x.path)) for x in d.partitions],
                                True) for d in log_dirs(p)]


def _skip_reason(part: Path) -> tuple[str | None, str, str | None]:
    """(topic-partition, folder kind, why it is skipped or None)."""
    try:
        tp, kind = parse_partition_dir_name(part.name)
    except InvalidTopicError as e:
        return None, "unknown", f"not a partition folder ({e})"
    if tp.topic == CLUSTER_METADATA_TOPIC:
        return str(tp), kind, "the KRaft metadata log: Kafka's LogManager skips it, the Raft layer recovers it"
    if kind == "delete":
        return str(tp), kind, "marked for deletion (the broker deletes it)"
    if kind == "stray":
        return str(tp), kind, "a stray log (the broker deletes it)"
    return str(tp), kind, None


def _read_checkpoint(log_dir: Path, name: str) -> dict:
    """Kafka treats an unreadable recovery-point or log-start checkpoint as empty."""
    try:
        return dict(OffsetCheckpointFile(log_dir / name).read())
    except (FormatError, EngineError, OSError):
        return {}


def _config_resolver(log_dir: Path, overrides: Mapping[str, str] | None):
    from plog.engine.storage.topic_configs import ConfigResolver

    try:
        return ConfigResolver(log_dir, overrides=overrides)
    except Exception:  # noqa: BLE001 - any unreadable metadata: Kafka's defaults still recover correctly
        return None


def _topic_config(resolver, topic: str | None) -> LogConfig:
    if resolver is None or topic is None:
        return LogConfig()
    try:
        return resolver.resolve(topic).config
    except Exception:  # noqa: BLE001 - see _config_resolver
        return LogConfig()


@dataclass
class _LogDirState:
    target: _LogDirTarget
    clean: bool
    recovery_points: dict
    log_starts: dict
    high_watermarks: dict
    resolver: object

    @classmethod
    def read(cls, target: _LogDirTarget, clean: bool | None = None,
             overrides: Mapping[str, str] | None = None) -> "_LogDirState":
        d = target.path
        if clean is None:
            clean = CleanShutdownFile(d).exists()
        if overrides:
            from plog.engine.storage.topic_configs import ConfigResolver

            ConfigResolver(d, overrides=overrides)  # unknown names raise ConfigError here, not later
        return cls(target, clean, _read_checkpoint(d, RECOVERY_POINT_CHECKPOINT),
                   _read_checkpoint(d, LOG_START_OFFSET_CHECKPOINT),
                   _read_checkpoint(d, REPLICATION_OFFSET_CHECKPOINT), _config_resolver(d, overrides))


# -- planning one partition -------------------------------------------------------------------------


#: What the plan says of each kind of the loader's :class:`TempFileAction`.
_TEMP_FILE_REASONS = {
    "deleted": "a file deleted asynchronously (.deleted)",
    "split": "an interrupted split or clean (a .cleaned file at or below its offset): discarded",
    "cleaned": "an unfinished clean or split (.cleaned)",
    "replaced": "replaced by the swap segment(s) covering offsets [{lo}, {hi})",
    "swap": "completes an interrupted swap",
}


def _virtual_listing(directory: Path, plan: PartitionPlan) -> dict[str, str]:
    """Passes 1-4 of the loader on paper (:func:`~plog.engine.storage.loader.temp_file_actions`):
    record what happens to the temporary files and return the folder as it will be
    afterwards, ``{final name: name on disk now}``."""
    names = sorted(e.name for e in os.scandir(directory) if e.is_file())
    view = {n: n for n in names}
    actions, bounds = temp_file_actions(directory, names)
    lo, hi = bounds or (None, None)
    for action in actions:
        reason = _TEMP_FILE_REASONS[action.why].format(lo=lo, hi=hi)
        if action.action == "rename":
            plan.temp_files.append(FileAction(action.name, "rename", reason, action.target))
            view.pop(action.name)
            view[action.target] = action.name
        else:
            plan.temp_files.append(FileAction(action.name, "delete", reason))
            view.pop(action.name)
    return dict(sorted(view.items()))


def _index_problem(path: Path, entry_size: int, min_entries: int) -> str | None:
    """Why an existing index file cannot be trusted, or None: a zero-filled tail (a
    preallocated index nobody trimmed) or a length that is not whole entries."""
    with IndexFile(path, entry_size, 0, trim_zero_tail=False) as index:
        if index.missing:
            return None
        if index.file_length % entry_size:
            return f"{index.file_length} bytes is not a whole number of {entry_size}-byte entries"
        if index.slots and index.slots >= min_entries and index.entry_bytes(index.slots - 1) == bytes(entry_size):
            return "zero-filled tail (preallocated, never trimmed)"
    return None


@dataclass
class _Segment:
    name: str  # final name of the .log
    disk: str  # its name on disk now (a .swap before the swap completes)
    base: int
    size: int
    kafka: list[str] = field(default_factory=list)  # why a broker's start-up recovers it anyway
    extra: list[str] = field(default_factory=list)  # why plog recovers it beyond Kafka's rules
    reasons: list[str] = field(default_factory=list)  # every reason it is revalidated (none: it is not)


def _partition_segments(directory: Path, view: dict[str, str], plan: PartitionPlan) -> list[_Segment]:
    """The segments as the loader will open them, with their file-level reasons to be
    recovered: Kafka's (``loader.segment_recovery_reasons``) and plog's (an index with a
    zero-filled tail or a partial entry)."""
    for name in orphan_index_files(view):
        plan.orphan_indexes.append(FileAction(view[name], "delete", "an index without its .log"))
    segments = []
    for name in log_file_names(view):
        base = file_offset(name)
        prefix = name[: -len(LOG_FILE_SUFFIX)]
        seg = _Segment(name, view[name], base, os.path.getsize(directory / view[name]))
        index, timeindex, txnindex = (f"{prefix}{s}" for s in INDEX_SUFFIXES)
        txn_problem = txn_index_problem(directory / view[txnindex], base) if txnindex in view else None
        seg.kafka = segment_recovery_reasons(has_offset_index=index in view, txn_index_problem=txn_problem)
        if index in view:
            problem = _index_problem(directory / view[index], OFFSET_INDEX_ENTRY_SIZE, 1)
            if problem:
                seg.extra.append(f"offset index: {problem}")
        if timeindex in view:
            problem = _index_problem(directory / view[timeindex], TIME_INDEX_ENTRY_SIZE, 2)
            if problem:
                seg.extra.append(f"time index: {problem}")
        segments.append(seg)
    return segments


def _index_actions(directory: Path, view: dict[str, str], plan: PartitionPlan, segments: list[_Segment],
                   kept: int) -> None:
    """What happens to the indexes of the ``kept`` first segments: every index of a
    revalidated segment is rebuilt (``LogSegment.recover`` resets and refills them), saying
    why when the file is missing or unusable; a missing time index of a segment that is not
    revalidated is created empty, as Kafka's loader does."""
    for seg in segments[:kept]:
        prefix = seg.name[: -len(LOG_FILE_SUFFIX)]
        index, timeindex, txnindex = (f"{prefix}{s}" for s in INDEX_SUFFIXES)
        if not seg.reasons:
            if timeindex not in view:
                plan.index_rebuilds.append(FileAction(timeindex, "create", "missing: created empty, as Kafka does"))
            continue
        for name, entry, min_entries in ((index, OFFSET_INDEX_ENTRY_SIZE, 1), (timeindex, TIME_INDEX_ENTRY_SIZE, 2)):
            problem = "missing" if name not in view else _index_problem(directory / view[name], entry, min_entries)
            plan.index_rebuilds.append(FileAction(name, "rebuild", problem or REVALIDATED))
        if txnindex in view:
            problem = next((r for r in seg.kafka if r.startswith("corrupt transaction index")), None)
            plan.index_rebuilds.append(FileAction(txnindex, "rebuild", problem or REVALIDATED))


def _plan_partition(part: Path, state: _LogDirState, *, all_segments: bool, salvage: bool,
                    progress: Progress | None = None, validate: bool = True,
                    check_progress: Progress | None = None) -> tuple[PartitionPlan, dict]:
    """Plan one partition; returns the plan and the private facts recovery needs
    (``forced`` bases, ``scans`` by segment name, ``first_base`` after recovery, and the
    ``start`` arguments of the loader's :func:`~plog.engine.storage.loader.startup_recovery`).
    ``validate=False`` stops after the file-level facts (no batch is read).
    ``progress(n)`` follows the validation of revalidated segments, ``check_progress(n)``
    the read of the others for damage recovery leaves untouched."""
    tp_name, kind, skipped = _skip_reason(part)
    plan = PartitionPlan(str(part), tp_name, kind, skipped, clean_shutdown=state.clean)
    extra: dict = {"forced": [], "scans": {}, "segments": []}
    if tp_name is not None:
        tp = parse_partition_dir_name(part.name)[0]
        plan.recovery_point = state.recovery_points.get(tp, 0)
        plan.log_start_checkpoint = state.log_starts.get(tp)
        plan.log_start_offset = plan.log_start_checkpoint or 0
    if skipped:
        return plan, extra
    config = _topic_config(state.resolver, tp.topic if tp_name is not None else None)
    extra["config"] = config
    view = _virtual_listing(part, plan)
    segments = _partition_segments(part, view, plan)
    extra["segments"] = segments
    if segments:
        plan.log_start_offset = log_start_offset_at_load(plan.log_start_checkpoint, segments[0].base)
    from_segment = state.target.from_segment.get(str(part))
    # The loader's arguments, decided once: the run passes these very values to load_log.
    if all_segments:
        start = {"had_clean_shutdown": False, "recovery_point": 0, "why": "--all"}
    elif from_segment is not None:
        start = {"had_clean_shutdown": False, "recovery_point": from_segment,
                 "why": f"at or after the requested segment {file_name(from_segment)}"}
    else:
        start = {"had_clean_shutdown": state.clean, "recovery_point": plan.recovery_point, "why": None}
    extra["start"] = start
    if not start["had_clean_shutdown"]:
        plan.revalidate_from = start["recovery_point"]
    revalidated = startup_recovery([s.base for s in segments], {s.base: s.kafka + s.extra for s in segments},
                                   **start)
    for seg in segments:
        seg.reasons = revalidated.get(seg.base, [])
        if seg.extra and seg.reasons:
            extra["forced"].append(seg.base)  # plog's own reasons: the loader is told
        if seg.reasons:
            plan.revalidate.append(SegmentRevalidation(seg.name, seg.base, seg.size, list(seg.reasons)))
    plan.bytes_to_validate = sum(r.size for r in plan.revalidate)
    plan.bytes_to_check = sum(s.size for s in segments if not s.reasons)
    if not validate:
        _index_actions(part, view, plan, segments, len(segments))
        return plan, extra
    _predict_validation(part, plan, segments, config, salvage, extra, progress)
    kept = extra["cut"] + 1 if "cut" in extra else len(segments)
    _index_actions(part, view, plan, segments, kept)
    _predict_end_state(part, plan, segments, view, extra)
    _check_untouched(part, plan, segments[:kept], view, start, check_progress)
    return plan, extra


# -- validating batches read-only ---------------------------------------------------------------


@dataclass
class _Scan:
    """One segment validated as ``LogSegment.recover`` would (Kafka's rules)."""

    valid_bytes: int = 0
    next_offset: int | None = None
    error: str | None = None
    kind: str | None = None
    overflow: str | None = None


def _kind_of(reason: str) -> str:
    """A short name for why validation stopped, from the error's message."""
    low = reason.lower()
    if "invalid offset" in low or "offsets going backwards" in low:
        return "offsets going backwards"
    if "crc" in low:
        return "crc mismatch"
    if "partial batch" in low:
        return "torn tail"
    if "magic" in low:
        return "invalid magic"
    if "size" in low or "overhead" in low:
        return "invalid size"
    if "offset" in low:
        return "invalid offsets"
    return "invalid batch"


def _kafka_scan(path: Path, base: int, size: int, interval: int) -> _Scan:
    """Validate ``path`` batch by batch exactly as ``LogSegment.recover`` does, including the
    index appends that refuse offsets going backwards (Kafka then empties the segment)."""
    scan = _Scan()
    valid = last_index_entry = 0
    last_indexed = None
    time_ts, time_off, time_entries = -1, base, 0
    max_ts, max_ts_off = -1, base
    batches = FileBatches(path, 0, size)
    try:
        for batch in batches:
            if batch.magic != 2 or crc32c(batch.buffer[CRC_START:]) != batch.crc:
                batch.ensure_valid()
            last = batch.last_offset
            if not base <= last <= base + INT_MAX:
                scan.overflow = (f"offset {last} at position {batch.position} does not fit 31 bits above the base "
                                 f"offset {base}: the segment is split (KAFKA-6264)")
            if batch.max_timestamp > max_ts:
                max_ts, max_ts_off = batch.max_timestamp, last
            if valid - last_index_entry > interval and scan.overflow is None:
                if (last_indexed is not None and last <= last_indexed) or (time_entries and max_ts_off < time_off):
                    scan.valid_bytes, scan.next_offset = 0, base
                    scan.kind = "offsets going backwards"
                    scan.error = (f"invalid offset during recovery: offset {last} at position {batch.position} is not "
                                  "above an earlier indexed offset, so Kafka empties the segment")
                    return scan
                last_indexed = last
                if max_ts > time_ts:
                    time_ts, time_off, time_entries = max_ts, max_ts_off, time_entries + 1
                last_index_entry = valid
            valid += batch.size_in_bytes
            scan.next_offset = last + 1
    except FormatError as e:
        scan.error = e.reason
        scan.kind = _kind_of(e.reason)
    if scan.error is None and batches.trailing is not None:
        t = batches.trailing
        scan.error = (f"partial batch at the end of the segment ({t.length} bytes"
                      + (f" of {t.declared_size})" if t.declared_size else ")"))
        scan.kind = _kind_of(scan.error)
    if scan.error is None and scan.overflow is None and time_entries and max_ts_off < time_off:
        # recover()'s closing time index entry goes backwards too: the same InvalidOffsetException
        scan.valid_bytes, scan.next_offset = 0, base
        scan.kind = "offsets going backwards"
        scan.error = "invalid offset during recovery: the time index's last entry would go backwards"
        return scan
    scan.valid_bytes = valid
    if scan.next_offset is None:
        scan.next_offset = base
    return scan


@dataclass
class _Damage:
    start: int
    end: int
    kind: str
    reason: str
    offset_before: int | None
    offset_after: int | None


@dataclass
class _StrictScan:
    """One segment walked with salvage's rules: the valid spans and the damaged ranges."""

    spans: list[tuple[int, int]] = field(default_factory=list)  # [start, end) of valid batches
    damage: list[_Damage] = field(default_factory=list)
    next_offset: int | None = None
    kafka_tail: bool = False  # the last damage is one Kafka's own recovery truncates
    # The valid batches at or after the scan's ``count_from`` position: how many records
    # (from their headers), and their first and last offsets.
    records: int = 0
    first_offset: int | None = None
    last_offset: int | None = None


#: Damage kinds that Kafka's recovery does not see (it truncates only at CRC and framing errors).
_STRICT_ONLY = ("offsets going backwards", "offsets beyond the segment")


def _batch_problem(batch, expected: int, upper: int | None) -> tuple[str, str] | None:
    """``(kind, reason)`` when salvage cannot keep a batch (CRC, offsets), else None."""
    try:
        if batch.magic != 2 or crc32c(batch.buffer[CRC_START:]) != batch.crc:
            batch.ensure_valid()
    except FormatError as e:
        return _kind_of(e.reason), e.reason
    if isinstance(batch, LegacyBatch):
        first = last = batch.last_offset  # a compressed wrapper carries its last inner offset
    else:
        if batch.last_offset_delta < 0:
            return "offsets beyond the segment", f"negative last offset delta {batch.last_offset_delta}"
        first, last = batch.base_offset, batch.last_offset
    if first < expected:
        return ("offsets going backwards",
                f"offsets going backwards: offset {first} at position {batch.position} is below the next expected "
                f"offset {expected}")
    if upper is not None and last > upper:
        return ("offsets beyond the segment",
                f"offset {last} at position {batch.position} reaches the next segment's base offset {upper + 1}")
    return None


def _strict_scan(path: Path, base: int, size: int, upper: int | None, cap: int,
                 count_from: int | None = None) -> _StrictScan:
    """Walk the segment, resynchronising after each bad entry (see :func:`_resync`).
    With ``count_from``, the valid batches from that position on are counted (records,
    first and last offsets: what a cut there would lose, and salvage would keep)."""
    out = _StrictScan()
    expected, last_good = base, None
    pos = 0
    largest = 0
    legacy = False
    with open(path, "rb") as f:
        fd = f.fileno()
        while pos < size:
            bad, kind, reason, natural = None, None, None, None
            batches = FileBatches(path, pos, size)
            span_start = pos
            try:
                for batch in batches:
                    problem = _batch_problem(batch, expected, upper)
                    if problem is not None:
                        bad, (kind, reason) = batch.position, problem
                        natural = batch.position + batch.size_in_bytes
                        break
                    legacy = legacy or isinstance(batch, LegacyBatch)
                    largest = max(largest, batch.size_in_bytes)
                    if count_from is not None and batch.position >= count_from:
                        _count(out, batch)
                    expected = last_good = batch.last_offset
                    expected += 1
                    pos = batch.position + batch.size_in_bytes
                else:
                    if batches.trailing is not None:
                        # A partial entry: the end of a torn write, or a damaged size field
                        # in the middle (valid batches may follow: resync decides).
                        t = batches.trailing
                        bad, kind = t.position, "torn tail"
                        reason = (f"partial batch at the end of the segment ({t.length} bytes"
                                  + (f" of {t.declared_size})" if t.declared_size else ")"))
                    else:
                        pos = size
            except FormatError as e:
                bad, kind, reason = (e.position if e.position is not None else pos), _kind_of(e.reason), e.reason
            if pos > span_start:
                out.spans.append((span_start, pos))
            if bad is None:
                break
            found = _resync(fd, bad, natural, size, expected, upper, legacy, max(cap, 2 * largest))
            if found is None:
                out.kafka_tail = kind not in _STRICT_ONLY
                if all_zero(fd, bad, size):
                    kind = "zeros"
                out.damage.append(_Damage(bad, size, kind, reason, last_good, None))
                break
            if kind == "torn tail":
                kind = "invalid size"  # a size field pointing past the end, with valid batches after it
            out.damage.append(_Damage(bad, found, kind, reason, last_good, _first_offset_at(path, found)))
            pos = found
    out.next_offset = expected if last_good is not None else base
    return out


def _count(scan: _StrictScan, batch) -> None:
    """Add a valid batch to the scan's counts (a compressed v0/v1 wrapper, whose inner
    messages are not decoded here, counts as one record)."""
    count = batch.records_count
    scan.records += count if count is not None else 1
    first = batch.last_offset if isinstance(batch, LegacyBatch) else batch.base_offset
    if scan.first_offset is None:
        scan.first_offset = first
    scan.last_offset = batch.last_offset


def _loss(path: Path, seg: _Segment, upper: int | None, cap: int, start: int) -> Loss:
    """What cutting ``seg`` at byte ``start`` loses; salvage's walk tells the valid batches
    (which ``--salvage`` keeps) from the damaged bytes."""
    strict = _strict_scan(path, seg.base, seg.size, upper, cap, count_from=start)
    damaged = sum(d.end - max(d.start, start) for d in strict.damage if d.end > start)
    return Loss(seg.size - start, strict.records, strict.first_offset, strict.last_offset, damaged, strict.records)


def _first_offset_at(path: Path, position: int) -> int | None:
    for batch in FileBatches(path, position, None, chunk_size=64 * 1024):
        return batch.last_offset if isinstance(batch, LegacyBatch) else batch.base_offset
    return None


def _resync(fd: int, bad: int, natural: int | None, size: int, expected: int, upper: int | None,
            legacy: bool, cap: int) -> int | None:
    """The position of the first batch after ``bad`` that salvage can keep, or None
    (:func:`~plog.engine.storage.batch_resync.find_next_entry`). The position the bad entry's
    own size field points to is tried first (a batch damaged inside keeps its length). A
    candidate must have a base offset at or above ``expected`` (and below the next segment),
    a size under ``cap``, and then a valid checksum; legacy candidates are only considered in
    a segment that already held legacy entries. Each resync scans forward from ``bad`` only:
    the work stays linear in the file size."""
    return find_next_entry(fd, bad + 1, size, EntryRules(expected, upper, cap, legacy), first_try=natural)


def _predict_validation(part: Path, plan: PartitionPlan, segments: list[_Segment], config: LogConfig,
                        salvage: bool, extra: dict, progress: Progress | None) -> None:
    revalidated = {r.base_offset for r in plan.revalidate}
    cap = max(_MIN_CANDIDATE_CAP, 2 * config.max_message_bytes)
    for i, seg in enumerate(segments):
        if seg.base not in revalidated:
            continue
        path = part / seg.disk
        is_last = i == len(segments) - 1
        if salvage:
            upper = None if is_last else segments[i + 1].base - 1
            strict = _strict_scan(path, seg.base, seg.size, upper, cap)
            extra["scans"][seg.name] = strict
            if progress is not None:
                progress(seg.size)
            _plan_salvage(plan, seg, strict, is_last, None if is_last else segments[i + 1].base)
            continue
        scan = _kafka_scan(path, seg.base, seg.size, config.index_interval_bytes)
        extra["scans"][seg.name] = scan
        if progress is not None:
            progress(seg.size)
        if scan.overflow:
            plan.offset_overflow.append(f"{seg.name}: {scan.overflow}")
        truncated = seg.size - scan.valid_bytes
        if truncated > 0:
            upper = None if is_last else segments[i + 1].base - 1
            plan.truncation = Truncation(seg.name, scan.valid_bytes, truncated, scan.kind or "invalid batch",
                                         scan.error or "", scan.next_offset,
                                         _loss(path, seg, upper, cap, scan.valid_bytes))
            for j, later in enumerate(segments[i + 1:], i + 1):
                prefix = later.name[: -len(LOG_FILE_SUFFIX)]
                nxt = segments[j + 1].base - 1 if j + 1 < len(segments) else None
                plan.deleted_segments.append(FileAction(later.name, "delete", f"follows the truncation in {seg.name}",
                                                        loss=_loss(part / later.disk, later, nxt, cap, 0)))
                for suffix in INDEX_SUFFIXES:
                    if (part / f"{prefix}{suffix}").exists():
                        plan.deleted_segments.append(FileAction(f"{prefix}{suffix}", "delete",
                                                                f"follows the truncation in {seg.name}"))
            extra["cut"] = i
            break


def _plan_salvage(plan: PartitionPlan, seg: _Segment, strict: _StrictScan, is_last: bool,
                  next_base: int | None) -> None:
    if not strict.damage:
        return
    tail = strict.damage[-1] if strict.damage[-1].end == seg.size else None
    quarantined = [d for d in strict.damage if d is not tail or not is_last]
    for d in quarantined:
        plan.salvage.append(DamagedRange(seg.name, d.start, d.end - d.start, d.kind, d.reason, d.offset_before,
                                         d.offset_after if d.offset_after is not None else next_base,
                                         quarantine_file_name(seg.base, d.start)))
    dropped_tail = tail is not None and is_last
    if quarantined or (dropped_tail and not strict.kafka_tail):
        plan.rewritten_segments.append(seg.name)
    if dropped_tail:
        first = seg.base if tail.offset_before is None else tail.offset_before + 1
        plan.truncation = Truncation(seg.name, tail.start, tail.end - tail.start, tail.kind, tail.reason, first,
                                     Loss(tail.end - tail.start, damaged_bytes=tail.end - tail.start))


# -- the end state -----------------------------------------------------------------------------------


def _read_next_offset(part: Path, seg: _Segment, view: dict[str, str]) -> int:
    """``readNextOffset`` read-only: from the offset index's last entry to the end."""
    prefix = seg.name[: -len(LOG_FILE_SUFFIX)]
    start = 0
    index = view.get(prefix + INDEX_FILE_SUFFIX)
    if index is not None and _index_problem(part / index, OFFSET_INDEX_ENTRY_SIZE, 1) is None:
        with IndexFile(part / index, OFFSET_INDEX_ENTRY_SIZE, seg.base, trim_zero_tail=False) as idx:
            last = idx.last_offset_entry()
        if last is not None and 0 <= last.position < seg.size:
            start = last.position
    nxt = seg.base
    try:
        for batch in FileBatches(part / seg.disk, start, seg.size):
            nxt = batch.next_offset
    except FormatError:
        pass
    return nxt


def _predict_end_state(part: Path, plan: PartitionPlan, segments: list[_Segment], view: dict[str, str],
                       extra: dict) -> None:
    kept = segments[: extra["cut"] + 1] if "cut" in extra else list(segments)
    lso_ckpt = plan.log_start_checkpoint or 0  # LogManager: getOrElse(tp, 0)
    if kept:
        last = kept[-1]
        scan = extra["scans"].get(last.name)
        leo = scan.next_offset if scan is not None and scan.next_offset is not None else \
            _read_next_offset(part, last, view)
        if leo < lso_ckpt:
            for seg in kept:
                plan.deleted_segments.append(FileAction(seg.name, "delete",
                                                        f"the log end offset {leo} is below the log start offset "
                                                        f"{lso_ckpt}"))
            kept = []
    if not kept:
        leo = lso_ckpt
        plan.empty_segment_created = True
        bases = [lso_ckpt]
    else:
        bases = [s.base for s in kept]
    extra["first_base"] = bases[0]
    plan.log_end_offset = leo
    plan.new_recovery_point = leo
    plan.new_log_start_offset = log_start_offset_at_load(plan.log_start_checkpoint, bases[0])
    names = {o: n for o, n in ((file_offset(n), n) for n in view if n.endswith(PRODUCER_SNAPSHOT_FILE_SUFFIX))
             if o is not None}
    deleted = _snapshot_deletions(part, view, names, bases, leo, plan.new_log_start_offset)
    plan.snapshots_deleted = [deleted[o] for o in sorted(deleted)]
    if leo > plan.new_log_start_offset and leo not in set(names) - set(deleted):
        plan.snapshot_written = file_name(leo, PRODUCER_SNAPSHOT_FILE_SUFFIX)


def _snapshot_deletions(part: Path, view: dict[str, str], names: dict[int, str], bases: list[int], leo: int,
                        log_start: int) -> dict[int, SnapshotDeletion]:
    """The producer snapshots the load deletes, by offset, with Kafka's reason:
    ``ProducerStateManager.removeStraySnapshots`` (stray), then ``truncateAndReload`` (out
    of range), then loading the latest (one that does not parse is deleted, unreadable)."""
    from plog.engine.storage.producer_state import read_snapshot, snapshot_out_of_range, stray_snapshots

    def name(o: int) -> str:
        return file_name(o, PRODUCER_SNAPSHOT_FILE_SUFFIX)

    out: dict[int, SnapshotDeletion] = {}
    for o, later in stray_snapshots(names, bases).items():
        why = (f"the later snapshot {name(later)} supersedes it" if later is not None else
               f"it lies below the last segment's base offset {max(bases)}")
        out[o] = SnapshotDeletion(name(o), "stray", f"stray: no segment starts at offset {o}, and {why}",
                                  routine=True)
    for o in sorted(names):
        if o in out or not snapshot_out_of_range(o, log_start, leo):
            continue
        if o > leo:
            out[o] = SnapshotDeletion(name(o), "out of range", f"out of range: above the log end offset {leo} "
                                      "(the producer state it holds covers records the log no longer has)")
        else:
            out[o] = SnapshotDeletion(name(o), "out of range", f"out of range: at or below the log start offset "
                                      f"{log_start}", routine=True)
    # A snapshot that does not parse is deleted when the producer state loads it (Kafka's
    # CorruptSnapshotException handling), and the one before it is used instead.
    for o in sorted(names):
        if o not in out:
            try:
                read_snapshot(part / view[names[o]])
            except (FormatError, OSError, ValueError, EngineError) as e:
                why = e.reason if isinstance(e, FormatError) else str(e)
                out[o] = SnapshotDeletion(name(o), "unreadable", f"unreadable: {why}")
    return out


def _why_untouched(start: dict) -> str:
    """Why recovery leaves a segment as it is (the loader's ``startup_recovery`` arguments)."""
    if start["had_clean_shutdown"]:
        return ("the log directory was shut down cleanly (.kafka_cleanshutdown): a broker's start-up revalidates no "
                "segment")
    if start["why"] and start["why"].startswith("at or after"):
        return f"it lies before the requested segment {file_name(start['recovery_point'])}"
    return (f"it lies below the recovery point {start['recovery_point']}: a broker's start-up trusts what it "
            "flushed and does not revalidate it")


def _check_untouched(part: Path, plan: PartitionPlan, segments: list[_Segment], view: dict[str, str], start: dict,
                     progress: Progress | None) -> None:
    """Read every segment recovery keeps without revalidating it with ``plog verify``'s
    checks, and name the damage found there (:class:`UntouchedDamage`): recovery leaves it
    as it is, as a broker's start-up would."""
    from plog.engine.storage.discovery import SegmentFiles
    from plog.engine.inspect.verify import ERROR, VerifyStats, verify_segment

    for i, seg in enumerate(segments):
        if seg.reasons:
            continue
        prefix = seg.name[: -len(LOG_FILE_SUFFIX)]
        companion = [str(part / view[n]) if n in view else None for n in (f"{prefix}{s}" for s in INDEX_SUFFIXES)]
        files = SegmentFiles(seg.base, str(part / seg.disk), *companion)
        is_last = i == len(segments) - 1
        stats = VerifyStats()
        found = [f for f in verify_segment(files, is_last=is_last, next_base_offset=None if is_last else
                                           segments[i + 1].base, stats=stats, progress=progress)
                 if f.severity == ERROR]
        if not found:
            continue
        first = found[0]
        in_log = any(f.path == files.log for f in found)
        remedy = ("plog recover --all --salvage revalidates it, quarantines the damaged bytes and keeps every valid "
                  "batch (--all alone truncates the log at the damage and deletes what follows)" if in_log else
                  "plog recover --all revalidates it and rebuilds its indexes from its batches")
        plan.untouched.append(UntouchedDamage(seg.name, os.path.basename(first.path), first.position, first.offset,
                                              first.check, first.message, stats.errors, _why_untouched(start),
                                              remedy))


# -- planning a whole path ---------------------------------------------------------------------------


def _checkpoint_changes(state: _LogDirState, results: list[tuple[str, int, int, int]]) -> tuple[list, dict]:
    """The checkpoint entries that change, from ``(topic-partition, LEO, log start, first
    base)`` of the recovered partitions; also returns the new maps by file name."""
    rp, ls, hw = dict(state.recovery_points), dict(state.log_starts), dict(state.high_watermarks)
    for tp_name, leo, lso, first_base in results:
        key = parse_partition_dir_name(tp_name)[0]
        rp[key] = leo
        if lso > first_base:
            ls[key] = lso
        else:
            ls.pop(key, None)
        if key in hw and hw[key] > leo:
            hw[key] = leo
    changes = []
    for name, old, new in ((RECOVERY_POINT_CHECKPOINT, state.recovery_points, rp),
                           (LOG_START_OFFSET_CHECKPOINT, state.log_starts, ls),
                           (REPLICATION_OFFSET_CHECKPOINT, state.high_watermarks, hw)):
        for key in sorted(set(old) | set(new), key=lambda k: (k[0], k[1])):
            if old.get(key) != new.get(key):
                changes.append(CheckpointChange(name, f"{key[0]}-{key[1]}", old.get(key), new.get(key)))
    return changes, {RECOVERY_POINT_CHECKPOINT: rp, LOG_START_OFFSET_CHECKPOINT: ls, REPLICATION_OFFSET_CHECKPOINT: hw}


def plan_recovery(path: str | os.PathLike, *, all_segments: bool = False, salvage: bool = False,
                  progress: Progress | None = None, overrides: Mapping[str, str] | None = None) -> RecoveryPlan:
    """What :func:`recover` would do to ``path``, without changing anything (no lock is
    taken, no file is written). ``progress(nbytes)`` follows the batch validation.
    ``overrides``: topic configs (Kafka names, e.g. ``index.interval.bytes``) over what the
    log directory says (``engine.topic_configs``), for every topic."""
    kind, targets = _resolve(path)
    plan = RecoveryPlan(os.fspath(path), kind, all_segments, salvage)
    for target in targets:
        state = _LogDirState.read(target, overrides=overrides)
        marker = ("present: deleted at the start, written again at the end" if state.clean else
                  "absent: written at the end" if target.whole else
                  "absent: stays absent (the other partitions of the log directory are not recovered)")
        dir_plan = LogDirPlan(str(target.path), state.clean, marker, writes_marker=target.whole or state.clean)
        done = []
        for part in target.partitions:
            p, extra = _plan_partition(part, state, all_segments=all_segments, salvage=salvage, progress=progress,
                                       check_progress=progress)
            dir_plan.partitions.append(p)
            if not p.skipped:
                done.append((p.topic_partition, p.log_end_offset, p.new_log_start_offset, extra["first_base"]))
        dir_plan.checkpoint_changes = _checkpoint_changes(state, done)[0]
        plan.log_dirs.append(dir_plan)
    return plan


# -- salvage: quarantine and rewrite ---------------------------------------------------------------


def quarantine_file_name(base_offset: int, position: int) -> str:
    """``quarantine-<20-digit segment base offset>-<byte position>.bin``.

    The damaged bytes of a segment are kept in the partition folder under this name. Kafka's
    ``LogLoader`` (and plog's loader, cleaner and retention) only act on files whose names
    end in ``.log``, ``.index``, ``.timeindex``, ``.txnindex``, ``.snapshot``, ``.deleted``,
    ``.cleaned`` or ``.swap`` and read a file's offset from its leading digits: a name that
    starts with letters and ends in ``.bin`` is none of those, so a broker loads the
    partition as if the file were not there, and it is never deleted, renamed or replayed.
    The position is the range's byte position in the segment as it was before salvage.
    """
    return f"{QUARANTINE_PREFIX}{file_name(base_offset)}-{position}{QUARANTINE_SUFFIX}"


def _copy_range(src_fd: int, dst_fd: int, start: int, end: int) -> None:
    pos = start
    while pos < end:
        chunk = os.pread(src_fd, min(_CHUNK, end - pos), pos)
        if not chunk:
            raise EngineError(f"the segment ended at byte {pos} while copying up to {end}")
        view = memoryview(chunk)
        while view:
            view = view[os.write(dst_fd, view):]
        pos += len(chunk)


def _write_file(path: Path, src_fd: int, ranges: Iterable[tuple[int, int]]) -> None:
    """Write the bytes of ``ranges`` of ``src_fd`` to ``path`` durably (tmp, fsync, rename)."""
    tmp = path.with_name(path.name + TMP_FILE_SUFFIX)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for start, end in ranges:
            _copy_range(src_fd, fd, start, end)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def _unique_quarantine(directory: Path, name: str, src_fd: int, start: int, end: int) -> str:
    """The name to use: ``name`` unless a different file holds it (a re-run after a crash
    finds its own earlier copy and reuses it; damage found in an already rewritten segment
    may fall at the same position and gets ``-2``, ``-3``...)."""
    stem = name[: -len(QUARANTINE_SUFFIX)]
    candidate, n = name, 1
    while (directory / candidate).exists():
        existing = directory / candidate
        if existing.stat().st_size == end - start and existing.read_bytes() == os.pread(src_fd, end - start, start):
            return candidate
        n += 1
        candidate = f"{stem}-{n}{QUARANTINE_SUFFIX}"
    return candidate


def _rewrite_segment(directory: Path, base: int, keep: list[tuple[int, int]], quarantine: list[DamagedRange],
                     actions: list[str]) -> None:
    """Move ``quarantine`` ranges aside and rewrite the segment with the ``keep`` spans only.

    Crash safety is Kafka's swap protocol (``LocalLog.replaceSegments``), which the loader
    completes or rolls back (kafka-format.md §13.2 passes 1-4):

    1. each quarantine file is written whole (tmp, fsync, rename) before anything else;
    2. ``<base>.log.cleaned`` (the kept bytes) and empty ``.index.cleaned`` /
       ``.timeindex.cleaned`` (and ``.txnindex.cleaned`` if the segment has one) are written
       and fsynced -- a crash now leaves ``.cleaned`` files, which the loader deletes;
    3. they are renamed to ``.swap`` -- while any ``.cleaned`` remains, the loader deletes the
       ``.swap`` files at or above its offset too, so a half-done step rolls back;
    4. the old files are renamed to ``.deleted`` -- from here a load completes the swap:
       ``.deleted`` files are removed and old files still in the swap's offset range are
       deleted (an empty swap replaces them by name, hence the empty index files of step 2);
    5. the ``.swap`` files are renamed to their final names (the ``.log`` first), and
    6. the ``.deleted`` files removed. The directory is fsynced after every step.

    The new segment's indexes are empty; the caller has the loader recover the segment,
    which rebuilds them from the kept batches.
    """
    prefix = file_name(base)
    old = {s: directory / f"{prefix}{s}" for s in SEGMENT_SUFFIXES}
    src_fd = os.open(old[LOG_FILE_SUFFIX], os.O_RDONLY)
    try:
        for q in quarantine:
            name = _unique_quarantine(directory, q.quarantine_file, src_fd, q.position, q.position + q.length)
            q.quarantine_file = name
            _write_file(directory / name, src_fd, [(q.position, q.position + q.length)])
            actions.append(f"quarantined {q.length} bytes at position {q.position} of {prefix}{LOG_FILE_SUFFIX} "
                           f"({q.kind}) in {name}")
        fsync_dir(directory)
        news = [s for s in SEGMENT_SUFFIXES if s != TXN_INDEX_FILE_SUFFIX or old[s].exists()]
        for suffix in news:
            target = directory / f"{prefix}{suffix}{CLEANED}"
            if suffix == LOG_FILE_SUFFIX:
                _write_file(target, src_fd, keep)
            else:
                _write_file(target, src_fd, [])
    finally:
        os.close(src_fd)
    fsync_dir(directory)
    for suffix in news:
        os.replace(directory / f"{prefix}{suffix}{CLEANED}", directory / f"{prefix}{suffix}{SWAP}")
    fsync_dir(directory)
    for suffix in SEGMENT_SUFFIXES:
        if old[suffix].exists():
            os.replace(old[suffix], directory / f"{prefix}{suffix}{DELETED}")
    fsync_dir(directory)
    for suffix in news:
        os.replace(directory / f"{prefix}{suffix}{SWAP}", old[suffix])
    fsync_dir(directory)
    for suffix in SEGMENT_SUFFIXES:
        (directory / f"{prefix}{suffix}{DELETED}").unlink(missing_ok=True)
    fsync_dir(directory)
    kept = sum(e - s for s, e in keep)
    actions.append(f"rewrote {prefix}{LOG_FILE_SUFFIX} through {CLEANED}/{SWAP} with its {kept} valid bytes")


def _salvage(part: Path, plan: PartitionPlan, extra: dict, report: PartitionRecovery) -> list[int]:
    """Carry out the plan's salvage rewrites; returns the bases rewritten."""
    done = []
    by_name = {s.name: s for s in extra["segments"]}
    for name in plan.rewritten_segments:
        seg = by_name[name]
        strict: _StrictScan = extra["scans"][name]
        quarantine = [d for d in plan.salvage if d.file == name]
        keep = [(s, e) for s, e in strict.spans if e > s]
        _rewrite_segment(part, seg.base, keep, quarantine, report.actions)
        report.quarantined.extend(quarantine)
        if plan.truncation is not None and plan.truncation.file == name:
            report.truncations.append(plan.truncation)
            report.actions.append(f"dropped {plan.truncation.bytes} bytes at position {plan.truncation.position} "
                                  f"of {name} ({plan.truncation.kind}): nothing valid follows")
        done.append(seg.base)
    return done


# -- recovering one partition (in a worker) ------------------------------------------------------------


@dataclass
class _Task:
    index: int
    part: str
    state: _LogDirState
    all_segments: bool
    salvage: bool


def _recover_partition(task: _Task, progress: Progress | None) -> PartitionRecovery:
    part = Path(task.part)
    state = task.state
    tp_name, _, skipped = _skip_reason(part)
    report = PartitionRecovery(str(part), tp_name, "recovered")
    validated = checked = 0

    def counted(n: int) -> None:
        nonlocal validated
        validated += n
        if progress is not None:
            progress(n)

    def checking(n: int) -> None:
        nonlocal checked
        checked += n
        if progress is not None:
            progress(n)

    try:
        # The plan the dry run prints, made again here: what the load revalidates, the
        # indexes it rebuilds, what a truncation costs and the damage left untouched all
        # come from it (the load's own validation then does the truncating).
        plan, extra = _plan_partition(part, state, all_segments=task.all_segments, salvage=task.salvage,
                                      check_progress=checking)
        forced = list(extra["forced"])
        if plan.rewritten_segments:
            # The swap protocol of a salvage rewrite must not meet another interrupted swap:
            # finish those first, then plan again on the settled folder.
            if plan.temp_files:
                temp = complete_swaps_and_remove_temp_files(part)
                report.actions.extend(temp.actions)
                report.deleted_files.extend(temp.deleted_files)
                plan, extra = _plan_partition(part, state, all_segments=task.all_segments, salvage=True)
                forced = list(extra["forced"])
            forced += _salvage(part, plan, extra, report)
        tp = parse_partition_dir_name(part.name)[0]
        start = extra["start"]
        log = load_log(part, extra["config"], log_start_offset=state.log_starts.get(tp, 0),
                       recovery_point=start["recovery_point"], had_clean_shutdown=start["had_clean_shutdown"],
                       writable=True, force_recovery=forced, progress=counted)
        try:
            _fill_from_load(report, log, plan)
        finally:
            log.close()
        report.recovery_point = log.recovery_point
        fsync_dir(part)
    except Exception as e:  # noqa: BLE001 - one bad partition must not stop the others; reported as failed
        report.status = "failed"
        report.reason = _failure_reason(e)
    report.bytes_validated = validated
    report.bytes_checked = checked
    return report


def _failure_reason(e: Exception) -> str:
    """Why a partition failed, in one line: an I/O error as "what: file" (the file is the
    useful part: a full disk, a permission), anything else with its type."""
    if isinstance(e, OSError) and e.strerror:
        return f"{e.strerror}: {e.filename}" if e.filename else e.strerror
    return " ".join(f"{type(e).__name__}: {e}".split())


def _fill_from_load(report: PartitionRecovery, log, plan: PartitionPlan) -> None:
    load = log.load_report
    report.actions.extend(load.actions)
    # Segments deleted after a truncation are renamed to .deleted first: report their names.
    report.deleted_files.extend(n.removesuffix(DELETED) for n in load.deleted_files)
    rebuilt = {a.file for a in plan.index_rebuilds if a.action == "rebuild"}
    for r in load.recovered_segments:
        name = file_name(r.base_offset, LOG_FILE_SUFFIX)
        report.revalidated.append(name)
        report.rebuilt_indexes.extend(n for n in (file_name(r.base_offset, s) for s in INDEX_SUFFIXES)
                                      if n in rebuilt)
        if r.truncated_bytes:
            position = r.valid_bytes
            reason = r.error or ""
            kind, loss, first = _kind_of(reason), None, r.next_offset
            planned = plan.truncation
            if planned is not None and planned.file == name and planned.position == position:
                kind, loss, first = planned.kind, planned.loss, planned.first_offset
            report.truncations.append(Truncation(name, position, r.truncated_bytes, kind, reason, first, loss))
    present = {p.name for p in log.dir.iterdir()}
    report.untouched = [u for u in plan.untouched if u.segment in present]
    report.log_end_offset = log.log_end_offset
    report.log_start_offset = log.log_start_offset
    report.first_segment_base = log.segments.first.base_offset


# -- worker processes --------------------------------------------------------------------------------

_worker_queue = None


def _init_worker(queue) -> None:
    global _worker_queue
    _worker_queue = queue


def _worker(task: _Task) -> PartitionRecovery:
    queue = _worker_queue
    index = task.index
    def progress(n: int) -> None:
        with held():  # a stop must not cut the message in two (engine.workers)
            queue.put((index, n))

    return _recover_partition(task, progress if queue is not None else None)


def _run(tasks: list[_Task], jobs: int, progress: Progress | None) -> dict[int, PartitionRecovery]:
    results: dict[int, PartitionRecovery] = {}
    if jobs <= 1 or len(tasks) <= 1:
        for task in tasks:
            results[task.index] = _recover_partition(task, progress)
        return results
    methods = multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("fork" if "fork" in methods else "forkserver")
    queue = ctx.SimpleQueue()
    seen = {t.index: 0 for t in tasks}

    def drain() -> None:
        while not queue.empty():
            index, n = queue.get()
            seen[index] += n
            if progress is not None:
                progress(n)

    # A partition cut short by Ctrl-C recovers at the next run (engine.workers).
    with WorkerPool(min(jobs, len(tasks)), mp_context=ctx, initializer=_init_worker, initargs=(queue,)) as pool:
        futures = {pool.submit(_worker, t): t for t in tasks}
        pending = set(futures)
        try:
            while pending:
                done, pending = wait(pending, timeout=0.05, return_when=FIRST_COMPLETED)
                drain()
                for future in done:
                    task = futures[future]
                    try:
                        results[task.index] = future.result()
                    except BrokenProcessPool as e:
                        results[task.index] = PartitionRecovery(task.part, None, "failed",
                                                                f"the worker process died: {e}")
        except KeyboardInterrupt:
            # Ctrl-C: partitions not started stay as they are (the next run recovers them).
            # The running ones still report progress: keep reading it until they end.
            pool.shutdown(while_waiting=drain)
            raise
    drain()
    for index, report in results.items():
        # A worker's queue writes are synchronous, so they all arrived before its result;
        # this only settles a count for a worker that died half-way.
        if progress is not None and report.bytes_validated > seen.get(index, 0):
            progress(report.bytes_validated - seen[index])
    return results


# -- recover -----------------------------------------------------------------------------------------


def _lock(log_dir: Path) -> LogDirLock:
    try:
        return LogDirLock(log_dir)
    except LogDirLockedError as e:
        raise LogDirInUseError(f"{log_dir} is in use by a Kafka broker or another plog writer (its .lock is held); "
                               f"stop it before recovering: {e}") from None


def recover(path: str | os.PathLike, *, all_segments: bool = False, salvage: bool = False, jobs: int | None = None,
            progress: Progress | None = None, overrides: Mapping[str, str] | None = None) -> RecoveryReport:
    """Recover ``path`` as a broker's start-up would (see the module docstring), in
    ``jobs`` worker processes (default: the number of cores; 1 runs in this process).
    Each topic's config (index interval and size, which shape the rebuilt indexes) comes
    from the log directory (``engine.topic_configs``), with ``overrides`` on top.

    Raises :class:`LogDirInUseError` when a log directory's ``.lock`` is held (nothing is
    changed then). A partition that fails is reported with ``status="failed"``; its
    checkpoint entries are kept and the clean-shutdown marker of its log directory is not
    written. ``progress(nbytes)`` is called as segment bytes are validated.
    """
    kind, targets = _resolve(path)
    report = RecoveryReport(os.fspath(path), kind, all_segments, salvage)
    jobs = (os.cpu_count() or 1) if jobs is None else max(1, jobs)
    locks: list[LogDirLock] = []
    try:
        for target in targets:
            locks.append(_lock(target.path))
        states, epochs, tasks, skipped = [], [], [], {}
        for target in targets:
            marker = CleanShutdownFile(target.path)
            clean = marker.exists()
            epoch = -1
            if clean:
                try:
                    epoch = marker.read() or -1
                except FormatError:
                    epoch = -1  # a malformed marker still means clean (Kafka)
                marker.delete()  # as Kafka: a crash from here on means recovery next time
            state = _LogDirState.read(target, clean, overrides)
            states.append(state)
            epochs.append(epoch)
            for part in target.partitions:
                tp_name, _, why = _skip_reason(part)
                index = len(tasks) + len(skipped)
                if why:
                    skipped[index] = PartitionRecovery(str(part), tp_name, "skipped", why)
                else:
                    tasks.append(_Task(index, str(part), state, all_segments, salvage))
        results = {**skipped, **_run(tasks, jobs, progress)}
        index = 0
        for target, state, epoch in zip(targets, states, epochs):
            dir_report = LogDirRecovery(str(target.path), state.clean)
            for _ in target.partitions:
                dir_report.partitions.append(results[index])
                index += 1
            _finish_log_dir(target, state, epoch, dir_report)
            report.log_dirs.append(dir_report)
    finally:
        for lock in locks:
            lock.release()
    return report


def _finish_log_dir(target: _LogDirTarget, state: _LogDirState, epoch: int, report: LogDirRecovery) -> None:
    done = [(p.topic_partition, p.log_end_offset, p.log_start_offset, p.first_segment_base)
            for p in report.partitions if p.status == "recovered"]
    changes, maps = _checkpoint_changes(state, done)
    report.checkpoint_changes = changes
    for name in {c.file for c in changes}:
        OffsetCheckpointFile(target.path / name).write(maps[name])
    failed = any(p.status == "failed" for p in report.partitions)
    if not failed and (target.whole or state.clean):
        CleanShutdownFile(target.path).write(epoch)
        report.clean_shutdown_written = True


__all__ = [
    "REVALIDATED",
    "CheckpointChange",
    "DamagedRange",
    "FileAction",
    "LogDirInUseError",
    "Loss",
    "LogDirPlan",
    "LogDirRecovery",
    "PartitionPlan",
    "PartitionRecovery",
    "RecoveryError",
    "RecoveryPlan",
    "RecoveryReport",
    "SegmentRevalidation",
    "SnapshotDeletion",
    "Truncation",
    "UntouchedDamage",
    "plan_recovery",
    "quarantine_file_name",
    "recover",
]
