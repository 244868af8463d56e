"""PostgreSQL's regular-expression and encoding functions beyond ``regexp_replace`` and ``~``:
``regexp_match``, ``regexp_split_to_array``, ``regexp_like`` and ``regexp_count`` (patterns as
``~`` reads them, ``changefeed.engine.patterns``; flag ``i`` for case-insensitive), and
``encode``/``decode`` of bytea as ``hex``, ``base64`` or ``escape``."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from typing import Any

from changefeed.engine.patterns import regex_all_groups, regex_count, regex_groups, regex_search, regex_split
from changefeed.sql.function_errors import invalid_argument, unknown_signature

__all__ = ["REGEX_FUNCTIONS", "matches", "split_to_table"]


def _texts(name: str, args: tuple[Any, ...], lo: int, hi: int) -> tuple[str, ...] | None:
    if not lo <= len(args) <= hi:
        raise unknown_signature(name, args)
    if any(a is None for a in args):
        return None
    if not all(isinstance(a, str) for a in args):
        raise unknown_signature(name, args)
    return args


def _insensitive(name: str, flags: str) -> bool:
    for f in flags:
        if f not in "ic":  # PostgreSQL's: i case-insensitive, c case-sensitive (the last wins)
            raise invalid_argument(f'invalid regular expression option: "{f}"', "22023")
    return flags.rfind("i") > flags.rfind("c")


def _match(*args: Any) -> Any:
    a = _texts("regexp_match", args, 2, 3)
    if a is None:
        return None
    return regex_groups(a[1], a[0], _insensitive("regexp_match", a[2] if len(a) > 2 else ""))


def _split(*args: Any) -> Any:
    a = _texts("regexp_split_to_array", args, 2, 3)
    if a is None:
        return None
    return regex_split(a[1], a[0], _insensitive("regexp_split_to_array", a[2] if len(a) > 2 else ""))


def _like(*args: Any) -> Any:
    a = _texts("regexp_like", args, 2, 3)
    if a is None:
        return None
    return regex_search(a[1], a[0], _insensitive("regexp_like", a[2] if len(a) > 2 else ""))


def _count(*args: Any) -> Any:
    if len(args) != 2:
        raise unknown_signature("regexp_count", args)
    a = _texts("regexp_count", args, 2, 2)
    if a is None:
        return None
    return regex_count(a[1], a[0], False)


def _encode(*args: Any) -> Any:
    if len(args) != 2:
        raise unknown_signature("encode", args)
    if any(a is None for a in args):
        return None
    data, fmt = args
    if isinstance(data, str):
        data = data.encode()
    if not isinstance(data, bytes | bytearray | memoryview) or not isinstance(fmt, str):
        raise unknown_signature("encode", args)
    data = bytes(data)
    f = fmt.lower()
    if f == "hex":
        return data.hex()
    if f == "base64":  # PostgreSQL breaks lines at 76 characters
        text = base64.b64encode(data).decode()
        return "\n".join(text[i : i + 76] for i in range(0, len(text), 76))
    if f == "escape":
        return "".join("\\\\" if b == 0x5C else f"\\{b:03o}" if b == 0 or b >= 0x80 else chr(b) for b in data)
    raise invalid_argument(f'unrecognized encoding: "{fmt}"', "22023")


def _decode(*args: Any) -> Any:
    a = _texts("decode", args, 2, 2)
    if a is None:
        return None
    text, fmt = a
    f = fmt.lower()
    try:
        if f == "hex":
            return bytes.fromhex(text)
        if f == "base64":
            return base64.b64decode("".join(text.split()), validate=True)
    except (ValueError, binascii.Error):
        raise invalid_argument(f"invalid {f} data", "22023") from None
    if f == "escape":
        return text.encode("latin-1", "backslashreplace").decode("unicode_escape").encode("latin-1")
    raise invalid_argument(f'unrecognized encoding: "{fmt}"', "22023")


def _similar_to_escape(*args: Any) -> Any:
    """``similar_to_escape(pattern [, escape])``: a SQL regular expression (``SIMILAR TO``) as a
    POSIX one matching the whole text: ``%`` any text, ``_`` any character, ``|``, ``*``, ``+``,
    ``?``, ``{m,n}``, ``()`` and ``[]`` as in POSIX, the escape character (a backslash unless
    given) quoting the next one; ``.``, ``^`` and ``$`` are plain characters."""
    a = _texts("similar_to_escape", args, 1, 2)
    if a is None:
        return None
    pattern = a[0]
    escape = a[1] if len(a) > 1 else "\\"
    if len(escape) > 1:
        raise invalid_argument("invalid escape string", "22025")
    out: list[str] = []
    i = 0
    in_class = False
    while i < len(pattern):
        ch = pattern[i]
        if escape and ch == escape:
            if i + 1 == len(pattern):
                raise invalid_argument("invalid escape string", "22025")
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        if in_class:
            out.append("\\" + ch if ch == "\\" else ch)
            in_class = ch != "]"
        elif ch == "[":
            out.append(ch)
            in_class = True
        elif ch == "%":
            out.append(".*")
        elif ch == "_":
            out.append(".")
        elif ch in ".^$\\":
            out.append("\\" + ch)
        else:
            out.append(ch)
        i += 1
    return "^(?:" + "".join(out) + ")$"


def split_to_table(args: list[Any]) -> list[str]:
    """``regexp_split_to_table(text, pattern [, flags])``: the pieces, one a row."""
    a = _texts("regexp_split_to_table", tuple(args), 2, 3)
    if a is None:
        return []
    return regex_split(a[1], a[0], _insensitive("regexp_split_to_table", a[2] if len(a) > 2 else ""))


def matches(args: list[Any]) -> list[list[str | None]]:
    """``regexp_matches(text, pattern [, flags])``: the first match's groups as a row (flag
    ``g``: every match, one a row), none when nothing matches."""
    a = _texts("regexp_matches", tuple(args), 2, 3)
    if a is None:
        return []
    flags = a[2] if len(a) > 2 else ""
    insensitive = _insensitive("regexp_matches", flags.replace("g", ""))
    if "g" in flags:
        return regex_all_groups(a[1], a[0], insensitive)
    first = regex_groups(a[1], a[0], insensitive)
    return [] if first is None else [first]


REGEX_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "similar_to_escape": _similar_to_escape,
    "regexp_match": _match,
    "regexp_split_to_array": _split,
    "regexp_like": _like,
    "regexp_count": _count,
    "encode": _encode,
    "decode": _decode,
}
