"""``Consumer``: Kafka's consumer for an embedded data directory (or a stopped broker's log dir).

* **Fetch**: each assigned partition is read from its leader replica's files, read-only and
  without a lock, from the consumer's position up to the high watermark (the log end offset
  on disk: every replica is written before a produce is acknowledged) or, with
  ``isolation.level=read_committed``, up to the last stable offset, skipping aborted
  transactions with the ``.txnindex`` (``engine.txn_view``). Control records are never
  returned. When a reader reaches the end it looks for new data (a grown active segment or a
  new segment) and reopens its view, so a consumer follows a producer in another process.
* **Positions**: a new partition starts at the group's committed offset; without one,
  ``auto.offset.reset`` decides (``earliest``, ``latest`` or ``none``, which raises
  :class:`NoOffsetForPartitionError`). A position below the log start (retention removed it)
  is reset the same way, as Kafka does on ``OFFSET_OUT_OF_RANGE``.
* **Groups** (``group.id`` with :meth:`subscribe`): membership, assignment and the rebalance
  barrier are ``engine.groups``; heartbeats happen inside :meth:`poll` every
  ``heartbeat.interval.ms`` and at once when the group file changes. Before it gives up a
  partition the consumer commits its position there (with auto-commit on), so the next
  owner starts where it stopped.
* **Commits**: :meth:`commit` writes the positions (the next offset to read, with the leader
  epoch of the last record) to ``__consumer_offsets``. With ``enable.auto.commit`` (default)
  :meth:`poll` commits every ``auto.commit.interval.ms`` and :meth:`close` commits at the end.
  That is Kafka's at-least-once window: records returned after the last commit are returned
  again to the next owner if this process dies.

* **Output a batch at a time**: :meth:`Consumer.poll_rendered` takes the records
  :meth:`Consumer.poll` would, read_uncommitted, and prints them in a
  :class:`~plog.engine.clients.record_io.BatchFormat` instead of returning them: a v2
  batch's records region goes to the native renderer whole (``plog consume``'s fast path,
  engine.clients.consumer_loop's ``ConsumeLoop.rendered``).

Like the Java consumer this class is not thread-safe; one thread polls.
"""

from __future__ import annotations

import os
import time
from typing import Iterable, Iterator

from plog.formats.records import LOG_APPEND_TIME

from plog.engine.cluster.data_dir import DataDir
from plog.engine.errors import (
    EngineError,
    GroupError,
    NoOffsetForPartitionError,
    OffsetOutOfRangeError,
    UnknownTopicOrPartitionError,
)
from plog.engine.storage.log import Log
from plog.engine.clients.record_io import BatchPiece, ConsumerRecord, RenderedPoll, batch_piece
from plog.engine.storage.file_names import LOG_FILE_SUFFIX, REPLICATION_OFFSET_CHECKPOINT, TopicPartition
from plog.engine.clients.txn_view import read_committed_records, read_uncommitted_records, transaction_state

READ_UNCOMMITTED = "read_uncommitted"
READ_COMMITTED = "read_committed"
RESET_POLICIES = ("earliest", "latest", "none")


