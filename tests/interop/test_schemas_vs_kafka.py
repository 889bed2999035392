"""Issue 25, Tests §3: a real Kafka 4.3.1 KRaft broker holds Confluent-framed records and the
registry's ``_schemas`` topic; plog decodes the stopped broker's own log directory offline.

* The framed records are written by a real client: confluent-kafka's ``Producer`` (librdkafka)
  with confluent-kafka's ``AvroSerializer`` (a schema with a reference to another subject,
  unions, logical types; the id as a prefix and, for the same values, the GUID in a record
  header), ``ProtobufSerializer`` (an import, nested messages, message indexes) and
  ``JSONSerializer``, each with its in-process registry client.
* The ``_schemas`` records are the registry's own (``registry_records``: the Jackson key and
  value JSON of ``SchemaKey``/``SchemaValue``, ``NoopKey``, ``ConfigKey``, a soft delete and a
  hard delete), produced by kafka-python into a compacted ``_schemas`` topic, as the registry's
  ``KafkaStore`` writes them.
* The broker is stopped cleanly; its log directory is copied and read by ``plog schemas ls``,
  ``plog consume --value-format auto`` and ``plog dump --value-decoder confluent``: the values
  are the ones the serializers were given (Avro in Avro's JSON encoding, Protobuf in its JSON
  mapping, JSON Schema as the JSON itself).
"""

from __future__ import annotations

import glob
import json
import os
import sys
import uuid
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
for extra in (HERE.parent, HERE.parent / "schemas"):  # cli_run, registry_records, the oracle's schemas
    if str(extra) not in sys.path:
        sys.path.append(str(extra))

from kafka_broker import copy_log_dir  # noqa: E402
from kafka_scenarios import _create_topics  # noqa: E402

pytestmark = pytest.mark.interop

VERSION = "4.3.1"
TOPICS = {"orders": "avro", "mixed": "protobuf", "people": "json"}


def _deps():
    """The oracle's serializers; a missing one is an availability problem like a missing broker."""
    try:
        import confluent_kafka  # noqa: F401
        from google.protobuf import json_format  # noqa: F401
        import grpc_tools  # noqa: F401
    except ImportError as e:
        from conftest import _unavailable

        _unavailable(f"the schemas interop test needs confluent-kafka, protobuf and grpcio-tools: {e}")


def _renumbered(rows, schemas, registry_rows, shift: int):
    """Another in-process registry's records and schemas, its ids moved up by ``shift`` (the
    registries are separate; the broker's ``_schemas`` holds them as one)."""
    for key, value in registry_rows:
        obj = json.loads(value)
        obj["id"] += shift
        schemas.append((key, json.dumps(obj, separators=(",", ":")).encode()))
    return [(k, v[:1] + (int.from_bytes(v[1:5], "big") + shift).to_bytes(4, "big") + v[5:], h) for k, v, h in rows]


def _avro(records: dict, expected: dict) -> list:
    """Ids 1 (address-value) and 2 (orders-value); each value in the prefix and header forms."""
    from confluent_kafka.schema_registry import Schema, SchemaReference, header_schema_id_serializer
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    from test_oracle_confluent import ADDRESS, ORDER, ORDERS, ORDERS_JSON, GuidRegistry, registry_records

    avro = GuidRegistry({"url": "mock://interop-avro"})
    avro.register_schema("address-value", Schema(json.dumps(ADDRESS), "AVRO"))
    order = Schema(json.dumps(ORDER), "AVRO", [SchemaReference("com.acme.common.Address", "address-value", 1)])
    prefix = AvroSerializer(avro, order, conf={"auto.register.schemas": True})
    in_header = AvroSerializer(avro, order, conf={"schema.id.serializer": header_schema_id_serializer})
    for i, value in enumerate(ORDERS):
        records["orders"].append((f"o{i}".encode(), prefix(value, SerializationContext("orders", MessageField.VALUE)),
                                  []))
        headers: list = []
        framed = in_header(value, SerializationContext("orders", MessageField.VALUE, headers))
        records["orders"].append((f"h{i}".encode(), framed, headers))
        expected["orders"] += [ORDERS_JSON[i], ORDERS_JSON[i]]
    return registry_records(avro)


