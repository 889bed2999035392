"""``plog ls``: a Kafka log directory (or a data directory of them) at a glance."""

from __future__ import annotations

import sys
from typing import Optional

import typer

from .common import DEFAULT_DATA_DIR, quiet_option
from .output import ListFormat, emit, emit_document, list_format_option, use_color

from .errors import PlogCliError
from .app import app


@app.command(
    "ls",
    epilog=(
        "Example: plog ls /var/lib/kafka --segments\n\n"
        "PATH may be a data directory (several log dirs), a log directory, a partition folder or a "
        "segment file; without PATH, the data directory ($PLOG_DATA_DIR or ./plog-data) is listed. Only batch "
        "headers are read; --quick reads only each segment's first batch and the last segment's tail (no "
        "batch/record counts, sampled codecs). Nothing is locked or modified.\n\n"
        "Exit status: 0 success, 1 error (unreadable path, not a Kafka directory), 2 usage error."
    ),
)
def ls(
    path: Optional[str] = typer.Argument(None, metavar="PATH",
                                         help="Data directory, log directory, partition folder or segment file "
                                              "(default: the data directory)."),
    data_dir: Optional[str] = typer.Option(None, "--data-dir", "-d", envvar="PLOG_DATA_DIR", show_default=False,
                                           help=f"The data directory to list when no PATH is given "
                                                f"(default ./{DEFAULT_DATA_DIR})."),
    fmt: ListFormat = list_format_option(),
    segments: bool = typer.Option(False, "--segments", "-s", help="Also list every segment."),
    quick: bool = typer.Option(False, "--quick", help="Skip the header walk of all but the last segment."),
    topic: Optional[str] = typer.Option(None, "--topic", help="Only this topic's partitions."),
    quiet: bool = quiet_option("No progress on stderr."),
) -> None:
    """List the topics, partitions and segments of Kafka log directories: offsets, sizes,
    time ranges, codecs, checkpoints, and whether the broker shut down cleanly."""
    from plog.engine.inspect.inventory import inventory

    from .maintain import resolve_path
    from .progress import progress

    # As recover and verify: no PATH is the data directory (--data-dir, $PLOG_DATA_DIR, ./plog-data).
    path = path or data_dir or resolve_path(None)
    # A spinner naming the partition being read. Engine errors are printed by cli/boundary.py.
    with progress("reading…", quiet=quiet, spinner=True) as bar:
        dirs = inventory(path, quick=quick, topic=topic,
                         progress=(lambda partition: bar.describe(f"reading {partition}")) if bar else None)
    if topic is not None and not any(d.partitions for d in dirs):
        # kcat's "Unknown topic": a mistyped name is not an empty topic.
        raise PlogCliError(f"no partition of topic {topic!r} in {path}")
    if fmt is ListFormat.json:
        # The whole picture: log dirs (shutdown state, checkpoints) holding their partitions.
        emit_document(to_json(dirs, segments), fmt)
    elif fmt is ListFormat.table:
        render_table(dirs, segments)
    else:
        emit(flat_rows(dirs, segments), fmt, SEGMENT_COLUMNS if segments else PARTITION_COLUMNS)
    sys.stdout.flush()


# -- helpers -----------------------------------------------------------------------------


def human_bytes(n: int | None) -> str:
    from plog.engine.maintenance.retention import format_bytes

    return "" if n is None else format_bytes(n)


def _opt(value) -> str:
    return "" if value is None else str(value)


def _codecs(counts: dict, sampled: bool = False) -> str:
    text = ",".join(sorted(counts))
    return f"{text}*" if sampled and text else text


def _time_range(lo: int | None, hi: int | None) -> str:
    from .lookup import iso

    if lo is None and hi is None:
        return ""
    return f"{iso(lo) or '?'} .. {iso(hi) or '?'}"


