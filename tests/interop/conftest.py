"""The interop suite: real Apache Kafka (released jars from Maven Central) judges plog.

Availability
------------
The suite needs ``java`` (17+ for Kafka 4.x), kafka-python, and the Kafka jars, which
are fetched once with ``mvn`` into ``$PLOG_KAFKA_CACHE`` or ``<repo>/.kafka-cache``
(``kafka_fetch.py``; reused when complete, ``mvn`` is then not needed). When something is
missing the tests that need it are skipped with a one-line reason; with
``PLOG_REQUIRE_KAFKA=1`` (CI) they fail instead. Every test here carries the ``interop``
marker (``-m "not interop"`` leaves them out).

Fixture API (all session-scoped; ``version`` is a string of :data:`VERSIONS`)
--------------------------------------------------------------------------------
``kafka_version``
    Parametrized over :data:`kafka_versions.VERSIONS` (``"4.3.1"``, ``"3.9.2"``; test ids
    ``kafka-4.3.1``...). Or parametrize yourself and call the factories below.
``kafka_jars(version) -> Path``
    The folder of the version's jars (fetched on first use).
``run_kafka_tool(version, main_class, args, timeout=300) -> subprocess.CompletedProcess``
    ``java -cp '<jars>/*' main_class *args`` with text output; log4j/log4j2 configured to
    print WARN+ to stderr only, so stdout is exactly the tool's output.
``dump_log_segments(version, files, *options, timeout=300) -> (stdout, stderr, returncode)``
    Kafka's DumpLogSegments (4.x ``org.apache.kafka.tools.DumpLogSegments``, 3.9
    ``kafka.tools.DumpLogSegments``) on ``files`` (paths; passed as one ``--files a,b,...``)
    with ``options`` such as ``"--deep-iteration"``, ``"--print-data-log"``.
``kafka_broker(version, *, log_dir=None, settings=None) -> KafkaBroker``
    A started single-node KRaft broker (combined broker+controller, 127.0.0.1, free ports,
    storage formatted with Kafka's StorageTool unless ``log_dir`` is an existing formatted
    directory). ``.bootstrap``, ``.log_dir``, ``.stop()`` (SIGTERM, clean shutdown checked),
    ``.kill()`` (SIGKILL), ``.log_tail()``. Any broker still running at the end of the
    session is stopped (killed if that fails).
``kafka_written(version) -> WrittenRun``
    The "Kafka writes" scenario, run once per version (``kafka_scenarios.run_written_scenario``)
    against a fresh broker that is then stopped cleanly. ``.result`` (the manifest of
    acknowledged records and the kafka-python read-back), ``.log_dir`` (a copy of the
    stopped broker's log directory), ``.broker_log`` (its server.log).
``kafka_written_logdir(version) -> Path``
    ``kafka_written(version).log_dir``: a real, cleanly stopped Kafka log directory with
    ``__cluster_metadata-0``, ``__consumer_offsets-*``, ``__transaction_state-*``, codec
    topics, many small segments, ``.txnindex`` files, a cleaned compacted topic, producer
    snapshots and the log dir checkpoints. Shared by every test of the session: treat it as
    read-only (copy it before opening it writable).
``kafka_crashed(version) -> CrashRun``
    The SIGKILL scenario, run once per version: produce (``run_crash_scenario``), SIGKILL,
    damage a few partitions (``damage_killed_dir``: torn tail, missing indexes, unreadable
    producer snapshot; ``.damage`` says what), copy the directory three times:
    ``.killed`` (untouched), ``.plog_dir`` (loaded writable by plog's ``LogManager`` -
    recovery from the recovery points - and closed; ``.plog_report`` is its start-up
    report) and ``.kafka_dir`` (a real broker started on it, waited for until every
    partition answers ListOffsets - ``.kafka_end_offsets`` - and stopped cleanly).
"""

from __future__ import annotations

import atexit
import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
# Appended, not prepended: tests/ (put first by tests/conftest.py) must keep winning for
# `from conftest import ...`; the helper modules here all have unique kafka_* names.
if str(HERE) not in sys.path:
    sys.path.append(str(HERE))

from kafka_broker import (  # noqa: E402
    KafkaBroker,
    KafkaUnavailable,
    check_java_for,
    copy_log_dir,
    java_major,
    run_java,
    write_log_configs,
)
from kafka_fetch import FetchError, fetch  # noqa: E402
from kafka_versions import VERSIONS, dump_log_segments_class  # noqa: E402

REQUIRE = os.environ.get("PLOG_REQUIRE_KAFKA", "") not in ("", "0")


