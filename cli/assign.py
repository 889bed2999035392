"""``plog assign generate|execute|verify|preferred-leaders|report``: kafka-reassign-partitions.sh
and the preferred leader election for a data directory (engine: ``engine.reassign``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

import typer

from .common import data_dir_option, open_data_dir, quiet_option
from .exit_codes import Outcome
from .app import app
from .output import ListFormat, ReportFormat, emit, emit_document, list_format_option, report_format_option, status

assign_app = typer.Typer(
    help="Move partition replicas between brokers, with Kafka's reassignment JSON "
         "(kafka-reassign-partitions.sh), and report leaders and placement.\n\n"
         "Example: plog assign generate --topics-to-move-json-file topics.json --broker-list 3,4",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    rich_markup_mode=None,
)
app.add_typer(assign_app, name="assign")

EXIT = "Exit status: 0 success, 1 error (invalid plan, unknown topic or broker), 2 usage error."
EXIT_CHECK = ("Exit status: 0 success, 1 error (invalid plan, unknown topic), 2 usage error, "
              "3 the command ran and found problems ({what}).")


def _read_input(path: str, option: str) -> str:
    """The text of ``path`` (``-``: stdin); a missing file is a one-line error."""
    if path == "-":
        return sys.stdin.read()
    from .errors import PlogCliError

    # Read whatever the name opens: a file, or a pipe such as the shell's <(jq ...) and
    # /dev/stdin (not a "regular file", yet exactly what the user meant).
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PlogCliError(f"{option} {path}: no such file") from None
    except IsADirectoryError:
        raise PlogCliError(f"{option} {path}: is a directory") from None
    except UnicodeDecodeError as e:
        raise PlogCliError(f"{option} {path}: not a JSON file (not UTF-8 text at byte {e.start})") from None


def _parse_input(parse, path: str, option: str):
    """``parse`` of the text of ``path``; a document Kafka would reject names the file (Kafka's
    own messages, kept as they are after it, say only "The input string ...")."""
    from plog.engine.errors import ReassignmentJsonError

    text = _read_input(path, option)
    try:
        return parse(text)
    except ReassignmentJsonError as e:
        raise ReassignmentJsonError(f"{option} {path}: {e}") from None


def _broker_list(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise typer.BadParameter(f"expected broker ids like 1,2,3, got {text!r}", param_hint="--broker-list") from None


@assign_app.command(
    "generate",
    epilog="Example: plog assign generate --topics-to-move-json-file topics.json --broker-list 3,4\n\n"
           "topics.json: {\"version\":1,\"topics\":[{\"topic\":\"orders\"}]}. Prints the current assignment "
           "(save it for rollback) and a proposal made with Kafka's placement (rack-aware when the "
           "brokers have racks) over the listed brokers, keeping each topic's partition count and "
           "replication factor. Changes nothing: save the proposal and give it to plog assign execute. "
           "--format json prints one object {current, proposed}.\n\n" + EXIT,
)
def generate(
    topics_to_move_json_file: str = typer.Option(..., "--topics-to-move-json-file", metavar="FILE",
                                                 help="Kafka's topics-to-move JSON (- for stdin)."),
    broker_list: str = typer.Option(..., "--broker-list", metavar="IDS",
                                    help="Brokers to place the replicas on, e.g. 1,2,3."),
    disable_rack_aware: bool = typer.Option(False, "--disable-rack-aware", help="Ignore the brokers' racks."),
    fmt: ReportFormat = report_format_option(),
    data_dir: str = data_dir_option(),
) -> None:
    """Propose a reassignment of whole topics onto a list of brokers."""
    from plog.engine.cluster.reassignment_plan import (
        format_reassignment_json,
        generate_reassignment,
        parse_topics_to_move,
        reassignment_document,
    )

    brokers = _broker_list(broker_list)
    topics = _parse_input(parse_topics_to_move, topics_to_move_json_file, "--topics-to-move-json-file")
    dd = open_data_dir(data_dir)
    plan = generate_reassignment(dd, topics, brokers, rack_aware=not disable_rack_aware)
    if fmt is not ReportFormat.text:
        emit_document(fmt=fmt, doc={"current": reassignment_document(plan.current), "proposed": reassignment_document(plan.proposed)})
        return
    sys.stdout.write(f"Current partition replica assignment\n{format_reassignment_json(plan.current)}\n\n"
                     f"Proposed partition reassignment configuration\n{format_reassignment_json(plan.proposed)}\n")


@assign_app.command(
    "execute",
    epilog="Example: plog assign execute --reassignment-json-file plan.json\n\n"
           "plan.json: {\"version\":1,\"partitions\":[{\"topic\":\"orders\",\"partition\":0,\"replicas\":[3,4]}]} "
           "(log_dirs optional: \"any\"). Prints the current assignment first: save it to roll back. "
           "Then, holding every broker's lock (producers wait), copies each partition to the brokers "
           "that gain it (byte-identical files), switches the replica lists in one atomic metadata "
           "write (the first replica leads) and deletes the replicas no longer listed (Kafka's "
           "-delete rename). A crash at any point loses no record; run the plan again to finish. "
           "A plan that only reorders replicas changes the leaders only.\n\n" + EXIT,
)
def execute(
    reassignment_json_file: str = typer.Option(..., "--reassignment-json-file", metavar="FILE",
                                               help="Kafka's reassignment JSON (- for stdin)."),
    timeout: float = typer.Option(30.0, "--timeout", min=0.0,
                                  help="Seconds to wait for the brokers' locks (other writers)."),
    fmt: ReportFormat = report_format_option(),
    quiet: bool = quiet_option("No progress bar and no status lines on stderr."),
    data_dir: str = data_dir_option(),
) -> None:
    """Move partition replicas as a reassignment plan says."""
    from plog.engine.cluster.reassignment import execute_reassignment
    from plog.engine.cluster.reassignment_plan import (
        format_reassignment_json,
        parse_reassignment_json,
        reassignment_document,
        validate_plan,
    )

    plan = _parse_input(parse_reassignment_json, reassignment_json_file, "--reassignment-json-file")
    dd = open_data_dir(data_dir)
    targets = validate_plan(dd, plan)
    current = {tp: dd.replicas(tp) for tp in targets}
    if fmt is ReportFormat.text:
        # Before anything moves, as Kafka does: the rollback plan must survive a failure.
        sys.stdout.write(f"Current partition replica assignment\n\n{format_reassignment_json(current)}\n\n"
                         "Save this to use as the --reassignment-json-file option during rollback\n")
        sys.stdout.flush()
    from .progress import progress

    # Started by the first copy: a plan that moves no data shows no bar.
    bar = progress("copy", quiet=quiet, unknown_total=True)
    try:
        report = execute_reassignment(dd, plan, lock_timeout_s=timeout, progress=bar.update_callback)
    finally:
        bar.close()
    if fmt is not ReportFormat.text:
        emit_document(fmt=fmt, doc={"current": reassignment_document(report.previous),
                   "proposed": reassignment_document(targets),
                   "partitions": [{"topic": m.tp.topic, "partition": m.tp.partition, "action": m.action,
                                   "previous": m.previous, "replicas": m.replicas, "source": m.source,
                                   "copied_to": m.copied_to, "removed_from": m.removed_from,
                                   "created_empty": m.created_empty, "log_start_offset": m.log_start_offset,
                                   "log_end_offset": m.log_end_offset, "files_copied": m.files_copied,
                                   "bytes_copied": m.bytes_copied} for m in report.moves]})
        return
    if quiet:
        return
    for m in report.moves:
        what = {"move": "moved", "leader": "new leader", "none": "unchanged"}[m.action]
        details = []
        if m.copied_to:
            details.append(f"copied from broker {m.source} to {_ids(m.copied_to)}, {m.bytes_copied} bytes, "
                           f"offsets {m.log_start_offset}..{m.log_end_offset}")
        if m.created_empty:
            details.append(f"created empty on {_ids(m.created_empty)} (no replica folder existed)")
        if m.removed_from:
            details.append(f"deleted from {_ids(m.removed_from)}")
        status(f"{m.tp}: {what}: replicas {_ids(m.previous)} -> {_ids(m.replicas)}"
               + (f" ({'; '.join(details)})" if details else ""))
    names = ",".join(str(m.tp) for m in sorted(report.moves, key=lambda m: (m.tp.topic, m.tp.partition)))
    print(f"Successfully completed partition reassignment{'' if len(report.moves) == 1 else 's'} for {names}",
          file=sys.stderr)


@assign_app.command(
    "verify",
    epilog="Example: plog assign verify --reassignment-json-file plan.json\n\n"
           "Per partition, Kafka's line: \"Reassignment of partition orders-0 is completed.\" when the "
           "replica list is the plan's, every replica folder exists with the same log start and end "
           "offsets and no other broker still holds the partition; \"... is still in progress.\" "
           "otherwise (an interrupted execute), with the reasons indented below; \"There is no active "
           "reassignment ...\" when the plan was not executed. Reads only.\n\n"
           + EXIT_CHECK.format(what="a partition is not completed"),
)
def verify(
    reassignment_json_file: str = typer.Option(..., "--reassignment-json-file", metavar="FILE",
                                               help="Kafka's reassignment JSON (- for stdin)."),
    fmt: ReportFormat = report_format_option(),
    data_dir: str = data_dir_option(),
) -> Outcome:
    """Check whether a reassignment plan is in place."""
    from plog.engine.cluster.reassignment import verify_reassignment
    from plog.engine.cluster.reassignment_plan import parse_reassignment_json

    plan = _parse_input(parse_reassignment_json, reassignment_json_file, "--reassignment-json-file")
    dd = open_data_dir(data_dir)
    report = verify_reassignment(dd, plan)
    if fmt is not ReportFormat.text:
        emit_document(fmt=fmt, doc={"complete": report.complete, "partitions": [
            {"topic": p.tp.topic, "partition": p.tp.partition, "state": p.state, "message": p.message,
             "current": p.current, "target": p.target, "leftovers": p.leftovers, "problems": p.problems,
             "replicas": [{"broker": r.broker, "exists": r.exists, "path": r.path,
                           "log_start_offset": r.log_start_offset, "log_end_offset": r.log_end_offset}
                          for r in p.replicas]} for p in report.partitions]})
    else:
        lines = ["Status of partition reassignment:"]
        for p in report.partitions:
            lines.append(p.message)
            present = [r for r in p.replicas if r.exists]
            if present:
                lines.append("  replicas: " + ", ".join(
                    f"{r.broker} (offsets {r.log_start_offset}..{r.log_end_offset})" for r in present))
            lines.extend(f"  {problem}" for problem in p.problems)
        sys.stdout.write("\n".join(lines) + "\n")
    return Outcome.OK if report.complete else Outcome.PROBLEMS_FOUND


@assign_app.command(
    "preferred-leaders",
    epilog="Example: plog assign preferred-leaders --topic orders --dry-run\n\n"
           "Kafka's preferred leader election (kafka-leader-election.sh --election-type preferred): the "
           "preferred leader is the first replica of each partition. After a broker stopped and started "
           "again, other replicas lead its partitions; this moves each leadership back (new leader epoch) "
           "where the preferred replica's broker runs and the replica is in the ISR. Per partition: the "
           "preferred and current leader, the replicas and what happened (\"Valid replica already elected\", "
           "\"Elected 1 (leader was 2), epoch 3\", or why it could not be). --dry-run reports what would "
           "change and changes nothing.\n\n"
           + EXIT_CHECK.format(what="a partition is not led by its preferred replica and cannot be: that "
                                    "broker is not running or its replica is not in the ISR"),
)
def preferred_leaders(
    topic: Optional[List[str]] = typer.Option(None, "--topic", "-t", help="Topic (repeatable; default: all)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show what would be elected; change nothing."),
    fmt: ListFormat = list_format_option(),
    data_dir: str = data_dir_option(),
) -> Outcome:
    """Elect each partition's preferred (first) replica leader where it is not."""
    from plog.engine.cluster.brokers import elect_preferred_leaders

    dd = open_data_dir(data_dir)

    def can_elect(e) -> bool:  # the election would make the preferred replica the leader
        return not e.ok and dd.broker(e.preferred_leader).running and e.preferred_leader in dd.partition_state(e.tp).isr

    # A dry run first: when nothing is to be elected, no lock is taken and nothing is written
    # (a Kafka log directory, read-only, gets its report too).
    elections, _events = elect_preferred_leaders(dd, topic or None, dry_run=True)
    if not dry_run and any(can_elect(e) for e in elections):
        elections, _events = elect_preferred_leaders(dd, topic or None)
    rows = [{"topic": e.tp.topic, "partition": e.tp.partition, "preferred_leader": e.preferred_leader,
             "leader": e.leader, "replicas": list(e.replicas), "elected": e.elected,
             "ok": e.ok or (dry_run and can_elect(e)), "status": e.message} for e in elections]
    emit(rows, fmt, ["topic", "partition", "preferred_leader", "leader", "replicas", "status"],
         titles={"preferred_leader": "PREFERRED"}, right=("partition", "preferred_leader", "leader"))
    elected = [f"{e.tp}" for e in elections if e.elected]
    valid = [f"{e.tp}" for e in elections if not e.elected and e.ok]
    if elected:
        print(f"Successfully completed leader election (PREFERRED) for partitions {', '.join(elected)}",
              file=sys.stderr)
    if valid:
        status(f"Valid replica already elected for partitions {', '.join(valid)}")
    return Outcome.OK if all(r["ok"] for r in rows) else Outcome.PROBLEMS_FOUND


@assign_app.command(
    "report",
    epilog="Example: plog assign report --format csv\n\n"
           "Per broker: partitions it leads, replicas it holds (from the metadata, every topic), and "
           "the partition folders and their bytes in its log directory. Reads only.\n\n" + EXIT,
)
def report(
    fmt: ListFormat = list_format_option(),
    data_dir: str = data_dir_option(),
) -> None:
    """Show leaders, replicas and bytes on disk per broker."""
    from plog.engine.cluster.reassignment import placement

    dd = open_data_dir(data_dir)
    rows = [{"broker": b.broker, "rack": b.rack, "leaders": b.leaders, "replicas": b.replicas,
             "folders": b.partitions_on_disk, "size": b.size, "log_dir": b.log_dir} for b in placement(dd)]
    emit(rows, fmt, ["broker", "rack", "leaders", "replicas", "folders", "size"],
         right=("broker", "leaders", "replicas", "folders", "size"))


def _ids(brokers) -> str:
    return ",".join(str(b) for b in brokers)
