"""``Producer``: Kafka's producer for an embedded data directory.

What a record goes through, as in ``KafkaProducer``:

1. **Partition** (``engine.partitioner``): explicit partition, else murmur2 of the key, else
   the sticky partitioner (KIP-794), so a key lands where Kafka's Java client puts it.
2. **Accumulate** per partition into a batch until the next record would take it past
   ``batch.size`` bytes (a record larger than that gets a batch of its own, as in Kafka).
   Sizes are the records' uncompressed sizes; Kafka also estimates the compression ratio.
3. **Send** the closed batches (what Kafka's producer has in flight to a broker at once:
   ``max.in.flight.requests.per.connection`` (5) requests of ``max.request.size`` worth, or
   everything at ``linger.ms``, :meth:`Producer.flush` or :meth:`Producer.close`) in one
   round: each batch is encoded as
   a v2 batch with the codec, the producer id, epoch and sequence numbers, appended to the
   partition leader and copied to its followers, then every written log is flushed once
   (a group commit) and only then are the records acknowledged.

No sender thread: ``linger.ms`` is checked when a record is sent, and a caller that stops
sending calls :meth:`flush` (or ``poll``) to push what lingers. With ``hold_lock`` a round's
flush (a full round's, or, when it has followers, what lingered at ``linger.ms``, which
Kafka's sender also sends while the caller goes on) runs on the writer's thread while the
next round fills; with
replication factor 1 while the next round is appended too, with followers while it is
appended and replicated once this one's fetches are over (``ClusterWriter.flush_in_background``).
A round is still acknowledged only after its own fsyncs, in order, and a round sent after
one that fails fails with it. ``acks`` in the
embedded case: every replica is written before a send round returns, and with
``plog.fsync.on.produce`` (the default) fsynced too, so ``acks=0``, ``1`` and ``all`` all
mean "on every replica's disk" and are accepted for compatibility only.

Bulk API: :meth:`Producer.send_many` ``(topic, records, partition=None) -> int`` queues
every item of an iterable, each a value (``bytes``/``bytearray``, or None for a tombstone)
or a tuple ``(key, value)`` or ``(key, value, headers)`` (headers: ``(str | bytes, bytes |
None)`` pairs), stamped now, without a future per record: the records, batches and rounds
:meth:`Producer.send` of each would give; :meth:`Producer.flush` waits for them and
:attr:`Producer.stats` says where they went. ``Producer.send_values`` is its keyless form
for plain values (what ``plog produce`` uses for plain lines).

Two paths, the same bytes: with plog's native module (formats/native.py decides at import),
each open batch is a ``plog._native.RecordsBuilder`` that encodes its records as they come
(``ProduceFill`` runs the partitioner, batching and line parsing of ``send_many``,
``send_values`` and the produce loop in Rust, handing back to Python only at the events a
batch or a round needs); without it (``PLOG_NATIVE=0``), the records stay tuples encoded by
formats/record_batch.py when sent. Each round hands every partition's ready batches, in
order, to ``ClusterWriter.append_batches`` as one request.

Idempotence (``enable.idempotence``, default true as in Kafka >= 3.0): the producer gets a
producer id from the data directory, epoch 0, and per-partition sequence numbers; a batch
appended twice (a retry after an unknown outcome) is recognised by the log's producer state
and acknowledged with its original offsets without being written again.
"""

from __future__ import annotations

import itertools
import os
import time
from contextlib import nullcontext
from dataclasses import dataclass

from plog.formats import compression as _compression
from plog.formats import native as _native
from plog.formats.default_record import encode_records
from plog.formats.memory_records import MemoryRecords
from plog.formats.record_batch import encode_batch
from plog.formats.records import increment_sequence
from plog.formats.errors import UnsupportedCodecError

from plog.engine.cluster.data_dir import DataDir
from plog.engine.interrupts import uninterrupted
from plog.engine.errors import (
    ConfigError,
    EngineError,
    ProducerError,
    RecordTooLargeError,
    UnknownTopicOrPartitionError,
)
from plog.engine.clients.partitioner import StickyPartitioner, partition_for_key
from plog.engine.storage.file_names import TopicPartition

#: Per-record overhead in a v2 batch beyond key, value and headers: length, attributes,
#: timestamp and offset deltas, key/value lengths and the header count (worst case ~21 bytes;
#: Kafka's estimate ``DefaultRecord.sizeInBytes`` is exact, this errs on the large side).
_RECORD_OVERHEAD = 12
_BATCH_OVERHEAD = 61

COMPRESSION_TYPES = ("none", "gzip", "snappy", "lz4", "zstd")

#: ``plog._native`` when producers build their batches natively (formats/native.py decides,
#: at import; each Producer reads it when created), else None: the pure-Python reference.
NATIVE = _native.module

#: Items of :meth:`Producer.send_many` taken from its iterable at a time (native path).
BULK_CHUNK = 4096

# The events of plog._native.ProduceFill.run (native/src/py_produce.rs).
_FILL_DONE, _FILL_NEED_MORE, _FILL_APPENDED, _FILL_NEED_STICKY, _FILL_TOO_LARGE, _FILL_FALLBACK = range(6)


def _count(batch: "_Batch") -> int:
    if batch.builder is not None:
        return batch.builder.count
    return batch.count if batch.count >= 0 else len(batch.records)


