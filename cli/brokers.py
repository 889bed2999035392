"""``plog brokers list|stop|start``: the brokers of a data directory and the controller's
work when one stops, crashes or starts again (engine: ``engine.brokers``)."""

from __future__ import annotations

import sys

import typer

from .common import data_dir_option, open_data_dir
from .app import app
from .output import ListFormat, ReportFormat, emit, emit_document, list_format_option, report_format_option, status

brokers_app = typer.Typer(
    help="List, stop and start the brokers of a data directory: leader elections, ISR changes and "
         "follower catch-up, as Kafka's controller and replica fetchers do them.\n\n"
         "Example: plog brokers stop 2",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    rich_markup_mode=None,
)
app.add_typer(brokers_app, name="brokers")

EXIT = "Exit status: 0 success, 1 error (unknown broker, locked or unreadable data directory), 2 usage error."

#: A topic with more partitions changed than this gets one line of counts in the text
#: output instead of a line per event (--verbose: a line per event always). A broker holds
#: a replica of each of the 50 __consumer_offsets partitions: 50 lines of them say less
#: than one line counting them.
DETAIL_PARTITIONS = 4
SUMMARY_HELP = (f"Text output, per topic: a line per event for topics with up to {DETAIL_PARTITIONS} partitions "
                "changed, one line of counts for a topic with more (e.g. __consumer_offsets); --verbose lists "
                "every event.")


def verbose_option():
    # A command's own --verbose (as produce's): the root's `plog --verbose` reports the run's cost.
    return typer.Option(False, "--verbose", "-v", help="A line per event and per replica, for every topic.")


def _tp(tp) -> str:
    return f"{tp.topic}-{tp.partition}"


@brokers_app.command(
    "list",
    epilog="Example: plog brokers list --format json\n\n"
           "Per broker: rack; state (running, stopped: a controlled shutdown, crashed: its process died and "
           "the controller fences it broker.session.timeout.ms later); fenced (the controller no longer "
           "counts on it: it leads nothing and joins no ISR); since when it is in that state; how many "
           "partitions it leads, holds a replica of and is in the ISR of; its log directory. Reads only.\n\n"
           + EXIT,
)
def list_brokers(
    fmt: ListFormat = list_format_option(),
    data_dir: str = data_dir_option(),
) -> None:
    """List the brokers: state, leaderships, replicas and in-sync replicas."""
    from plog.engine.cluster.brokers import list_brokers as _list_brokers

    from .lookup import iso

    dd = open_data_dir(data_dir)
    rows = [{"id": b.id, "rack": b.rack, "state": b.state, "fenced": b.fenced, "since": iso(b.since_ms),
             "since_ms": b.since_ms, "leaders": b.leaders, "replicas": b.replicas, "in_sync": b.in_sync,
             "log_dir": b.log_dir} for b in _list_brokers(dd)]
    emit(rows, fmt, ["id", "rack", "state", "fenced", "since", "leaders", "replicas", "in_sync", "log_dir"],
         titles={"in_sync": "IN_SYNC", "log_dir": "LOG_DIR"}, right=("id", "leaders", "replicas", "in_sync"))


@brokers_app.command(
    "stop",
    epilog="Examples:\n\n  plog brokers stop 2\n\n  plog brokers stop 2 --crash --format json\n\n"
           "A controlled shutdown (Kafka's): the broker leaves every ISR at once and each partition it "
           "led elects the first other replica in the ISR (new leader epoch). Where it was the last ISR "
           "member the partition goes offline (no leader) unless the topic has "
           "unclean.leader.election.enable=true and another replica's broker runs. "
           "With --crash its process dies instead: no clean-shutdown marker (the next start recovers its "
           "logs), and it stays leader and in its ISRs, unfenced, until broker.session.timeout.ms "
           "(plog init --broker-config) has passed; the first writer after that fences it and elects.\n\n"
           "stdout: the controller's events (--format json: one object with every event and the "
           "offline partitions); a summary goes to stderr. " + SUMMARY_HELP + " Stopping a broker that is "
           "not running changes nothing.\n\n" + EXIT,
)
def stop(
    broker_id: int = typer.Argument(..., metavar="ID", help="Broker id."),
    crash: bool = typer.Option(False, "--crash", help="Kill the broker instead of a controlled shutdown."),
    verbose: bool = verbose_option(),
    fmt: ReportFormat = report_format_option(),
    data_dir: str = data_dir_option(),
) -> None:
    """Stop a broker (controlled shutdown) or crash it: leaderships move, ISRs shrink."""
    from plog.engine.cluster.brokers import BrokerChange, offline_partitions, stop_broker

    dd = open_data_dir(data_dir)
    broker = dd.broker(broker_id)  # unknown id: one-line error
    if not broker.running:
        status(f"broker {broker_id} is already {broker.state}")
        change = BrokerChange(broker_id, "crash" if crash else "stop", offline=offline_partitions(dd))
    else:
        change = stop_broker(dd, broker_id, crash=crash)
    offline = [_tp(tp) for tp in change.offline]
    if fmt is not ReportFormat.text:
        emit_document(fmt=fmt, doc={"broker": change.broker, "action": change.action, "events": [e.to_json() for e in change.events],
                   "offline": offline})
        return
    _print_change(change, verbose)
    if change.events:
        moved = sum(1 for e in change.events if e.kind == "leader")
        shrunk = sum(1 for e in change.events if e.kind == "isr")
        what = "crashed" if crash else "stopped"
        print(f"broker {broker_id} {what}: {moved} leader election(s), {shrunk} ISR change(s); "
              + (f"offline partitions: {', '.join(offline)}" if offline else "no partition is offline"),
              file=sys.stderr)
    elif offline:
        status(f"offline partitions: {', '.join(offline)}")


