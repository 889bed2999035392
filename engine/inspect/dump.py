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
"""

from __future__ import annotations

import glob
import json
import os
import struct
from dataclasses import dataclass, field
from typing import Callable

from plog.formats.binary_json import encode_bytes, encode_headers
from plog.formats.errors import CorruptIndexError, CorruptSnapshotError, FormatError
from plog.formats.indexes import (
    OFFSET_INDEX_ENTRY_SIZE,
    TIME_INDEX_ENTRY_SIZE,
    TXN_INDEX_ENTRY_SIZE,
    iter_offset_entries,
    iter_time_entries,
    iter_txn_entries,
)
from plog.formats import java
from plog.formats.java import utf8_decode as _jstr
from plog.formats.legacy import LegacyBatch
from plog.formats.records import TIMESTAMP_TYPE_NAMES

from plog.engine.errors import NotAKafkaPathError
from plog.engine.inspect.dump_decoders import Decoder, make_decoder
from plog.engine.storage.file_names import (
    BOOTSTRAP_CHECKPOINT,
    CHECKPOINT_FILE_SUFFIX,
    INDEX_FILE_SUFFIX,
    LOG_FILE_SUFFIX,
    PRODUCER_SNAPSHOT_FILE_SUFFIX,
    TEXT_STATE_FILES,
    TIME_INDEX_FILE_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
    InvalidFileNameError,
    offset_from_file_name,
    sibling_file,
)
from plog.engine.storage.file_records import FileBatches
from plog.engine.storage.index_file import IndexFile

Line = Callable[[str], None]
Progress = Callable[[int], None]
INT32_MAX = 2**31 - 1
DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024
#: An offset index searched once per time index entry is read into memory up to this size;
#: a larger (hostile or unusual) one is searched with ``pread``, so that memory stays flat.
INDEX_READ_LIMIT = 64 << 20

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


@dataclass(frozen=True)
class DumpOptions:
    """DumpLogSegments' options (§19.1) plus plog's output choices."""

    print_data_log: bool = False
    deep_iteration: bool = False
    skip_record_metadata: bool = False
    verify_index_only: bool = False
    index_sanity_check: bool = False
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    max_bytes: int = INT32_MAX
    record_decoder: str | None = None  # "offsets", "transaction-log", "cluster-metadata"
    key_decoder: str | None = None  # None: Kafka's StringDecoder, not given explicitly
    value_decoder: str | None = None
    kafka_version: int = 4
    format: str = "text"  # "text" or "jsonl"
    #: Lines Kafka 3.x's tool prints on stdout before each log it dumps, one per deprecated
    #: ``kafka.serializer`` decoder class given (value decoder first), see
    #: :func:`~plog.engine.inspect.dump_decoders.deprecated_decoder_notices`.
    decoder_notices: tuple[str, ...] = ()

    @property
    def should_print_data_log(self) -> bool:
        # Kafka: print-data-log, or any decoder option given explicitly.
        return bool(self.print_data_log or self.record_decoder or self.key_decoder or self.value_decoder)

    @property
    def is_deep(self) -> bool:
        return self.deep_iteration or self.should_print_data_log

    def decoder(self) -> Decoder:
        return make_decoder(self.record_decoder, self.key_decoder or "string", self.value_decoder or "string",
                            self.kafka_version)


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


def java_file_path(path: str) -> str:
    """``new File(path).toString()``: duplicate and trailing separators removed."""
    if not path:
        return path
    prefix = "/" if path.startswith("/") else ""
    return prefix + "/".join(part for part in path.split("/") if part)


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


def _tt(timestamp_type: int) -> str:
    return TIMESTAMP_TYPE_NAMES[timestamp_type]


def _bool(value: bool) -> str:
    return "true" if value else "false"


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
    base = _base_offset(name)
    return f"Log starting offset: {base}", {"base_offset": base}


def _base_offset(name: str) -> int:
    """``Long.parseLong(name.split("\\.")[0])``, with a one-line error instead of Java's."""
    stem = name.split(".")[0]
    try:
        return offset_from_file_name(name)
    except InvalidFileNameError:
        raise FormatError(f"{name}: the file name does not start with a base offset (For input string: \"{stem}\")") from None


