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


def test_a_consumers_view_maps_no_index_from_its_load_on(tmp_path, monkeypatch):
    """``DataDir.open_reader`` (a consumer's view) reads every index as a copy, including
    the reads its own load makes (the log end offset, from the active segment's index): a
    map taken during the load faulted when the writer trimmed the index before the load's
    lookup (a consumer process killed by SIGBUS while another process produced)."""
    import mmap

    from plog.engine.cluster.data_dir import DataDir
    from plog.engine.storage import abstract_index
    from plog.formats.record_batch import encode_batch

    dd = DataDir.init(tmp_path / "d", brokers=1)
    dd.create_topic("t", replica_assignment={0: [1]}, configs={"index.interval.bytes": "1"})
    w = dd.writer(5)
    for i in range(20):  # a live writer: its active index preallocated, entries in it
        w.append(("t", 0), encode_batch([(0, 1_700_000_000_000 + i, None, b"v%d" % i)]))
    w.flush()
    maps = []

    class Recording(mmap.mmap):
        def __new__(cls, fd, length, *args, **kwargs):
            maps.append(length)
            return super().__new__(cls, fd, length, *args, **kwargs)

    monkeypatch.setattr(abstract_index.mmap, "mmap", Recording)
    view = dd.open_reader(("t", 0))
    try:
        assert view.log_end_offset == 20
        assert view.active_segment.translate_offset(7).offset == 7
        assert maps == []  # copies only, from the load on
    finally:
        view.close()
        monkeypatch.undo()
        w.close()
