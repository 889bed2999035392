"""Kafka's five compression codecs: bytes in, bytes out, framed exactly as Kafka frames them.

A compressed v2 batch holds one codec stream after its 61-byte header; a compressed legacy
(v0/v1) wrapper message holds one as its value. Codec ids are the low three attribute bits.

=====  ======  ====================================================================
id     name    Java writer Kafka uses
=====  ======  ====================================================================
0      none    --
1      gzip    ``java.util.zip.GZIPOutputStream``, zlib level 6 unless configured (1-9)
2      snappy  ``org.xerial.snappy.SnappyOutputStream`` (xerial framing, 32 KiB chunks)
3      lz4     Kafka's ``Lz4BlockOutputStream`` (LZ4 frame subset, 64 KiB blocks), level 9
4      zstd    zstd-jni ``ZstdOutputStreamNoFinalizer``, level 3; magic 2 only
=====  ======  ====================================================================

gzip (RFC 1952, one member)::

    1f 8b 08 00 | 00 00 00 00 | 00 ff | raw deflate ... | crc32 (LE u32) | isize (LE u32)
    ID1 ID2 CM FLG  MTIME=0      XFL OS=0xff (Java; Python's gzip writes OS=3)

  Reader (``GZIPInputStream``): concatenated members are decoded one after another; bytes
  after a member that do not start a valid gzip header end the stream and are ignored.

snappy, xerial snappy-java framing (not Google's framing format)::

    82 53 4e 41 50 50 59 00 | 00 00 00 01 | 00 00 00 01 | { int32 BE n | n bytes raw snappy block }*
    magic "\\x82SNAPPY\\0"     version 1     min-compatible 1

  The writer cuts the input into 32768-byte chunks (the last one shorter) and writes the
  16-byte header even for empty input. A raw snappy block is
  ``varint32 uncompressed length | tagged literals and copies``.
  Reader (``SnappyInputStream``): input shorter than 16 bytes or not starting with the
  8-byte magic is one raw block; a version below 1 is an error; a chunk length equal to
  0x82534E41 (the magic's first int) starts a concatenated stream whose remaining 12 header
  bytes are skipped (bytes 4..7 that are not ``PPY\\0`` end the stream); a negative chunk
  length is an error; fewer than 4 bytes where a chunk length belongs end the stream.

lz4, the LZ4 frame format as Kafka writes it::

    04 22 4d 18 | FLG 60 | BD 40 | HC | { int32 LE size (bit 31: stored raw) | data }* | 00 00 00 00
    magic         v01, independent blocks; 64 KiB max block

  ``HC = (xxh32(descriptor, seed 0) >> 8) & 0xff``. The descriptor is FLG, BD (and the 8-byte
  content size when FLG bit 3 is set), which gives HC 0x82. KAFKA-3160: for magic 0 Kafka
  hashes the magic too (``04 22 4d 18 60 40``), giving 0x1a, and its reader skips the HC
  check for magic 0 data. Writer: one block per 64 KiB of input, stored raw when the
  compressed form is not shorter. Reader (``Lz4BlockInputStream``): at least 6 bytes; FLG
  version bits 01 and reserved bits 0-1 zero; BD reserved bits zero and block code 4-7
  (64 KiB/256 KiB/1 MiB/4 MiB); content size skipped; block checksums (FLG bit 4, XXH32 of
  the stored block bytes, LE after the block) verified; the content checksum after the
  end mark (FLG bit 2) read and ignored; bytes after the end mark ignored.

zstd, a standard zstd frame from zstd-jni's streaming compressor::

    28 b5 2f fd | FHD 00 | window 58 | blocks ... | 01 00 00
    magic         no content size, no checksum, window 2 MiB (level 3); the data is flushed
                  as non-last blocks and the frame ends with an empty last raw block
                  (Kafka's close(): ZSTD_e_flush, then ZSTD_e_end)

  Reader: any sequence of zstd and skippable frames; empty input decodes to nothing (as in
  zstd-jni); a frame cut short is an error ("Truncated source").

Byte identity with Kafka's output needs the same compressor, version and level. gzip and
zstd reproduce the kafka-format.md test vectors. LZ4 blocks come from liblz4's default
compressor, which is what lz4-java's native fast compressor runs; a producer that used
lz4-java's pure-Java fallback writes different (equally valid) blocks. Snappy blocks come
from python-snappy, which wraps cramjam, a Rust port of snappy; its output often differs
from Google's C++ snappy (what snappy-java runs) by a few bytes per block. Decoding
never depends on any of this.

Every decoder bounds its output by ``max_size`` before the native library allocates
anything driven by a length field in the input, so a decompression bomb or a bogus length
raises :class:`DecompressionLimitError` (or :class:`CompressionError`) without allocating
more than about ``max_size`` plus one block.
"""

