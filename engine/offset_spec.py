"""The one offset/time language (DESIGN.md, CLI contract): ``plog consume --offset``, dump
ranges, lookup and consumer-group resets all parse their offsets here.

A single position (:func:`parse_offset`):

==========================================  ==========================================
``earliest`` (``beginning``, ``start``,      the log start offset
``oldest``)
``latest`` (``end``, ``newest``)            the log end offset
``committed`` (``stored``)                  the group's committed offset
``N``                                       the absolute offset N
``+N``                                      N after the log start offset
``-N``                                      N before the log end offset
``@<ms>``                                   the first offset whose timestamp >= ms
``@<ISO-8601>``                             the same for a date/time, UTC unless it names a
                                            zone (``@2024-01-01``, ``@2024-01-01T10:00+02:00``)
``@-<duration>``                            the same for now minus a duration: ``@-15m``,
                                            ``@-1h30m``; units ``ms s m h d``
==========================================  ==========================================

An option that takes only a time (``plog lookup --timestamp``) reads it with
:func:`parse_time`: the ``@`` forms above, and ``<ms>`` and ``<ISO-8601>`` without the ``@``.

Keywords are case-insensitive. A range (:func:`parse_offset_range`) is ``A:B``, either side
may be empty: ``A:`` reads from A with no end, ``:B`` from the default start (earliest) to B.
**The end B is exclusive**: ``10:20`` reads offsets 10..19, and ``@t1:@t2`` reads from the
first offset at/after ``t1`` up to (not including) the first offset at/after ``t2``. As the
end, ``+N`` means *N records after the start* (``100:+5`` reads 100..104, kcat/rpk users'
"read 5 from offset 100"); as the start, ``+N`` keeps its meaning (N after the log start).
ISO times contain colons: the range separator is the one colon at which both sides parse,
and a text that parses whole as one position is that position (``@2024-01-01T10:00`` is a
time, not ``@2024-01-01T10`` up to offset 0).

Timestamps are resolved to epoch milliseconds when the text is parsed (``now_ms`` fixes
"now" for ``@-<duration>``); a time before the epoch reads as ``@0``.

Resolution (:func:`resolve_offset`, :func:`resolve_range`) turns a spec into an offset of
one partition. Every answer is clamped to ``[log start offset, log end offset]``: kcat
(librdkafka) clamps ``-N`` that reaches past the log start, and Kafka's
``ConsumerGroupCommand.checkOffsetsRange`` clamps every reset target (absolute offsets and
``--shift-by`` included) the same way, so a spec never names an offset the log cannot serve.
A timestamp with no record at or after it resolves to the log end offset: ListOffsets
answers offset -1 and a consumer seeking to it starts at the end (Kafka's
``ConsumerGroupCommand`` ``--to-datetime`` does the same). Range ends are clamped too, and
never fall before the range's start (an "inverted" range resolves to an empty one), so a
range is a snapshot bounded by the log end at resolve time.
"""

from __future__ import annotations

import datetime as _dt
import re
import time
from dataclasses import dataclass
from typing import Callable

from plog.engine.errors import InvalidOffsetSpecError, NoOffsetForPartitionError

INT64_MAX = (1 << 63) - 1

#: Every accepted form, for error messages and ``--help`` texts (one line).
OFFSET_FORMS = ("earliest|beginning|start|oldest, latest|end|newest, committed|stored, "
                "N (absolute offset), +N (N after the log start), -N (N before the log end), "
                "@<ms>, @<ISO-8601> (UTC unless it names a zone), @-<duration> (e.g. @-15m, @-1h30m; "
                "units ms s m h d)")
#: The forms of a time alone (parse_time), for error messages and ``--help`` texts (one line).
TIME_FORMS = ("<ms> or @<ms>, <ISO-8601> or @<ISO-8601> (UTC unless it names a zone, e.g. 2024-06-15T10:20:27Z), "
              "@-<duration> (e.g. @-15m, @-1h30m; units ms s m h d)")
#: The range forms, for error messages and ``--help`` texts (one line).
RANGE_FORMS = ("A:B with A and B each one of those or empty (A: no end, :B from earliest); "
               "the end B is exclusive, and +N as the end means N records after A")

