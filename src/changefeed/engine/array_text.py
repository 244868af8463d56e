"""PostgreSQL's array text form, ``{1,2,NULL,"a \\"b\\"",""}``, read as PostgreSQL's array_in
reads a one-dimensional array: elements separated by commas, double-quoted where they hold a
delimiter, a quote, a backslash or blanks, backslash escapes inside quotes, an unquoted ``NULL``
as NULL, a leading ``[1:3]=`` dimension decoration allowed. Arrays of more than one dimension
are refused (ValueError). Used for bound array parameters and for text compared with
``= ANY (..)``."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from changefeed.exceptions import InvalidTextRepresentation

__all__ = ["array_from_text", "array_literal", "array_to_text"]

_DIMENSIONS = re.compile(r"^\s*\[\d+:\d+\]\s*=\s*")


def array_from_text(text: str, element: Callable[[str], Any] | None) -> list[Any]:
    """The elements of a one-dimensional array's text form, each through ``element`` (None: the
    text itself)."""
    s = _DIMENSIONS.sub("", text, count=1).strip()
    if len(s) < 2 or s[0] != "{" or s[-1] != "}":
        raise ValueError("an array's text is enclosed in braces")
    body = s[1:-1]
    out: list[Any] = []
    if not body.strip():
        return out
    i, n = 0, len(body)
    while True:
        while i < n and body[i].isspace():
            i += 1
        if i < n and body[i] == "{":
            raise ValueError("arrays of more than one dimension are not supported")
        if i < n and body[i] == '"':
            i += 1
            chars: list[str] = []
            while True:
                if i >= n:
                    raise ValueError("unterminated quoted array element")
                c = body[i]
                if c == "\\" and i + 1 < n:
                    chars.append(body[i + 1])
                    i += 2
                    continue
                if c == '"':
                    i += 1
                    break
                chars.append(c)
                i += 1
            value: Any = "".join(chars)
            out.append(element(value) if element is not None else value)
            while i < n and body[i].isspace():
                i += 1
        else:
            j = body.find(",", i)
            j = n if j < 0 else j
            raw = body[i:j].strip()
            if not raw:
                raise ValueError("empty array element")
            if raw.upper() == "NULL":
                out.append(None)
            else:
                out.append(element(raw) if element is not None else raw)
            i = j
        if i >= n:
            return out
        if body[i] != ",":
            raise ValueError("array elements are separated by commas")
        i += 1


def array_to_text(values: Any, element: Callable[[Any], str]) -> str:
    """A one-dimensional array's text form as PostgreSQL's array_out writes it, each element's
    text by ``element``: ``{1,NULL,"a b","","NULL"}`` (quoted where empty, ``NULL``, or holding
    a delimiter, a brace, a quote, a backslash or white space)."""
    return "{" + ",".join("NULL" if x is None else _quoted(element(x)) for x in values) + "}"


def _quoted(s: str) -> str:
    if s == "" or s.upper() == "NULL" or any(c in s for c in _QUOTE_IF):
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return s


_QUOTE_IF = frozenset(' ,{}"\\\t\n\r\f\v')


def array_literal(text: str) -> list[Any]:
    """An untyped array literal's (or parameter's) elements, as text; 22P02 when it is not one."""
    try:
        return array_from_text(text, None)
    except ValueError as exc:
        raise InvalidTextRepresentation(f'malformed array literal: "{text}": {exc}') from None