from __future__ import annotations

import importlib
import struct
import sys
import threading
import zlib

from .errors import CompressionError, DecompressionLimitError, UnsupportedCodecError


class _Library:
    """A codec library, imported when first used: most runs (an uncompressed produce, a
    dump, ``--help``) use none, and importing all four cost about a tenth of start-up time.
    The first use puts the module itself in this module's globals, in the stand-in's place."""

    def __init__(self, module: str, name: str):
        self._module, self._name = module, name

    def __getattr__(self, attr: str):
        module = importlib.import_module(self._module)
        globals()[self._name] = module
        return getattr(module, attr)


lz4_block = _Library("lz4.block", "lz4_block")
snappy = _Library("snappy", "snappy")
zstandard = _Library("zstandard", "zstandard")
_xxhash = _Library("xxhash", "_xxhash")


def xxh32(data) -> int:
    return _xxhash.xxh32_intdigest(data)

__all__ = [
    "NONE",
    "GZIP",
    "SNAPPY",
    "LZ4",
    "ZSTD",
    "CODEC_NAMES",
    "codec_name",
    "codec_id",
    "compress",
    "decompress",
]

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
_CODEC_IDS = {name: codec for codec, name in CODEC_NAMES.items()}

_I32_BE = struct.Struct(">i")
_U32_LE = struct.Struct("<I")


# --------------------------------------------------------------------------- public API


def codec_name(codec: int) -> str:
    """Kafka's ``CompressionType.name`` for a codec id."""
    try:
        return CODEC_NAMES[codec]
    except (KeyError, TypeError):
        raise UnsupportedCodecError(f"Unknown compression type id: {codec}") from None


def codec_id(name: str) -> int:
    """The codec id for a name such as ``"gzip"`` (case-insensitive)."""
    try:
        return _CODEC_IDS[name.lower()]
    except (KeyError, AttributeError):
        raise UnsupportedCodecError(f"Unknown compression name: {name}") from None


def compress(
    codec: int, data: bytes | memoryview, *, level: int | None = None, magic: int = 2
) -> bytes:
    """Compress ``data`` the way Kafka's producer does for a batch of the given ``magic``.

    ``level`` follows Kafka's ``compression.<codec>.level`` (None = Kafka's default); it is
    ignored for none and snappy. Raises :class:`UnsupportedCodecError` for unknown codecs
    and for zstd below magic 2, ``ValueError`` for a level Kafka would reject.
    """
    codec_name(codec)
    _check_magic(codec, magic)
    buf = _byte_view(data)
    if codec == NONE:
        return data if isinstance(data, bytes) else bytes(buf)
    if codec == GZIP:
        return _gzip_compress(buf, level)
    if codec == SNAPPY:
        return _snappy_compress(buf)
    if codec == LZ4:
        return _lz4_compress(buf, level, magic)
    return _zstd_compress(buf, level)


