"""Shared helpers for CLI tests: data to run commands on, and the real ``plog`` as a subprocess.

Plain functions (not pytest fixtures) so any test file can import them. The suite runs with
``--import-mode=importlib``, so ``tests/cli`` is not on ``sys.path`` by itself; a test file does::

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from cli_fixtures import populated_data_dir, run

Everything they build lives under the ``root`` the caller passes, which must be pytest's
``tmp_path`` (or a subdirectory of it): nothing is ever written into the repository.

Invariants:

- ``run`` executes the installed console script of the running interpreter's venv
  (``plog_exe()``), never an in-process ``main()``, so the process's real stdout/stderr, TTY
  detection, environment and exit code are what is observed.
- ``run`` gives the child a controlled environment: the caller's ``os.environ`` minus every
  variable that changes plog's output (``NO_COLOR``, ``FORCE_COLOR``, ``CLICOLOR*``, ``TERM``,
  ``COLUMNS``, ``LINES``, ``PLOG_*``), plus ``TERM=xterm-256color`` (a colour-capable terminal,
  so that a test for ``NO_COLOR`` really tests ``NO_COLOR``), plus the caller's ``env``.
- ``populated_data_dir`` builds its data dir through the real CLI, so it is exactly what a user
  gets; ``kafka_log_dir`` is a copy of a real Apache Kafka log directory, so commands may modify it.
"""

from __future__ import annotations

import errno
import fcntl
import os
import pty
import select
import shutil
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
ROOT = TESTS.parent
if str(TESTS) not in sys.path:  # conftest's CORPUS (and cli_run) live in tests/
    sys.path.insert(0, str(TESTS))

from cli_run import plog_exe  # noqa: E402,F401  (re-exported: the console script run() uses)

#: Real Kafka log directories, by the project's contract (same rule as tests/conftest.py).
CORPUS = Path(os.environ.get("PLOG_CORPUS", ROOT.parent / "shared" / "corpus"))

#: The real Kafka log directory kafka_log_dir() copies: 1.1 MB, two partition folders
#: (``debug_topic-0``: one small segment, .index, .timeindex, two .snapshot files, 40 records;
#: ``__consumer_offsets-28``: a 1 MB segment with a non-empty index), checkpoints, meta.properties.
KAFKA_LOG_DIR_SOURCE = CORPUS / "William0423__kafka" / "kafka-logs"
#: The partition of KAFKA_LOG_DIR_SOURCE with user data.
KAFKA_TOPIC_PARTITION = "debug_topic-0"

#: The scenario scenario_file() copies (3 brokers, one topic, runs in about a second).
SCENARIO_SOURCE = ROOT / "examples" / "scenarios" / "isr-shrink.yaml"

#: What populated_data_dir() builds (tests may rely on these names and counts).
ORDERS_TOPIC = "orders"          # 3 partitions, replication factor 2
ORDERS_RECORDS = 300             # keys k1..k300, values v1..v300
ORDERS_EXTRA_RECORDS = 60        # produced after the group committed: lag on every partition
USERS_TOPIC = "users"            # 1 partition, RF 2, cleanup.policy=compact, small segments
USERS_RECORDS = 200              # keys u0..u19 (20 distinct), values name1..name200
GROUP = "billing"                # committed offsets on every orders partition (at 300 records)
BROKERS = 3

#: Window size of the pseudo-terminal run(tty=True) gives the child.
TTY_ROWS, TTY_COLS = 40, 200

_UNSET_VARS = ("NO_COLOR", "FORCE_COLOR", "CLICOLOR", "CLICOLOR_FORCE", "TERM", "COLUMNS", "LINES",
               "TTY_COMPATIBLE", "TTY_INTERACTIVE")


def child_env(env: dict[str, str | None] | None = None) -> dict[str, str]:
    """The environment run() gives the child: see the module docstring. A ``None`` value in
    ``env`` removes that variable."""
    out = {k: v for k, v in os.environ.items()
           if k not in _UNSET_VARS and not k.startswith("PLOG_")}
    out["TERM"] = "xterm-256color"
    if "PLOG_CORPUS" in os.environ:  # where the corpus is, not an output setting
        out["PLOG_CORPUS"] = os.environ["PLOG_CORPUS"]
    for k, v in (env or {}).items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = v
    return out


