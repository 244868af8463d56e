"""changefeed: change data capture for tables, with its pipeline on Apache Spark.

``changefeed.connect(dir, user=..., dialect="sql"|"cql")`` opens a database directory; see
DESIGN.md's interface contract and the README.

The names below load on first use: a Spark worker that imports one pipeline module does not pay
for the SQL layer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from changefeed.connection import Connection, Result, connect
    from changefeed.exceptions import ChangefeedError

__all__ = ["ChangefeedError", "Connection", "Result", "connect"]
__version__ = "0.1.0"

_LAZY = {
    "Connection": "changefeed.connection",
    "Result": "changefeed.connection",
    "connect": "changefeed.connection",
    "ChangefeedError": "changefeed.exceptions",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'changefeed' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
