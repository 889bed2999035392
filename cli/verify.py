"""``plog verify``: check segments, partitions, log directories and data directories like a linter."""

from __future__ import annotations

import json
import os
import sys
from typing import List, Optional

import typer

from .common import quiet_option

from .errors import PlogCliError
from .exit_codes import ExitCode
from .app import app
from .output import ReportFormat, emit_document
from .progress import byte_progress


# text, json (one document: findings and counts) or jsonl (one object per finding, streamed).
VerifyFormat = ReportFormat


@app.command(
    epilog=(
        "Example: plog verify --jobs 4 /var/lib/kafka/data\n\n"
        "Text output is one line per finding, path:position: severity[check]: message (position is a byte "
        "position in that file); jsonl is one object per finding with severity, check, path, position, offset "
        "and message; json is one document, {\"findings\": [...], \"summary\": {...}}. A summary goes to stderr. Warnings are conditions a broker handles by itself (a missing "
        "index, an untrimmed preallocated index, no clean-shutdown marker, ...).\n\n"
        "Exit status: 0 no problems (warnings allowed unless --strict), 1 error (cannot run: bad path, I/O "
        "error), 2 usage error, 3 problems found."
    )
)
def verify(
    paths: List[str] = typer.Argument(..., metavar="PATH...",
                                      help="Segment files, partition folders, log directories or data directories."),
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
) -> None:
    """Check Kafka log files without modifying them: batch CRCs and framing, offsets,
    .index/.timeindex/.txnindex against the log, producer snapshots, checkpoints,
    partition.metadata. Keeps going past damage, resynchronising on the next valid batch."""
    from plog.engine.discovery import NotAKafkaPathError
    from plog.engine.verify import VerifyOptions, VerifyStats, default_jobs, plan, planned_bytes, verify_paths

    options = VerifyOptions(max_findings_per_check=max_findings)
    try:
        tasks = plan(paths, options)
    except NotAKafkaPathError as e:
        raise PlogCliError(str(e)) from e
    stats = VerifyStats()
    collected: list[dict] = []
    write = collected.append if fmt is ReportFormat.json else _writer(fmt)
    progress, finish = byte_progress("verify", planned_bytes(tasks), quiet)
    try:
        for finding in verify_paths(paths, options, jobs=jobs or default_jobs(), stats=stats, progress=progress,
                                    tasks=tasks):
            write(_finding_json(finding) if fmt is ReportFormat.json else finding)
    finally:
        finish()
    if fmt is ReportFormat.json:
        import dataclasses

        emit_document({"findings": collected, "summary": dataclasses.asdict(stats)}, fmt)
    sys.stdout.flush()
    problems = stats.errors + (stats.warnings if strict else 0)
    if not quiet:
        note = " (--strict: warnings count)" if strict and stats.warnings else ""
        sys.stderr.write(
            f"plog verify: checked {stats.files} files ({stats.bytes} bytes, {stats.batches} batches) in "
            f"{stats.partitions} partition{'s' * (stats.partitions != 1)}: {stats.errors} "
            f"error{'s' * (stats.errors != 1)}, "
            f"{stats.warnings} warning{'s' * (stats.warnings != 1)}{note}\n")
    if problems:
        # SystemExit, not typer.Exit: cli.app.main runs the app with standalone_mode=False, where
        # Typer turns typer.Exit into a return value that main() does not pass on.
        sys.exit(int(ExitCode.PROBLEMS_FOUND))


def _finding_json(f) -> dict:
    from plog.engine.binary_json import encode_bytes

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
