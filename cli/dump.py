"""``plog dump``: Kafka's DumpLogSegments for every file of a log directory."""

from __future__ import annotations

import dataclasses
import os
import re
import sys
from typing import List, Optional

import typer

from .common import is_quiet, schema_registry_option, schemas_option
from .errors import CliUsageError, PlogCliError
from .output import JsonArrayWriter, ReportFormat
from .exit_codes import Outcome
from .app import app


@app.command(
    epilog=(
        "Examples:\n\n"
        "  plog dump --print-data-log /var/lib/kafka/orders-0/00000000000000000000.log\n\n"
        "  plog dump --files 00000000000000000000.index,00000000000000000000.timeindex --verify-index-only\n\n"
        "  plog dump --offsets-decoder /var/lib/kafka/__consumer_offsets-7/\n\n"
        "  plog dump --format jsonl --deep-iteration orders-0/00000000000000000000.log | jq .value\n\n"
        "  plog dump --value-decoder confluent /var/lib/kafka/orders-0/   (Avro/Protobuf/JSON Schema payloads)\n\n"
        "Text output is exactly Kafka's kafka-dump-log.sh output (Kafka 4.x; --kafka-version 3 "
        "for 3.3-3.9). Beyond Kafka: directories and globs, the text checkpoint files "
        "(recovery-point-offset-checkpoint, leader-epoch-checkpoint, partition.metadata, "
        "meta.properties, .kafka_cleanshutdown), hex/base64/json decoders and --format jsonl.\n\n"
        "--value-decoder confluent (--key-decoder confluent) prints a Confluent-framed Avro, Protobuf or JSON "
        "Schema payload as its JSON (avro, protobuf, json-schema: only that schema type), with the schemas of "
        "the _schemas topic in the log directory of the files (the partition folder's parent), then of each "
        "--schemas PATH, then --schema-registry URL. A payload that does not decode prints as Kafka's string "
        "decoder prints it; how many did not, and why, ends the run on stderr (exit 0).\n\n"
        "Exit status: 0 success; 1 error (unreadable file, corrupt entry header, and in text output "
        "wherever Kafka's tool dies: an index failing --index-sanity-check, a decoder failing on a record); "
        "2 usage error; 3 with --verify-index-only: an index disagrees with its log (with --format jsonl "
        "also: an index fails --index-sanity-check)."
    )
)
def dump(
    files: Optional[List[str]] = typer.Argument(
        None, help="Files or directories to dump (.log, .index, .timeindex, .txnindex, .snapshot, KRaft .checkpoint, text checkpoints)."
    ),
    files_opt: Optional[str] = typer.Option(None, "--files", help="Comma-separated list of files, as Kafka spells it."),
    print_data_log: bool = typer.Option(False, "--print-data-log", help="Print keys and payloads (implies --deep-iteration)."),
    deep_iteration: bool = typer.Option(False, "--deep-iteration", help="Print one line per record inside each batch."),
    skip_record_metadata: bool = typer.Option(
        False, "--skip-record-metadata", help="Omit per-record metadata when printing records (also skips control records)."
    ),
    verify_index_only: bool = typer.Option(
        False, "--verify-index-only", help="Check .index/.timeindex entries against the log without printing them."
    ),
    index_sanity_check: bool = typer.Option(
        False, "--index-sanity-check", help="Run the broker's start-up index sanity check only."
    ),
    max_message_size: int = typer.Option(
        5 * 1024 * 1024, "--max-message-size", min=1, help="Largest batch expected when checking .index entries."
    ),
    max_bytes: int = typer.Option(2**31 - 1, "--max-bytes", min=1, max=2**31 - 1, help="Read at most this many bytes of each .log."),
    offsets_decoder: bool = typer.Option(False, "--offsets-decoder", help="Decode __consumer_offsets records (implies --print-data-log)."),
    transaction_log_decoder: bool = typer.Option(
        False, "--transaction-log-decoder", help="Decode __transaction_state records (implies --print-data-log)."
    ),
    cluster_metadata_decoder: bool = typer.Option(
        False, "--cluster-metadata-decoder", help="Decode KRaft __cluster_metadata records and snapshots (implies --print-data-log)."
    ),
    key_decoder: Optional[str] = typer.Option(
        None, "--key-decoder", "--key-decoder-class", metavar="DECODER",
        help="Key decoder: string (default), hex, base64, json, int, long, confluent, avro, protobuf, json-schema, "
             "or a Kafka decoder class name (implies --print-data-log).",
    ),
    value_decoder: Optional[str] = typer.Option(
        None, "--value-decoder", "--value-decoder-class", metavar="DECODER",
        help="Value decoder: string (default), hex, base64, json, int, long, confluent, avro, protobuf, "
             "json-schema, or a Kafka decoder class name (implies --print-data-log).",
    ),
    schemas: Optional[List[str]] = schemas_option("Another log directory whose _schemas topic holds the schemas "
                                                  "(repeatable; with the confluent decoders)."),
    schema_registry: Optional[str] = schema_registry_option(),
    output_format: ReportFormat = typer.Option(ReportFormat.text, "--format", "-f", case_sensitive=False,
                                      help="text (Kafka's output), jsonl (one JSON object per file header, batch, "
                                           "record or entry) or json (the same objects as one array)."),
    kafka_version: int = typer.Option(4, "--kafka-version", help="Reproduce the text of Kafka 4.x (4) or 3.3-3.9 (3)."),
) -> Outcome:
    """Print the contents of Kafka segment, index, snapshot and checkpoint files, exactly as
    Kafka's kafka-dump-log.sh (DumpLogSegments) prints them."""
    from plog.engine.inspect.dump import expand_dump_paths

    options = _options(output_format, kafka_version, offsets_decoder, transaction_log_decoder,
                       cluster_metadata_decoder, key_decoder, value_decoder, print_data_log=print_data_log,
                       deep_iteration=deep_iteration, skip_record_metadata=skip_record_metadata,
                       verify_index_only=verify_index_only, index_sanity_check=index_sanity_check,
                       max_message_size=max_message_size, max_bytes=max_bytes)
    paths = expand_dump_paths(_paths(files, files_opt))
    resolver = _schema_resolver(options, paths, schemas, schema_registry)
    if resolver is not None:
        options = dataclasses.replace(options, schema_resolver=resolver)
    write = sys.stdout.write
    array = JsonArrayWriter(write) if output_format is ReportFormat.json else None
    out = array.add if array is not None else (lambda line: write(line + "\n"))

    def err(line: str) -> None:
        sys.stdout.flush()
        sys.stderr.write(line + "\n")
        sys.stderr.flush()

    try:
        run = _dump_all(paths, options, out, err, write)
    finally:
        if array is not None:
            array.close()  # even after an error: what was written is still one JSON document
    sys.stdout.flush()
    if resolver is not None and not is_quiet():
        for reason, count in sorted(resolver.raw_reasons.items(), key=lambda kv: (-kv[1], kv[0])):
            err(f"{count} key(s)/value(s) printed undecoded: {reason}")
    if run.problems and (verify_index_only or index_sanity_check):
        return Outcome.PROBLEMS_FOUND
    return Outcome.OK


