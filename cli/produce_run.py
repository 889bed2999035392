"""What ``plog produce`` does once its options are read: :class:`ProduceArgs` in, records out.

Typer-free, so that a plain run (``cli/plain.py``) reads the options itself and comes here
without importing Typer or Click; the Typer command (``cli/produce.py``) holds the options'
names, help and defaults for ``--help``, reads them, and comes here too. A value the options
cannot take is a :class:`~plog.cli.errors.ParamError` from :func:`prepare`, before anything
is opened or written, so either side can still say it as Click does.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from enum import Enum

from .boundary import one_line
from .common import DEFAULT_DATA_DIR, open_data_dir, parse_properties, pick_topic, unescape
from .errors import CliUsageError, ParamError, PlogCliError
from .output import key_values
from .plain import Choice, Flag, Int, Many, Option, Text

#: kafka-console-producer's reader properties (engine.record_io.LINE_READER_PROPERTIES), named here
#: for --help without importing the engine.
READER_PROPERTIES = ("parse.key", "key.separator", "parse.headers", "headers.delimiter", "headers.separator",
                     "headers.key.separator", "null.marker", "ignore.error")
#: The summary names each partition's offsets up to this many partitions; beyond, it counts them
#: (--verbose lists them all, a line each).
SUMMARY_PARTITIONS = 4
ACKS = ("0", "1", "all", "-1")


class InputFormat(str, Enum):
    lines = "lines"
    jsonl = "jsonl"


class Compression(str, Enum):
    none = "none"
    gzip = "gzip"
    snappy = "snappy"
    lz4 = "lz4"
    zstd = "zstd"


# A Kafka topic name ([a-zA-Z0-9._-]+): a word after -K that cannot be one is kcat's delimiter.
_TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]+")


def kcat_key_delimiter(args: list[str], value_options: set[str]) -> list[str]:
    """kcat's ``-K<delim>`` (``-K:``) as ``--key-separator <delim>``; also ``-K <delim>``
    when the next word cannot be a topic name (``-K :``, ``-K '|'``). ``-K`` alone stays
    ``--parse-key``. The value of an option in ``value_options`` and everything after
    ``--`` are left alone."""
    out: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            out.extend(args[i:])
            break
        if arg in value_options:
            out.extend(args[i:i + 2])
            i += 2
            continue
        if arg.startswith("-K") and len(arg) > 2:
            out += ["--key-separator", arg[2:]]
        elif arg == "-K" and i + 1 < len(args) and not args[i + 1].startswith("-") \
                and not _TOPIC_NAME.fullmatch(args[i + 1]):
            out += ["--key-separator", args[i + 1]]
            i += 1
        else:
            out.append(arg)
        i += 1
    return out


#: The options as a plain run reads them (cli/plain.py); cli/produce.py declares the same for
#: Typer, with their help (tests/cli/test_plain.py checks the two agree).
PLAIN_OPTIONS = (
    Option("name", ("--topic", "-t"), Text()),
    Option("file", ("--file", "-F"), Text()),
    Option("input_format", ("--input-format", "-i"), Choice(InputFormat)),
    Option("parse_key", ("--parse-key", "-K"), Flag()),
    Option("key_separator", ("--key-separator",), Text()),
    Option("headers", ("--headers",), Flag()),
    Option("headers_delimiter", ("--headers-delimiter",), Text()),
    Option("headers_separator", ("--headers-separator",), Text()),
    Option("headers_key_separator", ("--headers-key-separator",), Text()),
    Option("null_marker", ("--null-marker",), Text()),
    Option("header", ("--header", "-H"), Many()),
    Option("partition", ("--partition", "-p"), Int(0)),
    Option("repartition", ("--repartition",), Flag()),
    Option("compression", ("--compression", "-z"), Choice(Compression)),
    Option("batch_size", ("--batch-size",), Int(1)),
    Option("linger_ms", ("--linger-ms",), Int(0)),
    Option("acks", ("--acks",), Text()),
    Option("idempotence", ("--idempotence",), Flag(off=("--no-idempotence",))),
    Option("create", ("--create",), Flag(off=("--no-create",))),
    Option("properties", ("--property",), Many()),
    Option("verbose", ("--verbose", "-v"), Flag()),
    Option("quiet", ("--quiet", "-q"), Flag(), envvar="PLOG_QUIET"),
    Option("data_dir", ("--data-dir", "-d"), Text(), envvar="PLOG_DATA_DIR"),
)


@dataclass(frozen=True)
class ProduceArgs:
    """``plog produce``'s options as read (by Click or by ``cli/plain.py``): the values each
    option's Typer declaration in ``cli/produce.py`` gives, defaults included (a test checks
    the two agree)."""

    topic: str | None = None
    name: str | None = None  # -t/--topic
    file: str | None = None
    input_format: InputFormat = InputFormat.lines
    parse_key: bool = False
    key_separator: str | None = None
    headers: bool = False
    headers_delimiter: str = "\\t"
    headers_separator: str = ","
    headers_key_separator: str = ":"
    null_marker: str | None = None
    header: list[str] | None = None
    partition: int | None = None
    repartition: bool = False
    compression: Compression = Compression.none
    batch_size: int = 16384
    linger_ms: int = 1000
    acks: str = "all"
    idempotence: bool = True
    create: bool = True
    properties: list[str] | None = None
    verbose: bool = False
    quiet: bool = False
    data_dir: str = DEFAULT_DATA_DIR


@dataclass(frozen=True)
class Prepared:
    """What :func:`prepare` made of :class:`ProduceArgs`: nothing opened yet."""

    topic: str
    headers: list[tuple[str, bytes]]
    parser: object  # engine.clients.console_io.LineParser, None for jsonl


def prepare(args: ProduceArgs) -> Prepared:
    """The checks of ``args`` that need no file: the topic, the headers, --acks, how lines
    are read. Raises ``ParamError`` (Click's kind of usage error) or ``CliUsageError``."""
    topic = pick_topic(args.topic, args.name)
    static_headers = [(k, v.encode("utf-8")) for k, v in key_values(args.header, "--header").items()]
    if args.acks not in ACKS:
        raise ParamError("must be 0, 1, all or -1", "--acks")
    parser = _line_parser(args.input_format, args.properties,
                          parse_key=args.parse_key or args.key_separator is not None,
                          key_separator=args.key_separator, parse_headers=args.headers,
                          headers_delimiter=args.headers_delimiter, headers_separator=args.headers_separator,
                          headers_key_separator=args.headers_key_separator, null_marker=args.null_marker)
    return Prepared(topic, static_headers, parser)


def execute(args: ProduceArgs, prepared: Prepared) -> None:
    """Open the input and the data directory, produce, print the summary (see ``plog
    produce --help``); a failure is one ``PlogCliError`` saying what was produced before it."""
    from plog.engine.clients.producer import Producer
    from plog.engine.clients.producer_loop import ProduceLoop

    from .heap import keep_freed_heap

    keep_freed_heap()

    topic, quiet = prepared.topic, args.quiet
    source = _open_input(args.file)
    dd = _open_or_create(args.data_dir, args.create, quiet)
    producer = Producer(dd, batch_size=args.batch_size, linger_ms=args.linger_ms,
                        compression_type=args.compression.value, enable_idempotence=args.idempotence,
                        acks=args.acks, auto_create_topics=args.create, hold_lock=True)
    loop = ProduceLoop(producer, topic, parser=prepared.parser, partition=args.partition,
                       repartition=args.repartition, headers=prepared.headers)
    error = _produce(loop, source, quiet, args.verbose)
    if error is not None:
        # One line: what was produced before the failure goes into the error itself.
        done = summary_lines(topic, producer.stats, hint=False)[0]
        raise PlogCliError(f"{one_line(error)} ({done} before it)" if producer.stats else one_line(error),
                           like=error) from None
    if not quiet:
        _print_summary(topic, producer.stats, args.verbose)


def _line_parser(input_format: InputFormat, properties: list[str] | None, *, parse_key: bool,
                 key_separator: str | None, parse_headers: bool, headers_delimiter: str, headers_separator: str,
                 headers_key_separator: str, null_marker: str | None):
    """The ``LineParser`` of --input-format lines (the options, their escapes read, then
    --property's reader properties), or None for jsonl (which takes no --property)."""
    from plog.engine.clients.console_io import LINE_READER_PROPERTIES, LineParser, properties_to_settings

    # An unknown property is a PropertyError, a usage error (exit 2).
    reader_properties = properties_to_settings(parse_properties(properties), LINE_READER_PROPERTIES,
                                               "kafka-console-producer's reader (plog produce --property)")
    if input_format is not InputFormat.lines:
        if reader_properties:
            raise CliUsageError("--property sets how lines are read (kafka-console-producer's reader), "
                                "not jsonl: leave out --input-format jsonl or the --property")
        return None
    settings = dict(parse_key=parse_key, key_separator=unescape(key_separator) if key_separator is not None else b"\t",
                    parse_headers=parse_headers, headers_delimiter=unescape(headers_delimiter),
                    headers_separator=unescape(headers_separator),
                    headers_key_separator=unescape(headers_key_separator),
                    null_marker=unescape(null_marker) if null_marker is not None else None)
    settings.update(reader_properties)
    try:
        return LineParser(**settings)
    except ValueError as e:
        raise ParamError(str(e), "--key-separator/--headers-*/--property") from None


def _produce(loop, source, quiet: bool, verbose: bool) -> BaseException | None:
    """Run ``loop`` over ``source``, then close the producer (sending what was accepted);
    returns the error that stopped it, if any. Ctrl-C (or SIGTERM) stops it cleanly, with the
    summary of what was written."""
    from plog.engine.clients.producer_loop import ensure_topic
    from plog.engine.errors import EngineError, InputRecordError, KafkaStorageError, ProducerError

    producer, topic = loop.producer, loop.topic
    error: BaseException | None = None
    interrupted = False
    try:
        made = ensure_topic(producer, topic)
        if made is not None:
            # Visible, so that a typo in the topic name does not go unnoticed.
            _notice(quiet, f"topic {topic} did not exist: created it with {made.partitions} partition(s), "
                           f"replication factor {len(made.replicas[0]) if made.replicas else 0} "
                           "(--no-create refuses)")
        loop.run(source)
    except InputRecordError as e:
        error = e
    except EngineError as e:
        # The line the input stopped at, for an error a record caused; an I/O failure (a
        # full disk) is no line's doing, and naming one would send the user to the input.
        caused_by_input = loop.line_number and not isinstance(e, KafkaStorageError)
        error = PlogCliError(f"line {loop.line_number}: {e}", like=e) if caused_by_input else e
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (cli/signals.py): a clean stop that says what it wrote
        interrupted = True
        raise
    finally:
        try:
            # Records before a bad line (or the interrupt) were accepted: they are sent, then
            # the error reported.
            producer.close()
        except EngineError as e:
            if error is None:
                error = e
            elif not isinstance(e, ProducerError) and getattr(e, "offline_since", None) is not error:
                # (A ProducerError after an error is the records that error kept from being
                # sent, "not sent: an earlier batch failed"; a log the error took offline
                # refuses the close's flush: the error already says why, either way.)
                error = PlogCliError(f"{error}; closing the producer also failed: {e}", like=error)
        finally:
            if source is not sys.stdin.buffer:
                source.close()
            if interrupted and not quiet:
                _print_summary(topic, producer.stats, verbose)
            if interrupted and error is not None and not isinstance(error, ProducerError):
                # The stop's own line and exit code follow; a failure to close the logs must
                # not be lost behind them. (A ProducerError here is the records the stop kept
                # from being sent: the summary accounts for them.)
                print(f"plog: error: {one_line(error)}", file=sys.stderr)
    return error


def _open_or_create(data_dir: str, create: bool, quiet: bool):
    """The data directory; with ``create``, a missing (or empty) one is made, and said."""
    from plog.engine.errors import LogDirError

    try:
        return open_data_dir(data_dir)
    except LogDirError:
        if not create:
            raise
    # Only a missing or empty directory becomes a data directory: anything else fails here.
    dd = open_data_dir(data_dir, create=True)
    _notice(quiet, f"no data directory at {dd.path}: created one with 1 broker "
                   "(plog init makes bigger ones; --no-create refuses)")
    return dd


def _notice(quiet: bool, text: str) -> None:
    if not quiet:
        print(f"plog: {text}", file=sys.stderr)


def _open_input(file: str | None):
    if file is None or file == "-":
        return sys.stdin.buffer
    try:
        return open(file, "rb")
    except OSError as e:
        raise PlogCliError(f"cannot read {file}: {e.strerror}") from None


def summary_lines(topic: str, stats: dict, *, verbose: bool = False, hint: bool = True) -> list[str]:
    """What was written, from ``Producer.stats`` (partition -> [first offset, last offset,
    count]). Up to :data:`SUMMARY_PARTITIONS` partitions, one line naming each:
    ``produced N record(s) to T: partition P: offsets A..B (n); ...``. Beyond, one line of
    counts: ``produced N record(s) to T in K partitions, a to b per partition`` (with
    ``hint``: ``(--verbose lists them)``). ``verbose``: a first line, then one
    ``  partition P: offsets A..B (n)`` per partition."""
    rows = sorted(stats.items(), key=lambda kv: kv[0].partition)
    head = f"produced {sum(s[2] for _, s in rows)} record(s) to {topic}"
    if not rows:
        return [head]
    each = [f"partition {tp.partition}: offsets {s[0]}..{s[1]} ({s[2]})" for tp, s in rows]
    if verbose:
        return [f"{head} in {len(rows)} partition(s):"] + [f"  {line}" for line in each]
    if len(rows) <= SUMMARY_PARTITIONS:
        return [f"{head}: {'; '.join(each)}"]
    counts = [s[2] for _, s in rows]
    spread = f"{min(counts)} per partition" if min(counts) == max(counts) else \
        f"{min(counts)} to {max(counts)} per partition"
    return [f"{head} in {len(rows)} partitions, {spread}" + (" (--verbose lists them)" if hint else "")]


def _print_summary(topic: str, stats: dict, verbose: bool) -> None:
    for line in summary_lines(topic, stats, verbose=verbose):
        print(line, file=sys.stderr)