# --------------------------------------------------------------------------- renderers


class TextRenderer:
    """Kafka's DumpLogSegments text, for ``kafka_version`` 4 (Java tool) or 3 (Scala)."""

    def __init__(self, options: DumpOptions, out: Line, err: Line):
        self.options = options
        self.out = out
        self.err = err
        self.v3 = options.kafka_version < 4

    def dumping(self, path: str) -> None:
        self.out(f"Dumping {java_file_path(path)}")

    def ignoring(self, path: str) -> None:
        self.err(f"Ignoring unknown file {java_file_path(path)}")

    def log_header(self, path: str, text: str, fields: dict) -> None:
        self.out(text)

    def notice(self, path: str, text: str) -> None:
        self.out(text)

    def batch(self, path: str, batch, position: int) -> None:
        if isinstance(batch, LegacyBatch):
            head = f"offset: {batch.last_offset}"
        else:
            horizon = batch.delete_horizon_ms
            head = (
                f"baseOffset: {batch.base_offset} lastOffset: {batch.last_offset} count: {batch.records_count} "
                f"baseSequence: {batch.base_sequence} lastSequence: {batch.last_sequence} "
                f"producerId: {batch.producer_id} producerEpoch: {batch.producer_epoch} "
                f"partitionLeaderEpoch: {batch.partition_leader_epoch} "
                f"isTransactional: {_bool(batch.is_transactional)} "
                f"isControl: {_bool(batch.is_control)} "
                f"deleteHorizonMs: {'OptionalLong.empty' if horizon is None else f'OptionalLong[{horizon}]'}"
            )
        self.out(
            f"{head} position: {position} {_tt(batch.timestamp_type)}: {batch.max_timestamp} "
            f"size: {batch.size_in_bytes} magic: {batch.magic} compresscodec: {batch.compression_name} "
            f"crc: {batch.crc} isvalid: {_bool(batch.is_valid())}"
        )

    def records(self, path: str, batch, records, decoder: Decoder | None, sequences) -> None:
        """One line per record (deep iteration); ``decoder`` is None unless print-data-log."""
        options = self.options
        out = self.out
        skip = options.skip_record_metadata
        control = batch.is_control
        legacy = isinstance(batch, LegacyBatch)
        tt = _tt(batch.timestamp_type)
        v3 = self.v3
        print_contents = decoder is not None and not control
        if not skip and not legacy and not control and (decoder is None or decoder.is_default):
            # The common case (a v2 data batch, metadata shown, UTF-8 text), in one
            # expression per record and one write per batch: this loop is the hot path.
            lines = []
            append = lines.append
            for r, seq in zip(records, sequences):
                key, value, headers = r.key, r.value, r.headers
                if headers:
                    hk = ",".join(java.string_from_escaped(k) for k, _ in headers)
                else:
                    hk = ""
                if decoder is None:
                    data = ""
                elif key is None:
                    data = "" if value is None else " payload: " + _jstr(value)
                else:
                    data = " key: " + _jstr(key) + (
                        "" if value is None else " payload: " + _jstr(value))
                append(
                    f"| offset: {r.offset} {tt}: {r.timestamp} keySize: {-1 if key is None else len(key)} "
                    f"valueSize: {-1 if value is None else len(value)} sequence: {seq} headerKeys: [{hk}]{data}"
                )
            if lines:
                out("\n".join(lines))
            return
        for record, sequence in zip(records, sequences):
            parts = []
            if not skip:
                key, value = record.key, record.value
                parts.append(
                    f"| offset: {record.offset} {tt}: {record.timestamp} "
                    f"keySize: {-1 if key is None else len(key)} valueSize: {-1 if value is None else len(value)}"
                )
                if legacy:
                    parts.append(f" isValid: {_bool(record.is_valid)} crc: {record.crc}{'}' if v3 else ''}")
                else:
                    headers = record.headers
                    keys = ",".join(java.string_from_escaped(k) for k, _ in headers) if headers else ""
                    parts.append(f" sequence: {sequence} headerKeys: [{keys}]")
                if control:
                    parts.append(self._control_text(record))
            if print_contents:
                try:
                    key_text, value_text = decoder.decode(record)
                except FormatError as e:
                    # Kafka prints the metadata part of the line before it decodes: when a
                    # decoder throws, the tool dies after that partial line (no newline).
                    e.partial_output = "".join(parts)
                    raise
                prefix = "| " if skip else " "
                if key_text is not None:
                    parts.append(f"{prefix}key: {key_text}")
                    prefix = " "
                if value_text is not None:
                    parts.append(f"{' ' if v3 else prefix}payload: {value_text}")
            out("".join(parts))

    def _control_text(self, record) -> str:
        from plog.formats.control import DUMP_LABELS, ControlRecordType, parse_control_key_type_id

        _version, type_id = parse_control_key_type_id(record.key)
        control_type = ControlRecordType.from_type_id(type_id)
        if control_type in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            from plog.formats.control import EndTransactionMarker

            marker = EndTransactionMarker.decode(record.value)
            return f" endTxnMarker: {control_type.name} coordinatorEpoch: {marker.coordinator_epoch}"
        if control_type in DUMP_LABELS and not (self.v3 and control_type is ControlRecordType.LEADER_CHANGE):
            from plog.formats.control import decode_kraft_value, KRAFT_VALUE_SCHEMAS
            from plog.formats.protocol import jackson_dumps, to_kafka_json

            fields = decode_kraft_value(control_type, record.value)
            text = jackson_dumps(to_kafka_json(KRAFT_VALUE_SCHEMAS[control_type], 0, fields))
            return f" {DUMP_LABELS[control_type]} {text}"
        return f" controlType: {control_type.name}({type_id})"

    def trailing(self, path: str, position: int, length: int) -> None:
        self.out(f"Found {length} invalid bytes at the end of {os.path.basename(path)}")

    def index_empty(self, path: str) -> None:
        self.out(f"{java_file_path(path)} is empty.")

    def sanity_passed(self, path: str) -> None:
        self.out(f"{java_file_path(path)} passed sanity check.")

    def offset_entry(self, path: str, offset: int, position: int) -> None:
        self.out(f"offset: {offset} position: {position}")

    def time_entry(self, path: str, timestamp: int, offset: int) -> None:
        self.out(f"timestamp: {timestamp} offset: {offset}")

    def snapshot_entry(self, path: str, e) -> None:
        txn_first = "OptionalLong.empty" if e.current_txn_first_offset < 0 else f"OptionalLong[{e.current_txn_first_offset}]"
        line = (
            f"producerId: {e.producer_id} producerEpoch: {e.producer_epoch} coordinatorEpoch: {e.coordinator_epoch} "
            f"currentTxnFirstOffset: {txn_first} lastTimestamp: {e.timestamp}"
        )
        if self.v3:
            line += " "
        if e.has_batch_metadata:
            line += (
                f"{'' if self.v3 else ' '}firstSequence: {e.first_sequence} lastSequence: {e.last_sequence} "
                f"lastOffset: {e.last_offset} offsetDelta: {e.offset_delta} timestamp: {e.timestamp}"
            )
        self.out(line)

    def snapshot_error(self, path: str, message: str) -> None:
        self.err(message)

    def txn_entry(self, path: str, t) -> None:
        self.out(
            f"version: {t.version} producerId: {t.producer_id} firstOffset: {t.first_offset} "
            f"lastOffset: {t.last_offset} lastStableOffset: {t.last_stable_offset}"
        )

    def checkpoint_lines(self, path: str, lines: list[str], entries: list[dict]) -> None:
        for line in lines:
            self.out(line)

    # End-of-run reports (stderr), already ordered by DumpRun.
    def index_mismatches(self, abs_path: str, pairs) -> None:
        self.err(f"Mismatches in :{abs_path}")
        for index_offset, log_offset in pairs:
            self.err(f"  Index offset: {index_offset}, log offset: {log_offset}")

    def time_mismatches(self, abs_path: str, pairs) -> None:
        self.err(f"Found timestamp mismatch in :{abs_path}")
        for index_ts, log_ts in pairs:
            self.err(f"  Index timestamp: {index_ts}, log timestamp: {log_ts}")

    def time_out_of_order(self, abs_path: str, pairs) -> None:
        self.err(f"Found out of order timestamp in :{abs_path}")
        for index_ts, prev_ts in pairs:
            self.err(f"  Index timestamp: {index_ts}, Previously indexed timestamp: {prev_ts}")

    def time_not_found(self, abs_path: str, pairs) -> None:
        if self.v3:
            self.err("The following indexed offsets are not found in the log.")
        else:
            self.err(f"The following indexed offsets are not found in :{abs_path}")
        for index_offset, log_offset in pairs:
            self.err(f"Indexed offset: {index_offset}, found log offset: {log_offset}")

    def non_consecutive(self, abs_path: str, pairs) -> None:
        self.err(f"Non-consecutive offsets in {abs_path}")
        for prev, nxt in pairs:
            self.err(f"  {prev} is followed by {nxt}")


