"""Tests for plog.engine.storage.producer_state (Kafka's ProducerStateManager)."""

from __future__ import annotations

import struct

import pytest

from conftest import CORPUS, corpus_files
from plog.engine.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from plog.engine.storage.producer_state import (
    INT32_MAX,
    AppendOrigin,
    BatchMetadata,
    CompletedTxn,
    InvalidTxnStateError,
    ProducerStateEntry,
    ProducerStateManager,
    TransactionCoordinatorFencedError,
    TxnMetadata,
    aborted_txn_for,
    load_producers_from_batches,
    read_snapshot,
    replay_batches,
    segment_update_producer_state,
    snapshot_file_name,
    update_producers_from_batch,
)
from plog.formats.batches import iter_batches
from plog.formats.control import ControlRecordType, encode_control_key, encode_end_txn_marker
from plog.formats.errors import CorruptSnapshotError
from plog.formats.indexes import AbortedTxn
from plog.formats.producer_snapshot import ProducerSnapshotEntry, decode_snapshot, encode_snapshot, java_hash_map_order
from plog.formats.record_batch import RecordBatch, encode_batch, encode_empty_batch
from plog.formats.records import Record

CLIENT = AppendOrigin.CLIENT
REPLICATION = AppendOrigin.REPLICATION
ABORT = ControlRecordType.ABORT
COMMIT = ControlRecordType.COMMIT
HOUR = 3_600_000


def append(psm, pid, epoch, first_seq, count, first_offset, *, ts=1000, txn=False, origin=CLIENT):
    """Append one data batch of ``count`` records through prepare_update/update."""
    info = psm.prepare_update(pid, origin)
    last_seq = (first_seq + count - 1) % (INT32_MAX + 1)
    info.append_data_batch(epoch, first_seq, last_seq, ts, first_offset, first_offset + count - 1, txn)
    psm.update(info)
    return info


def marker(psm, pid, epoch, control_type, offset, *, coordinator_epoch=0, ts=2000, origin=REPLICATION, tv=-1):
    info = psm.prepare_update(pid, origin)
    completed = info.append_end_txn_marker(control_type, coordinator_epoch, epoch, offset, ts, tv)
    psm.update(info)
    return completed


@pytest.fixture
def psm(tmp_path):
    return ProducerStateManager(tmp_path)


# ---------------------------------------------------------------------------------- idempotence


def test_in_order_sequences_accepted(psm):
    append(psm, 7, 0, 0, 3, 0)
    append(psm, 7, 0, 3, 2, 3, ts=1500)
    e = psm.last_entry(7)
    assert (e.producer_epoch, e.first_seq, e.last_seq, e.last_data_offset, e.last_offset_delta) == (0, 0, 4, 4, 1)
    assert e.last_timestamp == 1500 and e.current_txn_first_offset is None and e.coordinator_epoch == -1
    assert list(e.batch_metadata) == [BatchMetadata(2, 2, 2, 1000), BatchMetadata(4, 4, 1, 1500)]


def test_unknown_producer_may_start_at_any_sequence(psm):
    append(psm, 1, 3, 42, 1, 0)
    assert psm.last_entry(1).last_seq == 42


def test_gap_and_replay_rejected_for_clients_accepted_when_replicating(psm):
    append(psm, 1, 0, 0, 5, 0)
    with pytest.raises(OutOfOrderSequenceError, match=r"7 \(incoming seq. number\), 4 \(current end"):
        append(psm, 1, 0, 7, 1, 5)
    with pytest.raises(OutOfOrderSequenceError):
        append(psm, 1, 0, 0, 5, 5)  # a retry is not appended: the leader dedupes it first
    assert psm.last_entry(1).last_seq == 4  # a failed append changes nothing
    append(psm, 1, 0, 7, 1, 5, origin=REPLICATION)  # followers/recovery take what is on disk
    assert psm.last_entry(1).last_seq == 7


