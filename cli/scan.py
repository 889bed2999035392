"""``plog scan``: whole log directories in parallel, in local processes or on Apache Spark."""

from __future__ import annotations

import contextlib
import enum
import json
import os
import sys
import time
from typing import List, Optional

import typer

from .common import DEFAULT_DATA_DIR, quiet_option, schemas_option

from .errors import PlogCliError
from .exit_codes import Outcome
from .app import app
from .output import ListFormat, emit


class ScanMode(str, enum.Enum):
    stats = "stats"
    search = "search"
    verify = "verify"
    sql = "sql"


class SearchOutput(str, enum.Enum):
    jsonl = "jsonl"
    parquet = "parquet"


EPILOG = (
    "Examples:\n\n"
    "  plog scan /var/lib/kafka/data                        stats of every partition, all local cores\n\n"
    "  plog scan --spark /var/lib/kafka/data                the same on Spark (local[*])\n\n"
    "  plog scan --spark --master spark://host:7077 /mnt/shared/kafka --format json\n\n"
    "  plog scan DIR --key order-42 --time-range @2026-11-01:@2026-11-02     search (jsonl on stdout)\n\n"
    "  plog scan DIR --spark --value-contains ERROR --output /tmp/errors.parquet\n\n"
    "  plog scan DIR --where \"value.customer.id = 42 and value.status != 'PAID'\"   decoded Avro/Protobuf/JSON\n\n"
    "  plog scan DIR --mode verify --spark                  plog verify's checks, one task per partition\n\n"
    "  plog scan DIR --spark --sql \"SELECT topic, count(*) FROM records GROUP BY topic\"\n\n"
    "Modes: stats (default): per partition replica, records, batches, bytes, offset and time ranges, "
    "codecs, a distinct-key estimate (HyperLogLog, ~1.6% error), record sizes (p50/p99 are histogram "
    "bucket bounds), producers, damage found. search (implied by --key, --value-contains, --header): "
    "matching records as plog consume's JSON lines plus segment and position. verify: the checks of plog "
    "verify. sql (implied by --sql, needs --spark): views `records` and `batches` with the plog data "
    "source's columns. --offset-range and --time-range apply to stats and search and are pushed down to "
    "segment selection through file names and the indexes.\n\n"
    "--where (search): conditions on Confluent-framed keys and values decoded with the _schemas topic found "
    "under PATH (and --schemas PATH): PATH OP LITERAL joined by 'and'; PATH is key or value then .field "
    "names (a \"quoted\" name for other characters) into the JSON plog consume --value-format auto prints "
    "(an Avro union branch {\"string\": \"x\"} compares as its value); OP is = != < <= > >=; LITERAL a "
    "number, 'text' or \"text\", null, true or false. < <= > >= compare numbers with numbers and text with "
    "text. A condition on a missing field, or on a key or value that does not decode, is false.\n\n"
    "Without PATH, the data directory ($PLOG_DATA_DIR or ./plog-data) is scanned. On a terminal the stats "
    "table fits its width ($COLUMNS, or the terminal's), leaving out the least needed columns first "
    "(RECORD_SIZE, PRODUCERS, CODECS, ...; stderr names them); --wide shows every column, and a pipe, json, "
    "jsonl and csv always get every field. KEYS: the distinct keys (an estimate) and the records with a null "
    "key.\n\n"
    "Spark: --master defaults to local[*] (under spark-submit, its master); executors use this Python "
    "unless PYSPARK_PYTHON is set. On a cluster plog ships itself to the executors (pyarrow must be "
    "installed there) and PATH must be visible at the same path on every worker. Spark's own log goes to "
    "a temporary file named in errors. Needs pip install 'plog[spark]' and Java 17+.\n\n"
    "Exit status: 0 done, nothing wrong found; 1 error (bad path, Spark cannot start); 2 usage error; "
    "3 the scan ran and found damage (corrupt batches, torn tails; verify errors)."
)


def _split_topics(values: Optional[List[str]]):
    if not values:
        return None
    return frozenset(t.strip() for v in values for t in v.split(",") if t.strip())


