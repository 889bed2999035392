"""Schema-driven structs: internal-topic keys/values and control records.

Covers the §21 vectors, real ``__consumer_offsets`` / ``__transaction_state`` /
``__cluster_metadata`` bytes from the corpus (decode, then re-encode byte for byte),
Hypothesis round trips for every schema and version, and hostile input (random bytes,
truncations, absurd length fields) that must only ever raise SchemaError /
InvalidRecordError.
"""

from __future__ import annotations

import struct
import tracemalloc
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plog.formats import control as ct
from plog.formats import offsets_topic as ot
from plog.formats import protocol as pr
from plog.formats import transaction_log as tl
from plog.formats.errors import InvalidRecordError, SchemaError

from conftest import CORPUS  # noqa: E402
TS = 1700000000000

# §21 vectors.
OFFSET_COMMIT_KEY_V1 = "000100086d792d67726f757000017400000003"
OFFSET_COMMIT_VALUE_V3 = "0003000000000000002a0000000500000000018bcfe56800"
OFFSET_COMMIT_VALUE_V1 = "0001000000000000002a00016d0000018bcfe568000000018bd50bc400"
GROUP_METADATA_KEY_V2 = "000200086d792d67726f7570"
GROUP_METADATA_VALUE_V3 = (
    "00030008636f6e73756d657200000001000572616e676500026d310000018bcfe568000000000100026d31ffff000163"
    "000a2f3132372e302e302e31000493e00000afc800000002000100000000"
)
V2_COMMIT_MARKER = (
    "000000000000002a000000420000000702a7d9b82a0030000000000000018bcfe568000000018bcfe5680000000000000003e8"
    "0002ffffffff000000012000000008000000010c00000000000500"
)
V2_ABORT_MARKER = (
    "000000000000002b000000420000000702007af1e10030000000000000018bcfe568010000018bcfe5680100000000000003e8"
    "0002ffffffff000000012000000008000000000c00000000000500"
)
V2_LEADER_CHANGE = (
    "0000000000000000000000540000000102725319f00020000000000000018bcfe568000000018bcfe56800ffffffffffffffff"
    "ffffffffffff000000014400000008000000023000000000000103000000010000000002000200000001000000"
)

ALLOWED = (SchemaError, InvalidRecordError)


# --------------------------------------------------------------------------- a minimal v2 walker
# Deliberately local (formats/record_batch.py is someone else's); uncompressed magic 2 only.


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7


def _batch_records(batch: bytes):
    """Yield ``(key, value)`` of each record of one uncompressed v2 batch."""
    assert batch[16] == 2, "magic"
    assert struct.unpack_from(">h", batch, 21)[0] & 0x07 == 0, "compressed batch"
    count = struct.unpack_from(">i", batch, 57)[0]
    pos = 61
    for _ in range(count):
        length, pos = _varint(batch, pos)
        end = pos + length
        pos += 1  # attributes
        _, pos = _varint(batch, pos)  # timestampDelta (a varlong; same decoding)
        _, pos = _varint(batch, pos)  # offsetDelta
        klen, pos = _varint(batch, pos)
        key = None if klen < 0 else batch[pos : pos + klen]
        pos += max(klen, 0)
        vlen, pos = _varint(batch, pos)
        value = None if vlen < 0 else batch[pos : pos + vlen]
        pos += max(vlen, 0)
        headers, pos = _varint(batch, pos)
        assert headers == 0
        assert pos == end
        yield key, value
    assert pos == len(batch)


def _log_batches(data: bytes, control_only: bool = False):
    pos = 0
    while pos + 12 <= len(data):
        batch_len = struct.unpack_from(">i", data, pos + 8)[0]
        batch = data[pos : pos + 12 + batch_len]
        pos += 12 + batch_len
        attrs = struct.unpack_from(">h", batch, 21)[0]
        if control_only and not attrs & 0x20:
            continue
        yield attrs, batch
    assert pos == len(data)


def _log_records(path: Path, control_only: bool = False):
    for _, batch in _log_batches(path.read_bytes(), control_only):
        yield from _batch_records(batch)


# --------------------------------------------------------------------------- §21 vectors


def test_offset_commit_key_v1_vector():
    raw = bytes.fromhex(OFFSET_COMMIT_KEY_V1)
    key = ot.decode_key(raw)
    assert key == ot.OffsetsKey(1, "offset_commit", {"group": "my-group", "topic": "t", "partition": 3})
    assert ot.encode_key("offset_commit", 1, key.fields) == raw
    assert ot.encode_offset_commit_key("my-group", "t", 3) == raw


