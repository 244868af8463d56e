"""Parse tree -> AST: the lark ``Transformer`` that turns one statement's tree into
:mod:`changefeed.sql.ast` nodes.

Its rules come in families, one module each, combined by :class:`TreeBuilder` (lark finds a rule's
method by attribute lookup, so the mixins' methods are the builder's):

* :mod:`~changefeed.sql.builder.clauses` — names and the clauses statements share;
* :mod:`~changefeed.sql.builder.expressions` — expressions, literals, parameters, type names;
* :mod:`~changefeed.sql.builder.ddl` — tables, keyspaces/databases, enums;
* :mod:`~changefeed.sql.builder.dml` — INSERT/UPSERT, UPDATE, DELETE, SELECT, BATCH;
* :mod:`~changefeed.sql.builder.cql` — CQL's own: its SELECT (JSON, GROUP BY, PER PARTITION
  LIMIT), INSERT .. JSON, TRUNCATE;
* :mod:`~changefeed.sql.builder.sessions` — transactions, SHOW/DESCRIBE;
* :mod:`~changefeed.sql.builder.access` — users, roles, grants;
* :mod:`~changefeed.sql.builder.changefeeds` — CockroachDB changefeeds and jobs;
* :mod:`~changefeed.sql.builder.phoenix` — Apache Phoenix's forms;
* :mod:`~changefeed.sql.builder.replication` — YDB asynchronous replication.

:mod:`~changefeed.sql.builder.common` holds what they share. A rule is defined in one family only
(``tests/test_parser.py`` checks it).
"""

from __future__ import annotations

from changefeed.sql.builder.access import AccessRules
from changefeed.sql.builder.changefeeds import ChangefeedRules
from changefeed.sql.builder.clauses import ClauseRules
from changefeed.sql.builder.common import Rules
from changefeed.sql.builder.cql import CqlRules
from changefeed.sql.builder.ddl import DdlRules
from changefeed.sql.builder.dml import DmlRules
from changefeed.sql.builder.expressions import ExpressionRules
from changefeed.sql.builder.phoenix import PhoenixRules
from changefeed.sql.builder.replication import ReplicationRules
from changefeed.sql.builder.sessions import SessionRules
from changefeed.sql.builder.windows import WindowRules

__all__ = ["FAMILIES", "TreeBuilder"]


class TreeBuilder(
    ClauseRules,
    ExpressionRules,
    DdlRules,
    DmlRules,
    CqlRules,
    SessionRules,
    AccessRules,
    ChangefeedRules,
    PhoenixRules,
    ReplicationRules,
    WindowRules,
):
    """Turns one statement's parse tree into AST nodes: ``TreeBuilder(dialect).transform(tree)``.
    ``?`` parameters are numbered per statement, so a fresh builder is used for each top-level
    statement."""


#: The rule families, each a mixin of :class:`TreeBuilder`.
FAMILIES: tuple[type[Rules], ...] = TreeBuilder.__bases__
