"""What every consumer partition assignor shares: Kafka's ``ConsumerPartitionAssignor``
(the subscription a member sends, the rebalance protocols) and ``AbstractPartitionAssignor``
(which topics take part, the order members are met in, the sorted result).

Orders are Java's (formats.java): members as the group leader's ``HashMap<String,
Subscription>`` iterates them (``String.hashCode`` and the table's growth), names compared
as Java compares strings (UTF-16 code units). engine.groups.assignors says what "Kafka's
exact results" means and lists the assignors.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from plog.formats.java import compare_key as _java_key
from plog.formats.java import hash_map_order as _java_hashmap_order
from plog.formats.java import string_hash_code as _java_string_hash

from plog.engine.errors import AssignmentFailedError, UnknownAssignorError
from plog.engine.storage.file_names import TopicPartition


class RebalanceProtocol(Enum):
    """``ConsumerPartitionAssignor.RebalanceProtocol``; the value is the protocol id."""

    EAGER = 0
    COOPERATIVE = 1


@dataclass(frozen=True)
class Subscription:
    """One member's JoinGroup metadata (``ConsumerPartitionAssignor.Subscription``).

    ``generation_id`` below 0 means "not sent" (Kafka maps it to ``Optional.empty()``).
    ``user_data`` is the assignor-specific blob (see ``subscription_user_data``).
    ``owned_partitions`` are the partitions the member holds while joining (cooperative
    protocol; an eager member has revoked everything and sends none).
    """

    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation_id: int = -1
    group_instance_id: str | None = None
    rack_id: str | None = None


def member_order(subscriptions: Mapping[str, Subscription]) -> list[str]:
    """Member ids in the order the leader's ``HashMap<String, Subscription>`` iterates them."""
    return _java_hashmap_order(subscriptions, _java_string_hash)


def member_sort_key(member_id: str, subscription: Subscription) -> tuple:
    """``AbstractPartitionAssignor.MemberInfo.compareTo``: members with a ``group.instance.id``
    first, by instance id; then the others by member id. (Two members with the same instance
    id compare equal and keep their order; Java's sort is stable too.)"""
    if subscription.group_instance_id is not None:
        return (0, _java_key(subscription.group_instance_id))
    return (1, _java_key(member_id))


def _partitions_per_topic(
    partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
) -> dict[str, int]:
    """``AbstractPartitionAssignor.assign(Cluster, ...)``: subscribed topics with metadata and
    at least one partition; everything else takes no part."""
    subscribed = {topic for sub in subscriptions.values() for topic in sub.topics}
    counts = {}
    for topic in sorted(subscribed, key=_java_key):
        count = partitions_per_topic.get(topic)
        if count is not None and count > 0:
            counts[topic] = int(count)
    return counts


def _sorted_result(
    assignment: Mapping[str, list[TopicPartition]], members: Iterable[str]
) -> dict[str, list[TopicPartition]]:
    """The public result: every member, its partitions sorted by (topic, partition)."""
    return {
        member: sorted(assignment.get(member, ()), key=lambda tp: (_java_key(tp.topic), tp.partition))
        for member in members
    }


class PartitionAssignor:
    """Common surface of the four assignors. Instances are stateless."""

    name: str = ""
    supported_protocols: tuple[RebalanceProtocol, ...] = (RebalanceProtocol.EAGER,)

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, list[TopicPartition]]:
        """Member id -> its partitions, sorted; every member of ``subscriptions`` is present."""
        counts = _partitions_per_topic(partitions_per_topic, subscriptions)
        raw = self._assign(counts, dict(subscriptions))
        return _sorted_result(raw, subscriptions)

    def subscription_user_data(self, assigned: Sequence[TopicPartition] | None, generation: int) -> bytes | None:
        """The user data a member of this strategy sends, given what it was assigned last and
        the generation of that assignment. ``None``: this strategy sends none."""
        return None

    def _assign(
        self, counts: dict[str, int], subscriptions: dict[str, Subscription]
    ) -> dict[str, list[TopicPartition]]:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


__all__ = [
    "AssignmentFailedError",
    "PartitionAssignor",
    "RebalanceProtocol",
    "Subscription",
    "UnknownAssignorError",
    "member_order",
    "member_sort_key",
]
