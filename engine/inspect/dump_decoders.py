"""Record key/value decoders for ``plog dump`` (DumpLogSegments' ``MessageParser``\\ s).

A decoder turns one record into ``(key_text, value_text)``, either ``None`` when that
part is not printed. The text is exactly what Kafka's DumpLogSegments prints after
``key: `` / ``payload: ``; :meth:`Decoder.decode_json` gives the same result as JSON
values for ``--format jsonl`` (nested objects for the internal-topic decoders).

* ``string`` (Kafka's default ``StringDecoder``): ``new String(bytes, UTF_8)``, so
  malformed UTF-8 becomes U+FFFD.
* ``int`` / ``long`` (``IntegerDecoder`` / ``LongDecoder``): a big-endian int32 / int64
  read from the first 4 / 8 bytes.
* ``hex``, ``base64``, ``json``: plog's own (binary-safe or pretty views; not Kafka's).
* ``confluent`` (any schema type), ``avro``, ``protobuf``, ``json-schema`` (only that type):
  a Confluent-framed key or value decoded with its schema (plog's, with a
  :class:`~plog.engine.schemas.resolver.SchemaResolver`), printed as JSON; one that does not
  decode is printed as the string decoder prints it, and the resolver counts the reason.
* ``offsets``, ``transaction-log``, ``cluster-metadata``: Kafka's internal-topic decoders
  (``--offsets-decoder`` and friends). Their text depends on the Kafka version whose
  output is reproduced (``kafka_version`` 4 or 3, kafka-format.md §19.7).
"""

from __future__ import annotations

import abc
import base64
import json
import struct
from typing import Any, Callable

from plog.formats.errors import FormatError
from plog.formats.java import utf8_decode as java_utf8_decode
from plog.engine.errors import DecoderError

#: Kafka's decoder class names, accepted by ``--key-decoder-class``/``--value-decoder-class``.
KAFKA_DECODER_CLASSES = {
    "org.apache.kafka.tools.api.StringDecoder": "string",
    "kafka.serializer.StringDecoder": "string",
    "org.apache.kafka.tools.api.IntegerDecoder": "int",
    "kafka.serializer.IntegerDecoder": "int",
    "org.apache.kafka.tools.api.LongDecoder": "long",
    "kafka.serializer.LongDecoder": "long",
}
#: The Scala decoders Kafka 3.8-3.9 still accepts, mapping each to its tools-api class
#: with a notice on stdout (``DumpLogSegments.convertDeprecatedDecoderClass``).
DEPRECATED_DECODER_CLASSES = {
    "kafka.serializer.StringDecoder": "org.apache.kafka.tools.api.StringDecoder",
    "kafka.serializer.IntegerDecoder": "org.apache.kafka.tools.api.IntegerDecoder",
    "kafka.serializer.LongDecoder": "org.apache.kafka.tools.api.LongDecoder",
}
BYTES_DECODERS = ("string", "hex", "base64", "json", "int", "long")
#: Decoders of Confluent-framed keys and values, each the schema type it accepts (None: any).
SCHEMA_DECODERS = {"confluent": None, "avro": "AVRO", "protobuf": "PROTOBUF", "json-schema": "JSON"}
RECORD_DECODERS = ("offsets", "transaction-log", "cluster-metadata")


def _java_int(raw: bytes, size: int, what: str) -> int:
    if len(raw) < size:
        # ByteBuffer.getInt/getLong on a short buffer throws BufferUnderflowException,
        # whose message is null.
        raise FormatError(f"{what}: {len(raw)} bytes, need {size}")
    return struct.unpack_from(">i" if size == 4 else ">q", raw)[0]


def _json_text(raw: bytes) -> str:
    text = java_utf8_decode(raw)
    try:
        return json.dumps(json.loads(text), ensure_ascii=False, separators=(",", ":"))
    except ValueError:
        return text  # not JSON: shown as the string decoder would


BYTES_TEXT: dict[str, Callable[[bytes], str]] = {
    "string": java_utf8_decode,
    "hex": lambda raw: raw.hex(),
    "base64": lambda raw: base64.b64encode(raw).decode("ascii"),
    "json": _json_text,
    "int": lambda raw: str(_java_int(raw, 4, "int decoder")),
    "long": lambda raw: str(_java_int(raw, 8, "long decoder")),
}


def _bytes_json(name: str, raw: bytes) -> Any:
    if name == "json":
        try:
            return json.loads(raw.decode("utf-8"))
        except ValueError:
            return java_utf8_decode(raw)
    if name in ("int", "long"):
        return _java_int(raw, 4 if name == "int" else 8, f"{name} decoder")
    return BYTES_TEXT[name](raw)


