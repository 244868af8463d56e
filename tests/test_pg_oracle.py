"""PostgreSQL 15 as the oracle: the same statements, in the same order, through psycopg against a
real PostgreSQL server (Debian's, started here as ``make setup`` installed it) and against the
PostgreSQL endpoint, with the same columns and rows (or the same SQLSTATE) expected from both.

The statements keep to what both systems define alike: where CockroachDB's semantics differ from
PostgreSQL's on purpose (NULLs sort first ascending; ``UPSERT``), ordering says ``NULLS FIRST`` or
``LAST`` and writes use PostgreSQL's syntax. Rows of a statement without ``ORDER BY`` are
compared as multisets; numbers by value (PostgreSQL's ``numeric`` keeps trailing zeros)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import psycopg
import pytest

from tests.pg_server import beside_postgres

SETUP = (
    "CREATE TABLE d1 (id INT PRIMARY KEY, s TEXT, n INT, f FLOAT8, b BOOL)",
    "CREATE TABLE d2 (id INT PRIMARY KEY, d1 INT, label TEXT)",
    "INSERT INTO d1 VALUES (1, 'a', 10, 1.5, true), (2, 'b', 20, NULL, false), (3, NULL, 30, -2.25, NULL),"
    " (4, 'a', NULL, 0, true), (5, 'c', -5, 3.0, false)",
    "INSERT INTO d2 VALUES (1, 1, 'x'), (2, 1, 'y'), (3, 3, 'z'), (4, 9, 'w')",
    "CREATE TABLE d3 (id INT PRIMARY KEY, doc JSONB)",
    """INSERT INTO d3 VALUES (1, '{"a": [1, 2, {"b": null}], "c": "x", "n": 5}'), (2, '[1, "two", [3]]'),"""
    """ (3, '"s"'), (4, 'null'), (5, NULL)""",
    "CREATE TABLE dj (id INT PRIMARY KEY, doc JSONB)",
    """INSERT INTO dj VALUES (1, '{"x": 0.1234567890123456789, "big": 123456789012345678901234567890,"""
    """ "e": 1.50e1, "z": -0, "t": 1.10, "tiny": 1E-3}')""",
    "CREATE TABLE d4 (id INT PRIMARY KEY, parent INT, name TEXT)",
    "INSERT INTO d4 VALUES (1, NULL, 'root'), (2, 1, 'a'), (3, 1, 'b'), (4, 2, 'c'), (5, 4, 'd'), (6, 6, 'loop')",
)