def test_offset_commit_value_v3_vector():
    raw = bytes.fromhex(OFFSET_COMMIT_VALUE_V3)
    value = ot.decode_value(ot.decode_key(bytes.fromhex(OFFSET_COMMIT_KEY_V1)), raw)
    assert (value.version, value.kind) == (3, "offset_commit")
    assert value.fields == {"offset": 42, "leaderEpoch": 5, "metadata": "", "commitTimestamp": TS}
    assert ot.encode_value("offset_commit", 3, value.fields) == raw
    assert ot.encode_offset_commit_value(42, "", TS, leader_epoch=5) == raw


def test_offset_commit_value_v1_vector():
    raw = bytes.fromhex(OFFSET_COMMIT_VALUE_V1)
    value = ot.decode_value(1, raw)
    assert value.version == 1
    assert value.fields == {"offset": 42, "metadata": "m", "commitTimestamp": TS, "expireTimestamp": 1700086400000}
    assert ot.encode_value("offset_commit", 1, value.fields) == raw
    # An expire timestamp selects version 1, which has no leader epoch (§18).
    assert ot.encode_offset_commit_value(42, "m", TS, leader_epoch=9, expire_timestamp=1700086400000) == raw


def test_group_metadata_key_v2_vector():
    raw = bytes.fromhex(GROUP_METADATA_KEY_V2)
    key = ot.decode_key(raw)
    assert key == ot.OffsetsKey(2, "group_metadata", {"group": "my-group"})
    assert ot.encode_group_metadata_key("my-group") == raw
    assert ot.encode_key("group_metadata", 2, key.fields) == raw


def test_group_metadata_value_v3_vector():
    raw = bytes.fromhex(GROUP_METADATA_VALUE_V3)
    value = ot.decode_value("group_metadata", raw)
    member = {
        "memberId": "m1",
        "groupInstanceId": None,
        "clientId": "c",
        "clientHost": "/127.0.0.1",
        "rebalanceTimeout": 300000,
        "sessionTimeout": 45000,
        "subscription": b"\x00\x01",
        "assignment": b"",
    }
    assert value.version == 3
    assert value.fields == {
        "protocolType": "consumer",
        "generation": 1,
        "protocol": "range",
        "leader": "m1",
        "currentStateTimestamp": TS,
        "members": [member],
    }
    assert ot.encode_value("group_metadata", 3, value.fields) == raw
    assert ot.encode_group_metadata_value("consumer", 1, "range", "m1", TS, [member]) == raw


def _single_record(batch_hex: str) -> tuple[bytes, bytes]:
    batch = bytes.fromhex(batch_hex)
    assert struct.unpack_from(">h", batch, 21)[0] & 0x20, "control bit"
    [(key, value)] = list(_batch_records(batch))
    return key, value


@pytest.mark.parametrize(
    "batch_hex, control_type",
    [(V2_COMMIT_MARKER, ct.ControlRecordType.COMMIT), (V2_ABORT_MARKER, ct.ControlRecordType.ABORT)],
)
def test_transaction_marker_vectors(batch_hex, control_type):
    key, value = _single_record(batch_hex)
    assert key == bytes.fromhex("0000000%d" % control_type)
    assert value == bytes.fromhex("000000000005")
    assert ct.parse_control_key(key) == (0, control_type)
    assert ct.encode_control_key(control_type) == key
    marker = ct.EndTransactionMarker.decode(value)
    assert marker == ct.EndTransactionMarker(version=0, coordinator_epoch=5)
    assert marker.encode() == value == ct.encode_end_txn_marker(5)
    assert ct.decode_control_value(control_type, value) == {"version": 0, "coordinatorEpoch": 5}
    assert ct.encode_control_value(control_type, {"version": 0, "coordinatorEpoch": 5}) == value


def test_leader_change_vector():
    key, value = _single_record(V2_LEADER_CHANGE)
    assert key == bytes.fromhex("00000002")
    # version 0 | leader 1 | voters [1, 2] | granting [1] | no tagged fields
    assert value == bytes.fromhex("0000" "00000001" "03" "0000000100" "0000000200" "02" "0000000100" "00")
    assert ct.parse_control_key(key) == (0, ct.ControlRecordType.LEADER_CHANGE)
    fields = ct.decode_control_value(ct.ControlRecordType.LEADER_CHANGE, value)
    assert fields == {
        "version": 0,
        "leaderId": 1,
        "voters": [{"voterId": 1}, {"voterId": 2}],
        "grantingVoters": [{"voterId": 1}],
    }
    assert ct.encode_leader_change(fields) == value
    assert ct.encode_control_value(ct.ControlRecordType.LEADER_CHANGE, fields) == value
    assert pr.jackson_dumps(pr.to_kafka_json(ct.LEADER_CHANGE_MESSAGE, 0, fields)) == (
        '{"version":0,"leaderId":1,"voters":[{"voterId":1},{"voterId":2}],"grantingVoters":[{"voterId":1}]}'
    )


