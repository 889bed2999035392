"""Where schemas come from, each a :class:`SchemaSource` that finds a schema by id, by GUID and
by subject and version (for references):

* :class:`RegistryLogSource`: a ``_schemas`` topic read from log directories
  (:func:`load_registry`): what the registry serves, then hard-deleted schemas whose
  records are still in the log;
* :class:`SchemaFilesSource`: a directory of schema files named by id (``<id>.avsc``,
  ``<id>.proto``, ``<id>.json``), with the ``index.json`` that ``plog schemas export``
  writes beside them when there is one (it gives subjects, versions, types and references;
  without it each file stands alone, and a ``.proto`` file imports others of the directory
  by file name);
* :class:`RegistryUrlSource`: a Schema Registry's REST API (``GET /schemas/ids/{id}``,
  ``/schemas/guids/{guid}``, ``/subjects/{subject}/versions/{version}``), every answer
  cached for the run (unknown ids too); ``http://user:password@host`` sends basic auth.
  Off unless a URL is given.

A source returns None for a schema it does not have; it raises :class:`SchemaSourceError`
only when it cannot be asked at all (a registry that does not answer).
"""

from __future__ import annotations

import base64
import json
import os
import uuid
from dataclasses import dataclass
from typing import Callable, Iterator

from plog.formats.schema_registry import (
    AVRO,
    DEFAULT_TOPIC,
    JSON,
    PROTOBUF,
    SchemaReference,
    SchemaValue,
    schema_guid,
)

from plog.engine.schemas.errors import SchemaSourceError
from plog.engine.schemas.registry_state import RegistryState
from plog.engine.schemas.topic_reader import ReadReport, choose_replica, find_partitions, read_records

#: File extension of each schema type (what ``export`` writes and the files source reads).
EXTENSIONS = {AVRO: ".avsc", PROTOBUF: ".proto", JSON: ".json"}
INDEX_FILE = "index.json"
#: Seconds a registry request may take.
URL_TIMEOUT = 30


class SchemaSource:
    """The interface every source implements (see the module docstring)."""

    #: What the source is, for messages: "_schemas in /var/lib/kafka", "schema files in DIR".
    label = ""
    #: Directories a ``.proto`` of this source may import from by file name.
    include_dirs: tuple[str, ...] = ()

    def by_id(self, schema_id: int) -> SchemaValue | None:
        raise NotImplementedError

    def by_guid(self, guid: uuid.UUID) -> SchemaValue | None:
        raise NotImplementedError

    def version(self, subject: str, version: int) -> SchemaValue | None:
        raise NotImplementedError


@dataclass
class LoadedRegistry:
    """A registry's state rebuilt from the ``_schemas`` topic under ``path``, and what was read."""

    path: str
    topic: str
    state: RegistryState
    report: ReadReport


def load_registry(path: str | os.PathLike, topic: str = DEFAULT_TOPIC,
                  progress: Callable[[int], None] | None = None) -> LoadedRegistry:
    """Find ``<topic>-0`` under ``path`` (the furthest-reaching replica) and replay it.
    ``progress`` is called with the number of records read so far, every 1000 records."""
    replicas = find_partitions(path, topic)
    chosen = choose_replica(replicas)
    report = ReadReport(chosen.path, [r.path for r in replicas if r is not chosen])
    state = RegistryState()
    for offset, key, value in read_records(chosen, report):
        state.apply(offset, key, value)
        if progress is not None and state.records % 1000 == 0:
            progress(state.records)
    return LoadedRegistry(os.fspath(path), topic, state, report)


class RegistryLogSource(SchemaSource):
    """Schemas from a rebuilt ``_schemas`` topic."""

    def __init__(self, loaded: LoadedRegistry):
        self.loaded = loaded
        self.label = f"{loaded.topic} in {loaded.path}"

    def by_id(self, schema_id: int) -> SchemaValue | None:
        state = self.loaded.state
        return state.by_id(schema_id) or state.hard_deleted_by_id(schema_id)

    def by_guid(self, guid: uuid.UUID) -> SchemaValue | None:
        return self.loaded.state.by_guid(guid)

    def version(self, subject: str, version: int) -> SchemaValue | None:
        return self.loaded.state.version(subject, version)


