"""``plog init`` and ``plog topics create|list|describe|alter|delete``."""

from __future__ import annotations

import sys
from typing import List, Optional

import typer

from .common import data_dir_option, open_data_dir
from .app import app
from .output import ListFormat, emit, list_format_option, parse_key_values, status

topics_app = typer.Typer(
    help="Create, list, describe, alter and delete topics of a data directory.\n\n"
         "Example: plog topics create orders --partitions 6 --replication-factor 2",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    rich_markup_mode=None,
)
app.add_typer(topics_app, name="topics")

EXIT = "Exit status: 0 success, 1 error (unknown topic, invalid settings), 2 usage error."
EXIT_WRITE = ("Exit status: 0 success, 1 error (unknown topic, invalid settings, more partitions than the data "
              "directory can hold), 2 usage error, 130 interrupted, 143 terminated.")

ALL_OR_NOTHING = (
    "Creating a topic is all or nothing: a partition count the data directory cannot hold (the free inodes or "
    "space of a broker directory's file system, five inodes a partition; Kafka's 32-bit partition ids) is refused "
    "before anything is written, and a failure or Ctrl-C leaves no trace of the topic. On a terminal, a progress "
    "bar counts the partitions made.\n\n")


def _partition_progress(total: int):
    from .progress import progress

    return progress("Creating partitions", total=total, unit="partitions")


@app.command(
    "init",
    epilog="Example: plog init --brokers 3 --rack r1 --rack r2 --rack r3\n\n"
           "Creates ./plog-data (or --data-dir): cluster.json (plog's metadata) and one Kafka log "
           "directory per broker, broker-1 ... broker-N. Without plog init, the first topics create "
           "or produce makes a 1-broker data directory.\n\n"
           "--broker-config sets what the engine's own maintenance honours, with Kafka's names and defaults: "
           "log.retention.check.interval.ms (300000), log.cleaner.enable (true), log.cleaner.backoff.ms "
           "(15000), log.cleaner.dedupe.buffer.size (134217728). Writers run due retention and cleaning on the "
           "logs they touched when they let go of them.\n\n" + EXIT,
)
def init(
    brokers: int = typer.Option(1, "--brokers", "-b", min=1, max=1000, help="Number of brokers."),
    rack: Optional[List[str]] = typer.Option(None, "--rack", help="Rack of each broker, in order (all or none)."),
    broker_config: Optional[List[str]] = typer.Option(None, "--broker-config",
                                                      help="Broker setting key=value for the engine's maintenance "
                                                           "(repeatable)."),
    data_dir: str = data_dir_option(),
) -> None:
    """Create a data directory: a small Kafka cluster of N brokers on this disk."""
    from plog.engine.cluster.data_dir import DataDir

    from .output import parse_key_values

    dd = DataDir.init(data_dir, brokers, rack or None,
                      broker_configs=parse_key_values(broker_config, "--broker-config") or None)
    racks = "" if not rack else " (racks: " + ", ".join(f"{b.id}={b.rack}" for b in dd.brokers) + ")"
    print(f"initialised {dd.path} with {brokers} broker(s): {', '.join(map(str, dd.broker_ids))}{racks}",
          file=sys.stderr)


@topics_app.command(
    "create",
    epilog="Examples:\n\n"
           "  plog topics create orders --partitions 6 --replication-factor 2 --config retention.ms=86400000\n\n"
           "  plog topics create pinned --replica-assignment 1:2,2:3,3:1\n\n"
           "Replicas are placed with Kafka's algorithm (rack-aware when brokers have racks) on the running "
           "brokers; --replica-assignment gives them by hand: one comma-separated group per partition, replicas "
           "(leader first) separated by ':'.\n\n" + ALL_OR_NOTHING + EXIT_WRITE,
)
def create(
    name: str = typer.Argument(..., help="Topic name (Kafka's rules: [a-zA-Z0-9._-], at most 249)."),
    partitions: Optional[int] = typer.Option(None, "--partitions", "-p", help="Number of partitions (default 1)."),
    replication_factor: Optional[int] = typer.Option(None, "--replication-factor", "-r",
                                                     help="Replicas per partition (default 1)."),
    config: Optional[List[str]] = typer.Option(None, "--config", "-c", help="Topic config key=value (repeatable)."),
    replica_assignment: Optional[str] = typer.Option(None, "--replica-assignment",
                                                     help="Replica lists by hand, e.g. 1:2,2:3,3:1."),
    if_not_exists: bool = typer.Option(False, "--if-not-exists", help="Succeed quietly if the topic exists."),
    data_dir: str = data_dir_option(),
) -> None:
    """Create a topic with Kafka's replica placement."""
    from plog.engine.cluster.placement import parse_replica_assignment

    configs = parse_key_values(config)
    assignment = parse_replica_assignment(replica_assignment) if replica_assignment else None
    if assignment is not None and replication_factor is not None:
        raise typer.BadParameter("give either --replica-assignment or --replication-factor",
                                 param_hint="--replication-factor")
    dd = open_data_dir(data_dir, create=True)
    with _partition_progress(len(assignment) if assignment else (partitions or 1)) as bar:
        topic = dd.create_topic(name, partitions, replication_factor, configs=configs,
                                replica_assignment=assignment, if_not_exists=if_not_exists, progress=bar.callback)
    if topic is None:
        status(f"Topic {name} already exists.")
    else:
        status(f"Created topic {name} with {topic.partitions} partition(s), replication factor "
               f"{topic.replication_factor}.")