def test_sequences_checked_within_one_append_info(psm):
    append(psm, 1, 0, 0, 1, 0)
    info = psm.prepare_update(1, CLIENT)
    info.append_data_batch(0, 1, 2, 10, 1, 2, False)
    info.append_data_batch(0, 3, 3, 11, 3, 3, False)  # checked against the batch before it
    with pytest.raises(OutOfOrderSequenceError, match=r"5 \(incoming seq. number\), 3 \(current end"):
        info.append_data_batch(0, 5, 5, 12, 4, 4, False)
    assert psm.last_entry(1).last_seq == 0  # nothing reached the map before update()


def test_new_producer_sequences_unchecked_until_it_has_an_epoch(psm):
    # Kafka skips the continuity check while the map's entry has no epoch, even between
    # batches of the same append.
    info = psm.prepare_update(1, CLIENT)
    info.append_data_batch(0, 0, 1, 10, 0, 1, False)
    info.append_data_batch(0, 7, 7, 11, 2, 2, False)
    psm.update(info)
    assert psm.last_entry(1).last_seq == 7 and psm.last_entry(1).first_seq == 0


def test_find_duplicate_batch_keeps_last_five(psm):
    for i in range(7):
        append(psm, 9, 2, i * 2, 2, 100 + i * 2)
    entry = psm.last_entry(9)
    assert len(entry.batch_metadata) == 5
    assert psm.find_duplicate_batch(9, 2, 4, 5) == BatchMetadata(5, 105, 1, 1000)
    assert psm.find_duplicate_batch(9, 2, 12, 13).first_offset == 112
    assert psm.find_duplicate_batch(9, 2, 2, 3) is None  # evicted (6th newest)
    assert psm.find_duplicate_batch(9, 2, 4, 4) is None  # range must match exactly
    assert psm.find_duplicate_batch(9, 1, 4, 5) is None  # other epoch
    assert psm.find_duplicate_batch(10, 2, 4, 5) is None  # unknown producer


def test_epoch_bump_resets_sequence(psm):
    append(psm, 1, 0, 0, 3, 0)
    with pytest.raises(OutOfOrderSequenceError, match="Invalid sequence number for new epoch"):
        append(psm, 1, 1, 3, 1, 3)
    append(psm, 1, 1, 0, 1, 3)
    e = psm.last_entry(1)
    assert e.producer_epoch == 1 and list(e.batch_metadata) == [BatchMetadata(0, 3, 0, 1000)]  # old epoch dropped
    assert psm.find_duplicate_batch(1, 0, 0, 2) is None


def test_older_epoch_fenced(psm):
    append(psm, 1, 5, 0, 1, 0)
    with pytest.raises(InvalidProducerEpochError, match="is 4, which is < the last seen epoch 5"):
        append(psm, 1, 4, 0, 1, 1)
    with pytest.raises(InvalidProducerEpochError):
        append(psm, 1, 4, 1, 1, 1, origin=AppendOrigin.COORDINATOR)
    append(psm, 1, 4, 0, 1, 1, origin=REPLICATION)  # logged only
    assert psm.last_entry(1).producer_epoch == 4


def test_sequence_wraps_at_int32_max(psm):
    append(psm, 1, 0, INT32_MAX - 1, 2, 0)
    assert psm.last_entry(1).last_seq == INT32_MAX
    append(psm, 1, 0, 0, 1, 2)
    with pytest.raises(OutOfOrderSequenceError):
        append(psm, 1, 0, 0, 1, 3)
    # A batch straddling the wrap: first seq derived back through the wrap.
    append(psm, 2, 0, INT32_MAX - 1, 3, 10)
    e = psm.last_entry(2)
    assert e.last_seq == 0 and e.first_seq == INT32_MAX - 1
    assert psm.find_duplicate_batch(2, 0, INT32_MAX - 1, 0) is not None
    append(psm, 2, 0, 1, 1, 13)


