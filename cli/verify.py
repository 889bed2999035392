"""``plog verify``: check segments, partitions, log directories and data directories like a linter."""

from __future__ import annotations

import json
import os
import sys
from typing import List, Optional

import typer

from .common import DEFAULT_DATA_DIR, quiet_option

from .exit_codes import Outcome
from .app import app
from .output import ReportFormat, emit_document
from .progress import progress


# text, json (one document: findings and counts) or jsonl (one object per finding, streamed).
VerifyFormat = ReportFormat
DATA_DIR_ENV = "PLOG_DATA_DIR"  # as recover, retention, compact and maintain (cli/maintain.py)


@app.command(
    epilog=(
        "Example: plog verify --jobs 4 /var/lib/kafka/data\n\n"
        "Text output is one line per finding, path:position: severity[check]: message (position is a byte "
        "position in that file); jsonl is one object per finding with severity, check, path, position, offset "
        "and message; json is one document, {\"findings\": [...], \"summary\": {...}}. A summary goes to stderr. "
        "Warnings are conditions a broker handles by itself (a missing index, an untrimmed preallocated index, "
        "no clean-shutdown marker, ...). A damaged batch or index says what a broker's start-up does about it: "
        "it recovers the segments from the recovery point on after an unclean shutdown, and trusts the others "
        "(plog recover --all --salvage repairs those). Without PATH, the data directory ($PLOG_DATA_DIR or "
        "./plog-data) is verified; a PATH that cannot be verified is reported and the others still are.\n\n"
        "Exit status: 0 no problems (warnings allowed unless --strict), 1 error (a PATH could not be verified: "
        "missing, not Kafka data, I/O error), 2 usage error, 3 problems found."
    )
)
def verify(
    paths: Optional[List[str]] = typer.Argument(None, metavar="PATH...",
                                                help="Segment files, partition folders, log directories or data "
                                                     "directories (default: the data directory)."),
    data_dir: Optional[str] = typer.Option(None, "--data-dir", "-d", envvar=DATA_DIR_ENV, show_default=False,
                                           help=f"The data directory to verify when no PATH is given "
                                                f"(default ./{DEFAULT_DATA_DIR})."),
    fmt: ReportFormat = typer.Option(ReportFormat.text, "--format", "-f", case_sensitive=False,
                                     help="text (path:position: severity[check]: message), json (one "
                                          "document) or jsonl (one object per finding)."),
    strict: bool = typer.Option(False, "--strict", help="Count warnings as problems (exit 3)."),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", min=1,
                                       help="Verify partitions in this many processes (default: the number of cores)."),
    max_findings: int = typer.Option(100, "--max-findings", min=0,
                                     help="Show at most this many findings of one check per file (0: all); "
                                          "the rest are counted in the summary."),
    quiet: bool = quiet_option("No summary line and no progress bar."),
) -> Outcome:
    """Check Kafka log files without modifying them: batch CRCs and framing, offsets,
    .index/.timeindex/.txnindex against the log, producer snapshots, checkpoints,
    partition.metadata. Keeps going past damage, resynchronising on the next valid batch."""
    from plog.engine.inspect.verify import VerifyOptions, VerifyStats, default_jobs, plan, planned_bytes, verify_paths

    from .app import one_line
    from .maintain import resolve_path

    paths = list(paths) if paths else [data_dir or resolve_path(None)]
    options = VerifyOptions(max_findings_per_check=max_findings)
    # A path that cannot be verified is one error line; the others are still verified.
    bad: list = []
    tasks = plan(paths, options, errors=bad)
    for path, e in bad:
        sys.stderr.write(f"plog: error: {one_line(e)}\n")
    if bad and not tasks:
        return Outcome.INCOMPLETE
    stats = VerifyStats()
    collected: list[dict] = []
    write = collected.append if fmt is ReportFormat.json else _writer(fmt)
    with progress("verify", total=planned_bytes(tasks), quiet=quiet) as bar:
        for finding in verify_paths(paths, options, jobs=jobs or default_jobs(), stats=stats, progress=bar.callback,
                                    tasks=tasks):
            write(_finding_json(finding) if fmt is ReportFormat.json else finding)
    if fmt is ReportFormat.json:
        import dataclasses

        emit_document({"findings": collected, "summary": dataclasses.asdict(stats)}, fmt)
    sys.stdout.flush()
    problems = stats.errors + (stats.warnings if strict else 0)
    if not quiet:
        note = " (--strict: warnings count)" if strict and stats.warnings else ""
        failed = (f"; {len(bad)} path{'s' * (len(bad) != 1)} could not be verified" if bad else "")
        sys.stderr.write(f"plog verify: {summary(stats)}{note}{failed}\n")
    if bad:
        return Outcome.INCOMPLETE  # the command could not do all its work, whatever the others found
    return Outcome.PROBLEMS_FOUND if problems else Outcome.OK


def _plural(n: int, word: str, words: str | None = None) -> str:
    return f"{n} {word if n == 1 else words or word + 's'}"


def summary(stats) -> str:
    """``checked 3 files (… bytes, … batches) in 2 partitions: 0 errors, 1 warning``; a
    lone segment, snapshot or checkpoint file is counted as what it is, not as partitions."""
    where = (f" in {_plural(stats.partitions, 'partition')}" if stats.partitions else
             f" of {_plural(stats.segments, 'segment')}" if stats.segments else "")
    return (f"checked {_plural(stats.files, 'file')} ({_plural(stats.bytes, 'byte')}, "
            f"{_plural(stats.batches, 'batch', 'batches')}){where}: "
            f"{_plural(stats.errors, 'error')}, {_plural(stats.warnings, 'warning')}")


def _finding_json(f) -> dict:
    from plog.formats.binary_json import encode_bytes

    d = f.to_dict()
    # The path in the binary-safe form; a message naming an undecodable file name shows its
    # bytes as U+FFFD, so every document is valid UTF-8 JSON.
    d["path"] = encode_bytes(os.fsencode(f.path))
    d["message"] = f.message.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return d


def _writer(fmt: ReportFormat):
    """A function that prints one finding on stdout, flushed (findings stream)."""
    out = sys.stdout
    raw = getattr(out, "buffer", None)
    if fmt is ReportFormat.jsonl:
        def render(f) -> str:
            return json.dumps(_finding_json(f), ensure_ascii=False) + "\n"
    else:
        def render(f) -> str:
            return f.format_text() + "\n"

    def write(f) -> None:
        line = render(f)
        if raw is not None:
            out.flush()
            raw.write(line.encode("utf-8", "surrogateescape"))  # file names as their bytes
            raw.flush()
        else:
            out.write(line.encode("utf-8", "surrogateescape").decode("utf-8", "replace"))
            out.flush()

    return write
