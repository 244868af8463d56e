"""The statement cache of the simple query protocol, keyed by normalised text.

A client that sends its values inline (``SELECT v FROM t WHERE id = 4711``, pgbench ``-M simple``,
most ORMs' "simple" mode) sends a different text every time, so a cache keyed by the exact text
never hits and every statement pays a full parse (about half a millisecond here). PostgreSQL's
``pg_stat_statements`` and CockroachDB's statement and plan caches key statements by their text
with the constants taken out; so does this module:

* :func:`normalise` scans the text once with a regular expression (strings, quoted identifiers,
  comments, numbers, words), replaces each constant standing where an expression may stand with
  ``$n`` and returns the normalised text and the constants' values;
* :func:`template` parses the normalised text once per process (``changefeed.sql.parser.parse``
  and its cache) and checks it: the template with the constants put back as literals must equal,
  node for node, the parse of the original text. A text whose constants cannot be parameters (a
  type's length, ``TIMESTAMP '..'``) or that parses differently is remembered as not
  normalisable and is parsed as it is;
* :func:`bind` puts a statement's constants into the template as the very literals the parser
  would have made (integers, decimals, floats, strings), so what runs is exactly what a parse of
  the original text gives, at a fraction of the cost.

Only single statements without parameters of their own are normalised.
"""

from __future__ import annotations

import dataclasses
import decimal
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from changefeed.exceptions import ChangefeedError
from changefeed.sql import ast
from changefeed.sql.parser import parse

#: Templates kept per process (least recently used dropped first).
TEMPLATE_CACHE = 1024

_TOKENS = re.compile(
    r"""
      (?P<str>'(?:[^']|'')*')
    | (?P<qid>"(?:[^"]|"")*")
    | (?P<com>--[^\n]*|/\*.*?\*/)
    | (?P<num>(?<![\w$.])\d+(?:\.\d*)?(?:[eE][+-]?\d+)?(?![\w.]))
    | (?P<par>\$\d+|\?)
    | (?P<word>[A-Za-z_][\w$]*)
    | (?P<semi>;)
    """,
    re.S | re.X,
)
#: The same without words, for texts without string constants: words only matter to decide
#: whether a string is a value, and most statements then take one step per constant.
_TOKENS_NO_STRINGS = re.compile(
    r"""
      (?P<qid>"(?:[^"]|"")*")
    | (?P<com>--[^\n]*|/\*.*?\*/)
    | (?P<num>(?<![\w$.])\d+(?:\.\d*)?(?:[eE][+-]?\d+)?(?![\w.]))
    | (?P<par>\$\d+|\?)
    | (?P<semi>;)
    """,
    re.S | re.X,
)
#: A string constant right after one of these characters is a value (not ``DATE '..'``,
#: ``b'..'`` or an option name).
_VALUE_BEFORE = frozenset("=<>(,+*/|%")
_VALUE_WORDS = frozenset(
    {"and", "or", "not", "in", "like", "ilike", "then", "else", "when", "between", "is", "values", "select"}
)


@dataclass(frozen=True, slots=True)
class Normalised:
    key: str
    values: tuple[Any, ...]


def _number(text: str) -> int | float | decimal.Decimal:
    # As the parser reads a NUMBER token.
    if "e" in text or "E" in text:
        return float(text)
    if "." in text:
        return decimal.Decimal(text)
    return int(text)


def normalise(sql: str) -> Normalised | None:
    """The normalised text and constants of ``sql``; None when it has nothing to take out, has
    parameters of its own or holds more than one statement."""
    out: list[str] = []
    values: list[Any] = []
    last = 0
    prev_word = ""
    tokens = _TOKENS if "'" in sql else _TOKENS_NO_STRINGS
    for m in tokens.finditer(sql):
        kind = m.lastgroup
        if kind == "par":
            return None
        if kind == "semi":
            if sql[m.end() :].strip():
                return None
            continue
        if kind == "word":
            prev_word = m.group().lower()
            continue
        if kind in ("qid", "com"):
            prev_word = ""
            continue
        start = m.start()
        before = sql[:start].rstrip()
        prev = before[-1:] if before else ""
        value: Any
        if kind == "num":
            if prev in ("-", "+", "."):
                continue  # a signed constant: the parser folds the sign into the literal
            value = _number(m.group())
        else:
            # A string: only where a value stands (not after a type name or a prefix letter).
            if not (
                prev in _VALUE_BEFORE or (prev_word in _VALUE_WORDS and before.lower().endswith(prev_word))
            ):
                prev_word = ""
                continue
            value = m.group()[1:-1].replace("''", "'")
        prev_word = ""
        values.append(value)
        out.append(sql[last:start])
        out.append(f"${len(values)}")
        last = m.end()
    if not values:
        return None
    out.append(sql[last:])
    return Normalised("".join(out), tuple(values))


