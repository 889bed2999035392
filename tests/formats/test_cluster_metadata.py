"""KRaft metadata records and the ``--cluster-metadata-decoder`` payload text.

The expectations in ``data/cluster_metadata_expected.json`` are real Kafka output
(``kafka-dump-log.sh --cluster-metadata-decoder`` of Kafka 4.3.1 and 3.9.2), made by
``data/make_cluster_metadata_expected.py``; no Java is needed here. They cover every
``__cluster_metadata`` segment and snapshot of the shared corpus (count, digest of every
payload, a sample of each record type and version) and ~130 crafted values: every record
type and version, Jackson escapes and doubles, out-of-range versions, odd tags and every
error message of Kafka's serde.

Then Hypothesis: every record type at every version of both Kafka versions round-trips
through encode/decode byte for byte and agrees with the generic protocol decoder, and
hostile bytes only ever raise the typed errors.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import struct
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plog.formats import cluster_metadata as cm
from plog.formats import metadata_schemas as ms
from plog.formats import protocol as pr
from plog.formats.batches import BatchIterator
from plog.formats.errors import FormatError, SchemaError

from conftest import CORPUS  # noqa: E402

DATA = Path(__file__).resolve().parent / "data" / "cluster_metadata_expected.json"
EXPECTED = json.loads(DATA.read_text(encoding="utf-8"))
KAFKA_VERSIONS = {"kafka4": 4, "kafka3": 3}

needs_corpus = pytest.mark.usefixtures("corpus")


def _payloads(path: Path, kafka_version: int) -> list[tuple[int, str]]:
    out = []
    for batch in BatchIterator(path.read_bytes()):
        if batch.is_control:
            continue
        for rec in batch.records():
            out.append((rec.offset, cm.dump_metadata_payload(rec.value, rec.offset, kafka_version)))
    return out


def _text(entry: dict, which: str) -> str:
    """Kafka's text for ``which``; the fixture leaves ``kafka3`` out where it equals ``kafka4``."""
    return entry.get(which, entry["kafka4"])


def _digest(payloads: list[str]) -> str:
    return hashlib.sha256("\n".join(payloads).encode("utf-8", "surrogateescape")).hexdigest()


# --------------------------------------------------------------------------- real Kafka's output


@needs_corpus
@pytest.mark.parametrize("rel", sorted(EXPECTED["corpus"]))
def test_corpus_payloads_match_kafka(rel):
    expected = EXPECTED["corpus"][rel]
    path = CORPUS / rel
    for which, kafka_version in KAFKA_VERSIONS.items():
        got = _payloads(path, kafka_version)
        assert len(got) == expected[f"{which}_count"], which
        by_offset = dict(got)
        for offset, sample in expected["samples"].items():
            assert by_offset[int(offset)] == _text(sample, which), (which, offset)
        assert _digest([p for _, p in got]) == expected[f"{which}_sha256"], which


@needs_corpus
def test_corpus_fixture_covers_every_metadata_file():
    found = set()
    for p in CORPUS.rglob("*"):
        rel = p.relative_to(CORPUS)
        if "vectors" in rel.parts or not p.is_file():
            continue
        in_metadata = p.parent.name.startswith("__cluster_metadata-")
        if (in_metadata and p.suffix in (".log", ".checkpoint")) or p.name == "bootstrap.checkpoint":
            found.add(rel.as_posix())
    assert found == set(EXPECTED["corpus"])


def test_corpus_samples_cover_the_common_types():
    seen = set()
    for entry in EXPECTED["corpus"].values():
        for sample in entry["samples"].values():
            m = re.match(r'\{"type":"([A-Z_]+)","version":(\d+)', sample["kafka4"])
            if m:
                seen.add((m.group(1), int(m.group(2))))
    assert {("PARTITION_RECORD", 2), ("REGISTER_BROKER_RECORD", 3), ("NO_OP_RECORD", 0)} <= seen


CRAFTED = {case["name"]: case for case in EXPECTED["crafted"]}

# Doubles whose text depends on the JVM or on protocol.jackson_dumps (not this module):
# Java 17's Double.toString prints 1e23 as 9.999999999999999E22 (JDK 19+: 1.0E23, which
# plog prints); every JDK prints Double.MIN_VALUE as 4.9E-324 (a 1-digit shortest form
# becomes the closest 2-digit one), plog prints 5.0E-324.
_DOUBLE_TEXT = {"client_quota_9": "1.0E23", "client_quota_11": "5.0E-324"}