STATEMENTS = (
    # reads
    "SELECT id, s FROM d1 ORDER BY id",
    "SELECT count(*), count(s), count(n), sum(n), avg(n), min(s), max(s) FROM d1",
    "SELECT id FROM d1 WHERE n BETWEEN 5 AND 25 ORDER BY id",
    "SELECT id FROM d1 WHERE s IN ('a', 'c') ORDER BY id",
    "SELECT id FROM d1 WHERE s NOT IN ('a') ORDER BY id",
    "SELECT id FROM d1 WHERE s LIKE 'a%' OR s ILIKE 'B' ORDER BY id",
    "SELECT id, coalesce(s, '?') AS s FROM d1 ORDER BY 2, 1",
    "SELECT id, n / 3, n % 3, -n FROM d1 ORDER BY id",
    "SELECT -7 / 2, -7 % 2, 7 / -2, 7 % -2, mod(-7, 2), 1 + 1, 7 / 2, 7.0 / 2, 'a' < 'b'",
    "SELECT id, CASE WHEN n > 15 THEN 'big' WHEN n > 0 THEN 'small' ELSE 'none' END FROM d1 ORDER BY id",
    "SELECT id FROM d1 WHERE b ORDER BY id",
    "SELECT id FROM d1 WHERE NOT b ORDER BY id",
    "SELECT id FROM d1 WHERE b IS NULL",
    "SELECT id FROM d1 WHERE s IS DISTINCT FROM 'a' ORDER BY id",
    "SELECT id FROM d1 WHERE s IS NOT DISTINCT FROM NULL",
    "SELECT NULL IS DISTINCT FROM NULL, 1 IS DISTINCT FROM NULL, 2 IS NOT DISTINCT FROM 2",
    "SELECT DISTINCT s FROM d1 ORDER BY s NULLS LAST",
    "SELECT id FROM d1 ORDER BY n DESC NULLS LAST, id",
    "SELECT id, n FROM d1 WHERE n IS NOT NULL ORDER BY n LIMIT 2 OFFSET 1",
    "SELECT upper(s), lower('ABC'), length(s), substr(s, 1, 1), s || '!' FROM d1 ORDER BY id",
    "SELECT nullif(s, 'a'), greatest(n, 0), least(n, 0) FROM d1 ORDER BY id",
    "SELECT abs(-3), ceil(1.2), floor(-1.2), power(2, 3)",
    "SELECT CAST('12' AS INT) + 1, '3'::int * 2",
    "SELECT sum(f), min(f), max(f) FROM d1",
    "SELECT count(DISTINCT s) FROM d1",
    "SELECT string_agg(s, '|'), bool_and(b), bool_or(b), every(b), avg(n), avg(id) FROM d1 WHERE id < 5",
    "SELECT s, array_agg(id), string_agg(id::text, '-') FROM d1 WHERE s IS NOT NULL GROUP BY s ORDER BY s",
    "SELECT array_agg(s), string_agg(s, ',') FROM d1 WHERE id > 100",
    "SELECT count(*) FILTER (WHERE n > 10), sum(n) FILTER (WHERE id < 3), count(*) FROM d1",
    "SELECT s, count(*) FILTER (WHERE b), avg(n) FILTER (WHERE n > 0) FROM d1 GROUP BY s ORDER BY s NULLS FIRST",
    "SELECT 12.345::numeric(5,2) AS a, 12.345::decimal(4,1) AS b, (-12.345)::numeric(5,2) AS c, 0.005::numeric(3,2) AS d",
    "SELECT 'abc'::varchar(2) AS a, s::varchar(1) AS b FROM d1 WHERE id = 1",
    "SELECT id FROM d1 ORDER BY id LIMIT NULL",
    "SELECT id FROM d1 ORDER BY id OFFSET 1 LIMIT 2",
    "SELECT id FROM d1 ORDER BY id LIMIT ALL OFFSET 3",
    "SELECT CAST(3.7 AS INT) AS a, CAST(-3.7 AS INT) AS b, CAST(2.5 AS INT) AS c, CAST(-2.5 AS INT) AS d,"
    " CAST(2.5::float8 AS INT) AS e, CAST(3.5::float8 AS INT) AS f, CAST(true AS INT) AS g",
    "SELECT CAST('yes' AS BOOL) AS a, CAST(' T ' AS BOOL) AS b, CAST('off' AS BOOL) AS c, CAST(0 AS BOOL) AS d",
    "SELECT NULL AND false, NULL OR true, NULL = NULL, 5 > NULL, coalesce(NULL, NULL, 3)",
    "SELECT id FROM d1 WHERE id NOT IN (1, NULL)",
    "SELECT count(*) FROM d1 WHERE n NOT IN (SELECT d1 FROM d2)",
    "SELECT id + 1 AS x FROM d1 ORDER BY x DESC LIMIT 2",
    "SELECT 1 AS x ORDER BY x",
    "SELECT upper(s) AS s FROM d1 ORDER BY s DESC NULLS LAST",
    "SELECT id AS a, n AS a FROM d1 ORDER BY a",
    "SELECT d1.* FROM d1 WHERE id = 1",
    "SELECT t.*, t.id * 2 AS twice FROM d1 AS t WHERE id = 2",
    "SELECT x.* FROM d1",
    r"SELECT E'a\nb', E'it\'s', E'\x41\101', E'q''q', E'back\\slash'",
    # grouping
    "SELECT s FROM d1 GROUP BY s ORDER BY count(*) DESC, s NULLS LAST",
    "SELECT s, count(*) AS c FROM d1 GROUP BY s ORDER BY sum(n) NULLS FIRST",
    "SELECT s FROM d1 GROUP BY s ORDER BY n",
    "SELECT s, count(*) FROM d1 GROUP BY s ORDER BY s NULLS FIRST",
    "SELECT s, count(*) FROM d1 GROUP BY 1 ORDER BY 1 NULLS FIRST",
    "SELECT s AS k, sum(n) FROM d1 GROUP BY k ORDER BY k NULLS LAST",
    "SELECT n > 9 AS big, count(*) FROM d1 WHERE n IS NOT NULL GROUP BY big ORDER BY big",
    "SELECT s, sum(n) FROM d1 GROUP BY s HAVING sum(n) > 5 ORDER BY s NULLS LAST",
    "SELECT s, count(*) FROM d1 WHERE n > 0 GROUP BY s ORDER BY 2 DESC, 1 NULLS LAST",
    "SELECT id, s, n FROM d1 GROUP BY id ORDER BY id",
    "SELECT s, n FROM d1 GROUP BY s",
    "SELECT s, count(*) FROM d1",
    "SELECT s, count(*) FROM d1 GROUP BY 3",
    # joins and subqueries
    "SELECT d1.id, d2.label FROM d1 JOIN d2 ON d1.id = d2.d1 ORDER BY 1, 2",
    "SELECT d1.id, d2.label FROM d1 LEFT JOIN d2 ON d1.id = d2.d1 ORDER BY 1, 2 NULLS FIRST",
    "SELECT d1.id, d2.label FROM d1 RIGHT JOIN d2 ON d1.id = d2.d1 ORDER BY 2",
    "SELECT count(*) FROM d1, d2",
    "SELECT a.*, b.label FROM d1 a JOIN d2 b ON a.id = b.d1 ORDER BY b.id",
    "SELECT b.* FROM d1 a JOIN d2 b ON a.id = b.d1 ORDER BY b.id",
    "SELECT id FROM d1 WHERE id > (SELECT avg(id) FROM d1) ORDER BY id",
    "SELECT id FROM d1 WHERE id IN (SELECT d1 FROM d2) ORDER BY id",
    "SELECT id FROM d1 WHERE id NOT IN (SELECT d1 FROM d2) ORDER BY id",
    "SELECT id FROM d1 WHERE EXISTS (SELECT 1 FROM d2 WHERE id = 4) ORDER BY id LIMIT 2",
    "SELECT x.s, x.c FROM (SELECT s, count(*) AS c FROM d1 GROUP BY s) AS x WHERE x.c > 1",
    "SELECT id FROM d1 WHERE id > ALL (SELECT d1 FROM d2 WHERE d1 < 3) ORDER BY id",
    "SELECT id FROM d1 WHERE id = ANY (SELECT d1 FROM d2) ORDER BY id",
    "SELECT id FROM d1 WHERE id <> ALL (ARRAY[1, 2]) AND n < SOME (ARRAY[25, 0]) ORDER BY id",
    "SELECT 1 = ANY (ARRAY[2, NULL]), 2 = ANY (ARRAY[2, NULL]), 1 = ALL (ARRAY[1, NULL]), 'a' = ANY ('{a,b}')",
    "WITH a AS (SELECT id, n FROM d1 WHERE n > 0), b AS (SELECT count(*) AS c, sum(n) AS t FROM a) SELECT c, t FROM b",
    "WITH d1 AS (SELECT 42 AS id) SELECT id FROM d1",
    # set operations
    "SELECT id FROM d1 UNION SELECT id FROM d2 ORDER BY 1",
    "SELECT id FROM d1 UNION ALL SELECT d1 FROM d2 ORDER BY id DESC LIMIT 4",
    "SELECT s FROM d1 INTERSECT SELECT label FROM d2",
    "SELECT id FROM d2 EXCEPT SELECT id FROM d1 ORDER BY 1",
    "SELECT d1 FROM d2 EXCEPT ALL SELECT 1",
    "SELECT d1 FROM d2 INTERSECT ALL SELECT d1 FROM d2 WHERE id < 3 ORDER BY 1",
    "SELECT 1 UNION SELECT 1 UNION ALL SELECT 1",
    "SELECT 1 UNION ALL SELECT 2 INTERSECT SELECT 2 ORDER BY 1",
    "SELECT 1 AS x, NULL::text AS y UNION SELECT 2, 'b' UNION SELECT 1, NULL ORDER BY x DESC",
    "SELECT id, s FROM d1 UNION SELECT id FROM d2",
    "SELECT 1 UNION SELECT 2 ORDER BY 3",
    "SELECT id FROM d1 ORDER BY id UNION SELECT 1",
    "WITH u AS (SELECT id FROM d1 UNION SELECT id FROM d2) SELECT count(*) FROM u",
    "SELECT count(*) FROM (SELECT id FROM d1 UNION ALL SELECT id FROM d2) AS x",
    "WITH a AS (SELECT 1 AS v) SELECT v FROM a UNION SELECT 2 ORDER BY 1",
    # BETWEEN SYMMETRIC, regular expressions, SQL's substring and trim forms, DISTINCT ON
    "SELECT 5 BETWEEN SYMMETRIC 10 AND 1, 5 NOT BETWEEN SYMMETRIC 10 AND 1, 1 BETWEEN NULL AND 0,"
    " 1 BETWEEN 0 AND NULL, NULL BETWEEN 1 AND 2, 5 BETWEEN SYMMETRIC NULL AND 1, 5 BETWEEN ASYMMETRIC 10 AND 1",
    "SELECT id, s ~ '^a', s ~* 'B', s !~ 'a|c', s !~* '^[ab]$' FROM d1 ORDER BY id",
    "SELECT substring(s FROM 1 FOR 1), substring('hello' FROM 3), substring('hello' FOR 2),"
    " substring('hello' FROM 0 FOR 3), trim(BOTH 'x' FROM 'xxhixx'), trim(LEADING FROM '  a  '),"
    " trim(TRAILING 'y' FROM 'ayy'), trim('x' FROM 'xax'), trim(BOTH '  b  ') FROM d1 WHERE id = 1",
    "SELECT DISTINCT ON (s) s, id FROM d1 ORDER BY s NULLS FIRST, id DESC",
    "SELECT DISTINCT ON (b) id, b FROM d1 ORDER BY b NULLS LAST, n DESC NULLS LAST",
    "SELECT DISTINCT ON (s) id FROM d1 ORDER BY id",
    "SELECT 'a' ~ '('",
    "SELECT 1 ~ 'a'",
    # JSONB operators
    "SELECT id, doc -> 'a', doc ->> 'c', doc -> 'a' -> 2 ->> 'b', doc -> 1, doc ->> -1, doc -> 'zz' FROM d3 ORDER BY id",
    "SELECT id, doc #> '{a,2}', doc #>> '{a,0}', doc #> ARRAY['c'], doc #>> '{}', doc #> '{2,0}' FROM d3 ORDER BY id",
    """SELECT id, doc @> '{"c": "x"}', doc @> '{"a": [2]}', doc @> '[1]', doc @> '1', '{"n": 5}' <@ doc"""
    " FROM d3 ORDER BY id",
    "SELECT id FROM d3 WHERE doc ->> 'c' = 'x' OR doc -> 0 = '1'::jsonb ORDER BY id",
    "SELECT '{\"a\": 1}'::jsonb -> 'a' = '1', 'abc' ~ 'b' = true, 'a' || 'b' ~ 'ab'",
    # window functions
    "SELECT id, row_number() OVER (ORDER BY id DESC), rank() OVER (ORDER BY s NULLS FIRST),"
    " dense_rank() OVER (ORDER BY s NULLS LAST) FROM d1 ORDER BY id",
    "SELECT id, s, row_number() OVER (PARTITION BY s ORDER BY id) AS rn FROM d1 ORDER BY id",
    "SELECT id, sum(n) OVER (ORDER BY id), count(n) OVER (ORDER BY id), count(*) OVER (),"
    " min(n) OVER (PARTITION BY s), max(f) OVER (PARTITION BY s ORDER BY id) FROM d1 ORDER BY id",
    "SELECT id, avg(n) OVER (ORDER BY id ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) FROM d1 ORDER BY id",
    "SELECT id, lag(n) OVER (ORDER BY id), lead(n, 2) OVER (ORDER BY id), lag(s, 1, 'none') OVER (ORDER BY id),"
    " lead(id, -1) OVER (ORDER BY id) FROM d1 ORDER BY id",
    "SELECT id, first_value(s) OVER (ORDER BY id), last_value(s) OVER (ORDER BY id),"
    " last_value(id) OVER (ORDER BY id ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING),"
    " nth_value(id, 2) OVER (ORDER BY id) FROM d1 ORDER BY id",
    "SELECT id, ntile(2) OVER (ORDER BY id), ntile(3) OVER (ORDER BY id DESC),"
    " percent_rank() OVER (ORDER BY b NULLS FIRST), cume_dist() OVER (ORDER BY b NULLS FIRST) FROM d1 ORDER BY id",
    "SELECT id, sum(n) OVER (ORDER BY id ROWS BETWEEN 1 FOLLOWING AND 2 FOLLOWING),"
    " sum(id) OVER (ORDER BY s NULLS FIRST GROUPS BETWEEN 1 PRECEDING AND CURRENT ROW),"
    " count(*) OVER (ORDER BY s NULLS FIRST RANGE BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) FROM d1 ORDER BY id",
    "SELECT id, sum(n) FILTER (WHERE n > 0) OVER (ORDER BY id), string_agg(s, ',') OVER (ORDER BY id),"
    " array_agg(id) OVER (PARTITION BY s ORDER BY id), count(*) FILTER (WHERE b) OVER () FROM d1 ORDER BY id",
    "SELECT id, row_number() OVER (ORDER BY n DESC NULLS LAST) AS r FROM d1 ORDER BY r",
    "SELECT id FROM d1 ORDER BY rank() OVER (ORDER BY f NULLS FIRST), id LIMIT 3",
    "SELECT id, row_number() OVER () > 0, sum(n) OVER () * 2 FROM d1 ORDER BY id",
    "SELECT DISTINCT s, count(*) OVER (PARTITION BY s) FROM d1 ORDER BY s NULLS FIRST",
    "SELECT id, sum(n) OVER (PARTITION BY b ORDER BY id ROWS UNBOUNDED PRECEDING) FROM d1 WHERE id > 1 ORDER BY id",
    "SELECT id, sum(id) OVER (ORDER BY id ROWS BETWEEN 2 PRECEDING AND 1 PRECEDING),"
    " max(id) OVER (ORDER BY id GROUPS BETWEEN 1 FOLLOWING AND 3 FOLLOWING) FROM d1 ORDER BY id",
    "SELECT s, count(*) AS c, rank() OVER (ORDER BY count(*) DESC, s NULLS FIRST) AS r, sum(sum(n)) OVER () AS total,"
    " sum(count(*)) OVER (ORDER BY s NULLS FIRST) FROM d1 GROUP BY s ORDER BY r",
    "SELECT count(*), row_number() OVER () FROM d1",
    "SELECT b, max(n), lag(max(n)) OVER (ORDER BY b NULLS FIRST) FROM d1 GROUP BY b HAVING count(*) > 1 ORDER BY b",
    "SELECT s, sum(n) OVER () FROM d1 GROUP BY s",
    "SELECT DISTINCT d1 FROM d2 GROUP BY d1, id ORDER BY d1",
    "SELECT id FROM d1 WHERE row_number() OVER () > 1",
    "SELECT row_number() FROM d1",
    "SELECT lower(s) OVER () FROM d1",
    "SELECT ntile(0) OVER () FROM d1",
    "SELECT nth_value(id, 0) OVER () FROM d1",
    "SELECT sum(id) OVER (ROWS -1 PRECEDING) FROM d1",
    "SELECT sum(id) OVER (ROWS BETWEEN CURRENT ROW AND 1 PRECEDING) FROM d1",
    "SELECT sum(id) OVER (ROWS UNBOUNDED FOLLOWING) FROM d1",
    "SELECT count(DISTINCT id) OVER () FROM d1",
    "SELECT row_number() OVER (ORDER BY row_number() OVER ()) FROM d1",
    # errors
    "SELECT 10 / 0",
    "SELECT 10 % 0",
    "SELECT 'abc'::int",
    "SELECT CAST('o' AS BOOL)",
    "SELECT CAST('nan'::float8 AS INT)",
    "SELECT 9223372036854775807 + 1",
    "SELECT -9223372036854775807 - 2",
    "SELECT 4611686018427387904 * 2",
    "INSERT INTO d1 (id, s) VALUES (NULL, 'x')",
    "SELECT * FROM nosuch",
    "SELECT nosuch FROM d1",
    "INSERT INTO d1 VALUES (1, 'dup', 0, 0, true)",
    "INSERT INTO d1 (id, s) VALUES (16, 'a', 1)",
    "INSERT INTO d1 (id, s, n) VALUES (17, 'a')",
    "INSERT INTO d1 (id, id) VALUES (18, 19)",
    "INSERT INTO d1 (id, s) VALUES (16, 'a'), (17)",
    "INSERT INTO d1 VALUES (15), (16)",
    "INSERT INTO d1 VALUES (17, 'short') RETURNING *",
    "DELETE FROM d1 WHERE id IN (15, 16, 17)",
    # writes, and what they return
    "INSERT INTO d1 VALUES (6, 'd', 1, 1.0, true) RETURNING id, (SELECT count(*) FROM d1) AS before",
    "UPDATE d1 SET n = n + 1 WHERE id = 6 RETURNING n, (SELECT n FROM d1 WHERE id = 6) AS before",
    "DELETE FROM d1 WHERE id = 6 RETURNING id, (SELECT count(*) FROM d1) AS before",
    "INSERT INTO d1 (id, s) SELECT id + 100, label FROM d2 WHERE id < 3 RETURNING id, s, n",
    "INSERT INTO d1 (id, s) SELECT id + 100, label FROM d2 ON CONFLICT DO NOTHING RETURNING id",
    "INSERT INTO d1 (id, s) SELECT id + 100, label FROM d2 WHERE id > 9 RETURNING id",
    "INSERT INTO d1 (id) SELECT id + 100 FROM d2",
    "UPDATE d1 SET n = -n WHERE id > 100 AND id < 103",
    "SELECT id, s, n FROM d1 WHERE id > 100 ORDER BY id",
    "DELETE FROM d1 WHERE id > 100",
    "SELECT count(*) FROM d1",
    # ON CONFLICT (key) DO UPDATE
    "INSERT INTO d1 (id, s) VALUES (1, 'new'), (30, 'c') ON CONFLICT (id) DO UPDATE"
    " SET s = excluded.s, n = d1.n + 1 RETURNING id, s, n",
    "INSERT INTO d1 (id, s) VALUES (2, 'x') ON CONFLICT (id) DO UPDATE SET s = excluded.s WHERE d1.n > 100 RETURNING id",
    "INSERT INTO d1 (id, s) VALUES (2, 'x') ON CONFLICT (id) DO UPDATE SET s = s || excluded.s, n = excluded.n",
    "INSERT INTO d1 (id, s) VALUES (2, 'p'), (2, 'q') ON CONFLICT (id) DO UPDATE SET s = excluded.s",
    "INSERT INTO d1 (id, s) VALUES (2, 'p') ON CONFLICT (s) DO UPDATE SET s = excluded.s",
    "INSERT INTO d1 (id, s) VALUES (2, 'p') ON CONFLICT DO UPDATE SET s = excluded.s",
    "SELECT id, s, n FROM d1 WHERE id IN (1, 2, 30) ORDER BY id",
    # WITH RECURSIVE, WITH column lists, WITH queries joined
    "WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t WHERE n < 10) SELECT sum(n), count(*) FROM t",
    "WITH RECURSIVE tree AS (SELECT id, name, 0 AS depth FROM d4 WHERE parent IS NULL UNION ALL"
    " SELECT d4.id, d4.name, tree.depth + 1 FROM d4 JOIN tree ON d4.parent = tree.id) SELECT * FROM tree ORDER BY depth, id",
    "WITH RECURSIVE up(id, parent) AS (SELECT id, parent FROM d4 WHERE id = 5 UNION"
    " SELECT d4.id, d4.parent FROM up JOIN d4 ON d4.id = up.parent) SELECT id FROM up ORDER BY id",
    "WITH RECURSIVE c AS (SELECT 1 AS n UNION SELECT (n % 3) + 1 FROM c) SELECT n FROM c ORDER BY n",
    "WITH RECURSIVE l AS (SELECT id, parent FROM d4 WHERE id = 6 UNION SELECT d4.id, d4.parent FROM d4, l WHERE d4.parent = l.id)"
    " SELECT count(*) FROM l",
    "WITH x (a, b) AS (SELECT id, name FROM d4 WHERE id < 3) SELECT a, b, d4.parent FROM x JOIN d4 ON d4.id = x.a ORDER BY a",
    "WITH x (a) AS (SELECT id, name FROM d4 WHERE id = 1) SELECT * FROM x",
    "WITH RECURSIVE a AS (SELECT 1 AS v) SELECT v FROM a",
    "WITH x (a, b, c) AS (SELECT id FROM d4) SELECT * FROM x",
    "WITH RECURSIVE t(n) AS (SELECT n + 1 FROM t UNION ALL SELECT 1) SELECT * FROM t",
    "WITH RECURSIVE t(n) AS (SELECT 1 INTERSECT SELECT n FROM t) SELECT * FROM t",
    "SELECT x.id, d4.name FROM (SELECT id, parent FROM d4 WHERE id > 2) AS x JOIN d4 ON d4.id = x.parent ORDER BY x.id",
    "SELECT d4.id, c.n FROM d4 LEFT JOIN (SELECT parent, count(*) AS n FROM d4 GROUP BY parent) AS c"
    " ON c.parent = d4.id ORDER BY d4.id",
    "SELECT * FROM d4, (SELECT 1 AS one) AS o WHERE d4.id = 1",
    "SELECT id FROM d1 WHERE id IN (SELECT 1 UNION SELECT 3) ORDER BY id",
    "SELECT id, (SELECT max(x) FROM d2 WHERE d2.d1 = d1.id) FROM d1",
    "SELECT (SELECT 1 UNION ALL SELECT 2 ORDER BY 1 DESC LIMIT 1), EXISTS (SELECT 1 EXCEPT SELECT 1)",
    "SELECT id FROM d1 WHERE id = ANY (SELECT d1 FROM d2 WHERE d2.id < d1.id UNION SELECT 5) ORDER BY id",
    # more functions
    "SELECT regexp_replace('foobarbaz', 'b(..)', 'X\\1Y'), regexp_replace('aaa', 'a', 'b', 'g'),"
    " regexp_replace('ABC', 'b', '[\\&]', 'i'), regexp_replace(s, '[aeiou]', '', 'g') FROM d1 WHERE id = 1",
    "SELECT string_to_array('a,b,,c', ','), string_to_array('abc', NULL), string_to_array('a-x-b', '-', 'x'),"
    " string_to_array('', ',')",
    "SELECT array_to_string(ARRAY['a', NULL, 'c'], ','), array_to_string(ARRAY['a', NULL, 'c'], ',', '*'),"
    " array_to_string(ARRAY[1, 2], '-')",
    "SELECT array_position(ARRAY[5, 6, 7], 6), array_position(ARRAY['a', NULL], NULL), array_position(ARRAY[1], 9),"
    " cardinality(ARRAY[1, 2, 3]), cardinality(ARRAY[]::int[])",
    "SELECT translate('12345', '143', 'ax'), quote_ident('abc'), quote_ident('a b'), quote_ident('Abc')",
    "SELECT format('%s and %s', 'one', 2), format('%I.%L', 'my table', 'it''s'), format('%2$s %1$s', 'a', 'b'),"
    " format('%s|%L', NULL, NULL), format('100%%')",
    "SELECT jsonb_build_object('a', 1, 'b', 'two', 'c', NULL, 'd', true), to_jsonb('x'::text), to_jsonb(5),"
    " jsonb_build_array(1, 'a', NULL)",
    "SELECT id, jsonb_typeof(doc), doc ->> 'n' FROM d3 ORDER BY id",
    "SELECT jsonb_array_length(doc) FROM d3 WHERE id = 2",
    # JSONB numbers are exact decimals: every digit kept, exponents read into the digits
    "SELECT doc ->> 'x', doc ->> 'big', doc ->> 'e', doc ->> 'z', doc ->> 't', doc ->> 'tiny' FROM dj",
    "SELECT jsonb_typeof(doc -> 'big'), (doc -> 'x')::text, doc -> 'big' = '123456789012345678901234567890'::jsonb FROM dj",
    "SELECT to_jsonb(0.1234567890123456789::decimal) #>> '{}', jsonb_build_array(1.50, 2) ->> 0",
    "SELECT s, jsonb_agg(id), json_agg(n) FROM d1 WHERE s IS NOT NULL GROUP BY s ORDER BY s",
    "SELECT jsonb_object_agg(id, s), jsonb_agg(id) FILTER (WHERE id > 100) FROM d1 WHERE id < 4",
    "SELECT id, jsonb_agg(id) OVER (ORDER BY id) FROM d1 ORDER BY id",
    "SELECT jsonb_array_length(doc) FROM d3 WHERE id = 1",
    "SELECT format('%s %s', 'only one')",
    "SELECT to_char('2024-03-05 14:07:09.123456'::timestamp, 'YYYY-MM-DD HH24:MI:SS') AS a,"
    " to_char('2024-03-05 14:07:09.123456'::timestamp, 'FMMonth DD, YYYY') AS b,"
    " to_char('2024-03-05 14:07:09.123456'::timestamp, 'Dy Mon DD HH12:MI AM') AS c,"
    " to_char('2024-03-05 14:07:09.123456'::timestamp, '\"Quarter\" Q, DDD, IW, J') AS d,"
    " to_char('2024-03-05 14:07:09.123456'::timestamp, 'HH:MI:SS.MS US pm FMDD/FMMM') AS e,"
    " to_char('2024-03-05 00:07:09'::timestamp, 'Day|MONTH|month|a.m.|HH12') AS f,"
    " to_char('2024-12-31'::date, 'YYYY DDD D ID WW YY') AS g",
    "SELECT regexp_replace('a', 'a', 'b', 'z')",
    "SELECT jsonb_build_object('a')",
    # set-returning functions in FROM
    "SELECT * FROM generate_series(1, 5)",
    "SELECT i * 2 AS d FROM generate_series(10, 1, -3) AS i",
    "SELECT sum(g), count(*) FROM generate_series(1, 1000) AS g",
    "SELECT * FROM unnest(ARRAY['a', 'b', NULL]) AS x",
    "SELECT * FROM generate_series('2024-01-01'::timestamp, '2024-01-02'::timestamp, '6 hours'::interval) AS t",
    "SELECT d4.id, s FROM generate_series(1, 4) AS s JOIN d4 ON d4.id = s ORDER BY s",
    "SELECT count(*), sum(x) FROM generate_series(0.5, 2.5, 0.5) AS x",
    "SELECT * FROM generate_series(1, NULL)",
    "SELECT * FROM generate_series(1, 5, 0)",
    "SELECT generate_series(1, 3)",
    "SELECT id, unnest(ARRAY[id, id * 10]) AS u FROM d1 ORDER BY u DESC LIMIT 3",
    "SELECT generate_series(1, 3) AS a, generate_series(1, 2) AS b",
    "SELECT generate_series(1, 0)",
    "SELECT generate_series(1, 2) * 10 + id FROM d1 WHERE id < 3 ORDER BY 1",
    "SELECT id FROM d1 WHERE generate_series(1, 2) > 1",
    # FULL joins
    "SELECT d1.id, d2.id FROM d1 FULL JOIN d2 ON d1.id = d2.d1 ORDER BY d1.id NULLS LAST, d2.id NULLS LAST",
    "SELECT count(*) FROM d1 FULL OUTER JOIN d2 ON d1.id = d2.d1 AND d2.label > 'x' WHERE d1.id IS NULL OR d2.id IS NULL",
    # correlated subqueries
    "SELECT id, (SELECT count(*) FROM d2 WHERE d2.d1 = d1.id) AS c, EXISTS (SELECT 1 FROM d2 WHERE d1 = d1.id) AS e"
    " FROM d1 ORDER BY id",
    "SELECT id FROM d1 WHERE n > (SELECT avg(n) FROM d1 AS x WHERE x.s = d1.s) ORDER BY id",
    "SELECT id FROM d1 WHERE id IN (SELECT d1 FROM d2 WHERE d2.id > d1.id) ORDER BY id",
    "SELECT id, (SELECT label FROM d2 WHERE d2.d1 = d1.id ORDER BY d2.id DESC LIMIT 1) FROM d1 ORDER BY id",
    "SELECT s, (SELECT max(id) FROM d2 WHERE d2.d1 IN (SELECT id FROM d1 AS y WHERE y.s = d1.s)) AS m"
    " FROM d1 WHERE s IS NOT NULL GROUP BY s ORDER BY s",
    "SELECT id FROM d1 WHERE n = ANY (SELECT n FROM d1 AS z WHERE z.id < d1.id) OR NOT EXISTS"
    " (SELECT 1 FROM d1 AS z WHERE z.id < d1.id) ORDER BY id",
    "SELECT id, EXISTS (SELECT 1 FROM d2 WHERE d2.d1 = d1.id AND d2.label = d1.s) FROM d1 ORDER BY id",
    "SELECT (SELECT id FROM d2 WHERE d2.d1 = d1.id) FROM d1",
    "SELECT id FROM d1 WHERE (SELECT nosuch FROM d2 WHERE d2.d1 = d1.id) > 0",
    "UPDATE d1 SET n = (SELECT count(*) FROM d2 WHERE d2.d1 = d1.id) WHERE id < 4 RETURNING id, n",
    "DELETE FROM d2 WHERE NOT EXISTS (SELECT 1 FROM d1 WHERE d1.id = d2.d1) RETURNING id",
    "SELECT id, d1, label FROM d2 ORDER BY id",
    "INSERT INTO d2 SELECT i + 100, i, 'gen' FROM generate_series(1, 3) AS i",
    "SELECT id, d1, label FROM d2 WHERE id > 100 ORDER BY id",
    # UPDATE of the primary key
    "UPDATE d4 SET id = id + 100 WHERE id > 4 RETURNING id, parent, name",
    "UPDATE d4 SET id = 1 WHERE id = 2",
    "UPDATE d4 SET id = NULL WHERE id = 2",
    "SELECT * FROM d4 ORDER BY id",
    # a NULL against the empty rows of a subquery: not unknown (no row to compare with)
    "SELECT id FROM d1 WHERE n NOT IN (SELECT n FROM d1 WHERE id > 10) ORDER BY id",
    "SELECT id FROM d1 WHERE n IN (SELECT n FROM d1 WHERE id > 10) ORDER BY id",
    "SELECT NULL::int IN (SELECT 1 WHERE false), NULL::int NOT IN (SELECT 1 WHERE false)",
    # arithmetic past its type's range, and undefined powers: an error, never a dropped connection
    "SELECT power(0, -1)",
    "SELECT power(0::float8, -1::float8)",
    "SELECT power(-8, 1.0/3)",
    "SELECT -(-9223372036854775807 - 1)",
    "SELECT abs(-9223372036854775807 - 1)",
    "SELECT -9223372036854775808",
    "CREATE TABLE d5 (id INT PRIMARY KEY, b BIGINT, ta TEXT[])",
    'INSERT INTO d5 VALUES (1, 9223372036854775807, \'{"y,z", b, NULL, "NULL", " sp "}\'), (2, 10, \'{}\')',
    "SELECT sum(b) FROM d5",
    "SELECT id, array_length(ta, 1), array_to_string(ta, '|', '*') FROM d5 ORDER BY id",
    "SELECT id FROM d5 WHERE 'y,z' = ANY(ta)",
    "INSERT INTO d5 VALUES (3, 0, '{a,b')",
    "INSERT INTO d5 (id, b) VALUES (20, 1), (20, 2) ON CONFLICT (id) DO UPDATE SET b = EXCLUDED.b",
    "SELECT count(*) FROM d5 WHERE id = 20",
    # float8 with numeric is float8; a cast keeps its operand's name; values' text as PostgreSQL's
    "SELECT ('0.1'::text)::float8 + 0.2 AS a, 2.5 * f AS b FROM d1 WHERE id = 1",
    "SELECT id::text, s::varchar(3), n::float8 FROM d1 ORDER BY id",
    "SELECT 1.0::float8::text AS a, f::text AS b FROM d1 WHERE id = 5",
    "SELECT '1 day 2 hours'::interval::text AS a, '-30 days'::interval::text AS b",
    "SELECT '2024-01-01 12:34:56.789'::timestamp::text AS a, '2024-01-01 12:34:56'::timestamp::text AS b",
    # IS [NOT] TRUE/FALSE/UNKNOWN, FETCH FIRST, negative LIMIT/OFFSET, INSERT .. SELECT .. UNION
    "SELECT id FROM d1 WHERE b IS TRUE ORDER BY id",
    "SELECT id, b IS NOT FALSE AS a, b IS UNKNOWN AS u, b IS NOT TRUE AS nt FROM d1 ORDER BY id",
    "SELECT id FROM d1 ORDER BY id FETCH FIRST 2 ROWS ONLY",
    "SELECT id FROM d1 ORDER BY id OFFSET 1 ROWS FETCH NEXT ROW ONLY",
    "SELECT id FROM d1 LIMIT -1",
    "SELECT id FROM d1 OFFSET -1",
    "INSERT INTO d5 (id, b) SELECT 30, 1 UNION SELECT 31, 2",
    "INSERT INTO d5 (id, b) (SELECT 32, 3)",
    "SELECT id, b FROM d5 WHERE id >= 30 ORDER BY id",
    "SELECT 1 || 2",
    "SELECT 1 UNION SELECT 'a'",
    "SELECT 1 AS x UNION SELECT '1' ORDER BY 1",
    "SELECT n FROM d1 WHERE id = 1 UNION ALL SELECT '7' ORDER BY 1",
    "SELECT 'a' || 1 AS a, n || 'x' AS b, ARRAY[1, 2] || ARRAY[3] AS c, ARRAY[1] || 2 AS d FROM d1 WHERE id = 1",
    # transaction modes: every isolation level accepted; READ ONLY refuses writes (25006)
    "BEGIN ISOLATION LEVEL SERIALIZABLE",
    "COMMIT",
    "BEGIN TRANSACTION ISOLATION LEVEL READ COMMITTED, READ WRITE",
    "INSERT INTO d5 (id, b) VALUES (33, 4)",
    "COMMIT",
    "START TRANSACTION READ ONLY",
    "SELECT count(*) FROM d5 WHERE id >= 30",
    "INSERT INTO d5 (id, b) VALUES (34, 5)",
    "ROLLBACK",
    "SELECT count(*) FROM d5 WHERE id >= 30",
    # the session's default access mode (JDBC's setReadOnly), autocommit writes included
    "SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY",
    "SHOW default_transaction_read_only",
    "INSERT INTO d5 (id, b) VALUES (35, 6)",
    "BEGIN",
    "INSERT INTO d5 (id, b) VALUES (36, 6)",
    "ROLLBACK",
    "BEGIN READ WRITE",
    "INSERT INTO d5 (id, b) VALUES (37, 6)",
    "COMMIT",
    "BEGIN",
    "SET TRANSACTION READ WRITE",
    "INSERT INTO d5 (id, b) VALUES (38, 6)",
    "SET TRANSACTION READ ONLY",
    "COMMIT",
    "SET default_transaction_read_only = maybe",
    "SET default_transaction_read_only = off",
    "BEGIN",
    "SET TRANSACTION READ ONLY",
    "DELETE FROM d5 WHERE id = 37",
    "ROLLBACK",
    "SELECT id FROM d5 WHERE id >= 35 ORDER BY id",
    # LIKE patterns ending in their escape character; dates and times with a field out of range
    "SELECT 'abc' LIKE 'ab\\'",
    "SELECT 'abc' LIKE 'ab#' ESCAPE '#'",
    "SELECT 'ab#' LIKE 'ab##' ESCAPE '#', 'a_c' LIKE 'a#_c' ESCAPE '#'",
    "SELECT '2024-02-30'::date",
    "SELECT '2024-13-01'::date",
    "SELECT '25:00:00'::time",
    "SELECT '2024-01-01 25:00:00'::timestamp",
    "SELECT 'x2024-01-01'::date",
    "SELECT '1e400'::float8",
    "SELECT '-1e400'::float8",
    "SELECT 'Infinity'::float8 AS a, '-inf'::float8 AS b",
    # DEFAULT in VALUES and DEFAULT VALUES (what ORMs send for columns left to their defaults)
    "CREATE TABLE dd (id INT PRIMARY KEY DEFAULT 100, a TEXT DEFAULT 'x', b INT DEFAULT 7, c INT)",
    "INSERT INTO dd VALUES (1, DEFAULT, DEFAULT, DEFAULT)",
    "INSERT INTO dd (id, b) VALUES (2, DEFAULT), (3, 5)",
    "INSERT INTO dd (id, a, c) VALUES (4, 'q', DEFAULT) RETURNING *",
    "INSERT INTO dd DEFAULT VALUES",
    "INSERT INTO dd DEFAULT VALUES",
    "INSERT INTO dd (id, b) VALUES (2, DEFAULT) ON CONFLICT (id) DO UPDATE SET b = excluded.b + 1",
    "SELECT * FROM dd ORDER BY id",
    # array subscripts and slices (1-based, NULL or clipped outside the array)
    "CREATE TABLE arr (id INT PRIMARY KEY, ta TEXT[], ia INT[])",
    "INSERT INTO arr VALUES (1, ARRAY['a','b','c'], ARRAY[10,20,30]), (2, NULL, ARRAY[]::int[]), (3, ARRAY['x', NULL], ARRAY[5])",
    "SELECT id, ta[1], ia[2], ta[0], ia[4], ia[-1] FROM arr ORDER BY id",
    "SELECT id, ia[2:3], ia[:2], ia[2:], ia[3:2], ta[0:1] FROM arr ORDER BY id",
    "SELECT (ARRAY[1,2,3])[2], (ARRAY['a','b'])[NULL], ('{7,8}'::int[])[1] AS c",
    "SELECT id FROM arr WHERE ia[1] = 10",
    "SELECT ia[1] + 1 AS x, ta[1] || '!' AS y FROM arr WHERE id = 1",
    "SELECT id, ia[1] FROM arr WHERE id = 1",
    "SELECT ta['a'] FROM arr",
    "SELECT id[1] FROM arr",
    "UPDATE arr SET ia = ARRAY[ia[1] * 2] WHERE id = 1 RETURNING ia",
    # JOIN .. USING and NATURAL JOIN: one column per USING name, first in SELECT *
    "CREATE TABLE ja (id INT PRIMARY KEY, x INT, y TEXT, a TEXT)",
    "CREATE TABLE jb (id INT PRIMARY KEY, x INT, y TEXT, b TEXT)",
    "CREATE TABLE jc (z INT PRIMARY KEY, x INT, c TEXT)",
    "INSERT INTO ja VALUES (1, 10, 'p', 'a1'), (2, 20, 'q', 'a2'), (3, NULL, 'r', 'a3'), (4, 40, 's', 'a4')",
    "INSERT INTO jb VALUES (1, 10, 'p', 'b1'), (2, 20, 'x', 'b2'), (5, 50, 't', 'b5'), (6, NULL, 'r', 'b6')",
    "INSERT INTO jc VALUES (1, 10, 'c1'), (2, 50, 'c2')",
    "SELECT * FROM ja JOIN jb USING (id) ORDER BY id",
    "SELECT * FROM ja JOIN jb USING (x, y) ORDER BY x",
    "SELECT * FROM ja LEFT JOIN jb USING (id) ORDER BY id",
    "SELECT * FROM ja RIGHT JOIN jb USING (id) ORDER BY id",
    "SELECT * FROM ja FULL JOIN jb USING (id) ORDER BY id",
    "SELECT id, ja.x, jb.x, a, b FROM ja FULL JOIN jb USING (id) ORDER BY id",
    "SELECT * FROM ja NATURAL JOIN jb",
    "SELECT * FROM ja NATURAL LEFT JOIN jc ORDER BY id",
    "SELECT * FROM ja JOIN jb USING (id) JOIN jc USING (x) ORDER BY id",
    "SELECT x, id FROM ja JOIN jb USING (id) JOIN jc ON jc.x = ja.x ORDER BY id",
    "SELECT ja.*, b FROM ja JOIN jb USING (id) ORDER BY id",
    "SELECT count(*) FROM ja AS l JOIN jb AS r USING (id) WHERE l.a = 'a1' AND r.b = 'b1'",
    "SELECT * FROM ja JOIN jb USING (nope)",
    "SELECT * FROM ja JOIN jb USING (a)",
    "SELECT * FROM ja JOIN jb USING (id) JOIN jc USING (x) JOIN jb AS j2 USING (id) ORDER BY id",
    "SELECT * FROM ja NATURAL JOIN (SELECT 1 AS id, 'extra' AS e) s",
    "SELECT id FROM ja JOIN jb USING (id) WHERE id > 1",
    # UPDATE .. FROM and DELETE .. USING (the target joined to other tables by the WHERE)
    "CREATE TABLE ut (id INT PRIMARY KEY, v TEXT, n INT)",
    "CREATE TABLE us (sid INT PRIMARY KEY, v TEXT, k INT)",
    "CREATE TABLE uu (k INT PRIMARY KEY, w TEXT)",
    "INSERT INTO ut VALUES (1, 'a', 1), (2, 'b', 2), (3, 'c', 3), (4, 'd', 4)",
    "INSERT INTO us VALUES (1, 'A', 10), (3, 'C', 30), (9, 'Z', 90)",
    "INSERT INTO uu VALUES (10, 'ten'), (30, 'thirty')",
    "UPDATE ut SET v = us.v, n = n + us.k FROM us WHERE ut.id = us.sid",
    "SELECT * FROM ut ORDER BY id",
    "UPDATE ut AS t SET v = t.v || '-' || uu.w FROM us JOIN uu ON uu.k = us.k WHERE t.id = us.sid RETURNING id, v",
    "SELECT * FROM ut ORDER BY id",
    "UPDATE ut SET v = s.v FROM (SELECT 2 AS id, 'sub' AS v) s WHERE ut.id = s.id",
    "SELECT * FROM ut ORDER BY id",
    "UPDATE ut SET v = 'x' FROM us WHERE us.sid = 100",
    "UPDATE ut SET v = v FROM us WHERE ut.id = us.sid",
    "UPDATE ut SET n = 0 FROM us WHERE ut.id = sid AND us.v = 'C'",
    "SELECT * FROM ut ORDER BY id",
    "DELETE FROM ut USING us WHERE ut.id = us.sid AND us.k > 20 RETURNING *",
    "SELECT * FROM ut ORDER BY id",
    "DELETE FROM ut AS t USING us, uu WHERE t.id = us.sid AND us.k = uu.k",
    "SELECT * FROM ut ORDER BY id",
    "UPDATE ut AS t SET v = 'al' WHERE t.id = 2",
    "UPDATE ut SET v = 'tn' WHERE ut.id = 4",
    "DELETE FROM ut AS t WHERE t.id = 4",
    "SELECT * FROM ut ORDER BY id",
    "UPDATE ut SET v = 'q' FROM ut WHERE ut.id = 1",
    "UPDATE ut SET v = nope.v FROM us WHERE ut.id = us.sid",
    # SELECT DISTINCT orders by what it selects (42P10); a scalar subquery has one column (42601)
    "SELECT DISTINCT n FROM d1 ORDER BY id",
    "SELECT DISTINCT n FROM d1 ORDER BY n NULLS FIRST",
    "SELECT DISTINCT n AS m FROM d1 ORDER BY m NULLS FIRST",
    "SELECT DISTINCT d1.n FROM d1 ORDER BY n NULLS FIRST",
    "SELECT DISTINCT n FROM d1 ORDER BY d1.n NULLS FIRST",
    "SELECT DISTINCT n + 1 FROM d1 ORDER BY n + 1 NULLS FIRST",
    "SELECT DISTINCT n + 1 FROM d1 ORDER BY n",
    "SELECT DISTINCT s, n FROM d1 ORDER BY 2 NULLS FIRST, 1 NULLS FIRST",
    "SELECT DISTINCT * FROM d2 ORDER BY label",
    "SELECT (SELECT 1, 2)",
    "SELECT id FROM d1 WHERE id = (SELECT id, n FROM d1 LIMIT 1)",
    # gcd, lcm, log(b, x)
    "SELECT gcd(12, 18), lcm(4, 6), gcd(-12, 18), lcm(-4, 6), gcd(0, 0), lcm(0, 5), gcd(7, NULL)",
    "SELECT log(2, 8), log(10, 1000), log(2.0, 10), log(100)",
    "SELECT log(1, 8)",
    "SELECT log(0, 8)",
    "SELECT log(2, -1)",
    "SELECT lcm(9223372036854775807, 2)",
    # VALUES as a query, alone and in FROM with column names
    "VALUES (1, 'a'), (2, 'b')",
    "SELECT * FROM (VALUES (1, 'a'), (2, 'b')) AS v(x, y) ORDER BY x DESC",
    "SELECT x * 10 AS t FROM (VALUES (1), (2), (3)) v(x) WHERE x > 1 ORDER BY t",
    "SELECT * FROM (VALUES (1, 'a'), (2, 'b')) AS v ORDER BY column1",
    "SELECT v.y, d2.label FROM (VALUES (1, 'one'), (3, 'three')) AS v(x, y) JOIN d2 ON d2.id = v.x ORDER BY 1",
    "SELECT * FROM (VALUES (1, 'a'), (2)) v",
    "SELECT * FROM (VALUES (1)) AS v(a, b)",
    "SELECT count(*), sum(x) FROM (VALUES (1), (NULL), (3)) v(x)",
    "SELECT * FROM (VALUES (1, 2)) AS v(a)",
    "VALUES ((SELECT max(id) FROM d1)), (7)",
    "SELECT * FROM d1 WHERE id IN (SELECT x FROM (VALUES (1), (5)) v(x)) ORDER BY id",
    # names are bound before any row is read: on an empty table and behind false AND too
    "CREATE TABLE emp (id INT PRIMARY KEY, v TEXT)",
    "SELECT nosuch FROM emp",
    "SELECT id FROM emp WHERE nosuch = 1",
    "SELECT id FROM d1 WHERE false AND nosuch = 1",
    "SELECT nosuch FROM d1 WHERE false",
    "SELECT id FROM d1 ORDER BY nosuch",
    "SELECT id FROM d1 WHERE id = 1 AND d2.x = 1",
    "SELECT upper(nosuch) FROM emp",
    "SELECT id FROM emp GROUP BY nosuch",
    "UPDATE emp SET v = nosuch WHERE id = 1",
    "UPDATE emp SET nosuch = 1 WHERE id = 1",
    "DELETE FROM emp WHERE nosuch = 1",
    "SELECT count(nosuch) FROM emp",
    "SELECT CASE WHEN false THEN nosuch ELSE 1 END FROM d1",
    "UPDATE emp AS e SET v = 'x' WHERE zz.id = 1",
    "DELETE FROM emp WHERE emp.id = 1 OR false AND emp.nosuch = 2",
    "SELECT id FROM d1 JOIN d2 ON d2.d1 = d1.id WHERE false AND id = 1",
    # jsonb || and -, jsonb_set, jsonb_pretty, the JSON set-returning functions, jsonb equality and
    # casts; array operators and functions; a date beside a timestamp
    "SELECT ('{\"a\":1}'::jsonb || '{\"b\":2}'::jsonb) ->> 'b', ('[1,2]'::jsonb || '[3]'::jsonb)::text, ('{\"a\":1}'::jsonb || '[1]'::jsonb)::text, ('1'::jsonb || '2'::jsonb)::text",
    "SELECT ('{\"a\":1,\"b\":2}'::jsonb - 'a')::text, ('[\"a\",\"b\",\"a\"]'::jsonb - 'a')::text, ('[1,2,3]'::jsonb - 1)::text, ('[1,2,3]'::jsonb - -1)::text, ('{\"a\":1,\"b\":2,\"c\":3}'::jsonb - ARRAY['a','c'])::text",
    "SELECT ('{\"a\":1}'::jsonb - 0)::text",
    "SELECT jsonb_set('{\"a\":1}'::jsonb, '{b}', '2') ->> 'b', jsonb_set('{\"a\":{\"b\":1}}'::jsonb, '{a,b}', '\"x\"') #>> '{a,b}', jsonb_set('[1,2]'::jsonb, '{0}', '9')::text, jsonb_set('{\"a\":1}'::jsonb, '{z}', '2', false)::text",
    'SELECT jsonb_pretty(\'{"a":1,"b":[1,2,{"c":null}],"e":{}}\')',
    'SELECT jsonb_object_keys(\'{"a":1,"b":2}\')',
    'SELECT * FROM jsonb_array_elements(\'[1,"two",{"x":3}]\') AS e',
    "SELECT * FROM jsonb_array_elements_text('[1,\"two\",null]') AS e",
    "SELECT jsonb_array_elements('{\"a\":1}')",
    "SELECT doc || '{\"z\":true}'::jsonb FROM d3 WHERE id = 1",
    "SELECT id, doc - 'c' FROM d3 WHERE id = 1",
    "SELECT ARRAY[1,2,3] @> ARRAY[2], ARRAY[1,2] <@ ARRAY[1,2,3], ARRAY[1,2] && ARRAY[2,5], ARRAY[1] && ARRAY[NULL::int]",
    "SELECT array_append(ARRAY[1,2], 3), array_prepend(0, ARRAY[1]), array_cat(ARRAY[1], ARRAY[2,3]), array_remove(ARRAY[1,2,1], 1)",
    "SELECT array_upper(ARRAY[1,2], 1), array_lower(ARRAY[1,2], 1), array_ndims(ARRAY[1]), array_upper(ARRAY[]::int[], 1)",
    "SELECT array_replace(ARRAY[1,2,1], 1, 9), array_positions(ARRAY[1,2,1], 1)",
    "SELECT id FROM d5 WHERE ta @> ARRAY['b'] ORDER BY id",
    "SELECT id FROM d5 WHERE ta && '{x,y,z}' ORDER BY id",
    "SELECT date '2024-01-01' < timestamp '2024-01-02', date '2024-01-02' = timestamp '2024-01-02 00:00', timestamptz '2024-01-01 10:00+00' > date '2024-01-01'",
    "SELECT id FROM d1 WHERE '2024-01-01'::date < now() ORDER BY id",
    "SELECT ('{\"a\":\"x\"}'::jsonb->'a')::int",
    "SELECT '{\"a\":1}'::jsonb = '{\"a\":1.0}'::jsonb",
    "SELECT '{\"x\": 1e2}'::jsonb::text",
    'SELECT \'{"b":1, "a":  2}\'::jsonb::text',
    'SELECT \'{"bb":1,"a":2,"ccc":3}\'::jsonb::text',
    # to_date and to_timestamp with PostgreSQL's templates (Phoenix's TO_DATE keeps its own)
    "SELECT to_date('2024-05-17', 'YYYY-MM-DD'), to_date('17/05/2024', 'DD/MM/YYYY'), to_date('2024-5-7', 'YYYY-MM-DD')",
    "SELECT to_timestamp('2024-05-17 13:45:10', 'YYYY-MM-DD HH24:MI:SS'), to_timestamp(0), to_timestamp(1700000000.5)",
    "SELECT to_timestamp('05 Dec 2000 10:30 PM', 'DD Mon YYYY HH12:MI PM'), to_date('March 3, 2021', 'Month DD, YYYY')",
    "SELECT to_date('2024-02-30', 'YYYY-MM-DD')",
    "SELECT to_date('abc', 'YYYY-MM-DD')",
    "SELECT to_timestamp('2024-05-17 13:45:10.123', 'YYYY-MM-DD HH24:MI:SS.MS')",
    "SELECT localtimestamp < now() + interval '1 day' AS a, current_time IS NOT NULL AS b, localtime IS NOT NULL AS c",
    # an aggregate's own ORDER BY
    "SELECT string_agg(s, ',' ORDER BY s DESC) FROM d1",
    "SELECT string_agg(s, ',' ORDER BY n NULLS FIRST, s) FROM d1",
    "SELECT array_agg(id ORDER BY n DESC NULLS LAST) FROM d1",
    "SELECT s, string_agg(id::text, '-' ORDER BY id DESC) FROM d1 GROUP BY s ORDER BY s NULLS FIRST",
    "SELECT jsonb_agg(id ORDER BY id DESC) ->> 0 FROM d1",
    "SELECT upper(s ORDER BY s) FROM d1",
    # regexp_match, regexp_split_to_array, regexp_like, regexp_count, encode/decode; bytea text
    # as bytea_in reads it (hex, escapes)
    "SELECT regexp_match('abc123', '[0-9]+'), regexp_match('foobarbequebaz', '(bar)(beque)'), regexp_match('abc', 'x')",
    "SELECT regexp_match('ABC', 'b', 'i'), regexp_split_to_array('a,b,,c', ','), regexp_split_to_array('hello world', '\\s+')",
    "SELECT regexp_like('Hello', 'h', 'i'), regexp_count('ababab', 'ab')",
    "SELECT encode('ab'::bytea, 'hex'), decode('6162', 'hex'), encode('ab'::bytea, 'base64'), decode('YWI=', 'base64')",
    "SELECT encode(E'a\\\\001b'::bytea, 'escape')",
    "SELECT decode('zz', 'hex')",
    "SELECT encode('ab'::bytea, 'rot13')",
    "SELECT '\\x6162'::bytea, length('\\x6162'::bytea), octet_length('\\x6162'::bytea)",
    "SELECT 'a\\001b'::bytea, 'a\\\\b'::bytea, 'abc'::bytea",
    "CREATE TABLE bt (id INT PRIMARY KEY, b BYTEA)",
    "INSERT INTO bt VALUES (1, '\\xdeadbeef'), (2, 'plain'), (3, 'x\\\\y')",
    "SELECT id, b, length(b) FROM bt ORDER BY id",
    # variance and standard deviation, digit for digit
    "SELECT stddev(n), variance(n), stddev_pop(n), var_samp(n), var_pop(n), stddev_samp(n) FROM d1",
    "SELECT stddev(f), variance(f), var_pop(f) FROM d1",
    "SELECT variance(x), stddev(x) FROM (VALUES (1.5), (2.25), (10.125)) v(x)",
    "SELECT variance(x), stddev(x) FROM (VALUES (100000), (200000), (350000)) v(x)",
    "SELECT variance(x), stddev(x), var_pop(x) FROM (VALUES (0.001), (0.002)) v(x)",
    "SELECT variance(n) FROM d1 WHERE id = 1",
    "SELECT variance(x) FROM (VALUES (5), (5)) v(x)",
    "SELECT s, stddev(n) FROM d1 GROUP BY s ORDER BY s NULLS FIRST",
    # ^ (numeric at PostgreSQL's scale), bitwise operators, ~~ forms of LIKE, SIMILAR TO
    "SELECT 2 ^ 3, 2.0 ^ 0.5, -2 ^ 2, 2 * 3 ^ 2, 2 ^ 3 ^ 2",
    "SELECT 5 & 3, 5 | 3, 5 # 3, ~5, 1 << 3, 16 >> 2, -16 >> 2, 1 + 2 & 3",
    "SELECT 'abc' ~~ 'a%', 'abc' !~~ 'a%', 'ABC' ~~* 'a%', 'ABC' !~~* 'a%'",
    "SELECT 'abc' SIMILAR TO 'a(b|c)%', 'abc' SIMILAR TO 'b%', 'abc' NOT SIMILAR TO '%c', 'a.c' SIMILAR TO 'a.c', 'abc' SIMILAR TO 'a.c'",
    "SELECT 'a_c' SIMILAR TO 'a#_c' ESCAPE '#', 'axc' SIMILAR TO 'a#_c' ESCAPE '#', 'aaa' SIMILAR TO 'a{2,3}', 'ab' SIMILAR TO '[a-b]+'",
    "SELECT id FROM d1 WHERE s SIMILAR TO '(a|b)' ORDER BY id",
    "SELECT 1 & true",
    "SELECT power(2.0, 0.5), power(2.0, 3), 10.0 ^ 5, 1.5 ^ 2, power(0.5, 10), 2.5 ^ -2",
    # columns named as PostgreSQL names them
    "SELECT position('b' in 'abc'), trim(' x '), trim(both 'x' from 'xax'), trim(leading from '  a')",
    # justify_* with fields of mixed signs
    "SELECT justify_days(interval '35 days')::text, justify_hours(interval '27 hours')::text, justify_interval(interval '1 mon -1 hour')::text",
    "SELECT justify_days(interval '-35 days')::text, justify_interval(interval '-1 mon 40 days -3 hours')::text, justify_hours(interval '-27 hours')::text",
    "SELECT justify_interval(interval '1 mon -31 days')::text, justify_days(interval '1 mon -40 days')::text, justify_hours(interval '1 day -30 hours')::text",
    "SELECT justify_interval(interval '-1 mon 2 days')::text, justify_interval(interval '2 mons -65 days 5 hours')::text",
    # regexp_split_to_table and regexp_matches (set-returning)
    "SELECT regexp_split_to_table('a,b,,c', ',')",
    "SELECT * FROM regexp_split_to_table('hello big world', '\\s+') AS w",
    "SELECT regexp_matches('foobarbequebaz', '(bar)(beque)')",
    "SELECT regexp_matches('abc123def456', '[0-9]+', 'g')",
    "SELECT regexp_matches('ABC', 'x')",
    "SELECT id, regexp_split_to_table(s || ',z', ',') FROM d1 WHERE id < 3 ORDER BY 1, 2",
    "SELECT regexp_matches('aXbX', 'x', 'gi')",
    # jsonb key existence: ?, ?| and ?& (a "?" after an operand is the operator)
    "SELECT id, doc ? 'a', doc ? 'two', doc ? 's', doc ?| array['c', 'x'], doc ?& array['a', 'c'] FROM d3 ORDER BY id",
    "SELECT '{\"a\":1}'::jsonb ?& array[]::text[], '{\"a\":1}'::jsonb ?| array[]::text[], '[\"a\",1]'::jsonb ? '1'",
    "SELECT '{\"a\":1}'::jsonb ?| '{z,a}', '{\"a\":1,\"b\":2}'::jsonb ?& array['a', NULL], '{\"x\":{\"a\":1}}'::jsonb ? 'a'",
    "SELECT id FROM d3 WHERE doc ? 'c' OR doc ? 'two' ORDER BY id",
    "SELECT '{\"a\":1}'::jsonb ? 1",
    # jsonb_each and friends; set-returning functions joined after a table (implicitly LATERAL)
    'SELECT * FROM jsonb_each(\'{"a":1,"b":"x","c":null,"d":[1,2]}\')',
    'SELECT * FROM jsonb_each_text(\'{"a":1,"b":"x","c":null,"d":[1,2]}\')',
    'SELECT key, value FROM json_each(\'{"a":{"b":1}}\')',
    "SELECT * FROM jsonb_each('[1]')",
    'SELECT jsonb_each(\'{"a":1,"b":"x y","c":null}\')::text',
    'SELECT jsonb_each(\'{"d":[1,2],"o":{"x":1,"a":"q"}}\')::text',
    "SELECT e.k, e.v FROM jsonb_each('{\"a\":1}') AS e(k, v)",
    "SELECT * FROM jsonb_each('{\"a\":1}') AS e(k, v, w)",
    "SELECT * FROM unnest(array[10,20]) WITH ORDINALITY",
    "SELECT * FROM unnest(array[10,20]) WITH ORDINALITY AS u(x, n)",
    "SELECT x FROM generate_series(5,6) AS g(x)",
    "SELECT jsonb_array_elements.value FROM jsonb_array_elements('[1,2]')",
    "SELECT d1.id, x FROM d1, unnest(array[d1.id, 2]) x ORDER BY 1, 2",
    "SELECT d1.id, u.x FROM d1 JOIN unnest(array[d1.n, 7]) AS u(x) ON u.x > 10 ORDER BY 1, 2",
    "SELECT d1.id, u.x FROM d1 LEFT JOIN LATERAL unnest(array[d1.n]) AS u(x) ON u.x > 10 ORDER BY 1, 2",
    "SELECT d1.id, g.i, g.o FROM d1, LATERAL generate_series(1, d1.id) WITH ORDINALITY g(i, o) WHERE d1.id < 3 ORDER BY 1, 2",
    "SELECT d3.id, e.key, e.value FROM d3, jsonb_each(d3.doc) e WHERE jsonb_typeof(d3.doc) = 'object' ORDER BY 1, 2",
    "SELECT d3.id, v FROM d3 CROSS JOIN jsonb_array_elements_text(d3.doc) v WHERE d3.id = 2 ORDER BY 2",
    "SELECT d1.id, x FROM d1 RIGHT JOIN unnest(array[d1.id]) x ON true",
    "SELECT d1.id, x FROM d1 FULL JOIN unnest(array[1, 9]) x ON d1.id = x ORDER BY 1 NULLS LAST, 2",
    # PREPARE, EXECUTE and DEALLOCATE
    "CREATE TABLE dpp (id INT PRIMARY KEY, s TEXT, doc JSONB)",
    "PREPARE q1 (int) AS SELECT $1 + 1",
    "EXECUTE q1 (41)",
    "EXECUTE q1 ('41')",
    "EXECUTE q1",
    "EXECUTE q1 (1, 2)",
    "PREPARE q1 AS SELECT 1",
    "EXECUTE nosuch (1)",
    "DEALLOCATE nosuch",
    "PREPARE q2 (int, text, jsonb) AS INSERT INTO dpp VALUES ($1, $2, $3)",
    "EXECUTE q2 (1, 'one', '{\"k\": [1]}')",
    "EXECUTE q2 (2, NULL, NULL)",
    "PREPARE q3 AS SELECT id, s, doc FROM dpp WHERE id = $1",
    "EXECUTE q3 (1)",
    "EXECUTE q3 (1 + 1)",
    "PREPARE q4 (numeric(10,2)) AS SELECT $1",
    "EXECUTE q4 (1.005)",
    "PREPARE q5 (nosuchtype) AS SELECT $1",
    "PREPARE q6 AS SELECT * FROM nosuchtable",
    "PREPARE q7 (int) AS UPDATE dpp SET s = s || '!' WHERE id = $1 RETURNING s",
    "EXECUTE q7 (1)",
    "DEALLOCATE q1",
    "EXECUTE q1 (1)",
    "DEALLOCATE PREPARE q2",
    "DEALLOCATE ALL",
    "EXECUTE q3 (1)",
    "SELECT * FROM dpp ORDER BY id",
    # single precision: REAL/FLOAT4 values rounded as stored and cast, float4out's and float8out's text
    "SELECT 1e15::float8::text, 123456789012345::float8::text, 1e16::float8::text, 1.5e15::float8::text",
    "SELECT 1e6::float4::text, 123456::float4::text, 1234567::float4::text, 1e-5::float4::text, 0.1::float4::text",
    "SELECT 0.1::float4::float8, 16777217::float4::float8, (1::float4 / 3)::text",
    "SELECT 1e39::float4",
    "SELECT 1e-50::float4",
    "SELECT '1e39'::float4",
    "SELECT 3.4028235e38::float4::text, 1.4e-45::float4::text",
    "SELECT 1e15::float8, -1.5e-7::float8, 100000000000000::float8",
    "CREATE TABLE dreal (id INT PRIMARY KEY, r REAL, f FLOAT4)",
    "INSERT INTO dreal VALUES (1, 0.1, 16777217), (2, 1e-5, 1234567), (3, -2.5, 3.4028235e38)",
    "SELECT * FROM dreal ORDER BY id",
    "SELECT id, r::float8, f::float8 FROM dreal ORDER BY id",
    "INSERT INTO dreal VALUES (4, 1e39, 0)",
    "INSERT INTO dreal VALUES (5, '1e-50', 0)",
    "INSERT INTO dreal VALUES (6, 1e-50::float8, 0)",
    "UPDATE dreal SET r = r * 3 WHERE id = 1 RETURNING r",
    "SELECT id FROM dreal WHERE r = 0.3::float4 * 3 OR f = 1234567 ORDER BY id",
    "SELECT sum(r), min(f), max(r), avg(f) FROM dreal",
    # TRUNCATE
    "CREATE TABLE dtr1 (id INT PRIMARY KEY, v TEXT)",
    "CREATE TABLE dtr2 (id INT PRIMARY KEY)",
    "INSERT INTO dtr1 VALUES (1, 'a'), (2, 'b')",
    "INSERT INTO dtr2 VALUES (1)",
    "TRUNCATE dtr1, no_such_table",
    "SELECT count(*) FROM dtr1",
    "TRUNCATE TABLE ONLY dtr1, dtr2 * CONTINUE IDENTITY RESTRICT",
    "SELECT (SELECT count(*) FROM dtr1), (SELECT count(*) FROM dtr2)",
    "INSERT INTO dtr1 VALUES (1, 'again')",
    "TRUNCATE dtr1 WHERE id = 1",
    "SELECT * FROM dtr1",
    # numeric results at PostgreSQL's scale (compared as text: the digits after the point too)
    "SELECT (1.0 / 3)::text, (7.0 / 2)::text, (10.10 / -2.25)::text, (100000 / 3.0)::text, (0.000001 / 3)::text",
    "SELECT (1 / 3.000000000000000000000001)::text, (2.0 / 0.0003)::text, (1e-20::numeric / 3)::text",
    "SELECT (0 / 3.5)::text, (9999 / 10000.0)::text, (10000 / 9999.0)::text, (-0.5 / 3)::text",
    "SELECT (123456789012345678901234567890 / 7.0)::text",
    "SELECT avg(x)::text FROM (VALUES (1.0), (2.0), (2.0)) v(x)",
    "SELECT avg(x)::text FROM (VALUES (1), (2), (2)) v(x)",
    "SELECT avg(x)::text FROM (VALUES (9223372036854775807), (9223372036854775807)) v(x)",
    "SELECT avg(x)::text FROM (VALUES (0.001), (0.002)) v(x)",
    "SELECT (avg(x) OVER (ORDER BY x))::text FROM (VALUES (1), (2), (4)) v(x) ORDER BY 1",
    "SELECT sqrt(2::numeric)::text, sqrt(0.0002::numeric)::text, sqrt(123456789::numeric)::text,"
    " sqrt(4::numeric)::text, sqrt(1.00000000000000000001)::text, sqrt(0::numeric)::text",
    "SELECT ln(2::numeric)::text, ln(10.5)::text, ln(0.95)::text, ln(1.0000001)::text, ln(1e-30::numeric)::text",
    "SELECT ln(123456789012345678901234567890)::text, ln(1::numeric)::text",
    "SELECT exp(1::numeric)::text, exp(2.5)::text, exp(-50::numeric)::text, exp(0.000001)::text",
    "SELECT log(100::numeric)::text, log(2.0)::text, log(0.001)::text, log(2, 64::numeric)::text,"
    " log(1.0000001, 1000)::text",
    "SELECT cbrt(27::numeric), cbrt(-8), cbrt(2.0::float8)",
    "SELECT n / 3 FROM d1 WHERE n IS NOT NULL ORDER BY id",
    # extract as PostgreSQL 14+ (numeric: seconds to the microsecond), date_part a float
    "SELECT extract(second from '2024-01-01 10:11:12.5'::timestamp)::text,"
    " extract(millisecond from '2024-01-01 10:11:12.5'::timestamp)::text,"
    " extract(microsecond from '2024-01-01 10:11:12.5'::timestamp)::text",
    "SELECT extract(epoch from '2024-01-01 10:11:12.5+00'::timestamptz)::text, extract(epoch from '2024-01-01'::date)::text",
    "SELECT extract(julian from '2024-01-01'::date)::text, extract(julian from '2024-01-01 12:00'::timestamp)::text",
    "SELECT extract(century from '2024-01-01'::date), extract(decade from '2024-01-01'::date),"
    " extract(millennium from '2001-01-01'::date), extract(isoyear from '2024-12-30'::date)",
    "SELECT extract(second from '2024-01-01'::date)",
    "SELECT extract(epoch from interval '1 day 2.5 seconds')::text, extract(second from interval '1 minute 2.25 seconds')::text",
    "SELECT date_part('year', '2024-01-01'::date), date_part('second', '2024-01-01 10:11:12.5'::timestamp),"
    " date_part('hour', '2024-01-01'::date)",
    "SELECT (-1::numeric * 0)::text, trunc(-0.4)::text, round(-0.4)::text, (-0.0)::numeric::text",
    "SELECT power(0::numeric, 2)::text",
    # string and numeric functions
    "SELECT overlay('Txxxxas' placing 'hom' from 2 for 4), overlay('abcdef' placing 'X' from 3),"
    " overlay('abcdef' placing 'X' from 3 for -1), overlay('abc', 'Z', 2, 1)",
    "SELECT overlay('abc' placing 'Z' from 0)",
    "SELECT bit_length('abc'), bit_length('ÄÖ'), quote_literal('O''Reilly'), quote_literal(E'a\\\\b'),"
    " quote_literal(42), quote_nullable(NULL::text)",
    "SELECT scale(1.50), scale(0), scale(-3.000001), scale(NULL::numeric)",
    "SELECT width_bucket(5.35, 0.024, 10.06, 5), width_bucket(-1, 0, 10, 5), width_bucket(10, 0, 10, 5),"
    " width_bucket(3, 10, 0, 5), width_bucket(5.5::float8, 0, 10, 3)",
    "SELECT width_bucket(1, 0, 10, 0)",
    "SELECT width_bucket(1, 5, 5, 2)",
    "SELECT make_date(2024, 2, 29), make_timestamp(2024, 1, 31, 23, 59, 59.5), make_timestamp(2024, 1, 31, 24, 0, 0)",
    "SELECT make_date(2023, 2, 29)",
    "SELECT make_time(10, 30, 15.25)",
    """SELECT jsonb_strip_nulls('{"a": null, "b": {"c": null, "d": 1}, "e": [null, {"f": null}]}')""",
    "SELECT id, (SELECT string_agg(k, ',' ORDER BY k) FROM jsonb_object_keys(CASE WHEN jsonb_typeof(doc) = 'object'"
    " THEN doc END) k) FROM d3 ORDER BY id",
    "SELECT id, (SELECT count(*) FROM generate_series(1, id) g) FROM d1 ORDER BY id",
    # UPDATE .. SET c = DEFAULT, named windows
    "CREATE TABLE ddef (id INT PRIMARY KEY, a INT DEFAULT 7, s TEXT, n INT NOT NULL DEFAULT 1, z INT NOT NULL)",
    "INSERT INTO ddef VALUES (1, 2, 'x', 5, 0), (2, 3, 'y', 6, 0)",
    "UPDATE ddef SET a = DEFAULT, s = DEFAULT WHERE id = 1 RETURNING *",
    "UPDATE ddef SET n = default, a = a + 1 WHERE id = 2 RETURNING *",
    "UPDATE ddef SET z = DEFAULT WHERE id = 2",
    "INSERT INTO ddef VALUES (2, 9, 'q', 9, 9) ON CONFLICT (id) DO UPDATE SET a = DEFAULT, s = excluded.s RETURNING *",
    "SELECT id, first_value(n) OVER w, sum(n) OVER w FROM d1 WINDOW w AS (PARTITION BY b ORDER BY id) ORDER BY id",
    "SELECT id, sum(n) OVER (w ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) FROM d1 WINDOW w AS (ORDER BY id) ORDER BY id",
    "SELECT id, rank() OVER (w ORDER BY n DESC NULLS LAST) FROM d1 WINDOW w AS (PARTITION BY b) ORDER BY id",
    "SELECT id, sum(n) OVER w2 FROM d1 WINDOW w1 AS (PARTITION BY s), w2 AS (w1 ORDER BY id) ORDER BY id",
    "SELECT id, count(*) FILTER (WHERE n > 6) OVER w FROM d1 WINDOW w AS (ORDER BY id) ORDER BY id",
    "SELECT id, sum(n) OVER nope FROM d1",
    "SELECT id, sum(n) OVER w FROM d1 WINDOW w AS (ORDER BY id), w AS (ORDER BY n)",
    "SELECT id, sum(n) OVER (w ORDER BY n) FROM d1 WINDOW w AS (ORDER BY id)",
    # rows: (a, b) IN (SELECT x, y ..), comparisons with NULLs; ON CONFLICT .. WHERE false twice
    "CREATE TABLE drow1 (id INT PRIMARY KEY, a INT, s TEXT)",
    "INSERT INTO drow1 VALUES (1, 1, 'x'), (2, 2, NULL), (3, NULL, 'z')",
    "CREATE TABLE drow2 (id INT PRIMARY KEY, v INT, w TEXT)",
    "INSERT INTO drow2 VALUES (1, 1, 'x'), (2, 2, 'q'), (3, 5, NULL)",
    "SELECT id, (a, s) IN (SELECT v, w FROM drow2), (a, s) NOT IN (SELECT v, w FROM drow2) FROM drow1 ORDER BY id",
    "SELECT id FROM drow1 WHERE (a, s) IN (SELECT v FROM drow2)",
    "SELECT id FROM drow1 WHERE (a, s) IN (SELECT v, w, id FROM drow2)",
    "SELECT (1, NULL) IN ((1, 'x')), (1, 'z') NOT IN ((1, NULL)), (1, 2) = (1, NULL), (1, 2) <> (3, NULL),"
    " (1, 2) < (1, 3), (1, NULL) < (2, 0), (1, NULL) < (1, 3), (1, 2) <= (1, 2)",
    "SELECT (1, 2) = (1, 2, 3)",
    "SELECT id FROM drow1 WHERE (id, a) > (1, 5) ORDER BY id",
    "INSERT INTO drow1 VALUES (1, 5, 'a'), (1, 6, 'b') ON CONFLICT (id) DO UPDATE SET s = excluded.s WHERE drow1.a > 100",
    "INSERT INTO drow1 VALUES (1, 5, 'a'), (1, 6, 'b') ON CONFLICT (id) DO UPDATE SET s = excluded.s",
    "SELECT * FROM drow1 ORDER BY id",
    # floats to numerics; keywords in nested special forms
    "SELECT 0.0::float8::numeric::text, 3.0::float8::numeric::text, 1.5::float8::numeric::text, scale(sign(2.5::float8)::numeric)",
    "SELECT substring(lower(trim(both 'x' from 'xaXx')), 1, 2), substring(trim(leading from '  a'), 1)",
    # text to values as PostgreSQL reads it
    "SELECT ('2024-01-31 10:11:12+05'::timestamp)::text, ('2024-01-31 10:11:12.1234567'::timestamp)::text",
    "SELECT ('2024-06-01 00:00 UTC'::timestamptz)::text, ('2024-01-31 10:11:12 Europe/Paris'::timestamptz)::text",
    "SELECT ('epoch'::timestamp)::text, ('epoch'::date)::text, ('2024-01-05 10:00'::date)::text",
    "SELECT '2024-01-31 10:11:12 Nowhere/Zone'::timestamptz",
    "SELECT '1_000'::int",
    "SELECT '1_0.5'::numeric",
    "SELECT ('\\x41ff'::bytea)::text, ('abc'::bytea)::text, ('10:11:12.123'::time)::text, ('10:11:12'::time)::text",
    # GROUP BY ROLLUP, CUBE, GROUPING SETS
    "CREATE TABLE dgs (id INT PRIMARY KEY, a TEXT, b INT, v INT)",
    "INSERT INTO dgs VALUES (1, 'x', 1, 10), (2, 'x', 2, 20), (3, 'y', 1, 5), (4, NULL, 1, 7), (5, 'y', NULL, 1)",
    "SELECT a, b, sum(v), count(*) FROM dgs GROUP BY ROLLUP (a, b) ORDER BY 1 NULLS LAST, 2 NULLS LAST, 3, 4",
    "SELECT a, b, sum(v) FROM dgs GROUP BY CUBE (a, b) ORDER BY 1 NULLS FIRST, 2 NULLS FIRST, 3",
    "SELECT a, b, sum(v), grouping(a, b) FROM dgs GROUP BY GROUPING SETS ((a), (b), ()) ORDER BY 4, 1 NULLS FIRST, 2 NULLS FIRST, 3",
    "SELECT a, sum(v) FROM dgs GROUP BY ROLLUP (a) HAVING sum(v) > 10 ORDER BY 2",
    "SELECT a, b, count(*) FROM dgs GROUP BY a, ROLLUP (b) ORDER BY 1 NULLS FIRST, 2 NULLS FIRST, 3",
    "SELECT count(*) FROM dgs GROUP BY ()",
    "SELECT a AS label, sum(v) AS total FROM dgs GROUP BY ROLLUP (a) ORDER BY label NULLS FIRST, total LIMIT 2",
    "SELECT coalesce(a, 'all'), sum(v) FROM dgs GROUP BY ROLLUP (a) ORDER BY 1, 2",
    "SELECT a, b, sum(v) FROM dgs GROUP BY ROLLUP ((a, b)) ORDER BY 1 NULLS LAST, 2 NULLS LAST, 3",
    "SELECT a, sum(v) FROM dgs GROUP BY GROUPING SETS ((), (a)) ORDER BY a NULLS FIRST, 2",
    # numerics exact past 28 digits; rounding functions of integers are doubles
    "SELECT (123456789012345.123456789 * 1000000.000001)::text, (1e30::numeric + 0.000001)::text, (1e30::numeric % 7)::text",
    "SELECT sum(x)::text, avg(x)::text FROM (VALUES (123456789012345678.123456789), (0.000000001), (100000000000000000000)) v(x)",
    "SELECT round(7), round(7, 1), round(15, -1), trunc(7), trunc(7, 1), ceil(7), floor(-7), sign(-7)",
    "SELECT extract(julian from '2024-03-01 00:00'::timestamp)::text",
    # intervals of months and years: calendar arithmetic, PostgreSQL's text, age and friends
    "SELECT ('-1 month'::interval)::text, ('1 year 2 mons 3 days 04:05:06'::interval)::text, ('2 years -1 mons'::interval)::text",
    "SELECT ('1.5 months'::interval)::text, ('1.5 years'::interval)::text, ('-1.5 months'::interval)::text",
    "SELECT ('1 year -2 days +03:00:00'::interval)::text, ('-1 year -2 mons +3 days -04:00:00'::interval)::text",
    "SELECT ('2 months ago'::interval)::text, ('P1Y2M3DT4H5M6S'::interval)::text, ('1 mon 1 day'::interval)::text",
    "SELECT (date '2024-01-31' + interval '1 month')::text, (timestamptz '2024-03-31 10:00+00' - interval '1 month')::text",
    "SELECT (interval '1 month' + interval '2 days')::text, (interval '1 year' - interval '1 month')::text, (interval '1 month' - interval '1 day 02:00:00')::text",
    "SELECT (interval '1 month' * 1.5)::text, (interval '3 months' / 2)::text, (interval '1 mon 1 day' * 0.3)::text, (interval '1 year' / 7)::text",
    "SELECT (-interval '1 month')::text, (-interval '1 mon -2 days')::text",
    "SELECT age(timestamp '2024-03-01', timestamp '2024-01-31')::text, age(timestamp '2024-01-15', timestamp '2024-03-01')::text",
    "SELECT age(timestamp '2001-04-10', timestamp '1957-06-13')::text, age(date '2024-02-29', date '2023-02-28')::text, age(date '2023-02-28', date '2024-02-29')::text",
    "SELECT age(timestamp '2024-03-01 10:00', timestamp '2024-03-01 12:00')::text, age(timestamp '2024-05-31 01:00', timestamp '2024-02-29 23:00')::text",
    "SELECT make_interval(1, 2, 1, 3, 4, 5, 6.5)::text, make_interval(0, 0, 0, 3)::text, make_interval(0, -14)::text",
    "SELECT justify_days(interval '35 days')::text, justify_hours(interval '27 hours')::text, justify_interval(interval '1 mon -1 hour')::text",
    "SELECT justify_days(interval '-35 days')::text, justify_interval(interval '-1 mon 40 days -3 hours')::text",
    "SELECT extract(year from interval '-14 months'), extract(month from interval '-14 months'), extract(quarter from interval '14 months'), extract(quarter from interval '-14 months')",
    "SELECT extract(epoch from interval '1 year 1 mon 1 day 01:00:01.5'), extract(minute from interval '-05:06:07.5'), extract(second from interval '-05:06:07.5')",
    "SELECT extract(millisecond from interval '1 min 2.5 sec'), extract(microsecond from interval '2.5 sec'), extract(decade from interval '25 years'), extract(century from interval '250 years')",
    "SELECT interval '1 month' = interval '30 days', interval '1 year' = interval '360 days'",
    "SELECT date_part('month', interval '14 months')",
    "SELECT (interval '1 year' + date '2024-02-29')::text",
    "SELECT (timestamp '2024-01-31 00:00' + interval '1 month' + interval '1 month')::text, (timestamp '2024-01-31' + interval '2 months')::text",
    "SELECT now() - interval '1 month' < now(), date '2024-01-31' + interval '1 month' = timestamp '2024-02-29'",
    "SELECT ('1 day 02:00:00'::interval)::text, ('1 mon -02:00:00'::interval)::text",
    "SELECT extract(dow from interval '1 day')",
    "SELECT '1 month 3 fortnights'::interval",
    "SELECT '1 fortnight'::interval",
    # arrays go out as arrays (text[] and int8[] OIDs, array_out's text; the client gets lists)
    "SELECT id, ta FROM d5 ORDER BY id",
    "SELECT ta::text AS t FROM d5 ORDER BY id",
    "SELECT ARRAY[1, NULL, 3] AS a, ARRAY['x y', 'NULL', ''] AS b, ARRAY[true, false]::text AS c",
)


