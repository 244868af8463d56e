-- cockroachdb-changefeed-messages.txt, Delete messages: deleting the row with primary key 5 outputs
-- [5] {"after": null}
CREATE TABLE t (id INT PRIMARY KEY, v STRING);
INSERT INTO t VALUES (5, 'five');
-- changefeed
EXPERIMENTAL CHANGEFEED FOR t WITH no_initial_scan;
-- expect
table,key,value
> DELETE FROM t WHERE id = 5;
t,[5],"{""after"": null}"
