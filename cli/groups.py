"""``plog groups list|describe|reset-offsets|delete``: kafka-consumer-groups.sh for a data directory.

The engine entry points are in ``engine.groups.admin``; this module parses options, calls
one of them and renders the result (data on stdout, notes on stderr).
"""

from __future__ import annotations

import csv
import sys
from typing import List, Optional

import typer

from .common import data_dir_option, open_data_dir, quiet_option
from .app import app
from .exit_codes import Outcome
from .output import ListFormat, emit, list_format_option, status

groups_app = typer.Typer(
    help="List, describe, reset the offsets of, and delete consumer groups (kafka-consumer-groups.sh).\n\n"
         "Example: plog groups describe billing",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    rich_markup_mode=None,
)
app.add_typer(groups_app, name="groups")

KAFKA_DIR_NOTE = ("Works read-only on a stopped broker's log directory (--data-dir /var/lib/kafka): offsets and "
                  "members come from its __consumer_offsets, as last recorded.")

#: Row key -> column title, Kafka's where Kafka has one.
TITLES = {
    "current_offset": "CURRENT-OFFSET", "log_end_offset": "LOG-END-OFFSET", "leader_epoch": "LEADER-EPOCH",
    "consumer_id": "CONSUMER-ID", "client_id": "CLIENT-ID", "group_instance_id": "GROUP-INSTANCE-ID",
    "partitions": "#PARTITIONS", "members": "#MEMBERS", "protocol_type": "PROTOCOL-TYPE",
    "new_offset": "NEW-OFFSET", "assignment_strategy": "ASSIGNMENT-STRATEGY",
}
STATES = ("Empty", "Stable", "PreparingRebalance", "Dead", "Unknown")


def _note(quiet: bool, text: str) -> None:
    if not quiet:
        status(text)


# -- list ----------------------------------------------------------------------------------------


@groups_app.command(
    "list",
    epilog="Examples:\n\n  plog groups list\n\n  plog groups list --state stable,empty --format json\n\n"
           "Groups with committed offsets or metadata in __consumer_offsets, and groups with live members. "
           "STATE is Empty (no members), Stable, PreparingRebalance (members joining, leaving or not yet "
           "acknowledging their assignment) or Unknown (only records of group types plog does not model). "
           "PROTOCOL-TYPE is '-' for a group that only has committed offsets. " + KAFKA_DIR_NOTE + "\n\n"
           "Exit status: 0 success, 1 error (unreadable data directory), 2 usage error.",
)
def list_cmd(
    state: Optional[str] = typer.Option(None, "--state", help="Only groups in these states (comma-separated)."),
    fmt: ListFormat = list_format_option(),
    data_dir: str = data_dir_option(),
) -> None:
    """List consumer groups with their state, protocol and member count."""
    from plog.engine.groups.admin import list_groups

    wanted = _parse_states(state)
    dd = open_data_dir(data_dir)
    rows = [{"group": g.group_id, "state": g.state, "protocol_type": g.protocol_type, "protocol": g.protocol,
             "members": g.members}
            for g in list_groups(dd) if wanted is None or g.state.lower() in wanted]
    emit(rows, fmt, ["group", "state", "protocol_type", "protocol", "members"], titles=TITLES, right=("members",))


def _parse_states(text: str | None) -> set[str] | None:
    if text is None:
        return None
    states = {s.strip().lower() for s in text.split(",") if s.strip()}
    valid = {s.lower() for s in STATES}
    if not states or not states <= valid:
        raise typer.BadParameter(f"Invalid state list '{text}'. Valid states are: {', '.join(STATES)}",
                                 param_hint="--state")
    return states


# -- describe ------------------------------------------------------------------------------------