# ---------------------------------------------------------------------------------- transactions


def test_transaction_commit(psm):
    append(psm, 3, 0, 0, 2, 10, txn=True)
    assert psm.last_entry(3).current_txn_first_offset == 10
    append(psm, 3, 0, 2, 2, 12, txn=True)
    assert psm.last_entry(3).current_txn_first_offset == 10  # only the first batch opens it
    assert psm.ongoing_txns == [TxnMetadata(3, 10)]
    assert psm.first_unstable_offset() == psm.first_undecided_offset() == 10
    completed = marker(psm, 3, 0, COMMIT, 14, coordinator_epoch=7, ts=5000)
    assert completed == CompletedTxn(3, 10, 14, False)
    e = psm.last_entry(3)
    # The marker closes the txn, sets coordinator epoch and timestamp, keeps the batches.
    assert (e.current_txn_first_offset, e.coordinator_epoch, e.last_timestamp, e.last_data_offset, e.last_seq) == (
        None, 7, 5000, 13, 3)
    assert psm.last_stable_offset(completed) == 15
    psm.complete_txn(completed)
    assert psm.ongoing_txns == [] and psm.first_undecided_offset() is None
    assert psm.first_unstable_offset() == 10  # until the marker is below the high watermark
    assert not psm.is_empty()
    psm.on_high_watermark_updated(15)
    assert psm.first_unstable_offset() is None


def test_marker_without_transaction_completes_nothing(psm):
    append(psm, 3, 0, 0, 1, 0)
    assert marker(psm, 3, 0, ABORT, 1) is None
    assert psm.last_entry(3).coordinator_epoch == 0
    with pytest.raises(ValueError, match="which was not started"):
        psm.complete_txn(CompletedTxn(3, 0, 1, True))
    with pytest.raises(ValueError):
        psm.prepare_update(3, REPLICATION).append_end_txn_marker(ControlRecordType.LEADER_CHANGE, 0, 0, 2, 0)


def test_non_transactional_write_inside_transaction_rejected_in_every_origin(psm):
    append(psm, 3, 0, 0, 1, 0, txn=True)
    for origin in (CLIENT, REPLICATION):
        with pytest.raises(InvalidTxnStateError):
            append(psm, 3, 0, 1, 1, 1, origin=origin)


def test_coordinator_epoch_fencing(psm):
    append(psm, 3, 0, 0, 1, 0, txn=True)
    marker(psm, 3, 0, COMMIT, 1, coordinator_epoch=5)
    append(psm, 3, 0, 1, 1, 2, txn=True)
    with pytest.raises(TransactionCoordinatorFencedError, match=r"4 \(zombie\), 5 \(current\)"):
        marker(psm, 3, 0, COMMIT, 3, coordinator_epoch=4, origin=AppendOrigin.COORDINATOR, tv=0)
    assert marker(psm, 3, 0, COMMIT, 3, coordinator_epoch=4) == CompletedTxn(3, 2, 3, False)


def test_tv2_marker_needs_bumped_epoch(psm):
    append(psm, 3, 4, 0, 1, 0, txn=True)
    with pytest.raises(InvalidProducerEpochError, match="<= the last seen epoch 4"):
        marker(psm, 3, 4, COMMIT, 1, origin=AppendOrigin.COORDINATOR, tv=2)
    assert marker(psm, 3, 5, COMMIT, 1, origin=AppendOrigin.COORDINATOR, tv=2) == CompletedTxn(3, 0, 1, False)
    e = psm.last_entry(3)
    assert e.producer_epoch == 5 and e.is_empty()  # the bump drops the old epoch's batches
    # A retried TV2 marker at the same epoch once the txn is over is tolerated (KAFKA-19999).
    assert marker(psm, 3, 5, COMMIT, 2, origin=AppendOrigin.COORDINATOR, tv=2) is None


