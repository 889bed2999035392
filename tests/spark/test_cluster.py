"""Spark outside the suite's session: a real standalone master and worker on 127.0.0.1
(started from the pyspark install), a plain PySpark program on local[1], and an executor
Python of another minor version. Each is a separate process with its own JVM."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import CORPUS
from plog.engine.inspect import scan as S

pytestmark = pytest.mark.spark

PLOG = [sys.executable, "-m", "plog.cli"]
CORPUS_DIRS = ["William0423__kafka", "rjmfernandes__flink-on-prem", "suryavansh__food-ordering-service"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(log: Path, text: str, proc: subprocess.Popen, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists() and text in log.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            break
        time.sleep(0.3)
    pytest.fail(f"standalone Spark did not log {text!r} (see {log}):\n{log.read_text(errors='replace')[-3000:]}")


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    from spark_logs import build

    return build(tmp_path_factory.mktemp("spark-cluster") / "logs")


@pytest.fixture(scope="module")
def standalone(tmp_path_factory):
    """``spark://127.0.0.1:PORT``: a master and one 2-core worker, stopped afterwards."""
    from spark_env import require_spark

    require_spark()
    import pyspark

    home = os.path.dirname(pyspark.__file__)
    tmp = tmp_path_factory.mktemp("standalone")
    env = dict(os.environ, SPARK_HOME=home, SPARK_LOCAL_IP="127.0.0.1", SPARK_NO_DAEMONIZE="1",
               SPARK_DAEMON_JAVA_OPTS="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
               SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false", SPARK_LOG_DIR=str(tmp),
               SPARK_WORKER_DIR=str(tmp / "work"))
    port = _free_port()
    spark_class = os.path.join(home, "bin", "spark-class")
    procs = []
    try:
        master_log = tmp / "master.log"
        master = subprocess.Popen([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                   "--port", str(port), "--webui-port", str(_free_port())],
                                  env=env, stdout=master_log.open("wb"), stderr=subprocess.STDOUT,
                                  start_new_session=True)
        procs.append(master)
        _wait_for(master_log, "I have been elected leader", master)
        url = f"spark://127.0.0.1:{port}"
        worker_log = tmp / "worker.log"
        worker = subprocess.Popen([spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
                                   "--cores", "2", "--memory", "2g", "--webui-port", str(_free_port()),
                                   "--work-dir", str(tmp / "work")],
                                  env=env, stdout=worker_log.open("wb"), stderr=subprocess.STDOUT,
                                  start_new_session=True)
        procs.append(worker)
        _wait_for(worker_log, "Successfully registered with master", worker)
        yield url
    finally:
        for p in reversed(procs):
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)


def _local(*args) -> subprocess.CompletedProcess:
    return subprocess.run([*PLOG, "scan", *args, "--jobs", "1", "--unit-size", "1GiB", "--quiet"],
                          capture_output=True, text=True, timeout=300)