def _offset_bounds(text: Optional[str]) -> tuple[int | None, int | None]:
    if text is None:
        return None, None
    raw = text.strip()
    lo, sep, hi = raw.partition(":")
    try:
        lo_v = int(lo) if lo.strip() else None
        hi_v = int(hi) if hi.strip() else None
    except ValueError:
        raise typer.BadParameter(f"expected absolute offsets A:B (B exclusive, either side may be empty), "
                                 f"got {text!r}", param_hint="--offset-range") from None
    if not sep:
        hi_v = None if lo_v is None else lo_v + 1
    if lo_v is not None and hi_v is not None and hi_v < lo_v:
        raise typer.BadParameter(f"the end comes before the start: {text!r}", param_hint="--offset-range")
    if (lo_v is not None and lo_v < 0) or (hi_v is not None and hi_v < 0):
        raise typer.BadParameter(f"offsets must not be negative: {text!r}", param_hint="--offset-range")
    return lo_v, hi_v


def _time_bounds(text: Optional[str], now_ms: int) -> tuple[int | None, int | None]:
    if text is None:
        return None, None
    from plog.engine.errors import InvalidOffsetSpecError
    from plog.engine.offset_spec import OffsetSpec, parse_offset_range

    try:
        rng = parse_offset_range(text, now_ms, default_start=OffsetSpec("timestamp", -1))
    except InvalidOffsetSpecError as e:
        raise typer.BadParameter(str(e), param_hint="--time-range") from None
    if rng.end is None and ":" not in text:
        raise typer.BadParameter(f"expected a time range T1:T2 (either side may be empty), got {text!r}",
                                 param_hint="--time-range")
    for spec in (rng.start, rng.end):
        if spec is not None and spec.kind != "timestamp":
            raise typer.BadParameter(f"both ends must be times (@<ms>, @<ISO-8601>, @-<duration>), got {text!r}",
                                     param_hint="--time-range")
    lo = rng.start.value if rng.start.value >= 0 else None
    return lo, (rng.end.value if rng.end is not None else None)


def _binary(text: Optional[str], hex_text: Optional[str], name: str) -> bytes | None:
    if text is not None and hex_text is not None:
        raise typer.BadParameter(f"give {name} or {name}-hex, not both", param_hint=name)
    if hex_text is not None:
        try:
            return bytes.fromhex(hex_text)
        except ValueError:
            raise typer.BadParameter(f"not hexadecimal: {hex_text!r}", param_hint=f"{name}-hex") from None
    return None if text is None else text.encode("utf-8", "surrogateescape")


def _headers(items: Optional[List[str]]):
    out = []
    for item in items or []:
        if "=" not in item:
            raise typer.BadParameter(f"expected key=value, got {item!r}", param_hint="--header")
        k, v = item.split("=", 1)
        out.append((k, v.encode("utf-8", "surrogateescape")))
    return tuple(out)


# Options whose help is long, declared apart so that scan's signature stays readable.
_OUTPUT_OPTION = typer.Option(None, "--output", "-o", metavar="PATH",
                              help="search: write results here instead of stdout (a Parquet directory, or JSON lines "
                                   "with --output-format jsonl). Parquet output skips damaged batches without naming "
                                   "them: --mode verify does.")
_WIDE_OPTION = typer.Option(False, "--wide", "-w",
                            help="stats table: every column, however wide (by default the least needed columns are "
                                 "left out to fit the terminal).")