def _protobuf(tmp: Path, records: dict, expected: dict, schemas: list) -> None:
    """Ids after the Avro ones: the import, then order.proto once per subject (message indexes)."""
    import base64

    from confluent_kafka.schema_registry._sync.mock_schema_registry_client import MockSchemaRegistryClient
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    from google.protobuf import descriptor_pb2, json_format
    from test_oracle_confluent import (
        ADDRESS_PROTO,
        ORDER_PROTO,
        REGISTRY_ORDER_PROTO,
        _messages,
        compile_protos,
        registry_records,
    )

    pool = compile_protos(tmp / "proto", {"common/address.proto": ADDRESS_PROTO, "order.proto": ORDER_PROTO})
    proto = MockSchemaRegistryClient({"url": "mock://interop-proto"})
    rows = []
    for topic, msg in _messages(pool):
        serializer = ProtobufSerializer(type(msg), proto, {"use.deprecated.format": False})
        # Subjects "pb-<topic>-value": the Avro registry already has an "orders-value".
        rows.append((topic.encode(), serializer(msg, SerializationContext(f"pb-{topic}", MessageField.VALUE)), []))
        expected["mixed"].append(json_format.MessageToDict(msg, always_print_fields_with_no_presence=True))
    texts = {"common/address.proto": ADDRESS_PROTO, "order.proto": REGISTRY_ORDER_PROTO}

    def proto_text(schema):  # the .proto text the registry stores, not the serializer's descriptor
        return texts[descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(schema.schema_str)).name]

    records["mixed"] = _renumbered(rows, schemas, registry_records(proto, proto_text), len(schemas))


def _json_schema(records: dict, expected: dict, schemas: list) -> None:
    from confluent_kafka.schema_registry._sync.mock_schema_registry_client import MockSchemaRegistryClient
    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    from test_oracle_confluent import PERSON, registry_records

    people = MockSchemaRegistryClient({"url": "mock://interop-json"})
    serializer = JSONSerializer(json.dumps(PERSON), people)
    rows = []
    for person in ({"name": "Ann", "age": 31, "tags": ["x", "ü"]}, {"name": "Bo"}):
        rows.append((None, serializer(person, SerializationContext("people", MessageField.VALUE)), []))
        expected["people"].append(person)
    shift = max(json.loads(v)["id"] for _, v in schemas)
    records["people"] = _renumbered(rows, schemas, registry_records(people), shift)


def _framed(tmp: Path):
    """(topic -> [(key, value, headers)], the ``_schemas`` records, the expected JSON per topic)."""
    from registry_records import NOOP_KEY, config_record, delete_subject_record, schema_record

    records: dict = {"orders": [], "mixed": [], "people": []}
    expected: dict = {"orders": [], "mixed": [], "people": []}
    schemas = _avro(records, expected)
    _protobuf(tmp, records, expected, schemas)
    _json_schema(records, expected, schemas)
    # What else a registry writes: its NOOP marker first, the global config, a subject that was
    # soft-deleted, and a version hard-deleted (its key's tombstone).
    last = max(json.loads(v)["id"] for _, v in schemas)
    soft = schema_record("old-value", 1, last + 1, '"string"')
    hard = schema_record("gone-value", 1, last + 2, '"long"')
    log = [(NOOP_KEY, None), config_record(None, "BACKWARD"), *schemas, soft, delete_subject_record("old-value", 1),
           hard, (hard[0], None)]
    return records, log, expected


@pytest.fixture(scope="module")
def broker_files(kafka_broker, tmp_path_factory):
    """The stopped broker's log directory (a copy), and what was written to it."""
    _deps()
    import confluent_kafka

    tmp = tmp_path_factory.mktemp("schemas-interop")
    records, log, expected = _framed(tmp)
    broker = kafka_broker(VERSION)
    try:
        topics = {"_schemas": {"partitions": 1, "configs": {"cleanup.policy": "compact"}}}
        topics.update({t: {"partitions": 1, "configs": {}} for t in TOPICS})
        _create_topics(broker.bootstrap, topics)
        _produce_schemas(broker.bootstrap, log)
        errors = []
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True,
                                             "acks": "all", "linger.ms": 5})
        for topic, rows in records.items():
            for key, value, headers in rows:
                producer.produce(topic, value=value, key=key, headers=headers or None, partition=0,
                                 on_delivery=lambda err, msg: err and errors.append(err))
        assert producer.flush(60) == 0 and not errors, errors
        broker.stop()
    except BaseException:
        broker.kill()
        raise
    dest = copy_log_dir(broker.log_dir, tmp / "logs")
    return dest, records, expected


