"""The native twins of ``Log.append_batches_as_leader`` (a loop over ``append_as_leader``)
and ``Log.append_as_follower``: the same files, byte for byte, without a Python object per
batch beyond its ``LogAppendInfo``.

Leader. ``plog._native.append_producer_batches`` (native/src/append.rs) checks a run of
producer batches in one pass (header, size limits, CRC, record count, base offset 0, keys on
compacted topics) and hands back seven numbers per batch, up to the first batch that is not
*plain* (control, refused, malformed...). The run is then appended here: offsets and the
leader epoch stamped into one joined copy of it (a request's
:class:`~plog.formats.memory_records.MemoryRecords`: into its own buffer, as Kafka's
``LogValidator`` does), log-append-time rewrites, the roll decision and the
``index.interval.bytes`` rule evaluated batch by batch on plain ints exactly as
``Log._maybe_roll`` and ``LogSegment.append`` do for one batch each, then ONE ``pwrite`` per
segment, the index entries appended packed, the leader-epoch cache, producer state and
offsets advanced once. A producer batch whose producer is new, not in sequence with its
entry, plain inside its open transaction, or could be a retry (a duplicate) stops the run
(a transactional batch that opens a transaction is appended, and opens it); so does every
batch the native check leaves out: the pending run is committed and the reference
``append_as_leader`` takes that one batch (raising its typed error, or answering the
duplicate), then the fast path goes on. So a failure mid-list leaves the batches before it
appended, as the loop does.

One difference, as in Kafka: the clock is read once per run (the loop reads it per batch),
so every log-append-time batch of a produce request gets the same timestamp.

Follower. ``plog._native.follower_walk`` walks the fetched bytes (whole v2 batches, CRCs,
offsets increasing from the LEO) and sums them up for the append: offsets, max timestamp,
record count, the leader-epoch starts, and per run of one producer's plain data batches only
the last ones its entry keeps; ``follower_index`` gives the index entries the segment's rule
adds. So a fetch costs a few Python calls whatever its batch count. The common producer
update (known producers, their epochs, no transaction) is applied here, anything else batch
by batch as the reference does, or the whole fetch by ``Log.append_as_follower``'s
reference body when the walk declines it.

``enabled``: chosen once at import (``plog.formats.native.active()``); tests switch it.
"""

from __future__ import annotations

import struct

from plog.formats import native
from plog.formats.indexes import TimestampOffset
from plog.formats.memory_records import MemoryRecords
from plog.formats.record_batch import set_max_timestamp
from plog.formats.records import LOG_APPEND_TIME, increment_sequence

from plog.engine.storage.producer_state_entry import NUM_BATCHES_TO_RETAIN

#: Whether ``Log`` takes these paths (tests switch it to compare the two).
enabled = native.active() and hasattr(native.module, "append_producer_batches")

_INT_MAX = (1 << 31) - 1
_PACK_Q = struct.Struct(">q").pack_into
_PACK_I = struct.Struct(">i").pack_into
_OFFSET_ENTRY = struct.Struct(">ii").pack
_TIME_ENTRY = struct.Struct(">qi").pack


def append_batches_as_leader(log, batches, leader_epoch: int, info_type) -> list:
    """``log.append_batches_as_leader(batches, leader_epoch=..., origin="client")``; see the
    module docstring. ``info_type``: ``LogAppendInfo``."""
    log._check_open()
    batches = batches if isinstance(batches, list) else list(batches)
    cfg = log.config
    check = native.module.append_producer_batches
    infos: list = []
    i, n = 0, len(batches)
    while i < n:
        plain = check(batches, i, cfg.max_message_bytes, cfg.segment_bytes, cfg.compact)
        if plain:
            i += _Run(log, leader_epoch, info_type).append(batches, i, plain, infos)
        if i < n:
            # Not plain, or stopped for the producer state: the reference takes this one.
            infos.append(log.append_as_leader(batches[i], leader_epoch=leader_epoch, origin="client", flush=False))
            i += 1
    return infos