@app.command(epilog=EPILOG)
def scan(
    paths: Optional[List[str]] = typer.Argument(None, metavar="PATH...",
                                                help="Data directories, log directories or partition folders "
                                                     "(default: the data directory)."),
    data_dir: Optional[str] = typer.Option(None, "--data-dir", "-d", envvar="PLOG_DATA_DIR", show_default=False,
                                           help=f"The data directory to scan when no PATH is given "
                                                f"(default ./{DEFAULT_DATA_DIR})."),
    mode: Optional[ScanMode] = typer.Option(None, "--mode", "-m", case_sensitive=False,
                                            help="stats (default), search, verify or sql."),
    spark: bool = typer.Option(False, "--spark", help="Run on Apache Spark (default master local[*])."),
    master: Optional[str] = typer.Option(None, "--master", metavar="URL",
                                         help="Spark master: local[N], spark://host:7077, yarn, k8s://... "
                                              "(implies --spark)."),
    conf: Optional[List[str]] = typer.Option(None, "--conf", metavar="KEY=VALUE",
                                             help="A Spark setting, repeatable (implies --spark)."),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", min=1,
                                       help="Without --spark: processes to use (default: the number of cores)."),
    unit_size: Optional[str] = typer.Option(None, "--unit-size", metavar="SIZE",
                                            help="Bytes per work unit (128MiB, ...; default: about two units per "
                                                 "core, at most 128MiB)."),
    topics: Optional[List[str]] = typer.Option(None, "--topic", "-t", help="Only these topics (repeatable, or "
                                                                           "comma-separated)."),
    offset_range: Optional[str] = typer.Option(None, "--offset-range", metavar="A:B",
                                               help="Offsets A up to B (exclusive); N alone is one offset."),
    time_range: Optional[str] = typer.Option(None, "--time-range", metavar="T1:T2",
                                             help="Record timestamps from T1 up to T2 (exclusive): @<ms>, "
                                                  "@<ISO-8601>, @-<duration>."),
    key: Optional[str] = typer.Option(None, "--key", help="search: records with exactly this key (UTF-8)."),
    key_hex: Optional[str] = typer.Option(None, "--key-hex", help="search: the key as hexadecimal bytes."),
    value_contains: Optional[str] = typer.Option(None, "--value-contains",
                                                 help="search: records whose value contains this text."),
    value_contains_hex: Optional[str] = typer.Option(None, "--value-contains-hex",
                                                     help="search: ... these bytes (hexadecimal)."),
    header: Optional[List[str]] = typer.Option(None, "--header", metavar="KEY=VALUE",
                                               help="search: records with this header (repeatable: all must be "
                                                    "present)."),
    where: Optional[str] = typer.Option(None, "--where", metavar="EXPR",
                                        help="search: conditions on decoded keys and values (see below)."),
    schemas: Optional[List[str]] = schemas_option("search --where: another log directory holding _schemas "
                                                  "(repeatable)."),
    sql_query: Optional[str] = typer.Option(None, "--sql", metavar="QUERY",
                                            help="sql: a Spark SQL query over the views `records` and `batches`."),
    output: Optional[str] = _OUTPUT_OPTION,
    output_format: Optional[SearchOutput] = typer.Option(None, "--output-format", case_sensitive=False,
                                                         help="search with --output: parquet (default, needs "
                                                              "--spark) or jsonl."),
    overwrite: bool = typer.Option(False, "--overwrite", help="search: replace an existing --output."),
    fmt: ListFormat = typer.Option(ListFormat.table, "--format", "-f", case_sensitive=False,
                                   help="stats, sql, verify: table (verify: its text lines), json, jsonl or csv."),
    wide: bool = _WIDE_OPTION,
    max_findings: int = typer.Option(100, "--max-findings", min=0,
                                     help="verify: at most this many findings of one check per file (0: all)."),
    quiet: bool = quiet_option("No summary line and no progress bar."),
) -> Outcome:
    """Scan whole Kafka log directories: statistics, record search, verification or SQL,
    split into byte-range work units run in local processes or on Apache Spark."""
    from .maintain import parse_size, resolve_path
    from .output import parse_key_values

    # As recover and verify: no PATH is the data directory (--data-dir, $PLOG_DATA_DIR, ./plog-data).
    paths = list(paths) if paths else [data_dir or resolve_path(None)]
    search_given = any(v is not None for v in (key, key_hex, value_contains, value_contains_hex, where)) or bool(header)
    mode, use_spark, out_kind = _mode(mode, search_given, sql_query, output, output_format, spark, master, conf,
                                      jobs, offset_range or time_range or topics)
    spark_conf = parse_key_values(conf, "--conf")
    unit_bytes = parse_size(unit_size, "--unit-size") if unit_size is not None else None
    flt = _where(_filter(topics, offset_range, time_range, key, key_hex, value_contains, value_contains_hex, header),
                 where, paths, schemas)
    _check_paths(paths, output, overwrite)
    local_jobs = jobs or os.cpu_count() or 1
    started = time.monotonic()
    outcome = _run(mode, paths, flt, _SparkRun(master, spark_conf, quiet) if use_spark else None, local_jobs,
                   unit_bytes, fmt, quiet, wide=wide, max_findings=max_findings, output=output, out_kind=out_kind,
                   overwrite=overwrite, sql_query=sql_query)
    if not quiet:
        _say_done(mode, f"Spark ({master or 'local[*]'})" if use_spark else f"{local_jobs} process{'es' * (local_jobs != 1)}",
                  started)
    return outcome


