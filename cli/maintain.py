"""``plog retention``, ``plog compact`` and ``plog maintain``: Kafka's delete policy and log
cleaner, run offline on a stopped broker's log directory or on plog's data directory."""

from __future__ import annotations

import os
import sys
from typing import List, Optional

import typer

from .common import DEFAULT_DATA_DIR
from .common import quiet_option as _quiet_option
from .output import ReportFormat, emit_document, report_format_option
from .errors import PlogCliError
from .app import app

DATA_DIR_ENV = "PLOG_DATA_DIR"


PATH_HELP = ("A segment file, partition folder, Kafka log directory or data directory "
             f"(default: ${DATA_DIR_ENV} or ./{DEFAULT_DATA_DIR}).")
CONFIG_SOURCES = (
    "Topic configs come, later winning, from Kafka's defaults, --server-properties, the dynamic broker "
    "configs and topic configs in the KRaft metadata log (__cluster_metadata-0) of a Kafka log directory or "
    "plog's own topic configs, then the flags."
)


def resolve_path(path: Optional[str]) -> str:
    if path:
        return path
    default = os.environ.get(DATA_DIR_ENV) or DEFAULT_DATA_DIR
    if not os.path.exists(default):
        raise PlogCliError(f"no PATH given and no data directory at {default} (set ${DATA_DIR_ENV} or pass PATH)")
    return default


def _options(*, dry_run, now, overrides, server_properties, topics, delete_delay_ms, buffer_size=None,
             force=False):
    from plog.engine.maintenance.runner import DEFAULT_BUFFER_SIZE, MaintenanceOptions
    from plog.engine.errors import InvalidOffsetSpecError
    from plog.engine.offset_spec import parse_offset

    now_ms = None
    if now:
        try:
            spec = parse_offset(now if now.startswith("@") else "@" + now)
        except InvalidOffsetSpecError:
            spec = None
        if spec is None or spec.kind != "timestamp":
            raise typer.BadParameter(f"expected ms since the epoch, an ISO-8601 time or @-<duration>, got {now!r}",
                                     param_hint="--now")
        now_ms = spec.value
    if server_properties and not os.path.isfile(server_properties):
        raise PlogCliError(f"--server-properties: no such file: {server_properties}")
    return MaintenanceOptions(dry_run=dry_run, now_ms=now_ms, overrides={k: str(v) for k, v in overrides.items()
                                                                          if v is not None},
                              server_properties=server_properties, topics=tuple(topics) if topics else None,
                              file_delete_delay_ms=delete_delay_ms, buffer_size=buffer_size or DEFAULT_BUFFER_SIZE,
                              force=force)


def _run(operation, path, options, fmt: ReportFormat, explain: bool, quiet: bool):
    from plog.engine.maintenance import runner as maintenance

    from .progress import progress

    runner = {"retention": maintenance.run_retention, "compact": maintenance.run_compaction,
              "maintain": maintenance.run_maintenance}[operation]
    # The cleaner reads the dirty section twice (offset map, then the copy) and retention
    # reads nothing: the bar shows bytes done and speed, without a total to overshoot.
    with progress(operation, quiet=quiet or options.dry_run, unknown_total=True) as bar:
        report = runner(resolve_path(path), options, bar.callback)
    if fmt is not ReportFormat.text:
        emit_document(report.to_dict(), fmt)
    else:
        sys.stdout.write("".join(line + "\n" for line in render_text(report, explain=explain, verbose=explain)))
    sys.stdout.flush()
    if not quiet:
        done = sum(1 for p in report.partitions if p.has_work)
        verb = "would change" if report.dry_run else "changed"
        sys.stderr.write(f"plog {operation}: {len(report.partitions)} partition operation"
                         f"{'s' * (len(report.partitions) != 1)}, {done} {verb}\n")
    return report


def render_text(report, *, explain: bool, verbose: bool = False) -> list[str]:
    """One block per partition operation: a headline, then (explain) the reasons."""
    lines: list[str] = []
    for d in report.log_dirs:
        if d.clean_shutdown is False:
            lines.append(f"{d.path}: not shut down cleanly; "
                         + ("a real run recovers it first" if report.dry_run else
                            f"recovered {d.recovered_partitions} partition(s) first"))
        for name in d.swept_files:
            lines.append(f"{d.path}: removed {name} (file.delete.delay.ms passed)")
    for p in report.partitions:
        head = f"{p.partition} [{p.operation}]"
        if p.skipped:
            lines.append(f"{head}: skipped: {p.skipped}")
            continue
        lines.append(f"{head}: {_headline(p, report.dry_run)}")
        if explain:
            if verbose:
                lines.extend(f"  config {k}={v}" for k, v in p.configs.items())
            lines.extend(f"  {line}" for line in p.explanation)
    return lines


