"""Transactions as a ``read_committed`` consumer sees them, for a read-only reader.

A reader of a data directory never takes the ``.lock`` and never writes, so it cannot
rebuild producer state the way the broker's loader does (that writes snapshots). Instead,
:func:`transaction_state` works out the open transactions of a partition like this:

1. **Snapshot.** Take the newest readable ``<offset>.snapshot`` of the partition whose
   offset S lies in ``(log start offset, log end offset]`` (Kafka drops snapshots outside
   that range on load). Its entries carry ``current_txn_first_offset``: the transactions
   open at S. A snapshot that does not decode is passed over for the next older one, as
   Kafka's ``loadFromSnapshot`` does; with none left, S is the log start offset and
   nothing is open.
2. **Header scan.** Walk the batch headers from S to the log end offset as seen when the
   log was opened. A transactional data batch of a producer with no open transaction opens
   one at its base offset; a COMMIT/ABORT marker closes the producer's open transaction
   (a marker with none open -- an empty transaction -- changes nothing). Records are never
   decoded and nothing is decompressed; only a marker's 4-byte control key is read, from
   its uncompressed records region (a compressed marker, which Kafka never writes, is
   decoded).
3. **Last stable offset** (Kafka's LSO): the first offset of the earliest transaction
   still open, raised to the log start offset, else the log end offset. Without replicas
   to ask, the high watermark is taken to be the log end offset, so a transaction whose
   marker is written is decided (Kafka's "unreplicated" transactions do not arise).

Aborted transactions (:meth:`TxnState.aborted_transactions`) are Kafka's
``collectAbortedTransactions`` over the ``.txnindex`` files, plus the aborts the scan of
step 2 saw: a writer appends a marker to the ``.log`` before its ``.txnindex`` entry, so
a concurrent reader can see the first without the second.

:func:`read_committed_records` then filters like Kafka's consumer (``CompletedFetch``):
segment by segment (one "fetch" each, with its own aborted list), an aborted transaction
becomes active once a batch's last offset reaches its first offset, a transactional batch
of an active aborted producer is dropped, the producer's ABORT marker deactivates it, and
control batches are never returned. Nothing at or past the LSO is returned.

Memory: one batch of records at a time, plus the open transactions and the aborts found
by the scan (both bounded by the transactions after the snapshot offset).
"""

from __future__ import annotations

from typing import Iterator, NamedTuple

from plog.formats.control import CONTROL_KEY_SIZE, ControlRecordType, parse_control_key
from plog.formats.errors import FormatError, InvalidRecordError
from plog.formats.indexes import AbortedTxn
from plog.formats.partial_record import read_record_key
from plog.formats.producer_snapshot import decode_snapshot
from plog.formats.record_batch import RECORDS_OFFSET
from plog.formats.records import Record

from plog.engine.errors import OffsetOutOfRangeError
from plog.engine.storage.log import Log
from plog.engine.storage.producer_state import list_snapshot_files

__all__ = [
    "AbortedTxn",
    "BatchInfo",
    "OpenTxn",
    "TxnState",
    "marker_type",
    "read_committed_records",
    "read_uncommitted_records",
    "transaction_state",
]


class OpenTxn(NamedTuple):
    """A transaction with data in the log and no marker yet."""

    producer_id: int
    first_offset: int


class BatchInfo(NamedTuple):
    """The header facts of the batch a record came from (a copy: batch buffers are reused)."""

    base_offset: int
    last_offset: int
    magic: int
    partition_leader_epoch: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    is_transactional: bool
    timestamp_type: int
    compression: int


