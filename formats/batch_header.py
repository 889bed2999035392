"""The header fields of a ``.log`` entry that offline readers take without decoding it.

Every entry of a segment, whatever its format, starts ``offset int64 | size int32``
(:data:`ENTRY_HEAD`) and holds its magic byte at +16 (:data:`MAGIC_OFFSET`). A v2 batch
header is laid out in :mod:`plog.formats.record_batch`, a v0/v1 message in
:mod:`plog.formats.legacy`; this module names the slices of those layouts that header
walkers, checkers and resync scanners read directly (one ``struct`` unpack per entry, no
batch object), and the header rules they share:

* a *plausible v2 header* has no attribute bit above the delete-horizon flag (0x40), a codec
  Kafka knows (0..4: none, gzip, snappy, lz4, zstd) and a non-negative last offset delta;
* a *legacy codec* is 0..3 (zstd came with v2);
* the smallest size field of a v0 message is ``RECORD_OVERHEAD_V0`` (14), of a v1 message
  ``RECORD_OVERHEAD_V1`` (22: the timestamp); of a v2 batch ``MIN_V2_SIZE`` (49).
"""

from __future__ import annotations

import struct

from .batches import ENTRY_HEAD, HEADER_SIZE_UP_TO_MAGIC, LOG_OVERHEAD, MIN_V2_SIZE, RECORD_OVERHEAD_V0
from .legacy import ATTRIBUTES_OFFSET as LEGACY_ATTRIBUTES_OFFSET
from .legacy import LEGACY_ENTRY_HEAD, RECORD_OVERHEAD_V1
from .legacy import MAGIC_OFFSET as LEGACY_CRC_START  # a v0/v1 CRC covers [magic, end)
from .legacy import TIMESTAMP_OFFSET as V1_TIMESTAMP_OFFSET
from .record_batch import CRC_START as V2_CRC_START
from .record_batch import HEADER as V2_HEADER
from .record_batch import LAST_OFFSET_DELTA_OFFSET, MAGIC_OFFSET
from .record_batch import LENGTH_OFFSET as SIZE_OFFSET  # 8: every entry's size field, up to LOG_OVERHEAD
from .record_batch import RECORD_BATCH_OVERHEAD as V2_HEADER_SIZE

#: What a v2 batch check needs of its header, in one unpack: ``baseOffset, batchLength,
#: magic, crc, lastOffsetDelta, maxTimestamp`` (partitionLeaderEpoch, attributes and
#: baseTimestamp skipped). Needs the whole 61-byte header in the buffer.
V2_CHECK_HEAD = struct.Struct(">qi4xbI2xi8xq")
#: Bytes of an entry's header that :func:`entry_offsets` reads (up to a v2 lastOffsetDelta).
ENTRY_OFFSETS_SIZE = LAST_OFFSET_DELTA_OFFSET + 4  # 27
#: v2 attribute bits Kafka never sets (above the delete-horizon flag).
V2_UNUSED_ATTRIBUTES = ~0x7F
MAX_V2_CODEC = 4  # zstd
MAX_LEGACY_CODEC = 3  # lz4
CODEC_MASK = 0x07

_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


def v2_last_offset_delta(buf, pos: int = 0) -> int:
    """``lastOffsetDelta`` of the v2 batch whose header starts at ``buf[pos:]``."""
    return _INT32.unpack_from(buf, pos + LAST_OFFSET_DELTA_OFFSET)[0]


def v1_timestamp(buf, pos: int = 0) -> int:
    """The timestamp of the v1 message whose header starts at ``buf[pos:]``."""
    return _INT64.unpack_from(buf, pos + V1_TIMESTAMP_OFFSET)[0]


def entry_offsets(buf, pos: int = 0) -> tuple[int, int]:
    """``(first, last)`` offsets of the entry whose header starts at ``buf[pos:]`` (at least
    :data:`ENTRY_OFFSETS_SIZE` bytes for a v2 batch): a v2 batch's base offset and base
    offset + lastOffsetDelta; a v0/v1 message's offset twice (a compressed wrapper carries
    its *last* inner offset)."""
    offset = ENTRY_HEAD.unpack_from(buf, pos)[0]
    if buf[pos + MAGIC_OFFSET] == 2:
        return offset, offset + v2_last_offset_delta(buf, pos)
    return offset, offset


def v2_header_plausible(attributes: int, last_offset_delta: int) -> bool:
    """Whether a v2 header's attributes and lastOffsetDelta are ones Kafka writes."""
    return not attributes & V2_UNUSED_ATTRIBUTES and (attributes & CODEC_MASK) <= MAX_V2_CODEC \
        and last_offset_delta >= 0


def legacy_codec_known(attributes: int) -> bool:
    """Whether a v0/v1 message's codec is one of the four legacy codecs."""
    return attributes & CODEC_MASK <= MAX_LEGACY_CODEC


def legacy_min_size(magic: int) -> int:
    """The smallest size field of a v0 (14) or v1 (22) message."""
    return RECORD_OVERHEAD_V1 if magic else RECORD_OVERHEAD_V0


__all__ = [
    "CODEC_MASK",
    "ENTRY_HEAD",
    "ENTRY_OFFSETS_SIZE",
    "HEADER_SIZE_UP_TO_MAGIC",
    "LEGACY_ATTRIBUTES_OFFSET",
    "LEGACY_CRC_START",
    "LEGACY_ENTRY_HEAD",
    "LOG_OVERHEAD",
    "MAGIC_OFFSET",
    "MIN_V2_SIZE",
    "RECORD_OVERHEAD_V0",
    "RECORD_OVERHEAD_V1",
    "SIZE_OFFSET",
    "V1_TIMESTAMP_OFFSET",
    "V2_CHECK_HEAD",
    "V2_CRC_START",
    "V2_HEADER",
    "V2_HEADER_SIZE",
    "entry_offsets",
    "legacy_codec_known",
    "legacy_min_size",
    "v1_timestamp",
    "v2_header_plausible",
    "v2_last_offset_delta",
]
