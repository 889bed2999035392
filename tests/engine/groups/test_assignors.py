"""Kafka's consumer partition assignors (kafka-format.md §17.3).

Oracles, in order of authority:

1. Apache Kafka itself. ``KAFKA_VECTORS`` are scenarios whose expected results were computed
   by Kafka 4.3.1's ``kafka-clients`` (``assignor.assign(cluster, groupSubscription)``, the
   subscriptions in a ``HashMap`` filled in the listed member order, as the group leader
   does; the partitions without replica racks). Each one pins a behaviour the Kafka source
   leaves to Java details: quotas decided by ``HashMap`` iteration order, claim conflicts,
   user data fallbacks, UTF-16 string order, the cooperative revocation. The user-data bytes
   and the ``HashMap``/``HashSet`` orders below were printed by the same Java runtime.
2. The javadoc examples of ``RangeAssignor``, ``RoundRobinAssignor`` and ``StickyAssignor``.
   Where a javadoc is stale, Kafka wins and the test says so.
3. kafka-python (an independent implementation) under hypothesis, where it agrees with
   Kafka: Range always; RoundRobin with equal subscriptions (kafka-python 3.0.12 raises
   ``KeyError`` as soon as it must skip an unsubscribed member); Sticky for a first
   assignment only (kafka-python implements the original KIP-54 algorithm, not Kafka's
   current constrained/generation-aware one, so rebalances differ). kafka-python sorts
   members by Python string order and ignores ``group.instance.id``, so the generated ids
   are ASCII and dynamic.
4. Properties: every partition assigned once, balance, stickiness, cooperative safety.
"""

from __future__ import annotations

import struct
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

from plog.engine.groups import sticky_assignor as assignors_module
from plog.engine.groups.assignors import ASSIGNORS, DEFAULT_ASSIGNMENT_STRATEGY, get_assignor
from plog.engine.groups.partition_assignor import RebalanceProtocol, Subscription
from plog.engine.groups.range_assignor import RangeAssignor
from plog.engine.groups.round_robin_assignor import RoundRobinAssignor
from plog.engine.groups.sticky_assignor import (
    CooperativeStickyAssignor,
    StickyAssignor,
    decode_sticky_user_data,
    encode_sticky_user_data,
)
from plog.engine.errors import AssignmentFailedError, GroupError, UnknownAssignorError
from plog.engine.storage.file_names import TopicPartition

S = Subscription


def tps(text: str) -> tuple[TopicPartition, ...]:
    """``"t0-0 t1-2"`` -> partitions."""
    out = []
    for item in text.split():
        topic, partition = item.rsplit("-", 1)
        out.append(TopicPartition(topic, int(partition)))
    return tuple(out)


def shown(result: dict[str, list[TopicPartition]]) -> dict[str, str]:
    return {member: " ".join(str(tp) for tp in partitions) for member, partitions in result.items()}


def sticky_data(text: str, generation: int) -> bytes:
    return encode_sticky_user_data(list(tps(text)), generation)


# -- registry -------------------------------------------------------------------------------


def test_registry_names_protocols_and_default():
    assert list(ASSIGNORS) == ["range", "roundrobin", "sticky", "cooperative-sticky"]
    assert DEFAULT_ASSIGNMENT_STRATEGY == ("range", "cooperative-sticky")
    for name, cls in ASSIGNORS.items():
        assignor = get_assignor(name)
        assert type(assignor) is cls and assignor.name == name
    assert RangeAssignor.supported_protocols == (RebalanceProtocol.EAGER,)
    assert RoundRobinAssignor.supported_protocols == (RebalanceProtocol.EAGER,)
    assert StickyAssignor.supported_protocols == (RebalanceProtocol.EAGER,)
    assert CooperativeStickyAssignor.supported_protocols == (RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER)
    assert RebalanceProtocol.COOPERATIVE.value == 1


def test_unknown_strategy_is_a_group_error_naming_the_known_ones():
    with pytest.raises(UnknownAssignorError) as caught:
        get_assignor("uniform")
    assert isinstance(caught.value, GroupError)
    message = str(caught.value)
    assert "'uniform'" in message and "\n" not in message
    for name in ASSIGNORS:
        assert name in message


