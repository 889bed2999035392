"""Partition reassignment, executed: ``kafka-reassign-partitions.sh --execute`` and
``--verify``, preferred leaders and the placement report, for a plog data directory.

Plans (Kafka's JSON, ``--generate``, the checks made before anything moves) are
engine.cluster.reassignment_plan's; :func:`parse_reassignment_json` is re-exported here: a plan
file read, then executed, is what this module is for.

**Execute** moves replica folders between the brokers' log directories (``broker-<id>/``)
while holding the ``.lock`` of *every* broker directory, so no produce runs concurrently and
no writer creates a folder behind its back. For all partitions of the plan together:

1. **Copy.** Each new replica that does not hold the partition yet (or holds a stale or
   partial copy left by an interrupted run) gets a full copy of the current leader's
   folder: segments, indexes, txn indexes, producer snapshots, ``leader-epoch-checkpoint``
   and ``partition.metadata``, byte for byte. The copy is written into
   ``<tp>.<uuid>-future`` (a name every loader leaves alone), fsynced, renamed to
   ``<tp>`` and then opened through the broker's ``LogManager``, so the broker's
   checkpoints name it. The leader's log is closed first: a closed log's files are in the
   form a cleanly shut down copy must have (trimmed indexes, a producer snapshot at the log
   end offset).
2. **Switch.** One atomic rewrite of ``cluster.json`` gives every partition its new replica
   list (the leader is the first replica). It is refused, with nothing changed, if the
   assignment moved since the plan was checked.
3. **Delete.** Each replica no longer in the list (and any folder of the partition on
   another broker) is renamed ``<tp>.<uuid>-delete``, as Kafka does, then removed.

Crash states, and why no record is ever lost:

* during 1: the metadata still names the old replicas, whose folders are untouched; the new
  brokers hold ``-future`` folders (ignored) or complete but unlisted folders. Readers and
  writers use the old replicas. Running the plan again removes those copies and copies
  afresh (they may be stale by then).
* between 1 and 2: the same. This is the state the tests simulate.
* between 2 and 3: the metadata names the new replicas, which hold every record (nothing was
  appended between the copy and the switch: the locks were held); the old folders are
  unlisted extra copies. ``verify`` reports them; running the plan again deletes them.
* during 3: a rename is atomic; a leftover ``-delete`` folder is removed the next time a
  writer opens that broker directory.

Concurrent writers: the switch needs every broker's lock, so it never happens while a writer
holds one. A writer must therefore read the replica lists *after* taking its first lock; one
that read them before the switch and got its locks after it would append to a replica that
no longer exists. ``ClusterWriter`` re-reads ``cluster.json`` when it takes its first lock
(engine.cluster.writer), which closes that window.

Reordering the replicas of a partition (same set) copies nothing: it changes the leader only.
``cluster.json`` is written once, so a plan is switched all at once or not at all.

**Verify** reads only (no lock): the metadata against the plan, and every replica folder of
the plan's partitions, which must exist with one log start offset and one log end offset.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

from plog.engine.cluster.data_dir import DataDir
from plog.engine.cluster.metadata import DEFAULT_LOCK_TIMEOUT_S
from plog.engine.cluster.reassignment_plan import PlannedPartition, parse_reassignment_json, validate_plan
from plog.engine.cluster.reassignment_plan import broker_ids_text as _ids
from plog.engine.cluster.writer import ClusterWriter
from plog.engine.errors import (
    BrokerNotAvailableError,
    EngineError,
    InvalidReplicaAssignmentError,
    LockTimeoutError,
    LogDirError,
)
from plog.engine.storage.checkpoints import fsync_dir
from plog.engine.storage.file_names import TopicPartition, future_dir_name, parse_partition_dir_name, partition_dir_name

#: ``progress(bytes_copied, bytes_to_copy)`` after each copied file.
Progress = Callable[[int, int], None]


# -- execute -------------------------------------------------------------------------------------


@dataclass
class PartitionMove:
    """What execute did to one partition."""

    tp: TopicPartition
    previous: list[int]
    replicas: list[int]
    #: the replica the copies were made from (None: nothing was copied)
    source: int | None = None
    copied_to: list[int] = field(default_factory=list)
    #: brokers whose folder of the partition was deleted (old replicas and leftovers)
    removed_from: list[int] = field(default_factory=list)
    #: new replicas created empty because no replica folder existed anywhere
    created_empty: list[int] = field(default_factory=list)
    log_start_offset: int | None = None
    log_end_offset: int | None = None
    files_copied: int = 0
    bytes_copied: int = 0

    @property
    def action(self) -> str:
        """``move`` (replicas copied or removed), ``leader`` (same set, new order: leadership
        only) or ``none`` (already so)."""
        if self.copied_to or self.removed_from or self.created_empty or set(self.previous) != set(self.replicas):
            return "move"
        return "leader" if self.previous != self.replicas else "none"


@dataclass
class ExecuteReport:
    """``--execute``: the assignment before (Kafka prints it for rollback) and each move."""

    previous: dict[TopicPartition, list[int]]
    moves: list[PartitionMove]

    @property
    def bytes_copied(self) -> int:
        return sum(m.bytes_copied for m in self.moves)


def execute_reassignment(dd: DataDir, plan: Sequence[PlannedPartition], *,
                         lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
                         progress: Progress | None = None) -> ExecuteReport:
    """Apply ``plan``: copy, switch the metadata, delete (see the module docstring).

    The plan is validated before any lock is taken, and again once every broker's lock is
    held (the metadata may have changed meanwhile). Running the same plan twice is safe: the
    second run finds the copies in place and only finishes what a crash left undone."""
    dd.reload()
    validate_plan(dd, plan)
    with _lock_every_broker(dd, lock_timeout_s) as w:
        dd.reload()
        targets = validate_plan(dd, plan)
        previous = {tp: dd.replicas(tp) for tp in targets}

        moves = [_plan_partition(dd, w, tp, previous[tp], target) for tp, target in targets.items()]
        for move in moves:
            if move.copied_to:
                # A closed log's files are what a cleanly shut down copy must hold: indexes
                # trimmed to their entries, a producer snapshot at the log end, all fsynced.
                w.manager(move.source).get_log(move.tp).close()
        total = sum(_folder_size(dd.partition_path(m.tp, m.source)) * len(m.copied_to) for m in moves if m.copied_to)
        done = [0]
        for move in moves:
            _copy_replicas(dd, w, move, progress, done, total)

        changed = {tp: target for tp, target in targets.items() if previous[tp] != target}
        if changed:
            _switch_assignment(dd, changed, previous)

        for move in moves:
            for broker in move.removed_from:
                _delete_replica(w, move.tp, broker)
            for broker in dd.broker_ids:
                _remove_unfinished_copies(dd.broker_log_dir(broker), move.tp)
    return ExecuteReport(previous, moves)


def _lock_every_broker(dd: DataDir, timeout_s: float) -> ClusterWriter:
    """A writer holding the ``.lock`` of every broker directory: nothing is appended between
    the copy and the switch, and no writer creates a replica folder this run does not know.

    All or nothing, with back-off: writers take their locks one by one in replica order, so
    waiting for one lock while holding others could deadlock with them. Instead every lock
    is tried without waiting and, if one is busy, all are given back and the attempt starts
    over, until ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    delay = 0.002
    while True:
        w = dd.writer(0)
        try:
            for broker in sorted(dd.broker_ids):
                w.manager(broker)
            return w
        except LockTimeoutError:
            w.close()
            if time.monotonic() >= deadline:
                raise LockTimeoutError(
                    f"timed out after {timeout_s:g}s waiting for the locks of every broker directory of "
                    f"{dd.path} (other plog processes, or a Kafka broker, are writing)") from None
        except BaseException:
            w.close()
            raise
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


