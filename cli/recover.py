"""``plog recover``: Kafka's start-up recovery, run offline, planned first if asked."""

from __future__ import annotations

import json
import os
import sys
from typing import Optional

import typer

from .exit_codes import ExitCode
from .main import app
from .maintain import PATH_HELP, ReportFormat, resolve_path


@app.command(
    epilog=(
        "Examples:\n\n"
        "  plog recover --dry-run /var/lib/kafka/data\n\n"
        "  plog recover --salvage --format json /var/lib/kafka/data/orders-3\n\n"
        "What a broker does at start-up after an unclean shutdown, without starting one (stop the broker "
        "first: the directory's .lock is taken): finish or roll back interrupted compaction and splits "
        "(.swap/.cleaned/.deleted), revalidate every segment from the one holding the recovery point (every "
        "segment with --all), rebuild the indexes and producer snapshots, truncate a torn or corrupt tail "
        "(and, as Kafka, delete the segments after it), write the checkpoints and the clean-shutdown "
        "marker so the broker starts without recovering again. --salvage keeps the valid batches after "
        "damage in the middle of a log: the damaged bytes go to a quarantine-<segment>-<position>.bin "
        "file in the partition folder (Kafka ignores it) and the offsets of what follows are kept.\n\n"
        "Exit status: 0 success (or --dry-run with nothing to do), 1 error, 2 usage error, "
        "3 --dry-run found work to do, 130 interrupted."
    )
)
def recover(
    path: Optional[str] = typer.Argument(None, metavar="PATH", help=PATH_HELP),
    dry_run: bool = typer.Option(False, "--dry-run", "-n",
                                 help="Change nothing; print the plan (exit 3 when there is work to do)."),
    all_segments: bool = typer.Option(False, "--all", help="Revalidate every segment, not only those from the "
                                                           "recovery point on."),
    salvage: bool = typer.Option(False, "--salvage", help="Quarantine damaged bytes in the middle of a segment "
                                                          "and keep the valid batches after them."),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", min=1,
                                       help="Recover partitions in this many processes (default: the cores)."),
    fmt: ReportFormat = typer.Option(ReportFormat.text, "--format", "-f", case_sensitive=False,
                                     help="text or json (the whole plan or report)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No summary on stderr, no progress bar."),
) -> None:
    """Recover Kafka log directories after a crash, as a broker does at start-up."""
    from plog.engine import recovery

    from .progress import byte_progress

    target = resolve_path(path)
    if dry_run:
        plan = recovery.plan_recovery(target, all_segments=all_segments, salvage=salvage)
        _print(plan, fmt)
        if not quiet:
            sys.stderr.write(f"plog recover: {_summary(plan, dry_run=True)}\n")
        if plan.has_work:
            sys.exit(int(ExitCode.PROBLEMS_FOUND))
        return
    progress, finish = byte_progress("recover", _size_of(target), quiet)
    try:
        report = recovery.recover(target, all_segments=all_segments, salvage=salvage, jobs=jobs, progress=progress)
    finally:
        finish()
    _print(report, fmt)
    if not quiet:
        sys.stderr.write(f"plog recover: {_summary(report, dry_run=False)}\n")


def _print(obj, fmt: ReportFormat) -> None:
    if fmt is ReportFormat.json:
        sys.stdout.write(json.dumps(obj.to_dict(), indent=2, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write("".join(line + "\n" for line in obj.explain_lines()))
    sys.stdout.flush()


def _summary(obj, *, dry_run: bool) -> str:
    return obj.summary() if hasattr(obj, "summary") else ("work to do" if dry_run and obj.has_work else "done")


def _size_of(path: str) -> int | None:
    try:
        from plog.engine.discovery import partitions

        return sum(os.path.getsize(s.log) for p in partitions(path) for s in p.segments if s.log)
    except (OSError, ValueError):
        return None
