"""Indexes over files (plog.engine.storage.index): OffsetIndex, TimeIndex, TransactionIndex.

Lookups against a sorted-list (``bisect``) oracle through appends, truncate_to, resize,
trim and reopen; the §21 vectors byte for byte and the preallocated lengths; Kafka's
sanity rules on real files; append ordering and the full rules; read-only mode; the
transaction index; lazy opening (no descriptor or mapping until first use).
"""

from __future__ import annotations

import bisect
import hashlib
import os
import random
import struct
from pathlib import Path

import pytest

from plog.engine.errors import (
    CorruptIndexError,
    EngineError,
    IndexFullError,
    IndexOffsetOverflowError,
    InvalidOffsetError,
    InvalidTimestampError,
    ReadOnlyIndexError,
)
from plog.engine.storage.index import (
    AbortedTxn,
    OffsetIndex,
    OffsetPosition,
    TimeIndex,
    TimestampOffset,
    TransactionIndex,
    TxnIndexSearchResult,
)

OFFSET_VECTOR = bytes.fromhex("000000050000103600000082000020d0")
TIME_VECTOR = bytes.fromhex("0000018bcfe56800000000050000018bcfe569f400000082")
TXN_VECTOR = bytes.fromhex("000000000000000003e8000000000000007800000000000000960000000000000079")
TS = 1700000000000
BASE = 100
OFFSET_PREALLOCATED = 10485760
TIME_PREALLOCATED = 10485756


def seg(directory: Path, base: int, suffix: str) -> Path:
    return directory / f"{base:020d}{suffix}"


def digest(path: Path) -> tuple[int, int, str]:
    st = path.stat()
    return st.st_mtime_ns, st.st_size, hashlib.sha256(path.read_bytes()).hexdigest()


# -- oracles -----------------------------------------------------------------------------


class OffsetModel:
    """The entries an offset index should hold, and Kafka's answers computed with bisect."""

    kind = OffsetIndex
    suffix = ".index"
    entry_size = 8

    def __init__(self, base: int, rnd: random.Random):
        self.base, self.rnd = base, rnd
        self.offsets: list[int] = []
        self.positions: list[int] = []

    def __len__(self):
        return len(self.offsets)

    def append_to(self, idx: OffsetIndex) -> None:
        offset = self.offsets[-1] + self.rnd.randint(1, 40) if self.offsets else self.base + self.rnd.randint(0, 3)
        position = self.positions[-1] + self.rnd.randint(1, 5000) if self.positions else self.rnd.randint(0, 100)
        idx.append(offset, position)
        self.offsets.append(offset)
        self.positions.append(position)

    def keep(self, n: int) -> None:
        del self.offsets[n:], self.positions[n:]

    def truncate_to(self, offset: int) -> None:
        self.keep(bisect.bisect_left(self.offsets, offset))

    def targets(self) -> list[int]:
        picks = {self.base - 1, self.base, 2**40}
        for o in self.offsets:
            picks |= {o - 1, o, o + 1}
        return sorted(picks)

    def expected_lookup(self, target: int):
        i = bisect.bisect_right(self.offsets, target) - 1
        return (self.base, 0) if i < 0 else (self.offsets[i], self.positions[i])

    def expected_entry(self, i: int):
        return (self.offsets[i], self.positions[i])

    def expected_last(self, idx) -> bool:
        return idx.last_offset == (self.offsets[-1] if self.offsets else self.base)

    def encoded(self) -> bytes:
        return b"".join(struct.pack(">ii", o - self.base, p) for o, p in zip(self.offsets, self.positions))

    def offset_targets(self) -> list[int]:
        return self.targets()


class TimeModel:
    """The entries a time index should hold; lookups by timestamp, truncation by offset."""

    kind = TimeIndex
    suffix = ".timeindex"
    entry_size = 12

    def __init__(self, base: int, rnd: random.Random):
        self.base, self.rnd = base, rnd
        self.stamps: list[int] = []
        self.offsets: list[int] = []

    def __len__(self):
        return len(self.stamps)

    def append_to(self, idx: TimeIndex) -> None:
        ts = self.stamps[-1] + self.rnd.randint(1, 1000) if self.stamps else TS + self.rnd.randint(-1000, 1000)
        offset = self.offsets[-1] + self.rnd.randint(1, 40) if self.offsets else self.base + self.rnd.randint(0, 3)
        if self.stamps and self.rnd.random() < 0.1:
            idx.maybe_append(self.stamps[-1], offset)  # an equal timestamp is skipped
        idx.maybe_append(ts, offset)
        self.stamps.append(ts)
        self.offsets.append(offset)

    def keep(self, n: int) -> None:
        del self.stamps[n:], self.offsets[n:]

    def truncate_to(self, offset: int) -> None:
        self.keep(bisect.bisect_left(self.offsets, offset))

    def targets(self) -> list[int]:
        picks = {-1, 0, TS - 10**6, 2**62}
        for t in self.stamps:
            picks |= {t - 1, t, t + 1}
        return sorted(picks)

    def expected_lookup(self, target: int):
        i = bisect.bisect_right(self.stamps, target) - 1
        return (-1, self.base) if i < 0 else (self.stamps[i], self.offsets[i])

    def expected_entry(self, i: int):
        return (self.stamps[i], self.offsets[i])

    def expected_last(self, idx) -> bool:
        return idx.last_entry == (self.expected_entry(-1) if self.stamps else (-1, self.base))

    def encoded(self) -> bytes:
        return b"".join(struct.pack(">qi", t, o - self.base) for t, o in zip(self.stamps, self.offsets))

    def offset_targets(self) -> list[int]:
        picks = {self.base - 1, self.base, 2**40}
        for o in self.offsets:
            picks |= {o - 1, o, o + 1}
        return sorted(picks)


