"""``__consumer_offsets`` records: keys, values, the partition of a group, and the consumer
protocol blobs stored inside group metadata.

Every record of the topic is a coordinator record::

    key   = int16 record type (Kafka calls it the key version)  + key struct   (non-flexible)
    value = int16 value version                                 + value struct
            or null: a tombstone, the offset / group / member was deleted

The record type picks both schemas (group-coordinator ``*.json`` schemas; the key struct is
always read at version 0, the value struct at the value's own version):

====  ===========================================  ================================  ==========
type  kind                                         key fields                        values
====  ===========================================  ================================  ==========
0, 1  ``offset_commit`` (0: Kafka 0.8.2; 1 since)   group, topic, partition           v0-v4
2     ``group_metadata`` (classic groups)          group                             v0-v4
3     ``consumer_group_metadata`` (KIP-848)        groupId                           v0 flex
4     ``consumer_group_partition_metadata``        groupId                           v0 flex
5     ``consumer_group_member_metadata``           groupId, memberId                 v0 flex
6     ``consumer_group_target_assignment_metadata`` groupId                          v0 flex
7     ``consumer_group_target_assignment_member``  groupId, memberId                 v0 flex
8     ``consumer_group_current_member_assignment`` groupId, memberId                 v0 flex
9     ``share_group_partition_metadata`` (KIP-932) groupId                           v0 flex
10    ``share_group_member_metadata``              groupId, memberId                 v0 flex
11    ``share_group_metadata``                     groupId                           v0 flex
12    ``share_group_target_assignment_metadata``   groupId                           v0 flex
13    ``share_group_target_assignment_member``     groupId, memberId                 v0 flex
14    ``share_group_current_member_assignment``    groupId, memberId                 v0 flex
15    ``share_group_state_partition_metadata``     groupId                           v0 flex
16    ``consumer_group_regular_expression``        groupId, regularExpression        v0 flex
====  ===========================================  ================================  ==========

Types 17+ (KIP-1071 streams groups, Kafka 4.1+) are not described here and raise
:class:`~plog.formats.protocol.UnknownRecordTypeError`.

OffsetCommitValue versions (Kafka writes 3, or 1 when an expire timestamp is given)::

    v0  offset int64, metadata string, commitTimestamp int64
    v1  offset, metadata, commitTimestamp, expireTimestamp int64
    v2  offset, metadata, commitTimestamp
    v3  offset, leaderEpoch int32, metadata, commitTimestamp
    v4  v3, flexible (compact string, tagged fields); Kafka 4.x: tagged topicId (tag 0)

GroupMetadataValue versions (Kafka writes 3)::

    protocolType string, generation int32, protocol string?, leader string?,
    currentStateTimestamp int64 (v2+), members [MemberMetadata]
    MemberMetadata: memberId string, groupInstanceId string? (v3+), clientId string,
    clientHost string, rebalanceTimeout int32 (v1+), sessionTimeout int32,
    subscription bytes, assignment bytes
    v4 is flexible

The consumer protocol (``protocolType == "consumer"``) stores each member's subscription
and assignment as ``int16 version`` + ConsumerProtocolSubscription / -Assignment (v0-v3,
non-flexible); see :func:`decode_consumer_subscription`.

:func:`dump_key_json` / :func:`dump_value_json` print a record as Kafka 3.8+/4.x
``kafka-dump-log.sh --offsets-decoder`` does: ``{"type":"<key version>","data":{...}}``
and ``{"version":"<value version>","data":{...}}`` (or ``<DELETE>`` for a tombstone),
with each consumer-protocol member's subscription/assignment replaced by its decoded JSON.

The KIP-848 and share-group value schemas are those of Kafka 4.x trunk. Share groups were
a preview feature whose schemas changed incompatibly between releases; where two layouts
of the same version exist (ShareGroupMetadataValue with and without ``metadataHash``) both
are tried, and the one that consumes the value exactly wins.
"""

from __future__ import annotations

from typing import Any, Mapping, NamedTuple

from .errors import SchemaError
from .java import string_hash_code as java_string_hash  # noqa: F401  (re-exported: the group -> partition hash)
from .protocol import Array, Field, Struct, UnknownRecordTypeError, decode, encode, jackson_dumps, to_kafka_json

