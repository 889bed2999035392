"""The index side of a segment check: each index file on its own, and its entries against the
batches of the ``.log`` (see :mod:`plog.engine.storage.segment_check` for the walk, and
:mod:`plog.engine.inspect.verify` for the checks by name).

* :func:`open_index`: an offset or time index as a whole: Kafka's ``sanityCheck()`` and the
  zero-filled preallocated tail (``index-sanity``, ``index-preallocated``);
* :func:`check_txn_index`: every ``.txnindex`` entry, read by the formats layer's reader
  (``txnindex-entry``, ``txnindex-partial``);
* :class:`IndexMerge`: the offset and time index entries merged into the ``.log`` walk as it
  passes their positions and offsets (``index-entry``, ``timeindex-order``,
  ``timeindex-entry``, ``timeindex-timestamp``).

Index files are read with ``pread`` (:class:`~plog.engine.storage.index_file.IndexFile`) in
chunks of ``index_chunk_bytes`` (1 MiB), never mapped, whatever their size.
"""

from __future__ import annotations

import os
from array import array

from plog.formats.errors import CorruptIndexError
from plog.formats.indexes import (
    OFFSET_INDEX_ENTRY_SIZE,
    TIME_INDEX_ENTRY_SIZE,
    TXN_INDEX_ENTRY_SIZE,
    iter_txn_entries,
    offset_entry_columns,
    time_entry_columns,
)

from plog.engine.storage.findings import ERROR, WARNING, Reporter, VerifyStats, io_finding
from plog.engine.storage.index_file import IndexFile

#: Bytes of index entries read at a time (one offset and one time index chunk in memory).
INDEX_CHUNK_BYTES = 1 << 20
INF = 1 << 80  # above every offset, position and timestamp a file can hold
NO_PENDING = -INF
# Appended to each in-memory chunk of index entries: a position no batch has, and a
# relative offset / timestamp below every real one, so the walk's hot loop stops there and
# the general code loads the next chunk.
_SENTINEL_POS = -1
_SENTINEL_REL = -(1 << 31)
_SENTINEL_TS = -(1 << 63)


def index_chunk(index: IndexFile, slot: int, chunk_bytes: int = INDEX_CHUNK_BYTES) -> tuple[int, array, array]:
    """Up to ``chunk_bytes`` of the index's entries from ``slot`` on (its ``entries`` are
    those before a zero-filled tail): ``(count, first, second)`` where the two arrays hold
    positions and relative offsets (offset index) or relative offsets and timestamps (time
    index), each followed by one sentinel."""
    data = next(index.chunks(slot, chunk_bytes=chunk_bytes), (slot, b""))[1]
    k = len(data) // index.entry_size
    if index.entry_size == OFFSET_INDEX_ENTRY_SIZE:
        second, first = offset_entry_columns(data)  # relative offsets, positions
        first.append(_SENTINEL_POS)
        second.append(0)
    else:
        second, first = time_entry_columns(data)  # timestamps, relative offsets
        first.append(_SENTINEL_REL)
        second.append(_SENTINEL_TS)
    return k, first, second


def open_index(path: str, kind: str, seg_base: int, is_last: bool, rep: Reporter,
               stats: VerifyStats) -> IndexFile | None:
    """Open an offset (``kind="offset"``) or time index and run the whole-file checks:
    Kafka's ``sanityCheck()`` (on the whole file, zero tail included) and the zero-filled
    preallocated tail. The index returned counts the entries before that tail."""
    size = OFFSET_INDEX_ENTRY_SIZE if kind == "offset" else TIME_INDEX_ENTRY_SIZE
    try:
        index = IndexFile(path, size, seg_base, trim_zero_tail=False, missing_ok=False)
    except OSError as e:
        io_finding(rep, path, e, "open")
        return None
    try:
        _whole_index_checks(index, size, is_last, rep, stats)
        return index
    except OSError as e:
        index.close()
        io_finding(rep, path, e)
        return None
    except BaseException:
        index.close()
        raise


