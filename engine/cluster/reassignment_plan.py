"""The plan of a partition reassignment (``kafka-reassign-partitions.sh``'s ``--generate``
and the checks its ``--execute`` makes before moving anything), for a plog data directory.

**Plans** are Kafka's JSON, read and written exactly as ``ReassignPartitionsCommand`` does:

* topics to move: ``{"version":1,"topics":[{"topic":"foo"}]}``;
* a reassignment: ``{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[1,2],
  "log_dirs":["any","any"]}]}``, where ``log_dirs`` is optional on input and written as
  ``"any"`` (each broker of a data directory has one log directory, so the only other
  accepted value is that directory's absolute path).

:func:`generate_reassignment` proposes a plan (Kafka's replica placement over a broker
list); :func:`validate_plan` checks one against the data directory, with Kafka's messages in
Kafka's order. Nothing here changes a file: engine.cluster.reassignment executes and
verifies plans.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from plog.engine.cluster.data_dir import DataDir
from plog.engine.cluster.placement import BrokerMetadata, assign_replicas_to_brokers
from plog.engine.errors import (
    BrokerNotAvailableError,
    InvalidReplicaAssignmentError,
    ReassignmentJsonError,
    UnknownTopicOrPartitionError,
)
from plog.engine.storage.file_names import TopicPartition

ANY_LOG_DIR = "any"
PLAN_VERSION = 1
TOPICS_JSON_VERSION = 1


# -- Kafka's JSON ------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlannedPartition:
    """One ``partitions`` entry of a reassignment plan, as written (duplicates are kept so
    that validation can name them)."""

    tp: TopicPartition
    replicas: tuple[int, ...]
    log_dirs: tuple[str, ...]


def _load_json(text: str | bytes) -> dict:
    try:
        data = json.loads(text)
    except ValueError as e:
        raise ReassignmentJsonError(f"The input string is not a valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise ReassignmentJsonError("The input string is not a valid JSON object")
    return data


def _field(obj, name: str, kind, what: str):
    if not isinstance(obj, dict) or name not in obj:
        raise ReassignmentJsonError(f"No such field exists: `{name}` in {what}")
    value = obj[name]
    ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
    if not ok:
        raise ReassignmentJsonError(f"`{name}` in {what} must be {_kind_name(kind)}, not {json.dumps(value)}")
    return value


def _kind_name(kind) -> str:
    return {int: "an integer", str: "a string", list: "an array"}.get(kind, kind.__name__)


def _version(data: dict, default: int) -> int:
    version = data.get("version", default)
    if not isinstance(version, int) or isinstance(version, bool) or version != 1:
        raise ReassignmentJsonError(f"Not supported version field value {version}")
    return version


def parse_topics_to_move(text: str | bytes) -> list[str]:
    """The topics of a ``--topics-to-move-json-file`` document, in file order.

    Raises :class:`ReassignmentJsonError`; duplicates are Kafka's error too:
    ``List of topics to reassign contains duplicate entries: [foo]``."""
    data = _load_json(text)
    _version(data, TOPICS_JSON_VERSION)
    topics = []
    for i, entry in enumerate(data.get("topics") or []):
        topics.append(_field(entry, "topic", str, f"topics[{i}]"))
    _check_no_duplicate_topics(topics)
    return topics


def parse_reassignment_json(text: str | bytes) -> list[PlannedPartition]:
    """The ``partitions`` of a ``--reassignment-json-file`` document, in file order.

    Only the document's shape is checked here (Kafka's ``parsePartitionReassignmentData``);
    :func:`validate_plan` checks it against a data directory."""
    data = _load_json(text)
    _version(data, PLAN_VERSION)
    out = []
    for i, entry in enumerate(data.get("partitions") or []):
        what = f"partitions[{i}]"
        topic = _field(entry, "topic", str, what)
        partition = _field(entry, "partition", int, what)
        replicas = _field(entry, "replicas", list, what)
        for r in replicas:
            if not isinstance(r, int) or isinstance(r, bool):
                raise ReassignmentJsonError(f"`replicas` in {what} must hold broker ids, not {json.dumps(r)}")
        if entry.get("log_dirs") is not None:
            log_dirs = _field(entry, "log_dirs", list, what)
            for d in log_dirs:
                if not isinstance(d, str):
                    raise ReassignmentJsonError(f"`log_dirs` in {what} must hold strings, not {json.dumps(d)}")
        else:
            log_dirs = [ANY_LOG_DIR] * len(replicas)
        tp = TopicPartition(topic, partition)
        if len(replicas) != len(log_dirs):
            raise InvalidReplicaAssignmentError(
                f"Size of replicas list {_java_list(replicas)} is different from size of log dirs list "
                f"{_java_list(log_dirs)} for partition {tp}")
        out.append(PlannedPartition(tp, tuple(replicas), tuple(log_dirs)))
    return out


def plan_from_assignment(assignment: Mapping[TopicPartition, Sequence[int]]) -> list[PlannedPartition]:
    """A plan moving each partition of ``assignment`` to its replica list."""
    return [PlannedPartition(TopicPartition(*tp), tuple(r), (ANY_LOG_DIR,) * len(r))
            for tp, r in _sorted_items(assignment)]


def reassignment_document(assignment: Mapping[TopicPartition, Sequence[int]]) -> dict:
    """Kafka's ``formatAsReassignmentJson`` as a dict: partitions sorted by (topic, partition),
    keys in Kafka's order, every log dir ``"any"``."""
    return {"version": PLAN_VERSION,
            "partitions": [{"topic": tp.topic, "partition": tp.partition, "replicas": list(r),
                            "log_dirs": [ANY_LOG_DIR] * len(r)} for tp, r in _sorted_items(assignment)]}


