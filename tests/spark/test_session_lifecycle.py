"""The Spark session of one command (``spark_tasks/session.py`` ``spark_session``): stopped
when the work ends, its log kept when the work failed, and a failed Spark job turned into
one line naming the log. No JVM needed: ``start`` is replaced by a recording stand-in."""

from __future__ import annotations

import os

import pytest

from plog.spark_tasks import session
from plog.spark_tasks.errors import SparkJobError, SparkQueryError


class _Handle:
    spark = object()
    owned = True
    notes: list = []

    def __init__(self, log_path):
        self.log_path = log_path
        self.stops = []

    def stop(self, keep_log=False):
        self.stops.append(keep_log)


@pytest.fixture
def handle(monkeypatch, tmp_path):
    h = _Handle(str(tmp_path / "spark.log"))
    monkeypatch.setattr(session, "start", lambda master=None, conf=None: h)
    return h


def test_the_session_is_stopped_and_its_log_removed(handle):
    with session.spark_session("local[1]", {}) as h:
        assert h is handle
    assert handle.stops == [False]


def test_a_failed_job_is_one_line_naming_the_log(handle):
    java_error = type("Py4JJavaError", (Exception,), {"__module__": "py4j.protocol"})
    with pytest.raises(SparkJobError) as e:
        with session.spark_session():
            raise java_error("An error occurred while calling o42.collectToPython.\n"
                             "\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages")
    assert str(e.value) == (f"Spark job failed: An error occurred while calling o42.collectToPython. "
                            f"(Spark's log: {handle.log_path})")
    assert handle.stops == [True]  # the log the message names is kept


@pytest.mark.parametrize("error", [KeyboardInterrupt(), SparkQueryError("SQL: bad"), OSError(28, "No space")])
def test_other_errors_pass_through_with_the_log_kept(handle, error):
    with pytest.raises(type(error)):
        with session.spark_session():
            raise error
    assert handle.stops == [True]


@pytest.mark.parametrize("master,tasks", [("local[3]", 3), ("local[12]", 12)])
def test_parallelism_of_a_local_master(master, tasks):
    assert session.default_parallelism(master) == tasks
    assert session.default_parallelism(None) >= 1 and session.default_parallelism("yarn") >= 1


def test_prepare_worker_imports_the_scan_and_freezes_once():
    """What a plog task runs first in a Python worker: the scan imported, then everything
    alive frozen out of the collector's passes (pyspark collects after every task), once.
    In a child interpreter, so this process's collector is left alone."""
    import subprocess
    import sys

    code = ("import gc, sys\n"
            "from plog.spark_tasks.session import prepare_worker\n"
            "assert gc.get_freeze_count() == 0\n"
            "prepare_worker()\n"
            "frozen = gc.get_freeze_count()\n"
            "assert frozen > 1000 and 'plog.engine.inspect.scan' in sys.modules, frozen\n"
            "junk = [[] for _ in range(100)]\n"
            "prepare_worker()\n"
            "assert gc.get_freeze_count() == frozen\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_local_sessions_get_the_per_job_settings_and_a_user_conf_wins():
    """A local master gets the settings that cut Spark's cost per job (C1 JIT, Unix domain
    sockets to the Python workers); a cluster does not; a --conf of the same key replaces
    plog's."""
    local = session.session_settings(True)
    assert local["spark.driver.defaultJavaOptions"] == "-XX:TieredStopAtLevel=1"
    assert local.get("spark.python.unix.domain.socket.enabled") == ("true" if os.name == "posix" else None)
    assert local["spark.ui.enabled"] == "false"
    assert "spark.driver.defaultJavaOptions" not in session.session_settings(False)
    mine = session.session_settings(True, {"spark.driver.defaultJavaOptions": "", "spark.ui.enabled": "true"})
    assert mine["spark.driver.defaultJavaOptions"] == "" and mine["spark.ui.enabled"] == "true"
