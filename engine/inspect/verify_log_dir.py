"""``plog verify`` of a log directory's own files (``meta.properties``, the clean-shutdown
marker, the offset checkpoints; plog's ``cluster.json`` assignment), and what they say
about each partition (:class:`PartitionContext`, the input of
:func:`~plog.engine.inspect.verify_partition.verify_partition`). The checks by name are
listed in :mod:`plog.engine.inspect.verify`.

Text files are read whole, up to :data:`MAX_TEXT_FILE` bytes, and parsed with Kafka's own
rules (:mod:`plog.formats.checkpoints`); a finding's position is the start of the line.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Iterable, NamedTuple

from plog.formats.checkpoints import parse_clean_shutdown, parse_meta_properties, parse_offset_checkpoint
from plog.formats.errors import FormatError

from plog.engine.errors import EngineError
from plog.engine.storage.discovery import LOG_DIR_FILES, LogDirInfo, PartitionInfo
from plog.engine.storage.file_names import (
    BOOTSTRAP_CHECKPOINT,
    CLEAN_SHUTDOWN,
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    META_PROPERTIES,
    PARTITION_METADATA,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    partition_dir_name,
)
from plog.engine.storage.findings import ERROR, WARNING, Finding, Reporter, VerifyOptions, VerifyStats, io_finding
from plog.engine.storage.segment_check import verify_batch_file

#: Text files (checkpoints, metadata) larger than this are not parsed.
MAX_TEXT_FILE = 64 << 20


class CheckpointMark(NamedTuple):
    """An offset read from a checkpoint file, and where (for the finding's position)."""

    offset: int
    path: str
    position: int


@dataclass(frozen=True)
class PartitionContext:
    """What the log directory says about one partition (its checkpoint entries, ...)."""

    recovery_point: CheckpointMark | None = None
    log_start_offset: CheckpointMark | None = None
    high_watermark: CheckpointMark | None = None
    cleaner_offset: CheckpointMark | None = None
    had_clean_shutdown: bool | None = None  # None: unknown (no log directory around it)
    expect_partition_metadata: bool = False
    kraft: bool = False  # meta.properties version 1: a KRaft broker's log directory


# -- text files ------------------------------------------------------------------------------


def read_text(path: str, rep: Reporter, stats: VerifyStats, check: str, limit: int = MAX_TEXT_FILE,
              too_large: str = "the file is {size} bytes, too large for this kind of file") -> bytes | None:
    """The whole file (counted in ``stats``), or None after a finding: ``check`` when it is
    larger than ``limit`` (``too_large`` formatted with its ``size``), ``io`` when it cannot
    be read."""
    try:
        with open(path, "rb", buffering=0) as f:
            size = os.fstat(f.fileno()).st_size
            stats.files += 1
            stats.bytes += size
            if size > limit:
                rep(ERROR, check, path, None, None, too_large.format(size=size))
                return None
            return f.read(limit + 1)
    except OSError as e:
        io_finding(rep, path, e)
        return None


def line_starts(data: bytes) -> list[tuple[int, list[bytes]]]:
    """``(byte position, whitespace-split parts)`` of each line (checkpoint framing)."""
    out, pos = [], 0
    for line in re.split(rb"\r\n|\r|\n", data):
        out.append((pos, line.split()))
        pos += len(line) + 1
    return out


def _checkpoint_positions(data: bytes) -> dict[tuple[str, int], int]:
    positions = {}
    for pos, parts in line_starts(data)[2:]:
        if len(parts) == 3:
            try:
                positions[(parts[0].decode("utf-8", "replace"), int(parts[1]))] = pos
            except ValueError:
                continue
    return positions


# -- log directories -------------------------------------------------------------------------

_CHECKPOINT_FIELDS = {
    RECOVERY_POINT_CHECKPOINT: "recovery_point",
    LOG_START_OFFSET_CHECKPOINT: "log_start_offset",
    REPLICATION_OFFSET_CHECKPOINT: "high_watermark",
    CLEANER_OFFSET_CHECKPOINT: "cleaner_offset",
}


def _log_dir_context(path: str, files: dict, partitions: Iterable[PartitionInfo] | None,
                     rep: Reporter, stats: VerifyStats, *, report_dir: bool) -> dict:
    """Read a log directory's own files. Returns ``{(topic, partition): {field: mark}}`` and
    the directory-wide facts under the key ``None``; emits findings into ``rep``."""
    marks: dict = {}
    clean = CLEAN_SHUTDOWN in files
    expect_ids = kraft = False
    meta_path = files.get(META_PROPERTIES)
    if meta_path is None:
        if report_dir:
            rep(WARNING, "meta-properties-missing", os.path.join(path, META_PROPERTIES), None, None,
                "the log directory has no meta.properties (a ZooKeeper-mode broker writes one on start; a KRaft "
                "broker refuses an unformatted directory)")
    else:
        data = read_text(meta_path, rep, stats, "meta-properties")
        if data is not None:
            try:
                meta = parse_meta_properties(data)
                expect_ids = kraft = meta.version >= 1
            except FormatError as e:
                if report_dir:
                    rep(ERROR, "meta-properties", meta_path, None, None, e.reason)
    if report_dir:
        if not clean:
            rep(WARNING, "clean-shutdown-missing", os.path.join(path, CLEAN_SHUTDOWN), None, None,
                "no clean-shutdown marker: the broker did not shut down cleanly (or is running); on its next start "
                "it recovers every partition from its recovery point")
        else:
            data = read_text(files[CLEAN_SHUTDOWN], rep, stats, "clean-shutdown")
            if data is not None:
                try:
                    parse_clean_shutdown(data, files[CLEAN_SHUTDOWN])
                except FormatError as e:
                    rep(WARNING, "clean-shutdown", files[CLEAN_SHUTDOWN], 0, None,
                        f"{e.reason} (Kafka treats an unreadable marker as a clean shutdown)")
    present = None
    if partitions is not None:
        present = {p.topic_partition for p in partitions if p.topic_partition is not None and p.kind in
                   ("current", "future")}
        if not expect_ids:
            expect_ids = any(os.path.basename(f) == PARTITION_METADATA for p in partitions for f in p.other_files)
    for name, field_name in _CHECKPOINT_FIELDS.items():
        cp = files.get(name)
        if cp is None:
            continue
        data = read_text(cp, rep, stats, "checkpoint-format")
        if data is None:
            continue
        try:
            offsets = parse_offset_checkpoint(data, cp)
        except FormatError as e:
            if report_dir:
                rep(ERROR, "checkpoint-format", cp, None, None, e.reason)
            continue
        positions = _checkpoint_positions(data)
        missing = []
        for tp, offset in offsets.items():
            key = (tp[0], tp[1])
            mark = CheckpointMark(offset, cp, positions.get(key, 0))
            marks.setdefault(key, {})[field_name] = mark
            if present is not None and key not in present:
                missing.append((mark.position, f"{tp[0]}-{tp[1]}"))
        if report_dir and missing:
            missing.sort()
            names = ", ".join(name for _, name in missing[:5])
            more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
            rep(WARNING, "checkpoint-partition-missing", cp, missing[0][0], None,
                f"lists {len(missing)} partition{'s' if len(missing) > 1 else ''} with no folder in this log "
                f"directory: {names}{more} (moved, deleted, or not copied)")
    marks[None] = {"had_clean_shutdown": clean, "expect_partition_metadata": expect_ids, "kraft": kraft}
    return marks


def _context_for(marks: dict, info: PartitionInfo) -> PartitionContext:
    facts = marks[None]
    tp = info.topic_partition
    own = marks.get((tp.topic, tp.partition), {}) if tp is not None and info.kind in ("current", "future") else {}
    return PartitionContext(**own, **facts)


def verify_log_dir(log_dir: LogDirInfo, options: VerifyOptions | None = None, stats: VerifyStats | None = None,
                   ) -> tuple[list[Finding], dict[str, PartitionContext]]:
    """Check a log directory's own files; returns the findings and each partition's context
    (keyed by the partition folder's path) for
    :func:`~plog.engine.inspect.verify_partition.verify_partition`."""
    options = options or VerifyOptions()
    stats = stats if stats is not None else VerifyStats()
    rep = Reporter(stats, options.max_findings_per_check)
    stats.log_dirs += 1
    marks = _log_dir_context(log_dir.path, log_dir.files, log_dir.partitions, rep, stats, report_dir=True)
    bootstrap = os.path.join(log_dir.path, BOOTSTRAP_CHECKPOINT)
    findings = rep.take()
    if BOOTSTRAP_CHECKPOINT in log_dir.files:
        findings += list(verify_batch_file(bootstrap, rep, stats, options, None))
    findings += rep.overflow()
    return findings, {p.path: _context_for(marks, p) for p in log_dir.partitions}


def parent_context(info: PartitionInfo, stats: VerifyStats, options: VerifyOptions) -> PartitionContext:
    """The context of a partition verified on its own: its parent log directory's files,
    when the parent is one (no finding about the directory itself is reported)."""
    parent = os.path.dirname(os.path.abspath(info.path))
    try:
        names = set(os.listdir(parent))
    except OSError:
        return PartitionContext()
    files = {n: os.path.join(parent, n) for n in LOG_DIR_FILES if n in names}
    if not files:
        return PartitionContext()
    rep = Reporter(VerifyStats(), options.max_findings_per_check)
    marks = _log_dir_context(parent, files, None, rep, VerifyStats(), report_dir=False)
    if not marks[None]["expect_partition_metadata"]:
        # A few siblings tell whether this broker writes partition.metadata.
        siblings = [n for n in sorted(names) if n != os.path.basename(info.path)][:50]
        marks[None]["expect_partition_metadata"] = any(
            os.path.isfile(os.path.join(parent, n, PARTITION_METADATA)) for n in siblings)
    return _context_for(marks, info)


def assignment_findings(path: str, kind: str, options: VerifyOptions) -> tuple[list[Finding], VerifyStats] | None:
    """plog's own data directory: every replica ``cluster.json`` assigns has its partition
    folder in its broker's log directory (a topic creation cut short leaves some out). For a
    data directory every broker is checked; for one ``broker-<id>`` log directory inside a
    data directory, that broker. None for a path with no ``cluster.json`` (a Kafka log dir)."""
    from plog.engine.cluster.data_dir import METADATA_FILE, DataDir

    root = os.path.abspath(path)
    only = None
    if kind == "logdir":
        parent, name = os.path.dirname(root), os.path.basename(root)
        if not (name.startswith("broker-") and name[7:].isdigit()):
            return None
        root, only = parent, int(name[7:])
    cluster_file = os.path.join(root, METADATA_FILE)
    if not os.path.isfile(cluster_file):
        return None
    stats = VerifyStats()
    rep = Reporter(stats, options.max_findings_per_check)
    try:
        metadata = DataDir.open(root).metadata
    except (EngineError, OSError) as e:
        rep(ERROR, "cluster-metadata", cluster_file, None, None, str(e))
        return rep.take() + rep.overflow(), stats
    stats.files += 1
    for topic in sorted(metadata.topics):
        missing: dict[int, list[int]] = {}
        for partition, replicas in enumerate(metadata.topics[topic].replicas):
            for broker in replicas:
                if only is not None and broker != only:
                    continue
                if not os.path.isdir(os.path.join(root, f"broker-{broker}", partition_dir_name((topic, partition)))):
                    missing.setdefault(broker, []).append(partition)
        for broker, parts in sorted(missing.items()):
            shown = ", ".join(map(str, parts[:5])) + (f" and {len(parts) - 5} more" if len(parts) > 5 else "")
            rep(ERROR, "partition-missing", os.path.join(root, f"broker-{broker}"), None, None,
                f"{METADATA_FILE} assigns {len(parts)} partition{'s' * (len(parts) != 1)} of topic {topic} "
                f"({shown}) to broker {broker}, whose log directory has no folder for "
                f"{'them' if len(parts) != 1 else 'it'}: the topic cannot be read or written there")
    return rep.take() + rep.overflow(), stats


__all__ = ["CheckpointMark", "PartitionContext", "verify_log_dir"]
