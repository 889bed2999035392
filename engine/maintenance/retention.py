"""Retention (``cleanup.policy=delete``) of one partition: Kafka's ``deleteOldSegments``.

kafka-format.md §15, checked against ``UnifiedLog.deleteOldSegments`` / ``deletableSegments``
/ ``deleteSegments`` and ``LocalLog.deleteSegmentFiles`` (trunk).

**The passes.** Kafka runs up to three passes, one after the other, each on the log the
previous one left (trunk order): the *log-start-offset* pass, then *retention.bytes*, then
*retention.ms*. A policy without ``delete`` (``compact``) runs the log-start-offset pass
only. Each pass selects (``deletableSegments``), then deletes (``deleteSegments``):

* walk the segments oldest first and **stop at the first segment that fails**;
* a segment fails when its upper bound (the next segment's base offset, the log end offset
  for the last one) is above the high watermark, when the pass's predicate is false, or when
  it is the last segment and empty;
* the predicates: log start offset -- the next segment's base is <= the log start offset;
  size -- with ``diff = size - retention.bytes`` (only when ``size >= retention.bytes``),
  ``diff - segment.size >= 0``, then ``diff -= segment.size``; time -- ``now -
  largestTimestamp > retention.ms``, where largestTimestamp is the segment's max record
  timestamp if >= 0, else the ``.log`` modification time;
* when a pass selects every segment, a new empty active segment is rolled at the log end
  offset first (a log always has a segment), and that segment remains;
* the new log start offset is the base of the first remaining segment (never lowered).

:func:`plan_retention` evaluates all of that read-only and explains every segment;
:func:`delete_old_segments` carries a plan out; :func:`sweep_deleted_files` removes
``*.deleted`` files once ``file.delete.delay.ms`` has passed.

**Crash safety.** Deletion renames; it never rewrites. Segments are renamed to
``*.deleted`` oldest first, each one's ``.log`` before its indexes, and the directory is
fsynced after each segment, so at every instant the segments still named ``.log`` are a
suffix of the log (plus, when the plan rolls, the new empty active segment, created before
any rename). The loader (``loader.load``) deletes ``*.deleted`` files and orphan
indexes, recovers a segment whose offset index went missing, and takes ``log_start_offset
= max(checkpoint, first segment base)``.

The caller writes ``log-start-offset-checkpoint`` (and the recovery point) *after* this
returns. A crash between the renames and that write is safe because of this invariant:
**the new log start offset is the base offset of the first segment left on disk, or the
old log start offset if that is higher** -- exactly what the loader computes from the old
checkpoint and the surviving files. A crash part-way leaves some doomed segments on disk;
the loader then starts the log at the first of them, the records are still a suffix of
the original, and the next retention run deletes them again. Producer snapshots are
renamed after the segments (a snapshot left without its segment is a stray the loader
removes), and the leader-epoch checkpoint is truncated last (the loader truncates it from
the log start offset the same way).

The deletion time of a ``*.deleted`` file is recorded in its mtime: a rename keeps the
mtime (the time of the last write, often days old), so without it the sweep would delete
at once what ``file.delete.delay.ms`` should keep for a while (readers that still have the
segment open).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from plog.engine.storage.checkpoints import fsync_dir
from plog.engine.errors import RetentionError, StaleRetentionPlanError
from plog.engine.storage.file_names import DELETED_FILE_SUFFIX as DELETED_SUFFIX, LOG_FILE_SUFFIX, file_name, is_deleted_file

#: Rule names, as Kafka's log messages call the limits.
RULE_LOG_START = "log-start-offset"
RULE_SIZE = "retention.bytes"
RULE_TIME = "retention.ms"

#: The order of the passes in trunk's ``UnifiedLog.deleteOldSegments`` (Kafka 2.x's
#: ``Log.deleteOldSegments`` ran time, size, then log start offset).
PASS_ORDER = (RULE_LOG_START, RULE_SIZE, RULE_TIME)

TS_RECORD = "record"  # the segment's max record timestamp
TS_MTIME = "mtime"  # the .log file's modification time (no record timestamps)


# ------------------------------------------------------------------------------ human text


def format_timestamp(ms: int) -> str:
    """``2026-11-01T10:00:00Z`` (milliseconds shown only when not zero)."""
    try:
        dt = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    except (OverflowError, OSError, ValueError):
        return f"{ms} ms since the epoch"
    text = dt.strftime("%Y-%m-%dT%H:%M:%S")
    if ms % 1000:
        text += f".{ms % 1000:03d}"
    return text + "Z"


_DURATION_UNITS = (("y", 365 * 86_400_000), ("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000),
                   ("ms", 1))


def format_duration(ms: int) -> str:
    """The two largest units of a duration: ``20d 1h``, ``7d``, ``4y 3d``, ``250ms``."""
    if ms < 0:
        return "-" + format_duration(-ms)
    for i, (name, size) in enumerate(_DURATION_UNITS):
        if ms >= size:
            whole, rest = divmod(ms, size)
            text = f"{whole}{name}"
            if i + 1 < len(_DURATION_UNITS):
                name2, size2 = _DURATION_UNITS[i + 1]
                if rest // size2:
                    text += f" {rest // size2}{name2}"
            return text
    return "0ms"


def format_bytes(n: int) -> str:
    """``812 B``, ``4.0 KiB``, ``5.0 MiB``, ``1.2 GiB``."""
    if abs(n) < 1024:
        return f"{n} B"
    for unit, size in (("KiB", 1 << 10), ("MiB", 1 << 20), ("GiB", 1 << 30), ("TiB", 1 << 40)):
        if abs(n) < size * 1024 or unit == "TiB":
            return f"{n / size:.1f} {unit}"
    return f"{n} B"  # unreachable


# ------------------------------------------------------------------------------ the plan


@dataclass(frozen=True)
class RuleCheck:
    """What one pass said about one segment.

    ``outcome``: ``delete`` (selected), ``stop`` (the segment where the walk stopped),
    ``behind`` (after the stop), ``skipped`` (the pass did not run: limit infinite or not
    reached), ``hw`` / ``empty-active`` (the structural stops)."""

    rule: str
    outcome: str
    text: str


@dataclass
class SegmentDecision:
    """The verdict on one segment, with the facts it was based on.

    ``next_offset`` is Kafka's upper bound for the segment: the next segment's base offset,
    or the log end offset for the last one. ``largest_timestamp`` is what time-based
    retention compares (``timestamp_source`` says whether it is the max record timestamp
    or the ``.log`` mtime); ``max_record_timestamp`` is -1 when the segment has none."""

    file_name: str
    base_offset: int
    next_offset: int
    size: int
    largest_timestamp: int
    timestamp_source: str
    max_record_timestamp: int
    mtime: int
    is_active: bool
    deletable: bool = False
    rule: str | None = None
    reason: str = ""
    checks: list[RuleCheck] = field(default_factory=list)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["largest_timestamp_iso"] = format_timestamp(self.largest_timestamp)
        return d


@dataclass
class PassSummary:
    """One pass: whether it ran, why not, what it selected, and whether it rolled."""

    rule: str
    ran: bool
    note: str
    deleted_bases: list[int] = field(default_factory=list)
    rolled: bool = False
    log_size_before: int | None = None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class RetentionPlan:
    """What :func:`delete_old_segments` would do now, and why, for every segment."""

    directory: str
    now: int
    cleanup_policy: str
    retention_ms: int
    retention_ms_source: str  # "argument" or "log.config"
    retention_bytes: int
    retention_bytes_source: str
    high_watermark: int
    high_watermark_source: str  # "argument" or "log"
    log_start_offset: int
    log_end_offset: int
    log_size: int
    segments: list[SegmentDecision]
    passes: list[PassSummary]
    roll: bool = False
    roll_base_offset: int | None = None
    new_log_start_offset: int = 0

    @property
    def deletable(self) -> list[SegmentDecision]:
        return [s for s in self.segments if s.deletable]

    @property
    def deletable_bases(self) -> list[int]:
        return [s.base_offset for s in self.segments if s.deletable]

    @property
    def segments_to_delete(self) -> int:
        return len(self.deletable)

    @property
    def bytes_to_free(self) -> int:
        return sum(s.size for s in self.deletable)

    def to_dict(self) -> dict:
        return {
            "directory": self.directory,
            "now": self.now,
            "now_iso": format_timestamp(self.now),
            "config": {
                "cleanup.policy": self.cleanup_policy,
                "retention.ms": {"value": self.retention_ms, "source": self.retention_ms_source},
                "retention.bytes": {"value": self.retention_bytes, "source": self.retention_bytes_source},
            },
            "high_watermark": {"value": self.high_watermark, "source": self.high_watermark_source},
            "log_start_offset": self.log_start_offset,
            "log_end_offset": self.log_end_offset,
            "log_size": self.log_size,
            "new_log_start_offset": self.new_log_start_offset,
            "segments_to_delete": self.segments_to_delete,
            "bytes_to_free": self.bytes_to_free,
            "roll": self.roll,
            "roll_base_offset": self.roll_base_offset,
            "passes": [p.to_dict() for p in self.passes],
            "segments": [s.to_dict() for s in self.segments],
        }

    def explain_lines(self) -> list[str]:
        """A human account: the inputs, one line per segment, then the outcome."""
        lines = [
            f"partition {self.directory}: log start {self.log_start_offset}, log end {self.log_end_offset}, "
            f"high watermark {self.high_watermark} (from {self.high_watermark_source}), "
            f"{format_bytes(self.log_size)} in {len(self.segments)} segment(s)",
            f"now {format_timestamp(self.now)}; cleanup.policy={self.cleanup_policy}; "
            f"retention.ms={self.retention_ms} ({_limit_text(self.retention_ms, format_duration)}, "
            f"from {self.retention_ms_source}); retention.bytes={self.retention_bytes} "
            f"({_limit_text(self.retention_bytes, format_bytes)}, from {self.retention_bytes_source})",
        ]
        for p in self.passes:
            lines.append(f"pass {p.rule}: {p.note}")
        for s in self.segments:
            verdict = f"[DELETE by {s.rule}]" if s.deletable else "[keep]"
            ts = f"{format_timestamp(s.largest_timestamp)} ({s.timestamp_source})"
            lines.append(f"{s.file_name}  offsets [{s.base_offset}, {s.next_offset})  {format_bytes(s.size)}  "
                         f"largest timestamp {ts}  {verdict} {s.reason}")
        if self.roll:
            lines.append(f"roll: every segment is deletable, so Kafka first rolls a new empty active segment "
                         f"{file_name(self.roll_base_offset, LOG_FILE_SUFFIX)}, which remains")
        if self.segments_to_delete:
            lines.append(f"result: delete {self.segments_to_delete} segment(s), {format_bytes(self.bytes_to_free)}; "
                         f"log start offset {self.log_start_offset} -> {self.new_log_start_offset}")
        else:
            lines.append("result: nothing to delete")
        return lines


def _limit_text(value: int, fmt) -> str:
    return "infinite" if value < 0 else fmt(value)


@dataclass
class _Seg:
    """A segment as the passes see it (facts read once from the LogSegment)."""

    base: int
    size: int
    max_ts: int
    mtime: int
    name: str

    @property
    def largest_ts(self) -> int:
        return self.max_ts if self.max_ts >= 0 else self.mtime


def plan_retention(log, *, now: int, retention_ms: int | None = None, retention_bytes: int | None = None,
                   high_watermark: int | None = None) -> RetentionPlan:
    """Evaluate Kafka's retention passes on ``log`` without changing anything.

    ``None`` means: from ``log.config`` (the limits) or ``log.high_watermark``. The passes
    see the log as the previous ones left it, exactly as ``deleteOldSegments`` runs them.
    Raises :class:`RetentionError` for a high watermark outside ``[0, log end offset]``.
    """
    cfg = log.config
    ms_source = "log.config" if retention_ms is None else "argument"
    bytes_source = "log.config" if retention_bytes is None else "argument"
    hw_source = "log" if high_watermark is None else "argument"
    retention_ms = cfg.retention_ms if retention_ms is None else retention_ms
    retention_bytes = cfg.retention_bytes if retention_bytes is None else retention_bytes
    leo = log.log_end_offset
    hw = log.high_watermark if high_watermark is None else high_watermark
    if not 0 <= hw <= leo:
        raise RetentionError(f"high watermark {hw} of {log.dir} is outside [0, log end offset {leo}]",
                             path=str(log.dir), offset=hw)

    segs = []
    decisions: dict[int, SegmentDecision] = {}
    all_segments = list(log.segments)
    for i, seg in enumerate(all_segments):
        max_ts = seg.max_timestamp_so_far.timestamp
        mtime = seg.last_modified
        s = _Seg(seg.base_offset, seg.size, max_ts, mtime, seg.log_path.name)
        segs.append(s)
        upper = all_segments[i + 1].base_offset if i + 1 < len(all_segments) else leo
        decisions[s.base] = SegmentDecision(
            file_name=s.name, base_offset=s.base, next_offset=upper, size=s.size, largest_timestamp=s.largest_ts,
            timestamp_source=TS_RECORD if max_ts >= 0 else TS_MTIME, max_record_timestamp=max_ts, mtime=mtime,
            is_active=i + 1 == len(all_segments))

    plan = RetentionPlan(
        directory=str(log.dir), now=now, cleanup_policy=cfg.cleanup_policy, retention_ms=retention_ms,
        retention_ms_source=ms_source, retention_bytes=retention_bytes, retention_bytes_source=bytes_source,
        high_watermark=hw, high_watermark_source=hw_source, log_start_offset=log.log_start_offset,
        log_end_offset=leo, log_size=sum(s.size for s in segs), segments=[decisions[s.base] for s in segs],
        passes=[], new_log_start_offset=log.log_start_offset)

    live = list(segs)
    lso = log.log_start_offset
    for rule in PASS_ORDER:
        if rule != RULE_LOG_START and not cfg.delete:
            plan.passes.append(PassSummary(rule, False, f"not run: cleanup.policy={cfg.cleanup_policy} has no delete"))
            continue
        summary = _run_pass(rule, live, decisions, lso=lso, leo=leo, hw=hw, now=now, retention_ms=retention_ms,
                            retention_bytes=retention_bytes)
        plan.passes.append(summary)
        if not summary.deleted_bases:
            continue
        doomed = list(summary.deleted_bases)
        if len(doomed) == len(live):
            # deleteSegments: a log keeps at least one segment, so roll a new one first.
            new_base = max(0, leo)
            summary.rolled = True
            plan.roll, plan.roll_base_offset = True, new_base
            live.append(_Seg(new_base, 0, -1, now, file_name(new_base, LOG_FILE_SUFFIX)))
            if doomed[-1] == new_base:  # Kafka's guard; an empty last segment is never selected
                doomed.pop()
                decisions[new_base].deletable = False
        if doomed:
            remaining = [s for s in live if s.base not in set(doomed)]
            lso = max(lso, remaining[0].base)
            live = remaining
    plan.new_log_start_offset = lso

    for d in plan.segments:
        d.reason = _reason(d)
    return plan


def _run_pass(rule, live: list[_Seg], decisions, *, lso, leo, hw, now, retention_ms, retention_bytes) -> PassSummary:
    """One ``deleteOldSegments(predicate)`` selection over ``live``; records a RuleCheck on
    every live segment's decision and marks the selected ones deletable."""
    log_size = sum(s.size for s in live)
    skipped = _pass_not_run(rule, live, decisions, log_size=log_size, retention_ms=retention_ms,
                            retention_bytes=retention_bytes)
    if skipped is not None:
        return skipped
    summary = PassSummary(rule, True, "", log_size_before=log_size if rule == RULE_SIZE else None)
    diff = log_size - retention_bytes if rule == RULE_SIZE else 0
    stopper: _Seg | None = None
    stop_text = ""
    for i, s in enumerate(live):
        d = decisions.get(s.base)
        if stopper is not None:
            if d is not None:
                d.checks.append(RuleCheck(rule, "behind", f"behind a kept segment (Kafka stops at the first segment "
                                                          f"it cannot delete: {stopper.name}, {stop_text})"))
            continue
        nxt = live[i + 1] if i + 1 < len(live) else None
        upper = nxt.base if nxt is not None else leo
        last_and_empty = nxt is None and s.size == 0
        outcome, text = "stop", ""
        if hw < upper:
            outcome = "hw"
            text = f"above the high watermark (its offsets reach {upper}, the high watermark is {hw})"
        else:
            # The predicate runs only after the high-watermark check (Kafka's &&); the size
            # predicate's running total changes only for a segment that passes it.
            if rule == RULE_LOG_START:
                ok, text = _log_start_predicate(s, nxt, lso)
            elif rule == RULE_SIZE:
                ok, text, diff = _size_predicate(s, diff, log_size, retention_bytes)
            else:
                ok, text = _time_predicate(s, now, retention_ms)
            if ok and last_and_empty:
                ok = False
            if ok:
                outcome = "delete"
            elif last_and_empty:
                outcome, text = "empty-active", "active segment and empty"
        if d is not None:
            d.checks.append(RuleCheck(rule, outcome, text))
        if outcome == "delete":
            summary.deleted_bases.append(s.base)
            if d is not None:
                d.deletable, d.rule = True, rule
        else:
            stopper, stop_text = s, _short_stop(outcome, rule, text)
    n = len(summary.deleted_bases)
    summary.note = f"selects {n} segment(s)" + (f", stops at {stopper.name} ({stop_text})" if stopper else
                                                ", every segment")
    return summary


