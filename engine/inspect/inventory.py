"""``ls``: what a Kafka log directory holds, at a glance, read-only.

For each log directory (one ``log.dirs`` entry; a data directory holds several):
``meta.properties`` (cluster id, node id, directory id, version), whether the last shutdown
was clean (``.kafka_cleanshutdown`` and its broker epoch), whether a process holds the
``.lock`` right now (from ``/proc/locks``; the lock is never taken), and the four offset
checkpoints. For each partition folder: topic, partition, kind (current, delete, future,
stray), segments (count, bytes, offset range, time range, codecs), the checkpointed offsets
(recovery point, log start, high watermark, cleaner), the latest leader epoch and the topic
id from ``partition.metadata``.

Cost. Nothing is decoded beyond batch headers. A header walk reads each batch's first
61 bytes (:class:`HeaderWalk`: 64 KiB reads while batches are small, 4 KiB reads at each
large batch, so a segment of 1 MiB batches costs a few KiB of I/O per MiB). ``quick=True``
skips the walk of every segment but the last: offsets come from segment base offsets and
the last segment's tail (read from its last offset-index entry, as Kafka computes the log
end offset), timestamps from the time indexes, and codecs from the first batch of each
segment and the last segment's tail (reported as sampled).

Problems found on the way (a corrupt entry header, a trailing partial batch, an index
without its ``.log``, an unreadable checkpoint) are listed in the summaries; ``inventory``
raises only when a path cannot be read at all.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Callable, Iterator, NamedTuple

from plog.formats.batch_header import ENTRY_HEAD, HEADER_SIZE_UP_TO_MAGIC, LOG_OVERHEAD, MAGIC_OFFSET, MIN_V2_SIZE
from plog.formats.batch_header import LEGACY_ATTRIBUTES_OFFSET, RECORD_OVERHEAD_V0, RECORD_OVERHEAD_V1, v1_timestamp
from plog.formats.batch_header import CODEC_MASK, V2_HEADER, V2_HEADER_SIZE
from plog.formats.checkpoints import uuid_to_base64url
from plog.formats.compression import CODEC_NAMES
from plog.formats.errors import FormatError
from plog.formats.indexes import OFFSET_INDEX_ENTRY_SIZE, TIME_INDEX_ENTRY_SIZE
from plog.formats.legacy import LegacyBatch
from plog.formats.record_batch import CONTROL_FLAG_MASK, TRANSACTIONAL_FLAG_MASK

from plog.engine.storage import checkpoints as _ckf
from plog.engine.storage.discovery import CHECKPOINT_FILES, LOG_DIR_FILES, LogDirCheckpoints, LogDirInfo, PartitionInfo
from plog.engine.storage.discovery import NotAKafkaPathError, classify, log_dirs, scan_partition, segment_base_offset
from plog.engine.storage.discovery import SegmentFiles, partition_facts, read_checkpoints
from plog.engine.errors import EngineError
from plog.engine.storage.index_file import IndexFile
from plog.engine.storage.lock import lock_holder
from plog.engine.storage.file_names import BOOTSTRAP_CHECKPOINT, LOCK_FILE_NAME, file_name

BIG_READ = 64 * 1024
SMALL_READ = 4 * 1024


# -- header walk -------------------------------------------------------------------------


class HeaderInfo(NamedTuple):
    """The header facts of one entry (v2 batch, or v0/v1 message) at ``position``.

    ``base_offset`` and ``records_count`` are None for a compressed legacy wrapper (they
    need decompression); its ``last_offset`` is the wrapper's offset.
    """

    position: int
    size: int
    magic: int
    base_offset: int | None
    last_offset: int
    attributes: int
    max_timestamp: int
    records_count: int | None
    producer_id: int
    partition_leader_epoch: int

    @property
    def codec(self) -> int:
        return self.attributes & CODEC_MASK

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def is_transactional(self) -> bool:
        return self.magic >= 2 and bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control(self) -> bool:
        return self.magic >= 2 and bool(self.attributes & CONTROL_FLAG_MASK)


class HeaderWalk:
    """Iterate the entry headers of a ``.log`` from ``start`` to its end without reading
    the entries' bodies, following Kafka's file framing (kafka-format.md §6).

    After iteration: ``valid_end`` is the position after the last whole entry;
    ``trailing`` is the number of bytes after it (a partial entry or a fragment of 17
    bytes or less); ``error`` is a :class:`FormatError` when an impossible header stopped
    the walk (the walk then ends at that entry instead of raising).
    """

    def __init__(self, path: str, start: int = 0):
        self.path = path
        self.start = start
        self.valid_end = start
        self.trailing = 0
        self.error: FormatError | None = None
        self.file_size = 0

    def __iter__(self) -> Iterator[HeaderInfo]:
        fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            yield from self._walk(fd)
        finally:
            os.close(fd)

    def _walk(self, fd: int) -> Iterator[HeaderInfo]:
        end = self.file_size = os.fstat(fd).st_size
        pos = self.start
        buf, buf_pos, blen = b"", pos, 0
        read_size = BIG_READ
        unpack_header = V2_HEADER.unpack_from
        unpack_entry = ENTRY_HEAD.unpack_from
        make = tuple.__new__
        head_size, magic_at = V2_HEADER_SIZE, MAGIC_OFFSET
        # The loop runs once per batch: one unpack of the whole v2 header, no other calls.
        while end - pos > HEADER_SIZE_UP_TO_MAGIC:
            off = pos - buf_pos
            avail = blen - off
            if avail < head_size and avail < end - pos:
                need = min(head_size, end - pos)
                buf = os.pread(fd, max(need, min(read_size, end - pos)), pos)
                buf_pos, off, blen = pos, 0, len(buf)
                if blen < need:  # the file shrank under us
                    break
            magic = buf[off + magic_at]
            if magic == 2 and end - pos >= head_size:
                (base, size, ple, _magic, _crc, attributes, delta, _bts, max_ts, pid, _pe, _bs,
                 count) = unpack_header(buf, off)
            else:
                offset, size = unpack_entry(buf, off)
            if size < RECORD_OVERHEAD_V0:
                self.error = FormatError(f"Found record size {size} smaller than minimum record overhead "
                                         f"({RECORD_OVERHEAD_V0})", pos)
                break
            stop = pos + LOG_OVERHEAD + size
            if stop > end:
                break
            if magic == 2:
                if size < MIN_V2_SIZE:
                    self.error = FormatError(f"Record batch is corrupt (the size {size + LOG_OVERHEAD} is smaller "
                                             f"than the minimum allowed overhead {V2_HEADER_SIZE})", pos)
                    break
                info = make(HeaderInfo, (pos, LOG_OVERHEAD + size, 2, base, base + delta, attributes, max_ts,
                                         count, pid, ple))
            elif magic == 0 or magic == 1:
                attributes = buf[off + LEGACY_ATTRIBUTES_OFFSET]
                timestamp = -1
                if magic == 1:
                    if size < RECORD_OVERHEAD_V1:
                        self.error = FormatError(f"Magic v1 message of size {size} is below the minimum "
                                                 f"{RECORD_OVERHEAD_V1}", pos)
                        break
                    timestamp = v1_timestamp(buf, off)
                compressed = attributes & CODEC_MASK
                info = HeaderInfo(pos, LOG_OVERHEAD + size, magic, None if compressed else offset, offset,
                                  attributes, timestamp, None if compressed else 1, -1, -1)
            else:
                self.error = FormatError(f"Invalid magic found in record: {magic - 256 if magic > 127 else magic}",
                                         pos)
                break
            yield info
            pos = stop
            self.valid_end = pos
            read_size = SMALL_READ if size > BIG_READ else BIG_READ
        self.trailing = end - self.valid_end if self.error is None else 0


def legacy_base_offset(path: str, header: HeaderInfo) -> int | None:
    """First inner offset of a compressed legacy wrapper (decompresses that one entry)."""
    with open(path, "rb") as f:
        f.seek(header.position)
        data = f.read(header.size)
    try:
        return LegacyBatch(memoryview(data), header.position).base_offset
    except FormatError:
        return None


# -- summaries ---------------------------------------------------------------------------


def codec_name(codec: int) -> str:
    return CODEC_NAMES.get(codec, f"unknown({codec})")


@dataclass
class SegmentSummary:
    """One segment. Counts are None when the segment was not walked (``quick``)."""

    base_offset: int
    log_path: str | None
    size_bytes: int
    index_path: str | None
    timeindex_path: str | None
    txnindex_path: str | None
    index_entries: int | None
    timeindex_entries: int | None
    walked: bool = False
    batches: int | None = None
    records: int | None = None
    first_offset: int | None = None  # base offset of the first entry
    last_offset: int | None = None  # last offset of the last entry
    next_offset: int | None = None  # offset after the last entry (the base offset when empty)
    first_timestamp: int | None = None  # max timestamp of the first entry
    min_timestamp: int | None = None  # smallest batch max timestamp (>= 0)
    max_timestamp: int | None = None  # largest batch max timestamp (>= 0)
    codecs: dict[str, int] = field(default_factory=dict)  # codec -> entries seen
    magics: dict[int, int] = field(default_factory=dict)
    transactional_batches: int | None = None
    control_batches: int | None = None
    trailing_bytes: int = 0
    problems: list[str] = field(default_factory=list)


@dataclass
class PartitionSummary:
    path: str
    name: str
    topic: str | None
    partition: int | None
    kind: str
    topic_id: str | None
    segment_count: int
    size_bytes: int  # the .log files (Kafka's Log.size)
    disk_bytes: int  # every file in the folder
    first_offset: int | None  # base offset of the first segment
    log_start_offset: int | None  # max(log-start-offset-checkpoint, first base offset)
    log_end_offset: int | None
    batches: int | None
    records: int | None
    min_timestamp: int | None
    max_timestamp: int | None
    first_timestamp: int | None
    codecs: dict[str, int]
    codecs_sampled: bool
    magics: dict[int, int]
    transactional_batches: int | None
    control_batches: int | None
    leader_epoch: int | None
    leader_epoch_start_offset: int | None
    leader_epoch_entries: int
    recovery_point: int | None
    high_watermark: int | None
    log_start_checkpoint: int | None
    cleaner_offset: int | None
    snapshots: int
    in_flight_files: list[str]
    orphan_index_files: list[str]
    problems: list[str]
    segments: list[SegmentSummary]


@dataclass
class LogDirSummary:
    path: str
    meta: dict | None  # version, cluster_id, node_id, directory_id
    clean_shutdown: bool  # .kafka_cleanshutdown is present
    clean_shutdown_broker_epoch: int | None
    lock_file: bool
    lock_holder_pid: int | None  # a process holds the .lock (per /proc/locks)
    lock_checked: bool  # False when /proc/locks could not be read
    checkpoint_files: list[str]  # which of the four offset checkpoints exist
    bootstrap_checkpoint: bool
    partitions: list[PartitionSummary]
    partial: bool = False  # only some partition folders of the log dir were listed
    problems: list[str] = field(default_factory=list)

    @property
    def topics(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for p in self.partitions:
            if p.topic is not None and p.kind == "current":
                out.setdefault(p.topic, []).append(p.partition)
        return {t: sorted(ps) for t, ps in sorted(out.items())}

    @property
    def size_bytes(self) -> int:
        return sum(p.size_bytes for p in self.partitions)

    @property
    def segment_count(self) -> int:
        return sum(p.segment_count for p in self.partitions)

    @property
    def shutdown(self) -> str:
        """``clean``, ``running`` (the lock is held), or ``unclean`` (neither: a crash, a
        copy of a running broker, or a broker that never finished starting)."""
        if self.lock_holder_pid is not None:
            return "running"
        return "clean" if self.clean_shutdown else "unclean"


# -- per segment -------------------------------------------------------------------------


def _index_entries(path: str | None, entry_size: int, base: int) -> int | None:
    if path is None:
        return None
    with IndexFile(path, entry_size, base) as idx:
        return None if idx.missing else idx.entries


def _base_segment_summary(seg: SegmentFiles) -> SegmentSummary:
    size = os.path.getsize(seg.log) if seg.log else 0
    return SegmentSummary(
        base_offset=seg.base_offset, log_path=seg.log, size_bytes=size, index_path=seg.index,
        timeindex_path=seg.timeindex, txnindex_path=seg.txnindex,
        index_entries=_index_entries(seg.index, OFFSET_INDEX_ENTRY_SIZE, seg.base_offset),
        timeindex_entries=_index_entries(seg.timeindex, TIME_INDEX_ENTRY_SIZE, seg.base_offset))


_CODEC_NAMES = [codec_name(c) for c in range(8)]


def _absorb(s: SegmentSummary, walk: HeaderWalk, *, count: bool, limit: int | None = None) -> None:
    """Fold headers from ``walk`` into ``s`` (all of them, or the first ``limit``)."""
    batches = records = txn = ctrl = 0
    records_known = True
    codecs, magics = s.codecs, s.magics
    lo, hi = s.min_timestamp, s.max_timestamp
    if lo is None:
        lo = 1 << 63
    if hi is None:
        hi = -1
    names, codec_mask = _CODEC_NAMES, CODEC_MASK
    txn_or_control = TRANSACTIONAL_FLAG_MASK | CONTROL_FLAG_MASK
    last = first = None
    for h in walk:
        _pos, _size, magic, _base, _last, attributes, ts, n, _pid, _ple = h
        if first is None:
            first = h
        batches += 1
        if n is None:
            records_known = False
        else:
            records += n
        name = names[attributes & codec_mask]
        codecs[name] = codecs.get(name, 0) + 1
        magics[magic] = magics.get(magic, 0) + 1
        if ts >= 0:
            if ts < lo:
                lo = ts
            if ts > hi:
                hi = ts
        if magic == 2 and attributes & txn_or_control:
            if attributes & TRANSACTIONAL_FLAG_MASK:
                txn += 1
            if attributes & CONTROL_FLAG_MASK:
                ctrl += 1
        last = h
        if limit is not None and batches >= limit:
            break
    s.min_timestamp = lo if lo != 1 << 63 else None
    s.max_timestamp = hi if hi >= 0 else None
    if first is not None and walk.start == 0 and s.first_offset is None:
        s.first_offset = first.base_offset if first.base_offset is not None else legacy_base_offset(s.log_path, first)
        s.first_timestamp = first.max_timestamp
    if limit is None:
        if last is not None:
            s.last_offset, s.next_offset = last.last_offset, last.next_offset
        elif walk.start == 0:
            s.next_offset = s.base_offset
        if walk.error is not None:
            s.problems.append(f"{s.log_path}: {walk.error}; entries after it are not counted")
        if walk.trailing:
            s.trailing_bytes = walk.trailing
            s.problems.append(f"{s.log_path}: {walk.trailing} trailing byte(s) after the last whole entry "
                              f"at position {walk.valid_end} (Kafka ignores them; recovery truncates them)")
    if count:
        s.batches = batches
        s.records = records if records_known else None
        s.transactional_batches, s.control_batches = txn, ctrl


def summarize_segment(seg: SegmentFiles, *, walk: bool = True, last: bool = False) -> SegmentSummary:
    """A :class:`SegmentSummary`: every header (``walk``), or only the first batch plus,
    for the ``last`` segment, the tail from the last offset-index entry."""
    s = _base_segment_summary(seg)
    if seg.log is None:
        return s
    if walk:
        s.walked = True
        _absorb(s, HeaderWalk(seg.log, 0), count=True)
        return s
    start = 0
    if last:
        with IndexFile(seg.index, OFFSET_INDEX_ENTRY_SIZE, seg.base_offset) as idx:
            entry = idx.last_offset_entry()
        start = entry.position if entry is not None and 0 < entry.position < s.size_bytes else 0
    if not last or start:
        _absorb(s, HeaderWalk(seg.log, 0), count=False, limit=1)
    if last:
        tail = dataclasses.replace(s, codecs=dict(s.codecs), magics=dict(s.magics), problems=list(s.problems))
        walk = HeaderWalk(seg.log, start)
        _absorb(tail, walk, count=False)
        if start and (tail.next_offset is None or walk.error is not None):
            # The last index entry points past the batches or into one: read it all.
            _absorb(s, HeaderWalk(seg.log, 0), count=False)
        else:
            s = tail
    with IndexFile(seg.timeindex, TIME_INDEX_ENTRY_SIZE, seg.base_offset) as tidx:
        te = tidx.last_time_entry()
    if te is not None and te.timestamp >= 0 and (s.max_timestamp is None or te.timestamp > s.max_timestamp):
        s.max_timestamp = te.timestamp
    s.min_timestamp = None  # unknown without a walk of every header
    return s


# -- per partition -----------------------------------------------------------------------


def _disk_bytes(path: str) -> int:
    total = 0
    with os.scandir(path) as it:
        for e in it:
            try:
                if e.is_file(follow_symlinks=False):
                    total += e.stat(follow_symlinks=False).st_size
            except OSError:
                pass
    return total


def summarize_partition(info: PartitionInfo, checkpoints: LogDirCheckpoints | None = None, *,
                        quick: bool = False) -> PartitionSummary:
    """A :class:`PartitionSummary` of one partition folder (see the module docstring).
    ``checkpoints``: its log directory's (read when not given)."""
    facts = partition_facts(info, checkpoints)
    problems: list[str] = list(facts.problems)
    segs = [s for s in info.segments if s.log is not None]
    orphans = [p for s in info.segments if s.log is None for p in (s.index, s.timeindex, s.txnindex) if p]
    if orphans:
        problems.append(f"{len(orphans)} index file(s) without a .log (Kafka deletes them at startup)")
    summaries = [summarize_segment(s, walk=not quick, last=i == len(segs) - 1) for i, s in enumerate(segs)]
    for s in summaries:
        problems.extend(s.problems)
        if s.index_path is None and s is not (summaries[-1] if summaries else None):
            problems.append(f"segment {file_name(s.base_offset)} has no .index (Kafka recovers it at startup)")
    leo = summaries[-1].next_offset if summaries else None
    codecs: dict[str, int] = {}
    magics: dict[int, int] = {}
    for s in summaries:
        for k, v in s.codecs.items():
            codecs[k] = codecs.get(k, 0) + v
        for k, v in s.magics.items():
            magics[k] = magics.get(k, 0) + v
    tss = [s.min_timestamp for s in summaries if s.min_timestamp is not None]
    mss = [s.max_timestamp for s in summaries if s.max_timestamp is not None]
    firsts = [s.first_timestamp for s in summaries if s.first_timestamp is not None]

    def total(attr):
        values = [getattr(s, attr) for s in summaries]
        return None if quick or any(v is None for v in values) else sum(values)

    hw = facts.high_watermark
    if hw is not None and leo is not None and hw > leo:
        problems.append(f"high watermark {hw} is above the log end offset {leo} (data missing from this copy?)")
    tp = info.topic_partition
    return PartitionSummary(
        path=info.path, name=info.name, topic=tp.topic if tp else None, partition=tp.partition if tp else None,
        kind=info.kind, topic_id=facts.topic_id, segment_count=len(segs),
        size_bytes=sum(s.size_bytes for s in summaries), disk_bytes=_disk_bytes(info.path),
        first_offset=facts.first_segment_offset, log_start_offset=facts.log_start_offset, log_end_offset=leo,
        batches=total("batches"), records=total("records"),
        min_timestamp=min(tss) if tss and not quick else None, max_timestamp=max(mss) if mss else None,
        first_timestamp=firsts[0] if firsts else None, codecs=codecs, codecs_sampled=quick, magics=magics,
        transactional_batches=total("transactional_batches"), control_batches=total("control_batches"),
        leader_epoch=facts.leader_epoch, leader_epoch_start_offset=facts.leader_epoch_start_offset,
        leader_epoch_entries=len(facts.leader_epochs), recovery_point=facts.recovery_point, high_watermark=hw,
        log_start_checkpoint=facts.log_start_checkpoint, cleaner_offset=facts.cleaner_offset,
        snapshots=len(info.snapshots), in_flight_files=list(info.in_flight), orphan_index_files=orphans,
        problems=problems, segments=summaries)