def test_subscription_defaults():
    sub = Subscription(("t",))
    assert (sub.user_data, sub.owned_partitions, sub.generation_id, sub.group_instance_id, sub.rack_id) == (
        None,
        (),
        -1,
        None,
        None,
    )
    with pytest.raises(AttributeError):
        sub.topics = ("u",)  # frozen


# -- javadoc examples --------------------------------------------------------------------------

T01 = ("t0", "t1")
T4 = ("t0", "t1", "t2", "t3")


def test_range_javadoc_example():
    result = get_assignor("range").assign({"t0": 3, "t1": 3}, {"C0": S(T01), "C1": S(T01)})
    assert shown(result) == {"C0": "t0-0 t0-1 t1-0 t1-1", "C1": "t0-2 t1-2"}


def test_range_javadoc_static_membership_keeps_the_assignment_across_new_member_ids():
    # After a rolling bounce C0 -> C3, C1 -> C2: by member id the ranges would swap; with
    # instance ids I0, I1 they stay.
    dynamic = get_assignor("range").assign({"t0": 3, "t1": 3}, {"C3": S(T01), "C2": S(T01)})
    assert shown(dynamic) == {"C3": "t0-2 t1-2", "C2": "t0-0 t0-1 t1-0 t1-1"}
    static = get_assignor("range").assign(
        {"t0": 3, "t1": 3}, {"C3": S(T01, group_instance_id="I0"), "C2": S(T01, group_instance_id="I1")}
    )
    assert shown(static) == {"C3": "t0-0 t0-1 t1-0 t1-1", "C2": "t0-2 t1-2"}


def test_roundrobin_javadoc_equal_subscriptions():
    result = get_assignor("roundrobin").assign({"t0": 3, "t1": 3}, {"C0": S(T01), "C1": S(T01)})
    assert shown(result) == {"C0": "t0-0 t0-2 t1-1", "C1": "t0-1 t1-0 t1-2"}


def test_roundrobin_javadoc_unequal_subscriptions():
    subs = {"C0": S(("t0",)), "C1": S(("t0", "t1")), "C2": S(("t0", "t1", "t2"))}
    result = get_assignor("roundrobin").assign({"t0": 1, "t1": 2, "t2": 3}, subs)
    assert shown(result) == {"C0": "t0-0", "C1": "t1-0", "C2": "t1-1 t2-0 t2-1 t2-2"}


def test_roundrobin_javadoc_static_membership():
    ppt = {"t0": 3, "t1": 3}
    before = get_assignor("roundrobin").assign(ppt, {"C0": S(T01), "C1": S(T01), "C2": S(T01)})
    assert shown(before) == {"C0": "t0-0 t1-0", "C1": "t0-1 t1-1", "C2": "t0-2 t1-2"}
    # New member ids C5, C3, C4 (for C0, C1, C2) shuffle a dynamic group...
    shuffled = get_assignor("roundrobin").assign(ppt, {"C5": S(T01), "C3": S(T01), "C4": S(T01)})
    assert shown(shuffled) == {"C5": "t0-2 t1-2", "C3": "t0-0 t1-0", "C4": "t0-1 t1-1"}
    # ...but not a static one.
    static = get_assignor("roundrobin").assign(
        ppt,
        {
            "C5": S(T01, group_instance_id="I0"),
            "C3": S(T01, group_instance_id="I1"),
            "C4": S(T01, group_instance_id="I2"),
        },
    )
    assert shown(static) == {"C5": "t0-0 t1-0", "C3": "t0-1 t1-1", "C4": "t0-2 t1-2"}


@pytest.mark.parametrize("name", ["sticky", "cooperative-sticky"])
def test_sticky_javadoc_example_1_first_assignment(name):
    subs = {c: S(T4) for c in ("C0", "C1", "C2")}
    result = get_assignor(name).assign({t: 2 for t in T4}, subs)
    assert shown(result) == {"C0": "t0-0 t1-1 t3-0", "C1": "t0-1 t2-0 t3-1", "C2": "t1-0 t2-1"}


