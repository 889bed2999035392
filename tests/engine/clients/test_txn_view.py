"""read_committed for a read-only reader (plog.engine.clients.txn_view).

Logs are written with the engine (``Log.append_as_leader`` for producer batches,
``Log.append_end_txn_marker`` for the coordinator's markers) and read back through
``Log.open(dir, writable=False)``. The oracle is the test's own bookkeeping of what it
appended: which offsets belong to which transaction, and how each transaction ended. From
that alone it derives the LSO (first offset of the earliest open transaction, else the log
end offset), the aborted transactions, and the records a read_committed consumer gets
(everything below the LSO except aborted transactions' data and control records).
"""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from plog.engine.storage.log_config import LogConfig
from plog.engine.errors import OffsetOutOfRangeError
from plog.engine.storage.log import Log
from plog.engine.clients.txn_view import (
    OpenTxn,
    read_committed_records,
    read_uncommitted_records,
    transaction_state,
)
from plog.formats.compression import GZIP
from plog.formats.record_batch import encode_batch

# Close to the wall clock: markers carry the current time, and a wide gap between data and
# marker timestamps would make the log roll by segment.ms instead of by size.
TS = int(time.time() * 1000)


@dataclass
class Txn:
    producer_id: int
    first_offset: int
    outcome: str | None = None  # "commit", "abort", or None while open
    marker_offset: int | None = None


@dataclass
class Written:
    """What was appended: every data record's (offset, key) with its transaction."""

    records: list[tuple[int, bytes, Txn | None]] = field(default_factory=list)
    txns: list[Txn] = field(default_factory=list)


class Scenario:
    """Drives a writable log like producers and a transaction coordinator would, and keeps
    the oracle's bookkeeping."""

    def __init__(self, directory: Path, segment_bytes: int | None = None):
        props = {} if segment_bytes is None else {"segment.bytes": segment_bytes}
        self.dir = directory
        self.log = Log.open(directory, LogConfig.from_properties(props))
        self.next_seq: dict[int, int] = {}
        self.open: dict[int, Txn] = {}
        self.written = Written()
        self.counter = 0

    def send(self, producer_id: int, n: int, *, transactional: bool, codec: int = 0) -> None:
        """One producer batch of ``n`` records. ``producer_id`` -1 is a plain producer."""
        keys = []
        for _ in range(n):
            keys.append(b"k%06d" % self.counter)
            self.counter += 1
        recs = [(i, TS + i, key, b"value-" + key) for i, key in enumerate(keys)]
        kw = {}
        if producer_id >= 0:
            kw = dict(producer_id=producer_id, producer_epoch=0, base_sequence=self.next_seq.get(producer_id, 0),
                      is_transactional=transactional)
            self.next_seq[producer_id] = self.next_seq.get(producer_id, 0) + n
        info = self.log.append_as_leader(encode_batch(recs, compression_codec=codec, **kw))
        txn = None
        if transactional:
            txn = self.open.get(producer_id)
            if txn is None:
                txn = self.open[producer_id] = Txn(producer_id, info.first_offset)
                self.written.txns.append(txn)
        for i, key in enumerate(keys):
            self.written.records.append((info.first_offset + i, key, txn))

    def end(self, producer_id: int, *, commit: bool) -> None:
        info = self.log.append_end_txn_marker(producer_id, 0, commit=commit, coordinator_epoch=1)
        txn = self.open.pop(producer_id, None)
        if txn is not None:
            txn.outcome = "commit" if commit else "abort"
            txn.marker_offset = info.first_offset

    # -- the oracle --------------------------------------------------------------------------

    @property
    def lso(self) -> int:
        firsts = [t.first_offset for t in self.open.values()]
        return min(firsts) if firsts else self.log.log_end_offset

    def committed(self, start: int = 0, end: int | None = None) -> list[tuple[int, bytes]]:
        limit = self.lso if end is None else min(end, self.lso)
        return [(o, k) for o, k, t in self.written.records
                if start <= o < limit and (t is None or t.outcome != "abort")]

    def uncommitted(self, start: int = 0, end: int | None = None) -> list[tuple[int, bytes]]:
        limit = self.log.log_end_offset if end is None else end
        return [(o, k) for o, k, _ in self.written.records if start <= o < limit]

    def aborted(self, start: int, end: int) -> list[tuple[int, int, int]]:
        return sorted(((t.producer_id, t.first_offset, t.marker_offset) for t in self.written.txns
                       if t.outcome == "abort" and t.marker_offset >= start and t.first_offset < end),
                      key=lambda a: a[2])

    def writer_lso(self) -> int:
        """The writable log's own LSO: its producer state's first unstable offset once the
        high watermark (the LEO, with no replicas) has passed every marker."""
        psm = self.log.producer_state
        psm.on_high_watermark_updated(self.log.log_end_offset)
        first = psm.first_unstable_offset()
        return self.log.log_end_offset if first is None else first


