"""A producer's state and the values around it (Kafka's ``ProducerStateEntry``,
``BatchMetadata``, ``TxnMetadata`` and ``CompletedTxn``); the rules that change it are in
:mod:`plog.engine.storage.producer_append_info`, the map of them in
:mod:`plog.engine.storage.producer_state`.

State kept per producer (:class:`ProducerStateEntry`)::

    producer_epoch             last epoch seen (-1 before any batch)
    batch_metadata             the last 5 data batches: (last_seq, last_offset, offset_delta,
                               timestamp); first_seq/first_offset are derived from them
    coordinator_epoch          from the last COMMIT/ABORT marker (-1 if none yet)
    last_timestamp             max timestamp of the last data batch, or the marker's timestamp
    current_txn_first_offset   first offset of the open transaction, or None
"""

from __future__ import annotations

from collections import deque
from typing import Iterable, NamedTuple

from plog.formats.producer_snapshot import ProducerSnapshotEntry
from plog.formats.records import NO_PRODUCER_EPOCH, NO_SEQUENCE, NO_TIMESTAMP, decrement_sequence

INT32_MAX = (1 << 31) - 1
NO_PRODUCER_ID = -1
#: ``ProducerStateEntry.NUM_BATCHES_TO_RETAIN``: how many recent batches a retry can match.
NUM_BATCHES_TO_RETAIN = 5


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
