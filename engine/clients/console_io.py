"""The console tools' text forms of records, for ``plog produce`` and ``plog consume``.

Input (one :class:`~plog.engine.clients.record_io.ProducerRecord` per line):

* :class:`LineParser`: text lines as kafka-console-producer's ``LineMessageReader`` reads
  them (``parse.key``, ``key.separator``, ``parse.headers``, ``headers.delimiter``,
  ``headers.separator``, ``headers.key.separator``, ``null.marker``, ``ignore.error``), with
  Kafka's rules and error texts, but on bytes, so any byte other than the separators passes
  through unchanged (Kafka decodes lines as UTF-8 and replaces invalid bytes).

Output (one :class:`~plog.engine.clients.record_io.ConsumerRecord` at a time):

* :func:`compile_template`: kcat's ``-f`` format strings (``%t %p %o %k %v %K %S %T %h``...);
  :func:`template_batch_format`, the same for the native path, a batch at a time.
* :func:`compile_console_format`: kafka-console-consumer's ``DefaultMessageFormatter``
  (``--property print.key=true``, ``key.separator``...), from :class:`ConsoleFormat`.

Both tools' ``--property NAME=VALUE`` settings: :func:`properties_to_settings`. (The
binary-safe JSON lines are engine.clients.record_io's.)
"""

from __future__ import annotations

import struct
from collections import Counter
from dataclasses import dataclass
from json.encoder import encode_basestring as _json_str  # C; the ensure_ascii=False escaping
from typing import Callable

from plog.formats import native

from plog.engine.clients.record_io import (
    OP_HEADERS,
    OP_HEADERS_JSON,
    OP_KEY,
    OP_KEY_DECODED,
    OP_KEY_JSON,
    OP_KEY_LEN,
    OP_OFFSET,
    OP_PARTITION,
    OP_TIMESTAMP,
    OP_TIMESTAMP_TYPE_JSON,
    OP_TOPIC,
    OP_TOPIC_JSON,
    OP_VALUE,
    OP_VALUE_DECODED,
    OP_VALUE_JSON,
    OP_VALUE_LEN,
    OP_VALUE_LEN_BE32,
    BatchFormat,
    ConsumerRecord,
    ProducerRecord,
    _bytes_json,
    _cached_json_str,
    _headers_json,
    _str_cache,
)
from plog.engine.errors import InputRecordError, PropertyError, TemplateError


def _show(raw: bytes, limit: int = 200) -> str:
    """Input bytes for a one-line error message (Kafka shows the line as decoded text)."""
    text = raw[: limit * 4].decode("utf-8", "replace")
    if len(text) > limit:
        text = text[:limit] + "..."
    return text.replace("\r", "\\r").replace("\n", "\\n")


_EOL = (10, 13)  # b"\n"[0], b"\r"[0]


def _strip_eol(line: bytes) -> bytes:
    if line.endswith(b"\n"):
        line = line[:-1]
    if line.endswith(b"\r"):
        line = line[:-1]
    return line


# -- line input (kafka-console-producer's LineMessageReader) -----------------------------


