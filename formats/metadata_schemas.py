"""The KRaft metadata record schemas (``__cluster_metadata`` log and snapshots) as data.

Transcribed from Kafka's ``metadata/src/main/resources/common/metadata/*.json`` (the copies
packaged in ``kafka-metadata-4.3.1.jar`` and ``kafka-metadata-3.9.2.jar``) into
:mod:`plog.formats.protocol` structs. Every metadata record is flexible from version 0,
and every field's version range is open-ended (``"N+"``). Field names are the JSON names
Kafka's generated ``JsonConverter`` prints (schema name, first letter lower-cased).

==  ==================================  ===========================  ========  ========
id  MetadataRecordType                  schema                       4.x       3.9
==  ==================================  ===========================  ========  ========
0   REGISTER_BROKER_RECORD              RegisterBrokerRecord         v0-v4     v0-v3
1   UNREGISTER_BROKER_RECORD            UnregisterBrokerRecord       v0        v0
2   TOPIC_RECORD                        TopicRecord                  v0        v0
3   PARTITION_RECORD                    PartitionRecord              v0-v2     v0-v2
4   CONFIG_RECORD                       ConfigRecord                 v0        v0
5   PARTITION_CHANGE_RECORD             PartitionChangeRecord        v0-v2     v0-v2
7   FENCE_BROKER_RECORD                 FenceBrokerRecord            v0        v0
8   UNFENCE_BROKER_RECORD               UnfenceBrokerRecord          v0        v0
9   REMOVE_TOPIC_RECORD                 RemoveTopicRecord            v0        v0
10  DELEGATION_TOKEN_RECORD             DelegationTokenRecord        v0        v0
11  USER_SCRAM_CREDENTIAL_RECORD        UserScramCredentialRecord    v0        v0
12  FEATURE_LEVEL_RECORD                FeatureLevelRecord           v0        v0
14  CLIENT_QUOTA_RECORD                 ClientQuotaRecord            v0        v0
15  PRODUCER_IDS_RECORD                 ProducerIdsRecord            v0        v0
17  BROKER_REGISTRATION_CHANGE_RECORD   BrokerRegistrationChange...  v0-v3     v0-v2
18  ACCESS_CONTROL_ENTRY_RECORD         AccessControlEntryRecord     v0        v0
19  REMOVE_ACCESS_CONTROL_ENTRY_RECORD  RemoveAccessControlEntry...  v0        v0
20  NO_OP_RECORD                        NoOpRecord                   v0        v0
21  ZK_MIGRATION_STATE_RECORD           ZkMigrationStateRecord       v0        v0
22  REMOVE_USER_SCRAM_CREDENTIAL_RECORD RemoveUserScramCredential... v0        v0
23  BEGIN_TRANSACTION_RECORD            BeginTransactionRecord       v0        v0
24  END_TRANSACTION_RECORD              EndTransactionRecord         v0        v0
25  ABORT_TRANSACTION_RECORD            AbortTransactionRecord       v0        v0
26  REMOVE_DELEGATION_TOKEN_RECORD      RemoveDelegationTokenRecord  v0        v0
27  REGISTER_CONTROLLER_RECORD          RegisterControllerRecord     v0        v0
28  CLEAR_ELR_RECORD                    ClearElrRecord               v0        (none)
==  ==================================  ===========================  ========  ========

Ids 6, 13 and 16 are not assigned. The only differences between the 3.9 and 4.x schema
sets: 4.x adds ``cordonedLogDirs`` (RegisterBrokerRecord v4 tag 1,
BrokerRegistrationChangeRecord v3 tag 3) and ClearElrRecord.
"""

from __future__ import annotations

from enum import IntEnum

from .protocol import Array, Field, Struct

__all__ = [
    "MetadataRecordType",
    "SCHEMAS_4",
    "SCHEMAS_3",
]


class MetadataRecordType(IntEnum):
    """Kafka's generated ``MetadataRecordType``: the record's apiKey and the enum name
    DumpLogSegments prints as ``"type"``."""

    REGISTER_BROKER_RECORD = 0
    UNREGISTER_BROKER_RECORD = 1
    TOPIC_RECORD = 2
    PARTITION_RECORD = 3
    CONFIG_RECORD = 4
    PARTITION_CHANGE_RECORD = 5
    FENCE_BROKER_RECORD = 7
    UNFENCE_BROKER_RECORD = 8
    REMOVE_TOPIC_RECORD = 9
    DELEGATION_TOKEN_RECORD = 10
    USER_SCRAM_CREDENTIAL_RECORD = 11
    FEATURE_LEVEL_RECORD = 12
    CLIENT_QUOTA_RECORD = 14
    PRODUCER_IDS_RECORD = 15
    BROKER_REGISTRATION_CHANGE_RECORD = 17
    ACCESS_CONTROL_ENTRY_RECORD = 18
    REMOVE_ACCESS_CONTROL_ENTRY_RECORD = 19
    NO_OP_RECORD = 20
    ZK_MIGRATION_STATE_RECORD = 21
    REMOVE_USER_SCRAM_CREDENTIAL_RECORD = 22
    BEGIN_TRANSACTION_RECORD = 23
    END_TRANSACTION_RECORD = 24
    ABORT_TRANSACTION_RECORD = 25
    REMOVE_DELEGATION_TOKEN_RECORD = 26
    REGISTER_CONTROLLER_RECORD = 27
    CLEAR_ELR_RECORD = 28