# --------------------------------------------------------------------------- key schemas

OFFSET_COMMIT_KEY = Struct(
    "OffsetCommitKey",
    [Field("group", "string"), Field("topic", "string"), Field("partition", "int32")],
)
GROUP_METADATA_KEY = Struct("GroupMetadataKey", [Field("group", "string")])


def _group_key(name: str) -> Struct:
    return Struct(name, [Field("groupId", "string")])


def _member_key(name: str) -> Struct:
    return Struct(name, [Field("groupId", "string"), Field("memberId", "string")])


# --------------------------------------------------------------------------- value schemas

OFFSET_COMMIT_VALUE = Struct(
    "OffsetCommitValue",
    [
        Field("offset", "int64"),
        Field("leaderEpoch", "int32", "3+", default=-1),
        Field("metadata", "string"),
        Field("commitTimestamp", "int64"),
        Field("expireTimestamp", "int64", "1", default=-1),
        # Kafka 4.x (not 3.x): a tagged topic id, printed by the dump when not zero.
        Field("topicId", "uuid", "4+", tagged=0),
    ],
    valid_versions="0-4",
    flexible_versions="4+",
)

GROUP_MEMBER_METADATA = Struct(
    "MemberMetadata",
    [
        Field("memberId", "string"),
        Field("groupInstanceId", "string", "3+", nullable_versions="3+", default=None),
        Field("clientId", "string"),
        Field("clientHost", "string"),
        Field("rebalanceTimeout", "int32", "1+"),
        Field("sessionTimeout", "int32"),
        Field("subscription", "bytes"),
        Field("assignment", "bytes"),
    ],
)

GROUP_METADATA_VALUE = Struct(
    "GroupMetadataValue",
    [
        Field("protocolType", "string"),
        Field("generation", "int32"),
        Field("protocol", "string", nullable_versions="0+"),
        Field("leader", "string", nullable_versions="0+"),
        Field("currentStateTimestamp", "int64", "2+", default=-1),
        Field("members", Array(GROUP_MEMBER_METADATA)),
    ],
    valid_versions="0-4",
    flexible_versions="4+",
)

CONSUMER_GROUP_METADATA_VALUE = Struct(
    "ConsumerGroupMetadataValue",
    [
        Field("epoch", "int32"),
        # KIP-1101 (4.1): hash of the subscribed topics' metadata.
        Field("metadataHash", "int64", tagged=0, default=0),
        # KIP-1282: creation time, anchor for the to_start_time reset policy.
        Field("creationTimeMs", "int64", tagged=1, default=-1),
    ],
    flexible_versions="0+",
)

_PARTITION_RACKS = Struct("PartitionMetadata", [Field("partition", "int32"), Field("racks", Array("string"))])
_TOPIC_METADATA = Struct(
    "TopicMetadata",
    [
        Field("topicId", "uuid"),
        Field("topicName", "string"),
        Field("numPartitions", "int32"),
        Field("partitionMetadata", Array(_PARTITION_RACKS)),
    ],
)
CONSUMER_GROUP_PARTITION_METADATA_VALUE = Struct(
    "ConsumerGroupPartitionMetadataValue", [Field("topics", Array(_TOPIC_METADATA))], flexible_versions="0+"
)

_CLASSIC_PROTOCOL = Struct("ClassicProtocol", [Field("name", "string"), Field("metadata", "bytes")])
_CLASSIC_MEMBER_METADATA = Struct(
    "ClassicMemberMetadata",
    [Field("sessionTimeoutMs", "int32"), Field("supportedProtocols", Array(_CLASSIC_PROTOCOL))],
)
CONSUMER_GROUP_MEMBER_METADATA_VALUE = Struct(
    "ConsumerGroupMemberMetadataValue",
    [
        Field("instanceId", "string", nullable_versions="0+"),
        Field("rackId", "string", nullable_versions="0+"),
        Field("clientId", "string"),
        Field("clientHost", "string"),
        Field("subscribedTopicNames", Array("string")),
        Field("subscribedTopicRegex", "string", nullable_versions="0+"),
        Field("rebalanceTimeoutMs", "int32", default=-1),
        Field("serverAssignor", "string", nullable_versions="0+"),
        # Set while a classic-protocol consumer is a member of a KIP-848 group.
        Field("classicMemberMetadata", _CLASSIC_MEMBER_METADATA, nullable_versions="0+", tagged=0, default=None),
    ],
    flexible_versions="0+",
)

CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE = Struct(
    "ConsumerGroupTargetAssignmentMetadataValue",
    [
        Field("assignmentEpoch", "int32"),
        Field("assignmentTimestamp", "int64", tagged=0, default=0),  # KIP-1263
    ],
    flexible_versions="0+",
)

_TOPIC_PARTITION_IDS = Struct("TopicPartition", [Field("topicId", "uuid"), Field("partitions", Array("int32"))])
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE = Struct(
    "ConsumerGroupTargetAssignmentMemberValue",
    [Field("topicPartitions", Array(_TOPIC_PARTITION_IDS))],
    flexible_versions="0+",
)

_CURRENT_TOPIC_PARTITIONS = Struct(
    "TopicPartitions",
    [
        Field("topicId", "uuid"),
        Field("partitions", Array("int32")),
        # KIP-1251: the epoch at which each partition was assigned, aligned with partitions.
        Field("assignmentEpochs", Array("int32"), nullable_versions="0+", tagged=0, default=None),
    ],
)
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE = Struct(
    "ConsumerGroupCurrentMemberAssignmentValue",
    [
        Field("memberEpoch", "int32"),
        Field("previousMemberEpoch", "int32"),
        Field("state", "int8"),
        Field("assignedPartitions", Array(_CURRENT_TOPIC_PARTITIONS)),
        Field("partitionsPendingRevocation", Array(_CURRENT_TOPIC_PARTITIONS)),
    ],
    flexible_versions="0+",
)

SHARE_GROUP_PARTITION_METADATA_VALUE = Struct(
    "ShareGroupPartitionMetadataValue", [Field("topics", Array(_TOPIC_METADATA))], flexible_versions="0+"
)
SHARE_GROUP_MEMBER_METADATA_VALUE = Struct(
    "ShareGroupMemberMetadataValue",
    [
        Field("rackId", "string", nullable_versions="0+"),
        Field("clientId", "string"),
        Field("clientHost", "string"),
        Field("subscribedTopicNames", Array("string")),
    ],
    flexible_versions="0+",
)
SHARE_GROUP_METADATA_VALUE = Struct(
    "ShareGroupMetadataValue", [Field("epoch", "int32"), Field("metadataHash", "int64")], flexible_versions="0+"
)
# The 4.0 preview layout, before metadataHash was added to the same version 0.
SHARE_GROUP_METADATA_VALUE_PREVIEW = Struct(
    "ShareGroupMetadataValue", [Field("epoch", "int32")], flexible_versions="0+"
)
SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE = Struct(
    "ShareGroupTargetAssignmentMetadataValue", [Field("assignmentEpoch", "int32")], flexible_versions="0+"
)
SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE = Struct(
    "ShareGroupTargetAssignmentMemberValue",
    [Field("topicPartitions", Array(_TOPIC_PARTITION_IDS))],
    flexible_versions="0+",
)
_SHARE_TOPIC_PARTITIONS = Struct("TopicPartitions", [Field("topicId", "uuid"), Field("partitions", Array("int32"))])
SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE = Struct(
    "ShareGroupCurrentMemberAssignmentValue",
    [
        Field("memberEpoch", "int32"),
        Field("previousMemberEpoch", "int32"),
        Field("state", "int8"),
        Field("assignedPartitions", Array(_SHARE_TOPIC_PARTITIONS)),
    ],
    flexible_versions="0+",
)
SHARE_GROUP_STATE_PARTITION_METADATA_VALUE = Struct(
    "ShareGroupStatePartitionMetadataValue",
    [
        Field(
            "initializedTopics",
            Array(
                Struct(
                    "TopicPartitionsInfo",
                    [Field("topicId", "uuid"), Field("topicName", "string"), Field("partitions", Array("int32"))],
                )
            ),
        ),
        Field("deletingTopics", Array(Struct("TopicInfo", [Field("topicId", "uuid"), Field("topicName", "string")]))),
    ],
    flexible_versions="0+",
)
CONSUMER_GROUP_REGULAR_EXPRESSION_VALUE = Struct(
    "ConsumerGroupRegularExpressionValue",
    [Field("topics", Array("string")), Field("version", "int64"), Field("timestamp", "int64")],
    flexible_versions="0+",
)

