"""Control records: the records of a control batch (attribute bit 5).

Key (every control record, ``ControlRecordTypeSchema``)::

    int16 version (0)   int16 type          4 bytes; longer keys are read as version 0

A key shorter than 4 bytes or with a negative version is an
:class:`~plog.formats.errors.InvalidRecordError`; a type Kafka does not know is
``UNKNOWN`` (-1), which consumers skip.

Values, by type::

    0 ABORT, 1 COMMIT   EndTxnMarker: int16 version (0) + int32 coordinatorEpoch  (6 bytes)
    2 LEADER_CHANGE     LeaderChangeMessage        (KRaft, flexible)
    3 SNAPSHOT_HEADER   SnapshotHeaderRecord       (KRaft snapshot first record, flexible)
    4 SNAPSHOT_FOOTER   SnapshotFooterRecord       (KRaft snapshot last record, flexible)
    5 KRAFT_VERSION     KRaftVersionRecord         (KIP-853, flexible)
    6 KRAFT_VOTERS      VotersRecord               (KIP-853, flexible)

The KRaft values carry no version prefix: each begins with an int16 field named
``Version``, and Kafka's readers (``ControlRecordUtils``) always parse the struct at
schema version 0. The dicts returned here therefore start with ``"version"`` -- that is the
field, and it is also what Kafka passes as the JSON version when DumpLogSegments prints
them. LeaderChangeMessage::

    Version int16 | LeaderId int32 | Voters [Voter] | GrantingVoters [Voter] | tagged fields
    Voter: VoterId int32 (+ VoterDirectoryId uuid at schema version 1) | tagged fields

Worked example (§21 ``v2_leader_change``): ``0000 00000001 03 00000001 00 00000002 00
02 00000001 00 00`` = version 0, leader 1, voters [1, 2], granting voters [1].
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import Mapping

from .errors import InvalidRecordError, SchemaError

CONTROL_KEY_SIZE = 4
CONTROL_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0
END_TXN_MARKER_VALUE_SIZE = 6


class ControlRecordType(IntEnum):
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6
    UNKNOWN = -1

    @classmethod
    def from_type_id(cls, type_id: int) -> "ControlRecordType":
        """Kafka's ``fromTypeId``: any id outside 0..6 is UNKNOWN."""
        try:
            member = cls(type_id)
        except ValueError:
            return cls.UNKNOWN
        return cls.UNKNOWN if member is cls.UNKNOWN else member


def parse_control_key_type_id(key: bytes) -> tuple[int, int]:
    """``(version, raw type id)`` of a control key, without mapping the id to a type."""
    if len(key) < CONTROL_KEY_SIZE:
        raise InvalidRecordError(
            f"Invalid value size found for end control record key. Must have at least "
            f"{CONTROL_KEY_SIZE} bytes, but found only {len(key)}",
            0,
        )
    version, type_id = struct.unpack_from(">hh", key, 0)
    if version < 0:
        raise InvalidRecordError(
            f"Invalid version found for control record: {version}. May indicate data corruption", 0
        )
    return version, type_id


def parse_control_key(key: bytes) -> tuple[int, ControlRecordType]:
    """``(version, type)`` of a control record key. Versions above 0 are read as 0."""
    version, type_id = parse_control_key_type_id(key)
    return version, ControlRecordType.from_type_id(type_id)


def encode_control_key(control_type: ControlRecordType | int) -> bytes:
    """The 4-byte key ``int16 0 + int16 type``. UNKNOWN cannot be written."""
    control_type = ControlRecordType(control_type)
    if control_type is ControlRecordType.UNKNOWN:
        raise ValueError("Cannot serialize UNKNOWN control record type")
    return struct.pack(">hh", CONTROL_KEY_VERSION, int(control_type))


# --------------------------------------------------------------------------- transaction markers


@dataclass(frozen=True)
class EndTransactionMarker:
    """The value of a COMMIT/ABORT control record: ``int16 version + int32 coordinatorEpoch``."""

    version: int
    coordinator_epoch: int

    @classmethod
    def decode(cls, value: bytes) -> "EndTransactionMarker":
        """Kafka's ``EndTransactionMarker.deserializeValue``: a negative version is invalid, a
        newer one is read as version 0; bytes after the epoch are ignored."""
        if value is None or len(value) < END_TXN_MARKER_VALUE_SIZE:
            size = 0 if value is None else len(value)
            raise InvalidRecordError(
                f"Invalid value size found for end transaction marker. Must have at least "
                f"{END_TXN_MARKER_VALUE_SIZE} bytes, but found only {size}",
                0,
            )
        version, epoch = struct.unpack_from(">hi", value, 0)
        if version < 0:
            raise InvalidRecordError(
                f"Invalid version found for end transaction marker: {version}. May indicate data corruption", 0
            )
        return cls(version, epoch)

    def encode(self) -> bytes:
        return struct.pack(">hi", self.version, self.coordinator_epoch)


