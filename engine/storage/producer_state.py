"""Producer state: idempotence, transactions and ``.snapshot`` files (Kafka's ``ProducerStateManager``).

A partition remembers, per producer id, just enough to deduplicate retries, fence zombie
producers and track open transactions. The rules below are those of Kafka trunk's
``storage/.../log/{ProducerStateManager,ProducerStateEntry,ProducerAppendInfo,BatchMetadata,
TxnMetadata,CompletedTxn}.java`` (read for this port, not copied), and of the callers that
feed it from disk: ``LogSegment.updateProducerState`` (segment recovery, §8.5 of
``docs/kafka-format.md``) and ``UnifiedLog.updateProducers``/``loadProducersFromRecords``
(``rebuildProducerState``, §13.2 step 12).

State kept per producer (:class:`ProducerStateEntry`)::

    producer_epoch             last epoch seen (-1 before any batch)
    batch_metadata             the last 5 data batches: (last_seq, last_offset, offset_delta,
                               timestamp); first_seq/first_offset are derived from them
    coordinator_epoch          from the last COMMIT/ABORT marker (-1 if none yet)
    last_timestamp             max timestamp of the last data batch, or the marker's timestamp
    current_txn_first_offset   first offset of the open transaction, or None

The state machine, one producer at a time. An append goes through a
:class:`ProducerAppendInfo` built from the current entry by ``prepare_update``; it
validates each batch against the entry and a working copy (``updated_entry``, which starts
with the current epoch/coordinator epoch/txn but *no* batch metadata), and ``update``
merges that copy back into the map. Nothing is changed in the map until ``update``:

* **Data batch** (``append_data_batch``). Epoch check: an epoch lower than the current one
  is fenced (``InvalidProducerEpochError``) for client appends and only tolerated when
  replicating/recovering. Sequence check (client appends only): a new epoch must start at
  sequence 0 (unless the producer had no epoch yet); within an epoch the first sequence
  must be last_seq + 1, wrapping from 2^31-1 to 0; a producer whose entry has no epoch
  (unknown, or all its data deleted) may start at any sequence. Then the batch joins the
  last-5 metadata (a new epoch clears it first). A transactional batch with no open
  transaction opens one at its base offset; a non-transactional batch while one is open
  is ``InvalidTxnStateError`` -- in every origin, replication included.
* **End marker** (``append_end_txn_marker``). Epoch check as above (TV2 markers must bump
  the epoch); a coordinator epoch lower than the stored one is fenced for non-replicated
  appends. If a transaction was open, a :class:`CompletedTxn` (first offset .. marker
  offset, aborted?) is returned; an empty transaction's marker returns None. The entry
  takes the marker's epoch, coordinator epoch and timestamp and closes the transaction,
  but keeps its batch metadata (unless the epoch changed).

Transactions. ``update`` registers newly opened transactions as *ongoing* (sorted by first
offset). A completed one is first used to compute the last stable offset written with an
abort in the ``.txnindex`` (``last_stable_offset``: the first offset of the earliest
ongoing transaction of *another* producer, else marker offset + 1, §7.4), then moved by
``complete_txn`` to *unreplicated* until ``on_high_watermark_updated`` passes its marker.
``first_unstable_offset`` (the LSO source) covers both sets; ``first_undecided_offset``
only the ongoing ones.

Snapshots (§11). ``take_snapshot`` writes the whole map at ``map_end_offset`` (exclusive)
to ``<20-digit offset>.snapshot`` with :func:`plog.formats.producer_snapshot.encode_snapshot`,
in the iteration order of the broker's ``java.util.HashMap`` (the table capacity it would
have, which never shrinks, is tracked here so the bytes match). Loading keeps one batch
metadata per producer (all a snapshot stores), drops producers idle for
``producer.id.expiration.ms`` without an open transaction, and deletes a corrupt snapshot
and falls back to the previous one, as Kafka does.

Verification state (KIP-890 ``VerificationStateEntry``), the late-transaction metric and
``LogOffsetMetadata`` (we track plain offsets) are not modelled.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import os
from collections import deque
from pathlib import Path
from types import MappingProxyType
from typing import Iterable, Mapping, NamedTuple

from plog.formats.control import ControlRecordType, EndTransactionMarker, parse_control_key
from plog.formats.errors import CorruptSnapshotError, InvalidRecordError
from plog.formats.indexes import AbortedTxn
from plog.formats.producer_snapshot import ProducerSnapshotEntry, decode_snapshot, encode_snapshot, java_hash_map_order
from plog.formats.records import NO_PRODUCER_EPOCH, NO_SEQUENCE, NO_TIMESTAMP, decrement_sequence

from plog.engine.errors import EngineError, InvalidProducerEpochError, OutOfOrderSequenceError

log = logging.getLogger(__name__)

INT32_MAX = (1 << 31) - 1
NO_PRODUCER_ID = -1
#: ``ProducerStateEntry.NUM_BATCHES_TO_RETAIN``: how many recent batches a retry can match.
NUM_BATCHES_TO_RETAIN = 5
#: ``producer.id.expiration.ms`` default (1 day).
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000
SNAPSHOT_SUFFIX = ".snapshot"
DELETED_SUFFIX = ".deleted"
_TMP_SUFFIX = ".tmp"
#: ``TransactionVersion.TV_UNKNOWN``: what a replicated marker carries (the version is not on disk).
TV_UNKNOWN = -1
_JAVA_HASHMAP_INITIAL_CAPACITY = 16


class InvalidTxnStateError(EngineError):
    """A non-transactional batch from a producer with an open transaction (``InvalidTxnStateException``)."""


class TransactionCoordinatorFencedError(EngineError):
    """An end marker from an older coordinator epoch (``TransactionCoordinatorFencedException``)."""


class AppendOrigin(enum.Enum):
    """Where an append comes from, which decides how much is validated (``AppendOrigin``).

    CLIENT: a produce request on the leader -- epoch fencing and sequence checks.
    COORDINATOR: markers and offset commits from a coordinator -- epoch checks, no sequences.
    REPLICATION: a follower copying the leader, and also log recovery/loading (Kafka uses
    REPLICATION there) -- nothing is rejected except a non-transactional write inside a
    transaction; fencing violations are only logged.
    """

    CLIENT = "client"
    COORDINATOR = "coordinator"
    REPLICATION = "replication"
    RECOVERY = "replication"  # alias: recovery and loading replay with REPLICATION rules

    @classmethod
    def of(cls, origin: "AppendOrigin | str") -> "AppendOrigin":
        """Accept the enum or its name/value in any case ("client", "REPLICATION", "recovery")."""
        if isinstance(origin, cls):
            return origin
        try:
            return cls[str(origin).upper()]
        except KeyError:
            raise ValueError(f"Unknown append origin {origin!r}") from None


class BatchMetadata(NamedTuple):
    """One recent data batch of a producer (``BatchMetadata``).

    ``offset_delta`` is ``last_offset - first_offset`` of the batch as appended; the first
    sequence is derived from it, so a batch that compaction shrank is remembered as written.
    """

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


class CompletedTxn(NamedTuple):
    """A transaction closed by a marker: its first data offset and the marker's offset."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


