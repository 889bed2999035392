"""``plog consume TOPIC``: records out of a topic, standalone or in a consumer group."""

from __future__ import annotations

import sys
from typing import List, Optional

import typer

from .common import (data_dir_option, open_data_dir, parse_properties, pick_topic, property_option, quiet_option,
                     schema_registry_option, schemas_option, topic_option)
from .errors import CliUsageError
from .app import app

NAMED_FORMATS = ("text", "jsonl", "json")
#: kafka-console-consumer's formatter properties (engine.record_io.MESSAGE_FORMATTER_PROPERTIES),
#: named here for --help without importing the engine.
FORMATTER_PROPERTIES = ("print.key", "print.value", "print.timestamp", "print.partition", "print.offset",
                        "print.headers", "key.separator", "line.separator", "headers.separator", "null.literal")


@app.command(
    "consume",
    epilog=(
        "Examples:\n\n"
        "  plog consume orders -e                               (every record's value, then exit)\n\n"
        "  plog consume orders --offset -10 -e --format '%p %o %k=%v\\n'\n\n"
        "  plog consume orders --partition 0 --offset 100:+5 --format jsonl\n\n"
        "  plog consume orders --offset @-15m                   (from 15 minutes ago, then follow)\n\n"
        "  plog consume orders --group billing                  (committed offsets, auto-commit)\n\n"
        "  plog consume -t orders -J -o s@1700000000000 -o e@1700003600000   (kcat's spellings)\n\n"
        "  plog consume orders --property print.key=true --max-messages 10 -e   (console consumer's)\n\n"
        "--offset (per partition): earliest | latest | committed | N | +N (N after the log start) | -N "
        "(N before the end) | @<ms> | @<ISO-8601> | @-<duration> (@-15m, @-2h30m) | ranges A:B with B "
        "exclusive (A:+N reads N records). kcat's s@<ms> (start at a time) and e@<ms> (stop before the "
        "first record at or after a time) may both be given. Default: earliest, as kcat and rpk "
        "(kafka-console-consumer starts at latest). With --group, positions come from the group's committed "
        "offsets, and --offset earliest|latest only chooses where a partition without one starts "
        "(auto.offset.reset); use plog groups reset-offsets to move a group.\n\n"
        "--format: text (the value, one per line), jsonl (one binary-safe JSON object per record: "
        "topic, partition, offset, timestamp, timestamp_type, key, value, headers; plog produce "
        "--input-format jsonl reads it back), json (one array), or a template: %t topic, %p partition, "
        "%o offset, %k key, %v value, %K key length, %S value length, %T timestamp, %h headers, %% and "
        "\\n \\t escapes (null keys/values print empty, as in kcat). kcat's -J is --format jsonl, and "
        "-K<delim> prints key<delim>value lines. --property takes kafka-console-consumer's formatter "
        "properties with their meaning there (print.key=true prints key<TAB>value; key.separator; a null "
        "key or value prints as null.literal, default null); separators take \\t, \\n and \\xHH escapes.\n\n"
        "--isolation-level read_committed skips aborted transactions and stops at the last stable "
        "offset. Without -e (or --count, or a range end) the command follows the topic, waiting for new "
        "records, until Ctrl-C (which commits, with --group) or SIGTERM; the summary on stderr says how "
        "many records were read. Works read-only on a stopped broker's log "
        "directory (--data-dir /var/lib/kafka), reading a group's offsets there but never committing.\n\n"
        "--value-format/--key-format: raw (the bytes, default), auto (a Confluent-framed Avro, Protobuf or "
        "JSON Schema key/value decoded with the schema its id names), avro, protobuf or json-schema (decode only "
        "that schema type). Schemas come from the _schemas topic of --data-dir, then of each --schemas PATH "
        "(another data or log directory), then --schema-registry URL (GET /schemas/ids/ID). kcat's -s value=avro, "
        "-s key=avro and -s avro (both) are accepted, and its -r URL. A decoded key/value prints as its JSON text "
        "in templates and text; in jsonl/json it is a JSON value followed by value_schema_id (key_schema_id). "
        "One that does not decode (not framed, unknown id, not matching its schema) is shown raw as without "
        "decoding, followed in jsonl/json by value_decode_error (key_decode_error) with the reason, and counted "
        "by reason on stderr at the end; it never stops the run.\n\n"
        "Exit status: 0 success, 1 error, 2 usage error, 130 interrupted, 143 terminated."
    ),
)
def consume(
    topic: Optional[str] = typer.Argument(None, help="Topic to read (or -t/--topic).", show_default=False),
    name: Optional[str] = topic_option(),
    group: Optional[str] = typer.Option(None, "--group", "-g", help="Consumer group (subscribe, commit offsets)."),
    partition: Optional[List[int]] = typer.Option(None, "--partition", "-p", min=0,
                                                  help="Only these partitions (repeatable; no group rebalancing)."),
    offset: Optional[List[str]] = typer.Option(None, "--offset", "-o",
                                               help="Where to start (and stop); see below. Given twice only as "
                                                    "kcat's s@<ms> and e@<ms>."),
    from_beginning: bool = typer.Option(False, "--from-beginning", help="Same as --offset earliest."),
    count: Optional[int] = typer.Option(None, "--count", "-c", "--max-messages", min=0,
                                        help="Stop after this many records."),
    exit_at_end: bool = typer.Option(False, "--exit-at-end", "-e", help="Stop at the end instead of following."),
    fmt: str = typer.Option("text", "--format", "-f", help="text, jsonl, json or a %-template."),
    json_lines: bool = typer.Option(False, "-J", help="kcat's JSON output: the same as --format jsonl."),
    key_delimiter: Optional[str] = typer.Option(None, "-K", "--key-delimiter", metavar="DELIM",
                                                help="Print key<DELIM>value lines, as kcat's -K<delim>."),
    properties: Optional[List[str]] = property_option("kafka-console-consumer formatter", FORMATTER_PROPERTIES),
    isolation_level: str = typer.Option("read_uncommitted", "--isolation-level",
                                        help="read_uncommitted or read_committed."),
    commit: bool = typer.Option(True, "--commit/--no-commit", help="With --group: commit offsets (auto-commit)."),
    strategy: Optional[List[str]] = typer.Option(None, "--assignment-strategy",
                                                 help="range, roundrobin, sticky, cooperative-sticky."),
    value_format: Optional[str] = typer.Option(None, "--value-format", metavar="FORMAT",
                                               help="raw (default), auto, avro, protobuf or json-schema; see below."),
    key_format: Optional[str] = typer.Option(None, "--key-format", metavar="FORMAT",
                                             help="raw (default), auto, avro, protobuf or json-schema."),
    serdes: Optional[List[str]] = typer.Option(None, "-s", metavar="[key=|value=]FORMAT",
                                               help="kcat's spelling of --key-format/--value-format (repeatable)."),
    schemas: Optional[List[str]] = schemas_option(),
    schema_registry: Optional[str] = schema_registry_option("-r"),
    quiet: bool = quiet_option("No summary on stderr."),
    data_dir: str = data_dir_option(),
) -> None:
    """Consume records: from offsets, times or a group's committed position; follow or exit at the end."""
    from plog.engine.clients.consumer_loop import ConsumeLoop

    from .heap import keep_freed_heap

    keep_freed_heap()
    topic = pick_topic(topic, name)
    rng = _start_and_end(offset, from_beginning, isolation_level, group is not None and not partition)
    key_format, value_format = _field_formats(key_format, value_format, serdes)
    dd = open_data_dir(data_dir)
    decoding = _decoding(dd, key_format, value_format, schemas, schema_registry)
    fmt_name, render = _renderer(fmt, json_lines, key_delimiter, properties, decoding)
    batch_format = _batch_format(fmt, json_lines, key_delimiter, properties, decoding, isolation_level)
    out = sys.stdout.buffer
    loop = ConsumeLoop.open(dd, topic, rng, group_id=group, partitions=partition, count=count,
                            exit_at_end=exit_at_end, isolation_level=isolation_level, enable_auto_commit=commit,
                            assignment_strategy=strategy or ("range", "cooperative-sticky"), after_poll=out.flush)
    interrupted = False
    try:
        if batch_format is not None:
            for chunk in loop.rendered(batch_format):
                out.write(chunk)
        else:
            _print_records(loop, fmt_name, render, out, decoding)
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (cli/signals.py): a clean stop that says what it read
        interrupted = True
        raise
    finally:
        try:
            out.flush()
        finally:
            try:
                loop.close()  # records fetched but not printed are sought back: the commit never passes them
            finally:
                if interrupted and not quiet:
                    _summary(loop, topic, decoding)
    if not quiet:
        _summary(loop, topic, decoding)


