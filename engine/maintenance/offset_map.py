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

:class:`NativeOffsetMap` is the same map with its table and loops in the native module
(``plog._native.CleanerMap``, native/src/compact.rs): the same slots, probe sequences,
stored bytes, counters and "full" points, plus the cleaner's per-batch loops over a records
region (the map build's puts, the filter's retention check), which hash a batch's keys four
at a time. :func:`new_offset_map` gives it when the native module is active; the class
above is the reference (``PLOG_NATIVE=0``) and what tests compare it with.
"""

from __future__ import annotations

import hashlib
import mmap

from plog.formats import native
from plog.formats.java import int32
from plog.formats.offset_map_layout import (
    BYTES_PER_ENTRY,
    EMPTY_HASH as _ZERO_HASH,
    EMPTY_OFFSET as _ZERO_OFFSET,
    HASH_SIZE,
    HASH_WINDOWS,
    SLOT_OFFSET as _OFFSET,
    first_window as _first_window,
    hash_windows as _probe_windows,
)
from plog.engine.errors import OffsetMapFullError

DEFAULT_LOAD_FACTOR = 0.9

_INT_MIN = -(1 << 31)
#: No bound on the probes of a put (Kafka's loops until it finds a slot).
_UNBOUNDED = 1 << 62


def _check_settings(memory: int, load_factor: float) -> None:
    """An offset map's size and load factor as the cleaner takes them (ValueError else)."""
    if memory < BYTES_PER_ENTRY:
        raise ValueError(f"an offset map needs at least {BYTES_PER_ENTRY} bytes, not {memory}")
    if not 0 < load_factor <= 1:
        raise ValueError(f"the load factor must be in (0, 1], not {load_factor}")


class SkimpyOffsetMap:
    """Kafka's ``SkimpyOffsetMap`` with the MD5 hash; see the module docstring."""

    __slots__ = ("memory", "slots", "load_factor", "_buf", "_entries", "_latest", "lookups", "probes", "_written")

    def __init__(self, memory: int, load_factor: float = DEFAULT_LOAD_FACTOR):
        _check_settings(memory, load_factor)
        self.memory = memory
        self.slots = memory // BYTES_PER_ENTRY
        self.load_factor = load_factor
        self._buf = mmap.mmap(-1, memory)
        self._written = False
        self.clear()

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
            if attempt < HASH_WINDOWS:
                probe = windows[attempt]
            else:
                probe = int32(last + attempt - (HASH_WINDOWS - 1))
            if probe < 0:
                probe = 0 if probe == _INT_MIN else -probe
            yield (probe % slots) * BYTES_PER_ENTRY
            attempt += 1

    def _position_of(self, h: bytes, max_attempts: int) -> int | None:
        """Kafka's probe loop for hash ``h``: the byte position of the slot holding it
        (``>= 0``), or ``~position`` (``< 0``) of the first empty slot on its probe sequence,
        where it goes; None when ``max_attempts`` probes found neither."""
        self.lookups += 1
        buf = self._buf
        # Probe 0 inline: on a map below its load factor most keys land on their first slot.
        probe = _first_window(h)[0]
        if probe < 0:
            probe = 0 if probe == _INT_MIN else -probe
        pos = (probe % self.slots) * BYTES_PER_ENTRY
        positions = None
        attempt = 0
        while True:
            self.probes += 1
            current = buf[pos:pos + HASH_SIZE]
            if current == h:
                return pos
            if current == _ZERO_HASH and buf[pos + HASH_SIZE:pos + BYTES_PER_ENTRY] == _ZERO_OFFSET:
                return ~pos
            attempt += 1
            if attempt >= max_attempts:
                return None
            if positions is None:
                positions = self._slot_positions(h)
                next(positions)  # probe 0, read above
            pos = next(positions)

    def put(self, key: bytes, offset: int) -> None:
        """Record ``offset`` as the latest offset of ``key``."""
        self.put_hash(hashlib.md5(key).digest(), offset)

    def put_hash(self, h: bytes, offset: int) -> None:
        if self._entries >= self.slots:
            raise OffsetMapFullError(f"Attempted to add a new entry to a full offset map, entries: {self._entries}, "
                                     f"slots: {self.slots}")
        # Kafka's put probes until it finds the key or an empty slot (one exists: the map
        # is not full, and the probe sequence ends in linear probing over every slot).
        pos = self._position_of(h, _UNBOUNDED)
        if pos < 0:
            pos = ~pos
            self._buf[pos:pos + HASH_SIZE] = h
            self._entries += 1
            self._written = True
        _OFFSET.pack_into(self._buf, pos + HASH_SIZE, offset)
        self._latest = offset

    def get(self, key: bytes) -> int:
        """The latest offset put for ``key``, or -1."""
        return self.get_hash(hashlib.md5(key).digest())

    def get_hash(self, h: bytes) -> int:
        # Kafka bounds the search so a completely full map cannot loop forever.
        pos = self._position_of(h, self.slots + HASH_SIZE - 4)
        if pos is None or pos < 0:
            return -1
        return _OFFSET.unpack_from(self._buf, pos + HASH_SIZE)[0]

    def close(self) -> None:
        """Release the table now rather than when the map is garbage-collected."""
        self._buf.close()

    def __repr__(self) -> str:
        return (f"SkimpyOffsetMap(memory={self.memory}, slots={self.slots}, size={self._entries}, "
                f"latest_offset={self._latest})")


