"""Binary-safe JSON for keys, values and header values (DESIGN.md, CLI contract).

A byte convention, no I/O: one for every command that writes or reads JSON (``dump
--format jsonl``, ``verify --format jsonl``, ``consume``/``produce --format jsonl``,
``scan`` searches):

* ``None`` (a null key, a tombstone value, a null header value) is JSON ``null``;
* bytes that are valid UTF-8 are a JSON string, so ordinary text stays readable and
  ``jq``-friendly;
* any other bytes are an object ``{"base64": "<standard padded base64>"}``.

A string can never be confused with the object form, so :func:`decode_bytes` inverts
:func:`encode_bytes` exactly for every byte string.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any


def encode_bytes(data: bytes | bytearray | memoryview | None) -> Any:
    if data is None:
        return None
    raw = bytes(data)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(raw).decode("ascii")}


def decode_bytes(value: Any) -> bytes | None:
    """Inverse of :func:`encode_bytes`; raises ``ValueError`` for any other shape."""
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    if isinstance(value, dict) and set(value) == {"base64"} and isinstance(value["base64"], str):
        try:
            return base64.b64decode(value["base64"], validate=True)
        except (binascii.Error, ValueError) as e:
            raise ValueError(f"invalid base64: {e}") from None
    raise ValueError('expected null, a string or {"base64": "..."}')


def encode_headers(headers) -> list[dict[str, Any]]:
    """Record headers as ``[{"key": str, "value": <encode_bytes>}]``, in record order.

    Header keys are strings in Kafka; keys that were not valid UTF-8 were decoded with
    ``surrogateescape`` by the formats layer and are written back as their raw bytes in
    the binary-safe form.
    """
    out = []
    for key, value in headers:
        try:
            key_json: Any = key.encode("utf-8").decode("utf-8")
        except UnicodeEncodeError:
            key_json = encode_bytes(key.encode("utf-8", "surrogateescape"))
        out.append({"key": key_json, "value": encode_bytes(value)})
    return out


__all__ = ["decode_bytes", "encode_bytes", "encode_headers"]