#: ListOffsets' special timestamps (``ListOffsetsRequest.EARLIEST_TIMESTAMP``,
#: ``LATEST_TIMESTAMP``, and ``MAX_TIMESTAMP`` of KIP-734): a lookup by timestamp takes them
#: as numbers or by name (:func:`parse_list_offsets_timestamp`).
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
SPECIAL_TIMESTAMPS = {EARLIEST_TIMESTAMP: "earliest", LATEST_TIMESTAMP: "latest", MAX_TIMESTAMP: "max-timestamp"}
_TIMESTAMP_NAMES = {"earliest": EARLIEST_TIMESTAMP, "latest": LATEST_TIMESTAMP, "max": MAX_TIMESTAMP,
                    "max-timestamp": MAX_TIMESTAMP}

KINDS = ("earliest", "latest", "committed", "offset", "from_start", "from_end", "timestamp", "count")

_KEYWORDS = {
    "earliest": "earliest", "beginning": "earliest", "start": "earliest", "oldest": "earliest",
    "latest": "latest", "end": "latest", "newest": "latest",
    "committed": "committed", "stored": "committed",
}
# ASCII digits only: ``\d`` would also take other scripts' digits, which int() accepts.
_NUMBER = re.compile(r"[0-9]+")
_DURATION = re.compile(r"(?:[0-9]+(?:ms|s|m|h|d))+")
_DURATION_PART = re.compile(r"([0-9]+)(ms|s|m|h|d)")
_DURATION_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
# Longer than any int64 (19 digits): rejected before int(), which also has a digit limit.
_MAX_DIGITS = 30


@dataclass(frozen=True)
class OffsetSpec:
    """One parsed position. ``value`` is the offset for ``offset``, N for ``from_start``,
    ``from_end`` and ``count``, epoch ms for ``timestamp``, and 0 for the keyword kinds.
    ``count`` (``+N`` as a range end) is only meaningful relative to a range start."""

    kind: str  # "earliest"|"latest"|"committed"|"offset"|"from_start"|"from_end"|"timestamp"|"count"
    value: int = 0


@dataclass(frozen=True)
class OffsetRange:
    """``start`` up to ``end`` exclusive; ``end`` None reads with no end."""

    start: OffsetSpec
    end: OffsetSpec | None


EARLIEST = OffsetSpec("earliest")
LATEST = OffsetSpec("latest")


class _Bad(Exception):
    """Internal: why one side failed to parse (becomes part of the one-line error)."""


def _int(digits: str, what: str) -> int:
    if len(digits) > _MAX_DIGITS or int(digits) > INT64_MAX:
        shown = digits if len(digits) <= _MAX_DIGITS else digits[:_MAX_DIGITS] + "..."
        raise _Bad(f"{what} {shown} is above the 64-bit maximum {INT64_MAX}")
    return int(digits)


def _parse_duration(text: str) -> int:
    if not _DURATION.fullmatch(text):
        raise _Bad(f"bad duration {text!r}, expected numbers with units ms s m h d like 15m or 1h30m")
    total = 0
    for amount, unit in _DURATION_PART.findall(text):
        if len(amount) > _MAX_DIGITS:
            raise _Bad(f"duration {text!r} is too long")
        total += int(amount) * _DURATION_MS[unit]
    return total


def _iso_ms(text: str) -> int:
    """Epoch ms of an ISO-8601 date or date/time (``datetime.fromisoformat``), UTC unless
    it names a zone. Raises ValueError (OverflowError, OSError out of range)."""
    when = _dt.datetime.fromisoformat(text)
    if when.tzinfo is None:
        when = when.replace(tzinfo=_dt.timezone.utc)
    return int(when.timestamp() * 1000)


def _parse_one(text: str, now_ms: int | None, *, as_end: bool) -> OffsetSpec:
    """One side: raises :class:`_Bad` with a short reason."""
    if not text:
        raise _Bad("empty")
    kind = _KEYWORDS.get(text.lower())
    if kind is not None:
        return OffsetSpec(kind)
    first = text[0]
    if _NUMBER.fullmatch(text):
        return OffsetSpec("offset", _int(text, "offset"))
    if first in "+-" and _NUMBER.fullmatch(text, 1):
        n = _int(text[1:], "count")
        if first == "-":
            return OffsetSpec("from_end", n)
        return OffsetSpec("count" if as_end else "from_start", n)
    if first != "@":
        raise _Bad("not an offset")
    body = text[1:]
    if _NUMBER.fullmatch(body):
        ms = _int(body, "timestamp")
    elif body.startswith("-"):
        now = int(time.time() * 1000) if now_ms is None else now_ms
        ms = now - _parse_duration(body[1:])
    elif body.isascii() and body[:1].isdigit():
        try:
            ms = _iso_ms(body)
        except (ValueError, OverflowError, OSError):
            raise _Bad(f"bad timestamp {body!r}") from None
        if ms > INT64_MAX:
            raise _Bad(f"timestamp {body!r} is out of range")
    else:
        raise _Bad(f"bad timestamp {body!r}")
    return OffsetSpec("timestamp", max(ms, 0))


