"""SIGTERM is a request to stop, handled exactly as Ctrl-C is.

``kill PID``, systemd (``systemctl stop``, the end of a unit's timeout) and container
runtimes (``docker stop``, Kubernetes) stop a process with SIGTERM. Python's default for it
is to die on the spot: no ``finally`` runs, so a producer leaves its log open (no
clean-shutdown marker, preallocated indexes untrimmed), a ``scan -o`` its partial file.
:func:`handle_sigterm` installs a handler that raises :class:`Terminated`, a
``KeyboardInterrupt``, in the main thread, so every path written for Ctrl-C (close the logs,
write the clean-shutdown marker, trim the indexes, remove partial files, commit only what
was printed) runs for SIGTERM too, and the error boundary (``cli/app.py``) ends the run with
``plog: terminated`` and exit 143 (see ``exit_codes.ExitCode.TERMINATED``).

Worker processes forked by the engine (verify, scan, recover ``--jobs``) replace the
inherited handler with their own (``engine.workers``): a worker ends the task it runs and
exits without a word; the parent does the one-line report.

Plain standard library and cheap to import: the console script installs the handler
before it loads anything else (``cli/entry.py``).
"""

from __future__ import annotations

import signal
import threading


class Terminated(KeyboardInterrupt):
    """Raised in the main thread when SIGTERM arrives: a ``KeyboardInterrupt``, so every
    ``except KeyboardInterrupt`` and ``finally`` that makes Ctrl-C a clean stop applies."""


_terminated = False


def _on_sigterm(_signum, _frame) -> None:
    global _terminated
    if _terminated:
        # Already stopping: a second SIGTERM (systemd and `docker stop` send one, a user
        # may repeat `kill`) must not cut short the clean-up the first one started. SIGKILL
        # remains the way to stop at once.
        return
    _terminated = True
    raise Terminated()


def handle_sigterm():
    """Install the SIGTERM handler (main thread only; elsewhere a no-op returning None).
    Returns the handler it replaced, for :func:`restore`."""
    global _terminated
    if threading.current_thread() is not threading.main_thread():
        return None
    _terminated = False
    return signal.signal(signal.SIGTERM, _on_sigterm)


def restore(previous) -> None:
    """Put back the handler :func:`handle_sigterm` replaced (an embedding process, such as
    the tests calling ``main()`` in-process, keeps its own)."""
    if previous is not None and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, previous)


def terminated() -> bool:
    """Whether this run was stopped by SIGTERM (rather than by Ctrl-C)."""
    return _terminated