class JsonRenderer:
    """One JSON object per line on ``out``; every object has ``type`` and ``file``.

    Field names are the text dump's labels in snake_case (``base_offset``,
    ``partition_leader_epoch``, ``is_transactional``, ``key_size``...), as every JSON plog
    writes. What Kafka itself encodes as JSON keeps Kafka's names: a control record's
    ``value`` (Kafka's JSON converters: ``coordinatorEpoch``, ``leaderId``...) and the
    internal-topic decoders' ``key_decoded``/``value_decoded``."""

    def __init__(self, options: DumpOptions, out: Line, err: Line):
        self.options = options
        self._write = out
        self.err = err

    def _emit(self, obj: dict) -> None:
        self._write(json.dumps(obj, ensure_ascii=False, separators=(",", ":")))

    def dumping(self, path: str) -> None:
        pass  # every object names its file

    def ignoring(self, path: str) -> None:
        self._emit({"type": "ignored", "file": path})

    def log_header(self, path: str, text: str, fields: dict) -> None:
        self._emit({"type": "file", "file": path, "kind": "snapshot" if path.endswith(CHECKPOINT_FILE_SUFFIX) else "log",
                    **fields})

    def notice(self, path: str, text: str) -> None:
        pass  # Kafka's deprecation notices are not part of the data

    def batch(self, path: str, batch, position: int) -> None:
        obj = {"type": "batch", "file": path, "position": position}
        if isinstance(batch, LegacyBatch):
            obj["offset"] = batch.last_offset
        else:
            obj.update(
                base_offset=batch.base_offset,
                last_offset=batch.last_offset,
                count=batch.records_count,
                base_sequence=batch.base_sequence,
                last_sequence=batch.last_sequence,
                producer_id=batch.producer_id,
                producer_epoch=batch.producer_epoch,
                partition_leader_epoch=batch.partition_leader_epoch,
                is_transactional=batch.is_transactional,
                is_control=batch.is_control,
                delete_horizon_ms=batch.delete_horizon_ms,
            )
        obj.update(
            timestamp_type=_tt(batch.timestamp_type),
            max_timestamp=batch.max_timestamp,
            size=batch.size_in_bytes,
            magic=batch.magic,
            compresscodec=batch.compression_name,
            crc=batch.crc,
            is_valid=batch.is_valid(),
        )
        self._emit(obj)

    def records(self, path: str, batch, records, decoder: Decoder | None, sequences) -> None:
        legacy = isinstance(batch, LegacyBatch)
        tt = _tt(batch.timestamp_type)
        control = batch.is_control
        for record, sequence in zip(records, sequences):
            key, value = record.key, record.value
            obj = {
                "type": "record",
                "file": path,
                "offset": record.offset,
                "timestamp_type": tt,
                "timestamp": record.timestamp,
                "key_size": -1 if key is None else len(key),
                "value_size": -1 if value is None else len(value),
            }
            if legacy:
                obj["is_valid"] = record.is_valid
                obj["crc"] = record.crc
            else:
                obj["sequence"] = sequence
                obj["header_keys"] = [java.string_from_escaped(k) for k, _ in record.headers]
                obj["headers"] = encode_headers(record.headers)
            obj["key"] = encode_bytes(key)
            obj["value"] = encode_bytes(value)
            if control:
                obj["control"] = _control_json(record)
            elif decoder is not None and not decoder.is_default:
                obj["key_decoded"], obj["value_decoded"] = decoder.decode_json(record)
            self._emit(obj)

    def trailing(self, path: str, position: int, length: int) -> None:
        self._emit({"type": "trailing-bytes", "file": path, "position": position, "length": length})

    def index_empty(self, path: str) -> None:
        self._emit({"type": "index-empty", "file": path})

    def sanity_passed(self, path: str) -> None:
        self._emit({"type": "sanity-check", "file": path, "passed": True})

    def offset_entry(self, path: str, offset: int, position: int) -> None:
        self._emit({"type": "index-entry", "file": path, "offset": offset, "position": position})

    def time_entry(self, path: str, timestamp: int, offset: int) -> None:
        self._emit({"type": "timeindex-entry", "file": path, "timestamp": timestamp, "offset": offset})

    def snapshot_entry(self, path: str, e) -> None:
        obj = {
            "type": "producer-state",
            "file": path,
            "producer_id": e.producer_id,
            "producer_epoch": e.producer_epoch,
            "coordinator_epoch": e.coordinator_epoch,
            "current_txn_first_offset": None if e.current_txn_first_offset < 0 else e.current_txn_first_offset,
            "last_timestamp": e.timestamp,
        }
        if e.has_batch_metadata:
            obj.update(first_sequence=e.first_sequence, last_sequence=e.last_sequence, last_offset=e.last_offset,
                       offset_delta=e.offset_delta, timestamp=e.timestamp)
        self._emit(obj)

    def snapshot_error(self, path: str, message: str) -> None:
        self._emit({"type": "snapshot-error", "file": path, "message": message})

    def txn_entry(self, path: str, t) -> None:
        self._emit({"type": "aborted-txn", "file": path, "version": t.version, "producer_id": t.producer_id,
                    "first_offset": t.first_offset, "last_offset": t.last_offset,
                    "last_stable_offset": t.last_stable_offset})

    def checkpoint_lines(self, path: str, lines: list[str], entries: list[dict]) -> None:
        for entry in entries:
            self._emit({"file": path, **entry})

    def index_mismatches(self, abs_path: str, pairs) -> None:
        for index_offset, log_offset in pairs:
            self._emit({"type": "index-mismatch", "file": abs_path, "index_offset": index_offset, "log_offset": log_offset})

    def time_mismatches(self, abs_path: str, pairs) -> None:
        for index_ts, log_ts in pairs:
            self._emit({"type": "timeindex-mismatch", "file": abs_path, "index_timestamp": index_ts, "log_timestamp": log_ts})

    def time_out_of_order(self, abs_path: str, pairs) -> None:
        for index_ts, prev_ts in pairs:
            self._emit({"type": "timeindex-out-of-order", "file": abs_path, "index_timestamp": index_ts,
                        "previous_timestamp": prev_ts})

    def time_not_found(self, abs_path: str, pairs) -> None:
        for index_offset, log_offset in pairs:
            self._emit({"type": "timeindex-offset-not-found", "file": abs_path, "index_offset": index_offset,
                        "log_offset": log_offset})

    def non_consecutive(self, abs_path: str, pairs) -> None:
        for prev, nxt in pairs:
            self._emit({"type": "non-consecutive-offsets", "file": abs_path, "previous": prev, "next": nxt})


