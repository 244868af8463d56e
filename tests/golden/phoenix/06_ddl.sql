-- CDCQueryIT.testSelectCDCWithDDL: images follow the table's current schema; a dropped column's
-- values disappear from every image, an added column (upper-cased, a Phoenix type) appears.
CREATE TABLE T (k INTEGER PRIMARY KEY, v0 INTEGER, v1 INTEGER) COLUMN_ENCODED_BYTES=0;
CREATE CDC C ON T INCLUDE (PRE, POST, CHANGE);
UPSERT INTO T VALUES (1, 0, 10);
ALTER TABLE T DROP COLUMN v0;
ALTER TABLE T ADD v2 SMALLINT;
UPSERT INTO T (k, v1, v2) VALUES (1, 11, 7);
SELECT * FROM C;
>>>
+-------------------------+---+-------------------------------------------------------------------------------------------------------------+
| PHOENIX_ROW_TIMESTAMP() | K |                                                   CDC JSON                                                  |
+-------------------------+---+-------------------------------------------------------------------------------------------------------------+
| 2024-05-28 09:55:30.423 | 1 | {"change_image":{"V1":10},"post_image":{"V1":10},"event_type":"upsert","pre_image":{}}                      |
| 2024-05-28 09:55:30.723 | 1 | {"change_image":{"V1":11,"V2":7},"post_image":{"V2":7,"V1":11},"event_type":"upsert","pre_image":{"V1":10}} |
+-------------------------+---+-------------------------------------------------------------------------------------------------------------+
2 rows selected
<<<
SELECT * FROM T;
>>>
+---+----+----+
| K | V1 | V2 |
+---+----+----+
| 1 | 11 | 7  |
+---+----+----+
1 row selected
<<<
