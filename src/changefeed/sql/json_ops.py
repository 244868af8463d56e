"""PostgreSQL's and CockroachDB's JSONB operators over JSON text (how the engine holds JSONB):
``->`` and ``->>`` (an object's field by name, an array's element by position, negative from the
end), ``#>`` and ``#>>`` (the same along a path), ``@>`` and ``<@`` (containment), ``?``, ``?|`` and
``?&`` (a key, any or all of several keys, at the top level)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from changefeed.engine import json_doc
from changefeed.engine.array_text import array_literal
from changefeed.engine.type_errors import value_type
from changefeed.exceptions import InvalidTextRepresentation, UndefinedFunction
from changefeed.sql.function_errors import invalid_argument

#: The operators, by the name the grammar gives them.
JSON_OPERATORS = frozenset({"->", "->>", "#>", "#>>", "@>", "<@", "?", "?|", "?&"})


def apply(op: str, left: Any, right: Any) -> Any:
    """``left op right`` (neither NULL): JSON text for ``->``/``#>``, text (a JSON string's
    value unquoted, a JSON null as NULL) for ``->>``/``#>>``, a boolean for ``@>``/``<@``."""
    doc = _document(left, op)
    if op in _EXISTS:
        return _exists(doc, op, right)
    if op in ("->", "->>"):
        if isinstance(right, bool) or not isinstance(right, int | str):
            raise UndefinedFunction(f"unsupported binary operator: <jsonb> {op} <{value_type(right)}>")
        found, value = _step(doc, right)
    elif op in ("#>", "#>>"):
        found, value = True, doc
        for part in _path(right):
            if not found:
                break
            found, value = _step(value, part, from_path=True)
    else:
        other = _document(right, op)
        return _contains(doc, other) if op == "@>" else _contains(other, doc)
    if not found:
        return None
    if op in ("->>", "#>>"):  # text as jsonb's output prints it: {"a": [1, 2]}
        return (
            None
            if value is None
            else value
            if isinstance(value, str)
            else json_doc.spaced(value, pg_order=True)
        )
    return json_doc.JsonText(json_doc.dumps(value))  # JSONB as the engine holds it


def concat(a: Any, b: Any) -> json_doc.JsonText:
    """``jsonb || jsonb``: two objects merged (the right one's fields win), else the two as
    arrays (a scalar or object as an array of itself) end to end, as PostgreSQL's."""
    x, y = _document(a, "||"), _document(b, "||")
    if isinstance(x, dict) and isinstance(y, dict):
        out: Any = {**x, **y}
    else:
        out = [*(x if isinstance(x, list) else [x]), *(y if isinstance(y, list) else [y])]
    return json_doc.JsonText(json_doc.dumps(out))


def delete(a: Any, b: Any) -> json_doc.JsonText:
    """``jsonb - text`` (an object's field, an array's string elements), ``jsonb - int`` (an
    array's element by position, negative from the end) and ``jsonb - text[]`` (several
    fields), as PostgreSQL's; 22023 for what cannot be deleted from."""
    doc = _document(a, "-")
    if isinstance(b, bool) or not isinstance(b, str | int | list | tuple):
        raise UndefinedFunction(f"unsupported binary operator: <jsonb> - <{value_type(b)}>")
    if isinstance(b, int):
        if not isinstance(doc, list):
            raise invalid_argument(
                "cannot delete from object using integer index"
                if isinstance(doc, dict)
                else "cannot delete from scalar",
                "22023",
            )
        at = b + len(doc) if b < 0 else b
        out: Any = [x for i, x in enumerate(doc) if i != at]
    else:
        keys = {b} if isinstance(b, str) else {k for k in b if k is not None}
        if isinstance(doc, dict):
            out = {k: v for k, v in doc.items() if k not in keys}
        elif isinstance(doc, list):
            out = [x for x in doc if not (isinstance(x, str) and x in keys)]
        else:
            raise invalid_argument("cannot delete from scalar", "22023")
    return json_doc.JsonText(json_doc.dumps(out))