def upper_bound_oracle(positions: list[int], target: int) -> int:
    """Kafka's smallest-upper-bound slot, with its slot-0 quirk (see tests/formats)."""
    i = bisect.bisect_left(positions, target)
    if i == 0 and positions and positions[0] == target:
        i = 1
    return -1 if i >= len(positions) else i


def check_against(idx, model) -> None:
    assert idx.entries == len(model)
    assert idx.size_in_bytes == len(model) * model.entry_size
    assert model.expected_last(idx)
    for target in model.targets():
        assert idx.lookup(target) == model.expected_lookup(target), target
    for i in sorted({0, len(model) // 2, len(model) - 1}) if len(model) else ():
        assert idx.entry(i) == model.expected_entry(i)
    with pytest.raises(IndexError):
        idx.entry(len(model))
    if isinstance(idx, OffsetIndex):
        positions = model.positions
        for target in {0, *positions, *(p + 1 for p in positions[::7]), 2**31 - 1}:
            slot = upper_bound_oracle(positions, target)
            expected = None if slot < 0 else (model.offsets[slot], positions[slot])
            assert idx.fetch_upper_bound_offset(target, 0) == expected, target
            if target >= 10:
                assert idx.fetch_upper_bound_offset(OffsetPosition(0, target - 10), 10) == expected


# Sizes that straddle the warm-section boundary: firstHotEntry turns positive at 1026
# entries for the offset index and 684 for the time index.
@pytest.mark.parametrize("model_cls, n", [(OffsetModel, 1500), (OffsetModel, 40), (TimeModel, 1000), (TimeModel, 40)])
@pytest.mark.parametrize("seed", [1, 2])
def test_lookups_match_bisect_through_truncate_resize_trim_and_reopen(tmp_path, model_cls, n, seed):
    rnd = random.Random(seed * 1000 + n)
    base = rnd.choice([0, 100, 2**40])
    model = model_cls(base, rnd)
    path = seg(tmp_path, base, model_cls.suffix)
    size = model_cls.entry_size
    idx = model_cls.kind(path, base)
    for _ in range(n):
        model.append_to(idx)
    check_against(idx, model)

    # 1. truncate_to an offset inside, exactly at an entry, and past the end.
    for target in (model.offsets[len(model) * 2 // 3] + rnd.choice([0, 1]), 2**41):
        idx.truncate_to(target)
        model.truncate_to(target)
        check_against(idx, model)
    # appends continue from the new last entry
    for _ in range(n // 4):
        model.append_to(idx)
    check_against(idx, model)

    # 2. resize: shrink above the entry count, then below it (entries are clamped), grow back.
    assert idx.resize((len(model) + 10) * size + size - 1)
    assert idx.max_entries == len(model) + 10 and path.stat().st_size == (len(model) + 10) * size
    check_against(idx, model)
    keep = len(model) // 2
    assert idx.resize(keep * size)
    model.keep(keep)
    check_against(idx, model)
    assert idx.is_full()
    assert not idx.resize(keep * size)
    assert idx.resize(idx.max_index_size)
    for _ in range(5):
        model.append_to(idx)
    check_against(idx, model)

    # 3. trim, then reopen from disk (writable and read-only): entries counted by length.
    idx.trim_to_valid_size()
    assert path.stat().st_size == len(model) * size
    check_against(idx, model)
    idx.close()
    assert path.read_bytes() == model.encoded()
    for writable in (True, False):
        reopened = model_cls.kind(path, base, writable=writable)
        check_against(reopened, model)
        assert reopened.max_entries == len(model)
        reopened.sanity_check()
        reopened.close()
    assert path.read_bytes() == model.encoded()

    # 4. truncate_to at offsets across the range (the time index searches its OFFSET field).
    idx = model_cls.kind(path, base)
    for target in model.offset_targets()[::max(1, len(model) // 7)]:
        idx.truncate_to(target)
        model.truncate_to(target)
        check_against(idx, model)
    idx.close()
    assert path.read_bytes() == model.encoded()


# -- §21 vectors and preallocation --------------------------------------------------------


def test_offset_index_vector_bytes_and_preallocated_length(tmp_path):
    path = seg(tmp_path, BASE, ".index")
    idx = OffsetIndex(path, BASE)
    assert not path.exists()  # the constructor touches nothing
    idx.append(105, 4150)
    idx.append(230, 8400)
    assert path.stat().st_size == OFFSET_PREALLOCATED
    assert (idx.entries, idx.max_entries, idx.length, idx.size_in_bytes) == (2, 1310720, OFFSET_PREALLOCATED, 16)
    assert idx.last_offset == 230 and not idx.is_full()
    idx.flush()
    with open(path, "rb") as f:  # what another reader sees through the page cache
        assert f.read(24) == OFFSET_VECTOR + bytes(8)
    idx.trim_to_valid_size()
    assert path.read_bytes() == OFFSET_VECTOR
    idx.close()
    assert path.read_bytes() == OFFSET_VECTOR
    idx.close()  # idempotent

    # close() alone trims too
    other = OffsetIndex(tmp_path / "other.index", BASE)
    other.append(105, 4150)
    other.append(230, 8400)
    other.close()
    assert (tmp_path / "other.index").read_bytes() == OFFSET_VECTOR


def test_time_index_vector_bytes_and_preallocated_length(tmp_path):
    path = seg(tmp_path, BASE, ".timeindex")
    idx = TimeIndex(path, BASE)
    assert idx.last_entry == (-1, BASE) and idx.entries == 0
    idx.maybe_append(TS, 105)
    idx.maybe_append(TS, 230)  # same timestamp: skipped
    assert idx.entries == 1 and idx.last_entry == (TS, 105)
    idx.maybe_append(TS + 500, 230)
    assert path.stat().st_size == TIME_PREALLOCATED
    assert (idx.entries, idx.max_entries, idx.size_in_bytes) == (2, 873813, 24)
    assert idx.last_entry == TimestampOffset(TS + 500, 230)
    idx.flush()
    idx.close()
    assert path.read_bytes() == TIME_VECTOR
    assert TimeIndex(path, BASE, writable=False).lookup(TS + 499) == (TS, 105)


# -- sanity checks --------------------------------------------------------------------


@pytest.mark.parametrize("writable", [True, False])
@pytest.mark.parametrize(
    "cls, suffix, data, message",
    [
        (OffsetIndex, ".index", OFFSET_VECTOR + struct.pack(">ii", -1, 9000),
         "has non-zero size but the last offset is 99 which is less than the base offset 100"),
        (OffsetIndex, ".index", OFFSET_VECTOR + b"\x00\x00\x00",
         "is corrupt, found 19 bytes which is neither positive nor a multiple of 8"),
        (TimeIndex, ".timeindex", TIME_VECTOR + struct.pack(">qi", TS - 1, 200),
         f"last timestamp is {TS - 1} which is less than the first timestamp {TS}"),
        (TimeIndex, ".timeindex", TIME_VECTOR + struct.pack(">qi", TS + 900, -3),
         "last offset is 97 which is less than the first offset 100"),
        (TimeIndex, ".timeindex", TIME_VECTOR + b"\x00" * 5,
         "is corrupt, found 29 bytes which is neither positive nor a multiple of 12"),
    ],
)
def test_sanity_check_rejects_malformed_files_naming_the_path(tmp_path, writable, cls, suffix, data, message):
    path = seg(tmp_path, BASE, suffix)
    path.write_bytes(data)
    idx = cls(path, BASE, writable=writable)
    with pytest.raises(CorruptIndexError) as e:
        idx.sanity_check()
    assert message in str(e.value)
    assert str(path) in str(e.value)
    idx.close_handler()
    assert path.read_bytes() == data  # a check never repairs


def test_zero_filled_preallocated_tail_is_trusted_as_kafka_does(tmp_path):
    # A crashed broker leaves the active segment's indexes preallocated, zeros past the
    # real entries. Kafka counts every slot: the offset index passes its check (a zero
    # entry decodes to the base offset) and answers from the zero tail; the time index
    # fails (last timestamp 0 < first). Recovery resets them.
    opath = seg(tmp_path, BASE, ".index")
    opath.write_bytes(OFFSET_VECTOR + bytes(OFFSET_PREALLOCATED - len(OFFSET_VECTOR)))
    oidx = OffsetIndex(opath, BASE)
    assert oidx.entries == oidx.max_entries == 1310720 and oidx.is_full()
    assert oidx.last_offset == BASE
    oidx.sanity_check()
    assert oidx.lookup(150) == (BASE, 0) and oidx.lookup(10**9) == (BASE, 0)  # warm section: zeros
    oidx.reset()
    assert oidx.entries == 0 and oidx.length == OFFSET_PREALLOCATED
    oidx.append(105, 4150)
    assert oidx.lookup(150) == (105, 4150)
    oidx.close()
    assert opath.read_bytes() == OFFSET_VECTOR[:8]

    tpath = seg(tmp_path, BASE, ".timeindex")
    tpath.write_bytes(TIME_VECTOR + bytes(TIME_PREALLOCATED - len(TIME_VECTOR)))
    tidx = TimeIndex(tpath, BASE, writable=False)
    assert tidx.entries == 873813 and tidx.last_entry == (0, BASE)
    with pytest.raises(CorruptIndexError, match="last timestamp is 0 which is less than the first timestamp"):
        tidx.sanity_check()
    tidx.close()
    zeros = seg(tmp_path, 0, ".timeindex")
    zeros.write_bytes(bytes(TIME_PREALLOCATED))
    TimeIndex(zeros, 0, writable=False).sanity_check()  # an all-zero index passes


def test_sanity_check_of_an_open_active_index_uses_the_tracked_entries(tmp_path):
    # Same files while the writer still has them open: Kafka checks its tracked entry
    # count, so the zero tail is not judged. After a crash (unmap without trim) and a
    # reopen, every slot counts again.
    opath, tpath = seg(tmp_path, BASE, ".index"), seg(tmp_path, BASE, ".timeindex")
    oidx, tidx = OffsetIndex(opath, BASE), TimeIndex(tpath, BASE)
    oidx.append(105, 4150)
    tidx.maybe_append(TS, 105)
    tidx.maybe_append(TS + 500, 230)
    oidx.sanity_check()
    tidx.sanity_check()
    oidx.close_handler()
    tidx.close_handler()  # "crash": no trim
    assert tpath.stat().st_size == TIME_PREALLOCATED
    OffsetIndex(opath, BASE).sanity_check()
    with pytest.raises(CorruptIndexError, match="last timestamp is 0"):
        TimeIndex(tpath, BASE).sanity_check()


def test_txn_index_sanity_check_and_version(tmp_path):
    path = seg(tmp_path, BASE, ".txnindex")
    path.write_bytes(TXN_VECTOR + bytes.fromhex("0000") + struct.pack(">qqqq", 7, 90, 99, 100))
    with pytest.raises(CorruptIndexError) as e:
        TransactionIndex(path, BASE).sanity_check()
    assert str(e.value) == (
        "Last offset of aborted transaction AbortedTxn(version=0, producerId=7, firstOffset=90, "
        f"lastOffset=99, lastStableOffset=100) in index {path} is less than start offset 100")
    TransactionIndex(path, 99).sanity_check()
    path.write_bytes(b"\x01" + TXN_VECTOR[1:])
    with pytest.raises(CorruptIndexError, match=f"Unexpected aborted transaction version 1 in transaction index {path}"):
        TransactionIndex(path, BASE).all_aborted_txns()


# -- append rules ----------------------------------------------------------------------


def test_offset_index_append_ordering_and_overflow(tmp_path):
    path = seg(tmp_path, BASE, ".index")
    idx = OffsetIndex(path, BASE)
    with pytest.raises(IndexOffsetOverflowError) as e:
        idx.append(99, 0)  # below the base offset, even on an empty index
    assert isinstance(e.value, ValueError) and isinstance(e.value, InvalidOffsetError)
    assert str(e.value) == f"Integer overflow for offset: 99 ({path})"
    with pytest.raises(IndexOffsetOverflowError):
        idx.append(BASE + 2**31, 0)
    with pytest.raises(ValueError):
        idx.append(BASE, -1)
    with pytest.raises(ValueError):
        idx.append(BASE, 2**31)
    assert idx.entries == 0

    idx.append(105, 0)
    with pytest.raises(InvalidOffsetError) as e:
        idx.append(105, 10)
    assert str(e.value) == (
        f"Attempt to append an offset 105 to position 1 no larger than the last offset appended (105) to {path}")
    with pytest.raises(InvalidOffsetError):
        idx.append(104, 10)
    idx.append(BASE + 2**31 - 1, 2**31 - 1)  # the largest relative offset and position
    assert idx.entries == 2 and idx.last_offset == BASE + 2**31 - 1
    assert idx.lookup(2**62) == (BASE + 2**31 - 1, 2**31 - 1)
    idx.close()


def test_time_index_maybe_append_rules(tmp_path):
    path = seg(tmp_path, BASE, ".timeindex")
    idx = TimeIndex(path, BASE)
    idx.maybe_append(-1, 105)  # no timestamp (v0 data): never above the empty entry's -1
    assert idx.entries == 0
    with pytest.raises(IndexOffsetOverflowError):
        idx.maybe_append(TS, 99)
    idx.maybe_append(TS, 105)
    with pytest.raises(InvalidOffsetError) as e:
        idx.maybe_append(TS + 1, 104)
    assert str(e.value) == (
        f"Attempt to append an offset (104) to slot 1 no larger than the last offset appended (105) to {path}")
    with pytest.raises(InvalidTimestampError) as e:
        idx.maybe_append(TS - 1, 106)
    assert isinstance(e.value, EngineError)
    assert str(e.value) == (
        f"Attempt to append a timestamp ({TS - 1}) to slot 1 no larger than the last timestamp appended "
        f"({TS}) to {path}")
    idx.maybe_append(TS, 106)  # equal timestamp: skipped
    assert idx.entries == 1
    idx.maybe_append(TS + 1, 105)  # equal offset, larger timestamp: appended
    assert idx.entries == 2 and idx.last_entry == (TS + 1, 105)
    idx.close()


def test_is_full_offset_index_uses_every_slot(tmp_path):
    path = seg(tmp_path, 0, ".index")
    idx = OffsetIndex(path, 0, max_index_size=4 * 8 + 5)  # rounded down: 4 slots
    assert idx.max_entries == 4 and path.stat().st_size == 32
    for i in range(4):
        assert not idx.is_full()
        idx.append(i, i * 10)
    assert idx.is_full()
    with pytest.raises(IndexFullError, match=str(path)):
        idx.append(10, 100)
    idx.close()


def test_is_full_time_index_reserves_the_roll_slot(tmp_path):
    path = seg(tmp_path, 0, ".timeindex")
    idx = TimeIndex(path, 0, max_index_size=4 * 12 + 11)
    assert idx.max_entries == 4 and path.stat().st_size == 48
    for i in range(3):
        assert not idx.is_full()
        idx.maybe_append(TS + i, i)
    assert idx.is_full() and idx.entries == 3
    with pytest.raises(IndexFullError, match="full time index"):
        idx.maybe_append(TS + 3, 3)
    idx.maybe_append(TS + 3, 3, skip_full_check=True)  # the roll/close entry
    assert idx.entries == 4
    idx.maybe_append(TS + 3, 3, skip_full_check=True)  # same entry again: skipped, no error
    with pytest.raises(IndexFullError):
        idx.maybe_append(TS + 4, 4, skip_full_check=True)  # no slot left at all
    assert idx.entries == 4
    idx.close()
    assert path.stat().st_size == 48


@pytest.mark.parametrize("cls, bad_size", [(OffsetIndex, 7), (TimeIndex, 11)])
def test_max_index_size_below_one_entry(tmp_path, cls, bad_size):
    path = tmp_path / "x.idx"
    idx = cls(path, 0, max_index_size=bad_size)
    with pytest.raises(ValueError, match=f"Invalid max index size: {bad_size}"):
        idx.entries
    assert not path.exists()


@pytest.mark.parametrize("cls", [OffsetIndex, TimeIndex])
def test_empty_existing_file(tmp_path, cls):
    # Zero bytes cannot be mmapped; Kafka sees 0 entries and 0 slots (full).
    path = tmp_path / "empty.idx"
    path.write_bytes(b"")
    idx = cls(path, BASE)
    assert idx.entries == 0 and idx.max_entries == 0 and idx.is_full()
    assert idx.lookup(10**6) == ((BASE, 0) if cls is OffsetIndex else (-1, BASE))
    idx.sanity_check()
    idx.flush()
    assert idx.resize(10 * cls.entry_size)
    assert idx.max_entries == 10 and not idx.is_full()
    assert idx.resize(0) and idx.max_entries == 0
    idx.close()
    assert path.stat().st_size == 0


# -- truncation, reset, resize, reopen --------------------------------------------------------


def test_offset_index_truncate_to(tmp_path):
    path = seg(tmp_path, BASE, ".index")
    idx = OffsetIndex(path, BASE)
    for offset, pos in ((105, 0), (230, 4150), (300, 8400)):
        idx.append(offset, pos)
    idx.truncate_to(1000)  # past the end: no change
    assert idx.entries == 3
    idx.truncate_to(300)  # exact entry: it goes
    assert idx.entries == 2 and idx.last_offset == 230
    idx.truncate_to(231)  # between entries: the lower one stays
    assert idx.entries == 2
    idx.truncate_to(230)
    assert idx.entries == 1 and idx.last_offset == 105
    idx.append(106, 50)  # below the removed entries: fine now
    idx.truncate_to(50)  # below every entry: empty
    assert idx.entries == 0 and idx.last_offset == BASE
    assert idx.lookup(1000) == (BASE, 0)
    assert path.stat().st_size == OFFSET_PREALLOCATED  # truncation never resizes
    idx.close()
    assert path.read_bytes() == b""


def test_time_index_truncate_to_searches_the_offset_field(tmp_path):
    path = seg(tmp_path, BASE, ".timeindex")
    idx = TimeIndex(path, BASE)
    for ts, offset in ((TS, 105), (TS + 10, 230), (TS + 20, 300)):
        idx.maybe_append(ts, offset)
    idx.truncate_to(TS)  # a timestamp-sized offset is past every entry: no change
    assert idx.entries == 3
    idx.truncate_to(230)
    assert idx.entries == 1 and idx.last_entry == (TS, 105)
    idx.truncate_to(106)
    assert idx.entries == 1
    idx.truncate_to(105)
    assert idx.entries == 0 and idx.last_entry == (-1, BASE)
    idx.maybe_append(TS - 5, 101)  # any timestamp again
    assert idx.last_entry == (TS - 5, 101)
    idx.close()


@pytest.mark.parametrize("cls, prealloc", [(OffsetIndex, OFFSET_PREALLOCATED), (TimeIndex, TIME_PREALLOCATED)])
def test_truncate_keeps_length_and_reset_restores_preallocation(tmp_path, cls, prealloc):
    path = tmp_path / "i.idx"
    idx = cls(path, BASE)
    add = idx.append if cls is OffsetIndex else (lambda o, p: idx.maybe_append(TS + p, o))
    add(105, 1)
    add(230, 2)
    idx.trim_to_valid_size()
    assert path.stat().st_size == 2 * cls.entry_size and idx.is_full()
    idx.truncate()
    assert idx.entries == 0 and path.stat().st_size == 2 * cls.entry_size
    add(105, 1)
    idx.reset()
    assert idx.entries == 0 and idx.length == path.stat().st_size == prealloc
    assert idx.max_entries == prealloc // cls.entry_size
    idx.close()
    assert path.stat().st_size == 0


def test_resize_rounds_down_and_reports_change(tmp_path):
    idx = OffsetIndex(tmp_path / "r.index", 0)
    assert not idx.resize(OFFSET_PREALLOCATED)  # already that length
    assert idx.resize(21) and idx.length == 16 and idx.max_entries == 2
    assert not idx.resize(23)
    with pytest.raises(ValueError):
        idx.resize(-8)
    idx.close()
    t = TimeIndex(tmp_path / "r.timeindex", 0)
    assert t.resize(25) and t.length == 24
    t.close()


def test_reopen_counts_every_whole_slot(tmp_path):
    # Kafka trusts the file: a zero slot at the end is an entry (offset = base).
    path = seg(tmp_path, BASE, ".index")
    path.write_bytes(OFFSET_VECTOR + bytes(8))
    idx = OffsetIndex(path, BASE)
    assert idx.entries == idx.max_entries == 3 and idx.is_full()
    assert idx.entry(2) == (BASE, 0) and idx.last_offset == BASE
    assert idx.resize(idx.max_index_size)  # what the segment does for the active segment
    assert idx.entries == 3 and not idx.is_full()
    idx.append(500, 9000)
    idx.close()
    assert path.read_bytes() == OFFSET_VECTOR + bytes(8) + struct.pack(">ii", 400, 9000)

    odd = seg(tmp_path, 0, ".timeindex")
    odd.write_bytes(TIME_VECTOR + b"\x00" * 5)
    t = TimeIndex(odd, 0)
    assert t.entries == t.max_entries == 2 and t.last_entry == (TS + 500, 130)
    t.trim_to_valid_size()
    assert odd.read_bytes() == TIME_VECTOR
    t.close()


def test_sanity_check_after_truncating_an_odd_length_file_reports_the_real_length(tmp_path):
    # Tracked entries (1) differ from the file's whole slots (2): the entry rules see the
    # tracked entry, the length rule the real 19 bytes.
    path = seg(tmp_path, BASE, ".index")
    path.write_bytes(OFFSET_VECTOR + b"\x00\x00\x00")
    idx = OffsetIndex(path, BASE)
    idx.truncate_to(230)
    assert idx.entries == 1 and idx.length == 19
    with pytest.raises(CorruptIndexError, match="found 19 bytes"):
        idx.sanity_check()
    idx.close()
    assert path.read_bytes() == OFFSET_VECTOR[:8]


def test_failed_resize_forgets_the_map_and_reopens_from_disk(tmp_path, monkeypatch):
    path = seg(tmp_path, BASE, ".index")
    idx = OffsetIndex(path, BASE)
    idx.append(105, 4150)
    idx.flush()

    def no_space(fd, length):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "ftruncate", no_space)
    with pytest.raises(OSError):
        idx.trim_to_valid_size()
    assert not idx.is_loaded
    monkeypatch.undo()
    assert idx.entries == 1310720 and idx.entry(0) == (105, 4150)  # as after a crash
    idx.close()


def test_context_manager_and_repr(tmp_path):
    path = seg(tmp_path, BASE, ".timeindex")
    with TimeIndex(path, BASE) as idx:
        assert "not loaded" in repr(idx)
        idx.maybe_append(TS, 105)
        assert "entries=1/873813" in repr(idx)
        with pytest.raises(ValueError):
            idx.maybe_append(2**63, 106)
    assert path.read_bytes() == TIME_VECTOR[:12]
    with TransactionIndex(seg(tmp_path, BASE, ".txnindex"), BASE) as t:
        t.append(txn(1000, 120, 150, 121))
        assert t.base_offset == BASE and "start_offset=100" in repr(t)
    assert t._fd is None


def test_close_then_use_reopens_from_disk(tmp_path):
    path = seg(tmp_path, BASE, ".index")
    idx = OffsetIndex(path, BASE)
    idx.append(105, 4150)
    idx.close()
    assert not idx.is_loaded
    assert idx.entries == 1 and idx.max_entries == 1  # reopened: counted by length
    idx.resize(idx.max_index_size)
    idx.append(230, 8400)
    idx.close()
    assert path.read_bytes() == OFFSET_VECTOR


# -- read-only mode ------------------------------------------------------------------------


def test_read_only_missing_file_raises_on_first_use_only(tmp_path):
    for cls in (OffsetIndex, TimeIndex):
        path = tmp_path / f"missing{cls.__name__}"
        idx = cls(path, 0, writable=False)
        assert not idx.exists
        idx.flush()  # nothing to flush; does not open
        idx.close()
        with pytest.raises(FileNotFoundError):
            idx.lookup(5)
        assert not path.exists()
        assert not idx.delete_if_exists()


def test_read_only_never_writes(tmp_path):
    opath, tpath = seg(tmp_path, BASE, ".index"), seg(tmp_path, BASE, ".timeindex")
    opath.write_bytes(OFFSET_VECTOR + bytes(1000 * 8))  # a crashed active segment's index
    tpath.write_bytes(TIME_VECTOR)
    os.utime(opath, ns=(1_600_000_000_000_000_000, 1_600_000_000_000_000_000))
    os.utime(tpath, ns=(1_600_000_000_000_000_000, 1_600_000_000_000_000_000))
    before = digest(opath), digest(tpath)

    o = OffsetIndex(opath, BASE, writable=False)
    assert o.entries == 1002 and o.entry(1) == (230, 8400)
    assert o.lookup(229) == (BASE, 0)  # Kafka searches the zero tail too (see above)
    assert o.fetch_upper_bound_offset(0, 100) == (105, 4150)
    o.sanity_check()
    o.flush()
    o.trim_to_valid_size()  # already the valid size by Kafka's count: no-op
    for mutate in (lambda: o.append(5000, 1), lambda: o.truncate_to(200), o.truncate, o.reset,
                   lambda: o.resize(8)):
        with pytest.raises(ReadOnlyIndexError, match=str(opath)):
            mutate()
    o.close()

    t = TimeIndex(tpath, BASE, writable=False)
    assert t.lookup(TS + 600) == (TS + 500, 230) and t.last_entry == (TS + 500, 230)
    t.sanity_check()
    for mutate in (lambda: t.maybe_append(TS + 900, 300), lambda: t.truncate_to(200), t.reset,
                   lambda: t.resize(TIME_PREALLOCATED)):
        with pytest.raises(ReadOnlyIndexError):
            mutate()
    t.close()
    assert (digest(opath), digest(tpath)) == before

    # A length that is not a whole number of entries: a read-only trim refuses, close leaves it.
    odd = tmp_path / "odd.index"
    odd.write_bytes(OFFSET_VECTOR + b"\x01")
    r = OffsetIndex(odd, BASE, writable=False)
    with pytest.raises(ReadOnlyIndexError):
        r.trim_to_valid_size()
    r.close()
    assert odd.read_bytes() == OFFSET_VECTOR + b"\x01"
    assert isinstance(ReadOnlyIndexError("x"), EngineError)


# -- files: rename, delete, parent dir ---------------------------------------------------------


def test_rename_delete_and_parent_dir(tmp_path):
    path = seg(tmp_path, BASE, ".index")
    idx = OffsetIndex(path, BASE)
    idx.append(105, 4150)
    deleted = path.with_name(path.name + ".deleted")
    idx.rename_to(deleted)  # while mapped
    assert idx.path == deleted and deleted.exists() and not path.exists()
    idx.append(230, 8400)
    idx.close()  # the trim reopens the file by its new name
    assert deleted.read_bytes() == OFFSET_VECTOR

    moved = tmp_path / "moved"
    moved.mkdir()
    os.replace(deleted, moved / deleted.name)
    idx.update_parent_dir(moved)
    assert idx.path == moved / deleted.name and idx.entries == 2
    assert idx.delete_if_exists() and not idx.path.exists() and not idx.is_loaded
    assert not idx.delete_if_exists()

    lazy = OffsetIndex(tmp_path / "never.index", 0)
    lazy.rename_to(tmp_path / "never.index.swap")  # no file yet: only the name changes
    assert lazy.path.name == "never.index.swap" and not lazy.exists
    assert not lazy.is_loaded
    path.write_bytes(OFFSET_VECTOR)
    with pytest.raises(FileNotFoundError):  # the file exists but the target directory does not
        OffsetIndex(path, BASE).rename_to(tmp_path / "no-such-dir" / "x")


# -- transaction index ---------------------------------------------------------------------


def txn(pid: int, first: int, last: int, lso: int) -> AbortedTxn:
    return AbortedTxn(0, pid, first, last, lso)


def collect_oracle(entries: list[AbortedTxn], fetch: int, upper: int):
    found = []
    for t in entries:
        if t.last_offset >= fetch and t.first_offset < upper:
            found.append(t)
        if t.last_stable_offset >= upper:
            return found, True
    return found, False


def test_txn_index_is_created_by_the_first_append(tmp_path):
    path = seg(tmp_path, BASE, ".txnindex")
    idx = TransactionIndex(path, BASE)
    assert idx.all_aborted_txns() == [] and idx.collect_aborted_txns(0, 10**9) == ([], False)
    assert idx.size_in_bytes == 0
    idx.sanity_check()
    idx.truncate_to(0)
    idx.reset()
    idx.flush()
    idx.close()
    assert not path.exists()

    idx.append(txn(1000, 120, 150, 121))
    assert path.read_bytes() == TXN_VECTOR and idx.size_in_bytes == 34
    with pytest.raises(InvalidOffsetError) as e:
        idx.append(txn(1001, 140, 150, 141))
    assert str(e.value) == (
        "The last offset of appended transactions must increase sequentially, but 150 is not greater "
        f"than current last offset 150 of index {path}")
    idx.append(txn(1001, 140, 151, 141))
    idx.flush()
    idx.close()
    idx.close()
    assert TransactionIndex(path, BASE).all_aborted_txns() == [txn(1000, 120, 150, 121), txn(1001, 140, 151, 141)]


def test_txn_index_collect_matches_kafka_rule(tmp_path, monkeypatch):
    monkeypatch.setattr(TransactionIndex, "_READ_ENTRIES", 3)  # several chunks per read
    rnd = random.Random(7)
    path = seg(tmp_path, BASE, ".txnindex")
    idx = TransactionIndex(path, BASE)
    entries, last = [], BASE
    for i in range(40):
        last += rnd.randint(1, 30)
        first = last - rnd.randint(1, 60)
        lso = rnd.randint(first, last + 1)
        entries.append(txn(i, first, last, lso))
        idx.append(entries[-1])
    assert idx.all_aborted_txns() == entries
    for _ in range(300):
        fetch = rnd.randint(BASE - 50, last + 50)
        upper = fetch + rnd.randint(0, 400)
        result = idx.collect_aborted_txns(fetch, upper)
        assert isinstance(result, TxnIndexSearchResult)
        assert tuple(result) == collect_oracle(entries, fetch, upper)

    # Completion follows the LSO, not the last offset: an abort whose LSO is at or past the
    # upper bound proves every later abort started beyond the range.
    one = TransactionIndex(tmp_path / "one.txnindex", 0)
    one.append(txn(1, 10, 20, 15))
    assert one.collect_aborted_txns(0, 18) == ([txn(1, 10, 20, 15)], False)  # last 20 >= 18, LSO 15 < 18
    assert one.collect_aborted_txns(0, 15) == ([txn(1, 10, 20, 15)], True)
    one.append(txn(2, 30, 40, 31))
    assert one.collect_aborted_txns(0, 18) == ([txn(1, 10, 20, 15)], True)  # stops at LSO 31
    assert one.collect_aborted_txns(21, 35) == ([txn(2, 30, 40, 31)], False)
    assert one.collect_aborted_txns(21, 25) == ([], True)
    one.close()
    idx.close()


def test_txn_index_truncate_reset_reopen(tmp_path):
    path = seg(tmp_path, BASE, ".txnindex")
    idx = TransactionIndex(path, BASE)
    for t in (txn(1, 100, 110, 101), txn(2, 120, 150, 121), txn(3, 160, 200, 161)):
        idx.append(t)
    idx.truncate_to(201)  # nothing at or past it: unchanged
    assert len(idx.all_aborted_txns()) == 3
    idx.truncate_to(150)
    assert idx.all_aborted_txns() == [txn(1, 100, 110, 101)] and path.stat().st_size == 34
    with pytest.raises(InvalidOffsetError):
        idx.append(txn(4, 100, 110, 101))  # the last offset is now 110
    idx.append(txn(4, 111, 120, 112))
    assert [t.last_offset for t in idx.all_aborted_txns()] == [110, 120]
    idx.close()

    # Reopened: entries read back; like Kafka, the last offset is not (only appends and
    # truncate_to set it), so a smaller last offset is accepted.
    again = TransactionIndex(path, BASE)
    assert [t.producer_id for t in again.all_aborted_txns()] == [1, 4]
    again.append(txn(5, 100, 105, 101))
    assert len(again.all_aborted_txns()) == 3
    again.truncate_to(0)
    assert path.exists() and path.stat().st_size == 0
    again.append(txn(6, 300, 310, 301))
    again.reset()
    assert path.exists() and path.stat().st_size == 0
    again.append(txn(7, 1, 2, 3))  # any offset after a reset
    again.close()

    # reset/truncate_to of a file this object never opened: truncated by path, not created.
    path.write_bytes(TXN_VECTOR)
    fresh = TransactionIndex(path, BASE)
    fresh.truncate_to(150)
    assert path.stat().st_size == 0 and fresh._fd is None
    path.write_bytes(TXN_VECTOR)
    TransactionIndex(path, BASE).reset()
    assert path.stat().st_size == 0

    # A trailing partial entry (a torn write) is ignored by reads.
    path.write_bytes(TXN_VECTOR + TXN_VECTOR[:20])
    torn = TransactionIndex(path, BASE)
    assert torn.all_aborted_txns() == [txn(1000, 120, 150, 121)]
    torn.sanity_check()


def test_txn_index_rename_and_delete(tmp_path):
    path = seg(tmp_path, BASE, ".txnindex")
    idx = TransactionIndex(path, BASE)
    idx.rename_to(tmp_path / "a.txnindex")  # no file yet
    assert not idx.exists and idx.path.name == "a.txnindex"
    idx.append(txn(1, 100, 110, 101))
    idx.rename_to(tmp_path / "b.txnindex")  # with the descriptor open
    idx.append(txn(2, 120, 130, 121))
    idx.close()
    assert (tmp_path / "b.txnindex").stat().st_size == 68 and not (tmp_path / "a.txnindex").exists()
    idx.update_parent_dir(tmp_path)
    assert idx.delete_if_exists() and not idx.exists
    assert not idx.delete_if_exists()


# -- lazy opening --------------------------------------------------------------------------


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _mappings_under(directory: Path) -> list[str]:
    return [line for line in Path("/proc/self/maps").read_text().splitlines() if str(directory) in line]


def test_lazy_opening_no_descriptor_or_mapping_until_first_use(tmp_path):
    n = 5000
    d = tmp_path / "t-0"
    d.mkdir()
    rel = OFFSET_VECTOR  # relative entries (5, 4150), (130, 8400) whatever the base
    for i in range(n):
        seg(d, i * 1000, ".index").write_bytes(rel)

    fds = _open_fds()
    offset_indexes = [OffsetIndex(seg(d, i * 1000, ".index"), i * 1000) for i in range(n)]
    time_indexes = [TimeIndex(seg(d, i * 1000, ".timeindex"), i * 1000) for i in range(n)]
    txn_indexes = [TransactionIndex(seg(d, i * 1000, ".txnindex"), i * 1000) for i in range(n)]
    # Facts that must not open anything, and closing what was never opened.
    assert all(i.exists for i in offset_indexes) and not any(t.exists for t in time_indexes)
    assert not any(i.is_loaded for i in offset_indexes)
    for objs in (offset_indexes, time_indexes, txn_indexes):
        for obj in objs[:100]:
            obj.close()
    assert _open_fds() == fds and _mappings_under(d) == []
    assert len(os.listdir(d)) == n  # no time or txn index file was created

    used = (0, 2500, n - 1)
    for k in used:
        assert offset_indexes[k].lookup(k * 1000 + 200) == (k * 1000 + 130, 8400)
    assert len(_mappings_under(d)) == len(used)
    assert _open_fds() == fds + len(used)  # one descriptor each: mmap's own
    assert [i for i, idx in enumerate(offset_indexes) if idx.is_loaded] == list(used)

    for k in used:
        offset_indexes[k].close()
    assert _open_fds() == fds and _mappings_under(d) == []
    assert all(seg(d, k * 1000, ".index").read_bytes() == rel for k in used)


# -- a full file system --------------------------------------------------------------------------

_FULL_DISK_SCRIPT = r"""
import errno, os, sys
from plog.engine.storage.index import OffsetIndex, TimeIndex
d = sys.argv[1]
# An index written earlier and left preallocated (a crash): its zero tail is holes.
with open(os.path.join(d, "00000000000000000100.index"), "wb") as f:
    f.write(bytes.fromhex("000000050000103600000082000020d0"))
    f.truncate(10485760)
with open(os.path.join(d, "00000000000000000100.timeindex"), "wb") as f:
    f.write(bytes.fromhex("0000018bcfe56800000000050000018bcfe569f400000082"))
    f.truncate(10485756)
fd = os.open(os.path.join(d, "filler"), os.O_WRONLY | os.O_CREAT)
try:
    while True:
        os.write(fd, bytes(4096))
except OSError:
    pass
os.close(fd)
results = []
for cls, suffix in ((OffsetIndex, ".index"), (TimeIndex, ".timeindex")):
    # Opening it (the last slot is a hole) and Kafka's sanity check read without allocating.
    old = cls(os.path.join(d, "00000000000000000100" + suffix), 100)
    results.append(old.entries)
    try:
        old.sanity_check()
    except Exception as e:
        results.append(type(e).__name__)
    old.close_handler()
    # Appending to a new one needs a page the file system cannot give.
    new = cls(os.path.join(d, "00000000000000000200" + suffix), 200)
    try:
        if cls is OffsetIndex:
            new.append(200, 0)
        else:
            new.maybe_append(1700000000000, 200)
        results.append("appended")
    except OSError as e:
        results.append((errno.errorcode[e.errno], e.filename == os.path.abspath(new.path)))
    results.append(new.entries)
    new.close_handler()
print(results)
"""


def test_a_full_file_system_is_an_oserror_naming_the_index_not_sigbus(tmp_path):
    """On a full file system a store into (tmpfs: even a read of) an unallocated page of a
    mapped file is SIGBUS, which kills the process. Indexes read possible holes with pread
    and write the first entry of every page with pwrite, so the failure is ENOSPC naming the
    file and nothing is counted as written. Run in a child: a regression kills it, not pytest."""
    import shutil
    import subprocess
    import sys

    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root and mount(8): cannot simulate a full disk here")
    mnt = tmp_path / "full"
    mnt.mkdir()
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True)
    if p.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {p.stderr.decode(errors='replace').strip()}")
    try:
        child = subprocess.run([sys.executable, "-c", _FULL_DISK_SCRIPT, str(mnt)], capture_output=True,
                               text=True, timeout=60)
    finally:
        if subprocess.run(["umount", str(mnt)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True)
    assert child.returncode == 0, (child.returncode, child.stderr)
    # Every slot trusted; Kafka's rules pass the offset index's zero last slot (offset ==
    # base) and fail the time index's (timestamp 0 < the first); ENOSPC on append.
    assert child.stdout.strip() == str([
        1310720, ("ENOSPC", True), 0,
        873813, "CorruptIndexError", ("ENOSPC", True), 0,
    ])


def test_a_new_index_loaded_by_two_threads_at_once_is_opened_once(tmp_path, monkeypatch):
    """A writer's flush thread flushes a new segment's index while the appending thread
    appends its first entry: the second open used to find the file the first had just
    created and count every preallocated slot as an entry (a full index: the append failed)."""
    import threading
    import time

    from plog.engine.storage import abstract_index

    index = OffsetIndex(tmp_path / "00000000000000000000.index", 0, max_index_size=1 << 20)
    real = abstract_index.os.ftruncate
    created = threading.Event()

    def slow_preallocate(fd, length):  # the first open, right after it created the file
        real(fd, length)
        created.set()
        time.sleep(0.3)

    monkeypatch.setattr(abstract_index.os, "ftruncate", slow_preallocate)
    flusher = threading.Thread(target=index.flush)
    flusher.start()
    assert created.wait(10)
    index.append(5, 100)  # opens (or waits for the open) on this thread meanwhile
    flusher.join()
    assert index.entries == 1 and index.lookup(7) == (5, 100)
    index.close()
