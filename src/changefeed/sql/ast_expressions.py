"""The expression nodes of the syntax tree (``changefeed.sql.ast`` re-exports them with the
statements): names and types as written, literals, operators, calls (window calls too),
subqueries and ORDER BY items."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal as Lit

if TYPE_CHECKING:
    from changefeed.sql.ast import Select, SetOperation

# --------------------------------------------------------------------------------------------------
# Names and types


@dataclass(frozen=True, slots=True)
class Pos:
    """Where a statement starts in the submitted text (1-based), for error messages."""

    line: int = 0
    column: int = 0


@dataclass(frozen=True, slots=True)
class Ident:
    """One identifier. ``quoted`` is true for "x" in CQL/CockroachDB and `x` in YQL."""

    name: str
    quoted: bool = False


@dataclass(frozen=True, slots=True)
class QName:
    """A possibly qualified object name: ``t``, ``ks.t``, ``db.schema.t``."""

    parts: tuple[Ident, ...]

    @property
    def last(self) -> Ident:
        return self.parts[-1]


@dataclass(frozen=True, slots=True)
class TypeName:
    """A type as written: ``Decimal(22,9)``, ``INT8``, ``STRING[]``, ``BIT(3)``, ``varchar``."""

    name: str
    params: tuple[int, ...] = ()
    array: bool = False  # ``T[]`` or ``T ARRAY``


# --------------------------------------------------------------------------------------------------
# Expressions


@dataclass(frozen=True, slots=True)
class Literal:
    """A literal. ``value`` is None, bool, int, float, Decimal (for 1.5 written without exponent),
    str, bytes (``0xCAFE`` in CQL, ``b'..'``/``x'..'`` in SQL) or uuid.UUID.

    ``suffix`` keeps a YQL integer suffix (``ul``, ``u``, ``l``, ``s``, ``t``, ``ut``, ``us``...),
    lower-cased, or "" when there was none."""

    value: object
    suffix: str = ""


@dataclass(frozen=True, slots=True)
class Column:
    name: Ident
    table: Ident | None = None


@dataclass(frozen=True, slots=True)
class Param:
    """A bind parameter: ``?`` (index counts from 0 in order of appearance) or ``$1`` (index 0),
    or CQL's named ``:name`` (counted as ``?`` is; ``name`` is its bound variable's name)."""

    index: int
    name: str | None = None


@dataclass(frozen=True, slots=True)
class Star:
    """``*`` in ``count(*)`` or a select list."""


@dataclass(frozen=True, slots=True)
class QualifiedStar:
    """``t.*`` in a select list: every column of the FROM's table (or alias) ``t``."""

    table: Ident


@dataclass(frozen=True, slots=True)
class FuncCall:
    """A call such as ``Date("2022-02-22")``, ``unique_rowid()``, ``now()``, ``count(*)``."""

    name: str
    args: tuple[Expr, ...] = ()
    #: ``count(DISTINCT x)``: an aggregate over the distinct non-NULL values.
    distinct: bool = False
    #: ``sum(x) FILTER (WHERE cond)``: an aggregate over the rows for which ``cond`` is true.
    filter: Expr | None = None
    #: ``string_agg(s, ',' ORDER BY s)``: the order an aggregate takes its rows in.
    order_by: tuple[OrderItem, ...] = ()


@dataclass(frozen=True, slots=True)
class Cast:
    """``CAST(x AS T)`` or ``x::T``."""

    expr: Expr
    type: TypeName


BinOpName = Lit[
    "=", "!=", "<", "<=", ">", ">=", "+", "-", "*", "/", "%", "||", "AND", "OR", "->", "->>", "#>", "#>>", "@>", "<@", "&&",
    "?", "?|", "?&", "^", "&", "|", "#", "<<", ">>"
]  # fmt: skip


@dataclass(frozen=True, slots=True)
class BinaryOp:
    op: BinOpName
    left: Expr
    right: Expr


@dataclass(frozen=True, slots=True)
class UnaryOp:
    op: Lit["NOT", "-", "+", "~"]
    operand: Expr


@dataclass(frozen=True, slots=True)
class InList:
    expr: Expr
    items: tuple[Expr, ...]
    negated: bool = False


@dataclass(frozen=True, slots=True)
class IsNull:
    expr: Expr
    negated: bool = False


@dataclass(frozen=True, slots=True)
class Quantified:
    """``left op ANY|SOME|ALL (right)``: ``right`` an array (or a subquery's rows, kind
    ``array``); ANY is true if some comparison is, ALL if every one is, NULL where a NULL leaves
    it open, as SQL's three-valued logic says."""

    op: BinOpName
    left: Expr
    quantifier: Lit["any", "all"]
    right: Expr


@dataclass(frozen=True, slots=True)
class IsDistinct:
    """``a IS [NOT] DISTINCT FROM b``: ``!=`` (``=`` when negated) taking NULL as a value like any
    other, so never NULL itself."""

    left: Expr
    right: Expr
    negated: bool = False


@dataclass(frozen=True, slots=True)
class Between:
    """``expr [NOT] BETWEEN [SYMMETRIC] low AND high``: ``low <= expr AND expr <= high``, in
    three-valued logic; SYMMETRIC also takes the bounds the other way round."""

    expr: Expr
    low: Expr
    high: Expr
    negated: bool = False
    symmetric: bool = False