@brokers_app.command(
    "start",
    epilog="Examples:\n\n  plog brokers start 2\n\n  plog brokers start 2 --format json\n\n"
           "The broker registers again: offline partitions whose ISR holds it elect it leader. Then each "
           "of its follower replicas truncates with the leader-epoch protocol (KIP-101: records the "
           "leader never had in that epoch are removed), fetches from its leader until caught up, and "
           "rejoins the ISR.\n\n"
           "stdout: the controller events, then per replica what the catch-up did (\"t-0 on broker 2: "
           "truncated 12 -> 10 (...); fetched 4096 bytes, offsets 10..41\"), then the ISR changes; "
           "the total of bytes fetched goes to stderr. " + SUMMARY_HELP + " --format json: one object "
           "with all of them. Starting a running broker changes nothing.\n\n" + EXIT,
)
def start(
    broker_id: int = typer.Argument(..., metavar="ID", help="Broker id."),
    verbose: bool = verbose_option(),
    fmt: ReportFormat = report_format_option(),
    data_dir: str = data_dir_option(),
) -> None:
    """Start a stopped or crashed broker: elections, truncation, catch-up, ISR expansion."""
    from plog.engine.cluster.brokers import BrokerChange, offline_partitions, start_broker

    dd = open_data_dir(data_dir)
    broker = dd.broker(broker_id)
    if broker.running:
        status(f"broker {broker_id} is already running")
        change = BrokerChange(broker_id, "start", offline=offline_partitions(dd))
    else:
        change = start_broker(dd, broker_id)
    offline = [_tp(tp) for tp in change.offline]
    report = change.replication
    if fmt is not ReportFormat.text:
        emit_document(fmt=fmt, doc={"broker": change.broker, "action": change.action,
                   "events": [e.to_json() for e in change.events],
                   "catch_ups": [_catch_up_json(c) for c in report.catch_ups],
                   "isr_events": [e.to_json() for e in report.events],
                   "bytes": report.bytes, "offline": offline})
        return
    _print_change(change, verbose)
    if not broker.running:
        truncated = len(report.truncations)
        status(f"broker {broker_id} started: {len(report.catch_ups)} replica(s) caught up, {truncated} truncated, "
               f"{report.bytes} bytes fetched"
               + (f"; offline partitions: {', '.join(offline)}" if offline else ""))


def _print_change(change, verbose: bool) -> None:
    """The text output of stop/start: the controller events, the catch-ups, the ISR changes,
    in that order, each a line; a topic with more than DETAIL_PARTITIONS partitions changed
    is one line of counts instead, where its first line would be (unless ``verbose``)."""
    from plog.engine.cluster.brokers import topic_changes

    counted = {} if verbose else {t.topic: t for t in topic_changes(change) if len(t.partitions) > DETAIL_PARTITIONS}
    said: set[str] = set()

    def line(tp, text: str) -> None:
        if tp is None or tp.topic not in counted:
            print(text)
        elif tp.topic not in said:
            said.add(tp.topic)
            print(_topic_line(counted[tp.topic]))

    for e in change.events:
        line(e.tp, e.describe())
    for c in change.replication.catch_ups:
        line(c.tp, _catch_up_line(c))
    for e in change.replication.events:
        line(e.tp, e.describe())
    sys.stdout.flush()


def _topic_line(t) -> str:
    """``__consumer_offsets: 50 partitions: 18 leader elections, 32 ISR changes (--verbose lists them)``."""
    parts = []
    if t.elections:
        parts.append(_count(t.elections, "leader election")
                     + (f" ({t.unclean_elections} unclean)" if t.unclean_elections else ""))
    if t.caught_up:
        parts.append(f"{_count(t.caught_up, 'replica')} caught up ({t.bytes} bytes fetched"
                     + (f", {t.truncated} truncated first)" if t.truncated else ")"))
    if t.isr_changes:
        parts.append(_count(t.isr_changes, "ISR change"))
    if t.offline:
        parts.append(f"{len(t.offline)} offline: " + ", ".join(f"{t.topic}-{p}" for p in t.offline))
    return f"{t.topic}: {len(t.partitions)} partitions: {', '.join(parts)} (--verbose lists them)"


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'s' * (n != 1)}"


def _catch_up_line(c) -> str:
    parts = []
    t = c.truncation
    if t is not None and t.removed:
        parts.append(f"truncated {t.log_end_offset} -> {t.truncated_to} ({t.reason})")
    if c.bytes:
        parts.append(f"fetched {c.bytes} bytes, offsets {c.records_from}..{c.records_to}")
    return f"{_tp(c.tp)} on broker {c.broker}: " + ("; ".join(parts) if parts else "already caught up")


def _catch_up_json(c) -> dict:
    t = c.truncation
    return {"topic": c.tp.topic, "partition": c.tp.partition, "broker": c.broker, "fetches": c.fetches,
            "bytes": c.bytes, "records_from": c.records_from, "records_to": c.records_to,
            "truncation": None if t is None else {"log_end_offset": t.log_end_offset, "truncated_to": t.truncated_to,
                                                  "removed": t.removed, "reason": t.reason}}
