-- cockroachdb-cdc-queries, Stabilize the changefeed message schema: typecasts in the projection
-- (the document's placeholder "INTO sink" left out: sinkless).
CREATE TABLE users (id INT PRIMARY KEY, name STRING, admin BOOL, extra STRING);
INSERT INTO users (id, name, admin, extra) VALUES (1, 'Ann', true, 'x');
-- changefeed
CREATE CHANGEFEED AS SELECT id::int, name::varchar, admin::bool FROM users;
-- expect
table,key,value
users,[1],"{""admin"": true, ""id"": 1, ""name"": ""Ann""}"
> UPDATE users SET extra = 'y', admin = false WHERE id = 1;
users,[1],"{""admin"": false, ""id"": 1, ""name"": ""Ann""}"