def _shutdown_text(d) -> str:
    if d.shutdown == "running":
        return f"running: .lock held by pid {d.lock_holder_pid}"
    if d.shutdown == "clean":
        epoch = d.clean_shutdown_broker_epoch
        return "clean (.kafka_cleanshutdown" + (f", broker epoch {epoch})" if epoch is not None else ")")
    text = "not clean: no .kafka_cleanshutdown (a crash, or a copy of a running broker; Kafka recovers from the recovery point)"
    if not d.lock_checked:
        text += "; lock state unknown"
    return text


# -- json --------------------------------------------------------------------------------


def to_json(dirs, segments: bool = False) -> list[dict]:
    import dataclasses

    out = []
    for d in dirs:
        data = dataclasses.asdict(d)
        data["shutdown"] = d.shutdown
        data["topics"] = d.topics
        data["size_bytes"] = d.size_bytes
        data["segment_count"] = d.segment_count
        for p in data["partitions"]:
            p["magics"] = {str(k): v for k, v in p["magics"].items()}
            if not segments:
                del p["segments"]
            else:
                for s in p["segments"]:
                    s["magics"] = {str(k): v for k, v in s["magics"].items()}
        out.append(data)
    return out


# -- csv ---------------------------------------------------------------------------------

PARTITION_COLUMNS = ["log_dir", "partition", "topic", "partition_id", "kind", "segments", "size_bytes",
                     "log_start_offset", "log_end_offset", "high_watermark", "recovery_point", "batches", "records",
                     "min_timestamp", "max_timestamp", "codecs", "leader_epoch", "topic_id", "problems"]
SEGMENT_COLUMNS = ["log_dir", "partition", "base_offset", "size_bytes", "batches", "records", "first_offset",
                   "next_offset", "min_timestamp", "max_timestamp", "codecs", "index_entries", "timeindex_entries"]


def flat_rows(dirs, segments: bool) -> list[dict]:
    """One row per partition, or with ``segments`` one row per segment; the keys are
    PARTITION_COLUMNS / SEGMENT_COLUMNS, None where a value is unknown (--quick)."""
    rows = []
    for d in dirs:
        for p in d.partitions:
            if segments:
                rows.extend({"log_dir": d.path, "partition": p.name, "base_offset": s.base_offset,
                             "size_bytes": s.size_bytes, "batches": s.batches, "records": s.records,
                             "first_offset": s.first_offset, "next_offset": s.next_offset,
                             "min_timestamp": s.min_timestamp, "max_timestamp": s.max_timestamp,
                             "codecs": _codecs(s.codecs), "index_entries": s.index_entries,
                             "timeindex_entries": s.timeindex_entries} for s in p.segments)
                continue
            rows.append({"log_dir": d.path, "partition": p.name, "topic": p.topic, "partition_id": p.partition,
                         "kind": p.kind, "segments": p.segment_count, "size_bytes": p.size_bytes,
                         "log_start_offset": p.log_start_offset, "log_end_offset": p.log_end_offset,
                         "high_watermark": p.high_watermark, "recovery_point": p.recovery_point,
                         "batches": p.batches, "records": p.records, "min_timestamp": p.min_timestamp,
                         "max_timestamp": p.max_timestamp, "codecs": _codecs(p.codecs, p.codecs_sampled),
                         "leader_epoch": p.leader_epoch, "topic_id": p.topic_id,
                         "problems": " | ".join(p.problems)})
    return rows


# -- table -------------------------------------------------------------------------------


