"""What a ``plog lookup`` answers: the result of a lookup by offset
(:class:`OffsetLookupResult`) or by timestamp (:class:`TimestampLookupResult`), the batch
found (:class:`BatchHeader`), each index search (:class:`IndexProbe`) and every step taken
(:class:`LookupStep`, what ``plog lookup --explain`` prints). See
:mod:`plog.engine.inspect.lookup` for how they are found.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from plog.formats.legacy import LegacyBatch
from plog.formats.records import TIMESTAMP_TYPE_NAMES

from plog.engine.inspect.inventory import codec_name


@dataclass
class LookupStep:
    """One step of a lookup: a short ``name``, a sentence, and the numbers behind it."""

    name: str
    text: str
    data: dict = field(default_factory=dict)


@dataclass
class BatchHeader:
    """The header of one batch (v2) or legacy entry (v0/v1), as found on disk."""

    segment_base_offset: int
    position: int
    size: int
    magic: int
    base_offset: int
    last_offset: int
    records_count: int | None
    base_timestamp: int | None
    max_timestamp: int
    timestamp_type: str
    codec: str
    producer_id: int
    producer_epoch: int
    base_sequence: int
    last_sequence: int
    partition_leader_epoch: int
    is_transactional: bool
    is_control: bool
    crc: int
    crc_valid: bool

    @classmethod
    def of(cls, batch, segment_base_offset: int) -> "BatchHeader":
        legacy = isinstance(batch, LegacyBatch)
        codec_id = batch.compression
        return cls(
            segment_base_offset=segment_base_offset,
            position=batch.position,
            size=batch.size_in_bytes,
            magic=batch.magic,
            base_offset=batch.base_offset,
            last_offset=batch.last_offset,
            records_count=batch.records_count,
            base_timestamp=None if legacy else batch.base_timestamp,
            max_timestamp=batch.max_timestamp,
            timestamp_type=TIMESTAMP_TYPE_NAMES.get(batch.timestamp_type, str(batch.timestamp_type)),
            codec=codec_name(codec_id),
            producer_id=batch.producer_id,
            producer_epoch=batch.producer_epoch,
            base_sequence=batch.base_sequence,
            last_sequence=batch.last_sequence,
            partition_leader_epoch=batch.partition_leader_epoch,
            is_transactional=batch.is_transactional,
            is_control=batch.is_control,
            crc=batch.crc,
            crc_valid=batch.is_valid(),
        )


@dataclass
class IndexProbe:
    """One binary search of an index: the entry it settled on and every entry compared."""

    path: str | None
    kind: str  # "offset" or "time"
    target: int
    entries: int
    slots: int
    missing: bool
    slot: int  # -1: no entry <= target
    entry: tuple[int, int] | None  # (offset, position) or (timestamp, offset)
    probes: list[tuple[int, int]]  # (slot, compared value: absolute offset or timestamp)


@dataclass
class OffsetLookupResult:
    """Where an offset lives. ``batch`` holds it (or, in a compaction gap, holds the next
    available offset); ``record_offset`` is the first record at or after the target."""

    partition_path: str
    topic: str | None
    partition: int | None
    target: int
    log_start_offset: int
    log_end_offset: int
    segment_base_offset: int  # the segment holding ``batch``
    segment_path: str
    segment_size: int
    floor_segment_base_offset: int  # the segment chosen first (greatest base <= target)
    index: IndexProbe  # the floor segment's offset index lookup
    scan_start_position: int
    batches_scanned: int
    batch: BatchHeader
    record_offset: int | None
    record_timestamp: int | None
    record_batch_position: int | None  # position of the batch holding record_offset
    record_segment_base_offset: int | None
    record_error: str | None
    steps: list[LookupStep]

    @property
    def exact(self) -> bool:
        return self.record_offset == self.target


@dataclass
class TimestampLookupResult:
    """The answer ListOffsets would give for ``target`` (-2, -1, -3 or a timestamp)."""

    partition_path: str
    topic: str | None
    partition: int | None
    target: int
    kind: str  # "earliest", "latest", "max-timestamp" or "timestamp"
    found: bool
    offset: int | None
    timestamp: int | None  # -1 for earliest/latest, as Kafka answers
    leader_epoch: int | None
    log_start_offset: int
    log_end_offset: int
    segment_base_offset: int | None = None
    segment_path: str | None = None
    segment_largest_timestamp: int | None = None
    time_index: IndexProbe | None = None
    offset_index: IndexProbe | None = None
    scan_start_position: int | None = None
    batches_scanned: int = 0
    batch: BatchHeader | None = None
    steps: list[LookupStep] = field(default_factory=list)


__all__ = ["BatchHeader", "IndexProbe", "LookupStep", "OffsetLookupResult", "TimestampLookupResult"]