# -- schema files ---------------------------------------------------------------------------------


def _type_of_file(name: str) -> str | None:
    for schema_type, ext in EXTENSIONS.items():
        if name.endswith(ext):
            return schema_type
    return None


class SchemaFilesSource(SchemaSource):
    """Schema files by id in a directory (module docstring)."""

    def __init__(self, directory: str | os.PathLike):
        self.directory = os.fspath(directory)
        if not os.path.isdir(self.directory):
            raise SchemaSourceError(f"{self.directory}: not a directory of schema files", self.directory)
        self.label = f"schema files in {self.directory}"
        self.include_dirs = (self.directory,)
        self._index = self._read_index()
        self._cache: dict[int, SchemaValue | None] = {}
        self._guids: dict[uuid.UUID, int] | None = None

    def _read_index(self) -> list[dict]:
        path = os.path.join(self.directory, INDEX_FILE)
        if not os.path.exists(path):
            return []
        try:
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
            entries = doc["schemas"]
            if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
                raise ValueError
            return entries
        except (OSError, ValueError, KeyError, TypeError) as e:
            reason = e.strerror if isinstance(e, OSError) else 'not a schema index ({"schemas": [...]})'
            raise SchemaSourceError(f"{path}: {reason}", path) from None

    def _file_of(self, schema_id: int) -> tuple[str, str] | None:
        for schema_type, ext in EXTENSIONS.items():
            path = os.path.join(self.directory, f"{schema_id}{ext}")
            if os.path.isfile(path):
                return path, schema_type
        return None

    def _entry(self, schema_id: int) -> dict | None:
        return next((e for e in self._index if e.get("id") == schema_id), None)

    def by_id(self, schema_id: int) -> SchemaValue | None:
        if schema_id in self._cache:
            return self._cache[schema_id]
        found = self._file_of(schema_id)
        value = None
        if found is not None:
            path, schema_type = found
            try:
                with open(path, encoding="utf-8") as f:
                    text = f.read()
            except (OSError, UnicodeDecodeError) as e:
                raise SchemaSourceError(f"{path}: {getattr(e, 'strerror', None) or 'not UTF-8 text'}", path) from None
            entry = self._entry(schema_id) or {}
            try:
                refs = tuple(SchemaReference(r["name"], r["subject"], int(r["version"]))
                             for r in entry.get("references") or ())
            except (KeyError, TypeError, ValueError):
                raise SchemaSourceError(f"{os.path.join(self.directory, INDEX_FILE)}: a reference of schema "
                                        f"{schema_id} has no name, subject or version", self.directory) from None
            value = SchemaValue(subject=str(entry.get("subject") or f"file {os.path.basename(path)}"),
                                version=int(entry.get("version") or 1), id=schema_id, schema=text,
                                schema_type=entry.get("schemaType") or schema_type, references=refs)
        self._cache[schema_id] = value
        return value

    def version(self, subject: str, version: int) -> SchemaValue | None:
        matches = [e for e in self._index if e.get("subject") == subject]
        if version == -1:
            live = [e for e in matches if not e.get("deleted")]
            matches = [max(live, key=lambda e: e.get("version") or 0)] if live else []
        else:
            matches = [e for e in matches if e.get("version") == version]
        if not matches or not isinstance(matches[0].get("id"), int):
            return None
        value = self.by_id(matches[0]["id"])
        return None if value is None else SchemaValue(subject, matches[0].get("version") or version, value.id,
                                                      value.schema, value.schema_type, value.references)

    def _ids(self) -> Iterator[int]:
        for name in sorted(os.listdir(self.directory)):
            stem = name.rsplit(".", 1)[0]
            if _type_of_file(name) and stem.isdigit():
                yield int(stem)

    def by_guid(self, guid: uuid.UUID) -> SchemaValue | None:
        if self._guids is None:
            self._guids = {}
            for schema_id in self._ids():
                value = self.by_id(schema_id)
                if value is not None:
                    self._guids.setdefault(schema_guid(value), schema_id)
        found = self._guids.get(guid)
        return None if found is None else self.by_id(found)


