-- cockroachdb-changefeed-messages.txt, Schema changes with column backfill: adding a column with a
-- default re-emits the watched rows (the duplicates), then outputs them in the new schema.
CREATE TABLE office_dogs (id INT PRIMARY KEY, name STRING);
INSERT INTO office_dogs VALUES (1, 'Petee H');
INSERT INTO office_dogs VALUES (2, 'Carl');
INSERT INTO office_dogs VALUES (3, 'Ernie');
-- changefeed
EXPERIMENTAL CHANGEFEED FOR office_dogs WITH envelope = 'row';
-- expect
table,key,value
office_dogs,[1],"{""id"": 1, ""name"": ""Petee H""}"
office_dogs,[2],"{""id"": 2, ""name"": ""Carl""}"
office_dogs,[3],"{""id"": 3, ""name"": ""Ernie""}"
> ALTER TABLE office_dogs ADD COLUMN likes_treats BOOL DEFAULT TRUE;
office_dogs,[1],"{""id"": 1, ""name"": ""Petee H""}"
office_dogs,[2],"{""id"": 2, ""name"": ""Carl""}"
office_dogs,[3],"{""id"": 3, ""name"": ""Ernie""}"
office_dogs,[1],"{""id"": 1, ""likes_treats"": true, ""name"": ""Petee H""}"
office_dogs,[2],"{""id"": 2, ""likes_treats"": true, ""name"": ""Carl""}"
office_dogs,[3],"{""id"": 3, ""likes_treats"": true, ""name"": ""Ernie""}"
> INSERT INTO office_dogs VALUES (4, 'Lucky', false);
office_dogs,[4],"{""id"": 4, ""likes_treats"": false, ""name"": ""Lucky""}"
