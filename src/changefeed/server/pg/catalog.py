"""Catalog queries (stub, replaced below)."""

from __future__ import annotations

from typing import Any

from changefeed.connection import Connection, Result


def wants(sql: str) -> bool:
    low = sql.lower()
    return "pg_catalog" in low or "information_schema" in low


def run(conn: Connection, sql: str, params: list[Any], vars: dict[str, str]) -> Result:
    return Result()