class TxnMetadata:
    """An open (or completed but not yet replicated) transaction (``TxnMetadata``)."""

    __slots__ = ("producer_id", "first_offset", "last_offset")

    def __init__(self, producer_id: int, first_offset: int, last_offset: int | None = None):
        self.producer_id = producer_id
        self.first_offset = first_offset
        self.last_offset = last_offset

    def __eq__(self, other) -> bool:
        if not isinstance(other, TxnMetadata):
            return NotImplemented
        return (self.producer_id, self.first_offset, self.last_offset) == (
            other.producer_id, other.first_offset, other.last_offset)

    def __repr__(self) -> str:
        return (f"TxnMetadata(producer_id={self.producer_id}, first_offset={self.first_offset}, "
                f"last_offset={self.last_offset})")


class ProducerStateEntry:
    """The state of one producer id (``ProducerStateEntry``); see the module docstring."""

    __slots__ = ("producer_id", "producer_epoch", "coordinator_epoch", "last_timestamp",
                 "current_txn_first_offset", "batch_metadata")

    def __init__(self, producer_id: int, producer_epoch: int = NO_PRODUCER_EPOCH, coordinator_epoch: int = -1,
                 last_timestamp: int = NO_TIMESTAMP, current_txn_first_offset: int | None = None,
                 batch_metadata: Iterable[BatchMetadata] = ()):
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.coordinator_epoch = coordinator_epoch
        self.last_timestamp = last_timestamp
        self.current_txn_first_offset = current_txn_first_offset
        # A bounded deque drops the oldest batch on overflow, as addBatchMetadata does.
        self.batch_metadata: deque[BatchMetadata] = deque(batch_metadata, maxlen=NUM_BATCHES_TO_RETAIN)

    @classmethod
    def empty(cls, producer_id: int) -> "ProducerStateEntry":
        return cls(producer_id)

    # -- derived facts (Kafka's accessors; -1/0 when there is no batch) ------------------

    def is_empty(self) -> bool:
        """True when no data batch is remembered (the entry may still carry an epoch)."""
        return not self.batch_metadata

    @property
    def first_seq(self) -> int:
        return self.batch_metadata[0].first_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batch_metadata[-1].last_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def first_data_offset(self) -> int:
        return self.batch_metadata[0].first_offset if self.batch_metadata else -1

    @property
    def last_data_offset(self) -> int:
        return self.batch_metadata[-1].last_offset if self.batch_metadata else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batch_metadata[-1].offset_delta if self.batch_metadata else 0

    # -- mutation -----------------------------------------------------------------------

    def maybe_update_producer_epoch(self, producer_epoch: int) -> bool:
        """Take a new epoch; the old epoch's batches cannot be retried any more, so drop them."""
        if self.producer_epoch != producer_epoch:
            self.batch_metadata.clear()
            self.producer_epoch = producer_epoch
            return True
        return False

    def add_batch(self, producer_epoch: int, last_seq: int, last_offset: int, offset_delta: int,
                  timestamp: int) -> None:
        self.maybe_update_producer_epoch(producer_epoch)
        self.batch_metadata.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def update(self, next_entry: "ProducerStateEntry") -> None:
        """Merge an append's working entry into this one (``ProducerStateEntry.update``)."""
        self.maybe_update_producer_epoch(next_entry.producer_epoch)
        self.batch_metadata.extend(next_entry.batch_metadata)
        self.coordinator_epoch = next_entry.coordinator_epoch
        self.current_txn_first_offset = next_entry.current_txn_first_offset
        self.last_timestamp = next_entry.last_timestamp

    def end_transaction(self, producer_epoch: int, coordinator_epoch: int, timestamp: int) -> None:
        """What a COMMIT/ABORT marker does (Kafka's 3-argument ``update``): the batch
        metadata is kept unless the epoch changes, the transaction is closed."""
        self.maybe_update_producer_epoch(producer_epoch)
        self.coordinator_epoch = coordinator_epoch
        self.current_txn_first_offset = None
        self.last_timestamp = timestamp

    # -- lookups --------------------------------------------------------------------------

    def find_duplicate_batch(self, producer_epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """The remembered batch with exactly this sequence range in this epoch, if any."""
        if producer_epoch != self.producer_epoch:
            return None
        return self.batch_with_sequence_range(first_seq, last_seq)

    def batch_with_sequence_range(self, first_seq: int, last_seq: int) -> BatchMetadata | None:
        for metadata in self.batch_metadata:
            if metadata.first_seq == first_seq and metadata.last_seq == last_seq:
                return metadata
        return None

    # -- snapshot conversion ---------------------------------------------------------------

    def to_snapshot_entry(self) -> ProducerSnapshotEntry:
        """The 46-byte snapshot record of this entry (``writeSnapshot``): only the last batch survives."""
        return ProducerSnapshotEntry(
            self.producer_id,
            self.producer_epoch,
            self.last_seq,
            self.last_data_offset,
            self.last_offset_delta,
            self.last_timestamp,
            self.coordinator_epoch,
            -1 if self.current_txn_first_offset is None else self.current_txn_first_offset,
        )

    @classmethod
    def from_snapshot_entry(cls, e: ProducerSnapshotEntry) -> "ProducerStateEntry":
        """``readSnapshot``: a batch is restored only when last_offset >= 0, with the entry's
        timestamp as its timestamp; a negative txn first offset means no open transaction."""
        batch = []
        if e.last_offset >= 0:
            batch.append(BatchMetadata(e.last_sequence, e.last_offset, e.offset_delta, e.timestamp))
        txn = e.current_txn_first_offset if e.current_txn_first_offset >= 0 else None
        return cls(e.producer_id, e.producer_epoch, e.coordinator_epoch, e.timestamp, txn, batch)

    def copy(self, with_batches: bool = True) -> "ProducerStateEntry":
        return ProducerStateEntry(self.producer_id, self.producer_epoch, self.coordinator_epoch, self.last_timestamp,
                                  self.current_txn_first_offset, self.batch_metadata if with_batches else ())

    def __eq__(self, other) -> bool:
        if not isinstance(other, ProducerStateEntry):
            return NotImplemented
        return (self.producer_id, self.producer_epoch, self.coordinator_epoch, self.last_timestamp,
                self.current_txn_first_offset, list(self.batch_metadata)) == (
            other.producer_id, other.producer_epoch, other.coordinator_epoch, other.last_timestamp,
            other.current_txn_first_offset, list(other.batch_metadata))

    __hash__ = None  # mutable

    def __repr__(self) -> str:
        return (f"ProducerStateEntry(producer_id={self.producer_id}, producer_epoch={self.producer_epoch}, "
                f"current_txn_first_offset={self.current_txn_first_offset}, "
                f"coordinator_epoch={self.coordinator_epoch}, last_timestamp={self.last_timestamp}, "
                f"batch_metadata={list(self.batch_metadata)})")


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    # Kafka compares against lastSeq + 1L (a long), so INT32_MAX is followed only by 0.
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class ProducerAppendInfo:
    """Validation and accumulated changes of one producer's append (``ProducerAppendInfo``).

    Built by :meth:`ProducerStateManager.prepare_update`; nothing reaches the manager until
    :meth:`ProducerStateManager.update` is called with it. May take several batches in a
    row (recovery feeds a whole read chunk through one info per producer).
    """

    def __init__(self, producer_id: int, current_entry: ProducerStateEntry,
                 origin: AppendOrigin | str = AppendOrigin.REPLICATION, partition: str = ""):
        self.producer_id = producer_id
        self.current_entry = current_entry
        self.origin = AppendOrigin.of(origin)
        self.partition = partition
        # Same epoch / coordinator epoch / open txn, but no batches: the new batches are
        # collected here and appended to the map's entry by update().
        self.updated_entry = ProducerStateEntry(producer_id, current_entry.producer_epoch,
                                                current_entry.coordinator_epoch, current_entry.last_timestamp,
                                                current_entry.current_txn_first_offset)
        self.started_transactions: list[TxnMetadata] = []

    def _where(self, offset: int) -> str:
        return f"producer {self.producer_id} at offset {offset}" + (f" in {self.partition}" if self.partition else "")

    # -- checks ---------------------------------------------------------------------------

    def _check_producer_epoch(self, producer_epoch: int, offset: int, transaction_version: int) -> None:
        current = self.updated_entry.producer_epoch
        # TV2 coordinators bump the epoch for every marker, so a TV2 marker must be newer;
        # data batches and legacy markers only must not be older.
        strict = transaction_version >= 2
        if (producer_epoch <= current) if strict else (producer_epoch < current):
            if strict and producer_epoch == current and self.updated_entry.current_txn_first_offset is None:
                # KAFKA-19999: a retried TV2 marker for a transaction that already ended.
                log.info("Idempotent transaction marker retry for producer %d epoch %d", self.producer_id,
                         producer_epoch)
                return
            message = (f"Epoch of {self._where(offset)} is {producer_epoch}, which is "
                       f"{'<=' if strict else '<'} the last seen epoch {current} (TV{transaction_version})")
            if self.origin is AppendOrigin.REPLICATION:
                # The leader already decided; a follower/recovery must take what is on disk.
                log.warning(message)
            else:
                raise InvalidProducerEpochError(message)

    def _check_sequence(self, producer_epoch: int, first_seq: int, offset: int) -> None:
        updated, current = self.updated_entry, self.current_entry
        if producer_epoch != updated.producer_epoch:
            # A bumped epoch restarts the sequence; only a producer never seen before (no
            # epoch at all) may start a new epoch elsewhere.
            if first_seq != 0 and updated.producer_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"Invalid sequence number for new epoch of {self._where(offset)}: {producer_epoch} "
                    f"(request epoch), {first_seq} (seq. number), {updated.producer_epoch} (current producer epoch)")
            return
        if not updated.is_empty():
            last_seq = updated.last_seq  # an earlier batch of this same append
        elif producer_epoch == current.producer_epoch:
            last_seq = current.last_seq
        else:
            last_seq = NO_SEQUENCE
        # An entry without an epoch (unknown producer, or its data all deleted by retention
        # or DeleteRecords) accepts any sequence: there is nothing to compare with.
        if not (current.producer_epoch == NO_PRODUCER_EPOCH or _in_sequence(last_seq, first_seq)):
            raise OutOfOrderSequenceError(
                f"Out of order sequence number for {self._where(offset)}: {first_seq} (incoming seq. number), "
                f"{last_seq} (current end sequence number)")

    # -- appends --------------------------------------------------------------------------

    def append_data_batch(self, epoch: int, first_seq: int, last_seq: int, last_timestamp: int,
                          first_offset: int, last_offset: int, is_transactional: bool) -> None:
        """Validate and record one data batch (``appendDataBatch``).

        ``last_timestamp`` is the batch's max timestamp. Raises InvalidProducerEpochError /
        OutOfOrderSequenceError (CLIENT) and InvalidTxnStateError (any origin).
        """
        self._check_producer_epoch(epoch, first_offset, TV_UNKNOWN)
        if self.origin is AppendOrigin.CLIENT:
            self._check_sequence(epoch, first_seq, first_offset)
        entry = self.updated_entry
        entry.add_batch(epoch, last_seq, last_offset, last_offset - first_offset, last_timestamp)
        if entry.current_txn_first_offset is not None and not is_transactional:
            raise InvalidTxnStateError(
                f"Expected transactional write from {self._where(first_offset)}")
        if entry.current_txn_first_offset is None and is_transactional:
            # The first batch of a transaction opens it; its base offset bounds the LSO.
            entry.current_txn_first_offset = first_offset
            self.started_transactions.append(TxnMetadata(self.producer_id, first_offset))

    def append_end_txn_marker(self, control_type: ControlRecordType, coordinator_epoch: int, producer_epoch: int,
                              offset: int, timestamp: int,
                              transaction_version: int = TV_UNKNOWN) -> CompletedTxn | None:
        """Validate and record a COMMIT/ABORT marker (``appendEndTxnMarker``).

        Returns the completed transaction, or None when the producer had none open (a
        marker of an empty transaction changes neither the LSO nor the ``.txnindex``).
        ``transaction_version`` -1 (unknown, as for replicated markers) and 0/1 use the
        legacy epoch rule; 2 requires a bumped epoch. Kafka insists on an explicit version
        for non-replicated markers; here an unknown one is treated as legacy.
        """
        control_type = ControlRecordType(control_type)
        if control_type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            raise ValueError(f"Invalid control record type for end transaction marker: {control_type.name}")
        # Replicated markers carry no version; the legacy rule is the permissive one.
        effective_version = 0 if transaction_version == TV_UNKNOWN else transaction_version
        self._check_producer_epoch(producer_epoch, offset, effective_version)
        entry = self.updated_entry
        if entry.coordinator_epoch > coordinator_epoch:
            if self.origin is AppendOrigin.REPLICATION:
                log.info("Invalid coordinator epoch for %s: %d is older than previously known coordinator epoch %d",
                         self._where(offset), coordinator_epoch, entry.coordinator_epoch)
            else:
                raise TransactionCoordinatorFencedError(
                    f"Invalid coordinator epoch for {self._where(offset)}: {coordinator_epoch} (zombie), "
                    f"{entry.coordinator_epoch} (current)")
        completed = None
        if entry.current_txn_first_offset is not None:
            completed = CompletedTxn(self.producer_id, entry.current_txn_first_offset, offset,
                                     control_type is ControlRecordType.ABORT)
        entry.end_transaction(producer_epoch, coordinator_epoch, timestamp)
        return completed

    def append(self, batch, transaction_version: int = TV_UNKNOWN) -> CompletedTxn | None:
        """One batch as read from a log (``ProducerAppendInfo.append``).

        A control batch's first record is the marker (its key the type, its value the
        coordinator epoch; the marker's timestamp is that record's); an empty control batch
        is a transaction the cleaner removed entirely and changes nothing. A data batch uses
        its base/last offset, base/last sequence and max timestamp.
        """
        if batch.is_control:
            records = batch.records()
            if not records:
                return None
            record = records[0]
            if record.key is None:
                raise InvalidRecordError("Control record has no key", batch.position)
            _version, control_type = parse_control_key(bytes(record.key))
            if control_type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
                raise InvalidRecordError(
                    f"Invalid control record type for end transaction marker: {control_type.name}", batch.position)
            marker = EndTransactionMarker.decode(None if record.value is None else bytes(record.value))
            return self.append_end_txn_marker(control_type, marker.coordinator_epoch, batch.producer_epoch,
                                              batch.base_offset, record.timestamp, transaction_version)
        self.append_data_batch(batch.producer_epoch, batch.base_sequence, batch.last_sequence, batch.max_timestamp,
                               batch.base_offset, batch.last_offset, batch.is_transactional)
        return None

    append_batch = append  # the name engine callers probe for

    def to_entry(self) -> ProducerStateEntry:
        return self.updated_entry

    def __repr__(self) -> str:
        e = self.updated_entry
        return (f"ProducerAppendInfo(producer_id={self.producer_id}, producer_epoch={e.producer_epoch}, "
                f"first_sequence={e.first_seq}, last_sequence={e.last_seq}, "
                f"current_txn_first_offset={e.current_txn_first_offset}, coordinator_epoch={e.coordinator_epoch}, "
                f"last_timestamp={e.last_timestamp}, started_transactions={self.started_transactions})")


