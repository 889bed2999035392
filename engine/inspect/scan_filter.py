"""What a scan keeps: :class:`ScanFilter` (topics, offset and time ranges, record predicates),
and how it travels to Spark executors as data source options.

The offset and time ranges are also pushed down to segment selection by the planner
(:mod:`plog.engine.inspect.scan_plan`); every record is still checked with
:meth:`ScanFilter.matches`.
"""

from __future__ import annotations

from dataclasses import dataclass

from plog.engine.errors import EngineError


class ScanError(EngineError, ValueError):
    """A scan could not be planned or run (bad filter, no such path)."""


@dataclass(frozen=True)
class ScanFilter:
    """What a scan keeps. Ranges are half-open ``[lo, hi)``; None means unbounded.

    ``key`` matches a record whose key equals it; ``value_contains`` one whose value
    contains it; ``headers`` one that has every ``(key, value)`` pair among its headers
    (``value`` None matches a null header value). ``topics`` restricts the partitions.
    """

    topics: frozenset[str] | None = None
    offset_lo: int | None = None
    offset_hi: int | None = None
    time_lo: int | None = None
    time_hi: int | None = None
    key: bytes | None = None
    value_contains: bytes | None = None
    headers: tuple[tuple[str, bytes | None], ...] = ()

    @property
    def has_offset_range(self) -> bool:
        return self.offset_lo is not None or self.offset_hi is not None

    @property
    def has_time_range(self) -> bool:
        return self.time_lo is not None or self.time_hi is not None

    @property
    def has_record_predicate(self) -> bool:
        return self.key is not None or self.value_contains is not None or bool(self.headers)

    def wants_topic(self, topic: str) -> bool:
        return self.topics is None or topic in self.topics

    def wants_offsets(self, first: int, last: int) -> bool:
        """Whether any offset in ``[first, last]`` can match."""
        if self.offset_lo is not None and last < self.offset_lo:
            return False
        return not (self.offset_hi is not None and first >= self.offset_hi)

    def matches(self, offset: int, timestamp: int, key, value, headers) -> bool:
        if self.offset_lo is not None and offset < self.offset_lo:
            return False
        if self.offset_hi is not None and offset >= self.offset_hi:
            return False
        if self.time_lo is not None and timestamp < self.time_lo:
            return False
        if self.time_hi is not None and timestamp >= self.time_hi:
            return False
        if self.key is not None and (key is None or bytes(key) != self.key):
            return False
        if self.value_contains is not None and (value is None or self.value_contains not in value):
            return False
        for hk, hv in self.headers:
            if not any(k == hk and (v if v is None else bytes(v)) == hv for k, v in headers):
                return False
        return True

    # Spark data source options are strings: a filter travels as these.
    def to_options(self) -> dict[str, str]:
        from plog.formats.binary_json import encode_bytes
        import json

        out: dict[str, str] = {}
        if self.topics is not None:
            out["topics"] = ",".join(sorted(self.topics))
        for name in ("offset_lo", "offset_hi", "time_lo", "time_hi"):
            value = getattr(self, name)
            if value is not None:
                out[name] = str(value)
        if self.key is not None:
            out["key"] = json.dumps(encode_bytes(self.key))
        if self.value_contains is not None:
            out["value_contains"] = json.dumps(encode_bytes(self.value_contains))
        if self.headers:
            out["headers"] = json.dumps([[k, encode_bytes(v)] for k, v in self.headers])
        return out

    @classmethod
    def from_options(cls, options) -> "ScanFilter":
        """The inverse of :meth:`to_options`, also accepting what a PySpark user writes by
        hand: ``topics`` comma-separated, ``key``/``value_contains`` as plain text, and
        ``offset_lo``/``offset_hi``/``time_lo``/``time_hi`` (``time_*`` in epoch ms)."""
        from plog.formats.binary_json import decode_bytes
        import json

        def get(name):
            value = options.get(name)
            return None if value is None or value == "" else str(value)

        def integer(name):
            text = get(name)
            if text is None:
                return None
            try:
                return int(text)
            except ValueError:
                raise ScanError(f"option {name}: expected an integer, got {text!r}") from None

        def binary(name):
            text = get(name)
            if text is None:
                return None
            # plog's binary-safe JSON forms ("text" or {"base64": ...}) when the value is one;
            # anything else is the text itself (a hand-written {"id":1} key stays that text).
            if text[:1] in ('"', "{"):
                try:
                    parsed = json.loads(text)
                except ValueError:
                    parsed = None
                if isinstance(parsed, str) or (isinstance(parsed, dict) and set(parsed) == {"base64"}):
                    try:
                        return decode_bytes(parsed)
                    except (ValueError, TypeError) as e:
                        raise ScanError(f"option {name}: {e}") from None
            return text.encode("utf-8", "surrogateescape")

        topics = get("topics")
        headers: tuple = ()
        raw_headers = get("headers")
        if raw_headers is not None:
            try:
                headers = tuple((str(k), decode_bytes(v)) for k, v in json.loads(raw_headers))
            except (ValueError, TypeError) as e:
                raise ScanError(f"option headers: expected a JSON list of [key, value] pairs ({e})") from None
        return cls(
            topics=frozenset(t.strip() for t in topics.split(",") if t.strip()) if topics is not None else None,
            offset_lo=integer("offset_lo"), offset_hi=integer("offset_hi"),
            time_lo=integer("time_lo"), time_hi=integer("time_hi"),
            key=binary("key"), value_contains=binary("value_contains"), headers=headers,
        )


__all__ = ["ScanError", "ScanFilter"]
