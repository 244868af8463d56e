"""Session statements the wire protocol answers itself: SET, RESET, SHOW <variable>, SHOW QUERIES,
CANCEL QUERY, DISCARD, DEALLOCATE, PREPARE and EXECUTE (``server.pg.sql_prepare``). Parsed with a small lark grammar of their own; everything else
goes to the engine's parser. Also the splitting of a simple-query string into statements.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lark import Lark, Token, Transformer
from lark.exceptions import LarkError

_GRAMMAR = r"""
?start: set | reset | show | cancel | discard | deallocate | prepare | execute
set: "SET"i [scope] name ("="|"TO"i) values                -> set
   | "SET"i [scope] "TIME"i "ZONE"i value                  -> set_timezone
   | "SET"i [scope] "NAMES"i value                         -> set_names
   | "SET"i "SESSION"i "CHARACTERISTICS"i "AS"i "TRANSACTION"i MODES -> set_characteristics
   | "SET"i "TRANSACTION"i MODES                           -> set_transaction
scope: "SESSION"i | "LOCAL"i
reset: "RESET"i (name | "ALL"i)
show: "SHOW"i "QUERIES"i                                   -> show_queries
    | "SHOW"i "STATEMENTS"i                                -> show_queries
    | "SHOW"i "CLUSTER"i ("QUERIES"i | "STATEMENTS"i)      -> show_queries
    | "SHOW"i "TRANSACTION"i "ISOLATION"i "LEVEL"i         -> show_isolation
    | "SHOW"i "ALL"i                                       -> show_all
    | "SHOW"i "TIME"i "ZONE"i                              -> show_timezone
    | "SHOW"i name                                         -> show
cancel: "CANCEL"i "QUERY"i ["IF"i "EXISTS"i] value
      | "CANCEL"i "QUERIES"i ["IF"i "EXISTS"i] value
