"""Many partitions through the real ``plog`` (issue 21, item 1): under ``ulimit -n 1024``,
20,000 partitions are created, produced to, verified and consumed; an absurd partition count
is refused before anything is written, with one line naming the limit; a topic's creation
shows progress on a terminal and, interrupted, leaves no trace.

Every child runs with its soft ``RLIMIT_NOFILE`` set to 1024 (``resource.setrlimit`` in the
child before it starts, as ``ulimit -n 1024`` does), the common default that 500 partitions
used to exhaust.
"""

from __future__ import annotations

import errno
import json
import os
import pty
import resource
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cli_fixtures import child_env, plog_exe  # noqa: E402
from cli_run import tree_digest  # noqa: E402

NOFILE = 1024
PARTITIONS = 20_000


def _limit() -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(NOFILE, hard), hard))


def plog_limited(*args, stdin: bytes | None = None, timeout: float = 900, stderr_tty: bool = False):
    """``plog ARGS`` as a child under ``ulimit -n 1024``: (exit code, stdout, stderr)."""
    argv = [plog_exe(), *map(str, args)]
    if stderr_tty:
        return _run_with_stderr_on_a_tty(argv, timeout)
    p = subprocess.run(argv, input=stdin, stdin=None if stdin is not None else subprocess.DEVNULL,
                       capture_output=True, env=child_env(), timeout=timeout, preexec_fn=_limit)
    return p.returncode, p.stdout, p.stderr


def _run_with_stderr_on_a_tty(argv, timeout: float):
    """The child's stderr is a pseudo-terminal (where progress bars go), stdout a pipe."""
    master, slave = pty.openpty()
    try:
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave,
                             env=child_env(), preexec_fn=_limit)
    finally:
        os.close(slave)
    err = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if not ready:
                if p.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError as e:
                if e.errno == errno.EIO:  # every slave descriptor closed: the child exited
                    break
                raise
            if not chunk:
                break
            err += chunk
        out = p.stdout.read()
        code = p.wait(timeout=60)
    finally:
        os.close(master)
        if p.poll() is None:
            p.kill()
            p.wait()
    return code, out, bytes(err)


def _must(*args, stdin: bytes | None = None) -> bytes:
    code, out, err = plog_limited(*args, stdin=stdin)
    assert code == 0, f"plog {' '.join(map(str, args))}: exit {code}: {err.decode(errors='replace')}"
    return out


def _topic_folders(dd: Path, topic: str) -> list[str]:
    return sorted(f"{b.name}/{e}" for b in dd.glob("broker-*") for e in os.listdir(b) if e.startswith(f"{topic}-"))


@pytest.mark.slow
def test_twenty_thousand_partitions_under_ulimit_1024(tmp_path):
    """Create 20,000 partitions, produce one record to each, verify the directory and consume
    every record, each command a process that may open 1024 files (a writer of them all used
    to need 60,000: a .log and two index maps each). About 65 s on an idle 2-core machine with
    an SSD, most of it the produce: each partition's first append is made durable as Kafka
    makes it (leader-epoch checkpoint, producer snapshot, log flush: six fsyncs)."""
    dd = tmp_path / "plog-data"
    d = ["-d", dd]
    _must("init", *d)
    _must("topics", "create", "many", "-p", PARTITIONS, *d)
    assert len(_topic_folders(dd, "many")) == PARTITIONS
    lines = "".join(json.dumps({"partition": p, "value": f"v{p}"}) + "\n" for p in range(PARTITIONS))
    _must("produce", "many", "-i", "jsonl", "-q", *d, stdin=lines.encode())
    code, out, err = plog_limited("verify", "-q", dd)
    assert code == 0, (out + err).decode(errors="replace")[-2000:]
    out = _must("consume", "many", "-e", "-q", "-f", "jsonl", *d)
    got = {}
    for line in out.decode().splitlines():
        rec = json.loads(line)
        got.setdefault(rec["partition"], []).append((rec["offset"], rec["value"]))
    assert got == {p: [(0, f"v{p}")] for p in range(PARTITIONS)}


