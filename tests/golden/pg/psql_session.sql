-- psql against `changefeed serve --pg`: what PostgreSQL prints for the same statements and data
CREATE TABLE accounts (id BIGINT PRIMARY KEY, owner TEXT NOT NULL, balance DECIMAL(12,2), opened DATE, active BOOL);
INSERT INTO accounts VALUES (1, 'ada', 100.50, '2024-01-02', true), (2, 'bob', -3.25, '2024-02-03', false);
INSERT INTO accounts (id, owner) VALUES (3, 'cy');
UPDATE accounts SET balance = balance + 1 WHERE id = 1;
SELECT * FROM accounts ORDER BY id;
SELECT owner, balance FROM accounts WHERE balance > 0;
DELETE FROM accounts WHERE id = 2;
SELECT count(*) FROM accounts;
BEGIN;
INSERT INTO accounts VALUES (4, 'dee', 0, NULL, NULL);
ROLLBACK;
SELECT id, owner FROM accounts ORDER BY id;
SELECT * FROM missing;
\d accounts
\dt acc*
\du
CREATE TABLE people (id INT PRIMARY KEY DEFAULT unique_rowid(), name STRING NOT NULL DEFAULT 'anon', joined TIMESTAMPTZ DEFAULT now(), tag INT AS (id % 10 + 1) STORED);
INSERT INTO people (id, name) VALUES (41, 'eve'), (52, 'fay') RETURNING id, name, tag;
UPDATE people SET name = upper(name) WHERE id = 41 RETURNING id, name || '!' AS shout;
DELETE FROM people WHERE id = 52 RETURNING name;
\d people
\d+ people
PREPARE by_owner (text) AS SELECT id, owner FROM accounts WHERE owner = $1;
EXECUTE by_owner ('ada');
EXECUTE by_owner;
DEALLOCATE by_owner;
EXECUTE by_owner ('ada');
CREATE TABLE docs (id INT PRIMARY KEY, doc JSONB);
INSERT INTO docs VALUES (1, '{"a": 1, "b": [1, 2]}'), (2, '{"c": "x"}'), (3, '[1, 2]');
SELECT d.id, e.key, e.value FROM docs d, jsonb_each(d.doc) e WHERE jsonb_typeof(d.doc) = 'object' ORDER BY 1, 2;
SELECT id FROM docs WHERE doc ? 'c' OR doc ?| array['a'] ORDER BY id;