def _item_fields(item) -> tuple:
    """``(key, value, headers)`` of a :meth:`Producer.send_many` item."""
    if isinstance(item, tuple):
        if len(item) == 2:
            return item[0], item[1], None
        if len(item) == 3:
            return item
        raise ValueError(f"a record of send_many is a value or a (key, value[, headers]) tuple, "
                         f"not a tuple of {len(item)}")
    return None, item, None


@dataclass(frozen=True)
class RecordMetadata:
    """What a send was acknowledged with (Kafka's ``RecordMetadata``)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    serialized_key_size: int
    serialized_value_size: int


class _Batch:
    """A batch being filled or sent. On the reference path its ``records`` are tuples,
    encoded when sent; on the native path ``builder`` (a ``plog._native.RecordsBuilder``)
    holds them already encoded, ``records`` stays empty, and ``size`` is the builder's once
    the batch is closed; once the batch is in the log the builder is let go (its bytes are
    the log's now) and ``count`` keeps how many records it held. ``deferred``: what the
    reference encoder raised for one of its records, raised when the batch is encoded, as
    the reference path raises it."""

    __slots__ = ("tp", "records", "size", "base_offset", "log_append_time", "error", "done", "builder", "deferred",
                 "count")

    def __init__(self, tp: TopicPartition, builder=None):
        self.tp = tp
        self.builder = builder
        self.deferred: BaseException | None = None
        self.records: list[tuple] = []
        self.size = _BATCH_OVERHEAD
        self.base_offset = -1
        self.log_append_time = -1
        self.error: BaseException | None = None
        self.done = False
        self.count = -1  # the native batch's record count, once its builder is let go


class FutureRecordMetadata:
    """The outcome of one :meth:`Producer.send`; :meth:`get` flushes if needed."""

    __slots__ = ("_producer", "_batch", "_index", "_record")

    def __init__(self, producer: "Producer", batch: _Batch, index: int, record: tuple | None = None):
        self._producer = producer
        self._batch = batch
        self._index = index
        #: the record's (index, timestamp, key, value) when the batch holds no tuples (native)
        self._record = record

    def done(self) -> bool:
        return self._batch.done

    def get(self) -> RecordMetadata:
        if not self._batch.done:
            self._producer.flush()
        b = self._batch
        if b.error is not None:
            raise b.error
        _, ts, key, value = (self._record or b.records[self._index])[:4]
        return RecordMetadata(b.tp.topic, b.tp.partition, b.base_offset + self._index,
                              b.log_append_time if b.log_append_time >= 0 else ts,
                              -1 if key is None else len(key), -1 if value is None else len(value))


class Producer:
    """Send records to a data directory's topics; see the module docstring.

    Use as a context manager or call :meth:`close`: records still lingering are sent then.
    """

    def __init__(self, data_dir: DataDir | str | os.PathLike, *, batch_size: int = 16384, linger_ms: int = 5,
                 compression_type: str = "none", compression_level: int | None = None,
                 enable_idempotence: bool = True, acks: str | int = "all", max_request_size: int = 1048576,
                 max_in_flight_requests_per_connection: int = 5,
                 partitioner_ignore_keys: bool = False, auto_create_topics: bool = True,
                 hold_lock: bool = False, lock_timeout_s: float = 30.0, rng=None, clock=None):
        self.data_dir = data_dir if isinstance(data_dir, DataDir) else DataDir.open(data_dir, create=True)
        if batch_size < 1:
            raise ConfigError(f"batch.size must be >= 1, not {batch_size}")
        if linger_ms < 0:
            raise ConfigError(f"linger.ms must be >= 0, not {linger_ms}")
        if str(acks) not in ("0", "1", "all", "-1"):
            raise ConfigError(f"acks must be 0, 1, all or -1, not {acks!r}")
        #: 0 and 1: acknowledged once the leader appended; -1 (all): once every in-sync
        #: replica has it (below the high watermark), with min.insync.replicas enforced.
        self.acks = -1 if str(acks) in ("all", "-1") else int(acks)
        name = "none" if compression_type in (None, "", "uncompressed") else compression_type
        if name not in COMPRESSION_TYPES:
            raise ConfigError(f"compression.type must be one of {', '.join(COMPRESSION_TYPES)}, not {compression_type!r}")
        try:
            self.codec = _compression.codec_id(name)
        except UnsupportedCodecError as e:
            raise ConfigError(str(e)) from None
        self.compression_level = compression_level
        self.batch_size = batch_size
        self.linger_ms = linger_ms
        self.max_request_size = max_request_size
        if max_in_flight_requests_per_connection < 1:
            raise ConfigError("max.in.flight.requests.per.connection must be >= 1, "
                              f"not {max_in_flight_requests_per_connection}")
        #: A round: what a Kafka producer has in flight to a broker at once, up to
        #: max.in.flight.requests.per.connection requests of max.request.size; its batches
        #: are appended, replicated and fsynced together before any is acknowledged.
        self.round_bytes = max_request_size * max_in_flight_requests_per_connection
        self.ignore_keys = partitioner_ignore_keys
        self.auto_create_topics = auto_create_topics
        self.hold_lock = hold_lock
        self.lock_timeout_s = lock_timeout_s
        self.idempotent = enable_idempotence
        self.producer_id = self.data_dir.allocate_producer_id() if enable_idempotence else -1
        self.producer_epoch = 0 if enable_idempotence else -1
        self._sequences: dict[TopicPartition, int] = {}
        self._open: dict[TopicPartition, _Batch] = {}
        self._ready: list[_Batch] = []
        self._ready_bytes = 0
        self._first_linger_ms: float | None = None
        self._sticky: dict[str, StickyPartitioner] = {}
        self._num_partitions: dict[str, int] = {}
        self._rng = rng
        #: The wall clock records are stamped with (``time.time``; injectable, e.g. for tests).
        self._clock = clock or time.time
        #: ``plog._native`` when batches are built natively, else None: the reference path.
        self._nat = NATIVE
        #: topic -> the open batch's builder of each partition (native path; None: no batch)
        self._slots: dict[str, list] = {}
        self._tps: dict[str, list[TopicPartition]] = {}  # topic -> its partitions (native fills)
        self._writer = None
        #: (batches, future): the round whose flush runs in the background (_send_ready)
        self._inflight: tuple | None = None
        #: (batches, future): the round sent before _inflight and not yet acknowledged (a
        #: replicated round, whose fsyncs run beside the next one's replication)
        self._behind: tuple | None = None
        #: partition -> the failure that stopped a batch to it; later batches to it are not
        #: sent (an interrupted or failed round must not leave a gap before later records).
        self._failed: dict[TopicPartition, BaseException] = {}
        self.closed = False
        #: every partition written: tp -> [first offset, last offset, records]
        self.stats: dict[TopicPartition, list[int]] = {}
        self.records_sent = 0

    # -- sending ------------------------------------------------------------------------------

    def partitions_for(self, topic: str) -> int:
        n = self._num_partitions.get(topic)
        if n is None:
            if not self.data_dir.has_topic(topic):
                self.data_dir.reload()
            if not self.data_dir.has_topic(topic):
                if not self.auto_create_topics:
                    raise UnknownTopicOrPartitionError(f"Topic '{topic}' does not exist in {self.data_dir.path}")
                self.data_dir.create_topic(topic, if_not_exists=True)
                self.data_dir.reload()
            n = self.data_dir.topic(topic).partitions
            self._num_partitions[topic] = n
        return n

    def send(self, topic: str, value: bytes | None = None, key: bytes | None = None, headers=None,
             partition: int | None = None, timestamp_ms: int | None = None) -> FutureRecordMetadata:
        """Queue one record; returns its future. Raises at once for what can never be sent
        (unknown partition, a record larger than ``max.request.size``)."""
        if self.closed:
            raise ProducerError("send after the producer was closed")
        n = self._num_partitions.get(topic) or self.partitions_for(topic)
        if partition is None:
            if key is not None and not self.ignore_keys:
                partition = partition_for_key(key, n)
                sticky = None
            else:
                sticky = self._sticky.get(topic)
                if sticky is None:
                    sticky = self._sticky[topic] = StickyPartitioner(n, batch_size=self.batch_size, rng=self._rng)
                partition = sticky.partition()
        else:
            sticky = None
            if not 0 <= partition < n:
                raise UnknownTopicOrPartitionError(
                    f"Partition {partition} of topic '{topic}' does not exist (it has {n})")
        if timestamp_ms is None:
            timestamp_ms = int(self._clock() * 1000)
        size = _RECORD_OVERHEAD + (0 if key is None else len(key)) + (0 if value is None else len(value))
        if headers:
            headers = tuple(headers)
            for hk, hv in headers:
                size += 2 + len(hk) + (0 if hv is None else len(hv))
        if size + _BATCH_OVERHEAD > self.max_request_size:
            raise RecordTooLargeError(
                f"The message is {size + _BATCH_OVERHEAD} bytes when serialized which is larger than "
                f"{self.max_request_size}, which is the value of the max.request.size configuration.")
        tp = TopicPartition(topic, partition)
        if self._nat is not None:
            return self._send_native(tp, sticky, timestamp_ms, key, value, headers, size)
        batch = self._open.get(tp)
        batch_full = False
        if batch is not None and batch.size + size > self.batch_size:
            self._close_batch(batch)
            batch = None
        if batch is None:
            batch = self._open[tp] = _Batch(tp)
        index = len(batch.records)
        batch.records.append((index, timestamp_ms, key, value, headers) if headers else (index, timestamp_ms, key, value))
        batch.size += size
        if batch.size >= self.batch_size:
            self._close_batch(batch)
            batch_full = True
        if sticky is not None:
            sticky.record_appended(size, batch_full)
        self._after_send()
        return FutureRecordMetadata(self, batch, index)

    def send_values(self, topic: str, values, partition: int | None = None) -> int:
        """Queue keyless, header-less records stamped now: the bulk path of ``plog produce``
        for plain lines. Same batching, partitioning and rounds as :meth:`send`, without a
        future per record; returns how many were queued."""
        if self.closed:
            raise ProducerError("send after the producer was closed")
        n = self._num_partitions.get(topic) or self.partitions_for(topic)
        sticky = None
        if partition is None:
            sticky = self._sticky.get(topic)
            if sticky is None:
                sticky = self._sticky[topic] = StickyPartitioner(n, batch_size=self.batch_size, rng=self._rng)
        elif not 0 <= partition < n:
            raise UnknownTopicOrPartitionError(f"Partition {partition} of topic '{topic}' does not exist (it has {n})")
        limit = self.max_request_size - _BATCH_OVERHEAD - _RECORD_OVERHEAD
        if self._nat is not None:
            return self._send_values_native(topic, values, partition, n, limit)
        batch_size = self.batch_size
        clock = self._clock
        count = 0
        tp = batch = None
        for value in values:
            size = _RECORD_OVERHEAD + len(value)
            if size > limit:
                raise RecordTooLargeError(
                    f"The message is {size + _BATCH_OVERHEAD} bytes when serialized which is larger than "
                    f"{self.max_request_size}, which is the value of the max.request.size configuration.")
            p = sticky.partition() if sticky is not None else partition
            if tp is None or tp.partition != p:
                tp = TopicPartition(topic, p)
                batch = self._open.get(tp)
            if batch is not None and batch.size + size > batch_size:
                self._close_batch(batch)
                batch = None
            if batch is None:
                batch = self._open[tp] = _Batch(tp)
            records = batch.records
            records.append((len(records), int(clock() * 1000), None, value))
            batch.size += size
            full = batch.size >= batch_size
            if full:
                self._close_batch(batch)
                batch = None
            if sticky is not None:
                sticky.record_appended(size, full)
            count += 1
            if self._ready_bytes >= self.round_bytes:
                self._send_ready(pipelined=True)
        if count:
            now = time.monotonic() * 1000
            if self._first_linger_ms is None:
                self._first_linger_ms = now
            elif now - self._first_linger_ms >= self.linger_ms:
                self._linger_send()
        return count

    def send_many(self, topic: str, records, partition: int | None = None) -> int:
        """Queue many records stamped now, without a future each: the bulk API.

        ``records`` is any iterable whose items are each a value (``bytes``, ``bytearray``,
        ``memoryview`` or None for a tombstone) or a tuple ``(key, value)`` or ``(key, value,
        headers)``, ``headers`` a sequence of ``(str | bytes, bytes | None)`` pairs or None.
        Records go as :meth:`send` would send them one by one (partitioner, batching, rounds,
        errors: an item that can never be sent raises there, the items before it stay
        queued); returns how many were queued. Call :meth:`flush` (or :meth:`close`) to
        wait for them; :attr:`stats` says where they went."""
        if self.closed:
            raise ProducerError("send after the producer was closed")
        # The rounds of one call share one writer (one lock, one open of the logs), as with
        # hold_lock; it is let go when the call returns (nothing is in flight between rounds).
        held, self.hold_lock = self.hold_lock, True
        try:
            if self._nat is not None:
                return self._send_many_native(topic, records, partition)
            count = 0
            send = self.send
            for item in records:
                key, value, headers = _item_fields(item)
                send(topic, value, key, headers, partition)
                count += 1
            return count
        finally:
            self.hold_lock = held
            if not held:
                self._let_go()

    # -- the native path (plog._native builds the batches; the reference is above) ----------

    def _slots_for(self, topic: str) -> list:
        slots = self._slots.get(topic)
        if slots is None:
            slots = self._slots[topic] = [None] * self.partitions_for(topic)
        return slots

    def _new_native_batch(self, tp: TopicPartition) -> _Batch:
        batch = self._open[tp] = _Batch(tp, self._nat.RecordsBuilder())
        self._slots_for(tp.topic)[tp.partition] = batch.builder
        return batch

    def _send_native(self, tp, sticky, timestamp_ms, key, value, headers, size) -> FutureRecordMetadata:
        """The rest of :meth:`send` on the native path (same decisions, same order)."""
        batch = self._open.get(tp)
        batch_full = False
        if batch is not None and batch.builder.size + size > self.batch_size:
            self._close_batch(batch)
            batch = None
        if batch is None:
            batch = self._new_native_batch(tp)
        builder = batch.builder
        index = builder.count
        if not builder.append(timestamp_ms, key, value, headers, size):
            self._append_reference(batch, timestamp_ms, key, value, headers, size)
        if builder.size >= self.batch_size:
            self._close_batch(batch)
            batch_full = True
        if sticky is not None:
            sticky.record_appended(size, batch_full)
        self._after_send()
        return FutureRecordMetadata(self, batch, index, (index, timestamp_ms, key, value))

    def _append_reference(self, batch: _Batch, ts: int, key, value, headers, size: int) -> None:
        """A record the native encoder leaves to the reference (unusual types, a timestamp
        it rejects): its bytes as ``encode_records`` makes them, or its error, deferred to
        when the batch is encoded (where the reference path raises it)."""
        builder = batch.builder
        index = builder.count
        base = ts if index == 0 else builder.base_timestamp
        raw = b""
        try:
            raw = encode_records([(index, ts, key, value, headers) if headers else (index, ts, key, value)],
                                 0, base)[0]
        except Exception as e:  # noqa: BLE001 - the reference's own error, raised at encode time
            if batch.deferred is None:
                batch.deferred = e
        builder.append_raw(ts, raw, size)

    def _after_send(self) -> None:
        """:meth:`send`'s rule after each record: linger.ms up, everything queued goes, full
        or not; else a full round goes."""
        now = time.monotonic() * 1000
        if self._first_linger_ms is None:
            self._first_linger_ms = now
        if now - self._first_linger_ms >= self.linger_ms:
            self._linger_send()
        elif self._ready_bytes >= self.round_bytes:
            self._send_ready(pipelined=True)

    def _linger_send(self) -> None:
        """linger.ms is up: every batch goes, full or not, as a round of its own. With
        ``hold_lock``, when the round has followers to replicate it to, its flush runs in the
        background like a full round's (:meth:`_send_ready`), as Kafka's sender sends
        lingered batches while the caller goes on: acknowledged at the next round or
        :meth:`flush`, never before its fsync. With one replica it is flushed now: such a
        round is the small tail of what was sent, its flush one short fsync, and the next
        round's writes beside that fsync of the same file only slowed them down here (more
        rounds then lingered; RF 1 send_values, first repetitions 2.9-3.2 -> 4.1-4.7 M
        records/s), while a replicated round's fetches and fsyncs on every replica overlap
        the caller's work well."""
        if not self._open and not self._ready:
            return
        writer = self._writer
        if writer is None or not any(writer.has_followers(tp) for tp in self._pending_partitions()):
            self.flush()
            return
        for batch in list(self._open.values()):
            self._close_batch(batch)
        self._send_ready(pipelined=True)

    def _pending_partitions(self) -> set:
        """The partitions of the batches queued or open."""
        return {batch.tp for batch in self._ready} | set(self._open)

    def _linger_check(self, send_style: bool = False) -> None:
        """linger.ms up: everything goes. ``send_values``' check at the end of a call, or
        with ``send_style`` :meth:`send`'s after a record."""
        now = time.monotonic() * 1000
        if self._first_linger_ms is None:
            self._first_linger_ms = now
            if not send_style:
                return
        if now - self._first_linger_ms >= self.linger_ms:
            self._linger_send()

    def _send_values_native(self, topic: str, values, partition: int | None, n: int, limit: int) -> int:
        values = values if type(values) is list else list(values)
        fill = self._nat.ProduceFill(3, n, partition, self.ignore_keys, self.batch_size, limit,
                                     clock=None if self._clock is time.time else self._clock)
        pos = count = 0
        while True:
            pos, taken, event, extra = self._fill(topic, fill, values, pos, True, len(values) + 1)
            count += taken
            if event == _FILL_TOO_LARGE:
                raise RecordTooLargeError(
                    f"The message is {extra + _BATCH_OVERHEAD} bytes when serialized which is larger than "
                    f"{self.max_request_size}, which is the value of the max.request.size configuration.")
            if event == _FILL_FALLBACK:
                value = values[pos]
                size = _RECORD_OVERHEAD + len(value)  # the reference's TypeError for a value without len
                if size > limit:
                    raise RecordTooLargeError(
                        f"The message is {size + _BATCH_OVERHEAD} bytes when serialized which is larger than "
                        f"{self.max_request_size}, which is the value of the max.request.size configuration.")
                self.send(topic, value, None, None, partition, extra)
                pos += 1
                count += 1
                continue
            break
        if count:
            self._linger_check()
        return count

    def _send_many_native(self, topic: str, records, partition: int | None) -> int:
        n = self._num_partitions.get(topic) or self.partitions_for(topic)
        if partition is not None and not 0 <= partition < n:
            raise UnknownTopicOrPartitionError(f"Partition {partition} of topic '{topic}' does not exist (it has {n})")
        fill = self._nat.ProduceFill(2, n, partition, self.ignore_keys, self.batch_size,
                                     self.max_request_size - _BATCH_OVERHEAD,
                                     clock=None if self._clock is time.time else self._clock)
        it = iter(records)
        count = 0
        while True:
            chunk = list(itertools.islice(it, BULK_CHUNK))
            if not chunk:
                return count
            # linger.ms 0: send's flush after every record.
            step = 1 if self.linger_ms == 0 else len(chunk) + 1
            pos = 0
            while pos < len(chunk):
                pos, taken, event, extra = self._fill(topic, fill, chunk, pos, True, step)
                count += taken
                if event == _FILL_TOO_LARGE:
                    raise RecordTooLargeError(
                        f"The message is {extra + _BATCH_OVERHEAD} bytes when serialized which is larger than "
                        f"{self.max_request_size}, which is the value of the max.request.size configuration.")
                if event == _FILL_FALLBACK:
                    key, value, headers = _item_fields(chunk[pos])
                    self.send(topic, value, key, headers, partition, extra)
                    pos += 1
                    count += 1
                    continue
                if step == 1:
                    self._linger_check(send_style=True)
            self._linger_check(send_style=True)

    def _fill(self, topic: str, fill, source, pos: int, last: bool, max_records: int):
        """Run ``fill`` (a ``plog._native.ProduceFill``) over ``source`` from ``pos``, acting
        on its events as :meth:`send` does between records, until it takes ``max_records``,
        runs out of input, or meets a record it does not take. Returns ``(pos, records
        taken, event, extra)``: event ``_FILL_DONE``, ``_FILL_NEED_MORE`` (lines: the rest
        of ``source`` is not a whole line), ``_FILL_TOO_LARGE`` (extra: the record's size
        estimate) or ``_FILL_FALLBACK`` (the record at ``pos`` goes by the reference path,
        stamped ``extra`` when not None). :attr:`fill_taken` counts the records taken so far,
        also when a send round raises."""
        slots = self._slots_for(topic)
        sticky = self._sticky.get(topic)
        run = fill.run
        taken = 0
        self.fill_taken = 0
        events: list = []  # the batches the fill opened and closed, in order (_mirror)
        while True:
            if sticky is not None and sticky._partition is not None:
                sp, produced = sticky._partition, sticky._produced
            else:
                sp, produced = -1, 0
            want = max_records - taken
            try:
                pos, n, event, p, produced, switch, extra = run(slots, source, pos, last, want, sp, produced, events,
                                                                self.round_bytes - self._ready_bytes)
            finally:
                if events:  # also when the call raised after opening or closing some
                    self._mirror(topic, events)
            taken += n
            self.fill_taken = taken
            if sp >= 0:
                sticky._produced = produced
            if event == _FILL_APPENDED and switch:
                sticky._switch()
            if event == _FILL_APPENDED:
                # The round check send makes after each record (the fill returns for it).
                if self._ready_bytes >= self.round_bytes:
                    self._send_ready(pipelined=True)
                continue
            if event == _FILL_NEED_STICKY:
                if sticky is None:
                    sticky = self._sticky[topic] = StickyPartitioner(len(slots), batch_size=self.batch_size,
                                                                     rng=self._rng)
                sticky.partition()
            elif event == _FILL_DONE:
                if n < want or taken >= max_records:
                    return pos, taken, event, None
            else:
                return pos, taken, event, (extra if p >= 0 or event == _FILL_TOO_LARGE else None)

    def _mirror(self, topic: str, events: list) -> None:
        """Open and close, in :attr:`_open` and the ready queue, the batches a fill opened
        (``(partition, builder)``) and closed (``partition``) in its slots; empties ``events``."""
        tps = self._tps.get(topic)
        if tps is None:
            tps = self._tps[topic] = [TopicPartition(topic, p) for p in range(len(self._slots[topic]))]
        opened = self._open
        for ev in events:
            if ev.__class__ is int:
                self._close_batch(opened[tps[ev]])
            else:
                tp = tps[ev[0]]
                opened[tp] = _Batch(tp, ev[1])
        events.clear()

    def _close_batch(self, batch: _Batch) -> None:
        if batch.builder is not None:
            batch.size = batch.builder.size
            slots = self._slots[batch.tp.topic]
            if slots[batch.tp.partition] is batch.builder:  # a fill may have opened the next one there
                slots[batch.tp.partition] = None
        del self._open[batch.tp]
        self._ready.append(batch)
        self._ready_bytes += batch.size

    def poll(self) -> None:
        """Send what has lingered past ``linger.ms`` (the work Kafka's sender thread does)."""
        if self._first_linger_ms is not None and time.monotonic() * 1000 - self._first_linger_ms >= self.linger_ms:
            self.flush()

    def flush(self) -> None:
        """Send everything queued and wait for it; raises the first failure of this round."""
        for batch in list(self._open.values()):
            self._close_batch(batch)
        self._send_ready()

    def _send_ready(self, pipelined: bool = False) -> None:
        """Send the ready batches as one round: appended, then flushed (replicated, fsynced,
        checkpointed) before any of them is acknowledged (done, counted in :attr:`stats`).

        ``pipelined`` (a full round, with more records coming): while the producer holds
        the writer (``hold_lock``), the round's flush runs on the writer's thread and this
        returns, so the caller fills the next round while the disk commits this one. That
        round is acknowledged, or fails, when the next one is sent (or at :meth:`flush`):
        still never before its fsync. When that flush only fsyncs (replication factor 1:
        ``ClusterWriter.appends_beside_flush``), the next round is appended before waiting
        for it, and fails if it failed."""
        # One produce request per partition: its ready batches, in order, in one append.
        groups: dict[TopicPartition, list[_Batch]] = {}
        for batch in self._ready:
            group = groups.get(batch.tp)
            if group is None:
                groups[batch.tp] = [batch]
            else:
                group.append(batch)
        # While a round is in flight, this one's requests are encoded before waiting for it.
        ahead = self._encode_ahead(groups) if self._inflight is not None and self._nat is not None else {}
        # And when that round's flush only fsyncs (no followers to fetch it), this one is
        # appended beside it, and waits for it after (_await_round below): acknowledged in
        # order, each after its own fsyncs, as before.
        beside = self._inflight is not None and self._writer is not None and self._writer.appends_beside_flush
        if not beside:
            self._await_round()  # (the ready batches stay as they are: a failure here leaves them queued)
        ready, self._ready, self._ready_bytes = self._ready, [], 0
        self._first_linger_ms = None if not self._open else time.monotonic() * 1000
        if not ready:
            # Nothing to append beside the round in flight: a flush waits for it here.
            self._await_round()
            return
        writer = self._writer
        own_writer = writer is None
        failure: BaseException | None = None
        try:
            if own_writer:
                # The writer re-reads the metadata when it takes its first lock.
                writer = self.data_dir.writer(self.lock_timeout_s)
            with writer.beside_flush() if beside else nullcontext():
                for tp, batches in groups.items():
                    if failure is not None:
                        # Nothing after a failed request is written: order within a partition holds.
                        for batch in batches:
                            batch.error = ProducerError(f"not sent: an earlier batch failed ({failure})")
                        continue
                    earlier = self._failed.get(tp)
                    if earlier is not None:
                        # The same across rounds: a batch of an earlier round to this partition
                        # failed (or was cut short by Ctrl-C), so these would follow a gap.
                        for batch in batches:
                            batch.error = failure = ProducerError(
                                f"not sent: an earlier batch to {tp.topic}-{tp.partition} failed "
                                f"({str(earlier) or type(earlier).__name__})")
                        continue
                    try:
                        self._append(writer, tp, batches, ahead.get(tp))
                    except EngineError as e:
                        failure = e
                        for batch in batches:
                            if batch.base_offset < 0 and batch.error is None:
                                batch.error = e
            if beside:
                # The round before: acknowledged now, or its failure raised (and this round,
                # appended after it, fails with it below: never acknowledged past a gap).
                # Then this round's own flush, with no stop between the two: it is in the log
                # already, so it goes in flight (or is flushed) and a stop surfaces after.
                with uninterrupted():
                    if pipelined and failure is None and self.hold_lock and writer.flushes_in_phases:
                        # A replicated round (ClusterWriter._flush_in_phases): this one's flush
                        # starts now, its replication beside the fsyncs of the one before,
                        # which is acknowledged at the next round, while the caller fills it;
                        # the one before that is acknowledged now, or fails (and those sent
                        # after it with it: _settle_round).
                        future = writer.flush_in_background()  # (raising here leaves both as they were)
                        oldest, self._behind, self._inflight = self._behind, self._inflight, (ready, future)
                        if oldest is not None:
                            self._settle_round(*oldest)
                        return
                    self._await_round()
                    if pipelined and failure is None and self.hold_lock:
                        self._inflight = (ready, writer.flush_in_background())
                        return
                    writer.flush()
            elif pipelined and failure is None and self.hold_lock:
                with uninterrupted():  # a round in flight is always awaited (_await_round)
                    self._inflight = (ready, writer.flush_in_background())
                    if own_writer:
                        self._writer = writer
                return
            else:
                writer.flush()
        except BaseException as e:
            if self._inflight is not None and self._inflight[0] is ready:
                raise  # a stop that surfaced once this round was in flight: its await settles it
            failure = failure or e
            self._fail(ready, e)
        finally:
            if own_writer and writer is not None and self._inflight is None:
                if self.hold_lock and failure is None:
                    self._writer = writer
                else:
                    try:
                        writer.close()
                    except BaseException as e:
                        failure = failure or e
                        for batch in ready:
                            batch.error = batch.error or e
        self._finish_round(ready, failure)

    def _await_round(self) -> None:
        """Acknowledge the round whose flush runs in the background (see :meth:`_send_ready`),
        waiting for it first; raises its failure as :meth:`_send_ready` would have (a stop
        waits: the round is settled either way)."""
        if self._inflight is None:
            return
        with uninterrupted():
            while self._inflight is not None:  # the oldest first: _behind, then _inflight
                if self._behind is not None:
                    oldest, self._behind = self._behind, None
                else:
                    oldest, self._inflight = self._inflight, None
                self._settle_round(*oldest)

    def _settle_round(self, ready: list[_Batch], future) -> None:
        """Acknowledge ``ready`` once ``future`` (its flush) is done, or raise its failure.
        A failure closes the held writer, after the rounds sent after this one, if any
        (:attr:`_behind`, :attr:`_inflight`: flushes started beside this one's), ended:
        they fail too."""
        failure = future.exception()
        if failure is not None:
            self._fail(ready, failure)
            later = [r for r in (self._behind, self._inflight) if r is not None]
            self._behind = self._inflight = None
            for _, after in later:
                after.exception()  # its flush ended (failed, or done but past a gap)
            for after_ready, _ in later:
                self._fail(after_ready, ProducerError(f"not sent: an earlier batch failed ({failure})"))
            writer, self._writer = self._writer, None
            if writer is not None:
                try:
                    writer.close()
                except BaseException as e:
                    for batch in ready:
                        batch.error = batch.error or e
            for after_ready, _ in later:
                try:
                    self._finish_round(after_ready, failure)
                except BaseException as e:  # noqa: BLE001 - that round's failure is this one's, raised below
                    if e is not failure:
                        raise
        self._finish_round(ready, failure)

    @staticmethod
    def _fail(ready: list[_Batch], e: BaseException) -> None:
        for batch in ready:
            if batch.error is None:
                batch.error = e if isinstance(e, EngineError) else ProducerError(str(e))

    def _finish_round(self, ready: list[_Batch], failure: BaseException | None) -> None:
        """Mark ``ready`` done: each batch is acknowledged (counted) or has its error; raises
        ``failure`` after remembering it for the partitions it stopped."""
        stats = self.stats
        sent = 0
        for batch in ready:  # per batch: a round of 1 M-record produce holds hundreds
            batch.done = True
            if batch.error is None:
                n = _count(batch)
                sent += n
                st = stats.get(batch.tp)
                if st is None:
                    stats[batch.tp] = [batch.base_offset, batch.base_offset + n - 1, n]
                else:
                    st[1] = batch.base_offset + n - 1
                    st[2] += n
        self.records_sent += sent
        if failure is not None:
            for batch in ready:
                if batch.error is not None:
                    self._failed.setdefault(batch.tp, failure)
            raise failure

    def _codec_for(self, topic: str) -> int:
        """The codec this producer's batches to ``topic`` are written with."""
        config = self.data_dir.topic_config(topic)
        if config.compression_type not in ("producer",):
            # The broker would recompress to the topic's codec; writing it so is the same result.
            return _compression.codec_id("none" if config.compression_type == "uncompressed"
                                         else config.compression_type)
        return self.codec

    def _native_request(self, tp: TopicPartition, batches: list[_Batch], codec: int):
        """``batches`` (all to ``tp``, in order) as one request encoded in one native call,
        into one buffer the append stamps and writes in place: ``(MemoryRecords, base
        sequences, the sequence after them)``; None where :meth:`_append` encodes batch by
        batch (the reference path, a codec, a record the native encoder left out)."""
        if codec != 0 or self._nat is None or not all(b.builder is not None and b.deferred is None for b in batches):
            return None
        seq = self._sequences.get(tp, 0) if self.idempotent else -1
        buffer, sizes, seqs, seq = self._nat.encode_batches([b.builder for b in batches], self.producer_id,
                                                             self.producer_epoch, seq, self.idempotent)
        return MemoryRecords(buffer, sizes), seqs, seq

    def _encode_ahead(self, groups: dict) -> dict:
        """The native requests of ``groups`` (partition -> its ready batches), encoded while
        the round in flight is still being flushed (the encoding touches neither the writer
        nor the logs, and that round's appends already moved the sequences): what
        :meth:`_append` would encode once the flush is done, then on the critical path."""
        requests = {}
        for tp, batches in groups.items():
            if tp not in self._failed:
                request = self._native_request(tp, batches, self._codec_for(tp.topic))
                if request is not None:
                    requests[tp] = request
        return requests

    def _append(self, writer, tp: TopicPartition, batches: list[_Batch], request=None) -> None:
        """Encode ``batches`` (all to ``tp``, in order; ``request``: already encoded by
        :meth:`_native_request`) and append them in one request."""
        if request is None:
            codec = self._codec_for(tp.topic)
            request = self._native_request(tp, batches, codec)
        else:
            codec = 0  # a native request is uncompressed (_native_request)
        if request is not None:
            raws, seqs, seq = request
        else:
            seq = self._sequences.get(tp, 0) if self.idempotent else -1
            raws, seqs = [], []
            for batch in batches:
                raws.append(self._encode(batch, codec, seq))
                seqs.append(seq)
                if self.idempotent:
                    seq = increment_sequence(seq, _count(batch))
        leader = writer.leader_log(tp)[0]
        start = leader.log_end_offset
        try:
            infos = writer.append_batches(tp, raws, acks=self.acks)
        except BaseException as e:  # an engine error, or Ctrl-C in the middle of the request
            self._partly_appended(writer, leader, tp, batches, codec, seqs, start, e)
            raise
        for batch, info in zip(batches, infos):
            batch.base_offset = info.first_offset
            batch.log_append_time = info.log_append_time
            builder = batch.builder
            if builder is not None:
                # In the log: its encoded copy is not needed again, while the round waits for
                # its flush (one or two rounds later) it would hold a round's bytes more.
                batch.count, batch.builder = builder.count, None
        if self.idempotent:
            self._sequences[tp] = seq

    def _partly_appended(self, writer, leader, tp, batches, codec: int, seqs, start: int, error: BaseException) -> None:
        """After a request that failed at one of its batches: the batches before it are in
        the log (its end offset says how many). An idempotent producer appends the last of
        them again, a duplicate the log acknowledges with its offsets, so the writer flushes
        and replicates them before they are acknowledged, as when each batch was its own
        request; without idempotence they stay unacknowledged (their outcome is unknown).
        The failing batch gets ``error`` (an engine error; anything else, Ctrl-C, fails the
        whole round in :meth:`_send_ready`), the ones after it are not sent."""
        k, written = 0, leader.log_end_offset - start
        while k < len(batches) and written >= _count(batches[k]):
            written -= _count(batches[k])
            k += 1
        if k and self.idempotent:
            try:
                # Encoded again: the request's bytes may have been stamped by the append.
                last = writer.append_batches(tp, [self._encode(batches[k - 1], codec, seqs[k - 1])],
                                             acks=self.acks)[0]
            except EngineError:
                k = 0
            else:
                offset = start
                for batch in batches[:k]:
                    batch.base_offset = offset
                    batch.log_append_time = last.log_append_time
                    offset += _count(batch)
                self._sequences[tp] = seqs[k] if k < len(seqs) else increment_sequence(seqs[-1], _count(batches[-1]))
        else:
            k = 0
        if not isinstance(error, EngineError):
            return
        for i, batch in enumerate(batches[k:]):
            batch.error = error if i == 0 else ProducerError(f"not sent: an earlier batch failed ({error})")

    def _encode(self, batch: _Batch, codec: int, seq: int) -> bytes:
        builder = batch.builder
        if builder is None:
            return encode_batch(batch.records, compression_codec=codec, compression_level=self.compression_level,
                                producer_id=self.producer_id, producer_epoch=self.producer_epoch, base_sequence=seq)
        if batch.deferred is not None:
            raise batch.deferred
        payload = None
        if codec:
            payload = bytes(_compression.compress(codec, builder.records(), level=self.compression_level, magic=2))
        return builder.batch(codec & 0x07, self.producer_id, self.producer_epoch, seq, payload)

    def release(self) -> None:
        """Give back a held data directory (``hold_lock``) after a flush; the next send round
        takes it again. For callers about to wait for input."""
        if self._ready or self._open:
            self.flush()
        self._let_go()

    def _let_go(self) -> None:
        """Close the held writer, the round in flight acknowledged (or failed) first."""
        try:
            self._await_round()
        finally:
            writer, self._writer = self._writer, None
            if writer is not None:
                writer.close()

    def close(self) -> None:
        """Send what is queued, then release the data directory."""
        if self.closed:
            return
        try:
            self.flush()
        finally:
            self.closed = True
            self._let_go()

    def __enter__(self) -> "Producer":
        return self

    def __exit__(self, exc_type, *exc) -> None:
        if exc_type is not None and not self.closed:
            # Do not send on an error path; release the directory.
            self.closed = True
            self._let_go()
            return
        self.close()


__all__ = ["COMPRESSION_TYPES", "FutureRecordMetadata", "Producer", "ProducerError", "RecordMetadata"]
