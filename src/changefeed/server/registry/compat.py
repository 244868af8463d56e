"""Avro schemas for the registry: parsing, canonical form, and compatibility by schema resolution.

:func:`can_read` applies the Avro specification's schema resolution rules: can a reader with
schema R decode data written with schema W? Compatibility levels are built from it the way the
Confluent registry does: BACKWARD = the new schema reads data of the latest version, FORWARD =
the latest reads the new, FULL = both; ``*_TRANSITIVE`` against every live version.
"""

from __future__ import annotations

from typing import Any

import orjson

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
#: writer type -> reader types it is promoted to
PROMOTIONS = {
    "int": {"long", "float", "double"},
    "long": {"float", "double"},
    "float": {"double"},
    "string": {"bytes"},
    "bytes": {"string"},
}


class InvalidSchema(ValueError):
    pass


def parse(text: str) -> Any:
    """Parse and validate schema JSON; raise :class:`InvalidSchema` with the reason."""
    try:
        obj = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise InvalidSchema(f"Invalid schema JSON: {exc}") from None
    try:
        import fastavro

        fastavro.parse_schema(obj)
    except Exception as exc:  # fastavro raises several types for bad schemas
        raise InvalidSchema(str(exc)) from None
    return obj


def canonical(obj: Any) -> str:
    """The deduplication key: the schema JSON with sorted keys, compact."""
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS).decode()


def compact(obj: Any) -> str:
    return orjson.dumps(obj).decode()


# ---------------------------------------------------------------------------- named types
def _fullname(name: str, namespace: str | None) -> str:
    if "." in name or not namespace:
        return name
    return f"{namespace}.{name}"


def _collect(schema: Any, namespace: str | None, names: dict[str, Any]) -> None:
    if isinstance(schema, list):
        for s in schema:
            _collect(s, namespace, names)
    elif isinstance(schema, dict):
        t = schema.get("type")
        if t in ("record", "error", "enum", "fixed"):
            ns = schema.get("namespace", namespace)
            full = _fullname(schema["name"], ns)
            names[full] = schema
            ns = full.rsplit(".", 1)[0] if "." in full else None
            for f in schema.get("fields", []) if t != "enum" else []:
                _collect(f["type"], ns, names)
        elif t == "array":
            _collect(schema["items"], namespace, names)
        elif t == "map":
            _collect(schema["values"], namespace, names)
        elif isinstance(t, dict | list):
            _collect(t, namespace, names)


class _Schema:
    """A schema with its named types, to follow references."""

    def __init__(self, obj: Any) -> None:
        self.obj = obj
        self.names: dict[str, Any] = {}
        _collect(obj, None, self.names)

    def deref(self, s: Any) -> Any:
        if isinstance(s, str) and s not in PRIMITIVES:
            if s in self.names:
                return self.names[s]
            for full, named in self.names.items():
                if full.rsplit(".", 1)[-1] == s:
                    return named
        if (
            isinstance(s, dict)
            and isinstance(s.get("type"), dict | list | str)
            and s.get("type")
            not in (
                "record",
                "error",
                "enum",
                "fixed",
                "array",
                "map",
            )
        ):
            return self.deref(s["type"])  # {"type": "long", "logicalType": ...} and the like
        return s


def _type_of(s: Any) -> str:
    if isinstance(s, list):
        return "union"
    if isinstance(s, str):
        return s
    t = s["type"]
    return "record" if t == "error" else str(t)


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def can_read(reader: Any, writer: Any) -> bool:
    """Whether data written with ``writer`` can be read with ``reader`` (Avro resolution rules)."""
    return _Resolver(_Schema(reader), _Schema(writer)).check(reader, writer)


class _Resolver:
    def __init__(self, r: _Schema, w: _Schema) -> None:
        self.r, self.w = r, w
        self.assumed: set[tuple[int, int]] = set()

    def check(self, reader: Any, writer: Any) -> bool:
        reader, writer = self.r.deref(reader), self.w.deref(writer)
        rt, wt = _type_of(reader), _type_of(writer)
        if wt == "union":
            return all(self.check(reader, b) for b in writer)
        if rt == "union":
            return any(self.check(b, writer) for b in reader)
        if rt != wt:
            return rt in PROMOTIONS.get(wt, set())
        if rt in PRIMITIVES:
            return True
        if rt == "array":
            return self.check(reader["items"], writer["items"])
        if rt == "map":
            return self.check(reader["values"], writer["values"])
        if not self._same_name(reader, writer):
            return False
        if rt == "fixed":
            return bool(reader["size"] == writer["size"])
        if rt == "enum":
            return "default" in reader or set(writer["symbols"]) <= set(reader["symbols"])
        return self._record(reader, writer)

    @staticmethod
    def _same_name(reader: Any, writer: Any) -> bool:
        names = {_short(reader["name"]), *(_short(a) for a in reader.get("aliases", []))}
        return _short(writer["name"]) in names

    def _record(self, reader: Any, writer: Any) -> bool:
        key = (id(reader), id(writer))
        if key in self.assumed:
            return True
        self.assumed.add(key)
        wfields = {f["name"]: f for f in writer.get("fields", [])}
        for f in reader.get("fields", []):
            match = next(
                (wfields[n] for n in (f["name"], *f.get("aliases", [])) if n in wfields),
                None,
            )
            if match is None:
                if "default" not in f:
                    return False
            elif not self.check(f["type"], match["type"]):
                return False
        return True


def compatible(level: str, new: Any, previous: list[Any]) -> bool:
    """Whether ``new`` may follow ``previous`` (oldest first) under a compatibility level."""
    if level == "NONE" or not previous:
        return True
    against = previous if level.endswith("_TRANSITIVE") else previous[-1:]
    base = level.removesuffix("_TRANSITIVE")
    for old in against:
        if base in ("BACKWARD", "FULL") and not can_read(new, old):
            return False
        if base in ("FORWARD", "FULL") and not can_read(old, new):
            return False
    return True