def _headline(p, dry_run: bool) -> str:
    if p.summary:
        return p.summary
    return "would change the log" if dry_run and p.has_work else ("changed" if p.has_work else "nothing to do")


def _overrides(**flags) -> dict:
    return {name: value for name, value in flags.items() if value is not None}


NOW_HELP = "Evaluate as of this time (ms since the epoch, ISO-8601, or @-7d); default now."
TOPIC_HELP = "Only these topics (repeatable)."
SERVER_PROPS_HELP = "A broker server.properties whose log.* settings are the defaults (log.retention.hours, ...)."


def _delete_delay_option():
    return typer.Option(None, "--delete-delay-ms", min=0, help="Override file.delete.delay.ms (0: remove at once).")


def _server_properties_option():
    return typer.Option(None, "--server-properties", help=SERVER_PROPS_HELP)


def _topics_option():
    return typer.Option(None, "--topic", "-t", help=TOPIC_HELP)


def _now_option():
    return typer.Option(None, "--now", help=NOW_HELP)


def format_option():
    return report_format_option()


def quiet_option():
    return _quiet_option("No summary on stderr, no progress bar.")


@app.command(
    epilog=(
        "Examples:\n\n"
        "  plog retention --dry-run --explain /var/lib/kafka/data\n\n"
        "  plog retention --retention-ms 86400000 /var/lib/kafka/data/orders-0\n\n"
        "Kafka's rules: segments are considered oldest first and the walk stops at the first segment "
        "that must stay; a segment goes when its newest timestamp is older than retention.ms, when the "
        "partition is over retention.bytes by at least its size, or when it lies wholly below the log start "
        "offset (whichever comes first); never beyond the high watermark; deleted files are renamed *.deleted "
        "and removed once file.delete.delay.ms has passed or when the log is next opened for writing (as a "
        "broker does at start-up); --delete-delay-ms 0 removes them at once. "
        + CONFIG_SOURCES + "\n\nExit status: 0 success, 1 error, 2 usage error, 130 interrupted, 143 terminated."
    )
)
def retention(
    path: Optional[str] = typer.Argument(None, metavar="PATH", help=PATH_HELP),
    dry_run: bool = typer.Option(False, "--dry-run", "-n", help="Change nothing; print what would be deleted."),
    explain: bool = typer.Option(False, "--explain", help="Say for every segment why it is or is not deletable."),
    retention_ms: Optional[int] = typer.Option(None, "--retention-ms", min=-1, help="Override retention.ms."),
    retention_bytes: Optional[int] = typer.Option(None, "--retention-bytes", min=-1,
                                                  help="Override retention.bytes (per partition)."),
    delete_delay_ms: Optional[int] = _delete_delay_option(),
    server_properties: Optional[str] = _server_properties_option(),
    topics: Optional[List[str]] = _topics_option(),
    now: Optional[str] = _now_option(),
    fmt: ReportFormat = format_option(),
    quiet: bool = quiet_option(),
) -> None:
    """Apply Kafka's delete policy: retention.ms, retention.bytes and the log start offset."""
    options = _options(dry_run=dry_run, now=now,
                       overrides=_overrides(**{"retention.ms": retention_ms, "retention.bytes": retention_bytes}),
                       server_properties=server_properties, topics=topics, delete_delay_ms=delete_delay_ms)
    _run("retention", path, options, fmt, explain, quiet)


