"""Offset, time and transaction index codecs and algorithms (plog.formats.indexes).

Known answers from docs/kafka-format.md §21, the lookup algorithm against a ``bisect``
oracle (including both sides of the warm-section boundary), Kafka's sanity-check rules and
messages, every index in the shared corpus, and hostile bytes.
"""

from __future__ import annotations

import bisect
import random
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plog.formats import indexes as ix
from plog.formats.errors import CorruptIndexError

from conftest import corpus_files  # noqa: E402

OFFSET_VECTOR = bytes.fromhex("000000050000103600000082000020d0")
TIME_VECTOR = bytes.fromhex("0000018bcfe56800000000050000018bcfe569f400000082")
TXN_VECTOR = bytes.fromhex("000000000000000003e8000000000000007800000000000000960000000000000079")
TS = 1700000000000


def base_offset_of(path: Path) -> int:
    return int(path.name.split(".")[0])


# The corpus is part of the project contract: a missing one fails (the `corpus` fixture).
needs_corpus = pytest.mark.usefixtures("corpus")


# -- §21 vectors -------------------------------------------------------------------------


def test_offset_index_vector_decodes_and_encodes():
    assert list(ix.iter_offset_entries(OFFSET_VECTOR, 100)) == [(105, 4150), (230, 8400)]
    assert ix.decode_offset_entry(OFFSET_VECTOR, 1, 100) == ix.OffsetPosition(230, 8400)
    encoded = ix.encode_offset_entry(100, 105, 4150) + ix.encode_offset_entry(100, 230, 8400)
    assert encoded == OFFSET_VECTOR
    ix.sanity_check_offset_index(len(OFFSET_VECTOR), OFFSET_VECTOR, 100, "v.index")


def test_time_index_vector_decodes_and_encodes():
    assert list(ix.iter_time_entries(TIME_VECTOR, 100)) == [(TS, 105), (TS + 500, 230)]
    assert ix.decode_time_entry(TIME_VECTOR, 0, 100) == ix.TimestampOffset(TS, 105)
    assert ix.encode_time_entry(100, TS, 105) + ix.encode_time_entry(100, TS + 500, 230) == TIME_VECTOR
    ix.sanity_check_time_index(len(TIME_VECTOR), TIME_VECTOR, 100, "v.timeindex")


def test_txn_index_vector_decodes_and_encodes():
    assert list(ix.iter_txn_entries(TXN_VECTOR)) == [ix.AbortedTxn(0, 1000, 120, 150, 121)]
    assert ix.encode_aborted_txn(1000, 120, 150, 121) == TXN_VECTOR
    assert len(TXN_VECTOR) == ix.TXN_INDEX_ENTRY_SIZE == 34
    ix.sanity_check_txn_index(TXN_VECTOR, 100, "v.txnindex")


def test_preallocated_lengths_and_warm_entries():
    assert ix.preallocated_length(ix.DEFAULT_MAX_INDEX_SIZE, 8) == 10485760
    assert ix.preallocated_length(ix.DEFAULT_MAX_INDEX_SIZE, 12) == 10485756
    assert ix.index_entries(10485760, 8) == 1310720
    assert ix.index_entries(10485756, 12) == 873813
    assert ix.warm_entries(8) == 1024 and ix.warm_entries(12) == 682
    with pytest.raises(ValueError):
        ix.preallocated_length(4, 8)


