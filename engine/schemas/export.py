"""``plog schemas export``: a registry's schemas, as rebuilt from its ``_schemas`` topic, written
out so that they can be read without plog and a lost registry can be rebuilt.

The directory gets:

* ``<id>.avsc`` / ``<id>.proto`` / ``<id>.json``: each schema id's text, exactly as the
  registry stores it (what ``--schema-files DIR`` reads back);
* ``index.json``: ``{"format", "topic", "source", "schemas": [{"subject", "version", "id",
  "guid", "schemaType", "references", "deleted", "hard_deleted", "file"}], "configs",
  "modes"}``, one entry per subject-version, by subject then version;
* ``_schemas.jsonl``: the registry's store as ``_schemas`` records, one JSON line each
  (``{"partition": 0, "key": "<key JSON>", "value": "<value JSON>"}``), in the order of the
  records that wrote them, so that ``plog produce _schemas --input-format jsonl`` (or any
  producer) writes a topic a new registry starts from with the same subjects, versions,
  ids, configs and modes. Soft deletes are written as the registry holds them (SCHEMA
  values with ``"deleted": true``), so DELETE_SUBJECT and CLEAR_SUBJECT records, whose
  effects they already carry, are not written; hard-deleted schemas are not either.

With ``include_hard_deleted``, the schemas the registry no longer serves but whose records
are still in the log get their files and index entries too (``"hard_deleted": true``).
Files are written to a temporary name and renamed, so a file of the directory is never
half-written.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from plog.formats.schema_registry import (
    CLEAR_SUBJECT,
    DELETE_SUBJECT,
    SCHEMA,
    SchemaValue,
    dump_json,
    schema_guid,
    schema_value_json,
)

from plog.engine.schemas.sources import EXTENSIONS, INDEX_FILE, LoadedRegistry

JSONL_FILE = "_schemas.jsonl"
FORMAT = "plog schemas export 1"


@dataclass(frozen=True)
class ExportReport:
    directory: str
    schema_files: int
    index_entries: int
    records: int


def _write(path: str, data: bytes) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def schema_entry(value: SchemaValue, *, hard_deleted: bool = False) -> dict:
    """A subject-version as ``index.json`` (and ``plog schemas ls --format json``) show it."""
    return {
        "subject": value.subject, "version": value.version, "id": value.id, "guid": str(schema_guid(value)),
        "schemaType": value.schema_type, "references": [r.to_json() for r in value.references],
        "deleted": value.deleted, "hard_deleted": hard_deleted,
        "file": f"{value.id}{EXTENSIONS.get(value.schema_type, '.txt')}",
    }


def store_records(loaded: LoadedRegistry) -> list[tuple[bytes, bytes]]:
    """The store as ``(key, value)`` records a new registry replays to the same state."""
    out = []
    for entry in loaded.state.entries():
        if entry.key.keytype in (DELETE_SUBJECT, CLEAR_SUBJECT):
            continue
        value = entry.value_bytes
        if entry.key.keytype == SCHEMA and entry.value.deleted != entry.value.fields.get("deleted", False):
            value = schema_value_json(entry.value)  # soft-deleted by a DELETE_SUBJECT
        out.append((entry.key_bytes, value))
    return out


def export_registry(loaded: LoadedRegistry, directory: str | os.PathLike, *,
                    include_hard_deleted: bool = False) -> ExportReport:
    """Write ``loaded``'s schemas to ``directory`` (created if missing); see the module docstring."""
    directory = os.fspath(directory)
    os.makedirs(directory, exist_ok=True)
    state = loaded.state
    entries = [schema_entry(v) for v in state.schemas()]
    texts = {v.id: v for v in state.schemas()}
    if include_hard_deleted:
        for v in state.hard_deleted():
            entries.append(schema_entry(v, hard_deleted=True))
            texts.setdefault(v.id, v)
    entries.sort(key=lambda e: (e["subject"], e["version"], e["hard_deleted"]))
    for schema_id, value in sorted(texts.items()):
        _write(os.path.join(directory, f"{schema_id}{EXTENSIONS.get(value.schema_type, '.txt')}"),
               value.schema.encode("utf-8", "surrogatepass"))
    index = {
        "format": FORMAT, "topic": loaded.topic, "source": loaded.report.partition,
        "schemas": entries,
        "configs": [e.value.fields for e in state.configs()],
        "modes": [e.value.fields for e in state.modes()],
    }
    _write(os.path.join(directory, INDEX_FILE), (json.dumps(index, indent=2, ensure_ascii=False) + "\n").encode())
    records = store_records(loaded)
    lines = b"".join(dump_json({"partition": 0, "key": k.decode("utf-8", "surrogateescape"),
                                "value": v.decode("utf-8", "surrogateescape")}) + b"\n" for k, v in records)
    _write(os.path.join(directory, JSONL_FILE), lines)
    return ExportReport(directory, len(texts), len(entries), len(records))


__all__ = ["ExportReport", "FORMAT", "JSONL_FILE", "export_registry", "schema_entry", "store_records"]
