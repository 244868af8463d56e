-- cockroachdb-changefeed-messages.txt: "If a row is modified more than once in the same transaction,
-- only the last change will be emitted." Creating and deleting a row in one transaction never gives
-- an insert message.
CREATE TABLE t (id INT PRIMARY KEY, name STRING);
-- changefeed
EXPERIMENTAL CHANGEFEED FOR t WITH diff;
-- expect
table,key,value
> BEGIN; INSERT INTO t VALUES (1, 'a'); UPDATE t SET name = 'b' WHERE id = 1; UPDATE t SET name = 'c' WHERE id = 1; COMMIT;
t,[1],"{""after"": {""id"": 1, ""name"": ""c""}, ""before"": null}"
> BEGIN; INSERT INTO t VALUES (2, 'x'); DELETE FROM t WHERE id = 2; UPDATE t SET name = 'd' WHERE id = 1; COMMIT;
t,[2],"{""after"": null, ""before"": null}"
t,[1],"{""after"": {""id"": 1, ""name"": ""d""}, ""before"": {""id"": 1, ""name"": ""c""}}"
