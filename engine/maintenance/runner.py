"""Retention and compaction over a path: what ``plog retention``, ``plog compact`` and
``plog maintain`` run.

PATH is a segment file, a partition folder, a log directory or a data directory
(``discovery``). Per log directory:

* **Real run**: the directory is opened the way a broker starts (``LogManager``: take the
  ``.lock``, delete the clean-shutdown marker, recover from the recovery points if it was
  not clean; partitions are opened lazily otherwise), each selected partition gets its
  effective topic config (``topic_configs.ConfigResolver``), retention
  (``retention.delete_old_segments``) and/or the cleaner (``cleaner.clean_log``) run, the
  ``cleaner-offset-checkpoint`` is written for cleaned partitions, and closing the manager
  writes the recovery-point / log-start-offset / replication-offset checkpoints and the
  clean-shutdown marker. A crash at any moment leaves a directory that the next open (or
  ``plog recover``) turns into a valid log: every file step goes through Kafka's
  ``.cleaned``/``.swap``/``.deleted`` protocol and the marker is absent while work runs.
* **Dry run**: nothing is locked or written. Partitions open read-only; the plans say what
  a real run would do and why.

Which partitions each operation touches, as a broker decides: retention runs the
delete-policy passes on every partition (``compact``-only logs get only the log-start
pass); the cleaner runs on ``compact`` logs. ``maintain`` runs the cleaner first (a
``compact,delete`` log is cleaned, then retention), then retention, as Kafka's cleaner
thread and retention task would in one cycle.
"""

from __future__ import annotations

import fcntl
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from plog.engine.errors import EngineError, LogDirLockedError, MaintenanceError
from plog.engine.maintenance.cleaner_manager import DEFAULT_BUFFER_SIZE, read_cleaner_offsets, update_cleaner_offsets
from plog.engine.storage.discovery import (
    LogDirCheckpoints,
    PartitionInfo,
    classify,
    partitions as find_partitions,
    read_checkpoints,
    segment_base_offset,
)
from plog.engine.storage.file_names import (
    CLEAN_SHUTDOWN,
    CLEANER_OFFSET_CHECKPOINT,
    CLUSTER_METADATA_TOPIC,
    LOG_START_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
)
from plog.engine.storage.log import Log
from plog.engine.storage.log_config import LogConfig
from plog.engine.storage.topic_configs import ConfigResolver, EffectiveConfig

RETENTION = "retention"
COMPACTION = "compaction"

#: The topic configs each operation reports (with their sources) in its explanation.
RELEVANT_CONFIGS = {
    RETENTION: ("cleanup.policy", "retention.ms", "retention.bytes", "file.delete.delay.ms"),
    COMPACTION: ("cleanup.policy", "min.cleanable.dirty.ratio", "delete.retention.ms", "min.compaction.lag.ms",
                 "max.compaction.lag.ms", "segment.bytes", "file.delete.delay.ms"),
}


@dataclass
class MaintenanceOptions:
    """What the caller chose. ``overrides`` are topic config names applied to every topic
    (``--retention-ms`` ...); ``topics`` limits the run; ``now_ms`` pins the clock."""

    dry_run: bool = False
    now_ms: int | None = None
    overrides: dict[str, str] = field(default_factory=dict)
    server_properties: str | None = None
    topics: tuple[str, ...] | None = None
    file_delete_delay_ms: int | None = None  # None: each topic's file.delete.delay.ms
    buffer_size: int = DEFAULT_BUFFER_SIZE
    force: bool = False  # compact even when the dirty ratio is under min.cleanable.dirty.ratio
    include_internal: bool = True

    def now(self) -> int:
        return self.now_ms if self.now_ms is not None else int(time.time() * 1000)