def _holders(dd: DataDir, tp: TopicPartition) -> list[int]:
    """The brokers with a folder of ``tp`` (current name), in id order."""
    return [b for b in dd.broker_ids if (dd.broker_log_dir(b) / partition_dir_name(tp)).is_dir()]


def _plan_partition(dd: DataDir, w: ClusterWriter, tp: TopicPartition, previous: list[int],
                    target: list[int]) -> PartitionMove:
    """Decide, without changing anything, which replicas need a copy and which go."""
    move = PartitionMove(tp, list(previous), list(target))
    holders = _holders(dd, tp)
    stopped = [b for b in target if b not in previous and not dd.broker(b).running]
    if stopped:
        raise BrokerNotAvailableError(f"cannot move {tp} to broker {stopped[0]}: it is {dd.broker(stopped[0]).state} "
                                      f"(plog brokers start {stopped[0]})")
    # The leader is the authority (consumers read it); a follower only if its folder is gone.
    leader = dd.partition_state(tp).leader
    source = leader if leader in holders else next((b for b in previous if b in holders), None)
    src_log = w.manager(source).get_log(tp) if source is not None else None
    for b in target:
        if b == source:
            continue
        if b in previous and b in holders and src_log is not None and _in_sync(w, tp, b, src_log):
            continue  # an existing, identical replica stays as it is
        if src_log is None:
            move.created_empty.append(b)
        else:
            move.copied_to.append(b)
    if move.copied_to:
        move.source = source
    if src_log is not None:
        move.log_start_offset, move.log_end_offset = src_log.log_start_offset, src_log.log_end_offset
    move.removed_from = [b for b in holders if b not in target]
    return move