def keys_of(pairs) -> list[tuple[int, bytes]]:
    return [(record.offset, record.key) for _info, record in pairs]


def triples(aborted) -> list[tuple[int, int, int]]:
    return [(a.producer_id, a.first_offset, a.last_offset) for a in aborted]


def check_reader(sc: Scenario, *, compare_writer: bool = True) -> None:
    """Open the partition read-only and compare everything with the oracle (and the LSO
    with the writer's own, when the writer is open)."""
    with Log.open(sc.dir, writable=False) as ro:
        state = transaction_state(ro)
        assert state.last_stable_offset == sc.lso
        if compare_writer:
            assert state.last_stable_offset == sc.writer_lso()
        assert state.open_transactions == tuple(sorted((OpenTxn(t.producer_id, t.first_offset)
                                                        for t in sc.open.values()), key=lambda t: t.first_offset))
        leo = ro.log_end_offset
        assert triples(state.aborted_transactions(0, leo)) == sc.aborted(0, leo)
        assert keys_of(read_committed_records(ro, state=state)) == sc.committed()
        assert keys_of(read_uncommitted_records(ro)) == sc.uncommitted()
        # Sub-ranges: every start offset a consumer could resume from, a few end offsets.
        rnd = random.Random(leo)
        for _ in range(5):
            start = rnd.randrange(0, leo + 1)
            end = rnd.randrange(start, leo + 1)
            assert keys_of(read_committed_records(ro, start, end, state=state)) == sc.committed(start, end)
            assert keys_of(read_uncommitted_records(ro, start, end)) == sc.uncommitted(start, end)
            assert triples(state.aborted_transactions(start, end)) == sc.aborted(start, end)


def snapshot_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".snapshot"))


# -- small scenarios, spelled out ------------------------------------------------------------


def test_committed_and_aborted_transactions_of_one_producer(tmp_path):
    sc = Scenario(tmp_path / "t-0")
    sc.send(1, 3, transactional=True)           # 0-2
    sc.end(1, commit=True)                       # 3
    sc.send(1, 2, transactional=True)           # 4-5
    sc.send(1, 1, transactional=True)           # 6
    sc.end(1, commit=False)                      # 7
    sc.send(1, 1, transactional=True)           # 8
    sc.end(1, commit=True)                       # 9
    with Log.open(sc.dir, writable=False) as ro:
        state = transaction_state(ro)
        assert state.last_stable_offset == 10 == ro.log_end_offset
        assert triples(state.aborted_transactions(0, 10)) == [(1, 4, 7)]
        got = list(read_committed_records(ro, state=state))
        assert [r.offset for _i, r in got] == [0, 1, 2, 8]
        assert {i.producer_id for i, _r in got} == {1} and all(i.is_transactional for i, _r in got)
        assert [r.offset for _i, r in read_uncommitted_records(ro)] == [0, 1, 2, 4, 5, 6, 8]
    check_reader(sc)


def test_interleaved_producers_and_a_plain_producer_inside_an_open_transaction(tmp_path):
    sc = Scenario(tmp_path / "t-0")
    sc.send(1, 2, transactional=True)   # 0-1   P1 txn A
    sc.send(2, 2, transactional=True)   # 2-3   P2 txn B
    sc.send(-1, 2, transactional=False)  # 4-5  plain producer, inside both transactions
    sc.send(7, 1, transactional=False)  # 6     idempotent, not transactional
    sc.send(1, 1, transactional=True)   # 7     P1 txn A
    sc.end(1, commit=False)              # 8     A aborted while B is open: txnindex LSO = 2
    sc.send(2, 1, transactional=True)   # 9     P2 txn B
    sc.end(2, commit=True)               # 10
    sc.send(1, 1, transactional=True)   # 11    P1 txn C
    sc.end(1, commit=True)               # 12
    with Log.open(sc.dir, writable=False) as ro:
        state = transaction_state(ro)
        [aborted] = state.aborted_transactions(0, ro.log_end_offset)
        assert (aborted.producer_id, aborted.first_offset, aborted.last_offset, aborted.last_stable_offset) == \
            (1, 0, 8, 2)
        assert [r.offset for _i, r in read_committed_records(ro, state=state)] == [2, 3, 4, 5, 6, 9, 11]
    check_reader(sc)


