"""Starting (or joining) a Spark session for plog: checks, quiet logs, shipping plog.

* pyspark, pyarrow and Java 17+ are checked first; a missing one is a one-line
  :class:`SparkSetupError` saying how to install it.
* Local masters run executors with this interpreter (``PYSPARK_PYTHON`` defaults to
  ``sys.executable``: pyspark's own default is ``python3`` on PATH, which may lack plog and
  pyarrow); :func:`plog.spark_tasks.register` does the same for the data source in a
  session someone else built (:func:`driver_python_for_workers`). On a cluster, set
  ``PYSPARK_PYTHON`` (or ``spark.pyspark.python``) to an interpreter that exists on every
  worker; plog checks its version on an executor and says what to do when it differs from
  the driver's.
* Under ``spark-submit`` (``PYSPARK_GATEWAY_PORT`` set) the master comes from the submit
  command; plog sets one only when asked to.
* Spark's JVM writes its log4j output and warnings to stderr/stdout. The JVM is started
  with both redirected to a log file (:attr:`SparkHandle.log_path`), so plog's stdout
  carries data only and stderr only plog's own messages; the file is named in errors.
* A local session plog starts gets settings that cut Spark's cost per job
  (:data:`LOCAL_CONF`: C1-only JIT, Unix domain sockets to the Python workers), and its
  Python workers are started and prepared at start-up (:func:`warm_workers`,
  :func:`prepare_worker`), so a command's first job does not pay for them.
* For a non-local master, plog's own package (pure Python) is zipped and added with
  ``addPyFile`` (:func:`ship_package`, also by ``register``) so executors and the data
  source planner can import it. pyarrow (compiled) must be installed on the workers.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field

from .errors import SparkJobError, SparkSetupError

INSTALL_HINT = "pip install 'plog[spark]'"

#: Settings that keep a CLI run quiet and self-contained; ``--conf`` overrides them.
QUIET_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
}
#: Local mode binds to the loopback interface: no firewall prompts, no exposed ports.
#:
#: ``spark.driver.defaultJavaOptions``: the JVM compiles with C1 only (no C2). In local mode
#: that JVM is the whole of Spark and shares the cores with the Python workers, and a CLI
#: command's session lives for a few jobs: C2's background compilation of Spark's scheduler
#: and Python-runner code then costs more CPU than it ever saves. Measured on a shared 2-core
#: machine (bench_scan's 1 GiB, local[2], one session each way): the JVM's CPU during the
#: first two stats jobs of a session fell from 0.37 and 0.45 s to 0.09 and 0.09 s, an empty
#: job's from ~0.10 to ~0.06 s, the session start-up from 10.2 to 7.7 s; a ``--sql``
#: aggregation over 256 MiB took 23.6 s instead of 28.0 s (a Parquet export of it 46 s
#: instead of 40 s, on a loaded machine: long JVM-bound work can lose a little, and a
#: cluster is not affected). It is the "default" Java options, which Spark puts before
#: ``spark.driver.extraJavaOptions``: a user's own JVM flags there (or a later
#: ``-XX:TieredStopAtLevel=4``) still apply, and ``--conf spark.driver.defaultJavaOptions=``
#: restores the JVM's default. The test suite's session runs the same way.
#:
#: ``spark.python.unix.domain.socket.enabled`` (Spark 4.1+; older versions ignore it): the
#: JVM talks to its Python workers over Unix domain sockets instead of loopback TCP, which
#: also spares each worker connection its secret handshake (pyspark/daemon.py).
#: Measured on the same machine: an empty 2-task job took 0.062 s instead of 0.096 s
#: (medians of 15, two sessions each), the same JVM CPU. POSIX only (the sockets are files
#: in the JVM's ``java.io.tmpdir``; pyspark's forking daemon is POSIX-only as well).
LOCAL_CONF = {
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.defaultJavaOptions": "-XX:TieredStopAtLevel=1",
    **({"spark.python.unix.domain.socket.enabled": "true"} if os.name == "posix" else {}),
}


def session_settings(local: bool, conf: dict[str, str] | None = None) -> dict[str, str]:
    """The settings of a session plog starts: :data:`QUIET_CONF`, :data:`LOCAL_CONF` for a
    local master, then the user's ``conf`` (``--conf``), which replaces any of plog's."""
    settings = dict(QUIET_CONF)
    if local:
        settings.update(LOCAL_CONF)
    settings.update(conf or {})
    return settings


def is_local(master: str | None) -> bool:
    return master is None or master == "local" or master.startswith("local[") or master.startswith("local-")


def java_major(java: str) -> int | None:
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not m:
        return None
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major


def check_requirements() -> None:
    """Raise :class:`SparkSetupError` unless pyspark (>= 4.0), pyarrow and Java 17+ are here."""
    import importlib.util

    if importlib.util.find_spec("pyspark") is None:
        raise SparkSetupError(f"--spark needs pyspark, which is not installed: {INSTALL_HINT} (and Java 17+)")
    if importlib.util.find_spec("pyarrow") is None:
        raise SparkSetupError(f"--spark needs pyarrow, which is not installed: {INSTALL_HINT}")
    import pyspark

    major = int(pyspark.__version__.split(".")[0])
    if major < 4:
        raise SparkSetupError(f"plog's Spark data source needs pyspark >= 4.0 (Python data sources); found "
                              f"{pyspark.__version__}: {INSTALL_HINT}")
    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    if not java or not os.path.exists(java):
        where = f"JAVA_HOME={java_home} has no bin/java" if java_home else "no java on PATH"
        raise SparkSetupError(f"--spark needs Java 17 or newer ({where}): install a JDK (e.g. apt install "
                              f"openjdk-17-jre-headless) or set JAVA_HOME")
    version = java_major(java)
    if version is not None and version < 17:
        raise SparkSetupError(f"--spark needs Java 17 or newer; {java} is Java {version}: install a newer JDK "
                              f"or point JAVA_HOME at one")


def package_zip(directory: str | None = None) -> str:
    """A zip of plog's Python files (``plog/...``), for ``addPyFile``. Only the package's
    modules go in (the source tree may also hold tests, a venv, data directories)."""
    import plog

    import pkgutil

    modules = {"plog": os.path.dirname(plog.__file__)}
    # Every package of the distribution (the engine's concept folders included), each a folder
    # of its own: the source tree also holds tests, a venv and data directories.
    for sub in ("formats", "engine", "cli", "spark_tasks"):
        mod = __import__(f"plog.{sub}", fromlist=["__path__"])
        modules[f"plog/{sub}"] = list(mod.__path__)[0]
        for info in pkgutil.walk_packages(mod.__path__, f"plog.{sub}."):
            if info.ispkg:
                modules[info.name.replace(".", "/")] = os.path.join(info.module_finder.path, info.name.rsplit(".", 1)[1])
    directory = directory or tempfile.mkdtemp(prefix="plog-spark-")
    path = os.path.join(directory, "plog.zip")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for arc, src in modules.items():
            names = ["__init__.py"] if arc == "plog" else sorted(os.listdir(src))
            for name in names:
                if name.endswith(".py"):
                    z.write(os.path.join(src, name), f"{arc}/{name}")
    return path


#: What pyspark runs Python workers with when ``PYSPARK_PYTHON`` is not set (SparkContext).
PYSPARK_DEFAULT_PYTHON = "python3"


def ship_package(sc) -> str | None:
    """Add plog's modules (:func:`package_zip`) to ``sc`` with ``addPyFile`` unless a
    ``plog.zip`` is already there (Spark refuses a second file of that name); returns the
    zip's path, or None when it was already shipped."""
    if "plog.zip" in (getattr(sc, "_python_includes", None) or ()):
        return None
    path = package_zip()
    sc.addPyFile(path)
    return path