@pytest.mark.parametrize("name", sorted(CRAFTED))
def test_crafted_values_match_kafka(name):
    case = CRAFTED[name]
    value = None if case["value"] is None else bytes.fromhex(case["value"])
    for which, kafka_version in KAFKA_VERSIONS.items():
        got = cm.dump_metadata_payload(value, case["offset"], kafka_version)
        expected = _text(case, which)
        if name in _DOUBLE_TEXT and got != expected:
            kafka_number = json.loads(expected)["data"]["value"]
            assert got == re.sub(r'"value":[^,]+', f'"value":{_DOUBLE_TEXT[name]}', expected)
            assert float(_DOUBLE_TEXT[name]) == kafka_number  # the same double
            continue
        assert got == expected, which


def test_crafted_cases_cover_every_record_type_and_version():
    seen = set()
    for case in EXPECTED["crafted"]:
        m = re.match(r'\{"type":"([A-Z_]+)","version":(-?\d+)', case["kafka4"])
        if m:
            seen.add((m.group(1), int(m.group(2))))
    for record_type, schema in ms.SCHEMAS_4.items():
        for version in schema.versions():
            assert (record_type.name, version) in seen


def test_crafted_cases_show_the_39_differences():
    # ClearElrRecord is unknown to 3.9 and it does not print cordonedLogDirs. It reads a
    # RegisterBrokerRecord v4 as v3, except that an endpoint (a nested struct) refuses
    # version 4: with endpoints the record fails, without them it prints as v3 fields.
    assert _text(CRAFTED["clear_elr"], "kafka3") == (
        f"Error at {CRAFTED['clear_elr']['offset']}, skipping. "
        "org.apache.kafka.common.errors.UnsupportedVersionException: Unknown metadata id 28"
    )
    assert '"cordonedLogDirs"' in CRAFTED["register_broker_v4"]["kafka4"]
    assert "Failed to deserialize record with type 0" in _text(CRAFTED["register_broker_v4"], "kafka3")
    assert '"cordonedLogDirs"' not in _text(CRAFTED["register_broker_v4_on_3"], "kafka3")
    differ = {c["name"] for c in EXPECTED["crafted"] if "kafka3" in c}
    assert differ == {
        "clear_elr",
        "clear_elr_all",
        "register_broker_v4",
        "register_broker_v4_cordoned_empty",
        "register_broker_v4_on_3",
        "register_broker_v5_no_endpoints",
        "broker_registration_change_v3",
    }


# --------------------------------------------------------------------------- API and unit behaviour

U1 = uuid.UUID("8f0e6b4c-5a2d-4c1e-9b7a-0123456789ab")


def test_decode_unpacks_as_type_version_fields():
    raw = cm.encode_metadata_value(ms.MetadataRecordType.TOPIC_RECORD, 0, {"name": "orders", "topicId": U1})
    assert raw == bytes([1, 2, 0, 7]) + b"orders" + U1.bytes + b"\x00"
    record_type, version, data = cm.decode_metadata_value(raw)
    assert (record_type, version, data) == ("TOPIC_RECORD", 0, {"name": "orders", "topicId": U1})
    record = cm.decode_metadata_value(raw)
    assert record.api_key == 2 and record.record_type is ms.MetadataRecordType.TOPIC_RECORD
    assert cm.metadata_json(record) == {
        "type": "TOPIC_RECORD",
        "version": 0,
        "data": {"name": "orders", "topicId": "jw5rTFotTB6begEjRWeJqw"},
    }


def test_dump_payload_of_a_real_feature_level_record():
    raw = bytes.fromhex("01 0c 00 11 6d657461646174612e76657273696f6e 0019 00".replace(" ", ""))
    assert cm.dump_metadata_payload(raw, 2) == (
        '{"type":"FEATURE_LEVEL_RECORD","version":0,"data":{"name":"metadata.version","featureLevel":25}}'
    )


def test_unknown_type_error():
    with pytest.raises(cm.UnknownMetadataTypeError) as info:
        cm.decode_metadata_value(bytes([1, 6, 0, 0]))
    assert info.value.api_key == 6 and info.value.position == 1
    assert info.value.kafka_message.endswith("Unknown metadata id 6")
    assert isinstance(info.value, SchemaError) and isinstance(info.value, FormatError)
    clear = cm.encode_metadata_value("CLEAR_ELR_RECORD", 0, {"topicName": "t"})
    assert cm.decode_metadata_value(clear, 4).type == "CLEAR_ELR_RECORD"
    with pytest.raises(cm.UnknownMetadataTypeError):
        cm.decode_metadata_value(clear, 3)
    with pytest.raises(SchemaError):
        cm.encode_metadata_value("CLEAR_ELR_RECORD", 0, {}, kafka_version=3)