def decode_end_txn_marker(value: bytes) -> EndTransactionMarker:
    return EndTransactionMarker.decode(value)


def encode_end_txn_marker(coordinator_epoch: int) -> bytes:
    return EndTransactionMarker(END_TXN_MARKER_VERSION, coordinator_epoch).encode()


# --------------------------------------------------------------------------- KRaft control values

#: The KRaft control values' schemas (Kafka's ``*.json`` message definitions), built on first
#: use (:func:`__getattr__`): they need the protocol codec, which the write path does not
#: (importing and building it cost every ``plog produce`` ~3 ms of start-up); a dump of KRaft
#: control records, or a caller of these names, builds them once.
_KRAFT_NAMES = ("LEADER_CHANGE_MESSAGE", "SNAPSHOT_HEADER_RECORD", "SNAPSHOT_FOOTER_RECORD", "KRAFT_VERSION_RECORD",
                "VOTERS_RECORD", "KRAFT_VALUE_SCHEMAS", "SCHEMAS")


def _kraft_schemas() -> dict:
    """``{name: schema}`` of :data:`_KRAFT_NAMES`."""
    from .protocol import Array, Field, Struct

    LEADER_CHANGE_MESSAGE = Struct(
        "LeaderChangeMessage",
        [
            Field("version", "int16"),
            Field("leaderId", "int32"),
            Field("voters", Array(Struct("Voter", [Field("voterId", "int32"), Field("voterDirectoryId", "uuid", "1+")]))),
            Field(
                "grantingVoters",
                Array(Struct("Voter", [Field("voterId", "int32"), Field("voterDirectoryId", "uuid", "1+")])),
            ),
        ],
        valid_versions="0-1",
        flexible_versions="0+",
    )

    SNAPSHOT_HEADER_RECORD = Struct(
        "SnapshotHeaderRecord",
        [Field("version", "int16"), Field("lastContainedLogTimestamp", "int64")],
        flexible_versions="0+",
    )

    SNAPSHOT_FOOTER_RECORD = Struct("SnapshotFooterRecord", [Field("version", "int16")], flexible_versions="0+")

    KRAFT_VERSION_RECORD = Struct(
        "KRaftVersionRecord", [Field("version", "int16"), Field("kRaftVersion", "int16")], flexible_versions="0+"
    )

    VOTERS_RECORD = Struct(
        "VotersRecord",
        [
            Field("version", "int16"),
            Field(
                "voters",
                Array(
                    Struct(
                        "Voter",
                        [
                            Field("voterId", "int32"),
                            Field("voterDirectoryId", "uuid"),
                            Field(
                                "endpoints",
                                Array(
                                    Struct(
                                        "Endpoint",
                                        [Field("name", "string"), Field("host", "string"), Field("port", "uint16")],
                                    )
                                ),
                            ),
                            Field(
                                "kRaftVersionFeature",
                                Struct(
                                    "KRaftVersionFeature",
                                    [Field("minSupportedVersion", "int16"), Field("maxSupportedVersion", "int16")],
                                ),
                            ),
                        ],
                    )
                ),
            ),
        ],
        flexible_versions="0+",
    )

    # Schema version each value is read and written at (ControlRecordUtils.*_CURRENT_VERSION).
    KRAFT_VALUE_SCHEMAS: dict[ControlRecordType, Struct] = {
        ControlRecordType.LEADER_CHANGE: LEADER_CHANGE_MESSAGE,
        ControlRecordType.SNAPSHOT_HEADER: SNAPSHOT_HEADER_RECORD,
        ControlRecordType.SNAPSHOT_FOOTER: SNAPSHOT_FOOTER_RECORD,
        ControlRecordType.KRAFT_VERSION: KRAFT_VERSION_RECORD,
        ControlRecordType.KRAFT_VOTERS: VOTERS_RECORD,
    }
    return {"LEADER_CHANGE_MESSAGE": LEADER_CHANGE_MESSAGE, "SNAPSHOT_HEADER_RECORD": SNAPSHOT_HEADER_RECORD,
            "SNAPSHOT_FOOTER_RECORD": SNAPSHOT_FOOTER_RECORD, "KRAFT_VERSION_RECORD": KRAFT_VERSION_RECORD,
            "VOTERS_RECORD": VOTERS_RECORD, "KRAFT_VALUE_SCHEMAS": KRAFT_VALUE_SCHEMAS,
            "SCHEMAS": tuple(KRAFT_VALUE_SCHEMAS.values())}


def __getattr__(name: str):
    """The KRaft schemas (:data:`_KRAFT_NAMES`), built at the first one asked for (then
    module globals: this is not called again for them)."""
    if name in _KRAFT_NAMES:
        built = globals().get(name)
        if built is None:
            globals().update(_kraft_schemas())
            built = globals()[name]
        return built
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


