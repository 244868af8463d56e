"""The texts of Go's standard library errors that CockroachDB passes on in its messages, for the
same mistakes here: a JSON option that does not parse (``encoding/json``) and a parameter that is
not base 64 (``encoding/base64``). Python's own exception texts never reach the user."""

from __future__ import annotations

import base64
import binascii

import orjson

_B64 = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")


def json_error(text: str) -> str:
    """Go's ``json.Unmarshal`` error for ``text`` (call only when it does not parse):
    ``unexpected end of JSON input``, ``invalid character 'x' looking for beginning of value``..."""
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        pos = exc.pos
    else:  # it parses: the caller wanted something else of it
        return "json: cannot unmarshal into the expected Go value"
    stripped = text[pos:].lstrip()
    if not stripped:
        return "unexpected end of JSON input"
    ch = stripped[0]
    before = text[:pos].rstrip()
    in_object = _in_object(before)
    if before.endswith("{") or (before.endswith(",") and in_object):
        context = "looking for beginning of object key string"
    elif not before or before[-1] in "[,:":
        context = "looking for beginning of value"
    elif in_object:
        context = "after object key" if _after_key(before) else "after object key:value pair"
    else:
        context = "after array element" if "[" in before else "after top-level value"
    shown = ch if ch != "'" else "\\'"
    return f"invalid character '{shown}' {context}"


def _in_object(before: str) -> bool:
    """Whether ``before`` (a JSON prefix) ends inside an object, not an array."""
    stack: list[str] = []
    in_string = False
    escaped = False
    for c in before:
        if in_string:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c in "{[":
            stack.append(c)
        elif c in "}]" and stack:
            stack.pop()
    return bool(stack) and stack[-1] == "{"


def _after_key(before: str) -> bool:
    """Whether the last complete token of an object's body is a key (a string not followed by ':')."""
    tail = before.rstrip()
    if not tail.endswith('"'):
        return False
    i = len(tail) - 2
    while i >= 0 and not (tail[i] == '"' and (i == 0 or tail[i - 1] != "\\")):
        i -= 1
    head = tail[:i].rstrip()
    return bool(head) and head[-1] in "{,"


def base64_error(text: str) -> str | None:
    """Go's ``base64.StdEncoding`` error for ``text`` (``illegal base64 data at input byte 4``), or
    None when it decodes."""
    try:
        base64.b64decode(text, validate=True)
        return None
    except (binascii.Error, ValueError):
        pass
    for i, c in enumerate(text):
        if c == "=":
            rest = text[i:]
            if rest.strip("=") or len(text) % 4:
                return f"illegal base64 data at input byte {i}"
            break
        if c not in _B64:
            return f"illegal base64 data at input byte {i}"
    return f"illegal base64 data at input byte {len(text) - len(text) % 4}"


__all__ = ["base64_error", "json_error"]
