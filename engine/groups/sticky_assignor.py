"""Kafka's sticky assignors: ``AbstractStickyAssignor`` and its two strategies,
``StickyAssignor`` (``sticky``, eager) and ``CooperativeStickyAssignor``
(``cooperative-sticky``), with Kafka's exact results (kafka-format.md §17.3).

When every member subscribes to the same topics the constrained algorithm runs
(``ConstrainedAssignmentBuilder``), otherwise the general one (``GeneralAssignmentBuilder``).
Their results depend on the leader's ``HashMap`` iteration order in a few places (which
members keep their surplus partitions, which equal-generation claim wins, which of several
moved partitions moves back): members are met in ``HashMap<String, Subscription>`` order,
moved partitions kept in ``HashSet<TopicPartition>`` order (formats.java).

Previous ownership: ``sticky`` reads it from the user data only (formats.consumer_protocol),
``cooperative-sticky`` from ``owned_partitions`` with the generation of the subscription
(or of its user data).

Each call behaves as a fresh assignor instance. (Kafka's sticky assignors keep the highest
generation seen in an instance field that never goes down; between real rebalances
generations only grow, so that memory does not change a result.)
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable, Mapping

from plog.formats.consumer_protocol import (
    DEFAULT_GENERATION,
    decode_cooperative_user_data,
    encode_cooperative_user_data,
)
from plog.formats.consumer_protocol import decode_sticky_user_data as _decode_sticky_user_data
from plog.formats.consumer_protocol import encode_sticky_user_data

# Java's orders (formats.java): the names the sticky algorithm has always used for them.
from plog.formats.java import HashOrder as _JavaHashOrder
from plog.formats.java import compare_key as _java_key
from plog.formats.java import hash_map_order as _java_hashmap_order
from plog.formats.java import string_hash_code as _java_string_hash
from plog.formats.java import topic_partition_hash_code as _topic_partition_hash

from plog.engine.errors import AssignmentFailedError
from plog.engine.groups.partition_assignor import PartitionAssignor, RebalanceProtocol, Subscription
from plog.engine.storage.file_names import TopicPartition


def decode_sticky_user_data(data: bytes) -> tuple[list[TopicPartition], int | None]:
    """formats.consumer_protocol.decode_sticky_user_data, the partitions as TopicPartition:
    (previous partitions, generation), ``None`` for a v0 Struct, ``([], -1)`` for bytes that
    parse as neither."""
    partitions, generation = _decode_sticky_user_data(data)
    return [TopicPartition(topic, partition) for topic, partition in partitions], generation


class _MemberData:
    """``AbstractStickyAssignor.MemberData``: a member's previous partitions and generation
    (``None``: no generation known)."""

    __slots__ = ("partitions", "generation")

    def __init__(self, partitions: list[TopicPartition], generation: int | None):
        self.partitions = partitions
        self.generation = generation


class _AbstractStickyAssignor(PartitionAssignor):
    """``AbstractStickyAssignor``: the constrained algorithm when all members subscribe to the
    same topics, the general one otherwise. See kafka-format.md §17.3."""

    def _member_data(self, subscription: Subscription) -> _MemberData:
        raise NotImplementedError

    def _assign(self, counts, subscriptions):
        assignment, _transferring = _sticky_assign(counts, subscriptions, self._member_data)
        return assignment


class StickyAssignor(_AbstractStickyAssignor):
    """``sticky`` (eager). Previous ownership comes only from the user data (Kafka ignores
    ``owned_partitions`` here: an eager member revoked them all before joining), which is the
    v1 Struct ``{previous_assignment: [{topic, partitions}], generation}``; v0 (no generation)
    is read too, and unreadable data counts as "nothing owned, generation -1"."""

    name = "sticky"

    def subscription_user_data(self, assigned, generation):
        if assigned is None:  # never assigned yet: Kafka sends no user data
            return None
        return encode_sticky_user_data(assigned, generation)

    def _member_data(self, subscription):
        data = subscription.user_data
        if not data:
            return _MemberData([], None)
        partitions, generation = decode_sticky_user_data(data)
        return _MemberData(partitions, generation)


class CooperativeStickyAssignor(_AbstractStickyAssignor):
    """``cooperative-sticky``. Previous ownership is ``owned_partitions`` with
    ``generation_id`` (or, for members that send no generation, the int32 generation in the
    user data). After the sticky assignment, every partition that would change owner this
    round is removed from the result (``adjustAssignment``): its old owner revokes it, and
    the follow-up rebalance gives it to the new one."""

    name = "cooperative-sticky"
    supported_protocols = (RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER)

    def subscription_user_data(self, assigned, generation):
        return encode_cooperative_user_data(generation)

    def _member_data(self, subscription):
        owned = list(subscription.owned_partitions)
        if subscription.generation_id >= 0:
            return _MemberData(owned, subscription.generation_id)
        data = subscription.user_data
        if data is None:
            return _MemberData(owned, None)
        return _MemberData(owned, decode_cooperative_user_data(data))

    def _assign(self, counts, subscriptions):
        assignment, transferring = _sticky_assign(counts, subscriptions, self._member_data)
        if transferring is None:  # general algorithm: compute from the owned partitions
            transferring = _partitions_transferring_ownership(subscriptions, assignment)
        for tp, member in transferring.items():
            _remove_first(assignment[member], tp)
        return assignment


def _partitions_transferring_ownership(
    subscriptions: Mapping[str, Subscription], assignment: Mapping[str, list[TopicPartition]]
) -> dict[TopicPartition, str]:
    """``CooperativeStickyAssignor.computePartitionsTransferringOwnership``: partitions newly
    given to a member that some member owned and loses in this assignment."""
    added: dict[TopicPartition, str] = {}
    revoked: set[TopicPartition] = set()
    for member, assigned in assignment.items():
        owned = subscriptions[member].owned_partitions
        owned_set = set(owned)
        assigned_set = set(assigned)
        for tp in assigned:
            if tp not in owned_set:
                added[tp] = member
        for tp in owned:
            if tp not in assigned_set:
                revoked.add(tp)
    return {tp: member for tp, member in added.items() if tp in revoked}


# -- AbstractStickyAssignor --------------------------------------------------------------------


def _remove_first(items: list, value) -> None:
    """``List.remove(Object)``: drop the first occurrence, if any."""
    try:
        items.remove(value)
    except ValueError:
        pass


def _sticky_assign(
    counts: dict[str, int],
    subscriptions: dict[str, Subscription],
    member_data: Callable[[Subscription], _MemberData],
) -> tuple[dict[str, list[TopicPartition]], dict[TopicPartition, str] | None]:
    """``AbstractStickyAssignor.assignPartitions`` without racks. Returns the assignment and,
    for the constrained algorithm, the partitions transferring ownership (``None`` after the
    general algorithm, as in Kafka)."""
    # AbstractStickyAssignor iterates the leader's HashMap<String, Subscription>.
    members = _java_hashmap_order(subscriptions, _java_string_hash)
    if not members:
        return {}, {}
    owned: dict[str, list[TopicPartition]] = {}
    multiple_owners: set[TopicPartition] = set()
    all_equal, max_generation = _all_subscriptions_equal(
        counts, subscriptions, members, member_data, owned, multiple_owners
    )
    if all_equal:
        builder = _ConstrainedAssignment(counts, members, owned, multiple_owners)
        return builder.build(), builder.transferring
    general = _GeneralAssignment(counts, subscriptions, members, owned, member_data, max_generation)
    return general.build(), None


def _all_subscriptions_equal(counts, subscriptions, members, member_data, owned, multiple_owners) -> tuple[bool, int]:
    """``allSubscriptionsEqual``: whether every member subscribes to the same topics (compared
    as Kafka does: the first non-empty list sets the reference), filling each member's still
    valid owned partitions. Two claims on one partition: the higher generation keeps it; the
    same generation invalidates both (the partition goes to ``multiple_owners``). Also
    returns the highest generation seen."""
    all_equal = True
    reference: set[str] = set()
    max_generation = DEFAULT_GENERATION
    previous_owner: dict[TopicPartition, str] = {}
    for member in members:
        subscription = subscriptions[member]
        if not reference:
            reference = set(subscription.topics)
        elif all_equal and not (
            len(subscription.topics) == len(reference) and reference.issuperset(subscription.topics)
        ):
            all_equal = False
        data = member_data(subscription)
        generation = DEFAULT_GENERATION if data.generation is None else data.generation
        max_generation = max(max_generation, generation)
        mine: list[TopicPartition] = []
        owned[member] = mine
        for tp in data.partitions:
            if tp.topic not in counts:
                continue
            other = previous_owner.get(tp)
            if other is None:
                mine.append(tp)
                previous_owner[tp] = member
                continue
            # Kafka reads the other claimant's generation from its Subscription, not its
            # member data (they differ for `sticky`, whose generation is in the user data).
            other_generation = max(subscriptions[other].generation_id, DEFAULT_GENERATION)
            if generation == other_generation:
                multiple_owners.add(tp)
                _remove_first(owned[other], tp)
                previous_owner[tp] = member
            elif generation > other_generation:
                mine.append(tp)
                _remove_first(owned[other], tp)
                previous_owner[tp] = member
    return all_equal, max_generation


class _ConstrainedAssignment:
    """``ConstrainedAssignmentBuilder`` (every member subscribes to the same topics).

    With P partitions and C members: ``min_quota = P // C``, ``max_quota = ceil(P / C)``, and
    exactly ``P % C`` members end with ``max_quota``. Each member keeps its owned partitions
    sorted by (partition, topic) up to its quota (members are visited in ``HashMap`` order,
    so which of several over-full members keep ``max_quota`` follows that order); the rest
    are revoked. The unassigned partitions, by (topic, partition), are then dealt round-robin
    to members under ``min_quota`` (sorted by id), then one each to members at ``min_quota``.
    """

    def __init__(self, counts, members, owned, multiple_owners):
        self.counts = counts
        self.members = members
        self.owned = owned
        self.multiple_owners = multiple_owners
        self.transferring: dict[TopicPartition, str] = {}
        self.revoked: set[TopicPartition] = set()
        self.under_min: list[str] = []
        self.exactly_min: list[str] = []
        total = sum(counts.values())
        n = len(members)
        self.min_quota = total // n
        self.max_quota = -(-total // n)
        self.expected_over_min = total % n
        self.current_over_min = 0
        self.assignment: dict[str, list[TopicPartition]] = {member: [] for member in members}
        self.assigned: list[TopicPartition] = []

    def build(self) -> dict[str, list[TopicPartition]]:
        self._assign_owned_partitions()
        unassigned = self._unassigned_partitions()
        self.under_min.sort(key=_java_key)
        self.exactly_min.sort(key=_java_key)
        self._assign_round_robin(unassigned)
        self._verify_unfilled_members()
        return self.assignment

    def _assign_owned_partitions(self) -> None:
        for member in self.members:
            owned = sorted(self.owned[member], key=lambda tp: (tp.partition, _java_key(tp.topic)))
            for tp in self.multiple_owners:
                if tp in owned:
                    _remove_first(owned, tp)
            mine = self.assignment[member]
            if len(owned) < self.min_quota:
                mine.extend(owned)
                self.assigned.extend(owned)
                self.under_min.append(member)
            elif len(owned) >= self.max_quota and self.current_over_min < self.expected_over_min:
                self.current_over_min += 1
                if self.current_over_min == self.expected_over_min:
                    self.exactly_min.clear()
                mine.extend(owned[: self.max_quota])
                self.assigned.extend(owned[: self.max_quota])
                self.revoked.update(owned[self.max_quota :])
            else:
                mine.extend(owned[: self.min_quota])
                self.assigned.extend(owned[: self.min_quota])
                self.revoked.update(owned[self.min_quota :])
                if self.current_over_min < self.expected_over_min:
                    self.exactly_min.append(member)

    def _unassigned_partitions(self) -> list[TopicPartition]:
        """``getUnassignedPartitions``: all partitions by (topic, partition) minus the kept
        ones, by Kafka's two-pointer walk (which assumes the kept ones are real partitions)."""
        topics = sorted(self.counts, key=_java_key)
        if not self.assigned:
            return [TopicPartition(t, p) for t in topics for p in range(self.counts[t])]
        kept = sorted(self.assigned, key=lambda tp: (_java_key(tp.topic), tp.partition))
        unassigned = []
        index = 0
        add_directly = False
        for topic in topics:
            for partition in range(self.counts[topic]):
                following = kept[index]
                if add_directly or not (following.topic == topic and following.partition == partition):
                    unassigned.append(TopicPartition(topic, partition))
                elif index + 1 < len(kept):
                    index += 1
                else:
                    add_directly = True
        return unassigned

    def _assign_new_partition(self, tp: TopicPartition, member: str) -> int:
        mine = self.assignment[member]
        mine.append(tp)
        # Not owned by this member, so it moves if someone else had to give it up.
        if tp in self.revoked or tp in self.multiple_owners:
            self.transferring[tp] = member
        return len(mine)

    def _assign_round_robin(self, unassigned: list[TopicPartition]) -> None:
        # A Java iterator over `under_min` (a LinkedList), with remove() of the last returned.
        under = self.under_min
        cursor = 0
        last: int | None = None
        for position, tp in enumerate(unassigned):
            if cursor < len(under):
                member = under[cursor]
                last = cursor
                cursor += 1
            elif not under and not self.exactly_min:
                raise AssignmentFailedError("No more unfilled consumers to be assigned.")
            elif not under:
                member = self.exactly_min.pop(0)
            else:
                cursor, last = 1, 0
                member = under[0]
            count = self._assign_new_partition(tp, member)
            if count == self.min_quota:
                if last is None:
                    raise AssignmentFailedError("No more unfilled consumers to be assigned.")
                del under[last]
                cursor, last = last, None
                self.exactly_min.append(member)
            elif count == self.max_quota:
                self.current_over_min += 1

    def _verify_unfilled_members(self) -> None:
        if not self.under_min:
            return
        if self.current_over_min != self.expected_over_min:
            raise AssignmentFailedError(
                "We haven't reached the expected number of members with more than the minQuota partitions, "
                "but no more partitions to be assigned"
            )
        for member in self.under_min:
            if len(self.assignment[member]) != self.min_quota:
                raise AssignmentFailedError(
                    f"Consumer: [{member}] doesn't reach minQuota partitions, and no more partitions to be assigned"
                )


