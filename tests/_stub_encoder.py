"""A minimal YDB-JSON reference encoder, used by these tests only while changefeed.formats.ydb_json
is not in the tree (it is being written in parallel). The real encoder replaces it automatically."""

from __future__ import annotations

import sys
import types
from decimal import Decimal
from typing import Any

import orjson

from changefeed.engine.changes import CHANGE_SNAPSHOT
from changefeed.formats import base


def _j(v: Any) -> Any:
    if isinstance(v, Decimal):
        return int(v)
    return v


class StubYdbJson(base.Encoder):
    name = "ydb-json"

    def encode_spark(self, df: Any, table: Any, feed: Any) -> Any:  # pragma: no cover
        raise NotImplementedError

    def encode_python(self, batch: Any, table: Any, feed: Any) -> list[base.Record]:
        cols = batch.to_pydict()
        keys = [c for c in table.stored if c.is_key]
        vals = [c for c in table.stored if not c.is_key]
        out: list[base.Record] = []
        for i in range(batch.num_rows):
            op = cols["op"][i]
            key = [_j(cols[c.db][i]) for c in keys]
            kb = orjson.dumps(key)
            v: dict[str, Any] = {"key": key}
            if op == 11:
                v["erase"] = {}
            else:
                v["update"] = {}
                v["newImage"] = {c.name: _j(cols[c.db][i]) for c in vals}
            if cols["ox"][i] and op != CHANGE_SNAPSHOT:
                v["oldImage"] = {c.name: _j(cols[f"o{c.id}"][i]) for c in vals}
            if feed.virtual_timestamps:
                v["ts"] = [cols["ts"][i] // 1_000_000, cols["tx"][i]]
            out.append((base.partition_of(kb, feed.partitions), kb, orjson.dumps(v), cols["ts"][i]))
        return out

    def resolved(self, ts: Any, tx: int, feed: Any) -> bytes:
        return orjson.dumps({"resolved": [ts.millis, tx]})


def install() -> bool:
    """Register the stub if the real encoders are missing; True if the stub is in use."""
    try:
        from changefeed.formats import debezium, ydb_json  # noqa: F401

        return False
    except ImportError:
        pass
    for name in ("ydb_json", "debezium"):
        mod = types.ModuleType(f"changefeed.formats.{name}")
        sys.modules[f"changefeed.formats.{name}"] = mod
        setattr(sys.modules["changefeed.formats"], name, mod)
    base.REGISTRY["ydb-json"] = StubYdbJson
    return True