@dataclass(frozen=True, slots=True)
class RegexMatch:
    """``expr ~ pattern`` (``~*``: ignoring case; ``!~``, ``!~*``: negated): whether the regular
    expression matches somewhere in the text."""

    expr: Expr
    pattern: Expr
    negated: bool = False
    insensitive: bool = False


@dataclass(frozen=True, slots=True)
class Subquery:
    """A SELECT inside an expression: ``(SELECT ..)`` (its one value), ``EXISTS (SELECT ..)``,
    ``x [NOT] IN (SELECT ..)``, ``x op ANY (SELECT ..)``. One that reads none of the outer
    query's columns is run once, before the statement's rows; a correlated one, for each row,
    with the outer columns it reads (``outer``) as that row's values
    (``sql.statements.subqueries``)."""

    query: Select | SetOperation
    kind: Lit["scalar", "exists", "in", "array"] = "scalar"
    #: ``x IN (SELECT ..)``: x, and whether it is ``NOT IN``.
    expr: Expr | None = None
    negated: bool = False
    #: The outer query's columns the subquery reads (set when the statement runs).
    outer: tuple[Column, ...] = ()


@dataclass(frozen=True, slots=True)
class Case:
    """``CASE [operand] WHEN w THEN r .. [ELSE d] END``: with an operand, the first ``w`` equal
    to it; without, the first ``w`` that is true."""

    operand: Expr | None
    whens: tuple[tuple[Expr, Expr], ...]
    default: Expr | None = None


@dataclass(frozen=True, slots=True)
class Like:
    """``expr [NOT] LIKE pattern [ESCAPE e]`` (``ILIKE``: ignoring case); without ``ESCAPE`` the
    escape character is a backslash."""

    expr: Expr
    pattern: Expr
    negated: bool = False
    insensitive: bool = False
    escape: Expr | None = None


@dataclass(frozen=True, slots=True)
class ArrayLit:
    """``ARRAY[1, 2]`` (SQL) or ``[1, 2]`` (CQL list literal)."""

    items: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class MapLit:
    """``{'class': 'x', 'enabled': true}`` (CQL map literal, used by table options)."""

    items: tuple[tuple[Expr, Expr], ...]


@dataclass(frozen=True, slots=True)
class TupleLit:
    """``(a, b)`` in a multi-column comparison such as ``(ck1, ck2) > (1, 2)``."""

    items: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class FrameBound:
    """One end of a window frame: ``UNBOUNDED PRECEDING``, ``n PRECEDING``, ``CURRENT ROW``,
    ``n FOLLOWING`` or ``UNBOUNDED FOLLOWING`` (``offset`` the ``n``)."""

    kind: Lit["unbounded preceding", "preceding", "current row", "following", "unbounded following"]
    offset: Expr | None = None


@dataclass(frozen=True, slots=True)
class WindowFrame:
    """``ROWS|RANGE|GROUPS BETWEEN start AND end`` (``ROWS start`` ends at the current row)."""

    mode: Lit["rows", "range", "groups"]
    start: FrameBound
    end: FrameBound


@dataclass(frozen=True, slots=True)
class WindowCall:
    """``f(..) OVER ([PARTITION BY ..] [ORDER BY ..] [frame])``: a window function or an
    aggregate computed for each row over the rows of its partition (its frame's, for aggregates
    and the value functions); ``frame`` None is the default frame, from the partition's first row
    to the current row's last peer."""

    call: FuncCall
    partition_by: tuple[Expr, ...] = ()
    order_by: tuple[OrderItem, ...] = ()
    frame: WindowFrame | None = None
    #: ``OVER w``, ``OVER (w ORDER BY ..)``: the window of the query's WINDOW clause it builds
    #: on, until the parser writes that window in (never set in a parsed statement).
    window: str | None = None


@dataclass(frozen=True, slots=True)
class Subscript:
    """``a[i]`` (an array's element, 1-based, NULL outside it) or, with ``is_slice``,
    ``a[lo:hi]`` (its elements from ``lo`` to ``hi``, either end open when None)."""

    expr: Expr
    index: Expr | None
    upper: Expr | None = None
    is_slice: bool = False


@dataclass(frozen=True, slots=True)
class DefaultValue:
    """``DEFAULT`` as a value of ``INSERT .. VALUES``: the column's default, as if not named."""


Expr = (
    Literal
    | DefaultValue
    | Subscript
    | Column
    | Param
    | Star
    | QualifiedStar
    | FuncCall
    | Cast
    | BinaryOp
    | UnaryOp
    | InList
    | IsNull
    | IsDistinct
    | Quantified
    | Between
    | RegexMatch
    | Like
    | Case
    | Subquery
    | ArrayLit
    | MapLit
    | TupleLit
    | WindowCall
)

# An option in ``WITH (a = 1, b)``, ``WITH a = 1 AND b = {...}`` or ``WITH a, b = 'x'``.
# The value is None for a bare flag such as ``WITH updated``.
Option = tuple[str, "Expr | None"]


@dataclass(frozen=True, slots=True)
class OrderItem:
    expr: Expr
    descending: bool = False
    #: ``NULLS FIRST`` (True) / ``NULLS LAST`` (False); None: CockroachDB's default, NULLs as
    #: smaller than any value (first ascending, last descending).
    nulls_first: bool | None = None
