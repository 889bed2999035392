"""``plog schemas ls|show|export``: what a Schema Registry would serve, rebuilt offline from its
``_schemas`` topic in a broker's log directories (engine: ``plog.engine.schemas``)."""

from __future__ import annotations

import json
import sys
from typing import Optional

import typer

from .app import app
from .errors import CliUsageError, PlogCliError
from .exit_codes import Outcome
from .output import ListFormat, ReportFormat, emit, emit_document, list_format_option, report_format_option, status

schemas_app = typer.Typer(
    help="List, show and export the schemas of a Schema Registry, read from its _schemas topic in Kafka log "
         "directories: no registry and no broker needed.\n\n"
         "Example: plog schemas ls /var/lib/kafka",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    rich_markup_mode=None,
)
app.add_typer(schemas_app, name="schemas")

READ_NOTE = ("PATH is a data directory, a log directory or the _schemas-0 partition folder; with several "
             "replicas (one per broker), the one whose log reaches furthest is read. The records are replayed "
             "as the registry does at start-up: latest value per key, tombstones, soft deletes "
             "(DELETE_SUBJECT), CLEAR_SUBJECT, the first registration of an id winning. Damaged bytes are "
             "skipped (each range named on stderr) and the rest is read. Nothing is locked or modified.")
EXIT = ("Exit status: 0 success, 1 error (no _schemas topic, unreadable path, unknown subject or id), 2 usage "
        "error, 3 read, but damaged bytes of the topic were skipped (listed on stderr).")

TOPIC_HELP = "The registry's topic (its kafkastore.topic), if not _schemas."


def _path_argument(help: str = "Data directory, log directory or _schemas-0 partition folder."):
    return typer.Argument(..., metavar="PATH", help=help)


def _topic_option():
    return typer.Option("_schemas", "--topic", "-t", help=TOPIC_HELP, show_default=False)


def _load(path: str, topic: str):
    """The registry rebuilt from ``path``, with what was skipped said on stderr."""
    from plog.engine.schemas.sources import load_registry

    loaded = load_registry(path, topic)
    report = loaded.report
    # Warnings, not status: they say what the output is missing, so --quiet keeps them.
    for skip in report.skipped:
        print(f"plog: warning: skipped bytes {skip.position}..{skip.end} of {skip.path}: {skip.reason}",
              file=sys.stderr)
    for rec in loaded.state.skipped:
        print(f"plog: warning: {topic} offset {rec.offset} not applied: {rec.reason}", file=sys.stderr)
    others = f" (other replicas: {', '.join(report.other_replicas)})" if report.other_replicas else ""
    status(f"read {report.records} records of {report.partition}{others}")
    return loaded


def _outcome(loaded) -> Outcome | None:
    return Outcome.PROBLEMS_FOUND if loaded.report.skipped else None


# -- ls ------------------------------------------------------------------------------------------------

LS_COLUMNS = ["subject", "version", "id", "type", "deleted", "references"]
LS_TITLES = {"type": "TYPE", "references": "REFERENCES"}


def _references_text(refs) -> str | None:
    return ",".join(f"{r['name']}={r['subject']}/{r['version']}" for r in refs) or None


