"""Threads for the cluster writer's concurrent fsyncs and background flushes: a few threads
running submitted calls, and the outcome of each call.

Why not ``concurrent.futures.ThreadPoolExecutor``: importing it imports ``logging`` (and
with it ``traceback``, ``string``, ``atexit``), ~5 ms measured here, on the critical path of
every ``plog produce`` (its first round's flush) and ``plog brokers start`` (a catch-up's
first fsyncs): 3% of a 1 M-line produce, a tenth of its start-up. The writer uses three
things of it, kept here with the same meaning: ``submit``, a task's ``exception()``
(waits, then the call's exception or None) and ``shutdown(wait=True)``.

The GIL switch interval (:func:`shorten_switch_interval`): a writer flushing in the
background runs its fsyncs on a thread while the caller fills the next round in native code,
which holds the GIL. Each system call of the flush thread (the log's fsync, its indexes', the
checkpoint's temporary file, fsync, rename, directory fsync: about a dozen a round) gives the
GIL up and must take it back, and CPython makes a thread wait a whole switch interval (5 ms by
default) before it asks the holder to let go: the flush thread crawls, the round's
acknowledgement waits for it and the caller ends up waiting too. Measured (1 M 100-byte values
in memory, fast runs of this VM): ``Producer.send_many`` 0.165-0.19 -> 0.12-0.16 s, RF 1
``send_values`` with ``hold_lock`` 0.17 -> 0.13-0.14 s (CPU time then equals wall time), RF 3
0.32-0.35 -> 0.30-0.33 s. ``plog produce`` does not move: its reads of the input give the GIL up
often enough. So while any writer has a flush thread, the interval is 0.5 ms.

Invariants: a pool's calls start in the order they were submitted; ``shutdown(wait=True)``
returns once every call submitted before it has ended; a call's exception is kept for
:meth:`Task.exception`, never raised on the pool's thread. The threads are daemons, as the
writer's writeback thread is: an interpreter that exits without closing its writer (the
writer's ``close`` waits for its flushes) does not wait for them either.
"""

from __future__ import annotations

import sys
import threading
from collections import deque
from collections.abc import Callable

__all__ = ["BACKGROUND_SWITCH_INTERVAL_S", "Task", "ThreadPool", "restore_switch_interval", "shorten_switch_interval"]

#: The GIL switch interval while a writer flushes in the background (module docstring).
BACKGROUND_SWITCH_INTERVAL_S = 0.0005

_switch_lock = threading.Lock()
_switch_holders = 0
_switch_saved: float | None = None  # the interval before the first holder shortened it


def shorten_switch_interval() -> None:
    """Make the GIL switch interval at most :data:`BACKGROUND_SWITCH_INTERVAL_S` until every
    caller of this has called :func:`restore_switch_interval` (calls nest; an interval
    already as short is left as it is)."""
    global _switch_holders, _switch_saved
    with _switch_lock:
        if _switch_holders == 0:
            current = sys.getswitchinterval()
            _switch_saved = None
            if current > BACKGROUND_SWITCH_INTERVAL_S:
                _switch_saved = current
                sys.setswitchinterval(BACKGROUND_SWITCH_INTERVAL_S)
        _switch_holders += 1


def restore_switch_interval() -> None:
    """The end of one :func:`shorten_switch_interval`; the last one puts the interval back,
    unless something else changed it meanwhile (then it is theirs to keep)."""
    global _switch_holders, _switch_saved
    with _switch_lock:
        if _switch_holders == 0:
            return
        _switch_holders -= 1
        if _switch_holders == 0 and _switch_saved is not None:
            if abs(sys.getswitchinterval() - BACKGROUND_SWITCH_INTERVAL_S) < 1e-7:
                sys.setswitchinterval(_switch_saved)
            _switch_saved = None


class Task:
    """The outcome of one call submitted to a :class:`ThreadPool`."""

    __slots__ = ("_done", "_error")

    def __init__(self):
        self._done = threading.Event()
        self._error: BaseException | None = None

    def done(self) -> bool:
        return self._done.is_set()

    def finish(self, error: BaseException | None = None) -> None:
        """End a task made by hand (``Task()``), whose work runs on more than one thread:
        those waiting in :meth:`exception` get ``error`` (None: it succeeded)."""
        self._error = error
        self._done.set()

    def exception(self) -> BaseException | None:
        """Wait for the call to end; its exception, or None when it returned."""
        self._done.wait()
        return self._error

    def result(self) -> None:
        """Wait for the call to end; raise its exception, if any."""
        error = self.exception()
        if error is not None:
            raise error


class ThreadPool:
    """Up to ``max_workers`` threads (named ``name-N``) running the calls submitted, in the
    order submitted; a thread is started only when no idle one can take a call."""

    def __init__(self, max_workers: int, name: str):
        if max_workers < 1:
            raise ValueError(f"max_workers must be at least 1, not {max_workers}")
        self.max_workers = max_workers
        self.name = name
        self._calls: deque = deque()
        self._cond = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self._closed = False

    def submit(self, fn: Callable, *args) -> Task:
        task = Task()
        with self._cond:
            if self._closed:
                raise RuntimeError("cannot submit to a pool that was shut down")
            if self._idle <= len(self._calls) and len(self._threads) < self.max_workers:
                # Started before the call is queued: a thread that cannot start raises here
                # with nothing left behind.
                thread = threading.Thread(target=self._run, name=f"{self.name}-{len(self._threads)}", daemon=True)
                thread.start()
                self._threads.append(thread)
            self._calls.append((task, fn, args))
            self._cond.notify()
        return task

    def shutdown(self, wait: bool = True) -> None:
        """No more calls; with ``wait``, return once the threads ran every call submitted."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if wait:
            for thread in self._threads:
                if thread is not threading.current_thread():
                    thread.join()

    def _run(self) -> None:
        cond, calls = self._cond, self._calls
        while True:
            with cond:
                while not calls:
                    if self._closed:
                        return
                    self._idle += 1
                    cond.wait()
                    self._idle -= 1
                task, fn, args = calls.popleft()
            error = None
            try:
                fn(*args)
            except BaseException as e:  # noqa: BLE001 - kept for Task.exception, as a Future does
                error = e
            task.finish(error)
