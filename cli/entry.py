"""The ``plog`` console script.

Three shortcuts around building the whole command tree, for start-up time: the completion
scripts' ``plog completions values KIND`` (at every TAB press) is answered before Typer is
imported, a plain ``plog produce`` (``cli/plain.py``) runs without Typer at all, and a run of
one command imports only the module that registers it (``registry.command_module``). All of
them run inside the CLI's one error boundary (``cli/boundary.py``; Typer's runs through
:func:`plog.cli.app.main`); ``plog --help``, a mistyped command and the like load the whole
tree.

The console script is :func:`run`: :func:`main`, then an exit without the interpreter's
teardown (see :func:`_leave`).
"""

from __future__ import annotations

import importlib
import os
import sys

from .signals import handle_sigterm, terminated


def main() -> None:
    # First of all: from here on SIGTERM stops plog as Ctrl-C does (cli/signals.py).
    handle_sigterm()
    try:
        args = sys.argv[1:]
        if args[:2] == ["completions", "values"]:
            from .completion_values import fast_main

            code = fast_main(args[2:])
            if code is not None:
                sys.exit(code)
        from .plain import plain_command

        command = plain_command(args)
        if command is not None:
            # A plain run (cli/plain.py): no Typer, no command tree; the same boundary.
            from .boundary import run as run_in_boundary

            run_in_boundary(args, command)
            return
        from .registry import command_module

        module = command_module(args)
        importlib.import_module(f"{__package__}.{module}" if module else f"{__package__}.main")
        from .app import main as cli_main

        cli_main()
    except KeyboardInterrupt:
        # Ctrl-C or SIGTERM while the command is still being loaded (later ones are handled,
        # with the same words and codes, by the error boundary in cli/boundary.py; exit_codes.py
        # is not imported here, for start-up time).
        if terminated():
            print("plog: terminated", file=sys.stderr)
            sys.exit(143)
        print("plog: interrupted", file=sys.stderr)
        sys.exit(130)


def run() -> None:
    """The console script: :func:`main`, then :func:`_leave` with its exit code."""
    try:
        main()
    except SystemExit as e:
        _leave(e.code)
    _leave(0)


def _leave(code) -> None:
    """Exit with ``code`` (a ``SystemExit`` code) as the interpreter would, without its
    teardown when nothing is left for it to do.

    By now the command has closed what it opened (data directories, files, pools). What the
    interpreter would still do is run the ``atexit`` functions, join other threads, and free
    every module and object one by one: the last is about 25 ms after a 1 M-record produce,
    a tenth of the whole run, for memory the kernel takes back at once anyway. So: the
    ``atexit`` functions run here, the standard streams are flushed, and the process ends,
    only when no other thread is left to join and the code is a number (a text is printed by the
    interpreter's own exit). Daemon threads (plog's writeback hints) are left as the
    interpreter leaves them. Anything unusual takes the interpreter's ordinary exit."""
    import threading

    main = threading.main_thread()
    others = [t for t in threading.enumerate() if t is not main and not t.daemon]
    if not (code is None or isinstance(code, int)) or others:
        sys.exit(code)
    try:
        import atexit

        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except BaseException:  # a stream the reader closed, a handler that failed: the usual exit says so
        sys.exit(code)
    os._exit(code or 0)
