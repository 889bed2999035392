"""Typed errors of ``plog.engine.schemas``. Each is one line for a user; the CLI exits 1 for them
(``EngineError``).

The one engine family kept outside ``engine/errors.py``: the three belong together (where schemas
come from, a schema that does not compile, a payload that does not decode with it), only the
schemas folder raises and catches them, and the codecs import this small module alone."""

from __future__ import annotations

from plog.engine.errors import EngineError


class SchemaSourceError(EngineError):
    """A place schemas should come from that cannot be used: no ``_schemas`` partition under a
    path, a schema-files directory that cannot be read, a registry URL that does not answer.
    ``source`` names it (a path or a URL)."""

    def __init__(self, message: str, source: str | None = None):
        super().__init__(message)
        self.source = source


class SchemaCompileError(EngineError):
    """A schema that does not parse or compile (or whose references cannot be found).
    The resolver turns it into a reason and shows the record raw; it reaches no user as is."""


class PayloadError(EngineError):
    """A payload that does not decode with its schema. The resolver shows the record raw."""
