-- cockroachdb-experimental-changefeed-for.txt: "use the FAMILY keyword for a specific column family":
-- EXPERIMENTAL CHANGEFEED FOR TABLE cdc_test FAMILY f1;
CREATE TABLE cdc_test (a INT PRIMARY KEY, b STRING, c STRING, FAMILY f1 (a, b), FAMILY f2 (c));
INSERT INTO cdc_test VALUES (0, 'dog', 'cat');
-- changefeed
EXPERIMENTAL CHANGEFEED FOR TABLE cdc_test FAMILY f1;
-- expect
table,key,value
cdc_test.f1,[0],"{""after"": {""a"": 0, ""b"": ""dog""}}"
> UPDATE cdc_test SET c = 'mouse' WHERE a = 0;
> UPDATE cdc_test SET b = 'wolf' WHERE a = 0;
cdc_test.f1,[0],"{""after"": {""a"": 0, ""b"": ""wolf""}}"
