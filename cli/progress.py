"""Progress on stderr, shown only on a terminal (never with ``--quiet``); ``NO_COLOR``
keeps it monochrome. Every command's bar or spinner is a :func:`progress` (a
:class:`NullProgress` when progress is off), so they all follow the same rules."""

from __future__ import annotations

import os
import sys
import time


def progress_enabled(quiet: bool = False) -> bool:
    """Progress bars and spinners go to stderr, and only to a terminal: never with
    ``--quiet`` (the command's or ``plog --quiet``), ``PLOG_NO_PROGRESS`` or ``TERM=dumb``."""
    from .common import is_quiet

    if quiet or is_quiet() or os.environ.get("PLOG_NO_PROGRESS") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


class NullProgress:
    """Progress that is off: every method does nothing, and :attr:`callback` is None, so an
    engine operation given it skips its progress bookkeeping altogether."""

    callback = None
    update_callback = None

    def advance(self, n: int) -> None:
        pass

    def update(self, done: int, total: int | None = None) -> None:
        pass

    def describe(self, text: str) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass

    def __bool__(self) -> bool:
        return False


class Progress(NullProgress):
    """A bar (or a spinner, for work of unknown size) on stderr, drawn by Rich.

    Started by the first call (or ``with``), removed by :meth:`close`. Redrawn from the
    calls, at most every 0.1 s: no refresh thread, since the engine may fork worker
    processes and a thread holding a lock across fork() can hang the child."""

    def __init__(self, label: str, total: int | None, unit: str, spinner: bool):
        from rich.console import Console
        from rich import progress as rp

        if spinner:
            columns = [rp.SpinnerColumn(), rp.TextColumn("{task.description}")]
        elif unit == "bytes":
            columns = [label, rp.BarColumn(), rp.DownloadColumn(), rp.TransferSpeedColumn(),
                       rp.TimeRemainingColumn()]
        else:
            columns = [label, rp.BarColumn(), rp.MofNCompleteColumn(), rp.TextColumn(unit),
                       rp.TimeRemainingColumn()]
        self._bar = rp.Progress(*columns, console=Console(stderr=True), transient=True, auto_refresh=False,
                                redirect_stdout=sys.stdout.isatty(), redirect_stderr=False)
        self._label, self._total = label, total
        self._task = None
        self._last = 0.0

    @property
    def callback(self):
        """``advance``, for an engine operation's ``progress(n)`` parameter."""
        return self.advance

    @property
    def update_callback(self):
        """``update``, for a ``progress(done, total)`` parameter."""
        return self.update

    def _started(self):
        if self._task is None:
            self._bar.start()
            self._task = self._bar.add_task(self._label, total=self._total)
        return self._task

    def _redraw(self) -> None:
        now = time.monotonic()
        if now - self._last > 0.1:
            self._last = now
            self._bar.refresh()

    def advance(self, n: int) -> None:
        self._bar.advance(self._started(), n)
        self._redraw()

    def update(self, done: int, total: int | None = None) -> None:
        self._bar.update(self._started(), completed=done, **({"total": total} if total is not None else {}))
        self._redraw()

    def describe(self, text: str) -> None:
        self._bar.update(self._started(), description=text)
        self._bar.refresh()

    def close(self) -> None:
        if self._task is not None:
            self._bar.stop()

    def __enter__(self):
        self._started()
        self._bar.refresh()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __bool__(self) -> bool:
        return True


def progress(label: str, *, total: int | None = None, quiet: bool = False, unit: str = "bytes",
             unknown_total: bool = False, min_total: int = 1, spinner: bool = False) -> NullProgress:
    """The progress of one piece of work: a :class:`Progress` on a terminal, else (quiet, a
    pipe, ``TERM=dumb``) or when there is nothing to show, a :class:`NullProgress`.

    ``total``: the work in ``unit`` (``bytes``: a bar with the bytes done and the speed; any
    other word: ``done/total word``); below ``min_total`` (a dump small enough to finish
    before a bar is worth drawing) there is no bar. ``unknown_total``: the amount is not
    known up front (a pulsing bar; a total given later through :meth:`Progress.update`).
    ``spinner``: a spinner and a line of text (:meth:`Progress.describe`) instead of a bar."""
    if not progress_enabled(quiet):
        return NullProgress()
    if not (unknown_total or spinner) and (not total or total < min_total):
        return NullProgress()
    return Progress(label, None if unknown_total else total, unit, spinner)