def _record(name: str, fields: list, valid_versions: str = "0") -> Struct:
    return Struct(name, fields, valid_versions=valid_versions, flexible_versions="0+")


# --------------------------------------------------------------------------- brokers and controllers

_BROKER_ENDPOINT = Struct(
    "BrokerEndpoint",
    [
        Field("name", "string"),
        Field("host", "string"),
        Field("port", "uint16"),
        Field("securityProtocol", "int16"),
    ],
)
_BROKER_FEATURE = Struct(
    "BrokerFeature",
    [
        Field("name", "string"),
        Field("minSupportedVersion", "int16"),
        Field("maxSupportedVersion", "int16"),
    ],
)
_REGISTER_BROKER_FIELDS = [
    Field("brokerId", "int32"),
    Field("isMigratingZkBroker", "bool", "2+"),
    Field("incarnationId", "uuid"),
    Field("brokerEpoch", "int64"),
    Field("endPoints", Array(_BROKER_ENDPOINT)),
    Field("features", Array(_BROKER_FEATURE)),
    Field("rack", "string", nullable_versions="0+"),
    Field("fenced", "bool", default=True),
    Field("inControlledShutdown", "bool", "1+"),
    Field("logDirs", Array("uuid"), "3+", tagged=0),
]
REGISTER_BROKER_RECORD = _record(
    "RegisterBrokerRecord",
    [
        *_REGISTER_BROKER_FIELDS,
        Field("cordonedLogDirs", Array("uuid"), "4+", nullable_versions="4+", tagged=1, default=None),
    ],
    "0-4",
)
REGISTER_BROKER_RECORD_3 = _record("RegisterBrokerRecord", _REGISTER_BROKER_FIELDS, "0-3")

UNREGISTER_BROKER_RECORD = _record(
    "UnregisterBrokerRecord", [Field("brokerId", "int32"), Field("brokerEpoch", "int64")]
)
FENCE_BROKER_RECORD = _record("FenceBrokerRecord", [Field("id", "int32"), Field("epoch", "int64")])
UNFENCE_BROKER_RECORD = _record("UnfenceBrokerRecord", [Field("id", "int32"), Field("epoch", "int64")])

_BROKER_REGISTRATION_CHANGE_FIELDS = [
    Field("brokerId", "int32"),
    Field("brokerEpoch", "int64"),
    Field("fenced", "int8", tagged=0),
    Field("inControlledShutdown", "int8", "1+", tagged=1),
    Field("logDirs", Array("uuid"), "2+", tagged=2),
]
BROKER_REGISTRATION_CHANGE_RECORD = _record(
    "BrokerRegistrationChangeRecord",
    [
        *_BROKER_REGISTRATION_CHANGE_FIELDS,
        Field("cordonedLogDirs", Array("uuid"), "3+", nullable_versions="3+", tagged=3, default=None),
    ],
    "0-3",
)
BROKER_REGISTRATION_CHANGE_RECORD_3 = _record(
    "BrokerRegistrationChangeRecord", _BROKER_REGISTRATION_CHANGE_FIELDS, "0-2"
)

REGISTER_CONTROLLER_RECORD = _record(
    "RegisterControllerRecord",
    [
        Field("controllerId", "int32"),
        Field("incarnationId", "uuid"),
        Field("zkMigrationReady", "bool"),
        Field(
            "endPoints",
            Array(
                Struct(
                    "ControllerEndpoint",
                    [
                        Field("name", "string"),
                        Field("host", "string"),
                        Field("port", "uint16"),
                        Field("securityProtocol", "int16"),
                    ],
                )
            ),
        ),
        Field(
            "features",
            Array(
                Struct(
                    "ControllerFeature",
                    [
                        Field("name", "string"),
                        Field("minSupportedVersion", "int16"),
                        Field("maxSupportedVersion", "int16"),
                    ],
                )
            ),
        ),
    ],
)