@dataclass
class PartitionOutcome:
    """One operation on one partition: the plan, and (real run) what was done."""

    operation: str
    log_dir: str | None
    partition: str
    configs: dict[str, str]  # name -> "value (source)"
    plan: dict | None = None
    result: dict | None = None
    skipped: str | None = None
    explanation: list[str] = field(default_factory=list)
    has_work: bool = False
    summary: str = ""  # one line: what would be / was done

    def to_dict(self) -> dict:
        return {"operation": self.operation, "log_dir": self.log_dir, "partition": self.partition,
                "summary": self.summary, "configs": self.configs, "has_work": self.has_work,
                "skipped": self.skipped, "plan": self.plan, "result": self.result, "explanation": self.explanation}


@dataclass
class LogDirOutcome:
    path: str
    clean_shutdown: bool | None
    recovered_partitions: int = 0
    cleaner_checkpoint_written: bool = False
    swept_files: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"path": self.path, "clean_shutdown": self.clean_shutdown,
                "recovered_partitions": self.recovered_partitions,
                "cleaner_checkpoint_written": self.cleaner_checkpoint_written, "swept_files": self.swept_files}


@dataclass
class MaintenanceReport:
    operations: tuple[str, ...]
    path: str
    dry_run: bool
    now_ms: int
    log_dirs: list[LogDirOutcome] = field(default_factory=list)
    partitions: list[PartitionOutcome] = field(default_factory=list)

    @property
    def has_work(self) -> bool:
        return any(p.has_work for p in self.partitions)

    def to_dict(self) -> dict:
        return {"operations": list(self.operations), "path": self.path, "dry_run": self.dry_run,
                "now_ms": self.now_ms, "has_work": self.has_work,
                "log_dirs": [d.to_dict() for d in self.log_dirs],
                "partitions": [p.to_dict() for p in self.partitions]}


# -- entry points -------------------------------------------------------------------------------


def run_retention(path: str | os.PathLike, options: MaintenanceOptions | None = None,
                  progress=None) -> MaintenanceReport:
    return run(path, (RETENTION,), options, progress)


def run_compaction(path: str | os.PathLike, options: MaintenanceOptions | None = None,
                   progress=None) -> MaintenanceReport:
    return run(path, (COMPACTION,), options, progress)


def run_maintenance(path: str | os.PathLike, options: MaintenanceOptions | None = None,
                    progress=None) -> MaintenanceReport:
    return run(path, (COMPACTION, RETENTION), options, progress)


def run(path: str | os.PathLike, operations: tuple[str, ...], options: MaintenanceOptions | None = None,
        progress=None) -> MaintenanceReport:
    """Run ``operations`` (in order) on every selected partition under ``path``."""
    options = options or MaintenanceOptions()
    path = os.fspath(path)
    now = options.now()
    report = MaintenanceReport(tuple(operations), path, options.dry_run, now)
    for log_dir, parts in _targets(path, options):
        if options.dry_run:
            _plan_log_dir(log_dir, parts, operations, options, now, report)
        elif log_dir is None:
            for part in parts:
                _run_standalone_partition(part, operations, options, now, report, progress)
        else:
            _run_log_dir(log_dir, parts, operations, options, now, report, progress)
    return report


# -- selection ---------------------------------------------------------------------------------


def _is_log_dir(path: str) -> bool:
    try:
        return classify(path) == "logdir"
    except (OSError, ValueError):
        return False


