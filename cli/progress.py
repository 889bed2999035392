"""A Rich progress bar over bytes on stderr, shown only on a terminal (and never with
``--quiet``, ``NO_COLOR`` keeps it monochrome)."""

from __future__ import annotations

import sys
import time


def byte_progress(label: str, total: int | None, quiet: bool, *, unknown_total: bool = False):
    """``(advance(nbytes) or None, finish())``: no bar when quiet, not a TTY or nothing to do.
    ``unknown_total``: the amount of work is not known up front (a pulsing bar with the
    bytes done and the speed)."""
    if quiet or not sys.stderr.isatty() or (not unknown_total and (not total or total <= 0)):
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