@pytest.fixture(scope="module")
def both() -> Iterator[tuple[psycopg.Connection[Any], psycopg.Connection[Any]]]:
    with beside_postgres(SETUP, "pg-oracle-") as pair:
        yield pair


def outcome(conn: psycopg.Connection[Any], sql: str) -> tuple[Any, ...]:
    """("rows", column names, rows) or ("error", SQLSTATE)."""
    try:
        cur = conn.execute(sql)
    except psycopg.Error as exc:
        return ("error", exc.sqlstate)
    if cur.description is None:
        return ("rows", None, cur.rowcount)
    rows = [tuple(_value(v) for v in r) for r in cur.fetchall()]
    if "ORDER BY" not in sql.upper():
        rows.sort(key=repr)
    return ("rows", [d.name for d in cur.description], rows)


def _value(v: Any) -> Any:
    """Numbers by value: PostgreSQL's numeric keeps its scale (3.5000000000000000)."""
    if isinstance(v, Decimal):
        return v.normalize() + 0
    return v


@pytest.mark.parametrize("sql", STATEMENTS, ids=range(len(STATEMENTS)))
def test_same_answer_as_postgresql(
    both: tuple[psycopg.Connection[Any], psycopg.Connection[Any]], sql: str
) -> None:
    theirs, mine = both
    expected = outcome(theirs, sql)
    assert outcome(mine, sql) == expected, sql


