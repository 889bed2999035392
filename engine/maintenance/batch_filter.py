"""The cleaner's record filter, applied batch by batch as ``MemoryRecords.filterTo`` does
(kafka-format.md §16.5).

Each batch gets a ``BatchRetention`` (Kafka's ``RecordFilter.checkBatchRetention``):

* ``retain-empty``: the last batch of an active producer, or the batch that ends right at
  the clean's upper bound, stays at least as an empty header (the producer state and the
  log end offset are rebuilt from it);
* ``delete``: every record goes (aborted transactional data, a marker whose transaction
  is gone and whose delete horizon passed), and so does the batch;
* ``delete-empty``: the records are filtered one by one and the batch goes only when none
  is left.

A record survives (``Cleaner.shouldRetainRecord``) when it is past the mapped range, or the
latest for its key; a tombstone until its delete horizon; a key-less record never. A batch
whose records all survive (and that needs no horizon) is copied byte for byte; others are
rebuilt with the same header fields.

With a native offset map (``RecordFilter.native``) a data batch's retention check and the
rebuild of an uncompressed v2 batch run natively (native/src/compact.rs), each falling back
to the reference code for a batch it cannot take; the results are the reference's.
"""

from __future__ import annotations

import hashlib

from plog.formats import native
from plog.formats.default_record import HEAD_VALUE_POSITION, RecordHead
from plog.formats.legacy import encode_legacy_batch
from plog.formats.record_batch import RECORDS_OFFSET, encode_batch, encode_empty_batch
from plog.formats.record_keys import NULL_VALUE, keyed_records
from plog.formats.records import CREATE_TIME, LOG_APPEND_TIME

from plog.engine.maintenance.cleaned_transactions import CleanedTransactionMetadata
from plog.engine.maintenance.cleaner_stats import CleanStats
from plog.engine.storage.log_config import LogConfig

# BatchRetention (MemoryRecords.RecordFilter)
DELETE = "delete"
RETAIN_EMPTY = "retain-empty"
DELETE_EMPTY = "delete-empty"

#: What a batch becomes: ``(bytes, max offset, max timestamp, offset of the max timestamp)``,
#: or None when it goes.
FilteredBatch = tuple


def batch_retention(batch, active: dict, upper_bound: int, discard_records: bool) -> str:
    """``checkBatchRetention``: ``active`` maps each producer id to ``(last data offset,
    epoch)`` of the producer state; ``upper_bound`` is where this clean ends."""
    pid = batch.producer_id
    last = active.get(pid) if pid >= 0 else None
    is_last_of_producer = False
    if last is not None:
        last_data_offset, epoch = last
        if last_data_offset >= 0:
            is_last_of_producer = batch.last_offset == last_data_offset
        else:
            is_last_of_producer = batch.is_control and batch.producer_epoch == epoch
    if pid >= 0 and is_last_of_producer:
        return RETAIN_EMPTY
    if batch.next_offset == upper_bound:
        return RETAIN_EMPTY
    return DELETE if discard_records else DELETE_EMPTY