def _targets(path: str, options: MaintenanceOptions) -> list[tuple[str | None, list[PartitionInfo]]]:
    """``(log dir or None, partitions)`` groups; None for a partition folder outside a log dir."""
    groups: dict[str | None, list[PartitionInfo]] = {}
    log_dir_of: dict[str, str | None] = {}  # parent -> itself if a log dir (classified once each)
    found_parts = find_partitions(path)
    if os.path.isfile(path) and (segment_base_offset(path) is None
                                 or any(p.topic_partition is None for p in found_parts)):
        # A file that names no partition (meta.properties, a stray .log) would otherwise
        # be "0 partition operations" and exit 0, as if all were well.
        raise MaintenanceError(f"{path}: not a segment file of a partition folder "
                               "(<20-digit base offset>.log and its indexes, in <topic>-<partition>)", path=str(path))
    for part in found_parts:
        tp = part.topic_partition
        if tp is None or part.kind != "current" or tp.topic == CLUSTER_METADATA_TOPIC:
            continue  # the KRaft metadata log is the Raft layer's, not retention's or the cleaner's
        if options.topics and tp.topic not in options.topics:
            continue
        if not options.include_internal and tp.topic.startswith("__"):
            continue
        parent = os.path.dirname(os.path.abspath(part.path))
        if parent not in log_dir_of:
            log_dir_of[parent] = parent if _is_log_dir(parent) else None
        groups.setdefault(log_dir_of[parent], []).append(part)
    if options.topics:
        found = {p.topic_partition.topic for parts in groups.values() for p in parts}
        missing = [t for t in options.topics if t not in found]
        if missing:
            raise MaintenanceError(f"{path}: no partition of topic {', '.join(missing)}", path=str(path))
    return list(groups.items())


def _config_summary(eff: EffectiveConfig, operation: str) -> dict[str, str]:
    values = eff.config.to_properties(all_values=True)
    return {name: f"{values[name]} ({eff.source_of(name)})" for name in RELEVANT_CONFIGS[operation]}


def _applies(operation: str, config: LogConfig) -> str | None:
    """Why ``operation`` does not apply to a log with ``config`` (None when it does)."""
    if operation == COMPACTION and not config.compact:
        return f"cleanup.policy={config.cleanup_policy}: the cleaner only compacts logs whose policy includes compact"
    return None


# -- dry run -----------------------------------------------------------------------------------------


def _plan_log_dir(log_dir, parts, operations, options, now, report) -> None:
    clean = os.path.exists(os.path.join(log_dir, CLEAN_SHUTDOWN)) if log_dir else None
    report.log_dirs.append(LogDirOutcome(log_dir or os.path.dirname(parts[0].path), clean))
    resolver = ConfigResolver(log_dir or os.path.dirname(os.path.abspath(parts[0].path)),
                              overrides=options.overrides, server_properties=options.server_properties)
    # A partition folder outside any log directory has no checkpoints. A malformed one stops
    # the plan as it stops the real run (LogManager, the cleaner); an unreadable one is empty.
    checkpoints = read_checkpoints(log_dir) if log_dir is not None else LogDirCheckpoints("")
    checkpoints.raise_malformed(LOG_START_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT, CLEANER_OFFSET_CHECKPOINT)
    starts, hws, cleaner = checkpoints.log_starts, checkpoints.high_watermarks, checkpoints.cleaner_offsets
    for part in parts:
        tp = part.topic_partition
        eff = resolver.resolve(tp.topic)
        try:
            log = Log.open(part.path, eff.config, log_start_offset=starts.get(tp, 0), writable=False)
        except (FileNotFoundError, EngineError, ValueError) as e:
            for op in operations:
                report.partitions.append(PartitionOutcome(op, log_dir, part.name, _config_summary(eff, op),
                                                          skipped=f"cannot open: {e}"))
            continue
        try:
            hw = hws.get(tp)
            if hw is not None:
                log.high_watermark = max(log.log_start_offset, min(hw, log.log_end_offset))
            for op in operations:
                outcome = PartitionOutcome(op, log_dir, part.name, _config_summary(eff, op))
                if clean is False:
                    outcome.explanation.append(
                        "the log directory was not shut down cleanly: a real run recovers it first, or refuses "
                        "when that would lose data (see plog recover --dry-run); this plan reads the files as they are")
                _plan_one(op, log, eff, cleaner.get(tp), options, now, outcome)
                report.partitions.append(outcome)
        finally:
            log.close()