def format_reassignment_json(assignment: Mapping[TopicPartition, Sequence[int]]) -> str:
    """The JSON text Kafka prints (Jackson's compact form, no spaces)."""
    return json.dumps(reassignment_document(assignment), separators=(",", ":"), ensure_ascii=False)


def _sorted_items(assignment: Mapping) -> list[tuple[TopicPartition, Sequence[int]]]:
    return sorted(((TopicPartition(*tp), r) for tp, r in assignment.items()), key=lambda kv: (kv[0].topic, kv[0].partition))


def _duplicates(items: Iterable) -> list:
    seen, dups = set(), []
    for x in items:
        if x in seen and x not in dups:
            dups.append(x)
        seen.add(x)
    return dups


def _check_no_duplicate_topics(topics: Sequence[str]) -> None:
    dups = _duplicates(topics)
    if dups:
        raise InvalidReplicaAssignmentError(
            f"List of topics to reassign contains duplicate entries: [{', '.join(dups)}]")


def _java_list(items: Sequence) -> str:
    return "[" + ", ".join(str(x) for x in items) + "]"


def broker_ids_text(replicas: Sequence[int]) -> str:
    """Broker ids as Kafka's reassignment messages print them: ``1,2,3``."""
    return ",".join(str(b) for b in replicas)


# -- generate ------------------------------------------------------------------------------------


def current_assignment(dd: DataDir, topics: Iterable[str]) -> dict[TopicPartition, list[int]]:
    """Every partition of ``topics`` with its replica list (Kafka: ``Topic foo not found.``)."""
    out = {}
    for topic in topics:
        if not dd.has_topic(topic):
            raise UnknownTopicOrPartitionError(f"Topic {topic} not found.")
        for p, replicas in enumerate(dd.topic(topic).replicas):
            out[TopicPartition(topic, p)] = list(replicas)
    return out


@dataclass
class GeneratedPlan:
    """``--generate``: the current assignment (for rollback) and the proposal."""

    current: dict[TopicPartition, list[int]]
    proposed: dict[TopicPartition, list[int]]