def test_leader_change_v1_adds_voter_directory_id():
    dir_id = uuid.UUID("0123456789abcdef0123456789abcdef")
    fields = {"version": 1, "leaderId": 3, "voters": [{"voterId": 3, "voterDirectoryId": dir_id}], "grantingVoters": []}
    raw = ct.encode_leader_change(fields, version=1)
    assert raw == bytes.fromhex("0001" "00000003" "02" "00000003" + dir_id.hex + "00" "01" "00")
    assert ct.decode_leader_change(raw, version=1) == fields


# --------------------------------------------------------------------------- control keys


def test_control_key_rules():
    for short in (b"", b"\x00", b"\x00\x00\x00"):
        with pytest.raises(InvalidRecordError):
            ct.parse_control_key(short)
    with pytest.raises(InvalidRecordError, match="Invalid version"):
        ct.parse_control_key(bytes.fromhex("ffff0001"))
    assert ct.parse_control_key(bytes.fromhex("00000007")) == (0, ct.ControlRecordType.UNKNOWN)
    assert ct.parse_control_key(bytes.fromhex("0000ffff")) == (0, ct.ControlRecordType.UNKNOWN)
    assert ct.parse_control_key(bytes.fromhex("00000006")) == (0, ct.ControlRecordType.KRAFT_VOTERS)
    # Newer key versions and longer keys are read as version 0.
    assert ct.parse_control_key(bytes.fromhex("00050001beef")) == (5, ct.ControlRecordType.COMMIT)
    with pytest.raises(ValueError):
        ct.encode_control_key(ct.ControlRecordType.UNKNOWN)
    with pytest.raises(SchemaError):
        ct.decode_control_value(ct.ControlRecordType.UNKNOWN, b"\x00\x00")


def test_end_txn_marker_rules():
    with pytest.raises(InvalidRecordError, match="at least 6 bytes"):
        ct.EndTransactionMarker.decode(bytes.fromhex("0000000000"))
    with pytest.raises(InvalidRecordError, match="Invalid version"):
        ct.EndTransactionMarker.decode(bytes.fromhex("ffff00000005"))
    assert ct.EndTransactionMarker.decode(bytes.fromhex("0003000000070000")) == ct.EndTransactionMarker(3, 7)


def test_kraft_values_round_trip():
    assert ct.decode_snapshot_header(ct.encode_snapshot_header(TS)) == {"version": 0, "lastContainedLogTimestamp": TS}
    assert ct.decode_snapshot_footer(ct.encode_snapshot_footer()) == {"version": 0}
    assert ct.encode_kraft_version(1) == bytes.fromhex("0000000100")
    assert ct.decode_kraft_version(bytes.fromhex("0000000100")) == {"version": 0, "kRaftVersion": 1}
    voters = {
        "version": 0,
        "voters": [
            {
                "voterId": 1,
                "voterDirectoryId": uuid.UUID(int=7),
                "endpoints": [{"name": "CONTROLLER", "host": "localhost", "port": 9093}],
                "kRaftVersionFeature": {"minSupportedVersion": 0, "maxSupportedVersion": 1},
            }
        ],
    }
    assert ct.decode_voters(ct.encode_voters(voters)) == voters


# --------------------------------------------------------------------------- group partition


def test_partition_for_group():
    assert ot.java_string_hash("my-group") == -1906497762
    assert ot.partition_for_group("my-group") == 12
    # "polygenelubricants".hashCode() is Integer.MIN_VALUE; Utils.abs maps it to 0.
    assert ot.java_string_hash("polygenelubricants") == -(1 << 31)
    assert ot.partition_for_group("polygenelubricants", 7) == 0
    # UTF-16 code units: a supplementary character counts as a surrogate pair.
    assert ot.java_string_hash("\U0001f600") == 31 * 0xD83D + 0xDE00
    assert ot.partition_for_group("", 50) == 0


# --------------------------------------------------------------------------- records and versions


