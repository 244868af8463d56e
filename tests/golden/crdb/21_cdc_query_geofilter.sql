-- cockroachdb-cdc-queries, Geofilter a changefeed: a filter on the crdb_region column (a plain
-- column here: one node, no REGIONAL BY ROW; the document's placeholders left out).
CREATE TABLE accounts (id INT PRIMARY KEY, crdb_region STRING NOT NULL, owner STRING);
INSERT INTO accounts (id, crdb_region, owner) VALUES (1, 'europe-west2', 'ana'), (2, 'us-east1', 'bo');
-- changefeed
CREATE CHANGEFEED AS SELECT * FROM accounts WHERE crdb_region = 'europe-west2';
-- expect
table,key,value
accounts,[1],"{""crdb_region"": ""europe-west2"", ""id"": 1, ""owner"": ""ana""}"
> UPDATE accounts SET owner = 'cy';
accounts,[1],"{""crdb_region"": ""europe-west2"", ""id"": 1, ""owner"": ""cy""}"
