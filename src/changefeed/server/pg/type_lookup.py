"""asyncpg's type introspection, answered from the types this endpoint speaks.

asyncpg decodes a result column whose type it has no built-in codec for (``int8[]``,
``date[]``, ``numeric[]``: most array types) only after asking the server what the type is, with
one fixed query (``asyncpg.introspection.INTRO_LOOKUP_TYPES``: a recursive walk of ``pg_type``,
``pg_range`` and ``pg_attribute`` over ``$1::oid[]``). The catalog emulation cannot translate that
query (``array_agg(.. ORDER BY ..)``, ``regtype`` casts, ``pg_range``), so it is recognised here and
answered as PostgreSQL would for our types: each array type with its element type, each base
type alone, deepest first. Its parameter is described as ``oid[]``, as PostgreSQL describes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from changefeed.engine.types import Kind, SqlType
from changefeed.server.pg import types as t
from changefeed.sql.result import Result

__all__ = ["COLUMNS", "PARAM_OIDS", "answer", "is_type_lookup"]

#: What asyncpg's query selects, in its order.
COLUMNS = (
    "oid", "ns", "name", "kind", "basetype", "elemtype", "elemdelim", "range_subtype",
    "attrtypoids", "attrnames", "depth", "basetype_name", "elemtype_name", "range_subtype_name",
)  # fmt: skip
_INT = SqlType(Kind.INT, "INT8")
_TEXT = SqlType(Kind.TEXT, "TEXT")
#: The columns' types (described before any row is read; asyncpg decodes by them).
TYPES = (_INT, _TEXT, _TEXT, _TEXT, _INT, _INT, _TEXT, _INT, _TEXT, _TEXT, _INT, _TEXT, _TEXT, _TEXT)
#: Its one parameter: ``$1::oid[]``.
PARAM_OIDS = (t.ARRAY_OF[t.OID],)


def is_type_lookup(sql: str) -> bool:
    """Whether ``sql`` is asyncpg's type introspection query (any of its versions)."""
    return "typeinfo_tree" in sql and "any($1::oid[])" in sql


def answer(params: Sequence[Any]) -> Result:
    """The rows PostgreSQL returns for the OIDs asked (an unknown OID has no row, as there)."""
    asked = _oids(params[0] if params else None)
    rows: list[tuple[Any, ...]] = []
    seen: set[int] = set()
    for oid in asked:
        element = t.ARRAY_ELEMENTS.get(oid)
        if element is not None:
            _add(rows, seen, oid, 0, element)
            _add(rows, seen, element, 1, None)
        elif oid in t.TYPE_NAMES:
            _add(rows, seen, oid, 0, None)
    rows.sort(key=lambda r: -int(r[10]))
    return Result(columns=list(COLUMNS), rows=rows, types=list(TYPES), status=f"SELECT {len(rows)}")


def _add(rows: list[tuple[Any, ...]], seen: set[int], oid: int, depth: int, element: int | None) -> None:
    if oid in seen:
        return
    seen.add(oid)
    name = t.TYPE_NAMES[oid]
    if element is not None:  # pg_type names an array type by its element's, underscored
        name = "_" + t.TYPE_NAMES[element]
    rows.append(
        (
            oid,
            "pg_catalog",
            name,
            "b",
            None,
            element if element is not None else 0,
            "," if element is not None else None,
            None,
            None,
            None,
            depth,
            None,
            t.TYPE_NAMES[element] if element is not None else "-",
            None,
        )
    )


def _oids(value: Any) -> list[int]:
    """The parameter: a list (binary ``oid[]``) or its text (``{1016,1182}``)."""
    if value is None:
        return []
    if isinstance(value, str):
        body = value.strip().strip("{}")
        return [int(x) for x in body.split(",") if x.strip()]
    return [int(x) for x in value if x is not None]
