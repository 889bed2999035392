"""What a Schema Registry serves, rebuilt from its ``_schemas`` records replayed in offset order,
as its ``KafkaStoreReaderThread`` and ``KafkaStoreMessageHandler`` rebuild it at start-up.

The store holds the latest value per key (a tombstone removes the key). On top of that plain
"latest wins", the registry's reader applies these rules, and :class:`RegistryState` does too:

* a key or value it cannot read is skipped (listed in :attr:`RegistryState.skipped`);
* NOOP records only move the reader's position;
* a SCHEMA value whose id already names a *different* schema text (under any subject, in
  the same context) is ignored: the first registration of an id wins;
* DELETE_SUBJECT ``{subject, version}`` soft-deletes versions 1..version of the subject
  that are not deleted yet (the registry writes no SCHEMA records for them: the deleted
  flag exists only in its memory, and here);
* CLEAR_SUBJECT removes the soft-deleted versions of the subject (or, for a context-only
  subject ``:.ctx:``, of every subject in that context) from the store;
* a schema id resolves to one of the subject-versions registered with it, soft-deleted
  ones included; once every one of them is tombstoned (hard-deleted), the registry no
  longer knows the id.

Compaction leaves the latest record of each key (and tombstones until they expire), which
replays to the same state; so does a log that was never compacted.

Beyond what the registry serves, :meth:`RegistryState.hard_deleted` keeps the schemas that
were hard-deleted but whose records are still in the log (not compacted away yet): the
resolver may still decode old data with them, and ``plog schemas ls --all`` lists them.

Subjects may be qualified with a context (``:.ctx:subject``); ids are unique per context
(the default context is ``""`` here, ``.`` in the registry).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace

from plog.formats.schema_registry import (
    CLEAR_SUBJECT,
    CONFIG,
    DELETE_SUBJECT,
    MODE,
    NOOP,
    SCHEMA,
    RegistryKey,
    RegistryRecordError,
    SchemaValue,
    SubjectValue,
    parse_key,
    parse_value,
    schema_guid,
)

DEFAULT_CONTEXT = ""


def context_of(subject: str | None) -> str:
    """The context of a (possibly qualified) subject: ``:.ctx:name`` is in ``.ctx``."""
    if subject and subject.startswith(":.") and ":" in subject[2:]:
        return subject[1:subject.index(":", 2)]
    return DEFAULT_CONTEXT


def _matches_clear(target: str, subject: str) -> bool:
    """Whether CLEAR_SUBJECT ``target`` covers ``subject`` (exact, or a whole context)."""
    if target == subject:
        return True
    return target.startswith(":.") and target.endswith(":") and context_of(subject) == context_of(target)


@dataclass(frozen=True)
class Entry:
    """A live key of the store: its key, its value, and the offset of the record that wrote it
    (the value may have been changed since by a DELETE_SUBJECT, which writes no record of it)."""

    key: RegistryKey
    value: SchemaValue | SubjectValue
    offset: int
    key_bytes: bytes
    value_bytes: bytes


@dataclass(frozen=True)
class SkippedRecord:
    """A ``_schemas`` record the registry would not apply, and why."""

    offset: int
    reason: str


class RegistryState:
    """The registry's store, rebuilt one record at a time with :meth:`apply` (module docstring)."""

    def __init__(self) -> None:
        self._store: dict[tuple, Entry] = {}
        # (context, id) -> {subject: version}, in registration order (the registry's
        # guidToSubjectVersions; its first entry is the one GET /schemas/ids/{id} serves).
        self._ids: dict[tuple[str, int], dict[str, int]] = {}
        # (context, id) -> the first SCHEMA value applied with that id (kept after hard deletes).
        self._first: dict[tuple[str, int], SchemaValue] = {}
        self._guids: dict[uuid.UUID, tuple[str, int]] | None = None
        self.skipped: list[SkippedRecord] = []
        self.records = 0
        self.last_offset: int | None = None

    # -- replay ----------------------------------------------------------------------------

    def apply(self, offset: int, key: bytes | None, value: bytes | None) -> None:
        """Apply one ``_schemas`` record (its offset, key bytes and value bytes)."""
        self.records += 1
        self.last_offset = offset
        try:
            k = parse_key(key)
            v = parse_value(k, value)
        except RegistryRecordError as e:
            self.skipped.append(SkippedRecord(offset, e.reason))
            return
        if k.keytype == NOOP:
            return
        if k.keytype == SCHEMA:
            self._apply_schema(offset, k, v, key, value)
            return
        ident = k.identity
        if v is None:
            self._store.pop(ident, None)
            return
        self._store[ident] = Entry(k, v, offset, bytes(key), bytes(value))
        if k.keytype == DELETE_SUBJECT:
            self._delete_subject(v.subject or k.subject, v.version)
        elif k.keytype == CLEAR_SUBJECT:
            self._clear_subject(v.subject or k.subject)

    def _apply_schema(self, offset: int, k: RegistryKey, v: SchemaValue | None, key: bytes, value: bytes | None):
        ident = k.identity
        ctx = context_of(k.subject)
        if v is None:
            old = self._store.pop(ident, None)
            if old is not None:
                self._forget(ctx, old.value.id, k.subject, k.version)
            return
        first = self._served_by_id(ctx, v.id)
        if first is not None and first.schema != v.schema:
            self.skipped.append(SkippedRecord(
                offset, f"schema id {v.id} already names another schema (subject {first.subject} version "
                        f"{first.version}); the registry ignores this record"))
            return
        self._store[ident] = Entry(k, v, offset, bytes(key), bytes(value))
        self._ids.setdefault((ctx, v.id), {})[k.subject] = k.version
        self._first.setdefault((ctx, v.id), v)
        self._guids = None

    def _forget(self, ctx: str, schema_id: int, subject: str, version: int) -> None:
        versions = self._ids.get((ctx, schema_id))
        if versions is not None and versions.get(subject) == version:
            del versions[subject]
            if not versions:
                del self._ids[(ctx, schema_id)]

    def _delete_subject(self, subject: str, watermark: int) -> None:
        for version in range(1, watermark + 1):
            entry = self._store.get((SCHEMA, subject, version))
            if entry is not None and not entry.value.deleted:
                self._store[entry.key.identity] = replace(entry, value=replace(entry.value, deleted=True))

    def _clear_subject(self, target: str) -> None:
        for ident, entry in list(self._store.items()):
            if entry.key.keytype == SCHEMA and entry.value.deleted and _matches_clear(target, entry.key.subject):
                del self._store[ident]
                self._forget(context_of(entry.key.subject), entry.value.id, entry.key.subject, entry.key.version)

    # -- what the registry serves ----------------------------------------------------------

    def _served_by_id(self, ctx: str, schema_id: int) -> SchemaValue | None:
        versions = self._ids.get((ctx, schema_id))
        if not versions:
            return None
        subject, version = next(iter(versions.items()))
        entry = self._store.get((SCHEMA, subject, version))
        return entry.value if entry is not None else None

    def by_id(self, schema_id: int, context: str | None = None) -> SchemaValue | None:
        """The schema ``GET /schemas/ids/{id}`` serves (soft-deleted versions included). Without
        ``context``: the default context's, else the one context that has the id."""
        if context is not None:
            return self._served_by_id(context, schema_id)
        found = self._served_by_id(DEFAULT_CONTEXT, schema_id)
        if found is not None:
            return found
        others = [ctx for (ctx, i) in self._ids if i == schema_id and ctx != DEFAULT_CONTEXT]
        return self._served_by_id(others[0], schema_id) if len(others) == 1 else None

    def hard_deleted_by_id(self, schema_id: int) -> SchemaValue | None:
        """The first schema registered with ``schema_id`` when the registry no longer serves
        it (every version of it hard-deleted) but its record was read from the log."""
        if self.by_id(schema_id) is not None:
            return None
        found = [v for (ctx, i), v in self._first.items() if i == schema_id and (ctx, i) not in self._ids]
        # The default context's first; another context's only when it is the one that had it.
        found.sort(key=lambda v: context_of(v.subject) != DEFAULT_CONTEXT)
        return found[0] if len(found) == 1 or found and context_of(found[0].subject) == DEFAULT_CONTEXT else None

    def by_guid(self, guid: uuid.UUID) -> SchemaValue | None:
        """The schema whose GUID is ``guid`` (served first, else hard-deleted)."""
        if self._guids is None:
            self._guids = {}
            for key, value in self._first.items():
                self._guids.setdefault(schema_guid(value), key)
            for entry in self._store.values():
                if entry.key.keytype == SCHEMA:
                    self._guids.setdefault(schema_guid(entry.value), (context_of(entry.key.subject), entry.value.id))
        key = self._guids.get(guid)
        if key is None:
            return None
        return self._served_by_id(*key) or self._first.get(key)

    def version(self, subject: str, version: int) -> SchemaValue | None:
        """A subject's version (deleted ones included, as references resolve them); ``-1``
        is the latest version that is not deleted."""
        if version == -1:
            live = self.versions(subject)
            return live[-1] if live else None
        entry = self._store.get((SCHEMA, subject, version))
        return entry.value if entry is not None else None

    def versions(self, subject: str, *, include_deleted: bool = False) -> list[SchemaValue]:
        """A subject's versions in version order, soft-deleted ones only with ``include_deleted``."""
        out = [e.value for e in self._store.values()
               if e.key.keytype == SCHEMA and e.key.subject == subject and (include_deleted or not e.value.deleted)]
        return sorted(out, key=lambda v: v.version)

    def schemas(self, *, include_deleted: bool = True) -> list[SchemaValue]:
        """Every subject-version in the store, by subject then version."""
        out = [e.value for e in self._store.values()
               if e.key.keytype == SCHEMA and (include_deleted or not e.value.deleted)]
        return sorted(out, key=lambda v: (v.subject, v.version))

    def subjects(self, *, include_deleted: bool = False) -> list[str]:
        return sorted({v.subject for v in self.schemas(include_deleted=include_deleted)})

    def hard_deleted(self) -> list[SchemaValue]:
        """Schemas read from the log that the registry no longer serves (every version of
        their id hard-deleted), by id."""
        out = [v for key, v in self._first.items() if key not in self._ids]
        return sorted(out, key=lambda v: (v.id, v.subject, v.version))

    def entries(self) -> list[Entry]:
        """Every live key of the store, in the order of the records that wrote them."""
        return sorted(self._store.values(), key=lambda e: e.offset)

    def configs(self) -> list[Entry]:
        return [e for e in self.entries() if e.key.keytype == CONFIG]

    def modes(self) -> list[Entry]:
        return [e for e in self.entries() if e.key.keytype == MODE]


__all__ = ["DEFAULT_CONTEXT", "Entry", "RegistryState", "SkippedRecord", "context_of"]