def decompress(codec: int, data: bytes | memoryview, max_size: int, *, magic: int = 2) -> bytes:
    """Decompress one codec stream, refusing to produce more than ``max_size`` bytes.

    Raises :class:`DecompressionLimitError` when the output would exceed ``max_size``,
    :class:`CompressionError` for a stream that does not decode, and
    :class:`UnsupportedCodecError` for an unknown codec or zstd below magic 2.
    No other exception escapes for any input bytes.
    """
    name = codec_name(codec)
    _check_magic(codec, magic)
    if max_size < 0:
        raise ValueError(f"max_size must be >= 0, got {max_size}")
    buf = _byte_view(data)
    try:
        if codec == NONE:
            _check_limit("none", len(buf), max_size)
            return data if isinstance(data, bytes) else bytes(buf)
        if codec == GZIP:
            return _gzip_decompress(buf, max_size)
        if codec == SNAPPY:
            return _snappy_decompress(buf, max_size)
        if codec == LZ4:
            return _lz4_decompress(buf, max_size, magic)
        return _zstd_decompress(buf, max_size)
    except _library_errors() as exc:
        # The codecs' own checks raise CompressionError; this catches what the native
        # libraries report about malformed data so that callers see one error family.
        detail = str(exc) or str(exc.__cause__ or type(exc).__name__)
        raise CompressionError(f"{name} data does not decode: {detail}") from exc


# --------------------------------------------------------------------------- shared helpers

def _library_errors() -> tuple:
    """The exception types of the codec libraries loaded so far (one that raised is loaded)."""
    errors = [zlib.error, struct.error]
    for module, error in (("snappy", "UncompressError"), ("lz4.block", "LZ4BlockError"), ("zstandard", "ZstdError")):
        loaded = sys.modules.get(module)
        if loaded is not None:
            errors.append(getattr(loaded, error))
    return tuple(errors)


def _check_magic(codec: int, magic: int) -> None:
    if codec == ZSTD and magic < 2:
        raise UnsupportedCodecError(f"ZStandard compression is not supported for magic {magic}")


def _byte_view(data: bytes | bytearray | memoryview) -> memoryview:
    """``data`` as a flat byte view: slicing it never copies."""
    view = memoryview(data)
    if view.ndim != 1 or view.itemsize != 1 or view.format != "B":
        view = view.cast("B")
    return view


def _check_limit(name: str, size: int, max_size: int) -> None:
    if size > max_size:
        raise DecompressionLimitError(
            f"{name} data decompresses to more than the limit of {max_size} bytes"
        )


def _premature_end(name: str, needed: int, pos: int, have: int) -> CompressionError:
    return CompressionError(
        f"{name} stream ended prematurely: {needed} bytes needed at byte {pos}, "
        f"{max(have - pos, 0)} available"
    )


class _Output:
    """The decoded pieces of one stream, checked against ``max_size`` as they arrive.

    The input decides how many pieces there are (an LZ4 frame may hold a million one-byte
    blocks), so small pieces are packed into one buffer: memory follows the output size,
    not the piece count. A stream that decodes in one piece is returned without a copy.
    """

    __slots__ = ("name", "max_size", "size", "_parts", "_small")

    _SMALL = 4096

    def __init__(self, name: str, max_size: int):
        self.name = name
        self.max_size = max_size
        self.size = 0
        self._parts: list[bytes] = []
        self._small = bytearray()

    @property
    def room(self) -> int:
        """How many more bytes the limit allows."""
        return self.max_size - self.size

    def check(self, extra: int) -> None:
        """Raise DecompressionLimitError if ``extra`` more bytes would pass the limit."""
        _check_limit(self.name, self.size + extra, self.max_size)

    def add(self, piece: bytes) -> None:
        self.check(len(piece))
        self.size += len(piece)
        if len(piece) < self._SMALL:
            self._small += piece
            return
        if self._small:
            self._parts.append(bytes(self._small))
            self._small.clear()
        self._parts.append(piece)

    def result(self) -> bytes:
        if self._small:
            self._parts.append(bytes(self._small))
        parts = self._parts
        return parts[0] if len(parts) == 1 else b"".join(parts)


# --------------------------------------------------------------------------- gzip