PRODUCER_IDS_RECORD = _record(
    "ProducerIdsRecord",
    [Field("brokerId", "int32"), Field("brokerEpoch", "int64", default=-1), Field("nextProducerId", "int64")],
)

# --------------------------------------------------------------------------- topics and partitions

TOPIC_RECORD = _record("TopicRecord", [Field("name", "string"), Field("topicId", "uuid")])
REMOVE_TOPIC_RECORD = _record("RemoveTopicRecord", [Field("topicId", "uuid")])

PARTITION_RECORD = _record(
    "PartitionRecord",
    [
        Field("partitionId", "int32", default=-1),
        Field("topicId", "uuid"),
        Field("replicas", Array("int32")),
        Field("isr", Array("int32")),
        Field("removingReplicas", Array("int32")),
        Field("addingReplicas", Array("int32")),
        Field("leader", "int32", default=-1),
        Field("leaderRecoveryState", "int8", tagged=0),
        Field("leaderEpoch", "int32", default=-1),
        Field("partitionEpoch", "int32", default=-1),
        Field("directories", Array("uuid"), "1+"),
        Field("eligibleLeaderReplicas", Array("int32"), "2+", nullable_versions="2+", tagged=1, default=None),
        Field("lastKnownElr", Array("int32"), "2+", nullable_versions="2+", tagged=2, default=None),
    ],
    "0-2",
)

# The JSON schema lists directories (tag 8) before the ELR fields (tags 6, 7); JSON output
# follows the schema order, the wire follows tag order.
PARTITION_CHANGE_RECORD = _record(
    "PartitionChangeRecord",
    [
        Field("partitionId", "int32", default=-1),
        Field("topicId", "uuid"),
        Field("isr", Array("int32"), nullable_versions="0+", tagged=0, default=None),
        Field("leader", "int32", tagged=1, default=-2),
        Field("replicas", Array("int32"), nullable_versions="0+", tagged=2, default=None),
        Field("removingReplicas", Array("int32"), nullable_versions="0+", tagged=3, default=None),
        Field("addingReplicas", Array("int32"), nullable_versions="0+", tagged=4, default=None),
        Field("leaderRecoveryState", "int8", tagged=5, default=-1),
        Field("directories", Array("uuid"), "1+", nullable_versions="1+", tagged=8, default=None),
        Field("eligibleLeaderReplicas", Array("int32"), "2+", nullable_versions="2+", tagged=6, default=None),
        Field("lastKnownElr", Array("int32"), "2+", nullable_versions="2+", tagged=7, default=None),
    ],
    "0-2",
)

CLEAR_ELR_RECORD = _record("ClearElrRecord", [Field("topicName", "string")])

# --------------------------------------------------------------------------- configs, features, quotas

CONFIG_RECORD = _record(
    "ConfigRecord",
    [
        Field("resourceType", "int8"),
        Field("resourceName", "string"),
        Field("name", "string"),
        Field("value", "string", nullable_versions="0+"),
    ],
)

FEATURE_LEVEL_RECORD = _record("FeatureLevelRecord", [Field("name", "string"), Field("featureLevel", "int16")])

CLIENT_QUOTA_RECORD = _record(
    "ClientQuotaRecord",
    [
        Field(
            "entity",
            Array(
                Struct(
                    "EntityData",
                    [Field("entityType", "string"), Field("entityName", "string", nullable_versions="0+")],
                )
            ),
        ),
        Field("key", "string"),
        Field("value", "float64"),
        Field("remove", "bool"),
    ],
)

# --------------------------------------------------------------------------- security

USER_SCRAM_CREDENTIAL_RECORD = _record(
    "UserScramCredentialRecord",
    [
        Field("name", "string"),
        Field("mechanism", "int8"),
        Field("salt", "bytes"),
        Field("storedKey", "bytes"),
        Field("serverKey", "bytes"),
        Field("iterations", "int32"),
    ],
)
REMOVE_USER_SCRAM_CREDENTIAL_RECORD = _record(
    "RemoveUserScramCredentialRecord", [Field("name", "string"), Field("mechanism", "int8")]
)

ACCESS_CONTROL_ENTRY_RECORD = _record(
    "AccessControlEntryRecord",
    [
        Field("id", "uuid"),
        Field("resourceType", "int8"),
        Field("resourceName", "string"),
        Field("patternType", "int8"),
        Field("principal", "string"),
        Field("host", "string"),
        Field("operation", "int8"),
        Field("permissionType", "int8"),
    ],
)
REMOVE_ACCESS_CONTROL_ENTRY_RECORD = _record("RemoveAccessControlEntryRecord", [Field("id", "uuid")])