# -- a registry's REST API -------------------------------------------------------------------------


class RegistryUrlSource(SchemaSource):
    """A Schema Registry's REST API (module docstring)."""

    def __init__(self, url: str):
        from urllib.parse import urlsplit, urlunsplit

        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise SchemaSourceError(f"{url}: not an http:// or https:// URL of a Schema Registry", url)
        self._auth = None
        if parts.username is not None:
            from urllib.parse import unquote

            token = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
            self._auth = "Basic " + base64.b64encode(token).decode("ascii")
        netloc = parts.hostname + (f":{parts.port}" if parts.port else "")
        if ":" in parts.hostname:
            netloc = f"[{parts.hostname}]" + (f":{parts.port}" if parts.port else "")
        self.base = urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))
        self.label = f"the registry at {self.base}"
        self._cache: dict[str, dict | None] = {}

    def _get(self, path: str) -> dict | None:
        """The JSON object at ``path`` (None for a 404), cached."""
        if path in self._cache:
            return self._cache[path]
        import urllib.error
        import urllib.request

        request = urllib.request.Request(self.base + path, headers={
            "Accept": "application/vnd.schemaregistry.v1+json, application/json"})
        if self._auth:
            request.add_header("Authorization", self._auth)
        try:
            with urllib.request.urlopen(request, timeout=URL_TIMEOUT) as response:
                doc = json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as e:
            if e.code == 404:
                self._cache[path] = None
                return None
            raise SchemaSourceError(f"{self.label} answered {e.code} {e.reason} to GET {path}", self.base) from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", None) or getattr(e, "strerror", None) or e
            raise SchemaSourceError(f"{self.label} does not answer: {reason}", self.base) from None
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise SchemaSourceError(f"{self.label} answered GET {path} with something that is not JSON",
                                    self.base) from None
        self._cache[path] = doc if isinstance(doc, dict) else None
        return self._cache[path]

    def _value(self, doc: dict | None, schema_id: int | None, subject: str, version: int) -> SchemaValue | None:
        if doc is None or not isinstance(doc.get("schema"), str):
            return None
        try:
            refs = tuple(SchemaReference(r["name"], r["subject"], int(r["version"])) for r in doc.get("references") or ())
        except (KeyError, TypeError, ValueError):
            raise SchemaSourceError(f"{self.label} answered a reference without a name, subject or version",
                                    self.base) from None
        sid = doc.get("id", schema_id)
        return SchemaValue(subject=doc.get("subject") or subject, version=doc.get("version") or version,
                           id=sid if isinstance(sid, int) else -1, schema=doc["schema"],
                           schema_type=doc.get("schemaType") or AVRO, references=refs)

    def by_id(self, schema_id: int) -> SchemaValue | None:
        return self._value(self._get(f"/schemas/ids/{schema_id}"), schema_id, f"id {schema_id}", 1)

    def by_guid(self, guid: uuid.UUID) -> SchemaValue | None:
        return self._value(self._get(f"/schemas/guids/{guid}"), None, f"guid {guid}", 1)

    def version(self, subject: str, version: int) -> SchemaValue | None:
        from urllib.parse import quote

        which = "latest" if version == -1 else str(version)
        return self._value(self._get(f"/subjects/{quote(subject, safe='')}/versions/{which}"), None, subject, version)


__all__ = ["EXTENSIONS", "INDEX_FILE", "LoadedRegistry", "RegistryLogSource", "RegistryUrlSource", "SchemaFilesSource",
           "SchemaSource", "load_registry"]