def parse_offset(text: str, now_ms: int | None = None) -> OffsetSpec:
    """Parse one position (no range). Raises :class:`InvalidOffsetSpecError` (one line,
    listing the accepted forms) for anything else."""
    stripped = text.strip() if isinstance(text, str) else ""
    try:
        return _parse_one(stripped, now_ms, as_end=False)
    except _Bad as e:
        hint = "; a range A:B is not accepted here" if ":" in stripped and _is_range(stripped, now_ms) else ""
        raise InvalidOffsetSpecError(f"invalid offset {text!r} ({e}{hint}): expected {OFFSET_FORMS}") from None


def parse_time(text: str, now_ms: int | None = None) -> int:
    """Epoch ms of a time in this language, for an option that takes only a time (``plog
    lookup --timestamp``): ``@<ms>``, ``@<ISO-8601>``, ``@-<duration>``, and, as nothing else
    could be meant there, the first two without the ``@`` (``1718446827442``,
    ``2024-06-15T10:20:27Z``). Raises :class:`InvalidOffsetSpecError` naming the forms."""
    stripped = text.strip() if isinstance(text, str) else ""
    # A bare number or date starts with a digit; "-15m" stays an error (-N is an offset).
    spec_text = "@" + stripped if stripped[:1].isdigit() else stripped
    try:
        spec = _parse_one(spec_text, now_ms, as_end=False) if spec_text.startswith("@") else None
    except _Bad as e:
        raise InvalidOffsetSpecError(f"invalid time {text!r} ({e}): expected {TIME_FORMS}") from None
    if spec is None or spec.kind != "timestamp":
        raise InvalidOffsetSpecError(f"invalid time {text!r}: expected {TIME_FORMS}")
    return spec.value


def parse_list_offsets_timestamp(text: str, now_ms: int | None = None) -> int:
    """A timestamp to look up as ListOffsets takes it (``plog lookup --timestamp``): its
    special values by name or number (``earliest`` -2, ``latest`` -1, ``max`` or
    ``max-timestamp`` -3; names case-insensitive), else a time of this language
    (:func:`parse_time`: ms or ISO-8601 with or without ``@``, ``@-<duration>``). Any other
    negative number is refused: it is not a time. Raises :class:`InvalidOffsetSpecError`."""
    stripped = text.strip() if isinstance(text, str) else ""
    named = _TIMESTAMP_NAMES.get(stripped.lower())
    if named is not None:
        return named
    if stripped.startswith("-") and _NUMBER.fullmatch(stripped[1:]):
        if int(stripped) not in SPECIAL_TIMESTAMPS:
            raise InvalidOffsetSpecError(f"{stripped} is not a timestamp (negative values: -1 latest, -2 earliest, "
                                         f"-3 max); expected {TIME_FORMS}")
        return int(stripped)
    return parse_time(text, now_ms)


def _is_range(text: str, now_ms: int | None) -> bool:
    try:
        parse_offset_range(text, now_ms)
    except InvalidOffsetSpecError:
        return False
    return True


def _static_order_check(text: str, start: OffsetSpec, end: OffsetSpec) -> None:
    """Reject ranges whose end is before their start whatever the log holds."""
    if start.kind == end.kind and start.kind in ("offset", "timestamp") and end.value < start.value:
        what = "offset" if start.kind == "offset" else "timestamp"
        raise InvalidOffsetSpecError(f"invalid offset range {text!r}: the end {what} {end.value} is before "
                                     f"the start {start.value} (the end is exclusive)")