KRAFT_SCHEMA_VERSION = 0


# DumpLogSegments' label for each KRaft type (" LeaderChange: " in the Java tool,
# " SnapshotHeader ", " SnapshotFooter ", " KRaftVersion ", " KRaftVoters ").
DUMP_LABELS = {
    ControlRecordType.LEADER_CHANGE: "LeaderChange:",
    ControlRecordType.SNAPSHOT_HEADER: "SnapshotHeader",
    ControlRecordType.SNAPSHOT_FOOTER: "SnapshotFooter",
    ControlRecordType.KRAFT_VERSION: "KRaftVersion",
    ControlRecordType.KRAFT_VOTERS: "KRaftVoters",
}


def _kraft_schema(control_type: ControlRecordType) -> Struct:
    schema = __getattr__("KRAFT_VALUE_SCHEMAS").get(ControlRecordType(control_type))
    if schema is None:
        raise SchemaError(f"control record type {ControlRecordType(control_type).name} has no KRaft value schema")
    return schema


def decode_kraft_value(control_type: ControlRecordType, value: bytes, version: int = KRAFT_SCHEMA_VERSION) -> dict:
    """Decode a KRaft control value at schema ``version`` (Kafka always uses 0). Bytes after
    the struct are ignored, as Kafka does."""
    if value is None:
        raise SchemaError(f"{ControlRecordType(control_type).name} control record has a null value")
    from .protocol import decode

    fields, _ = decode(_kraft_schema(control_type), version, bytes(value))
    return fields


def encode_kraft_value(control_type: ControlRecordType, fields: Mapping, version: int = KRAFT_SCHEMA_VERSION) -> bytes:
    from .protocol import encode

    return encode(_kraft_schema(control_type), version, fields)


def decode_leader_change(value: bytes, version: int = KRAFT_SCHEMA_VERSION) -> dict:
    return decode_kraft_value(ControlRecordType.LEADER_CHANGE, value, version)


def encode_leader_change(fields: Mapping, version: int = KRAFT_SCHEMA_VERSION) -> bytes:
    return encode_kraft_value(ControlRecordType.LEADER_CHANGE, fields, version)


def decode_snapshot_header(value: bytes) -> dict:
    return decode_kraft_value(ControlRecordType.SNAPSHOT_HEADER, value)


def encode_snapshot_header(last_contained_log_timestamp: int, version: int = 0) -> bytes:
    fields = {"version": version, "lastContainedLogTimestamp": last_contained_log_timestamp}
    return encode_kraft_value(ControlRecordType.SNAPSHOT_HEADER, fields)


def decode_snapshot_footer(value: bytes) -> dict:
    return decode_kraft_value(ControlRecordType.SNAPSHOT_FOOTER, value)


def encode_snapshot_footer(version: int = 0) -> bytes:
    return encode_kraft_value(ControlRecordType.SNAPSHOT_FOOTER, {"version": version})


def decode_kraft_version(value: bytes) -> dict:
    return decode_kraft_value(ControlRecordType.KRAFT_VERSION, value)


def encode_kraft_version(kraft_version: int, version: int = 0) -> bytes:
    return encode_kraft_value(ControlRecordType.KRAFT_VERSION, {"version": version, "kRaftVersion": kraft_version})


def decode_voters(value: bytes) -> dict:
    return decode_kraft_value(ControlRecordType.KRAFT_VOTERS, value)


def encode_voters(fields: Mapping) -> bytes:
    return encode_kraft_value(ControlRecordType.KRAFT_VOTERS, fields)


# --------------------------------------------------------------------------- dispatch


def decode_control_value(control_type: ControlRecordType | int, value: bytes) -> dict:
    """Decode any control value by type.

    COMMIT/ABORT give ``{"version": v, "coordinatorEpoch": e}``; the KRaft types give their
    struct dict. UNKNOWN (or a null value) is a SchemaError: there is nothing to decode with.
    """
    control_type = ControlRecordType.from_type_id(int(control_type))
    if control_type in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        marker = EndTransactionMarker.decode(value)
        return {"version": marker.version, "coordinatorEpoch": marker.coordinator_epoch}
    if control_type is ControlRecordType.UNKNOWN:
        raise SchemaError("unknown control record type: no value schema")
    return decode_kraft_value(control_type, value)


def encode_control_value(control_type: ControlRecordType | int, fields: Mapping) -> bytes:
    """Inverse of :func:`decode_control_value`."""
    control_type = ControlRecordType(control_type)
    if control_type in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        return EndTransactionMarker(fields.get("version", 0), fields["coordinatorEpoch"]).encode()
    if control_type is ControlRecordType.UNKNOWN:
        raise ValueError("Cannot serialize UNKNOWN control record type")
    return encode_kraft_value(control_type, fields)
