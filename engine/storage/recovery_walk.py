"""The native twin of segment recovery's batch loop (``LogSegment.recover``, kafka-format.md
§8.5) and of the recovery plan's scan (``segment_recovery.kafka_scan``).

``plog._native.RecoveryWalk`` (native/src/recovery.rs) walks a segment's bytes, read here in
chunks of 8 MiB (or one batch, if larger) into one reused buffer (memory stays at one chunk
whatever the file size; the walk runs with the GIL released, see :func:`walk_file`). It
validates each batch (header checks, CRC), keeps the loop's state (valid bytes, max
timestamp, next offset), and gathers what the reference would write: the offset and time
index entries (packed as the files hold them), the leader epochs assigned, and each
producer's run of data batches. It stops *before* anything unusual (a CRC mismatch, a
header fault, an offset out of range, an index that would refuse an entry, a control batch,
a producer epoch going backwards, a plain batch inside a transaction): what it gathered is
written, the reference loop (``LogSegment._recover_batches``, the scan's own loop) handles
that batch, and the walk goes on after it. So the files, the producer state and the report
are the reference's, byte for byte (tests/native/test_recovery_twins.py), and the native
walk never raises or logs where the reference would.

The chunking follows :class:`~plog.engine.storage.file_records.FileBatches` (which the
reference walks): an entry cut by the chunk's end is read again at the start of the next
chunk, a short read is the end of the file, and the bytes after the last whole entry are
the same :class:`~plog.formats.batches.TrailingBytes`.

Which loop runs is decided at import (``enabled``: the native module is active and has the
walk); ``PLOG_NATIVE=0`` selects the reference.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

from plog.formats import native
from plog.formats.batches import BatchIterator, TrailingBytes

from plog.engine.storage.descriptor_budget import ReopenableFile

CHUNK_SIZE = 8 << 20
_INT64_MAX = (1 << 63) - 1
_INT_MAX = (1 << 31) - 1
#: An index the plan's scan only counts: it never fills up.
_UNBOUNDED = 1 << 62

#: Whether recovery and the plan's scan walk natively (tests switch it to compare the two).
enabled = native.active() and hasattr(native.module, "RecoveryWalk")


@dataclass
class RecoveryLoop:
    """The state of ``LogSegment.recover``'s loop, which both walks carry on."""

    base_offset: int
    valid_bytes: int = 0
    last_index_entry: int = 0
    max_ts_value: int = -1
    max_ts_offset: int | None = None  # the base offset until a batch raises the max timestamp
    count: int = 0
    next_offset: int | None = None
    aborted: int = 0

    def __post_init__(self) -> None:
        if self.max_ts_offset is None:
            self.max_ts_offset = self.base_offset


def usable(base_offset: int, interval: int) -> bool:
    """Whether the native walk runs for a segment: it is enabled and the segment's numbers
    fit its int64 arithmetic (a base offset from a 20-digit name may not)."""
    return enabled and 0 <= base_offset <= _INT64_MAX - 2 * _INT_MAX and 0 <= interval <= _INT64_MAX


# -- segment recovery ----------------------------------------------------------------------------------


def recover_segment(segment, loop: RecoveryLoop, producer_state, leader_epoch_cache,
                    prevalidated: "Prevalidated | None" = None) -> TrailingBytes | None:
    """``segment.recover``'s loop, native (see the module docstring): fills ``loop``, the
    segment's offset and time indexes, ``producer_state`` and ``leader_epoch_cache``; raises
    what the reference raises; returns the trailing bytes after the last whole entry.
    ``prevalidated``: the plan's walk of the same file, applied instead of walking it again
    when it holds for this segment and this state (:meth:`Prevalidated.applies`)."""
    if prevalidated is not None and prevalidated.applies(segment, producer_state):
        _apply(prevalidated.gathered, segment, loop, producer_state, leader_epoch_cache)
        return prevalidated.trailing
    walker = native.module.RecoveryWalk(segment.base_offset, segment.index_interval_bytes, True,
                                        producer_state is not None, leader_epoch_cache is not None)
    if producer_state is not None:
        for pid, entry in producer_state.producers.items():
            walker.set_producer(pid, entry.producer_epoch, entry.current_txn_first_offset is not None)

    def by_reference(data: memoryview, at: int, position: int) -> int:
        _flush(walker, segment, loop, producer_state, leader_epoch_cache)
        batch = next(iter(BatchIterator(data, at, len(data), base_position=position)), None)
        if batch is None:  # cannot be: the walk stopped at a whole entry or a fault
            raise RuntimeError(f"the native recovery walk stopped at {position + at} where no entry is")
        segment._recover_batches((batch,), loop, producer_state, leader_epoch_cache)
        if producer_state is not None and batch.magic >= 2 and batch.producer_id >= 0:
            entry = producer_state.last_entry(batch.producer_id)
            if entry is not None:
                walker.set_producer(batch.producer_id, entry.producer_epoch,
                                    entry.current_txn_first_offset is not None)
        _resume(walker, segment, loop, leader_epoch_cache)
        return at + batch.size_in_bytes

    _resume(walker, segment, loop, leader_epoch_cache)
    try:
        return walk_file(segment.log_path, 0, segment.size, walker, by_reference)
    finally:
        _flush(walker, segment, loop, producer_state, leader_epoch_cache)