# -- per log dir -------------------------------------------------------------------------


def summarize_log_dir(info: LogDirInfo, *, quick: bool = False, only: list[PartitionInfo] | None = None,
                      progress: Callable[[str], None] | None = None) -> LogDirSummary:
    """A :class:`LogDirSummary` of one log directory (or of the partitions in ``only``)."""
    problems: list[str] = []
    meta = None
    try:
        props = _ckf.read_meta_properties(info.path)
        if props is not None:
            meta = {"version": props.version, "cluster_id": props.cluster_id, "node_id": props.node_id,
                    "directory_id": uuid_to_base64url(props.directory_id) if props.directory_id else None}
    except (FormatError, EngineError, OSError) as e:
        problems.append(f"meta.properties: {e}")
    marker = _ckf.CleanShutdownFile(info.path)
    clean = marker.exists()
    broker_epoch = None
    if clean:
        try:
            broker_epoch = marker.read()
        except (FormatError, EngineError, OSError) as e:
            problems.append(f".kafka_cleanshutdown: {e} (Kafka still treats the shutdown as clean)")
    lock_path = os.path.join(info.path, LOCK_FILE_NAME)
    lock_file = os.path.isfile(lock_path)
    checked, pid = lock_holder(lock_path) if lock_file else (True, None)
    ck = read_checkpoints(info.path)
    problems.extend(ck.problems.values())
    parts = []
    for p in (only if only is not None else info.partitions):
        if progress:
            progress(p.path)
        parts.append(summarize_partition(p, ck, quick=quick))
    return LogDirSummary(
        path=info.path, meta=meta, clean_shutdown=clean, clean_shutdown_broker_epoch=broker_epoch,
        lock_file=lock_file, lock_holder_pid=pid, lock_checked=checked,
        checkpoint_files=[n for n in CHECKPOINT_FILES if n in info.files],
        bootstrap_checkpoint=BOOTSTRAP_CHECKPOINT in info.files, partitions=parts,
        partial=only is not None, problems=problems)


