"""A read-only view of a live writer's index never faults when the writer trims the file.

The writer trims its active index at roll and close, an index with no entry down to nothing;
a view that had mapped even its first page then died of SIGBUS on the next read (seen as a
consumer process killed by signal 7 while a producer closed). Each case runs in a child, so
that a fault fails the test instead of killing the test process."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent("""
    import sys
    from plog.engine.storage.offset_index import OffsetIndex

    path, entries = sys.argv[1], int(sys.argv[2])
    writer = OffsetIndex(path, 100, max_index_size=1 << 20)
    for i in range(entries):
        writer.append(100 + 10 * i, 4096 * i)
    writer.flush()
    reader = OffsetIndex(path, 100, max_index_size=1 << 20, writable=False)
    reader.live_reader = True
    print(reader.lookup(100 + 10 * entries).offset, flush=True)  # loaded while preallocated
    writer.trim_to_valid_size()  # what a roll or a close does: the file shrinks under the reader
    print(reader.lookup(100 + 10 * entries).offset, flush=True)
    writer.close()
""")


@pytest.mark.parametrize("entries", [0, 1, 600])
def test_a_trimmed_index_under_a_live_reader_reads_without_fault(tmp_path, entries):
    proc = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / "00000000000000000100.index"), str(entries)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    last = 100 + 10 * (entries - 1) if entries else 100
    assert proc.stdout.split() == [str(last), str(last)]
