"""Shared test fixtures: paths to the shared corpus, the vector module on sys.path."""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
sys.path.insert(0, str(TESTS))

#: Real Kafka log directories, by the project's contract at ../shared/corpus.
CORPUS = Path(os.environ.get("PLOG_CORPUS", ROOT.parent / "shared" / "corpus"))


def corpus_files(match) -> list[Path]:
    """Files of the real log directories in the corpus (not the vectors) whose name
    satisfies ``match``, sorted. Empty when the corpus is missing (the ``corpus``
    fixture turns that into a failure)."""
    if not CORPUS.is_dir():
        return []
    found = []
    for root, _dirs, files in os.walk(CORPUS):
        if "vectors" in Path(root).relative_to(CORPUS).parts:
            continue
        found.extend(Path(root, f) for f in files if match(f))
    return sorted(found)


def distinct_contents(paths: list[Path]) -> list[Path]:
    """``paths`` less every file whose dump would read the same bytes as an earlier one's.

    Some corpus sources hold byte-identical copies of a partition (the replicas of one
    topic on several brokers); dumping a copy again tests nothing new and costs CI about 6 s
    per 1 MB copy across the two dump suites. An index's dump also reads its segment's log and indexes, so those
    count towards what an index file's dump reads."""
    seen: set[tuple[str, ...]] = set()
    kept = []
    for path in paths:
        reads = [path]
        if path.suffix in (".index", ".timeindex", ".txnindex"):
            reads += [path.with_suffix(s) for s in (".log", ".index", ".timeindex") if s != path.suffix]
        key = (path.suffix, *(hashlib.sha1(p.read_bytes()).hexdigest() if p.exists() else "-" for p in reads))
        if key not in seen:
            seen.add(key)
            kept.append(path)
    return kept


def corpus_top_dirs() -> list[Path]:
    """The corpus's directories of real broker data (one per source repository), sorted."""
    if not CORPUS.is_dir():
        return []
    return sorted(p for p in CORPUS.iterdir() if p.is_dir() and p.name != "vectors")


def corpus_log_dirs() -> list[Path]:
    """Every Kafka log directory in the corpus (several per source with several brokers)."""
    from plog.engine.storage import discovery

    return [Path(ld.path) for top in corpus_top_dirs() for ld in discovery.log_dirs(str(top))]


#: Folders whose tests share session-wide set-up (Kafka's jars and brokers; Java for Spark)
#: and so run on one xdist worker together.
_ONE_WORKER = ("interop", "spark")


def pytest_collection_modifyitems(config, items):
    """The suite runs on every core (``-n auto --dist loadgroup`` in pyproject.toml): a test
    file goes to one worker whole, so its module fixtures are built once, and all of
    tests/interop, like all of tests/spark, to one worker: one fetch of Kafka's jars and one
    set of brokers per run, and never two Java-heavy suites racing each other."""
    for item in items:
        path = Path(str(item.path)).resolve()
        parts = path.relative_to(TESTS).parts if TESTS in path.parents else (str(path),)
        item.add_marker(pytest.mark.xdist_group(parts[0] if parts[0] in _ONE_WORKER else "/".join(parts)))


# The interop suite's header line and skip summary live here, not in tests/interop/conftest.py:
# under xdist the controller, which prints both, loads no conftest below this one.
INTEROP = TESTS / "interop"
_INTEROP_SKIPPED: dict[str, int] = {}  # reason -> interop tests skipped for it
_INTEROP_RAN = [0]


def pytest_report_header(config):
    if str(INTEROP) not in sys.path:
        sys.path.append(str(INTEROP))  # appended, as tests/interop/conftest.py does
    from kafka_fetch import is_complete
    from kafka_versions import VERSIONS

    kafka = ", ".join(f"{v} ({'cached' if is_complete(v) else 'not fetched'})" for v in VERSIONS)
    require = "1" if os.environ.get("PLOG_REQUIRE_KAFKA", "") not in ("", "0") else "unset"
    return [f"plog corpus: {CORPUS} ({'present' if CORPUS.is_dir() else 'MISSING'})",
            f"plog interop: Kafka {kafka}; PLOG_REQUIRE_KAFKA={require}"]


def pytest_runtest_logreport(report):
    if not report.nodeid.startswith("tests/interop/"):
        return
    if report.when == "call" or (report.when == "setup" and not report.passed):
        if report.skipped and not hasattr(report, "wasxfail"):
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            reason = reason.removeprefix("Skipped: ")
            _INTEROP_SKIPPED[reason] = _INTEROP_SKIPPED.get(reason, 0) + 1
        else:
            _INTEROP_RAN[0] += 1


def pytest_terminal_summary(terminalreporter):
    """One line when the interop suite (or part of it) was skipped: why."""
    if _INTEROP_SKIPPED:
        what = "skipped" if not _INTEROP_RAN[0] else f"partly skipped ({sum(_INTEROP_SKIPPED.values())} tests)"
        terminalreporter.write_line(f"plog interop suite {what}: {'; '.join(_INTEROP_SKIPPED)}")


@pytest.fixture(scope="session")
def corpus() -> Path:
    if not CORPUS.is_dir():
        pytest.fail(f"the shared corpus is missing at {CORPUS} (set PLOG_CORPUS)")
    return CORPUS