def _control_json(record) -> dict:
    from plog.formats.control import ControlRecordType, decode_control_value, parse_control_key_type_id

    try:
        version, type_id = parse_control_key_type_id(record.key)
    except FormatError as e:
        return {"error": e.reason}
    control_type = ControlRecordType.from_type_id(type_id)
    obj: dict = {"control_type": control_type.name, "type_id": type_id, "key_version": version}
    if control_type is not ControlRecordType.UNKNOWN:
        try:
            fields = decode_control_value(control_type, record.value)
            obj["value"] = json.loads(_kraft_or_marker_json(control_type, fields))
        except FormatError as e:
            obj["error"] = e.reason
    return obj


def _kraft_or_marker_json(control_type, fields: dict) -> str:
    from plog.formats.control import KRAFT_VALUE_SCHEMAS
    from plog.formats.protocol import jackson_dumps, to_kafka_json

    schema = KRAFT_VALUE_SCHEMAS.get(control_type)
    if schema is None:
        return json.dumps(fields)
    return jackson_dumps(to_kafka_json(schema, 0, fields))


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


class DumpRun:
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

    # -- indexes

    def _dump_index(self, path: str) -> None:
        name = os.path.basename(path)
        base = _base_offset(name)
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
        base = _base_offset(name)
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

    # -- producer snapshots, transaction indexes, text checkpoints

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

    def _dump_txnindex(self, path: str) -> None:
        base = _base_offset(os.path.basename(path))
        with IndexFile(path, TXN_INDEX_ENTRY_SIZE, base, trim_zero_tail=False, missing_ok=False) as index:
            for _, chunk in index.chunks():
                for txn in iter_txn_entries(chunk, os.path.abspath(path)):
                    self.renderer.txn_entry(path, txn)

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