@schemas_app.command(
    "ls",
    epilog="Examples:\n\n  plog schemas ls /var/lib/kafka\n\n  plog schemas ls /var/lib/kafka --subject orders-value "
           "--format json\n\n"
           "One row per subject version: its schema id, type (AVRO, PROTOBUF, JSON), whether it is deleted "
           "(no; soft: deleted but still served by id; hard, with --all: no longer served, but its record is "
           "still in the log) and the schemas it references (name=subject/version). JSON rows also carry "
           "the schema's GUID (what magic-byte-1 frames carry). " + READ_NOTE + "\n\n" + EXIT,
)
def ls_cmd(
    path: str = _path_argument(),
    subject: Optional[str] = typer.Option(None, "--subject", "-s", help="Only this subject's versions."),
    include_hard_deleted: bool = typer.Option(False, "--all", "-a",
                                              help="Also hard-deleted versions whose records are still in the log."),
    topic: str = _topic_option(),
    fmt: ListFormat = list_format_option(),
) -> Outcome | None:
    """List subjects, versions, ids, types, references and deletions of a registry's _schemas topic."""
    from plog.engine.schemas.export import schema_entry

    loaded = _load(path, topic)
    state = loaded.state
    rows = [schema_entry(v) for v in state.schemas()]
    if include_hard_deleted:
        rows += [schema_entry(v, hard_deleted=True) for v in state.hard_deleted()]
    if subject is not None:
        rows = [r for r in rows if r["subject"] == subject]
        if not rows:
            raise PlogCliError(f"no subject {subject!r} in {loaded.report.partition}")
    rows.sort(key=lambda r: (r["subject"], r["version"], r["hard_deleted"]))
    for r in rows:
        del r["file"]
        r["type"] = r.pop("schemaType")
    if fmt in (ListFormat.json, ListFormat.jsonl):
        emit(rows, fmt, LS_COLUMNS)
    else:
        shown = [{**r, "deleted": "hard" if r["hard_deleted"] else "soft" if r["deleted"] else "no",
                  "references": _references_text(r["references"])} for r in rows]
        emit(shown, fmt, LS_COLUMNS, titles=LS_TITLES, right=("version", "id"), optional=("references",))
    return _outcome(loaded)


# -- show ----------------------------------------------------------------------------------------------


def _version_number(text: str) -> int:
    if text == "latest":
        return -1
    try:
        number = int(text)
    except ValueError:
        number = 0
    if number < 1:
        raise CliUsageError(f"--version {text!r}: expected a version number (1, 2, ...) or latest")
    return number


def _wanted(subject: str | None, version: str, schema_id: int | None, guid: str | None):
    """(version number, GUID) of ``show``'s request, checked before anything is read."""
    import uuid

    if sum(x is not None for x in (subject, schema_id, guid)) != 1:
        raise CliUsageError("give one of: SUBJECT, --id ID, --guid GUID")
    wanted = None
    if guid is not None:
        try:
            wanted = uuid.UUID(guid)
        except ValueError:
            raise CliUsageError(f"--guid {guid!r}: expected a GUID (8-4-4-4-12 hexadecimal digits)") from None
    return _version_number(version), wanted


def _find(state, partition: str, subject: str | None, number: int, schema_id: int | None, guid):
    if schema_id is not None:
        found = state.by_id(schema_id) or state.hard_deleted_by_id(schema_id)
        if found is None:
            raise PlogCliError(f"no schema id {schema_id} in {partition}")
        return found
    if guid is not None:
        found = state.by_guid(guid)
        if found is None:
            raise PlogCliError(f"no schema with GUID {guid} in {partition}")
        return found
    if not state.versions(subject, include_deleted=True):
        raise PlogCliError(f"no subject {subject!r} in {partition}")
    found = state.version(subject, number)
    if found is None:
        what = "no version that is not deleted" if number == -1 else f"no version {number}"
        raise PlogCliError(f"subject {subject!r} has {what} in {partition}")
    return found


def _pretty(value) -> str:
    if value.schema_type in ("AVRO", "JSON"):
        try:
            return json.dumps(json.loads(value.schema), indent=2, ensure_ascii=False)
        except ValueError:
            pass
    return value.schema.rstrip("\n")