def run(args, *, env: dict[str, str | None] | None = None, tty: bool = False,
        stdin: bytes | str | None = None, timeout: float = 120,
        cwd: str | os.PathLike | None = None) -> tuple[int, bytes, bytes]:
    """Run ``plog ARGS`` as a subprocess: (exit code, stdout bytes, stderr bytes).

    ``env``: variables set on top of child_env()'s controlled environment (None removes one).
    ``stdin``: bytes (or str, UTF-8) fed to the child, then closed; None gives it /dev/null (so
    a command that reads stdin never waits). ``tty=True``: the child's stdout is the slave of a
    fresh pseudo-terminal of TTY_ROWS x TTY_COLS (so ``isatty(1)`` is true and the terminal size
    is known), with output post-processing off (no ``\\n`` -> ``\\r\\n``), so the bytes read are
    exactly the bytes written; stderr is always a separate pipe. ``timeout`` seconds: the child
    is killed and ``subprocess.TimeoutExpired`` raised.
    """
    return run_command([plog_exe(), *map(str, args)], env=env, tty=tty, stdin=stdin,
                       timeout=timeout, cwd=cwd)


def run_command(argv, *, env: dict[str, str | None] | None = None, tty: bool = False,
                stdin: bytes | str | None = None, timeout: float = 120,
                cwd: str | os.PathLike | None = None) -> tuple[int, bytes, bytes]:
    """run() for any command line ``argv`` (e.g. ``[sys.executable, "-m", "plog.cli", ...]``
    or a shell running a completion script), with the same environment, stdin, TTY and
    timeout handling."""
    argv = [str(a) for a in argv]
    if isinstance(stdin, str):
        stdin = stdin.encode()
    child_environ = child_env(env)
    if not tty:
        p = subprocess.run(argv, input=stdin if stdin is not None else None,
                           stdin=subprocess.DEVNULL if stdin is None else None,
                           capture_output=True, env=child_environ, timeout=timeout, cwd=cwd)
        return p.returncode, p.stdout, p.stderr
    return _run_pty(argv, child_environ, stdin, timeout, cwd)


def _run_pty(argv, environ, stdin: bytes | None, timeout: float, cwd) -> tuple[int, bytes, bytes]:
    master, slave = pty.openpty()
    try:
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", TTY_ROWS, TTY_COLS, 0, 0))
        attrs = termios.tcgetattr(slave)
        attrs[1] &= ~termios.OPOST  # oflag: bytes through unchanged (no ONLCR)
        attrs[3] &= ~termios.ECHO   # lflag: nothing typed is echoed back
        termios.tcsetattr(slave, termios.TCSANOW, attrs)
        p = subprocess.Popen(argv, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                             stdout=slave, stderr=subprocess.PIPE, env=environ, cwd=cwd,
                             close_fds=True)
    except BaseException:
        os.close(master)
        os.close(slave)
        raise
    os.close(slave)  # only the child holds it now: reading the master gets EIO when it exits

    err_chunks: list[bytes] = []

    def pump_stderr():
        err_chunks.append(p.stderr.read())

    def feed_stdin():
        try:
            p.stdin.write(stdin)
        except BrokenPipeError:  # the child stopped reading; its exit code tells the story
            pass
        finally:
            try:
                p.stdin.close()
            except BrokenPipeError:
                pass

    threads = [threading.Thread(target=pump_stderr, daemon=True)]
    if stdin is not None:
        threads.append(threading.Thread(target=feed_stdin, daemon=True))
    for t in threads:
        t.start()

    out = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                p.kill()
                p.wait()
                raise subprocess.TimeoutExpired(argv, timeout, output=bytes(out))
            ready, _, _ = select.select([master], [], [], min(left, 0.5))
            if not ready:
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError as e:
                if e.errno == errno.EIO:  # Linux: every slave fd closed (the child exited)
                    break
                raise
            if not chunk:  # BSDs/macOS: EOF instead of EIO
                break
            out += chunk
        code = p.wait(timeout=max(deadline - time.monotonic(), 1))
    finally:
        os.close(master)
    for t in threads:
        t.join(timeout=10)
    return code, bytes(out), b"".join(err_chunks)


def _must(args, *, stdin=None, cwd=None) -> bytes:
    code, out, err = run(args, stdin=stdin, cwd=cwd)
    if code != 0:
        raise RuntimeError(f"fixture step failed: plog {' '.join(map(str, args))} -> exit {code}: "
                           f"{err.decode(errors='replace').strip()}")
    return out