def resolve_decoder_name(name: str) -> str:
    name = KAFKA_DECODER_CLASSES.get(name, name)
    if name not in BYTES_DECODERS and name not in SCHEMA_DECODERS:
        raise DecoderError(
            f"unknown decoder {name!r}: choose one of {', '.join(BYTES_DECODERS + tuple(SCHEMA_DECODERS))} "
            f"or a Kafka class ({', '.join(KAFKA_DECODER_CLASSES)})"
        )
    return name


def deprecated_decoder_notices(key: str | None, value: str | None) -> tuple[str, ...]:
    """The lines Kafka 3.8-3.9's tool prints each time it creates its decoders (before
    every log it dumps, value decoder first) for the deprecated class names given."""
    out = []
    for name in (value, key):
        if name in DEPRECATED_DECODER_CLASSES:
            out.append(f"{name} is deprecated. Please use {DEPRECATED_DECODER_CLASSES[name]} instead")
    return tuple(out)


class Decoder:
    """Base: the default string/bytes decoders for keys and values."""

    def __init__(self, key: str = "string", value: str = "string"):
        self.key_name = resolve_decoder_name(key)
        self.value_name = resolve_decoder_name(value)
        self._key = BYTES_TEXT[self.key_name]
        self._value = BYTES_TEXT[self.value_name]

    def decode(self, record) -> tuple[str | None, str | None]:
        key = record.key
        value = record.value
        return (None if key is None else self._key(key), None if value is None else self._value(value))

    def decode_json(self, record) -> tuple[Any, Any]:
        key, value = record.key, record.value
        return (
            None if key is None else _bytes_json(self.key_name, key),
            None if value is None else _bytes_json(self.value_name, value),
        )

    @property
    def is_default(self) -> bool:
        return self.key_name == "string" and self.value_name == "string"


class SchemaDecoder(Decoder):
    """Keys and/or values decoded with ``resolver`` (a ``SchemaResolver``) where their decoder
    is one of :data:`SCHEMA_DECODERS`; the other side keeps its bytes decoder. A key or value
    that does not decode prints as Kafka's ``StringDecoder`` prints it (the resolver's
    ``raw_reasons`` says why, for the end-of-run report); a null one stays null."""

    def __init__(self, key: str, value: str, resolver):
        self.key_name = resolve_decoder_name(key)
        self.value_name = resolve_decoder_name(value)
        self.resolver = resolver

    @property
    def is_default(self) -> bool:
        return False

    def _side(self, name: str, data, headers, is_key: bool) -> tuple[Any, bool]:
        """(text, decoded) of one side: the JSON text when decoded, else the bytes decoder's text."""
        if data is None:
            return None, False
        data = bytes(data)
        if name in SCHEMA_DECODERS:
            text, _warning = self.resolver.render(data, headers, is_key=is_key, expect=SCHEMA_DECODERS[name])
            if text is not None:
                return text, True
            return java_utf8_decode(data), False
        return BYTES_TEXT[name](data), False

    def decode(self, record) -> tuple[str | None, str | None]:
        headers = record.headers
        return (self._side(self.key_name, record.key, headers, True)[0],
                self._side(self.value_name, record.value, headers, False)[0])

    def decode_json(self, record) -> tuple[Any, Any]:
        headers = record.headers
        out = []
        for name, data, is_key in ((self.key_name, record.key, True), (self.value_name, record.value, False)):
            if name not in SCHEMA_DECODERS:
                out.append(None if data is None else _bytes_json(name, bytes(data)))
                continue
            text, decoded = self._side(name, data, headers, is_key)
            out.append(json.loads(text) if decoded else text)
        return out[0], out[1]


class _RecordDecoder(Decoder):
    """Decoders that read whole records with a schema (never the plain string view)."""

    def __init__(self, kafka_version: int = 4):
        super().__init__()
        self.kafka_version = kafka_version

    @property
    def is_default(self) -> bool:
        return False

    def decode_json(self, record) -> tuple[Any, Any]:
        return _parsed(self.decode(record))


