"""``plog lookup``: which segment, index entry, position and batch hold an offset or timestamp."""

from __future__ import annotations

import sys
from typing import Optional

import typer

from .output import ReportFormat, emit_document, report_format_option
from .app import app


@app.command(
    epilog=(
        "Example: plog lookup /var/lib/kafka/orders-0 --offset 123456 --explain\n\n"
        "Offsets: N, +N (after the log start), -N (before the log end), earliest. Timestamps: <ms> or @<ms>, "
        "<ISO-8601> or @<ISO-8601> (UTC unless a zone is given: 2024-06-15T10:20:27Z), @-<duration> (@-15m), "
        "earliest (-2), latest (-1), max (-3): plog's one time language (as consume --offset @...).\n\n"
        "Exit status: 0 success (also when no record has the timestamp: the answer is then 'no offset'), "
        "1 error (unreadable path, an offset outside [log start, log end): 'offset N is out of range'), "
        "2 usage error."
    )
)
def lookup(
    path: str = typer.Argument(..., metavar="PATH", help="Partition folder, segment file, or log/data directory with --topic and --partition."),
    offset: Optional[str] = typer.Option(None, "--offset", "-o", help="Find the batch holding this offset."),
    timestamp: Optional[str] = typer.Option(None, "--timestamp", "-t",
                                            help="Find the first offset with a timestamp >= this (ListOffsets): "
                                                 "ms or ISO-8601, with or without @; @-15m; earliest, latest, max."),
    topic: Optional[str] = typer.Option(None, "--topic", help="Topic, when PATH is a log or data directory."),
    partition: Optional[int] = typer.Option(None, "--partition", "-p", help="Partition, when PATH is a log or data directory."),
    explain: bool = typer.Option(False, "--explain", help="Print each step: segment choice, index entries probed, batches read."),
    fmt: ReportFormat = report_format_option(),
) -> None:
    """Find where an offset or a timestamp lives in a Kafka partition, with Kafka's own
    algorithm: the segment, the index entry, the file position and the batch header."""
    if (offset is None) == (timestamp is None):
        raise typer.BadParameter("give exactly one of --offset and --timestamp", param_hint="'--offset' / '--timestamp'")
    from plog.engine.inspect import lookup as lk

    if timestamp is not None:
        ts = _timestamp(timestamp)
    elif not _valid_offset_spec(offset):
        raise typer.BadParameter(f"invalid offset {offset!r}: expected N, +N, -N, earliest or latest",
                                 param_hint="'--offset'")
    # Engine errors (not a Kafka path, an offset out of range) are printed by cli/boundary.py.
    view = lk.open_partition(path, topic, partition)
    result = lk.lookup_offset(view, offset) if timestamp is None else lk.lookup_timestamp(view, ts)
    out = sys.stdout
    if fmt is not ReportFormat.text:
        emit_document(to_json(result, offset if timestamp is None else timestamp), fmt)
    else:
        out.write("\n".join(render_text(result, explain)) + "\n")
    out.flush()


def _timestamp(text: str) -> int:
    """``--timestamp``, as ListOffsets takes it (engine.offset_spec.parse_list_offsets_timestamp)."""
    from plog.engine.errors import InvalidOffsetSpecError
    from plog.engine.offset_spec import parse_list_offsets_timestamp

    try:
        return parse_list_offsets_timestamp(text)
    except InvalidOffsetSpecError as e:
        raise typer.BadParameter(str(e), param_hint="'--timestamp'") from None


def _valid_offset_spec(spec: str) -> bool:
    """The shape of ``--offset`` (N, +N, -N, earliest, latest), checked before any file is
    opened; its range is the engine's to check (parse_lookup_offset), against the log."""
    import re

    return spec.strip() in ("earliest", "latest") or re.fullmatch(r"[+-]?\d+", spec.strip()) is not None


# -- rendering ---------------------------------------------------------------------------


def iso(ms: int | None) -> str:
    """``2024-06-15T10:20:27.442Z`` for a timestamp in ms (empty for none or negative)."""
    import datetime as dt

    if ms is None or ms < 0:
        return ""
    try:
        when = dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc)
    except (OverflowError, OSError, ValueError):
        return ""
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def _ts(ms: int | None) -> str:
    if ms is None:
        return "none"
    text = iso(ms)
    return f"{ms} ({text})" if text else str(ms)


def batch_line(b) -> str:
    """The batch header in DumpLogSegments' words."""
    count = b.records_count if b.records_count is not None else "?"
    return (f"baseOffset: {b.base_offset} lastOffset: {b.last_offset} count: {count} "
            f"baseSequence: {b.base_sequence} lastSequence: {b.last_sequence} producerId: {b.producer_id} "
            f"producerEpoch: {b.producer_epoch} partitionLeaderEpoch: {b.partition_leader_epoch} "
            f"isTransactional: {str(b.is_transactional).lower()} isControl: {str(b.is_control).lower()} "
            f"position: {b.position} {b.timestamp_type}: {b.max_timestamp} size: {b.size} magic: {b.magic} "
            f"compresscodec: {b.codec} crc: {b.crc} isvalid: {str(b.crc_valid).lower()}")


