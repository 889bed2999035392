"""Records as the clients hand them over, and their binary-safe JSON lines: what
``plog produce --input-format jsonl`` reads and ``plog consume --format jsonl`` writes.

* :class:`ProducerRecord` (one record to produce) and :class:`ConsumerRecord` (one consumed).
* :func:`parse_jsonl`: the objects ``plog consume --format jsonl`` writes, and the
  ``"type":"record"`` objects of ``plog dump --format jsonl`` (of this version and of older
  ones, which spelled the same fields in camelCase); keys, values and header values in the
  binary-safe convention of :mod:`plog.formats.binary_json`; headers as the list
  ``[{"key", "value"}]`` or as an object ``{"name": value}``.
* :func:`format_jsonl` / :func:`record_to_json`: one compact JSON object per record, fields
  ``topic, partition, offset, timestamp, timestamp_type, key, value, headers`` (Kafka's
  ``ConsumerRecord`` names in snake_case, as every JSON plog writes).
  ``parse_jsonl(format_jsonl(r))`` gives back r's key, value, headers, timestamp and
  partition byte for byte, so ``plog consume --format jsonl | plog produce --input-format
  jsonl`` copies records exactly.

* :class:`BatchFormat` (:func:`jsonl_batch_format`; console_io's ``template_batch_format``):
  an output format as ``plog consume``'s native path prints it, a batch at a time
  (native/src/consume_render.rs), byte for byte what the per-record function prints;
  :class:`RenderedPoll` is one poll's output and bookkeeping (``Consumer.poll_rendered``).

The console tools' text forms (kafka-console-producer's lines, kafka-console-consumer's
formatter, kcat's templates) are engine.clients.console_io's.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from json.encoder import encode_basestring as _json_str  # C; the ensure_ascii=False escaping
from typing import Any, Iterator

from plog.formats import native
from plog.formats.binary_json import decode_bytes, encode_bytes, encode_headers
from plog.formats.default_record import decode_records
from plog.formats.record_batch import MIN_RECORD_SIZE
from plog.formats.records import LOG_APPEND_TIME

from plog.engine.errors import InputRecordError

INT32_MAX = (1 << 31) - 1
INT64_MAX = (1 << 63) - 1

# -- records -----------------------------------------------------------------------------


@dataclass(slots=True)
class ProducerRecord:
    """One record to produce. ``value`` None is a tombstone; ``partition`` None lets the
    partitioner choose; ``timestamp`` None lets the producer stamp it (CreateTime now)."""

    value: bytes | None
    key: bytes | None = None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    partition: int | None = None
    timestamp: int | None = None


@dataclass(slots=True)
class ConsumerRecord:
    """One consumed record. ``timestamp_type`` is ``"CreateTime"`` or ``"LogAppendTime"``
    (``"NoTimestampType"`` with ``timestamp`` -1 for magic v0 messages). Header keys are
    ``str`` decoded with ``surrogateescape``, as the formats layer decodes them."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: str
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    leader_epoch: int | None = None


# -- JSON lines input --------------------------------------------------------------------

_DECODER = json.JSONDecoder()
_MISSING = object()


def _fail(line_number: int, message: str):
    raise InputRecordError(line_number, message)


def _json_int(obj: dict, name: str, line_number: int, low: int, high: int, what: str) -> int | None:
    v = obj.get(name)
    if v is None:
        return None
    if type(v) is not int or not low <= v <= high:  # bool is an int subclass: rejected here
        _fail(line_number, f'"{name}" must be {what}, got {json.dumps(v)[:60]}')
    return v


def _json_bytes(obj: dict, name: str, line_number: int) -> bytes | None:
    try:
        return decode_bytes(obj.get(name))
    except ValueError as e:
        _fail(line_number, f'"{name}": {e}')


class _Pairs(dict):
    """A JSON object that remembers the first key it saw twice (``json`` keeps the last)."""

    duplicate: str | None = None


def _pairs(pairs: list) -> _Pairs:
    obj = _Pairs()
    for k, v in pairs:
        if k in obj and obj.duplicate is None:
            obj.duplicate = k
        obj[k] = v
    return obj