def _in_sync(w: ClusterWriter, tp: TopicPartition, broker: int, src_log) -> bool:
    log = w.manager(broker).get_log(tp)
    return (log is not None and log.log_end_offset == src_log.log_end_offset
            and log.log_start_offset == src_log.log_start_offset)


def _copy_replicas(dd: DataDir, w: ClusterWriter, move: PartitionMove, progress: Progress | None,
                   done: list[int], total: int) -> None:
    """Step 1 for one partition: give every replica in ``copied_to`` a copy of the source
    (whose log is closed by now)."""
    tp = move.tp
    topic_id = uuid.UUID(dd.topic(tp.topic).topic_id)
    for broker in move.created_empty:
        w.replica_log(tp, broker)
    if not move.copied_to:
        return
    src_dir = dd.partition_path(tp, move.source)
    for broker in move.copied_to:
        lm = w.manager(broker)
        if lm.get_log(tp) is not None:
            # A replica left by an interrupted run, or one that fell behind: never trusted.
            lm.delete_log(tp)
        log_dir = dd.broker_log_dir(broker)
        files, size = _copy_partition(src_dir, log_dir, tp, progress, done, total)
        move.files_copied += files
        move.bytes_copied += size
        log = lm.get_or_create_log(tp, topic_id=topic_id)
        if log.log_start_offset < move.log_start_offset:
            # The start above the first segment lives in the broker's log-start-offset
            # checkpoint, not in the folder; carry it over so deleted records stay deleted.
            log.delete_records_before(move.log_start_offset)
        log.flush()  # the recovery point moves to the log end: the copy is fsynced
        if (log.log_start_offset, log.log_end_offset) != (move.log_start_offset, move.log_end_offset):
            raise LogDirError(
                f"the copy of {tp} on broker {broker} has offsets {log.log_start_offset}..{log.log_end_offset}, "
                f"the source on broker {move.source} {move.log_start_offset}..{move.log_end_offset}; "
                "nothing was switched")


def _copy_partition(src_dir: Path, log_dir: Path, tp: TopicPartition, progress: Progress | None,
                    done: list[int], total: int) -> tuple[int, int]:
    """Copy every file of ``src_dir`` into ``log_dir/<tp>``, byte for byte, through a
    ``-future`` folder so that a half-made copy is never loaded as a replica. Returns
    (files, bytes)."""
    _remove_unfinished_copies(log_dir, tp)
    final = log_dir / partition_dir_name(tp)
    if final.exists():
        raise LogDirError(f"{final} exists; it should have been deleted before the copy")
    staging = log_dir / future_dir_name(tp)
    staging.mkdir()
    files = size = 0
    for entry in sorted(os.scandir(src_dir), key=lambda e: e.name):
        if not entry.is_file(follow_symlinks=False):
            continue
        dst = staging / entry.name
        # copy2 keeps the mtime: Kafka's retention and cleaner fall back to it.
        shutil.copy2(entry.path, dst)
        expected = os.stat(entry.path).st_size
        got = _fsync_file(dst)
        if got != expected:
            raise LogDirError(f"copied {got} of {expected} bytes of {entry.path} to {dst}")
        files += 1
        size += got
        done[0] += got
        if progress is not None:
            progress(done[0], total)
    fsync_dir(staging)
    os.rename(staging, final)
    fsync_dir(log_dir)
    return files, size


def _unfinished_copies(log_dir: Path, tp: TopicPartition) -> list[Path]:
    """The ``<tp>.<uuid>-future`` folders in ``log_dir``: copies a run did not finish."""
    out = []
    try:
        entries = list(os.scandir(log_dir))
    except FileNotFoundError:
        return out
    for entry in entries:
        if entry.is_dir() and entry.name.endswith("-future"):
            try:
                found, kind = parse_partition_dir_name(entry.name)
            except EngineError:
                continue
            if found == tp and kind == "future":
                out.append(Path(entry.path))
    return out


def _remove_unfinished_copies(log_dir: Path, tp: TopicPartition) -> None:
    for path in _unfinished_copies(log_dir, tp):
        shutil.rmtree(path)


