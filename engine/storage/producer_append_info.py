"""Validating one producer's appends (Kafka's ``ProducerAppendInfo`` and ``AppendOrigin``).

An append goes through a :class:`ProducerAppendInfo` built from the producer's current
entry by ``ProducerStateManager.prepare_update``; it validates each batch against the entry
and a working copy (``updated_entry``, which starts with the current epoch/coordinator
epoch/txn but *no* batch metadata), and ``ProducerStateManager.update`` merges that copy
back into the map. Nothing is changed in the map until then. The rules (data batches, end
markers) are listed in :mod:`plog.engine.storage.producer_state`.
"""

from __future__ import annotations

import enum

from plog.formats.control import ControlRecordType, EndTransactionMarker, parse_control_key
from plog.formats.errors import InvalidRecordError
from plog.formats.records import NO_PRODUCER_EPOCH, NO_SEQUENCE

from plog.engine.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from plog.engine.storage.producer_state_entry import (
    INT32_MAX,
    CompletedTxn,
    ProducerStateEntry,
    TxnMetadata,
)

def _log():
    """The producer state's logger, shared with producer_state.py (logging is imported on
    first use, for start-up time)."""
    import logging

    return logging.getLogger("plog.engine.storage.producer_state")

#: ``TransactionVersion.TV_UNKNOWN``: what a replicated marker carries (the version is not on disk).
TV_UNKNOWN = -1


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
                _log().info("Idempotent transaction marker retry for producer %d epoch %d", self.producer_id,
                         producer_epoch)
                return
            message = (f"Epoch of {self._where(offset)} is {producer_epoch}, which is "
                       f"{'<=' if strict else '<'} the last seen epoch {current} (TV{transaction_version})")
            if self.origin is AppendOrigin.REPLICATION:
                # The leader already decided; a follower/recovery must take what is on disk.
                _log().warning(message)
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
                _log().info("Invalid coordinator epoch for %s: %d is older than previously known coordinator epoch %d",
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