def parse_offset_range(text: str, now_ms: int | None = None, *,
                       default_start: OffsetSpec = EARLIEST) -> OffsetRange:
    """Parse ``A``, ``A:B``, ``A:`` or ``:B`` (see the module docstring; B is exclusive).

    A text without a range colon is ``OffsetRange(A, None)``. An empty start is
    ``default_start``; an empty end is ``None`` (no end). Raises
    :class:`InvalidOffsetSpecError` with a one-line message listing the accepted forms.
    """
    stripped = text.strip() if isinstance(text, str) else ""
    if now_ms is None:
        now_ms = int(time.time() * 1000)  # one "now" for both sides
    try:
        return OffsetRange(_parse_one(stripped, now_ms, as_end=False), None)
    except _Bad as e:
        whole_error = e
    splits: list[OffsetRange] = []
    reasons: list[str] = []
    for i, ch in enumerate(stripped):
        if ch != ":":
            continue
        left, right = stripped[:i].strip(), stripped[i + 1:].strip()
        try:
            start = _parse_one(left, now_ms, as_end=False) if left else default_start
            end = _parse_one(right, now_ms, as_end=True) if right else None
        except _Bad as e:
            reasons.append(str(e))
            continue
        splits.append(OffsetRange(start, end))
    if len(splits) > 1:  # not reachable with the grammar above; kept as a guard
        raise InvalidOffsetSpecError(f"invalid offset range {text!r}: ambiguous, write the times with '@' "
                                     f"on both sides; expected {RANGE_FORMS}; positions: {OFFSET_FORMS}")
    if not splits:
        reason = reasons[-1] if reasons else str(whole_error)
        raise InvalidOffsetSpecError(f"invalid offset range {text!r} ({reason}): expected a position or "
                                     f"{RANGE_FORMS}; positions: {OFFSET_FORMS}")
    rng = splits[0]
    if rng.end is not None:
        _static_order_check(text, rng.start, rng.end)
    return rng


def resolve_offset(
    spec: OffsetSpec,
    *,
    log_start_offset: int,
    log_end_offset: int,
    offset_for_timestamp: Callable[[int], int | None],
    committed: int | None = None,
    start: int | None = None,
) -> int:
    """The offset ``spec`` names in one partition, clamped to ``[log_start_offset,
    log_end_offset]``.

    ``offset_for_timestamp(ms)`` answers ListOffsets: the first offset whose timestamp is
    >= ms, or None when there is none (then the answer is the log end offset).
    ``committed`` is the group's committed offset (``committed`` raises
    :class:`NoOffsetForPartitionError` when it is None). ``start`` is the resolved start of
    the range a ``count`` end belongs to (``count`` without it raises
    :class:`InvalidOffsetSpecError`).
    """
    kind, value = spec.kind, spec.value
    if kind == "earliest":
        offset = log_start_offset
    elif kind == "latest":
        offset = log_end_offset
    elif kind == "offset":
        offset = value
    elif kind == "from_start":
        offset = log_start_offset + value
    elif kind == "from_end":
        offset = log_end_offset - value
    elif kind == "timestamp":
        found = offset_for_timestamp(value)
        offset = log_end_offset if found is None or found < 0 else found
    elif kind == "committed":
        if committed is None:
            raise NoOffsetForPartitionError("no committed offset for this partition (offset 'committed')")
        offset = committed
    elif kind == "count":
        if start is None:
            raise InvalidOffsetSpecError(f"+{value} counts records from a range's start: it is only valid "
                                         "as the end of a range A:+N")
        offset = start + value
    else:
        raise InvalidOffsetSpecError(f"unknown offset kind {kind!r}: expected one of {', '.join(KINDS)}")
    return min(max(offset, log_start_offset), log_end_offset)


def resolve_range(
    rng: OffsetRange,
    *,
    log_start_offset: int,
    log_end_offset: int,
    offset_for_timestamp: Callable[[int], int | None],
    committed: int | None = None,
) -> tuple[int, int | None]:
    """``(start, end)`` offsets of one partition: read ``start <= offset < end``; ``end`` is
    None for a range with no end. Both are clamped to the log, and ``end >= start``."""
    kw = dict(log_start_offset=log_start_offset, log_end_offset=log_end_offset,
              offset_for_timestamp=offset_for_timestamp, committed=committed)
    begin = resolve_offset(rng.start, **kw)
    if rng.end is None:
        return begin, None
    end = resolve_offset(rng.end, start=begin, **kw)
    return begin, max(end, begin)


__all__ = [
    "EARLIEST",
    "INT64_MAX",
    "KINDS",
    "LATEST",
    "OFFSET_FORMS",
    "RANGE_FORMS",
    "TIME_FORMS",
    "OffsetRange",
    "OffsetSpec",
    "parse_offset",
    "parse_offset_range",
    "parse_time",
    "resolve_offset",
    "resolve_range",
]
