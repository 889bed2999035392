"""CRC-32C (Castagnoli), the checksum of v2 record batches and producer snapshots: the one
function every module calls, ``crc32c(data, value=0) -> int`` over any contiguous buffer
(``value``: the checksum of what came before, to continue it).

The reference is the ``crc32c`` package's C function; the native twin is plog._native's
(native/src/crc.rs), bound once by :mod:`plog.formats.native` like the other twins. Why a
twin for a function that is already C: importing the ``crc32c`` package runs
``importlib.metadata`` (for its ``__version__``) in every plog command that reads or writes a
batch: the report's start-up of ``plog dump`` on a small file went from 0.092 to 0.086 s
without it (a bare ``import crc32c`` took ~28 ms more than an empty interpreter on a loaded
machine); the native path never imports it.
"""

from __future__ import annotations

from . import native

if native.active():
    crc32c = native.module.crc32c
else:
    from crc32c import crc32c  # noqa: F401  (the reference)

__all__ = ["crc32c"]