class _PartitionMovements:
    """``AbstractStickyAssignor.PartitionMovements``: which partitions moved from which member
    to which during this rebalance, so that a later move in the opposite direction moves one
    of those back instead of a fresh one. The per-pair partition sets are ``HashSet``s whose
    first element (in Java's order) is the one moved back."""

    def __init__(self):
        self.by_topic: dict[str, dict[tuple[str, str], _JavaHashOrder]] = {}
        self.moves: dict[TopicPartition, tuple[str, str]] = {}

    def _remove_record(self, tp: TopicPartition) -> tuple[str, str]:
        pair = self.moves.pop(tp)
        pairs = self.by_topic[tp.topic]
        pairs[pair].remove(tp)
        if not len(pairs[pair]):
            del pairs[pair]
        if not pairs:
            del self.by_topic[tp.topic]
        return pair

    def _add_record(self, tp: TopicPartition, pair: tuple[str, str]) -> None:
        self.moves[tp] = pair
        pairs = self.by_topic.setdefault(tp.topic, {})
        if pair not in pairs:
            pairs[pair] = _JavaHashOrder(_topic_partition_hash)
        pairs[pair].add(tp)

    def move(self, tp: TopicPartition, old: str, new: str) -> None:
        if tp in self.moves:
            source, _destination = self._remove_record(tp)
            if source != new:  # not simply moving back to where it started
                self._add_record(tp, (source, new))
        else:
            self._add_record(tp, (old, new))

    def partition_to_move(self, tp: TopicPartition, old: str, new: str) -> TopicPartition:
        pairs = self.by_topic.get(tp.topic)
        if pairs is None:
            return tp
        if tp in self.moves:
            old = self.moves[tp][0]
        reverse = pairs.get((new, old))
        if reverse is None:
            return tp
        return reverse.first()