def _produce_schemas(bootstrap: str, log) -> None:
    """The registry's KafkaStore writes one record at a time and waits for it (acks=all)."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0, retries=5,
                             client_id="schema-registry")
    try:
        for key, value in log:
            producer.send("_schemas", key=key, value=value, partition=0).get(timeout=60)
    finally:
        producer.close()


def _plog(capsys, *args):
    from cli_run import plog

    return plog(capsys, *args)


def test_schemas_ls_reads_the_brokers_schemas(capsys, broker_files):
    log_dir, records, _ = broker_files
    code, out, err = _plog(capsys, "schemas", "ls", str(log_dir), "--format", "jsonl")
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    proto_ref = [{"name": "common/address.proto", "subject": "common/address.proto", "version": 1}]
    assert [(r["subject"], r["version"], r["id"], r["type"], r["deleted"], r["references"]) for r in rows] == [
        ("address-value", 1, 1, "AVRO", False, []),
        ("common/address.proto", 1, 3, "PROTOBUF", False, []),
        ("old-value", 1, 9, "AVRO", True, []),  # soft-deleted: still served by id
        ("orders-value", 1, 2, "AVRO", False,
         [{"name": "com.acme.common.Address", "subject": "address-value", "version": 1}]),
        ("pb-customers-value", 1, 7, "PROTOBUF", False, proto_ref),
        ("pb-lines-value", 1, 5, "PROTOBUF", False, proto_ref),
        ("pb-notes-value", 1, 6, "PROTOBUF", False, proto_ref),
        ("pb-orders-value", 1, 4, "PROTOBUF", False, proto_ref),
        ("people-value", 1, 8, "JSON", False, []),
    ]  # gone-value 1 (id 10) was hard-deleted: not served
    # The GUID the Avro serializer put in the header form's __value_schema_id is the schema's.
    guid = next(h for _, _, hs in records["orders"] for h in hs)[1]
    assert rows[3]["guid"] == str(uuid.UUID(bytes=guid[1:]))


@pytest.mark.parametrize("topic", sorted(TOPICS))
def test_consume_value_format_auto(capsys, broker_files, topic):
    log_dir, records, expected = broker_files
    code, out, err = _plog(capsys, "consume", topic, "-e", "--format", "jsonl", "--value-format", "auto",
                           "--data-dir", str(log_dir))
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert [line["key"] for line in lines] == [None if k is None else k.decode() for k, _, _ in records[topic]]
    assert [line["value"] for line in lines] == expected[topic]
    assert all("value_decode_error" not in line for line in lines)
    assert [line["value_schema_id"] for line in lines] == [_schema_id(v, h) for _, v, h in records[topic]]
    assert err.splitlines() == [f"consumed {len(lines)} record(s) from {topic}"]


def _schema_id(value: bytes, headers) -> int | str:
    """What the serializer framed: the 4-byte id of a prefix, or the GUID of a header."""
    if headers:
        return str(uuid.UUID(bytes=dict(headers)["__value_schema_id"][1:]))
    return int.from_bytes(value[1:5], "big")


def test_the_header_form_is_there(broker_files):
    """Half the Avro records carry the GUID in ``__value_schema_id``, their value unprefixed."""
    _, records, _ = broker_files
    assert [bool(h) for _, _, h in records["orders"]] == [False, True, False, True]
    assert all(v[:1] != b"\x00" for _, v, h in records["orders"] if h)


@pytest.mark.parametrize("topic", sorted(TOPICS))
def test_dump_value_decoder_confluent(capsys, broker_files, topic):
    log_dir, records, expected = broker_files
    (segment,) = glob.glob(os.path.join(log_dir, f"{topic}-0", "*.log"))
    code, out, err = _plog(capsys, "dump", "--value-decoder", "confluent", segment)
    assert code == 0, err
    payloads = [line.split(" payload: ", 1)[1] for line in out.splitlines() if line.startswith("| offset: ")]
    assert [json.loads(p) for p in payloads] == expected[topic]
    assert err == ""
