"""The parallel driver of ``plog recover -j N``: partitions recovered in worker processes
(the :mod:`plog.engine.workers` pool recipe), their progress streamed back to the parent.

Each worker reports the bytes it validates through one queue shared by the pool; the parent
reads it while it waits for results, so a progress bar moves while partitions recover.
A partition cut short by Ctrl-C recovers at the next run: recovery is crash-safe.
"""

from __future__ import annotations

import multiprocessing
from concurrent.futures import FIRST_COMPLETED, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Callable, Protocol

from plog.engine.maintenance.recovery_report import PartitionRecovery
from plog.engine.workers import WorkerPool, held

Progress = Callable[[int], None]


class PartitionTask(Protocol):
    """What the driver needs of a task: its place in the results and its folder."""

    index: int
    part: str


#: ``recover_one(task, progress)``: recovers one partition (in this process or a worker).
RecoverOne = Callable[[PartitionTask, Progress | None], PartitionRecovery]

_worker_queue = None


def _init_worker(queue) -> None:
    global _worker_queue
    _worker_queue = queue


def _worker(recover_one: RecoverOne, task: PartitionTask) -> PartitionRecovery:
    queue = _worker_queue
    index = task.index

    def progress(n: int) -> None:
        with held():  # a stop must not cut the message in two (engine.workers)
            queue.put((index, n))

    return recover_one(task, progress if queue is not None else None)


def run_partitions(tasks: list, jobs: int, progress: Progress | None,
                   recover_one: RecoverOne) -> dict[int, PartitionRecovery]:
    """``recover_one`` over ``tasks`` in ``jobs`` processes (in this one when ``jobs <= 1``
    or there is one task); returns each task's report by its index. A worker that dies
    leaves its partition ``failed``. ``progress(n)`` gets every byte count the workers report."""
    results: dict[int, PartitionRecovery] = {}
    if jobs <= 1 or len(tasks) <= 1:
        for task in tasks:
            results[task.index] = recover_one(task, progress)
        return results
    methods = multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("fork" if "fork" in methods else "forkserver")
    queue = ctx.SimpleQueue()
    seen = {t.index: 0 for t in tasks}

    def drain() -> None:
        while not queue.empty():
            index, n = queue.get()
            seen[index] += n
            if progress is not None:
                progress(n)

    # A partition cut short by Ctrl-C recovers at the next run (engine.workers).
    with WorkerPool(min(jobs, len(tasks)), mp_context=ctx, initializer=_init_worker, initargs=(queue,)) as pool:
        futures = {pool.submit(_worker, recover_one, t): t for t in tasks}
        pending = set(futures)
        try:
            while pending:
                done, pending = wait(pending, timeout=0.05, return_when=FIRST_COMPLETED)
                drain()
                for future in done:
                    task = futures[future]
                    try:
                        results[task.index] = future.result()
                    except BrokenProcessPool as e:
                        results[task.index] = PartitionRecovery(task.part, None, "failed",
                                                                f"the worker process died: {e}")
        except KeyboardInterrupt:
            # Ctrl-C: partitions not started stay as they are (the next run recovers them).
            # The running ones still report progress: keep reading it until they end.
            pool.shutdown(while_waiting=drain)
            raise
    drain()
    for index, report in results.items():
        # A worker's queue writes are synchronous, so they all arrived before its result;
        # this only settles a count for a worker that died half-way.
        if progress is not None and report.bytes_validated > seen.get(index, 0):
            progress(report.bytes_validated - seen[index])
    return results


__all__ = ["PartitionTask", "run_partitions"]
