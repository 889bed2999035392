"""Confluent-framed payloads (issue 25's Performance): plog against confluent-kafka's own
deserializers over the same payloads, in the same run, and ``scan search --where`` on Avro.

Figures, on directories generated here (Kafka log directories: a ``_schemas-0`` partition
holding the registry's SCHEMA records, as the registry writes them, next to the topics):

* ``avro``: ``plog consume bench-avro -e --format jsonl --value-format auto`` of ``--records``
  (default 1 M) Avro-framed records of a 10-field schema (long, string, enum, double, boolean,
  timestamp-millis, string, int, a ["null","string"] union, float), the installed script run
  as a user runs it (start-up included, stdout to /dev/null), once on the native path
  (``plog``) and once with ``PLOG_NATIVE=0`` (``plog_python``); the peer
  (``confluent_kafka``) is confluent-kafka's ``AvroDeserializer`` called on every payload in
  this process (its in-process registry client holding the schema; no JSON, no I/O: the
  peer's cheapest possible loop). ``ratio`` = plog records/s over the peer's
  (target >= 2).
* ``protobuf``: the same with a 10-field proto3 message and ``ProtobufDeserializer``; the
  native path renders with native/src/protobuf_json.rs (``plog``), ``PLOG_NATIVE=0`` with the
  protobuf runtime and ``MessageToDict`` (``plog_python``); ``parity_paths``: both paths print
  the same bytes for the sample.
* ``scan_where``: ``plog scan DIR --mode search --where 'value.qty = 7' --jobs 2`` over ``--gib``
  GiB (default 1; 64 MiB with ``--quick``) of the Avro records in 4 partitions; records/s is
  every record scanned over the wall time (target >= 1 M records/s); the number of matches
  printed is checked against the generator's count.
* ``parity``: plog's JSON of the first records equals the peer's values in Avro's JSON
  encoding (Protobuf: protobuf's own ``MessageToDict``); matches found equal the generator's.

Usage: python benchmarks/bench_schemas.py [--records N] [--gib G] [--quick] [--keep DIR] [--json FILE]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from workloads import emit  # noqa: E402

from plog.formats.record_batch import encode_batch, set_base_offset  # noqa: E402

AVRO_SCHEMA = {
    "type": "record", "name": "Event", "namespace": "bench",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "user", "type": "string"},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["CLICK", "VIEW", "BUY", "SCROLL"]}},
        {"name": "amount", "type": "double"},
        {"name": "ok", "type": "boolean"},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "country", "type": "string"},
        {"name": "qty", "type": "int"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "score", "type": "float"},
    ],
}
PROTO = """syntax = "proto3";
package bench;

message Event {
  enum Kind {
    CLICK = 0;
    VIEW = 1;
    BUY = 2;
    SCROLL = 3;
  }
  int64 id = 1;
  string user = 2;
  Kind kind = 3;
  double amount = 4;
  bool ok = 5;
  int64 ts = 6;
  string country = 7;
  int32 qty = 8;
  optional string note = 9;
  float score = 10;
}
"""
AVRO_ID, PROTO_ID = 1, 2
AVRO_TOPIC, PROTO_TOPIC, SCAN_TOPIC = "bench-avro", "bench-proto", "bench-scan"
KINDS = ["CLICK", "VIEW", "BUY", "SCROLL"]
COUNTRIES = ["FR", "DE", "US", "JP", "BR", "IN", "NG", "CA"]
BATCH_RECORDS = 500
SEGMENT_BYTES = 128 << 20
SCAN_PARTITIONS = 4
WHERE = "value.qty = 7"
TS = 1_700_000_000_000


def events(n: int, seed: int):
    """``n`` event dicts (Python values; ``ts`` in ms) of the workload."""
    rnd = random.Random(seed)
    for i in range(n):
        yield {"id": i, "user": f"u{rnd.randrange(100000):05d}", "kind": rnd.choice(KINDS),
               "amount": round(rnd.random() * 1000, 2), "ok": rnd.random() < 0.5, "ts": TS + i * 3,
               "country": rnd.choice(COUNTRIES), "qty": rnd.randrange(100),
               "note": None if rnd.random() < 0.5 else f"note {rnd.randrange(1000)}",
               "score": rnd.choice([0.5, 1.25, -3.0, 100.0])}


def avro_payloads(n: int, seed: int = 25) -> list[bytes]:
    import fastavro

    parsed = fastavro.parse_schema(AVRO_SCHEMA)
    prefix = b"\x00" + AVRO_ID.to_bytes(4, "big")
    out = []
    for e in events(n, seed):
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, e)
        out.append(prefix + buf.getvalue())
    return out


def proto_class(tmp: Path):
    """The producing application's message class: the .proto compiled by protoc (grpcio-tools)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    (tmp / "bench.proto").write_text(PROTO)
    out = tmp / "set.pb"
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{tmp}", f"--descriptor_set_out={out}",
                    "bench.proto"], check=True)
    pool = descriptor_pool.DescriptorPool()
    for f in descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file:
        pool.Add(f)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("bench.Event"))


