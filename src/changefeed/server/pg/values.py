"""Rows to wire bytes: per-column encoders chosen once per result, then applied row by row."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from changefeed.connection import Result
from changefeed.engine.types import SqlType
from changefeed.server.pg import types as t
from changefeed.sql import ast

Encoder = Callable[[Any], bytes]


def _text_str(v: Any) -> bytes:
    return v.encode() if isinstance(v, str) else t.text_value(v).encode()


def _text_int(v: Any) -> bytes:
    return str(v).encode() if type(v) is int else t.text_value(v).encode()


def _text_any(v: Any) -> bytes:
    return t.text_value(v).encode()


def column_oids(types: Sequence[SqlType | None], rows: Sequence[tuple[Any, ...]], width: int) -> list[int]:
    """OIDs of a result's columns: by engine type, else by the first non-NULL value."""
    oids = []
    for i in range(width):
        st = types[i] if i < len(types) else None
        sample = None
        if st is None:
            sample = next((r[i] for r in rows if r[i] is not None), None)
        oids.append(t.oid_of(st, sample))
    return oids


def encoders(oids: Sequence[int], formats: Sequence[int]) -> tuple[list[Encoder], list[int]]:
    """Per-column encoders and the format codes actually used (binary where we can write it)."""
    fmts = [fmt_of(formats, i) for i in range(len(oids))]
    fmts = [f if (f == 0 or oid in t.BINARY_OUT) else 0 for f, oid in zip(fmts, oids, strict=True)]
    encs: list[Encoder] = []
    for oid, f in zip(oids, fmts, strict=True):
        if f == 1:
            encs.append(lambda v, oid=oid: t.binary_value(v, oid))  # type: ignore[misc]
        elif oid in (t.JSONB, t.JSON):
            encs.append(t.text_json)
        elif oid in (t.TEXT, t.VARCHAR, t.NAME):
            encs.append(_text_str)
        elif oid in (t.INT8, t.INT4, t.INT2, t.OID):
            encs.append(_text_int)
        else:
            encs.append(_text_any)
    return encs, fmts


def fmt_of(formats: Sequence[int], i: int) -> int:
    """Format code of column/parameter ``i``: none given = text, one = for all, else one each."""
    if not formats:
        return 0
    if len(formats) == 1:
        return formats[0]
    return formats[i] if i < len(formats) else 0


def normalise_tag(res: Result, stmt: ast.Statement | None) -> str:
    status = res.status or ""
    words = status.split()
    if words and words[0] in ("INSERT", "UPSERT") and len(words) == 2:
        return f"INSERT 0 {words[1]}"
    if words and words[0] == "SHOW":
        return f"SELECT {len(res.rows)}" if res.columns else "SHOW"
    if status:
        return status
    if res.columns:
        return f"SELECT {len(res.rows)}"
    if stmt is not None:
        name = type(stmt).__name__
        return "".join(" " + c if c.isupper() else c for c in name).strip().upper()
    return "OK"