def _summary(loop, topic: str, decoding) -> None:
    print(f"consumed {loop.consumed} record(s) from {topic}", file=sys.stderr)
    for line in decoding.summary() if decoding is not None else ():
        print(line, file=sys.stderr)


def _field_formats(key_format: str | None, value_format: str | None, serdes: list[str] | None) -> tuple[str, str]:
    """--key-format and --value-format, with kcat's -s (``value=avro``, ``key=avro``, ``avro``
    for both); a field given two different formats is a usage error."""
    from plog.engine.clients.console_io import FIELD_FORMATS

    chosen = {"key": [("--key-format", key_format)] if key_format else [],
              "value": [("--value-format", value_format)] if value_format else []}
    for item in serdes or ():
        field, eq, fmt = item.rpartition("=")
        if eq and field not in ("key", "value"):
            raise CliUsageError(f"-s {item}: expected key=FORMAT, value=FORMAT or FORMAT (both)")
        for name in (field,) if eq else ("key", "value"):
            chosen[name].append((f"-s {item}", fmt))
    out = []
    for field in ("key", "value"):
        for option, fmt in chosen[field]:
            if fmt not in FIELD_FORMATS:
                raise CliUsageError(f"{option}: unknown format {fmt!r}; choose one of {', '.join(FIELD_FORMATS)}"
                                    + (" (kcat's pack formats are not supported)" if option.startswith("-s") else ""))
        formats = {fmt for _, fmt in chosen[field]}
        if len(formats) > 1:
            raise CliUsageError(f"the {field} is given two formats: "
                                f"{' and '.join(f'{o} ({f})' for o, f in chosen[field])}; give one")
        out.append(formats.pop() if formats else "raw")
    return out[0], out[1]


