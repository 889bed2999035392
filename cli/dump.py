"""``plog dump``: Kafka's DumpLogSegments for segment files."""

from __future__ import annotations

import os
import sys
from typing import List, Optional

import typer

from .errors import PlogCliError
from .main import app

LOG_SUFFIXES = (".log", ".checkpoint")


@app.command(
    epilog=(
        "Example: plog dump --print-data-log /var/lib/kafka/orders-0/00000000000000000000.log\n\n"
        "Exit status: 0 success, 1 error (unreadable file, corrupt entry header), 2 usage error."
    )
)
def dump(
    files: Optional[List[str]] = typer.Argument(None, help="Segment files to dump (.log, KRaft .checkpoint)."),
    files_opt: Optional[str] = typer.Option(None, "--files", help="Comma-separated list of files, as Kafka spells it."),
    print_data_log: bool = typer.Option(False, "--print-data-log", help="Print keys and payloads (implies --deep-iteration)."),
    deep_iteration: bool = typer.Option(False, "--deep-iteration", help="Print one line per record inside each batch."),
    skip_record_metadata: bool = typer.Option(False, "--skip-record-metadata", help="Omit per-record metadata."),
    max_bytes: int = typer.Option(2**31 - 1, "--max-bytes", min=1, help="Read at most this many bytes of each .log."),
) -> None:
    """Print the batches and records of Kafka segment files, exactly as Kafka's
    kafka-dump-log.sh (DumpLogSegments) prints them."""
    from plog.engine.dump import DumpOptions, dump_log
    from plog.formats.errors import FormatError

    paths = list(files or [])
    if files_opt:
        paths += files_opt.split(",")
    if not paths:
        raise PlogCliError('Missing required argument "[files]"', exit_code=2)
    options = DumpOptions(print_data_log=print_data_log, deep_iteration=deep_iteration,
                          skip_record_metadata=skip_record_metadata, max_bytes=max_bytes)
    write = sys.stdout.write

    def out(line: str) -> None:
        write(line + "\n")

    def err(line: str) -> None:
        sys.stdout.flush()
        sys.stderr.write(line + "\n")

    for path in paths:
        out(f"Dumping {path}")
        if not path.endswith(LOG_SUFFIXES):
            err(f"Ignoring unknown file {path}")
            continue
        if not os.path.isfile(path):
            raise PlogCliError(f"no such file: {path}")
        try:
            dump_log(path, options, out, err)
        except FormatError as e:
            raise PlogCliError(f"{path}: {e}") from e
    sys.stdout.flush()
