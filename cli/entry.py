"""The ``plog`` console script.

Two shortcuts around building the whole command tree, for start-up time: the completion
scripts' ``plog completions values KIND`` (at every TAB press) is answered before Typer is
imported, and a run of one command imports only the module that registers it
(``registry.command_module``). Everything ends in :func:`plog.cli.app.main`, the CLI's one
error boundary; ``plog --help``, a mistyped command and the like load the whole tree.
"""

from __future__ import annotations

import importlib
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
        from .registry import command_module

        module = command_module(args)
        importlib.import_module(f"{__package__}.{module}" if module else f"{__package__}.main")
        from .app import main as cli_main

        cli_main()
    except KeyboardInterrupt:
        # Ctrl-C or SIGTERM while the command is still being loaded (later ones are handled,
        # with the same words and codes, by the error boundary in cli/app.py; exit_codes.py
        # is not imported here, for start-up time).
        if terminated():
            print("plog: terminated", file=sys.stderr)
            sys.exit(143)
        print("plog: interrupted", file=sys.stderr)
        sys.exit(130)
