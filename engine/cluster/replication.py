"""Replication in the embedded cluster: the controller's elections and the replica fetchers.

Two halves, as in Kafka:

* **The controller** (functions on :class:`~plog.engine.cluster.metadata.ClusterMetadata`, no files):
  broker stop / crash / fence / start, leader election from the ISR (first replica in
  assignment order that is in the ISR and on a running broker), unclean election when the
  topic allows it (first running replica; the ISR becomes just that replica), preferred
  leader election. Every leader change bumps the leader epoch. The ISR never becomes empty:
  when its last member goes away it stays and the partition is offline (leader -1), as KRaft.
* **The data plane** (:class:`ReplicaFetcher`, used by ``ClusterWriter``): a follower fetch
  reads the leader from the follower's log end offset; the leader reads *before* it records
  the follower's new position, so the response carries the high watermark as it was, and the
  follower learns a higher one only on its next fetch (the delay the first leader-epoch
  story is about). Before its first fetch as a follower, a replica truncates with the
  leader-epoch protocol (OffsetsForLeaderEpoch: the leader's end offset for the follower's
  latest epoch) or, in ``high-watermark`` mode (Kafka before KIP-101, kept to show what
  goes wrong), to its own high watermark.

Invariants:

* Leader high watermark = min(leader LEO, LEO of every other ISR member as the leader last
  saw it), and never decreases; an ISR member the leader has not heard from in this session
  holds it where it is.
* Follower high watermark = min(the leader's high watermark in the last fetch response,
  own LEO).
* A follower is caught up when its fetch offset reached the leader's LEO; it leaves the ISR
  after ``replica.lag.time.max.ms`` without being caught up, and joins it again when its LEO
  reaches the leader's high watermark and the start of the leader's current epoch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from plog.engine.cluster.metadata import id_list
from plog.engine.storage.file_records import WritebackTrail
from plog.engine.storage.leader_epoch_cache import UNDEFINED_EPOCH
from plog.engine.storage.file_names import TopicPartition

TRUNCATION_MODES = ("leader-epoch", "high-watermark")
#: Bytes per follower fetch (Kafka's ``replica.fetch.max.bytes``, 1 MiB there). A fetch is
#: read into one buffer, CRC-checked and written from it: measured on a 295 MB catch-up,
#: 2 MiB fetches took ~0.2 s where 4 MiB took 0.22-0.45 s and 8-16 MiB more (the buffer
#: passes through the caches three times), while smaller ones add per-fetch work.
DEFAULT_FETCH_MAX_BYTES = 2 << 20


# -- the controller ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ControllerEvent:
    """One change the controller made. ``kind``: ``leader`` (a leader election), ``isr``
    (the ISR shrank or grew), ``broker`` (a broker's state changed)."""

    kind: str
    reason: str
    tp: TopicPartition | None = None
    broker: int | None = None
    leader: int | None = None
    previous_leader: int | None = None
    leader_epoch: int | None = None
    isr: tuple[int, ...] = ()
    previous_isr: tuple[int, ...] = ()
    unclean: bool = False

    def describe(self) -> str:
        if self.kind == "broker":
            return f"broker {self.broker}: {self.reason}"
        if self.kind == "isr":
            return (f"{self.tp}: ISR {id_list(self.previous_isr)} -> {id_list(self.isr)} ({self.reason})")
        new = "none (offline)" if self.leader is None or self.leader < 0 else str(self.leader)
        old = "none" if self.previous_leader is None or self.previous_leader < 0 else str(self.previous_leader)
        kind = "unclean election" if self.unclean else "leader"
        return f"{self.tp}: {kind} {old} -> {new}, epoch {self.leader_epoch}, ISR {id_list(self.isr)} ({self.reason})"

    def to_json(self) -> dict:
        return {"kind": self.kind, "reason": self.reason,
                "topic": self.tp.topic if self.tp else None, "partition": self.tp.partition if self.tp else None,
                "broker": self.broker, "leader": self.leader, "previous_leader": self.previous_leader,
                "leader_epoch": self.leader_epoch, "isr": list(self.isr), "previous_isr": list(self.previous_isr),
                "unclean": self.unclean, "message": self.describe()}


def _live(meta) -> set[int]:
    """Brokers that may lead or join an ISR: running ones."""
    return {b.id for b in meta.brokers if b.running}


def _unclean_allowed(meta, topic: str) -> bool:
    from plog.engine.storage.log_config import LogConfig

    return LogConfig.from_properties(meta.topics[topic].configs).unclean_leader_election_enable


def _partitions(meta):
    for name in sorted(meta.topics):
        t = meta.topics[name]
        t.sync_states()
        for p, replicas in enumerate(t.replicas):
            yield TopicPartition(name, p), replicas, t.states[p]


def _elect(meta, tp: TopicPartition, replicas, state, reason: str, events: list,
           previous_isr: list[int] | None = None) -> None:
    """Kafka's election for one partition: keep a leader that is alive and in the ISR, else
    the first replica (assignment order) in the ISR and alive, else (unclean allowed) the
    first alive replica with the ISR reset to it, else no leader."""
    live = _live(meta)
    if state.leader in live and state.leader in state.isr:
        return
    candidates = [b for b in replicas if b in state.isr and b in live]
    unclean = False
    isr = list(state.isr)
    if candidates:
        new = candidates[0]
    else:
        alive = [b for b in replicas if b in live]
        if alive and _unclean_allowed(meta, tp.topic):
            new, isr, unclean = alive[0], [alive[0]], True
        else:
            new = -1
    if new == state.leader and isr == state.isr:
        return
    old, old_isr = state.leader, list(state.isr if previous_isr is None else previous_isr)
    state.leader = new
    state.leader_epoch += 1
    state.isr = isr
    events.append(ControllerEvent("leader", reason, tp, leader=new, previous_leader=old,
                                  leader_epoch=state.leader_epoch, isr=tuple(isr), previous_isr=tuple(old_isr),
                                  unclean=unclean))


def _fence(meta, broker_id: int, reason: str, events: list) -> None:
    """A broker the controller no longer counts on: out of every ISR it is not the last
    member of; its leaderships move (or the partition goes offline)."""
    for tp, replicas, state in _partitions(meta):
        if broker_id not in replicas:
            continue
        old = list(state.isr)
        if broker_id in state.isr and len(state.isr) > 1:
            state.isr = [b for b in state.isr if b != broker_id]
            if state.leader != broker_id:
                events.append(ControllerEvent("isr", reason, tp, isr=tuple(state.isr), previous_isr=tuple(old)))
        if state.leader == broker_id:
            _elect(meta, tp, replicas, state, reason, events, previous_isr=old)


def _replace_broker(meta, broker_id: int, **changes) -> None:
    from dataclasses import replace

    meta.brokers = [replace(b, **changes) if b.id == broker_id else b for b in meta.brokers]


def _find(meta, broker_id: int):
    for b in meta.brokers:
        if b.id == broker_id:
            return b
    from plog.engine.errors import BrokerNotAvailableError

    raise BrokerNotAvailableError(f"broker {broker_id} is not in this data directory "
                                  f"(brokers: {', '.join(str(b.id) for b in meta.brokers)})")


def stop_broker(meta, broker_id: int, now_ms: int, *, crash: bool = False) -> list[ControllerEvent]:
    """A controlled shutdown (fenced at once: ISRs shrink, leaderships move) or, with
    ``crash``, a process death the controller learns of only after the session timeout."""
    b = _find(meta, broker_id)
    events: list[ControllerEvent] = []
    if not b.running:
        return events
    if crash:
        _replace_broker(meta, broker_id, state="crashed", fenced=False, since_ms=now_ms)
        events.append(ControllerEvent("broker", "crashed (still in its ISRs until the session timeout)",
                                      broker=broker_id))
        return events
    _replace_broker(meta, broker_id, state="stopped", fenced=True, since_ms=now_ms)
    events.append(ControllerEvent("broker", "stopped (controlled shutdown)", broker=broker_id))
    _fence(meta, broker_id, f"broker {broker_id} stopped", events)
    return events


def fence_expired(meta, now_ms: int, session_timeout_ms: int) -> list[ControllerEvent]:
    """Fence every crashed broker whose session timed out (``broker.session.timeout.ms``)."""
    events: list[ControllerEvent] = []
    for b in list(meta.brokers):
        if b.state == "crashed" and not b.fenced and (b.since_ms or 0) + session_timeout_ms <= now_ms:
            _replace_broker(meta, b.id, fenced=True)
            events.append(ControllerEvent("broker", f"fenced: no heartbeat for {session_timeout_ms} ms",
                                          broker=b.id))
            _fence(meta, b.id, f"broker {b.id} fenced", events)
    return events


def start_broker(meta, broker_id: int, now_ms: int) -> list[ControllerEvent]:
    """The broker registers again: offline partitions whose ISR holds it (or that allow an
    unclean election) get a leader. It rejoins other ISRs once its replicas caught up."""
    b = _find(meta, broker_id)
    events: list[ControllerEvent] = []
    if b.running:
        return events
    was_fenced = b.fenced
    _replace_broker(meta, broker_id, state="running", fenced=False, since_ms=now_ms)
    events.append(ControllerEvent("broker", "started", broker=broker_id))
    for tp, replicas, state in _partitions(meta):
        if broker_id not in replicas:
            continue
        if not was_fenced and state.leader == broker_id:
            # It came back before the controller noticed: still the leader, but a new
            # incarnation with an empty memory of its followers, so a new epoch.
            state.leader_epoch += 1
            events.append(ControllerEvent("leader", f"broker {broker_id} restarted", tp, leader=broker_id,
                                          previous_leader=broker_id, leader_epoch=state.leader_epoch,
                                          isr=tuple(state.isr), previous_isr=tuple(state.isr)))
        elif state.leader < 0:
            _elect(meta, tp, replicas, state, f"broker {broker_id} started", events)
    return events


def elect_offline(meta) -> list[ControllerEvent]:
    """Elect a leader for every offline partition that now can have one (a config change
    allowed unclean election, or an ISR member is running)."""
    events: list[ControllerEvent] = []
    for tp, replicas, state in _partitions(meta):
        if state.leader < 0:
            _elect(meta, tp, replicas, state, "offline partition", events)
    return events


@dataclass(frozen=True)
class PreferredElection:
    """``plog assign preferred-leaders`` for one partition."""

    tp: TopicPartition
    replicas: tuple[int, ...]
    preferred_leader: int
    leader: int
    elected: bool
    message: str

    @property
    def ok(self) -> bool:
        return self.leader == self.preferred_leader


def elect_preferred(meta, tps, *, dry_run: bool = False) -> tuple[list[PreferredElection], list[ControllerEvent]]:
    """Kafka's preferred leader election: where the first replica is alive and in the ISR
    and does not lead, it becomes leader (new epoch)."""
    live = _live(meta)
    out, events = [], []
    wanted = set(tps) if tps is not None else None
    for tp, replicas, state in _partitions(meta):
        if wanted is not None and tp not in wanted:
            continue
        preferred = replicas[0]
        if state.leader == preferred:
            out.append(PreferredElection(tp, tuple(replicas), preferred, state.leader, False,
                                         "Valid replica already elected"))
            continue
        if preferred not in live:
            msg = f"Preferred replica {preferred} is not available (broker {_find(meta, preferred).state})"
            out.append(PreferredElection(tp, tuple(replicas), preferred, state.leader, False, msg))
            continue
        if preferred not in state.isr:
            out.append(PreferredElection(tp, tuple(replicas), preferred, state.leader, False,
                                         f"Preferred replica {preferred} is not in the ISR {id_list(state.isr)}"))
            continue
        if dry_run:
            out.append(PreferredElection(tp, tuple(replicas), preferred, state.leader, False,
                                         f"Would elect {preferred} (leader now {state.leader})"))
            continue
        old = state.leader
        state.leader = preferred
        state.leader_epoch += 1
        events.append(ControllerEvent("leader", "preferred leader election", tp, leader=preferred,
                                      previous_leader=old, leader_epoch=state.leader_epoch,
                                      isr=tuple(state.isr), previous_isr=tuple(state.isr)))
        out.append(PreferredElection(tp, tuple(replicas), preferred, preferred, True,
                                     f"Elected {preferred} (leader was {old}), epoch {state.leader_epoch}"))
    return out, events


def needs_tick(meta, now_ms: int, session_timeout_ms: int) -> bool:
    """Whether :func:`tick` would change anything (checked without any lock)."""
    for b in meta.brokers:
        if b.state == "crashed" and not b.fenced and (b.since_ms or 0) + session_timeout_ms <= now_ms:
            return True
    live = _live(meta)
    for tp, replicas, state in _partitions(meta):
        if state.leader < 0 and any(b in live for b in replicas):
            if any(b in live for b in state.isr) or _unclean_allowed(meta, tp.topic):
                return True
    return False


def tick(meta, now_ms: int, session_timeout_ms: int) -> list[ControllerEvent]:
    """What the controller does on its own as time passes: fence timed-out brokers, elect
    leaders for offline partitions that can have one."""
    return fence_expired(meta, now_ms, session_timeout_ms) + elect_offline(meta)


# -- the data plane ------------------------------------------------------------------------------


@dataclass
class FollowerState:
    """What a leader knows of one follower (Kafka's ``Replica`` state), for one writer
    session. ``log_end_offset`` -1: not heard from yet."""

    last_caught_up_ms: int
    log_end_offset: int = -1
    last_fetch_leader_leo: int = -1
    last_fetch_ms: int = -1
    #: The follower ran its truncation (leader-epoch or high-watermark) since it became
    #: a follower of the current leader epoch in this session.
    truncated: bool = False
    #: The follower's side: where the writeback of what its fetches appended stands.
    writeback: WritebackTrail = field(default_factory=WritebackTrail, repr=False, compare=False)
    #: Where in the leader's log the last fetch ended (``Log.ReadPosition``), for the next.
    read_position: object = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class Truncation:
    """A follower truncation: from ``log_end_offset`` to ``truncated_to`` (== LEO: nothing
    removed), and how the offset was found."""

    tp: TopicPartition
    broker: int
    log_end_offset: int
    truncated_to: int
    reason: str

    @property
    def removed(self) -> int:
        return self.log_end_offset - self.truncated_to


@dataclass
class CatchUp:
    """One follower's work in one replication pass."""

    tp: TopicPartition
    broker: int
    fetches: int = 0
    bytes: int = 0
    records_from: int | None = None
    records_to: int | None = None
    truncation: Truncation | None = None


def epoch_truncation_offset(follower, leader) -> tuple[int, str]:
    """The offset a follower truncates to before fetching (KIP-101/KIP-279): ask the leader
    the end offset of the follower's latest epoch; if the leader does not know that epoch,
    ask again with the epoch the leader answered (the largest it has at or below). Falls
    back to the follower's high watermark when either side has no epochs."""
    leo = follower.log_end_offset
    f_epoch = follower.epoch_cache.latest_epoch
    if f_epoch is None:
        return min(follower.high_watermark, leo), "no leader epochs on the follower: its high watermark"
    l_epoch, l_end = leader.epoch_cache.end_offset_for(f_epoch, leader.log_end_offset)
    if l_epoch == UNDEFINED_EPOCH:
        return min(follower.high_watermark, leo), f"the leader has no epoch at or below {f_epoch}: the high watermark"
    if l_epoch == f_epoch:
        return min(l_end, leo), f"leader's end offset for epoch {f_epoch} is {l_end}"
    # The leader's answer is for an older epoch: the follower's own end of that epoch bounds it.
    _, f_end = follower.epoch_cache.end_offset_for(l_epoch, leo)
    if f_end < 0:  # the follower has no end for that epoch: the leader's answer bounds it
        return min(l_end, leo), f"epoch {f_epoch} unknown to the leader; its epoch {l_epoch} ends at {l_end}"
    return min(l_end, f_end, leo), (f"epoch {f_epoch} unknown to the leader; both end epoch {l_epoch} "
                                    f"at {min(l_end, f_end)}")


class ReplicaFetcher:
    """Follower fetches for one writer session. ``clock()`` gives milliseconds."""

    def __init__(self, clock, *, truncation: str = "leader-epoch", fetch_max_bytes: int = DEFAULT_FETCH_MAX_BYTES,
                 lag_time_max_ms: int = 30000):
        if truncation not in TRUNCATION_MODES:
            raise ValueError(f"truncation must be one of {', '.join(TRUNCATION_MODES)}, not {truncation!r}")
        self.clock = clock
        self.truncation = truncation
        self.fetch_max_bytes = fetch_max_bytes
        self.lag_time_max_ms = lag_time_max_ms
        self.started_ms = clock()
        # (tp, broker) -> state, valid for ``_epochs[tp]``; reset when the leader epoch changes.
        self._followers: dict[tuple[TopicPartition, int], FollowerState] = {}
        self._epochs: dict[TopicPartition, int] = {}

    def follower_state(self, tp: TopicPartition, broker: int, leader_epoch: int) -> FollowerState:
        if self._epochs.get(tp) != leader_epoch:
            # A new leader (or this session's first look): forget what the old one knew; the
            # followers count as caught up now, as Kafka's makeLeader does.
            for key in [k for k in self._followers if k[0] == tp]:
                del self._followers[key]
            self._epochs[tp] = leader_epoch
        fs = self._followers.get((tp, broker))
        if fs is None:
            fs = self._followers[(tp, broker)] = FollowerState(last_caught_up_ms=self.clock())
        return fs

    def reset(self, tp: TopicPartition, broker: int) -> None:
        """The follower restarted: it truncates again before its next fetch."""
        fs = self._followers.get((tp, broker))
        if fs is not None:
            fs.truncated = False
            fs.log_end_offset = -1

    def become_follower(self, tp: TopicPartition, broker: int, follower) -> Truncation | None:
        """A replica (re)starting as a follower. Before KIP-101 it truncated to its own high
        watermark right away; with leader epochs it waits for the leader's answer (the
        truncation happens before its first fetch), so a leader that dies meanwhile costs
        nothing."""
        self.reset(tp, broker)
        if self.truncation != "high-watermark":
            return None
        leo = follower.log_end_offset
        target = min(follower.high_watermark, leo)
        follower.truncate_to(target)
        return Truncation(tp, broker, leo, target, "its own high watermark, at start (no leader epochs)")

    def truncate(self, tp: TopicPartition, broker: int, follower, leader) -> Truncation:
        leo = follower.log_end_offset
        if self.truncation == "high-watermark":
            target, reason = min(follower.high_watermark, leo), "its own high watermark (no leader epochs)"
        else:
            target, reason = leo, "nothing diverged"
            for _ in range(64):  # each round removes at least one epoch; bounded for safety
                offset, why = epoch_truncation_offset(follower, leader)
                if offset >= follower.log_end_offset:
                    break
                follower.truncate_to(offset)
                target, reason = offset, why
        if follower.log_end_offset > target:
            follower.truncate_to(target)
        return Truncation(tp, broker, leo, follower.log_end_offset, reason)

    def fetch(self, tp: TopicPartition, leader, follower, fs: FollowerState, isr, leader_id: int,
              followers: dict[int, FollowerState]) -> tuple[int, int]:
        """One fetch request of ``follower`` from ``leader``; returns (bytes, records) appended.
        A follower whose log went offline (an I/O error) fetches nothing: as Kafka's fetcher
        drops the partitions of a log directory that failed, it falls behind and out of the ISR."""
        if follower.failure is not None:
            return 0, 0
        now = self.clock()
        offset = follower.log_end_offset
        if offset > leader.log_end_offset:
            # Ahead of the leader (a high-watermark truncation kept more than the new leader
            # has): Kafka's fetcher truncates to the leader's end, keeping what lies below.
            follower.truncate_to(leader.log_end_offset)
            offset = follower.log_end_offset
        elif offset < leader.log_start_offset:
            # The leader deleted those records (or a new, empty replica): start over at the
            # leader's log start.
            follower.truncate_fully_and_start_at(leader.log_start_offset)
            offset = follower.log_end_offset
        # Read first (the response's high watermark is the one from before this fetch)...
        hw_in_response = leader.high_watermark
        fetched = leader.read(offset, self.fetch_max_bytes, max_offset=leader.log_end_offset, at=fs.read_position)
        data = fetched.records
        fs.read_position = None
        # ...then record where the follower is (the fetch offset: what it already has).
        leader_leo = leader.log_end_offset
        if offset >= leader_leo:
            fs.last_caught_up_ms = max(fs.last_caught_up_ms, now)
        elif offset >= fs.last_fetch_leader_leo >= 0:
            fs.last_caught_up_ms = max(fs.last_caught_up_ms, fs.last_fetch_ms)
        fs.log_end_offset = offset
        fs.last_fetch_leader_leo = leader_leo
        fs.last_fetch_ms = now
        advance_high_watermark(leader, isr, leader_id, followers)
        records = 0
        if data:
            info = follower.append_as_follower(data, flush=False)  # the read's own buffer: no copy
            records = info.last_offset - info.first_offset + 1
            # The next fetch asks for what follows these bytes: it starts right after them.
            fs.read_position = leader.position_after(fetched, info.last_offset + 1)
            # A follower catching up fsyncs hundreds of MB once, at the end: writeback started
            # along the way overlaps the fetches. One append is the tail of one segment (a
            # roll happens before it, never inside).
            fs.writeback.appended(follower.active_segment, len(data))
        follower.high_watermark = max(follower.log_start_offset, min(hw_in_response, follower.log_end_offset))
        if follower.log_start_offset < leader.log_start_offset <= follower.high_watermark:
            follower.delete_records_before(leader.log_start_offset)
        return len(data), records


def advance_high_watermark(leader, isr, leader_id: int, followers: dict[int, FollowerState]) -> bool:
    """Move the leader's high watermark to the minimum LEO over the ISR (never down); an ISR
    member with no known position holds it. True when it moved."""
    new = leader.log_end_offset
    for b in isr:
        if b == leader_id:
            continue
        fs = followers.get(b)
        if fs is None or fs.log_end_offset < 0:
            return False
        new = min(new, fs.log_end_offset)
    if new > leader.high_watermark:
        leader.high_watermark = new
        return True
    return False


@dataclass
class ReplicationReport:
    """What one replication pass over some partitions did."""

    catch_ups: list[CatchUp] = field(default_factory=list)
    events: list[ControllerEvent] = field(default_factory=list)

    @property
    def bytes(self) -> int:
        return sum(c.bytes for c in self.catch_ups)

    @property
    def truncations(self) -> list[Truncation]:
        return [c.truncation for c in self.catch_ups if c.truncation is not None and c.truncation.removed]


__all__ = [
    "CatchUp",
    "ControllerEvent",
    "FollowerState",
    "PreferredElection",
    "ReplicaFetcher",
    "ReplicationReport",
    "TRUNCATION_MODES",
    "Truncation",
    "advance_high_watermark",
    "elect_offline",
    "elect_preferred",
    "epoch_truncation_offset",
    "fence_expired",
    "needs_tick",
    "start_broker",
    "stop_broker",
    "tick",
]