class LineParser:
    """Kafka's ``LineMessageReader`` on bytes: ``[headers<delim>][key<sep>]value``.

    * With ``parse_headers``, everything before the first ``headers_delimiter`` is the
      header list, ``h1:v1,h2:v2``; with ``parse_key``, everything from there up to the
      first ``key_separator`` is the key; the rest of the line is the value (which may
      contain separators).
    * A missing delimiter or separator is an error (Kafka's text: ``No key separator found
      on line number N: '<line>'``), or with ``ignore_error`` means "no headers"/"no key"
      (null key, the rest of the line is the value); a header pair without
      ``headers_key_separator`` is ``No header key separator found in pair '<pair>' on
      line number N``, or with ``ignore_error`` a header named by the whole pair with a
      null value.
    * ``null_marker``: a key, value or header value equal to it is null (a value equal to
      it is a tombstone); a header section equal to it means no headers; a header key equal
      to it is an error (header keys cannot be null), even with ``ignore_error``.
      ``null_marker=b""`` gives kcat's ``-Z`` (empty key/value are null).
    * The header list is split as Java's ``Pattern.split`` does (trailing empty pairs
      dropped, so ``a:1,`` is one header), but on the literal separator: Kafka compiles
      ``headers.separator`` as a regular expression, plog does not.
    * Configurations Kafka rejects are rejected with Kafka's words (``ValueError``), and
      empty separators are rejected too.

    ``parse`` takes one line without its newline (a trailing ``\\n``, ``\\r\\n`` or ``\\r``
    is removed if present) and its 1-based number for error messages.
    """

    def __init__(self, *, parse_key: bool = False, key_separator: bytes = b"\t", parse_headers: bool = False,
                 headers_delimiter: bytes = b"\t", headers_separator: bytes = b",",
                 headers_key_separator: bytes = b":", null_marker: bytes | None = None,
                 ignore_error: bool = False):
        # Kafka's LineMessageReader.configure checks, in its order and words.
        if headers_delimiter == headers_separator:
            raise ValueError("headers.delimiter and headers.separator may not be equal")
        if headers_delimiter == headers_key_separator:
            raise ValueError("headers.delimiter and headers.key.separator may not be equal")
        if headers_separator == headers_key_separator:
            raise ValueError("headers.separator and headers.key.separator may not be equal")
        if null_marker is not None:
            for name, sep in (("key.separator", key_separator), ("headers.separator", headers_separator),
                              ("headers.delimiter", headers_delimiter),
                              ("headers.key.separator", headers_key_separator)):
                if sep == null_marker:
                    raise ValueError(f"null.marker and {name} may not be equal")
        for name, sep in (("key.separator", key_separator), ("headers.delimiter", headers_delimiter),
                          ("headers.separator", headers_separator),
                          ("headers.key.separator", headers_key_separator)):
            if not sep:
                raise ValueError(f"{name} may not be empty")
        self.parse_key = parse_key
        self.key_separator = bytes(key_separator)
        self.parse_headers = parse_headers
        self.headers_delimiter = bytes(headers_delimiter)
        self.headers_separator = bytes(headers_separator)
        self.headers_key_separator = bytes(headers_key_separator)
        self.null_marker = None if null_marker is None else bytes(null_marker)
        self.ignore_error = ignore_error
        if not parse_key and not parse_headers:
            # The common case (one value per line): skip the general path. An instance
            # attribute shadows the method.
            self.parse = self._parse_value if null_marker is None else self._parse_value_or_null

    def _parse_value(self, line: bytes, line_number: int) -> ProducerRecord:
        if line and line[-1] in _EOL:
            line = _strip_eol(line)
        return ProducerRecord(line)

    def _parse_value_or_null(self, line: bytes, line_number: int) -> ProducerRecord:
        line = _strip_eol(line)
        return ProducerRecord(None if line == self.null_marker else line)

    def parse(self, line: bytes, line_number: int) -> ProducerRecord:
        """One line → one record; raises :class:`InputRecordError` naming ``line_number``."""
        line = _strip_eol(line)
        null = self.null_marker
        pos = 0
        headers_raw = None
        if self.parse_headers:
            i = line.find(self.headers_delimiter)
            if i >= 0:
                headers_raw = line[:i]
                pos = i + len(self.headers_delimiter)
            elif not self.ignore_error:
                raise InputRecordError(line_number, f"No headers delimiter found on line number {line_number}: "
                                                    f"'{_show(line)}'")
        key = None
        if self.parse_key:
            i = line.find(self.key_separator, pos)
            if i >= 0:
                key = line[pos:i]
                pos = i + len(self.key_separator)
                if key == null:
                    key = None
            elif not self.ignore_error:
                raise InputRecordError(line_number, f"No key separator found on line number {line_number}: "
                                                    f"'{_show(line)}'")
        value = line[pos:] if pos else line
        if value == null:
            value = None
        headers = [] if headers_raw is None or headers_raw == null else self._split_headers(headers_raw, line_number)
        return ProducerRecord(value, key, headers)

    def _split_headers(self, raw: bytes, line_number: int) -> list[tuple[str, bytes | None]]:
        pairs = raw.split(self.headers_separator)
        if len(pairs) > 1:
            while pairs and not pairs[-1]:  # Java's split drops trailing empty strings
                pairs.pop()
        null = self.null_marker
        kv = self.headers_key_separator
        out = []
        for pair in pairs:
            i = pair.find(kv)
            if i < 0:
                if not self.ignore_error:
                    raise InputRecordError(line_number, f"No header key separator found in pair '{_show(pair)}' "
                                                        f"on line number {line_number}")
                out.append((pair.decode("utf-8", "surrogateescape"), None))
                continue
            name = pair[:i]
            if name == null:
                raise InputRecordError(line_number, f"Header keys should not be equal to the null marker "
                                                    f"'{_show(null)}' as they can't be null")
            value = pair[i + len(kv):]
            out.append((name.decode("utf-8", "surrogateescape"), None if value == null else value))
        return out