def test_sticky_javadoc_example_1_after_c1_leaves_keeps_every_previous_partition():
    ppt = {t: 2 for t in T4}
    sticky = get_assignor("sticky")
    first = sticky.assign(ppt, {c: S(T4) for c in ("C0", "C1", "C2")})
    subs = {c: S(T4, user_data=sticky.subscription_user_data(first[c], 1), generation_id=1) for c in ("C0", "C2")}
    result = sticky.assign(ppt, subs)
    for member in ("C0", "C2"):
        assert set(first[member]) <= set(result[member])
    # The javadoc shows C0 [t0p0, t1p1, t3p0, t2p0], C2 [t1p0, t2p1, t0p1, t3p1]: the result
    # of the original algorithm. Since the constrained algorithm (all subscriptions equal)
    # the freed partitions t0-1, t2-0, t3-1 are dealt round-robin to the members under
    # quota sorted by id, which Kafka 4.3.1 confirms (KAFKA_VECTORS). Kafka wins.
    assert shown(result) == {"C0": "t0-0 t0-1 t1-1 t3-0", "C2": "t1-0 t2-0 t2-1 t3-1"}


def test_sticky_javadoc_example_2_unequal_subscriptions():
    ppt = {"t0": 1, "t1": 2, "t2": 3}
    topics = {"C0": ("t0",), "C1": ("t0", "t1"), "C2": ("t0", "t1", "t2")}
    sticky = get_assignor("sticky")
    first = sticky.assign(ppt, {c: S(t) for c, t in topics.items()})
    assert shown(first) == {"C0": "t0-0", "C1": "t1-0 t1-1", "C2": "t2-0 t2-1 t2-2"}
    # C0 leaves: sticky keeps 5 of the 6 assignments.
    subs = {
        c: S(topics[c], user_data=sticky.subscription_user_data(first[c], 1), generation_id=1) for c in ("C1", "C2")
    }
    assert shown(sticky.assign(ppt, subs)) == {"C1": "t0-0 t1-0 t1-1", "C2": "t2-0 t2-1 t2-2"}


# -- Kafka's own results --------------------------------------------------------------------------


def _quota_scenario(name: str) -> dict[str, Subscription]:
    # With 5 partitions and 4 members only one member may keep 2. alice (3 owned) and bob
    # (2 owned) both could; Kafka visits members in HashMap order - carol, dave, bob, alice -
    # so bob keeps 2 and alice 1 (in insertion or name order it would be the other way).
    def sub(owned: str) -> Subscription:
        if not owned:
            return S(("t",))
        if name == "sticky":
            return S(("t",), user_data=sticky_data(owned, 1), generation_id=1)
        return S(("t",), owned_partitions=tps(owned), generation_id=1)

    return {"alice": sub("t-0 t-1 t-2"), "bob": sub("t-3 t-4"), "carol": sub(""), "dave": sub("")}