class _Run:
    """One run of plain producer batches: the segment state as plain ints, what is pending
    for the active segment, and the commit that writes it."""

    def __init__(self, log, leader_epoch: int, info_type):
        self.log = log
        self.leader_epoch = leader_epoch
        self.info_type = info_type
        self.now = log._now()

    def _load_segment(self) -> None:
        seg = self.log.active_segment
        self.seg = seg
        self.base = seg.base_offset
        self.size = seg.size
        self.written = seg.size  # where the pending bytes start in the .log
        self.bytes_since = seg._bytes_since_last_index_entry
        mts = seg.max_timestamp_so_far
        self.mts_ts, self.mts_off = mts.timestamp, mts.offset
        oi, ti = seg.offset_index, seg.time_index
        self.off_entries, self.off_max, self.off_last = oi.entries, oi.max_entries, oi.last_offset
        self.time_entries, self.time_max = ti.entries, ti.max_entries
        last = ti.last_entry
        self.t_last_ts, self.t_last_off = last.timestamp, last.offset
        self.rolling_ts = seg.rolling_based_timestamp
        self.created = seg.created_ms
        self.jitter = seg.rolling_jitter_ms
        self.interval = seg.index_interval_bytes
        self.off_buf = bytearray()
        self.time_buf = bytearray()
        self.first_rolling = None  # the timestamp of a batch appended to an empty segment
        self.pending_first = None  # first offset of the pending batches
        self.pending_count = 0
        self.updates: list = []
        # The time index must be consistent with the max timestamp (it always is after a
        # load, recovery or truncation); if not, the reference's checks decide.
        self.sane = (self.time_entries == 0 or (self.mts_ts >= self.t_last_ts and self.mts_off >= self.t_last_off))

    def append(self, batches: list, start: int, plain: list, infos: list) -> int:
        """Append ``batches[start:]`` as far as ``plain`` (their native check) goes and the
        producer state allows; returns how many were appended."""
        log = self.log
        cfg = log.config
        epoch = self.leader_epoch
        if not 0 <= epoch <= _INT_MAX:
            return 0
        if isinstance(batches, MemoryRecords):
            # The request's own buffer: stamped and written in place (formats/memory_records.py).
            data, pos = batches.buffer, batches.start_of(start)
        else:
            data, pos = bytearray().join(batches[start:start + len(plain)]), 0
        view = memoryview(data)
        self.data_view = view
        self.data_pos = pos  # where the pending segment's bytes start in ``data``
        now = self.now
        lat = cfg.log_append_time
        seg_bytes, seg_ms = cfg.segment_bytes, cfg.max_segment_ms
        psm = log.producer_state
        info_type = self.info_type
        log_start = log.log_start_offset
        seen: dict = {}
        self._load_segment()
        if not self.sane:
            return 0
        leo = log.log_end_offset
        done = 0
        # CreateTime runs go through the native loop (leader_run) as far as it takes them;
        # the batch it stops at (a roll, a producer to check) is this loop's, then it resumes.
        run = None if lat else getattr(native.module, "leader_run", None)
        i, n = 0, len(plain)
        while i < n:
            if run is not None:
                taken, leo, pos = self._native_run(run, data, plain, i, pos, leo, epoch, psm, seen, infos, log_start)
                i += taken
                done += taken
                if i >= n:
                    break
            size, delta, max_ts, pid, p_epoch, base_seq, transactional = plain[i]
            i += 1
            entry = None
            if pid >= 0 and psm is not None:
                entry = self._producer_entry(psm, seen, pid, p_epoch, base_seq, delta, transactional)
                if entry is None:
                    break
            first = leo
            last = leo + delta
            ts = now if lat else max_ts
            if self._should_roll(size, ts, last, seg_bytes, seg_ms):
                self._commit(pos)
                log.roll(first)
                self._load_segment()
                self.data_pos = pos
                if not self.sane:
                    break
            _PACK_Q(data, pos, first)
            _PACK_I(data, pos + 12, epoch)
            if lat:
                set_max_timestamp(view[pos:pos + size], LOG_APPEND_TIME, now)
            self._index(size, ts, last)
            if self.pending_first is None:
                self.pending_first = first
            self.pending_count += delta + 1
            if entry is not None:
                last_seq = base_seq + delta
                txn_open = seen[pid][3] if pid in seen else entry.current_txn_first_offset is not None
                # The first transactional batch while none is open opens one at its offset.
                opens = first if transactional and not txn_open else None
                self.updates.append((entry, p_epoch, last_seq, last, delta, ts, opens))
                seen[pid] = (entry, p_epoch, last_seq, txn_open or bool(transactional))
            infos.append(info_type(first, last, ts, last, now if lat else -1, log_start, delta + 1, size))
            leo = last + 1
            pos += size
            done += 1
        self._commit(pos)
        return done

    def _native_run(self, run, data, plain: list, i: int, pos: int, leo: int, epoch: int, psm, seen: dict,
                    infos: list, log_start: int) -> tuple[int, int, int]:
        """``plain[i:]`` through the native loop (``plog._native.leader_run``) as far as it
        goes: the same stamps, index entries, pending state, producer updates and infos as
        the Python loop's body for each; returns ``(batches taken, leo, pos)`` after them."""
        pid = plain[i][3]
        chain = entry = None
        if pid >= 0:
            if psm is None:
                return 0, leo, pos
            known = seen.get(pid)
            if known is None:
                entry = psm.last_entry(pid)
                if entry is None or not entry.batch_metadata:
                    return 0, leo, pos
                known = (entry, entry.producer_epoch, entry.last_seq, entry.current_txn_first_offset is not None)
            entry, c_epoch, last_seq, txn_open = known
            chain = (pid, c_epoch, last_seq, txn_open, [(m.first_seq, m.last_seq) for m in entry.batch_metadata])
        state = [self.base, self.size, self.bytes_since, self.interval, self.mts_ts, self.mts_off, self.off_entries,
                 self.off_max, self.off_last, self.time_entries, self.time_max, self.t_last_ts, self.t_last_off,
                 self.rolling_ts, self.first_rolling, self.now, self.created, self.jitter,
                 self.log.config.segment_bytes, self.log.config.max_segment_ms]
        taken, off, tim, state, chain_last = run(data, plain, i, pos, leo, epoch, state, chain)
        if not taken:
            return 0, leo, pos
        (self.base, self.size, self.bytes_since, _, self.mts_ts, self.mts_off, self.off_entries, _, self.off_last,
         self.time_entries, _, self.t_last_ts, self.t_last_off, self.rolling_ts, self.first_rolling) = state[:15]
        if off:
            self.off_buf += off
        if tim:
            self.time_buf += tim
        if self.pending_first is None:
            self.pending_first = leo
        info_type = self.info_type
        updates = self.updates
        # The entry keeps its last NUM_BATCHES_TO_RETAIN batches: only those are added.
        keep_from = i + taken - NUM_BATCHES_TO_RETAIN
        for j in range(i, i + taken):
            size, delta, max_ts, pid, p_epoch, base_seq, _ = plain[j]
            last = leo + delta
            infos.append(info_type(leo, last, max_ts, last, -1, log_start, delta + 1, size))
            if pid >= 0 and j >= keep_from:
                updates.append((entry, p_epoch, base_seq + delta, last, delta, max_ts, None))
            self.pending_count += delta + 1
            leo = last + 1
            pos += size
        if chain is not None:
            seen[chain[0]] = (entry, chain[1], chain_last, chain[3])
        return taken, leo, pos

    @staticmethod
    def _producer_entry(psm, seen: dict, pid: int, p_epoch: int, base_seq: int, delta: int, transactional: int):
        """The producer's entry when this batch is the plain case of ``append_as_leader``'s
        producer checks: a known producer, the same epoch, the batch right after its last
        one, no plain batch inside an open transaction, and not a retry of any batch it
        remembers. None otherwise (the reference decides)."""
        known = seen.get(pid)
        if known is None:
            entry = psm.last_entry(pid)
            if entry is None or not entry.batch_metadata:
                return None
            known = (entry, entry.producer_epoch, entry.last_seq, entry.current_txn_first_offset is not None)
        entry, epoch, last_seq, txn_open = known
        if p_epoch != epoch or base_seq != last_seq + 1 or (txn_open and not transactional):
            return None
        new_last = base_seq + delta
        for m in entry.batch_metadata:
            if m.last_seq == new_last and m.first_seq == base_seq:
                return None
        return entry

    def _should_roll(self, size: int, ts: int, last: int, seg_bytes: int, seg_ms: int) -> bool:
        """``LogSegment.should_roll`` on the pending state (``Log._maybe_roll``'s params)."""
        rolling = self.rolling_ts
        waited = ts - rolling if rolling is not None and rolling >= 0 else self.now - self.created
        return (self.size > seg_bytes - size
                or (self.size > 0 and waited > seg_ms - self.jitter)
                or self.off_entries >= self.off_max
                or self.time_entries >= self.time_max - 1
                or not 0 <= last - self.base <= _INT_MAX)

    def _index(self, size: int, ts: int, last: int) -> None:
        """``LogSegment.append``'s rule for one batch of ``size`` bytes at the pending end."""
        if self.size == 0:
            self.rolling_ts = self.first_rolling = ts
        if ts > self.mts_ts:
            self.mts_ts, self.mts_off = ts, last
        if self.bytes_since > self.interval:
            self.off_buf += _OFFSET_ENTRY(last - self.base, self.size)
            self.off_entries += 1
            self.off_last = last
            if self.mts_ts > self.t_last_ts:
                self.time_buf += _TIME_ENTRY(self.mts_ts, self.mts_off - self.base)
                self.time_entries += 1
                self.t_last_ts, self.t_last_off = self.mts_ts, self.mts_off
            self.bytes_since = 0
        self.bytes_since += size
        self.size += size

    def _commit(self, end: int) -> None:
        """Write the pending bytes (``data[data_pos:end]``) to the active segment in one
        write, then its indexes, the leader-epoch cache, producer state and the offsets."""
        if self.pending_first is None:
            return
        log, seg = self.log, self.seg
        seg._write_at(self.written, self.data_view[self.data_pos:end])
        seg.size = self.size
        if self.first_rolling is not None:
            seg._rolling_based_timestamp = self.first_rolling
            seg._rolling_based_loaded = True
        seg._max_ts_so_far = TimestampOffset(self.mts_ts, self.mts_off)
        seg._bytes_since_last_index_entry = self.bytes_since
        if self.off_buf:
            seg.offset_index.append_entries(bytes(self.off_buf))
        if self.time_buf:
            seg.time_index.append_entries(bytes(self.time_buf))
        log.epoch_cache.assign(self.leader_epoch, self.pending_first)
        psm = log.producer_state
        last_offset = self.pending_first + self.pending_count - 1
        if psm is not None:
            for entry, p_epoch, last_seq, last, delta, ts, opens in self.updates:
                entry.add_batch(p_epoch, last_seq, last, delta, ts)
                if opens is not None:
                    # What ``update`` does with the transaction an append started.
                    psm.apply_data_batches(entry.producer_id, p_epoch, (), ts, opens)
            psm.update_map_end_offset(last_offset + 1)
        log._advance(last_offset, self.pending_count, flush=False)
        self.written = self.size
        self.off_buf, self.time_buf = bytearray(), bytearray()
        self.first_rolling = None
        self.pending_first = None
        self.pending_count = 0
        self.updates = []