# -- text templates (kcat -f) ------------------------------------------------------------


#: ``plog consume``'s text output: the value of each record on its own line, as
#: kafka-console-consumer prints by default.
DEFAULT_TEMPLATE = "%v\n"

_INT32_BE = struct.Struct(">i")


def _topic(r: ConsumerRecord) -> bytes:
    return r.topic.encode("utf-8", "surrogateescape")


def _partition(r: ConsumerRecord) -> bytes:
    return b"%d" % r.partition


def _offset(r: ConsumerRecord) -> bytes:
    return b"%d" % r.offset


def _key(r: ConsumerRecord) -> bytes:
    k = r.key
    return b"" if k is None else bytes(k)


def _value(r: ConsumerRecord) -> bytes:
    v = r.value
    return b"" if v is None else bytes(v)


def _key_len(r: ConsumerRecord) -> bytes:
    return b"-1" if r.key is None else b"%d" % len(r.key)


def _value_len(r: ConsumerRecord) -> bytes:
    return b"-1" if r.value is None else b"%d" % len(r.value)


def _value_len_binary(r: ConsumerRecord) -> bytes:
    return _INT32_BE.pack(-1 if r.value is None else len(r.value))


def _timestamp(r: ConsumerRecord) -> bytes:
    return b"%d" % r.timestamp


def _headers(r: ConsumerRecord) -> bytes:
    # kcat's print_headers: name=value joined by ",", a null value printed as NULL.
    return b",".join(k.encode("utf-8", "surrogateescape") + b"=" + (b"NULL" if v is None else bytes(v))
                     for k, v in r.headers)


#: Template tokens. kcat's names, plus rpk's ``%v`` for the value.
TEMPLATE_TOKENS: dict[str, Callable[[ConsumerRecord], bytes]] = {
    "t": _topic,
    "p": _partition,
    "o": _offset,
    "k": _key,
    "v": _value,
    "s": _value,  # kcat's name for the value
    "K": _key_len,
    "S": _value_len,
    "R": _value_len_binary,
    "T": _timestamp,
    "h": _headers,
}
TEMPLATE_HELP = ("%t topic, %p partition, %o offset, %k key, %v (or %s) value, %K key length, %S value length "
                 "(-1 for null), %R value length as 4 bytes big-endian, %T timestamp ms, %h headers as k=v,k2=v2, "
                 "%% a percent sign; escapes \\n \\t \\r \\\\ \\0 \\x<hex>; null keys and values print as nothing, null header values as NULL")

_OCT = "01234567"
_DEC = "0123456789"
_HEX = "0123456789abcdefABCDEF"


def _run(text: str, i: int, digits: str) -> int:
    """The end of the run of ``digits`` characters starting at ``i``."""
    while i < len(text) and text[i] in digits:
        i += 1
    return i


def _unescape(text: str, template: str) -> bytes:
    """kcat's ``fmt_add`` escape conversion of one literal chunk: ``\\t \\n \\r``,
    ``\\xHH`` (hex), ``\\<digits>`` (C ``strtoul`` base 0: ``\\0`` NUL, ``\\012`` octal,
    ``\\65`` decimal) keeping the low byte as C's ``char`` cast does, and ``\\c`` → ``c``
    for any other character (so ``\\\\`` is one backslash). A backslash ending the chunk is
    kept. Other characters are written as UTF-8."""
    if "\\" not in text:
        return text.encode("utf-8", "surrogateescape")
    out = bytearray()
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c != "\\" or i + 1 == n:
            out += c.encode("utf-8", "surrogateescape")
            i += 1
            continue
        d = text[i + 1]
        if d in "tnr":
            out.append({"t": 9, "n": 10, "r": 13}[d])
            i += 2
        elif d == "x":
            end = _run(text, i + 2, _HEX)
            if end == i + 2:
                raise TemplateError(f"bad escape '\\x' in template {template!r}: expected hex digits, e.g. \\x1f")
            out.append(int(text[i + 2:end], 16) & 0xFF)
            i = end
        elif d in _DEC:
            if d == "0" and text[i + 2:i + 3] in ("x", "X") and text[i + 3:i + 4] and text[i + 3] in _HEX:
                start, end, base = i + 3, _run(text, i + 3, _HEX), 16
            elif d == "0":
                start, end, base = i + 1, _run(text, i + 1, _OCT), 8
            else:
                start, end, base = i + 1, _run(text, i + 1, _DEC), 10
            out.append(int(text[start:end], base) & 0xFF)
            i = end
        else:
            out += d.encode("utf-8", "surrogateescape")
            i += 2
    return bytes(out)


