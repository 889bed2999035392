"""Threads for the cluster writer's concurrent fsyncs and background flushes: a few threads
running submitted calls, and the outcome of each call.

Why not ``concurrent.futures.ThreadPoolExecutor``: importing it imports ``logging`` (and
with it ``traceback``, ``string``, ``atexit``), ~5 ms measured here, on the critical path of
every ``plog produce`` (its first round's flush) and ``plog brokers start`` (a catch-up's
first fsyncs): 3% of a 1 M-line produce, a tenth of its start-up. The writer uses three
things of it, kept here with the same meaning: ``submit``, a task's ``exception()``
(waits, then the call's exception or None) and ``shutdown(wait=True)``.

Invariants: a pool's calls start in the order they were submitted; ``shutdown(wait=True)``
returns once every call submitted before it has ended; a call's exception is kept for
:meth:`Task.exception`, never raised on the pool's thread. The threads are daemons, as the
writer's writeback thread is: an interpreter that exits without closing its writer (the
writer's ``close`` waits for its flushes) does not wait for them either.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable

__all__ = ["Task", "ThreadPool"]


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
