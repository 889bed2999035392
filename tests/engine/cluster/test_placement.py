"""Replica placement equals Kafka's ``AdminUtils.assignReplicasToBrokers`` (kafka-format.md §17.2 (a)).

Oracles: the expected assignments of Kafka's own unit tests (``ReplicaAssignmentTest`` /
``AdminRackAwareTest``: 5 brokers x 10 partitions, the rack-alternated list of the
``AdminUtils`` javadoc), ``KAFKA_VECTORS`` computed by Kafka 3.9.2's server-common
``AdminUtils`` (the last release that ships it) for the same arguments, the error messages
of those classes and of ``TopicCommand`` / ``ReplicationControlManager``, and the
distribution guarantees that ``AdminUtils`` documents, checked under hypothesis.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plog.engine.errors import InvalidPartitionsError, InvalidReplicaAssignmentError, InvalidReplicationFactorError
from plog.engine.cluster.placement import (
    BrokerMetadata,
    add_partitions_assignment,
    assign_replicas_to_brokers,
    parse_replica_assignment,
    placement_report,
    rack_alternated_broker_list,
    validate_manual_assignment,
)

B = BrokerMetadata


def brokers(*ids: int) -> list[BrokerMetadata]:
    return [B(i) for i in ids]


def racked(mapping: dict[int, str]) -> list[BrokerMetadata]:
    return [B(broker, rack) for broker, rack in mapping.items()]


# -- Kafka's known answers ---------------------------------------------------------------------


def test_rack_unaware_known_answer_from_kafka_tests():
    # ReplicaAssignmentTest.testReplicaAssignment: 5 brokers, 10 partitions, rf 3, start 0.
    assert assign_replicas_to_brokers(brokers(0, 1, 2, 3, 4), 10, 3, fixed_start_index=0) == {
        0: [0, 1, 2],
        1: [1, 2, 3],
        2: [2, 3, 4],
        3: [3, 4, 0],
        4: [4, 0, 1],
        5: [0, 2, 3],
        6: [1, 3, 4],
        7: [2, 4, 0],
        8: [3, 0, 1],
        9: [4, 1, 2],
    }


RACK_MAP = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}


def test_rack_alternated_list_of_the_javadoc():
    assert rack_alternated_broker_list(RACK_MAP) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated_broker_list({b: r for b, r in RACK_MAP.items() if b != 5}) == [0, 3, 1, 4, 2]
    # The javadoc of getRackAlternatedBrokerList: rack1 0,1,2; rack2 3,4,5; rack3 6,7,8.
    nine = {0: "r1", 1: "r1", 2: "r1", 3: "r2", 4: "r2", 5: "r2", 6: "r3", 7: "r3", 8: "r3"}
    assert rack_alternated_broker_list(nine) == [0, 3, 6, 1, 4, 7, 2, 5, 8]


def test_rack_aware_known_answer_from_kafka_tests():
    # AdminRackAwareTest.testGetRackAlternatedBrokerListAndAssignReplicasToBrokers (= the
    # javadoc): after one round of the list the followers shift (partition 6 is 0,4,2, not
    # 0,3,1 again).
    assert assign_replicas_to_brokers(racked(RACK_MAP), 7, 3, fixed_start_index=0, start_partition_id=0) == {
        0: [0, 3, 1],
        1: [3, 1, 5],
        2: [1, 5, 4],
        3: [5, 4, 2],
        4: [4, 2, 0],
        5: [2, 0, 3],
        6: [0, 4, 2],
    }


KAFKA_VECTORS = {
    # name: (brokers, partitions, rf, fixed start, start partition id) -> Kafka 3.9.2's answer
    "rack-aware-start-2": (
        racked({0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}),
        6, 3, 2, -1,
        {0: [3, 2, 0], 1: [5, 4, 1], 2: [2, 0, 3], 3: [4, 1, 5], 4: [0, 3, 2], 5: [1, 5, 4]},
    ),
    "uneven-racks": (
        racked({0: "a", 1: "a", 2: "a", 3: "b", 4: "c"}),
        10, 2, 1, -1,
        {0: [3, 0], 1: [4, 3], 2: [1, 4], 3: [2, 3], 4: [0, 3], 5: [3, 2], 6: [4, 0], 7: [1, 3], 8: [2, 4], 9: [0, 3]},
    ),
    "rf-above-rack-count": (
        racked({10: "x", 11: "x", 20: "y", 21: "y"}),
        5, 3, 3, -1,
        {0: [21, 10, 20], 1: [10, 20, 11], 2: [20, 11, 21], 3: [11, 21, 10], 4: [21, 11, 10]},
    ),
    "sparse-ids-start-partition-5": (
        brokers(1, 5, 9, 12),
        7, 2, 3, 5,
        {5: [1, 5], 6: [5, 9], 7: [9, 12], 8: [12, 5], 9: [1, 9], 10: [5, 12], 11: [9, 1]},
    ),
    "start-partition-10": (
        brokers(0, 1, 2, 3, 4),
        4, 3, 2, 10,
        {10: [2, 1, 3], 11: [3, 2, 4], 12: [4, 3, 0], 13: [0, 4, 1]},
    ),
    "single-broker": (brokers(7), 3, 1, 0, -1, {0: [7], 1: [7], 2: [7]}),
}


@pytest.mark.parametrize("case", list(KAFKA_VECTORS))
def test_kafka_vectors(case):
    given_brokers, n, rf, fixed, start, expected = KAFKA_VECTORS[case]
    result = assign_replicas_to_brokers(given_brokers, n, rf, fixed_start_index=fixed, start_partition_id=start)
    assert result == expected
    assert list(result) == sorted(expected)


def test_brokers_are_ordered_by_id_as_kafkas_callers_pass_them():
    ordered = assign_replicas_to_brokers(brokers(1, 5, 9, 12), 7, 2, fixed_start_index=3, start_partition_id=5)
    shuffled = assign_replicas_to_brokers(brokers(12, 1, 9, 5), 7, 2, fixed_start_index=3, start_partition_id=5)
    assert shuffled == ordered
    rack_shuffled = list(reversed(racked(RACK_MAP)))
    assert assign_replicas_to_brokers(rack_shuffled, 7, 3, fixed_start_index=0) == assign_replicas_to_brokers(
        racked(RACK_MAP), 7, 3, fixed_start_index=0
    )


# -- errors ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "given_brokers, n, rf, error, message",
    [
        (brokers(0, 1), 3, 3, InvalidReplicationFactorError, "Replication factor: 3 larger than available brokers: 2."),
        (brokers(0, 1, 2, 3, 4), 10, 0, InvalidReplicationFactorError, "Replication factor must be larger than 0."),
        (brokers(0, 1), 0, 1, InvalidPartitionsError, "Number of partitions must be larger than 0."),
        (brokers(0, 1), -4, 0, InvalidPartitionsError, "Number of partitions must be larger than 0."),
        ([], 1, 1, InvalidReplicationFactorError, "Replication factor: 1 larger than available brokers: 0."),
        (
            [B(0, "r1"), B(1), B(2, "r2")],
            3, 2,
            InvalidReplicaAssignmentError,
            "Not all brokers have rack information for replica rack aware assignment.",
        ),
        ([B(3), B(3)], 1, 1, InvalidReplicaAssignmentError, "Broker 3 is listed more than once."),
    ],
)
def test_errors_carry_kafkas_messages(given_brokers, n, rf, error, message):
    with pytest.raises(error) as caught:
        assign_replicas_to_brokers(given_brokers, n, rf, fixed_start_index=0)
    assert str(caught.value) == message


# -- guarantees --------------------------------------------------------------------------------


@st.composite
def clusters(draw, with_racks: bool | None = None):
    ids = draw(st.lists(st.integers(0, 200), min_size=1, max_size=12, unique=True))
    use_racks = draw(st.booleans()) if with_racks is None else with_racks
    if use_racks:
        racks = draw(st.lists(st.sampled_from(["a", "b", "c", "rack-1", "Z"]), min_size=len(ids), max_size=len(ids)))
        return [B(i, r) for i, r in zip(ids, racks)]
    return [B(i) for i in ids]


@settings(max_examples=200, deadline=None)
@given(clusters(), st.integers(1, 60), st.data())
def test_every_partition_gets_distinct_brokers_spread_over_racks(cluster, n, data):
    rf = data.draw(st.integers(1, len(cluster)))
    fixed = data.draw(st.integers(-1, 3 * len(cluster)))
    start = data.draw(st.integers(-1, 40))
    result = assign_replicas_to_brokers(
        cluster, n, rf, fixed_start_index=fixed, start_partition_id=start, rng=random.Random(7)
    )
    assert list(result) == list(range(max(0, start), max(0, start) + n))
    rack_of = {b.id: b.rack for b in cluster}
    racks = set(rack_of.values())
    leaders: dict[int, int] = {}
    for replicas in result.values():
        assert len(replicas) == rf == len(set(replicas))
        assert set(replicas) <= set(rack_of)
        if None not in racks:
            assert len({rack_of[b] for b in replicas}) == min(rf, len(racks))
        leaders[replicas[0]] = leaders.get(replicas[0], 0) + 1
    # Leaders go round the (rack-alternated) broker list: counts differ by at most one.
    counts = [leaders.get(b.id, 0) for b in cluster]
    assert max(counts) - min(counts) <= 1


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 4), st.integers(1, 4), st.integers(1, 4), st.integers(0, 2**32))
def test_even_distribution_when_racks_are_equal_and_rf_is_the_rack_count(n_racks, per_rack, rounds, seed):
    # AdminUtils' javadoc: rf = #racks and equal racks give an even spread of replicas.
    rng = random.Random(seed)
    ids = rng.sample(range(100), n_racks * per_rack)
    cluster = [B(b, f"r{j % n_racks}") for j, b in enumerate(ids)]
    n = rounds * len(cluster)
    result = assign_replicas_to_brokers(cluster, n, n_racks, rng=rng)
    replicas: dict[int, int] = {}
    leaders: dict[int, int] = {}
    for partition in result.values():
        leaders[partition[0]] = leaders.get(partition[0], 0) + 1
        for broker in partition:
            replicas[broker] = replicas.get(broker, 0) + 1
    assert replicas == {b: rounds * n_racks for b in ids}
    assert leaders == {b: rounds for b in ids}


@settings(max_examples=150, deadline=None)
@given(clusters(with_racks=False), st.integers(1, 4), st.data())
def test_rack_unaware_replicas_spread_evenly_over_whole_rounds(cluster, rounds, data):
    rf = data.draw(st.integers(1, len(cluster)))
    rng = random.Random(data.draw(st.integers(0, 99)))
    result = assign_replicas_to_brokers(cluster, rounds * len(cluster), rf, rng=rng)
    counts: dict[int, int] = {}
    for partition in result.values():
        for broker in partition:
            counts[broker] = counts.get(broker, 0) + 1
    assert counts == {b.id: rounds * rf for b in cluster}


def test_random_start_uses_two_draws_and_the_given_rng():
    cluster = brokers(0, 1, 2, 3, 4)
    first = assign_replicas_to_brokers(cluster, 10, 3, rng=random.Random(11))
    assert assign_replicas_to_brokers(cluster, 10, 3, rng=random.Random(11)) == first
    # Start index and follower shift are independent draws, so over many seeds the leader
    # of partition 0 and the gap to its first follower take every value.
    leaders, gaps = set(), set()
    for seed in range(200):
        replicas = assign_replicas_to_brokers(cluster, 1, 2, rng=random.Random(seed))[0]
        leaders.add(replicas[0])
        gaps.add((replicas[1] - replicas[0]) % 5)
    assert leaders == {0, 1, 2, 3, 4}
    assert gaps == {1, 2, 3, 4}
    # Without an rng it still works (module randomness).
    assert len(assign_replicas_to_brokers(cluster, 4, 2)) == 4


# -- add partitions --------------------------------------------------------------------------------


def test_add_partitions_uses_partition_zero_leader_and_existing_count():
    cluster = brokers(0, 1, 2, 3, 4)
    existing = assign_replicas_to_brokers(cluster, 10, 3, fixed_start_index=2)
    assert existing[0][0] == 2
    added = add_partitions_assignment(cluster, existing, 14)
    # = AdminUtils with fixed start index 2 (the position of broker 2) from partition 10,
    # Kafka's answer in KAFKA_VECTORS["start-partition-10"].
    assert added == {10: [2, 1, 3], 11: [3, 2, 4], 12: [4, 3, 0], 13: [0, 4, 1]}
    assert added == assign_replicas_to_brokers(cluster, 4, 3, fixed_start_index=2, start_partition_id=10)


def test_add_partitions_when_the_leader_of_partition_zero_is_gone():
    # Broker 3 left: the start is the first broker with an id >= 3 (here 4, position 2).
    cluster = brokers(1, 2, 4, 6)
    added = add_partitions_assignment(cluster, {0: [3, 1], 1: [4, 2]}, 4)
    assert added == assign_replicas_to_brokers(cluster, 2, 2, fixed_start_index=2, start_partition_id=2)
    # No broker id >= the leader: position 0.
    added = add_partitions_assignment(cluster, {0: [9, 1]}, 3)
    assert added == assign_replicas_to_brokers(cluster, 2, 2, fixed_start_index=0, start_partition_id=1)


@settings(max_examples=100, deadline=None)
@given(clusters(with_racks=False), st.data())
def test_add_partitions_continues_the_creation_pattern_within_the_first_round(cluster, data):
    # While the topic has fewer partitions than there are brokers the follower shift has not
    # moved yet, so adding partitions gives what creating them all at once would have.
    n = len(cluster)
    old = data.draw(st.integers(1, n))
    new_total = data.draw(st.integers(old + 1, old + 2 * n))
    rf = data.draw(st.integers(1, n))
    fixed = data.draw(st.integers(0, n - 1))
    created = assign_replicas_to_brokers(cluster, new_total, rf, fixed_start_index=fixed)
    existing = {p: created[p] for p in range(old)}
    assert add_partitions_assignment(cluster, existing, new_total) == {p: created[p] for p in range(old, new_total)}


def test_add_partitions_errors():
    cluster = brokers(0, 1, 2)
    with pytest.raises(InvalidPartitionsError) as caught:
        add_partitions_assignment(cluster, {0: [0], 1: [1]}, 2, topic="orders")
    assert str(caught.value) == (
        "The number of partitions for a topic can only be increased. "
        "Topic orders currently has 2 partitions, 2 would not be an increase."
    )
    with pytest.raises(InvalidReplicaAssignmentError, match="partition id 0 is missing"):
        add_partitions_assignment(cluster, {1: [1]}, 3, topic="orders")
    with pytest.raises(InvalidReplicationFactorError, match="Replication factor: 3 larger than available brokers: 2."):
        add_partitions_assignment(brokers(0, 1), {0: [0, 1, 2]}, 2)


# -- manual assignments ------------------------------------------------------------------------


def test_parse_replica_assignment():
    assert parse_replica_assignment("1:2,2:3,3:1") == {0: [1, 2], 1: [2, 3], 2: [3, 1]}
    assert parse_replica_assignment(" 1 : 2 , 3:4") == {0: [1, 2], 1: [3, 4]}
    assert parse_replica_assignment("5") == {0: [5]}
    assert parse_replica_assignment("1:2,") == {0: [1, 2]}  # String.split drops trailing empties
    assert parse_replica_assignment("+4:-1") == {0: [4, -1]}  # Integer.parseInt accepts signs
    assert parse_replica_assignment(",") == {}


@pytest.mark.parametrize(
    "text, message",
    [
        ("1:1", "Partition replica lists may not contain duplicate entries: 1"),
        # The duplicates come from a HashSet<Integer>: 17 and 1 share a bucket, 1 was added last.
        ("17:1:17:1:20:20", "Partition replica lists may not contain duplicate entries: 17,1,20"),
        ("1,2:3", "Partition 1 has different replication factor: [2, 3]"),
        ("1:2,3", "Partition 1 has different replication factor: [3]"),
        ("1:x", 'For input string: "x"'),
        ("", 'For input string: ""'),
        ("1::2", 'For input string: ""'),
        (",1", 'For input string: ""'),
        ("1_0", 'For input string: "1_0"'),
        ("99999999999", 'For input string: "99999999999"'),
    ],
)
def test_parse_replica_assignment_errors(text, message):
    with pytest.raises(InvalidReplicaAssignmentError) as caught:
        parse_replica_assignment(text)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    "assignment, message",
    [
        ({0: []}, "The manual partition assignment includes an empty replica list."),
        ({0: [9, 1, 7]}, "The manual partition assignment includes broker 7, but no such broker is registered."),
        ({0: [2, 1, 2]}, "The manual partition assignment includes the broker 2 more than once."),
        # Brokers are checked in ascending order, so the lowest problem is the one named.
        ({0: [99, 1, 1]}, "The manual partition assignment includes the broker 1 more than once."),
        (
            {0: [1, 2], 1: [1]},
            "The manual partition assignment includes a partition with 1 replica(s), "
            "but this is not consistent with previous partitions, which have 2 replica(s).",
        ),
        ({0: [1], 2: [2]}, "partitions should be a consecutive 0-based integer sequence"),
        ({1: [1]}, "partitions should be a consecutive 0-based integer sequence"),
    ],
)
def test_validate_manual_assignment_errors(assignment, message):
    with pytest.raises(InvalidReplicaAssignmentError) as caught:
        validate_manual_assignment(assignment, {1, 2, 3, 9})
    assert str(caught.value) == message


def test_validate_manual_assignment_accepts_a_parsed_assignment():
    assert validate_manual_assignment(parse_replica_assignment("1:2,2:3,3:1"), {1, 2, 3}) is None
    assert validate_manual_assignment({1: [2], 0: [3]}, {2, 3}) is None  # any order of ids


# -- report ---------------------------------------------------------------------------------------


def test_placement_report_counts_leaders_and_replicas_per_broker():
    assignments = {
        "orders": {0: [1, 2], 1: [2, 3], 2: [3, 1]},
        "audit": {0: [1, 3]},
    }
    assert placement_report(assignments, [3, 1, 2, 4]) == {
        1: {"leaders": 2, "replicas": 3},
        2: {"leaders": 1, "replicas": 2},
        3: {"leaders": 1, "replicas": 3},
        4: {"leaders": 0, "replicas": 0},
    }
    # A broker named by the assignments but not listed still shows up.
    assert placement_report({"t": {0: [7]}}, []) == {7: {"leaders": 1, "replicas": 1}}
    assert list(placement_report({}, [5, 2])) == [2, 5]


def test_report_of_a_kafka_assignment_is_balanced():
    result = assign_replicas_to_brokers(brokers(0, 1, 2, 3, 4), 10, 3, fixed_start_index=0)
    report = placement_report({"t": result}, range(5))
    assert {b: (r["leaders"], r["replicas"]) for b, r in report.items()} == {b: (2, 6) for b in range(5)}
