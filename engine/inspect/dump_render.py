"""How ``plog dump`` renders what it reads: :class:`TextRenderer` (Kafka's DumpLogSegments
text, of Kafka 4.x's Java tool or 3.x's Scala tool) and :class:`JsonRenderer` (``--format
jsonl``: one object per file header, batch, record, index entry and report, binary-safe).

Both have one method per kind of line the dump writes; :class:`~plog.engine.inspect.dump.DumpRun`
calls them in file order. ``TextRenderer.records`` is the dump's hot loop.
"""

from __future__ import annotations

import json
import os

from plog.formats import java, native
from plog.formats.binary_json import encode_bytes, encode_headers
from plog.formats.errors import FormatError
from plog.formats.java import utf8_decode as _jstr
from plog.formats.legacy import LegacyBatch
from plog.formats.record_batch import MIN_RECORD_SIZE, RECORDS_OFFSET, TIMESTAMP_TYPE_MASK
from plog.formats.records import TIMESTAMP_TYPE_NAMES

from plog.engine.inspect.dump_decoders import Decoder
from plog.engine.inspect.dump_options import DumpOptions, Line
from plog.engine.storage.file_names import CHECKPOINT_FILE_SUFFIX


def java_file_path(path: str) -> str:
    """``new File(path).toString()``: duplicate and trailing separators removed."""
    if not path:
        return path
    prefix = "/" if path.startswith("/") else ""
    return prefix + "/".join(part for part in path.split("/") if part)


def _tt(timestamp_type: int) -> str:
    return TIMESTAMP_TYPE_NAMES[timestamp_type]


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _native_lines(records, sequences, tt: str, print_data: bool) -> str | None:
    """The common case's lines by the native twin (native/src/dump_text.rs), byte-identical
    to the loop of ``TextRenderer.records``; None when a record is unusual (a header key
    that is not valid UTF-8...): the loop renders those."""
    try:
        return native.module.render_dump_records(records, sequences, tt, print_data)
    except native.NativeFormatError as e:
        raise native.typed_error(e) from None


def _native_batch(batch, tt: str, last_arg, render=None) -> tuple[str, int, int, list] | None:
    """``(text, first_offset, last_offset, gaps)`` for a v2 data batch with records, by the
    native unit that decodes and renders in one pass (native/src/dump_batch.rs: ``render``,
    DumpLogSegments' text by default, whose last argument ``last_arg`` is print-data; or the
    JSON lines, whose is the line prefix); None when the reference path must run: the batch
    is empty or unusual, or its records do not decode (the reference then raises the typed
    error, naming the batch)."""
    count = batch.records_count
    if count <= 0:
        return None
    payload = batch.buffer[RECORDS_OFFSET:] if batch.compression == 0 else batch.records_payload()
    if count > len(payload) // MIN_RECORD_SIZE + 1:
        return None
    log_append_time = batch.max_timestamp if batch.attributes & TIMESTAMP_TYPE_MASK else None
    render = render or native.module.render_dump_batch
    return render(payload, count, batch.base_offset, batch.base_timestamp, log_append_time, batch.base_sequence, tt,
                  last_arg)


def _native_eligible(batch, decoder: Decoder | None) -> bool:
    """Whether a batch's records may take the native pass: the native core runs, the batch
    is a v2 data batch, and the records are shown as bytes (no decoder of their own)."""
    return (native.active() and not isinstance(batch, LegacyBatch) and not batch.is_control
            and (decoder is None or decoder.is_default))


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

    def batch_records(self, path: str, batch, decoder: Decoder | None) -> tuple[int, int, list] | None:
        """Write the lines of ``batch``'s records in one native pass, without decoding them into
        Python records, when the batch is the common case (see :meth:`records`) and the native
        core runs: ``(first_offset, last_offset, gaps)`` for the dump's continuity check
        (``gaps``: the non-contiguous pairs inside the batch). None when nothing was written:
        the caller decodes the records and calls :meth:`records`."""
        if self.options.skip_record_metadata or not _native_eligible(batch, decoder):
            return None
        done = _native_batch(batch, _tt(batch.timestamp_type), decoder is not None)
        if done is None:
            return None
        text, first, last, gaps = done
        self.out(text)
        return first, last, gaps

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
            text = _native_lines(records, sequences, tt, decoder is not None) if native.active() else None
            if text is not None:
                if text:
                    out(text)
                return
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
        self._record_prefix: dict[str, bytes] = {}  # the file being dumped -> its records' prefix

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

    def batch_records(self, path: str, batch, decoder: Decoder | None) -> tuple[int, int, list] | None:
        """:meth:`TextRenderer.batch_records` for the JSON lines: the objects of ``batch``'s
        records in one native pass, byte-identical to :meth:`records`; None when nothing was
        written (the caller decodes the records and calls :meth:`records`)."""
        if not _native_eligible(batch, decoder):
            return None
        prefix = self._record_prefix.get(path)
        if prefix is None:
            try:
                prefix = f'{{"type":"record","file":{json.dumps(path, ensure_ascii=False)},'.encode()
            except UnicodeEncodeError:  # a file name that is not UTF-8: the reference writes it
                return None
            self._record_prefix = {path: prefix}
        done = _native_batch(batch, _tt(batch.timestamp_type), prefix, native.module.render_dump_jsonl_batch)
        if done is None:
            return None
        text, first, last, gaps = done
        self._write(text)
        return first, last, gaps

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


__all__ = ["JsonRenderer", "TextRenderer", "java_file_path"]