def _say_done(mode: ScanMode, where: str, started: float) -> None:
    sys.stderr.write(f"plog scan: {mode.value} done in {time.monotonic() - started:.1f}s on {where}\n")


def _check_paths(paths: list[str], output: str | None, overwrite: bool) -> None:
    if output is not None and os.path.exists(output) and not overwrite:
        raise PlogCliError(f"{output} exists (use --overwrite to replace it)")
    for p in paths:
        if not os.path.exists(p):
            raise PlogCliError(f"{p}: no such file or directory")


def _run(mode: ScanMode, paths, flt, spark_run, jobs: int, unit_bytes, fmt: ListFormat, quiet: bool, *,
         wide: bool, max_findings: int, output, out_kind, overwrite: bool, sql_query) -> Outcome:
    """Plan the work units (verify plans its own) and run ``mode`` over them."""
    from plog.engine.inspect.scan import plan_scan

    # A path that is not Kafka's or a scan that cannot be planned (ScanError) is an engine
    # error: cli/app.py prints its one line and exits 1.
    if mode is ScanMode.verify:
        return _verify(paths, spark_run, jobs, fmt, max_findings, quiet)
    plan = plan_scan(paths, flt, unit_bytes=unit_bytes,
                     parallelism=spark_run.parallelism if spark_run is not None else jobs)
    if mode is ScanMode.stats:
        return _stats(plan, flt, spark_run, jobs, fmt, quiet, wide)
    if mode is ScanMode.search:
        return _search(paths, plan, flt, spark_run, jobs, output, out_kind, overwrite, unit_bytes, quiet)
    return _sql(paths, flt, sql_query, spark_run, unit_bytes, fmt)


def _mode(mode, search_given: bool, sql_query, output, output_format, spark: bool, master, conf, jobs,
          ranges) -> tuple[ScanMode, bool, SearchOutput | None]:
    """The mode (implied by --sql or a search option when not given), whether Spark runs it,
    and the search's --output kind; options that do not go with them are usage errors."""
    if mode is None:
        mode = ScanMode.sql if sql_query is not None else ScanMode.search if search_given else ScanMode.stats
    if sql_query is not None and mode is not ScanMode.sql:
        raise typer.BadParameter("--sql goes with --mode sql", param_hint="--sql")
    if mode is ScanMode.sql and sql_query is None:
        raise typer.BadParameter("--mode sql needs a query: --sql \"SELECT ...\"", param_hint="--sql")
    if search_given and mode is not ScanMode.search:
        raise typer.BadParameter(f"--key/--value-contains/--header/--where filter records: use them with --mode "
                                 f"search, "
                                 f"not {mode.value}", param_hint="--mode")
    if (output is not None or output_format is not None) and mode is not ScanMode.search:
        raise typer.BadParameter("--output and --output-format are for --mode search", param_hint="--output")
    use_spark = spark or master is not None or bool(conf)
    if mode is ScanMode.sql and not use_spark:
        raise typer.BadParameter("--sql runs on Spark: add --spark", param_hint="--sql")
    if output_format is not None and output is None:
        raise typer.BadParameter("--output-format needs --output", param_hint="--output-format")
    out_kind = (output_format or SearchOutput.parquet) if output is not None else None
    if out_kind is SearchOutput.parquet and not use_spark:
        raise typer.BadParameter("Parquet output is written by Spark: add --spark, or use --output-format jsonl",
                                 param_hint="--output")
    if jobs is not None and use_spark:
        raise typer.BadParameter("--jobs is for local processes; Spark's parallelism comes from --master "
                                 "(local[N])", param_hint="--jobs")
    if mode is ScanMode.verify and ranges:
        raise typer.BadParameter("verify checks whole partitions: --topic, --offset-range and --time-range "
                                 "do not apply", param_hint="--mode")
    return mode, use_spark, out_kind


def _filter(topics, offset_range, time_range, key, key_hex, value_contains, value_contains_hex, header):
    """The records the scan keeps (ranges, and for search the key, value and headers)."""
    from plog.engine.inspect.scan import ScanFilter

    offset_lo, offset_hi = _offset_bounds(offset_range)
    time_lo, time_hi = _time_bounds(time_range, int(time.time() * 1000))
    return ScanFilter(topics=_split_topics(topics), offset_lo=offset_lo, offset_hi=offset_hi, time_lo=time_lo,
                      time_hi=time_hi, key=_binary(key, key_hex, "--key"),
                      value_contains=_binary(value_contains, value_contains_hex, "--value-contains"),
                      headers=_headers(header))


