"""Committed offsets and classic group metadata held in ``__consumer_offsets`` (read-only).

The group coordinator keeps its state as a compacted log: each ``__consumer_offsets-<p>``
partition holds the records of the groups whose id hashes to ``p``
(:func:`plog.formats.offsets_topic.partition_for_group`). Replaying a partition from its
first segment rebuilds that state; this module does it the way Kafka's
``GroupMetadataManager.doLoadGroupsAndOffsets`` loads a partition when a broker becomes
its coordinator:

* **Offset commits** (key types 0/1): the last value per (group, topic, partition) wins;
  a null value (tombstone) deletes the offset.
* **Transactional offset commits** (``TxnOffsetCommit``, written in transactional batches):
  kept per producer id as *pending* until that producer's control marker. A COMMIT marker
  makes them visible, except where a commit already loaded was appended later in the log
  (Kafka keeps the most recently appended commit); an ABORT marker drops them. A
  transactional tombstone removes only that producer's pending offset. Pending commits
  still open at the end of the log are reported, not applied.
* **Classic group metadata** (key type 2): the last value wins; a tombstone marks the group
  deleted (a later value brings it back).
* **Other record types** (KIP-848 consumer groups, types 3-8; share groups, 9-16; types
  this reader does not know at all) are skipped and counted; for the known ones the group
  still shows up, and whether any of its records is still live (last value not a
  tombstone) is tracked so that :func:`list_groups` can list it.

Invariants of the result: ``GroupState.offsets`` never holds a tombstoned, aborted or
still-pending commit, and holds at most one commit per topic-partition. (Kafka writes a
group's records only to the partition its id hashes to; the replay does not check that.)

Reading never takes the ``.lock`` and never writes: segment files are read with plain
reads, the ``.log`` files in base-offset order (``.deleted``, ``.cleaned`` and ``.swap``
files are ignored: they are on their way out or not yet in). Each file is read up to its
size when reached, so a partition a running broker appends to may end in a torn batch;
trailing partial bytes are ignored, and so is an undecodable entry in the *last* segment
(a write in progress). An undecodable entry before the last segment is corruption and
raises :class:`GroupOffsetsError`. Memory grows with the number of live keys, as the
coordinator's own cache does; records are decoded one batch at a time.

When several log directories hold the same partition (replicas of several brokers), the
copy with the highest log end offset is read (the first one given, on a tie).

Offsets with an expire timestamp (OffsetCommitValue v1) are returned as stored: expiring
them is the running coordinator's job, done by writing tombstones.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

from plog.formats.control import ControlRecordType
from plog.formats.errors import FormatError
from plog.formats.offsets_topic import (
    CONSUMER_PROTOCOL_TYPE,
    decode_consumer_assignment,
    decode_key,
    decode_value,
    partition_for_group,
)
from plog.formats.protocol import UnknownRecordTypeError

from plog.engine.errors import GroupOffsetsError, InvalidTopicError
from plog.engine.storage.file_records import FileBatches
from plog.engine.storage.file_names import (
    GROUP_METADATA_TOPIC_NAME,
    LOG_FILE_SUFFIX,
    TopicPartition,
    file_offset,
    parse_partition_dir_name,
)
from plog.engine.clients.txn_view import marker_type

__all__ = [
    "ClassicGroupMetadata",
    "CommittedOffset",
    "GroupMember",
    "GroupOffsetsError",
    "GroupState",
    "OffsetsPartitionReplay",
    "list_groups",
    "offsets_partition_dirs",
    "read_group_state",
    "replay_offsets_partition",
]

DEFAULT_NUM_PARTITIONS = 50  # offsets.topic.num.partitions
LOG_SUFFIX = LOG_FILE_SUFFIX
NO_PRODUCER_ID = -1


@dataclass(frozen=True)
class CommittedOffset:
    """One committed offset (Kafka's ``OffsetAndMetadata``) and where it was written.

    ``leader_epoch`` is None when not recorded (-1, or a value version without it);
    ``expire_timestamp`` is None unless the value (version 1) carries one.
    ``record_offset`` is the offset of the commit record in ``__consumer_offsets``.
    """

    offset: int
    leader_epoch: int | None
    metadata: str
    commit_timestamp: int
    expire_timestamp: int | None
    record_offset: int


@dataclass(frozen=True)
class GroupMember:
    """A member of a classic group, from its GroupMetadataValue.

    ``assignment`` is the decoded list of assigned partitions when the group uses the
    consumer protocol (``()`` for an empty assignment), None when it does not or the bytes
    do not decode; the raw bytes are kept either way.
    """

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout: int
    rebalance_timeout: int
    assignment: tuple[TopicPartition, ...] | None
    raw_subscription: bytes
    raw_assignment: bytes


@dataclass(frozen=True)
class ClassicGroupMetadata:
    """The last GroupMetadataValue of a classic group. ``current_state_timestamp`` is None
    for value versions before 2."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int | None
    members: tuple[GroupMember, ...]
    value_version: int
    record_offset: int


@dataclass
class GroupState:
    """What a ``__consumer_offsets`` partition says about one group.

    ``pending_transactional_offsets`` holds, per producer id, transactional commits whose
    transaction has no marker yet (invisible to consumers). ``deleted`` is True when the
    last classic group-metadata record was a tombstone. ``skipped_records`` counts this
    group's records of types not modelled here (KIP-848, share groups).
    """

    group_id: str
    partition: int
    offsets: dict[TopicPartition, CommittedOffset] = field(default_factory=dict)
    metadata: ClassicGroupMetadata | None = None
    deleted: bool = False
    pending_transactional_offsets: dict[int, dict[TopicPartition, CommittedOffset]] = field(default_factory=dict)
    skipped_records: int = 0
    live_skipped_keys: int = 0

    @property
    def exists(self) -> bool:
        """Whether the coordinator would still know the group: it has committed or pending
        offsets, classic metadata, or a live record of another type."""
        return bool(self.offsets or self.metadata is not None or self.pending_transactional_offsets
                    or self.live_skipped_keys)


@dataclass
class OffsetsPartitionReplay:
    """The replay of one ``__consumer_offsets`` partition folder.

    ``log_end_offset`` is the offset after the last whole batch read; ``trailing_bytes``
    what was ignored after it in the last segment (a torn or in-progress write), with
    ``tail_error`` saying why when it was not simply a partial batch.
    ``unknown_records`` counts records whose key type this reader does not know at all
    (so not attributable to a group), ``undecodable_records`` records of a known type
    whose key or value does not decode.
    """

    directory: Path
    partition: int
    groups: dict[str, GroupState] = field(default_factory=dict)
    log_end_offset: int = 0
    batches: int = 0
    records: int = 0
    unknown_records: int = 0
    undecodable_records: int = 0
    trailing_bytes: int = 0
    tail_error: str | None = None


# -- finding partitions ----------------------------------------------------------------------


def offsets_partition_dirs(log_dirs: Sequence[str | os.PathLike]) -> dict[int, list[Path]]:
    """``__consumer_offsets-<p>`` folders in ``log_dirs``, by partition, in the order the
    log directories were given (``-delete``/``-future``/``-stray`` folders are not read)."""
    found: dict[int, list[Path]] = {}
    for log_dir in log_dirs:
        log_dir = Path(log_dir)
        if not log_dir.is_dir():
            continue
        for entry in sorted(log_dir.iterdir()):
            if not entry.name.startswith(GROUP_METADATA_TOPIC_NAME + "-") or not entry.is_dir():
                continue
            try:
                tp, kind = parse_partition_dir_name(entry.name)
            except InvalidTopicError:
                continue
            if kind == "current" and tp.topic == GROUP_METADATA_TOPIC_NAME:
                found.setdefault(tp.partition, []).append(entry)
    return dict(sorted(found.items()))


def _segment_files(directory: Path) -> list[tuple[int, Path]]:
    """(base offset, path) of the ``.log`` files of a partition folder, in offset order."""
    out = []
    for entry in directory.iterdir():
        base = file_offset(entry.name)
        if entry.name.endswith(LOG_SUFFIX) and base is not None and entry.is_file():
            out.append((base, entry))
    return sorted(out)


def _log_end_offset(directory: Path) -> int:
    """Next offset after the last whole batch of the partition: the last segment's, found
    from its batch headers (its base offset when it is empty)."""
    segments = _segment_files(directory)
    if not segments:
        return 0
    base, path = segments[-1]
    next_offset = base
    try:
        for batch in FileBatches(path):
            next_offset = batch.next_offset
    except FormatError:
        pass  # the replay stops at the same place
    return next_offset


# -- the replay -----------------------------------------------------------------------------


class _Replay:
    """Kafka's load loop over one partition (``doLoadGroupsAndOffsets``); see the module
    docstring. ``only_group`` restricts the state kept to one group."""

    def __init__(self, directory: Path, partition: int, only_group: str | None):
        self.report = OffsetsPartitionReplay(directory, partition)
        self.only_group = only_group
        self.loaded_offsets: dict[tuple[str, TopicPartition], CommittedOffset] = {}
        self.pending: dict[int, dict[tuple[str, TopicPartition], CommittedOffset]] = {}
        self.loaded_groups: dict[str, ClassicGroupMetadata] = {}
        self.removed_groups: set[str] = set()
        self.skipped: dict[str, int] = {}
        self.skipped_live: dict[str, dict[bytes, bool]] = {}

    def run(self) -> OffsetsPartitionReplay:
        segments = _segment_files(self.report.directory)
        for i, (base, path) in enumerate(segments):
            self.report.log_end_offset = max(self.report.log_end_offset, base)
            last = i == len(segments) - 1
            # Fix the size once: a running broker may append while we read.
            size = os.path.getsize(path)
            valid_end = 0
            try:
                for batch in FileBatches(path, 0, size):
                    self._batch(batch)
                    valid_end = batch.position + batch.size_in_bytes
            except FormatError as e:
                if not last:
                    raise GroupOffsetsError(f"Cannot replay {path}: {e}") from None
                # A write in progress at the end of the log: what follows is not data yet.
                self.report.tail_error = str(e)
            if last:
                self.report.trailing_bytes = size - valid_end
        self._build_groups()
        return self.report

    def _wanted(self, group: str) -> bool:
        return self.only_group is None or group == self.only_group

    def _batch(self, batch) -> None:
        # Decode everything before changing any state, so a batch that fails to decode
        # (at the tail of the last segment) leaves the replay as it was before it.
        records = batch.records() if not batch.is_control else None
        marker = marker_type(batch) if batch.is_control else None
        self.report.batches += 1
        self.report.log_end_offset = batch.next_offset
        if batch.is_control:
            # Kafka acts on any control batch that has a record: a COMMIT publishes the
            # producer's pending commits, and either marker ends its transaction.
            if marker is None:
                return
            pending = self.pending.pop(batch.producer_id, {})
            if marker is ControlRecordType.COMMIT:
                for key, committed in pending.items():
                    current = self.loaded_offsets.get(key)
                    # Keep the most recently appended commit when transactional and plain
                    # commits mix (CommitRecordMetadataAndOffset.olderThan).
                    if current is None or current.record_offset < committed.record_offset:
                        self.loaded_offsets[key] = committed
            return
        transactional = batch.is_transactional
        for record in records:
            self.report.records += 1
            self._record(record, transactional, batch.producer_id)

    def _record(self, record, transactional: bool, producer_id: int) -> None:
        if record.key is None:
            self.report.undecodable_records += 1  # Kafka requires a key here
            return
        try:
            key = decode_key(record.key)
        except UnknownRecordTypeError:
            self.report.unknown_records += 1
            return
        except FormatError:
            self.report.undecodable_records += 1
            return
        if key.kind == "offset_commit":
            group = key.fields["group"]
            if not self._wanted(group):
                return
            tp = TopicPartition(key.fields["topic"], key.fields["partition"])
            self._offset_commit((group, tp), record, transactional, producer_id)
        elif key.kind == "group_metadata":
            group = key.fields["group"]
            if not self._wanted(group):
                return
            self._group_metadata(group, record)
        else:
            group = key.fields.get("groupId")
            if group is None or not self._wanted(group):
                return
            self.skipped[group] = self.skipped.get(group, 0) + 1
            self.skipped_live.setdefault(group, {})[bytes(record.key)] = record.value is not None

    def _decoded_value(self, record_type: int, record):
        """The value of a non-tombstone record of ``record_type``, or None (counted as
        undecodable) when it does not decode."""
        try:
            return decode_value(record_type, record.value)
        except FormatError:
            self.report.undecodable_records += 1
            return None

    def _offset_commit(self, key: tuple[str, TopicPartition], record, transactional: bool, producer_id: int) -> None:
        if transactional:
            target = self.pending.setdefault(producer_id, {})
        else:
            target = self.loaded_offsets
        if record.value is None:
            target.pop(key, None)
            return
        value = self._decoded_value(1, record)
        if value is None:
            return
        f = value.fields
        leader_epoch = f.get("leaderEpoch", -1)
        expire = f.get("expireTimestamp", -1) if value.version == 1 else -1
        target[key] = CommittedOffset(
            offset=f["offset"],
            leader_epoch=None if leader_epoch < 0 else leader_epoch,
            metadata=f["metadata"],
            commit_timestamp=f["commitTimestamp"],
            expire_timestamp=None if expire < 0 else expire,
            record_offset=record.offset,
        )

    def _group_metadata(self, group: str, record) -> None:
        if record.value is None:
            self.loaded_groups.pop(group, None)
            self.removed_groups.add(group)
            return
        value = self._decoded_value(2, record)
        if value is None:
            return
        self.removed_groups.discard(group)
        self.loaded_groups[group] = _classic_metadata(value, record.offset)

    def _build_groups(self) -> None:
        groups = self.report.groups
        partition = self.report.partition

        def state(group: str) -> GroupState:
            if group not in groups:
                groups[group] = GroupState(group, partition)
            return groups[group]

        for (group, tp), committed in self.loaded_offsets.items():
            state(group).offsets[tp] = committed
        for producer_id, commits in self.pending.items():
            for (group, tp), committed in commits.items():
                state(group).pending_transactional_offsets.setdefault(producer_id, {})[tp] = committed
        for group, metadata in self.loaded_groups.items():
            state(group).metadata = metadata
        for group in self.removed_groups:
            state(group).deleted = True
        for group, count in self.skipped.items():
            s = state(group)
            s.skipped_records = count
            s.live_skipped_keys = sum(self.skipped_live[group].values())
        for s in groups.values():
            s.offsets = dict(sorted(s.offsets.items()))
        self.report.groups = dict(sorted(groups.items()))


def _classic_metadata(value, record_offset: int) -> ClassicGroupMetadata:
    f = value.fields
    protocol_type = f["protocolType"]
    members = []
    for m in f["members"]:
        raw_assignment = bytes(m["assignment"])
        members.append(GroupMember(
            member_id=m["memberId"],
            group_instance_id=m.get("groupInstanceId"),
            client_id=m["clientId"],
            client_host=m["clientHost"],
            session_timeout=m["sessionTimeout"],
            # Version 0 has no rebalance timeout; Kafka then uses the session timeout.
            rebalance_timeout=m.get("rebalanceTimeout", m["sessionTimeout"]),
            assignment=_assignment(raw_assignment) if protocol_type == CONSUMER_PROTOCOL_TYPE else None,
            raw_subscription=bytes(m["subscription"]),
            raw_assignment=raw_assignment,
        ))
    return ClassicGroupMetadata(
        protocol_type=protocol_type,
        generation=f["generation"],
        protocol=f["protocol"],
        leader=f["leader"],
        current_state_timestamp=f["currentStateTimestamp"] if value.version >= 2 else None,
        members=tuple(members),
        value_version=value.version,
        record_offset=record_offset,
    )


def _assignment(raw: bytes) -> tuple[TopicPartition, ...] | None:
    if not raw:
        return ()  # a member between a rebalance and its SyncGroup has no assignment yet
    try:
        decoded = decode_consumer_assignment(raw)
    except FormatError:
        return None
    return tuple(TopicPartition(tp["topic"], p) for tp in decoded.fields["assignedPartitions"]
                 for p in tp["partitions"])


# -- public entry points ---------------------------------------------------------------------


def replay_offsets_partition(directory: str | os.PathLike, *, group: str | None = None,
                             partition: int | None = None) -> OffsetsPartitionReplay:
    """Replay one ``__consumer_offsets-<p>`` folder (read-only); with ``group``, keep only
    that group's state. ``partition`` defaults to the number in the folder name."""
    directory = Path(directory)
    if partition is None:
        partition = parse_partition_dir_name(directory.name)[0].partition
    return _Replay(directory, partition, group).run()


def _chosen_copies(log_dirs: Sequence[str | os.PathLike], partitions: set[int] | None) -> Iterator[tuple[int, Path]]:
    for partition, copies in offsets_partition_dirs(log_dirs).items():
        if partitions is not None and partition not in partitions:
            continue
        if len(copies) == 1:
            yield partition, copies[0]
        else:
            # max() keeps the first of equal candidates: the earlier log directory.
            yield partition, max(copies, key=_log_end_offset)


def read_group_state(log_dirs: Sequence[str | os.PathLike], group: str | None = None, *,
                     num_partitions: int = DEFAULT_NUM_PARTITIONS) -> dict[str, GroupState]:
    """Group id -> :class:`GroupState`, from the ``__consumer_offsets`` partitions found in
    the Kafka log directories ``log_dirs``.

    With ``group``, only its partition (``partition_for_group(group, num_partitions)``) is
    read and only that group is returned (an empty dict when the partition says nothing of
    it). Groups whose state is gone (e.g. deleted) are included, with ``exists`` False; use
    :func:`list_groups` for the live ones. A single path is accepted for ``log_dirs``.
    """
    if isinstance(log_dirs, (str, os.PathLike)):
        log_dirs = [log_dirs]
    partitions = None if group is None else {partition_for_group(group, num_partitions)}
    result: dict[str, GroupState] = {}
    for partition, directory in _chosen_copies(log_dirs, partitions):
        replay = replay_offsets_partition(directory, group=group, partition=partition)
        result.update(replay.groups)
    return dict(sorted(result.items()))


def list_groups(log_dirs: Sequence[str | os.PathLike]) -> list[str]:
    """Sorted ids of the groups whose state still exists (:attr:`GroupState.exists`) in
    the ``__consumer_offsets`` partitions of ``log_dirs``."""
    return [g for g, s in read_group_state(log_dirs).items() if s.exists]
