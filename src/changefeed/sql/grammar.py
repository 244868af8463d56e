"""The statement grammars and their lexer: loading, keyword handling, the compiled-grammar cache.

The grammars live next to this module (``grammar_common.lark`` plus ``grammar_cql.lark`` or
``grammar_sql.lark``) and are compiled lazily, once per dialect, into lark LALR(1) parsers with a
contextual lexer (:func:`load_grammar`); lark keeps the analysed tables in a cache file between
processes. The lexer settles keyword-versus-identifier (reserved words, soft keywords that are
names where a name fits) and :func:`parse_tree` retries a failed parse reading ambiguous soft
keywords as names. Turning the tree into AST nodes is :mod:`changefeed.sql.builder`'s job;
:mod:`changefeed.sql.parser` ties both together and converts lark's errors.
"""

from __future__ import annotations

import contextvars
import re
import threading
from collections.abc import Iterator
from importlib import resources
from typing import Any, Literal, NamedTuple, get_args

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedInput
from lark.lark import PostLex
from lark.lexer import PatternStr
from lark.parsers.lalr_analysis import Shift

from changefeed.exceptions import StatementSyntaxError

__all__ = ["DIALECTS", "DOLLAR_OPEN", "Dialect", "Grammar", "load_grammar", "parse_tree"]

Dialect = Literal["sql", "cql"]
DIALECTS: tuple[str, ...] = get_args(Dialect)

#: Display names for the regular-expression terminals in error messages.
_TERMINAL_NAMES = {
    "IDENT": "identifier",
    "QIDENT": "quoted identifier",
    "BQIDENT": "quoted identifier",
    "STRING": "string",
    "NUMBER": "number",
    "SUFFIXED_INT": "number",
    "HEXNUM": "number",
    "BYTESTR": "byte string",
    "UUID": "uuid",
    "BLOB": "blob",
    "PARAM_NUM": "parameter",
    "$END": "end of input",
}


#: The start of a dollar-quoted string constant (PostgreSQL's scan.l: ``$tag$``, the tag an
#: identifier without ``$``, or empty).
DOLLAR_OPEN = re.compile(r"\$(?:[^\W\d]\w*)?\$")


#: Words that are never read as unquoted identifiers, so that ``UPDATE t SET WHERE`` reports the
#: misplaced keyword instead of treating it as a column. Every other keyword is "soft": it is an
#: identifier wherever the grammar does not expect the keyword (``key``, ``value``, ``user``...).
_RESERVED = frozenset(
    [
        "SELECT",
        "FROM",
        "WHERE",
        "AND",
        "OR",
        "NOT",
        "INSERT",
        "UPDATE",
        "DELETE",
        "INTO",
        "VALUES",
        "CREATE",
        "DROP",
        "ALTER",
        "TABLE",
        "ORDER",
        "BY",
        "LIMIT",
        "IS",
        "IN",
        "BETWEEN",
        "NULL",
        "TRUE",
        "FALSE",
        "AS",
        "ON",
        "PRIMARY",
        "WITH",
        "USING",
        "CAST",
        "DISTINCT",
        "GRANT",
        "REVOKE",
        "RETURNING",
        "ALLOW",
        "APPLY",
        "BATCH",
    ]
)

#: Of those, the words that are unreserved keywords in PostgreSQL's grammar (``kwlist.h``) or
#: CockroachDB's (``sql.y``): in the SQL dialect they are names wherever a name fits
#: (``CREATE TABLE t (id INT PRIMARY KEY, by BYTES)``). CQL reserves them, as Cassandra does.
_UNRESERVED_SQL = frozenset(
    ["BY", "INSERT", "UPDATE", "DELETE", "DROP", "ALTER", "REVOKE", "ALLOW", "APPLY", "BATCH"]
)
_RESERVED_BY_DIALECT = {"cql": _RESERVED, "sql": _RESERVED - _UNRESERVED_SQL}

#: Parses tried per text when soft keywords could also be names (``CREATE TABLE if (if INT ..)``,
#: ``CREATE TABLE t (family INT ..)``): see :class:`_KeywordChoices`.
_MAX_ATTEMPTS = 16