def template_parts(fmt: str,
                   decoding: "RecordDecoding | None" = None) -> list[bytes | Callable[[ConsumerRecord], bytes]]:
    """A template as a list of literal byte strings and field getters, adjacent literals
    merged. Raises :class:`TemplateError` for an unknown ``%x`` token, a ``%`` at the end
    (kcat's "Empty formatter") or a ``\\x`` without hex digits. With ``decoding``, ``%k``
    and ``%v`` (``%s``) print decoded keys and values as JSON text (lengths stay the bytes')."""
    parts: list[bytes | Callable[[ConsumerRecord], bytes]] = []
    tokens = TEMPLATE_TOKENS if decoding is None else {**TEMPLATE_TOKENS, "k": decoding.key_bytes,
                                                       "v": decoding.value_bytes, "s": decoding.value_bytes}

    def literal(data: bytes) -> None:
        if not data:
            return
        if parts and isinstance(parts[-1], bytes):
            parts[-1] += data
        else:
            parts.append(data)

    i = 0
    while True:
        j = fmt.find("%", i)
        if j < 0:
            literal(_unescape(fmt[i:], fmt))
            return parts
        literal(_unescape(fmt[i:j], fmt))
        if j + 1 == len(fmt):
            raise TemplateError(f"template {fmt!r} ends with a lone '%' (write %% for a percent sign); "
                                f"tokens: {TEMPLATE_HELP}")
        token = fmt[j + 1]
        if token == "%":
            literal(b"%")
        elif token in tokens:
            parts.append(tokens[token])
        else:
            raise TemplateError(f"unknown template token '%{token}' in {fmt!r}; tokens: {TEMPLATE_HELP}")
        i = j + 2


def compile_template(fmt: str, decoding: "RecordDecoding | None" = None) -> Callable[[ConsumerRecord], bytes]:
    """Compile a kcat-style format string once into a function ``record -> bytes``.

    Tokens: see :data:`TEMPLATE_HELP`. As in kcat, a null key or value prints as nothing
    (``%K``/``%S`` tell null, -1, from empty, 0), a null header value as ``NULL``, and
    escapes are interpreted in the literal text only. Raises :class:`TemplateError` at
    compile time for an unknown token. ``decoding``: see :func:`template_parts`.
    """
    parts = template_parts(fmt, decoding)
    if not parts:
        return lambda rec: b""
    if len(parts) == 1:
        only = parts[0]
        return (lambda rec: only) if isinstance(only, bytes) else only
    if len(parts) == 2 and callable(parts[0]) and isinstance(parts[1], bytes):
        # "%v\n" and the like, the default: one concatenation.
        getter, suffix = parts[0], parts[1]
        return lambda rec: getter(rec) + suffix
    getters = [(lambda rec, _b=p: _b) if isinstance(p, bytes) else p for p in parts]
    join = b"".join

    def render(rec: ConsumerRecord) -> bytes:
        return join([g(rec) for g in getters])

    return render


#: The native renderer's field for each template token (record_io's ``OP_*``).
_TOKEN_OPS = {_topic: OP_TOPIC, _partition: OP_PARTITION, _offset: OP_OFFSET, _key: OP_KEY, _value: OP_VALUE,
              _key_len: OP_KEY_LEN, _value_len: OP_VALUE_LEN, _value_len_binary: OP_VALUE_LEN_BE32,
              _timestamp: OP_TIMESTAMP, _headers: OP_HEADERS}


def template_batch_format(fmt: str) -> BatchFormat | None:
    """:func:`compile_template` ``(fmt)`` as a :class:`BatchFormat` (every token has a native
    field); None on the pure-Python path. Raises :class:`TemplateError` as it does."""
    if not native.active():
        return None
    parts = [p if isinstance(p, bytes) else _TOKEN_OPS[p] for p in template_parts(fmt)]
    return BatchFormat(parts, compile_template(fmt))