def test_last_stable_offset_with_interleaved_producers(psm):
    # P1 txn opens at 0, P2 txn at 2; P1 aborts at 5 -> LSO is P2's first offset.
    append(psm, 1, 0, 0, 2, 0, txn=True)
    append(psm, 2, 0, 0, 2, 2, txn=True)
    append(psm, 1, 0, 2, 1, 4, txn=True)  # P1 again at 4, same transaction
    c1 = marker(psm, 1, 0, ABORT, 5)
    assert c1 == CompletedTxn(1, 0, 5, True)
    assert psm.first_unstable_offset() == 0
    lso1 = psm.last_stable_offset(c1)
    assert lso1 == 2
    assert aborted_txn_for(c1, lso1) == AbortedTxn(0, 1, 0, 5, 2)
    psm.complete_txn(c1)
    # P2 aborts at 6: no other open transaction -> marker offset + 1.
    c2 = marker(psm, 2, 0, ABORT, 6)
    assert psm.last_stable_offset(c2) == 7
    psm.complete_txn(c2)
    # A later-started txn completing while an earlier one of another producer is open.
    append(psm, 1, 0, 3, 1, 7, txn=True, origin=REPLICATION)
    append(psm, 2, 0, 2, 1, 8, txn=True, origin=REPLICATION)
    c3 = marker(psm, 2, 0, COMMIT, 9)
    assert psm.last_stable_offset(c3) == 7
    with pytest.raises(ValueError, match="committed"):
        aborted_txn_for(c3, 7)


def _control(offset, pid, epoch, control_type, coordinator_epoch=0, ts=3000):
    rec = Record(offset, ts, encode_control_key(control_type), encode_end_txn_marker(coordinator_epoch))
    return encode_batch([rec], base_offset=offset, producer_id=pid, producer_epoch=epoch,
                        is_transactional=True, is_control=True)


def _data(offset, pid, epoch, seq, n, txn=False, ts=1000):
    recs = [Record(offset + i, ts + i, b"k%d" % i, b"v") for i in range(n)]
    return encode_batch(recs, base_offset=offset, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                        is_transactional=txn)


def _log(*parts):
    return list(iter_batches(b"".join(parts)))


def test_segment_recovery_path_over_encoded_batches(tmp_path):
    batches = _log(
        _data(0, 1, 0, 0, 2, txn=True),
        _data(2, 2, 0, 0, 1, txn=True),
        encode_batch([Record(3, 5, b"a", b"b")], base_offset=3),  # no producer id: only moves the map end
        _control(4, 1, 0, ABORT, coordinator_epoch=3, ts=4000),
        _control(5, 2, 0, COMMIT),
        encode_empty_batch(base_offset=6, last_offset=6, producer_id=1, producer_epoch=0, is_transactional=True,
                           is_control=True),  # a marker whose records the cleaner removed: ignored
        _data(7, 1, 0, 2, 1, txn=True),
        _control(8, 1, 0, ABORT),
    )
    psm = ProducerStateManager(tmp_path)
    aborted = replay_batches(psm, batches)
    assert aborted == [AbortedTxn(0, 1, 0, 4, 2), AbortedTxn(0, 1, 7, 8, 9)]
    assert psm.map_end_offset == 9
    e = psm.last_entry(1)
    assert (e.producer_epoch, e.last_seq, e.last_data_offset) == (0, 2, 7)
    assert (e.last_timestamp, e.coordinator_epoch) == (3000, 0)  # from the last marker
    assert psm.ongoing_txns == [] and psm.first_undecided_offset() is None
    # The chunked rebuild path gives the same map.
    other = ProducerStateManager(tmp_path / "other")
    completed = load_producers_from_batches(other, batches)
    assert completed == [CompletedTxn(1, 0, 4, True), CompletedTxn(2, 2, 5, False), CompletedTxn(1, 7, 8, True)]
    assert dict(other.producers) == dict(psm.producers)
    # Per-batch helper without a dict updates at once and leaves completion to the caller.
    third = ProducerStateManager(tmp_path / "third")
    assert update_producers_from_batch(third, batches[0]) is None
    assert third.last_entry(1).current_txn_first_offset == 0
    assert update_producers_from_batch(third, batches[2]) is None  # pid -1
    infos = {}
    assert update_producers_from_batch(third, batches[3], infos) == CompletedTxn(1, 0, 4, True)
    assert third.last_entry(1).current_txn_first_offset == 0  # pending in infos until update()
    third.update(infos[1])
    assert third.last_entry(1).current_txn_first_offset is None