def test_vector_lookups():
    n = 2
    assert ix.offset_index_lookup(OFFSET_VECTOR, n, 100, 99) == (100, 0)
    assert ix.offset_index_lookup(OFFSET_VECTOR, n, 100, 104) == (100, 0)
    assert ix.offset_index_lookup(OFFSET_VECTOR, n, 100, 105) == (105, 4150)
    assert ix.offset_index_lookup(OFFSET_VECTOR, n, 100, 229) == (105, 4150)
    assert ix.offset_index_lookup(OFFSET_VECTOR, n, 100, 10**12) == (230, 8400)
    assert ix.offset_index_lookup(OFFSET_VECTOR, 0, 100, 500) == (100, 0)
    assert ix.time_index_lookup(TIME_VECTOR, 2, 100, TS - 1) == (-1, 100)
    assert ix.time_index_lookup(TIME_VECTOR, 2, 100, TS + 499) == (TS, 105)
    assert ix.time_index_lookup(TIME_VECTOR, 2, 100, TS + 500) == (TS + 500, 230)
    assert ix.fetch_upper_bound_offset(OFFSET_VECTOR, 2, 100, 0, 100) == (105, 4150)
    assert ix.fetch_upper_bound_offset(OFFSET_VECTOR, 2, 100, 4150, 1) == (230, 8400)
    assert ix.fetch_upper_bound_offset(OFFSET_VECTOR, 2, 100, 8400, 1) is None


def test_lookup_honours_entry_count_in_a_preallocated_buffer():
    # The active segment's mmap is 10 MiB of zeros past the real entries; the engine passes
    # the entry count it tracks, and only those entries are searched.
    padded = OFFSET_VECTOR + bytes(ix.DEFAULT_MAX_INDEX_SIZE - len(OFFSET_VECTOR))
    assert ix.offset_index_lookup(padded, 2, 100, 1000) == (230, 8400)
    assert ix.truncate_slot_count(padded, 2, 100, 230) == 1
    # Opened from disk, Kafka counts every slot: the zero tail then decodes to base offset.
    entries = ix.index_entries(len(padded), 8)
    assert ix.last_offset_entry(padded, entries, 100) == (100, 0)


def test_search_key_names_and_errors():
    assert ix.largest_lower_bound_slot(OFFSET_VECTOR, 2, 130, "offset") == 1
    assert ix.smallest_upper_bound_slot(OFFSET_VECTOR, 2, 5000, "position") == 1
    assert ix.largest_lower_bound_slot(TIME_VECTOR, 2, TS + 1, "timestamp") == 0
    with pytest.raises(ValueError):
        ix.largest_lower_bound_slot(OFFSET_VECTOR, 2, 1, "bogus")
    with pytest.raises(ValueError):
        ix.truncate_slot_count(TIME_VECTOR, 2, 100, 105, ix.TIME_INDEX_KEY)
    with pytest.raises(CorruptIndexError):  # more entries than the buffer holds
        ix.largest_lower_bound_slot(OFFSET_VECTOR, 3, 1, ix.OFFSET_INDEX_KEY)
    with pytest.raises(CorruptIndexError):
        ix.decode_offset_entry(OFFSET_VECTOR, 2, 100)
    with pytest.raises(CorruptIndexError):
        ix.decode_time_entry(TIME_VECTOR, -1, 100)


def test_encode_rejects_offsets_an_index_cannot_hold():
    assert ix.can_append_offset(100, 100) and ix.can_append_offset(100, 100 + 2**31 - 1)
    assert not ix.can_append_offset(100, 99) and not ix.can_append_offset(100, 100 + 2**31)
    with pytest.raises(ValueError, match="Integer overflow for offset: 99"):
        ix.encode_offset_entry(100, 99, 0)
    with pytest.raises(ValueError):
        ix.encode_time_entry(0, TS, 2**31)
    with pytest.raises(ValueError):
        ix.encode_offset_entry(0, 1, -1)


# -- lookup algorithm against a bisect oracle --------------------------------------------

# Entry counts on both sides of the warm-section boundary: firstHotEntry =
# max(0, entries - 1 - warmEntries) turns positive at 1026 (offset) / 684 (time) entries.
SIZES = [1, 2, 3, 681, 682, 683, 684, 685, 1023, 1024, 1025, 1026, 1027, 5000]


