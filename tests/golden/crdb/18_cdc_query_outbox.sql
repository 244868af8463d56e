-- cockroachdb-cdc-queries, Queries and the outbox pattern: only the initial insert of an outbox row
-- sends a message, "(cdc_prev).status IS NULL" (the document's placeholder sink left out).
CREATE TABLE outbox (id INT PRIMARY KEY, status STRING, payload STRING);
-- changefeed
CREATE CHANGEFEED AS SELECT status, cdc_prev FROM outbox WHERE (cdc_prev).status IS NULL;
-- expect
table,key,value
> INSERT INTO outbox (id, status, payload) VALUES (1, 'new', 'order 1');
outbox,[1],"{""cdc_prev"": null, ""status"": ""new""}"
> UPDATE outbox SET status = 'sent' WHERE id = 1;
> INSERT INTO outbox (id, status, payload) VALUES (2, 'new', 'order 2');
outbox,[2],"{""cdc_prev"": null, ""status"": ""new""}"