def test_segment_update_single_batch(tmp_path):
    psm = ProducerStateManager(tmp_path)
    b = _log(_data(0, 1, 0, 0, 1, txn=True), _control(1, 1, 0, ABORT))
    assert segment_update_producer_state(psm, b[0]) is None
    assert segment_update_producer_state(psm, b[1]) == AbortedTxn(0, 1, 0, 1, 2)
    assert psm.map_end_offset == 2 and psm.unreplicated_txns == [TxnMetadata(1, 0, 1)]


# ---------------------------------------------------------------------------------- snapshots


def _snapshot_set(path):
    return set(decode_snapshot(path.read_bytes()))


def test_take_snapshot_writes_decodable_file(psm, tmp_path):
    append(psm, 1, 0, 0, 3, 0, ts=111)
    append(psm, 2, 1, 0, 1, 3, txn=True, ts=222)
    marker(psm, 1, 0, COMMIT, 4, coordinator_epoch=2, ts=333)  # no open txn: completes nothing
    assert psm.take_snapshot() is None  # map end offset 0: nothing new to capture
    psm.update_map_end_offset(5)
    path = psm.take_snapshot()
    assert path == tmp_path / "00000000000000000005.snapshot" and path.name == snapshot_file_name(5)
    assert len(path.stem) == 20
    assert decode_snapshot(path.read_bytes()) == [
        ProducerSnapshotEntry(1, 0, 2, 2, 2, 333, 2, -1),
        ProducerSnapshotEntry(2, 1, 0, 3, 0, 222, -1, 3),
    ]
    assert psm.take_snapshot() is None  # same offset again: not rewritten
    assert psm.snapshot_offsets() == [5] and psm.latest_snapshot_offset == psm.oldest_snapshot_offset == 5
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left behind
    assert [e.to_snapshot_entry() for e in read_snapshot(path)] == decode_snapshot(path.read_bytes())


def test_snapshot_order_follows_java_hashmap_capacity(tmp_path):
    psm = ProducerStateManager(tmp_path, max_producer_id_expiration_ms=HOUR)
    for pid in range(100, 113):  # 13 producers: the HashMap grows to 32 buckets
        append(psm, pid, 0, 0, 1, pid, ts=0)
    append(psm, 16, 0, 0, 1, 200, ts=10 * HOUR)
    append(psm, 1, 0, 0, 1, 201, ts=10 * HOUR)
    assert len(psm.remove_expired_producers(10 * HOUR)) == 13
    psm.update_map_end_offset(202)
    data = psm.take_snapshot().read_bytes()
    # With 16 buckets 16 would come first (bucket 0); the table kept 32, so 1 comes first.
    assert java_hash_map_order([16, 1]) == [16, 1] and java_hash_map_order([16, 1], 32) == [1, 16]
    assert [e.producer_id for e in decode_snapshot(data)] == [1, 16]
    assert data == encode_snapshot(decode_snapshot(data), order="given")


def _write_snapshot(tmp_path, offset, entries):
    path = tmp_path / snapshot_file_name(offset)
    path.write_bytes(encode_snapshot(entries))
    return path


def _entry(pid, last_offset, ts=1000, txn=-1):
    return ProducerSnapshotEntry(pid, 0, last_offset, last_offset, 0, ts, -1, txn)