def _pass_not_run(rule, live: list[_Seg], decisions, *, log_size: int, retention_ms: int,
                  retention_bytes: int) -> PassSummary | None:
    """The summary of a pass that does not run (its limit is infinite, or the partition is
    under retention.bytes), having noted why on every live segment; None when it runs."""

    def note_all(outcome: str, text: str) -> None:
        for s in live:
            d = decisions.get(s.base)  # None for the segment a roll would create
            if d is not None:
                d.checks.append(RuleCheck(rule, outcome, text))

    if rule == RULE_TIME and retention_ms < 0:
        note_all("skipped", "retention.ms is -1 (infinite)")
        return PassSummary(rule, False, "not run: retention.ms is -1 (infinite)")
    if rule == RULE_SIZE:
        if retention_bytes < 0:
            note_all("skipped", "retention.bytes is -1 (infinite)")
            return PassSummary(rule, False, "not run: retention.bytes is -1 (infinite)", log_size_before=log_size)
        if log_size < retention_bytes:
            text = f"partition is {format_bytes(log_size)}, under retention.bytes {format_bytes(retention_bytes)}"
            note_all("skipped", text)
            return PassSummary(rule, False, f"not run: {text}", log_size_before=log_size)
    return None


def _log_start_predicate(s: _Seg, nxt: _Seg | None, lso: int) -> tuple[bool, str]:
    """Log start offset: the next segment's base is at or below the log start offset."""
    ok = nxt is not None and nxt.base <= lso
    if ok:
        return ok, (f"deletable: the log start offset {lso} is at or past the next segment's base offset "
                    f"{nxt.base}, so every record here is below it")
    if nxt is None:
        return ok, "the log start offset rule never deletes the last segment"
    return ok, f"the log start offset {lso} is below the next segment's base offset {nxt.base}"