_PAIRS_DECODER = json.JSONDecoder(object_pairs_hook=_pairs)
_HEADERS_SHAPE = '"headers" must be a list of {"key": ..., "value": ...} or an object {"name": value, ...}'


def _json_header_object(text: str, line_number: int) -> list[tuple[str, bytes | None]]:
    """The object form ``{"name": value, ...}``: names are text, values any
    :func:`binary_json.decode_bytes` form, in the order written. A name given twice is an
    error: a JSON object cannot hold it twice (``json`` would keep the last silently), and
    the list form can."""
    # Decoded again with a hook that sees repeated names: only on this (rarer) path, so the
    # common line keeps the C decoder without a hook.
    raw = _PAIRS_DECODER.decode(text)["headers"]
    if raw.duplicate is not None:
        _fail(line_number, f'"headers": {json.dumps(raw.duplicate, ensure_ascii=False)} is given twice; '
                           'repeated header names need the list form [{"key": ..., "value": ...}, ...]')
    out = []
    for name, value in raw.items():
        try:
            decoded = decode_bytes(value)
        except ValueError as e:
            _fail(line_number, f'"headers".{json.dumps(name, ensure_ascii=False)}: {e}')
        out.append((name.encode("utf-8", "surrogatepass").decode("utf-8", "surrogateescape"), decoded))
    return out


def _json_headers(raw: Any, line_number: int, text: str = "") -> list[tuple[str, bytes | None]]:
    if raw is None:
        return []
    if isinstance(raw, dict):
        return _json_header_object(text, line_number)
    if not isinstance(raw, list):
        _fail(line_number, _HEADERS_SHAPE)
    out = []
    for n, h in enumerate(raw):
        if not isinstance(h, dict) or "key" not in h or "value" not in h:
            _fail(line_number, f'"headers"[{n}] must be an object {{"key": ..., "value": ...}}')
        try:
            key = decode_bytes(h["key"])
            value = decode_bytes(h["value"])
        except ValueError as e:
            _fail(line_number, f'"headers"[{n}]: {e}')
        if key is None:
            _fail(line_number, f'"headers"[{n}]: a header key cannot be null')
        out.append((key.decode("utf-8", "surrogateescape"), value))
    return out