KAFKA_VECTORS = {
    # name: (assignor, partitions per topic, subscriptions in JoinGroup order, Kafka's result)
    "coop-javadoc-1-after-C1-leaves": (
        "cooperative-sticky",
        {t: 2 for t in T4},
        {
            "C0": S(T4, owned_partitions=tps("t0-0 t1-1 t3-0"), generation_id=1),
            "C2": S(T4, owned_partitions=tps("t1-0 t2-1"), generation_id=1),
        },
        {"C0": "t0-0 t0-1 t1-1 t3-0", "C2": "t1-0 t2-0 t2-1 t3-1"},
    ),
    "sticky-quota-follows-hashmap-order": (
        "sticky",
        {"t": 5},
        _quota_scenario("sticky"),
        {"alice": "t-0", "bob": "t-3 t-4", "carol": "t-1", "dave": "t-2"},
    ),
    "coop-quota-follows-hashmap-order": (
        # Same placement, but t-1 and t-2 change owner (alice -> carol, dave): withheld
        # this round, assigned in the follow-up rebalance.
        "cooperative-sticky",
        {"t": 5},
        _quota_scenario("cooperative-sticky"),
        {"alice": "t-0", "bob": "t-3 t-4", "carol": "", "dave": ""},
    ),
    "coop-same-generation-claims-cancel": (
        # a and b both claim t-1 in generation 3: neither keeps it, and since it was
        # claimed it is withheld this round.
        "cooperative-sticky",
        {"t": 4},
        {
            "a": S(("t",), owned_partitions=tps("t-0 t-1"), generation_id=3),
            "b": S(("t",), owned_partitions=tps("t-1 t-2"), generation_id=3),
        },
        {"a": "t-0", "b": "t-2 t-3"},
    ),
    "coop-higher-generation-wins": (
        "cooperative-sticky",
        {"t": 4},
        {
            "a": S(("t",), owned_partitions=tps("t-0 t-1"), generation_id=2),
            "b": S(("t",), owned_partitions=tps("t-1 t-2"), generation_id=3),
        },
        {"a": "t-0 t-3", "b": "t-1 t-2"},
    ),
    "coop-general-revokes-first": (
        # Unequal subscriptions (general algorithm): a gives up what moves to b and c; the
        # moving partitions are computed from the owned partitions and withheld.
        "cooperative-sticky",
        {"t0": 3, "t1": 3},
        {
            "a": S(T01, owned_partitions=tps("t0-0 t0-1 t0-2 t1-0 t1-1 t1-2"), generation_id=4),
            "b": S(("t1",)),
            "c": S(("t0",)),
        },
        {"a": "t1-1 t1-2", "b": "", "c": ""},
    ),
    "sticky-general-previous-owner": (
        "sticky",
        {"t0": 2, "t1": 4},
        {
            "a": S(T01, user_data=sticky_data("t0-0 t0-1 t1-0", 5), generation_id=5),
            "b": S(("t1",), user_data=sticky_data("t1-1 t1-2 t1-3", 4), generation_id=4),
            "c": S(("t1",), user_data=sticky_data("t1-1", 3), generation_id=3),
        },
        {"a": "t0-0 t0-1", "b": "t1-2 t1-3", "c": "t1-0 t1-1"},
    ),
    "sticky-v0-and-garbage-user-data": (
        # v0 user data (no generation) still counts; unreadable data counts as nothing owned.
        "sticky",
        {"t": 6},
        {
            "old": S(("t",), user_data=sticky_data("t-0 t-1 t-2 t-3", 0)[:-4]),
            "new": S(("t",), user_data=sticky_data("t-4 t-5", 7), generation_id=7),
            "bad": S(("t",), user_data=b"\x00\x00\x00\x09\xff"),
        },
        {"old": "t-0 t-1", "new": "t-4 t-5", "bad": "t-2 t-3"},
    ),
    "range-static-members-first": (
        # Members with a group.instance.id come first (by instance id), then the others.
        "range",
        {"t": 5},
        {"a": S(("t",)), "z": S(("t",), group_instance_id="zz"), "m": S(("t",), group_instance_id="aa")},
        {"a": "t-4", "z": "t-2 t-3", "m": "t-0 t-1"},
    ),
    "range-utf16-member-order": (
        # Java compares UTF-16 code units: U+1F600 (D83D DE00) sorts before U+FF21.
        "range",
        {"t": 3},
        {"\uff21": S(("t",)), "\U0001f600": S(("t",))},
        {"\uff21": "t-2", "\U0001f600": "t-0 t-1"},
    ),
    "roundrobin-unsubscribed-and-missing-topics": (
        # Topics nobody subscribes to, and subscribed topics without metadata or partitions,
        # take no part.
        "roundrobin",
        {"t0": 2, "t1": 3, "extra": 4, "empty": 0},
        {"a": S(("t0", "nope")), "b": S(("t0", "t1", "empty")), "c": S(("t1",))},
        {"a": "t0-0", "b": "t0-1 t1-1", "c": "t1-0 t1-2"},
    ),
    "range-more-members-than-partitions": (
        "range",
        {"t0": 2, "t1": 1},
        {"a": S(T01), "b": S(T01), "c": S(T01)},
        {"a": "t0-0 t1-0", "b": "t0-1", "c": ""},
    ),
}


@pytest.mark.parametrize("case", list(KAFKA_VECTORS))
def test_kafka_vectors(case):
    name, ppt, subs, expected = KAFKA_VECTORS[case]
    result = get_assignor(name).assign(ppt, subs)
    assert list(result) == list(subs)  # every member, in the given order
    assert shown(result) == expected


