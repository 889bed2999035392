"""Kafka's ``RoundRobinAssignor`` (strategy ``roundrobin``)."""

from __future__ import annotations

from plog.formats.java import compare_key as _java_key

from plog.engine.groups.partition_assignor import PartitionAssignor, member_order, member_sort_key
from plog.engine.storage.file_names import TopicPartition


class RoundRobinAssignor(PartitionAssignor):
    """``roundrobin``: the partitions of all subscribed topics (topics by name, partitions by
    number) are dealt round a circle of the members in ``MemberInfo`` order; a member not
    subscribed to the partition's topic is skipped."""

    name = "roundrobin"

    def _assign(self, counts, subscriptions):
        assignment: dict[str, list[TopicPartition]] = {member: [] for member in subscriptions}
        members = sorted(member_order(subscriptions), key=lambda m: member_sort_key(m, subscriptions[m]))
        if not members:
            return assignment
        topics = sorted({t for sub in subscriptions.values() for t in sub.topics}, key=_java_key)
        position = 0
        for topic in topics:
            for partition in range(counts.get(topic, 0)):
                # CircularIterator: peek until a subscribed member, then take it and advance.
                while topic not in subscriptions[members[position]].topics:
                    position = (position + 1) % len(members)
                assignment[members[position]].append(TopicPartition(topic, partition))
                position = (position + 1) % len(members)
        return assignment