class RecordFilter:
    """The cleaner's filter for one pass: the offset map ``omap`` says which key's latest
    offset is where, ``now`` decides delete horizons, ``stats`` counts what goes."""

    def __init__(self, omap, *, now: int, config: LogConfig, stats: CleanStats):
        self.map = omap
        #: The native loops run with the native map (the reference map keeps the reference).
        self.native = hasattr(omap, "retained")
        self.now = now
        self.cfg = config
        self.stats = stats

    def filter_batch(self, batch, tracker: CleanedTransactionMetadata, active: dict, retain_legacy: bool,
                     upper_bound: int) -> FilteredBatch | None:
        """One batch through the filter. Returns None when the batch goes, else (bytes, max
        offset, max timestamp, offset of max timestamp)."""
        stats = self.stats
        stats.batches_read += 1
        is_control = batch.is_control
        if is_control:
            can_discard = tracker.on_control_batch(batch)
            horizon = batch.delete_horizon_ms
            discard_records = can_discard and horizon is not None and horizon <= self.now
        else:
            can_discard = tracker.on_batch(batch)
            discard_records = can_discard
        retention = batch_retention(batch, active, upper_bound, discard_records)
        if retention == DELETE:
            if is_control:
                stats.txn_markers_removed += batch.records_count or 0
            else:
                stats.aborted_records_removed += batch.records_count or 0
            return None
        records, n, keep, tombstones = self._select(batch, discard_records, retain_legacy)
        stats.records_read += n
        if discard_records:
            if is_control:
                stats.txn_markers_removed += n
            else:
                stats.aborted_records_removed += n
        stats.records_kept += len(keep)
        if keep:
            return self._kept(batch, records, keep, n, tombstones, marker_for_empty_txn=can_discard and is_control)
        if retention == RETAIN_EMPTY and batch.magic >= 2:
            stats.batches_kept += 1
            stats.empty_batches_retained += 1
            return _empty_batch(batch), batch.last_offset, batch.max_timestamp, batch.last_offset
        return None

    def _select(self, batch, discard_records: bool, retain_legacy: bool) -> tuple[list | None, int, list[int], int]:
        """``(records or None, how many, indexes of those kept, tombstones among them)``: a
        control batch is decoded (its markers are few), a data batch read as keys only."""
        if batch.is_control:
            records = batch.records()
            n = len(records)
            return records, n, [] if discard_records else list(range(n)), 0
        if self.native and not discard_records and batch.magic >= 2 and (batch.records_count or 0) > 0:
            selected = self._select_native(batch)
            if selected is not None:
                return selected
        flags, rows = keyed_records(batch)
        keep = [] if discard_records else self.retained_indexes(batch, flags, rows, retain_legacy)
        tombstones = sum(1 for i in keep if flags[rows[i][HEAD_VALUE_POSITION]] == NULL_VALUE)
        return None, len(rows), keep, tombstones

    def _select_native(self, batch) -> tuple[None, int, list[int], int] | None:
        """:meth:`retained_indexes` of a v2 data batch in the native map's loop (stats
        counted as there), or None where the reference must run (nothing counted then)."""
        horizon = batch.delete_horizon_ms
        count = batch.records_count
        found = self.map.retained(records_region(batch), count, batch.base_offset, self.map.latest_offset,
                                  horizon is None or self.now < horizon)
        if found is None:
            return None
        keep, tombstones, keyless, removed, expired = found
        stats = self.stats
        stats.keyless_records_removed += keyless
        stats.tombstones_removed += removed
        stats.tombstones_expired += expired
        return None, count, keep, tombstones

    def _kept(self, batch, records: list | None, keep: list[int], n: int, tombstones: int, *,
              marker_for_empty_txn: bool) -> FilteredBatch:
        """A batch with survivors: copied as it is, or rebuilt with only ``keep`` (and a
        delete horizon when a tombstone or marker of an emptied transaction first gets one)."""
        stats = self.stats
        magic = batch.magic
        kept = len(keep)
        need_horizon = magic >= 2 and (tombstones or marker_for_empty_txn) and batch.delete_horizon_ms is None
        stats.batches_kept += 1
        if kept == n and not need_horizon:
            stats.batches_copied += 1
            return bytes(batch.buffer), batch.last_offset, batch.max_timestamp, batch.last_offset
        stats.batches_rebuilt += 1
        if magic >= 2:
            if need_horizon:
                horizon = self.now + self.cfg.delete_retention_ms
                stats.tombstones_given_horizon += tombstones
                if batch.is_control:
                    stats.txn_markers_given_horizon += kept
            else:
                horizon = batch.delete_horizon_ms
            if self.native and records is None and not batch.compression:
                rebuilt = _rebuild_v2_native(batch, keep, horizon)
                if rebuilt is not None:
                    data, max_ts, max_offset = rebuilt
                    return data, max_offset, max_ts, batch.last_offset
        if records is None:
            records = batch.records()
        retained = records if kept == n else [records[i] for i in keep]
        max_offset = retained[-1][0]
        if magic < 2:
            return _rebuild_legacy(batch, retained), max_offset, batch.max_timestamp, max_offset
        data, max_ts = _rebuild_v2(batch, retained, horizon)
        return data, max_offset, max_ts, batch.last_offset

    def retained_indexes(self, batch, flags: bytes, rows: list[RecordHead], retain_legacy: bool) -> list[int]:
        """``Cleaner.shouldRetainRecord`` over the :func:`keyed_records` of a data batch: the
        indexes of the records that stay."""
        omap = self.map
        latest = omap.latest_offset
        get = omap.get_hash
        md5 = hashlib.md5
        stats = self.stats
        if batch.magic >= 2:
            horizon = batch.delete_horizon_ms
            retain_deletes = horizon is None or self.now < horizon
        else:
            retain_deletes = retain_legacy
        keep = []
        append = keep.append
        for i, (_, _, offset, _, key, value_at) in enumerate(rows):
            if offset > latest:
                append(i)
                continue
            if key is None:
                stats.keyless_records_removed += 1
                continue
            if offset >= get(md5(key).digest()):
                if retain_deletes or flags[value_at] != NULL_VALUE:
                    append(i)
                else:
                    stats.tombstones_removed += 1
                    stats.tombstones_expired += 1
            elif flags[value_at] == NULL_VALUE:
                stats.tombstones_removed += 1
        return keep


