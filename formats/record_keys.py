"""Keys without values: what the log cleaner reads of a data batch (kafka-format.md §16).

The offset map (key -> latest offset) and the cleaner's retention check need each record's
offset, key, and whether its value is null (a tombstone), never the value itself or the
headers. A v2 batch gives them through its record heads (:func:`~plog.formats.default_record.record_heads`);
a legacy (v0/v1) batch is decoded and its records given the heads' shape, so one loop
reads both.

Invariant: ``flags[head[HEAD_VALUE_POSITION]] == NULL_VALUE`` exactly when the record's
value is null, for the ``(flags, heads)`` :func:`keyed_records` returns.
"""

from __future__ import annotations

from .default_record import RecordHead, record_heads
from .errors import FormatError

#: In a v2 records region a null value's length (-1, zig-zag) is the single byte 0x01, so
#: the byte at a head's value position tells a tombstone without decoding the varint.
NULL_VALUE = 1
# A legacy record's value flag table: index 1 holds NULL_VALUE, index 0 does not.
_LEGACY_VALUE_FLAGS = bytes((0, NULL_VALUE))


def keyed_records(batch) -> tuple[bytes, list[RecordHead]]:
    """``(flags, heads)`` of a data batch, without values or headers (a batch is decoded in
    full only when it must be rebuilt).

    For a v2 batch the heads are its record heads and ``flags`` its records region; a
    legacy batch's records become heads whose value position indexes a two-byte flag
    table. Raises CorruptRecordError (positioned at the batch) when the records region
    does not hold ``records_count`` records exactly.
    """
    if batch.magic < 2:
        rows = [(None, None, r.offset, r.timestamp, r.key, 1 if r.value is None else 0) for r in batch.records()]
        return _LEGACY_VALUE_FLAGS, rows
    count = batch.records_count
    if count <= 0:
        return b"", []
    data = batch.records_payload()
    try:
        return data, record_heads(data, count, batch.base_offset, batch.base_timestamp)
    except FormatError as e:
        raise e.at(batch.position) if e.position is None else e


__all__ = ["NULL_VALUE", "keyed_records"]
