-- cockroachdb-cdc-queries, Filter delete messages / the outbox pattern: "WHERE event_op() !=
-- 'delete'" removes the delete messages (the document's Kafka endpoint left out: sinkless).
CREATE TABLE outbox (id INT PRIMARY KEY, status STRING, payload STRING);
-- changefeed
CREATE CHANGEFEED AS SELECT * FROM outbox WHERE event_op() != 'delete';
-- expect
table,key,value
> INSERT INTO outbox (id, status, payload) VALUES (1, 'new', 'order 1');
outbox,[1],"{""id"": 1, ""payload"": ""order 1"", ""status"": ""new""}"
> DELETE FROM outbox WHERE id = 1;
> INSERT INTO outbox (id, status, payload) VALUES (2, 'new', 'order 2');
outbox,[2],"{""id"": 2, ""payload"": ""order 2"", ""status"": ""new""}"
