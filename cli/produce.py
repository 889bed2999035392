"""``plog produce TOPIC``: records from stdin or a file into a topic."""

from __future__ import annotations

import os
import select
import sys
from enum import Enum
from typing import List, Optional

import typer

from .common import data_dir_option, open_data_dir, quiet_option
from .errors import PlogCliError
from .app import app
from .output import parse_key_values


class InputFormat(str, Enum):
    lines = "lines"
    jsonl = "jsonl"


class Compression(str, Enum):
    none = "none"
    gzip = "gzip"
    snappy = "snappy"
    lz4 = "lz4"
    zstd = "zstd"


def _escape(text: str | None) -> bytes | None:
    """A separator given on the command line: ``\\t``, ``\\n``, ``\\0`` and ``\\\\`` unescaped."""
    if text is None:
        return None
    return text.encode("utf-8").decode("unicode_escape").encode("latin-1", "surrogateescape") \
        if "\\" in text else text.encode("utf-8")


@app.command(
    "produce",
    epilog=(
        "Examples:\n\n"
        "  seq 1000 | plog produce numbers\n\n"
        "  plog produce orders --key-separator ':' --file orders.txt       (lines key:value)\n\n"
        "  plog produce orders --headers --parse-key < in.txt             (h1:v1,h2:v2<TAB>key<TAB>value)\n\n"
        "  plog consume orders -e --format jsonl | plog produce copy --input-format jsonl\n\n"
        "Lines follow kafka-console-producer (LineMessageReader): with --headers, everything before the "
        "first --headers-delimiter is the header list; with --parse-key/--key-separator, the key comes "
        "next, up to the first separator; the rest of the line is the value. --null-marker makes a "
        "key/value/header value equal to it null (a null value is a tombstone). jsonl takes the objects "
        "plog consume --format jsonl and plog dump --format jsonl write (binary-safe: "
        '{"base64": ...} for bytes that are not UTF-8).\n\n'
        "Keyed records go where Kafka's Java client puts them (murmur2); keyless ones use Kafka's sticky "
        "partitioner. The topic is created (1 partition) if it does not exist, as a broker with "
        "auto.create.topics.enable does, and a missing data directory is created with one broker (plog init "
        "makes bigger ones); --no-create refuses both instead.\n\n"
        "Records go out in rounds of up to 1 MiB (max.request.size), when the input pauses, or after "
        "--linger-ms; each round is appended to the partition leader, fetched by the in-sync followers (--acks all "
        "waits for them, as Kafka) and fsynced before the next input is read, so "
        "a round is one group commit. A summary goes to stderr. "
        "A bad input line stops the run with its line number; records before it are produced, nothing "
        "after it is.\n\n"
        "Exit status: 0 success, 1 error (bad input line, unknown partition, I/O), 2 usage error."
    ),
)
def produce(
    topic: str = typer.Argument(..., help="Topic to produce to."),
    file: Optional[str] = typer.Option(None, "--file", "-F", help="Read this file instead of stdin."),
    input_format: InputFormat = typer.Option(InputFormat.lines, "--input-format", "-i", help="Input format."),
    parse_key: bool = typer.Option(False, "--parse-key", "-K", help="Lines carry a key before --key-separator."),
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
    create: bool = typer.Option(True, "--create/--no-create", help="Create a missing topic (1 partition) or data directory."),
    quiet: bool = quiet_option("No summary on stderr."),
    data_dir: str = data_dir_option(),
) -> None:
    """Produce records from stdin or a file: lines (with keys and headers) or binary-safe jsonl."""
    from plog.engine.errors import EngineError, InputRecordError
    from plog.engine.producer import Producer
    from plog.engine.record_io import LineParser, parse_jsonl

    static_headers = [(k, v.encode("utf-8")) for k, v in parse_key_values(header, "--header").items()]
    if acks not in ("0", "1", "all", "-1"):
        raise typer.BadParameter("must be 0, 1, all or -1", param_hint="--acks")
    parser = None
    if input_format is InputFormat.lines:
        try:
            parser = LineParser(parse_key=parse_key or key_separator is not None,
                                key_separator=_escape(key_separator) if key_separator is not None else b"\t",
                                parse_headers=headers, headers_delimiter=_escape(headers_delimiter),
                                headers_separator=_escape(headers_separator),
                                headers_key_separator=_escape(headers_key_separator),
                                null_marker=_escape(null_marker))
        except ValueError as e:
            raise typer.BadParameter(str(e), param_hint="--key-separator/--headers-*") from None
    source = _open_input(file)
    dd = open_data_dir(data_dir, create=create)
    producer = Producer(dd, batch_size=batch_size, linger_ms=linger_ms, compression_type=compression.value,
                        enable_idempotence=idempotence, acks=acks, auto_create_topics=create, hold_lock=True)
    interactive = _may_block(source)
    line_number = 0
    error: BaseException | None = None
    try:
        producer.partitions_for(topic)
        send = producer.send
        plain = parser is not None and not parse_key and key_separator is None and not headers \
            and null_marker is None and not static_headers
        lines = _lines(source, producer if interactive else None)
        if plain:
            # The bulk path: chunks of values, no per-record parse or future.
            import itertools

            while True:
                chunk = [line[:-2] if line[-2:] == b"\r\n" else line[:-1] if line[-1:] in (b"\n", b"\r")
                         else line for line in itertools.islice(lines, 4096 if not interactive else 1)]
                if not chunk:
                    break
                producer.send_values(topic, chunk, partition)
                line_number += len(chunk)
            lines = ()
        for line_number, line in enumerate(lines, 1):
            rec = parser.parse(line, line_number) if parser is not None else parse_jsonl(line, line_number)
            if rec is None:
                continue
            p = partition if partition is not None else (None if repartition else rec.partition)
            hdrs = rec.headers + static_headers if static_headers else rec.headers
            send(topic, rec.value, rec.key, hdrs or None, p, rec.timestamp)
    except InputRecordError as e:
        error = e
    except EngineError as e:
        error = PlogCliError(f"line {line_number}: {e}") if line_number else e
    finally:
        try:
            # Records before a bad line were accepted: they are sent, then the error reported.
            producer.close()
        except EngineError as e:
            error = e if error is None else PlogCliError(f"{error}; sending the records before it also failed: {e}")
        finally:
            if source is not sys.stdin.buffer:
                source.close()
    if error is not None:
        # One line: what was produced before the failure goes into the error itself.
        from .app import one_line

        done = _summary_text(topic, producer)
        raise PlogCliError(f"{one_line(error)} ({done} before it)" if done else one_line(error),
                           getattr(error, "exit_code", None)) from None
    if not quiet:
        print(_summary_text(topic, producer) or f"produced 0 record(s) to {topic}", file=sys.stderr)


