"""Transactions while cleaning: Kafka's ``CleanedTransactionMetadata`` and
``UnifiedLog.collectAbortedTransactions`` (kafka-format.md §16.4).
"""

from __future__ import annotations

import heapq

from plog.formats.control import ControlRecordType, parse_control_key

from plog.engine.storage.log import Log


class CleanedTransactionMetadata:
    """Which data batches belong to aborted transactions, and when markers may go.

    Aborted transactions (from the txn indexes) are consumed in first-offset order as the
    cleaner walks past their first offset. An ABORT marker is kept (and re-indexed into the
    cleaned segment's ``.txnindex``) while a batch of its transaction was seen in this
    pass; a COMMIT marker while a batch of its transaction was seen in this pass.
    """

    __slots__ = ("_heap", "_seq", "_committed", "_aborted", "cleaned_index")

    def __init__(self) -> None:
        self._heap: list = []
        self._seq = 0
        self._committed: set[int] = set()
        self._aborted: dict[int, list] = {}  # pid -> [AbortedTxn, last observed batch offset or None]
        self.cleaned_index = None

    def add_aborted(self, txns) -> None:
        for txn in txns:
            self._seq += 1
            heapq.heappush(self._heap, (txn.first_offset, self._seq, txn))

    def _consume_up_to(self, offset: int) -> None:
        heap = self._heap
        while heap and heap[0][0] <= offset:
            txn = heapq.heappop(heap)[2]
            if txn.producer_id not in self._aborted:
                self._aborted[txn.producer_id] = [txn, None]

    def on_control_batch(self, batch) -> bool:
        """True if the control batch may be discarded."""
        self._consume_up_to(batch.last_offset)
        records = batch.records()
        if not records:
            return True  # an empty control batch was already cleaned
        key = records[0].key
        try:
            _version, ctype = parse_control_key(key) if key is not None else (0, ControlRecordType.UNKNOWN)
        except Exception:
            return False
        pid = batch.producer_id
        if ctype == ControlRecordType.ABORT:
            meta = self._aborted.pop(pid, None)
            if meta is not None and meta[1] is not None:
                if self.cleaned_index is not None:
                    self.cleaned_index.append(meta[0])
                return False
            return True
        if ctype == ControlRecordType.COMMIT:
            if pid in self._committed:
                self._committed.discard(pid)
                return False
            return True
        return False

    def on_batch(self, batch) -> bool:
        """True if the data batch belongs to an aborted transaction."""
        heap = self._heap
        if heap and heap[0][0] <= batch.last_offset:
            self._consume_up_to(batch.last_offset)
        if batch.is_transactional:
            meta = self._aborted.get(batch.producer_id)
            if meta is not None:
                meta[1] = batch.last_offset
                return True
            self._committed.add(batch.producer_id)
        return False


def collect_aborted_transactions(log: Log, start_offset: int, upper_bound_offset: int) -> list:
    """``UnifiedLog.collectAbortedTransactions``: from the segment holding ``start_offset``
    on, the aborted transactions with ``last offset >= log start`` and ``first offset <
    upper_bound_offset``, stopping at the first segment whose search is complete."""
    found = []
    first = log.segments.floor(start_offset)
    if first is None:
        return found
    for seg in log.segments.values(first.base_offset):
        result = seg.txn_index.collect_aborted_txns(log.log_start_offset, upper_bound_offset)
        found.extend(result.aborted_transactions)
        if result.is_complete:
            break
    return found


__all__ = ["CleanedTransactionMetadata", "collect_aborted_transactions"]
