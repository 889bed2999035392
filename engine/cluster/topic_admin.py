"""Topic administration on a data directory: Kafka's CreateTopics, CreatePartitions,
IncrementalAlterConfigs (topic configs) and DeleteTopics, as the controller applies them.

:class:`TopicAdmin` is the part of :class:`~plog.engine.cluster.data_dir.DataDir` that
changes which topics and partitions exist (``DataDir`` inherits it; every method works on
the data directory's metadata, lock and writers).

Invariants:

* Creating a topic or adding partitions is all or nothing (:meth:`TopicAdmin._create_partitions`):
  a request that cannot fit is refused before anything is written, and a failure or Ctrl-C
  while the replica folders are made leaves no trace of it.
* Replicas are placed on the running brokers (engine.cluster.placement: Kafka's rack-aware
  placement), as Kafka's controller places them on the brokers it can use.
* A deleted topic leaves the metadata before its folders are renamed ``-delete`` and removed,
  so no reader or writer picks it up again.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path
from typing import Iterator

from plog.engine.cluster.metadata import METADATA_FILE, ClusterMetadata, TopicMetadata, dump_metadata
from plog.engine.errors import (
    BrokerNotAvailableError,
    ConfigError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from plog.engine.storage.checkpoints import fsync_dir
from plog.engine.storage.file_names import INTERNAL_TOPICS, TopicPartition, has_collision, validate_topic_name
from plog.engine.storage.log_config import LogConfig

#: Kafka's partition ids are 32-bit signed integers (``TopicPartition.partition``, the
#: ``NumPartitions`` of CreateTopics): no topic has more partitions than this.
MAX_PARTITIONS = (1 << 31) - 1


def _check_partition_count(n: int) -> None:
    if n > MAX_PARTITIONS:
        raise InvalidPartitionsError(f"Number of partitions {n} is more than Kafka's partition ids allow "
                                     f"({MAX_PARTITIONS}: they are 32-bit integers).")


def _replicas_per_broker(replica_lists) -> dict[int, int]:
    out: dict[int, int] = {}
    for replicas in replica_lists:
        for b in replicas:
            out[b] = out.get(b, 0) + 1
    return out


def _check_topic_is_new(meta: "ClusterMetadata", name: str) -> None:
    if name in meta.topics:
        raise TopicExistsError(f"Topic '{name}' already exists.")
    for other in meta.topics:
        if has_collision(name, other):
            raise TopicExistsError(f"Topic '{name}' collides with existing topic: {other}")


def _metadata_bytes_per_partition(replication_factor: int) -> int:
    """What one more partition adds to cluster.json (its replica list and state), measured
    on the file's own format, with 10-digit broker ids (at most what they take)."""
    replicas = [10 ** 9 + i for i in range(replication_factor)]
    sizes = []
    for n in (1, 2):
        t = TopicMetadata("t", str(uuid.UUID(int=0)), [list(replicas) for _ in range(n)])
        sizes.append(len(dump_metadata(ClusterMetadata("c", [], {"t": t}))))
    return sizes[1] - sizes[0]


class _HeldSignals:
    """SIGINT and SIGTERM arriving inside :meth:`holding` are kept until :meth:`deliver`
    (then raised again, to the handlers there were before), so that a short sequence of
    writes that must not be cut in the middle (a commit and the renames after it) runs to its
    end, and the caller decides what an interrupt then means. Only the main thread can install
    handlers; elsewhere the block runs as it is."""

    def __init__(self) -> None:
        self.pending: list[int] = []

    @contextlib.contextmanager
    def holding(self) -> Iterator[None]:
        import signal
        import threading

        if threading.current_thread() is not threading.main_thread():
            yield
            return
        saved = {}
        try:
            for sig in (signal.SIGINT, signal.SIGTERM):
                previous = signal.getsignal(sig)
                if previous in (signal.SIG_IGN, None):
                    continue
                saved[sig] = previous
                signal.signal(sig, lambda signum, frame: self.pending.append(signum))
            yield
        finally:
            for sig, previous in saved.items():
                signal.signal(sig, previous)

    def deliver(self) -> None:
        import signal

        pending, self.pending = self.pending, []
        for sig in dict.fromkeys(pending):
            signal.raise_signal(sig)


def _validated_configs(name: str, configs: dict[str, str]) -> dict[str, str]:
    """``configs`` if they make a valid topic config, else :class:`InvalidTopicError`."""
    try:
        LogConfig.from_properties(configs)
    except ConfigError as e:
        raise InvalidTopicError(f"Invalid config for topic {name}: {e}") from None
    return configs


