"""engine.threads: the writer's fsync and flush threads (in place of concurrent.futures)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from plog.engine.threads import ThreadPool


def test_calls_run_in_order_and_report_their_outcome():
    pool = ThreadPool(1, "t")
    seen = []
    tasks = [pool.submit(seen.append, i) for i in range(50)]
    failing = pool.submit(lambda: 1 / 0)
    after = pool.submit(seen.append, "after")
    assert [t.exception() for t in tasks] == [None] * 50
    assert isinstance(failing.exception(), ZeroDivisionError)
    with pytest.raises(ZeroDivisionError):
        failing.result()
    after.result()
    assert seen == list(range(50)) + ["after"]  # a failing call stops nothing after it
    pool.shutdown()


def test_calls_run_at_the_same_time_up_to_max_workers():
    pool = ThreadPool(3, "t")
    barrier = threading.Barrier(3, timeout=10)
    tasks = [pool.submit(barrier.wait) for _ in range(3)]  # would time out one at a time
    assert [t.exception() for t in tasks] == [None] * 3
    assert len(pool._threads) == 3
    # Idle threads take later calls: no fourth thread.
    more = [pool.submit(time.sleep, 0.01) for _ in range(6)]
    for t in more:
        t.result()
    assert len(pool._threads) == 3
    names = {t.name for t in pool._threads}
    assert names == {"t-0", "t-1", "t-2"}
    pool.shutdown()


def test_shutdown_waits_for_every_call_submitted():
    pool = ThreadPool(2, "t")
    done = []
    for i in range(4):
        pool.submit(lambda i=i: (time.sleep(0.02), done.append(i)))
    pool.shutdown(wait=True)
    assert sorted(done) == [0, 1, 2, 3]
    assert not any(t.is_alive() for t in pool._threads)
    with pytest.raises(RuntimeError, match="shut down"):
        pool.submit(print)


def test_done_and_bad_size():
    pool = ThreadPool(1, "t")
    gate = threading.Event()
    task = pool.submit(gate.wait)
    assert not task.done()
    gate.set()
    task.result()
    assert task.done()
    pool.shutdown()
    with pytest.raises(ValueError, match="at least 1"):
        ThreadPool(0, "t")


def test_a_process_exits_with_a_pool_left_open():
    # Daemon threads: an idle pool never holds the interpreter's exit.
    code = "from plog.engine.threads import ThreadPool\np = ThreadPool(2, 't')\np.submit(print, 'ran').result()\n"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == "ran\n"


def test_produce_does_not_import_concurrent_futures(tmp_path):
    # The point of the module: logging & co. stay out of a produce's start-up.
    code = ("import sys\nfrom plog.engine.clients.producer import Producer\n"
            f"p = Producer({str(tmp_path / 'd')!r}, hold_lock=True)\n"
            "p.send_values('t', [b'x'] * 10000, partition=0)\np.close()\n"
            "print(sorted(m for m in sys.modules if m.startswith(('concurrent', 'logging'))))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_a_thread_that_cannot_start_leaves_nothing_queued(monkeypatch):
    pool = ThreadPool(1, "t")
    real_start = threading.Thread.start

    def refuse(self):
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", refuse)
    with pytest.raises(RuntimeError, match="can't start"):
        pool.submit(print, "never")
    assert not pool._calls and not pool._threads
    monkeypatch.setattr(threading.Thread, "start", real_start)
    done = []
    pool.submit(done.append, 1).result()
    pool.shutdown()
    assert done == [1]


def test_the_switch_interval_is_short_while_any_holder_holds_it(monkeypatch):
    """Nested holders: shortened by the first, put back by the last; an interval changed by
    someone else meanwhile is left as it is."""
    import sys

    from plog.engine import threads

    before = sys.getswitchinterval()
    monkeypatch.setattr(threads, "_switch_holders", 0)
    try:
        sys.setswitchinterval(0.005)
        threads.shorten_switch_interval()
        threads.shorten_switch_interval()
        assert sys.getswitchinterval() == pytest.approx(threads.BACKGROUND_SWITCH_INTERVAL_S)
        threads.restore_switch_interval()
        assert sys.getswitchinterval() == pytest.approx(threads.BACKGROUND_SWITCH_INTERVAL_S)
        threads.restore_switch_interval()
        assert sys.getswitchinterval() == pytest.approx(0.005)
        threads.restore_switch_interval()  # one too many: nothing happens
        assert sys.getswitchinterval() == pytest.approx(0.005)

        threads.shorten_switch_interval()
        sys.setswitchinterval(0.002)  # the application's own choice, made meanwhile
        threads.restore_switch_interval()
        assert sys.getswitchinterval() == pytest.approx(0.002)

        sys.setswitchinterval(0.0001)  # already shorter: left alone, and not "restored"
        threads.shorten_switch_interval()
        assert sys.getswitchinterval() == pytest.approx(0.0001)
        threads.restore_switch_interval()
        assert sys.getswitchinterval() == pytest.approx(0.0001)
    finally:
        sys.setswitchinterval(before)


def test_a_writer_flushing_in_the_background_shortens_the_interval_until_it_closes(tmp_path):
    import sys

    from plog.engine import threads
    from plog.engine.cluster.data_dir import DataDir
    from plog.formats.record_batch import encode_batch

    before = sys.getswitchinterval()
    d = DataDir.init(tmp_path / "d", brokers=1)
    d.create_topic("t", replica_assignment={0: [1]})
    w = d.writer(5)
    w.append(("t", 0), encode_batch([(0, 0, None, b"x")]))
    assert sys.getswitchinterval() == pytest.approx(before)  # no flush thread yet
    assert w.flush_in_background().exception() is None
    assert sys.getswitchinterval() == pytest.approx(min(before, threads.BACKGROUND_SWITCH_INTERVAL_S))
    w.close()
    assert sys.getswitchinterval() == pytest.approx(before)