# -- follower ---------------------------------------------------------------------------------------

_CONTROL_OR_TXN = 0x30


def append_as_follower(log, records, flush: bool, info_type):
    """``log.append_as_follower(records, flush=flush)`` when the native walk takes the
    bytes (whole v2 batches, valid, offsets from the LEO up); None when it declines them
    (the caller then runs the reference body, which raises or appends them)."""
    walk_fetch = getattr(native.module, "follower_walk", None)
    if walk_fetch is None:  # a build from before it: the reference appends
        return None
    log._check_open()
    # A fetch's bytearray is used as it is (nothing else holds it); other buffers are copied
    # as the reference copies them.
    buf = records if isinstance(records, (bytes, bytearray)) else bytes(records)
    expected = log.log_end_offset
    cache = log.epoch_cache
    latest = cache.latest_epoch
    walk = walk_fetch(buf, expected, -1 if latest is None else latest, NUM_BATCHES_TO_RETAIN)
    if walk is None:
        return None
    first, last, max_ts, max_off, count, epochs, runs = walk
    info = info_type(first, last, max_ts, max_off, -1, log.log_start_offset, count, len(buf))
    segment = log._maybe_roll(len(buf), info)
    if not _segment_append(segment, buf, info):
        from plog.formats.batches import BatchIterator  # the reference's rare case: build the headers
        segment.append(info.last_offset, info.max_timestamp, info.offset_of_max_timestamp, buf,
                       list(BatchIterator(buf)))
    for epoch, start in epochs:  # each above the latest: what the per-batch assign keeps
        cache.assign(epoch, start)
    psm = log.producer_state
    if psm is not None:
        if runs is None or not _add_runs(psm, runs):
            _update_producers(psm, segment, buf, native.module.append_replica_batches(buf, expected))
        psm.update_map_end_offset(info.last_offset + 1)
    log._advance(info.last_offset, info.records_count, flush)
    return info