def test_corrupt_previous_assignment_fails_as_kafka_does():
    # Both members claim partitions the topic does not have; Kafka 4.3.1 throws
    # IllegalStateException("No more unfilled consumers to be assigned.").
    subs = {
        "a": S(("t",), user_data=sticky_data("t-5", 1), generation_id=1),
        "b": S(("t",), user_data=sticky_data("t-6", 1), generation_id=1),
    }
    with pytest.raises(AssignmentFailedError, match="^No more unfilled consumers to be assigned.$") as caught:
        get_assignor("sticky").assign({"t": 2}, subs)
    assert isinstance(caught.value, GroupError)


@pytest.mark.parametrize("name", list(ASSIGNORS))
def test_no_members_and_no_partitions(name):
    assert get_assignor(name).assign({"t": 3}, {}) == {}
    result = get_assignor(name).assign({}, {"a": S(("t",)), "b": S(("u",))})
    assert result == {"a": [], "b": []}


@pytest.mark.parametrize("name", list(ASSIGNORS))
def test_rack_ids_change_nothing_without_replica_racks(name):
    ppt = {"t0": 5, "t1": 3}
    plain = {m: S(T01) for m in ("a", "b", "c")}
    racked = {m: S(T01, rack_id=f"r{i}") for i, m in enumerate(("a", "b", "c"))}
    assert get_assignor(name).assign(ppt, plain) == get_assignor(name).assign(ppt, racked)


# -- user data --------------------------------------------------------------------------------


def test_sticky_user_data_bytes_as_kafka_writes_them():
    sticky = get_assignor("sticky")
    # groupPartitionsByTopic fills a HashMap with computeIfAbsent, which puts a new key at
    # the head of its bucket: t20 and t7 share a bucket, so t7 comes first.
    assert sticky.subscription_user_data(list(tps("t20-5 t7-1")), 1).hex() == (
        "00000002" "0002" + b"t7".hex() + "00000001" "00000001" "0003" + b"t20".hex() + "00000001" "00000005" "00000001"
    )
    assert sticky.subscription_user_data([], 3).hex() == "00000000" "00000003"
    assert sticky.subscription_user_data(None, 3) is None  # never assigned: no user data
    # 14 topics: the table grows to 32 buckets (computeIfAbsent resizes before inserting).
    topics = [f"t{i * 7 % 30}" for i in range(14)]
    assigned = [TopicPartition(t, i) for i, t in enumerate(topics)] + [TopicPartition("t0", 99)]
    assert sticky.subscription_user_data(assigned, 12).hex() == (
        "0000000e0002743500000001000000050002743700000001000000010003743130000000010000000a00037432310000"
        "00010000000300037431320000000100000006000374313400000001000000020003743234000000010000000c000374"
        "323600000001000000080003743137000000010000000b0003743238000000010000000400027430000000020000000000"
        "00006300027431000000010000000d000374313900000001000000070002743300000001000000090000000c"
    )


def test_cooperative_and_eager_user_data():
    assert get_assignor("cooperative-sticky").subscription_user_data(list(tps("t-0")), 7) == b"\x00\x00\x00\x07"
    assert get_assignor("cooperative-sticky").subscription_user_data([], -1) == b"\xff\xff\xff\xff"
    assert get_assignor("range").subscription_user_data(list(tps("t-0")), 7) is None
    assert get_assignor("roundrobin").subscription_user_data(list(tps("t-0")), 7) is None


def test_sticky_user_data_decoding_fallbacks():
    v1 = sticky_data("a-1 b-2 a-3", 9)
    assert decode_sticky_user_data(v1) == (list(tps("a-1 a-3 b-2")), 9)
    assert decode_sticky_user_data(v1 + b"trailing") == (list(tps("a-1 a-3 b-2")), 9)
    assert decode_sticky_user_data(v1[:-4]) == (list(tps("a-1 a-3 b-2")), None)  # v0
    assert decode_sticky_user_data(v1[:-5]) == ([], -1)  # neither parses
    assert decode_sticky_user_data(b"\xff\xff\xff\xff") == ([], -1)  # negative array size
    assert decode_sticky_user_data(b"\x00\x00\x00\x00") == ([], None)  # empty v0


