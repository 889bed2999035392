"""A stop (Ctrl-C, SIGTERM) never cuts a log append in two (plog.engine.interrupts).

The defect these pin: a stop that lands just after the segment write left the bytes past
the log end offset, so the high watermark checkpointed at close hid records that a later
producer then appended after. The stop is raised by the signal handler, in the main thread,
at the next bytecode after the write: exactly what the tests below provoke.
"""

from __future__ import annotations

import os
import random
import signal
import threading

import pytest

from plog.engine.interrupts import uninterrupted
from plog.engine.storage import segment as segment_module
from plog.engine.storage.log import Log
from plog.engine.storage.log_config import LogConfig
from plog.formats.batches import iter_batches
from plog.formats.record_batch import encode_batch

TS = 1700000000000


@pytest.fixture(autouse=True)
def ctrl_c_raises():
    """SIGINT raises KeyboardInterrupt, as in a terminal (pytest-xdist's workers ignore it);
    both stop signals' handlers are put back afterwards."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    for s, h in saved.items():
        signal.signal(s, h)


def _batches(n: int, rnd: random.Random) -> list[bytes]:
    return [encode_batch([(i, TS + i, b"k%d" % i, rnd.randbytes(100)) for i in range(10)]) for _ in range(n)]


@pytest.fixture
def stop_after_write(monkeypatch):
    """The first ``pwrite`` of a segment sends this process ``signum`` once it has written
    (as a Ctrl-C that arrives while the bytes go to the page cache)."""
    armed = {}
    real = os.pwrite

    def pwrite(fd, data, position):
        n = real(fd, data, position)
        signum = armed.pop("signum", None)
        if signum is not None:
            os.kill(os.getpid(), signum)
        return n

    monkeypatch.setattr(segment_module.os, "pwrite", pwrite)
    return armed


@pytest.mark.parametrize("how", ["append_as_leader", "append_batches_as_leader", "append_as_follower"])
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_stop_right_after_the_segment_write_ends_the_append_first(tmp_path, stop_after_write, how, signum):
    rnd = random.Random(7)
    log = Log.open(tmp_path / "t-0", LogConfig())
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)  # the CLI's: a KeyboardInterrupt
    try:
        log.append_batches_as_leader(_batches(3, rnd))
        leo = log.log_end_offset
        follower_bytes = encode_batch([(leo, TS, b"f", b"v")], base_offset=leo)
        stop_after_write["signum"] = signum
        with pytest.raises(KeyboardInterrupt):
            if how == "append_as_leader":
                log.append_as_leader(_batches(1, rnd)[0], flush=False)
            elif how == "append_batches_as_leader":
                log.append_batches_as_leader(_batches(4, rnd))
            else:
                log.append_as_follower(follower_bytes, flush=False)
        assert "signum" not in stop_after_write, "the stop was not sent"
        # Every byte in the segment is below the log end offset: the append ended whole.
        segment = log.active_segment
        with open(segment.log_path, "rb") as f:
            on_disk = list(iter_batches(f.read()))
        assert on_disk[-1].next_offset == log.log_end_offset
        assert segment.size == os.path.getsize(segment.log_path)
        assert log.high_watermark == log.log_end_offset
        # The handlers are back where they were.
        assert signal.getsignal(signal.SIGTERM) is signal.default_int_handler
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGTERM, previous)
        log.close()
    reopened = Log.open(tmp_path / "t-0", LogConfig())
    try:
        assert reopened.log_end_offset == log.log_end_offset
    finally:
        reopened.close()


def test_a_stop_waits_for_the_end_and_is_raised_once():
    with pytest.raises(KeyboardInterrupt):
        with uninterrupted():
            with uninterrupted():  # nested: the outermost end delivers
                os.kill(os.getpid(), signal.SIGINT)
                os.kill(os.getpid(), signal.SIGINT)
                reached = True
            assert reached
            inner_end_reached = True
    assert inner_end_reached
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_stop_delivered_to_another_thread_still_waits():
    """The kernel may pick any thread for a process-directed signal (the writer's fsync
    pool): the Python handler still runs in the main thread, and is held there."""
    hit = []
    done = threading.Event()

    def handler(signum, frame):
        hit.append(signum)

    old_term = signal.signal(signal.SIGTERM, handler)
    try:
        with uninterrupted():
            t = threading.Thread(target=lambda: (os.kill(os.getpid(), signal.SIGTERM), done.set()))
            t.start()
            t.join()
            done.wait(5)
            for _ in range(1000):  # bytecodes the handler could have run between
                pass
            assert hit == []
        assert hit == [signal.SIGTERM]
        assert signal.getsignal(signal.SIGTERM) is handler
    finally:
        signal.signal(signal.SIGTERM, old_term)


def test_ignored_signals_stay_ignored():
    old = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        with uninterrupted():
            os.kill(os.getpid(), signal.SIGTERM)
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGTERM, old)


def test_outside_the_main_thread_it_changes_nothing():
    seen = []

    def body():
        with uninterrupted():
            seen.append(signal.getsignal(signal.SIGINT))

    t = threading.Thread(target=body)
    t.start()
    t.join()
    assert seen == [signal.default_int_handler]


# -- opening and closing the logs --------------------------------------------------------------


def _clean_dir(tmp_path):
    from plog.engine.storage.log_manager import LogManager

    d = tmp_path / "broker-1"
    rnd = random.Random(3)
    with LogManager([d]) as lm:
        for p in range(4):
            lm.get_or_create_log(("t", p)).append_batches_as_leader(_batches(3, rnd))
    return d


def _untrimmed_indexes(d) -> list[str]:
    """Index files of the folder's logs that are not trimmed to their entries (a log that was
    opened for writing and not closed: its active indexes are preallocated)."""
    return [f"{p.parent.name}/{p.name}" for p in sorted(d.glob("t-*/*index")) if p.stat().st_size > 1 << 16]


def test_a_stop_while_a_clean_directory_loads_leaves_it_clean(tmp_path, monkeypatch):
    """The stop lands after two of the four logs were opened (their indexes preallocated,
    the marker deleted): they are closed again and the marker is back."""
    from plog.engine.storage import log_manager as lm_module

    d = _clean_dir(tmp_path)
    real = lm_module.LogManager._open_log_unheld
    opened = []

    def open_then_stop(self, *args):
        if len(opened) == 2:
            raise KeyboardInterrupt
        opened.append(real(self, *args))
        return opened[-1]

    monkeypatch.setattr(lm_module.LogManager, "_open_log_unheld", open_then_stop)
    with pytest.raises(KeyboardInterrupt):
        lm_module.LogManager([d])  # not lazy: every log is opened at start-up
    monkeypatch.undo()
    assert len(opened) == 2
    assert (d / ".kafka_cleanshutdown").exists()
    assert _untrimmed_indexes(d) == []
    with lm_module.LogManager([d]) as lm:  # the lock was given back; the next start is clean
        assert lm.report.clean_shutdown[str(d.resolve())] is True
        assert not any(r.recovered_segments for r in lm.report.logs)
        assert [lm.get_log(("t", p)).log_end_offset for p in range(4)] == [30] * 4


def test_a_stop_while_an_unclean_directory_loads_leaves_it_unclean(tmp_path, monkeypatch):
    from plog.engine.storage import log_manager as lm_module

    d = _clean_dir(tmp_path)
    (d / ".kafka_cleanshutdown").unlink()  # as after a crash: the start-up recovers
    monkeypatch.setattr(lm_module.LogManager, "_open_log_unheld",
                        lambda self, *args: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        lm_module.LogManager([d])
    monkeypatch.undo()
    assert not (d / ".kafka_cleanshutdown").exists()
    with lm_module.LogManager([d]) as lm:
        assert lm.report.clean_shutdown[str(d.resolve())] is False


def test_a_manager_a_stop_orphaned_is_closed_with_the_writer(tmp_path, monkeypatch):
    """The stop lands after the writer's LogManager was built and before the writer keeps
    it: closing the writer still closes it (the clean-shutdown marker is written)."""
    from plog.engine.cluster import writer as writer_module
    from plog.engine.cluster.data_dir import DataDir

    dd = DataDir.init(tmp_path / "d")
    dd.create_topic("t", 1, 1)
    broker = tmp_path / "d" / "broker-1"
    real = writer_module.LogManager

    class Orphaned(real):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            raise KeyboardInterrupt  # the instant after the constructor

    writer = dd.writer()
    monkeypatch.setattr(writer_module, "LogManager", Orphaned)
    with pytest.raises(KeyboardInterrupt):
        writer.append(("t", 0), _batches(1, random.Random(1))[0])
    monkeypatch.undo()
    assert not (broker / ".kafka_cleanshutdown").exists()  # the orphan holds the directory
    writer.close()
    assert (broker / ".kafka_cleanshutdown").exists()
    with dd.writer() as again:  # and its lock was given back
        again.append(("t", 0), _batches(1, random.Random(2))[0], flush=True)


@pytest.mark.parametrize("when", ["entering", "leaving"])
def test_a_stop_in_the_middle_of_the_handler_swap_is_not_dropped(monkeypatch, when):
    """Python runs a handler right after a call returns: a stop that arrives as the handlers
    are swapped in (or back) must still stop the program, once."""
    from plog.engine import interrupts

    real = interrupts._handlers.signal  # what uninterrupted swaps the handlers with
    fired = []

    def swap(signum, handler):
        old = real(signum, handler)
        entering = handler is interrupts._note
        if signum == signal.SIGTERM and not fired and entering == (when == "entering"):
            fired.append(signum)
            os.kill(os.getpid(), signal.SIGTERM)  # its handler runs before this call returns
        return old

    hits = []

    def handler(signum, frame):
        hits.append(signum)
        raise KeyboardInterrupt

    old_term = real(signal.SIGTERM, handler)
    monkeypatch.setattr(interrupts._handlers, "signal", swap)
    try:
        with pytest.raises(KeyboardInterrupt):
            with uninterrupted():
                body_ran = True
        assert body_ran and fired == [signal.SIGTERM] and hits == [signal.SIGTERM]
    finally:
        monkeypatch.undo()
        real(signal.SIGTERM, old_term)
