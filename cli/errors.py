"""Errors raised by CLI code itself (bad paths, bad option combinations)."""

from __future__ import annotations

from .exit_codes import ExitCode


class PlogCliError(Exception):
    """A one-line error the CLI prints as ``plog: error: <message>``."""

    exit_code = ExitCode.ERROR

    def __init__(self, message: str, exit_code: int | None = None):
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code