# --------------------------------------------------------------------------- registry


class RecordType(NamedTuple):
    """One coordinator record type: its key schema and the value layouts to try, in order."""

    type_id: int
    kind: str
    key_schema: Struct
    value_schemas: tuple[Struct, ...]


def _rt(type_id: int, kind: str, key: Struct, *values: Struct) -> RecordType:
    return RecordType(type_id, kind, key, values)


RECORD_TYPES: dict[int, RecordType] = {
    rt.type_id: rt
    for rt in (
        _rt(0, "offset_commit", OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE),
        _rt(1, "offset_commit", OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE),
        _rt(2, "group_metadata", GROUP_METADATA_KEY, GROUP_METADATA_VALUE),
        _rt(3, "consumer_group_metadata", _group_key("ConsumerGroupMetadataKey"), CONSUMER_GROUP_METADATA_VALUE),
        _rt(
            4,
            "consumer_group_partition_metadata",
            _group_key("ConsumerGroupPartitionMetadataKey"),
            CONSUMER_GROUP_PARTITION_METADATA_VALUE,
        ),
        _rt(
            5,
            "consumer_group_member_metadata",
            _member_key("ConsumerGroupMemberMetadataKey"),
            CONSUMER_GROUP_MEMBER_METADATA_VALUE,
        ),
        _rt(
            6,
            "consumer_group_target_assignment_metadata",
            _group_key("ConsumerGroupTargetAssignmentMetadataKey"),
            CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE,
        ),
        _rt(
            7,
            "consumer_group_target_assignment_member",
            _member_key("ConsumerGroupTargetAssignmentMemberKey"),
            CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE,
        ),
        _rt(
            8,
            "consumer_group_current_member_assignment",
            _member_key("ConsumerGroupCurrentMemberAssignmentKey"),
            CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE,
        ),
        _rt(
            9,
            "share_group_partition_metadata",
            _group_key("ShareGroupPartitionMetadataKey"),
            SHARE_GROUP_PARTITION_METADATA_VALUE,
        ),
        _rt(
            10,
            "share_group_member_metadata",
            _member_key("ShareGroupMemberMetadataKey"),
            SHARE_GROUP_MEMBER_METADATA_VALUE,
        ),
        _rt(
            11,
            "share_group_metadata",
            _group_key("ShareGroupMetadataKey"),
            SHARE_GROUP_METADATA_VALUE,
            SHARE_GROUP_METADATA_VALUE_PREVIEW,
        ),
        _rt(
            12,
            "share_group_target_assignment_metadata",
            _group_key("ShareGroupTargetAssignmentMetadataKey"),
            SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE,
        ),
        _rt(
            13,
            "share_group_target_assignment_member",
            _member_key("ShareGroupTargetAssignmentMemberKey"),
            SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE,
        ),
        _rt(
            14,
            "share_group_current_member_assignment",
            _member_key("ShareGroupCurrentMemberAssignmentKey"),
            SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE,
        ),
        _rt(
            15,
            "share_group_state_partition_metadata",
            _group_key("ShareGroupStatePartitionMetadataKey"),
            SHARE_GROUP_STATE_PARTITION_METADATA_VALUE,
        ),
        _rt(
            16,
            "consumer_group_regular_expression",
            Struct(
                "ConsumerGroupRegularExpressionKey",
                [Field("groupId", "string"), Field("regularExpression", "string")],
            ),
            CONSUMER_GROUP_REGULAR_EXPRESSION_VALUE,
        ),
    )
}

# kind -> the record type written for it (offset_commit keys are written at type 1).
KIND_TYPE_IDS: dict[str, int] = {}
for _rtype in RECORD_TYPES.values():
    KIND_TYPE_IDS.setdefault(_rtype.kind, _rtype.type_id)
KIND_TYPE_IDS["offset_commit"] = 1

