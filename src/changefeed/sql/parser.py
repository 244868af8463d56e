"""Statement parser for both dialects: CQL (ScyllaDB/Cassandra) and SQL (YDB's YQL + CockroachDB).

``parse(text, dialect)`` turns a script (statements separated by ``;``) into :mod:`changefeed.sql.ast`
statements; ``parse_one`` insists on exactly one statement. The grammars, their keyword-aware
lexer and the compiled-grammar cache are :mod:`changefeed.sql.grammar`; the parse tree becomes
AST nodes in :mod:`changefeed.sql.builder`. Results are memoised on ``(text, dialect)`` because
prepared statements are parsed again and again.

Every failure is reported as :class:`~changefeed.exceptions.StatementSyntaxError` with a 1-based
line/column, the human-readable set of expected tokens and a message such as
``unexpected 'FROMM', expected one of: FROM, ','``.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

from lark import Token, Tree
from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedInput, UnexpectedToken, VisitError

from changefeed.exceptions import ChangefeedError, StatementSyntaxError, StatementTooComplex
from changefeed.sql import ast
from changefeed.sql.builder import TreeBuilder
from changefeed.sql.grammar import DIALECTS, DOLLAR_OPEN, Dialect, load_grammar, parse_tree

__all__ = ["Dialect", "parse", "parse_one"]

_CACHE_SIZE = 512


# --------------------------------------------------------------------------------------------------
# Errors


def _acceptable(state: Any) -> set[str]:
    """The terminals that really let the parser advance from ``state`` (LALR tables merge
    look-aheads, so the raw table row may list tokens that would fail after a reduction)."""
    row = state.parse_conf.states[state.position]
    conf = copy.copy(state.parse_conf)
    conf.callbacks = {}
    out: set[str] = set()
    for name in row:
        if not name.isupper():  # a non-terminal (goto entry)
            continue
        trial = type(state)(conf, state.lexer, list(state.state_stack), list(state.value_stack))
        try:
            trial.feed_token(Token(name, ""), is_end=name == "$END")
        except UnexpectedToken:
            continue
        except (AssertionError, KeyError):
            pass  # reached the accepting state
        out.add(name)
    return out or {n for n in row if n.isupper()}


def _expected(exc: UnexpectedInput, display: dict[str, str]) -> tuple[str, ...]:
    state = getattr(exc, "state", None)
    try:
        names = _acceptable(state)
    except Exception:  # no parser state to look at: use what lark offers
        names = set(getattr(exc, "expected", None) or getattr(exc, "allowed", None) or ())
    shown = {display.get(n, n.lower()) for n in names}

    def order(s: str) -> tuple[int, str]:
        if s.isupper():
            return (0, s)  # keywords
        if s.startswith("'"):
            return (1, s)  # punctuation
        return (2, s)  # identifier, number, string, end of input...

    return tuple(sorted(shown, key=order))


def _describe_token(tok: Token) -> str:
    text = str(tok)
    if len(text) > 40:
        text = text[:37] + "..."
    if tok.type == "STRING":
        return f"string {text}"
    if tok.type in ("QIDENT", "BQIDENT"):
        return f"quoted name {text}"
    return f"'{text}'"


def _end_position(text: str) -> tuple[int, int]:
    """1-based position just after the last non-blank character of ``text``."""
    stripped = text.rstrip()
    line = stripped.count("\n") + 1
    column = len(stripped) - (stripped.rfind("\n") + 1) + 1
    return line, column


def _convert_error(
    exc: UnexpectedInput, text: str, dialect: str, display: dict[str, str]
) -> StatementSyntaxError:
    expected = _expected(exc, display)
    tail = ""
    if expected:
        tail = f", expected {'one of: ' if len(expected) > 1 else ''}{', '.join(expected)}"
    if isinstance(exc, UnexpectedToken):
        tok = exc.token
        if tok.type == "$END":
            line, column = _end_position(text)
            return StatementSyntaxError(
                f"unexpected end of input{tail}", line=line, column=column, expected=expected
            )
        return StatementSyntaxError(
            f"unexpected {_describe_token(tok)}{tail}",
            line=tok.line or 0,
            column=tok.column or 0,
            expected=expected,
        )
    if isinstance(exc, UnexpectedCharacters):
        pos = exc.pos_in_stream if exc.pos_in_stream is not None else 0
        ch = text[pos] if 0 <= pos < len(text) else ""
        if ch == "'":
            message = "unterminated string literal"
        elif ch == "$" and dialect == "sql" and DOLLAR_OPEN.match(text, pos):
            message = "unterminated dollar-quoted string"
        elif ch == "`" or (ch == '"' and dialect == "cql"):
            message = "unterminated quoted identifier"
        elif ch == '"':
            message = "unterminated double-quoted string or identifier"
        else:
            message = f"unexpected character {ch!r}{tail}"
        return StatementSyntaxError(message, line=exc.line, column=exc.column, expected=expected)
    return StatementSyntaxError(
        str(exc), line=getattr(exc, "line", 0) or 0, column=getattr(exc, "column", 0) or 0
    )


# --------------------------------------------------------------------------------------------------
# Public API


def _check_dialect(dialect: str) -> None:
    if dialect not in DIALECTS:
        raise ValueError(f"unknown dialect {dialect!r}: expected one of {', '.join(DIALECTS)}")


def _parse_uncached(text: str, dialect: str) -> tuple[ast.Statement, ...]:
    grammar = load_grammar(dialect)
    try:
        tree = parse_tree(grammar, text)
        out: list[ast.Statement] = []
        for stmt_tree in tree.children:
            assert isinstance(stmt_tree, Tree)
            out.append(TreeBuilder(dialect).transform(stmt_tree))
        return tuple(out)
    except StatementSyntaxError:
        raise
    except UnexpectedInput as e:
        raise _convert_error(e, text, dialect, grammar.display) from None
    except VisitError as e:
        if isinstance(e.orig_exc, ChangefeedError):  # a syntax error, or a statement refused by name
            raise e.orig_exc from None
        if isinstance(e.orig_exc, ValueError):
            raise StatementSyntaxError(str(e.orig_exc)) from None
        raise
    except LarkError as e:
        raise StatementSyntaxError(str(e)) from None
    except RecursionError:
        raise StatementTooComplex(
            "stack depth limit exceeded: the statement nests too deeply (a long chain of AND/OR?)"
        ) from None


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _parse_cached(text: str, dialect: str) -> tuple[ast.Statement, ...]:
    return _parse_uncached(text, dialect)


def parse(text: str, dialect: Dialect) -> list[ast.Statement]:
    """Parse a script: statements separated by ``;`` (a trailing ``;`` is optional and empty
    statements are ignored). Results are cached on ``(text, dialect)``."""
    _check_dialect(dialect)
    return list(_parse_cached(text, dialect))


def parse_one(text: str, dialect: Dialect) -> ast.Statement:
    """Parse exactly one statement (a trailing ``;`` is allowed)."""
    _check_dialect(dialect)
    statements = _parse_cached(text, dialect)
    if len(statements) == 1:
        return statements[0]
    if not statements:
        line, column = _end_position(text)
        raise StatementSyntaxError("empty statement: expected one statement", line=line, column=column)
    second = statements[1].pos
    raise StatementSyntaxError(
        f"expected a single statement, found {len(statements)}", line=second.line, column=second.column
    )


def cache_info() -> Any:
    """Statistics of the parse cache (``functools.lru_cache`` ``cache_info()``)."""
    return _parse_cached.cache_info()


def clear_cache() -> None:
    _parse_cached.cache_clear()
