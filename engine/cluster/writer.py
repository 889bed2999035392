"""The write path of a data directory: :class:`ClusterWriter`, what a partition leader's
broker does with a produce request, and what its followers' fetchers do after it.

Invariants:

* A writer holds the Kafka ``.lock`` of every running broker directory it writes (taken in
  ascending broker id, so writers in several processes never wait for each other in a
  cycle) and re-reads the metadata when it takes its first lock: leaders and ISRs change only
  under the locks of every running replica of a partition.
* Appends go to the leader with its leader epoch; before anything is acknowledged the
  followers on running, unpaused brokers fetch (engine.cluster.replication), the high
  watermark moves and ``acks=all`` appends are checked against it.
* A stopped or crashed broker's directory is never opened.
* A round flushed in the background (:meth:`ClusterWriter.flush_in_background`) is
  acknowledged only after its own fsyncs and checkpoint and after the round before it;
  appends of the next round run beside its fsyncs, never beside its followers' fetches
  from the leader; a high-watermark checkpoint never holds more than the rounds whose
  fsyncs it follows.
"""

from __future__ import annotations

import threading
import time
import uuid
from contextlib import contextmanager
from functools import partial

from plog.engine.cluster.metadata import PartitionState, id_list
from plog.engine.errors import (
    BrokerNotAvailableError,
    EngineError,
    LeaderNotAvailableError,
    LockTimeoutError,
    LogDirLockedError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    close_after,
)
from plog.engine.interrupts import uninterrupted, whole
from plog.engine.storage.file_names import TopicPartition
from plog.engine.storage.log import Log, LogAppendInfo
from plog.engine.storage.log_manager import LogManager


