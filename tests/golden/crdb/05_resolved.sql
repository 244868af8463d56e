-- cockroachdb-changefeed-messages.txt, Ordering guarantees: updated rows, then resolved timestamp
-- messages ({"__crdb__":{"resolved":"..."}} in the row envelope), then a later row:
--   {"__crdb__": {"updated": "1532377312562986715.0000000000"}, "id": 1, "name": "Petee H"}
--   ...
--   {"__crdb__":{"resolved":"1532379887442299001.0000000000"}}
--   {"__crdb__": {"updated": "1532379923319195777.0000000000"}, "id": 4, "name": "Lucky"}
-- Runs of resolved messages show as one line (how many come depends on timing).
CREATE TABLE office_dogs (id INT PRIMARY KEY, name STRING);
INSERT INTO office_dogs VALUES (1, 'Petee H');
INSERT INTO office_dogs VALUES (2, 'Carl');
INSERT INTO office_dogs VALUES (3, 'Ernie');
-- changefeed
EXPERIMENTAL CHANGEFEED FOR office_dogs WITH updated, resolved = '100ms', envelope = 'row';
-- expect
table,key,value
office_dogs,[1],"{""__crdb__"": {""updated"": ""<ts1>""}, ""id"": 1, ""name"": ""Petee H""}"
office_dogs,[2],"{""__crdb__"": {""updated"": ""<ts1>""}, ""id"": 2, ""name"": ""Carl""}"
office_dogs,[3],"{""__crdb__"": {""updated"": ""<ts1>""}, ""id"": 3, ""name"": ""Ernie""}"
,,"{""__crdb__"":{""resolved"":""<ts2>""}}"
> INSERT INTO office_dogs VALUES (4, 'Lucky');
office_dogs,[4],"{""__crdb__"": {""updated"": ""<ts3>""}, ""id"": 4, ""name"": ""Lucky""}"
,,"{""__crdb__"":{""resolved"":""<ts4>""}}"