def test_truncate_and_reload_picks_latest_in_range(tmp_path):
    for off in (10, 20, 30):
        _write_snapshot(tmp_path, off, [_entry(off, off - 1)])
    _write_snapshot(tmp_path, 5, [_entry(5, 4)])
    psm = ProducerStateManager(tmp_path)
    assert psm.snapshot_offsets() == [5, 10, 20, 30]
    assert psm.truncate_and_reload(5, 25, current_time_ms=2000) == 20
    assert psm.snapshot_offsets() == [10, 20]  # above the end, and at the log start, deleted
    assert sorted(p.name for p in tmp_path.iterdir()) == [snapshot_file_name(10), snapshot_file_name(20)]
    assert list(psm.producers) == [20] and psm.map_end_offset == 20
    e = psm.last_entry(20)
    assert list(e.batch_metadata) == [BatchMetadata(19, 19, 0, 1000)]
    assert psm.take_snapshot() is None  # the loaded snapshot counts as taken
    # Map already at the end offset: no reload, the map is kept.
    append(psm, 7, 0, 0, 1, 20, origin=REPLICATION)
    assert psm.truncate_and_reload(5, 20, current_time_ms=2000) is None
    assert 7 in psm.producers


def test_corrupt_latest_snapshot_deleted_and_previous_used(tmp_path):
    _write_snapshot(tmp_path, 10, [_entry(1, 9)])
    bad = _write_snapshot(tmp_path, 20, [_entry(2, 19)])
    data = bytearray(bad.read_bytes())
    data[-1] ^= 1
    bad.write_bytes(bytes(data))
    with pytest.raises(CorruptSnapshotError):
        read_snapshot(bad)
    psm = ProducerStateManager(tmp_path)
    assert psm.load(log_start_offset=0, current_time_ms=1000) == 10
    assert not bad.exists() and psm.snapshot_offsets() == [10]
    assert list(psm.producers) == [1] and psm.map_end_offset == 10
    # All corrupt: nothing loaded, the map starts at the log start offset.
    (tmp_path / snapshot_file_name(10)).write_bytes(b"\x00\x01")
    psm = ProducerStateManager(tmp_path)
    assert psm.load(log_start_offset=3, current_time_ms=1000) is None
    assert psm.snapshot_offsets() == [] and psm.map_end_offset == 3 and psm.is_empty()


def test_load_expires_idle_producers_but_keeps_open_transactions(tmp_path):
    _write_snapshot(tmp_path, 50, [_entry(1, 9, ts=0), _entry(2, 19, ts=0, txn=15), _entry(3, 29, ts=HOUR)])
    psm = ProducerStateManager(tmp_path, max_producer_id_expiration_ms=HOUR)
    assert psm.load(0, current_time_ms=HOUR) == 50
    assert sorted(psm.producers) == [2, 3]
    assert psm.ongoing_txns == [TxnMetadata(2, 15)] and psm.first_unstable_offset() == 15


def test_remove_stray_snapshots(tmp_path):
    for off in (0, 50, 100, 150, 200, 250, 300):
        _write_snapshot(tmp_path, off, [])
    psm = ProducerStateManager(tmp_path)
    assert psm.remove_stray_snapshots([0, 100, 200]) == [50, 150, 250]
    assert psm.snapshot_offsets() == [0, 100, 200, 300]  # the largest stray, above every base, stays
    assert sorted(int(p.stem) for p in tmp_path.glob("*.snapshot")) == [0, 100, 200, 300]
    # A largest stray below the highest segment base goes as well.
    _write_snapshot(tmp_path, 350, [])
    assert psm.remove_stray_snapshots([0, 100, 200, 300, 400]) == [350]
    assert psm.snapshot_offsets() == [0, 100, 200, 300]
    # No segments at all: every stray but the largest is removed.
    assert psm.remove_stray_snapshots([]) == [0, 100, 200]
    assert psm.snapshot_offsets() == [300]