def test_unknown_record_types_and_versions():
    with pytest.raises(pr.UnknownRecordTypeError) as e:
        ot.decode_key(bytes.fromhex("0011") + b"\x00\x01g")
    assert e.value.record_type == 17
    with pytest.raises(pr.UnknownRecordTypeError):
        ot.decode_key(bytes.fromhex("ffff0001"))
    with pytest.raises(pr.UnknownRecordTypeError):
        tl.decode_key(bytes.fromhex("00010001") + b"x")
    with pytest.raises(SchemaError, match="unknown version 5"):
        ot.decode_value(1, bytes.fromhex("0005") + bytes(30))
    with pytest.raises(SchemaError, match="unknown version 2"):
        tl.decode_value(bytes.fromhex("0002") + bytes(40))
    with pytest.raises(SchemaError, match="too short"):
        ot.decode_key(b"\x00")
    assert ot.decode_value(1, None) is None and tl.decode_value(None) is None


def test_trailing_bytes_are_kept_not_rejected():
    # Kafka's readers ignore bytes after the struct; we keep them for inspection.
    value = ot.decode_value(1, bytes.fromhex(OFFSET_COMMIT_VALUE_V3) + b"\xab")
    assert value.trailing == b"\xab" and value.fields["offset"] == 42
    key = ot.decode_key(bytes.fromhex(GROUP_METADATA_KEY_V2) + b"zz")
    assert key.trailing == b"zz"
    with pytest.raises(SchemaError, match="1 unexpected bytes"):
        pr.decode_all(ot.OFFSET_COMMIT_VALUE, 3, bytes.fromhex(OFFSET_COMMIT_VALUE_V3)[2:] + b"\x00")


def test_kip848_records_round_trip():
    topic_id = uuid.UUID(int=0x1234)
    key = ot.encode_key("consumer_group_current_member_assignment", 8, {"groupId": "g", "memberId": "m"})
    assert key == bytes.fromhex("0008" "0001" "67" "0001" "6d")
    fields = {
        "memberEpoch": 5,
        "previousMemberEpoch": 4,
        "state": 0,
        "assignedPartitions": [{"topicId": topic_id, "partitions": [0, 1], "assignmentEpochs": [5, 5]}],
        "partitionsPendingRevocation": [],
    }
    raw = ot.encode_value("consumer_group_current_member_assignment", 0, fields)
    # compact array of 1; topic id; compact [0, 1]; tag 0 (size 9: compact [5, 5]); struct end; [] ; end
    assert raw == bytes.fromhex(
        "0000" "00000005" "00000004" "00" "02" + topic_id.hex + "03" "00000000" "00000001"
        "01" "00" "09" "03" "00000005" "00000005" "01" "00"
    )
    decoded = ot.decode_value(ot.decode_key(key), raw)
    assert decoded.fields == fields and decoded.kind == "consumer_group_current_member_assignment"
    # A tagged field at its default is not written, and decodes back to the default.
    fields["assignedPartitions"][0]["assignmentEpochs"] = None
    raw = ot.encode_value("consumer_group_current_member_assignment", 0, fields)
    assert ot.decode_value(8, raw).fields == fields


def test_share_group_metadata_layouts():
    current = ot.encode_value("share_group_metadata", 0, {"epoch": 3, "metadataHash": 99})
    assert current == bytes.fromhex("0000" "00000003" "0000000000000063" "00")
    preview = ot.encode_value("share_group_metadata", 0, {"epoch": 3})
    assert preview == bytes.fromhex("0000" "00000003" "00")
    v = ot.decode_value(11, current)
    assert v.fields == {"epoch": 3, "metadataHash": 99} and v.schema is ot.SHARE_GROUP_METADATA_VALUE
    v = ot.decode_value(11, preview)
    assert v.fields == {"epoch": 3} and v.schema is ot.SHARE_GROUP_METADATA_VALUE_PREVIEW
    assert ot.encode_value(v.kind, v.version, v.fields, v.schema) == preview