@given(
    st.lists(st.tuples(st.sampled_from(["a", "bb", "t7", "t20", "é"]), st.integers(-(2**31), 2**31 - 1)), max_size=30),
    st.integers(-(2**31), 2**31 - 1),
)
def test_sticky_user_data_round_trip(pairs, generation):
    assigned = [TopicPartition(t, p) for t, p in pairs]
    partitions, decoded_generation = decode_sticky_user_data(encode_sticky_user_data(assigned, generation))
    assert decoded_generation == generation
    assert sorted(partitions) == sorted(assigned)
    for topic in {tp.topic for tp in assigned}:  # per topic, the order given
        assert [tp for tp in partitions if tp.topic == topic] == [tp for tp in assigned if tp.topic == topic]


def test_cooperative_generation_sources():
    # Generation from the subscription (v2+), else from the user data, else none.
    member_data = CooperativeStickyAssignor()._member_data
    assert member_data(S(("t",), user_data=b"\x00\x00\x00\x05", generation_id=3)).generation == 3
    assert member_data(S(("t",), user_data=b"\x00\x00\x00\x05")).generation == 5
    assert member_data(S(("t",), user_data=b"\x00")).generation == -1
    assert member_data(S(("t",))).generation is None
    # StickyAssignor reads only the user data, never owned_partitions.
    sticky = StickyAssignor()._member_data(S(("t",), owned_partitions=tps("t-0"), generation_id=4))
    assert (sticky.partitions, sticky.generation) == ([], None)


# -- Java orders (printed by the JVM that computed KAFKA_VECTORS) -----------------------------


def test_java_hashmap_orders():
    order = assignors_module._java_hashmap_order
    string_hash = assignors_module._java_string_hash
    assert order(["t20", "t7"], string_hash) == ["t20", "t7"]  # put appends in the bucket
    head = assignors_module._JavaHashOrder(string_hash)
    head.add("t20", at_head=True)
    head.add("t7", at_head=True)
    assert list(head) == ["t7", "t20"]  # computeIfAbsent prepends
    keys = [f"t{i * 7 % 30}" for i in range(30)]  # grows 16 -> 32 -> 64 buckets
    assert order(keys, string_hash) == (
        "t4 t5 t6 t7 t8 t9 t10 t12 t11 t14 t13 t16 t15 t18 t17 t19 t21 t20 t23 t22 t25 t24 t27 t26 t29 t28 t0 t1 t2 t3"
    ).split()
    members = ["alice", "bob", "carol", "dave", "C0", "C1", "C2", "C3"]
    assert order(members, string_hash) == ["C3", "carol", "dave", "bob", "alice", "C0", "C1", "C2"]
    partitions = assignors_module._JavaHashOrder(assignors_module._topic_partition_hash)
    for p in (17, 1, 3, 33):
        partitions.add(TopicPartition("t", p))
    assert [str(tp) for tp in partitions] == ["t-3", "t-17", "t-1", "t-33"]
    partitions.remove(TopicPartition("t", 17))
    partitions.add(TopicPartition("t", 17))  # re-added at the end of its bucket
    assert [str(tp) for tp in partitions] == ["t-3", "t-1", "t-33", "t-17"]
    assert string_hash("\U0001f600") == 1772899  # UTF-16 units D83D DE00


# -- kafka-python as an independent oracle ------------------------------------------------------


class _KafkaPythonCluster:
    def __init__(self, ppt):
        self.ppt = ppt

    def partitions_for_topic(self, topic):
        return set(range(self.ppt[topic])) if topic in self.ppt else None

    def topics(self):
        return set(self.ppt)


def kafka_python_assign(assignor, ppt, subs) -> dict[str, list[TopicPartition]]:
    members = [
        SimpleNamespace(
            member_id=member,
            group_instance_id=None,
            metadata=ConsumerProtocolSubscription(version=0, topics=list(sub.topics), user_data=b""),
        )
        for member, sub in subs.items()
    ]
    result = assignor.assign(_KafkaPythonCluster(ppt), members)
    return {
        member: sorted(TopicPartition(t, p) for t, ps in assignment.assigned_partitions for p in ps)
        for member, assignment in result.items()
    }


