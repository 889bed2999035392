"""``plog scan --spark`` jobs: the same engine functions as the local scan, run on executors.

* stats: the plan's units are dealt into Spark partitions of about a GiB each, at least one
  per core and at most one per unit (:func:`stats_slices`), balanced by bytes
  (:func:`stats_groups`); every task merges its units' mergeable
  :class:`plog.engine.inspect.scan.PartitionStats` and returns them, and the driver merges
  the tasks'. Summaries never turn into per-record rows, so no record crosses into the JVM.
* search: the ``plog`` data source with the filter as options; rows come back to the
  driver in plan order (``toLocalIterator``: one partition at a time, bounded memory), or
  are written by Spark as a Parquet directory.
* verify: :func:`plog.engine.inspect.verify.plan` on the driver, each partition's checks in a task,
  findings returned in plan order: the same findings as ``plog verify``.
* sql: the data source registered as the views ``records`` and ``batches``.
"""

from __future__ import annotations

import threading
from typing import Callable, Iterator

from .errors import SparkQueryError


def _group_stats(flt):
    from plog.engine.inspect.scan import merge_stats, unit_stats

    from .session import prepare_worker

    def run(groups):
        prepare_worker()
        for units in groups:
            # Merged here, on the executor: one summary per partition the task touched goes
            # back to the driver (a few KiB each: two 4 KiB HyperLogLog sketches), not one
            # per unit. The merge is commutative and associative, so any grouping gives the
            # driver the same result.
            merged = merge_stats(unit_stats(unit, flt) for unit in units)
            yield {(st.topic, st.partition, st.log_dir): st for st in merged}
    return run


#: Bytes of log one stats task covers at least (a few of the plan's units each when it has
#: many): the native stats pass reads a 128 MiB unit in about 35 ms of CPU, less than what Spark
#: pays per task (scheduling, the Python worker's round trip), so a task per unit would
#: spend more time in Spark than in the scan.
STATS_TASK_BYTES = 1 << 30


