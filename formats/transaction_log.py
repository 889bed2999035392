"""``__transaction_state`` records: the transaction coordinator's log.

Layouts (``transaction-coordinator`` TransactionLogKey/Value.json; ``core`` before 4.0)::

    key    int16 version (record type, always 0) + string transactionalId
    value  int16 version + TransactionLogValue, or null (tombstone: the id expired)

    TransactionLogValue
      v0 (non-flexible)                     v1 (flexible, transaction.version >= 1)
      producerId              int64         same, compact strings/arrays
      producerEpoch           int16         + tagged 0 previousProducerId int64 (default -1)
      transactionTimeoutMs    int32         + tagged 1 nextProducerId     int64 (default -1)
      transactionStatus       int8          + tagged 2 clientTransactionVersion int16 (default 0)
      transactionPartitions   [PartitionsSchema]?   (null when the state is Empty)
          topic         string
          partitionIds  [int32]
      transactionLastUpdateTimestampMs  int64
      transactionStartTimestampMs       int64

In the JSON schema the tagged fields are listed between ``producerId`` and
``producerEpoch``; that is where Kafka's JSON output puts them (when not at their
default), but on the wire they sit in the trailing tagged-field section.

:func:`dump_key_json` / :func:`dump_value_json` give the text of Kafka 4.x's
``kafka-dump-log.sh --transaction-log-decoder``: ``{"type":"0","data":{...}}`` and
``{"version":"<v>","data":{...}}`` (``<DELETE>`` for a tombstone).

``transactionStatus`` numbers (``TransactionState``): 0 Empty, 1 Ongoing,
2 PrepareCommit, 3 PrepareAbort, 4 CompleteCommit, 5 CompleteAbort, 6 Dead,
7 PrepareEpochFence.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Iterable, Mapping, NamedTuple

from .errors import SchemaError
from .java import scala_hash_order, topic_partition_hash_code
from .protocol import Array, Field, Struct, UnknownRecordTypeError, decode, encode, jackson_dumps, to_kafka_json

TRANSACTION_LOG_KEY = Struct("TransactionLogKey", [Field("transactionalId", "string")])

TRANSACTION_LOG_VALUE = Struct(
    "TransactionLogValue",
    [
        Field("producerId", "int64"),
        Field("previousProducerId", "int64", "1+", tagged=0, default=-1),
        Field("nextProducerId", "int64", "1+", tagged=1, default=-1),
        Field("producerEpoch", "int16"),
        Field("transactionTimeoutMs", "int32"),
        Field("transactionStatus", "int8"),
        Field(
            "transactionPartitions",
            Array(Struct("PartitionsSchema", [Field("topic", "string"), Field("partitionIds", Array("int32"))])),
            nullable_versions="0+",
        ),
        Field("transactionLastUpdateTimestampMs", "int64"),
        Field("transactionStartTimestampMs", "int64"),
        Field("clientTransactionVersion", "int16", "1+", tagged=2, default=0),
    ],
    valid_versions="0-1",
    flexible_versions="1+",
)

SCHEMAS: tuple[Struct, ...] = (TRANSACTION_LOG_KEY, TRANSACTION_LOG_VALUE)

# The only record type of the transaction coordinator (CoordinatorRecordType.TRANSACTION_LOG).
TRANSACTION_LOG_RECORD_TYPE = 0


class TransactionState(IntEnum):
    """Transaction states as ``transactionStatus`` stores them. ``str()`` gives Kafka's
    name (``"PrepareCommit"``), the one its tools print."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        return _STATE_NAMES[self]

    def __str__(self) -> str:
        return _STATE_NAMES[self]


_STATE_NAMES = {
    TransactionState.EMPTY: "Empty",
    TransactionState.ONGOING: "Ongoing",
    TransactionState.PREPARE_COMMIT: "PrepareCommit",
    TransactionState.PREPARE_ABORT: "PrepareAbort",
    TransactionState.COMPLETE_COMMIT: "CompleteCommit",
    TransactionState.COMPLETE_ABORT: "CompleteAbort",
    TransactionState.DEAD: "Dead",
    TransactionState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}


def transaction_state(status: int) -> TransactionState:
    """The state for a ``transactionStatus`` byte; unknown ids are a SchemaError, as in
    Kafka (``Unknown transaction state id N from the transaction status message``)."""
    try:
        return TransactionState(status)
    except ValueError:
        raise SchemaError(f"Unknown transaction state id {status} from the transaction status message") from None


class TransactionLogKey(NamedTuple):
    version: int
    fields: dict
    trailing: bytes = b""

    @property
    def transactional_id(self) -> str:
        return self.fields["transactionalId"]


class TransactionLogValue(NamedTuple):
    version: int
    fields: dict
    trailing: bytes = b""

    @property
    def state(self) -> TransactionState:
        return transaction_state(self.fields["transactionStatus"])

    @property
    def topic_partitions(self) -> list[tuple[str, int]]:
        """``(topic, partition)`` pairs in stored order (none when the list is null)."""
        return [(p["topic"], i) for p in self.fields["transactionPartitions"] or () for i in p["partitionIds"]]


def _int16_prefix(b: bytes, what: str) -> int:
    if len(b) < 2:
        raise SchemaError(f"{what} of {len(b)} bytes is too short to hold its int16 version", 0)
    return int.from_bytes(b[0:2], "big", signed=True)


def decode_key(b: bytes) -> TransactionLogKey:
    """Decode a ``__transaction_state`` key. A version other than 0 is an unknown record
    type (Kafka's serde raises UnknownRecordTypeException)."""
    b = bytes(b)
    version = _int16_prefix(b, "__transaction_state key")
    if version != TRANSACTION_LOG_RECORD_TYPE:
        raise UnknownRecordTypeError(version, "__transaction_state")
    fields, pos = decode(TRANSACTION_LOG_KEY, 0, b, 2)
    return TransactionLogKey(version, fields, b[pos:])