def _plan_one(op: str, log: Log, eff: EffectiveConfig, first_dirty: int | None, options, now: int,
              outcome: PartitionOutcome) -> None:
    why_not = _applies(op, eff.config)
    if why_not:
        outcome.skipped = why_not
        return
    if op == RETENTION:
        from plog.engine.maintenance.retention import plan_retention

        plan = plan_retention(log, now=now)
        outcome.plan = plan.to_dict()
        outcome.explanation.extend(plan.explain_lines())
        outcome.has_work = plan.segments_to_delete > 0
        outcome.summary = _retention_plan_summary(plan)
    else:
        from plog.engine.maintenance.cleaner import explain_compaction

        plan = explain_compaction(log, first_dirty_offset=first_dirty, now=now, buffer_size=options.buffer_size)
        outcome.plan = plan.to_dict()
        outcome.explanation.extend(plan.explain_lines())
        forced = options.force and plan.cleanability.cleanable_bytes > 0
        outcome.has_work = plan.would_clean or forced
        if forced and not plan.would_clean:
            outcome.explanation.append("--force: it is cleaned anyway.")
        outcome.summary = _compaction_plan_summary(plan, outcome.has_work)


def _retention_plan_summary(plan) -> str:
    from plog.engine.maintenance.retention import format_bytes

    if plan.segments_to_delete:
        return (f"would delete {plan.segments_to_delete} segment(s), {format_bytes(plan.bytes_to_free)}; "
                f"log start offset {plan.log_start_offset} -> {plan.new_log_start_offset}"
                + ("; rolls a new active segment first" if plan.roll else ""))
    first_kept = next((s for s in plan.segments if not s.deletable), None)
    return "nothing to delete" + (f" ({first_kept.file_name}: {first_kept.reason})" if first_kept else "")


def _retention_result_summary(plan, result) -> str:
    from plog.engine.maintenance.retention import format_bytes

    if not result.deleted:
        return _retention_plan_summary(plan)
    text = (f"deleted {len(result.deleted)} segment(s), {format_bytes(result.bytes_freed)}; log start offset "
            f"{result.old_log_start_offset} -> {result.new_log_start_offset}")
    if result.pending_files:
        text += (f"; {len(result.pending_files)} *.deleted file(s) left for readers, removed once "
                 f"file.delete.delay.ms={result.file_delete_delay_ms} has passed or when the log is next opened "
                 "for writing")
    return text


def _compaction_plan_summary(plan, has_work: bool) -> str:
    c, st = plan.cleanability, plan.stats
    if not has_work:
        return f"would not clean: {c.reason}"
    return (f"would clean offsets {c.first_dirty_offset}..{c.first_uncleanable_offset} (dirty ratio "
            f"{c.dirty_ratio:.2f}) in {plan.rounds_needed} round(s): {st.records_removed} of {st.records_read} "
            f"records, {st.bytes_read - st.bytes_written} bytes would go")


def _compaction_result_summary(result) -> str:
    if not result.cleaned:
        return f"not cleaned: {result.reason}"
    st = result.stats
    return (f"cleaned in {result.rounds} round(s): {result.segments_before} -> {result.segments_after} segment(s), "
            f"{result.size_before} -> {result.size_after} bytes, {st.records_read - st.records_kept} record(s) "
            f"removed ({st.tombstones_removed} tombstone(s), {st.aborted_records_removed} aborted); "
            f"cleaner checkpoint {result.checkpoint_offset}")


# -- real run ----------------------------------------------------------------------------------------