# ------------------------------------------------------------------------------ snapshot files


def snapshot_file_name(offset: int) -> str:
    """``<20-digit zero-padded offset>.snapshot`` (``LogFileUtils.producerSnapshotFile``)."""
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


def _snapshot_offset(name: str) -> int | None:
    # Kafka parses the text before the first dot; a name that does not parse would make
    # it throw, so such a file is simply not a snapshot to us.
    stem = name.split(".", 1)[0]
    return int(stem) if stem.isdigit() else None


def list_snapshot_files(log_dir: str | os.PathLike) -> dict[int, Path]:
    """Regular ``*.snapshot`` files of ``log_dir`` by offset (``listSnapshotFiles``)."""
    found: dict[int, Path] = {}
    d = Path(log_dir)
    if not d.is_dir():
        return found
    for p in d.iterdir():
        if p.name.endswith(SNAPSHOT_SUFFIX) and p.is_file():
            offset = _snapshot_offset(p.name)
            if offset is not None:
                found[offset] = p
    return dict(sorted(found.items()))


def stray_snapshots(snapshot_offsets: Iterable[int], segment_base_offsets: Iterable[int]) -> dict[int, int | None]:
    """The snapshots ``removeStraySnapshots`` deletes (a broker's every load does), each
    with the later stray snapshot that supersedes it: a snapshot with no segment starting at
    its offset is stray; every stray but the largest goes, and the largest too when it lies
    below the last segment's base offset (superseded by None: the segments). The largest
    stray above every base is the clean-shutdown snapshot at the log end offset: it stays."""
    bases = set(segment_base_offsets)
    out: dict[int, int | None] = {}
    latest_stray = None
    for offset in sorted(snapshot_offsets):
        if offset not in bases:
            if latest_stray is not None:
                out[latest_stray] = offset
            latest_stray = offset
    if latest_stray is not None and bases and latest_stray < max(bases):
        out[latest_stray] = None
    return out


