"""SQL ``LIKE`` patterns: ``%`` any run of characters, ``_`` one character, the escape character
(a backslash unless ``ESCAPE`` names another) taking the next one literally. Shared by the SQL
evaluator and CockroachDB's CDC queries."""

from __future__ import annotations

import functools
import re

#: Compiled patterns kept (a statement run again and again matches the same few).
PATTERN_CACHE = 512


def like_regex(pattern: str, escape: str = "\\") -> str:
    """A LIKE pattern as a Python regular expression to match the whole value with."""
    out = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if escape and ch == escape and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        if ch == "%":
            out.append(".*")
        elif ch == "_":
            out.append(".")
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)


@functools.lru_cache(maxsize=PATTERN_CACHE)
def _compiled(pattern: str, insensitive: bool, escape: str) -> re.Pattern[str]:
    flags = re.DOTALL | (re.IGNORECASE if insensitive else 0)
    return re.compile(like_regex(pattern, escape), flags)


def like(value: str, pattern: str, *, insensitive: bool = False, escape: str = "\\") -> bool:
    """Whether ``value`` matches ``pattern`` as a whole (``ILIKE``: ignoring case)."""
    return _compiled(pattern, insensitive, escape).fullmatch(value) is not None