def test_unknown_tagged_fields_survive():
    fields = {
        "producerId": 10,
        "previousProducerId": 9,
        "nextProducerId": -1,
        "producerEpoch": 1,
        "transactionTimeoutMs": 60000,
        "transactionStatus": 2,
        "transactionPartitions": [{"topic": "t", "partitionIds": [0], "_tagged": {3: b"\x01"}}],
        "transactionLastUpdateTimestampMs": TS,
        "transactionStartTimestampMs": TS - 1,
        "clientTransactionVersion": 2,
        "_tagged": {1000: b"hello", 5: b""},
    }
    raw = tl.encode_value(fields, version=1)
    value = tl.decode_value(raw)
    assert value.fields == fields and tl.encode_value(value.fields, 1) == raw
    assert value.state is tl.TransactionState.PREPARE_COMMIT
    # Tags are written in ascending order: 0 (previousProducerId), 2, 5, 1000.
    assert raw.endswith(
        bytes([4, 0, 8]) + (9).to_bytes(8, "big") + bytes([2, 2, 0, 2, 5, 0, 0xE8, 0x07, 5]) + b"hello"
    )
    # JSON keeps schema order, omits defaults and unknown tags.
    assert tl.dump_value_json(value) == (
        '{"version":"1","data":{"producerId":10,"previousProducerId":9,"producerEpoch":1,'
        '"transactionTimeoutMs":60000,"transactionStatus":2,"transactionPartitions":'
        '[{"topic":"t","partitionIds":[0]}],"transactionLastUpdateTimestampMs":1700000000000,'
        '"transactionStartTimestampMs":1699999999999,"clientTransactionVersion":2}}'
    )


def test_transaction_states():
    names = [str(s) for s in tl.TransactionState]
    assert names == [
        "Empty",
        "Ongoing",
        "PrepareCommit",
        "PrepareAbort",
        "CompleteCommit",
        "CompleteAbort",
        "Dead",
        "PrepareEpochFence",
    ]
    assert [int(s) for s in tl.TransactionState] == list(range(8))
    with pytest.raises(SchemaError, match="Unknown transaction state id 8"):
        tl.transaction_state(8)
    raw = tl.encode_transaction_metadata(7, 0, 60000, tl.TransactionState.EMPTY, None, TS, -1)
    assert tl.decode_value(raw).fields["transactionPartitions"] is None
    assert tl.decode_key(tl.encode_key("txn")).transactional_id == "txn"


def test_consumer_protocol():
    sub = {
        "topics": ["a", "b"],
        "userData": None,
        "ownedPartitions": [{"topic": "a", "partitions": [0, 2]}],
        "generationId": 4,
        "rackId": "r1",
    }
    raw = ot.encode_consumer_subscription(sub, 3)
    assert ot.decode_consumer_subscription(raw) == ot.ConsumerProtocolData(3, sub)
    v0 = ot.encode_consumer_subscription({"topics": ["a"], "userData": b"u"}, 0)
    assert v0 == bytes.fromhex("0000" "00000001" "0001" "61" "00000001" "75")
    assert ot.decode_consumer_subscription(v0).fields == {"topics": ["a"], "userData": b"u"}
    # A newer version is read with the newest layout by the client, not by DumpLogSegments.
    v9 = b"\x00\x09" + raw[2:]
    assert ot.decode_consumer_subscription(v9) == ot.ConsumerProtocolData(9, sub)
    with pytest.raises(SchemaError):
        ot.decode_consumer_subscription(v9, cap_version=False)
    with pytest.raises(SchemaError, match="Unsupported subscription version"):
        ot.decode_consumer_subscription(b"\xff\xff")
    asg = {"assignedPartitions": [{"topic": "a", "partitions": [1]}], "userData": b""}
    assert ot.decode_consumer_assignment(ot.encode_consumer_assignment(asg, 1)).fields == asg


def test_dump_json_texts():
    key = ot.decode_key(bytes.fromhex(OFFSET_COMMIT_KEY_V1))
    assert ot.dump_key_json(key) == '{"type":"1","data":{"group":"my-group","topic":"t","partition":3}}'
    value = ot.decode_value(key, bytes.fromhex(OFFSET_COMMIT_VALUE_V3))
    assert ot.dump_value_json(value) == (
        '{"version":"3","data":{"offset":42,"leaderEpoch":5,"metadata":"","commitTimestamp":1700000000000}}'
    )
    assert ot.dump_value_json(None) == "<DELETE>"
    group = ot.decode_value(2, bytes.fromhex(GROUP_METADATA_VALUE_V3))
    # The vector's subscription "0001" is a bare version: it fails to decode and stays base64.
    assert ot.dump_value_json(group).endswith('"subscription":"AAE=","assignment":""}]}}')
    member = dict(group.fields["members"][0])
    member["subscription"] = ot.encode_consumer_subscription({"topics": ["t"], "generationId": 1}, 2)
    group = ot.decode_value(2, ot.encode_group_metadata_value("consumer", 1, "range", "m1", TS, [member]))
    assert '"subscription":{"topics":["t"],"userData":null,"ownedPartitions":[],"generationId":1}' in (
        ot.dump_value_json(group)
    )
    txn = tl.decode_key(tl.encode_key("t-1"))
    assert tl.dump_key_json(txn) == '{"type":"0","data":{"transactionalId":"t-1"}}'