def _where(flt, where: str | None, paths: list[str], schemas: list[str] | None):
    """``flt`` with --where, its schemas from the scanned paths' and --schemas' _schemas topic
    (``flt`` itself without either)."""
    import dataclasses

    from plog.engine.errors import ScanError
    from plog.engine.inspect.scan_filter import parse_where

    if where is None and not schemas:
        return flt
    if where is None:
        raise typer.BadParameter("--schemas is for --where", param_hint="--schemas")
    try:
        parse_where(where)
    except ScanError as e:
        raise typer.BadParameter(str(e).removeprefix("--where "), param_hint="--where") from None
    if schemas:
        from plog.engine.schemas.resolver import open_resolver

        open_resolver(schemas_paths=schemas)  # each must hold _schemas: say so now, not in every worker
    return dataclasses.replace(flt, where=where, schema_paths=tuple(os.path.abspath(p) for p in
                                                                    list(paths) + list(schemas or ())))


class _SparkRun:
    """The Spark side of one scan: where it runs (``--master``, ``--conf``), how many tasks
    to plan for, and :meth:`session`, the session with what the user sees of it on stderr
    (a line while Spark starts, its notes, a bar of tasks done on a terminal)."""

    def __init__(self, master: str | None, conf: dict, quiet: bool):
        from plog.spark_tasks.session import default_parallelism

        self.master, self.conf, self.quiet = master, conf, quiet
        self.parallelism = default_parallelism(master)

    @contextlib.contextmanager
    def session(self, quiet: bool | None = None):
        from plog.spark_tasks.jobs import JobProgress
        from plog.spark_tasks.session import spark_session

        from .progress import progress

        quiet = self.quiet if quiet is None else quiet
        if not quiet and sys.stderr.isatty():
            sys.stderr.write("plog scan: starting Spark...\r")
            sys.stderr.flush()
        with spark_session(self.master, self.conf) as handle:
            if not quiet:
                for note in handle.notes:
                    sys.stderr.write(f"plog scan: {note}\n")
            # Spark's job progress (tasks done of tasks) as a bar, on a terminal only.
            with progress("spark tasks", quiet=quiet, unit="tasks", unknown_total=True) as bar:
                with JobProgress(handle.spark, bar.update) if bar else contextlib.nullcontext():
                    yield handle.spark


STATS_COLUMNS = ["topic", "partition", "log_dir", "records", "batches", "size", "offsets", "time_range", "codecs",
                 "keys", "record_size", "producers", "damage"]
#: The stats table's columns it may leave out to fit the terminal, the least needed first
#: (--wide keeps them all; json, jsonl and csv always have every field). Which partition,
#: how many records, which offsets and what is damaged always stay.
STATS_OPTIONAL = ["record_size", "producers", "codecs", "batches", "keys", "time_range", "size", "log_dir"]


def _stats_rows(stats: list) -> tuple[list[dict], list[str]]:
    from plog.engine.maintenance.retention import format_bytes, format_timestamp

    rows = []
    dirs = {s.log_dir for s in stats}
    for s in stats:
        d = s.to_dict()
        sizes = d["record_size"]
        rows.append({
            "topic": s.topic, "partition": s.partition, "log_dir": s.log_dir, "records": s.records,
            "batches": s.batches, "size": format_bytes(s.bytes),
            "offsets": f"{s.first_offset}..{s.last_offset}" if s.first_offset is not None else None,
            "time_range": (f"{format_timestamp(s.min_timestamp)}..{format_timestamp(s.max_timestamp)}"
                           if s.min_timestamp is not None else None),
            "codecs": ",".join(f"{k}:{v}" for k, v in d["codecs"].items()) or None,
            "keys": keys_text(d["distinct_keys_estimate"], s.null_keys, s.records),
            "record_size": (f"p50<={sizes['p50']} p99<={sizes['p99']} max={sizes['max']}"
                            if sizes["max"] is not None else None),
            "producers": d["producers"],
            "damage": (f"{s.corrupt_batches} corrupt batches, {len(s.problems)} problems"
                       if s.problems or s.corrupt_batches else None),
        })
    columns = [c for c in STATS_COLUMNS if c != "log_dir" or len(dirs) > 1]
    return rows, columns