def _refuse_lossy_recovery(path: str, *, all_segments: bool = False) -> None:
    """Raise :class:`MaintenanceError` when the recovery a maintenance run starts with (the
    directory was not shut down cleanly) would cut or delete anything. Retention and
    compaction delete what their policies say; what damage costs is for the operator to
    decide with ``plog recover``, whose plan names it, not a side effect of another command.
    A plog writer killed mid-work leaves no torn batch (it writes whole batches), so its
    directory recovers without loss and maintenance goes on; a torn tail needs a machine
    crash, and the bytes at the end of a segment cannot tell a torn batch from damage."""
    from plog.engine.maintenance.recovery import plan_recovery

    plan = plan_recovery(path, all_segments=all_segments)
    losses = []
    for p in plan.partitions:
        name = p.topic_partition or os.path.basename(p.path)
        t = p.truncation
        if t is not None:
            losses.append(f"{name}: truncate {t.file} at byte {t.position}, {t.bytes} bytes ({t.kind})")
        losses.extend(f"{name}: delete {d.file}" for d in p.deleted_segments)
    if losses:
        more = f" and {len(losses) - 1} more" if len(losses) > 1 else ""
        raise MaintenanceError(
            f"{path} was not shut down cleanly, and recovering it first would cut data ({losses[0]}{more}); "
            f"plog recover --dry-run {path} shows what that loses, plog recover (or --salvage) does it; "
            f"then run this again", path=str(path))


def _run_log_dir(log_dir, parts, operations, options, now, report, progress) -> None:
    from plog.engine.storage.log_manager import LogManager

    clean = os.path.exists(os.path.join(log_dir, CLEAN_SHUTDOWN))
    outcome_dir = LogDirOutcome(log_dir, clean)
    report.log_dirs.append(outcome_dir)
    resolver = ConfigResolver(log_dir, overrides=options.overrides, server_properties=options.server_properties)
    if not clean:
        _refuse_lossy_recovery(log_dir)
    try:
        # An existing log directory is maintained as it is: never given a meta.properties
        # (a broker refuses to start on a log directory whose cluster.id is not its own).
        lm = LogManager([log_dir], lazy=True, time_source=(lambda: now) if options.now_ms is not None else None,
                        format_missing=False)
    except LogDirLockedError as e:
        raise MaintenanceError(f"{e} (stop the broker or the plog writer first)", path=e.path) from None
    try:
        if not clean:
            outcome_dir.recovered_partitions = sum(
                1 for r in lm.report.logs if r is not None and not r.clean_shutdown)
        cleaner = read_cleaner_offsets(log_dir)
        cleaned_any = False
        for part in parts:
            tp = part.topic_partition
            log = lm.get_log(tp)
            if log is None:
                continue
            eff = resolver.resolve(tp.topic)
            log.config = eff.config
            for op in operations:
                outcome = PartitionOutcome(op, log_dir, part.name, _config_summary(eff, op))
                new_dirty = _execute_one(op, log, eff, cleaner.get(tp), options, now, outcome, progress)
                if new_dirty is not None:
                    cleaner[tp] = new_dirty
                    cleaned_any = True
                report.partitions.append(outcome)
            outcome_dir.swept_files.extend(_sweep(log, eff, options, now))
        if cleaned_any:
            update_cleaner_offsets(log_dir, cleaner, set(lm.partitions()))
            outcome_dir.cleaner_checkpoint_written = True
    finally:
        lm.close()


