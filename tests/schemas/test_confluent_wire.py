"""formats/confluent_wire.py: every framing Confluent's serializers write, checked against
confluent-kafka's own ``SchemaId`` (an independent implementation of the same carriers), and
the bytes that are not framed, with the reason."""

from __future__ import annotations

import io
import uuid

import pytest
from confluent_kafka.schema_registry.common.serde import SchemaId
from hypothesis import given
from hypothesis import strategies as st

from plog.formats.confluent_wire import (
    KEY_SCHEMA_ID_HEADER,
    VALUE_SCHEMA_ID_HEADER,
    WireFormatError,
    encode_message_indexes,
    encode_prefix,
    parse_frame,
    read_message_indexes,
    split_payload,
)

GUID = uuid.UUID("0b4e8a0c-2f3d-4c5b-8a7e-112233445566")


def test_magic_0_prefix():
    frame = parse_frame(b"\x00\x00\x00\x01\x2a" + b"payload")
    assert frame.framed and frame.schema_id == 298 and frame.guid is None and frame.carrier == "prefix"
    assert split_payload(frame, protobuf=False) == (None, b"payload")


def test_magic_1_prefix():
    frame = parse_frame(b"\x01" + GUID.bytes + b"payload")
    assert frame.framed and frame.guid == GUID and frame.schema_id is None
    assert split_payload(frame, protobuf=False) == (None, b"payload")


def test_id_in_a_header_and_the_bare_payload():
    headers = [("other", b"x"), (VALUE_SCHEMA_ID_HEADER, b"\x01" + GUID.bytes)]
    frame = parse_frame(b"bare payload", headers)
    assert frame.framed and frame.carrier == "header" and frame.header == VALUE_SCHEMA_ID_HEADER
    assert frame.guid == GUID and split_payload(frame, protobuf=False) == (None, b"bare payload")
    # the key has its own header; the value's says nothing about the key
    key = parse_frame(b"\x00\x00\x00\x00\x07k", headers, is_key=True)
    assert key.carrier == "prefix" and key.schema_id == 7


def test_the_last_header_wins_and_a_null_header_is_absent():
    first, last = uuid.UUID(int=1), uuid.UUID(int=2)
    headers = [(KEY_SCHEMA_ID_HEADER, b"\x01" + first.bytes), (KEY_SCHEMA_ID_HEADER, b"\x01" + last.bytes)]
    assert parse_frame(b"k", headers, is_key=True).guid == last
    # Kafka's lastHeader is the last one; a null value there means: read the prefix
    assert parse_frame(b"\x00\x00\x00\x00\x05v", [(VALUE_SCHEMA_ID_HEADER, None)]).schema_id == 5


def test_protobuf_indexes_in_the_prefix_and_in_the_header():
    prefix = parse_frame(b"\x00\x00\x00\x00\x03" + b"\x04\x02\x06" + b"\x08\x01")
    assert split_payload(prefix, protobuf=True) == ([1, 3], b"\x08\x01")
    header = parse_frame(b"\x08\x01", [(VALUE_SCHEMA_ID_HEADER, b"\x01" + GUID.bytes + b"\x00")])
    assert split_payload(header, protobuf=True) == ([0], b"\x08\x01")


@pytest.mark.parametrize("data, reason", [
    (None, "null value"),
    (b"", "empty value"),
    (b"{\"a\":1}", "the first byte of the value is 0x7b, not a Confluent magic byte (0 or 1)"),
    (b"\x00\x00\x01", "truncated: the value has 3 bytes, a magic byte 0 and a schema id need 5"),
    (b"\x01" + bytes(10), "truncated: the value has 11 bytes, a magic byte 1 and a schema GUID need 17"),
])
def test_not_framed_says_why(data, reason):
    frame = parse_frame(data)
    assert not frame.framed and frame.reason == reason


def test_a_bad_header_is_not_framed():
    frame = parse_frame(b"x", [(VALUE_SCHEMA_ID_HEADER, b"\x07abc")])
    assert not frame.framed
    assert frame.reason == ("the first byte of the header __value_schema_id is 0x07, not a Confluent magic byte "
                            "(0 or 1)")


@pytest.mark.parametrize("tail, message", [
    (b"", "the Protobuf message-index count does not decode"),
    (b"\x7f", "impossible Protobuf message-index count -64"),
    (b"\x14\x02", "impossible Protobuf message-index count 10"),
    (b"\x04\x02", "impossible Protobuf message-index count 2 (1 byte left)"),
    (b"\x02\x80", "a Protobuf message index does not decode"),
    (b"\x02\x01", "negative Protobuf message index -1"),
])
def test_hostile_message_indexes(tail, message):
    frame = parse_frame(b"\x00\x00\x00\x00\x01" + tail)
    with pytest.raises(WireFormatError) as e:
        split_payload(frame, protobuf=True)
    assert str(e.value).startswith(message)


def test_header_with_bytes_after_the_indexes():
    frame = parse_frame(b"p", [(VALUE_SCHEMA_ID_HEADER, b"\x00\x00\x00\x00\x01\x00junk")])
    with pytest.raises(WireFormatError, match="4 unexpected bytes after the message indexes"):
        split_payload(frame, protobuf=True)


def _confluent(schema_id, guid, indexes, *, prefix: bool) -> bytes:
    sid = SchemaId("PROTOBUF", schema_id, str(guid) if guid else None, indexes)
    return sid.id_to_bytes() if prefix else sid.guid_to_bytes()


@given(st.integers(0, 2**31 - 1), st.lists(st.integers(0, 2**31 - 1), min_size=1, max_size=6),
       st.binary(max_size=20))
def test_confluent_kafka_carriers_parse(schema_id, indexes, payload):
    """confluent-kafka's SchemaId writes both carriers; plog reads back the id, GUID and indexes."""
    framed = _confluent(schema_id, None, indexes, prefix=True) + payload
    frame = parse_frame(framed)
    assert frame.schema_id == schema_id
    assert split_payload(frame, protobuf=True) == (indexes, payload)
    guid = uuid.UUID(int=schema_id * 7919)
    header = _confluent(None, guid, indexes, prefix=False)
    frame = parse_frame(payload, [(VALUE_SCHEMA_ID_HEADER, header)])
    assert frame.guid == guid and split_payload(frame, protobuf=True) == (indexes, payload)
    # and what plog writes, confluent-kafka reads
    sid = SchemaId("PROTOBUF")
    rest = sid.from_bytes(io.BytesIO(encode_prefix(schema_id, message_indexes=indexes) + payload))
    assert (sid.id, sid.message_indexes, rest.read()) == (schema_id, indexes, payload)


def test_the_short_form_of_index_zero():
    assert encode_message_indexes([0]) == b"\x00"
    assert encode_message_indexes([0, 0]) == b"\x04\x00\x00"
    assert read_message_indexes(b"\x00") == ([0], 1)
    assert read_message_indexes(b"\x02\x00") == ([0], 2)  # the long form of [0] reads too


def test_encode_prefix_needs_one_id():
    with pytest.raises(ValueError):
        encode_prefix()
    with pytest.raises(ValueError):
        encode_prefix(1, GUID)
    assert encode_prefix(guid=GUID) == b"\x01" + GUID.bytes