ARRAY_PARAMETERS = (
    ("SELECT id FROM d1 WHERE id = ANY(%s) ORDER BY id", [1, 3], False),
    ("SELECT id FROM d1 WHERE id = ANY(%s) ORDER BY id", [2, 4, 99], True),
    ("SELECT id FROM d1 WHERE s = ANY(%s) ORDER BY id", ["a", "c", None], False),
    ("SELECT id FROM d1 WHERE s = ANY(%s) ORDER BY id", ["b", 'q"uote', "com,ma"], True),
    ("SELECT id FROM d1 WHERE id <> ALL(%s) ORDER BY id", [], False),
    ("SELECT id FROM d1 WHERE f = ANY(%s) ORDER BY id", [1.5, -2.25], True),
)


@pytest.mark.parametrize(("sql", "value", "binary"), ARRAY_PARAMETERS, ids=range(len(ARRAY_PARAMETERS)))
def test_array_parameters_as_postgresql(
    both: tuple[psycopg.Connection[Any], psycopg.Connection[Any]], sql: str, value: list[Any], binary: bool
) -> None:
    """A Python list bound as an array (``= ANY(%s)``), in psycopg's text and binary forms."""
    theirs, mine = both
    expected = theirs.execute(sql, (value,), binary=binary).fetchall()
    assert mine.execute(sql, (value,), binary=binary).fetchall() == expected, sql


