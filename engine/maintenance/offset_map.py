"""``SkimpyOffsetMap``: the log cleaner's key -> latest offset table (kafka-format.md §16.3).

Kafka's cleaner stores, per key of the dirty section, only the MD5 of the key and the
latest offset seen for it, in one fixed byte array::

    slot i (24 bytes) = md5(key) (16 bytes) | offset (int64 big-endian)

* ``slots = memory // 24``; the caller's ``memory`` (``log.cleaner.dedupe.buffer.size``,
  plog's ``--buffer-size``) bounds the table: it is ONE buffer of that many bytes, an
  anonymous ``mmap`` so that the OS hands out zero pages lazily (a 128 MiB table costs
  nothing until keys land in it, and a map over a few thousand keys touches only their
  pages). :meth:`clear` replaces it with a fresh mapping, and only if it was written.
* Probe ``i`` for a hash ``h``: the signed int32 read big-endian from ``h[min(i, 12):+4]``,
  plus ``max(0, i - 12)`` (Java int arithmetic, so it wraps), then ``abs(probe) % slots``
  with ``Utils.abs`` (``Integer.MIN_VALUE`` -> 0). The first 13 probes reuse bytes of the
  hash; later ones degrade to linear probing.
* An empty slot is 24 zero bytes. ``put`` of a hash already present overwrites its offset
  (the size does not change). There is no delete.
* ``latest_offset`` is the last offset put (or set with :meth:`update_latest_offset`), -1
  after :meth:`clear`. The cleaner stops filling the map once ``size`` reaches
  ``capacity`` = ``int(slots * load_factor)`` (``log.cleaner.io.buffer.load.factor``).

Two keys with the same MD5 are the same key here, as in Kafka.
"""

from __future__ import annotations

import hashlib
import mmap
import struct

from plog.formats.java import int32

BYTES_PER_ENTRY = 24
HASH_SIZE = 16
DEFAULT_LOAD_FACTOR = 0.9

_INT_MIN = -(1 << 31)
_ZERO_HASH = bytes(HASH_SIZE)
_ZERO_OFFSET = bytes(8)
_OFFSET = struct.Struct(">q")


def _probe_windows(h: bytes) -> tuple[int, ...]:
    """The signed big-endian int32 at each byte position 0..12 of the hash."""
    return tuple(int.from_bytes(h[i:i + 4], "big", signed=True) for i in range(HASH_SIZE - 3))


class OffsetMapFullError(Exception):
    """``put`` of a new key into a map whose every slot is used (Kafka's IllegalArgumentException)."""


