"""JSON documents with exact numbers, as the engine holds JSONB.

PostgreSQL and CockroachDB keep a JSONB number as a decimal (``numeric``, apd): every digit
typed survives, ``1.10`` stays ``1.10``, and an exponent is read into the number (``1e2`` is
``100``). A reader that parses JSON numbers into binary floats (``orjson``, ``json`` by default)
rounds ``0.1234567890123456789`` and turns a 30-digit integer into ``1.23e+29``: a committed
document would change. Here a number with a fraction or an exponent is a :class:`~decimal.Decimal`
in plain notation, an integer an ``int`` (a ``Decimal`` past 64 bits, which ``orjson`` cannot
write), and the printers below write them back digit for digit.

* :func:`loads` parses JSON text (``NaN``/``Infinity`` refused: they are not JSON);
* :func:`dumps` writes the compact form the engine stores;
* :func:`spaced` writes PostgreSQL's output form (``{"a": [1, 2]}``), in document order or with
  keys sorted by their UTF-8 bytes (CockroachDB's order).
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import orjson

__all__ = ["JsonText", "dumps", "equal", "loads", "number_text", "pretty", "spaced"]


class JsonText(str):
    """A JSONB value as the engine holds it (its JSON text), told apart from text: ``||`` and
    ``-`` of JSONB are not those of text."""

    __slots__ = ()


#: Integers with more digits than this may not fit orjson's 64 bits: held as Decimal.
_INT_DIGITS = 18


def _float(text: str) -> Decimal:
    d = Decimal(text)
    if "e" in text or "E" in text:
        d = Decimal(format(d, "f"))  # PostgreSQL's numeric reads the exponent into the digits
    return d.copy_abs() if d.is_zero() else d  # numeric has no negative zero


def _int(text: str) -> int | Decimal:
    digits = len(text) - (text[0] == "-")
    if digits <= _INT_DIGITS:
        return int(text)
    return Decimal(text)


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_decoder = json.JSONDecoder(parse_float=_float, parse_int=_int, parse_constant=_constant)


def loads(text: str | bytes | bytearray | memoryview) -> Any:
    """Parse JSON text, numbers exact (see the module); ``ValueError`` when it is not JSON."""
    if not isinstance(text, str):
        text = bytes(text).decode()
    return _decoder.decode(text)


def equal(a: Any, b: Any) -> bool:
    """Whether two documents are equal as jsonb values are: numbers by value (``1`` is
    ``1.0``), never a boolean to a number, objects whatever their key order."""
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        return type(a) is type(b) and a == b
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(equal(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        return (
            isinstance(b, list) and len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b, strict=True))
        )
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    return isinstance(a, int | float | Decimal) and isinstance(b, int | float | Decimal) and bool(a == b)


def number_text(d: Decimal) -> str:
    """A JSON number held as a Decimal, written as PostgreSQL's numeric prints it."""
    return format(d, "f")


def _fragment(v: Any) -> Any:
    if isinstance(v, Decimal):
        return orjson.Fragment(number_text(v))
    raise TypeError(f"{type(v).__name__} is not a JSON value")


def dumps(doc: Any) -> str:
    """The compact text the engine stores (no spaces, keys in document order)."""
    return orjson.dumps(doc, default=_fragment).decode()


def spaced(doc: Any, *, sort_keys: bool = False, pg_order: bool = False) -> str:
    """PostgreSQL's jsonb output form: ``", "`` and ``": "`` between items, strings escaped
    as ``json.dumps`` does (non-ASCII kept); keys in document order, sorted by their UTF-8
    bytes (``sort_keys``, CockroachDB's order), or in PostgreSQL's jsonb order (``pg_order``:
    shorter keys first)."""
    parts: list[str] = []
    _spaced(doc, parts, sort_keys, pg_order)
    return "".join(parts)


def _spaced(v: Any, out: list[str], sort_keys: bool, pg_order: bool = False) -> None:
    if isinstance(v, str):
        out.append(json.dumps(v, ensure_ascii=False))
    elif isinstance(v, dict):
        items = (
            _pg_items(v)
            if pg_order
            else sorted(v.items(), key=lambda kv: kv[0].encode())
            if sort_keys
            else v.items()
        )
        out.append("{")
        for i, (k, x) in enumerate(items):
            if i:
                out.append(", ")
            out.append(json.dumps(k, ensure_ascii=False))
            out.append(": ")
            _spaced(x, out, sort_keys, pg_order)
        out.append("}")
    elif isinstance(v, list | tuple):
        out.append("[")
        for i, x in enumerate(v):
            if i:
                out.append(", ")
            _spaced(x, out, sort_keys, pg_order)
        out.append("]")
    elif v is None:
        out.append("null")
    elif v is True:
        out.append("true")
    elif v is False:
        out.append("false")
    elif isinstance(v, Decimal):
        out.append(number_text(v))
    else:
        out.append(json.dumps(v))


def pretty(doc: Any, indent: str = "") -> str:
    """PostgreSQL's ``jsonb_pretty``: four spaces a level, one item a line (an empty object or
    array on two lines too), keys in jsonb's order."""
    inner = indent + "    "
    if isinstance(doc, dict):
        items = [f"{inner}{json.dumps(k, ensure_ascii=False)}: {pretty(v, inner)}" for k, v in _pg_items(doc)]
        return "{\n" + ",\n".join(items) + ("\n" if items else "") + indent + "}"
    if isinstance(doc, list | tuple):
        items = [inner + pretty(v, inner) for v in doc]
        return "[\n" + ",\n".join(items) + ("\n" if items else "") + indent + "]"
    return spaced(doc)


def _pg_items(doc: dict[str, Any]) -> list[tuple[str, Any]]:
    """An object's fields in PostgreSQL's jsonb order: shorter keys first, then by their bytes."""
    return sorted(doc.items(), key=lambda kv: (len(kv[0].encode()), kv[0].encode()))