def _size_predicate(s: _Seg, diff: int, log_size: int, retention_bytes: int) -> tuple[bool, str, int]:
    """retention.bytes: ``diff - segment.size >= 0``, then ``diff -= segment.size``; returns
    the verdict, its text and the new ``diff``."""
    ok = diff - s.size >= 0
    head = f"partition is {format_bytes(log_size)}, retention.bytes {format_bytes(retention_bytes)}"
    if not ok:
        return ok, (f"{head}; only {format_bytes(diff)} is still over and this segment is "
                    f"{format_bytes(s.size)}, so deleting it would go below the limit; "
                    "retention by size stops here"), diff
    diff -= s.size
    left = (f"leaves {format_bytes(diff)} still over" if diff > 0
            else "leaves the partition exactly at retention.bytes")
    return ok, f"deletable: {head}; deleting this {format_bytes(s.size)} segment {left}", diff


def _time_predicate(s: _Seg, now: int, retention_ms: int) -> tuple[bool, str]:
    """retention.ms: ``now - largestTimestamp > retention.ms``."""
    age = now - s.largest_ts
    ok = age > retention_ms
    what = ("largest timestamp" if s.max_ts >= 0
            else "file modification time (the segment has no record timestamps)")
    if ok:
        return ok, (f"deletable: {what} {format_timestamp(s.largest_ts)} is {format_duration(age)} old, "
                    f"over retention.ms {format_duration(retention_ms)}")
    if age < 0:  # the wrong-clock producer: nothing passes this segment for a long time
        newest = ("the segment's newest record" if s.max_ts >= 0
                  else "the .log file's modification time")
        return ok, (f"held by a FUTURE timestamp {format_timestamp(s.largest_ts)} ({newest} is "
                    f"{format_duration(-age)} in the future); time-based retention cannot pass this segment "
                    "until then, and every later segment waits behind it")
    cmp = "under" if age < retention_ms else "exactly at (Kafka deletes only when older than)"
    return ok, (f"{format_duration(age)} old ({what} {format_timestamp(s.largest_ts)}), {cmp} "
                f"retention.ms {format_duration(retention_ms)}; retention by time stops here")


