"""Typed errors of the formats layer.

Every error raised while decoding bytes is a :class:`FormatError`. Each carries the
``position`` (byte offset in the buffer the caller handed in, or ``None`` when the
position is not meaningful) and a one-line ``reason``. ``str(err)`` is the one-line
message the CLI prints, so reasons are written as full sentences without a trailing
period and name the numbers involved.

The names mirror Kafka's exceptions: ``CorruptRecordException`` (bytes that cannot be
a record: bad CRC, impossible sizes), ``InvalidRecordException`` (well-formed bytes that
break a rule: a negative header key size, a control key that is too short), and
``CorruptIndexException`` / ``CorruptSnapshotException`` for the side files.
"""

from __future__ import annotations

import os

#: The exit-code categories an error may say it is (``PlogError.kind``); ``cli/exit_codes``
#: maps each to a number, ``cli/app.py`` alone uses the mapping.
KINDS = ("error", "usage", "problems_found")


class PlogError(Exception):
    """The root of every error plog raises on purpose: formats, engine, Spark and CLI errors
    all derive from it, so the CLI's one error boundary (``cli/boundary.py``) catches this class.

    It lives here, in the lowest layer, because formats must not import the engine. ``str()``
    is the one-line message a user reads; the fields say the same facts for code, so no
    caller parses the text:

    - ``path``: the file the bytes or the state came from (None: unknown, or no file);
    - ``position``: a byte position in that file or buffer (None: not meaningful);
    - ``offset``: a Kafka offset the error is about (None: none);
    - ``kind``: how the run ends for the CLI, one of :data:`KINDS` ("error" unless a class
      or the raise site says otherwise).

    Every field is a keyword argument; positional arguments are the exception's own
    (the message), so each subclass keeps its constructor.
    """

    kind: str = "error"
    path: str | None = None
    position: int | None = None
    offset: int | None = None

    def __init__(self, *args, path: str | os.PathLike | None = None, position: int | None = None,
                 offset: int | None = None, kind: str | None = None):
        super().__init__(*args)
        # Only what was given is stored on the instance: a subclass may set a field itself
        # (FormatError's position, OffsetOverflowError's offset), and the class defaults
        # (None, the class's kind) hold otherwise.
        if path is not None:
            self.path = path if isinstance(path, str) else os.fspath(path)
        if position is not None:
            self.position = position
        if offset is not None:
            self.offset = offset
        if kind is not None:
            self.kind = kind


class FormatError(PlogError):
    """Base class: bytes that do not decode. ``position`` may be None. ``path``: the file
    the bytes came from, set by the engine code that read them (this layer never knows it);
    ``str()`` leaves it out, as callers that name the file themselves expect."""

    def __init__(self, reason: str, position: int | None = None, *, path: str | None = None,
                 offset: int | None = None):
        super().__init__(reason, path=path, offset=offset)
        self.reason = reason
        self.position = position

    def __str__(self) -> str:
        if self.position is None:
            return self.reason
        return f"{self.reason} (at byte {self.position})"

    def at(self, base: int) -> "FormatError":
        """Return this error with its position shifted by ``base`` (or set to it).

        Decoders deep inside a batch know positions relative to the batch; the caller
        that knows where the batch starts adds its own offset once, here.
        """
        self.position = base if self.position is None else base + self.position
        return self


class CorruptRecordError(FormatError):
    """Bytes that cannot be a valid record or batch (size, CRC, truncation, magic)."""


class InvalidRecordError(FormatError):
    """A structurally readable record that breaks one of Kafka's rules."""


class VarintError(CorruptRecordError):
    """A zig-zag varint/varlong that is too long or runs past the end of the buffer."""


class CompressionError(CorruptRecordError):
    """A compressed stream that does not decode with its codec."""


class DecompressionLimitError(CompressionError):
    """Decompressed output would exceed the caller's ``max_size`` (a bomb, or a bad length)."""


class UnsupportedCodecError(InvalidRecordError):
    """A codec id outside 0..4, or a codec not allowed for the magic (zstd below v2)."""


class CorruptIndexError(FormatError):
    """An offset, time or transaction index whose bytes break Kafka's sanity rules."""


class CorruptSnapshotError(FormatError):
    """A producer state snapshot that fails its version, CRC or schema checks."""


class CheckpointError(FormatError):
    """A malformed text file: offset checkpoint, leader-epoch checkpoint, properties."""


class SchemaError(FormatError):
    """A protocol-schema struct (internal topic key/value, control record) that does not
    decode with the schema its version names, or an unknown version."""