def _switch_assignment(dd: DataDir, changed: Mapping[TopicPartition, list[int]],
                       previous: Mapping[TopicPartition, list[int]]) -> None:
    """Step 2: one atomic rewrite of ``cluster.json``, refused if any partition's replicas
    are no longer what the copies were made for."""
    with dd.update() as meta:
        for tp, target in changed.items():
            t = meta.topics.get(tp.topic)
            now = t.replicas[tp.partition] if t is not None and tp.partition < len(t.replicas) else None
            if now != previous[tp]:
                raise InvalidReplicaAssignmentError(
                    f"the replicas of {tp} changed from {_ids(previous[tp])} to {_ids(now or [])} during the "
                    "reassignment; nothing was switched (run it again)")
            t.replicas[tp.partition] = list(target)
            # Every replica of the target set is a byte copy of the leader now: all in sync.
            # The leader stays if it is kept, else the first new replica leads (a new epoch).
            t.sync_states()
            state = t.states[tp.partition]
            if state.leader not in target:
                state.leader = target[0]
                state.leader_epoch += 1
            state.isr = list(target)


def _delete_replica(w: ClusterWriter, tp: TopicPartition, broker: int) -> None:
    """Step 3: Kafka's delete (``-delete`` rename, then removal) of one replica."""
    w.manager(broker).delete_log(tp)


# -- verify ----------------------------------------------------------------------------------------


COMPLETED = "completed"
IN_PROGRESS = "in_progress"
NOT_ACTIVE = "not_active"


@dataclass
class ReplicaState:
    broker: int
    path: str
    exists: bool
    log_start_offset: int | None = None
    log_end_offset: int | None = None


@dataclass
class PartitionVerification:
    """One partition of ``--verify``: its state and what on disk says so."""

    tp: TopicPartition
    current: list[int]
    target: list[int]
    state: str
    replicas: list[ReplicaState]
    #: brokers outside the target holding a folder of the partition
    leftovers: list[int] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def message(self) -> str:
        """Kafka's line for this partition."""
        if self.state == COMPLETED:
            return f"Reassignment of partition {self.tp} is completed."
        if self.state == IN_PROGRESS:
            return f"Reassignment of partition {self.tp} is still in progress."
        return (f"There is no active reassignment of partition {self.tp}, but replica set is "
                f"{_ids(self.current)} rather than {_ids(self.target)}.")


@dataclass
class VerifyReport:
    partitions: list[PartitionVerification]

    @property
    def complete(self) -> bool:
        return all(p.state == COMPLETED for p in self.partitions)


def verify_reassignment(dd: DataDir, plan: Sequence[PlannedPartition]) -> VerifyReport:
    """``--verify``, read-only: a partition is *completed* when its replica list is the
    plan's, every replica folder exists with the same log start and end offsets, and no other
    broker still holds a folder (or an unfinished ``-future`` copy) of it. *In progress*: the
    list is the plan's but the folders are not as they should be yet, or copies exist but the
    list was not switched (an interrupted execute). Otherwise Kafka's "no active
    reassignment" line."""
    dd.reload()
    out = []
    for entry in sorted(plan, key=lambda e: (e.tp.topic, e.tp.partition)):
        tp, target = entry.tp, list(entry.replicas)
        t = dd.metadata.topics.get(tp.topic)
        current = list(t.replicas[tp.partition]) if t is not None and 0 <= tp.partition < t.partitions else []
        known = set(dd.broker_ids)
        holders = _holders(dd, tp) if current else []
        states = [_replica_state(dd, tp, b) if b in known else ReplicaState(b, "", False) for b in target]
        leftovers = [b for b in holders if b not in target]
        problems = [f"broker {b} holds an unfinished copy ({path.name})"
                    for b in dd.broker_ids for path in _unfinished_copies(dd.broker_log_dir(b), tp)]
        if current == target:
            for s in states:
                if not s.exists:
                    problems.append(f"broker {s.broker} has no replica folder ({s.path or 'unknown broker'})")
            present = [s for s in states if s.exists]
            if len({(s.log_start_offset, s.log_end_offset) for s in present}) > 1:
                problems.append("replicas differ: " + ", ".join(
                    f"broker {s.broker} offsets {s.log_start_offset}..{s.log_end_offset}" for s in present))
            for b in leftovers:
                problems.append(f"broker {b} still holds a folder of the partition (not yet deleted)")
            state = IN_PROGRESS if problems else COMPLETED
        else:
            copies = [b for b in target if b not in current and b in holders]
            if copies or problems:
                state = IN_PROGRESS
            else:
                state = NOT_ACTIVE
            if copies:
                problems.insert(0, f"copied to broker(s) {_ids(copies)} but the replicas are still {_ids(current)} "
                                "(an interrupted execute; run it again)")
        out.append(PartitionVerification(tp, current, target, state, states, leftovers, problems))
    return VerifyReport(out)


