-- cockroachdb-changefeed-messages.txt, Responses: INSERT gives [1] {"after": {"id": 1, "name": "Petee"}},
-- DELETE gives [1] {"after": null}
CREATE TABLE office_dogs (id INT PRIMARY KEY, name STRING);
-- changefeed
EXPERIMENTAL CHANGEFEED FOR office_dogs;
-- expect
table,key,value
> INSERT INTO office_dogs VALUES (1, 'Petee');
office_dogs,[1],"{""after"": {""id"": 1, ""name"": ""Petee""}}"
> DELETE FROM office_dogs WHERE name = 'Petee';
office_dogs,[1],"{""after"": null}"