# -- console tools' --property settings ------------------------------------------------------


#: kafka-console-producer's ``LineMessageReader`` properties, as :class:`LineParser` keywords.
LINE_READER_PROPERTIES = {
    "parse.key": "parse_key",
    "key.separator": "key_separator",
    "parse.headers": "parse_headers",
    "headers.delimiter": "headers_delimiter",
    "headers.separator": "headers_separator",
    "headers.key.separator": "headers_key_separator",
    "null.marker": "null_marker",
    "ignore.error": "ignore_error",
}

#: kafka-console-consumer's ``DefaultMessageFormatter`` properties, as :class:`ConsoleFormat`
#: fields (``print.delivery`` is the share consumer's; deserializers are Java classes).
MESSAGE_FORMATTER_PROPERTIES = {
    "print.timestamp": "print_timestamp",
    "print.key": "print_key",
    "print.value": "print_value",
    "print.partition": "print_partition",
    "print.offset": "print_offset",
    "print.headers": "print_headers",
    "key.separator": "key_separator",
    "line.separator": "line_separator",
    "headers.separator": "headers_separator",
    "null.literal": "null_literal",
}


def properties_to_settings(properties: dict[str, bytes], table: dict[str, str], tool: str) -> dict[str, bool | bytes]:
    """Console-tool properties (``name -> value bytes``) as keyword settings through
    ``table`` (:data:`LINE_READER_PROPERTIES` or :data:`MESSAGE_FORMATTER_PROPERTIES`).

    Switches (``parse.*``, ``print.*``, ``ignore.error``) take ``true`` or ``false`` (any
    case; Kafka reads anything but ``true`` as false, plog refuses it, so a typo in a value is
    not silently "off"); the others are bytes as given.
    Raises :class:`PropertyError` naming the property and what ``tool`` supports."""
    out: dict[str, bool | bytes] = {}
    for name, value in properties.items():
        setting = table.get(name)
        if setting is None:
            raise PropertyError(f"unknown property {name!r} for {tool}; supported: {', '.join(table)}")
        if name.startswith(("parse.", "print.")) or name == "ignore.error":
            flag = value.strip().lower()
            if flag not in (b"true", b"false"):
                raise PropertyError(f"property {name} must be true or false, not "
                                    f"{value.decode('utf-8', 'replace')!r}")
            out[setting] = flag == b"true"
        else:
            out[setting] = value
    return out


@dataclass(frozen=True, slots=True)
class ConsoleFormat:
    """kafka-console-consumer's ``DefaultMessageFormatter`` settings, Kafka's defaults:
    the value alone, then a newline."""

    print_timestamp: bool = False
    print_key: bool = False
    print_value: bool = True
    print_partition: bool = False
    print_offset: bool = False
    print_headers: bool = False
    key_separator: bytes = b"\t"
    line_separator: bytes = b"\n"
    headers_separator: bytes = b","
    null_literal: bytes = b"null"


def compile_console_format(fmt: ConsoleFormat,
                           decoding: "RecordDecoding | None" = None) -> Callable[[ConsumerRecord], bytes]:
    """A function ``record -> bytes`` writing what ``DefaultMessageFormatter.writeTo`` writes:
    the chosen columns in the order timestamp (``CreateTime:<ms>``, ``LogAppendTime:<ms>`` or
    ``NO_TIMESTAMP``), ``Partition:<p>``, ``Offset:<o>``, headers (``k:v`` joined by
    ``headers_separator``, or ``NO_HEADERS``), key, value; ``key_separator`` between columns
    and ``line_separator`` after the last one (nothing at all when no column is chosen). A
    null key, value or header value is ``null_literal``. With ``decoding``, decoded keys and
    values are written as their JSON text."""
    null = fmt.null_literal
    hsep = fmt.headers_separator

    def timestamp(r: ConsumerRecord) -> bytes:
        if r.timestamp_type == "NoTimestampType":
            return b"NO_TIMESTAMP"
        return b"%s:%d" % (r.timestamp_type.encode("ascii"), r.timestamp)

    def headers(r: ConsumerRecord) -> bytes:
        if not r.headers:
            return b"NO_HEADERS"
        return hsep.join(k.encode("utf-8", "surrogateescape") + b":" + (null if v is None else bytes(v))
                         for k, v in r.headers)

    def key(r: ConsumerRecord) -> bytes:
        if r.key is None:
            return null
        return bytes(r.key) if decoding is None else decoding.key_bytes(r)

    def value(r: ConsumerRecord) -> bytes:
        if r.value is None:
            return null
        return bytes(r.value) if decoding is None else decoding.value_bytes(r)

    columns = [getter for on, getter in (
        (fmt.print_timestamp, timestamp),
        (fmt.print_partition, lambda r: b"Partition:%d" % r.partition),
        (fmt.print_offset, lambda r: b"Offset:%d" % r.offset),
        (fmt.print_headers, headers),
        (fmt.print_key, key),
        (fmt.print_value, value),
    ) if on]
    if not columns:
        return lambda rec: b""
    sep, end = fmt.key_separator, fmt.line_separator
    join = sep.join

    def render(rec: ConsumerRecord) -> bytes:
        return join([c(rec) for c in columns]) + end

    return render


