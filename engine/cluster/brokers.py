"""Brokers of the embedded cluster: list, stop (controlled or crash), start, elections.

Each operation is the controller's work (engine.replication) done under the lock of every
running broker directory, so no writer in another process keeps appending to a leader that
just lost its leadership. ``start`` also runs the started broker's replica fetchers until its
replicas caught up (truncating first with the leader-epoch protocol), which is how it gets
back into the ISRs.

Operations take an optional ``writer`` (a :class:`~plog.engine.cluster.writer.ClusterWriter` the
caller keeps open, as the scenario runner does) and ``clock`` (milliseconds).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field

from plog.engine.cluster.data_dir import DataDir
from plog.engine.cluster.writer import ClusterWriter
from plog.engine.cluster.replication import ControllerEvent, PreferredElection, ReplicationReport, Truncation
from plog.engine.storage.file_names import TopicPartition


def _wall_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class BrokerInfo:
    """One row of ``plog brokers list``."""

    id: int
    rack: str | None
    state: str
    fenced: bool
    since_ms: int | None
    log_dir: str
    #: partitions it leads / holds a replica of / is in the ISR of
    leaders: int
    replicas: int
    in_sync: int


@dataclass
class BrokerChange:
    """What ``stop``/``start`` did: the controller's events and (start) the catch-up."""

    broker: int
    action: str
    events: list[ControllerEvent] = field(default_factory=list)
    replication: ReplicationReport = field(default_factory=ReplicationReport)
    #: partitions left offline (no leader) after the change
    offline: list[TopicPartition] = field(default_factory=list)
    #: truncations at start (high-watermark mode only; leader-epoch truncations happen at
    #: the first fetch and are in ``replication``)
    truncations: list[Truncation] = field(default_factory=list)
    #: where ``start`` spent its time (seconds, wall clock): ``catch_up`` (truncations and
    #: fetches), ``flush`` (the fetched data made durable, the high watermarks checkpointed),
    #: ``close`` (the writer it opened, when it opened one: each broker's checkpoints and
    #: clean-shutdown marker); empty for ``stop``
    seconds: dict[str, float] = field(default_factory=dict)


@dataclass
class TopicChange:
    """What a :class:`BrokerChange` did to one topic's partitions, counted: the summary an
    operator reads when a broker holding many partitions (``__consumer_offsets`` has 50)
    stops or starts, where the events themselves are one line per partition."""

    topic: str
    #: partitions with an event, a catch-up or an ISR change (sorted)
    partitions: list[int] = field(default_factory=list)
    elections: int = 0  # leader elections (clean or unclean)
    unclean_elections: int = 0
    isr_changes: int = 0  # the controller's, and (start) the ISR expansions after catch-up
    caught_up: int = 0  # replicas that fetched until caught up (start)
    truncated: int = 0  # of them, replicas that truncated first
    bytes: int = 0  # fetched by the catch-ups
    offline: list[int] = field(default_factory=list)  # of ``partitions``, those left without a leader


def topic_changes(change: BrokerChange) -> list[TopicChange]:
    """``change`` per topic with an event or a catch-up, in topic-name order (broker events,
    which name no partition, are in no topic)."""
    by_topic: dict[str, TopicChange] = {}
    parts: dict[str, set[int]] = {}

    def of(tp: TopicPartition) -> TopicChange:
        parts.setdefault(tp.topic, set()).add(tp.partition)
        return by_topic.setdefault(tp.topic, TopicChange(tp.topic))

    for e in [*change.events, *change.replication.events]:
        if e.tp is None:
            continue
        t = of(e.tp)
        if e.kind == "leader":
            t.elections += 1
            t.unclean_elections += e.unclean
        elif e.kind == "isr":
            t.isr_changes += 1
    for c in change.replication.catch_ups:
        t = of(c.tp)
        t.caught_up += 1
        t.truncated += c.truncation is not None and c.truncation.removed > 0
        t.bytes += c.bytes
    for tp in change.offline:  # every offline partition of the cluster: those this change touched
        if tp.partition in parts.get(tp.topic, ()):
            by_topic[tp.topic].offline.append(tp.partition)
    for name, t in by_topic.items():
        t.partitions = sorted(parts[name])
        t.offline.sort()
    return [by_topic[name] for name in sorted(by_topic)]


def list_brokers(dd: DataDir) -> list[BrokerInfo]:
    dd.reload()
    out = []
    for b in dd.brokers:
        leaders = replicas = in_sync = 0
        for name in dd.topics():
            t = dd.topic(name)
            t.sync_states()
            for p, reps in enumerate(t.replicas):
                if b.id in reps:
                    replicas += 1
                    st = t.states[p]
                    leaders += st.leader == b.id
                    in_sync += b.id in st.isr
        out.append(BrokerInfo(b.id, b.rack, b.state, b.fenced, b.since_ms, str(dd.broker_log_dir(b.id)),
                              leaders, replicas, in_sync))
    return out


def offline_partitions(dd: DataDir) -> list[TopicPartition]:
    out = []
    for name in dd.topics():
        t = dd.topic(name)
        t.sync_states()
        out.extend(TopicPartition(name, p) for p, st in enumerate(t.states) if st.leader < 0)
    return out


@contextlib.contextmanager
def _controller(dd: DataDir, writer: ClusterWriter | None, timeout_s: float, clock):
    """A writer holding every running broker's lock (the caller's, or a new one closed after),
    and where its event list stood before: taking the locks may already let the controller
    act on elapsed time (fencing, elections), and those events belong to the report too."""
    if writer is not None:
        mark = len(writer.events)
        writer.acquire_all()
        yield writer, mark
        return
    with dd.writer(timeout_s, clock=clock) as w:
        w.acquire_all()
        yield w, 0