class TxnState:
    """Transaction facts of one partition as seen by a read-only reader.

    Invariants: ``log_start_offset <= last_stable_offset <= log_end_offset``;
    ``open_transactions`` is sorted by first offset and holds at most one transaction per
    producer; when it is non-empty, ``last_stable_offset == max(log_start_offset,
    open_transactions[0].first_offset)``, else ``last_stable_offset == log_end_offset``.
    ``snapshot_offset`` is where the scan started from a snapshot (None: from the log start).
    """

    def __init__(self, log: Log, *, snapshot_offset: int | None, open_transactions: list[OpenTxn],
                 scanned_aborts: list[AbortedTxn]):
        self.log_start_offset = log.log_start_offset
        self.log_end_offset = log.log_end_offset
        self.snapshot_offset = snapshot_offset
        self.open_transactions = tuple(sorted(open_transactions, key=lambda t: t.first_offset))
        if self.open_transactions:
            lso = max(self.open_transactions[0].first_offset, self.log_start_offset)
        else:
            lso = self.log_end_offset
        self.last_stable_offset = min(lso, self.log_end_offset)
        self._segments = log.segments
        self._scanned_aborts = scanned_aborts

    def aborted_transactions(self, start_offset: int, end_offset: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping ``[start_offset, end_offset)``: marker at or
        after ``start_offset`` and first offset before ``end_offset``, by marker offset.

        The ``.txnindex`` files are read as Kafka's ``collectAbortedTransactions`` does:
        from the segment holding ``start_offset`` forward, stopping at the first segment
        whose search is complete. Aborts found by the header scan but missing from the
        index files are added.
        """
        found: dict[tuple[int, int], AbortedTxn] = {}
        first = self._segments.first
        if first is not None:
            segment = self._segments.floor(max(start_offset, first.base_offset))
            while segment is not None:
                result = segment.txn_index.collect_aborted_txns(start_offset, end_offset)
                for txn in result.aborted_transactions:
                    found[(txn.producer_id, txn.last_offset)] = txn
                if result.is_complete:
                    break
                segment = self._segments.higher(segment.base_offset)
        for txn in self._scanned_aborts:
            if txn.last_offset >= start_offset and txn.first_offset < end_offset:
                found.setdefault((txn.producer_id, txn.last_offset), txn)
        return sorted(found.values(), key=lambda t: t.last_offset)

    def __repr__(self) -> str:
        return (f"TxnState(lso={self.last_stable_offset}, leo={self.log_end_offset}, "
                f"open={list(self.open_transactions)}, snapshot_offset={self.snapshot_offset})")


# -- building the state ----------------------------------------------------------------------


def transaction_state(log: Log) -> TxnState:
    """The open transactions, LSO and aborts of ``log`` (see the module docstring).

    Reads the snapshot files, batch headers and ``.txnindex`` files; writes nothing.
    Raises a :class:`~plog.formats.errors.FormatError` for a batch header that cannot be
    read (a torn batch at the end of the log is not one: it lies past the log end offset).
    """
    snapshot_offset, open_txns = _load_snapshot(log)
    start = log.log_start_offset if snapshot_offset is None else snapshot_offset
    aborts: list[AbortedTxn] = []
    for batch in _batches_from(log, start):
        if batch.magic < 2 or batch.producer_id < 0:
            continue
        pid = batch.producer_id
        if batch.is_control:
            marker = marker_type(batch)
            if marker not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
                continue
            first = open_txns.pop(pid, None)
            if first is not None and marker is ControlRecordType.ABORT:
                # Kafka's lastStableOffset(completedTxn): the earliest transaction still
                # open of *another* producer (this one was just removed), else marker + 1.
                lso = min(open_txns.values(), default=batch.base_offset + 1)
                aborts.append(AbortedTxn(0, pid, first, batch.base_offset, lso))
        elif batch.is_transactional and pid not in open_txns:
            open_txns[pid] = batch.base_offset
    return TxnState(log, snapshot_offset=snapshot_offset,
                    open_transactions=[OpenTxn(p, f) for p, f in open_txns.items()], scanned_aborts=aborts)


def _load_snapshot(log: Log) -> tuple[int | None, dict[int, int]]:
    """(snapshot offset, {producer id: open transaction's first offset}) of the newest
    snapshot that decodes, or (None, {}) when there is none."""
    for offset, path in sorted(list_snapshot_files(log.dir).items(), reverse=True):
        if not log.log_start_offset < offset <= log.log_end_offset:
            continue
        try:
            entries = decode_snapshot(path.read_bytes(), strict=False)
        except (OSError, FormatError):
            # Unreadable, or caught half-written (Kafka writes snapshots in place): an
            # older snapshot, or the log start, gives the same answer with a longer scan.
            continue
        return offset, {e.producer_id: e.current_txn_first_offset for e in entries
                        if e.current_txn_first_offset >= 0}
    return None, {}


def _batches_from(log: Log, offset: int):
    """Every batch from the one holding ``offset`` to the end of the log as opened
    (each segment's size was fixed when the log was opened)."""
    for segment in log.segments.values(offset):
        start = 0
        if segment.base_offset < offset:
            position = segment.translate_offset(offset)
            if position is None:
                continue  # the offset is past this segment's data
            start = position.position
        yield from segment.batches(start)


def marker_type(batch) -> ControlRecordType | None:
    """The control type of a control batch's first record, or None for an empty batch
    (what the cleaner leaves of a removed marker).

    Reads only the record's key (formats.partial_record). Kafka never compresses control
    batches; a compressed one is decoded in full rather than guessed at.
    """
    if batch.records_count <= 0:
        return None
    if batch.compression != 0:
        records = batch.records()
        key = records[0].key if records else None
    else:
        key = read_record_key(batch.buffer, RECORDS_OFFSET)
    if key is None:
        raise InvalidRecordError("Control record has no key", batch.position)
    if len(key) < CONTROL_KEY_SIZE:
        raise InvalidRecordError(f"Control record key of {len(key)} bytes is shorter than {CONTROL_KEY_SIZE}",
                                 batch.position)
    return parse_control_key(key)[1]


# -- reading records -------------------------------------------------------------------------


def read_committed_records(log: Log, start_offset: int | None = None, end_offset: int | None = None, *,
                           state: TxnState | None = None) -> Iterator[tuple[BatchInfo, Record]]:
    """``(batch info, record)`` for the records a ``read_committed`` consumer gets from
    ``start_offset`` (default: the log start) up to ``min(end_offset, LSO)``, exclusive.

    Records of aborted transactions and control batches are skipped (module docstring).
    ``state`` reuses a :func:`transaction_state` already computed for ``log``. Raises
    OffsetOutOfRangeError when ``start_offset`` is outside ``[log start, log end]``.
    """
    state = transaction_state(log) if state is None else state
    start = log.log_start_offset if start_offset is None else start_offset
    limit = state.last_stable_offset if end_offset is None else min(end_offset, state.last_stable_offset)
    return _read(log, start, limit, state)


def read_uncommitted_records(log: Log, start_offset: int | None = None,
                             end_offset: int | None = None) -> Iterator[tuple[BatchInfo, Record]]:
    """``(batch info, record)`` for every record of a data batch in ``[start_offset,
    end_offset)`` (defaults: the log start and end), as a ``read_uncommitted`` consumer
    gets them: aborted data included, control batches skipped."""
    start = log.log_start_offset if start_offset is None else start_offset
    limit = log.log_end_offset if end_offset is None else min(end_offset, log.log_end_offset)
    return _read(log, start, limit, None)


def _read(log: Log, start: int, limit: int, state: TxnState | None) -> Iterator[tuple[BatchInfo, Record]]:
    if not log.log_start_offset <= start <= log.log_end_offset:
        raise OffsetOutOfRangeError(
            f"Received request for offset {start} for partition {log.name}, but we only have log segments in the "
            f"range {log.log_start_offset} to {log.log_end_offset}.")
    return _read_segments(log, start, limit, state)


def _read_segments(log: Log, start: int, limit: int, state: TxnState | None) -> Iterator[tuple[BatchInfo, Record]]:
    if start >= limit:
        return
    for segment in log.segments.values(start, limit):
        seg_start = max(start, segment.base_offset)
        position = segment.translate_offset(seg_start)
        if position is None:
            continue
        aborted: list[AbortedTxn] = []
        if state is not None:
            nxt = log.segments.higher(segment.base_offset)
            upper = nxt.base_offset if nxt is not None else log.log_end_offset
            # Kafka's consumer polls the fetch's aborted list by first offset.
            aborted = sorted(state.aborted_transactions(seg_start, upper), key=lambda t: t.first_offset)
        next_aborted = 0
        aborted_pids: set[int] = set()
        for batch in segment.batches(position.position):
            if batch.magic >= 2 and batch.base_offset >= limit:
                return
            if state is not None and batch.magic >= 2 and batch.producer_id >= 0:
                # consumeAbortedTransactionsUpTo(batch.lastOffset)
                last = batch.last_offset
                while next_aborted < len(aborted) and aborted[next_aborted].first_offset <= last:
                    aborted_pids.add(aborted[next_aborted].producer_id)
                    next_aborted += 1
                if batch.is_control:
                    if marker_type(batch) is ControlRecordType.ABORT:
                        aborted_pids.discard(batch.producer_id)
                elif batch.is_transactional and batch.producer_id in aborted_pids:
                    continue
            if batch.is_control:
                continue
            records = batch.records()
            if not records:
                continue
            info = _batch_info(batch, records[0].offset)
            for record in records:
                if record.offset >= limit:
                    return
                if record.offset >= start:
                    yield info, record


def _batch_info(batch, first_record_offset: int) -> BatchInfo:
    # A compressed legacy wrapper only knows its base offset by decompressing; the first
    # decoded record has it.
    base = batch.base_offset if batch.magic >= 2 else first_record_offset
    return BatchInfo(base, batch.last_offset, batch.magic, batch.partition_leader_epoch, batch.producer_id,
                     batch.producer_epoch, batch.base_sequence, batch.is_transactional, batch.timestamp_type,
                     batch.compression)