# Every distinct schema in this module (for round-trip tests and tooling).
SCHEMAS: tuple[Struct, ...] = tuple(
    dict.fromkeys(
        [s for rt in RECORD_TYPES.values() for s in (rt.key_schema, *rt.value_schemas)]
    )
)

# --------------------------------------------------------------------------- records


class OffsetsKey(NamedTuple):
    """A decoded key. ``version`` is the int16 prefix (the record type); ``trailing`` holds
    bytes after the key struct, which Kafka ignores (normally empty)."""

    version: int
    kind: str
    fields: dict
    trailing: bytes = b""


class OffsetsValue(NamedTuple):
    """A decoded value. ``schema`` is the layout that decoded it (see the module doc)."""

    version: int
    kind: str
    fields: dict
    schema: Struct
    trailing: bytes = b""


def _read_int16_prefix(b, what: str) -> int:
    if len(b) < 2:
        raise SchemaError(f"{what} of {len(b)} bytes is too short to hold its int16 version", 0)
    return int.from_bytes(b[0:2], "big", signed=True)


def record_type(type_id: int) -> RecordType:
    """The :class:`RecordType` for a key version; raises UnknownRecordTypeError."""
    rt = RECORD_TYPES.get(type_id)
    if rt is None:
        raise UnknownRecordTypeError(type_id, "__consumer_offsets")
    return rt


def decode_key(b: bytes) -> OffsetsKey:
    """Decode a ``__consumer_offsets`` record key."""
    b = bytes(b)
    type_id = _read_int16_prefix(b, "__consumer_offsets key")
    rt = record_type(type_id)
    fields, pos = decode(rt.key_schema, 0, b, 2)
    return OffsetsKey(type_id, rt.kind, fields, b[pos:])


def decode_value(key: "OffsetsKey | int | str", b: bytes | None) -> OffsetsValue | None:
    """Decode a record value with the schema its key implies; ``None`` for a tombstone.

    ``key`` is a decoded key, a record type id, or a kind name.
    """
    if b is None:
        return None
    b = bytes(b)
    rt = _record_type_for(key)
    version = _read_int16_prefix(b, f"{rt.kind} value")
    first_error: SchemaError | None = None
    inexact: list[tuple[Struct, dict, int]] = []
    for schema in rt.value_schemas:
        try:
            fields, pos = decode(schema, version, b, 2)
        except SchemaError as e:
            first_error = first_error or e
            continue
        if pos == len(b):
            return OffsetsValue(version, rt.kind, fields, schema)
        inexact.append((schema, fields, pos))
    if inexact:
        # Kafka's readers ignore bytes after the struct; keep them rather than fail.
        schema, fields, pos = inexact[0]
        return OffsetsValue(version, rt.kind, fields, schema, b[pos:])
    assert first_error is not None
    raise first_error


def _record_type_for(key: "OffsetsKey | int | str") -> RecordType:
    if isinstance(key, OffsetsKey):
        return record_type(key.version)
    if isinstance(key, int):
        return record_type(key)
    if key in KIND_TYPE_IDS:
        return RECORD_TYPES[KIND_TYPE_IDS[key]]
    raise ValueError(f"unknown __consumer_offsets record kind {key!r}")


def encode_key(kind: str, version: int, fields: Mapping) -> bytes:
    """Encode a key of ``kind`` with the int16 prefix ``version`` (its record type)."""
    rt = record_type(version)
    if rt.kind != kind:
        raise ValueError(f"key version {version} is a {rt.kind} key, not {kind}")
    return version.to_bytes(2, "big", signed=True) + encode(rt.key_schema, 0, fields)


def encode_value(kind: str, version: int, fields: Mapping, schema: Struct | None = None) -> bytes:
    """Encode a value of ``kind`` at ``version``. ``schema`` picks a layout when a kind has
    several (as returned in :attr:`OffsetsValue.schema`); by default the layout whose
    fields match ``fields`` is used, else the current one."""
    rt = _record_type_for(kind)
    if schema is None:
        schema = _pick_layout(rt, version, fields)
    elif schema not in rt.value_schemas:
        raise ValueError(f"{schema.name} is not a {kind} value layout")
    return version.to_bytes(2, "big", signed=True) + encode(schema, version, fields)


