"""engine.workers: a stop (SIGINT, SIGTERM) never leaves the worker pool waiting for ever.

concurrent.futures' pool hangs when a worker dies in the middle of writing its result into the
pool's pipe: the reader waits for the rest of a message nobody will write. Each case runs in a
child process with a deadline, so a hang fails the test instead of stopping the suite."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent("""
    import os, signal, sys, time
    from plog.engine import workers
    from plog.engine.workers import WorkerPool

    def result(n, marker=None):
        if marker:  # started: the parent may now hold the GIL while this builds and sends
            open(marker, "w").close()
            time.sleep(0.5)
        return b"x" * n

    def slow(marker):
        open(marker, "w").close()
        time.sleep(60)
        return "done"

    def spin(seconds):
        # Hold the GIL (no system call, a long switch interval): the pool's reader thread
        # cannot take the worker's result out of the pipe meanwhile.
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            pass

    case, how, scratch = sys.argv[1], sys.argv[2], sys.argv[3]
    if how == "exit-at-once":  # what plog's workers did before: os._exit from the handler
        workers._on_stop = lambda signum, frame: os._exit(128 + signum)
    pool = WorkerPool(1)
    pool.submit(result, 1).result()  # the worker is up, its handlers installed
    pid = next(iter(pool._executor._processes))
    if case == "while-sending":
        marker = os.path.join(scratch, "sending")
        future = pool.submit(result, 1 << 26, marker)
        while not os.path.exists(marker):
            time.sleep(0.01)
        sys.setswitchinterval(1000)
        spin(3)  # the worker has filled the pipe with the start of its result and waits
        os.kill(pid, signal.SIGTERM)
        sys.setswitchinterval(0.005)
        try:
            print(len(future.result()), flush=True)
        except BaseException as e:
            print(type(e).__name__, flush=True)
    else:  # "while-running": the task ends at once, its KeyboardInterrupt comes back whole
        marker = os.path.join(scratch, "started")
        future = pool.submit(slow, marker)
        while not os.path.exists(marker):
            time.sleep(0.01)
        os.kill(pid, signal.SIGINT)
        try:
            print(future.result(), flush=True)
        except KeyboardInterrupt:
            print("KeyboardInterrupt", flush=True)
    pool.shutdown()
    print("shut down", flush=True)
""")


def run(tmp_path, case: str, how: str = "plog", timeout: float = 60) -> str:
    """The child's output; TimeoutExpired if it hangs (its whole process group is killed:
    no worker outlives the test)."""
    p = subprocess.Popen([sys.executable, "-c", CHILD, case, how, str(tmp_path)], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        return p.communicate(timeout=timeout)[0]
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()


def test_a_stop_while_a_worker_sends_its_result_lets_the_result_through(tmp_path):
    assert run(tmp_path, "while-sending").split() == [str(1 << 26), "shut", "down"]


def test_a_stop_while_a_worker_runs_its_task_ends_the_task_at_once(tmp_path):
    assert run(tmp_path, "while-running", timeout=30).split() == ["KeyboardInterrupt", "shut", "down"]


def test_the_old_way_of_stopping_workers_hangs_the_pool(tmp_path):
    """Why engine.workers exists: a worker that exits in the middle of its result hangs the pool."""
    with pytest.raises(subprocess.TimeoutExpired):
        run(tmp_path, "while-sending", "exit-at-once", timeout=20)


QUEUE_CHILD = textwrap.dedent("""
    import multiprocessing, sys
    from plog.engine.workers import WorkerPool

    queue = multiprocessing.get_context("fork").SimpleQueue()

    def chatty(n):
        for i in range(n):  # far more than a pipe holds (64 KiB)
            queue.put(("progress", i))
        return n

    got = []
    def drain():
        while not queue.empty():
            got.append(queue.get())

    pool = WorkerPool(1, mp_context=multiprocessing.get_context("fork"))
    future = pool.submit(chatty, 20_000)
    # The parent stops (as on SIGTERM sent to it alone) while the worker, never signalled,
    # goes on writing progress: shutting down must keep reading it.
    pool.shutdown(while_waiting=drain if sys.argv[1] == "drain" else None)
    drain()
    print(future.result(), len(got), flush=True)
""")


def test_shutting_down_keeps_reading_what_running_tasks_report(tmp_path):
    out = subprocess.run([sys.executable, "-c", QUEUE_CHILD, "drain"], capture_output=True, text=True,
                         timeout=60).stdout
    assert out.split() == ["20000", "20000"]


def test_shutting_down_without_reading_a_full_progress_queue_hangs(tmp_path):
    """Why shutdown takes ``while_waiting``: recover -j's progress queue filled and the pool
    waited for ever on a worker blocked writing into it."""
    p = subprocess.Popen([sys.executable, "-c", QUEUE_CHILD, "none"], stdout=subprocess.DEVNULL,
                         start_new_session=True)
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            p.wait(timeout=15)
    finally:
        os.killpg(p.pid, signal.SIGKILL)  # the parent and its blocked worker
        p.wait()


THREADS_CHILD = textwrap.dedent("""
    import sys, threading
    from concurrent.futures.process import _ExecutorManagerThread
    from plog.engine.workers import WorkerPool

    with WorkerPool(2) as pool:
        total = sum(f.result() for f in [pool.submit(pow, 2, n) for n in range(8)])
        if sys.argv[1] == "while-waiting":
            pool.shutdown(while_waiting=lambda: None)
    print(total,
          sum(isinstance(t, _ExecutorManagerThread) for t in threading.enumerate()), flush=True)
""")


@pytest.mark.parametrize("how", ["plain", "while-waiting"])
def test_leaving_the_pool_leaves_no_pool_thread_behind(how):
    """A pool thread still running at exit races the interpreter's exit hook, which then
    prints "Exception ignored ... Bad file descriptor" (seen after `plog verify`)."""
    proc = subprocess.run([sys.executable, "-c", THREADS_CHILD, how], capture_output=True, text=True, timeout=60)
    assert proc.stdout.split() == ["255", "0"]
    assert proc.stderr == ""