def test_an_open_transaction_at_the_end_holds_the_lso(tmp_path):
    sc = Scenario(tmp_path / "t-0")
    sc.send(-1, 3, transactional=False)  # 0-2
    sc.send(5, 2, transactional=True)   # 3-4  still open at the end
    sc.send(-1, 2, transactional=False)  # 5-6  plain data after it: past the LSO
    sc.send(6, 1, transactional=True)   # 7
    sc.end(6, commit=True)               # 8
    with Log.open(sc.dir, writable=False) as ro:
        state = transaction_state(ro)
        assert state.last_stable_offset == 3
        assert state.open_transactions == (OpenTxn(5, 3),)
        assert [r.offset for _i, r in read_committed_records(ro, state=state)] == [0, 1, 2]
        assert list(read_committed_records(ro, 3, state=state)) == []
        assert [r.offset for _i, r in read_committed_records(ro, 1, 2, state=state)] == [1]
    check_reader(sc)


def test_a_transaction_aborted_after_a_roll_drops_its_earlier_segment_data(tmp_path):
    sc = Scenario(tmp_path / "t-0", segment_bytes=300)
    sc.send(3, 2, transactional=True)
    for _ in range(4):
        sc.send(-1, 1, transactional=False)
    sc.send(3, 1, transactional=True)
    sc.end(3, commit=False)
    segments = sorted(sc.dir.glob("*.log"))
    assert len(segments) >= 3
    # The abort is indexed only in the segment of its marker, not the one it started in.
    assert not (sc.dir / segments[0].name.replace(".log", ".txnindex")).exists()
    check_reader(sc)
    with Log.open(sc.dir, writable=False) as ro:
        assert 0 not in [r.offset for _i, r in read_committed_records(ro)]


def test_compressed_batches_are_filtered_by_their_headers(tmp_path):
    sc = Scenario(tmp_path / "t-0")
    sc.send(1, 5, transactional=True, codec=GZIP)
    sc.send(2, 5, transactional=True, codec=GZIP)
    sc.end(1, commit=False)
    sc.end(2, commit=True)
    check_reader(sc)


def test_range_checks_and_empty_ranges(tmp_path):
    sc = Scenario(tmp_path / "t-0")
    sc.send(1, 2, transactional=True)
    with Log.open(sc.dir, writable=False) as ro:
        with pytest.raises(OffsetOutOfRangeError):
            read_committed_records(ro, 3)
        with pytest.raises(OffsetOutOfRangeError):
            read_uncommitted_records(ro, -1)
        assert list(read_committed_records(ro)) == []  # LSO 0: the open transaction starts there
        assert list(read_uncommitted_records(ro, 2)) == []


# -- snapshots -----------------------------------------------------------------------------