def _pick_layout(rt: RecordType, version: int, fields: Mapping) -> Struct:
    given = {k for k in fields if k != "_tagged"}
    for schema in rt.value_schemas:
        if schema.supports(version) and given == {f.name for f in schema.fields if f.present_in(version)}:
            return schema
    return rt.value_schemas[0]


def encode_offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    """An offset-commit key, written at key version 1 as every broker since 0.9 does."""
    return encode_key("offset_commit", 1, {"group": group, "topic": topic, "partition": partition})


def encode_offset_commit_value(
    offset: int,
    metadata: str = "",
    commit_timestamp: int = -1,
    leader_epoch: int = -1,
    expire_timestamp: int | None = None,
) -> bytes:
    """An offset-commit value as the group coordinator writes it (§18): version 3, or
    version 1 when an expire timestamp is given (v1 has no leader epoch)."""
    if expire_timestamp is not None:
        fields: dict[str, Any] = {
            "offset": offset,
            "metadata": metadata,
            "commitTimestamp": commit_timestamp,
            "expireTimestamp": expire_timestamp,
        }
        return encode_value("offset_commit", 1, fields)
    fields = {"offset": offset, "leaderEpoch": leader_epoch, "metadata": metadata, "commitTimestamp": commit_timestamp}
    return encode_value("offset_commit", 3, fields)


def encode_group_metadata_key(group: str) -> bytes:
    """A classic group-metadata key (record type 2)."""
    return encode_key("group_metadata", 2, {"group": group})


def encode_group_metadata_value(
    protocol_type: str,
    generation: int,
    protocol: str | None,
    leader: str | None,
    current_state_timestamp: int = -1,
    members: list[Mapping] = (),  # type: ignore[assignment]
    version: int = 3,
) -> bytes:
    """A classic group-metadata value, version 3 by default (what MV >= 2.3 writes).

    ``members`` are dicts with the MemberMetadata JSON names: ``memberId``,
    ``groupInstanceId``, ``clientId``, ``clientHost``, ``rebalanceTimeout``,
    ``sessionTimeout``, ``subscription`` (bytes), ``assignment`` (bytes).
    """
    fields = {
        "protocolType": protocol_type,
        "generation": generation,
        "protocol": protocol,
        "leader": leader,
        "currentStateTimestamp": current_state_timestamp,
        "members": [dict(m) for m in members],
    }
    return encode_value("group_metadata", version, fields)


# --------------------------------------------------------------------------- partitioning


def partition_for_group(group_id: str, num_partitions: int = 50) -> int:
    """The ``__consumer_offsets`` partition of a group:
    ``Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions``.

    ``Utils.abs`` maps Integer.MIN_VALUE to 0 (``Math.abs`` would leave it negative).
    """
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


# --------------------------------------------------------------------------- consumer protocol

_TOPIC_PARTITION = Struct("TopicPartition", [Field("topic", "string"), Field("partitions", Array("int32"))])

CONSUMER_PROTOCOL_SUBSCRIPTION = Struct(
    "ConsumerProtocolSubscription",
    [
        Field("topics", Array("string")),
        Field("userData", "bytes", nullable_versions="0+", default=None),
        Field("ownedPartitions", Array(_TOPIC_PARTITION), "1+"),
        Field("generationId", "int32", "2+", default=-1),
        Field("rackId", "string", "3+", nullable_versions="3+", default=None),
    ],
    valid_versions="0-3",
)
CONSUMER_PROTOCOL_ASSIGNMENT = Struct(
    "ConsumerProtocolAssignment",
    [
        Field("assignedPartitions", Array(_TOPIC_PARTITION)),
        Field("userData", "bytes", nullable_versions="0+", default=None),
    ],
    valid_versions="0-3",
)

CONSUMER_PROTOCOL_TYPE = "consumer"


class ConsumerProtocolData(NamedTuple):
    """A decoded subscription or assignment: the version prefix and the fields. ``version``
    is as stored; the fields were read at ``min(version, 3)`` (see the decoders)."""

    version: int
    fields: dict


