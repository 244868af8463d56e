-- cockroachdb-experimental-changefeed-for.txt, Examples, "Create a changefeed"
CREATE TABLE cdc_test (a INT PRIMARY KEY);
INSERT INTO cdc_test VALUES (0);
-- changefeed
EXPERIMENTAL CHANGEFEED FOR cdc_test;
-- expect
table,key,value
cdc_test,[0],"{""after"": {""a"": 0}}"
