"""``plog recover``: Kafka's start-up recovery, run offline, planned first if asked."""

from __future__ import annotations

import os
import sys
from typing import Optional

import typer

from .errors import PlogCliError
from .exit_codes import Outcome
from .app import app
from .maintain import PATH_HELP, format_option, quiet_option, resolve_path
from .output import ReportFormat, emit_document


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
        "file in the partition folder (Kafka ignores it) and the offsets of what follows are kept. The plan "
        "says what each truncation and segment deletion loses (records, offsets, damaged bytes) and when "
        "--salvage keeps more. Segments a broker's start-up does not revalidate (below the recovery point, or "
        "every one after a clean shutdown) are read too: damage there is named as left untouched, with the "
        "command that repairs it (--all, --salvage).\n\n"
        "Exit status: 0 success (or --dry-run with nothing to do), 1 error, 2 usage error, "
        "3 --dry-run found work to do, or damage is left untouched, 130 interrupted, 143 terminated."
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
    fmt: ReportFormat = format_option(),
    quiet: bool = quiet_option(),
) -> Outcome:
    """Recover Kafka log directories after a crash, as a broker does at start-up."""
    from plog.engine.maintenance import recovery

    from .progress import progress

    target = resolve_path(path)
    if dry_run:
        # The plan reads every segment: those recovery revalidates, and the others for damage
        # it would leave untouched.
        with progress("recover", quiet=quiet, unknown_total=True) as bar:
            plan = recovery.plan_recovery(target, all_segments=all_segments, salvage=salvage, progress=bar.callback)
        _print(plan, fmt)
        if not quiet:
            sys.stderr.write(f"plog recover: {_summary(plan, dry_run=True)}\n")
        return Outcome.PROBLEMS_FOUND if plan.has_work or plan.has_untouched_damage else Outcome.OK
    # How many bytes recovery revalidates is only known after reading the checkpoints and
    # indexes of every partition: the bar shows bytes done and speed without a total.
    with progress("recover", quiet=quiet, unknown_total=True) as bar:
        report = recovery.recover(target, all_segments=all_segments, salvage=salvage, jobs=jobs,
                                  progress=bar.callback)
    _print(report, fmt)
    failed = [p for p in report.partitions if p.status == "failed"]
    if failed:
        # One line: the summary goes into the error rather than on a line of its own.
        raise PlogCliError(f"{len(failed)} partition(s) could not be recovered "
                           f"({_summary(report, dry_run=False)}); first: {failed[0].path}: {failed[0].reason}")
    if not quiet:
        sys.stderr.write(f"plog recover: {_summary(report, dry_run=False)}\n")
    return Outcome.PROBLEMS_FOUND if report.has_untouched_damage else Outcome.OK


def _print(obj, fmt: ReportFormat) -> None:
    if fmt is not ReportFormat.text:
        emit_document(obj.to_dict(), fmt)
    else:
        lines = plan_lines(obj) if hasattr(obj, "has_work") else report_lines(obj)
        sys.stdout.write("".join(line + "\n" for line in lines))
    sys.stdout.flush()


def _name(path: str) -> str:
    return os.path.basename(os.path.normpath(path))


def _entry(value) -> str:
    """A checkpoint entry: its offset, or "(no entry)"."""
    return "(no entry)" if value is None else str(value)


def _offsets(first, last) -> str:
    return f"offset {first}" if first == last else f"offsets {first}..{last}"


def loss_text(loss) -> str:
    """What a cut throws away, in words (``engine.recovery.Loss``)."""
    parts = []
    if loss.records:
        parts.append(f"{loss.records} record{'s' * (loss.records != 1)} at {_offsets(loss.first_offset, loss.last_offset)}"
                     " in whole batches")
    if loss.damaged_bytes:
        parts.append(f"{loss.damaged_bytes} damaged bytes")
    return "loses " + (" and ".join(parts) if parts else "nothing")


def untouched_lines(items, indent: str = "    ") -> list[str]:
    """Damage recovery leaves as it is: where, what, why, and the command that handles it."""
    lines = []
    for u in items:
        where = u.file + (f" at position {u.position}" if u.position is not None else "")
        more = f"; {u.errors} errors in this segment" if u.errors > 1 else ""
        lines.append(f"{indent}untouched {where}: {u.check}: {u.message}{more}. Left as it is: {u.why}; {u.remedy}")
    return lines


