"""Finding a registry's ``_schemas`` partition under a path and reading its records, read-only
and without the log directory's lock (as ``dump`` and ``verify`` read), past damaged bytes.

* :func:`find_partitions` lists every replica folder of ``<topic>-0`` at or under a path (a
  data directory of several brokers holds one per replica; ``-delete``/``-future``/``-stray``
  folders are not replicas the registry reads). The registry's store has one partition, 0.
* :func:`choose_replica` takes the replica that reaches furthest (the last segment with the
  highest base offset, then the most bytes): a follower that fell behind holds a prefix of
  the leader's log.
* :func:`read_records` yields ``(offset, key, value)`` of every data record of the replica's
  segments in offset order (control batches carry no registry records). A damaged region
  (an impossible entry header, a checksum that does not match, records that do not
  decode) is skipped: the reader looks for the next valid entry with
  :func:`~plog.engine.storage.batch_resync.find_next_entry` and goes on, and
  :class:`ReadReport` lists each skipped range with its reason, so ``plog schemas`` can say
  what it could not read.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Iterator

from plog.formats.errors import FormatError
from plog.formats.schema_registry import DEFAULT_TOPIC

from plog.engine.errors import NotAKafkaPathError
from plog.engine.schemas.errors import SchemaSourceError
from plog.engine.storage.batch_resync import EntryRules, find_next_entry
from plog.engine.storage.discovery import PartitionInfo, partitions
from plog.engine.storage.file_records import FileBatches


@dataclass(frozen=True)
class SkippedBytes:
    """Bytes of a segment that were not read: ``[position, end)`` of ``path``, and why."""

    path: str
    position: int
    end: int
    reason: str


@dataclass
class ReadReport:
    """What :func:`read_records` read: the replica, the other replicas it did not need, the
    records and batches read, and the damaged ranges it skipped."""

    partition: str
    other_replicas: list[str] = field(default_factory=list)
    batches: int = 0
    records: int = 0
    skipped: list[SkippedBytes] = field(default_factory=list)


def find_partitions(path: str | os.PathLike, topic: str = DEFAULT_TOPIC) -> list[PartitionInfo]:
    """Every replica folder of ``<topic>-0`` at or under ``path``. Raises
    :class:`SchemaSourceError` when ``path`` holds Kafka data but no such folder, and lets
    ``FileNotFoundError``/``NotAKafkaPathError`` say what ``path`` is not."""
    path = os.fspath(path)
    try:
        found = [p for p in partitions(path)
                 if p.kind == "current" and p.topic_partition is not None
                 and p.topic_partition.topic == topic and p.topic_partition.partition == 0]
    except NotAKafkaPathError as e:
        raise SchemaSourceError(f"{e} (looking for the {topic} topic)", path) from None
    if not found:
        raise SchemaSourceError(f"{path}: no {topic}-0 partition folder (a Schema Registry's store; another "
                                f"topic name can be given)", path)
    return found


def _reach(p: PartitionInfo) -> tuple[int, int]:
    last = p.segments[-1] if p.segments else None
    if last is None or last.log is None:
        return (-1, -1)
    try:
        return (last.base_offset, os.path.getsize(last.log))
    except OSError:
        return (last.base_offset, -1)


def choose_replica(replicas: list[PartitionInfo]) -> PartitionInfo:
    """The replica whose log reaches furthest (module docstring); the first of equals."""
    return max(replicas, key=_reach)


def _resync(path: str, bad: int, reason: str, report: ReadReport) -> int | None:
    """Where to go on after damage at ``bad`` (None: nothing valid after it); records the skip."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        nxt = find_next_entry(fd, bad + 1, size, EntryRules(legacy=True))
    finally:
        os.close(fd)
    report.skipped.append(SkippedBytes(path, bad, size if nxt is None else nxt, reason))
    return nxt


def _batch_records(batch, path: str, report: ReadReport):
    """The records of one batch, or None after recording why they cannot be read."""
    end = batch.position + batch.size_in_bytes
    if not batch.is_valid():
        report.skipped.append(SkippedBytes(path, batch.position, end, "the batch's checksum does not match"))
        return None
    try:
        return batch.records()
    except FormatError as e:
        report.skipped.append(SkippedBytes(path, batch.position, end, f"records do not decode: {e.reason}"))
        return None


def segment_records(path: str, report: ReadReport) -> Iterator[tuple[int, bytes | None, bytes | None]]:
    """``(offset, key, value)`` of the data records of one ``.log`` file, past damage."""
    start = 0
    while True:
        batches = FileBatches(path, start=start)
        try:
            for batch in batches:
                report.batches += 1
                if batch.is_control:
                    continue
                records = _batch_records(batch, path, report)
                for r in records or ():
                    report.records += 1
                    yield r.offset, r.key, r.value
        except FormatError as e:
            bad = e.position if e.position is not None else batches.valid_end
            nxt = _resync(path, bad, e.reason, report)
            if nxt is None:
                return
            start = nxt
            continue
        tail = batches.trailing
        if tail is not None:
            report.skipped.append(SkippedBytes(path, tail.position, tail.position + tail.length,
                                               "a partial entry at the end of the file"))
        return


def read_records(replica: PartitionInfo, report: ReadReport) -> Iterator[tuple[int, bytes | None, bytes | None]]:
    """``(offset, key, value)`` of every data record of ``replica``, segment by segment."""
    for segment in replica.segments:
        if segment.log is not None:
            yield from segment_records(segment.log, report)


__all__ = ["ReadReport", "SkippedBytes", "choose_replica", "find_partitions", "read_records", "segment_records"]