def build_offset_index(seed: int, n: int, base: int):
    rnd = random.Random(seed)
    rels, positions = [], []
    rel = rnd.randint(0, 3)
    pos = rnd.randint(0, 100)
    for _ in range(n):
        rels.append(rel)
        positions.append(pos)
        rel += rnd.randint(1, 40)
        pos += rnd.randint(1, 5000)
    buf = b"".join(struct.pack(">ii", r, p) for r, p in zip(rels, positions))
    return buf, [base + r for r in rels], positions


def build_time_index(seed: int, n: int, base: int):
    rnd = random.Random(seed)
    stamps, rels = [], []
    ts = TS + rnd.randint(-1000, 1000)
    rel = rnd.randint(0, 3)
    for _ in range(n):
        stamps.append(ts)
        rels.append(rel)
        ts += rnd.randint(1, 1000)
        rel += rnd.randint(1, 40)
    buf = b"".join(struct.pack(">qi", t, r) for t, r in zip(stamps, rels))
    return buf, stamps, [base + r for r in rels]


def interesting_targets(keys: list[int], warm: int, rnd: random.Random) -> list[int]:
    n = len(keys)
    hot = max(0, n - 1 - warm)
    picks = {keys[0] - 1, keys[0], keys[0] + 1, keys[-1] - 1, keys[-1], keys[-1] + 1,
             keys[-1] + 10**6, keys[0] - 10**6, keys[hot] - 1, keys[hot], keys[hot] + 1}
    if hot + 1 < n:
        picks |= {keys[hot + 1] - 1, keys[hot + 1]}
    for _ in range(12):
        i = rnd.randrange(n)
        picks |= {keys[i], keys[i] + 1, keys[i] - 1}
    return sorted(picks)


def lower_bound_oracle(keys: list[int], target: int) -> int:
    return bisect.bisect_right(keys, target) - 1


def upper_bound_oracle(keys: list[int], target: int) -> int:
    i = bisect.bisect_left(keys, target)
    if i == 0 and keys[0] == target:
        # Kafka's binarySearch never compares its starting slot, so an exact match on the
        # first entry is reported as the slot after it (checked against a literal Java port).
        i = 1
    return -1 if i == len(keys) else i


lookup_settings = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@lookup_settings
@given(n=st.sampled_from(SIZES), seed=st.integers(0, 2**32), base=st.integers(0, 2**40))
def test_offset_index_search_matches_bisect(n, seed, base):
    buf, offsets, positions = build_offset_index(seed, n, base)
    rels = [o - base for o in offsets]
    rnd = random.Random(seed)
    for target in interesting_targets(offsets, 1024, rnd):
        expected = lower_bound_oracle(offsets, target)
        assert ix.largest_lower_bound_slot(buf, n, target - base, ix.OFFSET_INDEX_KEY) == expected
        assert ix.smallest_upper_bound_slot(buf, n, target - base, ix.OFFSET_INDEX_KEY) == (
            upper_bound_oracle(rels, target - base)
        )
        found = ix.offset_index_lookup(buf, n, base, target)
        assert found == ((base, 0) if expected < 0 else (offsets[expected], positions[expected]))
        assert ix.truncate_slot_count(buf, n, base, target) == bisect.bisect_left(offsets, target)
    for target in interesting_targets(positions, 1024, rnd):
        slot = ix.smallest_upper_bound_slot(buf, n, target, ix.OFFSET_INDEX_VALUE)
        assert slot == upper_bound_oracle(positions, target)
        upper = ix.fetch_upper_bound_offset(buf, n, base, target, 0)
        assert upper == (None if slot < 0 else (offsets[slot], positions[slot]))


