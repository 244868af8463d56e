"""SQL pattern matching, shared by the SQL evaluator and CockroachDB's CDC queries: ``LIKE``
patterns (``%`` any run of characters, ``_`` one character, the escape character, a backslash
unless ``ESCAPE`` names another, taking the next one literally), and the regular expressions
of ``~`` (:func:`regex_search`).

Matched without backtracking: the pattern is cut at its ``%`` into segments; the first must
match at the value's start and the last at its end, and each one between at the leftmost place
after the one before (where a segment can match, the leftmost place leaves the most for the
rest). A match takes time in proportion to the value's length times the pattern's, whatever the
pattern (a regular expression of ``.*`` runs backtracks: ``'%a%a%a%b'`` over 3,000 characters
took minutes)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import regex as regex_engine

from changefeed.exceptions import InvalidEscape, InvalidRegularExpression

#: Parsed patterns kept (a statement run again and again matches the same few).
PATTERN_CACHE = 512

#: One segment of a pattern between ``%``: its characters, None where ``_`` stands.
Segment = tuple[str | None, ...]


@functools.lru_cache(maxsize=PATTERN_CACHE)
def segments(pattern: str, escape: str = "\\", insensitive: bool = False) -> tuple[Segment, ...]:
    """``pattern`` cut at its unescaped ``%`` (one segment: no ``%``); lower-cased for ILIKE."""
    out: list[Segment] = []
    current: list[str | None] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if escape and ch == escape:
            if i + 1 == len(pattern):  # PostgreSQL and CockroachDB refuse it (22025)
                raise InvalidEscape("LIKE pattern must not end with escape character")
            current.append(pattern[i + 1].lower() if insensitive else pattern[i + 1])
            i += 2
            continue
        if ch == "%":
            out.append(tuple(current))
            current = []
        elif ch == "_":
            current.append(None)
        else:
            current.append(ch.lower() if insensitive else ch)
        i += 1
    out.append(tuple(current))
    return tuple(out)


def like(value: str, pattern: str, *, insensitive: bool = False, escape: str = "\\") -> bool:
    """Whether ``value`` matches ``pattern`` as a whole (``ILIKE``: ignoring case)."""
    segs = segments(pattern, escape, insensitive)
    if insensitive:
        value = value.lower()
    if len(segs) == 1:
        return len(value) == len(segs[0]) and _at(value, 0, segs[0])
    first, last = segs[0], segs[-1]
    end = len(value) - len(last)
    if end < len(first) or not _at(value, 0, first) or not _at(value, end, last):
        return False
    pos = len(first)
    for seg in segs[1:-1]:
        found = _find(value, seg, pos, end)
        if found < 0:
            return False
        pos = found + len(seg)
    return True


def _at(value: str, i: int, seg: Segment) -> bool:
    """Whether ``seg`` matches ``value`` at ``i`` (the caller checked that it fits)."""
    return all(c is None or value[i + k] == c for k, c in enumerate(seg))


def _find(value: str, seg: Segment, start: int, end: int) -> int:
    """The leftmost place in ``value[start:end]`` where ``seg`` matches, or -1."""
    if None not in seg:
        return value.find("".join(c for c in seg if c is not None), start, end)
    for i in range(start, end - len(seg) + 1):
        if _at(value, i, seg):
            return i
    return -1


#: Seconds one regular expression match may take (PostgreSQL's engine cannot backtrack without
#: end; a backtracking one can, on patterns such as ``(a|aa)+$``).
REGEX_TIMEOUT_S = 5.0


@functools.lru_cache(maxsize=256)
def regex(pattern: str, insensitive: bool) -> regex_engine.Pattern[str]:
    """A ``~`` pattern compiled (the ``regex`` module's engine, which reads the POSIX and Perl
    forms clients write alike: classes, anchors, quantifiers, groups, alternation, back
    references)."""
    try:
        return regex_engine.compile(pattern, regex_engine.IGNORECASE if insensitive else 0)
    except regex_engine.error as exc:
        raise InvalidRegularExpression(f"invalid regular expression: {exc}") from None


def regex_search(pattern: str, text: str, insensitive: bool) -> bool:
    """Whether ``pattern`` matches somewhere in ``text``: matched without the interpreter lock
    (the process's other sessions go on) and given up after :data:`REGEX_TIMEOUT_S`, as
    PostgreSQL refuses a pattern too complex to run (2201B)."""
    try:
        return regex(pattern, insensitive).search(text, concurrent=True, timeout=REGEX_TIMEOUT_S) is not None
    except TimeoutError:
        raise _too_complex() from None


def regex_replace(
    pattern: str, text: str, replacement: Callable[[Any], str], *, insensitive: bool, every: bool
) -> str:
    """``text`` with the first match of ``pattern`` (every match with ``every``) replaced by what
    ``replacement`` makes of it, under the same time limit as :func:`regex_search`."""
    try:
        return regex(pattern, insensitive).sub(
            replacement, text, count=0 if every else 1, concurrent=True, timeout=REGEX_TIMEOUT_S
        )
    except TimeoutError:
        raise _too_complex() from None


def regex_groups(pattern: str, text: str, insensitive: bool) -> list[str | None] | None:
    """The first match of ``pattern`` in ``text`` as PostgreSQL's ``regexp_match`` gives it: its
    capture groups (the whole match when it has none), None when nothing matches."""
    try:
        m = regex(pattern, insensitive).search(text, concurrent=True, timeout=REGEX_TIMEOUT_S)
    except TimeoutError:
        raise _too_complex() from None
    if m is None:
        return None
    return list(m.groups()) if m.re.groups else [m.group(0)]


def regex_all_groups(pattern: str, text: str, insensitive: bool) -> list[list[str | None]]:
    """Every match of ``pattern`` in ``text``, each as :func:`regex_groups` gives one."""
    try:
        found = list(regex(pattern, insensitive).finditer(text, concurrent=True, timeout=REGEX_TIMEOUT_S))
    except TimeoutError:
        raise _too_complex() from None
    return [list(m.groups()) if m.re.groups else [m.group(0)] for m in found]


def regex_split(pattern: str, text: str, insensitive: bool) -> list[str]:
    """``text`` cut at each match of ``pattern`` (``regexp_split_to_array``): an empty match
    splits between characters, as PostgreSQL's does."""
    try:
        parts = regex(pattern, insensitive).split(text, concurrent=True, timeout=REGEX_TIMEOUT_S)
    except TimeoutError:
        raise _too_complex() from None
    return [p for p in parts if isinstance(p, str)]


def regex_count(pattern: str, text: str, insensitive: bool) -> int:
    """How many times ``pattern`` matches in ``text``, the matches not overlapping."""
    try:
        return sum(
            1 for _ in regex(pattern, insensitive).finditer(text, concurrent=True, timeout=REGEX_TIMEOUT_S)
        )
    except TimeoutError:
        raise _too_complex() from None


def _too_complex() -> InvalidRegularExpression:
    return InvalidRegularExpression(
        f"invalid regular expression: regular expression is too complex (no answer within {REGEX_TIMEOUT_S:g} s)"
    )
