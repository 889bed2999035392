"""Issue 25, Tests §4: a real schema registry for ``--schema-registry URL``.

Apicurio Registry (2.4.2.Final, built from Maven Central by ``apicurio_fetch.py``; in-memory
storage) runs on 127.0.0.1 and serves its Confluent-compatible API at ``/apis/ccompat/v7``.
The schemas are registered through that API by confluent-kafka's own ``SchemaRegistryClient``
(an Avro schema referencing another subject's, a Protobuf schema, a JSON Schema); the framed
records are written by confluent-kafka's serializers asking the same registry for the ids, into
a plog data directory that has no ``_schemas`` topic, so the URL is the only place the
schemas are. ``plog consume --value-format auto --schema-registry URL`` and ``plog dump
--value-decoder confluent --schema-registry URL`` print the serializers' values.

Java and ``mvn`` are needed (like the Kafka interop tests): missing, the tests skip with the
reason, or fail under ``PLOG_REQUIRE_KAFKA=1``.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
for extra in (HERE.parent, HERE.parent / "schemas"):
    if str(extra) not in sys.path:
        sys.path.append(str(extra))

pytestmark = pytest.mark.interop

CCOMPAT = "/apis/ccompat/v7"
START_TIMEOUT_S = 180


def _unavailable(reason: str):
    from conftest import _unavailable as unavailable

    unavailable(reason)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/subjects", timeout=5) as response:
            return response.status == 200
    except OSError:
        return False


@pytest.fixture(scope="module")
def registry_url(tmp_path_factory):
    """The base URL of a running Apicurio Registry's Confluent-compatible API."""
    if not shutil.which("java"):
        _unavailable("`java` is not on PATH (the registry interop test runs Apicurio Registry)")
    from apicurio_fetch import FetchError, fetch

    try:
        jar = fetch()
    except FetchError as e:
        _unavailable(f"Apicurio Registry could not be built: {e}")
    port = _free_port()
    log = tmp_path_factory.mktemp("apicurio") / "registry.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(["java", "-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                                 "-Dquarkus.http.host=127.0.0.1", f"-Dquarkus.http.port={port}", "-jar", str(jar)],
                                stdout=out, stderr=subprocess.STDOUT, cwd=jar.parent)
    url = f"http://127.0.0.1:{port}{CCOMPAT}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _ready(url):
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace")[-2000:]
                pytest.fail(f"Apicurio Registry did not start (exit {proc.poll()}); log tail:\n{tail}")
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def world(registry_url, tmp_path_factory):
    """Schemas registered in the registry; framed records in a plog data directory without
    ``_schemas``; the values the serializers were given, as plog prints them."""
    from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    from google.protobuf import json_format
    from test_oracle_confluent import (
        ADDRESS,
        ADDRESS_PROTO,
        ORDER,
        ORDER_PROTO,
        ORDERS,
        ORDERS_JSON,
        PERSON,
        _messages,
        compile_protos,
        write_topic,
    )

    client = SchemaRegistryClient({"url": registry_url})
    address_id = client.register_schema("address-value", Schema(json.dumps(ADDRESS), "AVRO"))
    order = Schema(json.dumps(ORDER), "AVRO", [SchemaReference("com.acme.common.Address", "address-value", 1)])
    order_id = client.register_schema("orders-value", order)
    assert address_id != order_id
    avro = AvroSerializer(client, order, conf={"auto.register.schemas": False, "use.latest.version": True})
    records = {"orders": [], "mixed": [], "people": []}
    expected = {"orders": list(ORDERS_JSON), "mixed": [], "people": []}
    for value in ORDERS:
        records["orders"].append((None, avro(value, SerializationContext("orders", MessageField.VALUE)), []))

    tmp = tmp_path_factory.mktemp("registry-url")
    pool = compile_protos(tmp / "proto", {"common/address.proto": ADDRESS_PROTO, "order.proto": ORDER_PROTO})
    for topic, msg in _messages(pool):
        serializer = ProtobufSerializer(type(msg), client, {"use.deprecated.format": False})
        records["mixed"].append((None, serializer(msg, SerializationContext(topic, MessageField.VALUE)), []))
        expected["mixed"].append(json_format.MessageToDict(msg, always_print_fields_with_no_presence=True))

    people = JSONSerializer(json.dumps(PERSON), client)
    for person in ({"name": "Ann", "age": 31, "tags": ["x", "ü"]}, {"name": "Bo"}):
        records["people"].append((None, people(person, SerializationContext("people", MessageField.VALUE)), []))
        expected["people"].append(person)

    data_dir = tmp / "data"
    for topic, rows in records.items():
        write_topic(data_dir, topic, rows)
    assert not glob.glob(os.path.join(data_dir, "*", "_schemas-*"))  # the URL is the only source
    return str(data_dir), records, expected


def _plog(capsys, *args):
    from cli_run import plog

    return plog(capsys, *args)


def test_the_registry_serves_what_was_registered(registry_url, world):
    """The ids the serializers framed are the registry's (GET /schemas/ids/{id})."""
    _, records, _ = world
    ids = {int.from_bytes(v[1:5], "big") for rows in records.values() for _, v, _ in rows}
    for schema_id in ids:
        with urllib.request.urlopen(f"{registry_url}/schemas/ids/{schema_id}", timeout=10) as response:
            assert json.loads(response.read())["schema"]


@pytest.mark.parametrize("topic", ["mixed", "orders", "people"])
def test_consume_with_the_registry_url(capsys, registry_url, world, topic):
    data_dir, records, expected = world
    code, out, err = _plog(capsys, "consume", topic, "-e", "--format", "jsonl", "--value-format", "auto",
                           "--schema-registry", registry_url, "--data-dir", data_dir)
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert [line["value"] for line in lines] == expected[topic]
    assert [line["value_schema_id"] for line in lines] == [int.from_bytes(v[1:5], "big") for _, v, _ in records[topic]]
    assert err.splitlines() == [f"consumed {len(lines)} record(s) from {topic}"]


@pytest.mark.parametrize("topic", ["mixed", "orders", "people"])
def test_dump_with_the_registry_url(capsys, registry_url, world, topic):
    data_dir, _, expected = world
    (segment,) = glob.glob(os.path.join(data_dir, "*", f"{topic}-0", "*.log"))
    code, out, err = _plog(capsys, "dump", "--value-decoder", "confluent", "--schema-registry", registry_url, segment)
    assert code == 0, err
    payloads = [line.split(" payload: ", 1)[1] for line in out.splitlines() if line.startswith("| offset: ")]
    assert [json.loads(p) for p in payloads] == expected[topic]
    assert err == ""


def test_without_the_url_the_ids_are_unknown(capsys, world):
    data_dir, _, _ = world
    code, out, err = _plog(capsys, "consume", "orders", "-e", "--format", "jsonl", "--value-format", "auto",
                           "--data-dir", data_dir)
    assert code == 0
    assert all("value_decode_error" in json.loads(line) for line in out.splitlines())
    assert "shown raw: unknown schema id" in err
