-- CDC queries CockroachDB refuses (cdceval: validation.go, functions.go, func_resolver.go; the
-- optimizer's contradiction check; sql.y allows one table).
CREATE TABLE users (id INT PRIMARY KEY, name STRING, city STRING);
CREATE TABLE rides (id INT PRIMARY KEY, rider_id INT);
-- error
CREATE CHANGEFEED AS SELECT now() FROM users;
ERROR: function "now" unsupported by CDC
-- error
CREATE CHANGEFEED AS SELECT * FROM users WHERE random() > 0.5;
ERROR: function "random" unsupported by CDC
-- error
CREATE CHANGEFEED AS SELECT count(*) FROM users;
ERROR: function "count" unsupported by CDC
-- error
CREATE CHANGEFEED AS SELECT row_number() OVER () FROM users;
ERROR: function "row_number" unsupported by CDC
-- error
CREATE CHANGEFEED AS SELECT * FROM users WHERE id IN (SELECT rider_id FROM rides);
ERROR: sub-query expressions not supported by CDC
-- error
CREATE CHANGEFEED AS SELECT * FROM users, rides;
ERROR: CREATE CHANGEFEED ... AS SELECT ... is not supported for more than 1 table
-- error
CREATE CHANGEFEED AS SELECT * FROM users JOIN rides ON users.id = rides.rider_id;
ERROR: CREATE CHANGEFEED ... AS SELECT ... is not supported for more than 1 table
-- error
CREATE CHANGEFEED AS SELECT * FROM users WHERE id IS NULL;
ERROR: changefeed expression SELECT * FROM users WHERE id IS NULL does not match any rows
-- error
CREATE CHANGEFEED AS SELECT cdc_prev() FROM users;
ERROR: unknown function: cdc_prev()
-- error
CREATE CHANGEFEED AS SELECT btrim(id) FROM users;
ERROR: unknown signature: btrim(int)
-- error
CREATE CHANGEFEED WITH envelope = enriched AS SELECT name FROM users;
ERROR: envelope=enriched is incompatible with SELECT statement
