"""Progress on stderr, shown only on a terminal (never with ``--quiet``); ``NO_COLOR``
keeps it monochrome. Every command's bar or spinner asks :func:`progress_enabled`."""

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


def byte_progress(label: str, total: int | None, quiet: bool, *, unknown_total: bool = False):
    """``(advance(nbytes) or None, finish())``: no bar when quiet, not a TTY or nothing to do.
    ``unknown_total``: the amount of work is not known up front (a pulsing bar with the
    bytes done and the speed)."""
    if not progress_enabled(quiet) or (not unknown_total and (not total or total <= 0)):
        return None, lambda: None
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn, TransferSpeedColumn

    # No refresh thread (auto_refresh=False): the engine may fork worker processes, and a
    # thread holding a lock across fork() can hang the child. The bar redraws from the callback.
    bar = Progress(label, BarColumn(), DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn(),
                   console=Console(stderr=True), transient=True, auto_refresh=False,
                   redirect_stdout=sys.stdout.isatty(), redirect_stderr=False)
    task = bar.add_task(label, total=None if unknown_total else total)
    bar.start()
    last = [0.0]

    def advance(n: int) -> None:
        bar.advance(task, n)
        now = time.monotonic()
        if now - last[0] > 0.1:
            last[0] = now
            bar.refresh()

    return advance, bar.stop


def count_progress(label: str, total: int, quiet: bool = False, *, unit: str = "items"):
    """``(advance(n) or None, finish())`` for work counted in items (partitions made, files
    checked) rather than bytes: a bar with ``done/total unit`` and the time left, under the
    same rules as :func:`byte_progress` (stderr, a terminal only, never when quiet)."""
    if not progress_enabled(quiet) or total <= 0:
        return None, lambda: None
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    bar = Progress(label, BarColumn(), MofNCompleteColumn(), TextColumn(unit), TimeRemainingColumn(),
                   console=Console(stderr=True), transient=True, auto_refresh=False,
                   redirect_stdout=sys.stdout.isatty(), redirect_stderr=False)
    task = bar.add_task(label, total=total)
    bar.start()
    last = [0.0]

    def advance(n: int) -> None:
        bar.advance(task, n)
        now = time.monotonic()
        if now - last[0] > 0.1:
            last[0] = now
            bar.refresh()

    return advance, bar.stop