def test_json_rendering_details():
    assert pr.jackson_dumps({"s": 'a"\\\n\x01\x1f/é'}) == '{"s":"a\\"\\\\\\n\\u0001\\u001F/é"}'
    assert pr.kafka_uuid_str(uuid.UUID(int=0)) == "AAAAAAAAAAAAAAAAAAAAAA"
    assert pr.java_string(b"ok\xff".decode("utf-8", "surrogateescape")) == "ok\ufffd"
    assert [pr.jackson_dumps(x) for x in (1.0, 1e7, 0.001, 1.5e-5, -2.5e20)] == [
        "1.0",
        "1.0E7",
        "0.001",
        "1.5E-5",
        "-2.5E20",
    ]


def test_invalid_utf8_round_trips():
    raw = bytes.fromhex("0001" "0003") + b"g\xffz" + bytes.fromhex("0001") + b"t" + bytes(4)
    key = ot.decode_key(raw)
    assert ot.encode_key("offset_commit", 1, key.fields) == raw
    assert ot.dump_key_json(key) == '{"type":"1","data":{"group":"g\ufffdz","topic":"t","partition":0}}'


# --------------------------------------------------------------------------- hostile input


def _field_error(raw: bytes, decoder, *match: str) -> SchemaError:
    tracemalloc.start()
    try:
        with pytest.raises(SchemaError) as e:
            decoder(raw)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, f"{peak} bytes allocated"
    for m in match:
        assert m in str(e.value)
    return e.value


def test_absurd_length_fields_are_bounded():
    # string length 0x7fff (the int16 maximum) in a 19-byte key
    e = _field_error(bytes.fromhex("0001" "7fff") + b"my-group", ot.decode_key, "group", "32767")
    assert e.position == 2
    # string length above Short.MAX_VALUE in a flexible (compact) string
    compact = bytes.fromhex("0004" "0000000000000001" "ffffffff") + bytes(20)
    _field_error(compact, lambda b: ot.decode_value(1, b), "metadata")
    # subscription bytes of length 0x7fffffff
    head = bytes.fromhex(GROUP_METADATA_VALUE_V3)
    sub_at = head.index(bytes.fromhex("0000afc8")) + 4
    bad = head[:sub_at] + bytes.fromhex("7fffffff") + head[sub_at + 4 :]
    e = _field_error(bad, lambda b: ot.decode_value(2, b), "subscription", "2147483647")
    assert e.position == sub_at
    # members array count 0x7fffffff
    members_at = head.index(bytes.fromhex("00000001" "00026d31"))
    bad = head[:members_at] + bytes.fromhex("7fffffff") + head[members_at + 4 :]
    _field_error(bad, lambda b: ot.decode_value(2, b), "members", "2147483647")
    # compact array count 0xffffffff - 1 in a flexible value
    _field_error(bytes.fromhex("0000" "ffffffff0f") + bytes(8), lambda b: ot.decode_value(7, b), "topicPartitions")
    # a tagged field whose size runs past the end
    _field_error(bytes.fromhex("0000" "00000001" "01" "05" "ffffff7f"), lambda b: ot.decode_value(3, b), "tag 5")
    # a 6-byte varint
    _field_error(bytes.fromhex("0000" "00000001" "ffffffffff01"), lambda b: ot.decode_value(3, b), "too long")


HIGH_LEVEL_DECODERS = [
    ot.decode_key,
    tl.decode_key,
    tl.decode_value,
    ct.parse_control_key,
    ct.EndTransactionMarker.decode,
    ot.decode_consumer_subscription,
    ot.decode_consumer_assignment,
    *[(lambda b, t=t: ot.decode_value(t, b)) for t in ot.RECORD_TYPES],
    *[(lambda b, t=t: ct.decode_control_value(t, b)) for t in ct.ControlRecordType],
]

SCHEMA_VERSIONS = [
    (schema, version)
    for schema in (*ot.SCHEMAS, *ot.CONSUMER_PROTOCOL_SCHEMAS, *tl.SCHEMAS, *ct.SCHEMAS)
    for version in schema.versions()
]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.binary(max_size=80))
def test_random_bytes_raise_only_format_errors(data, raw):
    decoder = data.draw(st.sampled_from(HIGH_LEVEL_DECODERS))
    try:
        decoder(raw)
    except ALLOWED:
        pass
    schema, version = data.draw(st.sampled_from(SCHEMA_VERSIONS))
    try:
        value, _ = pr.decode(schema, version, raw)
    except ALLOWED:
        return
    # Whatever decodes re-encodes, and that encoding decodes to the same value.
    again = pr.encode(schema, version, value)
    assert pr.decode(schema, version, again) == (value, len(again))