@contextlib.contextmanager
def driver_python_for_workers(sc):
    """Within the block, Python functions created for ``sc`` (a data source registered, a
    UDF) run in this interpreter when no one chose another. pyspark takes the workers'
    Python from ``PYSPARK_PYTHON`` when its SparkContext starts, else ``python3`` on PATH,
    which in a virtualenv run without activating it is another Python, without plog or
    pyarrow; ``spark.pyspark.python`` only reaches it through ``spark-submit``. So:
    ``PYSPARK_PYTHON`` is kept, a ``spark.pyspark.python`` set on the builder is used, else
    this interpreter. For a local master only: on a cluster this path means nothing to the
    workers."""
    if os.environ.get("PYSPARK_PYTHON") or sc.pythonExec != PYSPARK_DEFAULT_PYTHON:
        yield
        return
    sc.pythonExec = sc.getConf().get("spark.pyspark.python", None) or sys.executable
    try:
        yield
    finally:
        sc.pythonExec = PYSPARK_DEFAULT_PYTHON


@dataclass
class SparkHandle:
    """A session plog uses; :meth:`stop` stops it only if plog started it."""

    spark: object
    owned: bool
    log_path: str | None = None
    shipped: str | None = None
    notes: list = field(default_factory=list)

    def stop(self, keep_log: bool = False) -> None:
        """Stop the session if plog started it; its JVM log file is removed unless
        ``keep_log`` (an error message names it)."""
        if self.owned:
            try:
                self.spark.stop()
            except Exception:  # the JVM may already be gone (Ctrl-C); nothing left to release
                pass
            if self.log_path and not keep_log:
                try:
                    os.remove(self.log_path)
                except OSError:
                    pass