def decode_value(b: bytes | None) -> TransactionLogValue | None:
    """Decode a ``__transaction_state`` value; ``None`` for a tombstone. Bytes after the
    struct are kept in ``trailing`` (Kafka ignores them)."""
    if b is None:
        return None
    b = bytes(b)
    version = _int16_prefix(b, "__transaction_state value")
    fields, pos = decode(TRANSACTION_LOG_VALUE, version, b, 2)
    return TransactionLogValue(version, fields, b[pos:])


def encode_key(transactional_id: str) -> bytes:
    return TRANSACTION_LOG_RECORD_TYPE.to_bytes(2, "big") + encode(
        TRANSACTION_LOG_KEY, 0, {"transactionalId": transactional_id}
    )


def encode_value(fields: Mapping, version: int = 0) -> bytes:
    """Encode a TransactionLogValue dict at ``version`` (0 unless transaction.version >= 1)."""
    return version.to_bytes(2, "big", signed=True) + encode(TRANSACTION_LOG_VALUE, version, fields)


def encode_transaction_metadata(
    producer_id: int,
    producer_epoch: int,
    timeout_ms: int,
    state: TransactionState | int,
    partitions: Iterable[tuple[str, Iterable[int]]] | None,
    last_update_timestamp_ms: int,
    start_timestamp_ms: int,
    *,
    version: int = 0,
    previous_producer_id: int = -1,
    next_producer_id: int = -1,
    client_transaction_version: int = 0,
) -> bytes:
    """A value as ``TransactionLog.valueToBytes`` writes it. ``partitions`` is
    ``[(topic, [partition, ...]), ...]`` in the order to store; Kafka stores null for the
    Empty state (and refuses partitions there)."""
    state = TransactionState(state)
    if state == TransactionState.EMPTY:
        if partitions:
            raise ValueError("an Empty transaction cannot have partitions")
        stored = None
    else:
        stored = [{"topic": t, "partitionIds": list(ps)} for t, ps in (partitions or ())]
    fields = {
        "producerId": producer_id,
        "previousProducerId": previous_producer_id,
        "nextProducerId": next_producer_id,
        "producerEpoch": producer_epoch,
        "transactionTimeoutMs": timeout_ms,
        "transactionStatus": int(state),
        "transactionPartitions": stored,
        "transactionLastUpdateTimestampMs": last_update_timestamp_ms,
        "transactionStartTimestampMs": start_timestamp_ms,
        "clientTransactionVersion": client_transaction_version,
    }
    return encode_value(fields, version)


def dump_key_json(key: TransactionLogKey) -> str:
    """The key text of Kafka 4.x ``kafka-dump-log.sh --transaction-log-decoder``."""
    return jackson_dumps({"type": str(key.version), "data": to_kafka_json(TRANSACTION_LOG_KEY, 0, key.fields)})


def dump_value_json(value: TransactionLogValue | None) -> str:
    """The payload text of Kafka 4.x ``kafka-dump-log.sh --transaction-log-decoder``."""
    if value is None:
        return "<DELETE>"
    data = to_kafka_json(TRANSACTION_LOG_VALUE, value.version, value.fields)
    return jackson_dumps({"version": str(value.version), "data": data})


def _scala_hash_set_order(items: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """Iteration order of a Scala 2.13 ``mutable.HashSet[TopicPartition]`` built by adding
    ``items`` in order (``TopicPartition.hashCode`` = 31 * (31 + partition) + topic.hashCode).

    The table starts with 16 buckets and doubles when size exceeds 0.75 of it; a bucket is
    ``improved hash & (size - 1)`` with ``improved = h ^ (h >>> 16)``; buckets iterate in
    index order and each bucket keeps its nodes sorted by improved hash (ties in insertion
    order).
    """
    unique = list(dict.fromkeys(items))
    size = 16
    while len(unique) > size * 0.75:
        size *= 2
    return scala_hash_order(unique, topic_partition_hash_code, size)


def dump_key_value_text_v3(key: bytes | None, value: bytes | None) -> tuple[str, str]:
    """Kafka 3.x ``--transaction-log-decoder`` text (``TransactionLog.formatRecordKeyAndValue``):
    ``transaction_metadata::transactionalId=<id>`` and
    ``producerId:P,producerEpoch:E,state=S,partitions=[t-0,...],txnLastUpdateTimestamp=T,txnTimeoutMs=M``,
    or ``<DELETE>``. A key of another version prints ``unknown::version=<v>`` with no payload.
    Decoding failures raise (in Kafka they end the dump)."""
    if key is None:
        raise SchemaError("Failed to decode transaction log key: the record has no key")
    version = _int16_prefix(key, "__transaction_state key")
    if version != 0:
        return f"unknown::version={version}", None
    k = decode_key(key)
    key_text = f"transaction_metadata::transactionalId={k.transactional_id}"
    v = decode_value(value)
    if v is None:
        return key_text, "<DELETE>"
    f = v.fields
    partitions = ",".join(f"{t}-{p}" for t, p in _scala_hash_set_order(v.topic_partitions))
    return key_text, (
        f"producerId:{f['producerId']},producerEpoch:{f['producerEpoch']},state={v.state},"
        f"partitions=[{partitions}],txnLastUpdateTimestamp={f['transactionLastUpdateTimestampMs']},"
        f"txnTimeoutMs={f['transactionTimeoutMs']}"
    )