def proto_payloads(cls, n: int, seed: int = 26) -> list[bytes]:
    prefix = b"\x00" + PROTO_ID.to_bytes(4, "big") + b"\x00"  # message index [0]: its one-byte form
    out = []
    for e in events(n, seed):
        e["kind"] = KINDS.index(e["kind"])
        if e["note"] is None:
            del e["note"]
        out.append(prefix + cls(**e).SerializeToString())
    return out


def schema_records() -> list[tuple[bytes, bytes]]:
    """The registry's SCHEMA records (its Jackson key and value JSON) for the two schemas."""
    def record(subject, version, schema_id, schema, schema_type=None):
        key = {"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1}
        value = {"subject": subject, "version": version, "id": schema_id,
                 **({"schemaType": schema_type} if schema_type else {}), "schema": schema, "deleted": False}
        return json.dumps(key, separators=(",", ":")).encode(), json.dumps(value, separators=(",", ":")).encode()

    return [(b'{"keytype":"NOOP","magic":0}', None),
            record(f"{AVRO_TOPIC}-value", 1, AVRO_ID, json.dumps(AVRO_SCHEMA, separators=(",", ":"))),
            record(f"{PROTO_TOPIC}-value", 1, PROTO_ID, PROTO, "PROTOBUF")]


def write_partition(folder: Path, values, *, key_of=lambda i: b"key-%07d" % i) -> int:
    """``values`` as uncompressed v2 batches of :data:`BATCH_RECORDS` in 128 MiB segments."""
    folder.mkdir(parents=True)
    offset, base, size, out = 0, 0, 0, open(folder / f"{0:020d}.log", "wb")
    try:
        for start in range(0, len(values), BATCH_RECORDS):
            chunk = values[start:start + BATCH_RECORDS]
            batch = encode_batch([(offset + j, TS + offset + j, None if key_of is None else key_of(offset + j), v)
                                  for j, v in enumerate(chunk)], base_offset=offset)
            if size and size + len(batch) > SEGMENT_BYTES:
                out.close()
                base, size = offset, 0
                out = open(folder / f"{base:020d}.log", "wb")
            out.write(batch)
            size += len(batch)
            offset += len(chunk)
    finally:
        out.close()
    return offset


def write_schemas(root: Path) -> None:
    folder = root / "_schemas-0"
    folder.mkdir(parents=True)
    batch = encode_batch([(j, TS, k, v) for j, (k, v) in enumerate(schema_records())])
    (folder / f"{0:020d}.log").write_bytes(batch)


def generate_scan(root: Path, gib: float, seed: int = 27) -> tuple[int, int, int]:
    """~``gib`` GiB of Avro records in :data:`SCAN_PARTITIONS` partitions, tiled from a few
    distinct batches (base offsets patched: outside the CRC). Returns (bytes, records, matches)."""
    write_schemas(root)
    import fastavro

    payloads = avro_payloads(BATCH_RECORDS * 16, seed)
    parsed = fastavro.parse_schema(AVRO_SCHEMA)
    templates = []
    for t in range(16):
        chunk = payloads[t * BATCH_RECORDS:(t + 1) * BATCH_RECORDS]
        hits = sum(1 for v in chunk if fastavro.schemaless_reader(io.BytesIO(v[5:]), parsed)["qty"] == 7)
        batch = bytearray(encode_batch([(j, TS + j, b"key-%07d" % j, v) for j, v in enumerate(chunk)]))
        templates.append((batch, len(chunk), hits))
    per_partition = int(gib * (1 << 30)) // SCAN_PARTITIONS
    total_bytes = total_records = matches = 0
    for p in range(SCAN_PARTITIONS):
        folder = root / f"{SCAN_TOPIC}-{p}"
        folder.mkdir(parents=True)
        offset = written = k = 0
        while written < per_partition:
            base, buf = offset, bytearray()
            while len(buf) < SEGMENT_BYTES and written + len(buf) < per_partition:
                batch, count, hits = templates[k % len(templates)]
                k += 1
                set_base_offset(batch, offset)
                buf += batch
                offset += count
                total_records += count
                matches += hits
            (folder / f"{base:020d}.log").write_bytes(buf)
            written += len(buf)
        total_bytes += written
    return total_bytes, total_records, matches


def warm(root: Path) -> None:
    for path in root.rglob("*.log"):
        with open(path, "rb") as f:
            while f.read(16 << 20):
                pass


def plog_cmd() -> list[str]:
    exe = Path(sys.executable).with_name("plog")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "plog.cli"]