class TopicAdmin:
    """Create, alter and delete topics of a data directory (see the module doc).

    A part of :class:`~plog.engine.cluster.data_dir.DataDir`, which provides what these
    methods use: ``path``, ``metadata``, ``reload``, ``update`` (cluster.json read-modified-
    written under its lock), ``writer``, ``broker``, ``broker_log_dir``, ``topic``."""

    def create_topic(self, name: str, partitions: int | None = None, replication_factor: int | None = None, *,
                     configs: dict[str, str] | None = None, replica_assignment: dict[int, list[int]] | None = None,
                     if_not_exists: bool = False, internal_ok: bool = False, rng=None,
                     progress=None) -> TopicMetadata | None:
        """Kafka's CreateTopics: validate, place replicas (§17.2) on the running brokers (as
        Kafka's controller places them on the brokers it can use), create every replica folder.

        All or nothing (:meth:`_create_partitions`): a request that cannot fit (more partitions
        than Kafka's 32-bit partition ids allow, more than the free inodes or bytes of a broker
        directory's file system hold, a replica on a broker that is not running, more locks
        than this process may open) is refused before anything is written, and a failure or
        Ctrl-C while the folders are made leaves no trace of the topic. ``progress(n)`` is
        called as the replicas of ``n`` more partitions are made.

        Returns the new topic, or ``None`` when it exists and ``if_not_exists``."""
        validate_topic_name(name)
        if name in INTERNAL_TOPICS and not internal_ok:
            raise InvalidTopicError(f"Creation of internal topic {name} is prohibited.")
        configs = _validated_configs(name, {str(k): str(v) for k, v in (configs or {}).items()})
        self._check_writable()
        self.reload()
        meta = self.metadata
        try:
            _check_topic_is_new(meta, name)
        except TopicExistsError:
            if if_not_exists and name in meta.topics:
                return None
            raise
        # Imported here: a produce or a consume opens a data directory and places nothing.
        from plog.engine.cluster import placement as _placement

        running = [b for b in meta.brokers if b.running]
        if replica_assignment is not None:
            if partitions is not None and partitions != len(replica_assignment):
                raise InvalidReplicaAssignmentError(
                    "--partitions cannot be used with --replica-assignment (the assignment gives the count)")
            _placement.validate_manual_assignment(replica_assignment, {b.id for b in meta.brokers})
            self._check_room(name, len(replica_assignment), _replicas_per_broker(replica_assignment.values()))
            assignment = replica_assignment
        else:
            n = 1 if partitions is None else partitions
            rf = 1 if replication_factor is None else replication_factor
            if n < 1:
                raise InvalidPartitionsError(f"Number of partitions must be larger than 0, not {n}.")
            if rf < 1:
                raise InvalidReplicationFactorError(f"Replication factor must be larger than 0, not {rf}.")
            _check_partition_count(n)
            if rf <= len(running):
                self._check_room_for_shares(name, n, rf, running)
            assignment = _placement.assign_replicas_to_brokers(
                [_placement.BrokerMetadata(b.id, b.rack) for b in running], n, rf, rng=rng)
        topic = TopicMetadata(name, str(uuid.uuid4()), [list(assignment[p]) for p in range(len(assignment))],
                              configs)

        def commit() -> None:
            with self.update() as current:
                _check_topic_is_new(current, name)
                current.topics[name] = topic

        def uncommit() -> None:
            with self.update() as current:
                current.topics.pop(name, None)

        try:
            self._create_partitions(topic, range(topic.partitions), commit, uncommit, progress)
        except TopicExistsError:
            if if_not_exists and self.has_topic(name):
                return None  # another process created it meanwhile
            raise
        return topic

    def alter_topic(self, name: str, *, partitions: int | None = None, set_configs: dict[str, str] | None = None,
                    delete_configs: list[str] | None = None,
                    replica_assignment: dict[int, list[int]] | None = None, rng=None,
                    progress=None) -> TopicMetadata:
        """Add partitions (never remove: Kafka cannot) and change configs.

        New partitions are placed on the running brokers and made all or nothing, with the
        limits of :meth:`create_topic`; the configs change with them, in the same commit, or
        not at all. ``progress(n)`` as for :meth:`create_topic`."""
        self._check_writable()
        self.reload()
        current = self.metadata.topics.get(name)
        if current is None:
            raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist in {self.path}")
        old_count = current.partitions
        extra: dict[int, list[int]] = {}
        if partitions is not None:
            extra = self._added_partitions(current, partitions, replica_assignment, rng)
        new_configs = None
        if set_configs or delete_configs:
            new_configs = dict(current.configs)
            for k in delete_configs or []:
                new_configs.pop(k, None)
            new_configs.update({str(k): str(v) for k, v in (set_configs or {}).items()})
            _validated_configs(name, new_configs)
        added = [list(extra[p]) for p in range(old_count, old_count + len(extra))] if extra else []
        target = TopicMetadata(name, current.topic_id, [*current.replicas, *added],
                               current.configs if new_configs is None else new_configs)
        old_configs = dict(current.configs)

        def commit() -> None:
            with self.update() as meta_now:
                t = meta_now.topics.get(name)
                if t is None:
                    raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist in {self.path}")
                if t.partitions != old_count:
                    raise InvalidPartitionsError(
                        f"Topic {name} has {t.partitions} partitions now, not {old_count}: another process "
                        "altered it meanwhile; nothing was changed")
                t.replicas.extend(list(r) for r in added)
                t.sync_states()
                if new_configs is not None:
                    t.configs = dict(new_configs)

        def uncommit() -> None:
            with self.update() as meta_now:
                t = meta_now.topics.get(name)
                if t is not None and t.partitions == old_count + len(added):
                    del t.replicas[old_count:]
                    t.sync_states()
                    t.configs = old_configs

        if added:
            self._create_partitions(target, range(old_count, target.partitions), commit, uncommit, progress)
        else:
            commit()
            # The broker directories' copies of the configs (.plog-topics.json, which
            # a LogManager opened on one of them alone reads) follow at once.
            with self.writer() as w:
                w.acquire(sorted({b for reps in target.replicas for b in reps} & set(self.running_brokers())))
        self.reload()
        return self.topic(name)

    def _added_partitions(self, current: TopicMetadata, partitions: int,
                          replica_assignment: dict[int, list[int]] | None, rng) -> dict[int, list[int]]:
        """The replicas of partitions ``current.partitions`` up to ``partitions`` (Kafka's
        CreatePartitions): ``replica_assignment``'s, checked, or placed on the running brokers;
        refused before placing when they cannot fit (:meth:`_check_room`)."""
        name, old_count = current.name, current.partitions
        if partitions <= old_count:
            raise InvalidPartitionsError(
                f"Topic currently has {old_count} partitions, which is higher than or equal "
                f"to the requested {partitions}.")
        _check_partition_count(partitions)
        meta = self.metadata
        rf = current.replication_factor
        running = [b for b in meta.brokers if b.running]
        if replica_assignment is not None:
            for p, reps in replica_assignment.items():
                unknown = set(reps) - {b.id for b in meta.brokers}
                if unknown or len(set(reps)) != len(reps) or len(reps) != rf:
                    raise InvalidReplicaAssignmentError(
                        f"invalid replicas {reps} for new partition {p} of {name}")
            self._check_room(name, partitions - old_count,
                             _replicas_per_broker(replica_assignment[p] for p in range(old_count, partitions)),
                             adding=True)
            return replica_assignment
        if 0 < rf <= len(running):
            self._check_room_for_shares(name, partitions - old_count, rf, running, adding=True)
        from plog.engine.cluster import placement as _placement

        return _placement.add_partitions_assignment([_placement.BrokerMetadata(b.id, b.rack) for b in running],
                                                    dict(enumerate(current.replicas)), partitions, rng=rng)

    # -- making partition folders, all or nothing -------------------------------------------

    def _check_room(self, name: str, count: int, per_broker: dict[int, int], *, adding: bool = False) -> None:
        """Refuse, before anything is written, ``count`` new partitions of ``name`` whose
        replicas land ``per_broker[b]`` on broker ``b`` (or each broker's even share, before
        placement) when their folders and their lines of cluster.json do not fit the free
        inodes and bytes of the file systems."""
        from plog.engine.storage.log_manager import check_room_for_new_logs, new_log_bytes

        new_logs: dict[Path, tuple[int, int]] = {}
        sample = TopicPartition(name, max(count - 1, 0))  # the longest folder name
        for b, k in per_broker.items():
            log_dir = self.broker_log_dir(b)
            if not log_dir.is_dir():
                continue  # made by its first writer: its file system is the data directory's
            block = os.statvfs(log_dir).f_frsize
            n, nbytes = new_logs.get(log_dir, (0, 0))
            new_logs[log_dir] = (n + k, nbytes + k * new_log_bytes(sample, block))
        # cluster.json is rewritten whole through a tmp file: the old file and the new one.
        rf = max(1, -(-sum(per_broker.values()) // max(count, 1)))
        metadata = self.path / METADATA_FILE
        size = metadata.stat().st_size if metadata.exists() else 0
        n, nbytes = new_logs.get(self.path, (0, 0))
        new_logs[self.path] = (n, nbytes + size + count * _metadata_bytes_per_partition(rf))
        plural = "s" if count != 1 else ""
        what = f"adding {count} partition{plural} to topic {name}" if adding else \
            f"creating {count} partition{plural} of topic {name}"
        check_room_for_new_logs(new_logs, what)

    def _check_room_for_shares(self, name: str, count: int, replication_factor: int, running, *,
                               adding: bool = False) -> None:
        """:meth:`_check_room` before placing ``count`` partitions on the ``running`` brokers (a
        placement of millions of partitions is itself minutes and gigabytes): Kafka's placement
        spreads ``count * replication_factor`` replicas evenly, so no broker gets more than its
        share rounded up."""
        share = -(-count * replication_factor // len(running))
        self._check_room(name, count, {b.id: share for b in running}, adding=adding)

    def _create_partitions(self, topic: TopicMetadata, partitions: range, commit, uncommit, progress=None) -> None:
        """Make the replica folders of ``partitions`` of ``topic`` and ``commit()`` the topic's
        metadata, all or nothing.

        1. Refuse, before writing: a replica on a broker that is not running (its directory is
           not opened), more locks than the process may open (``descriptor_budget``).
        2. Under the ``.lock`` of every broker involved (a writer opens no folder meanwhile),
           make each folder under a ``-delete`` name, which every start-up removes (Kafka's
           too), then make them durable (``LogManager.sync_new_logs``: one ``syncfs`` for many).
        3. With SIGINT and SIGTERM held back: ``commit()`` (cluster.json), rename the folders
           to their names, fsync each broker directory.

        A failure or an interrupt in 2 removes the folders; a failure in 3 calls
        ``uncommit()`` as well. A crash in 2 leaves ``-delete`` folders the next writer
        removes; a crash in 3, between the commit and a rename, leaves partitions whose
        folders the first writer creates (``ClusterWriter.replica_log``)."""
        from plog.engine.storage.descriptor_budget import budget

        self.reload()
        tps = [(TopicPartition(topic.name, p), topic.replicas[p]) for p in partitions]
        brokers = sorted({b for _, reps in tps for b in reps})
        for tp, reps in tps:
            for b in reps:
                broker = self.broker(b)
                if not broker.running:
                    raise BrokerNotAvailableError(f"broker {b} is {broker.state}: its replica of {tp} cannot be "
                                                  f"written (plog brokers start {b}); nothing was written")
        budget().require(len(brokers))
        topic_id = uuid.UUID(topic.topic_id)
        committed = False
        signals = _HeldSignals()
        with self.writer() as w:
            try:
                w.acquire(brokers)
                managers = [w.manager(b) for b in brokers]
                for tp, reps in tps:
                    for b in reps:
                        lm = w.manager(b)
                        lm.stage_new_log(tp, topic_id, log_dir=lm.log_dirs[0])
                    if progress is not None:
                        progress(1)
                for lm in managers:
                    lm.sync_new_logs()
                with signals.holding():
                    commit()
                    committed = True
                    for lm in managers:
                        lm.adopt_new_logs()
                        fsync_dir(lm.log_dirs[0])
                    w.adopt_metadata_topics()
                    for lm in managers:
                        lm.keep_new_logs()
            except BaseException:
                try:
                    if committed:
                        uncommit()
                finally:
                    for lm in list(w._managers.values()):
                        lm.discard_new_logs()
                    signals.deliver()  # an interrupt held back meanwhile wins over the failure
                raise
        # Complete: an interrupt that came during the commit stops the command now.
        signals.deliver()

    def delete_topic(self, name: str) -> TopicMetadata:
        """Kafka's delete: each replica folder is renamed ``<tp>.<uuid>-delete``, then removed;
        the topic leaves the metadata first, so no reader or writer picks it up again."""
        if name in INTERNAL_TOPICS:
            raise InvalidTopicError(f"Topic {name} is an internal topic and cannot be deleted")
        with self.update() as meta:
            topic = meta.topics.pop(name, None)
            if topic is None:
                raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist in {self.path}")
        with self.writer() as w:
            for broker in self.broker_ids:
                manager = w.manager(broker)
                for tp in manager.partitions():
                    if tp.topic == name:
                        manager.delete_log(tp)
        return topic


__all__ = ["MAX_PARTITIONS", "TopicAdmin"]
