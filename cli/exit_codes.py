"""Exit codes, one table for every command (DESIGN.md, CLI contract)."""

from enum import IntEnum


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


EPILOG = ("Exit status: 0 success, 1 error, 2 usage error, 3 problems found, 130 interrupted (Ctrl-C), "
          "143 terminated (SIGTERM; a clean stop, as Ctrl-C).")