def keys_text(distinct: int, null: int, records: int) -> str | None:
    """The KEYS cell: ``~40 distinct``, ``~2 distinct + 7312 null``, ``all null`` (7312
    records without a key), or nothing for a partition without records. The distinct count
    is an estimate (HyperLogLog, ~1.6% error) over the records with a key."""
    if not records:
        return None
    if not distinct and null:
        return "all null"
    return f"~{distinct} distinct" + (f" + {null} null" if null else "")


def _report_problems(stats: list, quiet: bool) -> Outcome:
    problems = [(s, p) for s in stats for p in s.problems]
    if not problems:
        return Outcome.OK
    if not quiet:
        for s, (segment, position, message) in problems[:50]:
            sys.stderr.write(f"plog scan: {segment}:{position}: {message}\n")
        if len(problems) > 50:
            sys.stderr.write(f"plog scan: ... and {len(problems) - 50} more problems (see --format json)\n")
    return Outcome.PROBLEMS_FOUND


def _stats(plan, flt, spark_run, jobs, fmt: ListFormat, quiet: bool, wide: bool = False) -> Outcome:
    from plog.engine.inspect.scan import scan_stats

    from .progress import progress

    if spark_run is not None:
        from plog.spark_tasks import jobs as spark_jobs

        with spark_run.session() as spark:
            stats = spark_jobs.stats(spark, plan, flt)
    else:
        with progress("scan", total=plan.total_bytes, quiet=quiet) as bar:
            stats = scan_stats([], flt, jobs=jobs, progress=bar.callback, plan=plan)
    if fmt in (ListFormat.json, ListFormat.jsonl):
        emit([s.to_dict() for s in stats], fmt, [])
    else:
        rows, columns = _stats_rows(stats)
        left_out = emit(rows, fmt, columns, right=("partition", "records", "batches", "size", "producers"),
                        optional=() if wide else STATS_OPTIONAL)
        if left_out and not quiet:
            sys.stderr.write(f"plog scan: {len(left_out)} column{'s' * (len(left_out) != 1)} left out to fit "
                             f"the terminal ({', '.join(c.upper() for c in left_out)}): --wide shows them\n")
    if not quiet:
        total = sum(s.records for s in stats)
        sys.stderr.write(f"plog scan: {len(stats)} partition replica{'s' * (len(stats) != 1)}, {total} records, "
                         f"{plan.total_bytes} bytes in {len(plan.units)} unit{'s' * (len(plan.units) != 1)}"
                         f"{f', {plan.pruned_segments} segments pruned by the ranges' if plan.pruned_segments else ''}"
                         f"{f', {len(plan.skipped_folders)} non-current folders skipped' if plan.skipped_folders else ''}"
                         "\n")
    return _report_problems(stats, quiet)


def _open_output(output: Optional[str]):
    """(stream, temporary path or None). A file is written as a hidden temporary beside it
    and renamed over it only when complete (``_write_chunks``), so an error or Ctrl-C never
    leaves a partial --output, and --overwrite keeps the old file until the new one is whole."""
    if output is None or output == "-":
        return getattr(sys.stdout, "buffer", None), None
    if os.path.isdir(output):
        raise PlogCliError(f"--output {output}: is a directory")
    head, name = os.path.split(output)
    tmp = os.path.join(head, f".{name}.tmp-{os.getpid()}")
    try:
        return open(tmp, "wb"), tmp
    except OSError as e:
        raise OSError(e.errno, e.strerror, output) from None  # the user's name, not the temporary's


def _search(paths, plan, flt, spark_run, jobs, output, out_kind, overwrite, unit_bytes, quiet: bool) -> Outcome:
    problems: list = []
    if spark_run is not None:
        from plog.spark_tasks import jobs as spark_jobs

        with spark_run.session() as spark:
            if out_kind is SearchOutput.parquet:
                count = spark_jobs.search_to_parquet(spark, paths, flt, output, unit_bytes=unit_bytes,
                                                     parallelism=spark_run.parallelism, overwrite=overwrite)
            else:
                count = _write_chunks(spark_jobs.search_jsonl(spark, plan, flt, problems), output)
    else:
        from plog.engine.inspect.scan import scan_jsonl

        from .progress import progress

        with progress("scan", total=plan.total_bytes, quiet=quiet) as bar:
            count = _write_chunks(scan_jsonl([], flt, jobs=jobs, progress=bar.callback, problems=problems,
                                             plan=plan), output)
    if not quiet:
        where = f" to {output}" if output else ""
        sys.stderr.write(f"plog scan: {count} matching records{where}\n")
        for p in problems[:50]:
            sys.stderr.write(f"plog scan: {p.segment}:{p.position}: {p.message}\n")
    return Outcome.PROBLEMS_FOUND if problems else Outcome.OK