def populated_data_dir(root: Path) -> Path:
    """A plog data directory ``root/plog-data`` made through the real CLI:

    - ``plog init --brokers 3`` (brokers 1, 2, 3);
    - topic ``orders``: 3 partitions, replication factor 2; 300 keyed records (``k1:v1`` ..
      ``k300:v300``, placed by Kafka's murmur2 partitioner), then, after the group committed,
      60 more (``k301`` .. ``k360``), so every partition has lag;
    - topic ``users``: 1 partition, RF 2, ``cleanup.policy=compact``, ``segment.bytes=2048``
      (two segments or more, so the cleaner has a closed segment to clean); 200 keyed records
      over 20 keys ``u0`` .. ``u19`` (values ``name1`` .. ``name200``);
    - consumer group ``billing``: consumed ``orders`` to the end (-e) at 300 records, committing
      its offsets on all 3 partitions (no active members afterwards).

    Takes a few seconds (several CLI processes); build it once per module and copy it
    (``shutil.copytree``) for tests that modify it. Returns the data dir path.
    """
    dd = Path(root) / "plog-data"
    d = ["-d", str(dd)]
    cwd = str(root)  # nothing a command might write next to itself lands in the repository
    _must(["init", "--brokers", str(BROKERS), *d], cwd=cwd)
    _must(["topics", "create", ORDERS_TOPIC, "-p", "3", "-r", "2", *d], cwd=cwd)
    _must(["topics", "create", USERS_TOPIC, "-p", "1", "-r", "2", "-c", "cleanup.policy=compact",
           "-c", "segment.bytes=2048", *d], cwd=cwd)
    orders = "".join(f"k{i}:v{i}\n" for i in range(1, ORDERS_RECORDS + 1))
    _must(["produce", ORDERS_TOPIC, "--key-separator", ":", "-q", *d], stdin=orders, cwd=cwd)
    users = "".join(f"u{i % 20}:name{i}\n" for i in range(1, USERS_RECORDS + 1))
    # small batches: a batch must fit in one 2 KiB segment, and several segments are the point
    _must(["produce", USERS_TOPIC, "--key-separator", ":", "--batch-size", "512", "-q", *d],
          stdin=users, cwd=cwd)
    _must(["consume", ORDERS_TOPIC, "-g", GROUP, "-e", "-q", *d], cwd=cwd)
    extra = "".join(f"k{i}:v{i}\n" for i in range(ORDERS_RECORDS + 1,
                                                    ORDERS_RECORDS + ORDERS_EXTRA_RECORDS + 1))
    _must(["produce", ORDERS_TOPIC, "--key-separator", ":", "-q", *d], stdin=extra, cwd=cwd)
    return dd


def kafka_log_dir(root: Path) -> Path:
    """A copy, at ``root/kafka-logs``, of one real Apache Kafka log directory from the shared
    corpus (KAFKA_LOG_DIR_SOURCE): partition folders ``debug_topic-0`` (segment, index, time
    index, producer snapshots) and ``__consumer_offsets-28``, plus the broker's checkpoint files.
    A copy, so commands that modify a log dir (recover, compact, retention) may run on it."""
    if not KAFKA_LOG_DIR_SOURCE.is_dir():
        raise FileNotFoundError(f"the shared corpus is missing {KAFKA_LOG_DIR_SOURCE} (set PLOG_CORPUS)")
    dst = Path(root) / "kafka-logs"
    shutil.copytree(KAFKA_LOG_DIR_SOURCE, dst)
    return dst


def segment_file(log_dir: Path, partition: str | None = None) -> Path:
    """The first (lowest base offset) ``.log`` segment of a partition folder of ``log_dir``:
    ``partition`` (e.g. ``debug_topic-0``, or for a plog data dir ``broker-1/orders-0``), else
    KAFKA_TOPIC_PARTITION if ``log_dir`` has it, else the first partition folder by name that has
    a segment."""
    log_dir = Path(log_dir)
    if partition is None and (log_dir / KAFKA_TOPIC_PARTITION).is_dir():
        partition = KAFKA_TOPIC_PARTITION
    folders = [log_dir / partition] if partition else sorted(p for p in log_dir.rglob("*") if p.is_dir())
    for folder in folders:
        logs = sorted(folder.glob("*.log"))
        if logs:
            return logs[0]
    raise FileNotFoundError(f"no .log segment under {log_dir}" + (f"/{partition}" if partition else ""))


def scenario_file(root: Path) -> Path:
    """A copy of a small replication scenario (SCENARIO_SOURCE, ``isr-shrink.yaml``) at
    ``root/<name>``, for ``plog simulate``."""
    dst = Path(root) / SCENARIO_SOURCE.name
    shutil.copyfile(SCENARIO_SOURCE, dst)
    return dst
