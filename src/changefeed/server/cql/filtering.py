"""ScyllaDB's ALLOW FILTERING rule for the SELECTs the CQL endpoint prepares or runs.

ScyllaDB refuses, unless the statement says ``ALLOW FILTERING``, a SELECT whose WHERE it could
only answer by reading rows and discarding some (``cql3/restrictions/statement_restrictions.cc``
and ``select_statement::check_needs_filtering``). This store has no secondary indexes, so none of
ScyllaDB's index exceptions apply. The checks, in ScyllaDB's order:

1. each restriction in WHERE order: a partition-key column restricted by anything but ``=`` or
   ``IN``; a clustering column restricted after a clustering slice, or a slice on a clustering
   column before one already restricted;
2. a partition key restricted in part (not every column by ``=``/``IN``, no ``token()``);
3. clustering restrictions that leave a gap in the clustering key;
4. a restriction on a column outside the primary key (regular or static);
5. clustering restrictions without any partition-key restriction.

The rule applies to the tables of the cql dialect and their CDC logs (partition key
``cdc$stream_id``, clustering key ``cdc$time``, ``cdc$batch_seq_no``), so the CDC libraries'
window reads (``"cdc$stream_id" IN (..) AND "cdc$time" > ? AND "cdc$time" <= ?``) pass as on
ScyllaDB. Tables of the sql dialect and the ``system`` keyspaces are not checked.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from changefeed.exceptions import InvalidStatement
from changefeed.sql import ast
from changefeed.sql.evaluator import conjuncts
from changefeed.sql.session import Session
from changefeed.sql.statements.common import LOG_SUFFIX

__all__ = ["FILTERING_MESSAGE", "check_filtering"]

FILTERING_MESSAGE = (
    "Cannot execute this query as it might involve data filtering and thus may have unpredictable "
    "performance. If you want to execute this query despite the performance unpredictability, "
    "use ALLOW FILTERING"
)
PARTITION_SLICE_MESSAGE = (
    "Only EQ and IN relation are supported on the partition key "
    "(unless you use the token() function or ALLOW FILTERING)"
)

#: The CDC log's primary key, as ScyllaDB declares it.
LOG_PARTITION_KEY = ("cdc$stream_id",)
LOG_CLUSTERING_KEY = ("cdc$time", "cdc$batch_seq_no")

#: Restriction kinds: ``=``, ``IN``, a slice (``<``, ``<=``, ``>``, ``>=``), anything else
#: (``!=``, ``LIKE``) that is neither an equality nor a slice.
EQ = "eq"
IN = "in"
SLICE = "slice"
OTHER = "other"
_SLICE_OPS = frozenset({"<", "<=", ">", ">="})
_OTHER_OPS = frozenset({"!=", "<>"})


@dataclass(frozen=True, slots=True)
class Keys:
    """A table's primary key as ScyllaDB sees it."""

    partition: tuple[str, ...]
    clustering: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Restriction:
    """One conjunct of a WHERE: the column it restricts (None for ``token(..)`` or a tuple of
    columns) and its kind."""

    column: str | None
    kind: str
    token: bool = False
    multi_column: bool = False
    columns: tuple[str, ...] = ()


def check_filtering(session: Session, stmt: ast.Statement) -> None:
    """Raise ScyllaDB's ``InvalidRequest`` when ``stmt`` is a SELECT that would need filtering
    and does not say ``ALLOW FILTERING``."""
    sel = stmt.select if isinstance(stmt, ast.CqlSelect) else stmt
    if not isinstance(sel, ast.Select) or sel.table is None or sel.where is None or sel.allow_filtering:
        return
    keys = table_keys(session, sel.table)
    if keys is None:
        return
    check_restrictions(keys, [_restriction(session, e) for e in conjuncts(sel.where)])


def table_keys(session: Session, q: ast.QName) -> Keys | None:
    """The primary key of the cql-dialect table or CDC log ``q`` names; None for anything else."""
    session.db.refresh_catalog()
    name = session.table_name(q)
    schema = session.db.find_table(name)
    if schema is not None:
        if not schema.is_cql:
            return None
        return Keys(tuple(c.name for c in schema.partition_key), tuple(c.name for c in schema.clustering_key))
    if name.endswith(LOG_SUFFIX):
        base = session.db.find_table(name[: -len(LOG_SUFFIX)])
        if base is not None and base.is_cql and base.cdc.enabled:
            return Keys(LOG_PARTITION_KEY, LOG_CLUSTERING_KEY)
    return None