def _run_standalone_partition(part, operations, options, now, report, progress) -> None:
    """A partition folder outside any log directory (a copy taken off a broker): no
    checkpoints, no marker, so it is recovered in full first; the folder itself is locked."""
    parent = os.path.dirname(os.path.abspath(part.path))
    report.log_dirs.append(LogDirOutcome(parent, None))
    resolver = ConfigResolver(parent, overrides=options.overrides, server_properties=options.server_properties)
    tp = part.topic_partition
    eff = resolver.resolve(tp.topic)
    _refuse_lossy_recovery(part.path, all_segments=True)
    fd = os.open(part.path, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise MaintenanceError(f"{part.path} is being maintained by another process", path=str(part.path)) from None
        log = Log.open(part.path, eff.config, had_clean_shutdown=False, recovery_point=0)
        try:
            for op in operations:
                outcome = PartitionOutcome(op, None, part.name, _config_summary(eff, op))
                outcome.explanation.append("a partition folder outside a log directory: recovered in full first; "
                                           "no cleaner-offset-checkpoint (the whole log counts as dirty)")
                _execute_one(op, log, eff, None, options, now, outcome, progress)
                report.partitions.append(outcome)
            report.log_dirs[-1].swept_files.extend(_sweep(log, eff, options, now))
        finally:
            log.close()
    finally:
        os.close(fd)


def _execute_one(op, log, eff, first_dirty, options, now, outcome, progress) -> int | None:
    """Run one operation; returns the new cleaner checkpoint offset after a clean."""
    why_not = _applies(op, eff.config)
    if why_not:
        outcome.skipped = why_not
        return None
    delay = options.file_delete_delay_ms if options.file_delete_delay_ms is not None else \
        eff.config.file_delete_delay_ms
    if op == RETENTION:
        from plog.engine.maintenance.retention import delete_old_segments, plan_retention

        plan = plan_retention(log, now=now)
        outcome.plan = plan.to_dict()
        outcome.explanation.extend(plan.explain_lines())
        result = delete_old_segments(log, plan, now=now, file_delete_delay_ms=delay)
        outcome.result = result.to_dict()
        outcome.has_work = bool(result.deleted)
        outcome.summary = _retention_result_summary(plan, result)
        return None
    from plog.engine.maintenance.cleaner import clean_log

    result = clean_log(log, first_dirty_offset=first_dirty, now=now, buffer_size=options.buffer_size,
                       force=options.force, progress=progress, file_delete_delay_ms=delay)
    outcome.result = result.to_dict()
    if result.cleanability is not None:
        outcome.explanation.append(f"dirty ratio {result.cleanability.dirty_ratio:.4f} (min.cleanable.dirty.ratio "
                                   f"{result.cleanability.min_cleanable_dirty_ratio}); first uncleanable offset "
                                   f"{result.cleanability.first_uncleanable_offset} "
                                   f"({result.cleanability.uncleanable_bound})")
    outcome.has_work = result.cleaned
    outcome.summary = _compaction_result_summary(result)
    # Kafka records an offset only for a log it cleaned, or whose stored offset it had to reset.
    reset = first_dirty is not None and result.cleanability is not None and result.cleanability.first_dirty_reset
    return result.checkpoint_offset if result.cleaned or reset else None


def _sweep(log, eff, options, now) -> list[str]:
    """Remove ``.deleted`` files whose ``file.delete.delay.ms`` has passed (earlier runs')."""
    from plog.engine.maintenance.retention import sweep_deleted_files

    delay = options.file_delete_delay_ms if options.file_delete_delay_ms is not None else \
        eff.config.file_delete_delay_ms
    return [str(Path(log.dir.name) / name) for name in
            sweep_deleted_files(log.dir, now=now, file_delete_delay_ms=delay)]


__all__ = [
    "COMPACTION",
    "MaintenanceError",
    "MaintenanceOptions",
    "MaintenanceReport",
    "PartitionOutcome",
    "RETENTION",
    "run",
    "run_compaction",
    "run_maintenance",
    "run_retention",
]


# -- the embedded engine's own maintenance -------------------------------------------------------

#: Broker settings the embedded engine honours (cluster.json ``broker_configs``), Kafka's defaults.
ENGINE_DEFAULTS = {
    "log.retention.check.interval.ms": "300000",
    "log.cleaner.enable": "true",
    "log.cleaner.backoff.ms": "15000",
    "log.cleaner.dedupe.buffer.size": str(DEFAULT_BUFFER_SIZE),
    # Replication (engine.replication): a follower not caught up for this long leaves the
    # ISR; a crashed broker is fenced (leaves its ISRs, loses leaderships) after this long.
    "replica.lag.time.max.ms": "30000",
    "broker.session.timeout.ms": "9000",
}
STATE_FILE = ".plog-maintenance.json"


def engine_settings(broker_configs: dict[str, str] | None) -> dict[str, str]:
    """``ENGINE_DEFAULTS`` overlaid with a data directory's broker configs (validated)."""
    settings = dict(ENGINE_DEFAULTS)
    for name, value in (broker_configs or {}).items():
        if name in settings:
            settings[name] = str(value)
    for name in ("log.retention.check.interval.ms", "log.cleaner.backoff.ms", "log.cleaner.dedupe.buffer.size",
                 "replica.lag.time.max.ms", "broker.session.timeout.ms"):
        try:
            if int(settings[name]) < 0:
                raise ValueError
        except ValueError:
            raise MaintenanceError(f"broker config {name} must be a non-negative integer, not {settings[name]!r}")
    if settings["log.cleaner.enable"].lower() not in ("true", "false"):
        raise MaintenanceError(f"broker config log.cleaner.enable must be true or false, "
                               f"not {settings['log.cleaner.enable']!r}")
    return settings


def run_due(lm, settings: dict[str, str], now: int | None = None) -> list[PartitionOutcome]:
    """What a broker's background threads would have done by now, on the logs ``lm`` has
    open (the ones this writer touched): the cleaner every ``log.cleaner.backoff.ms``,
    retention and the removal of expired ``.deleted`` files every
    ``log.retention.check.interval.ms``. The last run times live in each log directory's
    ``.plog-maintenance.json`` (plog's own file; Kafka ignores it), so short-lived writers
    (one ``plog produce`` after another) keep the broker's cadence.

    The caller holds the directory's lock and closes ``lm`` afterwards (which writes the
    log-start and recovery-point checkpoints).
    """
    import json

    from plog.engine.storage.checkpoints import atomic_write

    now = int(time.time() * 1000) if now is None else now
    outcomes: list[PartitionOutcome] = []
    for log_dir in lm.log_dirs:
        state_path = Path(log_dir) / STATE_FILE
        try:
            state = json.loads(state_path.read_text())
            if not isinstance(state, dict):
                state = {}
        except (OSError, ValueError):
            state = {}
        logs = [(tp, log) for tp, log in lm.logs.items() if lm.log_dir_of(tp) == Path(log_dir)
                and not log.closed and tp.topic != CLUSTER_METADATA_TOPIC]
        changed = False
        cleaner_due = settings["log.cleaner.enable"].lower() == "true" and \
            now - int(state.get("last_cleaner_ms", 0)) >= int(settings["log.cleaner.backoff.ms"])
        retention_due = now - int(state.get("last_retention_ms", 0)) >= \
            int(settings["log.retention.check.interval.ms"])
        options = MaintenanceOptions(now_ms=now, buffer_size=int(settings["log.cleaner.dedupe.buffer.size"]))
        if cleaner_due and any(log.config.compact for _, log in logs):
            cleaner = read_cleaner_offsets(log_dir)
            cleaned = False
            for tp, log in logs:
                if not log.config.compact:
                    continue
                eff = EffectiveConfig(tp.topic, log.config, {})
                outcome = PartitionOutcome(COMPACTION, str(log_dir), log.dir.name, {})
                new_dirty = _execute_one(COMPACTION, log, eff, cleaner.get(tp), options, now, outcome, None)
                if new_dirty is not None:
                    cleaner[tp] = new_dirty
                    cleaned = True
                outcomes.append(outcome)
            if cleaned:
                update_cleaner_offsets(log_dir, cleaner, set(lm.partitions()))
        if cleaner_due:
            state["last_cleaner_ms"] = now
            changed = True
        if retention_due:
            for tp, log in logs:
                eff = EffectiveConfig(tp.topic, log.config, {})
                outcome = PartitionOutcome(RETENTION, str(log_dir), log.dir.name, {})
                _execute_one(RETENTION, log, eff, None, options, now, outcome, None)
                _sweep(log, eff, options, now)
                outcomes.append(outcome)
            state["last_retention_ms"] = now
            changed = True
        if changed:
            atomic_write(state_path, json.dumps(state, sort_keys=True) + "\n")
    return outcomes
