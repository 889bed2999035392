"""Kafka's segment indexes, one module per class; this module gathers their names.

* :mod:`~plog.engine.storage.abstract_index`: ``AbstractIndex``, the mapped machinery
  (lazy open, preallocation, trim, eviction by the descriptor budget, full file systems);
* :mod:`~plog.engine.storage.offset_index`: ``OffsetIndex`` (``.index``);
* :mod:`~plog.engine.storage.time_index`: ``TimeIndex`` (``.timeindex``);
* :mod:`~plog.engine.storage.transaction_index`: ``TransactionIndex`` (``.txnindex``);
* :mod:`~plog.engine.storage.index_file`: index files read with ``pread`` by the
  read-only tools.

Byte layouts, the search and the sanity rules are :mod:`plog.formats.indexes`', which every
path above runs.
"""

from __future__ import annotations

from plog.formats.indexes import AbortedTxn, OffsetPosition, TimestampOffset

from plog.engine.storage.abstract_index import AbstractIndex
from plog.engine.storage.offset_index import OffsetIndex
from plog.engine.storage.time_index import TimeIndex
from plog.engine.storage.transaction_index import TransactionIndex, TxnIndexSearchResult

__all__ = [
    "AbortedTxn",
    "AbstractIndex",
    "OffsetIndex",
    "OffsetPosition",
    "TimeIndex",
    "TimestampOffset",
    "TransactionIndex",
    "TxnIndexSearchResult",
]