class _PartitionReader:
    """A read-only, refreshable view of one partition's leader replica."""

    __slots__ = ("tp", "data_dir", "committed", "log", "_stamp", "_iter", "_iter_next", "_iter_limit", "_state",
                 "_batches")

    def __init__(self, data_dir: DataDir, tp: TopicPartition, read_committed: bool):
        self.tp = tp
        self.data_dir = data_dir
        self.committed = read_committed
        self.log: Log | None = None
        self._stamp = None
        self._iter: Iterator | None = None
        self._iter_next = -1
        self._iter_limit = -1
        self._state = None
        self._batches: _BatchRead | None = None
        self.refresh(force=True)

    def _disk_stamp(self):
        """What changes on disk when a writer appends: the leader, the newest segment, its size."""
        for attempt in (0, 1):
            directory = self.data_dir.partition_path(self.tp)
            try:
                logs = sorted(e.name for e in os.scandir(directory) if e.name.endswith(LOG_FILE_SUFFIX))
                if not logs:
                    return (directory, 0, 0)
                # The high watermark moves in the broker directory's checkpoint, after the data.
                try:
                    hw = os.stat(directory.parent / REPLICATION_OFFSET_CHECKPOINT)
                    hw_stamp = (hw.st_mtime_ns, hw.st_size, hw.st_ino)
                except FileNotFoundError:
                    hw_stamp = None
                return (directory, len(logs), logs[0], logs[-1], os.stat(directory / logs[-1]).st_size, hw_stamp)
            except FileNotFoundError:
                if attempt:
                    if self.data_dir.kafka_log_dir:
                        raise UnknownTopicOrPartitionError(
                            f"{self.data_dir.path} holds no folder for {self.tp} (this broker has no replica of "
                            "it)") from None
                    raise UnknownTopicOrPartitionError(
                        f"{self.tp} is gone from {directory} (topic deleted?)") from None
                # The replicas may have moved (plog assign execute): read the metadata again.
                self.data_dir.reload()

    def refresh(self, force: bool = False) -> bool:
        """Reopen the view when the files changed; True when it did."""
        stamp = self._disk_stamp()
        if not force and stamp == self._stamp:
            return False
        old = self.log
        self.log = self.data_dir.open_reader(self.tp)
        self._stamp = stamp
        self._iter = None
        self._batches = None
        self._state = transaction_state(self.log) if self.committed else None
        if old is not None:
            old.close()
        return True

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def end_offset(self) -> int:
        """Where a consumer of this isolation level stops: the LSO or the high watermark."""
        if self._state is not None:
            return min(self._state.last_stable_offset, self.log.high_watermark)
        return self.log.high_watermark

    def read(self, position: int, max_records: int) -> tuple[list, int]:
        """Up to ``max_records`` ``(batch info, record)`` pairs from ``position``; returns them
        and the next position (past skipped control/aborted records too)."""
        limit = self.end_offset
        if position >= limit:
            return [], position
        it = self._iter
        if it is None or self._iter_next != position or self._iter_limit != limit:
            if self._state is not None:
                it = read_committed_records(self.log, position, limit, state=self._state)
            else:
                it = read_uncommitted_records(self.log, position, limit)
            self._iter, self._iter_limit = it, limit
        out = []
        append = out.append
        for pair in it:
            append(pair)
            if len(out) >= max_records:
                nxt = pair[1].offset + 1
                self._iter_next = nxt
                return out, nxt
        self._iter = None
        return out, limit

    def read_rendered(self, position: int, max_records: int, out: RenderedPoll) -> tuple[int, int, int | None]:
        """:meth:`read` a batch at a time, read_uncommitted only: the same records taken (at
        most ``max_records`` from ``position``), rendered into ``out`` instead of returned.
        Returns how many were taken, the next position and the leader epoch of the last
        one's batch (None when none was taken). A batch cut by ``max_records`` goes on at
        its next record in the next call from the position returned."""
        limit = self.end_offset
        if position >= limit:
            return 0, position, None
        batches = self._batches
        if batches is None or batches.next != position or batches.limit != limit:
            batches = self._batches = _BatchRead(self.log, position, limit)
        taken, epoch = 0, None
        while True:
            piece = batches.piece()
            if piece is None:
                break
            got, reached_hi, last = out.take(self.tp, piece, batches.start, batches.hi, max_records - taken)
            if got:
                taken += got
                epoch = piece.epoch
            if reached_hi:
                break
            batches.pending = piece if piece.index < piece.size else None
            if taken >= max_records:
                batches.next = last + 1
                return taken, last + 1, epoch
        self._batches = None
        return taken, limit, epoch

    def close(self) -> None:
        if self.log is not None:
            self.log.close()
            self.log = None


