"""Replica placement: which brokers hold each partition's replicas (kafka-format.md §17.2 (a)).

``assign_replicas_to_brokers`` is ``AdminUtils.assignReplicasToBrokers`` (server-common; the
ZK-era topic creation, ``kafka-reassign-partitions --generate``), with Kafka's results for a
fixed start index and Kafka's error messages:

* Rack-unaware (no broker has a rack): partition ``p``'s first replica is broker
  ``(p + start) % n`` of the list; the followers follow it at a shift that grows by one
  each time ``p`` wraps round the list, so replica sets do not repeat.
* Rack-aware (every broker has a rack): the same walk over a *rack-alternated* list (brokers
  grouped by rack, ids sorted in each rack, racks sorted, then taken round-robin across the
  racks), and a follower is skipped while its rack, or the broker itself, already holds a
  replica and some other rack (broker) holds none. Each partition then spans
  ``min(rf, #racks)`` racks, and leaders go round the list.
* Some brokers with a rack and some without: an error.

The broker list is ordered by id first: every Kafka caller (``AdminZkClient.getBrokerMetadatas``,
the reassignment tool) passes it ``sortBy(_.id)``.

``add_partitions_assignment`` is the placement of new partitions by ``AdminZkClient``'s
"add partitions"; ``validate_manual_assignment`` and ``parse_replica_assignment`` are the
checks and the syntax of ``kafka-topics.sh --replica-assignment``; ``placement_report`` counts
leaders and replicas per broker.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from plog.formats import java

from plog.engine.errors import InvalidPartitionsError, InvalidReplicaAssignmentError, InvalidReplicationFactorError

__all__ = [
    "BrokerMetadata",
    "add_partitions_assignment",
    "assign_replicas_to_brokers",
    "parse_replica_assignment",
    "placement_report",
    "rack_alternated_broker_list",
    "validate_manual_assignment",
]


@dataclass(frozen=True)
class BrokerMetadata:
    """A broker as replica placement sees it: its id and, optionally, its rack."""

    id: int
    rack: str | None = None


def _sorted_brokers(brokers: Iterable[BrokerMetadata]) -> list[BrokerMetadata]:
    ordered = sorted(brokers, key=lambda b: b.id)
    for before, after in zip(ordered, ordered[1:]):
        if before.id == after.id:
            raise InvalidReplicaAssignmentError(f"Broker {after.id} is listed more than once.")
    return ordered


def _replica_index(first_index: int, second_replica_shift: int, replica_index: int, n_brokers: int) -> int:
    """``AdminUtils.replicaIndex``: the broker list index of a follower."""
    shift = 1 + (second_replica_shift + replica_index) % (n_brokers - 1)
    return (first_index + shift) % n_brokers


def rack_alternated_broker_list(rack_by_broker: Mapping[int, str]) -> list[int]:
    """``AdminUtils.getRackAlternatedBrokerList``: brokers taken round-robin across the racks
    (racks by name, brokers by id within a rack). E.g. r1:{0,5} r2:{3,4} r3:{1,2} gives
    ``[0, 3, 1, 5, 4, 2]``."""
    by_rack: dict[str, list[int]] = {}
    for broker, rack in rack_by_broker.items():
        by_rack.setdefault(rack, []).append(broker)
    queues = [sorted(by_rack[rack]) for rack in sorted(by_rack, key=java.compare_key)]
    result: list[int] = []
    depth = 0
    while len(result) < len(rack_by_broker):
        result.extend(queue[depth] for queue in queues if depth < len(queue))
        depth += 1
    return result


def assign_replicas_to_brokers(
    brokers: Sequence[BrokerMetadata],
    n_partitions: int,
    replication_factor: int,
    *,
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """``AdminUtils.assignReplicasToBrokers``: partition id -> replica broker ids, the first
    being the preferred leader. Partition ids run from ``max(0, start_partition_id)``.

    With ``fixed_start_index >= 0`` the result is deterministic; otherwise the start index
    and the follower shift are two independent draws in ``[0, #brokers)`` from ``rng`` (as
    Kafka's two ``Random.nextInt`` calls). Raises ``InvalidPartitionsError`` /
    ``InvalidReplicationFactorError`` with Kafka's messages, and
    ``InvalidReplicaAssignmentError`` when only some brokers have a rack.

    Invariants: every partition has ``replication_factor`` distinct brokers; without racks,
    the leaders of ``k * #brokers`` consecutive partitions are spread exactly evenly.
    """
    if n_partitions <= 0:
        raise InvalidPartitionsError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}."
        )
    ordered = _sorted_brokers(brokers)
    rng = rng if rng is not None else random.Random()
    if all(b.rack is None for b in ordered):
        return _assign_rack_unaware(
            [b.id for b in ordered], n_partitions, replication_factor, fixed_start_index, start_partition_id, rng
        )
    if any(b.rack is None for b in ordered):
        raise InvalidReplicaAssignmentError("Not all brokers have rack information for replica rack aware assignment.")
    return _assign_rack_aware(ordered, n_partitions, replication_factor, fixed_start_index, start_partition_id, rng)


def _start_and_shift(fixed_start_index: int, n: int, rng: random.Random) -> tuple[int, int]:
    # Kafka draws the start index first and the shift second; both are the fixed index if given.
    if fixed_start_index >= 0:
        return fixed_start_index, fixed_start_index
    start = rng.randrange(n)
    return start, rng.randrange(n)


def _leader_positions(n: int, n_partitions: int, fixed_start_index: int, start_partition_id: int,
                      rng: random.Random) -> Iterator[tuple[int, int, int]]:
    """``(partition id, position of its leader in the n-broker list, follower shift)`` for each
    partition, as both of Kafka's placements walk them: leaders round the list from the start
    index, the shift one more each time the partition ids wrap round it."""
    start_index, shift = _start_and_shift(fixed_start_index, n, rng)
    partition = max(0, start_partition_id)
    for _ in range(n_partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        yield partition, (partition + start_index) % n, shift
        partition += 1


def _assign_rack_unaware(broker_ids, n_partitions, replication_factor, fixed_start_index, start_partition_id, rng):
    n = len(broker_ids)
    result: dict[int, list[int]] = {}
    for partition, first, shift in _leader_positions(n, n_partitions, fixed_start_index, start_partition_id, rng):
        replicas = [broker_ids[first]]
        replicas.extend(broker_ids[_replica_index(first, shift, j, n)] for j in range(replication_factor - 1))
        result[partition] = replicas
    return result


def _assign_rack_aware(brokers, n_partitions, replication_factor, fixed_start_index, start_partition_id, rng):
    rack_of = {b.id: b.rack for b in brokers}
    n_racks = len(set(rack_of.values()))
    arranged = rack_alternated_broker_list(rack_of)
    n = len(arranged)
    result: dict[int, list[int]] = {}
    for partition, first, shift in _leader_positions(n, n_partitions, fixed_start_index, start_partition_id, rng):
        leader = arranged[first]
        replicas = [leader]
        racks_used = {rack_of[leader]}
        brokers_used = {leader}
        k = 0
        for _j in range(replication_factor - 1):
            while True:
                broker = arranged[_replica_index(first, shift * n_racks, k, n)]
                rack = rack_of[broker]
                k += 1
                # Take it unless its rack already has a replica while some rack has none, or
                # it already has one while some broker has none.
                if (rack not in racks_used or len(racks_used) == n_racks) and (
                    broker not in brokers_used or len(brokers_used) == n
                ):
                    replicas.append(broker)
                    racks_used.add(rack)
                    brokers_used.add(broker)
                    break
        result[partition] = replicas
    return result


def add_partitions_assignment(
    brokers: Sequence[BrokerMetadata],
    existing: Mapping[int, Sequence[int]],
    new_total: int,
    rng: random.Random | None = None,
    *,
    topic: str | None = None,
) -> dict[int, list[int]]:
    """Replicas of the partitions added to a topic that has ``existing`` (partition id ->
    replicas), growing it to ``new_total`` partitions, as ``AdminZkClient.addPartitions``
    places them: the replication factor of partition 0, start partition id = the existing
    count, and fixed start index = the position (in the id-sorted broker list) of the first
    broker whose id is >= partition 0's first replica (0 if none). Returns only the new
    partitions. (Kafka uses that id-list position even for the rack-alternated list.)

    ``rng`` is never drawn from (the start index is always fixed here); it is accepted for
    symmetry with :func:`assign_replicas_to_brokers`. ``topic`` only names the topic in
    error messages, as Kafka's do.
    """
    name = f"'{topic}'" if topic is not None else "''"
    if 0 not in existing:
        raise InvalidReplicaAssignmentError(
            f"Unexpected existing replica assignment for topic {name}, partition id 0 is missing. "
            f"Assignment: {_scala_map(existing)}"
        )
    to_add = new_total - len(existing)
    if to_add <= 0:
        raise InvalidPartitionsError(
            "The number of partitions for a topic can only be increased. "
            f"Topic {topic if topic is not None else ''} currently has {len(existing)} partitions, "
            f"{new_total} would not be an increase."
        )
    partition0 = list(existing[0])
    if not partition0:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
    ordered = _sorted_brokers(brokers)
    start_index = next((i for i, b in enumerate(ordered) if b.id >= partition0[0]), 0)
    return assign_replicas_to_brokers(
        ordered,
        to_add,
        len(partition0),
        fixed_start_index=start_index,
        start_partition_id=len(existing),
        rng=rng,
    )


def _scala_map(assignment: Mapping[int, Sequence[int]]) -> str:
    inner = ", ".join(f"{p} -> List({', '.join(map(str, r))})" for p, r in assignment.items())
    return f"Map({inner})"


def validate_manual_assignment(assignment: Mapping[int, Sequence[int]], broker_ids: Iterable[int]) -> None:
    """The controller's checks of a hand-given assignment (``ReplicationControlManager``:
    ``validateManualPartitionAssignment`` per partition, in the order given, then the
    partition ids). Raises ``InvalidReplicaAssignmentError`` with Kafka's message for the
    first problem: an empty replica list, a broker that is not registered or named twice
    (brokers checked in ascending id order, so the lowest offender is named), a replica
    count that differs from the partition before, partition ids other than 0..n-1."""
    registered = set(broker_ids)
    replication_factor: int | None = None
    for replicas in assignment.values():
        if not replicas:
            raise InvalidReplicaAssignmentError("The manual partition assignment includes an empty replica list.")
        previous = None
        for broker in sorted(replicas):
            if broker not in registered:
                raise InvalidReplicaAssignmentError(
                    f"The manual partition assignment includes broker {broker}, but no such broker is registered."
                )
            if broker == previous:
                raise InvalidReplicaAssignmentError(
                    f"The manual partition assignment includes the broker {broker} more than once."
                )
            previous = broker
        if replication_factor is not None and len(replicas) != replication_factor:
            raise InvalidReplicaAssignmentError(
                f"The manual partition assignment includes a partition with {len(replicas)} replica(s), "
                f"but this is not consistent with previous partitions, which have {replication_factor} replica(s)."
            )
        replication_factor = len(replicas)
    if set(assignment) != set(range(len(assignment))):
        raise InvalidReplicaAssignmentError("partitions should be a consecutive 0-based integer sequence")


# -- kafka-topics.sh --replica-assignment ------------------------------------------------------

def _parse_int(text: str) -> int:
    """``Integer.parseInt``, with its message where Java throws."""
    value = java.parse_int(text)
    if value is None:
        raise InvalidReplicaAssignmentError(f'For input string: "{text}"')
    return value


def parse_replica_assignment(text: str) -> dict[int, list[int]]:
    """``TopicCommand.parseReplicaAssignment``: ``"1:2,2:3,3:1"`` -> ``{0: [1, 2], 1: [2, 3],
    2: [3, 1]}`` (partition ``i`` is the ``i``-th comma group, its replicas colon-separated,
    blanks around numbers allowed). Raises ``InvalidReplicaAssignmentError`` with Kafka's
    messages for a number that does not parse, a broker listed twice in one partition, or a
    partition whose replica count differs from partition 0's."""
    result: dict[int, list[int]] = {}
    for index, group in enumerate(java.split(text, ",")):
        replicas = [_parse_int(java.trim(part)) for part in java.split(group, ":")]
        # ToolsUtils.duplicates: a HashSet of the values seen a second time.
        repeated = [b for i, b in enumerate(replicas) if b in replicas[:i]]
        duplicates = java.hash_map_order(repeated, java.integer_hash_code)
        if duplicates:
            raise InvalidReplicaAssignmentError(
                "Partition replica lists may not contain duplicate entries: " + ",".join(map(str, duplicates))
            )
        result[index] = replicas
        if len(replicas) != len(result[0]):
            raise InvalidReplicaAssignmentError(
                f"Partition {index} has different replication factor: [{', '.join(map(str, replicas))}]"
            )
    return result


def placement_report(
    assignments: Mapping[str, Mapping[int, Sequence[int]]], broker_ids: Iterable[int]
) -> dict[int, dict]:
    """Per broker id (ascending): ``{"leaders": n, "replicas": n}`` over all topics'
    assignments (topic -> partition -> replicas); the leader is the first replica. Every
    broker of ``broker_ids`` appears, and so does any other broker the assignments name."""
    report: dict[int, dict] = {broker: {"leaders": 0, "replicas": 0} for broker in broker_ids}
    for partitions in assignments.values():
        for replicas in partitions.values():
            for position, broker in enumerate(replicas):
                counts = report.setdefault(broker, {"leaders": 0, "replicas": 0})
                counts["replicas"] += 1
                if position == 0:
                    counts["leaders"] += 1
    return {broker: report[broker] for broker in sorted(report)}
