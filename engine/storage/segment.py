"""``LogSegment``: one ``.log`` file with its offset, time and transaction indexes.

On disk, for base offset B (20-digit zero-padded name)::

    B.log        the batches, back to back (formats.batches describes the framing)
    B.index      sparse offset index: (offset - B, position) every index.interval.bytes
    B.timeindex  sparse time index: (max timestamp so far, offset - B)
    B.txnindex   aborted transactions whose ABORT marker is in this segment (lazy)

Kafka's rules kept here (kafka-format.md §8):

* **Append** (§8.1): an index entry is added for an append that starts more than
  ``index.interval.bytes`` after the previously indexed one; the entry is (the append's
  last offset, the append's start position); the time index gets (max timestamp so far,
  its offset) only when that timestamp is new. The first append is never indexed.
* **Roll** (§14): when the segment would exceed ``segment.bytes``, when it is older than
  ``segment.ms`` minus its jitter, when an index is full, or when an offset would not fit
  in 31 bits relative to the base.
* **Recover** (§8.5): reset the indexes, validate each batch (size, CRC), rebuild the
  indexes with the append rule, rebuild the transaction index and producer state,
  truncate at the first invalid batch, report what was truncated.
* **Truncate** (§8.6) to an offset: cut the ``.log`` at the first batch holding it.

The log file is written with ``pwrite`` at the tracked end and read with ``pread``; it
is never memory-mapped, so a file truncated by another process cannot SIGBUS us. Its
descriptor is a :class:`~plog.engine.storage.descriptor_budget.ReopenableFile`: the process's
descriptor budget may close it while the segment is idle (a writer of thousands of
partitions holds only as many open as ``ulimit -n`` allows), and the next use reopens the
same file. Nothing is lost by that: what was written is in the page cache, and ``flush``
fsyncs the file through whichever descriptor it has then.
Not thread-safe: a ``Log`` serialises access to its segments.
"""

from __future__ import annotations

import os
import random
import struct
import time
from dataclasses import dataclass
from pathlib import Path

from plog.formats import native
from plog.formats.crc import crc32c

from plog.formats.errors import FormatError
from plog.formats.indexes import TimestampOffset
from plog.formats.legacy import LegacyBatch
from plog.formats.record_batch import CRC_START

from plog.engine.storage.descriptor_budget import ReopenableFile
from plog.engine.errors import OffsetOverflowError
from plog.engine.storage import recovery_walk
from plog.engine.storage.file_records import FileBatches
from plog.engine.storage.file_names import (
    log_file_name,
    offset_index_file_name,
    time_index_file_name,
    txn_index_file_name,
)
from plog.engine.storage.offset_index import OffsetIndex
from plog.engine.storage.time_index import TimeIndex
from plog.engine.storage.transaction_index import TransactionIndex
from plog.engine.storage.producer_state import aborted_txn_for, segment_update_producer_state
from plog.engine.storage.recovery_walk import RecoveryLoop

INT_MAX = (1 << 31) - 1

# Reading a few KiB forward from an index entry is the common case of a lookup; a small
# first read keeps offset lookups well under a millisecond.
LOOKUP_CHUNK = 64 * 1024


@dataclass(frozen=True)
class LogOffsetPosition:
    """Where an offset lives: the batch holding it (its last offset, position, size)."""

    offset: int
    position: int
    size: int


@dataclass(frozen=True)
class TimestampAndOffset:
    timestamp: int
    offset: int
    leader_epoch: int | None = None


@dataclass(frozen=True)
class FetchData:
    """The bytes of a segment read: whole batches from ``position`` (``records``: a
    bytearray read straight from the file, or ``b""``)."""

    fetch_offset: int
    segment_base_offset: int
    position: int
    records: bytes | bytearray


@dataclass
class SegmentRecovery:
    """What ``LogSegment.recover`` found and did."""

    base_offset: int
    valid_bytes: int = 0
    truncated_bytes: int = 0
    batches: int = 0
    index_entries: int = 0
    time_index_entries: int = 0
    aborted_txns: int = 0
    error: str | None = None  # why validation stopped early (None: the log ended cleanly)
    error_position: int | None = None  # where the failing entry starts: the cut
    next_offset: int | None = None