_ENTRY_HEAD = struct.Struct(">qiiB")  # offset, size, (crc|partitionLeaderEpoch), magic


def _first_batch_last_offset(log, log_size: int, position: int, max_message_size: int, log_path: str) -> int:
    """``fileRecords.slice(position, maxMessageSize).batches().iterator().next().lastOffset()``."""
    if position < 0:
        raise FormatError(f"Invalid position: {position} in read from {log_path}")
    if position > log_size:
        raise FormatError(f"Slice from position {position} exceeds end position of {log_path}")
    available = min(max_message_size, log_size - position)
    if available < 17 + 1:
        raise FormatError(f"no batch at position {position} of {log_path} (NoSuchElementException)")
    log.seek(position)
    head = log.read(27)
    offset, size, _, magic = _ENTRY_HEAD.unpack_from(head, 0)
    if size < 14:
        raise FormatError(f"Found record size {size} smaller than minimum record overhead (14) in file {log_path}.")
    if available < size + 12:
        raise FormatError(f"no whole batch within {max_message_size} bytes at position {position} of {log_path} "
                          "(NoSuchElementException; try a larger --max-message-size)")
    if magic == 2:
        if len(head) < 27:
            raise FormatError(f"truncated batch header at position {position} of {log_path}")
        return offset + struct.unpack_from(">i", head, 23)[0]
    if magic in (0, 1):
        return offset
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


__all__ = [
    "DEFAULT_MAX_MESSAGE_SIZE",
    "DumpOptions",
    "DumpRun",
    "JsonRenderer",
    "TEXT_CHECKPOINT_FILES",
    "TextRenderer",
    "expand_dump_paths",
    "file_kind",
    "java_file_path",
    "report_map_order",
    "log_header",
]