def _short_stop(outcome: str, rule: str, text: str) -> str:
    if outcome == "hw":
        return "above the high watermark"
    if outcome == "empty-active":
        return "the empty active segment"
    if "FUTURE" in text:
        return f"held by a future timestamp under {rule}"
    return f"kept by {rule}"


def _reason(d: SegmentDecision) -> str:
    """One sentence: the deleting pass's text, or the kept verdicts of the passes that ran."""
    if d.deletable:
        for c in d.checks:
            if c.outcome == "delete":
                return c.text
    limit_checks = [c for c in d.checks if c.rule != RULE_LOG_START]
    informative = [c for c in limit_checks if not c.text.endswith("(infinite)")]
    chosen = informative or [c for c in d.checks if c.rule == RULE_LOG_START]
    parts: list[str] = []
    for c in chosen:
        if c.text not in parts:
            parts.append(c.text)
    return "kept: " + "; ".join(parts) if parts else "kept"


# ------------------------------------------------------------------------------ deletion


@dataclass
class DeletedSegment:
    file_name: str
    base_offset: int
    next_offset: int
    size: int
    rule: str


@dataclass
class RetentionResult:
    """What :func:`delete_old_segments` did."""

    directory: str
    deleted: list[DeletedSegment]
    old_log_start_offset: int
    new_log_start_offset: int
    rolled: bool
    rolled_base_offset: int | None
    pending_files: list[str]  # renamed to *.deleted and left for sweep_deleted_files
    removed_files: list[str]  # *.deleted files removed at once (file.delete.delay.ms = 0)
    file_delete_delay_ms: int

    @property
    def bytes_freed(self) -> int:
        return sum(s.size for s in self.deleted)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["bytes_freed"] = self.bytes_freed
        return d


