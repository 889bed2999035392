"""A line longer than the produce loop reads (``producer_loop.line_limit``): refused as an
input error naming it, once that many of its bytes are read, on both paths alike, with the
lines before it sent; and a line that never ends (``/dev/zero``, binary input on a pipe)
takes bounded memory instead of all of it.

The twins run with a small floor (``MIN_LINE_LIMIT``) so that the limit is a few KiB; the
command-line cases run the real limit (64 MiB) in a child process, whose peak memory they
check.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "native"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from cli_run import plog_exe  # noqa: E402
from test_produce_twins import _loop, _run_both, native_module  # noqa: E402,F401

from plog.engine.clients import producer_loop  # noqa: E402
from plog.engine.clients.console_io import LineParser  # noqa: E402
from plog.engine.clients.producer_loop import _LineTooLong, lines_of  # noqa: E402

LIMIT = 5000  # the floor the twins run with; max.request.size 1000 makes 4 x 1000 lower


@pytest.fixture
def small_limit(monkeypatch):
    monkeypatch.setattr(producer_loop, "MIN_LINE_LIMIT", LIMIT)


def _lines_around(long_line: bytes, *, keyed: bool, end: bytes = b"\n", after: bool = True) -> bytes:
    key = b"k:" if keyed else b""
    before = b"".join(key + b"v%d\n" % i for i in range(700))
    rest = b"".join(key + b"w%d\n" % i for i in range(300)) if after else b""
    return before + long_line + (end + rest if after else b"")


@pytest.mark.parametrize("keyed", [False, True])
@pytest.mark.parametrize("length,end,after", [
    (LIMIT + 1, b"\n", True),  # one byte too long, with more lines after it
    (LIMIT + 1, b"\r\n", True),
    (3 * LIMIT, b"\n", True),
    (LIMIT + 1, b"", False),  # the last line, without a line break
    (100 * LIMIT, b"", False),
])
def test_a_line_longer_than_the_limit(tmp_path, native_module, small_limit, keyed, length, end, after):  # noqa: F811
    line = (b"k:" if keyed else b"") + b"x" * (length - 2 * keyed)
    parser = LineParser(parse_key=True, key_separator=b":") if keyed else LineParser()
    _, outcome = _run_both(tmp_path, native_module, {"t": 2}, _loop(_lines_around(line, keyed=keyed, end=end, after=after), parser),
                           max_request_size=1000)
    name, message, line_number = outcome
    assert name == "InputRecordError"
    assert message.startswith(f"line 701: longer than {LIMIT} bytes, the longest line produce reads")
    assert line_number == 700  # the lines before it were read (and sent: the trees are equal)


@pytest.mark.parametrize("keyed", [False, True])
def test_a_line_at_the_limit_is_read(tmp_path, native_module, small_limit, keyed):  # noqa: F811
    """Exactly the limit (line break not counted, "\\r" is): read, then too large for a
    request, as any line between max.request.size and the limit."""
    line = (b"k:" if keyed else b"") + b"x" * (LIMIT - 1 - 2 * keyed) + b"\r"
    parser = LineParser(parse_key=True, key_separator=b":") if keyed else LineParser()
    _, outcome = _run_both(tmp_path, native_module, {"t": 2}, _loop(_lines_around(line, keyed=keyed), parser),
                           max_request_size=1000)
    assert outcome[0] == "RecordTooLargeError"


def test_lines_of_stops_at_the_limit():
    """The reference reader never holds more than limit + 1 bytes of a line."""
    reads = []

    class Source(io.BytesIO):
        def readline(self, size=-1):
            line = super().readline(size)
            reads.append(len(line))
            return line

    lines = lines_of(Source(b"a\n" + b"y" * 10_000), limit=100)
    assert next(lines) == b"a\n"
    with pytest.raises(_LineTooLong):
        next(lines)
    assert max(reads) == 101


# Runs argv[1:] with the standard streams inherited; prints its exit code and peak RSS (KiB):
# a process of its own, so the children's peak is this one child's.
_MEASURE = """
import resource, subprocess, sys
code = subprocess.call(sys.argv[1:])
print(code, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def _run_cli(args, *, stdin=None, native: bool):
    """``plog ARGS`` in a child: (exit code, stderr, its peak RSS in MiB)."""
    env = {**os.environ, "PLOG_NATIVE": "1" if native else "0"}
    r = subprocess.run([sys.executable, "-c", _MEASURE, plog_exe(), *args], stdin=stdin, capture_output=True,
                       env=env, timeout=120)
    code, peak_kib = r.stdout.split()
    return int(code), r.stderr.decode(), int(peak_kib) / 1024


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize("how", ["file", "pipe"])
def test_endless_input_is_refused_in_bounded_memory(tmp_path, native, how):
    """``/dev/zero`` named as the file (a character device: read as a pipe is), and lines
    then binary zeros on a real pipe: exit 1 with one line naming the line, the lines before
    it produced, and a few times the 64 MiB limit of memory at most (before, both grew
    until the machine ran out)."""
    data = tmp_path / "data"
    if how == "file":
        code, err, peak = _run_cli(["produce", "t", "--file", "/dev/zero", "-d", str(data)], native=native)
        first = 1
    else:
        feeder = subprocess.Popen(["sh", "-c", "printf 'a\\nb\\n'; exec head -c 200000000 /dev/zero"],
                                  stdout=subprocess.PIPE)
        try:
            code, err, peak = _run_cli(["produce", "t", "-d", str(data)], stdin=feeder.stdout, native=native)
        finally:
            feeder.stdout.close()
            feeder.kill()
            feeder.wait()
        first = 3
    assert code == 1, err
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"plog: error: line {first}: longer than {64 << 20} bytes"), err
    if first == 3:
        assert "produced 2 record(s)" in last
    assert peak < 512, f"peak RSS {peak:.0f} MiB"