ARRAY_RESULTS = (
    "SELECT id, ta FROM d5 ORDER BY id",
    "SELECT ARRAY[1, NULL, 3] AS a, ARRAY['x y', 'NULL', ''] AS b, ARRAY[1.5, -2.0] AS c",
    "SELECT ARRAY[true, NULL] AS a, ARRAY['2024-01-02'::date] AS b, ARRAY[]::text[] AS c",
)


@pytest.mark.parametrize("sql", ARRAY_RESULTS, ids=range(len(ARRAY_RESULTS)))
def test_array_results_in_binary_as_postgresql(
    both: tuple[psycopg.Connection[Any], psycopg.Connection[Any]], sql: str
) -> None:
    """Array columns in the binary format (array_send): the same lists and types as PostgreSQL's."""
    theirs, mine = both
    want = theirs.cursor(binary=True).execute(sql)
    got = mine.cursor(binary=True).execute(sql)
    assert got.fetchall() == want.fetchall(), sql
    int8 = {23: 20, 1007: 1016}  # INT is INT8, as in CockroachDB
    assert [d.type_code for d in got.description or []] == [
        int8.get(d.type_code, d.type_code) for d in want.description or []
    ]


INTERVAL_RESULTS = (
    "SELECT interval '1 year 2 mons 3 days 04:05:06' AS a, interval '-14 months -05:00:00' AS b,"
    " interval '1 day -02:00:00' AS c, interval '-02:00:00' AS d",
    "SELECT age(timestamp '2024-03-01', timestamp '2024-01-31') AS a, justify_days(interval '65 days') AS b",
)