def generate_reassignment(dd: DataDir, topics: Sequence[str], broker_ids: Sequence[int], *,
                          rack_aware: bool = True, rng=None) -> GeneratedPlan:
    """Kafka's ``generateAssignment``: for each topic, ``assignReplicasToBrokers`` over
    ``broker_ids`` with the topic's partition count and the replication factor of its
    partition 0 (§17.2). Nothing is changed on disk.

    Kafka silently ignores listed brokers the cluster does not have; here that is an error
    (``Unknown broker id 7``), since a proposal over fewer brokers than asked is surprising.
    """
    dd.reload()
    dups = _duplicates(broker_ids)
    if dups:
        raise InvalidReplicaAssignmentError(f"Broker list contains duplicate entries: [{', '.join(map(str, dups))}]")
    _check_no_duplicate_topics(topics)
    if not broker_ids:
        raise BrokerNotAvailableError("The broker list is empty")
    racks = {b.id: b.rack for b in dd.brokers}
    for b in broker_ids:
        if b not in racks:
            raise BrokerNotAvailableError(f"Unknown broker id {b}")
    brokers = [BrokerMetadata(b, racks[b] if rack_aware else None) for b in broker_ids]
    rackless = sum(1 for m in brokers if m.rack is None)
    if rack_aware and rackless not in (0, len(brokers)):
        raise InvalidReplicaAssignmentError(
            "Not all brokers have rack information. Add --disable-rack-aware in command line to make replica "
            "assignment without rack information.")
    current = current_assignment(dd, topics)
    proposed: dict[TopicPartition, list[int]] = {}
    for topic in topics:
        t = dd.topic(topic)
        if not t.partitions:
            continue
        assignment = assign_replicas_to_brokers(brokers, t.partitions, len(t.replicas[0]), rng=rng)
        for p, replicas in assignment.items():
            proposed[TopicPartition(topic, p)] = list(replicas)
    return GeneratedPlan(current, proposed)


# -- validation ----------------------------------------------------------------------------------


def validate_plan(dd: DataDir, plan: Sequence[PlannedPartition]) -> dict[TopicPartition, list[int]]:
    """Check ``plan`` against the data directory as ``--execute`` does, in Kafka's order and
    with Kafka's messages; returns ``{tp: new replicas}`` in plan order.

    Raises :class:`InvalidReplicaAssignmentError` (empty plan, empty replica list, duplicate
    partitions or replicas, a log dir that is not the broker's),
    :class:`BrokerNotAvailableError` (``Unknown broker id 7``) or
    :class:`UnknownTopicOrPartitionError` (``Topic foo not found.``,
    ``Unable to find partition: foo-5``)."""
    if not plan:
        raise InvalidReplicaAssignmentError("Partition reassignment list cannot be empty")
    if any(not entry.replicas for entry in plan):
        raise InvalidReplicaAssignmentError("Partition replica list cannot be empty")
    dup_parts = _duplicates(entry.tp for entry in plan)
    if dup_parts:
        raise InvalidReplicaAssignmentError(
            "Partition reassignment contains duplicate topic partitions: " + ",".join(map(str, dup_parts)))
    dup_replicas = [(entry.tp, _duplicates(entry.replicas)) for entry in plan if _duplicates(entry.replicas)]
    if dup_replicas:
        raise InvalidReplicaAssignmentError(
            "Partition replica lists may not contain duplicate entries: "
            + ". ".join(f"{tp} contains multiple entries for {broker_ids_text(d)}" for tp, d in dup_replicas))
    known = set(dd.broker_ids)
    for entry in plan:
        for b in entry.replicas:
            if b not in known:
                raise BrokerNotAvailableError(f"Unknown broker id {b}")
    for entry in plan:
        if not dd.has_topic(entry.tp.topic):
            raise UnknownTopicOrPartitionError(f"Topic {entry.tp.topic} not found.")
    missing = [entry.tp for entry in plan if not 0 <= entry.tp.partition < dd.topic(entry.tp.topic).partitions]
    if missing:
        raise UnknownTopicOrPartitionError("Unable to find partition: " + ", ".join(map(str, missing)))
    for entry in plan:
        for b, d in zip(entry.replicas, entry.log_dirs):
            if d == ANY_LOG_DIR:
                continue
            own = dd.broker_log_dir(b)
            if not os.path.isabs(d) or Path(d).resolve() != own.resolve():
                raise InvalidReplicaAssignmentError(
                    f"Log directory {d} of replica {b} of {entry.tp} is not a log directory of broker {b}: "
                    f"each broker here has one, {own}; write \"any\"")
    return {entry.tp: list(entry.replicas) for entry in plan}


__all__ = [
    "ANY_LOG_DIR",
    "GeneratedPlan",
    "PlannedPartition",
    "ReassignmentJsonError",
    "current_assignment",
    "format_reassignment_json",
    "generate_reassignment",
    "parse_reassignment_json",
    "parse_topics_to_move",
    "plan_from_assignment",
    "reassignment_document",
    "validate_plan",
]
