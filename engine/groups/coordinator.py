"""Consumer groups of a data directory: membership, assignment and committed offsets.

Kafka runs a group coordinator inside a broker. An embedded data directory has no server,
so the coordinator is a file per group that every member process reads and updates under
an exclusive ``flock``: ``<data dir>/groups/<hex of the group id>.json``. Committed offsets
and the group's metadata go where Kafka keeps them, as records in the compacted
``__consumer_offsets`` topic (50 partitions; the group's partition is
``abs(groupId.hashCode()) % 50``) with Kafka's key and value schemas, so
``plog dump --offsets-decoder`` and Kafka's own DumpLogSegments read them, and a Kafka
broker handed the folders would load the offsets.

The membership protocol (one generation at a time):

* A member **joins** with its subscription and strategies; a member whose last heartbeat is
  older than its ``session.timeout.ms`` is **expired**; a member **leaves** on close. Each of
  these starts a new generation: the protocol is the first strategy every member supports,
  in the order of the first member's list, and the assignment is computed at once with that
  assignor over every member's subscription and currently owned partitions.
* A partition that changes owner is **pending** until its previous owner acknowledges the
  generation, which it does at its next heartbeat after committing the revoked partitions'
  offsets. The new owner fetches it only then (or once the previous owner is gone). This is
  the barrier Kafka's JoinGroup gives: two members never read a partition at the same time,
  and the new owner starts from the offsets the old one committed.
* ``cooperative-sticky`` leaves moved partitions unassigned for one generation (Kafka's
  two-round cooperative rebalance); when every member has acknowledged it, the next
  generation assigns them.

Offsets committed by members of an old generation are refused (``IllegalGeneration``), as
the coordinator does; commits without a member id (a standalone consumer, ``groups
reset-offsets``) are accepted only while the group has no members.

Lock order, to stay deadlock-free: group file lock, then a broker ``.lock`` (ClusterWriter);
never the reverse.
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from plog.formats.offsets_topic import (
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
    partition_for_group,
    encode_consumer_assignment,
    encode_consumer_subscription,
)
from plog.formats.record_batch import encode_batch

from plog.engine.storage.checkpoints import atomic_write
from plog.engine.cluster.data_dir import DataDir
from plog.engine.cluster.metadata import exclusive_flock
from plog.engine.errors import (
    GroupError,
    GroupNotEmptyError,
    IllegalGenerationError,
    UnknownMemberIdError,
    bad_document_reason,
)
from plog.engine.storage.file_names import GROUP_METADATA_TOPIC_NAME, TopicPartition

GROUPS_DIR = "groups"
OFFSETS_TOPIC_PARTITIONS = 50
OFFSETS_TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": "104857600", "compression.type": "producer"}
DEFAULT_SESSION_TIMEOUT_MS = 45000
DEFAULT_REBALANCE_TIMEOUT_MS = 300000
PROTOCOL_TYPE = "consumer"


@dataclass
class Member:
    member_id: str
    client_id: str
    client_host: str
    topics: list[str]
    strategies: list[str]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    last_seen_ms: int
    group_instance_id: str | None = None
    assignment: list[TopicPartition] = field(default_factory=list)
    acked_generation: int = -1

    def to_json(self) -> dict:
        return {"member_id": self.member_id, "client_id": self.client_id, "client_host": self.client_host,
                "topics": self.topics, "strategies": self.strategies,
                "session_timeout_ms": self.session_timeout_ms, "rebalance_timeout_ms": self.rebalance_timeout_ms,
                "last_seen_ms": self.last_seen_ms, "group_instance_id": self.group_instance_id,
                "assignment": [[tp.topic, tp.partition] for tp in self.assignment],
                "acked_generation": self.acked_generation}

    @classmethod
    def from_json(cls, d: dict) -> "Member":
        return cls(d["member_id"], d["client_id"], d["client_host"], list(d["topics"]), list(d["strategies"]),
                   int(d["session_timeout_ms"]), int(d["rebalance_timeout_ms"]), int(d["last_seen_ms"]),
                   d.get("group_instance_id"), [TopicPartition(t, int(p)) for t, p in d.get("assignment", [])],
                   int(d.get("acked_generation", -1)))


@dataclass
class GroupMembership:
    """The live state of one group (the coordinator's in-memory state, kept in a file)."""

    group_id: str
    generation: int = 0
    protocol: str | None = None
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    #: partition -> member that owned it in the previous generation and has not released it
    pending: dict[TopicPartition, str] = field(default_factory=dict)
    state_timestamp_ms: int = -1
    #: the generation whose GroupMetadata record is in __consumer_offsets
    written_generation: int = -1

    @property
    def state(self) -> str:
        if not self.members:
            return "Empty"
        if self.pending or any(m.acked_generation < self.generation for m in self.members.values()):
            return "PreparingRebalance"
        return "Stable"

    def to_json(self) -> dict:
        return {"group_id": self.group_id, "generation": self.generation, "protocol": self.protocol,
                "leader": self.leader, "members": [m.to_json() for m in self.members.values()],
                "pending": [[tp.topic, tp.partition, mid] for tp, mid in sorted(self.pending.items())],
                "state_timestamp_ms": self.state_timestamp_ms, "written_generation": self.written_generation}

    @classmethod
    def from_json(cls, d: dict) -> "GroupMembership":
        g = cls(d["group_id"], int(d["generation"]), d.get("protocol"), d.get("leader"))
        g.members = {m["member_id"]: Member.from_json(m) for m in d.get("members", [])}
        g.pending = {TopicPartition(t, int(p)): mid for t, p, mid in d.get("pending", [])}
        g.state_timestamp_ms = int(d.get("state_timestamp_ms", -1))
        g.written_generation = int(d.get("written_generation", -1))
        return g


@dataclass(frozen=True)
class MemberView:
    """What a member learns from a heartbeat."""

    generation: int
    assignment: tuple[TopicPartition, ...]
    #: assigned partitions it may fetch now (not pending on a previous owner)
    fetchable: frozenset[TopicPartition]
    protocol: str | None


def _now_ms() -> int:
    return int(time.time() * 1000)


class GroupCoordinator:
    """Group operations on one data directory; see the module docstring."""

    def __init__(self, data_dir: DataDir, *, lock_timeout_s: float = 30.0, time_source=None):
        self.data_dir = data_dir
        self.lock_timeout_s = lock_timeout_s
        self._now = time_source or _now_ms

    # -- files ----------------------------------------------------------------------------------

    def _dir(self) -> Path:
        return self.data_dir.path / GROUPS_DIR

    def _path(self, group_id: str) -> Path:
        return self._dir() / (group_id.encode("utf-8", "surrogatepass").hex() + ".json")

    def _locked(self, group_id: str):
        self.data_dir._check_writable()
        self._dir().mkdir(exist_ok=True)
        return exclusive_flock(self._dir() / (group_id.encode("utf-8", "surrogatepass").hex() + ".lock"),
                               self.lock_timeout_s)

    def _load(self, group_id: str) -> GroupMembership:
        path = self._path(group_id)
        if not path.exists():
            return GroupMembership(group_id)
        try:
            return GroupMembership.from_json(json.loads(path.read_text()))
        except (ValueError, KeyError, TypeError, AttributeError, IndexError) as e:
            raise GroupError(f"{path} is not a plog group file: {bad_document_reason(e)}") from None

    def _save(self, group: GroupMembership) -> None:
        atomic_write(self._path(group.group_id), json.dumps(group.to_json(), indent=1) + "\n")

    def membership(self, group_id: str) -> GroupMembership:
        """The group's live state as the file has it now (read-only; expired members included)."""
        if self.data_dir.kafka_log_dir:
            return GroupMembership(group_id)
        return self._load(group_id)

    def list_live_groups(self) -> list[str]:
        if self.data_dir.kafka_log_dir or not self._dir().is_dir():
            return []
        out = []
        for entry in os.listdir(self._dir()):
            if entry.endswith(".json"):
                try:
                    out.append(bytes.fromhex(entry[:-5]).decode("utf-8", "surrogatepass"))
                except ValueError:
                    continue
        return sorted(out)

    # -- membership -----------------------------------------------------------------------------

    def join(self, group_id: str, *, topics: list[str], strategies: list[str], client_id: str = "plog",
             session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
             rebalance_timeout_ms: int = DEFAULT_REBALANCE_TIMEOUT_MS,
             group_instance_id: str | None = None) -> str:
        """Add a member (a new generation); returns its member id (``<client id>-<uuid>``)."""
        from plog.engine.groups.assignors import get_assignor

        for s in strategies:
            get_assignor(s)  # unknown names fail before the group changes
        if not strategies:
            raise GroupError("a consumer needs at least one partition.assignment.strategy")
        member_id = f"{client_id}-{uuid.uuid4()}"
        now = self._now()
        with self._locked(group_id):
            group = self._load(group_id)
            self._expire(group, now)
            if group.members:
                common = set.intersection(*(set(m.strategies) for m in group.members.values()))
                if not common & set(strategies):
                    raise GroupError(
                        f"InconsistentGroupProtocol: group {group_id} uses {sorted(common) or 'no common strategy'}, "
                        f"this member offers {strategies}")
            if group_instance_id is not None:
                for m in list(group.members.values()):
                    if m.group_instance_id == group_instance_id:
                        # A static member rejoining replaces its old incarnation (KIP-345).
                        del group.members[m.member_id]
            group.members[member_id] = Member(member_id, client_id, _client_host(), list(topics), list(strategies),
                                              session_timeout_ms, rebalance_timeout_ms, now, group_instance_id)
            self._rebalance(group, now)
            self._save(group)
        return member_id

    def heartbeat(self, group_id: str, member_id: str, *, acked_generation: int | None = None) -> MemberView:
        """Keep a member alive; acknowledge a generation (its revoked partitions were
        committed and released); learn the current generation and assignment."""
        now = self._now()
        with self._locked(group_id):
            group = self._load(group_id)
            self._expire(group, now, keep=member_id)
            member = group.members.get(member_id)
            if member is None:
                self._save(group)
                raise UnknownMemberIdError(f"member {member_id} is not in group {group_id} (its session expired?)")
            member.last_seen_ms = now
            if acked_generation is not None and acked_generation == group.generation:
                member.acked_generation = acked_generation
                for tp, owner in list(group.pending.items()):
                    if owner == member_id and tp not in member.assignment:
                        del group.pending[tp]
                self._maybe_follow_up(group, now)
            view = self._view(group, member_id)
            self._save(group)
            return view

    def leave(self, group_id: str, member_id: str) -> None:
        """Remove a member (LeaveGroup): its partitions move at once."""
        now = self._now()
        with self._locked(group_id):
            group = self._load(group_id)
            if group.members.pop(member_id, None) is not None:
                for tp, owner in list(group.pending.items()):
                    if owner == member_id:
                        del group.pending[tp]
                self._expire(group, now)
                self._rebalance(group, now)
                if not group.members and group.written_generation >= 0:
                    # As Kafka's coordinator: the group's new, Empty state is stored too, so a
                    # broker (or plog groups describe on a broker dir) does not see a ghost member.
                    self._append(group_id, [(0, now, encode_group_metadata_key(group_id),
                                             self._group_metadata_value(group))])
                    group.written_generation = group.generation
            self._save(group)

    def _view(self, group: GroupMembership, member_id: str) -> MemberView:
        member = group.members[member_id]
        live = set(group.members)
        fetchable = frozenset(tp for tp in member.assignment
                              if group.pending.get(tp) in (None, member_id) or group.pending.get(tp) not in live)
        return MemberView(group.generation, tuple(member.assignment), fetchable, group.protocol)

    def _expire(self, group: GroupMembership, now: int, keep: str | None = None) -> None:
        dead = [mid for mid, m in group.members.items()
                if mid != keep and now - m.last_seen_ms > m.session_timeout_ms]
        if dead:
            for mid in dead:
                del group.members[mid]
            for tp, owner in list(group.pending.items()):
                if owner in dead:
                    del group.pending[tp]
            self._rebalance(group, now)

    def _rebalance(self, group: GroupMembership, now: int) -> None:
        """A new generation: protocol, leader and assignment from the current members."""
        from plog.engine.groups.assignors import get_assignor
        from plog.engine.groups.partition_assignor import Subscription

        group.generation += 1
        group.state_timestamp_ms = now
        if not group.members:
            group.protocol, group.leader = None, None
            group.pending.clear()
            return
        members = list(group.members.values())
        common = set.intersection(*(set(m.strategies) for m in members))
        group.protocol = next(s for s in members[0].strategies if s in common)
        if group.leader not in group.members:
            group.leader = members[0].member_id
        assignor = get_assignor(group.protocol)
        topics = sorted({t for m in members for t in m.topics})
        partitions_per_topic = {}
        for t in topics:
            if self.data_dir.has_topic(t):
                partitions_per_topic[t] = self.data_dir.topic(t).partitions
        previous = {tp: m.member_id for m in members for tp in m.assignment}
        # What each member's consumer would send in JoinGroup: owned partitions and, for the
        # sticky assignors, the user data their previous assignment produced.
        subs = {m.member_id: Subscription(tuple(t for t in m.topics if t in partitions_per_topic),
                                          user_data=assignor.subscription_user_data(m.assignment, group.generation - 1)
                                          if m.assignment else None,
                                          owned_partitions=tuple(m.assignment), generation_id=group.generation - 1,
                                          group_instance_id=m.group_instance_id)
                for m in members}
        result = assignor.assign(partitions_per_topic, subs)
        for m in members:
            m.assignment = sorted(TopicPartition(*tp) for tp in result.get(m.member_id, []))
            m.acked_generation = min(m.acked_generation, group.generation - 1)
            for tp in m.assignment:
                prev = previous.get(tp)
                if prev is not None and prev != m.member_id:
                    group.pending[tp] = prev
        # A previous owner that kept a partition no longer blocks it.
        for tp, owner in list(group.pending.items()):
            if owner not in group.members or tp in group.members[owner].assignment:
                del group.pending[tp]

    def _maybe_follow_up(self, group: GroupMembership, now: int) -> None:
        """Cooperative protocols revoke first: when every member acknowledged and
        subscribed partitions are left unassigned, assign them in a new generation."""
        if any(m.acked_generation < group.generation for m in group.members.values()):
            return
        assigned = {tp for m in group.members.values() for tp in m.assignment}
        for t in {t for m in group.members.values() for t in m.topics}:
            if self.data_dir.has_topic(t):
                for p in range(self.data_dir.topic(t).partitions):
                    if TopicPartition(t, p) not in assigned:
                        self._rebalance(group, now)
                        return

    # -- offsets ----------------------------------------------------------------------------------

    def committed(self, group_id: str, partitions=None) -> dict[TopicPartition, object]:
        """Committed offsets of ``group_id`` (all, or the given partitions) as stored in
        ``__consumer_offsets``: ``CommittedOffset`` values from ``engine.group_offsets``."""
        from plog.engine.groups.committed_offsets import read_group_state

        dd = self.data_dir
        # The group's partition depends on offsets.topic.num.partitions: plog's topic says it;
        # a broker's log directory shows its folders (a broker may not use the default 50).
        n = dd.topic(GROUP_METADATA_TOPIC_NAME).partitions if dd.has_topic(GROUP_METADATA_TOPIC_NAME) \
            else OFFSETS_TOPIC_PARTITIONS
        state = read_group_state(dd.log_dirs(), group_id, num_partitions=n).get(group_id)
        if state is None and dd.kafka_log_dir:
            state = read_group_state(dd.log_dirs()).get(group_id)
        offsets = dict(state.offsets) if state is not None else {}
        if partitions is not None:
            wanted = {TopicPartition(*tp) for tp in partitions}
            offsets = {tp: o for tp, o in offsets.items() if tp in wanted}
        return offsets

    def commit(self, group_id: str, offsets: dict, *, member_id: str | None = None, generation: int = -1,
               metadata: str = "") -> None:
        """Write ``{tp: offset}`` (or ``{tp: (offset, leader_epoch)}``) as OffsetCommit records.

        A member commits with its id and generation; a commit without a member (a
        standalone consumer, an offsets reset) is refused while the group has members."""
        if not offsets:
            return
        now = self._now()
        with self._locked(group_id):
            group = self._load(group_id)
            self._expire(group, now, keep=member_id)
            if member_id is None:
                if group.members:
                    raise GroupNotEmptyError(
                        f"Group {group_id} has {len(group.members)} active member(s): offsets can only be "
                        "committed by its members (stop them, or wait for their sessions to expire)")
            else:
                member = group.members.get(member_id)
                if member is None:
                    raise UnknownMemberIdError(f"member {member_id} is not in group {group_id}")
                if generation != group.generation and generation != group.generation - 1:
                    raise IllegalGenerationError(
                        f"commit from generation {generation} of group {group_id}, which is at {group.generation}")
                member.last_seen_ms = now
            records = []
            ts = now
            for i, (tp, value) in enumerate(sorted(offsets.items(), key=lambda kv: (kv[0][0], kv[0][1]))):
                tp = TopicPartition(*tp)
                off, epoch = (value if isinstance(value, tuple) else (value, -1))
                key = encode_offset_commit_key(group_id, tp.topic, tp.partition)
                val = encode_offset_commit_value(off, metadata=metadata, commit_timestamp=ts, leader_epoch=epoch)
                records.append((i, ts, key, val))
            if group.members and group.written_generation != group.generation:
                records.append((len(records), ts, encode_group_metadata_key(group_id),
                                self._group_metadata_value(group)))
                group.written_generation = group.generation
            self._append(group_id, records)
            self._save(group)

    def _group_metadata_value(self, group: GroupMembership) -> bytes:
        members = []
        for m in group.members.values():
            members.append({
                "memberId": m.member_id, "groupInstanceId": m.group_instance_id, "clientId": m.client_id,
                "clientHost": m.client_host, "rebalanceTimeout": m.rebalance_timeout_ms,
                "sessionTimeout": m.session_timeout_ms,
                # What a Kafka 3.x+ consumer sends: subscription and assignment at version 3.
                "subscription": encode_consumer_subscription(
                    {"topics": m.topics, "userData": None, "ownedPartitions": _group_partitions(m.assignment),
                     "generationId": group.generation, "rackId": None}, version=3),
                "assignment": encode_consumer_assignment(
                    {"assignedPartitions": _group_partitions(m.assignment), "userData": None}, version=3),
            })
        return encode_group_metadata_value(protocol_type=PROTOCOL_TYPE, generation=group.generation,
                                           protocol=group.protocol, leader=group.leader,
                                           current_state_timestamp=group.state_timestamp_ms, members=members)

    def _append(self, group_id: str, records: list[tuple]) -> None:
        dd = self.data_dir
        if not dd.has_topic(GROUP_METADATA_TOPIC_NAME):
            dd.reload()
        if not dd.has_topic(GROUP_METADATA_TOPIC_NAME):
            rf = min(3, len(dd.broker_ids))
            dd.create_topic(GROUP_METADATA_TOPIC_NAME, OFFSETS_TOPIC_PARTITIONS, rf, configs=OFFSETS_TOPIC_CONFIGS,
                            if_not_exists=True, internal_ok=True)
            dd.reload()
        n = dd.topic(GROUP_METADATA_TOPIC_NAME).partitions
        tp = TopicPartition(GROUP_METADATA_TOPIC_NAME, partition_for_group(group_id, n))
        raw = encode_batch(records)
        with dd.writer(self.lock_timeout_s) as w:
            w.append(tp, raw, flush=False)

    def delete_offsets_records(self, group_id: str, partitions: list[TopicPartition], *, delete_group: bool) -> None:
        """Tombstones for the group's offsets of ``partitions`` (and its metadata)."""
        now = self._now()
        records = [(i, now, encode_offset_commit_key(group_id, tp.topic, tp.partition), None)
                   for i, tp in enumerate(sorted(partitions))]
        if delete_group:
            records.append((len(records), now, encode_group_metadata_key(group_id), None))
        if records:
            self._append(group_id, records)

    def delete_group(self, group_id: str) -> int:
        """Kafka's DeleteGroups: only an empty group; writes tombstones for every committed
        offset and the group metadata. Returns how many offsets were deleted."""
        with self._locked(group_id):
            group = self._load(group_id)
            self._expire(group, self._now())
            if group.members:
                raise GroupNotEmptyError(f"Deleting group '{group_id}' failed because the group is not empty "
                                         f"({len(group.members)} active member(s)).")
            offsets = self.committed(group_id)
            known = self._path(group_id).exists()
            if not offsets and not known:
                raise GroupError(f"Deleting group '{group_id}' failed because the group does not exist.")
            self.delete_offsets_records(group_id, list(offsets), delete_group=True)
            self._path(group_id).unlink(missing_ok=True)
            return len(offsets)



def _group_partitions(assignment: list[TopicPartition]) -> list[dict]:
    by_topic: dict[str, list[int]] = {}
    for tp in assignment:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return [{"topic": t, "partitions": sorted(ps)} for t, ps in sorted(by_topic.items())]


def _client_host() -> str:
    try:
        return "/" + socket.gethostbyname(socket.gethostname())
    except OSError:
        return "/127.0.0.1"


__all__ = ["GroupCoordinator", "GroupMembership", "IllegalGenerationError", "Member", "MemberView",
           "UnknownMemberIdError"]