def check_restrictions(keys: Keys, restrictions: Sequence[Restriction]) -> None:
    """ScyllaDB's checks (see the module's docstring) over a WHERE's restrictions, in order."""
    position = {c: i for i, c in enumerate(keys.clustering)}
    partition = set(keys.partition)
    pk_kinds: dict[str, list[str]] = {}
    ck_kinds: dict[str, list[str]] = {}
    token = False
    multi_column = False
    non_key = False
    ck_last: str | None = None
    ck_slice = False
    for r in restrictions:
        if r.token:
            token = True
            continue
        if r.multi_column:
            multi_column = True
            continue
        if r.column is None:
            non_key = non_key or any(c not in partition and c not in position for c in r.columns)
            continue
        if r.column in partition:
            if r.kind not in (EQ, IN):
                raise InvalidStatement(PARTITION_SLICE_MESSAGE)
            pk_kinds.setdefault(r.column, []).append(r.kind)
        elif r.column in position:
            at = position[r.column]
            if ck_last is not None:
                if ck_slice and at > position[ck_last]:
                    raise InvalidStatement(
                        f'Clustering column "{r.column}" cannot be restricted '
                        f'(preceding column "{ck_last}" is restricted by a non-EQ relation)'
                    )
                if at < position[ck_last] and r.kind == SLICE:
                    raise InvalidStatement(
                        f'PRIMARY KEY column "{ck_last}" cannot be restricted '
                        f'(preceding column "{r.column}" is restricted by a non-EQ relation)'
                    )
            ck_kinds.setdefault(r.column, []).append(r.kind)
            ck_slice = ck_slice or r.kind == SLICE
            if ck_last is None or at > position[ck_last]:
                ck_last = r.column
        else:
            non_key = True
    if pk_kinds and not token and len(pk_kinds) < len(keys.partition):
        raise InvalidStatement(FILTERING_MESSAGE)
    if ck_kinds and not multi_column and _prefix(keys.clustering, ck_kinds) < len(ck_kinds):
        restricted = sorted(ck_kinds, key=position.__getitem__)
        for declared, column in zip(keys.clustering, restricted, strict=False):
            if declared != column:
                raise InvalidStatement(
                    f'PRIMARY KEY column "{column}" cannot be restricted as preceding column "{declared}" '
                    "is not restricted"
                )
    if non_key:
        raise InvalidStatement(FILTERING_MESSAGE)
    if ck_kinds and not pk_kinds and not token:
        raise InvalidStatement(FILTERING_MESSAGE)


def _prefix(clustering: Sequence[str], kinds: dict[str, list[str]]) -> int:
    """How many clustering columns, from the first, bound the read without filtering: each one
    restricted by ``=``/``IN``/a slice, and none after a slice."""
    n = 0
    for c in clustering:
        got = kinds.get(c)
        if got is None or OTHER in got:
            break
        n += 1
        if SLICE in got:
            break
    return n


def _restriction(session: Session, e: ast.Expr) -> Restriction:
    if isinstance(e, ast.BinaryOp):
        left, right = e.left, e.right
        if not _restricts(left) and _restricts(right):
            left, right = right, left
        kind = EQ if e.op == "=" else SLICE if e.op in _SLICE_OPS else OTHER
        if isinstance(left, ast.Column):
            return Restriction(session.ident(left.name), kind)
        if isinstance(left, ast.FuncCall) and left.name.lower() == "token":
            return Restriction(None, kind, token=True)
        if isinstance(left, ast.TupleLit):
            return Restriction(None, kind, multi_column=True)
    if isinstance(e, ast.InList) and not e.negated and isinstance(e.expr, ast.Column):
        return Restriction(session.ident(e.expr.name), IN)
    if isinstance(e, ast.InList) and not e.negated and isinstance(e.expr, ast.TupleLit):
        return Restriction(None, IN, multi_column=True)
    if isinstance(e, ast.Like) and isinstance(e.expr, ast.Column):
        return Restriction(session.ident(e.expr.name), OTHER)
    return Restriction(None, OTHER, columns=tuple(dict.fromkeys(_columns(session, e))))


def _restricts(e: ast.Expr) -> bool:
    return isinstance(e, ast.Column | ast.TupleLit) or (
        isinstance(e, ast.FuncCall) and e.name.lower() == "token"
    )


def _columns(session: Session, e: object) -> Iterator[str]:
    """The names of the columns an expression reads."""
    if isinstance(e, ast.Column):
        yield session.ident(e.name)
        return
    if isinstance(e, ast.Subquery):
        return
    fields = getattr(e, "__dataclass_fields__", None)
    if fields is None:
        return
    for name in fields:
        value = getattr(e, name)
        if isinstance(value, tuple):
            for item in value:
                yield from _columns(session, item)
        elif value is not None and hasattr(value, "__dataclass_fields__"):
            yield from _columns(session, value)