@groups_app.command(
    "describe",
    epilog="Examples:\n\n  plog groups describe billing\n\n  plog groups describe billing --members --verbose\n\n"
           "  plog groups describe --all-groups --format csv\n\n"
           "  plog groups describe my-group --data-dir /var/lib/kafka   (a stopped broker's log directory)\n\n"
           "Per partition, as kafka-consumer-groups.sh --describe: GROUP TOPIC PARTITION CURRENT-OFFSET "
           "LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID, for every partition the group has a committed "
           "offset for and every partition assigned to a member ('-' where there is no value: no committed "
           "offset, no owner, or a partition this directory does not hold). LAG is LOG-END-OFFSET minus "
           "CURRENT-OFFSET. --verbose adds LEADER-EPOCH. --members lists the members (GROUP CONSUMER-ID "
           "[GROUP-INSTANCE-ID] HOST CLIENT-ID #PARTITIONS, --verbose adds ASSIGNMENT); --state shows the "
           "group's state, protocol, generation and member count. " + KAFKA_DIR_NOTE + "\n\n"
           "Exit status: 0 success, 1 error (\"Consumer group 'x' does not exist.\", unreadable data "
           "directory), 2 usage error.",
)
def describe(
    groups: Optional[List[str]] = typer.Argument(None, metavar="[GROUP]...", help="Groups to describe."),
    all_groups: bool = typer.Option(False, "--all-groups", help="Describe every group."),
    members: bool = typer.Option(False, "--members", help="List the members instead of the partitions."),
    state: bool = typer.Option(False, "--state", help="Show the group's state instead of the partitions."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="More columns (leader epoch; assignments)."),
    quiet: bool = quiet_option("No notes on stderr (empty or rebalancing group)."),
    fmt: ListFormat = list_format_option(),
    data_dir: str = data_dir_option(),
) -> None:
    """Describe consumer groups: committed offsets, log end offsets and lag per partition."""
    from plog.engine.groups.admin import describe_group, list_groups

    if members and state:
        raise typer.BadParameter("give --members or --state, not both", param_hint="--state")
    if all_groups == bool(groups):
        raise typer.BadParameter("give one or more GROUPs, or --all-groups", param_hint="GROUP")
    dd = open_data_dir(data_dir)
    names = [g.group_id for g in list_groups(dd)] if all_groups else list(dict.fromkeys(groups))
    # Describe every group before printing anything: an unknown one fails the whole command.
    descriptions = [describe_group(dd, name) for name in names]
    rows: list[dict] = []
    for d in descriptions:
        if d.state == "Empty" and not state:
            _note(quiet, f"Consumer group '{d.group_id}' has no active members.")
        elif d.state == "PreparingRebalance":
            _note(quiet, f"Warning: Consumer group '{d.group_id}' is rebalancing.")
        if not d.live and d.members:
            _note(quiet, f"Members of '{d.group_id}' are as last recorded in __consumer_offsets of {dd.path} "
                         "(a Kafka log directory; nothing is connected to it).")
        if state:
            rows.append({"group": d.group_id, "protocol_type": d.protocol_type, "assignment_strategy": d.protocol,
                         "state": d.state, "generation": d.generation, "members": len(d.members)})
        elif members:
            rows.extend(_member_row(d.group_id, m) for m in d.members)
        else:
            rows.extend({"group": d.group_id, "topic": p.topic, "partition": p.partition,
                         "current_offset": p.current_offset, "log_end_offset": p.log_end_offset, "lag": p.lag,
                         "consumer_id": p.consumer_id, "host": p.host, "client_id": p.client_id,
                         "leader_epoch": p.leader_epoch}
                        for p in d.partitions)
    if state:
        columns = ["group", "protocol_type", "assignment_strategy", "state", "generation", "members"]
        right = ("generation", "members")
    elif members:
        columns = ["group", "consumer_id"]
        if any(r["group_instance_id"] for r in rows):
            columns.append("group_instance_id")
        columns += ["host", "client_id", "partitions"] + (["assignment"] if verbose else [])
        right = ("partitions",)
    else:
        columns = ["group", "topic", "partition"] + (["leader_epoch"] if verbose else []) + [
            "current_offset", "log_end_offset", "lag", "consumer_id", "host", "client_id"]
        right = ("partition", "leader_epoch", "current_offset", "log_end_offset", "lag")
    emit(rows, fmt, columns, titles=TITLES, right=right)


def _member_row(group: str, m) -> dict:
    assignment = None
    if m.assignment is not None:
        # Kafka's getAssignmentString: topic:p,p;topic2:p, topics and partitions sorted.
        by_topic: dict[str, list[int]] = {}
        for tp in m.assignment:
            by_topic.setdefault(tp[0], []).append(tp[1])
        assignment = ";".join(f"{t}:{','.join(map(str, sorted(ps)))}" for t, ps in sorted(by_topic.items())) or None
    return {"group": group, "consumer_id": m.member_id, "group_instance_id": m.group_instance_id, "host": m.host,
            "client_id": m.client_id, "partitions": None if m.assignment is None else len(m.assignment),
            "assignment": assignment}


# -- reset-offsets -------------------------------------------------------------------------------


