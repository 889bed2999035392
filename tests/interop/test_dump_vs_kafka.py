"""``plog dump`` prints exactly what Apache Kafka's own DumpLogSegments prints.

Kafka's tool runs from the released jars of each version (:data:`VERSIONS`: 4.3.1 and 3.9.2)
and plog runs with ``--kafka-version <major>``, on the same path strings with the same
options, for every file of three sources:

* ``written``: the log directory of a real broker of that version, cleanly stopped
  (``kafka_written_logdir``: KRaft metadata log and snapshots, ``__consumer_offsets``,
  ``__transaction_state``, every codec, many small segments, transaction indexes, a
  compacted topic, producer snapshots);
* ``crashed``: a SIGKILLed broker's directory, damaged (``kafka_crashed(v).killed``:
  preallocated 10 MiB active indexes, a torn tail, a deleted offset index and time index,
  a truncated producer snapshot);
* ``corpus``: the shared corpus of real brokers' directories (``../shared/corpus`` without
  its ``vectors/``), under both versions.

Each test is one option combination of kafka-format.md §19.1 (``kafka_dump_jobs.combos_for``)
on one source for one version: every ``.log``, KRaft ``.checkpoint``, ``.index``,
``.timeindex``, ``.snapshot`` and ``.txnindex`` file without options; the logs with
``--deep-iteration``, ``--print-data-log``, ``--skip-record-metadata``, ``--max-bytes``,
Kafka's own decoder classes; the internal topics with their decoders; the indexes with
``--verify-index-only``, ``--index-sanity-check``, ``--max-message-size``; and the files both
tools ignore. The corpus is large (62 MB of logs, ~240 MB of text per record-level run):
there only ``--print-data-log`` reads every log whole, the other record-level combinations
add ``--max-bytes 65536`` (every log still, its first 64 KiB), and ``--verify-index-only``
leaves out the time indexes of segments over 1 MiB (Kafka 4.x's check is quadratic in the
segment size; the plain dump checks those the same way).

Kafka runs all files of a test in one JVM (``--files a,b,c``), split only to bound memory
(chunks of at most 12 MiB of logs read) and, where its tool dies on a file, to go on with
the next one (the comparison then also checks that plog stops at the same place). Kafka's
runs of the next tests of the same source are started in the background while plog runs.

stdout must be byte for byte the same; stderr too when Kafka exits 0 (log4j noise aside);
plog exits 0 where Kafka does (3 with ``--verify-index-only`` when Kafka reports mismatches,
with status 0) and fails (status 1, not 0 or 3) where Kafka's tool dies. A failure lists every
differing run with the version, the options, the file and the first differing line of each
side.

Beyond Kafka, ``plog dump`` prints the text checkpoint files (``leader-epoch-checkpoint``,
``partition.metadata``...) that Kafka's tool ignores; those are documented as an extension
and left out here (``kafka_dump_jobs.collect``).
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

import kafka_dump_jobs as jobs
from kafka_broker import copy_log_dir
from kafka_versions import VERSIONS

SOURCES = ("written", "crashed", "corpus")

#: How many of the next Kafka runs of the same source are started while plog runs: the
#: machine this has to fit has two cores, and each run's output is held until compared.
PREFETCH = 2

CASES = [
    pytest.param(version, source, combo, id=f"kafka-{version}-{source}-{combo.name}")
    for version in VERSIONS
    for source in SOURCES
    for combo in jobs.combos_for(source)
]


@pytest.fixture(scope="module")
def dump_sources(request, kafka_written_logdir, kafka_crashed, tmp_path_factory):
    """``(version, source) -> SourceFiles``; the broker directories are private copies
    (Kafka's tool can create files in them, see ``kafka_dump_jobs.dump_leaving_no_trace``)."""
    cache: dict[tuple[str, str], jobs.SourceFiles] = {}

    def files(version: str, source: str) -> jobs.SourceFiles:
        if (version, source) not in cache:
            if source == "corpus":
                root = Path(request.getfixturevalue("corpus"))  # fails when it is missing
            else:
                original = kafka_written_logdir(version) if source == "written" else kafka_crashed(version).killed
                root = copy_log_dir(original, tmp_path_factory.mktemp(f"dump-{version}-{source}") / "logs")
            cache[(version, source)] = jobs.collect(root, skip_top=("vectors",))
        return cache[(version, source)]

    return files


class _KafkaRuns:
    """Kafka's runs of the jobs, one per chunk of files (``kafka_dump_jobs.chunks``), those
    of the next jobs of the same source started in the background while plog runs.

    A job whose files include a time index without its offset index runs only in the
    foreground: Kafka's tool creates the missing index (and fails), and no other run must
    see it (plog runs in the foreground too).
    """

    def __init__(self, dump, selected: set[tuple[str, str, str]]):
        self.dump = dump
        self.selected = selected  # (version, source, combo name) of the tests that will run
        self.pool = ThreadPoolExecutor(max_workers=PREFETCH, thread_name_prefix="kafka-dump")
        self.futures: dict[tuple, list[tuple[list[str], Future]]] = {}
        self.lock = threading.Lock()

    def _submit(self, version: str, combo: jobs.Combo, files: list[str]) -> list[tuple[list[str], Future]]:
        options = combo.options(version)
        return [(chunk, self.pool.submit(jobs.run_kafka_chunk, self.dump, version, chunk, options))
                for chunk in jobs.chunks(files, options)]

    def prefetch(self, version: str, source: str, combos: list[jobs.Combo], sources) -> None:
        for combo in combos[:PREFETCH]:
            key = (version, source, combo.name)
            files = combo.select(sources)
            if not files or _exclusive(files):
                continue
            with self.lock:
                if key not in self.futures:
                    self.futures[key] = self._submit(version, combo, files)

    def get(self, version: str, source: str, combo: jobs.Combo, files: list[str]) -> list[jobs.Part]:
        options = combo.options(version)
        if _exclusive(files):
            return jobs.run_kafka_parts(self.dump, version, files, options)
        with self.lock:
            runs = self.futures.pop((version, source, combo.name), None)
            if runs is None:
                runs = self._submit(version, combo, files)
        parts: list[jobs.Part] = []
        for chunk, future in runs:
            if future.cancel():  # not started yet: run it here rather than wait
                parts += jobs.run_kafka_chunk(self.dump, version, chunk, options)
            else:
                parts += future.result()
        return parts

    def close(self) -> None:
        with self.lock:
            for runs in self.futures.values():
                for _, future in runs:
                    future.cancel()
            self.futures.clear()
        self.pool.shutdown(wait=True)


def _exclusive(files: list[str]) -> bool:
    return any(f.endswith(".timeindex") and not os.path.exists(f[: -len(".timeindex")] + ".index") for f in files)


@pytest.fixture(scope="module")
def kafka_runs(dump_log_segments, request):
    selected = set()
    for item in request.session.items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if item.module is request.module and "combo" in params:
            selected.add((params["version"], params["source"], params["combo"].name))
    runs = _KafkaRuns(dump_log_segments, selected)
    yield runs
    runs.close()


@pytest.mark.parametrize(("version", "source", "combo"), CASES)
def test_plog_dump_equals_kafka_dump_log_segments(version, source, combo, kafka_jars, dump_sources, kafka_runs):
    kafka_jars(version)  # Java and the jars (or skip / fail with the suite's one-line reason)
    sources = dump_sources(version, source)
    files = combo.select(sources)
    assert files, f"the {source} directory has no files for {combo.name}: the comparison would be empty"

    combos = jobs.combos_for(source)
    following = [c for c in combos[[c.name for c in combos].index(combo.name) + 1:]
                 if (version, source, c.name) in kafka_runs.selected]
    kafka_runs.prefetch(version, source, following, sources)  # the next selected ones
    parts = kafka_runs.get(version, source, combo, files)

    options = combo.options(version)
    problems = []
    for part in parts:
        problems += jobs.compare_part(version, options, part, jobs.run_plog(version, part.files, options))
    if problems:
        pytest.fail(f"plog dump differs from Kafka {version}'s DumpLogSegments ({source}, {combo.name}; "
                    f"{len(files)} files in {len(parts)} Kafka run(s)) in {len(problems)} run(s):\n\n"
                    + "\n\n".join(problems), pytrace=False)