def _resume(walker, segment, loop: RecoveryLoop, leader_epoch_cache) -> None:
    """Hand the loop's state and the indexes' to the walk (at the start, after the reference)."""
    offsets, times = segment.offset_index, segment.time_index
    last = times.last_entry
    walker.resume(loop.valid_bytes, loop.last_index_entry, loop.max_ts_value, loop.max_ts_offset, loop.count,
                  loop.next_offset, offsets.entries, offsets.max_entries, offsets.last_offset, times.entries,
                  times.max_entries, last.timestamp, last.offset,
                  None if leader_epoch_cache is None else leader_epoch_cache.latest_epoch)


def _flush(walker, segment, loop: RecoveryLoop, producer_state, leader_epoch_cache) -> None:
    """Write what the walk gathered where the reference writes it, and take its state back."""
    _apply(walker.take(), segment, loop, producer_state, leader_epoch_cache)


def _apply(gathered: tuple, segment, loop: RecoveryLoop, producer_state, leader_epoch_cache) -> None:
    """Write what a walk gathered (``RecoveryWalk.take``) where the reference writes it."""
    offsets, times, assigns, runs, map_end, state = gathered
    if offsets:
        segment.offset_index.append_entries(offsets)
    if times:
        segment.time_index.append_entries(times)
    if leader_epoch_cache is not None:
        for epoch, start_offset in assigns:
            # A walk done ahead assigned from no epoch: its epochs only ever go up, so the
            # ones above the cache's latest are exactly those the reference assigns.
            latest = leader_epoch_cache.latest_epoch
            if latest is None or epoch > latest:
                leader_epoch_cache.assign(epoch, start_offset)
    if producer_state is not None:
        for producer_id, epoch, batches, last_timestamp, started in runs:
            producer_state.apply_data_batches(producer_id, epoch, batches, last_timestamp, started)
        if map_end is not None:
            producer_state.update_map_end_offset(map_end)
    (loop.valid_bytes, loop.last_index_entry, loop.max_ts_value, loop.max_ts_offset, loop.count,
     loop.next_offset) = state[:6]


# -- the plan's scan -------------------------------------------------------------------------------------


@dataclass
class Prevalidated:
    """A segment walked ahead by the plan's scan (:func:`scan_prefix`), which the load of
    the same run applies instead of reading and checking the file again (``plog recover``
    plans each partition, then loads it: one pass over the bytes instead of two).

    It was walked from an empty state (no index entry, no producer, no leader epoch), with
    indexes that never fill up, and to the end of the file without handing any batch to
    the reference; :meth:`applies` checks that the load meets it in that state."""

    identity: tuple  # the file's (device, inode, size, mtime) when it was walked
    base_offset: int
    interval: int
    gathered: tuple  # RecoveryWalk.take()
    trailing: TrailingBytes | None

    @property
    def nbytes(self) -> int:
        """The index bytes it holds (what keeping it costs)."""
        return len(self.gathered[0]) + len(self.gathered[1])

    def applies(self, segment, producer_state) -> bool:
        """Whether the load of ``segment`` would gather exactly this: the same unchanged file,
        base offset and interval; its empty indexes can take the entries (the checks the walk
        skipped); no producer of the walk is already in the map (the walk assumed none)."""
        offsets, times, _assigns, runs, _map_end, state = self.gathered
        try:
            identity = _identity(os.stat(segment.log_path))
        except OSError:
            return False
        if (identity != self.identity or identity[2] != segment.size or self.base_offset != segment.base_offset
                or self.interval != segment.index_interval_bytes):
            return False
        oi, ti = segment.offset_index, segment.time_index
        if oi.entries or ti.entries or state[6] > oi.max_entries or state[9] >= ti.max_entries - 1:
            return False
        return producer_state is None or not any(r[0] in producer_state.producers for r in runs)


def _identity(st: os.stat_result) -> tuple:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


#: The most index bytes a scan keeps for the load (20 per indexed batch at most: an offset
#: and a time entry); a segment that could need more is walked again by the load. The plan
#: keeps at most ``KEEP_BUDGET`` bytes of them per partition (the later ones are dropped).
KEEP_LIMIT = 16 << 20
KEEP_BUDGET = 32 << 20