def _unavailable(reason: str):
    """Skip (or, under PLOG_REQUIRE_KAFKA=1, fail) with a one-line reason."""
    reason = " ".join(str(reason).split())
    if REQUIRE:
        pytest.fail(f"PLOG_REQUIRE_KAFKA=1: {reason}", pytrace=False)
    pytest.skip(reason)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.interop)


# -- availability -------------------------------------------------------------------------


class _Kafka:
    """Session state: what is available, logging configs, brokers to clean up."""

    def __init__(self, tmp_factory):
        self.tmp_factory = tmp_factory
        self._java: int | str | None = None
        self._jars: dict[str, Path | str] = {}
        self._log_configs = None
        self.brokers: list[KafkaBroker] = []

    def java(self) -> int:
        if self._java is None:
            try:
                self._java = java_major()
            except KafkaUnavailable as e:
                self._java = str(e)
        if isinstance(self._java, str):
            _unavailable(self._java)
        return self._java

    def jars(self, version: str) -> Path:
        if version not in self._jars:
            try:
                import kafka  # noqa: F401  (kafka-python, the test extra)
            except ImportError:
                self._jars[version] = "kafka-python is not installed (pip install -e '.[test]')"
            else:
                try:
                    check_java_for(version, self.java())
                    self._jars[version] = fetch(version)
                except (KafkaUnavailable, FetchError) as e:
                    self._jars[version] = str(e)
        got = self._jars[version]
        if isinstance(got, str):
            _unavailable(got)
        return got

    @property
    def log_configs(self) -> dict[str, Path]:
        if self._log_configs is None:
            self._log_configs = write_log_configs(self.tmp_factory.mktemp("kafka-logging"))
        return self._log_configs

    def broker(self, version: str, *, log_dir: Path | None = None, settings: dict | None = None,
               start: bool = True) -> KafkaBroker:
        jars = self.jars(version)
        workdir = self.tmp_factory.mktemp(f"kafka-{version}-broker")
        broker = KafkaBroker(version, jars, workdir, self.log_configs, log_dir=log_dir, settings=settings)
        self.brokers.append(broker)
        if start:
            try:
                broker.start()
            except BaseException:
                broker.kill()
                raise
        return broker

    def close(self) -> None:
        for broker in self.brokers:
            broker.close()


_SESSIONS: list[_Kafka] = []


@atexit.register
def _kill_leftover_brokers() -> None:  # e.g. after a KeyboardInterrupt skipped the finalizers
    for state in _SESSIONS:
        for broker in state.brokers:
            broker.kill()


@pytest.fixture(scope="session")
def _kafka(tmp_path_factory):
    state = _Kafka(tmp_path_factory)
    _SESSIONS.append(state)
    yield state
    state.close()


# -- the public fixtures ----------------------------------------------------------------------


@pytest.fixture(scope="session", params=VERSIONS, ids=[f"kafka-{v}" for v in VERSIONS])
def kafka_version(request) -> str:
    return request.param


@pytest.fixture(scope="session")
def kafka_jars(_kafka):
    return _kafka.jars


@pytest.fixture(scope="session")
def run_kafka_tool(_kafka):
    def run(version: str, main_class: str, args=(), timeout: float = 300):
        return run_java(_kafka.jars(version), main_class, list(args), log_configs=_kafka.log_configs,
                        timeout=timeout)

    return run


@pytest.fixture(scope="session")
def dump_log_segments(run_kafka_tool):
    def dump(version: str, files, *options, timeout: float = 300) -> tuple[str, str, int]:
        if isinstance(files, (str, os.PathLike)):
            files = [files]
        args = ["--files", ",".join(str(f) for f in files), *options]
        proc = run_kafka_tool(version, dump_log_segments_class(version), args, timeout=timeout)
        return proc.stdout, proc.stderr, proc.returncode

    return dump


@pytest.fixture(scope="session")
def kafka_broker(_kafka):
    def make(version: str, *, log_dir: Path | None = None, settings: dict | None = None) -> KafkaBroker:
        return _kafka.broker(version, log_dir=log_dir, settings=settings)

    return make


# -- the scenario runs (once per version and session) ------------------------------------------


@dataclass
class WrittenRun:
    version: str
    result: object  # kafka_scenarios.ScenarioResult
    log_dir: Path
    broker_log: Path


@dataclass
class CrashRun:
    version: str
    result: object  # kafka_scenarios.ScenarioResult
    killed: Path
    plog_dir: Path
    kafka_dir: Path
    plog_report: object  # plog.engine.storage.log_manager.StartupReport
    kafka_end_offsets: dict
    damage: list  # what kafka_scenarios.damage_killed_dir did to the killed directory
    broker_logs: dict = field(default_factory=dict)


