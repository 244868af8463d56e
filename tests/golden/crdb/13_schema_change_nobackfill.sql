-- cockroachdb-changefeed-messages.txt: "When using the schema_change_policy = nobackfill option, the
-- changefeed will still emit duplicate records for the table that is being altered ... but not the
-- new schema records."
CREATE TABLE office_dogs (id INT PRIMARY KEY, name STRING);
INSERT INTO office_dogs VALUES (1, 'Petee H');
INSERT INTO office_dogs VALUES (2, 'Carl');
-- changefeed
EXPERIMENTAL CHANGEFEED FOR office_dogs WITH envelope = 'row', schema_change_policy = 'nobackfill';
-- expect
table,key,value
office_dogs,[1],"{""id"": 1, ""name"": ""Petee H""}"
office_dogs,[2],"{""id"": 2, ""name"": ""Carl""}"
> ALTER TABLE office_dogs ADD COLUMN likes_treats BOOL DEFAULT TRUE;
office_dogs,[1],"{""id"": 1, ""name"": ""Petee H""}"
office_dogs,[2],"{""id"": 2, ""name"": ""Carl""}"
> INSERT INTO office_dogs VALUES (3, 'Ernie', false);
office_dogs,[3],"{""id"": 3, ""likes_treats"": false, ""name"": ""Ernie""}"