def _decoding(dd, key_format: str, value_format: str, schemas: list[str] | None, registry_url: str | None):
    """The record decoding of --key-format/--value-format (None when both are raw), its
    schemas from the data directory's _schemas, then --schemas, then the registry URL."""
    if key_format == "raw" and value_format == "raw":
        if schemas or registry_url:
            raise CliUsageError("--schemas and --schema-registry need --value-format or --key-format "
                                "(auto, avro, protobuf or json-schema)")
        return None
    from plog.engine.clients.console_io import RecordDecoding
    from plog.engine.schemas.resolver import open_resolver

    resolver = open_resolver([dd.path], schemas_paths=schemas or (), registry_url=registry_url)
    return RecordDecoding(resolver, key_format=key_format, value_format=value_format)


def _batch_format(fmt: str, json_lines: bool, key_delimiter: str | None, properties: list[str] | None, decoding,
                  isolation_level: str):
    """The native path's output a batch at a time (engine.clients.record_io.BatchFormat) for
    text, jsonl and templates (-K's too), and jsonl with decoding, read_uncommitted; None otherwise (and
    on the pure-Python path): the loop then prints record by record (``_renderer``, which
    also checks the options; it runs first)."""
    if isolation_level != "read_uncommitted" or properties:
        return None
    from plog.engine.clients.console_io import DEFAULT_TEMPLATE, template_batch_format
    from plog.engine.clients.record_io import jsonl_batch_format

    if decoding is not None:
        return decoding.batch_format() if json_lines or fmt == "jsonl" else None
    if json_lines or fmt == "jsonl":
        return jsonl_batch_format()
    if key_delimiter is not None:
        return template_batch_format(_key_delimiter_template(key_delimiter))
    if fmt == "json":
        return None
    # text prints (value or b"") + b"\n" (_print_records): the default template's output.
    return template_batch_format(DEFAULT_TEMPLATE if fmt == "text" else fmt)


def _key_delimiter_template(delimiter: str) -> str:
    """kcat's -K<delim>: its format "%k<delim>%s\n" (the delimiter's escapes interpreted)."""
    return "%k" + delimiter.replace("%", "%%") + "%v\n"


