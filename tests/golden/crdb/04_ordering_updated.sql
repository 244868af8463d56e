-- cockroachdb-changefeed-messages.txt, Ordering guarantees: with UPDATED each version of the row is
-- emitted once, in the order of its transactions:
--   [1] {"__crdb__": {"updated": <timestamp 1>}, "id": 1, "name": "Carl"}
--   [1] {"__crdb__": {"updated": <timestamp 2>}, "id": 1, "name": "Petee"}
-- (the document shows the row envelope; a core changefeed streams it to the client)
CREATE TABLE foo (id INT PRIMARY KEY DEFAULT unique_rowid(), name STRING);
-- changefeed
CREATE CHANGEFEED FOR TABLE foo WITH UPDATED, envelope = 'row';
-- expect
table,key,value
> INSERT INTO foo VALUES (1, 'Carl');
> UPDATE foo SET name = 'Petee' WHERE id = 1;
foo,[1],"{""__crdb__"": {""updated"": ""<ts1>""}, ""id"": 1, ""name"": ""Carl""}"
foo,[1],"{""__crdb__"": {""updated"": ""<ts2>""}, ""id"": 1, ""name"": ""Petee""}"
