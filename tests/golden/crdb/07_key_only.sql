-- cockroachdb-changefeed-messages.txt: "To limit messages to just the changed key value, use the
-- envelope option set to key_only."
CREATE TABLE t (id INT PRIMARY KEY, name STRING);
INSERT INTO t VALUES (1, 'a');
-- changefeed
EXPERIMENTAL CHANGEFEED FOR t WITH envelope = key_only;
-- expect
table,key,value
t,[1],
> DELETE FROM t WHERE id = 1;
t,[1],