class _Once:
    """A per-version cache of an expensive run; a failure is remembered, not retried."""

    def __init__(self, build):
        self.build = build
        self.done: dict[str, object] = {}

    def __call__(self, version: str):
        if version not in self.done:
            try:
                self.done[version] = self.build(version)
            except (pytest.skip.Exception, pytest.fail.Exception):
                raise  # availability: every caller re-evaluates (cheaply) and says the same
            except Exception as e:  # noqa: BLE001
                self.done[version] = e
                raise
        got = self.done[version]
        if isinstance(got, Exception):
            pytest.fail(f"the Kafka {version} scenario failed earlier in this session: "
                        f"{type(got).__name__}: {str(got).splitlines()[0] if str(got) else ''}", pytrace=False)
        return got


@pytest.fixture(scope="session")
def kafka_written(_kafka, tmp_path_factory):
    from kafka_scenarios import run_written_scenario

    def build(version: str) -> WrittenRun:
        with _stage(f"Kafka {version}, written scenario: starting the broker"):
            broker = _kafka.broker(version)
        try:
            with _stage(f"Kafka {version}, written scenario: producing (kafka_scenarios.run_written_scenario)"):
                result = run_written_scenario(broker.bootstrap, broker.log_dir, version)
            with _stage(f"Kafka {version}, written scenario: stopping the broker cleanly"):
                broker.stop()
        except BaseException:
            broker.kill()
            raise
        dest = tmp_path_factory.mktemp(f"kafka-{version}-written") / "logs"
        copy_log_dir(broker.log_dir, dest)
        return WrittenRun(version, result, dest, broker.server_log)

    return _Once(build)


@pytest.fixture(scope="session")
def kafka_written_logdir(kafka_written):
    def logdir(version: str) -> Path:
        return kafka_written(version).log_dir

    return logdir


@pytest.fixture(scope="session")
def kafka_crashed(_kafka, tmp_path_factory):
    from kafka_scenarios import crash_topics, damage_killed_dir, run_crash_scenario

    from plog.engine.storage.log_manager import LogManager

    def build(version: str) -> CrashRun:
        with _stage(f"Kafka {version}, crash scenario: starting the broker"):
            broker = _kafka.broker(version)
        try:
            with _stage(f"Kafka {version}, crash scenario: producing (kafka_scenarios.run_crash_scenario)"):
                result = run_crash_scenario(broker.bootstrap, broker.log_dir, version)
        finally:
            broker.kill()
        with _stage(f"Kafka {version}, crash scenario: damaging the killed directory"):
            damage = damage_killed_dir(broker.log_dir)
        base = tmp_path_factory.mktemp(f"kafka-{version}-crashed")
        killed = copy_log_dir(broker.log_dir, base / "killed")
        plog_dir = copy_log_dir(killed, base / "plog")
        kafka_dir = copy_log_dir(killed, base / "kafka")
        # Copy A: plog's engine loads it as a broker would after a crash, then closes.
        with _stage(f"Kafka {version}, crash scenario: plog's LogManager recovering {plog_dir}"):
            manager = LogManager([plog_dir])
            report = manager.report
            manager.close()
        # Copy B: the real broker recovers it, serves every partition, stops cleanly.
        with _stage(f"Kafka {version}, crash scenario: restarting the broker on {kafka_dir}"):
            restarted = _kafka.broker(version, log_dir=kafka_dir)
        try:
            partitions = sorted(
                {(t, p) for t, d in crash_topics(version).items() for p in range(d["partitions"])}
                | _internal_partitions(kafka_dir))
            with _stage(f"Kafka {version}, crash scenario: the restarted broker serving every partition"):
                ends = restarted.wait_partitions_ready(partitions)
            with _stage(f"Kafka {version}, crash scenario: stopping the restarted broker cleanly"):
                restarted.stop()
        except BaseException:
            restarted.kill()
            raise
        return CrashRun(version, result, killed, plog_dir, kafka_dir, report, ends, damage,
                        {"crashed": broker.server_log, "restarted": restarted.server_log})

    return _Once(build)


@contextmanager
def _stage(what: str):
    """Name the step of a scenario run in its failure (the cause stays chained)."""
    try:
        yield
    except (pytest.skip.Exception, pytest.fail.Exception, KeyboardInterrupt):
        raise
    except Exception as e:  # noqa: BLE001
        raise ScenarioError(f"{what}: {type(e).__name__}: {e}") from e


class ScenarioError(RuntimeError):
    pass


def _internal_partitions(log_dir: Path) -> set[tuple[str, int]]:
    out = set()
    for entry in os.listdir(log_dir):
        if entry.startswith(("__consumer_offsets-", "__transaction_state-")):
            topic, _, part = entry.rpartition("-")
            out.add((topic, int(part)))
    return out
