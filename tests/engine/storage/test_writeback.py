"""``file_records.start_writeback`` and ``WritebackTrail``: the writeback a follower catching
up starts along the way. It changes when bytes reach the disk, never which bytes a file
holds; the trail asks for the ranges it should (behind the end, a step at a time, only on the
segment last appended to)."""

from __future__ import annotations

import os

import pytest

from plog.engine.storage import file_records
from plog.engine.storage.file_records import WritebackTrail, start_writeback


def test_start_writeback_leaves_the_file_as_it_is(tmp_path):
    path = tmp_path / "f"
    data = os.urandom(3 << 20)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, data, 0)
        for position, size in ((0, 1 << 20), (1 << 20, 2 << 20), (0, 0), (5 << 20, 1 << 20), (0, 8 << 20)):
            start_writeback(fd, position, size)  # past the end or empty: nothing to do, no error
        os.pwrite(fd, b"x", len(data))  # still writable, then durable as ever
        os.fsync(fd)
    finally:
        os.close(fd)
    assert path.read_bytes() == data + b"x"


def test_start_writeback_ignores_a_closed_descriptor(tmp_path):
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT, 0o644)
    os.close(fd)
    start_writeback(fd, 0, 4096)  # EBADF is the fsync's to report, not the hint's


class _Segment:
    def __init__(self, fd: int, size: int = 0):
        self._fd = fd
        self.size = size

    def append(self, n: int) -> int:
        self.size += n
        return n


@pytest.fixture
def calls(monkeypatch):
    out = []
    monkeypatch.setattr(file_records, "start_writeback", lambda fd, pos, size: out.append((fd, pos, size)))
    return out


def test_trail_starts_writeback_a_lag_behind_the_end_a_step_at_a_time(calls):
    seg = _Segment(7, size=1000)  # what it held before the run is not the trail's
    trail = WritebackTrail(lag=100, step=50, background=False)
    for n in (60, 60, 60, 60, 60):  # end 1060, 1120, 1180, 1240, 1300
        trail.appended(seg, seg.append(n))
    # behind the end by the lag: 1020 (under a step), 1080 (80 from 1000), 1140 (60), 1200 (60)
    assert calls == [(7, 1000, 80), (7, 1080, 60), (7, 1140, 60)]


def test_trail_starts_again_on_a_new_segment_and_after_a_truncation(calls):
    trail = WritebackTrail(lag=10, step=10, background=False)
    a = _Segment(3)
    trail.appended(a, a.append(100))
    b = _Segment(4)  # a roll: the trail moves to the new segment, from where this append began
    trail.appended(b, b.append(5))  # 0 behind the lag: nothing yet
    trail.appended(b, b.append(45))
    b.size = 2  # truncated below where the trail stood
    trail.appended(b, b.append(30))
    trail.appended(a, a.append(5))  # an older segment object (never, in a log): from this append on
    assert calls == [(3, 0, 90), (4, 0, 40), (4, 2, 20)]


def test_the_trail_makes_its_calls_on_the_writeback_thread(tmp_path, monkeypatch):
    """By default the calls run on a thread of their own, each on a duplicate of the
    segment's descriptor (closed after it): the same file and ranges, in order, even when
    the segment's own descriptor is closed before the call is made."""
    import threading

    out = []

    def record(fd, pos, size):
        out.append((os.fstat(fd).st_ino, pos, size, threading.current_thread().name))

    monkeypatch.setattr(file_records, "start_writeback", record)
    path = tmp_path / "seg"
    path.write_bytes(b"")
    fd = os.open(path, os.O_RDWR)
    seg = _Segment(fd)
    trail = WritebackTrail(lag=100, step=50)
    for n in (60, 60, 60, 60, 60):
        trail.appended(seg, seg.append(n))
    os.close(fd)
    file_records.writeback_submitted()
    ino = path.stat().st_ino
    assert out == [(ino, 0, 80, "plog-writeback"), (ino, 80, 60, "plog-writeback"), (ino, 140, 60, "plog-writeback")]