def _whole_index_checks(index: IndexFile, size: int, is_last: bool, rep: Reporter, stats: VerifyStats) -> None:
    path = index.path
    length, entries = index.file_length, index.slots
    stats.files += 1
    stats.bytes += length
    problems = index.sanity_problems(path)
    for p in problems:
        if p.rule == "length":
            rep(ERROR, "index-sanity", path, entries * size, None, p.message)
    first, last = index.first_and_last()
    effective = index.trailing_zero_start() if last is not None else 0
    tail = entries - effective if last is not None else 0
    kafka_sanity_fails = None
    for p in problems:
        if p.rule == "timestamps":
            kafka_sanity_fails = p.message
            if tail:
                continue
        if p.rule != "length":
            rep(ERROR, "index-sanity", path, (entries - 1) * size, p.offset, p.message)
    if tail:
        what = ("the active segment's index (preallocated to segment.index.bytes and not trimmed: the broker "
                "did not shut down cleanly, or is running)" if is_last else
                "an inactive segment's index (Kafka trims indexes at roll: this one was left untrimmed)")
        extra = ""
        if kafka_sanity_fails:
            extra = ("; kafka-dump-log --index-sanity-check fails on it (last timestamp 0), while a broker "
                     "(>= 2.3) loads it and rebuilds the index when it recovers the segment")
        rep(WARNING, "index-preallocated", path, effective * size, None,
            f"{tail} of {entries} entries are zero from slot {effective} on: the zero-filled tail of "
            f"{what}{extra}")
    index.entries = effective


