"""Exit codes, one table for every command (DESIGN.md, CLI contract).

Commands never choose a number: a command that ran to its end returns an :class:`Outcome`
(None is OK), an error says its ``kind``; ``cli/app.py`` turns the first and ``cli/boundary.py``
the second into the exit status, through :data:`OUTCOME_EXIT_CODES` and :data:`KIND_EXIT_CODES`.
"""

from enum import Enum, IntEnum


class ExitCode(IntEnum):
    OK = 0
    ERROR = 1  # the command could not do its work: bad file, I/O error, corrupt input it cannot skip
    USAGE = 2  # bad arguments (Typer/Click's own code for usage errors)
    PROBLEMS_FOUND = 3  # the command ran and found problems (verify, dump --verify-index-only, ...)
    INTERRUPTED = 130  # Ctrl-C (SIGINT): 128 + 2, what a shell reports for a process stopped by it
    # SIGTERM (kill, systemd, docker stop): the same clean stop as Ctrl-C (cli/signals.py),
    # reported as 128 + 15, the status shells ($?), `docker ps` and Kubernetes show for a
    # process stopped by SIGTERM, and the one a systemd unit lists as a clean stop
    # (SuccessExitStatus=143, as for JVM services, which exit the same way). 130 would tell
    # whoever reads it that someone pressed Ctrl-C, which is not what happened; 0 would hide
    # that the work was cut short (a produce that did not read all its input).
    TERMINATED = 143


class Outcome(Enum):
    """How a command that ran to its end went, as it returns it (None: OK)."""

    OK = "ok"
    #: The command ran and found problems: verify's errors, an index that disagrees with its
    #: log, recover --dry-run with work to do, a scenario's failed expectations.
    PROBLEMS_FOUND = "problems found"
    #: Part of the work could not be done (a PATH verify could not read, a group delete could
    #: not delete); each failure was reported as it happened, and the rest was done.
    INCOMPLETE = "incomplete"


OUTCOME_EXIT_CODES = {
    Outcome.OK: ExitCode.OK,
    Outcome.PROBLEMS_FOUND: ExitCode.PROBLEMS_FOUND,
    Outcome.INCOMPLETE: ExitCode.ERROR,
}

#: An error's ``kind`` (``formats.errors.PlogError.kind``, one of ``formats.errors.KINDS``)
#: -> the exit status; ``cli/boundary.exit_code_of`` applies it.
KIND_EXIT_CODES = {
    "error": ExitCode.ERROR,
    "usage": ExitCode.USAGE,
    "problems_found": ExitCode.PROBLEMS_FOUND,
}


EPILOG = ("Exit status: 0 success, 1 error, 2 usage error, 3 problems found, 130 interrupted (Ctrl-C), "
          "143 terminated (SIGTERM; a clean stop, as Ctrl-C).")