def inventory(path: str | os.PathLike, *, quick: bool = False, topic: str | None = None,
              progress: Callable[[str], None] | None = None) -> list[LogDirSummary]:
    """Summaries of every log directory at or under ``path``.

    ``path`` may be a data directory (several log dirs), a log directory, a partition
    folder or a segment file; for the last two the result is the partition's log dir with
    only that partition listed (``partial``). ``topic`` keeps only that topic's partitions.
    ``progress`` is called with each partition folder before it is read.
    """
    path = os.fspath(path)
    kind = classify(path)
    if kind == "segment" and segment_base_offset(path) is None:
        raise NotAKafkaPathError(f"{path}: not a segment file (expected <20-digit base offset>.log, .index, ...)")
    if kind in ("partition", "segment"):
        folder = path if kind == "partition" else os.path.dirname(os.path.abspath(path))
        part = scan_partition(folder)
        parent = os.path.dirname(os.path.abspath(folder))
        with os.scandir(parent) as it:
            files = {e.name: e.path for e in it if e.name in LOG_DIR_FILES and e.is_file()}
        info = LogDirInfo(parent, (part,), files)
        return [summarize_log_dir(info, quick=quick, only=[part], progress=progress)]
    out = []
    for info in log_dirs(path):
        only = None
        if topic is not None:
            only = [p for p in info.partitions if p.topic_partition is not None and p.topic_partition.topic == topic]
        out.append(summarize_log_dir(info, quick=quick, only=only, progress=progress))
    return out


__all__ = [
    "HeaderInfo",
    "HeaderWalk",
    "LogDirSummary",
    "PartitionSummary",
    "SegmentSummary",
    "inventory",
    "summarize_log_dir",
    "summarize_partition",
    "summarize_segment",
]