def _snapshot_line(d) -> str:
    return (f"    delete producer snapshot {d.file}: {d.reason}"
            + (" (routine: every broker start deletes it)" if d.routine else ""))


def plan_lines(plan) -> list[str]:
    """The plan as text: per log dir the marker, per partition what recovery will do and why."""
    from plog.engine.maintenance.recovery import REVALIDATED

    lines = []
    for d in plan.log_dirs:
        lines.append(f"{d.path}: {'clean shutdown' if d.clean_shutdown else 'no clean-shutdown marker'}; {d.marker}")
        empty = []
        for p in d.partitions:
            head = f"  {_name(p.path)}"
            if _empty_plan(p):
                empty.append(p)
                continue
            if p.skipped:
                lines.append(f"{head}: skipped: {p.skipped}")
                continue
            if not p.has_work and not p.revalidate:
                lines.append(f"{head}: nothing to do (recovery point {p.recovery_point}, log start {p.log_start_offset}, "
                             f"log end {p.log_end_offset})")
                lines.extend(_snapshot_line(s) for s in p.snapshots_deleted)
                lines.extend(untouched_lines(p.untouched))
                continue
            lines.append(f"{head}: recovery point {p.recovery_point}, log start {p.log_start_offset}"
                         + (f"; revalidate from offset {p.revalidate_from}" if p.revalidate_from is not None else "")
                         + f"; log end after recovery {p.log_end_offset}")
            for a in p.temp_files + p.orphan_indexes:
                lines.append(f"    {a.action} {a.file}" + (f" -> {a.target}" if a.target else "") + f": {a.reason}")
            for r in p.revalidate:
                lines.append(f"    revalidate {r.file} ({r.size} bytes): {'; '.join(r.reasons)}")
            for a in p.index_rebuilds:
                if a.action != "rebuild" or a.reason != REVALIDATED:
                    lines.append(f"    {a.action} {a.file}: {a.reason}")
            rebuilt = sum(1 for a in p.index_rebuilds if a.action == "rebuild")
            if rebuilt:
                lines.append(f"    {rebuilt} index file{'s' * (rebuilt != 1)} rebuilt in all (every index of each "
                             "revalidated segment that stays)")
            for r in p.salvage:
                before = "the segment's start" if r.offset_before is None else f"offset {r.offset_before}"
                after = "the end" if r.offset_after is None else f"offset {r.offset_after}"
                lines.append(f"    quarantine {r.file} bytes [{r.position}, {r.position + r.length}) ({r.kind}: "
                             f"{r.reason}); {before} and {after} are kept on either side"
                             + (f" -> {r.quarantine_file}" if r.quarantine_file else ""))
            if p.truncation:
                t = p.truncation
                lines.append(f"    truncate {t.file} at position {t.position}: {t.bytes} bytes ({t.kind}: {t.reason})"
                             + (f"; {loss_text(t.loss)}" if t.loss else ""))
            for a in p.deleted_segments:
                lines.append(f"    delete {a.file}: {a.reason}" + (f"; {loss_text(a.loss)}" if a.loss else ""))
            keeps = salvage_keeps(p)
            if keeps and not plan.salvage:
                lines.append(f"    --salvage would keep {keeps} of the records these lose: it quarantines only the "
                             "damaged bytes and keeps every valid batch after them")
            for name in p.offset_overflow:
                lines.append(f"    split {name}: offsets overflow 32 bits (KAFKA-6264)")
            lines.extend(_snapshot_line(s) for s in p.snapshots_deleted)
            if p.snapshot_written:
                lines.append(f"    write producer snapshot {p.snapshot_written}")
            lines.extend(untouched_lines(p.untouched))
        lines += _log_dir_tail(d, empty, "nothing to revalidate")
    return lines


def salvage_keeps(p) -> int:
    """Records a truncation and the segment deletions after it lose that salvage keeps."""
    losses = ([p.truncation.loss] if p.truncation and p.truncation.loss else []) + \
        [a.loss for a in p.deleted_segments if a.loss]
    return sum(x.salvage_keeps for x in losses)


