"""The consume loop: the records of one topic from a start to an end, or following it, for
``plog consume`` and any program that wants the same rules.

* **Range**: an :class:`~plog.engine.offset_spec.OffsetRange` resolved in each partition
  as on disk when the loop starts (:meth:`Consumer.resolve_range`). A partition that
  reaches its end is paused; the loop ends when every partition has, at the log end with
  ``exit_at_end`` (when every partition has an end, at the log end too), or after
  ``count`` records. Otherwise it follows the topic, polling for new records.
* **Group**: with a group id and no explicit partitions the consumer subscribes; the
  group's committed offsets give the positions, and the range's start only chooses where
  a partition without one starts (``auto.offset.reset``: ``latest`` for a start at
  ``latest``, else ``earliest``).
* **At least once**: a record counts as consumed (:attr:`ConsumeLoop.consumed`) once the
  caller is done with it: it asks for the next one, or the loop ends. Records fetched but
  not consumed (past a range end, after ``count``, or cut off because the caller failed or
  was interrupted while handling one) are sought back before the consumer closes, so the
  commit at close never passes them; the record being handled when the caller failed may
  come again, and none is lost.

Usage::

    loop = ConsumeLoop.open(data_dir, "orders", parse_offset_range("-10"), exit_at_end=True)
    try:
        for record in loop:
            print(record.value)
    finally:
        loop.close()   # seeks back what was not consumed, then closes (and commits)
"""

from __future__ import annotations

from typing import Callable, Iterable, Iterator

from plog.engine.clients.consumer import READ_UNCOMMITTED, Consumer
from plog.engine.clients.record_io import ConsumerRecord
from plog.engine.cluster.data_dir import DataDir

#: Records one poll returns at most: large, as the loop hands them on one by one.
MAX_POLL_RECORDS = 10000
#: How long a following loop waits in one poll for new records.
FOLLOW_POLL_MS = 100


