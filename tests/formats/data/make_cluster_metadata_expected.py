"""Regenerate ``cluster_metadata_expected.json``: what real Kafka prints for
``kafka-dump-log.sh --cluster-metadata-decoder``.

Needs Java 17+ and the released jars (``.kafka-cache/4.3.1``, ``.kafka-cache/3.9.2``)::

    .venv/bin/python tests/formats/data/make_cluster_metadata_expected.py

Two parts:

* ``corpus``: every ``__cluster_metadata-0`` segment and snapshot and every
  ``bootstrap.checkpoint`` of the shared corpus, run through both Kafka versions. Kept per
  file: the record count, a SHA-256 of all payload texts (one per line, in order), and the
  first payload of every distinct (type, version) with its offset.
* ``crafted``: the values of :func:`crafted_cases` (every record type and version, odd
  strings and doubles, out-of-range versions, hostile framing), written to a scratch
  ``.log`` segment and dumped by both versions. Kept in full, with each value's hex.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import struct
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(ROOT.parent))

from plog.formats.batches import BatchIterator  # noqa: E402
from plog.formats.cluster_metadata import encode_metadata_value  # noqa: E402
from plog.formats.protocol import write_uvarint  # noqa: E402
from plog.formats.record_batch import encode_batch  # noqa: E402

CORPUS = Path(os.environ.get("PLOG_CORPUS", ROOT.parent / "shared" / "corpus"))
CACHE = ROOT / ".kafka-cache"
OUT = HERE / "cluster_metadata_expected.json"

KAFKA = {
    "kafka4": ["java", "-cp", f"{CACHE}/4.3.1/*", "org.apache.kafka.tools.DumpLogSegments"],
    "kafka3": [
        "java",
        "-Dlog4j.configuration=file:/dev/null",
        "-cp",
        f"{CACHE}/3.9.2/*",
        "kafka.tools.DumpLogSegments",
    ],
}

_PAYLOAD = re.compile(r"^\| offset: (\d+) .*? payload: (.*)$")


def run_kafka(which: str, path: Path) -> list[tuple[int, str]]:
    cmd = [*KAFKA[which], "--cluster-metadata-decoder", "--files", str(path)]
    out = subprocess.run(cmd, check=True, capture_output=True).stdout.decode("utf-8", "surrogateescape")
    found = []
    for line in out.split("\n"):  # not splitlines(): payloads may hold U+2028, U+0085, ...
        m = _PAYLOAD.match(line)
        if m:
            found.append((int(m.group(1)), m.group(2)))
    return found


def corpus_files() -> list[Path]:
    found = []
    for root, _dirs, files in os.walk(CORPUS):
        rel = Path(root).relative_to(CORPUS)
        if "vectors" in rel.parts:
            continue
        for f in files:
            in_metadata = Path(root).name.startswith("__cluster_metadata-")
            if (in_metadata and (f.endswith(".log") or f.endswith(".checkpoint"))) or f == "bootstrap.checkpoint":
                found.append(Path(root, f))
    return sorted(found)


def payload_digest(payloads: list[str]) -> str:
    return hashlib.sha256("\n".join(payloads).encode("utf-8", "surrogateescape")).hexdigest()


_TYPE = re.compile(r'^\{"type":"([A-Z_]+)","version":(-?\d+)')


def _dedupe(texts: dict) -> dict:
    """``kafka3`` is left out where it is the same as ``kafka4``."""
    if texts.get("kafka3") == texts.get("kafka4"):
        return {"kafka4": texts["kafka4"]}
    return texts


def corpus_part() -> dict:
    files = {}
    for path in corpus_files():
        rel = path.relative_to(CORPUS).as_posix()
        entry: dict = {}
        samples: dict[int, dict] = {}
        for which in ("kafka4", "kafka3"):
            got = run_kafka(which, path)
            entry[f"{which}_count"] = len(got)
            entry[f"{which}_sha256"] = payload_digest([p for _, p in got])
            seen = set()
            for offset, text in got:
                m = _TYPE.match(text)
                kind = (m.group(1), m.group(2)) if m else ("error", text.split(".", 1)[-1])
                if kind in seen:
                    continue
                seen.add(kind)
                samples.setdefault(offset, {})
            for offset, text in got:
                if offset in samples:
                    samples[offset][which] = text
        entry["samples"] = {str(o): _dedupe(samples[o]) for o in sorted(samples)}
        files[rel] = entry
        print(f"{rel}: {entry['kafka4_count']} records, {len(samples)} samples", file=sys.stderr)
    return files


# --------------------------------------------------------------------------- crafted values

U1 = uuid.UUID("8f0e6b4c-5a2d-4c1e-9b7a-0123456789ab")
U2 = uuid.UUID(int=1)
U3 = uuid.UUID(int=(1 << 128) - 1)


def uv(*values: int) -> bytes:
    out = bytearray()
    for v in values:
        write_uvarint(out, v)
    return bytes(out)


def frame(api_key: int, version: int, body: bytes) -> bytes:
    return uv(1, api_key, version) + body


def crafted_cases() -> list[tuple[str, bytes | None]]:
    e = encode_metadata_value
    cases: list[tuple[str, bytes | None]] = []

    def add(name: str, value: bytes | None) -> None:
        cases.append((name, value))

    endpoints = [
        {"name": "PLAINTEXT", "host": "broker-1.example", "port": 9092, "securityProtocol": 0},
        {"name": "SSL", "host": "h", "port": 65535, "securityProtocol": 1},
    ]
    features = [{"name": "metadata.version", "minSupportedVersion": 1, "maxSupportedVersion": 27}]
    broker = {
        "brokerId": 3,
        "isMigratingZkBroker": True,
        "incarnationId": U1,
        "brokerEpoch": 1 << 40,
        "endPoints": endpoints,
        "features": features,
        "rack": "rack-a",
        "fenced": False,
        "inControlledShutdown": True,
        "logDirs": [U2, U3],
        "cordonedLogDirs": [U3],
    }
    for v in range(5):
        add(f"register_broker_v{v}", e("REGISTER_BROKER_RECORD", v, broker))
    add("register_broker_v4_cordoned_empty", e("REGISTER_BROKER_RECORD", 4, {**broker, "cordonedLogDirs": []}))
    add("register_broker_v4_defaults", e("REGISTER_BROKER_RECORD", 4, {"rack": None}))
    add("unregister_broker", e("UNREGISTER_BROKER_RECORD", 0, {"brokerId": -1, "brokerEpoch": -(1 << 63)}))
    add("topic", e("TOPIC_RECORD", 0, {"name": "orders", "topicId": U1}))
    add("topic_zero_uuid", e("TOPIC_RECORD", 0, {"name": "", "topicId": uuid.UUID(int=0)}))
    partition = {
        "partitionId": 7,
        "topicId": U1,
        "replicas": [1, 2, 3],
        "isr": [1, 2],
        "removingReplicas": [3],
        "addingReplicas": [4],
        "leader": 1,
        "leaderRecoveryState": 1,
        "leaderEpoch": 5,
        "partitionEpoch": 9,
        "directories": [U2, U3, U1],
        "eligibleLeaderReplicas": [3],
        "lastKnownElr": [],
    }
    for v in range(3):
        add(f"partition_v{v}", e("PARTITION_RECORD", v, partition))
    add("partition_v2_defaults", e("PARTITION_RECORD", 2, {}))
    add("config", e("CONFIG_RECORD", 0, {"resourceType": 2, "resourceName": "t", "name": "retention.ms", "value": "1"}))
    add("config_null_value", e("CONFIG_RECORD", 0, {"resourceType": 4, "resourceName": "", "name": "x", "value": None}))
    change = {
        "partitionId": 0,
        "topicId": U1,
        "isr": [1],
        "leader": -1,
        "replicas": [],
        "removingReplicas": [2],
        "addingReplicas": [3],
        "leaderRecoveryState": 0,
        "directories": [U2],
        "eligibleLeaderReplicas": [2, 3],
        "lastKnownElr": [4],
    }
    for v in range(3):
        add(f"partition_change_v{v}", e("PARTITION_CHANGE_RECORD", v, change))
    add("partition_change_v2_defaults", e("PARTITION_CHANGE_RECORD", 2, {"topicId": U2}))
    add("fence_broker", e("FENCE_BROKER_RECORD", 0, {"id": 1, "epoch": 2}))
    add("unfence_broker", e("UNFENCE_BROKER_RECORD", 0, {"id": 1, "epoch": 2}))
    add("remove_topic", e("REMOVE_TOPIC_RECORD", 0, {"topicId": U3}))
    add(
        "delegation_token",
        e(
            "DELEGATION_TOKEN_RECORD",
            0,
            {
                "owner": "User:alice",
                "requester": "User:bob",
                "renewers": ["User:carol", ""],
                "issueTimestamp": 1700000000000,
                "maxTimestamp": 1700086400000,
                "expirationTimestamp": -1,
                "tokenId": "tok",
            },
        ),
    )
    add(
        "user_scram_credential",
        e(
            "USER_SCRAM_CREDENTIAL_RECORD",
            0,
            {
                "name": "alice",
                "mechanism": 1,
                "salt": bytes(range(20)),
                "storedKey": b"\xff\xfe\x00",
                "serverKey": b"",
                "iterations": 4096,
            },
        ),
    )
    add("feature_level", e("FEATURE_LEVEL_RECORD", 0, {"name": "metadata.version", "featureLevel": -32768}))
    for i, d in enumerate(
        [
            0.0,
            -0.0,
            1.0,
            0.1,
            1048576.0,
            1e7,
            9999999.999,
            1e-3,
            9.99e-4,
            1e23,
            2e-3,
            5e-324,
            1.7976931348623157e308,
            123456789.123,
            1.0e-5,
            float(1 << 53),
            1 / 3,
            float("nan"),
            float("inf"),
            float("-inf"),
        ]
    ):
        add(
            f"client_quota_{i}",
            e(
                "CLIENT_QUOTA_RECORD",
                0,
                {
                    "entity": [
                        {"entityType": "user", "entityName": "alice"},
                        {"entityType": "client-id", "entityName": None},
                    ],
                    "key": "producer_byte_rate",
                    "value": d,
                    "remove": i % 2 == 1,
                },
            ),
        )
    add("producer_ids", e("PRODUCER_IDS_RECORD", 0, {"brokerId": 1, "brokerEpoch": -1, "nextProducerId": 1000}))
    bchange = {
        "brokerId": 1,
        "brokerEpoch": 5,
        "fenced": -1,
        "inControlledShutdown": 1,
        "logDirs": [U1],
        "cordonedLogDirs": [],
    }
    for v in range(4):
        add(f"broker_registration_change_v{v}", e("BROKER_REGISTRATION_CHANGE_RECORD", v, bchange))
    add("broker_registration_change_v3_defaults", e("BROKER_REGISTRATION_CHANGE_RECORD", 3, {}))
    acl = {
        "id": U1,
        "resourceType": 2,
        "resourceName": "*",
        "patternType": 3,
        "principal": "User:*",
        "host": "*",
        "operation": 2,
        "permissionType": 3,
    }
    add("access_control_entry", e("ACCESS_CONTROL_ENTRY_RECORD", 0, acl))
    add("remove_access_control_entry", e("REMOVE_ACCESS_CONTROL_ENTRY_RECORD", 0, {"id": U2}))
    add("no_op", e("NO_OP_RECORD", 0, {}))
    add("zk_migration_state", e("ZK_MIGRATION_STATE_RECORD", 0, {"zkMigrationState": 2}))
    add("remove_user_scram", e("REMOVE_USER_SCRAM_CREDENTIAL_RECORD", 0, {"name": "alice", "mechanism": 2}))
    add("begin_transaction", e("BEGIN_TRANSACTION_RECORD", 0, {"name": "Bootstrap records"}))
    add("begin_transaction_null", e("BEGIN_TRANSACTION_RECORD", 0, {"name": None}))
    add("begin_transaction_empty_name", e("BEGIN_TRANSACTION_RECORD", 0, {"name": ""}))
    add("end_transaction", e("END_TRANSACTION_RECORD", 0, {}))
    add("abort_transaction", e("ABORT_TRANSACTION_RECORD", 0, {"reason": "because"}))
    add("remove_delegation_token", e("REMOVE_DELEGATION_TOKEN_RECORD", 0, {"tokenId": "tok"}))
    add(
        "register_controller",
        e(
            "REGISTER_CONTROLLER_RECORD",
            0,
            {
                "controllerId": 3000,
                "incarnationId": U1,
                "zkMigrationReady": True,
                "endPoints": [{"name": "CONTROLLER", "host": "c", "port": 9093, "securityProtocol": 0}],
                "features": features,
            },
        ),
    )
    add("clear_elr", e("CLEAR_ELR_RECORD", 0, {"topicName": "orders"}))
    add("clear_elr_all", e("CLEAR_ELR_RECORD", 0, {"topicName": ""}))

    # Strings Jackson has to escape, and bytes Java decodes with replacement characters.
    texts = [
        'q"uote\\back/slash',
        "ctl\x00\x01\x08\t\n\x0b\x0c\r\x1b\x1c\x1d\x1e\x1f\x7f\x85",
        "uni \u00e9 \u20ac \U0001d11e \u2028\u2029 \ufeff",
    ]
    for i, text in enumerate(texts):
        add(f"string_escape_{i}", e("TOPIC_RECORD", 0, {"name": text, "topicId": U2}))
    invalid_utf8 = [
        b"bad\xff\xfeutf8",
        b"\xed\xa0\x80surrogate",
        b"\xf0\x9f\x98",
        b"\xc3(",
        b"\xe2\x82",
        b"\xed\xa0A",
        b"x\xed\xbf",
        b"\xed\xbf\xbf\xed\x9f\xbf",
        b"\xed",
        b"\xf4\x90\x80\x80",
        b"\xe0\x80\x80",
        b"\xc0\x80\xc1\xbf",
        b"\xf0\x90\x80A",
        b"\xf8\x88\x80\x80\x80",
        b"\x80\xbf",
        b"\xef\xbf\xbe\xef\xbf\xbf",
        b"\xed\xa0\x80\xed\xb0\x80",
        b"\xf0\x9f\x98\x80\xf0\x9f",
        b"\xe1\x80",
        b"\xe1\x80A\xf1\x80\x80",
    ]
    for i, raw in enumerate(invalid_utf8):
        add(f"string_invalid_utf8_{i}", frame(2, 0, uv(len(raw) + 1) + raw + U2.bytes + b"\x00"))

    # Unknown tagged fields (ignored), at top level and inside a struct element.
    add("unknown_tag_top", frame(20, 0, uv(2, 5, 3) + b"abc" + uv(99, 0)))
    fl = e("FEATURE_LEVEL_RECORD", 0, {"name": "f", "featureLevel": 1})
    add("unknown_tag_feature", fl[:-1] + uv(1, 40, 2) + b"zz")
    ctl = e(
        "REGISTER_CONTROLLER_RECORD",
        0,
        {
            "controllerId": 1,
            "incarnationId": U1,
            "endPoints": [{"name": "C", "host": "h", "port": 1, "securityProtocol": 0}],
        },
    )
    # The endpoint's tag section is the byte before the features count (01) and the record's tag count (00).
    add("unknown_tag_nested", ctl[:-3] + uv(1, 0, 1) + b"x" + ctl[-2:])
    # Tags out of order and repeated: Kafka reads them in the order given; the last wins.
    add(
        "tags_out_of_order",
        frame(
            5,
            0,
            struct.pack(">i", 1)
            + U1.bytes
            + uv(3)
            + uv(1, 4) + struct.pack(">i", 9)
            + uv(0, 5, 2) + struct.pack(">i", 5)
            + uv(1, 4) + struct.pack(">i", 8),
        ),
    )

    # Versions outside the schema range: read as the nearest end, printed as written.
    body_v2 = e("PARTITION_RECORD", 2, partition)[3:]
    add("partition_v3", frame(3, 3, body_v2))
    add("partition_v32767", frame(3, 32767, body_v2))
    add("partition_version_minus_1", frame(3, 0xFFFFFFFF, e("PARTITION_RECORD", 0, partition)[3:]))
    add("partition_version_wrapped_short", frame(3, 0x80000002, body_v2))
    add("api_key_wrapped_short", uv(1, 0x80000002, 0) + e("TOPIC_RECORD", 0, {"name": "w", "topicId": U1})[3:])
    rb_v4 = e("REGISTER_BROKER_RECORD", 4, broker)[3:]
    add("register_broker_v5_with_endpoints", frame(0, 5, rb_v4))
    rb_v4_bare = e("REGISTER_BROKER_RECORD", 4, {**broker, "endPoints": [], "features": []})[3:]
    add("register_broker_v5_no_endpoints", frame(0, 5, rb_v4_bare))
    add("register_broker_v4_on_3", frame(0, 4, rb_v4_bare))
    add("no_op_v1", frame(20, 1, b"\x00"))
    quota = {"entity": [{"entityType": "user", "entityName": "a"}], "key": "k", "value": 1.0}
    add("client_quota_v1_entity", frame(14, 1, e("CLIENT_QUOTA_RECORD", 0, quota)[3:]))
    add("client_quota_v1_no_entity", frame(14, 1, e("CLIENT_QUOTA_RECORD", 0, {"key": "k", "value": 1.0})[3:]))

    # A known tag in a version where its field does not exist.
    p0 = e("PARTITION_RECORD", 0, {**partition, "leaderRecoveryState": 0})
    assert p0[-1] == 0
    add("known_tag_wrong_version", p0[:-1] + uv(1, 1, 5, 2) + struct.pack(">i", 5))
    add("partition_change_dirs_tag_v0", frame(5, 0, struct.pack(">i", 1) + U1.bytes + uv(1, 8, 2, 1)))
    # Known tags whose size disagrees with their content: Kafka ignores the size.
    head = struct.pack(">i", 1) + U1.bytes
    add("known_tag_size_too_big", frame(5, 0, head + uv(2, 5, 3) + b"\x01" + uv(1, 4) + struct.pack(">i", 7)))
    add("known_tag_size_too_small", frame(5, 0, struct.pack(">i", 1) + U1.bytes + uv(1, 1, 0) + struct.pack(">i", 7)))
    add("known_tag_size_huge", frame(3, 0, p0[3:-1] + uv(1, 0, 1000) + b"\x01"))

    # Framing and header errors.
    add("null_value", None)
    add("empty_value", b"")
    add("frame_version_0", uv(0, 2, 0))
    add("frame_version_2", uv(2, 2, 0))
    add("frame_version_too_large", uv(32768, 2, 0))
    add("frame_version_truncated", b"\x81")
    add("frame_version_6_byte_varint", b"\xff\xff\xff\xff\xff\x01")
    add("frame_version_wraps_to_1", uv(0x80000001, 20, 0, 0))
    add("type_missing", uv(1))
    add("type_too_large", uv(1, 40000, 0))
    add("version_missing", uv(1, 20))
    add("version_too_large", uv(1, 20, 0x7FFFFFFF))
    for key in (6, 13, 16, 29, 100, 32767):
        add(f"unknown_type_{key}", uv(1, key, 0, 0))
    add("unknown_type_wrapped_negative", uv(1, 0xFFFFFFFF, 0, 0))

    # Message errors.
    topic = e("TOPIC_RECORD", 0, {"name": "orders", "topicId": U1})
    add("garbage_after", topic + b"\x00\x01")
    add("garbage_after_no_op", uv(1, 20, 0, 0, 7))
    add("truncated_topic", topic[:-5])
    add("truncated_no_tag_count", uv(1, 20, 0))
    add("string_too_long", frame(2, 0, uv(0x8001) + b"x" * 16))
    add("string_longer_than_value", frame(2, 0, uv(50) + b"abc"))
    add("non_nullable_string_null", frame(2, 0, uv(0) + U1.bytes + b"\x00"))
    add("array_count_huge", frame(3, 0, struct.pack(">i", 0) + U1.bytes + uv(0x7FFFFFFF)))
    add("array_count_wraps", frame(3, 0, struct.pack(">i", 0) + U1.bytes + uv(0x80000000)))
    add("array_null_non_nullable", frame(3, 0, struct.pack(">i", 0) + U1.bytes + uv(0)))
    add("tag_count_huge", frame(20, 0, uv(0x7FFFFFFF)))
    add("tag_count_negative", frame(20, 0, uv(0x80000000)))
    add("unknown_tag_size_past_end", frame(20, 0, uv(1, 9, 10) + b"ab"))
    add("unknown_tag_size_negative", frame(20, 0, uv(1, 9, 0xFFFFFFFF)))
    add("bytes_length_past_end", frame(11, 0, uv(2) + b"a" + b"\x01" + uv(100) + b"xx"))
    add("tagged_string_past_end", frame(23, 0, uv(1, 0, 5, 10) + b"abc"))
    rb_v3 = e("REGISTER_BROKER_RECORD", 3, {"rack": None})[3:-1]
    add("tagged_array_null_non_nullable", frame(0, 3, rb_v3 + uv(1, 0, 1, 0)))
    return cases


def crafted_part() -> list[dict]:
    cases = crafted_cases()
    names = [n for n, _ in cases]
    assert len(set(names)) == len(names), "duplicate case names"
    log = bytearray()
    for offset, (_name, value) in enumerate(cases):
        log += encode_batch([(offset, 1700000000000, None, value)], base_offset=offset)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "__cluster_metadata-0", "00000000000000000000.log")
        path.parent.mkdir()
        path.write_bytes(bytes(log))
        # The walk must see every case as one record.
        assert sum(1 for _ in BatchIterator(bytes(log))) == len(cases)
        outputs = {which: dict(run_kafka(which, path)) for which in ("kafka4", "kafka3")}
    result = []
    for offset, (name, value) in enumerate(cases):
        texts = _dedupe({"kafka4": outputs["kafka4"][offset], "kafka3": outputs["kafka3"][offset]})
        result.append({"name": name, "offset": offset, "value": None if value is None else value.hex(), **texts})
    return result


def main() -> None:
    data = {
        "about": "Payload texts of kafka-dump-log.sh --cluster-metadata-decoder (Kafka 4.3.1 and 3.9.2, "
        "Java 17); kafka3 is omitted where it equals kafka4; regenerate with make_cluster_metadata_expected.py",
        "corpus": corpus_part(),
        "crafted": crafted_part(),
    }
    OUT.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