def _redirected_launch(build, log_path: str):
    """Run ``build()`` with fds 1 and 2 pointing at ``log_path``: the JVM that pyspark
    launches inherits them, so Spark's log output never reaches the terminal."""
    sys.stdout.flush()
    sys.stderr.flush()
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    saved = os.dup(1), os.dup(2)
    try:
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        return build()
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])
        os.close(log_fd)


def start(master: str | None = None, conf: dict[str, str] | None = None, *, app_name: str = "plog",
          quiet_jvm: bool = True) -> SparkHandle:
    """A Spark session with plog's data source registered.

    Joins the active session when there is one (a test fixture, a notebook, a
    ``spark-submit`` script that already built it) and then does not own it. ``master``
    None means ``local[*]``, except under ``spark-submit``, whose master is kept.
    """
    check_requirements()
    from pyspark.sql import SparkSession

    from . import register

    _quiet_python_loggers()
    active = SparkSession.getActiveSession()
    if active is not None:
        register(active)
        return SparkHandle(active, owned=False)
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ
    if master is None and not submitted:
        master = "local[*]"
    local = is_local(master) if master is not None else False
    chosen_python = os.environ.get("PYSPARK_PYTHON")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    settings = session_settings(local, conf)
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    for k, v in settings.items():
        builder = builder.config(k, v)
    log_path = None
    try:
        if quiet_jvm and not submitted:
            fd, log_path = tempfile.mkstemp(prefix="plog-spark-", suffix=".log")
            os.close(fd)
            spark = _redirected_launch(builder.getOrCreate, log_path)
        else:
            spark = builder.getOrCreate()
    except Exception as e:
        where = f" (Spark's log: {log_path})" if log_path else ""
        raise SparkSetupError(f"could not start Spark with master {master or '(from spark-submit)'}: "
                              f"{error_line(e)}{where}") from e
    spark.sparkContext.setLogLevel("ERROR")
    handle = SparkHandle(spark, owned=True, log_path=log_path)
    try:
        if not is_local(spark.sparkContext.master):
            handle.shipped = ship_package(spark.sparkContext)
            check_executors(spark, handle)
        elif chosen_python and os.path.realpath(chosen_python) != os.path.realpath(sys.executable):
            check_executors(spark, handle)  # a user-chosen executor Python: check it once
        if is_local(spark.sparkContext.master):
            warm_workers(spark, handle)
    except BaseException:
        handle.stop()
        raise
    register(spark)
    return handle


@contextlib.contextmanager
def spark_session(master: str | None = None, conf: dict[str, str] | None = None):
    """A session for one piece of work (a CLI command): :func:`start` on entry, yielding its
    :class:`SparkHandle`, stopped on exit if plog started it. When the work fails, Spark's
    log file is kept (the error names it), and a failed Spark job (a py4j/pyspark exception
    holding a JVM stack trace) becomes one :class:`SparkJobError` line: its first line and
    where the log is."""
    handle = start(master, conf)
    try:
        yield handle
    except BaseException as error:
        handle.stop(keep_log=True)
        if type(error).__module__.startswith(("pyspark", "py4j")):
            log = f" (Spark's log: {handle.log_path})" if handle.log_path else ""
            raise SparkJobError(f"Spark job failed: {error_line(error)}{log}") from error
        raise
    handle.stop()


def default_parallelism(master: str | None) -> int:
    """The tasks to plan for on ``master``: N of ``local[N]``, else this machine's cores."""
    if master and master.startswith("local[") and master[6:-1].isdigit():
        return int(master[6:-1])
    return os.cpu_count() or 2


def _quiet_python_loggers() -> None:
    """pyspark logs every failed query as a JSON line on stderr before raising it; plog
    reports the error itself, once, as one line."""
    import logging

    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        logging.getLogger(name).disabled = True


def _probe(_):
    import sys as _sys

    import plog as _plog

    return [(tuple(_sys.version_info[:2]), _plog.__version__, _plog.__file__, _sys.executable)]