def report_lines(report) -> list[str]:
    """What was done, per log dir and partition."""
    lines = []
    for d in report.log_dirs:
        lines.append(f"{d.path}: {'was shut down cleanly' if d.had_clean_shutdown else 'was not shut down cleanly'}"
                     + ("; wrote .kafka_cleanshutdown" if d.clean_shutdown_written else ""))
        empty = []
        for p in d.partitions:
            head = f"  {_name(p.path)}"
            if _empty_report(p):
                empty.append(p)
                continue
            if p.status != "recovered":
                lines.append(f"{head}: {p.status}: {p.reason}")
                continue
            done = [f"log end {p.log_end_offset}", f"{len(p.revalidated)} segment(s) revalidated "
                    f"({p.bytes_validated} bytes)"]
            if p.truncations:
                done.append("truncated " + ", ".join(f"{t.file}@{t.position} {t.bytes} bytes ({t.kind}"
                                                     + (f"; {loss_text(t.loss)}" if t.loss else "") + ")"
                                                     for t in p.truncations))
            if p.quarantined:
                done.append("quarantined " + ", ".join(f"{q.file}@{q.position} {q.length} bytes -> "
                                                       f"{q.quarantine_file}" for q in p.quarantined))
            if p.deleted_files:
                done.append(f"{len(p.deleted_files)} file(s) deleted")
            if p.rebuilt_indexes:
                done.append(f"{len(p.rebuilt_indexes)} index(es) rebuilt")
            lines.append(f"{head}: " + "; ".join(done))
            lines.extend(untouched_lines(p.untouched))
        lines += _log_dir_tail(d, empty, "recovered, nothing to revalidate")
    return lines


def _log_dir_tail(d, empty: list, what: str) -> list[str]:
    """The last lines of a log dir in a plan or report: its empty partitions (one line) and
    its checkpoint changes."""
    lines = [f"  {_empty_line(empty)}: {what} (--format json lists each)"] if empty else []
    for c in d.checkpoint_changes:
        lines.append(f"  {c.file}: {c.topic_partition} {_entry(c.old)} -> {_entry(c.new)}")
    return lines


# A log dir holds 50 empty __consumer_offsets partitions more often than not: one line for
# all the partitions with no records and nothing found, so the ones with work stand out.
def _empty_plan(p) -> bool:
    return (not p.skipped and p.log_end_offset == 0 and not any(r.size for r in p.revalidate)
            and not (p.temp_files or p.orphan_indexes or p.salvage or p.truncation or p.deleted_segments
                     or p.offset_overflow or p.snapshots_deleted or p.snapshot_written or p.untouched))


def _empty_report(p) -> bool:
    return (p.status == "recovered" and p.log_end_offset == 0 and p.bytes_validated == 0
            and not (p.truncations or p.quarantined or p.deleted_files or p.untouched))


def _empty_line(parts) -> str:
    names = [_name(p.path) for p in parts]
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return f"{len(names)} empty partition{'s' * (len(names) != 1)} ({shown})"


def _summary(obj, *, dry_run: bool) -> str:
    parts = obj.partitions
    damaged = sum(len(p.untouched) for p in parts)
    left = (f", {damaged} damaged segment{'s' * (damaged != 1)} left untouched (see above)" if damaged else "")
    if dry_run:
        work = sum(1 for p in parts if p.has_work)
        return (f"{len(parts)} partition(s), {work} with work to do, {obj.bytes_to_validate} bytes to revalidate"
                + left + ("" if obj.has_work or damaged else "; nothing to do"))
    done = sum(1 for p in parts if p.status == "recovered")
    cut = sum(t.bytes for p in parts for t in p.truncations)
    quarantined = sum(q.length for p in parts for q in p.quarantined)
    return (f"{done} partition(s) recovered, {sum(p.bytes_validated for p in parts)} bytes revalidated, "
            f"{cut} bytes truncated" + (f", {quarantined} bytes quarantined" if report_has(parts) else "") + left)


def report_has(parts) -> bool:
    return any(p.quarantined for p in parts)