@lookup_settings
@given(n=st.sampled_from(SIZES), seed=st.integers(0, 2**32), base=st.integers(0, 2**40))
def test_time_index_search_matches_bisect(n, seed, base):
    buf, stamps, offsets = build_time_index(seed, n, base)
    rnd = random.Random(seed)
    for target in interesting_targets(stamps, 682, rnd):
        expected = lower_bound_oracle(stamps, target)
        assert ix.largest_lower_bound_slot(buf, n, target, ix.TIME_INDEX_KEY) == expected
        assert ix.smallest_upper_bound_slot(buf, n, target, ix.TIME_INDEX_KEY) == upper_bound_oracle(stamps, target)
        found = ix.time_index_lookup(buf, n, base, target)
        assert found == ((-1, base) if expected < 0 else (stamps[expected], offsets[expected]))
    for target in interesting_targets(offsets, 682, rnd):
        assert ix.truncate_slot_count(buf, n, base, target, ix.TIME_INDEX_VALUE) == bisect.bisect_left(offsets, target)
        assert ix.largest_lower_bound_slot(buf, n, target - base, "time_offset") == lower_bound_oracle(offsets, target)


def test_warm_section_boundary_both_branches():
    # 1026 entries: firstHotEntry = 1. A target equal to key(firstHotEntry) is not strictly
    # above it, so the cold branch [0, firstHotEntry] finds it; one above goes warm.
    base = 0
    buf = b"".join(struct.pack(">ii", 10 * i, i) for i in range(1026))
    assert ix.largest_lower_bound_slot(buf, 1026, 10, "offset") == 1
    assert ix.largest_lower_bound_slot(buf, 1026, 11, "offset") == 1
    assert ix.largest_lower_bound_slot(buf, 1026, 9, "offset") == 0
    assert ix.smallest_upper_bound_slot(buf, 1026, 9, "offset") == 1
    assert ix.smallest_upper_bound_slot(buf, 1026, -5, "offset") == 0
    # Kafka quirk: an exact match on slot 0 is reported as slot 1 (-1 with a single entry).
    assert ix.smallest_upper_bound_slot(buf, 1026, 0, "offset") == 1
    assert ix.smallest_upper_bound_slot(buf, 1026, 20, "offset") == 2
    assert ix.smallest_upper_bound_slot(buf[:8], 1, 0, "offset") == -1
    assert ix.smallest_upper_bound_slot(buf, 1026, 10251, "offset") == -1
    assert ix.offset_index_lookup(buf, 1026, base, 10250) == (10250, 1025)


# -- sanity checks -----------------------------------------------------------------------


def test_offset_sanity_rejects_last_offset_below_base():
    buf = OFFSET_VECTOR + struct.pack(">ii", -1, 9000)
    with pytest.raises(CorruptIndexError) as e:
        ix.sanity_check_offset_index(len(buf), buf, 100, "/d/t-0/00000000000000000100.index")
    assert str(e.value) == (
        "Corrupt index found, index file /d/t-0/00000000000000000100.index has non-zero size "
        "but the last offset is 99 which is less than the base offset 100"
    )


def test_offset_sanity_rejects_length_not_multiple_of_entry_size():
    buf = OFFSET_VECTOR + b"\x00\x00\x00"
    with pytest.raises(CorruptIndexError) as e:
        ix.sanity_check_offset_index(len(buf), buf, 100, "x.index")
    assert str(e.value) == (
        "Index file x.index is corrupt, found 19 bytes which is neither positive nor a multiple of 8"
    )
    with pytest.raises(CorruptIndexError, match="found 7 bytes"):
        ix.sanity_check_offset_index(7, bytes(7), 0, "y.index")


def test_offset_sanity_checks_last_offset_before_length():
    # Kafka checks the last offset first; a file failing both reports the offset.
    buf = struct.pack(">ii", -5, 0) + b"\x01"
    with pytest.raises(CorruptIndexError, match="last offset is 95"):
        ix.sanity_check_offset_index(len(buf), buf, 100, "z.index")


def test_offset_sanity_accepts_zero_filled_preallocated_tail():
    padded = OFFSET_VECTOR + bytes(ix.DEFAULT_MAX_INDEX_SIZE - len(OFFSET_VECTOR))
    ix.sanity_check_offset_index(len(padded), padded, 100, "active.index")
    ix.sanity_check_offset_index(None, padded, 100, "active.index")
    ix.sanity_check_offset_index(0, b"", 100, "empty.index")