#: In a Python worker: whether :func:`prepare_worker` ran (workers are reused across tasks).
_worker_ready = False


def prepare_worker() -> None:
    """In a Python worker, once: import what plog's scan tasks run, then collect and freeze
    the garbage collector's view of everything alive (``gc.freeze``).

    Why the freeze: a reused PySpark worker runs ``gc.collect()`` after every task
    (pyspark/daemon.py), a full pass over every object of the worker: with pyspark and plog
    imported, ~46,000 objects, 15-25 ms of CPU per task measured on the benchmark machine,
    spent while the job's results travel back (and, for a job that follows, before the
    worker reads its next task). Frozen objects (modules, classes, pyspark's state: they live
    as long as the worker) are skipped by those passes, which then cover only what later
    tasks left behind. They are still freed by reference counting; only cycles among them
    would stay, and the collect just before the freeze has already freed those."""
    global _worker_ready
    if _worker_ready:
        return
    import gc

    import plog.engine.inspect.scan  # noqa: F401

    gc.collect()
    gc.freeze()
    _worker_ready = True


def _warm(rows):
    # What every scan task imports, so the first job finds it loaded (workers are reused).
    from plog.formats import native

    for _ in rows:  # read the input whole: a worker that leaves some unread is not reused
        pass
    prepare_worker()
    return [native.describe()]


def warm_workers(spark, handle: SparkHandle | None = None) -> None:
    """Start a local session's Python workers, one task per core, and prepare each
    (:func:`prepare_worker`: plog's scan imported, the garbage collector's view frozen;
    workers are reused), so that the session's start-up pays for them once instead of its
    first job. The tasks' input is a list, shipped as a scan job's is (pyspark turns a
    ``range`` into an empty collection and a generator function). Notes which path (native
    core or pure Python) the workers run."""
    sc = spark.sparkContext
    slots = max(1, sc.defaultParallelism)
    try:
        paths = sc.parallelize(list(range(slots)), slots).mapPartitions(_warm).collect()
    except Exception as e:
        log = f" (Spark's log: {handle.log_path})" if handle and handle.log_path else ""
        raise SparkSetupError(f"a test task on the executors failed: {error_line(e)}{log}") from e
    if handle is not None and paths:
        handle.notes.append(f"executors: {paths[0]}")


def check_executors(spark, handle: SparkHandle | None = None) -> tuple:
    """Run one task on an executor; raise :class:`SparkSetupError` when its Python minor
    version (or plog's version there) differs from the driver's."""
    import plog

    driver = tuple(sys.version_info[:2])
    try:
        got = spark.sparkContext.parallelize([0], 1).mapPartitions(_probe).collect()[0]
    except Exception as e:
        text = str(e)
        m = re.search(r"worker has different version:? ?\(?(\d+)[., ]+(\d+)", text)
        if "PYTHON_VERSION_MISMATCH" in text or m:
            worker = f"{m.group(1)}.{m.group(2)}" if m else "another version"
            raise SparkSetupError(
                f"the executors run Python {worker} but this driver runs Python {driver[0]}.{driver[1]}; PySpark "
                f"needs the same minor version: set PYSPARK_PYTHON (or --conf spark.pyspark.python=...) to a "
                f"Python {driver[0]}.{driver[1]} interpreter that exists on every worker") from e
        if "No module named 'pyarrow'" in text:
            raise SparkSetupError(f"the executors' Python has no pyarrow: install {INSTALL_HINT} on every worker "
                                  f"(or point PYSPARK_PYTHON at an interpreter that has it)") from e
        log = f" (Spark's log: {handle.log_path})" if handle and handle.log_path else ""
        raise SparkSetupError(f"a test task on the executors failed: {error_line(e)}{log}") from e
    version, plog_version, where, executable = got
    if tuple(version) != driver:
        raise SparkSetupError(
            f"the executors run Python {version[0]}.{version[1]} ({executable}) but this driver runs Python "
            f"{driver[0]}.{driver[1]}: set PYSPARK_PYTHON to a matching interpreter on every worker")
    if plog_version != plog.__version__:
        raise SparkSetupError(f"the executors import plog {plog_version} from {where}, the driver is plog "
                              f"{plog.__version__}: install the same version on the workers or remove it there")
    if handle is not None:
        handle.notes.append(f"executors: Python {version[0]}.{version[1]}, plog from {where}")
    return got


def error_line(e: BaseException) -> str:
    text = str(e).strip()
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("Traceback", "File ")):
            return line[:500]
    return type(e).__name__
