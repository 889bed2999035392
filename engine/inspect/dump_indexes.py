"""``plog dump`` of index files: ``.index`` and ``.timeindex`` entries checked against the
batches of their ``.log`` as DumpLogSegments does (``--verify-index-only``,
``--index-sanity-check``), and ``.txnindex`` entries.

:class:`IndexDumps` is the index half of :class:`~plog.engine.inspect.dump.DumpRun`. Index
files are read in bounded chunks (:class:`~plog.engine.storage.index_file.IndexFile`); the
offset index a time index is checked through is read into memory only up to
:data:`INDEX_READ_LIMIT`, and searched with ``pread`` beyond it, so memory stays flat.
"""

from __future__ import annotations

import os

from plog.formats.batch_header import (
    ENTRY_HEAD,
    ENTRY_OFFSETS_SIZE,
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    RECORD_OVERHEAD_V0,
    entry_offsets,
)
from plog.formats.errors import CorruptIndexError, FormatError
from plog.formats.indexes import (
    OFFSET_INDEX_ENTRY_SIZE,
    TIME_INDEX_ENTRY_SIZE,
    TXN_INDEX_ENTRY_SIZE,
    iter_offset_entries,
    iter_time_entries,
    iter_txn_entries,
)

from plog.engine.inspect.dump_render import java_file_path
from plog.engine.errors import InvalidFileNameError
from plog.engine.storage.file_names import INDEX_FILE_SUFFIX, LOG_FILE_SUFFIX, offset_from_file_name, sibling_file
from plog.engine.storage.file_records import FileBatches
from plog.engine.storage.index_file import IndexFile

#: An offset index searched once per time index entry is read into memory up to this size;
#: a larger (hostile or unusual) one is searched with ``pread``, so that memory stays flat.
INDEX_READ_LIMIT = 64 << 20


def file_base_offset(name: str) -> int:
    """``Long.parseLong(name.split("\\.")[0])``, with a one-line error instead of Java's."""
    stem = name.split(".")[0]
    try:
        return offset_from_file_name(name)
    except InvalidFileNameError:
        raise FormatError(f"{name}: the file name does not start with a base offset (For input string: \"{stem}\")") from None


class IndexDumps:
    """The index dumps of a :class:`~plog.engine.inspect.dump.DumpRun` (a mixin: the run owns
    ``options``, ``renderer``, ``reports``, ``problems``, ``err`` and ``_kafka_dies``)."""

    def _dump_index(self, path: str) -> None:
        name = os.path.basename(path)
        base = file_base_offset(name)
        log_path = sibling_file(os.path.abspath(path), LOG_FILE_SUFFIX)
        log_size = os.path.getsize(log_path)  # Kafka opens the log first: a missing one is an error
        with IndexFile(path, OFFSET_INDEX_ENTRY_SIZE, base, trim_zero_tail=False, missing_ok=False) as index:
            if index.entries == 0:
                self.renderer.index_empty(path)
                return
            if self.options.index_sanity_check:
                self._sanity(path, index)
                return
            mismatches: list[tuple[int, int]] = []
            with open(log_path, "rb") as log:
                for i, (offset, position) in enumerate(_entries(index, iter_offset_entries)):
                    if offset == base and i > 0:
                        break  # the zero-filled preallocated tail of an active segment
                    last = _first_batch_last_offset(log, log_size, position, self.options.max_message_size, log_path)
                    if last != offset:
                        mismatches.append((offset, last))
                    if not self.options.verify_index_only:
                        self.renderer.offset_entry(path, offset, position)
            if mismatches:
                self.problems += len(mismatches)
                abs_path = os.path.abspath(path)
                reports = self.reports
                reports.called("index_mismatches", abs_path, len(mismatches))  # one put per mismatch
                earlier = reports.index_mismatches.get(abs_path, [])
                if self.options.kafka_version < 4:
                    reports.index_mismatches[abs_path] = list(reversed(mismatches)) + earlier
                else:
                    reports.index_mismatches[abs_path] = sorted({**dict(earlier), **dict(mismatches)}.items(),
                                                                reverse=True)

    def _sanity(self, path: str, index: IndexFile) -> None:
        try:
            index.sanity_check(os.path.abspath(path))
        except CorruptIndexError as e:
            # Kafka throws: no "passed" line, and the tool dies (exit 1).
            if self._kafka_dies:
                raise FormatError(f"{java_file_path(path)} failed sanity check: {e.reason}") from None
            self.problems += 1
            self.err(f"{java_file_path(path)} failed sanity check: {e.reason}")
            return
        self.renderer.sanity_passed(path)

    def _dump_timeindex(self, path: str) -> None:
        name = os.path.basename(path)
        base = file_base_offset(name)
        log_path = sibling_file(os.path.abspath(path), LOG_FILE_SUFFIX)
        # Kafka opens the segment's .log before its indexes: a missing one fails here, first.
        os.stat(log_path)
        index_path = sibling_file(os.path.abspath(path), INDEX_FILE_SUFFIX)
        if self._kafka_dies and not os.path.exists(index_path):
            # Kafka opens the offset index with maxIndexSize -1: a missing one is created
            # (empty) and then rejected, before the time index is read.
            raise FormatError(f"{index_path}: the offset index of {os.path.basename(path)} is missing "
                              "(Kafka: IllegalArgumentException: Invalid max index size: -1)")
        with IndexFile(path, TIME_INDEX_ENTRY_SIZE, base, trim_zero_tail=False, missing_ok=False) as time_index, \
                IndexFile(index_path, OFFSET_INDEX_ENTRY_SIZE, base, trim_zero_tail=False) as offset_index:
            if self.options.index_sanity_check:
                self._sanity(path, time_index)
                return
            abs_path = os.path.abspath(path)
            reports = self.reports
            v3 = self.options.kafka_version < 4
            offset_index.load(INDEX_READ_LIMIT)
            prev_timestamp = -1
            for i, (timestamp, offset) in enumerate(_entries(time_index, iter_time_entries)):
                if offset == base and i > 0:
                    break
                position = offset_index.offset_lookup(offset).position
                batch = _find_batch(log_path, position, offset)
                if batch is None:
                    reports.time_error("time_not_found", abs_path, (offset, -1), v3)
                    self.problems += 1
                elif batch[0] != offset:
                    reports.time_error("time_not_found", abs_path, (offset, batch[0]), v3)
                    self.problems += 1
                else:
                    max_timestamp = batch[1]
                    if max_timestamp != timestamp:
                        reports.time_error("time_mismatch", abs_path, (timestamp, max_timestamp), v3)
                        self.problems += 1
                    if prev_timestamp >= timestamp:
                        reports.time_error("time_out_of_order", abs_path, (timestamp, prev_timestamp), v3)
                        self.problems += 1
                if not self.options.verify_index_only:
                    self.renderer.time_entry(path, timestamp, offset)
                prev_timestamp = timestamp


    def _dump_txnindex(self, path: str) -> None:
        base = file_base_offset(os.path.basename(path))
        with IndexFile(path, TXN_INDEX_ENTRY_SIZE, base, trim_zero_tail=False, missing_ok=False) as index:
            for _, chunk in index.chunks():
                for txn in iter_txn_entries(chunk, os.path.abspath(path)):
                    self.renderer.txn_entry(path, txn)