class _AlwaysAcceptIdent(PostLex):
    """Makes every parser state's lexer recognise identifiers, so that a misspelt keyword such as
    'FROMM' is one word and keywords a state does not expect are plain identifiers."""

    always_accept = ("IDENT",)

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        return stream


def _can_shift(states: Any, stack: list[Any], terminal: str) -> bool:
    """Whether the LALR parser with ``stack`` would shift ``terminal`` (after any reductions)."""
    stack = list(stack)
    while True:
        action = states[stack[-1]].get(terminal)
        if action is None:
            return False
        kind, arg = action
        if kind is Shift:
            return True
        size = len(arg.expansion)
        if size:
            del stack[-size:]
        stack.append(states[stack[-1]][arg.origin.name][1])


class _KeywordChoices:
    """One parse attempt's keyword-or-name decisions. A soft keyword where the parser could take
    the keyword and also a name is read as the keyword; ``ambiguous`` records where that
    happened, and a retry lists in ``as_name`` the positions to read as names instead (one LALR
    token of look-ahead cannot tell ``FAMILY f (a, b)`` from a column named ``family``)."""

    __slots__ = ("ambiguous", "as_name")

    def __init__(self, as_name: frozenset[int]) -> None:
        self.as_name = as_name
        self.ambiguous: list[int] = []


_choices: contextvars.ContextVar[_KeywordChoices | None] = contextvars.ContextVar(
    "changefeed_sql_keyword_choices", default=None
)


class _KeywordLexer:
    """Wraps lark's contextual lexer to settle keyword-versus-identifier.

    The contextual lexer picks keywords by the parser state *before* pending reductions, and
    LALR merges look-aheads, so a word such as ``set`` in ``c set<int>`` may come out as a keyword
    where only an identifier fits. Here a non-reserved keyword the parser cannot shift becomes an
    identifier when an identifier can be shifted; where both can, the keyword is taken and the
    choice recorded (:class:`_KeywordChoices`) so that a failed parse is retried with the word as
    a name. An identifier spelling a reserved word becomes that keyword, so ``UPDATE t SET
    WHERE`` reports 'WHERE' instead of reading it as a column."""

    def __init__(self, inner: Any, keywords: dict[str, str], reserved: frozenset[str]) -> None:
        self.inner = inner
        self.keywords = frozenset(keywords.values())
        self.reserved = {word: name for word, name in keywords.items() if word in reserved}
        self.soft = self.keywords - frozenset(self.reserved.values())

    def lex(self, lexer_state: Any, parser_state: Any) -> Iterator[Token]:
        states = parser_state.parse_conf.states
        choices = _choices.get()
        for tok in self.inner.lex(lexer_state, parser_state):
            if tok.type == "IDENT":
                kw = self.reserved.get(tok.value.upper())
                if kw is not None:
                    tok.type = kw
            elif tok.type in self.soft:
                stack = parser_state.state_stack
                if _can_shift(states, stack, tok.type):
                    if _can_shift(states, stack, "IDENT") and choices is not None:
                        if tok.start_pos in choices.as_name:
                            tok.type = "IDENT"
                        else:
                            choices.ambiguous.append(tok.start_pos)
                elif _can_shift(states, stack, "IDENT"):
                    tok.type = "IDENT"
            yield tok


def _check_block_comment(token: Token) -> Token:
    if not token.value.endswith("*/") or len(token.value) < 4:
        raise StatementSyntaxError(
            "unterminated comment", line=token.line or 0, column=token.column or 0, expected=("*/",)
        )
    return token


class Grammar(NamedTuple):
    """One dialect's compiled grammar."""

    lark: Lark
    display: dict[str, str]  # terminal name -> how error messages show it


_grammars: dict[str, Grammar] = {}
_grammar_lock = threading.Lock()


