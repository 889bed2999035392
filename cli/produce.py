"""``plog produce TOPIC``: records from stdin or a file into a topic.

The Typer command: its options, their help and Click's checks. What the command does is
``cli/produce_run.py`` (Typer-free: a plain run, ``cli/plain.py``, goes there directly).
"""

from __future__ import annotations

from typing import List, Optional

import typer

from .app import app
from .common import data_dir_option, property_option, quiet_option, topic_option
from .errors import ParamError
from .produce_run import (READER_PROPERTIES, SUMMARY_PARTITIONS, Compression, InputFormat, ProduceArgs, execute,
                          kcat_key_delimiter, prepare)


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
    args = ProduceArgs(topic=topic, name=name, file=file, input_format=input_format, parse_key=parse_key,
                       key_separator=key_separator, headers=headers, headers_delimiter=headers_delimiter,
                       headers_separator=headers_separator, headers_key_separator=headers_key_separator,
                       null_marker=null_marker, header=header, partition=partition, repartition=repartition,
                       compression=compression, batch_size=batch_size, linger_ms=linger_ms, acks=acks,
                       idempotence=idempotence, create=create, properties=properties, verbose=verbose,
                       quiet=quiet, data_dir=data_dir)
    try:
        prepared = prepare(args)
    except ParamError as e:
        raise e.bad_parameter() from None
    execute(args, prepared)