def run_plog(args: list[str], *, native: bool, stdout=subprocess.DEVNULL) -> tuple[float, subprocess.CompletedProcess]:
    env = dict(os.environ)
    env.pop("PLOG_NATIVE", None)
    if not native:
        env["PLOG_NATIVE"] = "0"
    t = time.perf_counter()
    proc = subprocess.run([*plog_cmd(), *args], stdout=stdout, stderr=subprocess.PIPE, env=env)
    seconds = time.perf_counter() - t
    if proc.returncode != 0:
        raise SystemExit(f"plog {' '.join(args)} failed ({proc.returncode}): {proc.stderr.decode()[-2000:]}")
    return seconds, proc


def consume_args(root: Path, topic: str, *extra: str, decode: bool = True) -> list[str]:
    return ["consume", topic, "-e", "--format", "jsonl", *(["--value-format", "auto"] if decode else []), "-q",
            "--data-dir", str(root), *extra]


def time_peer(deserialize, payloads, ctx) -> float:
    t = time.perf_counter()
    for v in payloads:
        deserialize(v, ctx)
    return time.perf_counter() - t


def avro_json(value: dict) -> dict:
    """confluent-kafka's value in Avro's JSON encoding (the union and the logical type)."""
    import datetime

    out = dict(value)
    out["ts"] = int((value["ts"] - datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc))
                    / datetime.timedelta(milliseconds=1))
    out["note"] = None if value["note"] is None else {"string": value["note"]}
    return out


def measure_consume(name: str, root: Path, topic: str, payloads, deserializer, to_json, sample: int, *,
                    exact_paths: bool = False) -> dict:
    from confluent_kafka.serialization import MessageField, SerializationContext

    ctx = SerializationContext(topic, MessageField.VALUE)
    n = len(payloads)
    peer_s = time_peer(deserializer, payloads, ctx)
    figures = {"records": n, "confluent_kafka": {"seconds": round(peer_s, 2), "records_per_s": round(n / peer_s)}}
    for key, native in (("plog", True), ("plog_python", False)):
        seconds, _ = run_plog(consume_args(root, topic), native=native)
        figures[key] = {"seconds": round(seconds, 2), "records_per_s": round(n / seconds)}
    # The ceiling: the same command without decoding (values printed as bytes).
    seconds, _ = run_plog(consume_args(root, topic, decode=False), native=True)
    figures["plog_undecoded"] = {"seconds": round(seconds, 2), "records_per_s": round(n / seconds)}
    _, proc = run_plog(consume_args(root, topic, "--count", str(sample)), native=True, stdout=subprocess.PIPE)
    mine = [json.loads(line)["value"] for line in proc.stdout.decode().splitlines()]
    theirs = [to_json(deserializer(v, ctx)) for v in payloads[:sample]]
    figures["parity"] = mine == theirs
    if exact_paths:
        # The native renderer's text is the reference's, byte for byte (not only the same values).
        _, python = run_plog(consume_args(root, topic, "--count", str(sample)), native=False, stdout=subprocess.PIPE)
        figures["parity_paths"] = proc.stdout == python.stdout
        figures["parity"] = figures["parity"] and figures["parity_paths"]
    figures["ratio"] = round(figures["plog"]["records_per_s"] / figures["confluent_kafka"]["records_per_s"], 2)
    figures["ratio_python"] = round(figures["plog_python"]["records_per_s"]
                                    / figures["confluent_kafka"]["records_per_s"], 2)
    print(f"{name}: {json.dumps(figures)}", file=sys.stderr)
    return figures