def stats_slices(plan, default_parallelism: int) -> int:
    """How many Spark partitions the stats job cuts ``plan``'s units into: one per
    :data:`STATS_TASK_BYTES`, never fewer than the cluster's cores (all of them busy), never
    more than the units."""
    wanted = max(default_parallelism, -(-plan.total_bytes // STATS_TASK_BYTES))
    return max(1, min(len(plan.units), wanted))


def stats_groups(plan, slices: int) -> list[list]:
    """``plan``'s units dealt into ``slices`` groups (one Spark task each) of about equal
    bytes: largest unit first, each to the group with the fewest bytes so far (ties: the
    lowest group); each group then in plan order, the groups by their first unit.

    Spark's own ``parallelize`` cuts a list by count, which for units of unequal sizes (a
    short last segment, a small partition) leaves one task with most of the bytes while the
    other cores wait; the local processes avoid that by handing out units one at a time.
    Deterministic; never more groups than units, so never an empty one."""
    import heapq

    slices = max(1, min(slices, len(plan.units)))
    groups: list[list] = [[] for _ in range(slices)]
    lightest = [(0, k) for k in range(slices)]  # (bytes so far, group): a heap
    for unit in sorted(plan.units, key=lambda u: (-u.size, u.index)):
        load, k = heapq.heappop(lightest)
        groups[k].append(unit)
        heapq.heappush(lightest, (load + unit.size, k))
    return sorted((sorted(g, key=lambda u: u.index) for g in groups), key=lambda g: g[0].index)


def stats(spark, plan, flt) -> list:
    """The stats of every partition of ``plan`` (as :func:`plog.engine.inspect.scan.scan_stats`
    gives them): its units in :func:`stats_groups`, one Spark task per group, each returning
    its group's merged summaries; the driver merges the tasks'."""
    from plog.engine.inspect.scan import merge_stats

    if not plan.units:
        return merge_stats([], plan.partitions)
    sc = spark.sparkContext
    sc.setJobDescription("plog scan: stats")
    groups = stats_groups(plan, stats_slices(plan, sc.defaultParallelism))
    # One element (a group) per Spark partition: parallelize then keeps each group whole.
    rdd = sc.parallelize(groups, len(groups))
    return merge_stats(rdd.mapPartitions(_group_stats(flt)).collect(), plan.partitions)


def records_frame(spark, paths: list[str], flt=None, *, level: str = "record", unit_bytes: int | None = None,
                  parallelism: int | None = None):
    """A DataFrame over ``paths`` through the ``plog`` data source."""
    import json

    reader = spark.read.format("plog").option("paths", json.dumps(list(paths))).option("level", level)
    if flt is not None:
        for k, v in flt.to_options().items():
            reader = reader.option(k, v)
    if unit_bytes:
        reader = reader.option("unit_bytes", str(unit_bytes))
    if parallelism:
        reader = reader.option("parallelism", str(parallelism))
    return reader.load()


def _row_record(row):
    from plog.engine.inspect.scan import ScanRecord

    ts = row["timestamp"]
    return ScanRecord(
        row["topic"], row["partition"], row["offset"], -1 if ts is None else _epoch_ms(ts), row["timestamp_type"],
        None if row["key"] is None else bytes(row["key"]), None if row["value"] is None else bytes(row["value"]),
        tuple((h["key"], None if h["value"] is None else bytes(h["value"])) for h in (row["headers"] or ())),
        row["base_offset"], row["producer_id"], row["producer_epoch"], row["base_sequence"], row["codec"],
        row["is_transactional"], row["is_control"], row["segment"], row["position"])


def _epoch_ms(ts) -> int:
    import datetime as dt

    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=dt.timezone.utc)
    delta = ts - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
    return (delta.days * 86_400_000) + delta.seconds * 1000 + delta.microseconds // 1000


def search(spark, paths: list[str], flt, *, unit_bytes: int | None = None, parallelism: int | None = None
           ) -> Iterator:
    """Matching records as :class:`plog.engine.inspect.scan.ScanRecord`, in plan order, through
    the data source (rows converted back on the driver: for programs and tests; the CLI
    uses :func:`search_jsonl`)."""
    spark.sparkContext.setJobDescription("plog scan: search")
    df = records_frame(spark, paths, flt, unit_bytes=unit_bytes, parallelism=parallelism)
    for row in df.toLocalIterator():
        yield _row_record(row)


def _unit_jsonl(flt):
    from plog.engine.inspect.scan import unit_jsonl

    def run(units):
        for unit in units:
            problems: list = []
            yield from unit_jsonl(unit, flt, problems=problems)
            if problems:
                yield problems  # a list, after the unit's chunks: the damage the unit met
    return run


def search_jsonl(spark, plan, flt, problems: list | None = None) -> Iterator[bytes]:
    """Matching records as chunks of JSON lines (:func:`plog.engine.inspect.scan.format_record_jsonl`),
    formatted on the executors and fetched one unit at a time, in plan order: no record
    becomes a Spark row, and the driver holds one unit's matches at most. Damage met on
    the way is appended to ``problems`` (:class:`plog.engine.inspect.scan.SliceProblem`)."""
    if not plan.units:
        return
    sc = spark.sparkContext
    sc.setJobDescription("plog scan: search")
    rdd = sc.parallelize(plan.units, len(plan.units)).mapPartitions(_unit_jsonl(flt))
    for item in rdd.toLocalIterator():
        if isinstance(item, list):
            if problems is not None:
                problems.extend(item)
        else:
            yield item


def search_to_parquet(spark, paths: list[str], flt, output: str, *, unit_bytes: int | None = None,
                      parallelism: int | None = None, overwrite: bool = False) -> int:
    """Write the matching records as a Parquet directory; returns how many."""
    spark.sparkContext.setJobDescription("plog scan: search to parquet")
    df = records_frame(spark, paths, flt, unit_bytes=unit_bytes, parallelism=parallelism)
    df.write.mode("overwrite" if overwrite else "errorifexists").parquet(output)
    return spark.read.parquet(output).count()


def _verify_task(options):
    def run(tasks):
        from plog.engine.inspect.verify import run_task_collected

        for task in tasks:
            yield run_task_collected(task, options)
    return run


def verify(spark, tasks: list, options, stats) -> list:
    """Findings of ``tasks`` (from :func:`plog.engine.inspect.verify.plan`) in plan order; the
    partition checks run on executors, the cheap log-dir level ones here."""
    from plog.engine.inspect.verify import run_task_collected

    heavy = [i for i, t in enumerate(tasks) if t.kind == "partition"]
    results: dict[int, tuple] = {}
    if heavy:
        sc = spark.sparkContext
        sc.setJobDescription("plog scan: verify")
        heavy_tasks = [tasks[i] for i in heavy]
        out = sc.parallelize(heavy_tasks, len(heavy_tasks)).mapPartitions(_verify_task(options)).collect()
        results.update(zip(heavy, out))
    findings = []
    for i, task in enumerate(tasks):
        found, own = results[i] if i in results else run_task_collected(task, options)
        stats.add(own)
        findings.extend(found)
    return findings


def sql(spark, paths: list[str], query: str, flt=None, *, unit_bytes: int | None = None,
        parallelism: int | None = None):
    """Run ``query`` with the views ``records`` and ``batches`` over ``paths``; returns
    ``(column names, rows as tuples)``. A query Spark cannot parse or analyse is a
    :class:`SparkQueryError` (the user's query; its first line)."""
    try:
        records_frame(spark, paths, flt, unit_bytes=unit_bytes, parallelism=parallelism) \
            .createOrReplaceTempView("records")
        records_frame(spark, paths, flt, level="batch", unit_bytes=unit_bytes, parallelism=parallelism) \
            .createOrReplaceTempView("batches")
        spark.sparkContext.setJobDescription("plog scan: sql")
        df = spark.sql(query)
        columns = df.columns
        return columns, [tuple(row) for row in df.collect()]
    except Exception as e:  # Spark's AnalysisException / ParseException: the user's query
        name = type(e).__name__
        if type(e).__module__.startswith("pyspark") and "AnalysisException" in name or "ParseException" in name:
            from .session import error_line

            raise SparkQueryError(f"SQL: {error_line(e)}") from e
        raise


class JobProgress:
    """Polls Spark's status tracker and reports ``(tasks done, tasks total)`` of the
    running stages to ``callback`` until stopped."""

    def __init__(self, spark, callback: Callable[[int, int], None], interval: float = 0.2):
        self.tracker = spark.sparkContext.statusTracker()
        self.callback = callback
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="plog-spark-progress", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                done = total = 0
                for stage_id in self.tracker.getActiveStageIds():
                    info = self.tracker.getStageInfo(stage_id)
                    if info is not None:
                        done += info.numCompletedTasks
                        total += info.numTasks
                if total:
                    self.callback(done, total)
            except Exception:  # the context is shutting down: progress is best effort
                return

    def __enter__(self) -> "JobProgress":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