@groups_app.command(
    "reset-offsets",
    epilog="Examples:\n\n"
           "  plog groups reset-offsets billing --topic orders --to-earliest\n\n"
           "  plog groups reset-offsets billing --topic orders:0,1 --shift-by -100 --execute\n\n"
           "  plog groups reset-offsets billing --all-topics --to-datetime 2024-05-01T00:00:00.000 --execute\n\n"
           "  plog groups reset-offsets billing --all-topics --by-duration PT2H --export > plan.csv\n\n"
           "  plog groups reset-offsets billing --from-file plan.csv --execute\n\n"
           "Exactly one strategy, as in kafka-consumer-groups.sh: --to-earliest, --to-latest, --to-offset N, "
           "--shift-by N (from the committed offset), --to-datetime (YYYY-MM-DDTHH:mm:SS.sss, optional zone Z "
           "+hh +hhmm +hh:mm, UTC when none; any ISO-8601 date/time), --by-duration (ISO-8601 PnDTnHnMnS, "
           "before now), --to-current, --from-file (CSV lines topic,partition,offset as --export writes, or "
           "group,topic,partition,offset; '-' reads stdin), or plog's --to SPEC (earliest, latest, committed, "
           "N, +N, -N, @<ms>, @<ISO-8601>, @-<duration>). Every new offset is kept within the partition's "
           "log start and log end offsets, as Kafka does (--to-current re-commits the current offset as it "
           "is; partitions without one get the log end). A time with no record at or after it gives the "
           "log end offset.\n\n"
           "Scope: --topic T (every partition) or T:0,1 (repeatable), or --all-topics (the partitions the "
           "group has offsets for); --from-file brings its own partitions. The default is a dry run that "
           "prints GROUP TOPIC PARTITION NEW-OFFSET CURRENT-OFFSET; --execute commits the plan; --export "
           "prints it as Kafka's CSV instead of a table. A group with live members is refused (stop them, "
           "or wait for their sessions to expire). On a Kafka log directory the plan can be computed and "
           "exported but not executed.\n\n"
           "Exit status: 0 success, 1 error (active group, unknown topic or partition, no committed offset "
           "to shift, bad plan file, read-only Kafka log directory), 2 usage error (no or several strategies, "
           "no scope, a bad --topic, --to-datetime or --by-duration).",
)
def reset_offsets(
    group: str = typer.Argument(..., metavar="GROUP", help="The group whose offsets to reset."),
    topic: Optional[List[str]] = typer.Option(None, "--topic", "-t", help="Topic, or topic:0,1,2 (repeatable)."),
    all_topics: bool = typer.Option(False, "--all-topics", help="Every partition the group has an offset for."),
    to_earliest: bool = typer.Option(False, "--to-earliest", help="The log start offset."),
    to_latest: bool = typer.Option(False, "--to-latest", help="The log end offset."),
    to_offset: Optional[int] = typer.Option(None, "--to-offset", help="An absolute offset."),
    shift_by: Optional[int] = typer.Option(None, "--shift-by", help="Move the committed offset by N (+/-)."),
    to_datetime: Optional[str] = typer.Option(None, "--to-datetime", help="The first offset at/after a time."),
    by_duration: Optional[str] = typer.Option(None, "--by-duration", help="The first offset at/after now minus "
                                                                           "an ISO-8601 duration (PT1H)."),
    to_current: bool = typer.Option(False, "--to-current", help="The current committed offset."),
    from_file: Optional[str] = typer.Option(None, "--from-file", help="A CSV plan (topic,partition,offset)."),
    to_spec: Optional[str] = typer.Option(None, "--to", help="An offset in plog's offset language."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Only print the plan (the default)."),
    execute: bool = typer.Option(False, "--execute", help="Commit the plan."),
    export: bool = typer.Option(False, "--export", help="Print the plan as CSV (topic,partition,offset)."),
    quiet: bool = quiet_option("No summary on stderr."),
    fmt: Optional[ListFormat] = typer.Option(None, "--format", "-f", help="Output format (default table)."),
    data_dir: str = data_dir_option(),
) -> None:
    """Reset a group's committed offsets with any of Kafka's strategies (dry run by default)."""
    from plog.engine.groups.admin import reset_offsets as engine_reset

    strategy = _strategy(group, topic, all_topics, dry_run, execute, export, fmt, to_earliest=to_earliest,
                         to_latest=to_latest, to_offset=to_offset, shift_by=shift_by, to_datetime=to_datetime,
                         by_duration=by_duration, to_current=to_current, from_file=from_file, to=to_spec)
    dd = open_data_dir(data_dir)
    plan = engine_reset(dd, group, strategy, topics=topic or None, all_topics=all_topics, execute=execute)
    if export:
        w = csv.writer(sys.stdout, lineterminator="\n")
        for r in plan.rows:
            w.writerow([r.topic, r.partition, r.new_offset])
        sys.stdout.flush()
    else:
        rows = [{"group": plan.group_id, "topic": r.topic, "partition": r.partition, "new_offset": r.new_offset,
                 "current_offset": r.current_offset, "log_start_offset": r.log_start_offset,
                 "log_end_offset": r.log_end_offset} for r in plan.rows]
        emit(rows, fmt or ListFormat.table, ["group", "topic", "partition", "new_offset", "current_offset"],
             titles=TITLES, right=("partition", "new_offset", "current_offset"))
    if plan.executed:
        _note(quiet, f"Committed {len(plan.rows)} offset(s) for group '{group}'.")
    else:
        _note(quiet, f"Dry run: nothing committed for group '{group}' ({len(plan.rows)} partition(s)); "
                     "add --execute to commit.")


def _strategy(group: str, topic: list[str] | None, all_topics: bool, dry_run: bool, execute: bool, export: bool,
              fmt, **strategies):
    """The one reset strategy given (``strategies``: option name without ``--`` -> value,
    False/None when not given), its scope checked; a bad option is a usage error, a bad
    --from-file plan an error (the file is data, not an option)."""
    from plog.engine.errors import InvalidOffsetSpecError
    from plog.engine.groups.admin import ResetStrategy, parse_topic_arg, read_reset_plan
    from plog.engine.errors import InvalidResetArgumentError

    given = [f"--{name.replace('_', '-')}" for name, value in strategies.items()
             if value is not None and value is not False]
    if len(given) != 1:
        raise typer.BadParameter(
            "give exactly one reset strategy: --to-earliest, --to-latest, --to-offset, --shift-by, --to-datetime, "
            "--by-duration, --to-current, --from-file or --to" + (f" (got {', '.join(given)})" if given else ""),
            param_hint="STRATEGY")
    if dry_run and execute:
        raise typer.BadParameter("give --dry-run or --execute, not both", param_hint="--execute")
    if export and fmt is not None:
        raise typer.BadParameter("--export prints CSV; it cannot be combined with --format", param_hint="--format")
    from_file = strategies["from_file"]
    if from_file is not None:
        if topic:
            raise typer.BadParameter("--from-file takes its partitions from the file; --topic cannot narrow it",
                                     param_hint="--topic")
    elif all_topics == bool(topic):
        raise typer.BadParameter("One of the reset scopes should be defined: --all-topics, --topic (not both).",
                                 param_hint="--topic")
    for t in topic or []:
        try:
            parse_topic_arg(t)
        except InvalidResetArgumentError as e:
            raise typer.BadParameter(str(e), param_hint="--topic") from None
    if from_file is not None:  # the plan file is data: its errors are exit 1
        return ResetStrategy.from_plan(read_reset_plan(from_file, group), from_file)
    name, value = next((n, v) for n, v in strategies.items() if v is not None and v is not False)
    try:
        make = getattr(ResetStrategy, "to_spec" if name == "to" else name)
        return make() if value is True else make(value)
    except (InvalidResetArgumentError, InvalidOffsetSpecError) as e:
        raise typer.BadParameter(str(e), param_hint=given[0]) from None


# -- delete --------------------------------------------------------------------------------------


@groups_app.command(
    "delete",
    epilog="Example: plog groups delete billing old-reports\n\n"
           "Deletes empty groups only, as Kafka: their committed offsets and metadata get tombstones in "
           "__consumer_offsets and the membership file goes. Each group is tried; the others are deleted "
           "even when one fails.\n\n"
           "Exit status: 0 success, 1 error (a group does not exist or has active members; a Kafka log "
           "directory, which is read-only), 2 usage error.",
)
def delete(
    groups: List[str] = typer.Argument(..., metavar="GROUP...", help="Groups to delete."),
    data_dir: str = data_dir_option(),
) -> Outcome | None:
    """Delete consumer groups that have no active members."""
    from plog.engine.groups.admin import delete_groups

    dd = open_data_dir(data_dir)
    result = delete_groups(dd, groups)
    names = ", ".join(f"'{g}'" for g in result.deleted)
    if not result.failed:
        status(f"Deletion of requested consumer groups ({names}) was successful.")
        return
    for reason in result.failed.values():
        print(f"plog: error: {reason}", file=sys.stderr)
    if result.deleted:
        status(f"These consumer groups were deleted successfully: {names}")
    return Outcome.INCOMPLETE
