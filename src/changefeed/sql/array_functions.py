"""PostgreSQL's array functions beyond ``array_length``/``array_position``/``cardinality``:
``array_append``, ``array_prepend``, ``array_cat``, ``array_remove``, ``array_replace``,
``array_positions``, ``array_lower``, ``array_upper``, ``array_ndims``; and the operators
``@>`` (contains), ``<@`` (is contained by) and ``&&`` (overlaps) of arrays.

Arrays are one-dimensional Python lists here (lower bound 1). Elements compare as ``IS NOT
DISTINCT FROM`` in remove/replace/positions (a NULL finds a NULL), and as ``=`` in the operators
(a NULL element matches nothing), as in PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from changefeed.engine.array_text import array_literal
from changefeed.sql.function_errors import unknown_signature

__all__ = ["ARRAY_FUNCTIONS", "ARRAY_OPERATORS", "array_operator"]

#: The array operators, by the grammar's name of them.
ARRAY_OPERATORS = frozenset({"@>", "<@", "&&"})


def _list(name: str, v: Any, args: tuple[Any, ...]) -> list[Any]:
    if isinstance(v, str):  # an array's text (an untyped literal or parameter)
        return array_literal(v)
    if not isinstance(v, list | tuple):
        raise unknown_signature(name, args)
    return list(v)


def _same(a: Any, b: Any) -> bool:
    """``a IS NOT DISTINCT FROM b`` of two elements (``true`` is not ``1``)."""
    if a is None or b is None:
        return a is None and b is None
    return bool(a == b) and isinstance(a, bool) == isinstance(b, bool)


def _append(*args: Any) -> Any:
    if len(args) != 2:
        raise unknown_signature("array_append", args)
    if args[0] is None:
        return [args[1]]
    return [*_list("array_append", args[0], args), args[1]]


def _prepend(*args: Any) -> Any:
    if len(args) != 2:
        raise unknown_signature("array_prepend", args)
    if args[1] is None:
        return [args[0]]
    return [args[0], *_list("array_prepend", args[1], args)]


def _cat(*args: Any) -> Any:
    if len(args) != 2:
        raise unknown_signature("array_cat", args)
    a, b = args
    if a is None and b is None:
        return None
    return [
        *([] if a is None else _list("array_cat", a, args)),
        *([] if b is None else _list("array_cat", b, args)),
    ]


def _remove(*args: Any) -> Any:
    if len(args) != 2:
        raise unknown_signature("array_remove", args)
    if args[0] is None:
        return None
    return [x for x in _list("array_remove", args[0], args) if not _same(x, args[1])]


def _replace(*args: Any) -> Any:
    if len(args) != 3:
        raise unknown_signature("array_replace", args)
    if args[0] is None:
        return None
    return [args[2] if _same(x, args[1]) else x for x in _list("array_replace", args[0], args)]


def _positions(*args: Any) -> Any:
    if len(args) != 2:
        raise unknown_signature("array_positions", args)
    if args[0] is None:
        return None
    return [i for i, x in enumerate(_list("array_positions", args[0], args), 1) if _same(x, args[1])]


def _bound(name: str, upper: bool) -> Callable[..., Any]:
    def bound(*args: Any) -> Any:
        if len(args) != 2:
            raise unknown_signature(name, args)
        if args[0] is None or args[1] is None:
            return None
        items = _list(name, args[0], args)
        if args[1] != 1 or not items:  # one dimension; an empty array has none
            return None
        return len(items) if upper else 1

    return bound


def _ndims(*args: Any) -> Any:
    if len(args) != 1:
        raise unknown_signature("array_ndims", args)
    if args[0] is None:
        return None
    return 1 if _list("array_ndims", args[0], args) else None


def array_operator(op: str, a: Any, b: Any) -> bool:
    """``a @> b``, ``a <@ b`` or ``a && b`` of two arrays (neither NULL)."""
    left, right = _list(op, a, (a, b)), _list(op, b, (a, b))
    if op == "<@":
        left, right = right, left
    if op == "&&":
        return any(x is not None and any(_equal(x, y) for y in right) for x in left)
    return all(y is not None and any(_equal(x, y) for x in left) for y in right)


def _equal(a: Any, b: Any) -> bool:
    return b is not None and bool(a == b) and isinstance(a, bool) == isinstance(b, bool)


ARRAY_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "array_append": _append,
    "array_prepend": _prepend,
    "array_cat": _cat,
    "array_remove": _remove,
    "array_replace": _replace,
    "array_positions": _positions,
    "array_lower": _bound("array_lower", upper=False),
    "array_upper": _bound("array_upper", upper=True),
    "array_ndims": _ndims,
}