class Consumer:
    """Consume records from a data directory; see the module docstring."""

    def __init__(self, data_dir: DataDir | str | os.PathLike, *, group_id: str | None = None,
                 client_id: str = "plog-consumer", auto_offset_reset: str = "latest", enable_auto_commit: bool = True,
                 auto_commit_interval_ms: int = 5000, isolation_level: str = READ_UNCOMMITTED,
                 max_poll_records: int = 500, session_timeout_ms: int = 45000, heartbeat_interval_ms: int = 3000,
                 partition_assignment_strategy: Iterable[str] = ("range", "cooperative-sticky"),
                 group_instance_id: str | None = None, lock_timeout_s: float = 30.0, poll_interval_ms: int = 100):
        self.data_dir = data_dir if isinstance(data_dir, DataDir) else DataDir.open(data_dir)
        if auto_offset_reset not in RESET_POLICIES:
            raise EngineError(f"auto.offset.reset must be one of {', '.join(RESET_POLICIES)}, not {auto_offset_reset!r}")
        if isolation_level not in (READ_UNCOMMITTED, READ_COMMITTED):
            raise EngineError(f"isolation.level must be read_uncommitted or read_committed, not {isolation_level!r}")
        if max_poll_records < 1:
            raise EngineError(f"max.poll.records must be >= 1, not {max_poll_records}")
        self.group_id = group_id
        self.client_id = client_id
        self.auto_offset_reset = auto_offset_reset
        self.read_committed = isolation_level == READ_COMMITTED
        self.max_poll_records = max_poll_records
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.strategies = list(partition_assignment_strategy)
        self.group_instance_id = group_instance_id
        self.poll_interval_ms = poll_interval_ms
        # A Kafka log directory is read-only: its group offsets are read, never committed.
        self.enable_auto_commit = enable_auto_commit and group_id is not None and not self.data_dir.kafka_log_dir
        self.auto_commit_interval_ms = auto_commit_interval_ms
        self._coordinator = None
        if group_id is not None:
            from plog.engine.groups.coordinator import GroupCoordinator

            self._coordinator = GroupCoordinator(self.data_dir, lock_timeout_s=lock_timeout_s)
        self._subscription: list[str] | None = None
        self._member_id: str | None = None
        self._generation = -1
        self._assignment: tuple[TopicPartition, ...] = ()
        self._fetchable: set[TopicPartition] = set()
        self._positions: dict[TopicPartition, int] = {}
        self._epochs: dict[TopicPartition, int] = {}
        self._committed_positions: dict[TopicPartition, int] = {}
        self._readers: dict[TopicPartition, _PartitionReader] = {}
        self._next_heartbeat = 0.0
        self._next_auto_commit = time.monotonic() + auto_commit_interval_ms / 1000
        self._group_stamp = None
        self._rr = 0
        self._paused: set[TopicPartition] = set()
        self.closed = False

    # -- assignment -----------------------------------------------------------------------------

    def subscribe(self, topics: Iterable[str]) -> None:
        """Join ``group.id`` for ``topics``; partitions come from the group's assignment."""
        if self._coordinator is None:
            raise GroupError("subscribe() needs a group.id; use assign() without one")
        topics = list(dict.fromkeys(topics))
        self.data_dir.reload()
        for t in topics:
            self.data_dir.topic(t)  # unknown topics fail here, with a clear message
        if self.data_dir.kafka_log_dir:
            # A stopped broker's directory has no live group to join and takes no writes:
            # read every partition it holds, starting from the group's committed offsets.
            self.assign([tp for t in topics for tp in self.data_dir.readable_partitions(t)])
            return
        self._subscription = topics
        self._member_id = self._coordinator.join(
            self.group_id, topics=topics, strategies=self.strategies, client_id=self.client_id,
            session_timeout_ms=self.session_timeout_ms, group_instance_id=self.group_instance_id)
        self._heartbeat()

    def assign(self, partitions: Iterable) -> None:
        """Read exactly ``partitions`` (no group membership; commits still go to ``group.id``)."""
        tps = [TopicPartition(*tp) for tp in partitions]
        self.data_dir.reload()
        for tp in tps:
            self.data_dir.replicas(tp)
        self._subscription = None
        self._set_assignment(tuple(tps), set(tps))

    def assignment(self) -> tuple[TopicPartition, ...]:
        return self._assignment

    def _set_assignment(self, assignment: tuple[TopicPartition, ...], fetchable: set[TopicPartition]) -> None:
        for tp in list(self._readers):
            if tp not in fetchable:
                self._readers.pop(tp).close()
        for tp in list(self._positions):
            if tp not in fetchable:
                del self._positions[tp]
                self._committed_positions.pop(tp, None)
        self._assignment = assignment
        newly = [tp for tp in assignment if tp in fetchable and tp not in self._fetchable]
        self._fetchable = set(fetchable)
        if newly:
            committed = self._committed(newly)
            for tp in newly:
                if tp in committed:
                    self._positions[tp] = committed[tp]
                    self._committed_positions[tp] = committed[tp]

    def _committed(self, tps) -> dict[TopicPartition, int]:
        if self._coordinator is None:
            return {}
        return {tp: c.offset for tp, c in self._coordinator.committed(self.group_id, tps).items()}

    # -- group protocol ---------------------------------------------------------------------------

    def _group_file_changed(self) -> bool:
        try:
            stamp = os.stat(self._coordinator._path(self.group_id)).st_mtime_ns
        except FileNotFoundError:
            stamp = None
        changed = stamp != self._group_stamp
        self._group_stamp = stamp
        return changed

    def _heartbeat(self) -> None:
        coordinator = self._coordinator
        view = coordinator.heartbeat(self.group_id, self._member_id)
        for _ in range(8):  # a follow-up generation can come right after an acknowledgement
            if view.generation == self._generation and view.fetchable == frozenset(self._fetchable) \
                    and view.assignment == self._assignment:
                break
            if view.generation != self._generation:
                revoked = [tp for tp in self._fetchable if tp not in view.assignment]
                if revoked and self.enable_auto_commit:
                    self._commit_positions({tp: self._positions[tp] for tp in revoked if tp in self._positions})
                self._generation = view.generation
                self._set_assignment(view.assignment, set(view.fetchable) & set(self._fetchable))
                view = coordinator.heartbeat(self.group_id, self._member_id, acked_generation=view.generation)
                continue
            self._set_assignment(view.assignment, set(view.fetchable))
            break
        self._set_assignment(view.assignment, set(view.fetchable))
        self._generation = view.generation
        self._group_file_changed()
        self._next_heartbeat = time.monotonic() + self.heartbeat_interval_ms / 1000

    def _maintain(self) -> None:
        if self._member_id is not None:
            if time.monotonic() >= self._next_heartbeat or self._group_file_changed():
                self._heartbeat()
        if self.enable_auto_commit and time.monotonic() >= self._next_auto_commit:
            self._auto_commit()

    def _auto_commit(self) -> None:
        self._next_auto_commit = time.monotonic() + self.auto_commit_interval_ms / 1000
        self._commit_positions({tp: p for tp, p in self._positions.items()
                                if self._committed_positions.get(tp) != p})

    # -- positions ----------------------------------------------------------------------------------

    def _reader(self, tp: TopicPartition) -> _PartitionReader:
        reader = self._readers.get(tp)
        if reader is None:
            reader = self._readers[tp] = _PartitionReader(self.data_dir, tp, self.read_committed)
        return reader

    def _reset(self, tp: TopicPartition, reader: _PartitionReader) -> int:
        if self.auto_offset_reset == "earliest":
            return reader.log_start_offset
        if self.auto_offset_reset == "latest":
            return reader.end_offset
        raise NoOffsetForPartitionError(f"Undefined offset with no reset policy for partitions: [{tp}]")

    def position(self, tp) -> int:
        tp = TopicPartition(*tp)
        if tp not in self._fetchable:
            raise EngineError(f"You can only check the position for partitions assigned to this consumer ({tp})")
        pos = self._positions.get(tp)
        if pos is None:
            pos = self._positions[tp] = self._reset(tp, self._reader(tp))
        return pos

    def seek(self, tp, offset: int) -> None:
        tp = TopicPartition(*tp)
        if tp not in self._assignment:
            raise EngineError(f"No current assignment for partition {tp}")
        if offset < 0:
            raise EngineError(f"seek offset must not be negative, got {offset}")
        self._positions[tp] = offset

    def seek_to_beginning(self, partitions=None) -> None:
        for tp in partitions or self._assignment:
            self._positions[TopicPartition(*tp)] = self._reader(TopicPartition(*tp)).log_start_offset

    def seek_to_end(self, partitions=None) -> None:
        for tp in partitions or self._assignment:
            self._positions[TopicPartition(*tp)] = self._reader(TopicPartition(*tp)).end_offset

    def beginning_offsets(self, partitions) -> dict[TopicPartition, int]:
        return {TopicPartition(*tp): self._fresh_reader(tp).log_start_offset for tp in partitions}

    def end_offsets(self, partitions) -> dict[TopicPartition, int]:
        """The high watermark (read_uncommitted) or the LSO (read_committed) of each partition, now."""
        return {TopicPartition(*tp): self._fresh_reader(tp).end_offset for tp in partitions}

    def offsets_for_times(self, timestamps: dict) -> dict[TopicPartition, int | None]:
        """The first offset with a timestamp >= the given one, per partition (None: none)."""
        out = {}
        for tp, ts in timestamps.items():
            found = self._fresh_reader(tp).log.fetch_offset_by_timestamp(ts)
            out[TopicPartition(*tp)] = None if found is None else found.offset
        return out

    def resolve_range(self, tp, rng) -> tuple[int, int | None]:
        """An ``engine.offset_spec.OffsetRange`` resolved in ``tp`` as on disk now:
        ``(start, end exclusive or None)``."""
        from plog.engine.offset_spec import resolve_range

        tp = TopicPartition(*tp)
        reader = self._fresh_reader(tp)
        committed = None
        if "committed" in (rng.start.kind, rng.end.kind if rng.end else None):
            if self._coordinator is None:
                raise NoOffsetForPartitionError("the offset 'committed' needs a group id")
            committed = self.committed([tp]).get(tp)

        def at_time(ts: int) -> int | None:
            found = reader.log.fetch_offset_by_timestamp(ts)
            return None if found is None else found.offset

        return resolve_range(rng, log_start_offset=reader.log_start_offset, log_end_offset=reader.end_offset,
                             offset_for_timestamp=at_time, committed=committed)

    def _fresh_reader(self, tp) -> _PartitionReader:
        reader = self._reader(TopicPartition(*tp))
        reader.refresh()
        return reader

    def committed(self, partitions) -> dict[TopicPartition, int]:
        return self._committed([TopicPartition(*tp) for tp in partitions])

    # -- polling ------------------------------------------------------------------------------------

    def poll(self, timeout_ms: int = 0, max_records: int | None = None) -> list[ConsumerRecord]:
        """Records from the fetchable partitions, waiting up to ``timeout_ms`` for some."""
        limit = max_records or self.max_poll_records
        return self._polling(timeout_ms, lambda: self._fetch(limit))

    def poll_rendered(self, timeout_ms: int, fmt, ends: dict | None = None, count: int | None = None,
                      max_records: int | None = None) -> RenderedPoll:
        """:meth:`poll` on plog consume's native path (read_uncommitted only): the records
        the same poll takes, printed in ``fmt`` (a :class:`~plog.engine.clients.record_io.BatchFormat`)
        as the consume loop prints them (a partition's records at or past its ``ends``
        offset and those after ``count`` are taken, not printed); see :class:`RenderedPoll`."""
        if self.read_committed:
            raise EngineError("poll_rendered reads read_uncommitted only")
        limit = max_records or self.max_poll_records

        def fetch() -> RenderedPoll:
            out = RenderedPoll(fmt, ends, count)
            self._fetch_rendered(limit, out)
            return out

        return self._polling(timeout_ms, fetch)

    def _polling(self, timeout_ms: int, fetch):
        """``fetch()`` until it takes records or ``timeout_ms`` passed (heartbeats and
        auto-commits in between); a failed fetch moves no position."""
        if self.closed:
            raise EngineError("poll on a closed consumer")
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            self._maintain()
            saved = dict(self._positions)
            try:
                records = fetch()
            except BaseException:
                # Ctrl-C (or an error) before the records are returned: none was delivered, so
                # the positions, and the commit when the consumer closes, must not pass them.
                self._positions.clear()
                self._positions.update(saved)
                raise
            if records or time.monotonic() >= deadline:
                return records
            time.sleep(max(0.0, min(self.poll_interval_ms / 1000, deadline - time.monotonic())))

    def pause(self, partitions) -> None:
        """Stop fetching ``partitions`` (they stay assigned; positions are kept)."""
        self._paused.update(TopicPartition(*tp) for tp in partitions)

    def resume(self, partitions) -> None:
        self._paused.difference_update(TopicPartition(*tp) for tp in partitions)

    def paused(self) -> set[TopicPartition]:
        return set(self._paused)

    def _fetch(self, limit: int) -> list[ConsumerRecord]:
        fetchable = [tp for tp in self._assignment if tp in self._fetchable and tp not in self._paused]
        if not fetchable:
            return []
        out: list[ConsumerRecord] = []
        n = len(fetchable)
        start = self._rr % n
        self._rr += 1
        for i in range(n):
            tp = fetchable[(start + i) % n]
            got = self._fetch_partition(tp, limit - len(out))
            if got:
                out.extend(got)
                if len(out) >= limit:
                    break
        return out

    def _fetch_position(self, tp: TopicPartition, reader: _PartitionReader) -> int | None:
        """Where to read ``tp`` from (None: nothing new), the files refreshed when the
        position is past their end or before their start (reset as the policy says)."""
        pos = self._positions.get(tp)
        if pos is None:
            pos = self._positions[tp] = self._reset(tp, reader)
        if pos >= reader.end_offset:
            reader.refresh()
            if pos >= reader.end_offset:
                return None
        if pos < reader.log_start_offset:
            reader.refresh()
            if pos < reader.log_start_offset:
                pos = self._positions[tp] = self._reset(tp, reader)
        return pos

    def _fetch_rendered(self, limit: int, out: RenderedPoll) -> None:
        """:meth:`_fetch`'s partitions, order and budget, rendered into ``out``."""
        fetchable = [tp for tp in self._assignment if tp in self._fetchable and tp not in self._paused]
        if not fetchable:
            return
        n = len(fetchable)
        start = self._rr % n
        self._rr += 1
        for i in range(n):
            tp = fetchable[(start + i) % n]
            reader = self._reader(tp)
            pos = self._fetch_position(tp, reader)
            if pos is None:
                continue
            try:
                taken, nxt, epoch = reader.read_rendered(pos, limit - out.taken, out)
            except OffsetOutOfRangeError:
                reader.refresh(force=True)
                self._positions[tp] = self._reset(tp, reader)
                continue
            self._positions[tp] = nxt
            if taken:
                self._epochs[tp] = -1 if epoch is None else epoch
                if out.taken >= limit:
                    break

    def _fetch_partition(self, tp: TopicPartition, limit: int) -> list[ConsumerRecord]:
        reader = self._reader(tp)
        pos = self._fetch_position(tp, reader)
        if pos is None:
            return []
        try:
            pairs, nxt = reader.read(pos, limit)
        except OffsetOutOfRangeError:
            reader.refresh(force=True)
            self._positions[tp] = self._reset(tp, reader)
            return []
        self._positions[tp] = nxt
        if not pairs:
            return []
        topic, partition = tp.topic, tp.partition
        out = []
        append = out.append
        for info, r in pairs:
            tt = "LogAppendTime" if info.timestamp_type == LOG_APPEND_TIME else (
                "CreateTime" if info.magic > 0 else "NoTimestampType")
            epoch = info.partition_leader_epoch if info.magic >= 2 and info.partition_leader_epoch >= 0 else None
            append(ConsumerRecord(topic, partition, r.offset, r.timestamp, tt, r.key, r.value, r.headers, epoch))
        self._epochs[tp] = out[-1].leader_epoch if out[-1].leader_epoch is not None else -1
        return out

    def at_end(self) -> bool:
        """True when every fetchable partition's position is at its end offset as on disk now."""
        for tp in self._assignment:
            if tp in self._paused:
                continue
            if tp not in self._fetchable:
                return False
            reader = self._reader(tp)
            reader.refresh()
            if self.position(tp) < reader.end_offset:
                return False
        return True

    def __iter__(self) -> Iterator[ConsumerRecord]:
        while not self.closed:
            yield from self.poll(self.poll_interval_ms)

    # -- commits ------------------------------------------------------------------------------------

    def commit(self, offsets: dict | None = None) -> None:
        """Commit ``{tp: next offset}`` (default: every position) synchronously."""
        if self._coordinator is None:
            raise GroupError("commit() needs a group.id")
        if offsets is None:
            offsets = dict(self._positions)
        self._commit_positions({TopicPartition(*tp): o for tp, o in offsets.items()})

    def _commit_positions(self, offsets: dict[TopicPartition, int]) -> None:
        if not offsets:
            return
        if self.data_dir.kafka_log_dir:
            raise GroupError(f"{self.data_dir.path} is a Kafka log directory: plog reads its group offsets "
                             "but does not commit to it")
        values = {tp: (o, self._epochs.get(tp, -1)) for tp, o in offsets.items()}
        self._coordinator.commit(self.group_id, values, member_id=self._member_id, generation=self._generation)
        self._committed_positions.update(offsets)

    def close(self, autocommit: bool = True) -> None:
        """Commit (with auto-commit), leave the group, release the files."""
        if self.closed:
            return
        try:
            if autocommit and self.enable_auto_commit:
                self._commit_positions({tp: p for tp, p in self._positions.items()
                                        if self._committed_positions.get(tp) != p})
        finally:
            self.closed = True
            try:
                if self._member_id is not None:
                    self._coordinator.leave(self.group_id, self._member_id)
            finally:
                for reader in self._readers.values():
                    reader.close()
                self._readers.clear()

    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# -- batch at a time (plog consume's native path) ---------------------------------------------