def document(v: Any, refuse: Callable[[], Exception]) -> Any:
    """A JSONB value's document: JSON text parsed (22P02 if it is not JSON); ``refuse()`` is
    raised when ``v`` is not JSONB at all (each caller names its own signature)."""
    if isinstance(v, str):
        try:
            return json_doc.loads(v)
        except ValueError:
            raise InvalidTextRepresentation(f'invalid input syntax for type json: "{v}"') from None
    if isinstance(v, dict | list):
        return v
    raise refuse()


def _document(v: Any, op: str) -> Any:
    return document(
        v, lambda: UndefinedFunction(f"unsupported binary operator: <{value_type(v)}> {op} <jsonb>")
    )


def _path(v: Any) -> list[str]:
    """A ``#>`` path: a text array (``'{a,1}'``, ``ARRAY['a', '1']``)."""
    if isinstance(v, str):
        v = array_literal(v)
    if not isinstance(v, list | tuple):
        raise UndefinedFunction(f"unsupported binary operator: <jsonb> #> <{value_type(v)}>")
    return [str(p) for p in v]


def _step(value: Any, key: int | str, *, from_path: bool = False) -> tuple[bool, Any]:
    """One step into ``value``: an object's field ``key``, or an array's element at ``key``
    (a path's steps are text: in an array, an integer's text)."""
    if isinstance(value, dict):
        if isinstance(key, int) and not from_path:
            return False, None
        return (str(key) in value), value.get(str(key))
    if isinstance(value, list):
        if isinstance(key, str):
            if not from_path:
                return False, None
            try:
                key = int(key)
            except ValueError:
                return False, None
        at = key + len(value) if key < 0 else key
        return (0 <= at < len(value)), (value[at] if 0 <= at < len(value) else None)
    if isinstance(key, int) and not from_path:  # a scalar is a one-element array to -> (PostgreSQL)
        return key in (0, -1), value
    return False, None


_EXISTS = frozenset({"?", "?|", "?&"})


def _exists(doc: Any, op: str, right: Any) -> bool:
    """``jsonb ? text``: the string is one of the document's top-level keys, or one of its
    top-level string elements (a string scalar: itself); ``?|``/``?&`` with a text array: any
    or all of its strings (NULL elements are passed over), as PostgreSQL's."""
    if op == "?":
        if not isinstance(right, str):
            raise UndefinedFunction(f"unsupported binary operator: <jsonb> ? <{value_type(right)}>")
        keys = [right]
    else:
        items = array_literal(right) if isinstance(right, str) else right
        if not isinstance(items, list | tuple):
            raise UndefinedFunction(f"unsupported binary operator: <jsonb> {op} <{value_type(right)}>")
        keys = [str(k) for k in items if k is not None]
    if isinstance(doc, dict):
        present: Callable[[str], bool] = doc.__contains__
    else:
        strings = {x for x in (doc if isinstance(doc, list) else [doc]) if isinstance(x, str)}
        present = strings.__contains__
    return any(map(present, keys)) if op == "?|" else all(map(present, keys))


def _contains(a: Any, b: Any, *, top: bool = True) -> bool:
    """jsonb ``a @> b``: objects by their fields (each of ``b``'s in ``a``, contained), arrays
    by their elements (each of ``b``'s contained in one of ``a``'s; at the top level an array
    also contains a scalar it holds), scalars by equality."""
    if isinstance(b, dict):
        return isinstance(a, dict) and all(k in a and _contains(a[k], v, top=False) for k, v in b.items())
    if isinstance(b, list):
        return isinstance(a, list) and all(any(_contains(x, y, top=False) for x in a) for y in b)
    if isinstance(a, list) and top:
        return any(_same_scalar(x, b) for x in a)
    return _same_scalar(a, b)


def _same_scalar(a: Any, b: Any) -> bool:
    if isinstance(a, dict | list) or isinstance(a, bool) != isinstance(b, bool):
        return False
    return bool(a == b)
