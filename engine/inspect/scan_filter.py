"""What a scan keeps: :class:`ScanFilter` (topics, offset and time ranges, record predicates),
and how it travels to Spark executors as data source options.

``--where`` is a small predicate language on decoded Confluent-framed keys and values
(:func:`parse_where`)::

    where    := cond ("and" cond)*
    cond     := path op literal
    path     := ("key" | "value") ("." name)*      name: [A-Za-z_][A-Za-z0-9_-]* or "quoted"
    op       := = | != | < | <= | > | >=
    literal  := number | 'text' | "text" | null | true | false

A path walks the decoded value's JSON (as ``plog consume --value-format auto`` prints it); a
one-key object such as Avro's union branch ``{"string": "x"}`` compares as its value, and text
of digits (Protobuf's 64-bit integers) as a number when compared with one. ``=``/``!=``
compare numbers with numbers, text with text, booleans and null exactly; ``<``... only numbers
with numbers and text with text. A condition on a missing path, or on a record whose key or
value does not decode, is false (so such records never match). The schemas come from the
``_schemas`` topic under ``schema_paths``, resolved once per process.

The offset and time ranges are also pushed down to segment selection by the planner
(:mod:`plog.engine.inspect.scan_plan`); every record is still checked with
:meth:`ScanFilter.matches`.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, NamedTuple

from plog.engine.errors import ScanError


class Condition(NamedTuple):
    """One ``path op literal`` of a ``--where``: ``field`` is "key" or "value"."""

    field: str
    path: tuple[str, ...]
    op: str
    literal: Any


_TOKEN = re.compile(r"""\s*(?:(?P<op><=|>=|!=|=|<|>)|(?P<dot>\.)|(?P<str>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
                        |(?P<num>-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)|(?P<word>[A-Za-z_][A-Za-z0-9_-]*))""", re.X)
_LITERAL_WORDS = {"null": None, "true": True, "false": False}


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            at = len(text) - len(text[pos:].lstrip())
            raise ScanError(f"--where: cannot read {text[at:]!r} (at character {at + 1})")
        kind = m.lastgroup
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


def _unquote(token: str) -> str:
    return re.sub(r"\\(.)", r"\1", token[1:-1])


def parse_where(text: str) -> tuple[Condition, ...]:
    """The conditions of a ``--where`` expression (module docstring), all to hold. Raises
    :class:`ScanError` naming what it cannot read."""
    tokens = _tokens(text)
    conditions, i = [], 0

    def expected(what: str):
        got = tokens[i][1] if i < len(tokens) else "the end"
        return ScanError(f"--where {text!r}: expected {what}, got {got!r}")

    while True:
        if i >= len(tokens) or tokens[i] not in (("word", "key"), ("word", "value")):
            raise expected("a path starting with key or value (value.customer.id)")
        field, path = tokens[i][1], []
        i += 1
        while i < len(tokens) and tokens[i][0] == "dot":
            i += 1
            if i >= len(tokens) or tokens[i][0] not in ("word", "str"):
                raise expected("a field name after '.'")
            path.append(tokens[i][1] if tokens[i][0] == "word" else _unquote(tokens[i][1]))
            i += 1
        if i >= len(tokens) or tokens[i][0] != "op":
            raise expected("one of = != < <= > >=")
        op = tokens[i][1]
        i += 1
        if i >= len(tokens):
            raise expected("a number, 'text', null, true or false")
        kind, token = tokens[i]
        if kind == "num":
            literal: Any = float(token) if any(c in token for c in ".eE") else int(token)
        elif kind == "str":
            literal = _unquote(token)
        elif kind == "word" and token in _LITERAL_WORDS:
            literal = _LITERAL_WORDS[token]
        else:
            raise expected("a number, 'text', null, true or false")
        if op not in ("=", "!=") and (literal is None or isinstance(literal, bool)):
            raise ScanError(f"--where {text!r}: {op} compares numbers or text, not {token}")
        conditions.append(Condition(field, tuple(path), op, literal))
        i += 1
        if i == len(tokens):
            return tuple(conditions)
        if tokens[i] != ("word", "and"):
            raise expected("'and' or the end")
        i += 1


_MISSING = object()


def _walk(value: Any, path: tuple[str, ...]) -> Any:
    for name in path:
        if isinstance(value, dict) and name not in value and len(value) == 1:
            value = next(iter(value.values()))  # through a union branch: value.ship_to.city
        if not isinstance(value, dict) or name not in value:
            return _MISSING
        value = value[name]
    if isinstance(value, dict) and len(value) == 1:
        value = next(iter(value.values()))  # an Avro union branch compares as its value
    return value


_INTEGER_TEXT = re.compile(r"-?[0-9]+")


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def holds(cond: Condition, value: Any) -> bool:
    """Whether ``cond`` holds on a decoded key or value (its JSON as Python objects)."""
    got = _walk(value, cond.path)
    if got is _MISSING:
        return False
    lit, op = cond.literal, cond.op
    if isinstance(got, str) and _number(lit) and _INTEGER_TEXT.fullmatch(got):
        got = int(got)  # Protobuf's JSON mapping writes 64-bit integers as strings
    if op in ("=", "!="):
        same_kind = (_number(got) and _number(lit)) or type(got) is type(lit)
        equal = same_kind and (got == lit if not (_number(got) and math.isnan(got)) else False)
        return equal if op == "=" else not equal
    if not ((_number(got) and _number(lit)) or (isinstance(got, str) and isinstance(lit, str))):
        return False
    return {"<": got < lit, "<=": got <= lit, ">": got > lit, ">=": got >= lit}[op]


#: Per process: ``(where, schema_paths) -> (conditions, resolver)``, built on first use
#: (a filter travels to worker processes and executors as plain data).
_COMPILED: dict = {}


def _compiled(where: str, schema_paths: tuple[str, ...]):
    key = (where, schema_paths)
    found = _COMPILED.get(key)
    if found is None:
        from plog.engine.schemas.resolver import open_resolver

        found = _COMPILED[key] = (parse_where(where), open_resolver(schema_paths))
    return found


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
    #: A ``--where`` expression on decoded keys and values (module docstring), and the
    #: directories whose ``_schemas`` topic decodes them.
    where: str | None = None
    schema_paths: tuple[str, ...] = ()

    @property
    def has_offset_range(self) -> bool:
        return self.offset_lo is not None or self.offset_hi is not None

    @property
    def has_time_range(self) -> bool:
        return self.time_lo is not None or self.time_hi is not None

    @property
    def has_record_predicate(self) -> bool:
        return self.key is not None or self.value_contains is not None or bool(self.headers) or bool(self.where)

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
        if self.where:
            return self._where_holds(key, value, headers)
        return True

    def where_mask(self, records) -> bytes | None:
        """The ``--where`` on a batch's records at once (``SchemaResolver.where_mask``, native
        path): one byte per record, 0 where it does not hold (the record cannot match), 1 or 2
        where :meth:`matches` decides as before; None (everything to :meth:`matches`) without
        a ``--where``, with a condition on the key, or where the resolver cannot answer."""
        if not self.where:
            return None
        conditions, resolver = _compiled(self.where, self.schema_paths)
        if not resolver.can_mask or any(c.field != "value" for c in conditions):
            return None
        values = [True if r.headers else (None if r.value is None else bytes(r.value)) for r in records]
        return resolver.where_mask(values, [(c.path, c.op, c.literal) for c in conditions])

    def _where_holds(self, key, value, headers) -> bool:
        conditions, resolver = _compiled(self.where, self.schema_paths)
        decoded: dict = {}
        for cond in conditions:
            if cond.field not in decoded:
                data = key if cond.field == "key" else value
                text = None
                if data is not None:
                    text, _reason = resolver.render(bytes(data), headers, is_key=cond.field == "key")
                decoded[cond.field] = _MISSING if text is None else json.loads(text)
            got = decoded[cond.field]
            if got is _MISSING or not holds(cond, got):
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
        if self.where:
            out["where"] = self.where
            out["schema_paths"] = json.dumps(list(self.schema_paths))
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
            where=get("where"), schema_paths=_schema_paths(get("schema_paths")),
        )


def _schema_paths(text: str | None) -> tuple[str, ...]:
    if text is None:
        return ()
    try:
        paths = json.loads(text)
    except ValueError:
        paths = text.split(",")  # by hand: comma-separated
    if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
        raise ScanError("option schema_paths: expected a JSON list of directories")
    return tuple(paths)


__all__ = ["Condition", "ScanError", "ScanFilter", "holds", "parse_where"]