@schemas_app.command(
    "show",
    epilog="Examples:\n\n  plog schemas show /var/lib/kafka orders-value\n\n"
           "  plog schemas show /var/lib/kafka --id 42 --raw > 42.avsc\n\n"
           "Text output: the version's subject, version, id, type, GUID, deleted flag and references, a blank "
           "line, then the schema (Avro and JSON Schema indented; with --raw only the schema, exactly as "
           "stored). JSON output: the same fields and the schema text. An id shows the version the registry "
           "serves for it (or, for an id whose versions were all hard-deleted, the one still in the log). "
           + READ_NOTE + "\n\n" + EXIT,
)
def show_cmd(
    path: str = _path_argument(),
    subject: Optional[str] = typer.Argument(None, metavar="SUBJECT", help="The subject (or give --id or --guid)."),
    version: str = typer.Option("latest", "--version", "-V",
                                help="The subject's version: a number, or latest (the last not deleted)."),
    schema_id: Optional[int] = typer.Option(None, "--id", "-i", help="The schema with this id."),
    guid: Optional[str] = typer.Option(None, "--guid", help="The schema with this GUID."),
    raw: bool = typer.Option(False, "--raw", "-r", help="Only the schema text, exactly as the registry stores it."),
    topic: str = _topic_option(),
    fmt: ReportFormat = report_format_option(),
) -> Outcome | None:
    """Show one schema: a subject's version, or the schema of an id or GUID."""
    from plog.engine.schemas.export import schema_entry

    if raw and fmt is not ReportFormat.text:
        raise CliUsageError("--raw prints the schema as text: leave out --format")
    number, wanted_guid = _wanted(subject, version, schema_id, guid)
    loaded = _load(path, topic)
    value = _find(loaded.state, loaded.report.partition, subject, number, schema_id, wanted_guid)
    hard = loaded.state.by_id(value.id) is None
    entry = schema_entry(value, hard_deleted=hard)
    del entry["file"]
    if fmt is not ReportFormat.text:
        emit_document({**entry, "schema": value.schema}, fmt)
    elif raw:
        sys.stdout.write(value.schema if value.schema.endswith("\n") else value.schema + "\n")
    else:
        deleted = "hard" if hard else "soft" if value.deleted else "no"
        lines = [f"subject: {value.subject}", f"version: {value.version}", f"id: {value.id}",
                 f"type: {value.schema_type}", f"guid: {entry['guid']}", f"deleted: {deleted}",
                 "references: " + (", ".join(f"{r.name} = {r.subject} version {r.version}"
                                             for r in value.references) or "none"),
                 "", _pretty(value)]
        sys.stdout.write("\n".join(lines) + "\n")
    return _outcome(loaded)


# -- export --------------------------------------------------------------------------------------------


@schemas_app.command(
    "export",
    epilog="Example: plog schemas export /var/lib/kafka registry-backup\n\n"
           "Writes to DIR: <id>.avsc, <id>.proto or <id>.json for each schema id (the text as the registry "
           "stores it); index.json (every subject version: id, GUID, type, references, deleted, file; the "
           "configs and modes); _schemas.jsonl, the registry's store as _schemas records (subject versions "
           "with their ids and soft deletes, configs, modes) in their original order. To rebuild a registry: "
           "plog produce _schemas --input-format jsonl -d DATA_DIR < DIR/_schemas.jsonl (or any producer), "
           "then start the registry on that topic. DIR is created if missing; files of the same names are "
           "replaced. " + READ_NOTE + "\n\n" + EXIT,
)
def export_cmd(
    path: str = _path_argument(),
    output_dir: str = typer.Argument(..., metavar="DIR", help="The directory to write to."),
    include_hard_deleted: bool = typer.Option(False, "--all", "-a",
                                              help="Also files and index entries for hard-deleted schemas still "
                                                   "in the log."),
    topic: str = _topic_option(),
) -> Outcome | None:
    """Write schema files, an index and _schemas JSON lines (to rebuild a registry)."""
    from plog.engine.schemas.export import JSONL_FILE, export_registry

    loaded = _load(path, topic)
    report = export_registry(loaded, output_dir, include_hard_deleted=include_hard_deleted)
    status(f"wrote {report.schema_files} schema files, index.json ({report.index_entries} subject versions) and "
           f"{JSONL_FILE} ({report.records} records) to {report.directory}")
    return _outcome(loaded)