def snapshot_out_of_range(offset: int, log_start_offset: int, log_end_offset: int) -> bool:
    """``truncateAndReload``'s bounds: a snapshot above the log end offset, or at or below
    the log start offset (note: exactly at the log start goes too), is deleted."""
    return offset > log_end_offset or offset <= log_start_offset


def read_snapshot(path: str | os.PathLike) -> list[ProducerStateEntry]:
    """The entries of a snapshot file (``readSnapshot``); CorruptSnapshotError if it does not decode.

    Decoding is Kafka's lenient one (bytes after the last entry are ignored if the CRC,
    which covers them, matches).
    """
    data = Path(path).read_bytes()
    return [ProducerStateEntry.from_snapshot_entry(e) for e in decode_snapshot(data, strict=False)]


def _delete_if_exists(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse directory fsync; the rename is still atomic
    finally:
        os.close(fd)


# ------------------------------------------------------------------------------ the manager


class ProducerStateManager:
    """Per-partition producer map, open transactions and snapshot files (``ProducerStateManager``).

    ``map_end_offset`` is the offset up to which (exclusive) the map reflects the log. The
    snapshot files of ``log_dir`` are indexed once, at construction (and again by
    :meth:`remove_stray_snapshots`), as Kafka does; files created behind its back are not seen.
    """

    def __init__(self, log_dir: str | os.PathLike,
                 max_producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS, partition: str = ""):
        self.log_dir = Path(log_dir)
        self.producer_id_expiration_ms = max_producer_id_expiration_ms
        self.partition = partition or self.log_dir.name
        self._producers: dict[int, ProducerStateEntry] = {}
        # Capacity of the broker's HashMap for this map: it sets the snapshot's entry order
        # and, like the Java table, grows with the largest size ever held and never shrinks.
        self._capacity = _JAVA_HASHMAP_INITIAL_CAPACITY
        self._ongoing: dict[int, TxnMetadata] = {}  # by first offset
        self._unreplicated: dict[int, TxnMetadata] = {}  # completed, marker not yet below the HW
        self._snapshots: dict[int, Path] = list_snapshot_files(self.log_dir)
        self._last_map_offset = 0
        self._last_snap_offset = 0

    # -- the map ----------------------------------------------------------------------------

    @property
    def producers(self) -> Mapping[int, ProducerStateEntry]:
        """Read-only view of the active producers, in the map's insertion order."""
        return MappingProxyType(self._producers)

    @property
    def producer_id_count(self) -> int:
        return len(self._producers)

    @property
    def map_end_offset(self) -> int:
        return self._last_map_offset

    def update_map_end_offset(self, offset: int) -> None:
        self._last_map_offset = offset

    def is_empty(self) -> bool:
        """No producers and no completed-but-unreplicated transactions (``isEmpty``)."""
        return not self._producers and not self._unreplicated

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    def _add_producer(self, entry: ProducerStateEntry) -> None:
        self._producers[entry.producer_id] = entry
        while len(self._producers) > self._capacity * 3 // 4:
            self._capacity *= 2

    def prepare_update(self, producer_id: int,
                       origin: AppendOrigin | str = AppendOrigin.REPLICATION) -> ProducerAppendInfo:
        current = self._producers.get(producer_id) or ProducerStateEntry.empty(producer_id)
        return ProducerAppendInfo(producer_id, current, origin, self.partition)

    def update(self, append_info: ProducerAppendInfo) -> None:
        """Merge an append into the map and register the transactions it opened."""
        if append_info.producer_id == NO_PRODUCER_ID:
            raise ValueError(f"Invalid producer id {append_info.producer_id} passed to update for partition "
                             f"{self.partition}")
        updated = append_info.to_entry()
        current = self._producers.get(append_info.producer_id)
        if current is not None:
            current.update(updated)
        else:
            self._add_producer(updated.copy())
        for txn in append_info.started_transactions:
            self._ongoing[txn.first_offset] = txn

    def load_producer_entry(self, entry: ProducerStateEntry) -> None:
        """Put an entry read from a snapshot into the map, with its open transaction."""
        self._add_producer(entry)
        if entry.current_txn_first_offset is not None:
            self._ongoing[entry.current_txn_first_offset] = TxnMetadata(entry.producer_id,
                                                                       entry.current_txn_first_offset)

    def find_duplicate_batch(self, producer_id: int, producer_epoch: int, first_seq: int,
                             last_seq: int) -> BatchMetadata | None:
        """The already-appended batch a client retry duplicates (same epoch and exact
        sequence range among the last 5 batches), or None. The leader answers such a retry
        with the original batch's offsets instead of appending it again."""
        entry = self._producers.get(producer_id)
        return None if entry is None else entry.find_duplicate_batch(producer_epoch, first_seq, last_seq)

    def _is_expired(self, current_time_ms: int, entry: ProducerStateEntry) -> bool:
        # A producer with an open transaction never expires: its transaction pins the LSO.
        return (entry.current_txn_first_offset is None
                and current_time_ms - entry.last_timestamp >= self.producer_id_expiration_ms)

    def remove_expired_producers(self, current_time_ms: int) -> list[int]:
        """Drop producers idle for ``producer.id.expiration.ms``; returns their ids."""
        expired = [pid for pid, e in self._producers.items() if self._is_expired(current_time_ms, e)]
        for pid in expired:
            del self._producers[pid]
        return expired

    # -- transactions -----------------------------------------------------------------------

    @property
    def ongoing_txns(self) -> list[TxnMetadata]:
        """Open transactions, by first offset."""
        return [self._ongoing[k] for k in sorted(self._ongoing)]

    @property
    def unreplicated_txns(self) -> list[TxnMetadata]:
        """Completed transactions whose marker is not yet below the high watermark."""
        return [self._unreplicated[k] for k in sorted(self._unreplicated)]

    def first_undecided_offset(self) -> int | None:
        """First offset of the earliest open transaction."""
        return min(self._ongoing) if self._ongoing else None

    def first_unstable_offset(self) -> int | None:
        """First offset of the earliest transaction that is open, or completed with its
        marker not yet replicated (``firstUnstableOffset``). After recovery nothing moves the
        high watermark, so call :meth:`on_high_watermark_updated` (e.g. with the log end
        offset on a single replica) to release completed ones."""
        candidates = [min(d) for d in (self._ongoing, self._unreplicated) if d]
        return min(candidates) if candidates else None

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        self._remove_unreplicated_transactions(high_watermark)

    def _remove_unreplicated_transactions(self, offset: int) -> None:
        for first, txn in list(self._unreplicated.items()):
            if txn.last_offset is not None and txn.last_offset < offset:
                del self._unreplicated[first]

    def last_stable_offset(self, completed_txn: CompletedTxn) -> int:
        """LSO to store with an abort (§7.4): first offset of the earliest open transaction
        of another producer, else the marker offset + 1. Call before :meth:`complete_txn`
        (the completing transaction is still "open" and must not count)."""
        for first in sorted(self._ongoing):
            if self._ongoing[first].producer_id != completed_txn.producer_id:
                return first
        return completed_txn.last_offset + 1

    def complete_txn(self, completed_txn: CompletedTxn) -> None:
        txn = self._ongoing.pop(completed_txn.first_offset, None)
        if txn is None:
            raise ValueError(f"Attempted to complete transaction {completed_txn} on partition {self.partition} "
                             f"which was not started")
        txn.last_offset = completed_txn.last_offset
        self._unreplicated[completed_txn.first_offset] = txn

    # -- snapshots -----------------------------------------------------------------------------

    def snapshot_offsets(self) -> list[int]:
        return sorted(self._snapshots)

    @property
    def latest_snapshot_offset(self) -> int | None:
        return max(self._snapshots) if self._snapshots else None

    @property
    def oldest_snapshot_offset(self) -> int | None:
        return min(self._snapshots) if self._snapshots else None

    def snapshot_path(self, offset: int) -> Path:
        return self.log_dir / snapshot_file_name(offset)

    def snapshot_entries(self) -> list[ProducerSnapshotEntry]:
        """The map as snapshot records, in the order the broker would write them."""
        by_id = {pid: e.to_snapshot_entry() for pid, e in self._producers.items()}
        return [by_id[pid] for pid in java_hash_map_order(by_id, self._capacity)]

    def snapshot_bytes(self) -> bytes:
        return encode_snapshot(self.snapshot_entries(), order="given")

    def take_snapshot(self, sync: bool = True) -> Path | None:
        """Write the map at ``map_end_offset`` unless a snapshot at or past it was already
        written or loaded (``takeSnapshot``); returns the new file, or None.

        Kafka writes the file in place (CREATE+WRITE, then fsync when ``sync``) -- without
        truncating an existing longer file, which would then fail its CRC. We write
        ``<name>.tmp``, fsync it (when ``sync``), and rename it over the final name, then
        fsync the directory: a crash leaves the old file or the new one, never a torn one.
        """
        if self._last_map_offset <= self._last_snap_offset:
            return None
        path = self.snapshot_path(self._last_map_offset)
        tmp = path.with_name(path.name + _TMP_SUFFIX)
        data = self.snapshot_bytes()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                if sync:
                    os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, path)
        except BaseException as e:
            # A full disk or Ctrl-C leaves no stray .tmp behind (log loading does not look
            # for one), and the error names the file.
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            if isinstance(e, OSError) and e.filename in (None, str(tmp)):
                # Name the snapshot the user would look for, not the temporary just removed.
                raise OSError(e.errno, e.strerror, str(path)) from None
            raise
        if sync:
            _fsync_dir(self.log_dir)
        self._snapshots[self._last_map_offset] = path
        self._last_snap_offset = self._last_map_offset
        return path

    def _remove_and_delete_snapshot(self, offset: int) -> None:
        path = self._snapshots.pop(offset, None)
        if path is not None:
            _delete_if_exists(path)

    def remove_and_mark_snapshot_for_deletion(self, offset: int) -> Path | None:
        """Forget the snapshot at ``offset`` and rename it ``….snapshot.deleted`` (segment
        deletion does this, deleting the file after ``file.delete.delay.ms``). Returns the
        renamed path, or None if there was none (or it vanished already)."""
        path = self._snapshots.pop(offset, None)
        if path is None:
            return None
        target = path.with_name(path.name + DELETED_SUFFIX)
        try:
            os.replace(path, target)
        except FileNotFoundError:
            return None
        return target

    def delete_snapshots_before(self, offset: int) -> None:
        """Delete the snapshots at offsets in ``[0, offset)``."""
        for snap in [o for o in self._snapshots if o < offset]:
            self._remove_and_delete_snapshot(snap)

    def remove_stray_snapshots(self, segment_base_offsets: Iterable[int]) -> list[int]:
        """Delete the snapshots :func:`stray_snapshots` names -- ``removeStraySnapshots``.
        Rescans the directory first. Returns the offsets deleted."""
        snapshots = list_snapshot_files(self.log_dir)
        deleted = sorted(stray_snapshots(snapshots, segment_base_offsets))
        for offset in deleted:
            _delete_if_exists(snapshots.pop(offset))
        self._snapshots = snapshots
        return deleted

    def _clear_state(self) -> None:
        # The Java HashMap keeps its table size through clear(), so _capacity stays.
        self._producers.clear()
        self._ongoing.clear()
        self._unreplicated.clear()

    def load(self, log_start_offset: int, current_time_ms: int) -> int | None:
        """Replace the map with the latest readable snapshot (``loadFromSnapshot``).

        A snapshot that fails to decode is deleted and the next older one tried. Expired
        producers are skipped. ``map_end_offset`` becomes the snapshot's offset, or
        ``log_start_offset`` when no snapshot is left. Returns the offset loaded, or None.
        """
        self._clear_state()
        while self._snapshots:
            offset = max(self._snapshots)
            path = self._snapshots[offset]
            try:
                entries = read_snapshot(path)
            except CorruptSnapshotError as e:
                log.warning("Failed to load producer snapshot from '%s': %s", path, e)
                self._remove_and_delete_snapshot(offset)
                continue
            for entry in entries:
                if not self._is_expired(current_time_ms, entry):
                    self.load_producer_entry(entry)
            self._last_snap_offset = self._last_map_offset = offset
            return offset
        self._last_snap_offset = self._last_map_offset = log_start_offset
        return None

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int, current_time_ms: int) -> int | None:
        """Drop snapshots outside ``(log_start_offset, log_end_offset]`` and, unless the map
        already ends at ``log_end_offset``, reload from the latest remaining snapshot
        (``truncateAndReload``). Returns the snapshot offset loaded, or None."""
        for offset in list(self._snapshots):
            if snapshot_out_of_range(offset, log_start_offset, log_end_offset):
                self._remove_and_delete_snapshot(offset)
        if log_end_offset != self._last_map_offset:
            return self.load(log_start_offset, current_time_ms)
        self.on_log_start_offset_incremented(log_start_offset)
        return None

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        """Forget replicated-below-start transactions and move the map end up to the start."""
        self._remove_unreplicated_transactions(log_start_offset)
        if self._last_map_offset < log_start_offset:
            self._last_map_offset = log_start_offset
        latest = self.latest_snapshot_offset
        self._last_snap_offset = log_start_offset if latest is None else latest

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Empty the map, delete every snapshot and start again at ``offset``."""
        self._clear_state()
        for snap in list(self._snapshots):
            self._remove_and_delete_snapshot(snap)
        self._last_snap_offset = 0
        self._last_map_offset = offset

    def truncate_fully_and_reload_snapshots(self) -> None:
        self.truncate_fully_and_start_at(0)
        self._snapshots = list_snapshot_files(self.log_dir)

    def __repr__(self) -> str:
        return (f"ProducerStateManager({str(self.log_dir)!r}, producers={len(self._producers)}, "
                f"map_end_offset={self._last_map_offset}, snapshots={self.snapshot_offsets()})")


# ------------------------------------------------------------------------------ feeding from disk


def update_producers_from_batch(psm: ProducerStateManager, batch, append_infos: dict | None = None,
                                origin: AppendOrigin = AppendOrigin.REPLICATION) -> CompletedTxn | None:
    """Apply one batch read from disk to the producer state; return the CompletedTxn its
    marker closed, if any. Batches without a producer id (and legacy ones) are ignored.

    With ``append_infos`` (a dict the caller keeps for a chunk of batches) this is
    ``UnifiedLog.updateProducers``: the batch is added to that producer's pending
    :class:`ProducerAppendInfo` and the caller later calls ``psm.update`` for each info and
    ``psm.complete_txn`` for each returned txn (see :func:`load_producers_from_batches`).

    Without it, it is the first half of ``LogSegment.updateProducerState``: the producer's
    entry is updated at once; the caller then takes ``psm.last_stable_offset(txn)`` for the
    ``.txnindex``, calls ``psm.complete_txn(txn)`` and ``psm.update_map_end_offset(batch.last_offset + 1)``
    (:func:`segment_update_producer_state` does all of that).
    """
    producer_id = getattr(batch, "producer_id", NO_PRODUCER_ID)
    if producer_id < 0:
        return None
    if append_infos is None:
        info = psm.prepare_update(producer_id, origin)
        completed = info.append(batch)
        psm.update(info)
        return completed
    info = append_infos.get(producer_id)
    if info is None:
        info = append_infos[producer_id] = psm.prepare_update(producer_id, origin)
    return info.append(batch)


def load_producers_from_batches(psm: ProducerStateManager, batches: Iterable,
                                origin: AppendOrigin = AppendOrigin.REPLICATION) -> list[CompletedTxn]:
    """``UnifiedLog.loadProducersFromRecords`` for one read chunk: accumulate per producer,
    then update the map (in the iteration order of Kafka's HashMap of infos) and complete
    the transactions. Does not move ``map_end_offset``. Returns the completed transactions."""
    infos: dict[int, ProducerAppendInfo] = {}
    completed = []
    for batch in batches:
        txn = update_producers_from_batch(psm, batch, infos, origin)
        if txn is not None:
            completed.append(txn)
    for pid in java_hash_map_order(infos):
        psm.update(infos[pid])
    for txn in completed:
        psm.complete_txn(txn)
    return completed


def aborted_txn_for(completed_txn: CompletedTxn, last_stable_offset: int) -> AbortedTxn:
    """The ``.txnindex`` entry for an aborted transaction (``new AbortedTxn(completedTxn, lso)``).

    A CompletedTxn exists only for transactions that had data (the first offset is known);
    committed ones are never indexed, so passing one is an error.
    """
    if not completed_txn.is_aborted:
        raise ValueError(f"{completed_txn} was committed; only aborted transactions are indexed")
    return AbortedTxn(0, completed_txn.producer_id, completed_txn.first_offset, completed_txn.last_offset,
                      last_stable_offset)


def segment_update_producer_state(psm: ProducerStateManager, batch) -> AbortedTxn | None:
    """``LogSegment.updateProducerState`` for one batch during segment recovery: update the
    producer, complete any transaction its marker closed, advance ``map_end_offset`` past
    the batch, and return the AbortedTxn to append to the segment's ``.txnindex`` (None
    unless an ABORT closed a transaction that had data)."""
    aborted = None
    completed = update_producers_from_batch(psm, batch)
    if completed is not None:
        lso = psm.last_stable_offset(completed)
        if completed.is_aborted:
            aborted = aborted_txn_for(completed, lso)
        psm.complete_txn(completed)
    psm.update_map_end_offset(batch.last_offset + 1)
    return aborted


def replay_batches(psm: ProducerStateManager, batches: Iterable, end_offset: int | None = None) -> list[AbortedTxn]:
    """Feed batches through :func:`segment_update_producer_state`, stopping before the first
    batch whose last offset reaches ``end_offset`` (as a rebuild up to an offset reads only
    the batches before the one holding it); returns the aborted transactions found."""
    aborted_txns = []
    for batch in batches:
        if end_offset is not None and batch.last_offset >= end_offset:
            break
        aborted = segment_update_producer_state(psm, batch)
        if aborted is not None:
            aborted_txns.append(aborted)
    return aborted_txns
