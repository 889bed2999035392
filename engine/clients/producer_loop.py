"""The produce loop: records read from a byte stream (lines, or plog's JSON lines) sent by
one :class:`~plog.engine.clients.producer.Producer`, for ``plog produce`` and any program
that feeds a topic from a file or a pipe (kafka-console-producer's loop).

* **Lines** are parsed by a :class:`~plog.engine.clients.console_io.LineParser`
  (kafka-console-producer's LineMessageReader); plain lines (no key, no headers, no null
  marker) take the bulk path, :meth:`Producer.send_values` on chunks of values, without a
  parse or a future per record. **JSON lines** are :func:`record_io.parse_jsonl`'s.
* **Native path**: with plog's native module, plain and keyed lines (no header parsing,
  no ``headers``) are read in large chunks and parsed, partitioned and batched in Rust
  (``plog._native.ProduceFill``, driven by ``Producer._fill``): the same records, batches,
  errors and line numbers as the loops below, which stay the reference (and run for jsonl
  and header lines, over the producer's native batches).
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
import time
from typing import BinaryIO, Iterable, Iterator

from plog.engine.clients.producer import (_BATCH_OVERHEAD, _FILL_DONE, _FILL_FALLBACK, _FILL_NEED_MORE,
                                          _FILL_TOO_LARGE, _RECORD_OVERHEAD, Producer)
from plog.engine.errors import InputRecordError, RecordTooLargeError

#: Plain lines handed to :meth:`Producer.send_values` at a time (one at a time from input
#: that can pause, so each line goes out as soon as it is typed).
CHUNK_LINES = 4096
#: Bytes read from a pipe or terminal at a time.
READ_BYTES = 1 << 16
#: Native path: input that stays empty this long (seconds) has paused (see _read_more).
PAUSE_S = 0.002
#: Bytes of a regular file read at a time on the native path.
READ_FILE_BYTES = 1 << 20
#: The longest line (its line break not counted) produce reads is the larger of these two:
#: a floor, and a multiple of the producer's max.request.size (see line_limit).
MIN_LINE_LIMIT = 64 << 20
LINE_LIMIT_FACTOR = 4


def line_limit(producer: Producer) -> int:
    """The longest line ``producer``'s loop reads, its line break not counted: a longer one
    is an input error, raised once that many of its bytes are read without a line break, so
    a line that never ends (binary input, ``/dev/zero``) cannot take unbounded memory. A
    plain or keyed line that long could never be a record a request takes anyway."""
    return max(MIN_LINE_LIMIT, LINE_LIMIT_FACTOR * producer.max_request_size)


def _too_long(number: int, limit: int) -> InputRecordError:
    return InputRecordError(number, f"longer than {limit} bytes, the longest line produce reads "
                                    f"({LINE_LIMIT_FACTOR} x max.request.size, at least {MIN_LINE_LIMIT >> 20} MiB)")


class _LineTooLong(Exception):
    """:func:`lines_of`: the next line is longer than the limit (its caller names the line)."""


def input_may_pause(source) -> bool:
    """True for a pipe or terminal (input that can pause), False for a regular file."""
    try:
        return not stat.S_ISREG(os.fstat(source.fileno()).st_mode)
    except (OSError, ValueError, AttributeError):
        return False


def lines_of(source: BinaryIO, producer: Producer | None = None, limit: int | None = None) -> Iterator[bytes]:
    """The lines of ``source``, line breaks kept. With ``producer`` (input that can pause),
    before blocking on input: send what lingers and release the data directory. With
    ``limit``: a line longer than that (its line break not counted) raises
    :class:`_LineTooLong` once ``limit + 1`` of its bytes are read."""
    if producer is None:
        if limit is None:
            yield from source
            return
        for line in iter(lambda: source.readline(limit + 1), b""):
            if len(line) > limit and line[-1:] != b"\n":
                raise _LineTooLong
            yield line
        return
    fd = source.fileno()
    pending = bytearray()  # the line being read (appended to in place: no copy of it per read)
    while True:
        ready, _, _ = select.select([fd], [], [], 0)
        if not ready:
            producer.flush()
            producer.release()
        chunk = os.read(fd, READ_BYTES)
        if not chunk:
            if pending:
                yield bytes(pending)
            return
        pending += chunk
        if b"\n" in chunk:
            lines = bytes(pending).split(b"\n")
            pending = bytearray(lines.pop())
            for line in lines:
                if limit is not None and len(line) > limit:
                    raise _LineTooLong
                yield line + b"\n"
        if limit is not None and len(pending) > limit:
            raise _LineTooLong


def _read_more(source, producer: Producer, size: int) -> bytes:
    """The next bytes of input that can pause; before waiting for them, what lingers is
    sent and the data directory released (as :func:`lines_of`)."""
    fd = source.fileno()
    # A writer that is only a moment behind (a pipe refilled within PAUSE_S) is not a pause:
    # the native loop drains a pipe faster than most writers fill it, and a round and a
    # release at every refill would turn one stream into thousands of tiny rounds.
    ready, _, _ = select.select([fd], [], [], PAUSE_S)
    if not ready:
        producer.flush()
        producer.release()
    return os.read(fd, max(size, READ_BYTES))


class _InputBuffer:
    """The native loop's input: one buffer, reused for every read, holding the bytes read
    and not yet taken (``buf[:end]``).

    Reading into the same memory each time, rather than a new ``bytes`` per read plus the
    unparsed tail joined to it, spares a copy of the whole input (profiled on 1 M lines: the
    reads went from 41 to 22 ms). Invariant: no view of ``buf`` outlives a call to
    :meth:`data` (released before the buffer moves or grows)."""

    def __init__(self, size: int):
        self.buf = bytearray(size)
        self.end = 0

    def data(self) -> memoryview:
        """A view of the bytes held; release it before the next :meth:`keep_from`,
        :meth:`read` or :meth:`append`."""
        return memoryview(self.buf)[:self.end]

    def line_length(self, pos: int) -> int:
        """The length of the line at ``pos``, its line break not counted (all the bytes held
        after ``pos`` when none is)."""
        end = self.buf.find(b"\n", pos, self.end)
        return (self.end if end < 0 else end) - pos

    def keep_from(self, pos: int) -> None:
        """Drop the bytes before ``pos`` (taken), moving the rest to the front."""
        rest = self.end - pos
        if pos and rest:
            # The slice is a copy: the tail (a partial line) and its new place may overlap.
            self.buf[:rest] = self.buf[pos:self.end]
        self.end = rest

    def _room(self, size: int) -> None:
        if len(self.buf) - self.end < size:
            # Doubled (few moves while lines are short), but for a long line only what the
            # read needs: the reads themselves double (the loop's read_size).
            grown = bytearray(max(self.end + size, min(2 * len(self.buf), self.end + size + READ_FILE_BYTES)))
            with memoryview(self.buf) as held:  # (a slice of the bytearray would be a third copy)
                grown[:self.end] = held[:self.end]
            self.buf = grown

    def read(self, source, size: int) -> int:
        """Read up to ``size`` bytes of ``source`` after those held; returns how many (0:
        the input is over)."""
        readinto = getattr(source, "readinto", None)
        if readinto is None:
            return self.append(source.read(size))
        self._room(size)
        with memoryview(self.buf) as view:
            got = readinto(view[self.end:self.end + size]) or 0
        self.end += got
        return got

    def append(self, more: bytes) -> int:
        """Hold ``more`` after the bytes held; returns its length."""
        self._room(len(more))
        self.buf[self.end:self.end + len(more)] = more
        self.end += len(more)
        return len(more)


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
        if self._run_native(source, interactive):
            return
        lines = lines_of(source, self.producer if interactive else None, line_limit(self.producer))
        if self.plain:
            self._send_plain(lines, 1 if interactive else CHUNK_LINES)
            return
        self._send_records(lines)

    def _run_native(self, source: BinaryIO, interactive: bool = False) -> bool:
        """The native path for plain or keyed lines (plog._native parses, partitions,
        batches and encodes; the producer sends): the same records, batches, errors and line
        numbers as :meth:`_send_plain` / :meth:`_send_records` (input that can pause: what
        has lingered goes, and the directory is released, before waiting for more, as
        :func:`lines_of` does). False (nothing read) where the reference loop runs: no native
        module, jsonl, headers, or an explicit partition the topic does not have (the
        reference raises for it)."""
        producer, parser = self.producer, self.parser
        nat = producer._nat
        if nat is None or parser is None or parser.parse_headers or self.headers:
            return False
        n = producer.partitions_for(self.topic)
        if self.partition is not None and not 0 <= self.partition < n:
            return False
        plain = self.plain
        limit = producer.max_request_size - _BATCH_OVERHEAD - (_RECORD_OVERHEAD if plain else 0)
        fill = nat.ProduceFill(0 if plain else 1, n, self.partition, producer.ignore_keys, producer.batch_size, limit,
                               key_separator=parser.key_separator if parser.parse_key else None,
                               null_marker=None if plain else parser.null_marker, ignore_error=parser.ignore_error,
                               clock=None if producer._clock is time.time else producer._clock)
        # Plain lines go in chunks of CHUNK_LINES (send_values' calls: linger checks and
        # line numbers per chunk); keyed lines one at a time when linger.ms is 0 (send's).
        chunk = CHUNK_LINES if plain or producer.linger_ms else 1
        inp = _InputBuffer(READ_FILE_BYTES)
        pos, last, read_size = 0, False, READ_FILE_BYTES
        in_chunk = 0
        need_more = True
        limit = line_limit(producer)
        while True:
            if need_more:
                inp.keep_from(pos)
                pos = 0
                if interactive:
                    last = not inp.append(_read_more(source, producer, read_size))
                else:
                    last = not inp.read(source, read_size)
            data = inp.data()
            try:
                pos, taken, event, extra = producer._fill(self.topic, fill, data, pos, last, chunk - in_chunk)
            except BaseException:
                if not plain:
                    self.line_number += in_chunk + producer.fill_taken
                raise
            finally:
                data.release()
            in_chunk += taken
            need_more = event == _FILL_NEED_MORE
            if event in (_FILL_NEED_MORE, _FILL_TOO_LARGE, _FILL_FALLBACK) and inp.line_length(pos) > limit:
                # As lines_of: refused, naming it, once more of it is read than the longest line.
                self.line_number += in_chunk
                raise _too_long(self.line_number + 1, limit)
            # A line longer than what was read: read more at a time (no rescans of a huge line),
            # but never past the longest line.
            read_size = min(read_size * 2, limit + 1 - (inp.end - pos)) if need_more and not taken else READ_FILE_BYTES
            if event == _FILL_TOO_LARGE:
                if not plain or interactive:
                    # send's line; or send_values' calls of one line each: the lines before it
                    self.line_number += in_chunk + (not plain)
                raise RecordTooLargeError(
                    f"The message is {extra + _BATCH_OVERHEAD} bytes when serialized which is larger than "
                    f"{producer.max_request_size}, which is the value of the max.request.size configuration.")
            if event == _FILL_FALLBACK:
                pos = self._fallback_line(inp, pos, self.line_number + in_chunk + 1, extra, plain)
                in_chunk += 1
            if in_chunk >= chunk or (event == _FILL_DONE and in_chunk and last):
                self.line_number += in_chunk
                in_chunk = 0
                producer._linger_check(send_style=not plain)
            if event == _FILL_DONE and last and pos >= inp.end:
                return True

    def _fallback_line(self, inp: _InputBuffer, pos: int, number: int, ts, plain: bool) -> int:
        """The line at ``pos`` of ``inp`` by the reference path (the parser's error for it,
        if any); returns the position after it."""
        end = inp.buf.find(b"\n", pos, inp.end)
        end = inp.end if end < 0 else end + 1
        line = bytes(inp.buf[pos:end])
        if not plain:
            try:
                rec = self.parser.parse(line, number)
            except BaseException:
                self.line_number = number
                raise
            key, value = rec.key, rec.value
        else:
            key, value = None, line[:-2] if line[-2:] == b"\r\n" else line[:-1] if line[-1:] in (b"\n", b"\r") else line
        self.producer.send(self.topic, value, key, None, self.partition, ts)
        return end

    def _send_plain(self, lines: Iterator[bytes], chunk_lines: int) -> None:
        send_values, topic, partition = self.producer.send_values, self.topic, self.partition
        while True:
            chunk: list[bytes] = []
            try:
                chunk.extend(line[:-2] if line[-2:] == b"\r\n" else line[:-1] if line[-1:] in (b"\n", b"\r") else line
                             for line in itertools.islice(lines, chunk_lines))
            except _LineTooLong:
                # The lines read before it go, as on the native path (which holds them already).
                if chunk:
                    send_values(topic, chunk, partition)
                    self.line_number += len(chunk)
                raise _too_long(self.line_number + 1, line_limit(self.producer)) from None
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
        except _LineTooLong:
            raise _too_long(number + 1, line_limit(self.producer)) from None
        finally:
            self.line_number = number


__all__ = ["CHUNK_LINES", "ProduceLoop", "ensure_topic", "input_may_pause", "lines_of"]