class SkimpyOffsetMap:
    """Kafka's ``SkimpyOffsetMap`` with the MD5 hash; see the module docstring."""

    __slots__ = ("memory", "slots", "load_factor", "_buf", "_entries", "_latest", "lookups", "probes", "_written")

    def __init__(self, memory: int, load_factor: float = DEFAULT_LOAD_FACTOR):
        if memory < BYTES_PER_ENTRY:
            raise ValueError(f"an offset map needs at least {BYTES_PER_ENTRY} bytes, not {memory}")
        if not 0 < load_factor <= 1:
            raise ValueError(f"the load factor must be in (0, 1], not {load_factor}")
        self.memory = memory
        self.slots = memory // BYTES_PER_ENTRY
        self.load_factor = load_factor
        self._buf = mmap.mmap(-1, memory)
        self._written = False
        self._entries = 0
        self._latest = -1
        self.lookups = 0
        self.probes = 0

    # -- facts -------------------------------------------------------------------------------

    @property
    def capacity(self) -> int:
        """How many distinct keys the cleaner puts before it stops (``slots * load factor``)."""
        return int(self.slots * self.load_factor)

    @property
    def size(self) -> int:
        """Distinct keys put since the last clear."""
        return self._entries

    def __len__(self) -> int:
        return self._entries

    @property
    def is_full(self) -> bool:
        """The cleaner's stop condition: ``size >= capacity``."""
        return self._entries >= int(self.slots * self.load_factor)

    @property
    def utilization(self) -> float:
        return self._entries / self.slots

    @property
    def latest_offset(self) -> int:
        return self._latest

    def update_latest_offset(self, offset: int) -> None:
        self._latest = offset

    @property
    def collision_rate(self) -> float:
        return (self.probes - self.lookups) / self.lookups if self.lookups else 0.0

    # -- operations --------------------------------------------------------------------------

    def clear(self) -> None:
        """Forget every key and reset the latest offset to -1.

        A written table is replaced by a fresh zero mapping (cheaper than zeroing a mostly
        untouched 128 MiB table in place); only one exists at a time."""
        if self._written:
            self._buf.close()
            self._buf = mmap.mmap(-1, self.memory)
            self._written = False
        self._entries = 0
        self._latest = -1
        self.lookups = 0
        self.probes = 0

    @staticmethod
    def hash_key(key: bytes) -> bytes:
        return hashlib.md5(key).digest()

    def _slot_positions(self, h: bytes):
        """Byte positions of the successive probes for hash ``h`` (Kafka's ``positionOf``)."""
        slots = self.slots
        windows = _probe_windows(h)
        last = windows[-1]
        attempt = 0
        while True:
            if attempt < 13:
                probe = windows[attempt]
            else:
                probe = int32(last + attempt - 12)
            if probe < 0:
                probe = 0 if probe == _INT_MIN else -probe
            yield (probe % slots) * BYTES_PER_ENTRY
            attempt += 1

    def put(self, key: bytes, offset: int) -> None:
        """Record ``offset`` as the latest offset of ``key``."""
        self.put_hash(hashlib.md5(key).digest(), offset)

    def put_hash(self, h: bytes, offset: int) -> None:
        if self._entries >= self.slots:
            raise OffsetMapFullError(f"Attempted to add a new entry to a full offset map, entries: {self._entries}, "
                                     f"slots: {self.slots}")
        self.lookups += 1
        buf = self._buf
        slots = self.slots
        # Probe 0 inline: on a map below its load factor most keys land on their first slot.
        probe = int.from_bytes(h[0:4], "big", signed=True)
        if probe < 0:
            probe = 0 if probe == _INT_MIN else -probe
        pos = (probe % slots) * BYTES_PER_ENTRY
        self.probes += 1
        current = buf[pos:pos + HASH_SIZE]
        if current != h and (current != _ZERO_HASH or buf[pos + HASH_SIZE:pos + BYTES_PER_ENTRY] != _ZERO_OFFSET):
            positions = self._slot_positions(h)
            next(positions)
            while True:
                pos = next(positions)
                self.probes += 1
                current = buf[pos:pos + HASH_SIZE]
                if current == h:
                    break
                if current == _ZERO_HASH and buf[pos + HASH_SIZE:pos + BYTES_PER_ENTRY] == _ZERO_OFFSET:
                    break
        if current != h:
            buf[pos:pos + HASH_SIZE] = h
            self._entries += 1
            self._written = True
        _OFFSET.pack_into(buf, pos + HASH_SIZE, offset)
        self._latest = offset

    def get(self, key: bytes) -> int:
        """The latest offset put for ``key``, or -1."""
        return self.get_hash(hashlib.md5(key).digest())

    def get_hash(self, h: bytes) -> int:
        self.lookups += 1
        buf = self._buf
        slots = self.slots
        probe = int.from_bytes(h[0:4], "big", signed=True)
        if probe < 0:
            probe = 0 if probe == _INT_MIN else -probe
        pos = (probe % slots) * BYTES_PER_ENTRY
        self.probes += 1
        current = buf[pos:pos + HASH_SIZE]
        if current == h:
            return _OFFSET.unpack_from(buf, pos + HASH_SIZE)[0]
        if current == _ZERO_HASH and buf[pos + HASH_SIZE:pos + BYTES_PER_ENTRY] == _ZERO_OFFSET:
            return -1
        # Kafka bounds the search so a completely full map cannot loop forever.
        max_attempts = slots + HASH_SIZE - 4
        positions = self._slot_positions(h)
        next(positions)
        for _attempt in range(1, max_attempts):
            pos = next(positions)
            self.probes += 1
            current = buf[pos:pos + HASH_SIZE]
            if current == h:
                return _OFFSET.unpack_from(buf, pos + HASH_SIZE)[0]
            if current == _ZERO_HASH and buf[pos + HASH_SIZE:pos + BYTES_PER_ENTRY] == _ZERO_OFFSET:
                return -1
        return -1

    def close(self) -> None:
        """Release the table now rather than when the map is garbage-collected."""
        self._buf.close()

    def __repr__(self) -> str:
        return (f"SkimpyOffsetMap(memory={self.memory}, slots={self.slots}, size={self._entries}, "
                f"latest_offset={self._latest})")