class ClusterWriter:
    """Holds the ``.lock`` of the broker directories it touches (taken on first use, waiting up
    to ``timeout_s`` for another plog process) and appends through their ``LogManager``s.

    Appends go to the partition's leader (with its leader epoch); at :meth:`flush` the
    followers on running brokers fetch from it (engine.replication), the high watermark
    moves, ISRs shrink or grow, and ``acks=all`` appends are checked against it. A stopped
    or crashed broker's directory is never opened.

    Use as a context manager: closing writes the checkpoints and the clean-shutdown marker of
    every broker directory it opened and releases the locks, so the next writer (in this or
    another process) opens only the partitions it needs.
    """

    def __init__(self, data_dir, timeout_s: float, *, maintenance: bool = True, clock=None,
                 truncation: str = "leader-epoch", paused: set[int] | None = None):
        from plog.engine.cluster.replication import ReplicaFetcher

        self.data_dir = data_dir
        self.timeout_s = timeout_s
        # Run due retention/compaction on the touched logs when the locks are given back.
        self.maintenance = maintenance
        self.clock = clock or (lambda: int(time.time() * 1000))
        #: Brokers whose replica fetchers are paused (a slow or partitioned follower): they
        #: fetch nothing and fall out of the ISR after replica.lag.time.max.ms.
        self.paused: set[int] = set(paused or ())
        settings = self._settings()
        self.fetcher = ReplicaFetcher(self.clock, truncation=truncation,
                                      lag_time_max_ms=int(settings["replica.lag.time.max.ms"]))
        self.session_timeout_ms = int(settings["broker.session.timeout.ms"])
        #: Controller events (elections, ISR changes) this writer caused, oldest first.
        self.events: list = []
        self._managers: dict[int, LogManager] = {}
        #: Every manager this writer constructed and has not closed yet, registered before
        #: its constructor runs: one a stop orphaned (between the constructor and its entry
        #: in _managers) is still closed with the others.
        self._constructed: list[LogManager] = []
        self._dirty: dict[TopicPartition, list[Log]] = {}
        self._acks: list[tuple[TopicPartition, int, int]] = []
        self._pool = None  # threads for concurrent fsyncs (_all_at_once), made on first use
        self._reordering = False
        #: The flush started by :meth:`flush_in_background` and not yet waited for: every
        #: method that reads or writes the logs waits for it first (:meth:`_settle`).
        self._flushing = None
        self._flusher = None  # its thread, made on first use
        self._flusher_ident = None
        #: Set when the flush in flight, a replicated round flushed in two phases
        #: (_flush_in_phases), is done replicating: the next round's appends may go beside
        #: its fsyncs and checkpoints, which run on the committer's thread.
        self._replicated: threading.Event | None = None
        self._committer = None  # that thread, made on first use
        #: The flush in flight only fsyncs and checkpoints below offsets taken when it
        #: started: appends may run beside it (:meth:`flush_in_background`, :meth:`beside_flush`).
        self._beside = False
        self._appending = False  # in a beside_flush block

    def _settings(self) -> dict[str, str]:
        from plog.engine.maintenance.runner import engine_settings

        return engine_settings(self.data_dir.metadata.broker_configs)

    def manager(self, broker_id: int) -> LogManager:
        self._settle()
        lm = self._managers.get(broker_id)
        if lm is None:
            self.acquire([broker_id])
            lm = self._managers[broker_id]
        return lm

    def acquire(self, broker_ids) -> bool:
        """Hold the ``.lock`` of every broker in ``broker_ids``, taking locks in ascending broker
        id only (so writers in several processes never wait for each other in a cycle): a
        lower id than one already held means giving everything back and starting over.

        Returns True when the metadata was re-read, which happens each time the first lock is
        taken: leaders and ISRs change only under the locks of every running replica of the
        partition (this writer's ISR updates, or controller work that holds every lock), so
        metadata read then stays true for the partitions whose replicas it holds."""
        self._settle()
        need = sorted(set(broker_ids) - set(self._managers))
        if not need:
            return False
        self._wait_flush()  # an append beside a flush: opening brokers (or closing them all) waits for it
        from plog.engine.storage.descriptor_budget import budget

        # Each lock is a descriptor held to the end: refuse now, naming ulimit -n, rather than
        # fail on EMFILE half-way through the writes.
        budget().require(len(need))
        opened = {}
        if self._managers and need[0] < max(self._managers):
            # Out of order: free locks can still be taken without waiting (no cycle can
            # form without a wait); a busy one means giving everything back.
            try:
                for b in need:
                    opened[b] = self._open_manager(b, wait=False)
            except LogDirLockedError:
                for lm in opened.values():
                    lm.close()
                opened = {}
                held = set(self._managers)
                self._reorder_close()
                need = sorted(held | set(broker_ids))
        first = not self._managers
        opened.update({b: self._open_manager(b) for b in need if b not in opened})
        self._managers.update(opened)
        if first:
            self.data_dir.reload()
        self.adopt_metadata_topics(opened.values())
        if first and not self.data_dir.kafka_log_dir:
            from plog.engine.cluster.replication import needs_tick

            if needs_tick(self.data_dir.metadata, self.clock(), self.session_timeout_ms):
                self.controller_tick()
        return first

    def adopt_metadata_topics(self, managers=None) -> None:
        """plog's metadata is the source of topic ids and configs for every log directory:
        hand them to ``managers`` (default: every one this writer holds)."""
        topics = {name: {"topic_id": t.topic_id, "configs": dict(t.configs)}
                  for name, t in self.data_dir.metadata.topics.items()}
        for lm in (self._managers.values() if managers is None else managers):
            lm.adopt_topics(topics)

    def acquire_all(self) -> None:
        """Hold the lock of every running broker (controller work)."""
        while True:
            self.data_dir.reload()
            running = self.data_dir.running_brokers()
            if not self.acquire(running) and set(running) <= set(self._managers):
                return

    def controller_tick(self) -> list:
        """Fence brokers whose session timed out and elect leaders for offline partitions,
        holding every running broker's lock (so no other writer works from stale leaders)."""
        from plog.engine.cluster.replication import tick

        self.acquire_all()
        with self.data_dir.update() as meta:
            events = tick(meta, self.clock(), self.session_timeout_ms)
        self._after_controller(events)
        return events

    def _after_controller(self, events) -> None:
        self.events.extend(events)
        for e in events:
            if e.kind == "broker" and e.broker in self._managers and not self.data_dir.broker(e.broker).running:
                self._drop_manager(e.broker, crash=e.reason.startswith("crashed"))
        for e in events:
            # Kafka's makeLeader: the new leader's epoch starts at its LEO in its
            # leader-epoch-checkpoint now, not at its first append.
            if e.kind == "leader" and e.leader is not None and e.leader >= 0 and e.leader in self._managers:
                try:
                    self.leader_log(e.tp)
                except EngineError:
                    pass  # the partition went away or its leader stopped since: nothing to start

    def _drop_manager(self, broker_id: int, *, crash: bool) -> None:
        lm = self._managers.pop(broker_id, None)
        if lm is None:
            return
        for tp in list(self._dirty):
            self._dirty[tp] = [log for log in self._dirty[tp] if log.dir.parent != lm.log_dirs[0]]
        if crash:
            lm.abandon()
        else:
            lm.close()

    def _reorder_close(self) -> None:
        """Give back every lock to retake them in order: appended data is flushed, and its
        replication and acks checks wait for the next :meth:`flush` (after the retake)."""
        dirty, acks = list(self._dirty), self._acks
        self._reordering = True
        try:
            self._close_managers()
        finally:
            self._reordering = False
        self._dirty = {tp: [] for tp in dirty}
        self._acks = acks

    def _open_manager(self, broker_id: int, *, wait: bool = True) -> LogManager:
        log_dir = self.data_dir.broker_log_dir(broker_id)
        deadline = time.monotonic() + self.timeout_s
        delay = 0.002
        while True:
            try:
                lm = LogManager([log_dir], node_id=broker_id, cluster_id=self.data_dir.metadata.cluster_id, lazy=True,
                                on_open=self._constructed.append)
                break
            except LogDirLockedError:
                if not wait:
                    raise
                if time.monotonic() >= deadline:
                    raise LockTimeoutError(
                        f"timed out after {self.timeout_s:g}s waiting for the lock of {log_dir} "
                        "(another plog process or a Kafka broker is writing it)") from None
                time.sleep(delay)
                delay = min(delay * 2, 0.05)
        return lm

    def _running(self, replicas: list[int]) -> list[int]:
        if self.data_dir.kafka_log_dir:
            return list(replicas)
        return [b for b in replicas if self.data_dir.broker(b).running]

    def _replicas(self, tp: TopicPartition) -> list[int]:
        """``tp``'s replicas, with the locks of those on running brokers held (metadata current)."""
        while True:
            replicas = self.data_dir.replicas(tp)
            if not self.acquire(self._running(replicas)):
                return replicas

    def replica_log(self, tp, broker_id: int) -> Log:
        """The writable log of ``tp``'s replica on ``broker_id`` (folder created if needed).
        Only a current replica on a running broker: a folder elsewhere would be a write
        nobody reads, and a stopped broker's directory is not touched."""
        self._settle()
        tp = TopicPartition(*tp)
        if broker_id not in self._replicas(tp):
            raise BrokerNotAvailableError(f"broker {broker_id} holds no replica of {tp} "
                                          f"(replicas: {self.data_dir.replicas(tp)})")
        if not self.data_dir.kafka_log_dir and not self.data_dir.broker(broker_id).running:
            raise BrokerNotAvailableError(f"broker {broker_id} is {self.data_dir.broker(broker_id).state}: "
                                          f"its replica of {tp} cannot be written (plog brokers start {broker_id})")
        lm = self.manager(broker_id)
        log = lm.get_log(tp)
        if log is None:
            self._wait_flush()  # an append beside a flush: a new log (its manager's checkpoints) waits
            t = self.data_dir.topic(tp.topic)
            log = lm.get_or_create_log(tp, topic_id=uuid.UUID(t.topic_id))
        if not self.data_dir.kafka_log_dir:
            log.replicated = True
        return log

    def leader_log(self, tp) -> tuple[Log, "PartitionState"]:
        """The leader replica of ``tp`` and its partition state; raises
        :class:`LeaderNotAvailableError` when it has none or its broker crashed."""
        tp = TopicPartition(*tp)
        self._replicas(tp)
        state = self.data_dir.partition_state(tp)
        leader_id = self.data_dir.leader(tp)
        broker = self.data_dir.broker(leader_id) if not self.data_dir.kafka_log_dir else None
        if broker is not None and not broker.running:
            raise LeaderNotAvailableError(
                f"the leader of {tp}, broker {leader_id}, {broker.state}; the controller fences it "
                f"{self.session_timeout_ms} ms after (broker.session.timeout.ms) and elects another leader")
        log = self.replica_log(tp, leader_id)
        latest = log.epoch_cache.latest_epoch
        if latest is None or latest < state.leader_epoch:
            # Kafka's makeLeader: the new epoch starts at the leader's LEO, so followers that
            # ask for an older epoch learn where it ended here.
            log.epoch_cache.assign(state.leader_epoch, log.log_end_offset)
        return log, state

    def _leader_for(self, tp: TopicPartition, acks: int):
        """The leader log of ``tp`` and its state, for a produce with ``acks``: with ``acks=-1``
        the ISR must hold ``min.insync.replicas`` members (else :class:`NotEnoughReplicasError`,
        before anything is written)."""
        leader, state = self.leader_log(tp)
        if acks == -1 and not self.data_dir.kafka_log_dir:
            min_isr = self.data_dir.topic_config(tp.topic).min_insync_replicas
            if len(state.isr) < min_isr:
                raise NotEnoughReplicasError(
                    f"The size of the current ISR {id_list(state.isr)} is insufficient to satisfy the min.isr "
                    f"requirement of {min_isr} for partition {tp}")
        return leader, state

    @whole
    def append(self, tp, batch: bytes, *, flush: bool = False, acks: int = -1) -> LogAppendInfo:
        """Append one producer batch to the leader of ``tp`` (its followers fetch it at
        :meth:`flush`). ``acks``: 0, 1 or -1 (all). With ``acks=-1`` the ISR must hold
        ``min.insync.replicas`` members (else :class:`NotEnoughReplicasError`, nothing
        written) and :meth:`flush` fails unless every ISR member replicated the batch.
        With ``flush=False`` call :meth:`flush` before acknowledging."""
        tp = TopicPartition(*tp)
        leader, state = self._leader_for(tp, acks)
        info = leader.append_as_leader(batch, leader_epoch=state.leader_epoch, flush=flush)
        self._dirty.setdefault(tp, [leader])
        if acks == -1:
            self._acks.append((tp, info.last_offset + 1, len(state.isr)))
        if flush:
            self._replicate_dirty()
        return info

    @whole
    def append_batches(self, tp, batches, *, acks: int = -1) -> list[LogAppendInfo]:
        """Append producer batches, in order, to the leader of ``tp``: the same result, byte
        for byte, as :meth:`append` of each in turn with ``flush=False`` (one produce request
        of many batches to one partition). Returns one :class:`LogAppendInfo` per batch; a
        failure raises after the batches before it were appended (as :meth:`append` would)."""
        tp = TopicPartition(*tp)
        leader, state = self._leader_for(tp, acks)
        before = leader.log_end_offset
        try:
            infos = leader.append_batches_as_leader(batches, leader_epoch=state.leader_epoch)
        except BaseException:
            # The batches before the failing one are in the leader's log, as after as many
            # calls of append: they are replicated (and waited for) at flush like those.
            if leader.log_end_offset > before:
                self._appended(tp, leader, leader.log_end_offset, len(state.isr), acks)
            raise
        if infos:
            self._appended(tp, leader, infos[-1].last_offset + 1, len(state.isr), acks)
        return infos

    def _appended(self, tp, leader: Log, end_offset: int, isr_size: int, acks: int) -> None:
        """Mark ``tp`` for replication at flush, and with acks=all wait there for ``end_offset``."""
        self._dirty.setdefault(tp, [leader])
        if acks == -1:
            self._acks.append((tp, end_offset, isr_size))

    @whole
    def append_control(self, tp, producer_id: int, producer_epoch: int, *, commit: bool) -> LogAppendInfo:
        """Write a transaction marker to the leader of ``tp``; followers fetch it at flush."""
        self._settle()
        tp = TopicPartition(*tp)
        leader, state = self.leader_log(tp)
        info = leader.append_end_txn_marker(producer_id, producer_epoch, commit=commit,
                                            leader_epoch=state.leader_epoch)
        self._dirty.setdefault(tp, [leader])
        return info

    # -- replication ----------------------------------------------------------------------------

    def replicate(self, tp, *, brokers=None, until_caught_up: bool = True):
        """Run the fetchers of ``tp``'s followers on running, unpaused brokers (``brokers``:
        only those): truncate first when they have not yet in this session, then fetch until
        they have the leader's log and high watermark. Shrinks the ISR by
        ``replica.lag.time.max.ms``, grows it when a follower caught up. Returns a
        :class:`~plog.engine.cluster.replication.ReplicationReport`."""
        self._settle()
        from plog.engine.cluster.replication import CatchUp, ReplicationReport, advance_high_watermark

        tp = TopicPartition(*tp)
        report = ReplicationReport()
        replicas = self._replicas(tp)
        leader, state = self.leader_log(tp)
        leader_id = state.leader
        fetcher = self.fetcher
        active = [b for b in replicas if b != leader_id and self.data_dir.broker(b).running
                  and b not in self.paused and (brokers is None or b in brokers)]
        followers = {b: fetcher.follower_state(tp, b, state.leader_epoch) for b in replicas if b != leader_id}
        logs = {}
        touched = self._dirty.setdefault(tp, [leader])
        for b in active:
            log = logs[b] = self.replica_log(tp, b)
            if log not in touched:
                touched.append(log)
            c = CatchUp(tp, b)
            report.catch_ups.append(c)
            fs = followers[b]
            if not fs.truncated:
                c.truncation = fetcher.truncate(tp, b, log, leader)
                fs.truncated = True
        catch = {c.broker: c for c in report.catch_ups}
        for _ in range(1 << 20):
            leader_hw = leader.high_watermark
            progressed = False
            for b in active:
                log, fs, c = logs[b], followers[b], catch[b]
                before_hw = log.high_watermark
                nbytes, nrecords = fetcher.fetch(tp, leader, log, fs, state.isr, leader_id, followers)
                c.fetches += 1
                if nbytes:
                    c.bytes += nbytes
                    if c.records_from is None:
                        c.records_from = log.log_end_offset - nrecords
                    c.records_to = log.log_end_offset - 1
                progressed |= bool(nbytes) or log.high_watermark != before_hw
            # A round that only moved the leader's high watermark needs one more, in which
            # the followers learn it.
            progressed |= leader.high_watermark != leader_hw
            if not progressed or not until_caught_up:
                break
        if len(state.isr) == 1 and state.isr[0] == leader_id:
            advance_high_watermark(leader, state.isr, leader_id, followers)
        report.events.extend(self._update_isr(tp, leader, state, followers, logs))
        return report

    def _update_isr(self, tp: TopicPartition, leader: Log, state, followers, logs: dict | None = None) -> list:
        """Kafka's maybeShrinkIsr / maybeExpandIsr for ``tp`` (AlterPartition: applied only if
        the leader epoch is still the one this writer worked with). ``logs``: the follower
        logs this replication fetched into (broker id -> log); one of them that joins the ISR
        has its durability policy applied first (below)."""
        from plog.engine.cluster.replication import ControllerEvent, advance_high_watermark

        now = self.clock()
        lag_max = self.fetcher.lag_time_max_ms
        out_of_sync = [b for b in state.isr if b != state.leader and b in followers
                       and followers[b].log_end_offset < leader.log_end_offset
                       and now - followers[b].last_caught_up_ms > lag_max]
        epoch_start = None
        for e in leader.epoch_cache.entries:
            if e.epoch == state.leader_epoch:
                epoch_start = e.start_offset
        caught_up = [b for b, fs in followers.items() if b not in state.isr and fs.log_end_offset >= 0
                     and self.data_dir.broker(b).running
                     and fs.log_end_offset >= leader.high_watermark
                     and (epoch_start is None or fs.log_end_offset >= epoch_start)]
        for b in list(caught_up):
            # What it fetched is made durable (its log's policy, plog.fsync.on.produce) before
            # cluster.json names it in the ISR, as a round is fsynced before it is acknowledged:
            # a crash between the two never leaves an ISR member whose copy recovery cuts short
            # below the high watermark. Data fetched in earlier rounds was fsynced by them.
            log = (logs or {}).get(b)
            if log is None or log.closed:
                continue
            try:
                log.maybe_flush(log.log_end_offset)
            except EngineError:
                caught_up.remove(b)  # its log went offline (an I/O error): it does not join
        if not out_of_sync and not caught_up:
            return []
        events = []
        with self.data_dir.update() as meta:
            t = meta.topics.get(tp.topic)
            if t is None:
                return []
            t.sync_states()
            current = t.states[tp.partition]
            if current.leader_epoch != state.leader_epoch or current.leader != state.leader:
                return []
            old = list(current.isr)
            if out_of_sync:
                current.isr = [b for b in current.isr if b not in out_of_sync]
                events.append(ControllerEvent(
                    "isr", f"replica(s) {id_list(out_of_sync)} not caught up for {lag_max} ms "
                           "(replica.lag.time.max.ms)", tp, isr=tuple(current.isr), previous_isr=tuple(old)))
            if caught_up:
                before = list(current.isr)
                current.isr = [b for b in t.replicas[tp.partition] if b in current.isr or b in caught_up]
                events.append(ControllerEvent("isr", f"replica(s) {id_list(caught_up)} caught up", tp,
                                              isr=tuple(current.isr), previous_isr=tuple(before)))
        state.isr = list(self.data_dir.partition_state(tp).isr)
        advance_high_watermark(leader, state.isr, state.leader, followers)
        self.events.extend(events)
        return events

    def _replicate_dirty(self) -> None:
        for tp in list(self._dirty):
            if self.data_dir.kafka_log_dir or not self.data_dir.has_topic(tp.topic):
                continue
            try:
                self.replicate(tp)
            except LeaderNotAvailableError:
                continue

    def flush(self) -> None:
        """Replicate what was appended, apply each written log's durability policy (fsync
        with ``plog.fsync.on.produce``), checkpoint the high watermarks readers bound
        consumption by, and fail if an ``acks=all`` append is not below the high watermark."""
        self._settle()
        self._flush()

    def _flush(self) -> None:
        if not self._dirty:
            return
        if self._reordering:
            for logs in self._dirty.values():
                for log in logs:
                    if not log.closed:
                        log.maybe_flush()
            return
        early = self._flush_leaders_early()
        try:
            self._replicate_dirty()
            written, managers = self._written(self._dirty)
            self._all_at_once([log.maybe_flush for log in written if all(log is not led for led, _ in early)])
        except BaseException:
            self._join([f for _, f in early], raise_first=False)  # no fsync left running; this error goes out
            raise
        self._join([f for _, f in early])
        self._all_at_once([lm.checkpoint_high_watermarks for lm in managers])
        # Only now: a round interrupted before its checkpoints stays dirty, so closing the
        # writer flushes and checkpoints it again (no stale high watermark hides records).
        self._dirty.clear()
        acks, self._acks = self._acks, []
        self._check_acks(acks)

    def _check_acks(self, acks: list, dirty: dict | None = None) -> None:
        """Fail unless each partition's last ``acks=all`` append of ``acks`` is below its
        leader's high watermark. ``dirty``: the round's logs, the leader first, checked as
        they are (a round flushed beside appends looks nothing up: :meth:`_flush_round`)."""
        required_by_tp: dict[TopicPartition, int] = {}
        for tp, required, _ in acks:  # one check per partition: its last acks=all append
            required_by_tp[tp] = max(required, required_by_tp.get(tp, 0))
        for tp, required in required_by_tp.items():
            try:
                if dirty is None:
                    leader, _ = self.leader_log(tp)
                elif dirty.get(tp) and not dirty[tp][0].closed:
                    leader = dirty[tp][0]
                else:
                    raise LeaderNotAvailableError(f"the leader replica of {tp} was closed")
            except LeaderNotAvailableError as e:
                raise NotEnoughReplicasAfterAppendError(
                    f"acks=all: {tp} lost its leader before the write was replicated ({e})") from None
            if leader.high_watermark < required:
                state = self.data_dir.partition_state(tp)
                raise NotEnoughReplicasAfterAppendError(
                    f"acks=all: offset {required - 1} of {tp} is written on the leader (broker {state.leader}) but "
                    f"not replicated by every in-sync replica (ISR {id_list(state.isr)}, high watermark "
                    f"{leader.high_watermark}); not acknowledged")

    def _written(self, dirty: dict) -> tuple[list[Log], list[LogManager]]:
        """The open logs of ``dirty`` and the managers of their broker directories (whose
        high watermarks a round checkpoints)."""
        written = [log for logs in dirty.values() for log in logs if not log.closed]
        brokers = {log.dir.parent for log in written}
        return written, [lm for lm in self._managers.values() if lm.log_dirs[0] in brokers]

    def has_followers(self, tp: TopicPartition) -> bool:
        """``tp`` has followers to replicate a round to (a plog data directory's topic with
        more than one replica)."""
        dd = self.data_dir
        return not dd.kafka_log_dir and dd.has_topic(tp.topic) and len(dd.replicas(tp)) > 1

    def _flush_leaders_early(self) -> list:
        """Start the fsync of every replicated partition's leader (its durability policy,
        ``maybe_flush``, below the end it has now) on the fsync pool, and return ``[(log,
        future)]``: it runs while the followers fetch the round, which only read that log,
        instead of after their fetches (RF 3 rounds ~10% shorter, measured). Durability and
        acknowledgement are unchanged: the round's high watermarks are checkpointed, and its
        appends acknowledged, only once every fsync of the round has returned
        (:meth:`_join`). A partition without followers is fsynced with the rest: nothing
        would run beside it."""
        early = []
        for tp, logs in self._dirty.items():
            if not logs or not self.has_followers(tp):
                continue
            leader = logs[0]  # the log this round appended to (append, append_batches, replicate)
            if not leader.closed and all(leader is not led for led, _ in early):
                early.append((leader, partial(leader.maybe_flush, leader.log_end_offset)))
        futures = self._start_all([call for _, call in early])
        return [(log, future) for (log, _), future in zip(early, futures)]

    def _start_all(self, calls: list) -> list:
        """Submit ``calls`` to the fsync pool (made on first use); their tasks."""
        if not calls:
            return []
        if self._pool is None:
            from plog.engine.threads import ThreadPool

            self._pool = ThreadPool(8, "plog-fsync")
        return [self._pool.submit(call) for call in calls]

    @staticmethod
    def _join(futures: list, *, raise_first: bool = True) -> None:
        """Wait for every one of ``futures``; then, with ``raise_first``, raise the first
        failure (the others still ran to their end)."""
        errors = [f.exception() for f in futures]
        for e in errors:
            if e is not None and raise_first:
                raise e

    def flush_in_background(self):
        """:meth:`flush` on a thread of its own; returns its :class:`~plog.engine.threads.Task`
        (``exception()``: None, or the failure :meth:`flush` raised).

        For a producer that fills its next round while the disk commits this one: the
        caller's work meanwhile must not touch this writer's logs, and the appends flushed
        are acknowledged only once the future is done (durability is :meth:`flush`'s). Any
        other call of this writer that reads or writes the logs waits for it first.

        A replicated round in a plog data directory is flushed in two phases
        (:meth:`_flush_in_phases`): its replication first, on the flush thread; then its
        fsyncs, high-watermark checkpoint and acks check, on the committer's thread, in order
        after the round before's. Appends of the next round wait for the first phase only,
        and the next round's replication runs beside this round's fsyncs."""
        phases = self._in_phases()
        if phases and self._replicated is not None and self._flushing is not None:
            self._await_replicated()  # the round in flight may still be committing: beside it
        else:
            self._settle()
        if self._flusher is None:
            from plog.engine.threads import ThreadPool, shorten_switch_interval

            self._flusher = ThreadPool(1, "plog-flush")
            # Until close: the flush thread takes the GIL back after each system call while
            # the caller holds it filling the next round (engine/threads.py).
            shorten_switch_interval()
        if phases:
            return self._flush_in_phases()
        if self._fsyncs_only():
            # No follower fetches: the high watermarks move now, on this thread, and the round
            # left to the flush thread is fsyncs below the ends taken here, the checkpoint of
            # those high watermarks and the acks check. Appends after this one may run beside
            # it (beside_flush): none of that reads what they change.
            self._replicate_dirty()
            dirty, acks = self._dirty, self._acks
            self._dirty, self._acks = {}, []
            written, managers = self._written(dirty)
            ends = [(log, log.log_end_offset) for log in written]
            try:
                future = self._flusher.submit(self._flush_round, dirty, acks, ends, managers)
            except BaseException:
                # No flush thread: the round stays this writer's to flush (next flush, close).
                self._dirty, self._acks = dirty, acks + self._acks
                raise
            self._beside = True
            self._flushing = future
            return future
        self._flushing = future = self._flusher.submit(self._flush_on_thread)
        return future

    def _in_phases(self) -> bool:
        """True when this round's flush replicates, in a plog data directory (whose high
        watermarks only a flush moves): :meth:`_flush_in_phases`."""
        if self.data_dir.kafka_log_dir or self._reordering or not self._dirty:
            return False
        return any(self.has_followers(tp) for tp in self._dirty)

    def _flush_in_phases(self):
        """:meth:`flush_in_background` of a replicated round, in two phases (see there);
        returns the Task that ends with the second. Invariants: the round is acknowledged
        (the Task done without error) only after its fsyncs and its checkpoint and after the
        round before's (whose failure fails it); its checkpoint holds the high watermarks of
        the moment its replication ended, never those a later round's replication reached;
        nothing appends to a leader while its followers fetch from it."""
        from plog.engine.threads import Task, ThreadPool

        if self._pool is None:  # made here, not by whichever of two threads needs it first
            self._pool = ThreadPool(8, "plog-fsync")
        if self._committer is None:
            self._committer = ThreadPool(1, "plog-commit")
        previous, replicated, done = self._flushing, threading.Event(), Task()
        # Submitted first: a flush that cannot start (no thread) leaves nothing in flight.
        self._flusher.submit(self._replicate_round, previous, replicated, done)
        self._replicated, self._beside, self._flushing = replicated, False, done
        return done

    def _replicate_round(self, previous, replicated: threading.Event, done) -> None:
        """The first phase (flush thread): the leaders' fsyncs started, the followers'
        fetches until caught up (the high watermarks move), then what the second phase needs
        taken at once: the round's logs and their ends, each broker's high watermarks."""
        self._flusher_ident = threading.get_ident()  # its own calls of this writer do not wait
        try:
            early = self._flush_leaders_early()
            try:
                self._replicate_dirty()
                dirty, acks = self._dirty, self._acks
                self._dirty, self._acks = {}, []
                written, managers = self._written(dirty)
                ends = [(log, log.log_end_offset) for log in written if all(log is not led for led, _ in early)]
                captured = [(lm, lm.high_watermarks()) for lm in managers]
            except BaseException:
                self._join([f for _, f in early], raise_first=False)  # no fsync left running
                raise
        except BaseException as e:
            replicated.set()
            if previous is not None:
                previous.exception()  # ended in order: nothing of the round before still runs
            done.finish(e)
            return
        replicated.set()  # the next round's appends may go now
        try:
            self._committer.submit(self._commit_round, previous, early, ends, captured, dirty, acks, done)
        except BaseException as e:  # noqa: BLE001 - the round's outcome, for its Task
            # No committer thread: the round fails, after the round before, with its
            # partitions given back (the next flush or the close does them again).
            self._join([f for _, f in early], raise_first=False)
            if previous is not None:
                previous.exception()
            for tp, logs in dirty.items():
                self._dirty.setdefault(tp, logs)
            done.finish(e)

    def _commit_round(self, previous, early: list, ends: list, captured: list, dirty: dict, acks: list,
                      done) -> None:
        """The second phase (committer thread), after the round before's: the followers'
        fsyncs below the ends taken, the leaders' started earlier, the checkpoint of the
        high watermarks captured, the acks check. A failure gives the round's partitions back
        to the writer's dirty ones (the close flushes and checkpoints them again)."""
        error = None
        try:
            failure = None if previous is None else previous.exception()
            if failure is not None:
                raise failure  # the round before failed: this one, appended after it, fails too
            try:
                self._all_at_once([partial(log.maybe_flush, end) for log, end in ends if not log.closed])
            finally:
                self._join([f for _, f in early], raise_first=False)
            self._join([f for _, f in early])
            self._all_at_once([partial(lm.checkpoint_high_watermarks, hws) for lm, hws in captured])
            self._check_acks(acks, dirty)
        except BaseException as e:  # noqa: BLE001 - the round's outcome, for its Task
            error = e
            for tp, logs in dirty.items():
                self._dirty.setdefault(tp, logs)
        done.finish(error)

    def _await_replicated(self) -> None:
        replicated = self._replicated
        if replicated is not None and threading.get_ident() != self._flusher_ident:
            with uninterrupted():
                replicated.wait()

    def _fsyncs_only(self) -> bool:
        """True when this round's flush has nothing to replicate: every partition it wrote
        has one replica, in a plog data directory (whose high watermarks only a flush moves;
        in a Kafka log directory each append moves them)."""
        if self.data_dir.kafka_log_dir or self._reordering:
            return False
        return not any(self.has_followers(tp) for tp in self._dirty)

    def _flush_on_thread(self) -> None:
        self._flusher_ident = threading.get_ident()  # its own calls of this writer do not wait
        self._flush()

    def _flush_round(self, dirty: dict, acks: list, ends: list, managers: list) -> None:
        """The rest of a round :meth:`flush_in_background` started with nothing to replicate:
        each log fsynced below the end it had then (its durability policy), its broker's
        high watermarks checkpointed, its acks checked. A failure gives the round's
        partitions back to the writer's dirty ones, so the next flush (or the close) does
        them again."""
        self._flusher_ident = threading.get_ident()
        try:
            self._all_at_once([partial(log.maybe_flush, end) for log, end in ends if not log.closed])
            self._all_at_once([lm.checkpoint_high_watermarks for lm in managers])
        except BaseException:
            for tp, logs in dirty.items():
                self._dirty.setdefault(tp, logs)
            raise
        self._check_acks(acks, dirty)

    @contextmanager
    def beside_flush(self):
        """Appends (:meth:`append_batches`, :meth:`leader_log`) in this block run beside the
        round :meth:`flush_in_background` started, when that round only fsyncs and checkpoints
        (:attr:`appends_beside_flush`): a producer fills and appends its next round while
        the disk commits this one. What must open something (a broker's lock, a new log)
        still waits for the round first."""
        self._appending = True
        try:
            yield self
        finally:
            self._appending = False

    @property
    def appends_beside_flush(self) -> bool:
        """True while the flush in flight lets appends run beside it (:meth:`beside_flush`):
        one that only fsyncs, or one in two phases (beside its second)."""
        return self._flushing is not None and (self._beside or self._replicated is not None)

    @property
    def flushes_in_phases(self) -> bool:
        """True while the flush in flight is a replicated round's in two phases: the next
        round's flush may start before it is done (:meth:`flush_in_background`)."""
        return self._flushing is not None and self._replicated is not None

    def _settle(self) -> None:
        """Wait for the flush :meth:`flush_in_background` started (its outcome stays with
        its future, for the caller that started it). A stop waits for it too: what comes
        next (an append, a close) must not run beside it, but for appends in a
        :meth:`beside_flush` block while that flush only fsyncs (which :meth:`_wait_flush`
        still makes wait where they would open something)."""
        if self._appending:
            if self._beside:
                return  # an append beside a round that only fsyncs (beside_flush)
            if self._replicated is not None:
                self._await_replicated()
                return  # beside the second phase of a round in two phases
        self._wait_flush()

    def _wait_flush(self) -> None:
        future = self._flushing
        if future is None or threading.get_ident() == self._flusher_ident:
            return
        with uninterrupted():
            future.exception()  # waits; the outcome stays with the future, for its caller
            self._flushing = None
            self._beside = False
            self._replicated = None

    @whole
    def _all_at_once(self, calls: list) -> None:
        """Run ``calls`` (each replica's fsyncs, each broker's checkpoint) at the same time:
        the disk commits concurrent fsyncs together, so a round costs about one fsync however
        many replicas it wrote, not one per replica. Each call touches its own log or broker
        directory. Raises the first failure after all have ended (as one at a time would,
        but the others still ran).

        A stop waits for them (:func:`~plog.engine.interrupts.whole`): a pool thread would
        otherwise still be writing a checkpoint when closing the writer writes it again."""
        if len(calls) <= 1:
            for call in calls:
                call()
            return
        self._join(self._start_all(calls))

    def close(self) -> None:
        self._close_managers()

    def _close_managers(self) -> None:
        try:
            self.flush()
        finally:
            flusher = self._flusher
            for name in ("_flusher", "_committer"):
                threads = getattr(self, name)
                setattr(self, name, None)
                if threads is not None:
                    threads.shutdown(wait=True)
            if flusher is not None:
                from plog.engine.threads import restore_switch_interval

                restore_switch_interval()
            managers, self._managers = self._managers, {}
            error, stop = self._maintain(managers.values())
            # Every manager this writer built: those it holds and any a stop orphaned (see
            # __init__; closing a closed one does nothing). Each broker's close is a dozen
            # small fsyncs in its own directory (logs, checkpoints, snapshot, marker): at
            # the same time, the disk commits them together.
            held = list(managers.values())
            closing = held + [lm for lm in self._constructed if all(lm is not h for h in held)]
            self._constructed = []
            try:
                self._all_at_once([lm.close for lm in closing])
            except Exception as e:
                error = error or e
            finally:
                pool, self._pool = self._pool, None
                if pool is not None:
                    pool.shutdown(wait=True)
            if stop is not None:
                raise stop
            if error is not None:
                raise error

    def _maintain(self, managers) -> tuple[Exception | None, KeyboardInterrupt | None]:
        """What a broker's cleaner and retention threads would have done by now, on the logs
        this writer touched, before letting go: one broker after the other (maintenance
        can take long; a stop ends it, crash-safe, and the rest waits for the next writer).
        Returns the first failure and the stop, for the caller to raise after closing."""
        if not (self.maintenance and managers and not self.data_dir.kafka_log_dir):
            return None, None
        from plog.engine.maintenance.runner import engine_settings, run_due

        try:
            settings = engine_settings(self.data_dir.metadata.broker_configs)
        except Exception as e:
            return e, None
        error = None
        for lm in managers:
            try:
                run_due(lm, settings)
            except KeyboardInterrupt as stop:
                return error, stop
            except Exception as e:
                error = error or e
        return error, None

    def __enter__(self) -> "ClusterWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        close_after(self.close, exc, "closing the brokers' logs")


# -- helpers ----------------------------------------------------------------------------------
