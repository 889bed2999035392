"""JSON Schema payloads (Confluent's ``KafkaJsonSchemaSerializer``: the value's JSON text, UTF-8).

The payload already is JSON: it is shown as compact JSON (the same value, re-serialized on
one line). The schema must parse as JSON (else the schema "does not parse", as for the other
types). With ``validate=True`` the value is also checked against the schema with the
``jsonschema`` package (an optional dependency: ``pip install 'plog[jsonschema]'``), its
references registered under their names (the ``$ref`` a schema uses for them); a value that
does not validate is still shown, with the reason.
"""

from __future__ import annotations

import json
from typing import Callable

from plog.formats.schema_registry import SchemaReference, SchemaValue

from plog.engine.schemas.errors import PayloadError, SchemaCompileError

MAX_REFERENCE_DEPTH = 32


def jsonschema_available() -> bool:
    try:
        import jsonschema  # noqa: F401
    except ImportError:
        return False
    return True


class JsonSchemaCodec:
    """A decoder for payloads written with one JSON Schema."""

    schema_type = "JSON"

    def __init__(self, value: SchemaValue, lookup: Callable[[SchemaReference], SchemaValue | None], *,
                 validate: bool = False):
        try:
            self.schema = json.loads(value.schema)
        except (json.JSONDecodeError, RecursionError, ValueError) as e:
            raise SchemaCompileError(f"the JSON schema does not parse: {e}") from None
        self._validator = self._make_validator(value, lookup) if validate else None

    def _make_validator(self, value: SchemaValue, lookup):
        import jsonschema
        from referencing import Registry, Resource
        from referencing.jsonschema import DRAFT7

        resources = []
        todo, seen = [(value, 0)], set()
        while todo:
            current, depth = todo.pop()
            if depth > MAX_REFERENCE_DEPTH:
                raise SchemaCompileError(f"references deeper than {MAX_REFERENCE_DEPTH} (a cycle?)")
            for ref in current.references:
                if ref.name in seen:
                    continue
                seen.add(ref.name)
                target = lookup(ref)
                if target is None:
                    raise SchemaCompileError(f"the referenced schema {ref.name} (subject {ref.subject} version "
                                             f"{ref.version}) is not known")
                try:
                    contents = json.loads(target.schema)
                except (json.JSONDecodeError, RecursionError, ValueError) as e:
                    raise SchemaCompileError(f"the referenced schema {ref.name} does not parse: {e}") from None
                resources.append((ref.name, Resource.from_contents(contents, default_specification=DRAFT7)))
                todo.append((target, depth + 1))
        try:
            cls = jsonschema.validators.validator_for(self.schema, default=jsonschema.Draft7Validator)
            cls.check_schema(self.schema)
            return cls(self.schema, registry=Registry().with_resources(resources))
        except jsonschema.SchemaError as e:
            raise SchemaCompileError(f"the JSON schema is not valid: {e.message}") from None

    def decode(self, payload: bytes, indexes=None):
        try:
            return json.loads(payload.decode("utf-8"), parse_constant=_no_constant)
        except UnicodeDecodeError as e:
            raise PayloadError(f"the payload is not UTF-8 (byte {e.start})") from None
        except (json.JSONDecodeError, RecursionError, ValueError) as e:
            raise PayloadError(f"the payload is not JSON: {e}") from None

    def problems(self, value) -> str | None:
        """Why ``value`` does not validate against the schema (None: it does, or no validation)."""
        if self._validator is None:
            return None
        import jsonschema

        try:
            error = jsonschema.exceptions.best_match(self._validator.iter_errors(value))
        except Exception as e:  # an unresolvable $ref, a "pattern" that is no regular expression...
            return f"the value cannot be validated against its JSON schema: {' '.join(str(e).split())}"
        if error is None:
            return None
        where = "/".join(str(p) for p in error.absolute_path)
        return f"the value does not validate against its JSON schema{f' at {where}' if where else ''}: {error.message}"

    @staticmethod
    def dumps(value) -> str:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))

    def render(self, payload: bytes, indexes=None) -> str:
        return self.dumps(self.decode(payload))


def _no_constant(name: str):
    # NaN and Infinity are not JSON (Python's reader takes them; a JSON Schema serializer never writes them).
    raise ValueError(f"{name} is not a JSON value")


__all__ = ["JsonSchemaCodec", "jsonschema_available"]