def _open_input(file: str | None):
    if file is None or file == "-":
        return sys.stdin.buffer
    try:
        return open(file, "rb")
    except OSError as e:
        raise PlogCliError(f"cannot read {file}: {e.strerror}") from None


def _may_block(source) -> bool:
    """True for a pipe or terminal: input can pause, so lingering records must go out then."""
    try:
        import stat

        mode = os.fstat(source.fileno()).st_mode
        return not stat.S_ISREG(mode)
    except (OSError, ValueError, AttributeError):
        return False


def _lines(source, producer):
    """Lines of ``source`` (newlines kept). For a pipe or terminal (``producer`` given), before
    blocking on input, send what lingers and release the data directory so other writers
    (a consumer's commits, another producer) can go on while this one waits."""
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
        chunk = os.read(fd, 1 << 16)
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


def _summary_text(topic: str, producer) -> str:
    """``produced N record(s) to T: partition P: offsets A..B (n); ...``, or "" for none."""
    stats = sorted(producer.stats.items(), key=lambda kv: kv[0].partition)
    total = sum(s[2] for _, s in stats)
    if not total:
        return ""
    parts = "; ".join(f"partition {tp.partition}: offsets {s[0]}..{s[1]} ({s[2]})" for tp, s in stats)
    return f"produced {total} record(s) to {topic}: {parts}"
