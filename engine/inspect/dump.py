"""``plog dump``: Kafka's DumpLogSegments for every file type, as text or JSON lines.

:class:`DumpRun` walks the files in the order given and dispatches on the suffix after the
last ``.`` exactly as ``DumpLogSegments`` does (kafka-format.md §19.2): ``.log`` and KRaft
``.checkpoint`` files are dumped as logs, then ``.index``, ``.timeindex``, ``.snapshot`` and
``.txnindex``; the end-of-run reports (index mismatches, time index errors, non-consecutive
offsets) are collected per file and printed after the last file, on stderr, in the order
Kafka's maps iterate. Everything else is ``Ignoring unknown file <file>`` on stderr, except
the text checkpoint files (``recovery-point-offset-checkpoint``, ``leader-epoch-checkpoint``,
``partition.metadata``, ``meta.properties``, ``.kafka_cleanshutdown``…), which Kafka's tool
ignores and plog prints (a plog extension, marked as such in ``--help``).

Text output reproduces the tool of one Kafka major version (``kafka_version``): 4 is the
Java tool of Kafka 4.x (the default), 3 the Scala tool of Kafka 3.3-3.9 (§19.3-§19.7).
``--format jsonl`` (:class:`JsonRenderer`) writes one object per file header, batch,
record, index entry and report, with every field the text shows plus header values, all
binary-safe (``formats/binary_json.py``).

The engine never prints: ``out`` and ``err`` receive one or more whole lines (joined by
``\n``) without the final newline.
``.log`` files are streamed in bounded chunks (``FileBatches``), index files are read in
bounded chunks too, so memory stays flat whatever the file sizes.

The parts: :mod:`~plog.engine.inspect.dump_options` (the options),
:mod:`~plog.engine.inspect.dump_render` (text and JSON lines),
:mod:`~plog.engine.inspect.dump_indexes` (index files), :mod:`~plog.engine.inspect.dump_decoders`
(record keys and values) and :mod:`~plog.engine.inspect.dump_checkpoints` (text files).
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass, field
from typing import Callable

from plog.formats import java
from plog.formats.errors import CorruptSnapshotError, FormatError
from plog.formats.legacy import LegacyBatch

from plog.engine.errors import NotAKafkaPathError
from plog.engine.inspect.dump_indexes import IndexDumps, file_base_offset
from plog.engine.inspect.dump_options import DEFAULT_MAX_MESSAGE_SIZE, INT32_MAX, DumpOptions, Line
from plog.engine.inspect.dump_render import JsonRenderer, TextRenderer
from plog.engine.storage.file_names import (
    BOOTSTRAP_CHECKPOINT,
    CHECKPOINT_FILE_SUFFIX,
    INDEX_FILE_SUFFIX,
    LOG_FILE_SUFFIX,
    PRODUCER_SNAPSHOT_FILE_SUFFIX,
    TEXT_STATE_FILES,
    TIME_INDEX_FILE_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
)
from plog.engine.storage.file_records import FileBatches

Progress = Callable[[int], None]

#: Files in a log or partition directory that Kafka's tool ignores and plog prints.
TEXT_CHECKPOINT_FILES = TEXT_STATE_FILES
#: What DumpLogSegments does with a file, by the suffix after its last ``.``.
_KIND_BY_SUFFIX = {
    LOG_FILE_SUFFIX: "log",
    CHECKPOINT_FILE_SUFFIX: "log",
    INDEX_FILE_SUFFIX: "index",
    TIME_INDEX_FILE_SUFFIX: "timeindex",
    PRODUCER_SNAPSHOT_FILE_SUFFIX: "snapshot",
    TXN_INDEX_FILE_SUFFIX: "txnindex",
}


def file_kind(path: str) -> str | None:
    """What DumpLogSegments does with ``path``: ``log``, ``index``, ``timeindex``,
    ``snapshot``, ``txnindex``, ``text-checkpoint`` (plog only) or None (ignored)."""
    name = os.path.basename(path)
    if name in TEXT_CHECKPOINT_FILES:
        return "text-checkpoint"
    dot = name.rfind(".")
    if dot < 0:
        return None
    return _KIND_BY_SUFFIX.get(name[dot:])


_GLOB_CHARS = frozenset("*?[")


def expand_dump_paths(args: list[str]) -> list[str]:
    """The files to dump for ``args``, in the order given: a file as it is; a directory,
    every file under it that :func:`file_kind` knows (in name order, a directory's own files
    before its subfolders'); a glob that is not a file's name (quoted, so the shell left it),
    its matches. A path that does not exist is kept, so the dump reports it in turn. A
    directory without such files, or a glob without a match, is a
    :class:`NotAKafkaPathError`."""
    out: list[str] = []
    for arg in args:
        if os.path.isdir(arg):
            found = []
            for root, dirs, files in os.walk(arg):
                dirs.sort()
                found.extend(os.path.join(root, f) for f in sorted(files) if file_kind(f) is not None)
            if not found:
                raise NotAKafkaPathError(f"{arg}: no Kafka log, index, snapshot or checkpoint files in this directory")
            out.extend(found)
        elif not os.path.exists(arg) and _GLOB_CHARS & set(arg):
            matches = sorted(glob.glob(arg))
            if not matches:
                raise NotAKafkaPathError(f"{arg}: no file matches this pattern")
            out.extend(expand_dump_paths(matches))
        else:
            out.append(arg)
    return out


def report_map_order(calls: list[str], scala: bool) -> list[str]:
    """Iteration order of one of DumpLogSegments' string-keyed report maps, given the keys
    of its insertion calls in order (one per call, repeated keys included).

    Both Kafka 3.x's Scala ``mutable.HashMap`` and 4.x's Java ``HashMap`` start at 16
    buckets, pick the bucket ``(h ^ (h >>> 16)) & (n - 1)`` from ``String.hashCode``,
    double the table and iterate bucket by bucket; a resize keeps the order inside a
    bucket. They differ in when they grow and in the order inside a bucket:

    * Scala 2.13 (``put``): before every put, even of a key already there, the table
      doubles if ``size + 1 >= threshold`` (0.75 of the buckets); a bucket is kept
      sorted by the spread hash (as a signed int), equal hashes in insertion order.
    * Java (``computeIfAbsent``, the 4.x tool's only insertion): before every call the
      table doubles if ``size > threshold``; a new node is linked at the head of its
      bucket, so a bucket lists its keys in reverse insertion order. (Buckets of 8+ keys
      that Java turns into trees are not modelled.)
    """
    if not scala:
        order = java.HashOrder(java.string_hash_code)
        for key in calls:
            order.add(key, at_head=True)
        return list(order)
    capacity = 16
    inserted: dict[str, None] = {}
    for key in calls:
        if len(inserted) + 1 >= capacity * 3 // 4:
            capacity *= 2
        inserted.setdefault(key)
    return java.scala_hash_order(inserted, java.string_hash_code, capacity)


def log_header(path: str) -> tuple[str, dict]:
    """The line after ``Dumping <file>`` for a log or KRaft snapshot, and its JSON fields."""
    name = os.path.basename(path)
    if name.endswith(CHECKPOINT_FILE_SUFFIX):
        if name == BOOTSTRAP_CHECKPOINT:
            return "KRaft bootstrap snapshot", {"bootstrap": True}
        stem = name[: -len(CHECKPOINT_FILE_SUFFIX)]
        offset, _, epoch = stem.partition("-")
        try:
            end_offset, end_epoch = int(offset), int(epoch)
        except ValueError:
            raise FormatError(f"{name}: not a KRaft snapshot name (<20-digit offset>-<10-digit epoch>.checkpoint)") from None
        return f"Snapshot end offset: {end_offset}, epoch: {end_epoch}", {"snapshot_end_offset": end_offset, "snapshot_epoch": end_epoch}
    base = file_base_offset(name)
    return f"Log starting offset: {base}", {"base_offset": base}


# --------------------------------------------------------------------------- the run


@dataclass
class _Reports:
    """The end-of-run maps of DumpLogSegments, keyed by absolute path, and for each map the
    keys of the insertion calls Kafka makes on it, in order (its iteration order depends on
    them, :func:`report_map_order`)."""

    index_mismatches: dict = field(default_factory=dict)  # path -> list[(index offset, log offset)]
    time_mismatch: dict = field(default_factory=dict)
    time_out_of_order: dict = field(default_factory=dict)
    time_not_found: dict = field(default_factory=dict)
    non_consecutive: dict = field(default_factory=dict)
    calls: dict = field(default_factory=dict)  # map name -> [path, ...]

    def called(self, name: str, path: str, times: int = 1) -> None:
        self.calls.setdefault(name, []).extend([path] * times)

    def time_error(self, name: str, path: str, pair: tuple[int, int], v3: bool) -> None:
        """One record call of Kafka's TimeIndexDumpErrors: 3.x puts the key into its map
        only when it first sees it, 4.x calls computeIfAbsent every time."""
        m = getattr(self, name)
        if v3:
            if path not in m:
                self.called(name, path)
        else:
            self.called(name, path)
        m.setdefault(path, []).append(pair)


class DumpRun(IndexDumps):
    """Dump files one after the other; call :meth:`finish` after the last one.

    ``problems`` counts what a ``--verify-index-only``/``--index-sanity-check`` run found
    (mismatches; failed sanity checks in ``jsonl``); the CLI turns it into exit status 3.

    Where Kafka's tool dies on a file (a failed index sanity check, a time index whose
    offset index is missing, with Kafka 3.x a file name without a ``.``), the text output
    stops there too: :class:`FormatError` is raised after the ``Dumping`` line (exit
    status 1). ``jsonl`` reports these and goes on.
    """

    def __init__(self, options: DumpOptions, out: Line, err: Line, progress: Progress | None = None):
        self.options = options
        self.renderer = JsonRenderer(options, out, err) if options.format == "jsonl" else TextRenderer(options, out, err)
        self.err = err
        self.progress = progress
        self.reports = _Reports()
        self.problems = 0
        self._decoder = options.decoder() if options.should_print_data_log else None

    # -- dispatch

    def dump(self, path: str) -> None:
        r = self.renderer
        r.dumping(path)
        kind = file_kind(path)
        if kind is None:
            if self._kafka_dies and self.options.kafka_version < 4 and "." not in os.path.basename(path):
                # Scala: filename.substring(filename.lastIndexOf(".")) with lastIndexOf = -1
                raise FormatError(f"{path}: Kafka 3.x's tool fails on a file name without a '.' "
                                  "(StringIndexOutOfBoundsException: begin -1)")
            r.ignoring(path)
            return
        getattr(self, "_dump_" + kind.replace("-", "_"))(path)

    # -- logs and KRaft snapshots

    @property
    def _kafka_dies(self) -> bool:
        """Whether to stop where Kafka's tool throws (text output)."""
        return self.options.format == "text"

    def _dump_log(self, path: str) -> None:
        options = self.options
        if options.kafka_version < 4 and options.record_decoder is None:
            for notice in options.decoder_notices:
                self.renderer.notice(path, notice)
        text, fields = log_header(path)
        self.renderer.log_header(path, text, fields)
        batches = FileBatches(path, 0, options.max_bytes)
        deep = options.is_deep
        renderer = self.renderer
        decoder = self._decoder
        progress = self.progress
        v3 = options.kafka_version < 4
        pairs: list[tuple[int, int]] = []
        last_offset = -1
        first = True
        done = 0
        for batch in batches:
            renderer.batch(path, batch, batch.position)
            if deep:
                written = renderer.batch_records(path, batch, decoder)
                if written is not None:  # written by the native pass: only its offsets to check
                    first_offset, batch_last, gaps = written
                    if v3 and first:
                        first = False  # the Scala tool starts comparing at the second record
                    elif first_offset != last_offset + 1:
                        pairs.append((last_offset, first_offset))
                    pairs += gaps
                    last_offset = batch_last
                else:
                    records = batch.records()
                    offsets = [r.offset for r in records]
                    for offset in offsets:
                        if v3 and first:
                            first = False  # the Scala tool starts comparing at the second record
                        elif offset != last_offset + 1:
                            pairs.append((last_offset, offset))
                        last_offset = offset
                    renderer.records(path, batch, records, decoder, _sequences(batch, offsets))
            if progress is not None:
                end = batch.position + batch.size_in_bytes
                progress(end - done)
                done = end
        if batches.trailing is not None and options.max_bytes == INT32_MAX:
            renderer.trailing(path, batches.trailing.position, batches.trailing.length)
        if progress is not None:
            progress(max(0, min(os.path.getsize(path), options.max_bytes) - done))
        if pairs:
            abs_path = os.path.abspath(path)
            reports = self.reports
            reports.called("non_consecutive", abs_path, len(pairs))  # one put per pair
            earlier = reports.non_consecutive.get(abs_path, [])  # the same file given twice
            if v3:
                # A Scala List built by prepending: reverse discovery order, duplicates kept.
                reports.non_consecutive[abs_path] = list(reversed(pairs)) + earlier
            else:
                # A TreeMap keyed by the previous offset: ascending, the last pair wins.
                reports.non_consecutive[abs_path] = sorted({**dict(earlier), **dict(pairs)}.items())

    # -- producer snapshots, text checkpoints (the index files are IndexDumps')

    def _dump_snapshot(self, path: str) -> None:
        from plog.formats.producer_snapshot import decode_snapshot

        with open(path, "rb") as f:
            data = f.read(_SNAPSHOT_READ_LIMIT + 1)
        if len(data) > _SNAPSHOT_READ_LIMIT:
            raise FormatError(f"{path}: producer snapshot larger than {_SNAPSHOT_READ_LIMIT} bytes")
        try:
            entries = decode_snapshot(data, strict=False, kafka_version=self.options.kafka_version)
        except CorruptSnapshotError as e:
            # Kafka prints the message on stderr and goes on (exit 0).
            self.renderer.snapshot_error(path, e.reason)
            return
        for entry in entries:
            self.renderer.snapshot_entry(path, entry)

    def _dump_text_checkpoint(self, path: str) -> None:
        from plog.engine.inspect.dump_checkpoints import render_checkpoint

        lines, entries = render_checkpoint(path)
        self.renderer.checkpoint_lines(path, lines, entries)

    # -- end of run

    def finish(self) -> None:
        """Print the end-of-run reports, in the order Kafka's maps iterate."""
        r = self.renderer
        reports = self.reports
        scala = self.options.kafka_version < 4

        def order(name: str) -> list[str]:
            return report_map_order(reports.calls.get(name, []), scala)

        for path in order("index_mismatches"):
            r.index_mismatches(path, reports.index_mismatches[path])
        for path in order("time_mismatch"):
            r.time_mismatches(path, reports.time_mismatch[path])
        for path in order("time_out_of_order"):
            r.time_out_of_order(path, reports.time_out_of_order[path])
        for path in order("time_not_found"):
            r.time_not_found(path, reports.time_not_found[path])
        for path in order("non_consecutive"):
            r.non_consecutive(path, reports.non_consecutive[path])


_SNAPSHOT_READ_LIMIT = 256 << 20  # 8.4M producers; a larger file is not a producer snapshot


def _sequences(batch, offsets: list[int]):
    """``record.sequence()`` for each record: -1 without a base sequence, otherwise the
    base sequence plus the offset delta, wrapping at Integer.MAX_VALUE."""
    if isinstance(batch, LegacyBatch):
        return [-1] * len(offsets)
    base_seq = batch.base_sequence
    if base_seq < 0:
        return [-1] * len(offsets)
    base = batch.base_offset
    out = []
    for offset in offsets:
        delta = offset - base
        seq = base_seq + delta
        if seq > INT32_MAX:
            seq = seq - INT32_MAX - 1
        out.append(seq)
    return out


__all__ = [
    "DEFAULT_MAX_MESSAGE_SIZE",
    "DumpOptions",
    "DumpRun",
    "TEXT_CHECKPOINT_FILES",
    "expand_dump_paths",
    "file_kind",
    "log_header",
    "report_map_order",
]
