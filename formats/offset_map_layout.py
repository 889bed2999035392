"""The byte layout of Kafka's ``SkimpyOffsetMap`` table (the log cleaner's key -> offset map).

One fixed byte array of ``slots`` entries::

    slot i (24 bytes) = md5(key) (16 bytes) | offset (int64 big-endian)

An empty slot is 24 zero bytes. Probe ``i`` for a hash reads the signed big-endian int32
at byte ``min(i, 12)`` of the hash (Kafka's ``positionOf``; the arithmetic on it is the
map's, see ``engine.maintenance.offset_map``).
"""

from __future__ import annotations

import struct

HASH_SIZE = 16
OFFSET_SIZE = 8
BYTES_PER_ENTRY = HASH_SIZE + OFFSET_SIZE
#: Probes reading their own window of the hash: byte positions 0 .. HASH_SIZE - 4.
HASH_WINDOWS = HASH_SIZE - 3

EMPTY_HASH = bytes(HASH_SIZE)
EMPTY_OFFSET = bytes(OFFSET_SIZE)

#: A slot's offset, at ``slot position + HASH_SIZE`` (``pack_into`` / ``unpack_from``).
SLOT_OFFSET = struct.Struct(">q")
_WINDOW = struct.Struct(">i")
#: The first probe's window: ``first_window(hash)[0]`` is the int32 at byte 0.
first_window = _WINDOW.unpack_from


def hash_windows(h: bytes) -> tuple[int, ...]:
    """The signed big-endian int32 at each byte position 0 .. 12 of the hash."""
    return tuple(_WINDOW.unpack_from(h, i)[0] for i in range(HASH_WINDOWS))


__all__ = ["BYTES_PER_ENTRY", "EMPTY_HASH", "EMPTY_OFFSET", "HASH_SIZE", "HASH_WINDOWS", "OFFSET_SIZE",
           "SLOT_OFFSET", "first_window", "hash_windows"]
