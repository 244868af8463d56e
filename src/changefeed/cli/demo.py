"""``changefeed demo``: the main job on the embedded default, end to end."""

from __future__ import annotations

import shutil
from pathlib import Path

import click

from changefeed.cli.render import render_cql, render_sql
from changefeed.connection import connect

CQL_SCRIPT = """
CREATE TABLE ks.t (pk int, ck int, s int static, v int, PRIMARY KEY (pk, ck)) WITH cdc = {'enabled': true, 'preimage': true, 'postimage': true};
INSERT INTO ks.t (pk, ck, s, v) VALUES (0, 0, 0, 0);
UPDATE ks.t SET v = 1 WHERE pk = 0 AND ck = 0;
INSERT INTO ks.t (pk, ck, v) VALUES (0, 1, 10);
INSERT INTO ks.t (pk, ck, v) VALUES (0, 2, 20);
DELETE FROM ks.t WHERE pk = 0 AND ck > 0 AND ck <= 2;
BEGIN UNLOGGED BATCH
    UPDATE ks.t SET s = 5 WHERE pk = 1;
    INSERT INTO ks.t (pk, ck, v) VALUES (1, 0, 100);
APPLY BATCH;
"""

SQL_SCRIPT = """
CREATE TABLE orders (id Uint64, customer Utf8, amount Decimal(22,9), created Timestamp, PRIMARY KEY (id));
UPSERT INTO orders (id, customer, amount, created) VALUES (1ul, "alice", Decimal("10.5", 22, 9), Timestamp("2022-12-12T00:00:00.000000Z"));
ALTER TABLE orders ADD CHANGEFEED updates WITH (FORMAT = 'JSON', MODE = 'NEW_AND_OLD_IMAGES', VIRTUAL_TIMESTAMPS = TRUE, INITIAL_SCAN = TRUE);
ALTER TABLE orders ADD CHANGEFEED debezium WITH (FORMAT = 'DEBEZIUM_JSON', MODE = 'NEW_AND_OLD_IMAGES');
UPSERT INTO orders (id, customer) VALUES (2ul, "bob");
UPDATE orders SET amount = Decimal("99", 22, 9) WHERE id = 2;
DELETE FROM orders WHERE id = 1;
"""

# CockroachDB: a table, a core changefeed streamed to the client, and a changefeed job.
CRDB_SCRIPT = """
CREATE TABLE office_dogs (id INT PRIMARY KEY, name STRING, likes_treats BOOL DEFAULT true);
INSERT INTO office_dogs (id, name) VALUES (1, 'Petee'), (2, 'Carl');
CREATE CHANGEFEED FOR TABLE office_dogs INTO 'topics://' WITH updated, diff, resolved = '1s';
UPDATE office_dogs SET name = 'Petee H' WHERE id = 1;
DELETE FROM office_dogs WHERE id = 2;
"""
CRDB_CORE = "EXPERIMENTAL CHANGEFEED FOR office_dogs WITH initial_scan_only"

# Apache Phoenix: a CDC object over a table, and a time-range change query.
PHOENIX_SCRIPT = """
CREATE TABLE T (K INTEGER NOT NULL, V1 INTEGER, B.VB VARCHAR, CONSTRAINT PK PRIMARY KEY (K)) MAX_LOOKBACK_AGE = 86400000;
CREATE CDC C ON T INCLUDE (PRE, POST);
UPSERT INTO T (K, V1, B.VB) VALUES (1, 100, 'a');
UPSERT INTO T (K, V1) VALUES (1, 101);
DELETE FROM T WHERE K = 1;
"""
PHOENIX_QUERY = "SELECT * FROM C WHERE PHOENIX_ROW_TIMESTAMP() >= TO_DATE('2000-01-01 00:00:00')"


def run_demo(db: Path, *, keep: bool = False) -> None:
    if db.exists() and not keep:
        shutil.rmtree(db)
    click.echo(f"database: {db.resolve()}")
    with connect(db, dialect="cql") as cql:
        cql.execute(CQL_SCRIPT)
        click.echo("\ncqlsh> SELECT * FROM ks.t;")
        click.echo(render_cql(cql.execute("SELECT * FROM ks.t")))
        click.echo(
            '\ncqlsh> SELECT "cdc$batch_seq_no", "cdc$operation", pk, ck, s, v, "cdc$deleted_v" FROM ks.t_scylla_cdc_log;'
        )
        click.echo(
            render_cql(
                cql.execute(
                    'SELECT "cdc$batch_seq_no", "cdc$operation", pk, ck, s, v, "cdc$deleted_v" FROM ks.t_scylla_cdc_log'
                )
            )
        )
    with connect(db, dialect="sql") as sql:
        sql.execute(SQL_SCRIPT)
        click.echo("\nsql> SELECT * FROM orders;")
        click.echo(render_sql(sql.execute("SELECT * FROM orders")))
    _print_changes(db)
    with connect(db, dialect="sql") as sql:
        sql.execute(CRDB_SCRIPT)
        click.echo(f"\nsql> {CRDB_CORE};  -- a core changefeed, streamed to the client")
        click.echo("table,key,value")
        with sql.stream(CRDB_CORE) as feed:
            for table, key, value in feed:
                click.echo(f"{table},{(key or b'').decode()},{value.decode()}")
        sql.execute(PHOENIX_SCRIPT)
        click.echo(f"\nsql> {PHOENIX_QUERY};  -- Apache Phoenix CDC")
        click.echo(render_sql(sql.execute(PHOENIX_QUERY)))
    click.echo(
        "\nchangefeeds: orders/updates (YDB JSON), orders/debezium (Debezium JSON) and the CockroachDB job"
        " into topic office_dogs; deliver them with"
    )
    click.echo(
        f"  changefeed run --db {db} --until-idle && changefeed read --db {db} office_dogs --from-beginning --json"
    )


def _print_changes(db: Path) -> None:
    """The change stream that changefeeds read: one row per transaction and key, with images."""
    from changefeed.engine.database import Database

    d = Database(db, create=False)
    try:
        d.refresh_catalog()
        schema = d.find_table("orders")
        assert schema is not None
        st = d.store(schema)
        click.echo("\nchange stream of orders (seq, op, key, old image -> new image):")
        cols = [c for c in schema.columns if not c.is_key]
        for r in d.conn.execute(
            f"SELECT seq, op, c0, {', '.join('o' + str(c.id) for c in cols)}, {', '.join(c.db for c in cols)}, ox FROM {st.x} ORDER BY seq"
        ):
            n = len(cols)
            # ox (last column): did the row exist before the transaction?
            old = (
                {c.name: c.type.from_db(v) for c, v in zip(cols, r[3 : 3 + n], strict=True)}
                if r[-1]
                else None
            )
            new = {c.name: c.type.from_db(v) for c, v in zip(cols, r[3 + n : 3 + 2 * n], strict=True)}
            kind = "upsert" if r[1] == 10 else "erase"
            click.echo(
                f"  {r[0]:>3} {kind:<6} id={schema.columns[0].type.from_db(r[2])} {old} -> {new if kind == 'upsert' else None}"
            )
    finally:
        d.close()