# ID1 ID2 CM=deflate FLG=0 MTIME=0 XFL=0 OS=0xff: what java.util.zip.GZIPOutputStream writes.
_GZIP_HEADER = bytes.fromhex("1f8b08000000000000ff")
_GZIP_TRAILER = struct.Struct("<II")
_GZIP_FEXTRA, _GZIP_FNAME, _GZIP_FCOMMENT, _GZIP_FHCRC = 0x04, 0x08, 0x10, 0x02


def _gzip_compress(buf: bytes | memoryview, level: int | None) -> bytes:
    # Kafka's default is Deflater.DEFAULT_COMPRESSION (-1), which zlib maps to 6.
    if level is None or level == -1:
        level = 6
    if not 1 <= level <= 9:
        raise ValueError(f"gzip level must be 1..9 (or -1), got {level}")
    # Java's Deflater(level, nowrap=true): windowBits 15, memLevel 8, default strategy.
    deflater = zlib.compressobj(level, zlib.DEFLATED, -15, 8, zlib.Z_DEFAULT_STRATEGY)
    body = deflater.compress(buf) + deflater.flush()
    trailer = _GZIP_TRAILER.pack(zlib.crc32(buf), len(buf) & 0xFFFFFFFF)
    return b"".join((_GZIP_HEADER, body, trailer))


def _gzip_decompress(buf: memoryview, max_size: int) -> bytes:
    if _gzip_header_end(buf, 0) is None:
        raise CompressionError("gzip data is not in GZIP format (bad or truncated header)")
    out = _Output("gzip", max_size)
    pos = _gzip_member(buf, 0, len(buf), out)
    # GZIPInputStream reads another member only if a complete header follows; anything
    # else after a member ends the stream and is ignored.
    while pos < len(buf) and _gzip_header_end(buf, pos) is not None:
        pos = _gzip_member(buf, pos, _GZIP_MEMBER_WINDOW, out)
    return out.result()


# Later members are fed in growing windows: zlib copies the input left over after a
# member (unused_data), and a stream of many tiny members must not cost quadratic time.
_GZIP_MEMBER_WINDOW, _GZIP_MAX_WINDOW = 1024, 1 << 20


def _gzip_member(buf: memoryview, pos: int, window: int, out: _Output) -> int:
    """Inflate the member at ``pos`` into ``out``; return where it ends."""
    inflater = zlib.decompressobj(16 + 15)
    while not inflater.eof:
        if pos >= len(buf):
            raise CompressionError(
                f"gzip stream ended prematurely after {out.size} decompressed bytes"
            )
        piece = buf[pos : pos + window]
        # max_length caps what zlib may produce: one byte past the limit proves a bomb.
        out.add(inflater.decompress(piece, out.room + 1))
        pos += len(piece) - len(inflater.unused_data)
        window = min(window * 2, _GZIP_MAX_WINDOW)
    return pos


def _gzip_header_end(buf: memoryview, pos: int) -> int | None:
    """End of the gzip member header at ``pos``, or None when it is not a complete one."""
    end = len(buf)
    if end - pos < 10 or buf[pos] != 0x1F or buf[pos + 1] != 0x8B or buf[pos + 2] != 8:
        return None
    flags = buf[pos + 3]
    p = pos + 10
    if flags & _GZIP_FEXTRA:
        if end - p < 2:
            return None
        p += 2 + (buf[p] | buf[p + 1] << 8)
    for flag in (_GZIP_FNAME, _GZIP_FCOMMENT):
        if flags & flag:
            p = _after_zero_byte(buf, p)
            if p < 0:
                return None
    if flags & _GZIP_FHCRC:
        p += 2
    return p if p <= end else None


def _after_zero_byte(buf: memoryview, pos: int) -> int:
    """The offset after the next zero byte at or past ``pos``, or -1 if there is none."""
    while pos < len(buf):
        window = bytes(buf[pos : pos + 256])
        zero = window.find(0)
        if zero >= 0:
            return pos + zero + 1
        pos += len(window)
    return -1


