"""Worker processes for the commands that fan out (``verify -j``, ``scan -j``, ``recover -j``):
one pool recipe, and what Ctrl-C and SIGTERM do to it.

Why a recipe of our own around ``concurrent.futures.ProcessPoolExecutor``: the pool hangs for
ever when a worker dies while it writes a result into the pool's pipe. The pool's manager
thread then waits for the rest of a message nobody will write (the parent holds the pipe's
write end too, so no end of file comes), and the parent's ``shutdown`` (and the interpreter's
exit, which joins that thread) waits with it. A terminal's Ctrl-C and systemd's SIGTERM reach
every process of the group, so a worker must never die in the middle of that write.

What a worker does on SIGINT or SIGTERM, then (:func:`_on_stop`):

* while it runs a task (plog's own code, inside :func:`_call`): it raises
  ``KeyboardInterrupt`` there, so the task ends at once; the pool sends the exception back to
  the parent as one whole message, like any result;
* at any other moment (waiting for a task, sending a result): it only notes the request and
  goes on; the parent, stopping as well, cancels every task not started, and the worker exits
  at its next step, when the pool tells it to.

A task that writes into a queue of its own (progress counts) does so inside :class:`held`, so
a stop cannot cut that message either. What a worker was doing when it stopped ends as a crash
would end it: recovery and compaction are crash-safe, verify and scan only read.

Invariant: every result, exception and queue message crosses the pipe whole, so the pool's
``shutdown(wait=True)`` returns once the tasks running when the stop came have ended.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor

__all__ = ["WorkerPool", "held"]

_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

#: In a worker: whether plog's own task code is running (a stop may raise there), and
#: whether a stop was asked for (a task that starts afterwards ends at once).
_in_task = False
_stop_requested = False


class held:
    """Context manager: SIGINT and SIGTERM are held (blocked) for its duration and delivered
    when it ends. Used around what a signal must not cut in two: forking the workers (a
    ``KeyboardInterrupt`` raised inside an at-fork callback is printed as "Exception ignored"
    and lost) and a worker's write into a queue. Main thread only; elsewhere a no-op."""

    def __enter__(self):
        self._old = None
        if threading.current_thread() is threading.main_thread():
            self._old = signal.pthread_sigmask(signal.SIG_BLOCK, set(_STOP_SIGNALS))
        return self

    def __exit__(self, *exc) -> None:
        if self._old is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, self._old)


def _on_stop(signum, _frame) -> None:
    global _stop_requested
    _stop_requested = True
    if _in_task:
        raise KeyboardInterrupt


def _init(initializer, initargs) -> None:
    """Every worker's initializer: the stop handler (replacing the one inherited through
    fork, which would print a traceback or exit mid-write), then the caller's."""
    for signum in _STOP_SIGNALS:
        signal.signal(signum, _on_stop)
    if initializer is not None:
        initializer(*initargs)
    # The workers were forked while the parent held the signals (WorkerPool.submit): a stop
    # that came meanwhile is pending here and is noted now.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, set(_STOP_SIGNALS))


def _call(fn, args):
    """Run one task in a worker, where a stop may interrupt it (see the module docstring)."""
    global _in_task
    _in_task = True
    try:
        if _stop_requested:
            raise KeyboardInterrupt
        return fn(*args)
    finally:
        _in_task = False


class WorkerPool:
    """``jobs`` worker processes, used as a context manager: leaving it (normally, on an
    error, or on Ctrl-C) cancels the tasks not started and waits for the running ones, which
    a stop ends at once. ``initializer(*initargs)`` runs in each worker first, as for
    ``ProcessPoolExecutor``."""

    def __init__(self, jobs: int, *, initializer=None, initargs=(), mp_context=None):
        self._executor = ProcessPoolExecutor(max_workers=jobs, mp_context=mp_context, initializer=_init,
                                             initargs=(initializer, tuple(initargs)))

    def submit(self, fn, *args) -> Future:
        """``fn(*args)`` in a worker. The first submits fork the workers: signals are held
        meanwhile (see :class:`held`)."""
        with held():
            return self._executor.submit(_call, fn, args)

    def shutdown(self, while_waiting: Callable[[], None] | None = None) -> None:
        """Cancel the tasks not started and wait for the running ones; when it returns, no
        thread of the pool is left running. ``while_waiting`` is called every few
        milliseconds meanwhile: a caller whose tasks write into a queue of its own must keep
        reading it, or a worker that was not stopped (``kill PID`` reaches the parent only)
        blocks on a full pipe and the wait never ends."""
        # The pool cancels what has not started (not Future.cancel(): on Python 3.11 a pool
        # broken by Ctrl-C then fails to set the error on those futures, and its manager
        # thread prints a traceback). One call with wait=True: after a shutdown(wait=False)
        # the pool forgets its manager thread, so a later wait=True no longer waits for it,
        # and the thread, still closing its pipes, races the interpreter's exit hook
        # ("Exception ignored ... Bad file descriptor").
        if while_waiting is None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            return
        # The wait runs in a thread of its own so that this one keeps reading.
        waiter = threading.Thread(target=self._executor.shutdown, kwargs={"wait": True, "cancel_futures": True},
                                  name="plog-pool-shutdown", daemon=True)
        waiter.start()
        while waiter.is_alive():
            waiter.join(0.05)
            while_waiting()

    def __enter__(self) -> "WorkerPool":
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()