def test_scans_on_a_standalone_cluster_equal_the_local_scan(standalone, generated):
    dirs = [str(CORPUS / d) for d in CORPUS_DIRS] + [str(generated)]
    fast_jvm = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
    # Two applications at once, one core each (the worker has two): their start-up overlaps.
    cluster = ["--master", standalone, "--unit-size", "256KiB", "--conf", f"spark.driver.extraJavaOptions={fast_jvm}",
               "--conf", f"spark.executor.extraJavaOptions={fast_jvm}", "--conf", "spark.cores.max=1"]
    stats = subprocess.Popen([*PLOG, "scan", *dirs, *cluster, "--format", "json"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    # search: every record of the generated directory, in order, as the local scan prints it
    search = subprocess.Popen([*PLOG, "scan", str(generated), *cluster, "--value-contains", "", "--quiet"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stats_out, stats_err = stats.communicate(timeout=600)
    search_out, search_err = search.communicate(timeout=600)
    assert stats.returncode == 0, stats_err
    want = _local(*dirs, "--format", "json")
    assert json.loads(stats_out) == json.loads(want.stdout)
    assert sum(p["records"] for p in json.loads(stats_out)) > 150_000
    # plog shipped itself: the executors imported it from the zip the driver added
    assert "plog.zip" in stats_err, stats_err
    assert "WARN" not in stats_err and "INFO" not in stats_err
    assert search.returncode == 0 and search_err == "", search_err
    want = _local(str(generated), "--value-contains", "")
    assert search_out == want.stdout and search_out.count("\n") > 1500


PROGRAM = textwrap.dedent("""
    import json, sys
    from pyspark.sql import SparkSession, functions as F
    import plog.spark_tasks

    spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "1").config("spark.sql.session.timeZone", "UTC")
             .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC").getOrCreate())
    plog.spark_tasks.register(spark)
    df = spark.read.format("plog").option("unit_bytes", "16384").load(sys.argv[1])
    rows = (df.groupBy("topic", "partition").agg(F.count("*").alias("n"), F.min("offset"), F.max("offset"),
            F.sum(F.crc32(F.coalesce("value", F.lit(b"")))), F.sum(F.crc32(F.coalesce("key", F.lit(b"")))))
            .orderBy("topic", "partition").collect())
    print(json.dumps([list(r) for r in rows]))
    spark.stop()
""")


def test_a_plain_pyspark_program_on_local_1_and_a_mismatched_executor_python(generated, tmp_path):
    """A program that imports only pyspark and plog's package; alongside it (the two JVMs
    start together), ``plog scan`` with an executor Python of another minor version."""
    from spark_env import require_spark

    require_spark()
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    program = subprocess.Popen([sys.executable, str(script), str(generated)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    other = _other_minor_python()
    mismatch = None
    if other is not None:
        mismatch = subprocess.Popen(
            [*PLOG, "scan", "--spark", "--master", "local[1]", str(generated), "--conf",
             "spark.driver.extraJavaOptions=-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ, PYSPARK_PYTHON=other))
    out, err = program.communicate(timeout=300)
    assert program.returncode == 0, err[-3000:]
    assert json.loads(out.strip().splitlines()[-1]) == _program_answer(generated)
    if mismatch is None:
        pytest.skip("no Python of another minor version on this machine (pyenv or /usr/bin/python3.N) for the "
                    "mismatch half; the message itself is checked in test_version_mismatch_message_from_sparks_"
                    "error_text")
    m_out, m_err = mismatch.communicate(timeout=300)
    assert mismatch.returncode == 1 and m_out == ""
    assert m_err.count("\n") == 1 and m_err.startswith("plog: error: the executors run Python 3.")
    assert "set PYSPARK_PYTHON" in m_err


def _program_answer(generated: Path) -> list:
    """What PROGRAM prints for ``generated``, from plog's own local scan."""
    import zlib

    want: dict = {}
    for rec in S.scan_records([str(generated)]):
        n, lo, hi, v, k = want.get((rec.topic, rec.partition), (0, None, None, 0, 0))
        want[(rec.topic, rec.partition)] = (n + 1, rec.offset if lo is None else min(lo, rec.offset),
                                            rec.offset if hi is None else max(hi, rec.offset),
                                            v + zlib.crc32(rec.value or b""), k + zlib.crc32(rec.key or b""))
    return [[t, p, *vals] for (t, p), vals in sorted(want.items())]


def _python_without_plog(env: dict) -> str | None:
    """An interpreter of this minor version that cannot import plog (the one this virtualenv
    was made from, or the system's), or None."""
    candidates = [getattr(sys, "_base_executable", ""), os.path.join(sys.base_prefix, "bin", "python3"),
                  "/usr/bin/python3"]
    probe = f"import sys; assert sys.version_info[:2] == {tuple(sys.version_info[:2])}; import plog"
    for exe in candidates:
        if exe and os.path.exists(exe) and os.path.realpath(exe) != os.path.realpath(sys.executable):
            r = subprocess.run([exe, "-c", probe], env=env, capture_output=True, text=True, timeout=60)
            if "No module named 'plog'" in r.stderr:
                return exe
    return None


def test_a_plain_pyspark_program_run_from_a_virtualenv_without_pyspark_python(generated, tmp_path):
    """``.venv/bin/python program.py`` without activating the venv and without PYSPARK_PYTHON:
    pyspark would run the data source's workers with ``python3`` from PATH, here an
    interpreter without plog (and pyarrow). ``register`` gives them this interpreter."""
    from spark_env import require_spark

    require_spark()
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYTHONPATH")}
    other = _python_without_plog(env)
    if other is None:
        pytest.skip("no Python of this minor version without plog here (the suite runs in a virtualenv)")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(other)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    assert shutil.which("python3", path=env["PATH"]) == str(bin_dir / "python3")  # what pyspark would run
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    proc = subprocess.run([sys.executable, str(script), str(generated)], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == _program_answer(generated)


def _other_minor_python() -> str | None:
    mine = f"{sys.version_info[0]}.{sys.version_info[1]}"
    candidates = [Path.home() / ".pyenv" / "versions"]
    for root in candidates:
        if root.is_dir():
            for v in sorted(root.iterdir()):
                exe = v / "bin" / "python"
                if v.name.startswith("3.") and not v.name.startswith(mine + ".") and exe.exists() \
                        and int(v.name.split(".")[1]) >= 9:
                    return str(exe)
    for minor in range(9, 15):
        exe = f"/usr/bin/python3.{minor}"
        if f"3.{minor}" != mine and os.path.exists(exe):
            return exe
    return None


def test_version_mismatch_message_from_sparks_error_text():
    """The translation itself, on the text Spark raises (no JVM needed)."""
    from plog.spark_tasks.errors import SparkSetupError
    from plog.spark_tasks.session import check_executors

    class Boom:
        def parallelize(self, *a):
            return self

        def mapPartitions(self, f):
            return self

        def collect(self):
            raise RuntimeError("[PYTHON_VERSION_MISMATCH] Python in worker has different version: 3.12 than that in "
                               "driver: 3.11, PySpark cannot run with different minor versions.")

    class FakeSpark:
        sparkContext = Boom()

    with pytest.raises(SparkSetupError) as e:
        check_executors(FakeSpark())
    assert "executors run Python 3.12" in str(e.value) and "PYSPARK_PYTHON" in str(e.value)
