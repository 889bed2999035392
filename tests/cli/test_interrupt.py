"""Ctrl-C or SIGTERM in the middle of real work: exit 130 and one line ``plog: interrupted``
on stderr for Ctrl-C, exit 143 and ``plog: terminated`` for SIGTERM (``kill``, systemd, container
runtimes: the same clean stop, cli/signals.py), no traceback, and nothing half-done that a later
run would not handle (issue 10, Build item 5; issue 21, item 7; DESIGN.md "CLI contract";
cli/exit_codes.py).

Each test starts ``plog`` as a child in its own session, waits until it is really working (it
has written output, opened a segment of the data, or written records), and then stops it with
one of STOPS: Ctrl-C (as on a terminal, SIGINT goes to the whole process group: the command and
any worker processes); SIGTERM to the whole group (systemd's default KillMode=control-group);
and, for commands with worker processes, SIGTERM to the command only (``kill PID``,
``docker stop``: the workers do not get it). To make "in the middle" certain on a fast or a
slow machine, the group is stopped (SIGSTOP) the moment the sign of work is seen, sent the
signal, and continued: exactly a Ctrl-C or a ``kill`` at that instant. Afterwards:

- the stop's exit code and stderr exactly its one line (after produce's and consume's summary
  of what they wrote or read), no Traceback;
- no ``*.tmp``, ``*.cleaned``, ``*.swap`` or half-written output file is left that the next
  command does not handle: the next run of the command (or ``plog recover``) succeeds,
  ``plog verify --strict`` passes (a clean shutdown: no ``clean-shutdown-missing``, indexes
  trimmed), and no acknowledged record is lost (produce leaves an unbroken prefix of its input,
  as many records as its summary says; a consumer group resumes without skipping a record;
  compaction keeps the latest value of every key; recovery keeps every record).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Callable, NamedTuple

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cli_fixtures import child_env, plog_exe, run  # noqa: E402
from cli_run import plog  # noqa: E402

RECORDS = 200_000  # topic "big": 1 partition, ~21 MB
KEYS = 2_000       # topic "keyed": cleanup.policy=compact, 60_000 records over these keys
KEYED_RECORDS = 60_000


def _value(i: int) -> str:
    return f"{i:07d} {'v' * 92}"


def _keyed(i: int) -> str:
    return f"k{i % KEYS}\t{i:06d} {'w' * 180}"


def _must(args, stdin: str | None = None) -> bytes:
    code, out, err = run(args, stdin=stdin, timeout=300)
    assert code == 0, f"plog {' '.join(map(str, args))}: exit {code}: {err.decode(errors='replace')}"
    return out


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    """A data directory: topic ``big`` (RECORDS values) and ``keyed`` (compacted, small
    segments, every key written many times). Tests that change it work on a copy."""
    dd = tmp_path_factory.mktemp("interrupt") / "plog-data"
    d = ["-d", str(dd)]
    _must(["init", *d])
    _must(["topics", "create", "big", *d])
    _must(["produce", "big", "-q", *d], stdin="".join(_value(i) + "\n" for i in range(RECORDS)))
    _must(["topics", "create", "keyed", "-c", "cleanup.policy=compact", "-c", "segment.bytes=1048576", *d])
    _must(["produce", "keyed", "-K", "-q", *d], stdin="".join(_keyed(i) + "\n" for i in range(KEYED_RECORDS)))
    return dd


@pytest.fixture
def copy(data, tmp_path) -> Path:
    dst = tmp_path / "plog-data"
    shutil.copytree(data, dst)
    return dst


# -- interrupting a child ---------------------------------------------------------------------------


class Stop(NamedTuple):
    """How a command is stopped, and what it must answer."""

    signal: int
    group: bool  # sent to the whole process group (the command and its workers), or the command only
    code: int    # the exit code
    line: str    # the one line on stderr

    def __str__(self) -> str:
        return next(name for name, stop in STOPS.items() if stop == self)


STOPS = {
    "ctrl-c": Stop(signal.SIGINT, True, 130, "plog: interrupted"),
    "sigterm": Stop(signal.SIGTERM, True, 143, "plog: terminated"),  # systemd: every process of the unit
    "kill-pid": Stop(signal.SIGTERM, False, 143, "plog: terminated"),  # kill PID, docker stop: the command only
}
CTRL_C = STOPS["ctrl-c"]

#: Every stop, for commands that run in one process (where "group" and "command only" are one).
ONE_PROCESS = pytest.mark.parametrize("stop", [STOPS["ctrl-c"], STOPS["sigterm"]], ids=str)
#: Every stop, for commands with worker processes.
WORKERS = pytest.mark.parametrize("stop", list(STOPS.values()), ids=str)


def _pids(root_pid: int) -> list[int]:
    """``root_pid`` and its descendants (worker processes)."""
    out, todo = [], [root_pid]
    while todo:
        pid = todo.pop()
        out.append(pid)
        try:
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children") as f:
                    todo.extend(int(x) for x in f.read().split())
        except OSError:
            pass
    return out


class opened_a_segment_of:
    """Ready when the command (or a worker) has opened a ``.log`` under ``root``: the process
    that opens the first one stops itself right after (``stop_at_segment/sitecustomize.py``,
    put on the child's PYTHONPATH through :attr:`env`), so the signal lands in the middle of
    the work however fast the command reads."""

    def __init__(self, root: Path):
        self.env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).parent / "stop_at_segment"),
                                                                os.environ.get("PYTHONPATH")])),
                    "INTERRUPT_TEST_STOP_AT": str(Path(root).resolve()),
                    # one stop per command, whichever of its processes gets there first
                    "INTERRUPT_TEST_STOP_FLAG": str(Path(root).resolve().parent / f"stop-{uuid.uuid4().hex}.flag")}

    def __call__(self, p: subprocess.Popen, out: bytearray) -> bool:
        for pid in _pids(p.pid):
            try:
                with open(f"/proc/{pid}/stat") as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if state == "T":
                return True
        return False


def started_workers(n: int) -> Callable:
    """Ready when the command has forked ``n`` worker processes: from then until the end of
    its work (verify -j 2 of the data holds a segment open for a few milliseconds only, too
    short a sign to catch reliably)."""
    return lambda p, out: len(_pids(p.pid)) > n


def wrote_output(n: int) -> Callable:
    return lambda p, out: len(out) >= n


def interrupt(argv: list[str], ready: Callable, *, feed: Callable | None = None,
              timeout: float = 120, stop: Stop = CTRL_C) -> tuple[int, bytes, bytes]:
    """Run ``plog ARGV``, stop it (``stop``: Ctrl-C by default) once ``ready(popen, stdout so
    far)`` is true; returns (exit code, stdout, stderr). Fails if the command ends before it
    is ready."""
    # PYTHONFAULTHANDLER: a child that does not end in time is sent SIGABRT, which makes every
    # process of the group print its threads' stacks: the failure then says where it hung.
    env = {"PYTHONFAULTHANDLER": "1", **getattr(ready, "env", {})}
    p = subprocess.Popen([plog_exe(), *argv], stdin=subprocess.PIPE if feed else subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env(env),
                         start_new_session=True)
    out, err = bytearray(), bytearray()

    def pump(stream, buf):
        while chunk := stream.read1(1 << 16):
            buf += chunk

    threads = [threading.Thread(target=pump, args=(p.stdout, out), daemon=True),
               threading.Thread(target=pump, args=(p.stderr, err), daemon=True)]
    if feed is not None:
        def feeder():
            try:
                feed(p.stdin)
                p.stdin.close()
            except (BrokenPipeError, ValueError, OSError):
                pass
        threads.append(threading.Thread(target=feeder, daemon=True))
    for t in threads:
        t.start()
    try:
        deadline = time.monotonic() + timeout
        while not ready(p, out):
            if p.poll() is not None:
                pytest.fail(f"plog {' '.join(argv)} ended (exit {p.returncode}) before it could be interrupted: "
                            f"{bytes(err).decode(errors='replace')[-500:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"plog {' '.join(argv)} did not start working within {timeout}s")
            time.sleep(0.005)
        # Ctrl-C (or kill) at this very instant: freeze the group, queue the signal, let it run on.
        os.killpg(p.pid, signal.SIGSTOP)
        assert p.poll() is None, "the command ended before it could be interrupted"
        if stop.group:
            os.killpg(p.pid, stop.signal)
        else:
            os.kill(p.pid, stop.signal)
        os.killpg(p.pid, signal.SIGCONT)
        try:
            code = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGABRT)
            p.wait(timeout=30)
            for t in threads:
                t.join(timeout=30)
            pytest.fail(f"plog {' '.join(argv)} did not end within {timeout}s of {stop}; its stacks:\n"
                        f"{bytes(err).decode(errors='replace')[-20000:]}")
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    for t in threads:
        t.join(timeout=30)
    return code, bytes(out), bytes(err)


def assert_interrupted(code: int, err: bytes, stop: Stop = CTRL_C, *, summary: str | None = None) -> list[str]:
    """Exit code and the one line of ``stop``; before it, the lines matching the regular
    expression ``summary`` when given (produce's and consume's account of what they did).
    Returns those summary lines."""
    text = err.decode("utf-8", "replace")
    assert "Traceback" not in text, text
    assert code == stop.code, f"exit {code}: {text}"
    lines = text.split("\n")
    assert lines[-2:] == [stop.line, ""], text
    before = lines[:-2]
    if summary is None:
        assert before == [], text
    else:
        assert before and all(re.fullmatch(summary, line) for line in before), text
    return before


def leftovers(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.name.endswith((".tmp", ".cleaned", ".swap")) or ".tmp-" in p.name)


def consume_all(dd: Path, topic: str, *extra: str) -> list[str]:
    return _must(["consume", topic, "-e", "-q", "-d", str(dd), *extra]).decode().splitlines()


def verify_ok(dd: Path) -> None:
    """No error and no warning: after a clean stop, no clean-shutdown-missing and no
    untrimmed (preallocated) index either."""
    code, out, err = run(["verify", "-q", "--strict", str(dd)], timeout=300)
    assert code == 0, (out + err).decode(errors="replace")


# -- the commands ------------------------------------------------------------------------------------


@ONE_PROCESS
def test_produce_from_a_big_pipe(copy, stop):
    """The log is closed as at the end of a run: the clean-shutdown marker written, the
    indexes trimmed (verify --strict), and the summary's count is what the log holds."""
    segment = copy / "broker-1" / "fresh-0" / "00000000000000000000.log"
    _must(["topics", "create", "fresh", "-d", str(copy)])
    total = 3_000_000

    def feed(stdin):
        for start in range(0, total, 10_000):
            stdin.write("".join(f"{i}\n" for i in range(start, start + 10_000)).encode())

    def ready(p, out):  # several rounds are in the log already
        return segment.exists() and segment.stat().st_size > 256 * 1024

    code, _out, err = interrupt(["produce", "fresh", "-d", str(copy)], ready, feed=feed, stop=stop)
    summary = assert_interrupted(code, err, stop, summary=r"produced \d+ record\(s\) to fresh\b.*")
    assert leftovers(copy) == []
    verify_ok(copy)  # before anything else opens the log: what the stop itself left
    got = consume_all(copy, "fresh")
    assert 0 < len(got) < total
    assert got == [str(i) for i in range(len(got))], "the log is not an unbroken prefix of the input"
    # Every record the summary acknowledges is in the log (a round cut short may have put
    # more there than it acknowledged: at least once, never lost).
    acknowledged = int(re.match(r"produced (\d+) ", summary[0]).group(1))
    assert acknowledged <= len(got), summary
    # The next producer appends after them.
    _must(["produce", "fresh", "-q", "-d", str(copy)], stdin="after\n")
    assert consume_all(copy, "fresh")[-2:] == [str(len(got) - 1), "after"]
    verify_ok(copy)


@ONE_PROCESS
def test_consume_a_big_topic_with_a_group(data, stop):
    code, out, err = interrupt(["consume", "big", "-g", "reader", "-e", "-d", str(data)], wrote_output(200_000),
                               stop=stop)
    assert_interrupted(code, err, stop, summary=r"consumed \d+ record\(s\) from big")
    seen = out.decode().splitlines()
    if not out.endswith(b"\n"):
        seen = seen[:-1]  # a line cut by the interrupt is not a delivered record
    assert 0 < len(seen) < RECORDS
    assert seen == [_value(i) for i in range(len(seen))]
    # The group resumes at or before the first record it did not print: nothing is skipped.
    rest = consume_all(data, "big", "-g", "reader")
    first = int(rest[0].split()[0])
    assert first <= len(seen)
    assert rest == [_value(i) for i in range(first, RECORDS)]
    _must(["groups", "delete", "reader", "-d", str(data)])
    verify_ok(data)


@ONE_PROCESS
def test_consume_following_with_a_group(data, stop):
    """A consumer that follows the topic (a service, stopped by systemd with SIGTERM) has
    printed every record and waits for more: the stop commits its position, says how many
    it read, and the group's next run has nothing left to read."""
    everything = len(b"".join(_value(i).encode() + b"\n" for i in range(RECORDS)))
    code, out, err = interrupt(["consume", "big", "-g", "follower", "-d", str(data)], wrote_output(everything),
                               stop=stop)
    assert assert_interrupted(code, err, stop, summary=r"consumed \d+ record\(s\) from big") == \
        [f"consumed {RECORDS} record(s) from big"]
    assert out.decode().splitlines() == [_value(i) for i in range(RECORDS)]
    assert consume_all(data, "big", "-g", "follower") == []  # committed at the stop: nothing is read twice
    _must(["groups", "delete", "follower", "-d", str(data)])
    verify_ok(data)


@ONE_PROCESS
def test_dump_a_big_segment(data, stop):
    segment = data / "broker-1" / "big-0" / "00000000000000000000.log"
    code, out, err = interrupt(["dump", "--deep-iteration", "--print-data-log", str(segment)],
                               wrote_output(100_000), stop=stop)
    assert_interrupted(code, err, stop)
    assert out.startswith(f"Dumping {segment}\n".encode())
    assert f"| offset: {RECORDS - 1} ".encode() not in out  # it stopped part-way


@ONE_PROCESS
def test_verify(data, stop):
    code, out, err = interrupt(["verify", "-j", "1", str(data)], opened_a_segment_of(data), stop=stop)
    assert_interrupted(code, err, stop)
    verify_ok(data)


@WORKERS
def test_verify_with_worker_processes(data, stop):
    """Two worker processes get the signal too (or, kill-pid, do not): they end without a
    traceback of their own."""
    code, out, err = interrupt(["verify", "-j", "2", str(data)], started_workers(2), stop=stop)
    assert_interrupted(code, err, stop)


@pytest.mark.parametrize("jobs, stop", [(1, STOPS["ctrl-c"]), (1, STOPS["sigterm"]),
                                        *((2, stop) for stop in STOPS.values())], ids=lambda v: f"{v}")
def test_recover(copy, stop, jobs):
    os.unlink(copy / "broker-1" / ".kafka_cleanshutdown")  # an unclean shutdown: recovery has work
    code, out, err = interrupt(["recover", "--all", "-j", str(jobs), str(copy)], opened_a_segment_of(copy),
                               stop=stop)
    assert_interrupted(code, err, stop)
    _must(["recover", str(copy)])  # the next run finishes the job
    assert leftovers(copy) == []
    verify_ok(copy)
    got = consume_all(copy, "big")
    assert len(got) == RECORDS and got[-1] == _value(RECORDS - 1)


@ONE_PROCESS
def test_compact(copy, stop):
    code, out, err = interrupt(["compact", "--force", "-q", str(copy)], opened_a_segment_of(copy), stop=stop)
    assert_interrupted(code, err, stop)
    # the next run cleans up and compacts (removing what it replaced at once: no .deleted files wait)
    _must(["compact", "--force", "-q", "--delete-delay-ms", "0", str(copy)])
    assert leftovers(copy) == []
    verify_ok(copy)
    latest = {}
    for line in consume_all(copy, "keyed", "--format", "%k\t%v\n"):
        key, value = line.split("\t")
        latest[key] = value
    want = {}
    for i in range(KEYED_RECORDS):
        key, value = _keyed(i).split("\t")
        want[key] = value
    assert latest == want


@WORKERS
def test_scan_with_worker_processes(data, stop):
    code, out, err = interrupt(["scan", "-j", "2", str(data)], opened_a_segment_of(data), stop=stop)
    assert_interrupted(code, err, stop)


@ONE_PROCESS
def test_scan_search_to_a_file_leaves_no_partial_file(data, tmp_path, stop):
    target = tmp_path / "matches.jsonl"
    code, out, err = interrupt(["scan", "--mode", "search", "--value-contains", "v", "-j", "1",
                                "-o", str(target), "--output-format", "jsonl", str(data)],
                               opened_a_segment_of(data), stop=stop)
    assert_interrupted(code, err, stop)
    assert sorted(os.listdir(tmp_path)) == [], "an interrupted scan -o left a file behind"


@ONE_PROCESS
def test_scan_search_to_a_file_keeps_the_old_file_on_interrupt(data, tmp_path, stop):
    """With --overwrite the old file stays whole until the new one is complete."""
    target = tmp_path / "matches.jsonl"
    target.write_text("the old results\n")
    code, out, err = interrupt(["scan", "--mode", "search", "--value-contains", "v", "-j", "1", "--overwrite",
                                "-o", str(target), "--output-format", "jsonl", str(data)],
                               opened_a_segment_of(data), stop=stop)
    assert_interrupted(code, err, stop)
    assert sorted(os.listdir(tmp_path)) == ["matches.jsonl"]
    assert target.read_text() == "the old results\n"


@ONE_PROCESS
def test_completions_install_interrupted_while_writing(tmp_path, capsys, monkeypatch, stop):
    """Ctrl-C or SIGTERM while the script is being written (here: at its fsync) leaves the
    old script and no temporary file."""
    target = tmp_path / "plog.bash"
    target.write_text("# the old script\n")

    def interrupted(fd):
        if stop.signal == signal.SIGINT:
            raise KeyboardInterrupt
        os.kill(os.getpid(), stop.signal)  # the handler main() installed raises, as for a real kill
        raise AssertionError(f"{stop} did not stop plog")  # (an internal error: the test fails)

    monkeypatch.setattr(os, "fsync", interrupted)
    ours = signal.getsignal(signal.SIGTERM)
    code, out, err = plog(capsys, "completions", "install", "bash", "--path", str(target))
    assert (code, err) == (stop.code, stop.line + "\n")
    # main() put back the handler it replaced: an embedding process keeps its own.
    assert signal.getsignal(signal.SIGTERM) is ours
    assert sorted(os.listdir(tmp_path)) == ["plog.bash"]
    assert target.read_text() == "# the old script\n"


# The child stops itself inside the console script's main(), as it starts looking up the
# command: a SIGINT that arrives the instant it is continued then lands inside main()'s
# guard, never in this harness between its own lines (which a real console script has too:
# the two lines of its generated wrapper, as narrow a window as Python's own start-up).
_LOADING_CHILD = (
    "import os, signal, sys\n"
    "from plog.cli import entry, registry\n"
    "sys.argv = ['plog', *sys.argv[1:]]\n"
    "look_up = registry.command_module\n"
    "def stopping(args):\n"
    "    os.kill(os.getpid(), signal.SIGSTOP)  # the test continues us, then interrupts\n"
    "    return look_up(args)\n"
    "registry.command_module = stopping\n"
    "entry.main()\n"
)


@pytest.mark.parametrize("delay", [0.0, 0.01, 0.03, 0.06, 0.1, 0.2])
@ONE_PROCESS
def test_ctrl_c_while_the_command_is_still_loading(data, delay, stop):
    """Ctrl-C (or SIGTERM) in the first fraction of a second, while the console script imports
    the CLI and the command's modules: the same one line and exit code, never an import
    traceback. The child stops itself once the console script's ``main()`` runs (a signal
    inside Python's own start-up is Python's business, the same for every Python program), is
    continued, and gets the signal ``delay`` seconds later: somewhere in the imports, or later."""
    segment = data / "broker-1" / "big-0" / "00000000000000000000.log"
    # The segment 20 times: the native renderer dumps one copy in about 0.1 s, and the signal
    # must find the command still at work even at the longest delay.
    p = subprocess.Popen([sys.executable, "-c", _LOADING_CHILD, "dump", "--deep-iteration", "--print-data-log",
                          *[str(segment)] * 20], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, env=child_env())
    deadline = time.monotonic() + 60
    while _state(p.pid) != "T":
        assert p.poll() is None and time.monotonic() < deadline, "the child never stopped itself"
        time.sleep(0.005)
    os.kill(p.pid, signal.SIGCONT)
    time.sleep(delay)
    p.send_signal(stop.signal)
    err = p.communicate(timeout=120)[1].decode(errors="replace")
    assert (p.returncode, err) == (stop.code, stop.line + "\n")


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


@ONE_PROCESS
def test_produce_says_when_closing_after_a_stop_fails(tmp_path, capsys, monkeypatch, stop):
    """A stop, then closing the logs fails (here: the checkpoints cannot be written): the
    failure is said before the stop's own line, not lost behind it."""
    from plog.engine.clients.producer_loop import ProduceLoop
    from plog.engine.errors import LogDirError
    from plog.engine.storage.log_manager import LogManager

    dd = tmp_path / "d"
    _must(["topics", "create", "t", "-d", str(dd)])
    lines = tmp_path / "lines.txt"
    lines.write_text("x\n")

    def stopped(self, source):
        self.producer.send(self.topic, b"accepted")  # a record that makes the close write
        if stop.signal == signal.SIGINT:
            raise KeyboardInterrupt
        os.kill(os.getpid(), stop.signal)
        raise AssertionError(f"{stop} did not stop plog")

    def refused(self):
        raise LogDirError("cannot write the checkpoints of broker-1", path=str(dd / "broker-1"))

    monkeypatch.setattr(ProduceLoop, "run", stopped)
    monkeypatch.setattr(LogManager, "checkpoint", refused)
    code, _out, err = plog(capsys, "produce", "t", "--file", str(lines), "-d", str(dd))
    assert code == stop.code, err
    assert err.splitlines()[-2:] == [f"plog: error: {dd / 'broker-1'}: cannot write the checkpoints of broker-1",
                                     stop.line], err