def test_an_absurd_partition_count_is_refused_before_anything_is_written(tmp_path):
    """100,000,000 partitions need 500,000,000 inodes (and a disk's worth of folders): one line
    naming what is needed and what is free, exit 1, and not a byte written; the same for
    adding them to a topic. (Exit 1, not 2: the count is a valid Kafka partition count, and
    whether it fits is a fact of the data directory's file system, as a full disk is.)"""
    dd = tmp_path / "plog-data"
    _must("init", "-d", dd)
    _must("topics", "create", "t", "-d", dd)
    before = tree_digest(dd)
    for args, what in ((["topics", "create", "huge", "-p", "100000000"], "creating 100000000 partitions of topic huge"),
                       (["topics", "alter", "t", "-p", "100000001"], "adding 100000000 partitions to topic t")):
        code, out, err = plog_limited(*args, "-d", dd)
        text = err.decode()
        assert code == 1 and out == b"", text
        assert text.count("\n") == 1 and text.startswith(f"plog: error: {what} needs "), text
        assert "are free on the file system of " in text and text.endswith("; nothing was written\n"), text
        vfs = os.statvfs(dd)
        if vfs.f_files:
            assert f"needs {100000000 * 5} inodes" in text, text
    assert tree_digest(dd) == before


def test_creating_many_partitions_shows_progress_on_a_terminal(tmp_path):
    dd = tmp_path / "plog-data"
    _must("init", "-d", dd)
    code, out, err = plog_limited("topics", "create", "t", "-p", "3000", "-d", dd, stderr_tty=True)
    text = err.decode(errors="replace")
    assert code == 0, text
    assert "Creating partitions" in text and "/3000" in text and "partitions" in text
    assert text.rstrip().endswith("Created topic t with 3000 partition(s), replication factor 1."), text
    # Not on a pipe.
    code, out, err = plog_limited("topics", "create", "u", "-p", "3000", "-d", dd)
    assert code == 0 and err == b"Created topic u with 3000 partition(s), replication factor 1.\n", err


def test_ctrl_c_while_creating_many_partitions_leaves_no_trace(tmp_path):
    """SIGINT while the folders are being made: exit 130, one line, and neither the metadata
    nor any broker directory holds anything of the topic (no folder under any name); the
    same command then works."""
    dd = tmp_path / "plog-data"
    _must("init", "--brokers", "2", "-d", dd)
    _must("topics", "create", "kept", "-p", "3", "-r", "2", "-d", dd)
    before = tree_digest(dd)
    p = subprocess.Popen([plog_exe(), "topics", "create", "big", "-p", "20000", "-r", "2", "-d", str(dd)],
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env(),
                         preexec_fn=_limit, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while len([e for e in os.listdir(dd / "broker-1") if e.startswith("big-")]) < 200:
            assert p.poll() is None, p.stderr.read().decode(errors="replace")
            assert time.monotonic() < deadline, "no partition folder appeared"
            time.sleep(0.005)
        # Ctrl-C at this very instant (as tests/cli/test_interrupt.py does it).
        os.killpg(p.pid, signal.SIGSTOP)
        os.killpg(p.pid, signal.SIGINT)
        os.killpg(p.pid, signal.SIGCONT)
        out, err = p.communicate(timeout=300)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert p.returncode == 130 and err == b"plog: interrupted\n", err
    assert _topic_folders(dd, "big") == []
    assert "big" not in json.loads((dd / "cluster.json").read_text())["topics"]
    after = tree_digest(dd)
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    # What a writer rewrites whenever it takes and gives back a broker directory, no more.
    assert set(changed) <= {f"broker-{b}/{name}" for b in (1, 2) for name in (
        "recovery-point-offset-checkpoint", "replication-offset-checkpoint", "log-start-offset-checkpoint",
        ".kafka_cleanshutdown", ".plog-topics.json", ".lock")}, changed
    code, out, err = plog_limited("topics", "list", "-f", "json", "-d", dd)
    assert [t["topic"] for t in json.loads(out)] == ["kept"]
    _must("topics", "create", "big", "-p", "10", "-r", "2", "-d", dd)
    assert len(_topic_folders(dd, "big")) == 20