def stop_broker(dd: DataDir, broker_id: int, *, crash: bool = False, writer: ClusterWriter | None = None,
                clock=None, timeout_s: float = 30.0) -> BrokerChange:
    """Stop ``broker_id``: a controlled shutdown moves its leaderships to other ISR members
    and takes it out of every ISR (it stays only where it is the last member: that partition
    goes offline unless ``unclean.leader.election.enable``). With ``crash`` its process dies:
    its directory is left without a clean-shutdown marker (the next start recovers), and the
    controller fences it only ``broker.session.timeout.ms`` later."""
    from plog.engine.cluster import replication

    clock = clock or (writer.clock if writer is not None else _wall_ms)
    was_running = dd.broker(broker_id).running  # an unknown id is an error before any lock is taken
    change = BrokerChange(broker_id, "crash" if crash else "stop")
    with _controller(dd, writer, timeout_s, clock) as (w, mark):
        with dd.update() as meta:
            stopped = replication.stop_broker(meta, broker_id, clock(), crash=crash)
        change.events = w.events[mark:] + stopped
        lm = w._managers.get(broker_id)
        w._after_controller(stopped)
        if crash and was_running and lm is None:
            # Nobody had it open: a killed broker leaves no clean-shutdown marker.
            from plog.engine.storage.checkpoints import CleanShutdownFile

            CleanShutdownFile(dd.broker_log_dir(broker_id)).delete()
    change.offline = offline_partitions(dd)
    return change


def start_broker(dd: DataDir, broker_id: int, *, writer: ClusterWriter | None = None, clock=None,
                 timeout_s: float = 30.0, catch_up: bool = True) -> BrokerChange:
    """Start ``broker_id`` again: the controller elects it where a partition was offline
    waiting for it; then (``catch_up``) each of its follower replicas truncates with the
    leader-epoch protocol and fetches until caught up, and rejoins the ISR."""
    from plog.engine.cluster import replication

    clock = clock or (writer.clock if writer is not None else _wall_ms)
    dd.broker(broker_id)
    change = BrokerChange(broker_id, "start")
    with _controller(dd, writer, timeout_s, clock) as (w, mark):
        with dd.update() as meta:
            started = replication.start_broker(meta, broker_id, clock())
        change.events = w.events[mark:] + started
        w.acquire_all()  # its directory is writable again
        w._after_controller(started)
        # A restarted follower truncates again before its next fetch (or, in
        # high-watermark mode, right now).
        for tp in _replicas_on(dd, broker_id):
            if dd.partition_state(tp).leader == broker_id:
                w.fetcher.reset(tp, broker_id)
                continue
            truncation = w.fetcher.become_follower(tp, broker_id, w.replica_log(tp, broker_id))
            if truncation is not None and truncation.removed:
                change.truncations.append(truncation)
        if catch_up:
            t0 = time.perf_counter()
            for tp in _replicas_on(dd, broker_id):
                state = dd.partition_state(tp)
                if state.leader < 0 or not dd.broker(state.leader).running:
                    continue
                # As a follower it catches up; as a (re-elected) leader its followers do.
                report = w.replicate(tp, brokers=None if state.leader == broker_id else {broker_id})
                change.replication.catch_ups.extend(report.catch_ups)
                change.replication.events.extend(report.events)
            t1 = time.perf_counter()
            before = len(w.events)
            w.flush()
            change.replication.events.extend(e for e in w.events[before:] if e.kind == "isr")
            t2 = time.perf_counter()
            change.seconds.update(catch_up=t1 - t0, flush=t2 - t1)
    if catch_up and writer is None:
        change.seconds["close"] = time.perf_counter() - t2
    change.offline = offline_partitions(dd)
    return change


def _replicas_on(dd: DataDir, broker_id: int) -> list[TopicPartition]:
    out = []
    for name in dd.topics():
        for p, reps in enumerate(dd.topic(name).replicas):
            if broker_id in reps:
                out.append(TopicPartition(name, p))
    return out


def elect_preferred_leaders(dd: DataDir, topics=None, *, dry_run: bool = False,
                            writer: ClusterWriter | None = None, clock=None,
                            timeout_s: float = 30.0) -> tuple[list[PreferredElection], list[ControllerEvent]]:
    """Kafka's preferred leader election over ``topics`` (default: all)."""
    from plog.engine.cluster.replication import elect_preferred

    dd.reload()
    names = list(topics) if topics else dd.topics()
    tps = [tp for name in names for tp in dd.partitions(name)]
    if dry_run:
        return elect_preferred(dd.metadata, tps, dry_run=True)
    with _controller(dd, writer, timeout_s, clock or _wall_ms) as (w, mark):
        auto = w.events[mark:]
        with dd.update() as meta:
            elections, events = elect_preferred(meta, tps)
        w._after_controller(events)
    return elections, auto + events


def controller_tick(dd: DataDir, *, writer: ClusterWriter | None = None, clock=None,
                    timeout_s: float = 30.0) -> list[ControllerEvent]:
    """Let the controller act on the passing of time (fence crashed brokers, elect)."""
    with _controller(dd, writer, timeout_s, clock or _wall_ms) as (w, mark):
        w.controller_tick()
        return w.events[mark:]


__all__ = [
    "BrokerChange",
    "BrokerInfo",
    "TopicChange",
    "controller_tick",
    "elect_preferred_leaders",
    "list_brokers",
    "offline_partitions",
    "start_broker",
    "stop_broker",
    "topic_changes",
]