# --------------------------------------------------------------------------- snappy

_SNAPPY_MAGIC = b"\x82SNAPPY\x00"
_SNAPPY_HEADER = _SNAPPY_MAGIC + struct.pack(">ii", 1, 1)
_SNAPPY_HEADER_SIZE = len(_SNAPPY_HEADER)
_SNAPPY_MAGIC_HEAD = 0x82534E41 - (1 << 32)  # the magic's first int32, as Java reads it
_SNAPPY_CHUNK = 32768  # SnappyOutputStream.DEFAULT_BLOCK_SIZE
# The densest snappy element is a 3-byte copy of 64 bytes, so no valid block expands more.
_SNAPPY_MAX_EXPANSION = 22


def _snappy_compress(buf: bytes | memoryview) -> bytes:
    parts = [_SNAPPY_HEADER]
    for start in range(0, len(buf), _SNAPPY_CHUNK):
        block = snappy.compress(buf[start : start + _SNAPPY_CHUNK])
        parts.append(_I32_BE.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decompress(buf: memoryview, max_size: int) -> bytes:
    end = len(buf)
    if end == 0:
        raise CompressionError("snappy data is empty (Cannot decompress empty stream)")
    out = _Output("snappy", max_size)
    if end < _SNAPPY_HEADER_SIZE or buf[:8] != _SNAPPY_MAGIC:
        # SnappyInputStream falls back to Snappy.uncompress of the whole input.
        out.add(_snappy_block(buf, out))
        return out.result()
    _check_snappy_version(buf, 0)
    pos = _SNAPPY_HEADER_SIZE
    while end - pos >= 4:
        (length,) = _I32_BE.unpack_from(buf, pos)
        if length == _SNAPPY_MAGIC_HEAD:
            # A second SnappyOutputStream's output appended to the first.
            if end - pos < _SNAPPY_HEADER_SIZE:
                raise CompressionError(
                    f"snappy concatenated stream header at byte {pos} is cut short"
                )
            if buf[pos + 4 : pos + 8] != _SNAPPY_MAGIC[4:]:
                break
            _check_snappy_version(buf, pos)
            pos += _SNAPPY_HEADER_SIZE
            continue
        if length < 0:
            raise CompressionError(f"snappy chunk length {length} at byte {pos} is negative")
        pos += 4
        if end - pos < length:
            raise CompressionError(
                f"snappy chunk of {length} bytes at byte {pos - 4} runs past the end "
                f"({end - pos} bytes left) (failed to read chunk)"
            )
        out.add(_snappy_block(buf[pos : pos + length], out))
        pos += length
    return out.result()


def _check_snappy_version(buf: memoryview, pos: int) -> None:
    (version,) = _I32_BE.unpack_from(buf, pos + 8)
    if version < 1:
        raise CompressionError(
            f"snappy stream at byte {pos} has codec version {version}; at least 1 is required"
        )


def _snappy_block(block: memoryview, out: _Output) -> bytes:
    """Uncompress one raw snappy block, refusing it before decoding if it is too big."""
    declared, header = _snappy_declared_length(block)
    # Both checks come before the library allocates a buffer of the declared size.
    if declared > (len(block) - header) * _SNAPPY_MAX_EXPANSION:
        raise CompressionError(
            f"snappy block of {len(block)} bytes declares {declared} uncompressed bytes, "
            f"more than snappy can encode in it"
        )
    out.check(declared)
    return snappy.uncompress(block)


def _snappy_declared_length(block: memoryview) -> tuple[int, int]:
    """The leading varint32 of a raw snappy block: (uncompressed length, varint size)."""
    value = 0
    for i in range(min(len(block), 5)):
        byte = block[i]
        value |= (byte & 0x7F) << (7 * i)
        if byte < 0x80:
            if value > 0xFFFFFFFF:
                break
            return value, i + 1
    raise CompressionError(
        f"snappy block of {len(block)} bytes does not start with a valid length varint"
    )


# --------------------------------------------------------------------------- lz4

_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_LZ4_FLG = 0x60  # version 01, independent blocks, no checksums, no content size
_LZ4_BD = 0x40  # block maximum size code 4 = 64 KiB
_LZ4_BLOCK = 64 * 1024
_LZ4_RAW_BIT = 0x80000000
_LZ4_END_MARK = b"\0\0\0\0"
_LZ4_FLG_BLOCK_CHECKSUM, _LZ4_FLG_CONTENT_SIZE, _LZ4_FLG_CONTENT_CHECKSUM = 0x10, 0x08, 0x04
_LZ4_BLOCK_MAX = {4: 1 << 16, 5: 1 << 18, 6: 1 << 20, 7: 1 << 22}
_LZ4_DEFAULT_LEVEL = 9  # Kafka's default; it selects lz4-java's fast compressor


def _lz4_header_checksum(descriptor: bytes) -> int:
    return (xxh32(descriptor) >> 8) & 0xFF


# The frame header plog writes, its HC byte written out (``_lz4_header_checksum(FLG + BD)``,
# checked by tests/formats/test_compression.py) so that importing this module does not load
# xxhash. KAFKA-3160: magic 0 data carries the checksum of magic + FLG + BD (0x1a, not 0x82).
_LZ4_HEADER = _LZ4_MAGIC + bytes([_LZ4_FLG, _LZ4_BD, 0x82])
_LZ4_HEADER_V0 = _LZ4_HEADER[:6] + b"\x1a"


def _lz4_compress(buf: bytes | memoryview, level: int | None, magic: int) -> bytes:
    if level is None:
        level = _LZ4_DEFAULT_LEVEL
    if not 1 <= level <= 17:
        raise ValueError(f"lz4 level must be 1..17, got {level}")
    parts = [_LZ4_HEADER_V0 if magic == 0 else _LZ4_HEADER]
    for start in range(0, len(buf), _LZ4_BLOCK):
        chunk = buf[start : start + _LZ4_BLOCK]
        if level == _LZ4_DEFAULT_LEVEL:
            block = lz4_block.compress(chunk, mode="default", store_size=False)
        else:
            block = lz4_block.compress(
                chunk, mode="high_compression", compression=level, store_size=False
            )
        if len(block) >= len(chunk):
            parts.append(_U32_LE.pack(len(chunk) | _LZ4_RAW_BIT))
            parts.append(bytes(chunk))
        else:
            parts.append(_U32_LE.pack(len(block)))
            parts.append(block)
    parts.append(_LZ4_END_MARK)
    return b"".join(parts)


def _lz4_decompress(buf: memoryview, max_size: int, magic: int) -> bytes:
    end = len(buf)
    if end < 6:
        raise _premature_end("lz4", 6, 0, end)
    if buf[:4] != _LZ4_MAGIC:
        raise CompressionError(
            f"lz4 stream unsupported (invalid magic bytes {bytes(buf[:4]).hex()})"
        )
    flg = buf[4]
    block_max = _lz4_block_max(flg, buf[5])
    pos = 6
    if flg & _LZ4_FLG_CONTENT_SIZE:
        if end - pos < 8:
            raise _premature_end("lz4", 8, pos, end)
        pos += 8
    if pos >= end:
        raise _premature_end("lz4", 1, pos, end)
    # Magic 0 data was written with the KAFKA-3160 checksum, so Kafka skips the check.
    if magic != 0:
        expected = _lz4_header_checksum(bytes(buf[4:pos]))
        if buf[pos] != expected:
            raise CompressionError(
                f"lz4 stream frame descriptor corrupted: checksum byte 0x{buf[pos]:02x}, "
                f"expected 0x{expected:02x}"
            )
    pos += 1
    block_checksum = flg & _LZ4_FLG_BLOCK_CHECKSUM
    out = _Output("lz4", max_size)
    while True:
        if end - pos < 4:
            raise _premature_end("lz4", 4, pos, end)
        (word,) = _U32_LE.unpack_from(buf, pos)
        pos += 4
        size = word & 0x7FFFFFFF
        if size == 0:  # the end mark (Kafka also reads a raw-flagged zero as one)
            if flg & _LZ4_FLG_CONTENT_CHECKSUM and end - pos < 4:
                raise _premature_end("lz4", 4, pos, end)
            return out.result()
        if size > block_max:
            raise CompressionError(
                f"lz4 block size {size} at byte {pos - 4} exceeded max: {block_max}"
            )
        if end - pos < size:
            raise _premature_end("lz4", size, pos, end)
        block = buf[pos : pos + size]
        pos += size
        if block_checksum:
            if end - pos < 4:
                raise _premature_end("lz4", 4, pos, end)
            (stored,) = _U32_LE.unpack_from(buf, pos)
            if xxh32(block) != stored:
                raise CompressionError(f"lz4 block checksum mismatch at byte {pos}")
            pos += 4
        if word & _LZ4_RAW_BIT:
            out.check(size)
            out.add(bytes(block))
        else:
            out.add(_lz4_block(block, block_max, out))


def _lz4_block_max(flg: int, bd: int) -> int:
    if flg >> 6 != 1:
        raise CompressionError(f"lz4 frame version {flg >> 6} unsupported (FLG 0x{flg:02x})")
    if flg & 0x03:
        raise CompressionError(f"lz4 FLG reserved bits must be 0 (FLG 0x{flg:02x})")
    if bd & 0x8F:
        raise CompressionError(f"lz4 BD reserved bits must be 0 (BD 0x{bd:02x})")
    code = bd >> 4
    if code not in _LZ4_BLOCK_MAX:
        raise CompressionError(f"lz4 block size code {code} unsupported (BD 0x{bd:02x})")
    return _LZ4_BLOCK_MAX[code]


def _lz4_block(block: memoryview, block_max: int, out: _Output) -> bytes:
    """Decompress one LZ4 block into a buffer sized by the limit as well as the BD code."""
    cap = min(block_max, out.room + 1)
    try:
        return lz4_block.decompress(block, uncompressed_size=cap)
    except lz4_block.LZ4BlockError:
        if cap == block_max:
            raise
        # Corrupt, or simply larger than what the limit leaves: a full-size try (one
        # block of memory) tells which; out.add then reports the limit.
        return lz4_block.decompress(block, uncompressed_size=block_max)


# --------------------------------------------------------------------------- zstd

_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_SKIPPABLE_MASK, _ZSTD_SKIPPABLE = 0xFFFFFFF0, 0x184D2A50
_ZSTD_DEFAULT_LEVEL = 3
_ZSTD_MIN_LEVEL, _ZSTD_MAX_LEVEL = -131072, 22
_ZSTD_BLOCK_MAX = 128 * 1024  # no block decodes to more (Block_Maximum_Size)
_ZSTD_DICT_ID_SIZE = (0, 1, 2, 4)
_ZSTD_CONTENT_SIZE_SIZE = (0, 2, 4, 8)
_BLOCK_RAW, _BLOCK_RLE, _BLOCK_COMPRESSED = 0, 1, 2

_zstd_local = threading.local()


def _zstd_compress(buf: bytes | memoryview, level: int | None) -> bytes:
    if level is None:
        level = _ZSTD_DEFAULT_LEVEL
    if not _ZSTD_MIN_LEVEL <= level <= _ZSTD_MAX_LEVEL:
        raise ValueError(f"zstd level must be {_ZSTD_MIN_LEVEL}..{_ZSTD_MAX_LEVEL}, got {level}")
    # zstd-jni streams: the size is never pledged (no content size), no checksum; Kafka's
    # close() flushes (ZSTD_e_flush: non-last block) and then ends the frame (ZSTD_e_end:
    # an empty last block).
    cctx = zstandard.ZstdCompressor(level=level, write_content_size=False, write_checksum=False)
    stream = cctx.compressobj()
    return b"".join(
        (
            stream.compress(buf),
            stream.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK),
            stream.flush(zstandard.COMPRESSOBJ_FLUSH_FINISH),
        )
    )