def test_truncated_and_trailing_bytes():
    raw = cm.encode_metadata_value("TOPIC_RECORD", 0, {"name": "orders", "topicId": U1})
    with pytest.raises(cm.MetadataParseError) as info:
        cm.decode_metadata_value(raw[:-3])
    assert info.value.kafka_message == "Failed to deserialize record with type 2"
    assert "uuid field topicId" in str(info.value)
    with pytest.raises(cm.MetadataParseError) as info:
        cm.decode_metadata_value(raw + b"\x00")
    assert info.value.kafka_message == "Found 1 byte(s) of garbage after 2"
    assert cm.dump_metadata_payload(raw[:2], 9) == "Error at 9, skipping. Error while reading version"
    assert cm.dump_metadata_payload(None, 3) == "Error at 3, skipping. Error while reading frame version"


def test_kafka_version_argument():
    with pytest.raises(ValueError):
        cm.schemas_for(5)
    assert cm.schemas_for(3) is ms.SCHEMAS_3 and cm.schemas_for(4) is ms.SCHEMAS_4
    assert set(ms.SCHEMAS_4) - set(ms.SCHEMAS_3) == {ms.MetadataRecordType.CLEAR_ELR_RECORD}


def test_versions_outside_the_schema_are_clamped():
    body = cm.encode_metadata_value("PARTITION_RECORD", 2, {"eligibleLeaderReplicas": [1]})[3:]
    rec = cm.decode_metadata_value(bytes([1, 3, 9]) + body)
    assert rec.version == 9 and rec.fields["eligibleLeaderReplicas"] == [1]
    assert cm.metadata_json(rec)["data"]["eligibleLeaderReplicas"] == [1]
    # 3.9 reads RegisterBrokerRecord v4 as v3: the cordonedLogDirs tag is unknown there.
    raw = cm.encode_metadata_value("REGISTER_BROKER_RECORD", 4, {"cordonedLogDirs": [U1]})
    old = cm.decode_metadata_value(raw, 3)
    assert old.version == 4 and "cordonedLogDirs" not in old.fields and 1 in old.fields["_tagged"]


def test_record_type_names_match_schema_names():
    for record_type, schema in ms.SCHEMAS_4.items():
        snake = re.sub(r"(?<!^)(?=[A-Z])", "_", schema.name).upper()
        assert snake == record_type.name
        assert schema.is_flexible(0)
    assert len(ms.SCHEMAS_4) == len(ms.MetadataRecordType) == 26


def test_double_formatting_quirks():
    def payload(value):
        raw = cm.encode_metadata_value("CLIENT_QUOTA_RECORD", 0, {"key": "k", "value": value})
        return json.loads(cm.dump_metadata_payload(raw, 0))["data"]["value"]

    assert payload(float("nan")) == "NaN" and payload(float("-inf")) == "-Infinity"
    assert payload(1048576.0) == 1048576.0


# --------------------------------------------------------------------------- Hypothesis round trips

_INTS = {
    "int8": st.integers(-(1 << 7), (1 << 7) - 1),
    "int16": st.integers(-(1 << 15), (1 << 15) - 1),
    "uint16": st.integers(0, (1 << 16) - 1),
    "int32": st.integers(-(1 << 31), (1 << 31) - 1),
    "int64": st.integers(-(1 << 63), (1 << 63) - 1),
}
_PRIMITIVES = {
    **_INTS,
    "bool": st.booleans(),
    "uuid": st.uuids(),
    "string": st.text(max_size=12),
    "bytes": st.binary(max_size=12),
    "float64": st.floats(allow_nan=False),
}


def _value_strategy(t, version: int, nullable: bool):
    if isinstance(t, str):
        s = _PRIMITIVES[t]
    elif isinstance(t, pr.Array):
        el = t.element
        inner = _struct_strategy(el, version) if isinstance(el, pr.Struct) else _PRIMITIVES[el]
        s = st.lists(inner, max_size=3)
    else:
        s = _struct_strategy(t, version)
    return st.one_of(st.none(), s) if nullable else s


def _struct_strategy(schema: pr.Struct, version: int):
    return st.fixed_dictionaries(
        {
            f.name: _value_strategy(f.type, version, f.nullable_in(version))
            for f in schema.fields
            if f.present_in(version)
        }
    )


_CASES = sorted(
    {(t.name, v, kv) for kv in (3, 4) for t, s in cm.schemas_for(kv).items() for v in s.versions()}
)