def _segment_append(seg, buf, info) -> bool:
    """``LogSegment.append`` of a multi-batch ``buf`` with the index entries computed by the
    native ``follower_index``; False, having changed nothing, when an index could refuse an
    entry (the reference then appends and raises as it does)."""
    if not seg.can_convert_to_relative_offset(info.last_offset):
        return False
    oi, ti = seg.offset_index, seg.time_index
    last_entry = ti.last_entry
    mts = seg.max_timestamp_so_far
    if ti.entries and (mts.timestamp < last_entry.timestamp or mts.offset < last_entry.offset):
        return False
    done = native.module.follower_index(buf, seg.base_offset, seg.size, seg._bytes_since_last_index_entry,
                                        seg.index_interval_bytes, mts.timestamp, mts.offset, last_entry.timestamp,
                                        oi.entries, oi.max_entries, oi.last_offset, ti.entries, ti.max_entries)
    if done is None:
        return False
    off_entries, time_entries, position, since, mts_ts, mts_off = done
    if seg.size == 0:
        seg._rolling_based_timestamp = info.max_timestamp
        seg._rolling_based_loaded = True
    seg._write_at(seg.size, buf)
    seg.size = position
    seg._max_ts_so_far = TimestampOffset(mts_ts, mts_off)
    seg._bytes_since_last_index_entry = since
    if off_entries:
        oi.append_entries(off_entries)
    if time_entries:
        ti.append_entries(time_entries)
    return True


