"""``Producer``: Kafka's producer for an embedded data directory.

What a record goes through, as in ``KafkaProducer``:

1. **Partition** (``engine.partitioner``): explicit partition, else murmur2 of the key, else
   the sticky partitioner (KIP-794), so a key lands where Kafka's Java client puts it.
2. **Accumulate** per partition into a batch until the next record would take it past
   ``batch.size`` bytes (a record larger than that gets a batch of its own, as in Kafka).
   Sizes are the records' uncompressed sizes; Kafka also estimates the compression ratio.
3. **Send** the closed batches (``max.request.size`` worth, or everything at ``linger.ms``,
   :meth:`Producer.flush` or :meth:`Producer.close`) in one round: each batch is encoded as
   a v2 batch with the codec, the producer id, epoch and sequence numbers, appended to the
   partition leader and copied to its followers, then every written log is flushed once
   (a group commit) and only then are the records acknowledged.

There is no background thread: ``linger.ms`` is checked when a record is sent, and a caller
that stops sending calls :meth:`flush` (or ``poll``) to push what lingers. ``acks`` in the
embedded case: every replica is written before a send round returns, and with
``plog.fsync.on.produce`` (the default) fsynced too, so ``acks=0``, ``1`` and ``all`` all
mean "on every replica's disk" and are accepted for compatibility only.

Idempotence (``enable.idempotence``, default true as in Kafka >= 3.0): the producer gets a
producer id from the data directory, epoch 0, and per-partition sequence numbers; a batch
appended twice (a retry after an unknown outcome) is recognised by the log's producer state
and acknowledged with its original offsets without being written again.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from plog.formats import compression as _compression
from plog.formats.record_batch import encode_batch
from plog.formats.records import increment_sequence
from plog.formats.errors import UnsupportedCodecError

from plog.engine.cluster.data_dir import DataDir
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
    __slots__ = ("tp", "records", "size", "base_offset", "log_append_time", "error", "done")

    def __init__(self, tp: TopicPartition):
        self.tp = tp
        self.records: list[tuple] = []
        self.size = _BATCH_OVERHEAD
        self.base_offset = -1
        self.log_append_time = -1
        self.error: BaseException | None = None
        self.done = False


class FutureRecordMetadata:
    """The outcome of one :meth:`Producer.send`; :meth:`get` flushes if needed."""

    __slots__ = ("_producer", "_batch", "_index")

    def __init__(self, producer: "Producer", batch: _Batch, index: int):
        self._producer = producer
        self._batch = batch
        self._index = index

    def done(self) -> bool:
        return self._batch.done

    def get(self) -> RecordMetadata:
        if not self._batch.done:
            self._producer.flush()
        b = self._batch
        if b.error is not None:
            raise b.error
        _, ts, key, value = b.records[self._index][:4]
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
                 partitioner_ignore_keys: bool = False, auto_create_topics: bool = True,
                 hold_lock: bool = False, lock_timeout_s: float = 30.0, rng=None):
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
        self._writer = None
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
            timestamp_ms = int(time.time() * 1000)
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
        now = time.monotonic() * 1000
        if self._first_linger_ms is None:
            self._first_linger_ms = now
        if now - self._first_linger_ms >= self.linger_ms:
            self.flush()  # linger.ms is up: everything queued goes, full or not
        elif self._ready_bytes >= self.max_request_size:
            self._send_ready()
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
        batch_size = self.batch_size
        clock = time.time
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
            if self._ready_bytes >= self.max_request_size:
                self._send_ready()
        if count:
            now = time.monotonic() * 1000
            if self._first_linger_ms is None:
                self._first_linger_ms = now
            elif now - self._first_linger_ms >= self.linger_ms:
                self.flush()
        return count

    def _close_batch(self, batch: _Batch) -> None:
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

    def _send_ready(self) -> None:
        ready, self._ready, self._ready_bytes = self._ready, [], 0
        self._first_linger_ms = None if not self._open else time.monotonic() * 1000
        if not ready:
            return
        writer = self._writer
        own_writer = writer is None
        failure: BaseException | None = None
        try:
            if own_writer:
                # The writer re-reads the metadata when it takes its first lock.
                writer = self.data_dir.writer(self.lock_timeout_s)
            appended = []
            for batch in ready:
                if failure is not None:
                    # Nothing after a failed batch is written: order within a partition holds.
                    batch.error = ProducerError(f"not sent: an earlier batch failed ({failure})")
                    continue
                earlier = self._failed.get(batch.tp)
                if earlier is not None:
                    # The same across rounds: a batch of an earlier round to this partition
                    # failed (or was cut short by Ctrl-C), so this one would follow a gap.
                    batch.error = failure = ProducerError(
                        f"not sent: an earlier batch to {batch.tp.topic}-{batch.tp.partition} failed "
                        f"({str(earlier) or type(earlier).__name__})")
                    continue
                try:
                    self._append(writer, batch)
                    appended.append(batch)
                except EngineError as e:
                    batch.error = e
                    failure = e
            writer.flush()
        except BaseException as e:
            failure = failure or e
            for batch in ready:
                if batch.error is None:
                    batch.error = e if isinstance(e, EngineError) else ProducerError(str(e))
        finally:
            if own_writer and writer is not None:
                if self.hold_lock and failure is None:
                    self._writer = writer
                else:
                    try:
                        writer.close()
                    except BaseException as e:
                        failure = failure or e
                        for batch in ready:
                            batch.error = batch.error or e
        for batch in ready:
            batch.done = True
            if batch.error is None:
                n = len(batch.records)
                self.records_sent += n
                st = self.stats.get(batch.tp)
                if st is None:
                    self.stats[batch.tp] = [batch.base_offset, batch.base_offset + n - 1, n]
                else:
                    st[1] = batch.base_offset + n - 1
                    st[2] += n
        if failure is not None:
            for batch in ready:
                if batch.error is not None:
                    self._failed.setdefault(batch.tp, failure)
            raise failure

    def _append(self, writer, batch: _Batch) -> None:
        tp = batch.tp
        seq = -1
        if self.idempotent:
            seq = self._sequences.get(tp, 0)
        config = self.data_dir.topic_config(tp.topic)
        codec = self.codec
        if config.compression_type not in ("producer",):
            # The broker would recompress to the topic's codec; writing it so is the same result.
            codec = _compression.codec_id("none" if config.compression_type == "uncompressed"
                                          else config.compression_type)
        raw = encode_batch(batch.records, compression_codec=codec, compression_level=self.compression_level,
                           producer_id=self.producer_id, producer_epoch=self.producer_epoch, base_sequence=seq)
        info = writer.append(tp, raw, flush=False, acks=self.acks)
        batch.base_offset = info.first_offset
        batch.log_append_time = info.log_append_time
        if self.idempotent:
            self._sequences[tp] = increment_sequence(seq, len(batch.records))

    def release(self) -> None:
        """Give back a held data directory (``hold_lock``) after a flush; the next send round
        takes it again. For callers about to wait for input."""
        if self._ready or self._open:
            self.flush()
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
            writer, self._writer = self._writer, None
            if writer is not None:
                writer.close()

    def __enter__(self) -> "Producer":
        return self

    def __exit__(self, exc_type, *exc) -> None:
        if exc_type is not None and not self.closed:
            # Do not send on an error path; release the directory.
            self.closed = True
            writer, self._writer = self._writer, None
            if writer is not None:
                writer.close()
            return
        self.close()


__all__ = ["COMPRESSION_TYPES", "FutureRecordMetadata", "Producer", "ProducerError", "RecordMetadata"]
