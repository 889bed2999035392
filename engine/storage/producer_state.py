"""Producer state: idempotence, transactions and ``.snapshot`` files (Kafka's ``ProducerStateManager``).

A partition remembers, per producer id, just enough to deduplicate retries, fence zombie
producers and track open transactions. The rules below are those of Kafka trunk's
``storage/.../log/{ProducerStateManager,ProducerStateEntry,ProducerAppendInfo,BatchMetadata,
TxnMetadata,CompletedTxn}.java`` (read for this port, not copied), and of the callers that
feed it from disk: ``LogSegment.updateProducerState`` (segment recovery, §8.5 of
``docs/kafka-format.md``) and ``UnifiedLog.updateProducers``/``loadProducersFromRecords``
(``rebuildProducerState``, §13.2 step 12).

State kept per producer: :class:`ProducerStateEntry` (its fields are listed in
:mod:`~plog.engine.storage.producer_state_entry`).

The state machine, one producer at a time. An append goes through a
:class:`ProducerAppendInfo` (:mod:`~plog.engine.storage.producer_append_info`) built from the
current entry by ``prepare_update``, which validates each batch; ``update`` merges the result
back into the map. Nothing is changed in the map until ``update``:

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

Modules: the entry and its values (:mod:`~plog.engine.storage.producer_state_entry`), the
validation of one producer's appends (:mod:`~plog.engine.storage.producer_append_info`),
the snapshot files (:mod:`~plog.engine.storage.producer_snapshots`), and here the manager
and the functions that feed it from disk. Every name is importable from here.
"""
from __future__ import annotations

import os
from pathlib import Path
from types import MappingProxyType
from typing import Iterable, Mapping

from plog.formats.errors import CorruptSnapshotError
from plog.formats.indexes import AbortedTxn
from plog.formats.producer_snapshot import ProducerSnapshotEntry, encode_snapshot, java_hash_map_order

from plog.engine.storage.file_names import DELETED_FILE_SUFFIX
from plog.engine.errors import InvalidTxnStateError, TransactionCoordinatorFencedError
from plog.engine.storage.producer_append_info import (  # _log: this module's logger, imported late
    TV_UNKNOWN, AppendOrigin, ProducerAppendInfo, _log)
from plog.engine.storage.producer_snapshots import (
    delete_snapshot_file,
    list_snapshot_files,
    read_snapshot,
    snapshot_file_name,
    snapshot_out_of_range,
    stray_snapshots,
    write_snapshot_file,
)
from plog.engine.storage.producer_state_entry import (
    INT32_MAX,
    NO_PRODUCER_ID,
    NUM_BATCHES_TO_RETAIN,
    BatchMetadata,
    CompletedTxn,
    ProducerStateEntry,
    TxnMetadata,
)


#: ``producer.id.expiration.ms`` default (1 day).
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000
_JAVA_HASHMAP_INITIAL_CAPACITY = 16

__all__ = [
    "DEFAULT_PRODUCER_ID_EXPIRATION_MS", "INT32_MAX", "NO_PRODUCER_ID", "NUM_BATCHES_TO_RETAIN", "TV_UNKNOWN",
    "AppendOrigin", "BatchMetadata", "CompletedTxn", "InvalidTxnStateError", "ProducerAppendInfo",
    "ProducerStateEntry", "ProducerStateManager", "TransactionCoordinatorFencedError", "TxnMetadata",
    "aborted_txn_for", "list_snapshot_files", "load_producers_from_batches", "read_snapshot", "replay_batches",
    "segment_update_producer_state", "snapshot_file_name", "snapshot_out_of_range", "stray_snapshots",
    "update_producers_from_batch",
]

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

    def apply_data_batches(self, producer_id: int, producer_epoch: int, batches: Iterable[tuple],
                           last_timestamp: int, started: int | None) -> None:
        """A run of one producer's data batches applied at once, as segment recovery's native
        walk hands them over (engine/storage/recovery_walk.py). The same entry as ``update``
        batch by batch, given what the walk guarantees: the epoch never went down, no batch
        came while a transaction was open unless transactional, no marker was among them.
        ``batches`` are the last (up to five) ``(last_seq, last_offset, offset_delta,
        timestamp)`` since the epoch last changed; ``started`` is the first offset of the
        transaction they opened, or None."""
        entry = self._producers.get(producer_id)
        if entry is None:
            entry = ProducerStateEntry.empty(producer_id)
            self._add_producer(entry)
        entry.maybe_update_producer_epoch(producer_epoch)
        entry.batch_metadata.extend(BatchMetadata(*b) for b in batches)
        entry.last_timestamp = last_timestamp
        if started is not None:
            entry.current_txn_first_offset = started
            self._ongoing[started] = TxnMetadata(producer_id, started)

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
        written or loaded (``takeSnapshot``); returns the new file, or None. The file is
        written whole (:func:`~plog.engine.storage.producer_snapshots.write_snapshot_file`)."""
        if self._last_map_offset <= self._last_snap_offset:
            return None
        path = self.snapshot_path(self._last_map_offset)
        write_snapshot_file(path, self.snapshot_bytes(), sync)
        self._snapshots[self._last_map_offset] = path
        self._last_snap_offset = self._last_map_offset
        return path

    def _remove_and_delete_snapshot(self, offset: int) -> None:
        path = self._snapshots.pop(offset, None)
        if path is not None:
            delete_snapshot_file(path)

    def remove_and_mark_snapshot_for_deletion(self, offset: int) -> Path | None:
        """Forget the snapshot at ``offset`` and rename it ``….snapshot.deleted`` (segment
        deletion does this, deleting the file after ``file.delete.delay.ms``). Returns the
        renamed path, or None if there was none (or it vanished already)."""
        path = self._snapshots.pop(offset, None)
        if path is None:
            return None
        target = path.with_name(path.name + DELETED_FILE_SUFFIX)
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
            delete_snapshot_file(snapshots.pop(offset))
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
                _log().warning("Failed to load producer snapshot from '%s': %s", path, e)
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