def _add_runs(psm, runs: list) -> bool:
    """The producer update of a fetch whose producer batches are all plain data batches
    (``follower_walk``'s runs): when each run's producer is known, in the run's epoch and
    outside a transaction, its last batches are added to its entry (what
    ``_update_producers`` does batch by batch) and True; else nothing changes and False
    (``_update_producers`` then takes the fetch). Adding to an entry changes none of those
    three facts, so checking every run first is checking each as its turn comes."""
    entries = []
    for pid, p_epoch, _ in runs:
        entry = psm.last_entry(pid)
        if entry is None or entry.producer_epoch != p_epoch or entry.current_txn_first_offset is not None:
            return False
        entries.append(entry)
    for entry, (_, _, added) in zip(entries, runs):
        for p_epoch, last_seq, last, delta, max_ts in added:
            entry.add_batch(p_epoch, last_seq, last, delta, max_ts)
    return True


def _update_producers(psm, segment, buf: bytes, found: list) -> None:
    """``LogSegment._update_producer_state`` of each batch: a known producer's next data
    batch in its epoch, outside a transaction, is added to its entry here (what the
    reference's REPLICATION append does then); anything else goes through the reference.
    Of a run of one producer's batches only the last ``NUM_BATCHES_TO_RETAIN`` are added
    (the entry keeps no more), and the map end offset is set before each batch the
    reference takes (the caller sets it after the last)."""
    position = 0
    pending: list = []
    entry = None
    map_end = None
    for size, base, last, max_ts, _ple, pid, p_epoch, base_seq, attributes, _count in found:
        if pid >= 0:
            if entry is None or entry.producer_id != pid:
                _add_batches(entry, pending)
                entry = psm.last_entry(pid)
            if (entry is not None and entry.producer_epoch == p_epoch and entry.current_txn_first_offset is None
                    and not attributes & _CONTROL_OR_TXN):
                delta = last - base
                last_seq = -1 if base_seq == -1 else increment_sequence(base_seq, delta)
                pending.append((p_epoch, last_seq, last, delta, max_ts))
            else:
                _add_batches(entry, pending)
                entry = None
                if map_end is not None:
                    psm.update_map_end_offset(map_end)
                from plog.formats.batches import BatchIterator
                batch = next(iter(BatchIterator(buf, position, position + size)))
                segment._update_producer_state(psm, batch)
        position += size
        map_end = last + 1
    _add_batches(entry, pending)


def _add_batches(entry, pending: list) -> None:
    """``entry.add_batch`` of the last ``NUM_BATCHES_TO_RETAIN`` of ``pending`` (a run of the
    entry's data batches in one epoch: the earlier ones would only be pushed out), then
    empty ``pending``."""
    if pending:
        for p_epoch, last_seq, last, delta, max_ts in pending[-NUM_BATCHES_TO_RETAIN:]:
            entry.add_batch(p_epoch, last_seq, last, delta, max_ts)
        pending.clear()