TOPIC_NAMES = ["t0", "t1", "t2", "orders", "x.y"]


@st.composite
def groups(draw, equal: bool | None = None, max_members: int = 7):
    """(partitions per topic, subscriptions): ASCII dynamic member ids, non-empty subscriptions."""
    topics = draw(st.lists(st.sampled_from(TOPIC_NAMES), min_size=1, max_size=4, unique=True))
    ppt = {t: draw(st.integers(1, 10)) for t in topics}
    ids = draw(st.lists(st.text("abcXYZ019-_", min_size=1, max_size=6), min_size=1, max_size=max_members, unique=True))
    same = draw(st.booleans()) if equal is None else equal
    subs = {}
    for member in ids:
        chosen = topics
        if not same:
            chosen = draw(st.lists(st.sampled_from(topics), min_size=1, max_size=len(topics), unique=True))
        subs[member] = S(tuple(chosen))
    return ppt, subs


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(groups())
def test_range_equals_kafka_python(group):
    ppt, subs = group
    assert get_assignor("range").assign(ppt, subs) == kafka_python_assign(RangePartitionAssignor, ppt, subs)


@SETTINGS
@given(groups(equal=True))
def test_roundrobin_equals_kafka_python_for_equal_subscriptions(group):
    ppt, subs = group
    assert get_assignor("roundrobin").assign(ppt, subs) == kafka_python_assign(RoundRobinPartitionAssignor, ppt, subs)


@SETTINGS
@given(groups())
def test_first_sticky_assignment_equals_kafka_python(group):
    ppt, subs = group
    expected = kafka_python_assign(StickyPartitionAssignor(), ppt, subs)
    assert get_assignor("sticky").assign(ppt, subs) == expected
    # Nobody owns anything yet, so cooperative-sticky revokes nothing: the same result.
    assert get_assignor("cooperative-sticky").assign(ppt, subs) == expected


# -- properties ------------------------------------------------------------------------------


def assert_each_partition_once(ppt, subs, result):
    """Every partition of a subscribed topic goes to exactly one subscriber of it."""
    assert list(result) == list(subs)
    seen = {}
    for member, partitions in result.items():
        assert partitions == sorted(partitions)
        for tp in partitions:
            assert tp.topic in subs[member].topics
            assert tp not in seen, f"{tp} given to {seen[tp]} and {member}"
            seen[tp] = member
    subscribed = {t for sub in subs.values() for t in sub.topics}
    assert set(seen) == {TopicPartition(t, p) for t in subscribed for p in range(ppt.get(t, 0))}


def assert_sticky_balanced(subs, result):
    """StickyAssignor's guarantee: no member has 2+ more partitions than another member
    that could take one of them."""
    for a, mine in result.items():
        for b, theirs in result.items():
            if len(mine) >= len(theirs) + 2:
                assert not any(tp.topic in subs[b].topics for tp in mine), (a, b)


def rebalanced_group(data, ppt, subs):
    """A next generation: some members leave, some join, some change topics."""
    stay = [m for m in subs if data.draw(st.booleans(), label=f"{m} stays")]
    joiners = data.draw(st.lists(st.text("pqr", min_size=1, max_size=3), max_size=2, unique=True), label="joiners")
    topics = list(ppt)
    new = {}
    for member in stay + [j for j in joiners if j not in subs]:
        if member in subs and data.draw(st.booleans(), label="keeps topics"):
            chosen = subs[member].topics
        else:
            chosen = tuple(data.draw(st.lists(st.sampled_from(topics), min_size=1, unique=True), label="topics"))
        new[member] = chosen
    return new