def _print_records(loop, fmt: str, render, out, decoding=None) -> None:
    """Every record of ``loop`` on ``out`` in ``fmt`` (``json``: one array, closed even
    after an error, so what was written is one JSON document)."""
    import json

    from plog.engine.clients.record_io import record_to_json

    from .output import JsonArrayWriter

    write = out.write
    if fmt == "text" and decoding is not None:
        value = decoding.value_bytes
        for rec in loop:
            write(value(rec) + b"\n")
    elif fmt == "json" and decoding is not None:
        array = JsonArrayWriter(write, binary=True, break_first=True)
        try:
            for rec in loop:
                array.add(decoding.jsonl(rec)[:-1])
        finally:
            array.close()
    elif fmt == "text":
        for rec in loop:
            write((rec.value or b"") + b"\n")
    elif fmt == "json":
        array = JsonArrayWriter(write, binary=True, break_first=True)
        dumps = json.dumps
        try:
            for rec in loop:
                array.add(dumps(record_to_json(rec), ensure_ascii=False).encode("utf-8"))
        finally:
            array.close()
    else:
        for rec in loop:
            write(render(rec))


def _start_and_end(offset: list[str] | None, from_beginning: bool, isolation_level: str, subscribing: bool):
    """The range to read, from --offset (or --from-beginning); with a group's subscription,
    only where a partition without a committed offset starts."""
    if isolation_level not in ("read_uncommitted", "read_committed"):
        raise typer.BadParameter("must be read_uncommitted or read_committed", param_hint="--isolation-level")
    if from_beginning:
        if offset:
            raise typer.BadParameter("give --from-beginning or --offset, not both", param_hint="--offset")
        offset = ["earliest"]
    rng = _offset_range(offset)
    if subscribing and (rng.end is not None or rng.start.kind not in ("earliest", "latest", "committed")):
        raise typer.BadParameter("with --group, --offset is earliest or latest (where partitions without a "
                                 "committed offset start); use plog groups reset-offsets to move the group",
                                 param_hint="--offset")
    return rng


def _offset_range(values: list[str] | None):
    """``--offset`` as one range. Given once: plog's offset language (or kcat's ``s@<ms>``,
    ``e@<ms>``). Given twice: a start (plog's, or ``s@<ms>``) and kcat's end ``e@<ms>``."""
    from plog.engine.errors import InvalidOffsetSpecError
    from plog.engine.offset_spec import EARLIEST, OffsetRange, parse_offset, parse_offset_range

    starts = [("@" + v[2:] if v.startswith("s@") else v) for v in values or () if not v.startswith("e@")]
    ends = ["@" + v[2:] for v in values or () if v.startswith("e@")]
    if len(starts) > 1 or len(ends) > 1:
        raise typer.BadParameter(f"given {len(values)} times: give one, or a start and kcat's end e@<ms>",
                                 param_hint="--offset")
    try:
        rng = parse_offset_range(starts[0]) if starts else OffsetRange(EARLIEST, None)
        if ends:
            if rng.end is not None:
                raise typer.BadParameter(f"{starts[0]} already has an end: leave out e@ or the range end",
                                         param_hint="--offset")
            rng = OffsetRange(rng.start, parse_offset(ends[0]))
    except InvalidOffsetSpecError as e:
        raise typer.BadParameter(str(e), param_hint="--offset") from None
    return rng


def _renderer(fmt: str, json_lines: bool, key_delimiter: str | None, properties: list[str] | None, decoding=None):
    """The output format and its record renderer (None for text and json, which the loop
    writes itself) from --format and its kcat (-J, -K) and console-consumer (--property)
    spellings, which exclude one another. ``decoding`` (or None) decodes keys and values."""
    from plog.engine.clients.console_io import (
        MESSAGE_FORMATTER_PROPERTIES,
        ConsoleFormat,
        compile_console_format,
        compile_template,
        properties_to_settings,
    )
    from plog.engine.clients.record_io import format_jsonl

    chosen = [what for what, on in (("--format", fmt != "text" and not (json_lines and fmt == "jsonl")),
                                    ("-J", json_lines), ("-K", key_delimiter is not None),
                                    ("--property", bool(properties))) if on]
    if len(chosen) > 1:
        raise CliUsageError(f"{' and '.join(chosen)} each choose the output format: give one of them")
    if json_lines or fmt == "jsonl":
        return "jsonl", (format_jsonl if decoding is None else decoding.jsonl)
    if key_delimiter is not None:
        return "template", compile_template(_key_delimiter_template(key_delimiter), decoding)
    if properties:
        # An unknown property is a PropertyError, a usage error (exit 2).
        settings = properties_to_settings(parse_properties(properties), MESSAGE_FORMATTER_PROPERTIES,
                                          "kafka-console-consumer's formatter (plog consume --property)")
        return "console", compile_console_format(ConsoleFormat(**settings), decoding)
    if fmt in ("text", "json"):
        return fmt, None
    return "template", compile_template(fmt, decoding)
