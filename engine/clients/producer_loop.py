"""The produce loop: records read from a byte stream (lines, or plog's JSON lines) sent by
one :class:`~plog.engine.clients.producer.Producer`, for ``plog produce`` and any program
that feeds a topic from a file or a pipe (kafka-console-producer's loop).

* **Lines** are parsed by a :class:`~plog.engine.clients.console_io.LineParser`
  (kafka-console-producer's LineMessageReader); plain lines (no key, no headers, no null
  marker) take the bulk path, :meth:`Producer.send_values` on chunks of values, without a
  parse or a future per record. **JSON lines** are :func:`record_io.parse_jsonl`'s.
* **Linger**: a record waits in the producer at most ``linger.ms`` while input keeps
  coming. Input that pauses (a pipe or a terminal with nothing to read now) makes what
  lingers go at once, and the data directory is released while the loop waits, so other
  writers (a consumer's commits, another producer) go on meanwhile. A regular file never
  pauses.
* **Line numbers**: :attr:`ProduceLoop.line_number` is the last line read (for an error
  raised by a line, that line; in the bulk path, the lines sent before the failing chunk),
  so a caller can say where the input went wrong. Records before it were accepted: closing
  the producer sends them.
"""

from __future__ import annotations

import itertools
import os
import select
import stat
from typing import BinaryIO, Iterable, Iterator

from plog.engine.clients.producer import Producer

#: Plain lines handed to :meth:`Producer.send_values` at a time (one at a time from input
#: that can pause, so each line goes out as soon as it is typed).
CHUNK_LINES = 4096
#: Bytes read from a pipe or terminal at a time.
READ_BYTES = 1 << 16


def input_may_pause(source) -> bool:
    """True for a pipe or terminal (input that can pause), False for a regular file."""
    try:
        return not stat.S_ISREG(os.fstat(source.fileno()).st_mode)
    except (OSError, ValueError, AttributeError):
        return False


def lines_of(source: BinaryIO, producer: Producer | None = None) -> Iterator[bytes]:
    """The lines of ``source``, line breaks kept. With ``producer`` (input that can pause),
    before blocking on input: send what lingers and release the data directory."""
    if producer is None:
        yield from source
        return
    fd = source.fileno()
    pending = b""
    while True:
        ready, _, _ = select.select([fd], [], [], 0)
        if not ready:
            producer.flush()
            producer.release()
        chunk = os.read(fd, READ_BYTES)
        if not chunk:
            if pending:
                yield pending
            return
        pending += chunk
        if b"\n" in chunk:
            lines = pending.split(b"\n")
            pending = lines.pop()
            for line in lines:
                yield line + b"\n"


def ensure_topic(producer: Producer, topic: str):
    """Make sure ``topic`` exists, creating it as the producer's auto-create rule allows
    (else an error naming it); returns the topic's metadata when it was created here,
    None when it existed."""
    dd = producer.data_dir
    existed = dd.has_topic(topic) or (dd.reload() or dd.has_topic(topic))
    producer.partitions_for(topic)
    return None if existed else dd.topic(topic)


class ProduceLoop:
    """Send every record of an input to ``topic`` (see the module docstring).

    ``parser``: a ``LineParser`` for lines, None for JSON lines. ``partition``: every record
    goes there; else a JSON line's own ``partition`` field (unless ``repartition``), else
    the producer's partitioner. ``headers``: added to every record."""

    def __init__(self, producer: Producer, topic: str, *, parser=None, partition: int | None = None,
                 repartition: bool = False, headers: Iterable[tuple[str, bytes]] = ()):
        self.producer = producer
        self.topic = topic
        self.parser = parser
        self.partition = partition
        self.repartition = repartition
        self.headers = list(headers)
        self.line_number = 0

    @property
    def plain(self) -> bool:
        """Lines that are values and nothing else: the bulk path."""
        p = self.parser
        return (p is not None and not p.parse_key and not p.parse_headers and p.null_marker is None
                and not self.headers)

    def run(self, source: BinaryIO) -> None:
        """Read ``source`` to its end, sending every record (errors stop it; see
        :attr:`line_number`)."""
        interactive = input_may_pause(source)
        lines = lines_of(source, self.producer if interactive else None)
        if self.plain:
            self._send_plain(lines, 1 if interactive else CHUNK_LINES)
            return
        self._send_records(lines)

    def _send_plain(self, lines: Iterator[bytes], chunk_lines: int) -> None:
        send_values, topic, partition = self.producer.send_values, self.topic, self.partition
        while True:
            chunk = [line[:-2] if line[-2:] == b"\r\n" else line[:-1] if line[-1:] in (b"\n", b"\r") else line
                     for line in itertools.islice(lines, chunk_lines)]
            if not chunk:
                return
            send_values(topic, chunk, partition)
            self.line_number += len(chunk)

    def _send_records(self, lines: Iterator[bytes]) -> None:
        from plog.engine.clients.record_io import parse_jsonl

        send, topic, partition, repartition = self.producer.send, self.topic, self.partition, self.repartition
        parse = self.parser.parse if self.parser is not None else parse_jsonl
        static = self.headers
        number = 0
        try:
            for number, line in enumerate(lines, 1):
                rec = parse(line, number)
                if rec is None:
                    continue
                p = partition if partition is not None else (None if repartition else rec.partition)
                hdrs = rec.headers + static if static else rec.headers
                send(topic, rec.value, rec.key, hdrs or None, p, rec.timestamp)
        finally:
            self.line_number = number


__all__ = ["CHUNK_LINES", "ProduceLoop", "ensure_topic", "input_may_pause", "lines_of"]
