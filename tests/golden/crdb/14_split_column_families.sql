-- cockroachdb-experimental-changefeed-for.txt, "Create a changefeed on a table with column families":
-- EXPERIMENTAL CHANGEFEED FOR TABLE cdc_test WITH split_column_families; messages for each column
-- family, labelled table.family (an update emits only the families it wrote; a delete every family).
CREATE TABLE cdc_test (a INT PRIMARY KEY, b STRING, c STRING, FAMILY f1 (a, b), FAMILY f2 (c));
INSERT INTO cdc_test VALUES (0, 'dog', 'cat');
-- changefeed
EXPERIMENTAL CHANGEFEED FOR TABLE cdc_test WITH split_column_families;
-- expect
table,key,value
cdc_test.f1,[0],"{""after"": {""a"": 0, ""b"": ""dog""}}"
cdc_test.f2,[0],"{""after"": {""c"": ""cat""}}"
> UPDATE cdc_test SET c = 'mouse' WHERE a = 0;
cdc_test.f2,[0],"{""after"": {""c"": ""mouse""}}"
> DELETE FROM cdc_test WHERE a = 0;
cdc_test.f1,[0],"{""after"": null}"
cdc_test.f2,[0],"{""after"": null}"