def _index_line(p, scan_start: int | None) -> str:
    import os

    if p is None:
        return "none"
    name = os.path.basename(p.path) if p.path else "(none)"
    if p.missing:
        return f"{name} missing → read from position 0" if p.kind == "offset" else f"{name} missing: no entry"
    if p.slot < 0:
        what = "offset" if p.kind == "offset" else "timestamp"
        tail = f" → read from position {scan_start}" if scan_start is not None else ""
        return f"{name}: no entry with {what} <= {p.target} ({p.entries} entries){tail}"
    if p.kind == "offset":
        return (f"{name}: slot {p.slot} of {p.entries} = offset {p.entry[0]} at position {p.entry[1]} "
                f"({len(p.probes)} entries probed)")
    return (f"{name}: slot {p.slot} of {p.entries} = timestamp {p.entry[0]}, offset {p.entry[1]} "
            f"({len(p.probes)} entries probed)")


def render_text(result, explain: bool = False) -> list[str]:
    from plog.engine.inspect.lookup import OffsetLookupResult

    lines = []
    if explain:
        lines.append("Steps:")
        for i, step in enumerate(result.steps, 1):
            lines.append(f"  {i}. {step.text}")
        lines.append("")
    name = f"{result.topic}-{result.partition}" if result.topic is not None else result.partition_path
    rows = [("partition", f"{name} ({result.partition_path})"),
            ("offsets", f"[{result.log_start_offset}, {result.log_end_offset})  log start .. log end")]
    if isinstance(result, OffsetLookupResult):
        rows += [("offset", str(result.target)),
                 ("segment", f"{result.segment_path} (base offset {result.segment_base_offset}, "
                             f"{result.segment_size} bytes)"),
                 ("offset index", _index_line(result.index, result.scan_start_position)),
                 ("scan", f"from position {result.scan_start_position}, {result.batches_scanned} batch(es) read"
                          + (f" (none in segment {result.floor_segment_base_offset}: continued into the next)"
                             if result.floor_segment_base_offset != result.segment_base_offset else "")),
                 ("batch", batch_line(result.batch))]
        if result.record_error:
            rows.append(("record", f"not decoded: {result.record_error}"))
        elif result.record_offset is None:
            rows.append(("record", "none at or after this offset"))
        elif result.exact:
            rows.append(("record", f"offset {result.record_offset}, timestamp {_ts(result.record_timestamp)}"))
        else:
            rows.append(("record", f"offset {result.target} has no record (compacted); next available offset "
                                   f"{result.record_offset}, timestamp {_ts(result.record_timestamp)}"))
    else:
        label = {"earliest": "earliest (-2)", "latest": "latest (-1)", "max-timestamp": "max timestamp (-3)"}
        rows.append(("timestamp", label.get(result.kind) or _ts(result.target)))
        if result.found:
            rows.append(("offset", str(result.offset)))
            if result.timestamp is not None and result.timestamp >= 0:
                rows.append(("record timestamp", _ts(result.timestamp)))
            rows.append(("leader epoch", "none" if result.leader_epoch is None else str(result.leader_epoch)))
        else:
            rows.append(("offset", "none (no record with a timestamp >= the target; ListOffsets answers -1)"))
        if result.segment_path is not None:
            rows.append(("segment", f"{result.segment_path} (largest timestamp "
                                    f"{_ts(result.segment_largest_timestamp)})"))
        if result.time_index is not None:
            rows.append(("time index", _index_line(result.time_index, None)))
        if result.offset_index is not None:
            rows.append(("offset index", _index_line(result.offset_index, result.scan_start_position)))
        if result.scan_start_position is not None:
            rows.append(("scan", f"from position {result.scan_start_position}, {result.batches_scanned} "
                                 "batch(es) read"))
        if result.batch is not None:
            rows.append(("batch", batch_line(result.batch)))
    width = max(len(k) for k, _ in rows)
    lines += [f"{k.ljust(width)}  {v}" for k, v in rows]
    return lines


def to_json(result, query) -> dict:
    """The result as one JSON object (every field, the steps included)."""
    import dataclasses

    from plog.engine.inspect.lookup import OffsetLookupResult

    data = dataclasses.asdict(result)
    data = {"lookup": "offset" if isinstance(result, OffsetLookupResult) else "timestamp", "query": query,
            **data}
    if isinstance(result, OffsetLookupResult):
        data["exact"] = result.exact
    return data