def test_time_sanity_rejects_last_timestamp_below_first():
    buf = TIME_VECTOR + struct.pack(">qi", TS - 1, 200)
    with pytest.raises(CorruptIndexError) as e:
        ix.sanity_check_time_index(len(buf), buf, 100, "t.timeindex")
    assert str(e.value) == (
        "Corrupt time index found, time index file (t.timeindex) has non-zero size but the "
        f"last timestamp is {TS - 1} which is less than the first timestamp {TS}"
    )


def test_time_sanity_rejects_last_offset_below_base():
    buf = TIME_VECTOR + struct.pack(">qi", TS + 900, -3)
    with pytest.raises(CorruptIndexError) as e:
        ix.sanity_check_time_index(len(buf), buf, 100, "t.timeindex")
    assert str(e.value) == (
        "Corrupt time index found, time index file (t.timeindex) has non-zero size but the "
        "last offset is 97 which is less than the first offset 100"
    )


def test_time_sanity_rejects_length_not_multiple_of_entry_size():
    buf = TIME_VECTOR + b"\x00" * 5
    with pytest.raises(CorruptIndexError) as e:
        ix.sanity_check_time_index(len(buf), buf, 100, "t.timeindex")
    assert str(e.value) == (
        "Time index file t.timeindex is corrupt, found 29 bytes which is neither positive "
        "nor a multiple of 12"
    )


def test_time_sanity_on_zero_filled_tail_follows_kafka():
    # An all-zero preallocated time index passes; a zero tail after real entries fails
    # (last timestamp 0 < first), as Kafka reports after an unclean shutdown.
    zeros = bytes(ix.preallocated_length(ix.DEFAULT_MAX_INDEX_SIZE, 12))
    ix.sanity_check_time_index(len(zeros), zeros, 100, "active.timeindex")
    padded = TIME_VECTOR + zeros[len(TIME_VECTOR):]
    with pytest.raises(CorruptIndexError, match="last timestamp is 0 which is less than the first timestamp"):
        ix.sanity_check_time_index(len(padded), padded, 100, "active.timeindex")


def test_txn_sanity_rejects_last_offset_below_start_offset():
    buf = TXN_VECTOR + ix.encode_aborted_txn(7, 90, 99, 100)
    with pytest.raises(CorruptIndexError) as e:
        ix.sanity_check_txn_index(buf, 100, "/d/00000000000000000100.txnindex")
    assert str(e.value) == (
        "Last offset of aborted transaction AbortedTxn(version=0, producerId=7, firstOffset=90, "
        "lastOffset=99, lastStableOffset=100) in index /d/00000000000000000100.txnindex is "
        "less than start offset 100"
    )


def test_txn_version_reads_byte_zero_only():
    bumped = b"\x01" + TXN_VECTOR[1:]
    with pytest.raises(CorruptIndexError) as e:
        list(ix.iter_txn_entries(bumped, "i.txnindex"))
    assert str(e.value) == (
        "Unexpected aborted transaction version 1 in transaction index i.txnindex, current version is 0"
    )
    # The low byte is never read; 0xff in byte 0 is -1 as a signed byte and passes.
    assert next(ix.iter_txn_entries(b"\x00\x05" + TXN_VECTOR[2:])).version == 0
    assert next(ix.iter_txn_entries(b"\xff\x00" + TXN_VECTOR[2:])).version == -1
    # A trailing partial entry is ignored, like Kafka's iterator.
    assert len(list(ix.iter_txn_entries(TXN_VECTOR + TXN_VECTOR[:20]))) == 1


# -- real index files --------------------------------------------------------------------