def _schema_resolver(options, paths: list[str], schemas: list[str] | None, registry_url: str | None):
    """The resolver of the confluent decoders (None without them): the ``_schemas`` of the log
    directories holding the files (a partition folder's parent), then --schemas, then the URL."""
    from plog.engine.inspect.dump_decoders import SCHEMA_DECODERS

    if options.record_decoder is not None or not {options.key_decoder, options.value_decoder} & set(SCHEMA_DECODERS):
        if schemas or registry_url:
            raise CliUsageError("--schemas and --schema-registry need --value-decoder or --key-decoder confluent "
                                "(or avro, protobuf, json-schema)")
        return None
    from plog.engine.schemas.resolver import open_resolver

    log_dirs = []
    for path in paths:
        folder = os.path.dirname(os.path.abspath(path))
        # Only a partition folder's parent: the parent of any other folder may be a whole disk.
        if _PARTITION_FOLDER.match(os.path.basename(folder)):
            log_dir = os.path.dirname(folder)
            if log_dir not in log_dirs:
                log_dirs.append(log_dir)
    return open_resolver(log_dirs, schemas_paths=schemas or (), registry_url=registry_url)


_PARTITION_FOLDER = re.compile(r"^.+-\d+(\.[0-9a-f]{32}-(delete|future|stray))?$")