def test_delete_and_mark_snapshots(tmp_path):
    for off in (10, 20, 30):
        _write_snapshot(tmp_path, off, [])
    psm = ProducerStateManager(tmp_path)
    psm.delete_snapshots_before(20)
    assert psm.snapshot_offsets() == [20, 30]
    renamed = psm.remove_and_mark_snapshot_for_deletion(20)
    assert renamed.name == "00000000000000000020.snapshot.deleted" and renamed.exists()
    assert psm.snapshot_offsets() == [30] and psm.remove_and_mark_snapshot_for_deletion(20) is None


def test_truncate_fully_and_start_at(tmp_path):
    _write_snapshot(tmp_path, 10, [_entry(1, 9)])
    psm = ProducerStateManager(tmp_path)
    psm.load(0, 1000)
    append(psm, 2, 0, 0, 1, 10, txn=True)
    psm.truncate_fully_and_start_at(42)
    assert psm.is_empty() and psm.ongoing_txns == [] and psm.map_end_offset == 42
    assert psm.snapshot_offsets() == [] and list(tmp_path.iterdir()) == []
    assert psm.take_snapshot().name == snapshot_file_name(42)  # an empty map is still snapshotted


def test_snapshot_round_trip_through_load(tmp_path):
    psm = ProducerStateManager(tmp_path)
    append(psm, 1, 0, 0, 2, 0, ts=500)
    append(psm, 2, 3, 5, 1, 2, txn=True, ts=600)
    psm.update_map_end_offset(3)
    psm.take_snapshot()
    loaded = ProducerStateManager(tmp_path)
    assert loaded.load(0, current_time_ms=1000) == 3
    assert {pid: e.to_snapshot_entry() for pid, e in loaded.producers.items()} == {
        pid: e.to_snapshot_entry() for pid, e in psm.producers.items()}
    assert loaded.ongoing_txns == [TxnMetadata(2, 2)]
    # A loaded producer continues its sequence for client appends.
    append(loaded, 1, 0, 2, 1, 3)
    with pytest.raises(OutOfOrderSequenceError):
        append(loaded, 2, 3, 7, 1, 4, txn=True)


def test_entry_from_snapshot_record_keeps_one_batch():
    e = ProducerStateEntry.from_snapshot_entry(ProducerSnapshotEntry(5, 1, 3, 40, 2, 77, 4, -1))
    assert list(e.batch_metadata) == [BatchMetadata(3, 40, 2, 77)]
    assert (e.first_seq, e.first_data_offset, e.current_txn_first_offset) == (1, 38, None)
    empty = ProducerStateEntry.from_snapshot_entry(ProducerSnapshotEntry(5, 1, -1, -1, 0, 77, -1, 9))
    assert empty.is_empty() and empty.last_seq == -1 and empty.current_txn_first_offset == 9


# ---------------------------------------------------------------------------------- real data


def _corpus_cases():
    cases = []
    for d in sorted({p.parent for p in corpus_files(lambda f: f.endswith(".snapshot"))}):
        logs = sorted(d.glob("*.log"))
        if not logs or not logs[0].name.startswith("0" * 20):
            continue  # no data, or the oldest segments were deleted: their producers cannot be replayed
        end = 0
        for b in iter_batches(logs[-1].read_bytes()):
            end = b.next_offset
        for snap in sorted(d.glob("*.snapshot")):
            # A snapshot beyond the log end kept in the corpus (its segments were not
            # committed with it) or at offset 0 (empty state) has nothing to replay against.
            if 0 < int(snap.stem) <= end:
                cases.append(pytest.param(d, snap, id=f"{d.parent.parent.name}/{d.name}/{int(snap.stem)}"))
    return cases


def _read_log(d):
    batches = []
    for log_file in sorted(d.glob("*.log")):
        batches.extend(b for b in iter_batches(log_file.read_bytes()) if isinstance(b, RecordBatch))
    return batches