def build_random(directory: Path, seed: int, segment_bytes: int, steps: int = 120) -> Scenario:
    """A random interleaving of 3 transactional producers, an idempotent one, a plain
    one, commits, aborts and markers of empty transactions."""
    rnd = random.Random(seed)
    sc = Scenario(directory, segment_bytes=segment_bytes)
    for _ in range(steps):
        op = rnd.random()
        pid = rnd.choice([1, 2, 3])
        if op < 0.45:
            sc.send(pid, rnd.randint(1, 4), transactional=True, codec=rnd.choice([0, 0, GZIP]))
        elif op < 0.6:
            sc.send(-1, rnd.randint(1, 3), transactional=False)
        elif op < 0.7:
            sc.send(9, rnd.randint(1, 3), transactional=False)
        elif pid in sc.open or op < 0.75:
            # (op < 0.75 with nothing open: the marker of an empty transaction)
            sc.end(pid, commit=rnd.random() < 0.5)
    return sc


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("segment_bytes", [400, 1500, 1 << 20])
def test_random_logs_with_and_without_snapshots(tmp_path, seed, segment_bytes):
    d = tmp_path / "t-0"
    sc = build_random(d, seed, segment_bytes)
    # 1. A reader next to the running writer: snapshots only at the rolls, so the scan
    #    starts at the active segment (or at the log start when nothing rolled).
    check_reader(sc)
    with Log.open(d, writable=False) as ro:
        state = transaction_state(ro)
        bases = ro.segments.base_offsets
        assert state.snapshot_offset == (bases[-1] if len(bases) > 1 else None)
    # 2. After a clean close: the snapshot at the log end offset; nothing to scan.
    sc.log.close()
    with Log.open(d, writable=False) as ro:
        assert transaction_state(ro).snapshot_offset == ro.log_end_offset
    sc.log = Log.open(d)  # the writer back (its state rebuilt from that snapshot)
    check_reader(sc)
    sc.log.close()
    # 3. No snapshot at all: a scan from the log start gives the same answers. (The writer
    #    stays closed: reopened after a clean shutdown without snapshots, Kafka -- and plog
    #    -- assume a log from before producer state existed and forget its transactions.)
    for name in snapshot_files(d):
        os.unlink(d / name)
    with Log.open(d, writable=False) as ro:
        assert transaction_state(ro).snapshot_offset is None
    check_reader(sc, compare_writer=False)
    # An unclean reopen rebuilds the writer's state from the log start: the same LSO.
    sc.log = Log.open(d, had_clean_shutdown=False)
    assert sc.writer_lso() == sc.lso
    sc.log.close()


def test_an_open_transaction_carried_by_the_snapshot(tmp_path):
    d = tmp_path / "t-0"
    sc = Scenario(d, segment_bytes=300)
    sc.send(4, 1, transactional=True)        # opens at 0
    for _ in range(6):
        sc.send(-1, 1, transactional=False)   # rolls: later snapshots carry the open txn
    with Log.open(d, writable=False) as ro:
        state = transaction_state(ro)
        assert state.snapshot_offset is not None and state.snapshot_offset > 0
        assert state.last_stable_offset == 0 and state.open_transactions == (OpenTxn(4, 0),)
    sc.end(4, commit=False)
    check_reader(sc)


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty", "directory"])
def test_an_unreadable_snapshot_falls_back_without_error(tmp_path, damage):
    d = tmp_path / "t-0"
    sc = build_random(d, 42, 600)
    sc.log.close()
    sc.log = Log.open(d)
    newest = d / snapshot_files(d)[-1]
    if damage == "garbage":
        newest.write_bytes(b"\x00\x01" + os.urandom(60))
    elif damage == "truncated":
        newest.write_bytes(newest.read_bytes()[:-3])
    elif damage == "empty":
        newest.write_bytes(b"")
    else:
        newest.unlink()
        newest.mkdir()  # not a regular file: not listed as a snapshot at all
    with Log.open(d, writable=False) as ro:
        state = transaction_state(ro)
        assert state.snapshot_offset != int(newest.name.split(".")[0])
    check_reader(sc)
    # Only corrupt snapshots left: a scan from the log start.
    for name in snapshot_files(d):
        if (d / name).is_file():
            (d / name).write_bytes(b"junk")
    with Log.open(d, writable=False) as ro:
        assert transaction_state(ro).snapshot_offset is None
    check_reader(sc)


def test_an_abort_missing_from_the_txnindex_is_found_by_the_scan(tmp_path):
    """A writer appends the ABORT marker to the .log before the .txnindex entry; a reader
    between the two still drops the aborted data."""
    d = tmp_path / "t-0"
    sc = Scenario(d, segment_bytes=500)
    for _ in range(3):
        sc.send(-1, 2, transactional=False)
    sc.send(8, 2, transactional=True)
    sc.send(-1, 1, transactional=False)
    sc.end(8, commit=False)
    with Log.open(d, writable=False) as ro:
        active = ro.segments.last
    txnindex = active.txn_index.path
    assert txnindex.exists()
    os.unlink(txnindex)
    check_reader(sc)


def test_the_reader_changes_nothing(tmp_path):
    d = tmp_path / "t-0"
    build_random(d, 7, 500)
    (d / snapshot_files(d)[0]).write_bytes(b"corrupt")  # a reader must not delete it either

    def listing():
        return sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in d.iterdir())

    before = listing()
    with Log.open(d, writable=False) as ro:
        state = transaction_state(ro)
        list(read_committed_records(ro, state=state))
        list(read_uncommitted_records(ro))
        state.aborted_transactions(0, ro.log_end_offset)
    assert listing() == before
