"""``plog produce TOPIC``: records from stdin or a file into a topic."""

from __future__ import annotations

import re
import sys
from enum import Enum
from typing import List, Optional

import typer

from .common import (data_dir_option, open_data_dir, parse_properties, pick_topic, property_option, quiet_option,
                     topic_option, unescape)
from .errors import CliUsageError, PlogCliError
from .app import app
from .output import parse_key_values

#: kafka-console-producer's reader properties (engine.record_io.LINE_READER_PROPERTIES), named here
#: for --help without importing the engine.
READER_PROPERTIES = ("parse.key", "key.separator", "parse.headers", "headers.delimiter", "headers.separator",
                     "headers.key.separator", "null.marker", "ignore.error")
#: The summary names each partition's offsets up to this many partitions; beyond, it counts them
#: (--verbose lists them all, a line each).
SUMMARY_PARTITIONS = 4


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


class _ProduceCommand(typer.core.TyperCommand):
    """``plog produce``, reading kcat's ``-K<delim>`` before Click does (Click reads ``-K:``
    as the flag -K followed by an unknown option ``-:``)."""

    def parse_args(self, ctx, args: list[str]) -> list[str]:
        value_options = {opt for p in self.params if not getattr(p, "is_flag", True) and not p.count
                         for opt in p.opts}
        return super().parse_args(ctx, kcat_key_delimiter(args, value_options))


