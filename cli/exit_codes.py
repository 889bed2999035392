"""Exit codes, one table for every command (DESIGN.md, CLI contract)."""

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    ERROR = 1  # the command could not do its work: bad file, I/O error, corrupt input it cannot skip
    USAGE = 2  # bad arguments (Typer/Click's own code for usage errors)
    PROBLEMS_FOUND = 3  # the command ran and found problems (verify, dump --verify-index-only, ...)
    INTERRUPTED = 130  # Ctrl-C


EPILOG = "Exit status: 0 success, 1 error, 2 usage error, 3 problems found, 130 interrupted."