DELEGATION_TOKEN_RECORD = _record(
    "DelegationTokenRecord",
    [
        Field("owner", "string"),
        Field("requester", "string"),
        Field("renewers", Array("string")),
        Field("issueTimestamp", "int64"),
        Field("maxTimestamp", "int64"),
        Field("expirationTimestamp", "int64"),
        Field("tokenId", "string"),
    ],
)
REMOVE_DELEGATION_TOKEN_RECORD = _record("RemoveDelegationTokenRecord", [Field("tokenId", "string")])

# --------------------------------------------------------------------------- log structure

NO_OP_RECORD = _record("NoOpRecord", [])
ZK_MIGRATION_STATE_RECORD = _record("ZkMigrationStateRecord", [Field("zkMigrationState", "int8")])
BEGIN_TRANSACTION_RECORD = _record(
    "BeginTransactionRecord", [Field("name", "string", nullable_versions="0+", tagged=0, default=None)]
)
END_TRANSACTION_RECORD = _record("EndTransactionRecord", [])
ABORT_TRANSACTION_RECORD = _record(
    "AbortTransactionRecord", [Field("reason", "string", nullable_versions="0+", tagged=0, default=None)]
)

# --------------------------------------------------------------------------- tables

_T = MetadataRecordType

#: Kafka 4.x (4.3): record type -> schema.
SCHEMAS_4: dict[MetadataRecordType, Struct] = {
    _T.REGISTER_BROKER_RECORD: REGISTER_BROKER_RECORD,
    _T.UNREGISTER_BROKER_RECORD: UNREGISTER_BROKER_RECORD,
    _T.TOPIC_RECORD: TOPIC_RECORD,
    _T.PARTITION_RECORD: PARTITION_RECORD,
    _T.CONFIG_RECORD: CONFIG_RECORD,
    _T.PARTITION_CHANGE_RECORD: PARTITION_CHANGE_RECORD,
    _T.FENCE_BROKER_RECORD: FENCE_BROKER_RECORD,
    _T.UNFENCE_BROKER_RECORD: UNFENCE_BROKER_RECORD,
    _T.REMOVE_TOPIC_RECORD: REMOVE_TOPIC_RECORD,
    _T.DELEGATION_TOKEN_RECORD: DELEGATION_TOKEN_RECORD,
    _T.USER_SCRAM_CREDENTIAL_RECORD: USER_SCRAM_CREDENTIAL_RECORD,
    _T.FEATURE_LEVEL_RECORD: FEATURE_LEVEL_RECORD,
    _T.CLIENT_QUOTA_RECORD: CLIENT_QUOTA_RECORD,
    _T.PRODUCER_IDS_RECORD: PRODUCER_IDS_RECORD,
    _T.BROKER_REGISTRATION_CHANGE_RECORD: BROKER_REGISTRATION_CHANGE_RECORD,
    _T.ACCESS_CONTROL_ENTRY_RECORD: ACCESS_CONTROL_ENTRY_RECORD,
    _T.REMOVE_ACCESS_CONTROL_ENTRY_RECORD: REMOVE_ACCESS_CONTROL_ENTRY_RECORD,
    _T.NO_OP_RECORD: NO_OP_RECORD,
    _T.ZK_MIGRATION_STATE_RECORD: ZK_MIGRATION_STATE_RECORD,
    _T.REMOVE_USER_SCRAM_CREDENTIAL_RECORD: REMOVE_USER_SCRAM_CREDENTIAL_RECORD,
    _T.BEGIN_TRANSACTION_RECORD: BEGIN_TRANSACTION_RECORD,
    _T.END_TRANSACTION_RECORD: END_TRANSACTION_RECORD,
    _T.ABORT_TRANSACTION_RECORD: ABORT_TRANSACTION_RECORD,
    _T.REMOVE_DELEGATION_TOKEN_RECORD: REMOVE_DELEGATION_TOKEN_RECORD,
    _T.REGISTER_CONTROLLER_RECORD: REGISTER_CONTROLLER_RECORD,
    _T.CLEAR_ELR_RECORD: CLEAR_ELR_RECORD,
}

#: Kafka 3.9: no CLEAR_ELR_RECORD, no cordonedLogDirs.
SCHEMAS_3: dict[MetadataRecordType, Struct] = {
    **{t: s for t, s in SCHEMAS_4.items() if t is not _T.CLEAR_ELR_RECORD},
    _T.REGISTER_BROKER_RECORD: REGISTER_BROKER_RECORD_3,
    _T.BROKER_REGISTRATION_CHANGE_RECORD: BROKER_REGISTRATION_CHANGE_RECORD_3,
}