@topics_app.command(
    "list",
    epilog="Example: plog topics list --format json\n\nThe table shows partitions, replication factor and "
           "non-default configs; internal topics (__consumer_offsets) only with --internal. --format json/jsonl "
           "adds topic_id (Kafka's form, as plog ls shows it) and source: where the row was read.\n\n"
           "On a Kafka log directory (--data-dir /var/lib/kafka) the topics, ids, configs and replicas are the "
           "last ones its KRaft metadata log (__cluster_metadata-0) records (source \"metadata log\"). A "
           "ZooKeeper-era log directory holds only partition folders (source \"partition folders\"): topic ids "
           "come from partition.metadata, and configs and replication factor, kept in ZooKeeper, show as - "
           "(null in JSON). A status line on stderr says which.\n\n" + EXIT,
)
def list_topics(
    fmt: ListFormat = list_format_option(),
    internal: bool = typer.Option(False, "--internal", help="Include internal topics."),
    data_dir: str = data_dir_option(),
) -> None:
    """List the topics of a data directory."""
    from plog.engine.cluster.metadata import SOURCE_PARTITION_FOLDERS

    dd = open_data_dir(data_dir)
    _note_sources(dd)
    rows = []
    for name in dd.topics(include_internal=internal):
        t = dd.topic(name)
        known = t.source != SOURCE_PARTITION_FOLDERS
        rows.append({"topic": name, "topic_id": t.kafka_topic_id, "partitions": t.partitions,
                     "replication_factor": t.replication_factor if known else None,
                     "configs": dict(t.configs) if known else None, "source": t.source})
    emit(rows, fmt, ["topic", "partitions", "replication_factor", "configs"],
         titles={"replication_factor": "RF"}, right=("partitions", "replication_factor"))


@topics_app.command(
    "describe",
    epilog="Examples:\n\n  plog topics describe orders\n\n  plog topics describe --under-replicated-partitions\n\n"
           "Per partition, the controller's view: LEADER (\"none\" when the partition is offline), its leader "
           "EPOCH, REPLICAS (the preferred leader first), ISR (in-sync replicas); then the leader replica's "
           "high watermark (HW, the end of what consumers see), log START and END offsets, size and segments, "
           "as on disk now. STATUS lists offline, under-replicated (ISR smaller than the replica list) and "
           "under-min-isr (ISR smaller than min.insync.replicas: acks=all produces fail); empty when healthy. "
           "--format json/jsonl adds replicas_state: each replica's broker state, ISR membership, folder, "
           "log end offset, high watermark and latest leader epoch (its leader-epoch-checkpoint's, as plog ls "
           "shows it).\n\n"
           "--under-replicated-partitions, --unavailable-partitions (offline) and --under-min-isr-partitions "
           "(also offline ones, as Kafka) show only the partitions with that problem (given together: any of "
           "them). Reads only.\n\n"
           "Works on a stopped broker's log directory too (--data-dir /var/lib/kafka): LEADER, EPOCH, REPLICAS "
           "and ISR are then the controller's last record in its KRaft metadata log (after a clean shutdown a "
           "partition whose only replica was this broker is offline there, at the epoch after its last "
           "leadership), and the offsets are this broker's replica's: HW from replication-offset-checkpoint, "
           "START as Kafka loads it (the larger of log-start-offset-checkpoint and the first segment's base "
           "offset). Without a metadata log (ZooKeeper era) LEADER and ISR are unknown (-) and EPOCH is the "
           "latest entry of the replica's leader-epoch-checkpoint. --format json/jsonl adds source: where "
           "LEADER, EPOCH, REPLICAS and ISR were read.\n\n" + EXIT,
)
def describe(
    names: Optional[List[str]] = typer.Argument(None, metavar="[TOPIC]...", help="Topics (default: all)."),
    fmt: ListFormat = list_format_option(),
    under_replicated: bool = typer.Option(False, "--under-replicated-partitions",
                                          help="Only partitions whose ISR is smaller than their replica list."),
    unavailable: bool = typer.Option(False, "--unavailable-partitions", help="Only partitions with no leader."),
    under_min_isr: bool = typer.Option(False, "--under-min-isr-partitions",
                                       help="Only partitions whose ISR is smaller than min.insync.replicas "
                                            "(or that have no leader)."),
    data_dir: str = data_dir_option(),
) -> None:
    """Describe topics: leaders, epochs, replicas, ISRs, offsets, sizes and problems."""
    from plog.engine.cluster.metadata import SOURCE_PARTITION_FOLDERS

    dd = open_data_dir(data_dir)
    _note_sources(dd)
    names = names or dd.topics(include_internal=False)
    filtered = under_replicated or unavailable or under_min_isr
    rows = []
    for name in names:
        t = dd.topic(name)
        known = t.source != SOURCE_PARTITION_FOLDERS
        for p in dd.describe_partitions(name):
            if filtered and not ((under_replicated and p.under_replicated) or (unavailable and p.offline)
                                 or (under_min_isr and (p.under_min_isr or p.offline))):
                continue
            flags = [f for f, on in (("offline", p.offline), ("under-replicated", p.under_replicated),
                                     ("under-min-isr", p.under_min_isr)) if on]
            rows.append({
                "topic": name, "partition": p.tp.partition,
                "leader": "none" if p.leader is None and p.source != SOURCE_PARTITION_FOLDERS
                and fmt is ListFormat.table else p.leader,
                "leader_epoch": p.leader_epoch, "replicas": p.replicas, "isr": p.isr,
                "high_watermark": p.high_watermark, "log_start_offset": p.log_start_offset,
                "log_end_offset": p.log_end_offset, "size": p.size, "segments": p.segments,
                "status": ",".join(flags), "offline": p.offline, "under_replicated": p.under_replicated,
                "under_min_isr": p.under_min_isr,
                "replicas_state": [{"broker": r.broker, "state": r.state, "in_sync": r.in_sync, "folder": r.folder,
                                    "log_end_offset": r.log_end_offset, "high_watermark": r.high_watermark,
                                    "leader_epoch": r.leader_epoch} for r in p.replica_states],
                "configs": dict(t.configs) if known else None, "source": p.source})
    emit(rows, fmt, ["topic", "partition", "leader", "leader_epoch", "replicas", "isr", "high_watermark",
                     "log_start_offset", "log_end_offset", "size", "segments", "status"],
         titles={"leader_epoch": "EPOCH", "high_watermark": "HW", "log_start_offset": "START",
                 "log_end_offset": "END"},
         right=("partition", "leader", "leader_epoch", "high_watermark", "log_start_offset", "log_end_offset",
                "size", "segments"))


