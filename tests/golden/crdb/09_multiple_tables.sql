-- cockroachdb-experimental-changefeed-for.txt: "A core changefeed can watch one table or multiple tables
-- in a comma-separated list." Messages follow the transactions' commit order.
CREATE TABLE a (id INT PRIMARY KEY);
CREATE TABLE b (id INT PRIMARY KEY, note STRING);
INSERT INTO a VALUES (1);
-- changefeed
EXPERIMENTAL CHANGEFEED FOR TABLE a, TABLE b WITH updated;
-- expect
table,key,value
a,[1],"{""after"": {""id"": 1}, ""updated"": ""<ts1>""}"
> INSERT INTO b VALUES (7, 'x');
> INSERT INTO a VALUES (2);
b,[7],"{""after"": {""id"": 7, ""note"": ""x""}, ""updated"": ""<ts2>""}"
a,[2],"{""after"": {""id"": 2}, ""updated"": ""<ts3>""}"