@app.command(
    epilog=(
        "Examples:\n\n"
        "  plog compact --dry-run --explain /var/lib/kafka/data/users-0\n\n"
        "  plog compact --buffer-size 64MiB plog-data\n\n"
        "Kafka's log cleaner: the dirty section [cleaner checkpoint, first uncleanable offset) is compacted "
        "when its ratio exceeds min.cleanable.dirty.ratio (or max.compaction.lag.ms forces it, or --force); the "
        "latest record of each key stays, tombstones stay until delete.retention.ms past their delete horizon, "
        "aborted transactions go, markers stay until safe. Files are replaced through .cleaned/.swap, so a "
        "crash at any moment leaves a log that recovery completes. " + CONFIG_SOURCES
        + "\n\nExit status: 0 success, 1 error, 2 usage error, 130 interrupted, 143 terminated."
    )
)
def compact(
    path: Optional[str] = typer.Argument(None, metavar="PATH", help=PATH_HELP),
    dry_run: bool = typer.Option(False, "--dry-run", "-n", help="Change nothing; print what the cleaner would do."),
    explain: bool = typer.Option(False, "--explain", help="Dirty ratio, first uncleanable offset, what would go."),
    buffer_size: str = typer.Option("128MiB", "--buffer-size",
                                    help="Offset map memory (log.cleaner.dedupe.buffer.size); several passes "
                                         "when the dirty section has more keys than fit."),
    force: bool = typer.Option(False, "--force", help="Clean even when the dirty ratio is under "
                                                      "min.cleanable.dirty.ratio."),
    min_cleanable_dirty_ratio: Optional[float] = typer.Option(None, "--min-cleanable-dirty-ratio", min=0, max=1,
                                                              help="Override min.cleanable.dirty.ratio."),
    delete_retention_ms: Optional[int] = typer.Option(None, "--delete-retention-ms", min=0,
                                                      help="Override delete.retention.ms."),
    delete_delay_ms: Optional[int] = _delete_delay_option(),
    server_properties: Optional[str] = _server_properties_option(),
    topics: Optional[List[str]] = _topics_option(),
    now: Optional[str] = _now_option(),
    fmt: ReportFormat = format_option(),
    quiet: bool = quiet_option(),
) -> None:
    """Compact logs with Kafka's log cleaner (cleanup.policy=compact)."""
    options = _options(dry_run=dry_run, now=now,
                       overrides=_overrides(**{"min.cleanable.dirty.ratio": min_cleanable_dirty_ratio,
                                               "delete.retention.ms": delete_retention_ms}),
                       server_properties=server_properties, topics=topics, delete_delay_ms=delete_delay_ms,
                       buffer_size=parse_size(buffer_size, "--buffer-size"), force=force)
    _run("compact", path, options, fmt, explain, quiet)


@app.command(
    epilog=(
        "Example: plog maintain -d plog-data\n\n"
        "One maintenance cycle as a broker runs it: the cleaner on compacted topics, then retention on every "
        "topic, then removal of *.deleted files whose file.delete.delay.ms has passed. The embedded engine "
        "runs the same cycle by itself after writes once log.retention.check.interval.ms has passed.\n\n"
        "Exit status: 0 success, 1 error, 2 usage error, 130 interrupted, 143 terminated."
    )
)
def maintain(
    path: Optional[str] = typer.Argument(None, metavar="PATH", help=PATH_HELP),
    data_dir: Optional[str] = typer.Option(None, "--data-dir", "-d", envvar=DATA_DIR_ENV, show_default=False,
                                           help=f"The data directory when PATH is not given (default ./{DEFAULT_DATA_DIR})."),
    dry_run: bool = typer.Option(False, "--dry-run", "-n", help="Change nothing; print the plans."),
    explain: bool = typer.Option(False, "--explain", help="Explain every decision."),
    buffer_size: str = typer.Option("128MiB", "--buffer-size", help="The cleaner's offset map memory."),
    topics: Optional[List[str]] = _topics_option(),
    now: Optional[str] = _now_option(),
    fmt: ReportFormat = format_option(),
    quiet: bool = quiet_option(),
) -> None:
    """Run retention and compaction once for a data directory (or any PATH)."""
    options = _options(dry_run=dry_run, now=now, overrides={}, server_properties=None, topics=topics,
                       delete_delay_ms=None, buffer_size=parse_size(buffer_size, "--buffer-size"))
    _run("maintain", path or data_dir, options, fmt, explain, quiet)


_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1024, "m": 1000 ** 2, "mb": 1000 ** 2, "mib": 1024 ** 2,
          "g": 1000 ** 3, "gb": 1000 ** 3, "gib": 1024 ** 3,
          "t": 1000 ** 4, "tb": 1000 ** 4, "tib": 1024 ** 4}


def parse_size(text: str, param: str) -> int:
    """``134217728``, ``128MiB``, ``64mb``, ``1GiB``."""
    raw = text.strip().lower().replace(" ", "")
    digits = raw.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = raw[len(digits):]
    try:
        value = float(digits)
    except ValueError:
        value = -1
    if value <= 0 or unit not in _UNITS:
        raise typer.BadParameter(f"expected a size such as 134217728, 128MiB or 1GiB, got {text!r}", param_hint=param)
    return int(value * _UNITS[unit])
