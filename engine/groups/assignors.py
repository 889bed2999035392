"""Kafka's classic consumer partition assignors, with Kafka's exact results (kafka-format.md §17.3).

Four assignors, by the names a consumer puts in ``partition.assignment.strategy``:

``range``               ``RangeAssignor``: per topic, consecutive blocks of partitions.
``roundrobin``          ``RoundRobinAssignor``: all partitions dealt round a circle of members.
``sticky``              ``StickyAssignor``: balanced and sticky, eager protocol; the previous
                        assignment travels in the subscription's user data
                        (formats.consumer_protocol).
``cooperative-sticky``  ``CooperativeStickyAssignor``: the same algorithm, cooperative protocol;
                        previous ownership from ``owned_partitions``; a partition that changes
                        owner is left out of this round (revoked first, assigned next round).

One module per assignor as Kafka has them (engine.groups.range_assignor,
round_robin_assignor, sticky_assignor), over engine.groups.partition_assignor (the
subscription, the protocols, the common surface); this module is the registry.

Each one is a class with ``name``, ``supported_protocols`` and
``assign(partitions_per_topic, subscriptions) -> {member_id: sorted partitions}``; every member
appears in the result, possibly with an empty list. ``subscription_user_data`` builds the user
data a member of that strategy sends when it joins.

What "exact" means here
-----------------------
``assign`` returns what a Kafka group leader's ``assignor.assign(cluster, groupSubscription)``
returns for the same input, where

* ``partitions_per_topic`` plays the cluster metadata: as ``AbstractPartitionAssignor`` does,
  only topics some member subscribes to and that have at least one partition take part (a
  subscribed topic missing here is "not in metadata" and skipped);
* ``subscriptions`` is in the order the members came in the JoinGroup response. The leader
  puts them in a ``java.util.HashMap`` (``ConsumerCoordinator.onLeaderElected``), and the
  sticky assignors' results depend on that map's iteration order in a few places (which
  members keep their surplus partitions, which equal-generation claim wins, which of several
  moved partitions moves back). This module reproduces ``HashMap`` iteration order from Java's
  ``String.hashCode`` and the table's growth, so the results match for any member ids, with
  one limit: a hash bucket that holds 9 or more keys in a table of 64 or more buckets is a
  red-black tree in Java, whose order is not modelled (member ids would have to be chosen to
  collide for that to happen).
* Strings compare as Java compares them (UTF-16 code units), and a Java ``IllegalStateException``
  of the sticky algorithm (it needs corrupt user data) is raised as :class:`AssignmentFailedError`.
* No members at all gives ``{}`` from every assignor. (Kafka's sticky assignors divide by
  the member count and throw there; a real group always has its leader as a member.)

Each call behaves as a fresh assignor instance. (Kafka's sticky assignors keep the highest
generation seen in an instance field that never goes down; between real rebalances
generations only grow, so that memory does not change a result.)

Not done: rack-aware assignment (KIP-881, Kafka >= 3.5). It needs the racks of each
partition's replicas, which ``partitions_per_topic`` (partition counts) does not carry, so
``Subscription.rack_id`` is accepted and ignored. That is also what Kafka itself computes for
this input: with no replica racks the rack-aware steps of all four assignors never trigger
(``useRackAwareAssignment`` is false when the partition racks are empty), so the results
are still Kafka's for this input.
"""

from __future__ import annotations

from plog.engine.errors import UnknownAssignorError
from plog.engine.groups.partition_assignor import PartitionAssignor
from plog.engine.groups.range_assignor import RangeAssignor
from plog.engine.groups.round_robin_assignor import RoundRobinAssignor
from plog.engine.groups.sticky_assignor import CooperativeStickyAssignor, StickyAssignor

#: ``partition.assignment.strategy`` default of the Kafka 3.x+ Java consumer.
DEFAULT_ASSIGNMENT_STRATEGY = ("range", "cooperative-sticky")


# -- registry --------------------------------------------------------------------------------

#: Built-in assignors by strategy name.
ASSIGNORS: dict[str, type[PartitionAssignor]] = {
    cls.name: cls for cls in (RangeAssignor, RoundRobinAssignor, StickyAssignor, CooperativeStickyAssignor)
}


def get_assignor(name: str) -> PartitionAssignor:
    """A new assignor for a ``partition.assignment.strategy`` name (``range``, ``roundrobin``,
    ``sticky``, ``cooperative-sticky``); :class:`UnknownAssignorError` for anything else."""
    cls = ASSIGNORS.get(name)
    if cls is None:
        known = ", ".join(ASSIGNORS)
        raise UnknownAssignorError(f"unknown partition assignment strategy {name!r}; known strategies: {known}")
    return cls()


__all__ = [
    "ASSIGNORS",
    "DEFAULT_ASSIGNMENT_STRATEGY",
    "get_assignor",
]