def _rebuild_v2(batch, retained: list, horizon: int | None) -> tuple[bytes, int]:
    """The v2 batch with only the ``retained`` records and the same header fields; returns
    its bytes and its max timestamp."""
    lat = batch.timestamp_type == LOG_APPEND_TIME
    data = encode_batch(
        retained, base_offset=batch.base_offset, compression_codec=batch.compression,
        timestamp_type=LOG_APPEND_TIME if lat else CREATE_TIME,
        log_append_time=batch.max_timestamp if lat else None, producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch, base_sequence=batch.base_sequence,
        is_transactional=batch.is_transactional, is_control=batch.is_control,
        partition_leader_epoch=batch.partition_leader_epoch, delete_horizon_ms=horizon,
        last_offset_delta=batch.last_offset_delta)
    return data, max(r[1] for r in retained) if not lat else batch.max_timestamp


def _rebuild_v2_native(batch, keep: list[int], horizon: int | None) -> tuple[bytes, int, int] | None:
    """:func:`_rebuild_v2` of an uncompressed batch from its records region and the kept
    indexes, natively: ``(bytes, max timestamp, max offset)``, or None where the reference
    must run (a field the encoder refuses, a region that does not decode)."""
    if horizon is not None and not _I64_MIN <= horizon <= _I64_MAX:
        return None
    rebuilt = native.module.compact_rebuild_v2(
        records_region(batch), batch.records_count, keep, batch.base_offset, batch.partition_leader_epoch,
        batch.attributes, batch.base_timestamp, batch.max_timestamp, batch.producer_id, batch.producer_epoch,
        batch.base_sequence, batch.last_offset_delta, horizon)
    if rebuilt is None:
        return None
    data, max_ts, last_delta = rebuilt
    return data, max_ts, batch.base_offset + last_delta


_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1


def records_region(batch):
    """A v2 batch's records region for the native loops, which only read it during the
    call: a view of the batch's own bytes when uncompressed (no copy), else decompressed."""
    if batch.compression:
        return batch.records_payload()
    return batch.buffer[RECORDS_OFFSET:]


def _empty_batch(batch) -> bytes:
    """The header of a v2 batch with no record left (it keeps the producer state)."""
    return encode_empty_batch(
        base_offset=batch.base_offset, last_offset=batch.last_offset, producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch, base_sequence=batch.base_sequence,
        max_timestamp=batch.max_timestamp, timestamp_type=batch.timestamp_type,
        is_transactional=batch.is_transactional, is_control=batch.is_control,
        partition_leader_epoch=batch.partition_leader_epoch)


def _rebuild_legacy(batch, retained) -> bytes:
    lat = batch.timestamp_type == LOG_APPEND_TIME
    return encode_legacy_batch(
        [(r[0], r[1], r[2], r[3]) for r in retained], magic=batch.magic, compression_codec=batch.compression,
        timestamp_type=LOG_APPEND_TIME if lat else CREATE_TIME,
        log_append_time=batch.max_timestamp if lat else None, base_offset=retained[0][0])


__all__ = ["DELETE", "DELETE_EMPTY", "RETAIN_EMPTY", "RecordFilter", "batch_retention", "records_region"]
