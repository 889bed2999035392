"""``_schemas`` records exactly as Confluent's Schema Registry writes them (its Jackson classes
``SchemaKey``/``SchemaValue``/``ConfigKey``/``ModeKey``/``DeleteSubjectKey``/``ClearSubjectKey``/
``NoopKey``: field order, ``magic``, fields left out when empty), written here by hand, not
with plog's code; and a plog data directory holding them, written by plog's own producer."""

from __future__ import annotations

import json
from pathlib import Path


def _j(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


NOOP_KEY = b'{"keytype":"NOOP","magic":0}'


def schema_key(subject: str, version: int) -> bytes:
    return _j({"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1})


def schema_value(subject: str, version: int, schema_id: int, schema: str, schema_type: str = "AVRO",
                 references=(), deleted: bool = False) -> bytes:
    obj = {"subject": subject, "version": version, "id": schema_id}
    if schema_type != "AVRO":
        obj["schemaType"] = schema_type
    if references:
        obj["references"] = [{"name": n, "subject": s, "version": v} for n, s, v in references]
    obj["schema"] = schema
    obj["deleted"] = deleted
    return _j(obj)


def schema_record(subject, version, schema_id, schema, schema_type="AVRO", references=(), deleted=False):
    return schema_key(subject, version), schema_value(subject, version, schema_id, schema, schema_type, references,
                                                      deleted)


def config_record(subject: str | None, level: str | None):
    key = {"keytype": "CONFIG", **({"subject": subject} if subject else {}), "magic": 0}
    if level is None:
        return _j(key), None
    return _j(key), _j({**({"subject": subject} if subject else {}), "compatibilityLevel": level})


def mode_record(subject: str | None, mode: str | None):
    key = {"keytype": "MODE", **({"subject": subject} if subject else {}), "magic": 0}
    return _j(key), (None if mode is None else _j({**({"subject": subject} if subject else {}), "mode": mode}))


def delete_subject_record(subject: str, version: int):
    return (_j({"keytype": "DELETE_SUBJECT", "subject": subject, "magic": 0}),
            _j({"subject": subject, "version": version}))


def clear_subject_record(subject: str):
    return _j({"keytype": "CLEAR_SUBJECT", "subject": subject, "magic": 0}), _j({"subject": subject})


def write_schemas_topic(data_dir: Path, records, topic: str = "_schemas") -> Path:
    """A plog data directory at ``data_dir`` whose ``topic`` (1 partition, compacted) holds
    ``records`` (``(key, value)`` pairs, in order), written with plog's producer."""
    from plog.engine.cluster.data_dir import DataDir
    from plog.engine.clients.producer import Producer

    dd = DataDir.open(data_dir, create=True)
    if not dd.has_topic(topic):
        dd.create_topic(topic, 1, configs={"cleanup.policy": "compact"})
    with Producer(dd, linger_ms=0) as producer:
        for key, value in records:
            producer.send(topic, value=value, key=key, partition=0)
            producer.flush()
    return Path(data_dir)
