"""What a clean did or would do: Kafka's ``CleanerStats`` counters, the segment groups, and
the results of :func:`~plog.engine.maintenance.cleaner.clean_log` and
:func:`~plog.engine.maintenance.cleaner.explain_compaction`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from plog.engine.maintenance.cleaner_manager import LogToClean


@dataclass
class CleanStats:
    """Counters of one or several rounds (Kafka's ``CleanerStats`` and more)."""

    map_bytes_read: int = 0
    map_records_read: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_kept: int = 0
    batches_read: int = 0
    batches_kept: int = 0
    batches_rebuilt: int = 0
    batches_copied: int = 0
    empty_batches_retained: int = 0
    tombstones_removed: int = 0
    tombstones_expired: int = 0  # latest for their key but past their delete horizon
    tombstones_given_horizon: int = 0
    txn_markers_removed: int = 0
    txn_markers_given_horizon: int = 0
    aborted_records_removed: int = 0
    keyless_records_removed: int = 0

    @property
    def records_removed(self) -> int:
        return self.records_read - self.records_kept

    @property
    def batches_removed(self) -> int:
        return self.batches_read - self.batches_kept

    def to_dict(self) -> dict:
        d = asdict(self)
        d["records_removed"] = self.records_removed
        d["batches_removed"] = self.batches_removed
        return d


@dataclass
class SegmentGroup:
    """Source segments cleaned into one new segment at ``base_offset``."""

    base_offset: int
    segments: list[int]
    log_bytes: int

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class CleanResult:
    """What :func:`clean_log` did. ``checkpoint_offset`` is the new ``cleaner-offset-checkpoint``
    entry (the end offset of the last round; the reset first dirty offset when nothing was
    cleaned); the caller writes it."""

    directory: str
    cleaned: bool
    reason: str
    checkpoint_offset: int
    rounds: int = 0
    round_end_offsets: list[int] = field(default_factory=list)
    first_dirty_offset: int = 0
    first_uncleanable_offset: int = 0
    segments_before: int = 0
    segments_after: int = 0
    size_before: int = 0
    size_after: int = 0
    map_slots: int = 0
    map_utilization: float = 0.0  # of the last round
    elapsed_ms: float = 0.0
    stats: CleanStats = field(default_factory=CleanStats)
    cleanability: LogToClean | None = None
    groups: list[SegmentGroup] = field(default_factory=list)  # every round's, in order
    deleted_files: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        d = {k: v for k, v in asdict(self).items() if k not in ("stats", "cleanability")}
        d["stats"] = self.stats.to_dict()
        d["cleanability"] = None if self.cleanability is None else self.cleanability.to_dict()
        return d


@dataclass
class CompactionPlan:
    """A read-only simulation of one full clean (``--dry-run --explain``)."""

    cleanability: LogToClean
    would_clean: bool
    rounds_needed: int
    buffer_size: int
    map_capacity: int
    distinct_dirty_keys: int
    groups: list[SegmentGroup] = field(default_factory=list)
    stats: CleanStats = field(default_factory=CleanStats)

    def to_dict(self) -> dict:
        return {
            "cleanability": self.cleanability.to_dict(),
            "would_clean": self.would_clean,
            "rounds_needed": self.rounds_needed,
            "buffer_size": self.buffer_size,
            "map_capacity": self.map_capacity,
            "distinct_dirty_keys": self.distinct_dirty_keys,
            "groups": [g.to_dict() for g in self.groups],
            "stats": self.stats.to_dict(),
        }

    def explain_lines(self) -> list[str]:
        c, s = self.cleanability, self.stats
        lines = []
        if c.first_dirty_reset:
            lines.append(f"The first dirty offset is reset to {c.first_dirty_offset}: {c.first_dirty_reset}.")
        lines.append(f"Dirty section: offsets {c.first_dirty_offset} to {c.first_uncleanable_offset} "
                     f"(the first uncleanable offset, bounded by the {c.uncleanable_bound.replace('-', ' ')}).")
        lines.append(f"Clean bytes {c.clean_bytes}, cleanable bytes {c.cleanable_bytes}: dirty ratio "
                     f"{c.dirty_ratio:.4f} against min.cleanable.dirty.ratio {c.min_cleanable_dirty_ratio}.")
        if c.needs_compaction_now:
            lines.append(f"A dirty segment is {c.max_compaction_delay_ms} ms past max.compaction.lag.ms.")
        lines.append(("The log qualifies for cleaning: " if c.qualifies else "The log does not qualify: ") + c.reason
                     + ".")
        if not self.groups:
            return lines
        lines.append(f"{self.distinct_dirty_keys} distinct keys in the dirty section; the offset map holds "
                     f"{self.map_capacity} keys in {self.buffer_size} bytes, so the clean takes "
                     f"{self.rounds_needed} round{'s' if self.rounds_needed != 1 else ''}.")
        lines.append(f"{sum(len(g.segments) for g in self.groups)} segments would be rewritten into "
                     f"{len(self.groups)}.")
        lines.append(f"{s.records_removed} of {s.records_read} records ({s.bytes_read - s.bytes_written} of "
                     f"{s.bytes_read} bytes) would be removed; {s.batches_copied} batches copied unchanged, "
                     f"{s.batches_rebuilt} rebuilt, {s.batches_removed} removed.")
        lines.extend(f"{getattr(s, counter)} {text}" for counter, text in _EXPLAINED_COUNTERS if getattr(s, counter))
        return lines


#: The counters an explanation names when they are not zero, and what they say.
_EXPLAINED_COUNTERS = (
    ("tombstones_expired", "tombstones are past their delete horizon and would be removed."),
    ("tombstones_given_horizon", "tombstones would get a delete horizon of now + delete.retention.ms."),
    ("aborted_records_removed", "records of aborted transactions would be removed."),
    ("txn_markers_removed", "transaction markers would be removed."),
    ("keyless_records_removed", "records without a key would be removed."),
    ("empty_batches_retained", "emptied batches would stay as headers (producer state)."),
)


__all__ = ["CleanResult", "CleanStats", "CompactionPlan", "SegmentGroup"]