class ConsumeLoop:
    """The records of ``topic`` in ``offset_range`` (see the module docstring). Iterate it
    once; :meth:`close` it (also after an error) to seek back and close the consumer."""

    def __init__(self, consumer: Consumer, topic: str, offset_range, *, partitions: Iterable[int] | None = None,
                 subscribe: bool = False, count: int | None = None, exit_at_end: bool = False,
                 after_poll: Callable[[], None] | None = None):
        self.consumer = consumer
        self.topic = topic
        self.offset_range = offset_range
        self.partitions = list(partitions) if partitions else None
        self.subscribe = subscribe
        self.count = count
        self.exit_at_end = exit_at_end
        #: Called after the records of each poll were handed on (a CLI flushes its output).
        self.after_poll = after_poll
        #: The records the caller was done with, once the loop ended or was closed.
        self.consumed = 0
        self._ends: dict = {}
        self._records: Iterator[ConsumerRecord] | None = None

    @classmethod
    def open(cls, data_dir: DataDir, topic: str, offset_range, *, group_id: str | None = None,
             partitions: Iterable[int] | None = None, count: int | None = None, exit_at_end: bool = False,
             isolation_level: str = READ_UNCOMMITTED, enable_auto_commit: bool = True,
             assignment_strategy: Iterable[str] = ("range", "cooperative-sticky"),
             after_poll: Callable[[], None] | None = None) -> "ConsumeLoop":
        """A loop over ``topic`` of ``data_dir`` (an unknown topic fails here, naming it),
        standalone, or in the group ``group_id`` (subscribed unless ``partitions`` are given;
        positions committed at close with ``enable_auto_commit``)."""
        data_dir.topic(topic)
        reset = "latest" if offset_range.start.kind == "latest" else "earliest"
        consumer = Consumer(data_dir, group_id=group_id, auto_offset_reset=reset,
                            enable_auto_commit=enable_auto_commit, isolation_level=isolation_level,
                            max_poll_records=MAX_POLL_RECORDS, partition_assignment_strategy=assignment_strategy)
        return cls(consumer, topic, offset_range, partitions=partitions,
                   subscribe=group_id is not None and not partitions, count=count, exit_at_end=exit_at_end,
                   after_poll=after_poll)

    def __iter__(self) -> Iterator[ConsumerRecord]:
        if self._records is None:
            self._records = self._run()
        return self._records

    def rendered(self, fmt) -> Iterator[bytes]:
        """The records :meth:`__iter__` gives, printed in ``fmt`` (a
        :class:`~plog.engine.clients.record_io.BatchFormat`), a poll at a time (up to
        :data:`MAX_POLL_RECORDS` records, in bytes objects of about a MiB), read_uncommitted
        only: what ``for rec in loop: write(fmt.record(rec))`` writes, byte for byte, without
        a Python object per record on the native path. At least once as :meth:`__iter__`, by
        poll: a poll's records count as consumed once the caller asks for what follows its
        last piece; a poll the caller failed with is sought back whole. Iterate it (or the
        loop) once."""
        if self._records is None:
            self._records = self._run_rendered(fmt)
        return self._records

    def close(self) -> None:
        """Seek back every record fetched but not consumed, then close the consumer (which
        commits the positions, with a group and auto-commit)."""
        try:
            if self._records is not None:
                self._records.close()
        finally:
            self.consumer.close()

    # -- the loop ---------------------------------------------------------------------------------

    def _start(self) -> None:
        """Subscribe, or assign the partitions and seek each to its range's start."""
        consumer = self.consumer
        if self.subscribe:
            consumer.subscribe([self.topic])
            return
        tps = ([(self.topic, p) for p in self.partitions] if self.partitions
               else consumer.data_dir.readable_partitions(self.topic))
        consumer.assign(tps)
        for tp in tps:
            start, end = consumer.resolve_range(tp, self.offset_range)
            consumer.seek(tp, start)
            if end is not None:
                self._ends[tp] = end
                if start >= end:
                    consumer.pause([tp])

    def _finished(self) -> bool:
        """Every partition has a range end and has reached it (paused)."""
        paused = self.consumer.paused()
        return bool(self._ends) and all(tp in paused for tp in self.consumer.assignment())

    def _pause_finished(self) -> None:
        consumer = self.consumer
        for tp, end in self._ends.items():
            if tp not in consumer.paused() and consumer.position(tp) >= end:
                consumer.pause([tp])

    def _run(self) -> Iterator[ConsumerRecord]:
        consumer, ends, count = self.consumer, self._ends, self.count
        seen = 0
        try:
            self._start()
            timeout = 0 if self.exit_at_end else FOLLOW_POLL_MS
            done = count == 0
            while not done:
                records = consumer.poll(timeout)
                if not records:
                    if (self.exit_at_end or ends and len(ends) == len(consumer.assignment())) and consumer.at_end():
                        break
                    if self._finished():
                        break
                    continue
                unconsumed: dict = {}
                i = 0
                try:
                    for i, rec in enumerate(records):
                        if ends:
                            end = ends.get((rec.topic, rec.partition))
                            if end is not None and rec.offset >= end:
                                unconsumed.setdefault((rec.topic, rec.partition), rec.offset)
                                consumer.pause([(rec.topic, rec.partition)])
                                continue
                        yield rec
                        seen += 1
                        if count is not None and seen >= count:
                            done = True
                            for later in records[i + 1:]:
                                unconsumed.setdefault((later.topic, later.partition), later.offset)
                            break
                except BaseException:
                    # The caller failed or was interrupted while handling records[i] (or the
                    # loop was closed there): from that one on, none was consumed.
                    for later in records[i:]:
                        unconsumed.setdefault((later.topic, later.partition), later.offset)
                    raise
                finally:
                    # Fetched but not consumed: a commit must not pass them.
                    for tp, off in unconsumed.items():
                        consumer.seek(tp, off)
                self._pause_finished()
                if self._finished():
                    break
                if self.after_poll is not None:
                    self.after_poll()
        finally:
            self.consumed = seen

    def _run_rendered(self, fmt) -> Iterator[bytes]:
        """:meth:`_run` a poll at a time (see :meth:`rendered`)."""
        consumer, ends, count = self.consumer, self._ends, self.count
        seen = 0
        try:
            self._start()
            timeout = 0 if self.exit_at_end else FOLLOW_POLL_MS
            done = count == 0
            while not done:
                poll = consumer.poll_rendered(timeout, fmt, ends, None if count is None else count - seen)
                if not poll:
                    if (self.exit_at_end or ends and len(ends) == len(consumer.assignment())) and consumer.at_end():
                        break
                    if self._finished():
                        break
                    continue
                # Until the caller is done with the chunk, none of its records was consumed.
                unconsumed = poll.firsts
                try:
                    if poll.past_end:
                        consumer.pause(poll.past_end)
                    for piece in poll.pieces():
                        yield piece
                    seen += poll.rendered
                    done = count is not None and seen >= count
                    unconsumed = poll.unconsumed
                finally:
                    # Fetched but not consumed: a commit must not pass them.
                    for tp, off in unconsumed.items():
                        consumer.seek(tp, off)
                self._pause_finished()
                if self._finished():
                    break
                if self.after_poll is not None:
                    self.after_poll()
        finally:
            self.consumed = seen


__all__ = ["ConsumeLoop", "FOLLOW_POLL_MS", "MAX_POLL_RECORDS"]
