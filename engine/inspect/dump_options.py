"""``plog dump``'s options: DumpLogSegments' own (kafka-format.md §19.1) plus plog's output
choices (the Kafka version whose text is reproduced, text or JSON lines)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from plog.engine.inspect.dump_decoders import Decoder, make_decoder

#: Where output goes: one or more whole lines (joined by ``\n``) without the final newline.
Line = Callable[[str], None]
INT32_MAX = 2**31 - 1
DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024


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
    #: The ``SchemaResolver`` of the ``confluent``/``avro``/``protobuf``/``json-schema``
    #: key and value decoders (None without them); its ``raw_reasons`` count what it left raw.
    schema_resolver: Any = None

    @property
    def should_print_data_log(self) -> bool:
        # Kafka: print-data-log, or any decoder option given explicitly.
        return bool(self.print_data_log or self.record_decoder or self.key_decoder or self.value_decoder)

    @property
    def is_deep(self) -> bool:
        return self.deep_iteration or self.should_print_data_log

    def decoder(self) -> Decoder:
        return make_decoder(self.record_decoder, self.key_decoder or "string", self.value_decoder or "string",
                            self.kafka_version, self.schema_resolver)


__all__ = ["DEFAULT_MAX_MESSAGE_SIZE", "DumpOptions", "Line"]