def render_table(dirs, segments: bool, console=None) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    if console is None and not use_color(sys.stdout):
        # A pipe, a file or NO_COLOR: render at any width (never truncate a cell), without
        # styles, and drop Rich's cell padding at line ends so the text diffs and greps cleanly.
        import io

        buf = io.StringIO()
        render_table(dirs, segments, Console(file=buf, width=10_000, soft_wrap=False, highlight=False,
                                             color_system=None, no_color=True, emoji=False))
        sys.stdout.write("".join(line.rstrip() + "\n" for line in buf.getvalue().splitlines()))
        return
    if console is None:
        console = Console(soft_wrap=False, highlight=False)
    for n, d in enumerate(dirs):
        if n:
            console.print()
        _print_log_dir(console, d)
        if not d.partitions:
            continue
        table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
        for col, just in (("Partition", "left"), ("Kind", "left"), ("Segs", "right"), ("Size", "right"),
                          ("Log start", "right"), ("Log end", "right"), ("HW", "right"), ("Recovery", "right"),
                          ("Records", "right"), ("Time range (UTC)", "left"), ("Codecs", "left"),
                          ("Epoch", "right"), ("Topic id", "left")):
            table.add_column(col, justify=just, no_wrap=True)
        for p in d.partitions:
            lo = p.min_timestamp if p.min_timestamp is not None else p.first_timestamp
            table.add_row(p.name, p.kind, str(p.segment_count), human_bytes(p.size_bytes), _opt(p.log_start_offset),
                          _opt(p.log_end_offset), _opt(p.high_watermark), _opt(p.recovery_point), _opt(p.records),
                          _time_range(lo, p.max_timestamp), _codecs(p.codecs, p.codecs_sampled),
                          _opt(p.leader_epoch), _opt(p.topic_id))
        console.print(table)
        if any(p.codecs_sampled for p in d.partitions):
            console.print(Text("  * sampled (--quick): first batch of each segment and the last segment's tail"))
        for p in d.partitions:
            for problem in p.problems:
                console.print(Text(f"  {p.name}: {problem}", style="yellow"))
        if segments:
            for p in d.partitions:
                if p.segments:
                    console.print()
                    console.print(_segments_table(p))


def _print_log_dir(console, d) -> None:
    """A log directory's header lines: identity, shutdown state, checkpoints, contents."""
    from rich.text import Text

    console.print(Text(f"Log dir {d.path}" + (" (selected partitions)" if d.partial else ""), style="bold"))
    if d.meta:
        m = d.meta
        ident = f"node.id {m['node_id']}" if m["version"] else f"broker.id {m['node_id']}"
        bits = [f"version {m['version']}", f"cluster.id {m['cluster_id'] or '-'}", ident]
        if m.get("directory_id"):
            bits.append(f"directory.id {m['directory_id']}")
        console.print(Text("  meta.properties  " + ", ".join(bits)))
    else:
        console.print(Text("  meta.properties  none"))
    console.print(Text("  shutdown         " + _shutdown_text(d)))
    console.print(Text("  checkpoints      " + (", ".join(d.checkpoint_files) or "none")
                       + (", bootstrap.checkpoint" if d.bootstrap_checkpoint else "")))
    topics = d.topics
    console.print(Text(f"  contents         {len(d.partitions)} partition(s) of {len(topics)} topic(s), "
                       f"{d.segment_count} segment(s), {human_bytes(d.size_bytes)}"))
    for problem in d.problems:
        console.print(Text(f"  problem          {problem}", style="yellow"))


def _segments_table(p):
    """The table of one partition's segments (--segments)."""
    from rich.table import Table

    st = Table(title=f"{p.name} segments", title_justify="left", box=None, pad_edge=False,
               show_edge=False, header_style="bold")
    for col, just in (("Base offset", "right"), ("Size", "right"), ("Batches", "right"),
                      ("Records", "right"), ("Offsets", "left"), ("Time range (UTC)", "left"),
                      ("Codecs", "left"), ("Index", "right"), ("Time idx", "right")):
        st.add_column(col, justify=just, no_wrap=True)
    for s in p.segments:
        if s.first_offset is not None and s.last_offset is not None:
            offsets = f"{s.first_offset}..{s.last_offset}"
        elif s.first_offset is not None:
            offsets = f"{s.first_offset}.."
        else:
            offsets = "empty" if s.next_offset == s.base_offset else ""
        lo = s.min_timestamp if s.min_timestamp is not None else s.first_timestamp
        st.add_row(str(s.base_offset), human_bytes(s.size_bytes), _opt(s.batches), _opt(s.records),
                   offsets, _time_range(lo, s.max_timestamp), _codecs(s.codecs),
                   "missing" if s.index_entries is None else str(s.index_entries),
                   "missing" if s.timeindex_entries is None else str(s.timeindex_entries))
    return st