def delete_old_segments(log, plan: RetentionPlan | None = None, *, now: int, file_delete_delay_ms: int | None = None,
                        retention_ms: int | None = None, retention_bytes: int | None = None,
                        high_watermark: int | None = None) -> RetentionResult:
    """Carry out ``plan`` (default: :func:`plan_retention` with the same arguments) on a
    writable ``log`` whose directory lock the caller holds.

    Rolls first when the plan says so, raises the log start offset to the base of the
    first remaining segment, drops the segments from ``log.segments``, renames their files
    (oldest first, fsyncing the directory after each) and their producer snapshots to
    ``*.deleted`` with the deletion time as mtime, truncates the leader-epoch cache from
    the start, and removes the ``*.deleted`` files at once when the delay is 0. The caller
    writes the log-start-offset and recovery-point checkpoints afterwards (see the module
    docstring for why a crash before that is safe). Raises
    :class:`StaleRetentionPlanError` when ``plan`` was made for another state of the log.
    """
    if log.closed or not log.writable:
        raise RetentionError(f"retention needs an open, writable log: {log.dir}", path=str(log.dir))
    if plan is None:
        plan = plan_retention(log, now=now, retention_ms=retention_ms, retention_bytes=retention_bytes,
                              high_watermark=high_watermark)
    else:
        _check_plan_is_current(log, plan)
    delay = log.config.file_delete_delay_ms if file_delete_delay_ms is None else file_delete_delay_ms
    old_lso = log.log_start_offset
    result = RetentionResult(str(log.dir), [], old_lso, old_lso, False, None, [], [], delay)
    doomed = plan.deletable
    if not doomed:
        return result
    if plan.roll:
        rolled = log.roll()
        result.rolled, result.rolled_base_offset = True, rolled.base_offset
        if doomed[-1].base_offset == rolled.base_offset:
            doomed = doomed[:-1]
    if not doomed:
        return result
    segments = [log.segments.get(d.base_offset) for d in doomed]
    first_kept = log.segments.higher(doomed[-1].base_offset)
    new_lso = max(old_lso, first_kept.base_offset)
    # As Kafka: the log start offset moves before the segments leave the map, so no reader
    # is ever sent to an offset whose segment is gone.
    _increment_log_start_offset(log, new_lso)
    for seg in segments:
        log.segments.remove(seg.base_offset)
    now_ns = now * 1_000_000
    for seg, d in zip(segments, doomed):
        result.pending_files.extend(_rename_segment_to_deleted(seg, now_ns))
        fsync_dir(log.dir)
        result.deleted.append(DeletedSegment(d.file_name, d.base_offset, d.next_offset, d.size, d.rule))
    if log.producer_state is not None:
        renamed = False
        for seg in segments:
            path = log.producer_state.remove_and_mark_snapshot_for_deletion(seg.base_offset)
            if path is not None:
                _stamp_deletion_time(path, now_ns)
                result.pending_files.append(path.name)
                renamed = True
        if renamed:
            fsync_dir(log.dir)
    log.epoch_cache.truncate_from_start(new_lso)
    result.new_log_start_offset = new_lso
    if delay <= 0:
        for name in result.pending_files:
            try:
                os.unlink(log.dir / name)
            except FileNotFoundError:
                continue
            result.removed_files.append(name)
        result.pending_files = []
        fsync_dir(log.dir)
    return result