def _first_batch_last_offset(log, log_size: int, position: int, max_message_size: int, log_path: str) -> int:
    """``fileRecords.slice(position, maxMessageSize).batches().iterator().next().lastOffset()``."""
    if position < 0:
        raise FormatError(f"Invalid position: {position} in read from {log_path}")
    if position > log_size:
        raise FormatError(f"Slice from position {position} exceeds end position of {log_path}")
    available = min(max_message_size, log_size - position)
    if available < HEADER_SIZE_UP_TO_MAGIC + 1:
        raise FormatError(f"no batch at position {position} of {log_path} (NoSuchElementException)")
    log.seek(position)
    head = log.read(ENTRY_OFFSETS_SIZE)
    size = ENTRY_HEAD.unpack_from(head, 0)[1]
    magic = head[MAGIC_OFFSET]
    if size < RECORD_OVERHEAD_V0:
        raise FormatError(f"Found record size {size} smaller than minimum record overhead ({RECORD_OVERHEAD_V0}) "
                          f"in file {log_path}.")
    if available < size + LOG_OVERHEAD:
        raise FormatError(f"no whole batch within {max_message_size} bytes at position {position} of {log_path} "
                          "(NoSuchElementException; try a larger --max-message-size)")
    if magic == 2 and len(head) < ENTRY_OFFSETS_SIZE:
        raise FormatError(f"truncated batch header at position {position} of {log_path}")
    if magic <= 2:
        return entry_offsets(head)[1]
    raise FormatError(f"Invalid magic found in record: {magic}")


def _find_batch(log_path: str, position: int, offset: int) -> tuple[int, int] | None:
    """The first batch from ``position`` whose last offset is >= ``offset``: its last
    offset and the max timestamp of its records (Kafka iterates the records); None when
    there is none."""
    for batch in FileBatches(log_path, position, None, chunk_size=1 << 20):
        if batch.last_offset >= offset:
            if batch.last_offset != offset:
                return batch.last_offset, -1
            max_ts = -1
            for record in batch.records():
                if record.timestamp > max_ts:
                    max_ts = record.timestamp
            return batch.last_offset, max_ts
    return None


def _entries(index: IndexFile, decode):
    """Every whole entry of ``index``, decoded by ``decode`` (``iter_offset_entries`` or
    ``iter_time_entries``), read in bounded chunks."""
    for _, chunk in index.chunks():
        yield from decode(chunk, index.base_offset)


__all__ = ["INDEX_READ_LIMIT", "IndexDumps", "file_base_offset"]