class NativeOffsetMap:
    """:class:`SkimpyOffsetMap` with its table and probing in the native module
    (``plog._native.CleanerMap``): the same slots, probe sequences, stored bytes, counters
    and "full" points, plus the cleaner's per-batch loops (:meth:`map_records`,
    :meth:`retained`), each None where the caller must run the reference for the batch."""

    __slots__ = ("memory", "slots", "load_factor", "_t")

    def __init__(self, memory: int, load_factor: float = DEFAULT_LOAD_FACTOR):
        _check_settings(memory, load_factor)
        self.memory = memory
        self.slots = memory // BYTES_PER_ENTRY
        self.load_factor = load_factor
        self._t = native.module.CleanerMap(memory)

    capacity = SkimpyOffsetMap.capacity
    utilization = SkimpyOffsetMap.utilization
    collision_rate = SkimpyOffsetMap.collision_rate
    hash_key = staticmethod(SkimpyOffsetMap.hash_key)

    @property
    def size(self) -> int:
        return self._t.entries

    def __len__(self) -> int:
        return self._t.entries

    @property
    def _entries(self) -> int:
        return self._t.entries

    @property
    def is_full(self) -> bool:
        return self._t.entries >= int(self.slots * self.load_factor)

    @property
    def latest_offset(self) -> int:
        return self._t.latest

    def update_latest_offset(self, offset: int) -> None:
        self._t.latest = offset

    @property
    def lookups(self) -> int:
        return self._t.lookups

    @property
    def probes(self) -> int:
        return self._t.probes

    def clear(self) -> None:
        self._t.clear()

    def put(self, key: bytes, offset: int) -> None:
        self.put_hash(hashlib.md5(key).digest(), offset)

    def put_hash(self, h: bytes, offset: int) -> None:
        if not self._t.put_hash(h, offset):
            raise OffsetMapFullError(f"Attempted to add a new entry to a full offset map, entries: "
                                     f"{self._t.entries}, slots: {self.slots}")

    def get(self, key: bytes) -> int:
        return self._t.get_hash(hashlib.md5(key).digest())

    def get_hash(self, h: bytes) -> int:
        return self._t.get_hash(h)

    def map_records(self, data: bytes, count: int, base_offset: int, start: int, max_desired: int):
        """The map build's loop over a v2 data batch's records region: ``(records counted,
        filled)``, or None (nothing changed) where the reference must run."""
        if not (_I64_MIN <= base_offset <= _I64_MAX and _I64_MIN <= start <= _I64_MAX):
            return None
        return self._t.map_records(data, count, base_offset, start, max_desired)

    def retained(self, data: bytes, count: int, base_offset: int, latest: int, retain_deletes: bool):
        """``retained_indexes`` over a v2 data batch's records region: ``(keep, tombstones
        kept, keyless removed, tombstones removed, tombstones expired)``, or None (nothing
        counted) where the reference must run."""
        if not (_I64_MIN <= base_offset <= _I64_MAX and _I64_MIN <= latest <= _I64_MAX):
            return None
        return self._t.retained(data, count, base_offset, latest, retain_deletes)

    def close(self) -> None:
        """Release the table now (the map is not used after this)."""
        self._t.clear()

    def __repr__(self) -> str:
        return (f"SkimpyOffsetMap(memory={self.memory}, slots={self.slots}, size={self.size}, "
                f"latest_offset={self.latest_offset})")


_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1


def new_offset_map(memory: int, load_factor: float = DEFAULT_LOAD_FACTOR):
    """The cleaner's offset map: :class:`NativeOffsetMap` when the native module is active,
    else the reference :class:`SkimpyOffsetMap`."""
    if native.active():
        return NativeOffsetMap(memory, load_factor)
    return SkimpyOffsetMap(memory, load_factor)


class ExactOffsetMap:
    """A dict with :class:`SkimpyOffsetMap`'s interface and no size limit: what a read-only
    simulation of a clean maps (every key of the dirty section in one round)."""

    def __init__(self) -> None:
        self._d: dict[bytes, int] = {}
        self._latest = -1
        self.slots = 0

    size = property(lambda self: len(self._d))
    latest_offset = property(lambda self: self._latest)
    capacity = property(lambda self: 1 << 62)
    utilization = property(lambda self: 0.0)

    def clear(self) -> None:
        self._d.clear()
        self._latest = -1

    def update_latest_offset(self, offset: int) -> None:
        self._latest = offset

    def put_hash(self, h: bytes, offset: int) -> None:
        self._d[h] = offset
        self._latest = offset

    def get_hash(self, h: bytes) -> int:
        return self._d.get(h, -1)