def _zstd_decompress(buf: memoryview, max_size: int) -> bytes:
    dctx = getattr(_zstd_local, "dctx", None)
    if dctx is None:
        dctx = _zstd_local.dctx = zstandard.ZstdDecompressor()
    out = _Output("zstd", max_size)
    pos = 0
    while pos < len(buf):
        pos = _zstd_frame(dctx, buf, pos, out)
    return out.result()


def _zstd_frame(dctx: zstandard.ZstdDecompressor, buf: memoryview, pos: int, out: _Output) -> int:
    """Decode the zstd or skippable frame at ``pos`` into ``out``; return where it ends.

    libzstd has no output cap, so the frame is walked block by block (3-byte headers)
    and fed in pieces: a piece goes to the decoder as soon as the most its blocks can
    decode to (128 KiB per compressed block, the stated size for raw and RLE blocks)
    passes what the limit leaves. The output then overshoots the limit by at most one
    block before out.add stops the work; data within the limit goes in one call.
    """
    end = len(buf)
    start = pos
    if end - pos < 4:
        raise CompressionError(f"zstd data has {end - pos} stray bytes at byte {pos}")
    (magic,) = _U32_LE.unpack_from(buf, pos)
    if magic & _ZSTD_SKIPPABLE_MASK == _ZSTD_SKIPPABLE:
        if end - pos < 8:
            raise _premature_end("zstd", 8, pos, end)
        (size,) = _U32_LE.unpack_from(buf, pos + 4)
        if end - pos - 8 < size:
            raise _premature_end("zstd", size, pos + 8, end)
        return pos + 8 + size
    if magic != _ZSTD_MAGIC:
        raise CompressionError(f"zstd unknown frame descriptor 0x{magic:08x} at byte {pos}")
    pos += 4
    if pos >= end:
        raise _premature_end("zstd", 1, pos, end)
    fhd = buf[pos]
    if fhd & 0x08:
        raise CompressionError(f"zstd frame header at byte {pos} has its reserved bit set")
    single_segment = fhd & 0x20
    fcs_flag = fhd >> 6
    header = 1 + (0 if single_segment else 1) + _ZSTD_DICT_ID_SIZE[fhd & 3]
    header += 1 if (fcs_flag == 0 and single_segment) else _ZSTD_CONTENT_SIZE_SIZE[fcs_flag]
    if end - pos < header:
        raise _premature_end("zstd", header, pos, end)
    pos += header
    stream = dctx.decompressobj()
    piece_bound = 0
    while True:
        if end - pos < 3:
            raise _premature_end("zstd", 3, pos, end)
        word = buf[pos] | buf[pos + 1] << 8 | buf[pos + 2] << 16
        pos += 3
        kind, size = (word >> 1) & 3, word >> 3
        if kind == _BLOCK_RLE:
            stored, bound = 1, size
        elif kind == _BLOCK_RAW:
            stored, bound = size, size
        elif kind == _BLOCK_COMPRESSED:
            stored, bound = size, _ZSTD_BLOCK_MAX
        else:
            raise CompressionError(f"zstd block at byte {pos - 3} has the reserved type 3")
        if end - pos < stored:
            raise _premature_end("zstd", stored, pos, end)
        pos += stored
        if word & 1:  # last block
            break
        piece_bound += bound
        if piece_bound > out.room:
            out.add(stream.decompress(buf[start:pos]))
            start, piece_bound = pos, 0
    if fhd & 0x04:  # content checksum
        if end - pos < 4:
            raise _premature_end("zstd", 4, pos, end)
        pos += 4
    out.add(stream.decompress(buf[start:pos]))
    if not stream.eof:
        raise CompressionError("zstd frame does not decode to its end (Truncated source)")
    return pos