def _corpus_samples() -> list[bytes]:
    samples = [
        bytes.fromhex(h)
        for h in (
            OFFSET_COMMIT_KEY_V1,
            OFFSET_COMMIT_VALUE_V3,
            OFFSET_COMMIT_VALUE_V1,
            GROUP_METADATA_KEY_V2,
            GROUP_METADATA_VALUE_V3,
        )
    ]
    for batch in (V2_COMMIT_MARKER, V2_ABORT_MARKER, V2_LEADER_CHANGE):
        samples += _single_record(batch)
    samples.append(tl.encode_transaction_metadata(1, 2, 3, 1, [("t", [0, 1])], 4, 5, version=1, next_producer_id=6))
    return samples


def test_every_truncation_raises_only_format_errors():
    for raw in _corpus_samples():
        for cut in range(len(raw)):
            for decoder in HIGH_LEVEL_DECODERS:
                try:
                    decoder(raw[:cut])
                except ALLOWED:
                    pass


# --------------------------------------------------------------------------- Hypothesis round trips

_INT_BOUNDS = {
    "int8": (-(1 << 7), (1 << 7) - 1),
    "int16": (-(1 << 15), (1 << 15) - 1),
    "uint16": (0, (1 << 16) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1),
    "uint32": (0, (1 << 32) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
}

_strings = st.one_of(st.text(max_size=12), st.binary(max_size=8).map(lambda b: b.decode("utf-8", "surrogateescape")))


def _primitive(t: str):
    if t in _INT_BOUNDS:
        lo, hi = _INT_BOUNDS[t]
        return st.integers(lo, hi)
    return {
        "bool": st.booleans(),
        "uuid": st.uuids(),
        "float64": st.floats(allow_nan=False),
        "string": _strings,
        "bytes": st.binary(max_size=12),
    }[t]


def _value(t, version: int, flexible: bool, nullable: bool, depth: int):
    if isinstance(t, str):
        s = _primitive(t)
    elif isinstance(t, pr.Array):
        el = t.element
        inner = _struct(el, version, flexible, depth + 1) if isinstance(el, pr.Struct) else _primitive(el)
        s = st.lists(inner, max_size=3 if depth < 2 else 1)
    else:
        s = _struct(t, version, flexible, depth + 1)
    return st.one_of(st.none(), s) if nullable else s


def _struct(schema: pr.Struct, version: int, flexible: bool, depth: int = 0):
    fields = {
        f.name: _value(f.type, version, flexible, f.nullable_in(version), depth)
        for f in schema.fields
        if f.present_in(version)
    }
    base = st.fixed_dictionaries(fields)
    if not flexible:
        return base
    known = {f.tagged for f in schema.fields if f.tagged is not None}
    unknown = st.dictionaries(
        st.integers(0, 300).filter(lambda tag: tag not in known), st.binary(max_size=6), max_size=2
    )
    return st.tuples(base, unknown).map(lambda bu: {**bu[0], "_tagged": bu[1]} if bu[1] else bu[0])


@pytest.mark.parametrize(
    "schema, version", SCHEMA_VERSIONS, ids=[f"{s.name}-v{v}" for s, v in SCHEMA_VERSIONS]
)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_round_trip_every_schema_version(schema, version, data):
    value = data.draw(_struct(schema, version, schema.is_flexible(version)))
    raw = pr.encode(schema, version, value)
    decoded, end = pr.decode(schema, version, raw)
    assert end == len(raw)
    assert decoded == value
    assert pr.encode(schema, version, decoded) == raw
    # Decoding inside a larger buffer honours pos and stops at the struct's end.
    assert pr.decode(schema, version, b"\xee" + raw + b"\xee", 1) == (value, len(raw) + 1)
    pr.jackson_dumps(pr.to_kafka_json(schema, version, decoded))


# --------------------------------------------------------------------------- real data

# The corpus is part of the project contract: a missing one fails (the `corpus` fixture).
needs_corpus = pytest.mark.usefixtures("corpus")

ITUMELENG = "ItumelengMogase__Real-Time-Data-Pipeline-for-Patient-Admissions/kafka-data"
INTERNAL_TOPIC_LOGS = {
    # file (relative to the corpus) -> records expected in it
    f"{ITUMELENG}/__consumer_offsets-29/00000000000000000000.log": 39,
    f"{ITUMELENG}/__consumer_offsets-37/00000000000000000000.log": 37,
    "rjmfernandes__flink-on-prem/data/__consumer_offsets-28/00000000000000000000.log": 4,
    "rjmfernandes__flink-on-prem/data/__consumer_offsets-29/00000000000000000000.log": 2,
    "rjmfernandes__flink-on-prem/data/__consumer_offsets-34/00000000000000000000.log": 10,
    "rjmfernandes__flink-on-prem/data/__consumer_offsets-36/00000000000000000000.log": 1564,
    "rjmfernandes__flink-on-prem/data/__consumer_offsets-46/00000000000000000000.log": 8,
    "William0423__kafka/kafka-logs/__consumer_offsets-28/00000000000000000000.log": 8202,
    "ArthurArutunyan04__Backend_labs/kafka-data/__consumer_offsets-19/00000000000000000000.log": 7,
    "yuanliubei__kafka-source-code/kafka-logs/__consumer_offsets-17/00000000000000000000.log": 2,
    "yuanliubei__kafka-source-code/kafka-logs/__consumer_offsets-17/00000000000000000058.log": 2,
}


@needs_corpus
@pytest.mark.parametrize("rel", sorted(INTERNAL_TOPIC_LOGS), ids=lambda r: r.split("/")[0] + ":" + r.split("/")[-2])
def test_real_consumer_offsets_records(rel):
    seen = 0
    for key_bytes, value_bytes in _log_records(CORPUS / rel):
        seen += 1
        key = ot.decode_key(key_bytes)
        assert key.trailing == b""
        assert ot.encode_key(key.kind, key.version, key.fields) == key_bytes
        value = ot.decode_value(key, value_bytes)
        if value_bytes is None:
            assert value is None
            continue
        assert value.trailing == b""
        assert ot.encode_value(key.kind, value.version, value.fields) == value_bytes
        ot.dump_key_json(key), ot.dump_value_json(value)
        if key.kind == "offset_commit":
            assert ot.partition_for_group(key.fields["group"]) == int(rel.split("__consumer_offsets-")[1].split("/")[0])
        if key.kind == "group_metadata" and value.fields["protocolType"] == ot.CONSUMER_PROTOCOL_TYPE:
            for member in value.fields["members"]:
                sub = ot.decode_consumer_subscription(member["subscription"])
                assert ot.encode_consumer_subscription(sub.fields, sub.version) == member["subscription"]
                if member["assignment"]:
                    asg = ot.decode_consumer_assignment(member["assignment"])
                    assert ot.encode_consumer_assignment(asg.fields, asg.version) == member["assignment"]
    assert seen == INTERNAL_TOPIC_LOGS[rel]


@needs_corpus
def test_real_consumer_offsets_cover_known_files():
    found = {p.relative_to(CORPUS).as_posix() for p in CORPUS.glob("**/__consumer_offsets-*/*.log")}
    assert found == set(INTERNAL_TOPIC_LOGS)


@needs_corpus
def test_real_transaction_state_records():
    rel = f"{ITUMELENG}/__transaction_state-44/00000000000000000000.log"
    states = []
    for key_bytes, value_bytes in _log_records(CORPUS / rel):
        key = tl.decode_key(key_bytes)
        assert key.transactional_id == "default_"
        assert tl.encode_key(key.transactional_id) == key_bytes
        value = tl.decode_value(value_bytes)
        assert value.trailing == b"" and value.version == 0
        assert tl.encode_value(value.fields, value.version) == value_bytes
        states.append(value.state)
        tl.dump_value_json(value)
    S = tl.TransactionState
    assert states == [S.EMPTY, S.ONGOING, S.PREPARE_COMMIT, S.COMPLETE_COMMIT]


@needs_corpus
def test_real_control_records():
    paths = [
        *CORPUS.glob("**/__cluster_metadata-*/*.log"),
        *CORPUS.glob("**/*.checkpoint"),
        *CORPUS.glob("**/_confluent-ksql-default__command_topic-0/*.log"),
    ]
    seen: dict[ct.ControlRecordType, int] = {}
    for path in paths:
        for key, value in _log_records(path, control_only=True):
            version, control_type = ct.parse_control_key(key)
            assert version == 0 and ct.encode_control_key(control_type) == key
            fields = ct.decode_control_value(control_type, value)
            assert ct.encode_control_value(control_type, fields) == value
            seen[control_type] = seen.get(control_type, 0) + 1
    T = ct.ControlRecordType
    assert seen.keys() >= {T.COMMIT, T.LEADER_CHANGE, T.SNAPSHOT_HEADER, T.SNAPSHOT_FOOTER}