@pytest.mark.parametrize("sql", INTERVAL_RESULTS, ids=range(len(INTERVAL_RESULTS)))
def test_interval_results_in_binary_as_postgresql(
    both: tuple[psycopg.Connection[Any], psycopg.Connection[Any]], sql: str
) -> None:
    """Intervals in the binary format (microseconds, days, months, as interval_send writes
    them): psycopg reads months as 30 days and years as 365, so a month sent as 30 days or a
    time sent as days would differ."""
    theirs, mine = both
    want = theirs.cursor(binary=True).execute(sql)
    got = mine.cursor(binary=True).execute(sql)
    assert got.fetchall() == want.fetchall(), sql
    assert [d.type_code for d in got.description or []] == [d.type_code for d in want.description or []]


def test_interval_parameters_as_postgresql(
    both: tuple[psycopg.Connection[Any], psycopg.Connection[Any]],
) -> None:
    """An interval's text bound as a parameter, months included, and a timedelta as psycopg
    sends it (``1 day 0:00:05``). (Not a negative timedelta: psycopg sends ``-1 day 22:00:00``,
    which PostgreSQL keeps as two fields and prints so, while an interval without months is one
    length here, printed ``-02:00:00``; docs/pg.md.)"""
    theirs, mine = both
    sql = "SELECT (date '2024-01-31' + %s::interval)::text, (%s::interval)::text"
    for value in (
        "1 month",
        "1 year -1 mons 2 days",
        dt.timedelta(days=1, seconds=5),
        dt.timedelta(hours=30),
    ):
        assert mine.execute(sql, (value, value)).fetchall() == theirs.execute(sql, (value, value)).fetchall()