def _decode_consumer_protocol(schema: Struct, b: bytes, cap_version: bool) -> ConsumerProtocolData:
    b = bytes(b)
    version = _read_int16_prefix(b, schema.name)
    if version < 0:
        raise SchemaError(f"Unsupported {schema.name[len('ConsumerProtocol'):].lower()} version: {version}", 0)
    read_at = min(version, schema.versions()[-1]) if cap_version else version
    fields, _ = decode(schema, read_at, b, 2)
    return ConsumerProtocolData(version, fields)


def decode_consumer_subscription(b: bytes, *, cap_version: bool = True) -> ConsumerProtocolData:
    """Decode a member's subscription bytes: ``int16 version`` + ConsumerProtocolSubscription.

    The client (``ConsumerProtocol.deserializeSubscription``) reads a version newer than it
    knows with its newest layout, which is ``cap_version=True``. DumpLogSegments reads at
    the stored version and keeps the raw bytes if that fails: ``cap_version=False``.
    Trailing bytes are ignored, as both do.
    """
    return _decode_consumer_protocol(CONSUMER_PROTOCOL_SUBSCRIPTION, b, cap_version)


def decode_consumer_assignment(b: bytes, *, cap_version: bool = True) -> ConsumerProtocolData:
    """Decode a member's assignment bytes: ``int16 version`` + ConsumerProtocolAssignment."""
    return _decode_consumer_protocol(CONSUMER_PROTOCOL_ASSIGNMENT, b, cap_version)


def encode_consumer_subscription(fields: Mapping, version: int = 3) -> bytes:
    return version.to_bytes(2, "big", signed=True) + encode(CONSUMER_PROTOCOL_SUBSCRIPTION, version, fields)


def encode_consumer_assignment(fields: Mapping, version: int = 3) -> bytes:
    return version.to_bytes(2, "big", signed=True) + encode(CONSUMER_PROTOCOL_ASSIGNMENT, version, fields)


CONSUMER_PROTOCOL_SCHEMAS: tuple[Struct, ...] = (CONSUMER_PROTOCOL_SUBSCRIPTION, CONSUMER_PROTOCOL_ASSIGNMENT)


# --------------------------------------------------------------------------- DumpLogSegments JSON


def dump_key_json(key: OffsetsKey, kafka_version: int = 4) -> str:
    """The key text of ``kafka-dump-log.sh --offsets-decoder``.

    ``"type"`` is the record's apiKey in Kafka 4.x (the Java tool) and the key version
    read from the record in 3.x (the Scala tool). They differ only for offset-commit keys
    of version 0, whose apiKey is 1.
    """
    rt = record_type(key.version)
    type_text = str(key.version)
    if kafka_version >= 4 and key.version == 0:
        type_text = "1"  # OffsetCommitKey's apiKey; versions 0 and 1 share it
    return jackson_dumps({"type": type_text, "data": to_kafka_json(rt.key_schema, 0, key.fields)})


def dump_value_json(value: OffsetsValue | None, kafka_version: int = 4) -> str:
    """The payload text of ``kafka-dump-log.sh --offsets-decoder``; ``<DELETE>`` for a
    tombstone. For a classic group whose protocolType is ``consumer``, each member's
    ``subscription`` and ``assignment`` are replaced by their decoded JSON, read at the
    version they carry; bytes that do not decode stay base64, as Kafka does.
    ``kafka_version`` 3: Kafka 3.x's schemas, where OffsetCommitValue has no ``topicId``
    (tag 0 is an unknown tagged field there, not printed)."""
    if value is None:
        return "<DELETE>"
    data = to_kafka_json(value.schema, value.version, value.fields)
    if kafka_version < 4 and value.schema is OFFSET_COMMIT_VALUE:
        data.pop("topicId", None)
    if value.kind == "group_metadata" and data.get("protocolType") == CONSUMER_PROTOCOL_TYPE:
        for node, member in zip(data.get("members") or (), value.fields.get("members") or ()):
            for name, schema in (
                ("subscription", CONSUMER_PROTOCOL_SUBSCRIPTION),
                ("assignment", CONSUMER_PROTOCOL_ASSIGNMENT),
            ):
                try:
                    decoded = _decode_consumer_protocol(schema, member[name], cap_version=False)
                    node[name] = to_kafka_json(schema, decoded.version, decoded.fields)
                except SchemaError:
                    pass
    return jackson_dumps({"version": str(value.version), "data": data})