def _check_plan_is_current(log, plan: RetentionPlan) -> None:
    now_state = ([(s.base_offset, s.size) for s in log.segments], log.log_start_offset, log.log_end_offset)
    planned = ([(s.base_offset, s.size) for s in plan.segments], plan.log_start_offset, plan.log_end_offset)
    if now_state != planned or str(log.dir) != plan.directory:
        raise StaleRetentionPlanError(
            f"the retention plan for {plan.directory} was made for log start {plan.log_start_offset}, log end "
            f"{plan.log_end_offset} and {len(plan.segments)} segment(s); the log now has log start "
            f"{log.log_start_offset}, log end {log.log_end_offset} and {len(log.segments)} segment(s)")


def _increment_log_start_offset(log, new_lso: int) -> None:
    """``UnifiedLog.maybeIncrementLogStartOffset`` + ``updateLogStartOffset`` for a deletion:
    the high watermark and recovery point are never left below the log start offset."""
    if new_lso <= log.log_start_offset:
        return
    log.log_start_offset = new_lso
    if log.high_watermark < new_lso:
        log.high_watermark = new_lso
    if log.recovery_point < new_lso:
        log.recovery_point = new_lso
    if log.producer_state is not None:
        log.producer_state.on_log_start_offset_incremented(new_lso)