def _data_batches(log: Log, start: int, limit: int) -> Iterator:
    """The batches ``read_uncommitted_records(log, start, limit)`` takes its records from,
    in order (txn_view's walk without a transaction state: control batches skipped, the
    walk over at a v2 batch starting at or past ``limit``)."""
    if start >= limit:
        return
    for segment in log.segments.values(start, limit):
        position = segment.translate_offset(max(start, segment.base_offset))
        if position is None:
            continue
        for batch in segment.batches(position.position):
            if batch.magic >= 2 and batch.base_offset >= limit:
                return
            if not batch.is_control:
                yield batch


class _BatchRead:
    """A partition's read_uncommitted read from ``start`` as :meth:`_PartitionReader.read_rendered`
    goes through it: its batches, the one a poll's budget cut (``pending``), and the
    position a next call must come from to go on (``next``) with the same ``limit``."""

    __slots__ = ("batches", "start", "limit", "hi", "next", "pending")

    def __init__(self, log: Log, start: int, limit: int):
        # The reference's read, for its range check (OffsetOutOfRangeError) and its limit.
        read_uncommitted_records(log, start, limit)
        self.start, self.limit, self.hi = start, limit, min(limit, log.log_end_offset)
        self.batches = _data_batches(log, start, self.hi)
        self.next = start
        self.pending: BatchPiece | None = None

    def piece(self) -> BatchPiece | None:
        """The cut batch, else the next batch with records; None at the end."""
        if self.pending is not None:
            return self.pending
        for batch in self.batches:
            piece = batch_piece(batch)
            if piece is not None:
                return piece
        return None


__all__ = ["Consumer", "READ_COMMITTED", "READ_UNCOMMITTED"]
