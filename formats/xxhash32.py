"""XXH32 (Yann Collet's xxHash, 32-bit variant), pure Python.

Kafka's LZ4 framing uses XXH32 with seed 0 for the one-byte frame-descriptor checksum
(``HC = (xxh32(descriptor) >> 8) & 0xFF``) and for the optional per-block checksums.
The descriptor is 2 or 10 bytes long, so speed only matters for block checksums, which
Kafka never writes; ``compression`` hashes long buffers with liblz4 instead.

Algorithm (little-endian words, all arithmetic modulo 2**32):

* input of 16 bytes or more: four lanes ``v1..v4`` start at ``seed+P1+P2``, ``seed+P2``,
  ``seed``, ``seed-P1``; every 16-byte stripe feeds one 4-byte word to each lane with
  ``v = rotl(v + word*P2, 13) * P1``; then ``h = rotl(v1,1)+rotl(v2,7)+rotl(v3,12)+rotl(v4,18)``.
  Shorter input starts from ``h = seed + P5``.
* ``h += total length``; each remaining 4-byte word: ``h = rotl(h + word*P3, 17) * P4``;
  each remaining byte: ``h = rotl(h + byte*P5, 11) * P1``.
* avalanche: ``h ^= h>>15; h *= P2; h ^= h>>13; h *= P3; h ^= h>>16``.
"""

from __future__ import annotations

import struct

__all__ = ["xxh32"]

_P1 = 2654435761
_P2 = 2246822519
_P3 = 3266489917
_P4 = 668265263
_P5 = 374761393
_MASK = 0xFFFFFFFF

_STRIPES = struct.Struct("<4I")
_WORD = struct.Struct("<I")


def xxh32(data: bytes | bytearray | memoryview, seed: int = 0) -> int:
    """Return the XXH32 hash of ``data`` as an unsigned 32-bit int."""
    buf = memoryview(data).cast("B") if not isinstance(data, bytes) else data
    n = len(buf)
    seed &= _MASK
    pos = 0
    if n >= 16:
        v1 = (seed + _P1 + _P2) & _MASK
        v2 = (seed + _P2) & _MASK
        v3 = seed
        v4 = (seed - _P1) & _MASK
        pos = n - (n & 15)
        # The lane round is inlined: this loop is the only hot part of the hash.
        for a, b, c, d in _STRIPES.iter_unpack(buf[:pos]):
            v1 = (v1 + a * _P2) & _MASK
            v1 = (((v1 << 13) | (v1 >> 19)) & _MASK) * _P1 & _MASK
            v2 = (v2 + b * _P2) & _MASK
            v2 = (((v2 << 13) | (v2 >> 19)) & _MASK) * _P1 & _MASK
            v3 = (v3 + c * _P2) & _MASK
            v3 = (((v3 << 13) | (v3 >> 19)) & _MASK) * _P1 & _MASK
            v4 = (v4 + d * _P2) & _MASK
            v4 = (((v4 << 13) | (v4 >> 19)) & _MASK) * _P1 & _MASK
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _MASK
    else:
        h = (seed + _P5) & _MASK
    h = (h + n) & _MASK
    while pos + 4 <= n:
        (word,) = _WORD.unpack_from(buf, pos)
        h = _rotl((h + word * _P3) & _MASK, 17) * _P4 & _MASK
        pos += 4
    while pos < n:
        h = _rotl((h + buf[pos] * _P5) & _MASK, 11) * _P1 & _MASK
        pos += 1
    h ^= h >> 15
    h = h * _P2 & _MASK
    h ^= h >> 13
    h = h * _P3 & _MASK
    h ^= h >> 16
    return h


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _MASK