# ---------------------------------------------------------------------------- templates
_NOT = object()
_templates: OrderedDict[str, object] = OrderedDict()
_lock = threading.Lock()
_fields: dict[type, tuple[str, ...]] = {}


Binder = Callable[[tuple[Any, ...]], Any]


def _binder(node: Any) -> Binder | None:
    """A function rebuilding ``node`` with its parameters replaced by literals of the given
    values, sharing every subtree without parameters; None when ``node`` has none."""
    if isinstance(node, ast.Param):
        index = node.index
        return lambda values: ast.Literal(values[index])
    if isinstance(node, tuple | list):
        parts = [_binder(x) for x in node]
        if not any(parts):
            return None
        items = list(zip(node, parts, strict=True))
        if isinstance(node, tuple):
            return lambda values: tuple(x if b is None else b(values) for x, b in items)
        return lambda values: [x if b is None else b(values) for x, b in items]
    if node is None or isinstance(node, str | int | float | bool) or not dataclasses.is_dataclass(node):
        return None
    cls = type(node)
    names = _fields.get(cls)
    if names is None:
        names = _fields[cls] = tuple(f.name for f in dataclasses.fields(node))
    changed = [(name, b) for name in names if (b := _binder(getattr(node, name))) is not None]
    if not changed:
        return None
    instance: Any = node  # a dataclass instance (checked above)
    return lambda values: dataclasses.replace(instance, **{name: b(values) for name, b in changed})


@dataclass(frozen=True)
class Template:
    """A checked template: its statements and, per statement, its binder (None: no parameter)."""

    stmts: list[ast.Statement]
    binders: list[Binder | None]

    @property
    def runs_planned(self) -> bool:
        """One INSERT: its texts run as this template with their constants as parameters, so
        that they share the engine session's compiled plan (``Session.execute(.., bound=)``)."""
        return len(self.stmts) == 1 and isinstance(self.stmts[0], ast.Insert)


def bind(stmts: list[ast.Statement] | Template, values: tuple[Any, ...]) -> list[ast.Statement]:
    """The template's statements with ``$n`` replaced by the literal of the n-th constant."""
    tmpl = stmts if isinstance(stmts, Template) else _make(stmts)
    return [s if b is None else b(values) for s, b in zip(tmpl.stmts, tmpl.binders, strict=True)]


def _make(stmts: list[ast.Statement]) -> Template:
    return Template(stmts, [_binder(s) for s in stmts])


def template(norm: Normalised, original: list[ast.Statement]) -> Template | None:
    """The checked template of ``norm`` (see the module docstring), given the parse of the
    original text; None when this normalised text cannot stand for it. Remembered per process."""
    with _lock:
        got = _templates.get(norm.key)
        if got is not None:
            _templates.move_to_end(norm.key)
            return None if got is _NOT else got  # type: ignore[return-value]
    result: object = _NOT
    try:
        stmts = parse(norm.key, "sql")
        if len(stmts) == 1:
            made = _make(stmts)
            if bind(made, norm.values) == original:
                result = made
    except (ChangefeedError, ValueError, TypeError, LookupError):
        pass
    with _lock:
        _templates[norm.key] = result
        if len(_templates) > TEMPLATE_CACHE:
            _templates.popitem(last=False)
    return None if result is _NOT else result  # type: ignore[return-value]


def cached(norm: Normalised) -> Template | bool | None:
    """The template of ``norm`` if one was made; False if the text is known not normalisable;
    None if it was never seen."""
    with _lock:
        got = _templates.get(norm.key)
    if got is None:
        return None
    if got is _NOT:
        return False
    return got  # type: ignore[return-value]