def _note_sources(dd) -> None:
    """On a Kafka log directory, say on stderr where topic metadata was read and what is not on disk."""
    note = dd.metadata_note()
    if note:
        status(note)


@topics_app.command(
    "alter",
    epilog="Examples:\n\n  plog topics alter orders --partitions 12\n\n"
           "  plog topics alter orders --config retention.ms=3600000 --delete-config segment.bytes\n\n"
           "Partitions can only be added (Kafka cannot remove them); new partitions are placed with "
           "Kafka's algorithm on the running brokers, continuing from partition 0's leader. Keys of existing "
           "records stay where they are, so keyed ordering changes for new records, as in Kafka.\n\n"
           + ALL_OR_NOTHING.replace("Creating a topic", "Adding partitions").replace("of the topic", "of them")
           + EXIT_WRITE,
)
def alter(
    name: str = typer.Argument(..., help="Topic name."),
    partitions: Optional[int] = typer.Option(None, "--partitions", "-p", help="New (larger) partition count."),
    config: Optional[List[str]] = typer.Option(None, "--config", "-c", help="Set a config key=value (repeatable)."),
    delete_config: Optional[List[str]] = typer.Option(None, "--delete-config", help="Reset a config to its default."),
    data_dir: str = data_dir_option(),
) -> None:
    """Add partitions to a topic or change its configs."""
    if partitions is None and not config and not delete_config:
        raise typer.BadParameter("nothing to change: give --partitions, --config or --delete-config",
                                 param_hint="--partitions")
    set_configs = parse_key_values(config)
    dd = open_data_dir(data_dir)
    with _partition_progress(partitions - dd.topic(name).partitions if partitions is not None else 0) as bar:
        topic = dd.alter_topic(name, partitions=partitions, set_configs=set_configs,
                               delete_configs=delete_config, progress=bar.callback)
    status(f"Altered topic {name}: {topic.partitions} partition(s), configs "
           f"{', '.join(f'{k}={v}' for k, v in sorted(topic.configs.items())) or '(defaults)'}.")


@topics_app.command(
    "delete",
    epilog="Example: plog topics delete orders\n\nEach replica folder is renamed <topic>-<p>.<uuid>-delete, "
           "as Kafka does, then removed.\n\n" + EXIT,
)
def delete(
    names: List[str] = typer.Argument(..., metavar="TOPIC...", help="Topics to delete."),
    if_exists: bool = typer.Option(False, "--if-exists", help="Succeed quietly for a missing topic."),
    data_dir: str = data_dir_option(),
) -> None:
    """Delete topics and every replica of their partitions."""
    dd = open_data_dir(data_dir)
    for name in names:
        if if_exists and not dd.has_topic(name):
            continue
        dd.delete_topic(name)
        status(f"Deleted topic {name}.")
