"""``Log``: one partition, Kafka's ``UnifiedLog`` + ``LocalLog`` without replication.

State and invariants:

* ``segments``: sorted by base offset, contiguous in offsets; the last is active.
* ``log_start_offset`` <= ``high_watermark`` <= ``log_end_offset`` (LEO: the next offset
  to assign). ``recovery_point``: everything below it is fsynced, so recovery after a
  crash starts from the segment holding it.
* Offsets are assigned on append (``append_as_leader``), never by the caller: a producer
  batch arrives with base offset 0 and is rewritten in place (baseOffset and
  partitionLeaderEpoch lie outside the CRC; LogAppendTime recomputes it), as Kafka's
  ``LogValidator`` does for a v2 batch whose codec the topic keeps.
* Durability: with ``plog.fsync.on.produce`` (default) every append is fsynced before it
  returns and the recovery point follows the LEO; otherwise Kafka's ``flush.messages`` /
  ``flush.ms`` decide, and a roll flushes the finished segment.

Not thread-safe: one writer (the ``.lock`` of the log directory) drives a Log at a time. One
exception: a :meth:`Log.flush` bounded by an offset may run on another thread beside appends
(a producer's next round, while this one's fsyncs run: ``ClusterWriter.flush_in_background``).
A flush and anything that changes the segments (a roll, a truncation, closing) hold the log's
``_segments_lock``, so the flush never meets a segment half-rolled, truncated or closed. An
append that does not roll only writes past the active segment's end and adds index entries:
the flush fsyncs the segment's file (which covers every byte written before it) and msyncs
the index entries it counts, so what it claims, the offset it was given, is durable.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from plog.formats.batches import BatchIterator
from plog.formats.control import ControlRecordType, encode_control_key, encode_end_txn_marker
from plog.formats.errors import FormatError
from plog.formats.legacy import LegacyBatch
from plog.formats.record_batch import (
    RecordBatch,
    encode_batch,
    set_base_offset,
    set_max_timestamp,
    set_partition_leader_epoch,
)
from plog.formats.records import LOG_APPEND_TIME

from plog.engine.interrupts import whole
from plog.engine.storage import append_fast
from plog.engine.storage.log_config import LogConfig
from plog.engine.storage.leader_epoch_cache import LeaderEpochCache
from plog.engine.errors import (
    InvalidProducerBatchError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    close_after,
)
from plog.engine.storage.loader import LoadedLog, LoadReport, load, rebuild_producer_state
from plog.engine.storage.segment import FetchData, LogOffsetPosition, LogSegment, RollParams, TimestampAndOffset
from plog.engine.storage.segments import LogSegments


def _storage_io(action: str, *, flush: bool = False):
    """Decorator of the methods that write a log (Kafka's ``maybeHandleIOException``): an
    ``OSError`` they raise (a full disk, an I/O error, a folder removed under the log) goes
    out as :class:`KafkaStorageError`, "Error while <action> <file>: <reason>", with the
    ``errno``, so every caller (a producer's request, a follower's fetch) gets the engine's
    typed error for it, not a bare ``OSError`` it may not expect.

    The log then goes offline (:attr:`Log.failure`), as Kafka takes the log directory
    offline: every later write is refused with a KafkaStorageError that names the first
    failure. After a failed write (``flush=False``: an append, a roll, a truncation) a flush
    still makes durable what was written before it (a round in flight is acknowledged, not
    lost with the round that failed; the failed append never moved the LEO, so its torn
    bytes are not counted). After a failed flush nothing is: Linux may have dropped the
    dirty pages it could not write and marked them clean, so the next fsync would succeed
    without them ("fsyncgate") and the recovery point, the high watermark checkpoint and the
    acknowledgements would claim records that are not on disk. What the failed call left is
    left as it is; the next open recovers the log from its last recovery point."""
    def wrap(method):
        @functools.wraps(method)
        def run(self, *args, **kwargs):
            failure = self.failure
            if failure is not None and (not flush or self._flush_failed):
                raise failure.offline(action, self.dir)
            try:
                return method(self, *args, **kwargs)
            except OSError as e:
                error = KafkaStorageError.from_os_error(e, action, self.dir)
                # (This order: a thread that sees the failure sees whether a flush failed.)
                self._flush_failed = self._flush_failed or flush
                self.failure = failure or error
                raise error from e

        return run

    return wrap


@dataclass(slots=True)
class LogAppendInfo:
    """What an append did (Kafka's ``LogAppendInfo``)."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int
    log_start_offset: int
    records_count: int
    valid_bytes: int
    duplicate: bool = False


class ReadPosition:
    """Where a reader that has just read up to ``offset`` of a log goes on reading: byte
    ``position`` of ``segment`` (``Log.position_after``). It holds while ``segment`` is still
    the log's segment for ``offset`` (compaction and retention replace or drop segment
    objects, they never rewrite one) and the log has not been truncated since
    (``truncations``: a truncated segment may be written again, at other offsets)."""

    __slots__ = ("segment", "position", "offset", "truncations")

    def __init__(self, segment: LogSegment, position: int, offset: int, truncations: int):
        self.segment, self.position, self.offset, self.truncations = segment, position, offset, truncations


class Log:
    """A partition log over ``directory``; build it with :meth:`open` (or from what the
    loader loaded, :meth:`from_loaded`)."""

    def __init__(self, directory: Path, config: LogConfig, segments: LogSegments, *, log_start_offset: int,
                 recovery_point: int, next_offset: int, producer_state, epoch_cache: LeaderEpochCache,
                 time_source=None, writable: bool = True, load_report: LoadReport | None = None,
                 last_flush_ms: int | None = None):
        self.dir = Path(directory)
        self.config = config
        self.segments = segments
        self.log_start_offset = log_start_offset
        self.recovery_point = recovery_point
        self.log_end_offset = next_offset
        self.high_watermark = next_offset
        #: True when a replication layer owns the high watermark (min LEO over the ISR on a
        #: leader, the leader's value on a follower); False: every append moves it to the LEO.
        self.replicated = False
        self.producer_state = producer_state
        self.epoch_cache = epoch_cache
        self.writable = writable
        self.load_report = load_report
        self._now = time_source or (lambda: int(time.time() * 1000))
        self._unflushed_messages = 0
        self._last_flush_ms = self._now() if last_flush_ms is None else last_flush_ms
        #: Held by a flush while it walks the segments, and by whatever changes them (see the
        #: module docstring). Reentrant: a roll flushes the segment it finished.
        self._segments_lock = threading.RLock()
        #: How many times the log was truncated (from the end, or fully): a ReadPosition
        #: taken before a truncation no longer says where anything is.
        self.truncations = 0
        self.closed = False
        #: The I/O error that took this log offline (see ``_storage_io``), None while it is
        #: online. Offline, it takes no write (nor any flush, once a flush failed); closing
        #: it only lets go of its files (no snapshot, fsync or trim), and its log manager
        #: marks nothing clean.
        self.failure: KafkaStorageError | None = None
        self._flush_failed = False  # the failure was a flush's: no flush is trusted again

    # -- opening ---------------------------------------------------------------------------------

    @classmethod
    def open(cls, directory: str | os.PathLike, config: LogConfig | None = None, *, log_start_offset: int = 0,
             recovery_point: int = 0, had_clean_shutdown: bool = True, writable: bool = True,
             live_reader: bool = False, time_source=None) -> "Log":
        """Open (and if needed recover) the partition at ``directory``; see ``loader``
        (``live_reader``: a read-only view of a directory a writer may be using)."""
        return load_log(Path(directory), config or LogConfig(), log_start_offset=log_start_offset,
                        recovery_point=recovery_point, had_clean_shutdown=had_clean_shutdown, writable=writable,
                        live_reader=live_reader, time_source=time_source)

    @classmethod
    def from_loaded(cls, loaded: LoadedLog) -> "Log":
        """The log the loader loaded (its segments, offsets and state, as they are)."""
        return cls(loaded.directory, loaded.config, loaded.segments, log_start_offset=loaded.log_start_offset,
                   recovery_point=loaded.recovery_point, next_offset=loaded.log_end_offset,
                   producer_state=loaded.producer_state, epoch_cache=loaded.epoch_cache,
                   time_source=loaded.time_source, writable=loaded.writable, load_report=loaded.report,
                   last_flush_ms=loaded.loaded_at_ms)

    # -- facts ------------------------------------------------------------------------------------

    @property
    def active_segment(self) -> LogSegment:
        return self.segments.last

    @property
    def size(self) -> int:
        return self.segments.size_in_bytes()

    @property
    def name(self) -> str:
        return self.dir.name

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError(f"log {self.dir} is closed")

    # -- append ---------------------------------------------------------------------------------

    @whole
    @_storage_io("appending to")
    def append_as_leader(self, records: bytes | bytearray, *, leader_epoch: int = 0,
                         origin: str = "client", flush: bool = True) -> LogAppendInfo:
        """Validate one producer batch as Kafka's leader does, assign its offsets, append.

        ``records`` must hold exactly one v2 batch with base offset 0 (what a producer
        sends). Raises a typed engine error for anything Kafka would reject.
        ``flush=False`` leaves the durability decision to the caller, who appends a group
        of batches and then calls :meth:`flush` once (a group commit, as one produce
        request of many batches is one fsync).
        """
        self._check_open()
        buf = bytearray(records)
        batch = self._validate_producer_batch(buf, origin)
        now = self._now()
        pid = batch.producer_id
        append_info = None
        if pid >= 0 and self.producer_state is not None:
            dup = self.producer_state.find_duplicate_batch(pid, batch.producer_epoch, batch.base_sequence,
                                                           batch.last_sequence)
            if dup is not None:
                # A retried batch already in the log: acknowledge it again, write nothing.
                first = dup.last_offset - dup.offset_delta
                return LogAppendInfo(first, dup.last_offset, dup.timestamp, dup.last_offset, -1,
                                     self.log_start_offset, dup.offset_delta + 1, 0, duplicate=True)
        first_offset = self.log_end_offset
        last_offset = first_offset + batch.last_offset_delta
        set_base_offset(buf, first_offset)
        set_partition_leader_epoch(buf, leader_epoch)
        log_append_time = -1
        if self.config.log_append_time:
            log_append_time = now
            set_max_timestamp(buf, LOG_APPEND_TIME, now)
        max_ts = log_append_time if log_append_time >= 0 else batch.max_timestamp
        # Re-read the header after the in-place rewrites (a view over buf, no copy).
        written = RecordBatch(memoryview(buf))
        if pid >= 0 and self.producer_state is not None:
            # Sequence and epoch checks (OutOfOrderSequence, fencing) before anything is written.
            append_info = self.producer_state.prepare_update(pid, origin)
            append_info.append(written)
        info = LogAppendInfo(first_offset, last_offset, max_ts, last_offset, log_append_time, self.log_start_offset,
                             batch.records_count, len(buf))
        self._append(buf, info, leader_epoch, batches=[written], validated=append_info, flush=flush)
        return info

    @whole
    @_storage_io("appending to")
    def append_batches_as_leader(self, batches, *, leader_epoch: int = 0,
                                 origin: str = "client") -> list[LogAppendInfo]:
        """:meth:`append_as_leader` of each of ``batches`` (one producer batch each) in turn,
        with ``flush=False``: the same bytes, offsets, indexes and producer state. A batch that
        fails raises after the ones before it were appended.

        With the native module, client batches take :mod:`~plog.engine.storage.append_fast`'s
        path: one native check of the batches, one write per segment (the same files)."""
        if append_fast.enabled and origin == "client":
            return append_fast.append_batches_as_leader(self, batches, leader_epoch, LogAppendInfo)
        return [self.append_as_leader(b, leader_epoch=leader_epoch, origin=origin, flush=False) for b in batches]

    def _validate_producer_batch(self, buf: bytearray, origin: str) -> RecordBatch:
        it = BatchIterator(memoryview(buf))
        try:
            batches = list(it)
        except FormatError as e:
            raise InvalidProducerBatchError(f"Invalid producer batch for {self.name}: {e}") from None
        if it.trailing is not None or len(batches) != 1:
            raise InvalidProducerBatchError(
                f"A produce to {self.name} must hold exactly one whole record batch "
                f"({len(batches)} batches, {0 if it.trailing is None else it.trailing.length} trailing bytes)")
        batch = batches[0]
        if isinstance(batch, LegacyBatch):
            raise InvalidProducerBatchError(f"plog writes magic v2 batches only (got magic {batch.magic})")
        if batch.size_in_bytes > self.config.max_message_bytes:
            raise RecordTooLargeError(
                f"The record batch of {batch.size_in_bytes} bytes for {self.name} is larger than "
                f"max.message.bytes ({self.config.max_message_bytes})")
        if batch.size_in_bytes > self.config.segment_bytes:
            raise RecordBatchTooLargeError(
                f"Message batch size is {batch.size_in_bytes} bytes in append to partition {self.name} which exceeds "
                f"the maximum configured segment size of {self.config.segment_bytes}")
        if origin == "client" and batch.base_offset != 0:
            raise InvalidProducerBatchError(
                f"The baseOffset of the record batch in the append to {self.name} should be 0, "
                f"but it is {batch.base_offset}")
        if not batch.is_valid():
            raise InvalidProducerBatchError(
                f"Record is corrupt (stored crc = {batch.crc}, computed crc = {batch.compute_crc()}) "
                f"in append to {self.name}")
        if batch.records_count < 1:
            raise InvalidProducerBatchError(f"Batch in append to {self.name} has no records")
        if batch.last_offset_delta + 1 != batch.records_count:
            raise InvalidProducerBatchError(
                f"Inconsistent batch offset range [0, {batch.last_offset_delta}] and record count "
                f"{batch.records_count} in append to {self.name}")
        if origin == "client" and batch.is_control:
            raise InvalidProducerBatchError(f"Clients are not allowed to write control records in {self.name}")
        if batch.producer_id >= 0 and batch.base_sequence < 0 and not batch.is_transactional and origin == "client":
            raise InvalidProducerBatchError(
                f"Invalid sequence number {batch.base_sequence} in record batch with producerId {batch.producer_id}")
        if self.config.compact:
            for record in batch.records():
                if record.key is None:
                    raise InvalidProducerBatchError(
                        f"Compacted topic cannot accept message without key in topic partition {self.name}.")
        return batch

    @whole
    @_storage_io("appending to")
    def append_as_follower(self, records: bytes, *, flush: bool = True) -> LogAppendInfo:
        """Append batches that already carry their offsets (replication, repair tools):
        offsets must start at the LEO and increase."""
        if append_fast.enabled:
            info = append_fast.append_as_follower(self, records, flush, LogAppendInfo)
            if info is not None:
                return info
        self._check_open()
        buf = bytes(records)
        batches = list(BatchIterator(buf))
        if not batches:
            raise InvalidProducerBatchError("nothing to append")
        expected = self.log_end_offset
        max_ts, max_off = -1, batches[0].last_offset
        count = 0
        for b in batches:
            b.ensure_valid()
            if b.base_offset < expected:
                raise InvalidProducerBatchError(
                    f"Out of order offsets in append to {self.name}: {b.base_offset} after {expected - 1}")
            expected = b.next_offset
            if b.max_timestamp > max_ts:
                max_ts, max_off = b.max_timestamp, b.last_offset
            count += (b.records_count or 1)
        info = LogAppendInfo(batches[0].base_offset, batches[-1].last_offset, max_ts, max_off, -1,
                             self.log_start_offset, count, len(buf))
        self._append(bytearray(buf), info, None, batches=batches, flush=flush)
        return info

    @whole
    @_storage_io("appending to")
    def append_end_txn_marker(self, producer_id: int, producer_epoch: int, *, commit: bool,
                              coordinator_epoch: int = 0, leader_epoch: int = 0) -> LogAppendInfo:
        """Write a COMMIT/ABORT marker for a producer's open transaction, as the
        transaction coordinator makes the partition leader do."""
        now = self._now()
        offset = self.log_end_offset
        key = encode_control_key(ControlRecordType.COMMIT if commit else ControlRecordType.ABORT)
        raw = encode_batch([(offset, now, key, encode_end_txn_marker(coordinator_epoch))], base_offset=offset,
                           producer_id=producer_id, producer_epoch=producer_epoch, is_transactional=True,
                           is_control=True, partition_leader_epoch=leader_epoch)
        info = LogAppendInfo(offset, offset, now, offset, -1, self.log_start_offset, 1, len(raw))
        self._append(bytearray(raw), info, leader_epoch, batches=list(BatchIterator(raw)))
        return info

    def _append(self, buf: bytearray, info: LogAppendInfo, leader_epoch: int | None, *, batches,
                validated=None, flush: bool = True) -> None:
        """Write validated bytes to the (maybe new) active segment and advance the log.

        ``validated`` is a producer append already checked against producer state (a
        leader append); otherwise producer state is updated from ``batches`` without
        sequence checks, as Kafka does for replicated and recovered data."""
        segment = self._maybe_roll(len(buf), info)
        segment.append(info.last_offset, info.max_timestamp, info.offset_of_max_timestamp, buf, batches)
        if leader_epoch is not None:
            self.epoch_cache.assign(leader_epoch, info.first_offset)
        else:
            for b in batches:
                if b.magic >= 2 and b.partition_leader_epoch >= 0:
                    self.epoch_cache.assign(b.partition_leader_epoch, b.base_offset)
        psm = self.producer_state
        if psm is not None:
            if validated is not None:
                psm.update(validated)
                psm.update_map_end_offset(info.last_offset + 1)
            else:
                for b in batches:
                    if b.magic >= 2:
                        segment._update_producer_state(psm, b)
                psm.update_map_end_offset(info.last_offset + 1)
        self._advance(info.last_offset, info.records_count, flush)

    def _advance(self, last_offset: int, records: int, flush: bool) -> None:
        """The end of every append (this reference and append_fast's paths): the log end
        offset past ``last_offset``, the high watermark with it when nothing replicates the
        log, ``records`` more waiting for a flush, and the durability policy with ``flush``."""
        self.log_end_offset = last_offset + 1
        if not self.replicated:
            self.high_watermark = self.log_end_offset
        self._unflushed_messages += records
        if flush:
            self._maybe_flush()

    def maybe_flush(self, offset: int | None = None) -> None:
        """Apply the durability policy after a group of ``flush=False`` appends:
        ``plog.fsync.on.produce``, else ``flush.messages`` / ``flush.ms``. ``offset``: what
        must be durable ends there (a round's end taken before later appends; see
        :meth:`flush`), default the LEO."""
        self._maybe_flush(offset)

    def _maybe_flush(self, offset: int | None = None) -> None:
        cfg = self.config
        now = self._now()
        if (cfg.fsync_on_produce or self._unflushed_messages >= cfg.flush_messages
                or now - self._last_flush_ms >= cfg.flush_ms):
            self.flush(offset)

    # -- roll -------------------------------------------------------------------------------------

    def _maybe_roll(self, messages_size: int, info: LogAppendInfo) -> LogSegment:
        segment = self.active_segment
        now = self._now()
        params = RollParams(self.config.max_segment_ms, self.config.segment_bytes, info.max_timestamp,
                            info.last_offset, messages_size, now)
        if segment.should_roll(params):
            return self.roll(info.first_offset)
        return segment

    @_storage_io("rolling")
    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at ``max(expected_next_offset, LEO)`` (§14)."""
        with self._segments_lock:
            return self._roll(expected_next_offset)

    def _roll(self, expected_next_offset: int | None) -> LogSegment:
        self._check_open()
        new_base = max(expected_next_offset or 0, self.log_end_offset)
        active = self.active_segment
        if active.base_offset == new_base:
            if active.size == 0:
                # Rolling onto an empty segment at the same offset: nothing to do.
                return active
            raise ValueError(f"Trying to roll a new log segment for {self.name} with start offset {new_base} "
                             f"equal to the active segment's, which is not empty")
        active.on_become_inactive_segment()
        segment = LogSegment.open(self.dir, new_base, self.config, time_source=self._now)
        self.segments.add(segment)
        if self.producer_state is not None:
            self.producer_state.update_map_end_offset(new_base)
            self.producer_state.take_snapshot(sync=False)
        # Kafka flushes the finished segment asynchronously; we do it now.
        self.flush(new_base)
        return segment

    # -- reads ---------------------------------------------------------------------------------------

    def read(self, start_offset: int, max_bytes: int = 1 << 20, *, max_offset: int | None = None,
             min_one_message: bool = True, at: ReadPosition | None = None) -> FetchData:
        """Whole batches from the batch holding ``start_offset``: up to ``max_bytes``
        (at least one batch if ``min_one_message``), never at or past ``max_offset``
        (exclusive; e.g. the high watermark). Raises OffsetOutOfRangeError outside
        ``[log_start_offset, log_end_offset]``. ``at``: where the previous read ended
        (:meth:`position_after`); while it still holds, the read starts there instead of
        looking ``start_offset`` up (the same bytes, without the index lookup and batch scan)."""
        self._check_open()
        end = self.log_end_offset
        if start_offset == end or (max_offset is not None and start_offset >= max_offset):
            return FetchData(start_offset, self.active_segment.base_offset, self.active_segment.size, b"")
        if max_offset is not None and max_offset >= end:
            max_offset = None  # nothing lies at or past the LEO: no position to look up for it
        if start_offset < self.log_start_offset or start_offset > end:
            raise OffsetOutOfRangeError(
                f"Received request for offset {start_offset} for partition {self.name}, but we only have log "
                f"segments in the range {self.log_start_offset} to {end}.", offset=start_offset)
        segment = self.segments.floor(start_offset)
        if at is not None and max_offset is None and at.offset == start_offset and at.segment is segment \
                and at.truncations == self.truncations:
            data = segment.read_at(start_offset, at.position, max_bytes)
            if data is not None:
                return data
        while segment is not None:
            max_position = None
            if max_offset is not None and max_offset <= self._segment_next_base(segment):
                pos = segment.translate_offset(max_offset)
                max_position = pos.position if pos is not None else segment.size
            data = segment.read(start_offset, max_bytes, max_position, min_one_message)
            if data is not None and data.records:
                return data
            segment = self.segments.higher(segment.base_offset)
        return FetchData(start_offset, self.active_segment.base_offset, self.active_segment.size, b"")

    def position_after(self, data: FetchData, next_offset: int) -> ReadPosition | None:
        """Where a read of ``start_offset == next_offset`` starts once ``data`` (this log's
        read) has been taken whole: right after it, in the same segment. ``next_offset`` is
        one past the last offset ``data`` holds; the batch after it, if any, is the first
        whose last offset is at least that (offsets only grow along a segment, gaps left by
        compaction included), which is what :meth:`read` would look up. None when the
        segment is no longer this log's."""
        segment = self.segments.floor(data.segment_base_offset)
        if segment is None or segment.base_offset != data.segment_base_offset:
            return None
        return ReadPosition(segment, data.position + len(data.records), next_offset, self.truncations)

    def _segment_next_base(self, segment: LogSegment) -> int:
        nxt = self.segments.higher(segment.base_offset)
        return nxt.base_offset if nxt is not None else self.log_end_offset

    def read_records(self, start_offset: int = None, end_offset: int | None = None):
        """Iterate the records from ``start_offset`` (default: log start) to
        ``end_offset`` (exclusive; default: LEO), batch by batch, with bounded memory."""
        start = self.log_start_offset if start_offset is None else start_offset
        end = self.log_end_offset if end_offset is None else end_offset
        for segment in self.segments.values(start, end):
            position = segment.translate_offset(start)
            if position is None:
                continue
            for batch in segment.batches(position.position):
                if batch.base_offset >= end:
                    return
                for record in batch.records():
                    if start <= record.offset < end:
                        yield record

    def translate_offset(self, offset: int) -> tuple[LogSegment, LogOffsetPosition] | None:
        """Which segment and batch hold ``offset`` (index lookup + forward scan)."""
        segment = self.segments.floor(offset)
        while segment is not None:
            pos = segment.translate_offset(offset)
            if pos is not None:
                return segment, pos
            segment = self.segments.higher(segment.base_offset)
        return None

    def fetch_offset_by_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """Kafka's ``fetchOffsetByTimestamp``: -2 earliest, -1 latest, -3 max timestamp,
        else the first record with timestamp >= ``timestamp``."""
        # (Imported here: offset_spec is the lookups' module, not the write path's.)
        from plog.engine.offset_spec import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP

        if timestamp == EARLIEST_TIMESTAMP:
            return TimestampAndOffset(-1, self.log_start_offset)
        if timestamp == LATEST_TIMESTAMP:
            return TimestampAndOffset(-1, self.log_end_offset)
        if timestamp == MAX_TIMESTAMP:
            best = None
            for seg in self.segments:
                mts = seg.max_timestamp_so_far
                if mts.timestamp >= 0 and (best is None or mts.timestamp > best.timestamp):
                    best = mts
            return None if best is None else TimestampAndOffset(best.timestamp, best.offset)
        for seg in self.segments:
            if seg.largest_timestamp >= timestamp:
                found = seg.find_offset_by_timestamp(timestamp, self.log_start_offset)
                if found is not None:
                    return found
        return None

    # -- durability -------------------------------------------------------------------------------

    @_storage_io("flushing", flush=True)
    def flush(self, offset: int | None = None) -> None:
        """fsync everything below ``offset`` (default: the LEO); the recovery point moves there.

        With ``offset`` it may run beside appends on another thread (module docstring): the
        bytes below ``offset`` were written before it was taken, so the fsyncs, which start
        after, cover them; bytes appended meanwhile may be synced too, but the recovery point
        claims only ``offset``, and the messages past it still count towards ``flush.messages``."""
        with self._segments_lock:
            self._check_open()
            target = self.log_end_offset if offset is None else offset
            if target <= self.recovery_point and offset is not None:
                return
            for segment in self.segments.values(self.recovery_point, max(target, self.recovery_point + 1)):
                segment.flush()
            self.recovery_point = max(self.recovery_point, target)
            # Appends beside this flush (past ``target``) are not the ones it made durable: they
            # stay counted, or a flush.messages policy would wait for as many again.
            self._unflushed_messages = max(0, self.log_end_offset - target)
            self._last_flush_ms = self._now()

    # -- truncation and deletion -------------------------------------------------------------------

    @whole
    @_storage_io("truncating")
    def truncate_to(self, target_offset: int) -> bool:
        """Remove every record at or after ``target_offset`` (a follower's truncation)."""
        with self._segments_lock:
            return self._truncate_to(target_offset)

    def _truncate_to(self, target_offset: int) -> bool:
        self._check_open()
        if target_offset < 0:
            raise ValueError(f"Cannot truncate partition {self.name} to a negative offset ({target_offset})")
        if target_offset >= self.log_end_offset:
            return False
        if target_offset < self.segments.first.base_offset:
            self._truncate_fully_and_start_at(target_offset)
            return True
        self.truncations += 1
        for segment in reversed(self.segments.values(target_offset)):
            if segment.base_offset > target_offset:
                self.segments.remove(segment.base_offset)
                segment.delete_if_exists()
        self.active_segment.truncate_to(target_offset)
        self.active_segment.resize_indexes(self.config.segment_index_bytes)
        self.log_end_offset = target_offset
        self.recovery_point = min(self.recovery_point, target_offset)
        self.high_watermark = min(self.high_watermark, target_offset)
        self.log_start_offset = min(self.log_start_offset, target_offset)
        self.epoch_cache.truncate_from_end(target_offset)
        self._rebuild_producer_state()
        return True

    @whole
    @_storage_io("truncating")
    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Delete every segment and start an empty log at ``new_offset``."""
        with self._segments_lock:
            self._truncate_fully_and_start_at(new_offset)

    def _truncate_fully_and_start_at(self, new_offset: int) -> None:
        self.truncations += 1
        for segment in list(self.segments):
            self.segments.remove(segment.base_offset)
            segment.delete_if_exists()
        self.segments.add(LogSegment.open(self.dir, new_offset, self.config, time_source=self._now))
        self.log_start_offset = self.log_end_offset = self.recovery_point = self.high_watermark = new_offset
        self.epoch_cache.clear()
        if self.producer_state is not None:
            self.producer_state.truncate_fully_and_start_at(new_offset)

    @whole
    def delete_records_before(self, offset: int) -> int:
        """kafka-delete-records: raise the log start offset to ``offset`` (<= the high
        watermark). Segments wholly below it are removed by retention later, as in Kafka."""
        self._check_open()
        if offset > self.high_watermark:
            raise OffsetOutOfRangeError(
                f"Cannot increment the log start offset to {offset} of partition {self.name} since it is larger "
                f"than the high watermark {self.high_watermark}", offset=offset)
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            self.epoch_cache.truncate_from_start(offset)
        return self.log_start_offset

    def _rebuild_producer_state(self) -> None:
        if self.producer_state is not None:
            rebuild_producer_state(self.producer_state, self.segments, self.log_start_offset, self.log_end_offset,
                                   reload_from_clean_shutdown=False)

    # -- lifecycle ------------------------------------------------------------------------------------

    def close(self) -> None:
        """Kafka's close: snapshot producer state at the LEO, finalise and close segments.
        An offline log (:attr:`failure`) only lets go of its files, as after a crash."""
        with self._segments_lock:
            if self.failure is not None:
                if not self.closed:
                    for segment in self.segments:
                        segment.close_handlers()
                    self.closed = True
                return
            self._close_online()

    @_storage_io("closing")
    def _close_online(self) -> None:
        """The segments are closed (their descriptors given back) even when the snapshot
        or the flush before them fails; that failure is raised after."""
        if self.closed:
            return
        try:
            if self.writable:
                if self.producer_state is not None:
                    self.producer_state.update_map_end_offset(self.log_end_offset)
                    self.producer_state.take_snapshot(sync=True)
                self.flush()
        finally:
            failed = None
            for segment in self.segments:
                try:
                    segment.close()
                except OSError as e:
                    failed = failed or e
            self.closed = True
        if failed is not None:
            raise failed

    def __enter__(self) -> "Log":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        close_after(self.close, exc, "closing the log")

    def __repr__(self) -> str:
        return (f"Log({self.dir}, start={self.log_start_offset}, end={self.log_end_offset}, "
                f"segments={len(self.segments)})")


def load_log(directory: Path, config: LogConfig, **options) -> Log:
    """Load ``directory`` (:func:`plog.engine.storage.loader.load`, which takes the same
    options) and build the :class:`Log` over what was loaded."""
    return Log.from_loaded(load(Path(directory), config, **options))