def check_txn_index(path: str, seg_base: int, seg_next: int, rep: Reporter, stats: VerifyStats,
                    chunk_bytes: int = INDEX_CHUNK_BYTES) -> None:
    """Every entry of a ``.txnindex`` against its segment's offsets ``[seg_base, seg_next)``."""
    try:
        index = IndexFile(path, TXN_INDEX_ENTRY_SIZE, seg_base, trim_zero_tail=False, missing_ok=False)
    except OSError as e:
        io_finding(rep, path, e, "open")
        return
    try:
        length = index.file_length
        stats.files += 1
        stats.bytes += length
        if length % TXN_INDEX_ENTRY_SIZE:
            rep(WARNING, "txnindex-partial", path, length - length % TXN_INDEX_ENTRY_SIZE, None,
                f"{length % TXN_INDEX_ENTRY_SIZE} trailing bytes are a partial entry (Kafka ignores them)")
        prev_last = None
        for slot, data in index.chunks(chunk_bytes=chunk_bytes):
            view = memoryview(data)
            for i in range(len(data) // TXN_INDEX_ENTRY_SIZE):
                raw = view[i * TXN_INDEX_ENTRY_SIZE:(i + 1) * TXN_INDEX_ENTRY_SIZE]
                prev_last = _check_txn_entry(path, slot + i, raw, seg_base, seg_next, prev_last, rep)
    except OSError as e:
        io_finding(rep, path, e)
    finally:
        index.close()


def _check_txn_entry(path: str, slot: int, raw, seg_base: int, seg_next: int, prev_last: int | None,
                     rep: Reporter) -> int | None:
    """Check one entry; returns the last offset the next entry must be above."""
    where = slot * TXN_INDEX_ENTRY_SIZE
    try:
        # The formats layer's reader, one entry at a time: a version Kafka rejects (byte 0,
        # signed, above 0) is reported and the walk goes on.
        txn = next(iter_txn_entries(raw, os.path.abspath(path)))
    except CorruptIndexError as e:
        # Kafka's index iterator throws here: its load fails rather than rebuilding the
        # index, so no word on what a start-up does about it.
        repair, rep.repair = rep.repair, None
        rep(ERROR, "txnindex-entry", path, where, None, e.reason)
        rep.repair = repair
        return prev_last
    pid, first, last, lso = txn.producer_id, txn.first_offset, txn.last_offset, txn.last_stable_offset
    entry = f"entry {slot} (producerId {pid}, firstOffset {first}, lastOffset {last}, lastStableOffset {lso})"
    if last < seg_base:
        rep(ERROR, "index-sanity", path, where, last,
            f"{entry}: last offset {last} is less than the segment's start offset {seg_base} "
            f"(Kafka's sanity check fails and the broker recovers the segment)")
    elif last >= seg_next:
        rep(ERROR, "txnindex-entry", path, where, last,
            f"{entry}: the abort marker offset {last} is past the segment's last offset {seg_next - 1}")
    elif first > last:
        rep(ERROR, "txnindex-entry", path, where, last, f"{entry}: the first offset is above the last offset")
    elif prev_last is not None and last <= prev_last:
        rep(ERROR, "txnindex-entry", path, where, last,
            f"{entry}: last offsets must increase (the previous entry's is {prev_last})")
    return last


class IndexMerge:
    """The offset and time index entries of a segment, merged into its ``.log`` walk.

    A mixin of :class:`~plog.engine.storage.segment_check.SegmentWalk`, which owns the
    state of the walk it reads (``seg_base``, ``rep``, ``fsize``, the last valid batch
    ``prev_*``, ``gap_bad``, ``seen_legacy``, ``_in_bad``, ``_legacy_max_timestamp``).
    State kept here: the next unchecked offset index entry (``ipos``/``ioff``, slot
    ``islot``; entry ``ii`` of the in-memory chunk ``apos``/``arel`` of ``ilen``), the
    *pending* one (``pend_*``: the last entry found at a batch boundary; its offset must be
    reached by a batch before the next entry's position), and the next time index entry
    (``toff``/``tts``, slot ``tslot``; entry ``ti`` of ``trel``/``ats`` of ``tlen``).
    """

    def _init_indexes(self, offset_index: IndexFile | None, time_index: IndexFile | None,
                      chunk_bytes: int) -> None:
        self.index_chunk_bytes = chunk_bytes
        self.oidx = offset_index
        self.islot = 0
        self.ii, self.ilen = 0, INF
        self.apos = self.arel = array("i")
        self.ipos = self.ioff = INF
        if offset_index is not None:
            self._index_refill()
        self.last_ipos = -1
        self.last_ioff = -INF
        self.pend_off = NO_PENDING
        self.pend_pos = 0
        self.pend_slot = -1
        self.bad_pend = False
        self.past_end: list | None = None  # entries past the end of the log, reported as one finding
        self.tidx = time_index
        self.tslot = 0
        self.ti, self.tlen = 0, INF
        self.trel = self.ats = array("q")
        self.toff = self.tts = INF
        if time_index is not None:
            self._time_refill()
        self.prev_toff = -INF
        self.prev_tts = -1

    def _refill_indexes(self) -> None:
        """Load the next chunk of either index when the current one is used up."""
        if self.ii >= self.ilen:
            self._index_refill()
        if self.ti >= self.tlen:
            self._time_refill()

    # -- offset index ------------------------------------------------------------------------

    def _index_next(self) -> None:
        self.islot += 1
        self.ii += 1
        if self.ii >= self.ilen:
            self._index_refill()
        else:
            self.ipos, self.ioff = self.apos[self.ii], self.seg_base + self.arel[self.ii]

    def _index_refill(self) -> None:
        """Load the chunk of entries from ``islot`` on; after the last, ``ipos`` is infinite."""
        self.ii = 0
        self.ilen, self.apos, self.arel = index_chunk(self.oidx, self.islot, self.index_chunk_bytes)
        if self.ilen:
            self.ipos, self.ioff = self.apos[0], self.seg_base + self.arel[0]
        else:
            self.ilen, self.ipos, self.ioff = INF, INF, INF

    def _index_at(self, pos: int, base: int, last: int) -> None:
        while self.ipos <= pos:
            if self.ipos < pos:
                self._index_stray(self.islot, self.ipos, self.ioff, pos)
            else:
                self._index_open(self.islot, self.ipos, self.ioff, base, last)
            self._index_next()

    def _index_order(self, slot: int, ipos: int, ioff: int) -> bool:
        if ipos <= self.last_ipos or ioff <= self.last_ioff:
            self.rep(ERROR, "index-entry", self.oidx.path, slot * OFFSET_INDEX_ENTRY_SIZE, ioff,
                     f"entry {slot} (offset {ioff}, position {ipos}) is not above the previous entry "
                     f"(offset {self.last_ioff}, position {self.last_ipos}): offsets and positions must increase")
            self.last_ipos, self.last_ioff = ipos, ioff
            return False
        self.last_ipos, self.last_ioff = ipos, ioff
        return True

    def _index_stray(self, slot: int, ipos: int, ioff: int, next_pos: int | None) -> None:
        """An entry whose position is not the start of a valid batch."""
        if not self._index_order(slot, ipos, ioff) or self._in_bad(ipos):
            return
        where = self.oidx.path, slot * OFFSET_INDEX_ENTRY_SIZE
        if ipos >= self.fsize:
            # One finding for the run of entries a short .log leaves dangling (_finish).
            if self.past_end is None:
                self.past_end = [slot, ioff, ipos, 0, slot, ioff, ipos]
            run = self.past_end
            run[3] += 1
            run[4:] = slot, ioff, ipos
            return
        around = f"batches start at {self.prev_pos}" if self.prev_pos >= 0 else "no batch starts before it"
        if next_pos is not None:
            around += f" and {next_pos}"
        self.rep(ERROR, "index-entry", *where, ioff,
                 f"entry {slot} (offset {ioff}, position {ipos}) does not point at the start of a batch "
                 f"({around})")

    def _report_past_end(self) -> None:
        if self.past_end is None:
            return
        first, first_off, first_pos, count, last, last_off, last_pos = self.past_end
        self.past_end = None
        where = self.oidx.path, first * OFFSET_INDEX_ENTRY_SIZE
        if count == 1:
            self.rep(ERROR, "index-entry", *where, first_off,
                     f"entry {first} (offset {first_off}, position {first_pos}) points past the end of the log "
                     f"({self.fsize} bytes)")
            return
        self.rep(ERROR, "index-entry", *where, first_off,
                 f"{count} entries, {first} (offset {first_off}, position {first_pos}) to {last} (offset {last_off}, "
                 f"position {last_pos}), point past the end of the log ({self.fsize} bytes): the .log is shorter "
                 f"than its index says")

    def _close_pending(self, until: str) -> None:
        if self.pend_off == NO_PENDING:
            return
        if not self.bad_pend and self.pend_off > self.prev_last:
            slot = self.pend_slot
            self.rep(ERROR, "index-entry", self.oidx.path, slot * OFFSET_INDEX_ENTRY_SIZE, self.pend_off,
                     f"entry {slot} (offset {self.pend_off}, position {self.pend_pos}): no batch from position "
                     f"{self.pend_pos} to {until} reaches offset {self.pend_off} (the last offset there is "
                     f"{self.prev_last})")
        self.pend_off, self.bad_pend = NO_PENDING, False

    def _index_open(self, slot: int, ipos: int, ioff: int, base: int, last: int) -> None:
        """An entry at the start of the valid batch ``base..last``."""
        self._close_pending(f"the next entry's position {ipos}")
        if not self._index_order(slot, ipos, ioff):
            return
        if ioff < base:
            self.rep(ERROR, "index-entry", self.oidx.path, slot * OFFSET_INDEX_ENTRY_SIZE, ioff,
                     f"entry {slot} (offset {ioff}, position {ipos}): the batch at position {ipos} holds offsets "
                     f"{base}..{last}, above the entry's offset")
            return
        self.pend_off, self.pend_pos, self.pend_slot, self.bad_pend = ioff, ipos, slot, False

    # -- time index --------------------------------------------------------------------------

    def _time_next(self) -> None:
        self.prev_toff, self.prev_tts = self.toff, self.tts
        self.tslot += 1
        self.ti += 1
        if self.ti >= self.tlen:
            self._time_refill()
        else:
            self.toff, self.tts = self.seg_base + self.trel[self.ti], self.ats[self.ti]

    def _time_refill(self) -> None:
        self.ti = 0
        self.tlen, self.trel, self.ats = index_chunk(self.tidx, self.tslot, self.index_chunk_bytes)
        if self.tlen:
            self.toff, self.tts = self.seg_base + self.trel[0], self.ats[0]
        else:
            self.tlen, self.toff, self.tts = INF, INF, INF

    def _time_ordered(self) -> bool:
        """Whether the next time index entry is above the previous one (else reported)."""
        toff, tts = self.toff, self.tts
        if toff >= self.prev_toff and tts > self.prev_tts:
            return True
        self.rep(ERROR, "timeindex-order", self.tidx.path, self.tslot * TIME_INDEX_ENTRY_SIZE, toff,
                 f"entry {self.tslot} (timestamp {tts}, offset {toff}) is not above the previous entry (timestamp "
                 f"{self.prev_tts}, offset {self.prev_toff if self.prev_toff > -INF else 'none'}): timestamps "
                 f"must increase and offsets must not decrease")
        return False

    def _time_at(self, pos: int, base: int, last: int, mts: int, legacy_compressed: bool) -> None:
        """The time index entries whose offsets the valid batch ``base..last`` (at ``pos``,
        max timestamp ``mts``) reaches."""
        rep, tpath = self.rep, self.tidx.path
        while self.toff <= last:
            slot, toff, tts = self.tslot, self.toff, self.tts
            where = slot * TIME_INDEX_ENTRY_SIZE
            ordered = self._time_ordered()
            batch_pos = batch_mts = None
            if toff >= base:
                batch_pos, batch_mts = pos, mts
                if legacy_compressed and mts != tts:
                    batch_mts = self._legacy_max_timestamp(pos, mts)
            elif self.prev_pos >= 0 and self.prev_base <= toff <= self.prev_last:
                batch_pos, batch_mts = self.prev_pos, self.prev_mts
                if self.seen_legacy and batch_mts != tts:
                    batch_mts = self._legacy_max_timestamp(batch_pos, batch_mts)
            elif ordered and not (self.gap_bad and toff > self.prev_last):
                rep(ERROR, "timeindex-entry", tpath, where, toff,
                    f"entry {slot} (timestamp {tts}, offset {toff}): offset {toff} is in no batch of the "
                    f"segment (the batch at position {pos} starts at offset {base})")
            if batch_pos is not None and batch_mts != tts:
                rep(ERROR, "timeindex-timestamp", tpath, where, toff,
                    f"entry {slot} (timestamp {tts}, offset {toff}): the batch holding offset {toff} (at position "
                    f"{batch_pos} of the log) has max timestamp {batch_mts}")
            self._time_next()

    # -- end of the file ---------------------------------------------------------------------

    def _finish_indexes(self) -> None:
        """The entries left when the ``.log`` ends: past its last batch."""
        self._refill_indexes()
        if self.oidx is not None:
            while self.ipos < INF:
                self._index_stray(self.islot, self.ipos, self.ioff, None)
                self._index_next()
            self._report_past_end()
            self._close_pending("the end of the segment")
        if self.tidx is not None:
            while self.toff < INF:
                if self._time_ordered() and not self.gap_bad:
                    if self.prev_pos >= 0:
                        why = f"past the last offset {self.prev_last} of the segment"
                    else:
                        why = "in no batch: the segment has no valid batch"
                    self.rep(ERROR, "timeindex-entry", self.tidx.path, self.tslot * TIME_INDEX_ENTRY_SIZE, self.toff,
                             f"entry {self.tslot} (timestamp {self.tts}, offset {self.toff}): offset {self.toff} "
                             f"is {why}")
                self._time_next()


__all__ = ["INDEX_CHUNK_BYTES", "IndexMerge", "check_txn_index", "index_chunk", "open_index"]