@dataclass(frozen=True)
class RollParams:
    max_segment_ms: int
    max_segment_bytes: int
    max_timestamp_in_messages: int
    max_offset_in_messages: int
    messages_size: int
    now: int


class LogSegment:
    """One segment; see the module docstring. ``size`` is the ``.log`` length in use."""

    def __init__(
        self,
        directory: str | os.PathLike,
        base_offset: int,
        *,
        index_interval_bytes: int = 4096,
        max_index_size: int = 10 * 1024 * 1024,
        rolling_jitter_ms: int = 0,
        file_suffix: str = "",
        preallocate: bool = False,
        init_file_size: int = 0,
        writable: bool = True,
        live_reader: bool = False,
        time_source=None,
    ):
        self.dir = Path(directory)
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.rolling_jitter_ms = rolling_jitter_ms
        self.writable = writable
        self._now = time_source or (lambda: int(time.time() * 1000))
        self.log_path = log_file_name(self.dir, base_offset, file_suffix)
        self.offset_index = OffsetIndex(offset_index_file_name(self.dir, base_offset, file_suffix), base_offset,
                                        max_index_size, writable=writable)
        self.time_index = TimeIndex(time_index_file_name(self.dir, base_offset, file_suffix), base_offset,
                                    max_index_size, writable=writable)
        # A read-only view of a directory a writer may be using: its indexes are copies, never
        # maps, from their first use (a writer trims them at roll and close; see
        # abstract_index's live_reader).
        self.offset_index.live_reader = self.time_index.live_reader = live_reader and not writable
        self.txn_index = TransactionIndex(txn_index_file_name(self.dir, base_offset, file_suffix), base_offset)
        existed = self.log_path.exists()
        flags = os.O_RDWR | os.O_CREAT if writable else os.O_RDONLY
        self._file = ReopenableFile(self.log_path, flags, 0o644)
        if not existed and preallocate and init_file_size > 0:
            os.ftruncate(self._fd, init_file_size)
            self.size = 0
        else:
            self.size = self._file.stat.st_size
        self._bytes_since_last_index_entry = 0
        self._max_ts_so_far: TimestampOffset | None = None  # loaded lazily from the time index
        self._rolling_based_timestamp: int | None = None
        self._rolling_based_loaded = False
        self.created_ms = self._now()

    # -- construction helpers ---------------------------------------------------------

    @classmethod
    def open(cls, directory, base_offset: int, config, *, file_suffix: str = "", writable: bool = True,
             live_reader: bool = False, time_source=None) -> "LogSegment":
        """Open or create the segment at ``base_offset`` with ``config`` (a LogConfig)."""
        jitter = 0
        if config.segment_jitter_ms > 0:
            jitter = random.randrange(1 << 31) % min(config.segment_jitter_ms, config.segment_ms)
        return cls(directory, base_offset, index_interval_bytes=config.index_interval_bytes,
                   max_index_size=config.segment_index_bytes, rolling_jitter_ms=jitter, file_suffix=file_suffix,
                   preallocate=config.preallocate, init_file_size=config.segment_bytes, writable=writable,
                   live_reader=live_reader, time_source=time_source)

    @property
    def _fd(self) -> int:
        """The ``.log`` descriptor, reopened if the budget closed it: fetch it for each call."""
        return self._file.fd

    # -- facts -----------------------------------------------------------------------------

    @property
    def max_timestamp_so_far(self) -> TimestampOffset:
        if self._max_ts_so_far is None:
            last = self.time_index.last_entry if self.time_index.exists or self.writable else TimestampOffset(-1, self.base_offset)
            self._max_ts_so_far = last
        return self._max_ts_so_far

    @property
    def largest_timestamp(self) -> int:
        """The segment's max timestamp if known (>= 0), else the ``.log`` mtime (retention)."""
        ts = self.max_timestamp_so_far.timestamp
        return ts if ts >= 0 else self.last_modified

    @property
    def last_modified(self) -> int:
        return int(os.stat(self.log_path).st_mtime * 1000)

    def set_last_modified(self, ms: int) -> None:
        seconds = ms / 1000
        for p in (self.log_path, self.offset_index.path, self.time_index.path, self.txn_index.path):
            if p.exists():
                os.utime(p, (seconds, seconds))

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= INT_MAX

    def _ensure_offset_in_range(self, offset: int) -> None:
        if not self.can_convert_to_relative_offset(offset):
            raise OffsetOverflowError(
                f"Detected offset overflow at offset {offset} in segment {self.log_path.name} "
                f"(base offset {self.base_offset})",
                self.base_offset,
                offset,
            )

    # -- append -------------------------------------------------------------------------------

    def append(self, largest_offset: int, largest_timestamp: int, shallow_offset_of_max_timestamp: int,
               records: bytes | bytearray | memoryview, batches=None) -> None:
        """Append whole batches (§8.1). ``records`` may hold several batches; given their
        headers (``batches``, in order), the indexes get an entry per batch as Kafka 3.9+
        writes them (a follower's multi-batch append indexes as densely as the leader's)."""
        n = len(records)
        if n == 0:
            return
        physical_position = self.size
        if physical_position == 0:
            self._rolling_based_timestamp = largest_timestamp
            self._rolling_based_loaded = True
        self._ensure_offset_in_range(largest_offset)
        self._write_at(physical_position, records)
        self.size = physical_position + n
        if batches is not None and len(batches) > 1:
            position = physical_position
            for b in batches:
                if b.max_timestamp > self.max_timestamp_so_far.timestamp:
                    self._max_ts_so_far = TimestampOffset(b.max_timestamp, b.last_offset)
                if self._bytes_since_last_index_entry > self.index_interval_bytes:
                    self.offset_index.append(b.last_offset, position)
                    mts = self.max_timestamp_so_far
                    self.time_index.maybe_append(mts.timestamp, mts.offset)
                    self._bytes_since_last_index_entry = 0
                size = b.size_in_bytes
                position += size
                self._bytes_since_last_index_entry += size
            return
        if largest_timestamp > self.max_timestamp_so_far.timestamp:
            self._max_ts_so_far = TimestampOffset(largest_timestamp, shallow_offset_of_max_timestamp)
        if self._bytes_since_last_index_entry > self.index_interval_bytes:
            self.offset_index.append(largest_offset, physical_position)
            mts = self.max_timestamp_so_far
            self.time_index.maybe_append(mts.timestamp, mts.offset)
            self._bytes_since_last_index_entry = 0
        self._bytes_since_last_index_entry += n

    def _write_at(self, position: int, data) -> None:
        view = memoryview(data)
        try:
            while view:
                written = os.pwrite(self._fd, view, position)
                position += written
                view = view[written:]
        except OSError as e:
            if e.filename is not None:
                raise
            # pwrite's error names no file; a full disk must say which segment it hit.
            raise OSError(e.errno, e.strerror, str(self.log_path)) from None

    def append_aborted_txn(self, aborted) -> None:
        self.txn_index.append(aborted)

    def update_txn_index(self, completed_txn, last_stable_offset: int) -> None:
        if completed_txn.is_aborted:
            self.txn_index.append(aborted_txn_for(completed_txn, last_stable_offset))

    # -- reads ----------------------------------------------------------------------------------

    def batches(self, start_position: int = 0, *, chunk_size: int = 8 << 20) -> FileBatches:
        """Iterate the batches from a position (file positions; buffers reused per chunk)."""
        return FileBatches(self.log_path, start_position, self.size, chunk_size=chunk_size)

    def read_bytes(self, position: int, size: int) -> bytes:
        size = max(0, min(size, self.size - position))
        out = bytearray()
        while len(out) < size:
            chunk = os.pread(self._fd, size - len(out), position + len(out))
            if not chunk:
                break
            out += chunk
        return bytes(out)

    def translate_offset(self, offset: int, starting_position: int = 0) -> LogOffsetPosition | None:
        """§7.7: the first batch at or after the index position whose last offset >= offset."""
        start = max(self._index_position(offset), starting_position)
        for batch in FileBatches(self.log_path, start, self.size, chunk_size=LOOKUP_CHUNK):
            if batch.last_offset >= offset:
                return LogOffsetPosition(batch.last_offset, batch.position, batch.size_in_bytes)
        return None

    def read(self, start_offset: int, max_size: int, max_position: int | None = None,
             min_one_message: bool = False) -> FetchData | None:
        """Kafka's ``LogSegment.read``: whole batches starting at the batch holding
        ``start_offset``, at most ``max_size`` bytes (or the first batch if
        ``min_one_message`` and it is larger), never past ``max_position``. None when the
        offset is beyond this segment."""
        if max_size < 0:
            raise ValueError(f"Invalid max size {max_size} for log read from segment {self.log_path}")
        if max_position is None:
            max_position = self.size
        start = self.translate_offset(start_offset)
        if start is None:
            return None
        adjusted = max(max_size, start.size) if min_one_message else max_size
        if adjusted == 0:
            return FetchData(start_offset, self.base_offset, start.position, b"")
        data = self._read_whole_batches(start.position, min(max_position - start.position, adjusted))
        return FetchData(start_offset, self.base_offset, start.position, data)

    def read_at(self, start_offset: int, position: int, max_size: int) -> FetchData | None:
        """:meth:`read` of ``start_offset`` when the caller knows its batch starts at
        ``position`` (``Log.ReadPosition``): whole batches from there, at most ``max_size``
        bytes. None when not even one batch fits (:meth:`read` decides then, with
        ``min_one_message``) or ``position`` lies past the end."""
        if not 0 <= position < self.size:
            return None
        data = self._read_whole_batches(position, min(self.size - position, max_size))
        return FetchData(start_offset, self.base_offset, position, data) if data else None

    def _read_whole_batches(self, position: int, size: int) -> bytearray:
        """Up to ``size`` bytes from ``position``, cut after the last whole batch. Kafka hands
        back a slice that may end inside a batch and consumers drop the partial tail; it is
        trimmed here so callers always get whole batches (in place: a follower's fetch of
        2 MiB is one copy from the page cache, not two)."""
        data = self._read_buffer(position, size)
        end = _whole_batches_end(data)
        if end < len(data):
            del data[end:]
        return data

    def _read_buffer(self, position: int, size: int) -> bytearray:
        """``read_bytes`` into a new bytearray (read straight into it: one copy)."""
        size = max(0, min(size, self.size - position))
        buf = bytearray(size)
        done = 0
        with memoryview(buf) as view:
            while done < size:
                n = os.preadv(self._fd, [view[done:]], position + done)
                if n <= 0:
                    break
                done += n
        if done < size:
            del buf[done:]
        return buf

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int | None = None) -> TimestampAndOffset | None:
        """§7.8: the first record with timestamp >= ``timestamp`` and offset >= start."""
        if starting_offset is None:
            starting_offset = self.base_offset
        if self.writable or self.time_index.exists:
            ts_offset = self.time_index.lookup(timestamp)
            position = self._index_position(max(ts_offset.offset, starting_offset))
        else:
            position = self._index_position(starting_offset)
        for batch in FileBatches(self.log_path, position, self.size, chunk_size=LOOKUP_CHUNK):
            if batch.max_timestamp >= timestamp:
                for record in batch.records():
                    if record.timestamp >= timestamp and record.offset >= starting_offset:
                        epoch = None if isinstance(batch, LegacyBatch) or batch.partition_leader_epoch < 0 \
                            else batch.partition_leader_epoch
                        return TimestampAndOffset(record.timestamp, record.offset, epoch)
        return None

    def _index_position(self, offset: int) -> int:
        """The offset index's lower-bound position for ``offset``; 0 (scan from the start)
        when a read-only view finds no index file (a broker or writer that had not made it)."""
        if not self.writable and not self.offset_index.exists:
            return 0
        return self.offset_index.lookup(offset).position

    def read_next_offset(self) -> int:
        """§8.7: next offset after the last batch, or the base offset when empty."""
        has_index = self.writable or self.offset_index.exists
        start = self.translate_offset(self.offset_index.last_offset) if has_index and self.offset_index.entries else None
        position = start.position if start is not None else 0
        next_offset = self.base_offset
        for batch in FileBatches(self.log_path, position, self.size):
            next_offset = batch.next_offset
        return next_offset

    # -- recovery and truncation ---------------------------------------------------------------

    def recover(self, producer_state=None, leader_epoch_cache=None, *, before_truncate=None,
                prevalidated=None) -> SegmentRecovery:
        """§8.5. Rebuilds all three indexes from the ``.log``, truncates it after the last
        valid batch, and returns what it did. Producer state and the leader-epoch cache,
        when given, are updated from every valid v2 batch as Kafka's recovery does.
        ``before_truncate()`` runs just before bytes are cut (the loader removes the later
        segments first, so that a crash in between cannot keep them).

        The batches are walked by :meth:`_recover_batches` (the reference), or by the native
        walk of :mod:`~plog.engine.storage.recovery_walk`, which hands every unusual batch to
        it: the same files and report either way. ``prevalidated``: that walk done ahead by
        ``plog recover``'s plan, applied when it holds (``recovery_walk.Prevalidated``)."""
        self.offset_index.reset()
        self.time_index.reset()
        self.txn_index.reset()
        report = SegmentRecovery(self.base_offset)
        loop = RecoveryLoop(self.base_offset)
        trailing = None
        try:
            if recovery_walk.usable(self.base_offset, self.index_interval_bytes):
                trailing = recovery_walk.recover_segment(self, loop, producer_state, leader_epoch_cache, prevalidated)
            else:
                batches = FileBatches(self.log_path, 0, self.size)
                self._recover_batches(batches, loop, producer_state, leader_epoch_cache)
                trailing = batches.trailing
        except FormatError as e:  # corrupt, invalid or any other undecodable entry: the same stop
            report.error = e.reason
            # Where the entry that failed starts, where the segment is cut (Kafka's "invalid
            # messages ... at byte offset <validBytes>"), also when the error names a field
            # inside it (a legacy message's value length, say).
            report.error_position = loop.valid_bytes
        if report.error is None and trailing is not None:
            report.error = (f"partial batch at the end of the segment ({trailing.length} bytes"
                            + (f" of {trailing.declared_size})" if trailing.declared_size else ")"))
            report.error_position = trailing.position
        valid_bytes = loop.valid_bytes
        max_ts = TimestampOffset(loop.max_ts_value, loop.max_ts_offset)
        report.batches = loop.count
        report.next_offset = loop.next_offset
        report.aborted_txns = loop.aborted
        truncated = self.size - valid_bytes
        if truncated > 0:
            if before_truncate is not None:
                before_truncate()
            os.ftruncate(self._fd, valid_bytes)
            self.size = valid_bytes
        self.offset_index.trim_to_valid_size()
        self.time_index.maybe_append(max_ts.timestamp, max_ts.offset, skip_full_check=True)
        self.time_index.trim_to_valid_size()
        self._max_ts_so_far = max_ts
        self._bytes_since_last_index_entry = valid_bytes - loop.last_index_entry
        self._rolling_based_loaded = False
        report.valid_bytes = valid_bytes
        report.truncated_bytes = truncated
        report.index_entries = self.offset_index.entries
        report.time_index_entries = self.time_index.entries
        if report.next_offset is None:
            report.next_offset = self.base_offset
        return report

    def _recover_batches(self, batches, loop: RecoveryLoop, producer_state, leader_epoch_cache) -> None:
        """The reference loop of :meth:`recover` over ``batches``, from and back into
        ``loop`` (also when a batch raises: what came before it counts)."""
        valid_bytes, last_index_entry = loop.valid_bytes, loop.last_index_entry
        max_ts_value, max_ts_offset = loop.max_ts_value, loop.max_ts_offset
        count, next_offset, aborted = loop.count, loop.next_offset, loop.aborted
        interval = self.index_interval_bytes
        base, last_allowed = self.base_offset, self.base_offset + INT_MAX
        offset_index, time_index = self.offset_index, self.time_index
        try:
            # The hot loop of recovery: one pass per batch, locals only.
            for batch in batches:
                # v2: the iterator guarantees the 61-byte minimum, so only the CRC is left
                # to check; ensure_valid() then raises Kafka's message for a mismatch.
                if batch.magic != 2 or crc32c(batch.buffer[CRC_START:]) != batch.crc:
                    batch.ensure_valid()
                last = batch.last_offset
                if not base <= last <= last_allowed:
                    self._ensure_offset_in_range(last)
                if batch.max_timestamp > max_ts_value:
                    max_ts_value, max_ts_offset = batch.max_timestamp, last
                if valid_bytes - last_index_entry > interval:
                    offset_index.append(last, valid_bytes)
                    time_index.maybe_append(max_ts_value, max_ts_offset)
                    last_index_entry = valid_bytes
                valid_bytes += batch.size_in_bytes
                count += 1
                next_offset = last + 1
                if batch.magic >= 2:
                    ple = batch.partition_leader_epoch
                    if leader_epoch_cache is not None and ple >= 0:
                        latest = leader_epoch_cache.latest_epoch
                        if latest is None or ple > latest:
                            leader_epoch_cache.assign(ple, batch.base_offset)
                    if producer_state is not None:
                        aborted += self._update_producer_state(producer_state, batch)
        finally:
            loop.valid_bytes, loop.last_index_entry = valid_bytes, last_index_entry
            loop.max_ts_value, loop.max_ts_offset = max_ts_value, max_ts_offset
            loop.count, loop.next_offset, loop.aborted = count, next_offset, aborted

    def _update_producer_state(self, producer_state, batch) -> int:
        """Kafka's ``LogSegment.updateProducerState``; returns 1 if an abort was indexed."""
        if batch.producer_id < 0:
            # No producer: only the map end offset moves (the common case, kept cheap).
            producer_state.update_map_end_offset(batch.last_offset + 1)
            return 0
        aborted = segment_update_producer_state(producer_state, batch)
        if aborted is None:
            return 0
        self.txn_index.append(aborted)
        return 1

    def truncate_to(self, offset: int) -> int:
        """§8.6: remove everything at or above ``offset``; returns bytes removed."""
        mapping = self.translate_offset(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        self.offset_index.resize(self.offset_index.max_index_size)
        self.time_index.resize(self.time_index.max_index_size)
        if mapping is None:
            return 0
        removed = self.size - mapping.position
        os.ftruncate(self._fd, mapping.position)
        self.size = mapping.position
        if self.size == 0:
            self._rolling_based_timestamp = None
            self._rolling_based_loaded = True
        self._bytes_since_last_index_entry = 0
        # The max timestamp: the last time-index entry, then whatever follows it.
        self._max_ts_so_far = self.time_index.last_entry
        last_entry = self.time_index.last_entry
        start = self.offset_index.lookup(last_entry.offset).position if self.time_index.entries else 0
        for batch in FileBatches(self.log_path, start, self.size):
            if batch.max_timestamp > self._max_ts_so_far.timestamp:
                self._max_ts_so_far = TimestampOffset(batch.max_timestamp, batch.last_offset)
        return removed

    # -- roll ------------------------------------------------------------------------------------------

    @property
    def rolling_based_timestamp(self) -> int | None:
        if not self._rolling_based_loaded:
            self._rolling_based_loaded = True
            self._rolling_based_timestamp = None
            if self.size > 0:
                for batch in FileBatches(self.log_path, 0, self.size, chunk_size=LOOKUP_CHUNK):
                    self._rolling_based_timestamp = batch.max_timestamp
                    break
        return self._rolling_based_timestamp

    def time_waited_for_roll(self, now: int, message_timestamp: int) -> int:
        ts = self.rolling_based_timestamp
        if ts is not None and ts >= 0:
            return message_timestamp - ts
        return now - self.created_ms

    def should_roll(self, params: RollParams) -> bool:
        """§14: size, time, a full index, or an offset that no longer fits."""
        reached_roll_ms = self.time_waited_for_roll(params.now, params.max_timestamp_in_messages) > \
            params.max_segment_ms - self.rolling_jitter_ms
        return (
            self.size > params.max_segment_bytes - params.messages_size
            or (self.size > 0 and reached_roll_ms)
            or self.offset_index.is_full()
            or self.time_index.is_full()
            or not self.can_convert_to_relative_offset(params.max_offset_in_messages)
        )

    def on_become_inactive_segment(self) -> None:
        """§8.4: final time-index entry, then trim the indexes (and a preallocated log)."""
        mts = self.max_timestamp_so_far
        self.time_index.maybe_append(mts.timestamp, mts.offset, skip_full_check=True)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        if os.fstat(self._fd).st_size > self.size:
            os.ftruncate(self._fd, self.size)

    def resize_indexes(self, size: int) -> None:
        self.offset_index.resize(size)
        self.time_index.resize(size)

    # -- durability and lifecycle ----------------------------------------------------------------

    def flush(self) -> None:
        """fsync the log and flush all indexes."""
        self._file.fsync()
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def close(self) -> None:
        """Kafka's close: final time-index entry (if known), trim indexes, close files."""
        if self._file.closed:
            return
        if self.writable and self.max_timestamp_so_far.timestamp >= 0:
            mts = self.max_timestamp_so_far
            self.time_index.maybe_append(mts.timestamp, mts.offset, skip_full_check=True)
        if self.writable:
            self.offset_index.close()
            self.time_index.close()
        else:
            self.offset_index.close_handler()
            self.time_index.close_handler()
        self.txn_index.close()
        if self.writable and os.fstat(self._fd).st_size > self.size:
            os.ftruncate(self._fd, self.size)
        self._file.close()

    def close_handlers(self) -> None:
        """Close files without trimming (used before deleting or renaming away)."""
        if self._file.closed:
            return
        self.offset_index.close_handler()
        self.time_index.close_handler()
        self.txn_index.close()
        self._file.close()

    def delete_if_exists(self) -> None:
        self.close_handlers()
        for path in (self.log_path,):
            path.unlink(missing_ok=True)
        self.offset_index.delete_if_exists()
        self.time_index.delete_if_exists()
        self.txn_index.delete_if_exists()

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename all four files, e.g. ``""`` -> ``".deleted"`` or ``".cleaned"`` -> ``".swap"``."""

        def renamed(path: Path) -> Path:
            name = path.name
            if old_suffix and name.endswith(old_suffix):
                name = name[: -len(old_suffix)]
            return path.with_name(name + new_suffix)

        new_log = renamed(self.log_path)
        os.replace(self.log_path, new_log)
        self.log_path = new_log
        self._file.moved_to(new_log)
        self.offset_index.rename_to(renamed(self.offset_index.path))
        self.time_index.rename_to(renamed(self.time_index.path))
        self.txn_index.rename_to(renamed(self.txn_index.path))

    def has_suffix(self, suffix: str) -> bool:
        return self.log_path.name.endswith(suffix)

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size}, path={self.log_path})"


_ENTRY_SIZE = struct.Struct(">i").unpack_from


def _v2_batches_end(data) -> tuple[int, bool]:
    """How far whole v2 batches run from the start of ``data``, hopping from size field to
    size field: ``(position, partial)``, stopped at the end, at an entry the hop does not
    take (not v2, a size below a batch header's, under 61 bytes left), or (``partial``) at a
    v2 batch running past the end. The reference of ``plog._native.v2_batches_end``."""
    pos, end = 0, len(data)
    while end - pos >= 61 and data[pos + 16] == 2:
        size = _ENTRY_SIZE(data, pos + 8)[0]
        if size < 49:
            break
        stop = pos + 12 + size
        if stop > end:
            return pos, True
        pos = stop
    return pos, False


# A follower's fetch hops over 2 MiB of batches: a Python loop per batch was a fifth of a catch-up.
_hop = getattr(native.module, "v2_batches_end", None) or _v2_batches_end


def _whole_batches_end(data) -> int:
    """The length of the prefix of ``data`` made of whole entries (a partial tail dropped);
    raises what the batch walk raises for a malformed entry before it."""
    from plog.formats.batches import BatchIterator

    # The common case, hopping from size field to size field: whole v2 batches (the
    # iterator yields them without further checks), perhaps a partial one at the end. From
    # the first entry that is anything else (legacy, malformed, a short tail) the iterator
    # goes on.
    pos, partial = _hop(data)
    if partial:
        return pos
    end = len(data)
    if pos == end:
        return end
    it = BatchIterator(data, pos)
    for _ in it:
        pass
    return it.valid_end if it.trailing is not None else end