class _CoordinatorDecoder(_RecordDecoder, abc.ABC):
    """Kafka 4.x's ``CoordinatorRecordMessageParser``: a record without a key ends the dump;
    an unknown record type or an undecodable record prints one line and goes on."""

    missing_key_decoder = "the specified decoder"  # how Kafka names the decoder in that error

    def decode(self, record) -> tuple[str | None, str | None]:
        from plog.formats.protocol import UnknownRecordTypeError

        if record.key is None:
            raise FormatError(f"Failed to decode message at offset {record.offset} using "
                              f"{self.missing_key_decoder} (message had a missing key)")
        try:
            return self._key_and_value(bytes(record.key), None if record.value is None else bytes(record.value))
        except UnknownRecordTypeError as e:
            return f"Unknown record type {e.record_type} at offset {record.offset}, skipping.", None
        except FormatError as e:
            return f"Error at offset {record.offset}, skipping. {e.reason}", None

    @abc.abstractmethod
    def _key_and_value(self, key: bytes, value: bytes | None) -> tuple[str, str]:
        """The key and payload text of one record of this coordinator's topic."""


class OffsetsDecoder(_CoordinatorDecoder):
    """``--offsets-decoder`` (``__consumer_offsets``), Kafka's ``OffsetsMessageParser``."""

    def __init__(self, kafka_version: int = 4):
        super().__init__(kafka_version)
        if kafka_version < 4:
            self.missing_key_decoder = "offset topic decoder"

    def _key_and_value(self, key: bytes, value: bytes | None) -> tuple[str, str]:
        from plog.formats import offsets_topic

        k = offsets_topic.decode_key(key)
        v = offsets_topic.decode_value(k, value)
        return (offsets_topic.dump_key_json(k, kafka_version=self.kafka_version),
                offsets_topic.dump_value_json(v, kafka_version=self.kafka_version))


class TransactionLogDecoder(_CoordinatorDecoder):
    """``--transaction-log-decoder`` (``__transaction_state``)."""

    def decode(self, record) -> tuple[str | None, str | None]:
        if self.kafka_version < 4:
            from plog.formats import transaction_log

            # Kafka 3.x: TransactionLog.formatRecordKeyAndValue; its exceptions end the dump.
            return transaction_log.dump_key_value_text_v3(
                None if record.key is None else bytes(record.key),
                None if record.value is None else bytes(record.value),
            )
        return super().decode(record)

    def _key_and_value(self, key: bytes, value: bytes | None) -> tuple[str, str]:
        from plog.formats import transaction_log

        k = transaction_log.decode_key(key)
        return transaction_log.dump_key_json(k), transaction_log.dump_value_json(transaction_log.decode_value(value))


class ClusterMetadataDecoder(_RecordDecoder):
    """``--cluster-metadata-decoder`` (``__cluster_metadata`` and KRaft snapshots): no key."""

    def decode(self, record) -> tuple[str | None, str | None]:
        from plog.formats import cluster_metadata

        value = None if record.value is None else bytes(record.value)
        return None, cluster_metadata.dump_metadata_payload(value, record.offset, kafka_version=self.kafka_version)


def _parsed(pair: tuple[str | None, str | None]) -> tuple[Any, Any]:
    """Kafka's JSON text as nested JSON values; non-JSON text (``<DELETE>``, error
    messages, the 3.x transaction-log text) stays a string."""
    out = []
    for text in pair:
        if text is None or not text.startswith("{"):
            out.append(text)
            continue
        try:
            out.append(json.loads(text))
        except ValueError:
            out.append(text)
    return out[0], out[1]


def make_decoder(record_decoder: str | None, key: str = "string", value: str = "string", kafka_version: int = 4,
                 schema_resolver=None) -> Decoder:
    """The decoder of ``plog dump``'s options; ``schema_resolver`` for the :data:`SCHEMA_DECODERS`."""
    if record_decoder is None:
        if key in SCHEMA_DECODERS or value in SCHEMA_DECODERS:
            if schema_resolver is None:
                raise DecoderError(f"the {key if key in SCHEMA_DECODERS else value} decoder needs schemas")
            return SchemaDecoder(key, value, schema_resolver)
        return Decoder(key, value)
    if record_decoder == "offsets":
        return OffsetsDecoder(kafka_version)
    if record_decoder == "transaction-log":
        return TransactionLogDecoder(kafka_version)
    if record_decoder == "cluster-metadata":
        return ClusterMetadataDecoder(kafka_version)
    raise DecoderError(f"unknown record decoder {record_decoder!r}: choose one of {', '.join(RECORD_DECODERS)}")


__all__ = [
    "BYTES_DECODERS",
    "ClusterMetadataDecoder",
    "DEPRECATED_DECODER_CLASSES",
    "Decoder",
    "KAFKA_DECODER_CLASSES",
    "OffsetsDecoder",
    "RECORD_DECODERS",
    "SCHEMA_DECODERS",
    "SchemaDecoder",
    "TransactionLogDecoder",
    "deprecated_decoder_notices",
    "make_decoder",
    "resolve_decoder_name",
]
