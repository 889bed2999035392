"""What a stop (Ctrl-C, SIGTERM) must not cut in two: :class:`uninterrupted`.

A log append writes the segment first, then moves the log end offset, the indexes, the
leader-epoch cache and the producer state. Python runs a signal handler between any two
bytecodes of the main thread, so a ``KeyboardInterrupt`` (or the CLI's SIGTERM stop) could
land between the write and the state update: the bytes would then sit in the segment past
the log end offset, the high watermark checkpointed at close would not cover them, and the
next writer would append after records no reader sees.

Why not block the signals with ``pthread_sigmask`` (as :class:`plog.engine.workers.held`
does around forks)? A process-directed signal is then delivered to another thread (the
writer's fsync pool, Spark's, a library user's), whose C-level handler still asks the main
thread to run the Python handler at its next bytecode. Python handlers always run in the
main thread, so replacing them is what holds a stop, whichever thread the kernel picked.

Invariant: inside the outermost ``with uninterrupted():`` of the main thread, a SIGINT or
SIGTERM is noted, not acted on; when it ends, the handlers that were installed are back and
the first noted stop is handed to its handler (raising there, as it would have a moment
earlier). Nested uses cost a counter. Other threads: a no-op (their code never receives a
Python signal handler's exception).
"""

from __future__ import annotations

import functools
import signal
import threading

try:
    # The C functions under signal.signal/getsignal: the same handlers, without the enum
    # conversions of each result (an append enters uninterrupted a few times per round).
    import _signal as _handlers
except ImportError:  # pragma: no cover - not CPython
    _handlers = signal

__all__ = ["uninterrupted", "whole"]

_STOP_SIGNALS = (int(signal.SIGINT), int(signal.SIGTERM))

_depth = 0
_saved: dict[int, object] = {}  # signal -> the handler replaced by _note, while _depth > 0
_noted: list[tuple[int, object]] = []  # (signal, frame) that came while _depth > 0


def _note(signum, frame) -> None:
    if _depth:
        _noted.append((signum, frame))
        return
    # Not held (cannot happen while _note is installed: the depth counts the swaps too);
    # the stop is acted on, never dropped.
    _deliver(_saved.get(signum), signum, frame)


def _deliver(handler, signum: int, frame) -> None:
    if callable(handler):
        handler(signum, frame)
    elif handler == signal.SIG_DFL:
        signal.raise_signal(signum)  # the restored default action (SIGTERM: the process ends)
    # SIG_IGN, or a handler not set from Python (None): nothing to run from here.


def _restore() -> None:
    for signum, handler in list(_saved.items()):
        _handlers.signal(signum, handler)
        del _saved[signum]


class uninterrupted:
    """Context manager: SIGINT and SIGTERM wait for its end (see the module docstring).

    The depth counts as held while the handlers are being swapped in and out, so a stop that
    arrives in the middle of the swap (Python runs handlers right after a call returns) is
    noted, never dropped."""

    __slots__ = ("_active",)

    def __enter__(self) -> "uninterrupted":
        global _depth
        self._active = threading.current_thread() is threading.main_thread()
        if not self._active:
            return self
        _depth += 1
        if _depth == 1:
            try:
                for signum in _STOP_SIGNALS:
                    # None: a handler installed by C code, which signal() could not put back.
                    if _handlers.getsignal(signum) is not None:
                        _saved[signum] = _handlers.signal(signum, _note)
            except BaseException:  # a stop through a handler not yet swapped: not held
                _restore()
                _depth = 0
                _noted.clear()
                raise
        return self

    def __exit__(self, *exc) -> None:
        global _depth
        if not self._active:
            return
        if _depth > 1:
            _depth -= 1
            return
        saved = dict(_saved)
        _restore()  # still held: a stop meanwhile reaches _note, which notes it
        _depth = 0
        if _noted:
            (signum, frame), = _noted[:1]
            _noted.clear()
            _deliver(saved.get(signum), signum, frame)


def whole(method):
    """Decorator: ``method`` runs inside :class:`uninterrupted` (a unit a stop must not cut)."""
    @functools.wraps(method)
    def run(*args, **kwargs):
        with uninterrupted():
            return method(*args, **kwargs)

    return run
