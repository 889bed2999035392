"""DumpLogSegments for ``.log`` segments and KRaft ``.checkpoint`` snapshots, as text lines.

Produces, line for line, what Apache Kafka's ``kafka.tools.DumpLogSegments`` prints
(kafka-format.md §19.3) for a log file: the header line, one line per batch, and with
deep iteration one line per record. The engine never prints: callers pass ``out`` and
``err`` callables that receive whole lines (without the newline).

The file is read in bounded chunks (``file_records.FileBatches``) and walked batch by
batch, so memory stays flat whatever the segment size; records are decoded one batch at
a time.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

from plog.formats.control import ControlRecordType, EndTransactionMarker, parse_control_key_type_id
from plog.formats.errors import FormatError
from plog.formats.legacy import LegacyBatch
from plog.formats.records import NO_SEQUENCE, TIMESTAMP_TYPE_NAMES, increment_sequence

from .file_records import FileBatches

Line = Callable[[str], None]


@dataclass(frozen=True)
class DumpOptions:
    """The DumpLogSegments options that shape ``.log`` output."""

    print_data_log: bool = False
    deep_iteration: bool = False
    skip_record_metadata: bool = False
    max_bytes: int = 2**31 - 1

    @property
    def is_deep(self) -> bool:
        return self.deep_iteration or self.print_data_log


def _string_decoder(raw: bytes | None) -> str:
    # Kafka's StringDecoder: new String(bytes, UTF_8), malformed input becomes U+FFFD.
    return raw.decode("utf-8", "replace")


def log_header_line(path: str) -> str:
    """The line after ``Dumping <file>``: the segment base offset, or the snapshot id."""
    name = os.path.basename(path)
    if name.endswith(".checkpoint"):
        if name == "bootstrap.checkpoint":
            return "KRaft bootstrap snapshot"
        stem = name[: -len(".checkpoint")]
        offset, _, epoch = stem.partition("-")
        return f"Snapshot end offset: {int(offset)}, epoch: {int(epoch)}"
    return f"Log starting offset: {int(name[: name.index('.')])}"


def batch_line(batch, position: int) -> str:
    if isinstance(batch, LegacyBatch):
        head = f"offset: {batch.last_offset}"
    else:
        horizon = batch.delete_horizon_ms
        head = (
            f"baseOffset: {batch.base_offset} lastOffset: {batch.last_offset} count: {batch.records_count} "
            f"baseSequence: {batch.base_sequence} lastSequence: {batch.last_sequence} "
            f"producerId: {batch.producer_id} producerEpoch: {batch.producer_epoch} "
            f"partitionLeaderEpoch: {batch.partition_leader_epoch} "
            f"isTransactional: {'true' if batch.is_transactional else 'false'} "
            f"isControl: {'true' if batch.is_control else 'false'} "
            f"deleteHorizonMs: {'OptionalLong.empty' if horizon is None else f'OptionalLong[{horizon}]'}"
        )
    return (
        f"{head} position: {position} {TIMESTAMP_TYPE_NAMES[batch.timestamp_type]}: {batch.max_timestamp} "
        f"size: {batch.size_in_bytes} magic: {batch.magic} compresscodec: {batch.compression_name} "
        f"crc: {batch.crc} isvalid: {'true' if batch.is_valid() else 'false'}"
    )


def record_line(batch, record, options: DumpOptions) -> str:
    parts = []
    if not options.skip_record_metadata:
        key_size = -1 if record.key is None else len(record.key)
        value_size = -1 if record.value is None else len(record.value)
        parts.append(
            f"| offset: {record.offset} {TIMESTAMP_TYPE_NAMES[batch.timestamp_type]}: {record.timestamp} "
            f"keySize: {key_size} valueSize: {value_size}"
        )
        if isinstance(batch, LegacyBatch):
            parts.append(f" isValid: {'true' if record.is_valid else 'false'} crc: {record.crc}}}")
        else:
            base_seq = batch.base_sequence
            seq = NO_SEQUENCE if base_seq < 0 else increment_sequence(base_seq, record.offset - batch.base_offset)
            parts.append(f" sequence: {seq} headerKeys: [{','.join(k for k, _ in record.headers)}]")
        if batch.is_control:
            parts.append(_control_text(record))
    if options.print_data_log and not batch.is_control:
        if record.key is not None:
            parts.append(f"{'| ' if options.skip_record_metadata else ' '}key: {_string_decoder(record.key)}")
        if record.value is not None:
            parts.append(f" payload: {_string_decoder(record.value)}")
    return "".join(parts)


def _control_text(record) -> str:
    _version, type_id = parse_control_key_type_id(record.key or b"")
    control_type = ControlRecordType.from_type_id(type_id)
    if control_type in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        marker = EndTransactionMarker.decode(record.value)
        return f" endTxnMarker: {control_type.name} coordinatorEpoch: {marker.coordinator_epoch}"
    return f" controlType: {control_type.name}({type_id})"


def dump_log(path: str, options: DumpOptions, out: Line, err: Line) -> None:
    """Dump one ``.log`` or KRaft ``.checkpoint`` file; see the module docstring.

    Raises ``OSError`` (file unreadable) or a ``FormatError`` naming the file position
    when an entry header is impossible or a batch does not decode, after printing what
    came before it, as Kafka does.
    """
    out(log_header_line(path))
    batches = FileBatches(path, 0, options.max_bytes)
    non_consecutive: list[tuple[int, int]] = []
    last_offset = -1
    for batch in batches:
        out(batch_line(batch, batch.position))
        if not options.is_deep:
            continue
        for record in batch.records():
            if last_offset == -1:
                last_offset = record.offset
            elif record.offset != last_offset + 1:
                non_consecutive.append((last_offset, record.offset))
            last_offset = record.offset
            out(record_line(batch, record, options))
    if batches.trailing is not None and options.max_bytes == 2**31 - 1:
        out(f"Found {batches.trailing.length} invalid bytes at the end of {os.path.basename(path)}")
    if non_consecutive:
        err(f"Non-consecutive offsets in {os.path.abspath(path)}")
        # Kafka's Scala tool lists the pairs in reverse order of discovery.
        for prev, nxt in reversed(non_consecutive):
            err(f"  {prev} is followed by {nxt}")


__all__ = ["DumpOptions", "FormatError", "dump_log", "batch_line", "record_line", "log_header_line"]