@app.command(
    "produce",
    cls=_ProduceCommand,
    epilog=(
        "Examples:\n\n"
        "  seq 1000 | plog produce numbers\n\n"
        "  plog produce orders --key-separator ':' --file orders.txt       (lines key:value)\n\n"
        "  plog produce orders --headers --parse-key < in.txt             (h1:v1,h2:v2<TAB>key<TAB>value)\n\n"
        "  plog consume orders -e --format jsonl | plog produce copy --input-format jsonl\n\n"
        "  plog produce -t orders -K:                                     (kcat's spelling: key:value)\n\n"
        "  plog produce orders --property parse.key=true --property key.separator=:   (console producer's)\n\n"
        "Lines follow kafka-console-producer (LineMessageReader): with --headers, everything before the "
        "first --headers-delimiter is the header list; with --parse-key/--key-separator, the key comes "
        "next, up to the first separator; the rest of the line is the value. --null-marker makes a "
        "key/value/header value equal to it null (a null value is a tombstone). Separators take \\t, \\n, "
        "\\0 and \\xHH escapes. kcat's -K<delim> is --key-separator <delim>; -K alone is --parse-key. "
        "--property takes kafka-console-producer's reader properties, with their meaning there "
        "(key.separator alone does not turn parse.key on).\n\n"
        "jsonl takes the objects plog consume --format jsonl and plog dump --format jsonl write, of this "
        "version and older ones: value (null: a tombstone), key, headers, timestamp, partition; binary-safe "
        '({"base64": ...} for bytes that are not UTF-8). headers is a list [{"key": "k", "value": "v"}, ...] '
        '(what plog writes; a key may repeat) or an object {"k": "v", ...} (each name once, a repeated name '
        'is an error; a value may be null or {"base64": ...}).\n\n'
        "Keyed records go where Kafka's Java client puts them (murmur2); keyless ones use Kafka's sticky "
        "partitioner. The topic is created (1 partition) if it does not exist, as a broker with "
        "auto.create.topics.enable does, and a missing data directory is created with one broker (plog init "
        "makes bigger ones); both are said on stderr, and --no-create refuses them instead.\n\n"
        "Records go out in rounds of up to 5 MiB (what a Kafka producer has in flight to a broker: 5 requests "
        "of max.request.size), when the input pauses, or after "
        "--linger-ms; each round is appended to the partition leader, fetched by the in-sync followers (--acks all "
        "waits for them, as Kafka) and fsynced before the next input is read, so "
        "a round is one group commit. A summary goes to stderr, also when interrupted (Ctrl-C, SIGTERM): "
        f"the offsets written per partition, counts beyond {SUMMARY_PARTITIONS} partitions (--verbose: a line "
        "per partition). "
        "A bad input line stops the run with its line number; records before it are produced, nothing "
        "after it is. A line longer than 4 x max.request.size (at least 64 MiB) is a bad line, refused once "
        "that much of it is read: input that never breaks a line (binary data, /dev/zero) cannot fill "
        "memory.\n\n"
        "Exit status: 0 success, 1 error (bad input line, unknown partition, I/O), 2 usage error, "
        "130 interrupted, 143 terminated."
    ),
)
def produce(
    topic: Optional[str] = typer.Argument(None, help="Topic to produce to (or -t/--topic).", show_default=False),
    name: Optional[str] = topic_option(),
    file: Optional[str] = typer.Option(None, "--file", "-F", help="Read this file instead of stdin."),
    input_format: InputFormat = typer.Option(InputFormat.lines, "--input-format", "-i", help="Input format."),
    parse_key: bool = typer.Option(False, "--parse-key", "-K",
                                   help="Lines carry a key before --key-separator (kcat's -K<delim> sets the "
                                        "separator too)."),
    key_separator: Optional[str] = typer.Option(None, "--key-separator",
                                                help="Key/value separator (implies --parse-key; default TAB)."),
    headers: bool = typer.Option(False, "--headers", help="Lines start with headers (k:v,k2:v2<TAB>)."),
    headers_delimiter: str = typer.Option("\\t", "--headers-delimiter", help="Ends the header list."),
    headers_separator: str = typer.Option(",", "--headers-separator", help="Separates header pairs."),
    headers_key_separator: str = typer.Option(":", "--headers-key-separator", help="Separates a header key and value."),
    null_marker: Optional[str] = typer.Option(None, "--null-marker", help="Text that means null (tombstone)."),
    header: Optional[List[str]] = typer.Option(None, "--header", "-H", help="Add header key=value to every record."),
    partition: Optional[int] = typer.Option(None, "--partition", "-p", min=0, help="Send every record here."),
    repartition: bool = typer.Option(False, "--repartition",
                                     help="jsonl: ignore the input's partition fields, use the partitioner."),
    compression: Compression = typer.Option(Compression.none, "--compression", "-z", help="Batch codec."),
    batch_size: int = typer.Option(16384, "--batch-size", min=1, help="batch.size in bytes."),
    linger_ms: int = typer.Option(1000, "--linger-ms", min=0,
                                  help="Longest a record waits while input keeps coming (input that pauses is "
                                       "sent at once)."),
    acks: str = typer.Option("all", "--acks", help="0, 1 or all (default all: acknowledged once every in-sync replica "
                                                   "has the records; min.insync.replicas applies)."),
    idempotence: bool = typer.Option(True, "--idempotence/--no-idempotence",
                                     help="Producer id and sequence numbers (Kafka's default)."),
    create: bool = typer.Option(True, "--create/--no-create",
                                help="Create a missing topic (1 partition) or data directory (said on stderr)."),
    properties: Optional[List[str]] = property_option("kafka-console-producer reader", READER_PROPERTIES),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="The summary lists every partition written."),
    quiet: bool = quiet_option("No summary and no notices on stderr."),
    data_dir: str = data_dir_option(),
) -> None:
    """Produce records from stdin or a file: lines (with keys and headers) or binary-safe jsonl."""
    from plog.engine.clients.producer import Producer
    from plog.engine.clients.producer_loop import ProduceLoop

    from .heap import keep_freed_heap

    keep_freed_heap()

    topic = pick_topic(topic, name)
    static_headers = [(k, v.encode("utf-8")) for k, v in parse_key_values(header, "--header").items()]
    if acks not in ("0", "1", "all", "-1"):
        raise typer.BadParameter("must be 0, 1, all or -1", param_hint="--acks")
    parser = _line_parser(input_format, properties, parse_key=parse_key or key_separator is not None,
                          key_separator=key_separator, parse_headers=headers, headers_delimiter=headers_delimiter,
                          headers_separator=headers_separator, headers_key_separator=headers_key_separator,
                          null_marker=null_marker)
    source = _open_input(file)
    dd = _open_or_create(data_dir, create, quiet)
    producer = Producer(dd, batch_size=batch_size, linger_ms=linger_ms, compression_type=compression.value,
                        enable_idempotence=idempotence, acks=acks, auto_create_topics=create, hold_lock=True)
    loop = ProduceLoop(producer, topic, parser=parser, partition=partition, repartition=repartition,
                       headers=static_headers)
    error = _produce(loop, source, quiet, verbose)
    if error is not None:
        # One line: what was produced before the failure goes into the error itself.
        from .app import one_line

        done = summary_lines(topic, producer.stats, hint=False)[0]
        raise PlogCliError(f"{one_line(error)} ({done} before it)" if producer.stats else one_line(error),
                           like=error) from None
    if not quiet:
        _print_summary(topic, producer.stats, verbose)


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
        raise typer.BadParameter(str(e), param_hint="--key-separator/--headers-*/--property") from None


def _produce(loop, source, quiet: bool, verbose: bool) -> BaseException | None:
    """Run ``loop`` over ``source``, then close the producer (sending what was accepted);
    returns the error that stopped it, if any. Ctrl-C (or SIGTERM) stops it cleanly, with the
    summary of what was written."""
    from plog.engine.clients.producer_loop import ensure_topic
    from plog.engine.errors import EngineError, InputRecordError, ProducerError

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
        error = PlogCliError(f"line {loop.line_number}: {e}", like=e) if loop.line_number else e
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (cli/signals.py): a clean stop that says what it wrote
        interrupted = True
        raise
    finally:
        try:
            # Records before a bad line (or the interrupt) were accepted: they are sent, then
            # the error reported.
            producer.close()
        except EngineError as e:
            error = e if error is None else \
                PlogCliError(f"{error}; sending the records before it also failed: {e}", like=error)
        finally:
            if source is not sys.stdin.buffer:
                source.close()
            if interrupted and not quiet:
                _print_summary(topic, producer.stats, verbose)
            if interrupted and error is not None and not isinstance(error, ProducerError):
                # The stop's own line and exit code follow; a failure to close the logs must
                # not be lost behind them. (A ProducerError here is the records the stop kept
                # from being sent: the summary accounts for them.)
                from .app import one_line

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