@needs_corpus
def test_every_corpus_offset_index_passes_sanity_and_is_increasing():
    files = corpus_files(lambda f: f.endswith(".index"))
    assert files, "corpus has no .index files"
    for path in files:
        buf = path.read_bytes()
        base = base_offset_of(path)
        ix.sanity_check_offset_index(len(buf), buf, base, str(path))
        entries = list(ix.iter_offset_entries(buf, base))
        assert len(entries) == len(buf) // 8
        offsets = [e.offset for e in entries]
        positions = [e.position for e in entries]
        assert offsets == sorted(set(offsets)) and positions == sorted(set(positions)), path
        # Lookups on the real file agree with the oracle.
        rnd = random.Random(str(path))
        if entries:
            for target in interesting_targets(offsets, 1024, rnd):
                i = lower_bound_oracle(offsets, target)
                assert ix.offset_index_lookup(buf, len(entries), base, target) == (
                    (base, 0) if i < 0 else entries[i]
                )


@needs_corpus
def test_every_corpus_time_index_parses_and_passes_sanity():
    files = corpus_files(lambda f: f.endswith(".timeindex"))
    assert files, "corpus has no .timeindex files"
    for path in files:
        buf = path.read_bytes()
        base = base_offset_of(path)
        ix.sanity_check_time_index(len(buf), buf, base, str(path))
        entries = list(ix.iter_time_entries(buf, base))
        stamps = [e.timestamp for e in entries]
        assert stamps == sorted(set(stamps)), path
        assert all(e.offset >= base for e in entries)
        for target in stamps[:3] + stamps[-3:]:
            assert ix.time_index_lookup(buf, len(entries), base, target).timestamp == target


# -- hostile bytes -----------------------------------------------------------------------


def _hostile_sources() -> list[bytes]:
    sources = [OFFSET_VECTOR, TIME_VECTOR, TXN_VECTOR * 3]
    files = sorted(corpus_files(lambda f: f.endswith((".index", ".timeindex"))), key=lambda p: p.stat().st_size)
    sources += [p.read_bytes() for p in files[-3:]]
    return sources


HOSTILE_SOURCES = _hostile_sources()


@settings(max_examples=150, deadline=None)
@given(
    source=st.sampled_from(HOSTILE_SOURCES),
    cut=st.integers(0, 10**6),
    flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=8),
    base=st.integers(-(2**40), 2**40),
    target=st.integers(-(2**63), 2**63 - 1),
    entries_delta=st.integers(-2, 2),
)
def test_hostile_index_bytes_raise_only_corrupt_index_error(source, cut, flips, base, target, entries_delta):
    buf = bytearray(source[: cut % (len(source) + 1)])
    for pos, value in flips:
        if buf:
            buf[pos % len(buf)] = value
    data = bytes(buf)
    for entry_size, key in ((8, ix.OFFSET_INDEX_KEY), (12, ix.TIME_INDEX_KEY)):
        entries = max(0, len(data) // entry_size + entries_delta)
        for call in (
            lambda: ix.sanity_check_offset_index(len(data), data, base, "h.index"),
            lambda: ix.sanity_check_time_index(len(data), data, base, "h.timeindex"),
            lambda: ix.sanity_check_txn_index(data, base, "h.txnindex"),
            lambda: list(ix.iter_offset_entries(data, base)),
            lambda: list(ix.iter_time_entries(data, base)),
            lambda: list(ix.iter_txn_entries(data, "h.txnindex")),
            lambda: ix.largest_lower_bound_slot(data, entries, target, key),
            lambda: ix.smallest_upper_bound_slot(data, entries, target, key),
            lambda: ix.offset_index_lookup(data, entries, base, target),
            lambda: ix.time_index_lookup(data, entries, base, target),
            lambda: ix.truncate_slot_count(data, entries, base, target),
            lambda: ix.fetch_upper_bound_offset(data, entries, base, target % 2**31, 7),
        ):
            try:
                call()
            except CorruptIndexError:
                pass