@pytest.mark.parametrize("log_dir,broker_snapshot", _corpus_cases())
def test_replay_matches_broker_snapshot(log_dir, broker_snapshot, tmp_path):
    batches = _read_log(log_dir)
    end = batches[-1].next_offset if batches else 0
    offset = int(broker_snapshot.stem)
    assert 0 < offset <= end
    psm = ProducerStateManager(tmp_path)
    # Replay only the batches before the one holding the snapshot offset, as a rebuild does.
    infos: dict = {}
    completed = []
    for batch in batches:
        if batch.last_offset >= offset:
            break
        txn = update_producers_from_batch(psm, batch, infos)
        if txn is not None:
            completed.append(txn)
    for info in infos.values():
        psm.update(info)
    for txn in completed:
        psm.complete_txn(txn)
    psm.update_map_end_offset(offset)
    ours = psm.take_snapshot()
    theirs = decode_snapshot(broker_snapshot.read_bytes())
    assert set(decode_snapshot(ours.read_bytes())) == set(theirs)
    # Producer ids here are small, so Java's HashMap order makes the files byte-identical.
    assert ours.read_bytes() == broker_snapshot.read_bytes()


def test_corpus_has_producer_snapshots():
    """The comparison above covers partitions that actually have producers."""
    with_producers = [c for c in _corpus_cases() if decode_snapshot(c.values[1].read_bytes())]
    assert len(with_producers) >= 10


KSQL = ("ItumelengMogase__Real-Time-Data-Pipeline-for-Patient-Admissions/kafka-data/"
        "_confluent-ksql-default__command_topic-0")


def test_corpus_committed_transaction(tmp_path):
    d = CORPUS / KSQL
    batches = _read_log(d)
    assert [(b.is_transactional, b.is_control) for b in batches] == [(True, False), (True, True)]
    psm = ProducerStateManager(tmp_path)
    info = psm.prepare_update(batches[0].producer_id, REPLICATION)
    assert info.append(batches[0]) is None
    psm.update(info)
    assert psm.first_undecided_offset() == 0
    info = psm.prepare_update(batches[1].producer_id, REPLICATION)
    completed = info.append(batches[1])
    psm.update(info)
    assert completed == CompletedTxn(0, 0, 1, False)
    assert psm.last_stable_offset(completed) == 2
    psm.complete_txn(completed)
    psm.update_map_end_offset(2)
    assert set(decode_snapshot(psm.take_snapshot().read_bytes())) == set(
        decode_snapshot((d / snapshot_file_name(2)).read_bytes()))


def test_corpus_snapshot_loads_and_continues(tmp_path):
    d = CORPUS / "rjmfernandes__flink-on-prem/data/customers_keyed-0"
    (src,) = d.glob("*.snapshot")
    (tmp_path / src.name).write_bytes(src.read_bytes())
    psm = ProducerStateManager(tmp_path, max_producer_id_expiration_ms=1 << 62)
    assert psm.load(0, current_time_ms=0) == int(src.stem)
    # Each producer accepts exactly its next sequence from a client.
    for pid, entry in psm.producers.items():
        nxt = (entry.last_seq + 1) & INT32_MAX
        with pytest.raises(OutOfOrderSequenceError):
            append(psm, pid, entry.producer_epoch, nxt + 1, 1, psm.map_end_offset)
        append(psm, pid, entry.producer_epoch, nxt, 1, psm.map_end_offset)
    assert struct.unpack(">h", src.read_bytes()[:2]) == (1,)


def test_origin_accepts_names(psm):
    assert AppendOrigin.of("client") is CLIENT and AppendOrigin.of("Recovery") is REPLICATION
    append(psm, 1, 5, 0, 1, 0)
    with pytest.raises(InvalidProducerEpochError):
        psm.prepare_update(1, "client").append_data_batch(4, 0, 0, 0, 1, 1, False)
    with pytest.raises(ValueError):
        psm.prepare_update(1, "leader")