def test_default_with_parameters_as_postgresql(
    both: tuple[psycopg.Connection[Any], psycopg.Connection[Any]],
) -> None:
    """``DEFAULT`` beside bound parameters, prepared (the extended protocol describes it)."""
    theirs, mine = both
    for conn in (theirs, mine):
        conn.execute("CREATE TABLE dp (id INT PRIMARY KEY, a TEXT DEFAULT 'd', b INT)")
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO dp (id, a, b) VALUES (%s, DEFAULT, %s)", [(1, 10), (2, None)])
            cur.execute("INSERT INTO dp VALUES (%s, DEFAULT, DEFAULT)", (3,), prepare=True)
    sql = "SELECT * FROM dp ORDER BY id"
    assert (
        mine.execute(sql).fetchall()
        == theirs.execute(sql).fetchall()
        == [(1, "d", 10), (2, "d", None), (3, "d", None)]
    )


def test_update_from_prepared_as_postgresql(
    both: tuple[psycopg.Connection[Any], psycopg.Connection[Any]],
) -> None:
    """``UPDATE .. FROM .. RETURNING`` prepared with parameters: described before it runs (the
    other table's columns in its RETURNING), then run."""
    theirs, mine = both
    sql = "UPDATE pu SET v = ps.v || %s FROM ps WHERE pu.id = ps.id AND ps.id > %s RETURNING pu.id, pu.v, ps.v AS src"
    results = []
    for conn in (theirs, mine):
        conn.execute("CREATE TABLE pu (id INT PRIMARY KEY, v TEXT)")
        conn.execute("CREATE TABLE ps (id INT PRIMARY KEY, v TEXT)")
        conn.execute("INSERT INTO pu VALUES (1, 'a'), (2, 'b'), (3, 'c')")
        conn.execute("INSERT INTO ps VALUES (2, 'B'), (3, 'C')")
        cur = conn.execute(sql, ("!", 1), prepare=True)
        results.append((sorted(cur.fetchall()), [d.name for d in cur.description or []]))
    assert results[1] == results[0]