def _cache_file(text: str) -> str | bool:
    """Where lark keeps this grammar's analysed tables between processes (a CLI start then
    loads them instead of building the LALR tables again); keyed by the grammar text and lark's
    version. ``False`` (no cache) when no writable cache directory exists."""
    import hashlib
    import os
    import tempfile

    import lark

    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    for root in (
        os.path.join(base, "changefeed"),
        os.path.join(tempfile.gettempdir(), f"changefeed-{os.getuid()}"),
    ):
        try:
            os.makedirs(root, exist_ok=True)
        except OSError:
            continue
        if os.access(root, os.W_OK):
            digest = hashlib.sha256(f"{lark.__version__}\n{text}".encode()).hexdigest()[:24]
            return os.path.join(root, f"grammar-{digest}.lark-cache")
    return False


def load_grammar(dialect: str) -> Grammar:
    """The compiled grammar of ``dialect``, built on first use (once per process; lark's cache
    file spares the LALR analysis on later starts)."""
    g = _grammars.get(dialect)
    if g is not None:
        return g
    with _grammar_lock:
        g = _grammars.get(dialect)
        if g is None:
            files = resources.files("changefeed.sql")
            text = (
                files.joinpath("grammar_common.lark").read_text(encoding="utf-8")
                + "\n"
                + files.joinpath(f"grammar_{dialect}.lark").read_text(encoding="utf-8")
            )
            parser = Lark(
                text,
                parser="lalr",
                lexer="contextual",
                propagate_positions=True,
                maybe_placeholders=True,
                postlex=_AlwaysAcceptIdent(),
                lexer_callbacks={"BLOCK_COMMENT": _check_block_comment},
                cache=_cache_file(text),
            )
            display: dict[str, str] = dict(_TERMINAL_NAMES)
            keywords: dict[str, str] = {}  # upper-cased word -> terminal name
            for term in parser.terminals:
                if isinstance(term.pattern, PatternStr):
                    value = term.pattern.value
                    display[term.name] = value.upper() if value.isidentifier() else f"'{value}'"
                    if value.isidentifier():
                        keywords[value.upper()] = term.name
                else:
                    display.setdefault(term.name, term.name.lower().replace("_", " "))
            frontend = parser.parser
            frontend.lexer = _KeywordLexer(frontend.lexer, keywords, _RESERVED_BY_DIALECT[dialect])
            g = Grammar(parser, display)
            _grammars[dialect] = g
    return g


def parse_tree(grammar: Grammar, text: str) -> Tree[Token]:
    """Parse ``text``; where a soft keyword could also have been a name and the parse failed,
    try again reading such words as names: fewest first, and of as many the latest first (at
    most ``_MAX_ATTEMPTS`` parses). Fewest first, because a second word read as a name may make
    the text parse into something else: in ``substring(trim(both 'x' from s), 1, 2)`` reading
    ``both`` as a name too parses (``both 'x'`` a typed literal) where only ``substring`` is one.
    The error reported is the first attempt's."""
    pending: list[frozenset[int]] = [frozenset()]
    seen: set[frozenset[int]] = set()
    first: UnexpectedInput | None = None
    attempts = 0
    while pending and attempts < _MAX_ATTEMPTS:
        as_name = min(pending, key=lambda names: (len(names), -max(names, default=-1)))
        pending.remove(as_name)
        if as_name in seen:
            continue
        seen.add(as_name)
        attempts += 1
        choices = _KeywordChoices(as_name)
        reset = _choices.set(choices)
        try:
            return grammar.lark.parse(text)
        except UnexpectedInput as e:
            if first is None:
                first = e
            at = _error_offset(e)
            # the latest choice before the error is the likeliest wrong one: it is tried first
            pending.extend(as_name | {p} for p in choices.ambiguous if p < at and p not in as_name)
        finally:
            _choices.reset(reset)
    assert first is not None
    raise first


def _error_offset(e: UnexpectedInput) -> int:
    tok = getattr(e, "token", None)
    if tok is not None and getattr(tok, "start_pos", None) is not None:
        return int(tok.start_pos) if tok.type != "$END" else 1 << 62
    pos = getattr(e, "pos_in_stream", None)
    return int(pos) if pos is not None else 1 << 62
