"""Kafka's ``RangeAssignor`` (strategy ``range``)."""

from __future__ import annotations

from plog.engine.groups.partition_assignor import PartitionAssignor, member_order, member_sort_key
from plog.engine.storage.file_names import TopicPartition


class RangeAssignor(PartitionAssignor):
    """``range``: per topic, the members subscribed to it in ``MemberInfo`` order each take a
    block of consecutive partitions; the first ``P % C`` take ``P // C + 1``, the rest
    ``P // C``. Topics are independent, so co-partitioned topics line up."""

    name = "range"

    def _assign(self, counts, subscriptions):
        assignment: dict[str, list[TopicPartition]] = {member: [] for member in subscriptions}
        members_per_topic: dict[str, list[str]] = {}
        for member in member_order(subscriptions):
            for topic in subscriptions[member].topics:
                members_per_topic.setdefault(topic, []).append(member)
        for topic, count in counts.items():
            members = sorted(members_per_topic.get(topic, ()), key=lambda m: member_sort_key(m, subscriptions[m]))
            members = list(dict.fromkeys(members))  # a LinkedHashMap keyed by member id
            if not members:
                continue
            per_member, extra = divmod(count, len(members))
            start = 0
            for index, member in enumerate(members):
                length = per_member + (1 if index < extra else 0)
                assignment[member].extend(TopicPartition(topic, p) for p in range(start, start + length))
                start += length
        return assignment