def _rename_segment_to_deleted(seg, now_ns: int) -> list[str]:
    """``changeFileSuffixes("", ".deleted")``: the ``.log`` first (from then on the loader
    sees no segment here; the indexes left behind are orphans it deletes), then the
    indexes. Each renamed file gets the deletion time as its mtime. Returns the new names."""
    paths = [seg.log_path, seg.offset_index.path, seg.time_index.path, seg.txn_index.path]
    existed = [p.exists() for p in paths]
    seg.close_handlers()
    if not seg.has_suffix(DELETED_SUFFIX):
        seg.change_file_suffixes("", DELETED_SUFFIX)
    new_paths = [seg.log_path, seg.offset_index.path, seg.time_index.path, seg.txn_index.path]
    names = []
    for path, was in zip(new_paths, existed):
        if was and path.exists():
            _stamp_deletion_time(path, now_ns)
            names.append(path.name)
    return names


def _stamp_deletion_time(path: Path, now_ns: int) -> None:
    # A rename keeps the old mtime; the sweep needs the time of the deletion instead.
    os.utime(path, ns=(now_ns, now_ns))


def sweep_deleted_files(partition_dir: str | os.PathLike, *, now: int, file_delete_delay_ms: int) -> list[str]:
    """Remove the ``*.deleted`` files of ``partition_dir`` whose deletion (their mtime, set
    by :func:`delete_old_segments`) is at least ``file_delete_delay_ms`` before ``now``
    (Kafka's ``delete-file`` task runs once the delay has passed).

    A ``*.deleted`` file renamed by a Kafka broker keeps its last-write mtime and so goes
    at once; the broker would have removed it within the delay, and the loader deletes
    every ``*.deleted`` anyway. KRaft ``*.checkpoint.deleted`` files are left alone, as the
    loader does. Returns the names removed, sorted."""
    directory = Path(partition_dir)
    removed = []
    with os.scandir(directory) as it:
        for entry in it:
            name = entry.name
            if not is_deleted_file(name):
                continue
            if not entry.is_file(follow_symlinks=False):
                continue
            deleted_at = entry.stat(follow_symlinks=False).st_mtime_ns // 1_000_000
            if now - deleted_at >= file_delete_delay_ms:
                try:
                    os.unlink(entry.path)
                except FileNotFoundError:
                    continue
                removed.append(name)
    if removed:
        fsync_dir(directory)
    return sorted(removed)


__all__ = [
    "PASS_ORDER",
    "RULE_LOG_START",
    "RULE_SIZE",
    "RULE_TIME",
    "TS_MTIME",
    "TS_RECORD",
    "DeletedSegment",
    "PassSummary",
    "RetentionError",
    "RetentionPlan",
    "RetentionResult",
    "RuleCheck",
    "SegmentDecision",
    "StaleRetentionPlanError",
    "delete_old_segments",
    "format_bytes",
    "format_duration",
    "format_timestamp",
    "plan_retention",
    "sweep_deleted_files",
]