def _write_chunks(chunks, output) -> int:
    out, tmp = _open_output(output)
    count = 0
    try:
        for chunk in chunks:
            count += chunk.count(b"\n")
            if out is None:
                sys.stdout.write(chunk.decode("utf-8"))
            else:
                out.write(chunk)
                if tmp is None:
                    out.flush()
        if tmp is not None:
            out.close()
            os.replace(tmp, output)
    except BaseException as e:
        if tmp is not None:
            try:
                out.close()
            except OSError:
                pass  # the error being reported (a full disk) may strike again here
            try:
                os.unlink(tmp)
            except OSError:
                pass
            if isinstance(e, OSError) and e.filename is None:
                raise OSError(e.errno, e.strerror, output) from None  # say which file: --output
        raise
    finally:
        if tmp is None and out is not None:
            out.flush()
    return count


def _sql_value(value):
    import datetime as dt

    from plog.formats.binary_json import encode_bytes

    if isinstance(value, (bytes, bytearray, memoryview)):
        return encode_bytes(bytes(value))
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.timezone.utc)
        return value.astimezone(dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if hasattr(value, "asDict"):
        return {k: _sql_value(v) for k, v in value.asDict().items()}
    if isinstance(value, dict):
        return {str(k): _sql_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_sql_value(v) for v in value]
    if hasattr(value, "is_finite") or type(value).__name__ == "Decimal":
        return str(value)
    return value


def _sql(paths, flt, query, spark_run, unit_bytes, fmt: ListFormat) -> Outcome:
    from plog.spark_tasks import jobs as spark_jobs

    with spark_run.session(quiet=False) as spark:
        columns, rows = spark_jobs.sql(spark, paths, query, flt, unit_bytes=unit_bytes,
                                       parallelism=spark_run.parallelism)
    unique = []
    for c in columns:
        name = c
        while name in unique:
            name += "_"
        unique.append(name)
    out = [dict(zip(unique, (_sql_value(v) for v in row))) for row in rows]
    if fmt is ListFormat.table:
        emit([{k: (json.dumps(v, ensure_ascii=False) if isinstance(v, (dict, list)) else v)
               for k, v in r.items()} for r in out], fmt, unique, titles={c: c for c in unique})
    else:
        emit(out, fmt, unique)
    return Outcome.OK


def _verify(paths, spark_run, jobs, fmt: ListFormat, max_findings: int, quiet: bool) -> Outcome:
    from plog.engine.inspect.verify import VerifyOptions, VerifyStats, plan, planned_bytes, verify_paths

    from .output import ReportFormat
    from .progress import progress
    from .verify import _writer

    if fmt in (ListFormat.csv, ListFormat.json):
        raise typer.BadParameter("verify prints findings as text lines (--format table or text) or jsonl",
                                 param_hint="--format")
    options = VerifyOptions(max_findings_per_check=max_findings)
    tasks = plan(paths, options)
    stats = VerifyStats()
    write = _writer(ReportFormat.jsonl if fmt is ListFormat.jsonl else ReportFormat.text)
    if spark_run is not None:
        from plog.spark_tasks import jobs as spark_jobs

        with spark_run.session() as spark:
            findings = spark_jobs.verify(spark, tasks, options, stats)
        for f in findings:
            write(f)
    else:
        with progress("verify", total=planned_bytes(tasks), quiet=quiet) as bar:
            for f in verify_paths(paths, options, jobs=jobs, stats=stats, progress=bar.callback, tasks=tasks):
                write(f)
    sys.stdout.flush()
    if not quiet:
        sys.stderr.write(
            f"plog scan: verified {stats.files} files ({stats.bytes} bytes, {stats.batches} batches) in "
            f"{stats.partitions} partition{'s' * (stats.partitions != 1)}: {stats.errors} "
            f"error{'s' * (stats.errors != 1)}, {stats.warnings} warning{'s' * (stats.warnings != 1)}\n")
    return Outcome.PROBLEMS_FOUND if stats.errors else Outcome.OK