def measure_scan(root: Path, records: int, matches: int) -> dict:
    figures: dict = {"records": records, "where": WHERE, "jobs": 2, "matches_expected": matches}
    for key, native in (("plog", True), ("plog_python", False)):
        seconds, proc = run_plog(["scan", str(root), "--mode", "search", "--where", WHERE, "--jobs", "2", "--quiet",
                                  "--topic", SCAN_TOPIC], native=native, stdout=subprocess.PIPE)
        found = proc.stdout.count(b"\n")
        figures[key] = {"seconds": round(seconds, 2), "records_per_s": round(records / seconds), "matches": found}
    figures["parity"] = figures["plog"]["matches"] == figures["plog_python"]["matches"] == matches
    print(f"scan_where: {json.dumps(figures)}", file=sys.stderr)
    return figures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000, help="records per consume topic (default 1 M)")
    ap.add_argument("--gib", type=float, default=1.0, help="size of the scan directory (default 1 GiB)")
    ap.add_argument("--quick", action="store_true", help="100 k records and 64 MiB (a smoke run)")
    ap.add_argument("--keep", help="generate into (or reuse) this directory")
    ap.add_argument("--json", "--output", dest="json", help="also write the JSON result here")
    ap.add_argument("--only", choices=["avro", "protobuf", "scan"], action="append",
                    help="measure only this (repeatable)")
    args = ap.parse_args()
    n = 100_000 if args.quick else args.records
    gib = 1 / 16 if args.quick else args.gib
    only = set(args.only or ["avro", "protobuf", "scan"])

    from confluent_kafka.schema_registry import Schema
    from confluent_kafka.schema_registry._sync.mock_schema_registry_client import MockSchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
    from google.protobuf import json_format

    tmp = Path(tempfile.mkdtemp(prefix="plog-bench-schemas-"))
    root = Path(args.keep) if args.keep else tmp / "data"
    try:
        consume_dir, scan_dir = root / f"consume-{n}", root / f"scan-{gib:g}"
        cls = proto_class(tmp)
        t = time.perf_counter()
        avro = avro_payloads(n) if only & {"avro"} else []
        proto = proto_payloads(cls, n) if only & {"protobuf"} else []
        if only & {"avro", "protobuf"} and not (consume_dir / "_schemas-0").exists():
            write_schemas(consume_dir)
        for topic, payloads in ((AVRO_TOPIC, avro), (PROTO_TOPIC, proto)):
            if payloads and not (consume_dir / f"{topic}-0").exists():
                write_partition(consume_dir / f"{topic}-0", payloads)
        scan_info = None
        if "scan" in only:
            if scan_dir.exists():
                shutil.rmtree(scan_dir)
            scan_info = generate_scan(scan_dir, gib)
        gen_s = time.perf_counter() - t
        warm(root)

        result: dict = {"benchmark": "schemas", "machine_cores": os.cpu_count(),
                        "generated_seconds": round(gen_s, 1)}
        if "avro" in only:
            client = MockSchemaRegistryClient({"url": "mock://bench"})
            assert client.register_schema(f"{AVRO_TOPIC}-value", Schema(json.dumps(AVRO_SCHEMA), "AVRO")) == AVRO_ID
            result["avro"] = measure_consume("avro", consume_dir, AVRO_TOPIC, avro, AvroDeserializer(client),
                                             avro_json, 1000)
        if "protobuf" in only:
            deserializer = ProtobufDeserializer(cls, {"use.deprecated.format": False})
            result["protobuf"] = measure_consume(
                "protobuf", consume_dir, PROTO_TOPIC, proto, deserializer,
                lambda m: json_format.MessageToDict(m, always_print_fields_with_no_presence=True), 1000,
                exact_paths=True)
        if scan_info is not None:
            size, records, matches = scan_info
            result["scan_where"] = {"gib": round(size / (1 << 30), 3), **measure_scan(scan_dir, records, matches)}
        targets = {}
        if "avro" in result:
            targets["avro: plog >= 2x AvroDeserializer"] = result["avro"]["ratio"] >= 2
        if "protobuf" in result:
            targets["protobuf: plog >= 2x ProtobufDeserializer"] = result["protobuf"]["ratio"] >= 2
        if "scan_where" in result:
            targets["scan --where: >= 1M records/s with 2 processes"] = \
                result["scan_where"]["plog"]["records_per_s"] >= 1_000_000
        result["targets"] = targets
        result["parity"] = {k: result[k]["parity"] for k in ("avro", "protobuf", "scan_where") if k in result}
        emit(result, args.json)
        if not all(result["parity"].values()):
            raise SystemExit(f"parity failed: {result['parity']}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