def _replica_state(dd: DataDir, tp: TopicPartition, broker: int) -> ReplicaState:
    path = dd.broker_log_dir(broker) / partition_dir_name(tp)
    if not path.is_dir():
        return ReplicaState(broker, str(path), False)
    log = dd.open_reader(tp, broker)
    try:
        return ReplicaState(broker, str(path), True, log.log_start_offset, log.log_end_offset)
    finally:
        log.close()


# -- preferred leaders -----------------------------------------------------------------------------


@dataclass
class PreferredLeaderState:
    """Kafka's preferred leader election for one partition. In a data directory the leader
    *is* the first replica, so ``leader == preferred_leader`` always; what can be wrong is
    that the preferred leader has no replica folder."""

    tp: TopicPartition
    replicas: list[int]
    preferred_leader: int
    leader: int
    folder_exists: bool

    @property
    def ok(self) -> bool:
        return self.leader == self.preferred_leader and self.folder_exists

    @property
    def message(self) -> str:
        if self.ok:
            return "Valid replica already elected"
        if not self.folder_exists:
            return f"Preferred replica {self.preferred_leader} has no replica folder"
        return f"Leader {self.leader} is not the preferred replica {self.preferred_leader}"


def preferred_leaders(dd: DataDir, topics: Sequence[str] | None = None) -> list[PreferredLeaderState]:
    """Every partition of ``topics`` (default: all), read-only."""
    dd.reload()
    names = list(topics) if topics else dd.topics()
    out = []
    for name in names:
        for tp in dd.partitions(name):
            replicas = dd.replicas(tp)
            preferred = replicas[0]
            leader = dd.leader(tp)
            out.append(PreferredLeaderState(tp, replicas, preferred, leader,
                                            dd.partition_path(tp, leader).is_dir()))
    return out


# -- placement report --------------------------------------------------------------------------


@dataclass
class BrokerPlacement:
    """One broker of ``plog assign report``."""

    broker: int
    rack: str | None
    leaders: int
    replicas: int
    #: bytes of the partition folders in the broker's log directory
    size: int
    partitions_on_disk: int
    log_dir: str


def placement(dd: DataDir) -> list[BrokerPlacement]:
    """Current leaders and replicas per broker (``placement.placement_report`` over every
    topic, leaders from the partition states) and the bytes on disk of each broker's
    partition folders."""
    from plog.engine.cluster.placement import placement_report

    dd.reload()
    assignments = {name: dict(enumerate(dd.topic(name).replicas)) for name in dd.topics()}
    counts = placement_report(assignments, dd.broker_ids)
    # Leaders as they are now (after failovers), not the preferred ones.
    current: dict[int, int] = {}
    for name in dd.topics():
        t = dd.topic(name)
        t.sync_states()
        for st in t.states:
            current[st.leader] = current.get(st.leader, 0) + 1
    out = []
    for b in dd.brokers:
        entry = dict(counts.get(b.id, {}))
        entry["leaders"] = current.get(b.id, 0)
        log_dir = dd.broker_log_dir(b.id)
        size = folders = 0
        if log_dir.is_dir():
            for e in os.scandir(log_dir):
                if not e.is_dir():
                    continue
                try:
                    _, kind = parse_partition_dir_name(e.name)
                except EngineError:
                    continue
                if kind == "current":
                    folders += 1
                    size += _folder_size(Path(e.path))
        out.append(BrokerPlacement(b.id, b.rack, int(entry.get("leaders", 0)), int(entry.get("replicas", 0)),
                                   size, folders, str(log_dir)))
    return out


# -- small file helpers ---------------------------------------------------------------------------


def _folder_size(path: Path) -> int:
    try:
        return sum(e.stat(follow_symlinks=False).st_size for e in os.scandir(path) if e.is_file(follow_symlinks=False))
    except FileNotFoundError:
        return 0


def _fsync_file(path: Path) -> int:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


__all__ = [
    "BrokerPlacement",
    "ExecuteReport",
    "PartitionMove",
    "PartitionVerification",
    "PreferredLeaderState",
    "ReplicaState",
    "VerifyReport",
    "execute_reassignment",
    "parse_reassignment_json",
    "placement",
    "preferred_leaders",
    "verify_reassignment",
]