discard: "DISCARD"i ("ALL"i | "PLANS"i | "SEQUENCES"i | "TEMP"i | "TEMPORARY"i)
deallocate: "DEALLOCATE"i ["PREPARE"i] (name | "ALL"i)
prepare: "PREPARE"i name [PARENS] "AS"i BODY
execute: "EXECUTE"i name [PARENS]
PARENS: /\((?:[^()']|'(?:[^']|'')*'|\((?:[^()']|'(?:[^']|'')*')*\))*\)/
BODY: /\S[\s\S]*/
values: value ("," value)*
?value: STRING | SIGNED | name | "DEFAULT"i -> default
name: CNAME ("." CNAME)* | ESCAPED_STRING
STRING: /E?'(?:[^']|'')*'/i
SIGNED: /[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?/
MODES: /[^;]+/
%import common.CNAME
%import common.ESCAPED_STRING
%import common.WS
%ignore WS
"""

_PARSER = Lark(_GRAMMAR, parser="lalr", maybe_placeholders=True)
_FIRST_WORDS = ("SET", "RESET", "SHOW", "CANCEL", "DISCARD", "DEALLOCATE", "PREPARE", "EXECUTE")
#: SHOW forms the engine answers (SHOW TABLES, SHOW COLUMNS FROM t, ...).
ENGINE_SHOWS = frozenset(
    {"TABLES", "CHANGEFEED", "JOBS", "CREATE", "COLUMNS", "DATABASES", "GRANTS", "USERS", "ROLES"}
)


@dataclass(frozen=True, slots=True)
class Command:
    kind: str  # set | reset | show | show_all | show_queries | cancel | discard | deallocate | prepare | execute | ignored
    name: str = ""
    value: str | None = None  # None: DEFAULT / RESET; PREPARE's statement
    #: PREPARE's parameter types and EXECUTE's arguments, as written between parentheses.
    args: str | None = None


class _Build(Transformer[Token, Command]):
    def name(self, items: list[Token]) -> str:
        if len(items) == 1 and items[0].type == "ESCAPED_STRING":
            return str(items[0])[1:-1]
        return ".".join(str(t) for t in items).lower()

    def STRING(self, tok: Token) -> str:
        t = str(tok)
        if t[:1] in "eE":
            t = t[1:]
        return t[1:-1].replace("''", "'")

    def SIGNED(self, tok: Token) -> str:
        return str(tok)

    def default(self, _: list[object]) -> None:
        return None

    def values(self, items: list[str | None]) -> str | None:
        if any(v is None for v in items):
            return None
        return ", ".join(str(v) for v in items)

    def set(self, items: list[object]) -> Command:
        return Command("set", str(items[1]), items[2] if items[2] is None else str(items[2]))

    def set_timezone(self, items: list[object]) -> Command:
        return Command("set", "timezone", None if items[1] is None else str(items[1]))

    def set_names(self, items: list[object]) -> Command:
        return Command("set", "client_encoding", None if items[1] is None else str(items[1]))

    def set_characteristics(self, items: list[Token]) -> Command:
        return _transaction_modes("default_transaction_read_only", str(items[0]))

    def set_transaction(self, items: list[Token]) -> Command:
        return _transaction_modes("transaction_read_only", str(items[0]))

    def reset(self, items: list[object]) -> Command:
        return Command("reset", str(items[0]) if items else "all")

    def show(self, items: list[object]) -> Command:
        return Command("show", str(items[0]))

    def show_timezone(self, _: list[object]) -> Command:
        return Command("show", "timezone")

    def show_isolation(self, _: list[object]) -> Command:
        return Command("show", "transaction_isolation")

    def show_all(self, _: list[object]) -> Command:
        return Command("show_all")

    def show_queries(self, _: list[object]) -> Command:
        return Command("show_queries")

    def cancel(self, items: list[object]) -> Command:
        return Command("cancel", value=str(items[-1]))

    def discard(self, _: list[object]) -> Command:
        return Command("discard")

    def deallocate(self, items: list[object]) -> Command:
        return Command("deallocate", str(items[0]) if items and items[0] is not None else "all")

    def prepare(self, items: list[object]) -> Command:
        name, parens, body = items
        return Command("prepare", str(name), str(body), None if parens is None else str(parens)[1:-1])

    def execute(self, items: list[object]) -> Command:
        name, parens = items
        return Command("execute", str(name), args=None if parens is None else str(parens)[1:-1])


def _transaction_modes(variable: str, modes: str) -> Command:
    """``SET [SESSION CHARACTERISTICS AS] TRANSACTION <modes>``: its access mode as a setting of
    ``variable``; isolation levels and DEFERRABLE are accepted and change nothing (every
    transaction runs serializable)."""
    words = " ".join(modes.upper().replace(",", " ").split())
    if "READ ONLY" in words:
        return Command("set", variable, "on")
    if "READ WRITE" in words:
        return Command("set", variable, "off")
    return Command("ignored", "SET")


def parse_command(sql: str) -> Command | None:
    """The session statement ``sql`` is, or None when it is one for the engine."""
    words = sql.split(None, 2)
    if not words or words[0].upper() not in _FIRST_WORDS:
        return None
    if words[0].upper() == "SHOW" and len(words) > 1 and words[1].upper().rstrip(";") in ENGINE_SHOWS:
        return None
    if words[0].upper() == "SET" and len(words) > 1 and words[1].upper() == "DATABASE":
        return None
    try:
        return _Build().transform(_PARSER.parse(sql.strip().rstrip(";")))
    except LarkError:
        return None


#: Where a statement's text may need a closer look: quotes, dollar quotes, comments, ``;``.
_SPECIAL = re.compile(r"['\";$]|--|/\*")


def split_statements(sql: str) -> list[str]:
    """Split a simple-query string at top-level ``;`` (not inside quotes, dollar quotes, comments).
    Jumps from one character that matters to the next (a regular expression search), so a
    statement costs a few steps however long it is."""
    out: list[str] = []
    start = i = 0
    n = len(sql)
    search = _SPECIAL.search
    while i < n:
        m = search(sql, i)
        if m is None:
            break
        i = m.start()
        c = sql[i]
        if c in "'\"":
            j = i + 1
            while True:
                j = sql.find(c, j)
                if j < 0:
                    j = n
                    break
                if j + 1 < n and sql[j + 1] == c:
                    j += 2
                    continue
                break
            i = j + 1
        elif c == "-":
            j = sql.find("\n", i)
            i = n if j < 0 else j + 1
        elif c == "/":
            j = sql.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif c == "$":
            j = i + 1
            while j < n and (sql[j].isalnum() or sql[j] == "_") and not sql[i + 1].isdigit():
                j += 1
            if j < n and sql[j] == "$" and not sql[i + 1 : i + 2].isdigit():
                tag = sql[i : j + 1]
                k = sql.find(tag, j + 1)
                i = n if k < 0 else k + len(tag)
            else:
                i += 1
        else:  # ;
            out.append(sql[start:i])
            start = i = i + 1
    out.append(sql[start:])
    return [s for s in (p.strip() for p in out) if s and not _only_comments(s)]


def _only_comments(s: str) -> bool:
    t = s
    while t:
        t = t.lstrip()
        if t.startswith("--"):
            j = t.find("\n")
            t = "" if j < 0 else t[j + 1 :]
        elif t.startswith("/*"):
            j = t.find("*/")
            t = "" if j < 0 else t[j + 2 :]
        else:
            return False
    return True