# -- Confluent-framed keys and values decoded (plog consume --key-format/--value-format) ----------

#: ``--key-format`` / ``--value-format`` choices: ``raw`` shows the bytes; ``auto`` decodes
#: whatever schema a Confluent frame names; the others decode only that schema type.
FIELD_FORMATS = ("auto", "raw", "avro", "protobuf", "json-schema")
_EXPECT: dict[str, str | None] = {}


def _expect(fmt: str) -> str | None:
    """The registry schema type a --key-format/--value-format name expects (None: any).
    The registry's module is loaded on first use: producing and plain consuming never do."""
    if not _EXPECT:
        from plog.formats.schema_registry import AVRO, JSON, PROTOBUF

        _EXPECT.update({"auto": None, "avro": AVRO, "protobuf": PROTOBUF, "json-schema": JSON})
    return _EXPECT.get(fmt)


class RecordDecoding:
    """Keys and values of records decoded with a schema resolver
    (:class:`plog.engine.schemas.resolver.SchemaResolver`), each field by its format
    (:data:`FIELD_FORMATS`; ``raw`` leaves that field alone).

    A null key or value stays null (it is not a decoding failure). A key or value that does
    not decode is shown raw; :attr:`raw_counts` counts them by ``(field, reason)`` for the
    summary after a run. Each record is decoded once however many times it is shown.
    """

    def __init__(self, resolver, *, key_format: str = "raw", value_format: str = "raw"):
        for fmt in (key_format, value_format):
            if fmt not in FIELD_FORMATS:
                raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FIELD_FORMATS)}")
        self.resolver = resolver
        self.key_format = key_format
        self.value_format = value_format
        #: ``(field, reason) -> count`` of keys ("key") and values ("value") shown raw.
        self.raw_counts: Counter = Counter()
        self._last: tuple | None = None
        self._decoders: tuple | None = None  # (table size it was made at, ConsumeDecoders)

    def decoded(self, rec: ConsumerRecord):
        """``(key, value)`` of ``rec``: each a resolver ``Decoded``, or None when that field is
        not decoded (format ``raw``, or null)."""
        last = self._last
        if last is not None and last[0] is rec:
            return last[1]
        out = (self._decode("key", rec.key, rec.headers, self.key_format),
               self._decode("value", rec.value, rec.headers, self.value_format))
        self._last = (rec, out)
        return out

    def _decode(self, field: str, data, headers, fmt: str):
        if fmt == "raw" or data is None:
            return None
        found = self.resolver.decode(bytes(data), headers, is_key=field == "key", expect=_expect(fmt))
        if found.json is None:
            self.raw_counts[(field, found.reason)] += 1
        return found

    def key_bytes(self, rec: ConsumerRecord) -> bytes:
        """The key as a template prints it: its JSON text when decoded, else its bytes."""
        found = self.decoded(rec)[0]
        if found is not None and found.json is not None:
            return found.json.encode("utf-8")
        return b"" if rec.key is None else bytes(rec.key)

    def value_bytes(self, rec: ConsumerRecord) -> bytes:
        """The value as a template prints it: its JSON text when decoded, else its bytes."""
        found = self.decoded(rec)[1]
        if found is not None and found.json is not None:
            return found.json.encode("utf-8")
        return b"" if rec.value is None else bytes(rec.value)

    def jsonl(self, rec: ConsumerRecord) -> bytes:
        """``format_jsonl``'s line, with a decoded key or value as a JSON value (not a string)
        followed by ``key_schema_id``/``value_schema_id`` (the id, or the GUID as a string),
        and a key or value that does not decode in the binary-safe encoding followed by
        ``key_decode_error``/``value_decode_error`` (the reason)."""
        key, value = self.decoded(rec)
        # format_jsonl's pieces (cached topic and type, no dict, no encoder for [] headers).
        headers = rec.headers
        topic = _str_cache.get(rec.topic) or _cached_json_str(rec.topic)
        tt = _str_cache.get(rec.timestamp_type) or _cached_json_str(rec.timestamp_type)
        return (f'{{"topic":{topic},"partition":{rec.partition},"offset":{rec.offset},'
                f'"timestamp":{rec.timestamp},"timestamp_type":{tt},'
                f'"key":{_field_json("key", rec.key, key)},"value":{_field_json("value", rec.value, value)},'
                f'"headers":{_headers_json(headers) if headers else "[]"}}}\n').encode("utf-8")

    def batch_format(self) -> BatchFormat | None:
        """:meth:`jsonl` as a :class:`BatchFormat` (native path): a decoded key or value is
        rendered natively by the schemas the resolver holds a native renderer for (its
        shortcut's: a magic-0 prefix, no headers), every other record by :meth:`jsonl`, which
        compiles the schemas it meets (the native table follows). None on the pure-Python path."""
        if not native.active():
            return None
        key = OP_KEY_JSON if self.key_format == "raw" else OP_KEY_DECODED
        value = OP_VALUE_JSON if self.value_format == "raw" else OP_VALUE_DECODED
        return BatchFormat([b'{"topic":', OP_TOPIC_JSON, b',"partition":', OP_PARTITION, b',"offset":', OP_OFFSET,
                            b',"timestamp":', OP_TIMESTAMP, b',"timestamp_type":', OP_TIMESTAMP_TYPE_JSON,
                            b',"key":', key, b',"value":', value, b',"headers":', OP_HEADERS_JSON, b"}\n"],
                           self.jsonl, self._native_decoders)

    def _native_decoders(self):
        """The ``plog._native.ConsumeDecoders`` of the schemas the resolver's shortcut holds
        now (made again when it grew): those with a native renderer, each field's limited to
        its format's schema type (``auto``: any)."""
        prefixed = self.resolver._prefixed
        cached = self._decoders
        if cached is not None and cached[0] == len(prefixed):
            return cached[1]
        tables = []
        for fmt in (self.key_format, self.value_format):
            expect = _expect(fmt)
            entries = []
            if fmt != "raw":
                for id_bytes, (codec, schema_type, facts) in prefixed.items():
                    compiled = getattr(codec, "_program", None) or getattr(codec, "_plan", None)
                    if compiled is not None and (expect is None or expect == schema_type):
                        entries.append((id_bytes, compiled, facts[0]))
            tables.append(entries)
        decoders = native.module.ConsumeDecoders(*tables)
        self._decoders = (len(prefixed), decoders)
        return decoders

    def summary(self) -> list[str]:
        """One line per reason keys or values were shown raw, most frequent first."""
        return [f"{count} {field}(s) shown raw: {reason}"
                for (field, reason), count in sorted(self.raw_counts.items(), key=lambda kv: (-kv[1], kv[0]))]


def _field_json(field: str, data, found) -> str:
    if found is None:
        return _bytes_json(None if data is None else bytes(data))
    if found.json is not None:
        carrier = found.schema_id if found.schema_id is not None else f'"{found.guid}"'
        return f'{found.json},"{field}_schema_id":{carrier}'
    return f'{_bytes_json(bytes(data))},"{field}_decode_error":{_json_str(found.reason)}'


__all__ = [
    "DEFAULT_TEMPLATE",
    "FIELD_FORMATS",
    "RecordDecoding",
    "TEMPLATE_HELP",
    "TEMPLATE_TOKENS",
    "ConsoleFormat",
    "LINE_READER_PROPERTIES",
    "LineParser",
    "MESSAGE_FORMATTER_PROPERTIES",
    "compile_console_format",
    "compile_template",
    "properties_to_settings",
    "template_batch_format",
    "template_parts",
]
