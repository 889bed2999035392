"""The ``plog`` console script. Routes the one call that must be instant (the completion
scripts' ``plog completions values KIND`` at every TAB press) around Typer and the command
modules; everything else goes to :func:`plog.cli.main.main`, the CLI's one error boundary."""

from __future__ import annotations

import sys


def main() -> None:
    args = sys.argv[1:]
    if args[:2] == ["completions", "values"]:
        from .completion_values import fast_main

        code = fast_main(args[2:])
        if code is not None:
            sys.exit(code)
    from .main import main as cli_main

    cli_main()
