"""Errors raised by CLI code itself (bad paths, bad option combinations)."""

from __future__ import annotations

from plog.formats.errors import PlogError


class PlogCliError(PlogError):
    """A one-line error the CLI prints as ``plog: error: <message>``. Its exit status is
    decided by ``cli/app.py`` from its ``kind`` (``exit_codes.KIND_EXIT_CODES``), or, for
    an error that rewords another one (``like``), as that one's would be."""

    def __init__(self, message: str, kind: str | None = None, *, like: BaseException | None = None, **fields):
        super().__init__(message, kind=kind, **fields)
        #: The error this one rewords (adding the file or what was done before it): the exit
        #: status is that error's.
        self.like = like


class CliUsageError(PlogCliError):
    """Options that do not go together, a value an option cannot take: a usage error (2),
    for what Click's own checks cannot say."""

    kind = "usage"