def _paths(files: list[str] | None, files_opt: str | None) -> list[str]:
    """The FILES arguments, then --files (comma-separated, as Kafka spells it)."""
    paths = list(files or [])
    if files_opt:
        paths += files_opt.split(",")
    if not paths:
        raise CliUsageError('Missing required argument "[files]"')
    return paths


def _options(output_format: ReportFormat, kafka_version: int, offsets: bool, transaction_log: bool,
             cluster_metadata: bool, key_decoder: str | None, value_decoder: str | None, **flags):
    """The dump's options; the checks Click cannot make are usage errors."""
    from plog.engine.inspect.dump import DumpOptions
    from plog.engine.inspect.dump_decoders import deprecated_decoder_notices, resolve_decoder_name

    if kafka_version not in (3, 4):
        raise CliUsageError(f"--kafka-version must be 3 or 4, not {kafka_version}")
    chosen = [name for name, on in (("offsets", offsets), ("transaction-log", transaction_log),
                                    ("cluster-metadata", cluster_metadata)) if on]
    if len(chosen) > 1:
        raise CliUsageError("choose one of --offsets-decoder, --transaction-log-decoder, --cluster-metadata-decoder")
    # An unknown decoder name is a DecoderError, a usage error (exit 2).
    key_name = resolve_decoder_name(key_decoder) if key_decoder is not None else None
    value_name = resolve_decoder_name(value_decoder) if value_decoder is not None else None
    return DumpOptions(
        **flags,
        record_decoder=chosen[0] if chosen else None,
        key_decoder=key_name,
        value_decoder=value_name,
        kafka_version=kafka_version,
        format="text" if output_format is ReportFormat.text else "jsonl",
        decoder_notices=deprecated_decoder_notices(key_decoder, value_decoder),
    )


def _dump_all(paths, options, out, err, write):
    from plog.engine.inspect.dump import DumpRun
    from plog.formats.errors import FormatError

    with _progress(paths) as bar:
        run = DumpRun(options, out, err, bar.callback)
        for path in paths:
            try:
                run.dump(path)
            except FileNotFoundError as e:
                raise PlogCliError(f"{e.filename or path}: no such file") from None
            except IsADirectoryError:
                raise PlogCliError(f"{path}: is a directory") from None
            except FormatError as e:
                # Where Kafka's tool dies in the middle of a record line, that part is out.
                partial = getattr(e, "partial_output", None)
                if partial:
                    write(partial)
                    sys.stdout.flush()
                if path not in str(e) and os.path.abspath(path) not in str(e):
                    # Kafka's message names the position, not the file: with several files
                    # (a directory, a glob) the user needs both.
                    raise PlogCliError(f"{path}: {e}", like=e) from None
                raise
        run.finish()
    return run


def _progress(paths: list[str]):
    """A bar over the bytes of the ``.log`` files (a dump small enough to finish before a
    bar is worth drawing has none)."""
    from .progress import progress, progress_enabled

    total = 0
    if progress_enabled():
        total = sum(os.path.getsize(p) for p in paths if p.endswith((".log", ".checkpoint")) and os.path.isfile(p))
    return progress("dump", total=total, min_total=64 << 20)