class _SizeOrderedMembers:
    """``TreeSet<String>`` ordered by (assignment size, member id). Kafka always removes a
    member before changing its size and adds it back after, so the order can be kept as a
    sorted list of (size, id key, id) snapshots."""

    def __init__(self, sizes: Callable[[str], int]):
        self._size = sizes
        self._items: list[tuple[int, bytes, str]] = []
        self._keys: dict[str, tuple[int, bytes, str]] = {}

    def add(self, member: str) -> None:
        if member in self._keys:
            return
        item = (self._size(member), _java_key(member), member)
        self._keys[member] = item
        insort(self._items, item)

    def remove(self, member: str) -> None:
        item = self._keys.pop(member, None)
        if item is not None:
            del self._items[bisect_left(self._items, item)]

    def first(self) -> str:
        return self._items[0][2]

    def last(self) -> str:
        return self._items[-1][2]

    def __iter__(self):
        return iter([item[2] for item in self._items])


class _GeneralAssignment:
    """``GeneralAssignmentBuilder`` (members subscribe to different topics).

    1. Keep each member's valid owned partitions (dropping those of topics it left).
    2. Give each unassigned partition (topics by number of potential members, then name) to
       the potential member with the fewest partitions (ties by member id).
    3. While unbalanced, move partitions (back to their previous owner when that one now
       has 2+ fewer, else to the least loaded potential member), reusing recorded moves.
    4. Unless this is the first assignment, keep the moved result only if its balance score
       (sum of pairwise size differences) improved.
    """

    def __init__(self, counts, subscriptions, members, owned, member_data, max_generation):
        self.counts = counts
        self.subscriptions = subscriptions
        self.members = members
        self.member_data = member_data
        self.max_generation = max_generation
        self.total = sum(counts.values())
        self.current = owned  # member -> partitions, mutated in place
        self.topic_members: dict[str, list[str]] = {topic: [] for topic in counts}
        self.member_topics: dict[str, list[str]] = {}
        for member in members:
            topics = []
            self.member_topics[member] = topics
            for topic in subscriptions[member].topics:
                if topic in counts:
                    topics.append(topic)
                    self.topic_members[topic].append(member)
            self.current.setdefault(member, [])
        self.owner: dict[TopicPartition, str] = {}
        for member in members:
            for tp in self.current[member]:
                self.owner[tp] = member
        sorted_topics = sorted(self.topic_members, key=lambda t: (len(self.topic_members[t]), _java_key(t)))
        self.sorted_partitions = [TopicPartition(t, p) for t in sorted_topics for p in range(counts[t])]
        self.ordered = _SizeOrderedMembers(lambda m: len(self.current[m]))
        self.movements = _PartitionMovements()
        self.revocation_required = False

    def build(self) -> dict[str, list[TopicPartition]]:
        previous = self._previous_assignment()
        kept = self._assign_owned_partitions()
        unassigned = self._unassigned_partitions(kept)
        for member in self.members:
            self.ordered.add(member)
        self._balance(previous, unassigned)
        return self.current

    def _previous_assignment(self) -> dict[TopicPartition, tuple[str, int]]:
        """``prepopulateCurrentAssignments``: for each partition, the owner of the highest
        generation below the current maximum (members without a generation count as -1
        when some member has one); the first such claim in member order wins a tie."""
        previous: dict[TopicPartition, tuple[str, int]] = {}
        for member in self.members:
            data = self.member_data(self.subscriptions[member])
            if data.generation is not None and data.generation < self.max_generation:
                generation = data.generation
            elif data.generation is None and self.max_generation > DEFAULT_GENERATION:
                generation = DEFAULT_GENERATION
            else:
                continue
            for tp in data.partitions:
                if tp not in previous or generation > previous[tp][1]:
                    previous[tp] = (member, generation)
        return previous

    def _assign_owned_partitions(self) -> list[TopicPartition]:
        kept = []
        for member in self.members:
            topics = self.subscriptions[member].topics
            remaining = []
            for tp in self.current[member]:
                if tp.topic not in self.topic_members:
                    self.owner.pop(tp, None)
                elif tp.topic not in topics:
                    self.revocation_required = True
                else:
                    remaining.append(tp)
                    kept.append(tp)
            self.current[member][:] = remaining
        return kept

    def _unassigned_partitions(self, kept: list[TopicPartition]) -> list[TopicPartition]:
        """All partitions (in ``sorted_partitions`` order) minus the kept ones, by Kafka's
        two-pointer walk. With nothing kept it is ``sorted_partitions`` itself (the same
        list object, as in Kafka, where later in-place removals hit both)."""
        if not kept:
            return self.sorted_partitions
        kept = sorted(kept, key=lambda tp: (len(self.topic_members[tp.topic]), _java_key(tp.topic), tp.partition))
        unassigned = []
        index = 0
        add_directly = False
        for tp in self.sorted_partitions:
            if add_directly or kept[index] != tp:
                unassigned.append(tp)
            elif index + 1 < len(kept):
                index += 1
            else:
                add_directly = True
        return unassigned

    # -- balance -----------------------------------------------------------------------------

    def _size(self, member: str) -> int:
        partitions = self.current.get(member)
        if partitions is None:  # Kafka would throw a NullPointerException here
            raise AssignmentFailedError(f"member {member} takes part in a move but has no assignment")
        return len(partitions)

    def _max_assignment_size(self, topics: list[str]) -> int:
        if len(topics) == len(self.counts):
            return self.total
        return sum(self.counts[t] for t in topics)

    def _is_balanced(self) -> bool:
        if len(self.current[self.ordered.first()]) >= len(self.current[self.ordered.last()]) - 1:
            return True
        owner_of: dict[TopicPartition, str] = {}
        for member, partitions in self.current.items():
            for tp in partitions:
                owner_of[tp] = member
        for member in self.ordered:
            partitions = self.current[member]
            count = len(partitions)
            topics = self.member_topics[member]
            if count == self._max_assignment_size(topics):
                continue
            mine = set(partitions)
            for topic in topics:
                for p in range(self.counts[topic]):
                    tp = TopicPartition(topic, p)
                    if tp not in mine and count + 1 < self._size(owner_of.get(tp)):
                        return False
        return True

    @staticmethod
    def _balance_score(assignment: Mapping[str, list]) -> int:
        sizes = [len(v) for v in assignment.values()]
        return sum(abs(a - b) for i, a in enumerate(sizes) for b in sizes[i + 1 :])

    def _assign_partition(self, tp: TopicPartition) -> None:
        for member in self.ordered:
            if tp.topic in self.member_topics[member]:
                self.ordered.remove(member)
                self.current[member].append(tp)
                self.owner[tp] = member
                self.ordered.add(member)
                return

    def _can_member_participate(self, member: str) -> bool:
        partitions = self.current[member]
        if len(partitions) < self._max_assignment_size(self.member_topics[member]):
            return True
        return any(len(self.topic_members[tp.topic]) >= 2 for tp in partitions)

    def _balance(self, previous, unassigned: list[TopicPartition]) -> None:
        initializing = not self.current[self.ordered.last()]
        for tp in unassigned:
            if self.topic_members[tp.topic]:
                self._assign_partition(tp)

        fixed_partitions = {
            TopicPartition(topic, p)
            for topic, members in self.topic_members.items()
            if len(members) < 2
            for p in range(self.counts[topic])
        }
        # In place, as Kafka's removeAll: `unassigned` may be `sorted_partitions` itself.
        self.sorted_partitions[:] = [tp for tp in self.sorted_partitions if tp not in fixed_partitions]
        unassigned[:] = [tp for tp in unassigned if tp not in fixed_partitions]

        fixed_assignments: dict[str, list[TopicPartition]] = {}
        for member in self.members:
            if not self._can_member_participate(member):
                self.ordered.remove(member)
                fixed_assignments[member] = self.current.pop(member)

        before = {member: list(partitions) for member, partitions in self.current.items()}
        before_owner = dict(self.owner)
        if not self.revocation_required:
            self._perform_reassignments(unassigned, previous)
        performed = self._perform_reassignments(self.sorted_partitions, previous)
        if not initializing and performed and self._balance_score(self.current) >= self._balance_score(before):
            self.current.clear()
            self.current.update({member: list(partitions) for member, partitions in before.items()})
            self.owner = before_owner
        for member, partitions in fixed_assignments.items():
            self.current[member] = partitions
            self.ordered.add(member)

    def _perform_reassignments(self, partitions: list[TopicPartition], previous) -> bool:
        performed = False
        while True:
            modified = False
            for tp in partitions:
                if self._is_balanced():
                    break
                member = self.owner.get(tp)
                size = self._size(member)
                if tp in previous and size > self._size(previous[tp][0]) + 1:
                    self._reassign(tp, previous[tp][0])
                    performed = modified = True
                    continue
                for other in self.topic_members[tp.topic]:
                    if size > self._size(other) + 1:
                        new_member = next(m for m in self.ordered if tp.topic in self.member_topics[m])
                        self._reassign(tp, new_member)
                        performed = modified = True
                        break
            if not modified:
                return performed

    def _reassign(self, tp: TopicPartition, new_member: str) -> None:
        moved = self.movements.partition_to_move(tp, self.owner[tp], new_member)
        old_member = self.owner[moved]
        self.ordered.remove(old_member)
        self.ordered.remove(new_member)
        self.movements.move(moved, old_member, new_member)
        _remove_first(self.current[old_member], moved)
        self.current[new_member].append(moved)
        self.owner[moved] = new_member
        self.ordered.add(new_member)
        self.ordered.add(old_member)


__all__ = [
    "CooperativeStickyAssignor",
    "StickyAssignor",
    "decode_sticky_user_data",
    "encode_sticky_user_data",
]
