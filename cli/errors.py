"""Errors raised by CLI code itself (bad paths, bad option combinations)."""

from __future__ import annotations

from plog.formats.errors import PlogError


class PlogCliError(PlogError):
    """A one-line error the CLI prints as ``plog: error: <message>``. Its exit status is
    decided by ``cli/boundary.py`` from its ``kind`` (``exit_codes.KIND_EXIT_CODES``), or, for
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


class ParamError(CliUsageError):
    """A value an option cannot take, found by a command's own checks after its options were
    read (``--acks x``, ``--header novalue``). Code without Typer raises it; under Click the
    command re-raises it as ``typer.BadParameter``, so Click says it as its other usage
    errors (``Invalid value for '--acks': ...``). ``param_hint`` names the option(s)."""

    def __init__(self, message: str, param_hint: str):
        super().__init__(message)
        self.param_hint = param_hint

    def bad_parameter(self):
        """This error as Click's usage error (imports Typer: only on the way out)."""
        import typer

        return typer.BadParameter(str(self), param_hint=self.param_hint)