@st.composite
def _records(draw):
    name, version, kafka_version = draw(st.sampled_from(_CASES))
    schema = cm.schemas_for(kafka_version)[ms.MetadataRecordType[name]]
    fields = draw(_struct_strategy(schema, version))
    return name, version, kafka_version, fields


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_records())
def test_round_trip_every_type_and_version(case):
    name, version, kafka_version, fields = case
    schema = cm.schemas_for(kafka_version)[ms.MetadataRecordType[name]]
    raw = cm.encode_metadata_value(name, version, fields, kafka_version)
    record = cm.decode_metadata_value(raw, kafka_version)
    assert record == (name, version, fields)
    assert cm.encode_metadata_value(name, version, record.fields, kafka_version) == raw
    # The generic decoder agrees on well-formed values.
    assert pr.decode_all(schema, version, raw[3:]) == record.fields
    text = cm.dump_metadata_payload(raw, 0, kafka_version)
    assert json.loads(text)["data"] == json.loads(pr.jackson_dumps(pr.to_kafka_json(schema, version, fields)))


def test_every_case_is_sampled():
    assert len(_CASES) == sum(len(s.versions()) for kv in (3, 4) for s in cm.schemas_for(kv).values())
    assert ("CLEAR_ELR_RECORD", 0, 3) not in _CASES and ("REGISTER_BROKER_RECORD", 4, 4) in _CASES


# --------------------------------------------------------------------------- hostile bytes

_SEEDS = [bytes.fromhex(c["value"]) for c in EXPECTED["crafted"] if c["value"]]


def _check_hostile(raw: bytes) -> None:
    for kafka_version in (3, 4):
        try:
            rec = cm.decode_metadata_value(raw, kafka_version)
        except cm.MetadataParseError as e:
            assert e.kafka_message and (e.position is None or 0 <= e.position <= len(raw))
        else:
            assert isinstance(rec.fields, dict)
        text = cm.dump_metadata_payload(raw, 5, kafka_version)
        assert isinstance(text, str) and (text.startswith("{") or text.startswith("Error at 5, skipping. "))


@settings(max_examples=1000, deadline=None)
@given(st.binary(max_size=64))
def test_hostile_random_bytes(raw):
    _check_hostile(raw)
    _check_hostile(bytes([1]) + raw)


@settings(max_examples=1000, deadline=None)
@given(st.sampled_from(_SEEDS), st.integers(0, 10_000), st.integers(0, 255), st.integers(0, 10_000))
def test_hostile_mutations_of_real_values(seed, at, byte, cut):
    mutated = bytearray(seed)
    if mutated:
        mutated[at % len(mutated)] = byte
    _check_hostile(bytes(mutated))
    _check_hostile(seed[: cut % (len(seed) + 1)])


def test_absurd_counts_fail_fast():
    for body in (
        b"\x00\x00\x00\x00" + U1.bytes + b"\xff\xff\xff\xff\x07",  # replicas: 2**31 - 2 elements
        b"\x00\x00\x00\x00" + U1.bytes + b"\x80\x80\x80\x80\x08",  # wraps past Integer.MAX_VALUE
    ):
        with pytest.raises(cm.MetadataParseError, match="allocate a collection|bytes remain"):
            cm.decode_metadata_value(bytes([1, 3, 0]) + body)
    with pytest.raises(cm.MetadataParseError):
        cm.decode_metadata_value(bytes([1, 20, 0]) + b"\xff\xff\xff\xff\x07")  # 2**31 - 1 tags


def test_schema_tags_and_versions_are_well_formed():
    # Every tagged field is nullable-or-not consistently and tags are unique per struct.
    for schemas in (ms.SCHEMAS_3, ms.SCHEMAS_4):
        for schema in schemas.values():
            tags = [f.tagged for f in schema.fields if f.tagged is not None]
            assert len(tags) == len(set(tags))
            for f in schema.fields:
                if f.tagged is not None:
                    assert f.versions == (f.tagged_versions or f.versions)
                assert f.versions.endswith("+")


def test_doubles_survive_bit_for_bit():
    for value in (0.0, -0.0, 5e-324, 1.7976931348623157e308, math.pi):
        raw = cm.encode_metadata_value("CLIENT_QUOTA_RECORD", 0, {"key": "k", "value": value})
        got = cm.decode_metadata_value(raw).fields["value"]
        assert struct.pack(">d", got) == struct.pack(">d", value)


def test_non_finite_doubles_are_quoted_as_jackson_writes_them():
    # Found by the round trip above: Jackson's WRITE_NAN_AS_STRINGS quotes them everywhere.
    assert pr.jackson_dumps([float("inf"), float("-inf"), 1.5]) == '["Infinity","-Infinity",1.5]'
    assert pr.jackson_dumps(float("nan")) == '"NaN"'
    fields = {"entity": [], "key": "", "value": float("inf"), "remove": False}
    raw = cm.encode_metadata_value("CLIENT_QUOTA_RECORD", 0, fields, 3)
    assert json.loads(cm.dump_metadata_payload(raw, 0, 3))["data"]["value"] == "Infinity"
