"""The ``_schemas`` records (formats/schema_registry.py) and the registry's rebuild of its store
from them (engine/schemas/registry_state.py), on records written as the registry writes them
(tests/schemas/registry_records.py) and on a real registry's topic from the corpus."""

from __future__ import annotations

import base64
import hashlib
import json
import struct
import sys
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from registry_records import (  # noqa: E402
    NOOP_KEY,
    clear_subject_record,
    config_record,
    delete_subject_record,
    mode_record,
    schema_record,
)

from plog.engine.schemas.registry_state import RegistryState  # noqa: E402
from plog.formats.schema_registry import (  # noqa: E402
    RegistryRecordError,
    SchemaReference,
    SchemaValue,
    parse_key,
    parse_value,
    schema_guid,
    schema_value_json,
)

S1 = '{"type":"record","name":"A","fields":[{"name":"a","type":"int"}]}'
S2 = '{"type":"record","name":"A","fields":[{"name":"a","type":"int"},{"name":"b","type":"string","default":""}]}'
S3 = '"string"'


def replay(records) -> RegistryState:
    state = RegistryState()
    for offset, (key, value) in enumerate(records):
        state.apply(offset, key, value)
    return state


def rows(state: RegistryState) -> list[tuple]:
    return [(v.subject, v.version, v.id, v.deleted) for v in state.schemas()]


# -- one record ----------------------------------------------------------------------------------------


def test_the_real_registry_records_of_the_corpus(corpus):
    """Records a Confluent registry wrote (Confluent Platform 7.6, in the corpus) parse."""
    from plog.engine.schemas.sources import load_registry

    loaded = load_registry(corpus / "rjmfernandes__flink-on-prem" / "data")
    state = loaded.state
    assert (state.records, state.skipped, loaded.report.skipped) == (10, [], [])
    assert [(v.subject, v.version, v.id) for v in state.schemas()][:3] == [
        ("customers-value", 1, 1), ("customers_keyed-value", 1, 4), ("loyalty_levels-value", 1, 7)]
    orders = state.by_id(2)
    assert orders.subject == "orders-value" and orders.schema_type == "AVRO" and not orders.deleted
    assert json.loads(orders.schema)["name"] == "shoe_orders"
    # a registry of NOOP records only (the other corpus source): nothing registered
    noops = load_registry(corpus / "ItumelengMogase__Real-Time-Data-Pipeline-for-Patient-Admissions" / "kafka-data")
    assert noops.state.records > 0 and noops.state.schemas() == [] and noops.state.skipped == []