@SETTINGS
@given(groups(max_members=9), st.data())
def test_assignments_are_complete_and_sticky_ones_balanced(group, data):
    ppt, subs = group
    for name in ASSIGNORS:
        result = get_assignor(name).assign(ppt, subs)
        assert_each_partition_once(ppt, subs, result)
        if name in ("sticky", "cooperative-sticky"):
            assert_sticky_balanced(subs, result)
    # A rebalance of the eager sticky assignor is complete and balanced too.
    sticky = get_assignor("sticky")
    first = sticky.assign(ppt, subs)
    topics = rebalanced_group(data, ppt, subs)
    if topics:
        again = {
            m: S(t, user_data=sticky.subscription_user_data(first[m], 1) if m in first else None, generation_id=1)
            for m, t in topics.items()
        }
        result = sticky.assign(ppt, again)
        assert_each_partition_once(ppt, again, result)
        assert_sticky_balanced(again, result)


@SETTINGS
@given(groups(max_members=9), st.data())
def test_rerun_with_the_previous_result_changes_nothing(group, data):
    ppt, subs = group
    # Start from a rebalanced state, not only a fresh one.
    sticky = get_assignor("sticky")
    first = sticky.assign(ppt, subs)
    topics = rebalanced_group(data, ppt, subs) or {m: s.topics for m, s in subs.items()}
    second = sticky.assign(
        ppt,
        {m: S(t, user_data=sticky.subscription_user_data(first.get(m), 1), generation_id=1) for m, t in topics.items()},
    )
    again = {m: S(t, user_data=sticky.subscription_user_data(second[m], 2), generation_id=2) for m, t in topics.items()}
    assert sticky.assign(ppt, again) == second

    cooperative = get_assignor("cooperative-sticky")
    fresh = cooperative.assign(ppt, {m: S(t) for m, t in topics.items()})
    owned = {m: S(t, owned_partitions=tuple(fresh[m]), generation_id=1) for m, t in topics.items()}
    assert cooperative.assign(ppt, owned) == fresh


@SETTINGS
@given(groups(max_members=9), st.data())
def test_cooperative_never_moves_a_partition_within_one_round(group, data):
    ppt, subs = group
    cooperative = get_assignor("cooperative-sticky")
    first = cooperative.assign(ppt, subs)
    topics = rebalanced_group(data, ppt, subs)
    owned = {m: tuple(first.get(m, ())) for m in topics}
    generation = 1
    for _round in range(3):
        current = {m: S(t, owned_partitions=owned[m], generation_id=generation) for m, t in topics.items()}
        result = cooperative.assign(ppt, current)
        owner = {tp: m for m, partitions in owned.items() for tp in partitions}
        for member, partitions in result.items():
            for tp in partitions:
                assert owner.get(tp, member) == member, f"{tp} moves from {owner[tp]} to {member} in one round"
                assert tp.topic in topics[member]
        assert sum(map(len, result.values())) == len({tp for p in result.values() for tp in p})
        owned = {m: tuple(p) for m, p in result.items()}
        generation += 1


@SETTINGS
@given(groups(equal=True, max_members=9), st.data())
def test_cooperative_converges_in_two_rounds_with_equal_subscriptions(group, data):
    # Round 1 only withholds partitions; nobody then holds more than its quota, so round 2
    # assigns the withheld ones without revoking anything.
    ppt, subs = group
    cooperative = get_assignor("cooperative-sticky")
    first = cooperative.assign(ppt, subs)
    members = [m for m in subs if data.draw(st.booleans())] + ["new-1", "new-2"][: data.draw(st.integers(0, 2))]
    members = members or ["new-1"]
    topics = next(iter(subs.values())).topics
    owned = {m: tuple(first.get(m, ())) for m in members}
    round1 = cooperative.assign(ppt, {m: S(topics, owned_partitions=owned[m], generation_id=1) for m in members})
    round2 = cooperative.assign(
        ppt, {m: S(topics, owned_partitions=tuple(round1[m]), generation_id=2) for m in members}
    )
    for member in members:
        assert set(round1[member]) <= set(round2[member])
    assert_each_partition_once(ppt, {m: S(topics) for m in members}, round2)
    sizes = [len(p) for p in round2.values()]
    assert max(sizes) - min(sizes) <= 1


def test_struct_helpers_are_big_endian():
    # A guard on the wire format used above: int32 counts, int16 string lengths.
    data = sticky_data("ab-258", -2)
    assert data == struct.pack(">ih2sii", 1, 2, b"ab", 1, 258) + struct.pack(">i", -2)