def parse_jsonl(line: bytes, line_number: int) -> ProducerRecord | None:
    """One JSON line → a record, or None for a line that carries no record to produce.

    Accepted objects:

    * ``plog consume --format jsonl`` records: ``key``, ``value``, ``headers``,
      ``timestamp`` and ``partition`` are used; ``topic``, ``offset``, ``timestamp_type``
      and any other field are ignored (the target topic is the command's; offsets are
      assigned by the log).
    * ``plog dump --format jsonl`` lines: a ``"type":"record"`` object gives key, value,
      headers and timestamp (no partition); objects of any other ``type`` (file, batch,
      index entries...) and control records (with a ``control`` field) give None.

    Every field used has the same name in the camelCase JSON of older plog versions
    (``timestampType``, ``baseOffset``...), so their output is read the same way.

    ``value`` is required (``null`` is a tombstone); ``key`` and ``headers`` may be left
    out. Keys, values and header values are :func:`binary_json.decode_bytes` forms.
    ``headers`` is the list ``[{"key": k, "value": v}, ...]`` (what plog writes: any key
    bytes, repeated keys) or an object ``{"k": v, ...}`` (text names, each once; values in
    any ``decode_bytes`` form), in the order written.
    ``timestamp`` is an integer >= 0, or -1/null/absent for none; ``partition`` an integer
    >= 0 or null/absent. A blank line gives None. Anything else raises
    :class:`InputRecordError` with the line number.
    """
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as e:
        _fail(line_number, f"invalid JSON: not UTF-8 at byte {e.start + 1}")
    try:
        obj = _DECODER.decode(text)  # JSON whitespace around the object (and "\r\n") is allowed
    except json.JSONDecodeError as e:
        if not text.strip(" \t\r\n"):  # checked here, off the hot path
            return None
        _fail(line_number, f"invalid JSON at column {e.colno}: {e.msg}")
    except (ValueError, RecursionError) as e:  # an integer too long for int(), or nesting too deep
        _fail(line_number, f"invalid JSON: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
    if not isinstance(obj, dict):
        _fail(line_number, f"expected a JSON object, got {type(obj).__name__ if obj is not None else 'null'}")
    get = obj.get
    kind = get("type")
    if kind is not None:
        # A ``plog dump --format jsonl`` line: only plain records carry something to produce.
        if kind != "record" or "control" in obj:
            return None
        partition = None
    else:
        partition = get("partition")
        if partition is not None:
            partition = _json_int(obj, "partition", line_number, 0, INT32_MAX, "an integer >= 0")
    # Fast paths for the common shapes (a string or null) before the general decoding.
    value = get("value", _MISSING)
    if type(value) is str:
        value = value.encode("utf-8", "surrogatepass")
    elif value is _MISSING:
        _fail(line_number, 'missing "value" (use null for a tombstone)')
    elif value is not None:
        value = _json_bytes(obj, "value", line_number)
    key = get("key")
    if type(key) is str:
        key = key.encode("utf-8", "surrogatepass")
    elif key is not None:
        key = _json_bytes(obj, "key", line_number)
    headers = get("headers")
    headers = [] if headers is None or headers == [] else _json_headers(headers, line_number, text)
    timestamp = get("timestamp")
    if timestamp is not None:
        timestamp = _json_int(obj, "timestamp", line_number, -1, INT64_MAX, "an integer >= 0 (or -1 for none)")
        if timestamp == -1:
            timestamp = None
    return ProducerRecord(value, key, headers, partition, timestamp)


# -- JSON lines output -------------------------------------------------------------------


def record_to_json(rec: ConsumerRecord) -> dict:
    """The JSON object of one record, fields in this order: topic, partition, offset,
    timestamp, timestamp_type, key, value, headers (``[{"key", "value"}]``)."""
    return {
        "topic": rec.topic,
        "partition": rec.partition,
        "offset": rec.offset,
        "timestamp": rec.timestamp,
        "timestamp_type": rec.timestamp_type,
        "key": encode_bytes(rec.key),
        "value": encode_bytes(rec.value),
        "headers": encode_headers(rec.headers),
    }


_b64 = base64.b64encode
_str_cache: dict[str, str] = {}


def _cached_json_str(text: str) -> str:
    """JSON for a topic name or timestamp type: few distinct values, so encode each once."""
    out = _str_cache.get(text)
    if out is None:
        if len(_str_cache) > 10_000:
            _str_cache.clear()
        out = _str_cache[text] = _json_str(text)
    return out


def _bytes_json(data: bytes | None) -> str:
    # Same text as json.dumps(encode_bytes(data), ensure_ascii=False), without the dict.
    if data is None:
        return "null"
    try:
        return _json_str(data.decode("utf-8"))
    except UnicodeDecodeError:
        return '{"base64":"' + _b64(data).decode("ascii") + '"}'
    except AttributeError:  # a memoryview or bytearray
        return _bytes_json(bytes(data))


def _headers_json(headers) -> str:
    parts = []
    for key, value in headers:
        if key.isascii():
            key_json = _json_str(key)
        else:
            try:
                key.encode("utf-8")
                key_json = _json_str(key)
            except UnicodeEncodeError:  # surrogateescape'd invalid UTF-8: its raw bytes, base64
                key_json = _bytes_json(key.encode("utf-8", "surrogateescape"))
        parts.append('{"key":' + key_json + ',"value":' + _bytes_json(value) + "}")
    return "[" + ",".join(parts) + "]"


def format_jsonl(rec: ConsumerRecord) -> bytes:
    """``record_to_json(rec)`` as one compact JSON line (``ensure_ascii=False``), UTF-8,
    ending in ``\\n``. Equal to ``json.dumps(record_to_json(rec), ensure_ascii=False,
    separators=(",", ":")) + "\\n"`` encoded, but built directly with one f-string (no dict,
    no encoder walk): this runs once per consumed record, and is about twice as fast as the
    dict plus a precompiled encoder."""
    topic = _str_cache.get(rec.topic) or _cached_json_str(rec.topic)
    tt = _str_cache.get(rec.timestamp_type) or _cached_json_str(rec.timestamp_type)
    headers = rec.headers
    return (f'{{"topic":{topic},"partition":{rec.partition},"offset":{rec.offset},'
            f'"timestamp":{rec.timestamp},"timestamp_type":{tt},"key":{_bytes_json(rec.key)},'
            f'"value":{_bytes_json(rec.value)},"headers":{_headers_json(headers) if headers else "[]"}}}\n'
            ).encode("utf-8")


# -- batch at a time output (plog consume's native path) -------------------------------------

#: Op codes of native/src/consume_render.rs (``Op::from_code``): the record fields a format
#: prints. A format is a list of literal bytes and these; the topic and partition ops become
#: literals for each partition (:meth:`BatchFormat.compiled`).
(OP_OFFSET, OP_TIMESTAMP, OP_KEY, OP_VALUE, OP_KEY_LEN, OP_VALUE_LEN, OP_VALUE_LEN_BE32, OP_HEADERS,
 OP_KEY_JSON, OP_VALUE_JSON, OP_HEADERS_JSON, OP_TIMESTAMP_TYPE_JSON, OP_KEY_DECODED, OP_VALUE_DECODED) = range(1, 15)
#: The topic's bytes, the topic as a JSON string, the partition number.
OP_TOPIC, OP_TOPIC_JSON, OP_PARTITION = "topic", "topic_json", "partition"


class BatchFormat:
    """An output format as the native renderer writes it, a batch at a time: ``parts``, a
    list of literal bytes and ``OP_*`` fields, must print for every record exactly what
    ``record`` (the reference's ``ConsumerRecord -> bytes``) returns; ``record`` renders the
    records of legacy (v0/v1) batches, which have no native renderer."""

    __slots__ = ("parts", "record", "decoders", "_compiled")

    def __init__(self, parts: list, record, decoders=None):
        self.parts = list(parts)
        self.record = record
        #: For the decoded-field ops: a callable giving the ``plog._native.ConsumeDecoders``
        #: of the schemas known now (``record`` meets the others, and makes them known).
        self.decoders = decoders
        self._compiled: dict = {}

    def compiled(self, topic: str, partition: int):
        """The parts for one partition as a ``plog._native.ConsumeFormat`` (made once)."""
        key = (topic, partition)
        done = self._compiled.get(key)
        if done is not None:
            return done
        ops: list[tuple[int, bytes | None]] = []
        for part in self.parts:
            if isinstance(part, bytes):
                literal = part
            elif part == OP_TOPIC:
                literal = topic.encode("utf-8", "surrogateescape")
            elif part == OP_TOPIC_JSON:
                literal = _json_str(topic).encode("utf-8")
            elif part == OP_PARTITION:
                literal = b"%d" % partition
            else:
                ops.append((part, None))
                continue
            if ops and ops[-1][0] == 0:
                ops[-1] = (0, ops[-1][1] + literal)
            elif literal:
                ops.append((0, literal))
        done = self._compiled[key] = native.module.ConsumeFormat(ops)
        return done


def jsonl_batch_format() -> BatchFormat | None:
    """:func:`format_jsonl` as a :class:`BatchFormat`; None on the pure-Python path."""
    if not native.active():
        return None
    return BatchFormat([b'{"topic":', OP_TOPIC_JSON, b',"partition":', OP_PARTITION, b',"offset":', OP_OFFSET,
                        b',"timestamp":', OP_TIMESTAMP, b',"timestamp_type":', OP_TIMESTAMP_TYPE_JSON,
                        b',"key":', OP_KEY_JSON, b',"value":', OP_VALUE_JSON, b',"headers":', OP_HEADERS_JSON,
                        b"}\n"], format_jsonl)


class BatchPiece:
    """One batch's records as a poll takes them: a v2 batch's records region (``region``,
    rendered natively), or decoded records (``records``: a legacy batch's), and the index
    of the next record to take. ``batch`` is the batch while it is the reader's current one
    (its buffer is reused after), to raise the reference's error should the region not decode."""

    __slots__ = ("region", "records", "size", "index", "base_offset", "base_timestamp", "log_append_time",
                 "timestamp_type", "epoch", "batch")

    def __init__(self, batch, region: bytes | None, records: list | None):
        self.batch = batch
        self.region = region
        self.records = records
        self.size = batch.records_count if records is None else len(records)
        self.index = 0
        log_append = batch.timestamp_type == LOG_APPEND_TIME
        if batch.magic >= 2:
            self.base_offset, self.base_timestamp = batch.base_offset, batch.base_timestamp
            self.log_append_time = batch.max_timestamp if log_append else None
            epoch = batch.partition_leader_epoch
            self.epoch = epoch if epoch >= 0 else None
        else:
            self.epoch = None
        self.timestamp_type = "LogAppendTime" if log_append else ("CreateTime" if batch.magic > 0
                                                                  else "NoTimestampType")


def batch_piece(batch) -> BatchPiece | None:
    """The records of a data batch to take, decoded as ``batch.records()`` decodes them
    (same checks, same errors, in its order); None when it has none."""
    if batch.magic >= 2 and batch.records_count > 0:
        region = batch.records_payload()
        if batch.records_count <= len(region) // MIN_RECORD_SIZE + 1:
            return BatchPiece(batch, region, None)
    records = batch.records()  # a legacy batch; or the reference's error, or no records
    return BatchPiece(batch, None, records) if records else None


class RenderedPoll:
    """What one :meth:`Consumer.poll_rendered` took (``len()``: how many records) and
    printed (:meth:`pieces`, ``rendered`` records), as the consume loop would have handled
    the same records one by one: in the poll's order, a record of a partition at or past its
    ``ends`` offset is not printed (the partition goes into ``past_end``), and after
    ``count`` records none is. ``unconsumed`` holds, per partition, the first record taken
    and not printed (to seek back to); ``firsts`` the first record taken (to seek back to
    when the output could not be delivered). Native path only: the output accumulates in a
    ``plog._native.ConsumeOutput``."""

    __slots__ = ("fmt", "ends", "count", "output", "chunks", "taken", "rendered", "unconsumed", "firsts",
                 "past_end")

    #: The output is taken out of the native buffer in pieces of about this size.
    PIECE = 1 << 20

    def __init__(self, fmt, ends: dict | None = None, count: int | None = None):
        self.fmt = fmt
        self.ends = ends or None
        self.count = count
        self.output = native.module.ConsumeOutput()
        self.chunks: list[bytes] = []
        self.taken = 0
        self.rendered = 0
        self.unconsumed: dict[tuple, int] = {}
        self.firsts: dict[tuple, int] = {}
        self.past_end: list[tuple] = []

    def __len__(self) -> int:
        return self.taken

    def pieces(self) -> Iterator[bytes]:
        """The output, in order, in pieces of about :attr:`PIECE` bytes (few writes; the
        pieces handed out are let go, so the poll's output is not held twice)."""
        chunks = self.chunks
        chunks.reverse()
        while chunks:
            yield chunks.pop()
        if len(self.output):
            yield self.output.take()

    def take(self, tp, piece: BatchPiece, lo: int, hi: int, max_take: int) -> tuple[int, bool, int | None]:
        """Take up to ``max_take`` records of ``piece`` from its index: those with an offset
        below ``lo`` are skipped, one at or past ``hi`` ends the read. Returns how many were
        taken, whether ``hi`` was reached, and the last offset taken."""
        end = self.ends.get(tp) if self.ends else None
        left = None if self.count is None else max(self.count - self.rendered, 0)
        output = self.output
        if piece.region is None:
            out, index, taken, rendered, first, last, unconsumed, past_end, reached_hi = self._take_records(
                tp, piece, lo, hi, max_take, end, left)
            if out:
                output.extend(out)
        else:
            index, taken, rendered, first, last, unconsumed, past_end, reached_hi = self._take_region(
                tp, piece, lo, hi, max_take, end, left)
        piece.batch = None  # the region decoded; the batch's buffer is not ours to keep
        piece.index = index
        if len(output) >= self.PIECE:
            self.chunks.append(output.take())
        if taken:
            self.taken += taken
            self.rendered += rendered
            self.firsts.setdefault(tp, first)
            if unconsumed is not None:
                self.unconsumed.setdefault(tp, unconsumed)
            if past_end and tp not in self.past_end:
                self.past_end.append(tp)
        return taken, reached_hi, last

    def _region(self, tp, piece: BatchPiece, lo: int, hi: int, max_take: int, end: int | None,
                left: int | None) -> tuple:
        """One ``render_consume`` call over ``piece``'s region from its index; the region's
        faults raise the reference's error, at the batch's position."""
        fmt = self.fmt
        try:
            return native.module.render_consume(
                fmt.compiled(*tp), self.output, piece.region, piece.size, piece.base_offset, piece.base_timestamp,
                piece.log_append_time, piece.index, lo, hi, max_take, end, left,
                None if fmt.decoders is None else fmt.decoders())
        except native.NativeFormatError as e:
            batch = piece.batch
            if batch is None:
                raise native.typed_error(e) from None
            batch.records()  # raises the reference's error, at the batch's position
            raise native.typed_error(e).at(batch.position) from None

    def _take_region(self, tp, piece: BatchPiece, lo: int, hi: int, max_take: int, end: int | None,
                     left: int | None) -> tuple:
        """:meth:`take` over a v2 region, natively; a record the native decoders leave to the
        reference (a decoded field: an unknown schema id, a payload that does not render
        here) is rendered by :meth:`_take_records` with the format's ``record``, then the
        native pass goes on after it. Returns what :meth:`_take_records` returns, but the
        output (appended to :attr:`output`)."""
        taken = rendered = 0
        first = last = unconsumed = None
        past_end = False
        while True:
            index, n, r, f, la, u, pe, reached_hi, needs_reference = self._region(
                tp, piece, lo, hi, max_take - taken, end, None if left is None else max(left - rendered, 0))
            piece.index = index
            taken, rendered, past_end = taken + n, rendered + r, past_end or pe
            first, last = (first if first is not None else f), (la if la is not None else last)
            unconsumed = unconsumed if unconsumed is not None else u
            if not needs_reference or reached_hi or taken >= max_take:
                return index, taken, rendered, first, last, unconsumed, past_end, reached_hi
            if piece.records is None:  # the region's records as Python objects, for the reference
                piece.records = decode_records(piece.region, piece.size, piece.base_offset, piece.base_timestamp,
                                               piece.log_append_time)
            out, index, n, r, f, la, u, pe, reached_hi = self._take_records(
                tp, piece, lo, hi, 1, end, None if left is None else max(left - rendered, 0))
            if out:
                self.output.extend(out)
            piece.index = index
            taken, rendered, past_end = taken + n, rendered + r, past_end or pe
            first, last = (first if first is not None else f), (la if la is not None else last)
            unconsumed = unconsumed if unconsumed is not None else u
            if reached_hi or taken >= max_take or index >= piece.size:
                return index, taken, rendered, first, last, unconsumed, past_end, reached_hi

    def _take_records(self, tp, piece: BatchPiece, lo: int, hi: int, max_take: int, end: int | None,
                      left: int | None) -> tuple:
        """:meth:`take` over decoded records, with the reference's per-record renderer
        (native/src/consume_render.rs's window, in Python)."""
        render, topic, partition = self.fmt.record, tp.topic, tp.partition
        tt, epoch = piece.timestamp_type, piece.epoch
        parts: list[bytes] = []
        taken = rendered = 0
        first = last = unconsumed = None
        past_end = reached_hi = False
        records = piece.records
        index = piece.index
        while index < len(records):
            r = records[index]
            if r.offset >= hi:
                reached_hi = True
                break
            index += 1
            if r.offset < lo:
                continue
            taken += 1
            last = r.offset
            if first is None:
                first = last
            counted_out = left is not None and rendered >= left
            if counted_out or (end is not None and last >= end):
                if unconsumed is None:
                    unconsumed = last
                past_end |= not counted_out
            else:
                parts.append(render(ConsumerRecord(topic, partition, last, r.timestamp, tt, r.key, r.value,
                                                   r.headers, epoch)))
                rendered += 1
            if taken >= max_take:
                break
        return b"".join(parts), index, taken, rendered, first, last, unconsumed, past_end, reached_hi


__all__ = [
    "BatchFormat",
    "BatchPiece",
    "ConsumerRecord",
    "ProducerRecord",
    "RenderedPoll",
    "batch_piece",
    "format_jsonl",
    "jsonl_batch_format",
    "parse_jsonl",
    "record_to_json",
]