def scan_prefix(path, base_offset: int, size: int, interval: int) -> tuple[tuple, TrailingBytes | None, bool,
                                                                            Prevalidated | None]:
    """The plan's scan (``kafka_scan``) natively, up to its first unusual batch: returns the
    walk's state (as ``RecoveryWalk.take`` gives it), the trailing bytes, whether it stopped
    early (the reference scan then goes on from the state's valid bytes), and, when it
    walked the whole file as recovery would, without handing any batch to the reference,
    what it gathered for the load (:class:`Prevalidated`; None otherwise, or when the
    segment could hold more index entries than ``KEEP_LIMIT`` bytes)."""
    keep = 20 * (size // (interval + 1) + 1) <= KEEP_LIMIT
    try:
        identity = _identity(os.stat(path))
    except OSError:
        keep = False
    walker = native.module.RecoveryWalk(base_offset, interval, keep, keep, keep)
    walker.resume(0, 0, -1, base_offset, 0, None, 0, _UNBOUNDED, base_offset, 0, _UNBOUNDED, -1, base_offset, None)
    stopped = []

    def stop(data: memoryview, at: int, position: int) -> int | None:
        nonlocal keep
        if keep:
            # Perhaps a batch only recovery leaves to the reference (a control batch, a
            # producer's epoch going back): the walk cannot be kept, the scan goes on natively.
            keep = False
            walker.stop_gathering()
            return at
        stopped.append(position + at)
        return None

    trailing = walk_file(path, 0, size, walker, stop)
    gathered = walker.take()
    ahead = None
    if keep and identity[2] == size:
        ahead = Prevalidated(identity, base_offset, interval, gathered, trailing)
    return gathered[5], trailing, bool(stopped), ahead


# -- the chunked walk ------------------------------------------------------------------------------------


def walk_file(path, start: int, end: int, walker,
              by_reference: Callable[[memoryview, int, int], int | None]) -> TrailingBytes | None:
    """Walk ``path`` from ``start`` to ``end`` (at most the file's length) chunk by chunk.
    At each entry the walk leaves to the reference, ``by_reference(chunk, index, chunk's
    file position)`` handles it and returns where to go on in the chunk (None: stop here).
    Returns the trailing bytes, as ``FileBatches.trailing``.

    The chunks are read into one reused buffer (reading into fresh ``bytes`` costs a page
    fault per page: several times the copy from the page cache). The walk sees it through a
    read-only view, and so runs with the GIL released: nothing else can write the buffer,
    which never leaves this function (``by_reference`` must not keep views of it)."""
    f = ReopenableFile(path, os.O_RDONLY)
    try:
        end = min(end, f.stat.st_size)
        pos = start
        buf = bytearray(min(CHUNK_SIZE, max(end - pos, 0)) or 1)
        while pos < end:
            want = min(len(buf), end - pos)
            got = _read_into(f, memoryview(buf)[:want], pos)
            if got <= 0:
                return None  # the file shrank under us: what was read is all there is
            at_eof = pos + got >= end or got < want
            with memoryview(buf)[:got] as view, view.toreadonly() as data:
                at, status, declared = _walk_chunk(walker, data, pos, by_reference)
            if status is None:
                return None
            if status == 0:
                if at_eof:
                    return None
                pos += got
                continue
            if at_eof:
                return TrailingBytes(pos + at, got - at, declared)
            if at == 0:
                if declared is None:  # fewer than 18 bytes in a whole chunk: only at EOF; guard anyway
                    return TrailingBytes(pos, got, None)
                if declared > len(buf):  # an entry larger than the chunk: a buffer that holds it
                    buf = bytearray(min(declared, end - pos))
            pos += at
        return None
    finally:
        f.close()


def _walk_chunk(walker, data: memoryview, pos: int, by_reference) -> tuple[int, int | None, int | None]:
    """Walk one chunk to its end, handing entries to the reference as the walk asks;
    status None when ``by_reference`` stopped the walk."""
    at = 0
    while True:
        at, status, declared = walker.walk(data, at, pos)
        if status != 2:
            return at, status, declared
        at = by_reference(data, at, pos)
        if at is None:
            return 0, None, None


def _read_into(f: ReopenableFile, view: memoryview, position: int) -> int:
    """Fill ``view`` from ``position`` as far as the file goes (a short count at its end)."""
    done = 0
    try:
        while done < len(view):
            n = os.preadv(f.fd, [view[done:]], position + done)
            if n <= 0:
                break
            done += n
    finally:
        view.release()
    return done


__all__ = ["CHUNK_SIZE", "KEEP_BUDGET", "KEEP_LIMIT", "Prevalidated", "RecoveryLoop", "enabled", "recover_segment", "scan_prefix", "usable", "walk_file"]