@pytest.mark.parametrize("key, reason", [
    (None, "null key"),
    (b"not json", "the key is not JSON"),
    (b"[1]", "the key is not a JSON object"),
    (b'{"keytype":"BOGUS","magic":0}', "unknown keytype 'BOGUS'"),
    (b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":2}', "a SCHEMA key with magic 2"),
    (b'{"keytype":"SCHEMA","version":1,"magic":1}', "a SCHEMA key without a subject"),
    (b'{"keytype":"SCHEMA","subject":"s","magic":1}', 'the key\'s "version" is missing'),
    (b'\xff{}', "the key is not UTF-8"),
])
def test_keys_the_registry_skips(key, reason):
    with pytest.raises(RegistryRecordError) as e:
        parse_key(key)
    assert str(e.value).startswith(reason)


def test_values():
    key = parse_key(b'{"keytype":"SCHEMA","subject":"s-value","version":2,"magic":1}')
    value = parse_value(key, b'{"subject":"s-value","version":2,"id":7,"schemaType":"PROTOBUF","references":'
                             b'[{"name":"a.proto","subject":"a","version":1}],"schema":"syntax = \\"proto3\\";",'
                             b'"deleted":true}')
    assert (value.id, value.schema_type, value.deleted) == (7, "PROTOBUF", True)
    assert value.references == (SchemaReference("a.proto", "a", 1),)
    # absent schemaType is AVRO, absent deleted is false
    plain = parse_value(key, b'{"subject":"s-value","version":2,"id":7,"schema":"\\"int\\""}')
    assert (plain.schema_type, plain.deleted, plain.references) == ("AVRO", False, ())
    assert parse_value(key, None) is None
    with pytest.raises(RegistryRecordError, match='without a "schema" string'):
        parse_value(key, b'{"subject":"s-value","version":2,"id":7}')
    # an old CONFIG value without its subject takes the key's
    ckey = parse_key(b'{"keytype":"CONFIG","subject":"x","magic":0}')
    assert parse_value(ckey, b'{"compatibilityLevel":"FULL"}').subject == "x"
    assert parse_key(b'{"keytype":"CONFIG","magic":0}').identity == ("CONFIG", None, None)
    # NOOP values are never read
    assert parse_value(parse_key(NOOP_KEY), b"garbage") is None


def test_a_soft_delete_written_back_keeps_the_field_order():
    key, value = schema_record("s", 1, 3, S3)
    parsed = parse_value(parse_key(key), value)
    assert schema_value_json(parsed, deleted=True) == value.replace(b'"deleted":false', b'"deleted":true')


# -- the GUID ------------------------------------------------------------------------------------------


def test_guid_is_the_registrys_md5():
    """The registry's MD5.ofSchema: schema text, then each reference's name, subject and
    version (4 bytes, big-endian); metadata and rule sets after a byte 1 each."""
    refs = (SchemaReference("com.acme.Address", "address-value", 3),)
    value = SchemaValue("s", 1, 9, S1, references=refs)
    md = hashlib.md5(S1.encode() + b"com.acme.Address" + b"address-value" + struct.pack(">i", 3))
    assert schema_guid(value) == uuid.UUID(bytes=md.digest())
    assert schema_guid(SchemaValue("s", 1, 9, S1)) == uuid.UUID(bytes=hashlib.md5(S1.encode()).digest())
    meta = SchemaValue("s", 1, 9, S1, metadata={"properties": {"owner": "bob", "a": "1"}, "tags": {"t": ["y", "x"]}})
    md = hashlib.md5(S1.encode() + b"\x01" + b"t" + b"x" + b"y" + b"a" + b"1" + b"owner" + b"bob")
    assert schema_guid(meta) == uuid.UUID(bytes=md.digest())
    rules = SchemaValue("s", 1, 9, S1, rule_set={"domainRules": [{"name": "r", "kind": "CONDITION", "mode": "WRITE",
                                                                  "type": "CEL", "expr": "true", "disabled": True}]})
    md = hashlib.md5(S1.encode() + b"\x01" + b"r" + b"CONDITION" + b"WRITE" + b"CEL" + b"true" + b"\x01")
    assert schema_guid(rules) == uuid.UUID(bytes=md.digest())
    # a value carrying its md5 (metadata encryption) uses it
    given = uuid.uuid4()
    assert schema_guid(SchemaValue("s", 1, 9, S1, md5=base64.b64encode(given.bytes).decode())) == given


# -- the rebuild ---------------------------------------------------------------------------------------


def test_latest_value_per_key_and_tombstones():
    state = replay([
        (NOOP_KEY, None),
        schema_record("a-value", 1, 1, S1),
        schema_record("a-value", 2, 2, S2),
        schema_record("b-value", 1, 3, S3),
        (schema_record("b-value", 1, 3, S3)[0], None),  # hard delete
        config_record(None, "FULL"),
        config_record("a-value", "NONE"),
        config_record("a-value", None),  # the subject's config deleted again
        mode_record(None, "IMPORT"),
    ])
    assert rows(state) == [("a-value", 1, 1, False), ("a-value", 2, 2, False)]
    assert state.by_id(3) is None and state.hard_deleted_by_id(3).schema == S3
    assert [v.id for v in state.hard_deleted()] == [3]
    assert [e.value.fields for e in state.configs()] == [{"compatibilityLevel": "FULL"}]
    assert [e.value.mode for e in state.modes()] == ["IMPORT"]
    assert state.version("a-value", -1).version == 2
    assert state.skipped == []


def test_soft_deletes_and_delete_subject():
    state = replay([
        schema_record("a-value", 1, 1, S1),
        schema_record("a-value", 2, 2, S2),
        schema_record("a-value", 2, 2, S2, deleted=True),  # DELETE /subjects/a-value/versions/2
        schema_record("b-value", 1, 3, S3),
        schema_record("b-value", 2, 1, S1),
        delete_subject_record("b-value", 2),  # DELETE /subjects/b-value: versions 1..2
    ])
    assert rows(state) == [("a-value", 1, 1, False), ("a-value", 2, 2, True),
                           ("b-value", 1, 3, True), ("b-value", 2, 1, True)]
    assert state.subjects() == ["a-value"] and state.subjects(include_deleted=True) == ["a-value", "b-value"]
    assert state.version("a-value", -1).version == 1 and state.version("b-value", -1) is None
    # soft-deleted schemas are still served by id
    assert state.by_id(2).version == 2 and state.by_id(3).subject == "b-value"


def test_a_subject_reregistered_after_a_soft_delete():
    state = replay([
        schema_record("a-value", 1, 1, S1),
        delete_subject_record("a-value", 1),
        schema_record("a-value", 2, 1, S1),  # the same schema again: the same id, a new version
    ])
    assert rows(state) == [("a-value", 1, 1, True), ("a-value", 2, 1, False)]
    assert state.version("a-value", -1).version == 2


def test_clear_subject_and_permanent_deletes():
    state = replay([
        schema_record("a-value", 1, 1, S1),
        schema_record("a-value", 2, 2, S2),
        schema_record(":.ctx:c-value", 1, 1, S3),
        delete_subject_record("a-value", 2),
        clear_subject_record("a-value"),  # drops the soft-deleted versions from the store
        schema_record(":.ctx:d-value", 1, 2, S1, deleted=True),
        clear_subject_record(":.ctx:"),  # a whole context: only its soft-deleted versions
    ])
    assert rows(state) == [(":.ctx:c-value", 1, 1, False)]
    assert state.by_id(1, context=".ctx").schema == S3
    # id 1 of the default context is no longer served; the log still has it
    assert state.by_id(1, context="") is None and state.by_id(1).schema == S3
    assert {(v.subject, v.id) for v in state.hard_deleted()} == {("a-value", 1), ("a-value", 2), (":.ctx:d-value", 2)}


def test_the_first_registration_of_an_id_wins():
    state = replay([
        schema_record("a-value", 1, 1, S1),
        schema_record("b-value", 1, 1, S1),  # the same schema under another subject: same id, fine
        schema_record("c-value", 1, 1, S3),  # another schema claiming id 1: the registry ignores it
    ])
    assert rows(state) == [("a-value", 1, 1, False), ("b-value", 1, 1, False)]
    assert [s.offset for s in state.skipped] == [2]
    assert "schema id 1 already names another schema" in state.skipped[0].reason


def test_compaction_leftovers_replay_to_the_same_state():
    """A compacted log keeps the last record of each key (and tombstones for a while): it
    replays to the state the whole log gave."""
    log = [
        schema_record("a-value", 1, 1, S1),
        config_record("a-value", "FULL"),
        schema_record("a-value", 2, 2, S2),
        schema_record("a-value", 1, 1, S1, deleted=True),
        schema_record("b-value", 1, 3, S3),
        (schema_record("b-value", 1, 3, S3)[0], None),
        config_record("a-value", "NONE"),
        (NOOP_KEY, None),
    ]
    last = {}
    for i, (k, v) in enumerate(log):
        last[k] = i
    compacted = [r for i, r in enumerate(log) if last[r[0]] == i]
    whole, kept = replay(log), replay(compacted)
    assert rows(whole) == rows(kept) == [("a-value", 1, 1, True), ("a-value", 2, 2, False)]
    assert [e.value.fields for e in whole.configs()] == [e.value.fields for e in kept.configs()]


def test_unreadable_records_are_skipped_and_reported():
    state = replay([
        (b"garbage", b"{}"),
        (schema_record("a-value", 1, 1, S1)[0], b"{not json"),
        schema_record("a-value", 1, 1, S1),
    ])
    assert rows(state) == [("a-value", 1, 1, False)]
    assert [(s.offset, s.reason.split(" (")[0]) for s in state.skipped] == [(0, "the key is not JSON"),
                                                                            (1, "the value is not JSON")]


def test_by_guid():
    state = replay([schema_record("a-value", 1, 1, S1), schema_record("b-value", 1, 2, S2)])
    guid = uuid.UUID(bytes=hashlib.md5(S2.encode()).digest())
    assert state.by_guid(guid).id == 2 and state.by_guid(uuid.uuid4()) is None