def test_a_pipeline_that_fails_changes_nothing(
    both: tuple[psycopg.Connection[Any], psycopg.Connection[Any]],
) -> None:
    """psycopg's ``executemany`` in autocommit pipelines its Executes before one Sync: PostgreSQL
    runs them in one implicit transaction, so a failing row rolls back the rows before it."""
    outcomes = []
    for conn in both:
        conn.execute("CREATE TABLE p1 (id INT PRIMARY KEY, v TEXT)")
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.cursor().executemany("INSERT INTO p1 VALUES (%s, %s)", [(1, "a"), (2, "b"), (1, "c")])
        conn.cursor().executemany("INSERT INTO p1 VALUES (%s, %s)", [(3, "c"), (4, "d")])
        conn.cursor().executemany("UPDATE p1 SET v = %s WHERE id = %s", [("x", 3), ("y", 4)])
        outcomes.append(conn.execute("SELECT * FROM p1 ORDER BY id").fetchall())
        conn.execute("DROP TABLE p1")
    assert outcomes[1] == outcomes[0] == [(3, "x"), (4, "y")]


def test_duplicate_key_error_fields(both: tuple[psycopg.Connection[Any], psycopg.Connection[Any]]) -> None:
    """The message, detail and constraint name ORMs read a unique violation by."""
    fields = []
    for conn in both:
        with pytest.raises(psycopg.errors.UniqueViolation) as got:
            conn.execute("INSERT INTO d2 VALUES (2, 0, 'dup')")
        d = got.value.diag
        fields.append((d.sqlstate, d.message_primary, d.message_detail, d.constraint_name))
    assert (
        fields[0]
        == fields[1]
        == (
            "23505",
            'duplicate key value violates unique constraint "d2_pkey"',
            "Key (id)=(2) already exists.",
            "d2_pkey",
        )
    )
