-- CDCQueryIT.testSelectCDC / CDCBaseIT.generateChanges: the reference's worked example (12 events).
CREATE TABLE T (k INTEGER NOT NULL, v1 INTEGER, v2 INTEGER, B.vb INTEGER, CONSTRAINT PK PRIMARY KEY (k));
UPSERT INTO T (k, v1) VALUES (9, 9);
CREATE CDC C ON T;
BEGIN;
UPSERT INTO T (K, V1, V2, B.VB) VALUES (1, 100, 1000, 10000);
UPSERT INTO T (K, V1, V2) VALUES (2, 200, 2000);
COMMIT;
UPSERT INTO T (K, V1, V2, B.VB) VALUES (3, 300, NULL, NULL);
UPSERT INTO T (K, V1) VALUES (1, 101);
DELETE FROM T WHERE K = 1;
DELETE FROM T WHERE K = 1;
UPSERT INTO T (K, V1, V2) VALUES (1, 102, 1002);
DELETE FROM T WHERE K = 1;
UPSERT INTO T (K, V1, V2, B.VB) VALUES (2, 201, NULL, 20001);
UPSERT INTO T (K, V1, V2) VALUES (1, 103, 1003);
DELETE FROM T WHERE K = 1;
UPSERT INTO T (K, V1, V2) VALUES (1, 104, 1004);
DELETE FROM T WHERE K = 1;
SELECT /*+ CDC_INCLUDE(CHANGE, PRE, POST) */ * FROM C ORDER BY PHOENIX_ROW_TIMESTAMP(), K;
>>>
+-------------------------+---+----------------------------------------------------------------------------------------------------------------------------------------------------------+
| PHOENIX_ROW_TIMESTAMP() | K |                                                                         CDC JSON                                                                         |
+-------------------------+---+----------------------------------------------------------------------------------------------------------------------------------------------------------+
| 2024-05-28 09:55:30.623 | 1 | {"change_image":{"B.VB":10000,"V1":100,"V2":1000},"post_image":{"V1":100,"V2":1000,"B.VB":10000},"event_type":"upsert","pre_image":{}}                   |
| 2024-05-28 09:55:30.623 | 2 | {"change_image":{"V1":200,"V2":2000},"post_image":{"V2":2000,"V1":200},"event_type":"upsert","pre_image":{}}                                             |
| 2024-05-28 09:55:30.923 | 3 | {"change_image":{"B.VB":null,"V1":300,"V2":null},"post_image":{"V1":300,"V2":null,"B.VB":null},"event_type":"upsert","pre_image":{}}                     |
| 2024-05-28 09:55:31.023 | 1 | {"change_image":{"V1":101},"post_image":{"V1":101,"V2":1000,"B.VB":10000},"event_type":"upsert","pre_image":{"B.VB":10000,"V1":100,"V2":1000}}           |
| 2024-05-28 09:55:31.123 | 1 | {"event_type":"delete","pre_image":{"B.VB":10000,"V1":101,"V2":1000}}                                                                                    |
| 2024-05-28 09:55:31.323 | 1 | {"change_image":{"V1":102,"V2":1002},"post_image":{"V2":1002,"V1":102},"event_type":"upsert","pre_image":{}}                                             |
| 2024-05-28 09:55:31.423 | 1 | {"event_type":"delete","pre_image":{"V1":102,"V2":1002}}                                                                                                 |
| 2024-05-28 09:55:31.523 | 2 | {"change_image":{"B.VB":20001,"V1":201,"V2":null},"post_image":{"V2":null,"B.VB":20001,"V1":201},"event_type":"upsert","pre_image":{"V1":200,"V2":2000}} |
| 2024-05-28 09:55:31.623 | 1 | {"change_image":{"V1":103,"V2":1003},"post_image":{"V2":1003,"V1":103},"event_type":"upsert","pre_image":{}}                                             |
| 2024-05-28 09:55:31.723 | 1 | {"event_type":"delete","pre_image":{"V1":103,"V2":1003}}                                                                                                 |
| 2024-05-28 09:55:31.823 | 1 | {"change_image":{"V1":104,"V2":1004},"post_image":{"V2":1004,"V1":104},"event_type":"upsert","pre_image":{}}                                             |
| 2024-05-28 09:55:31.923 | 1 | {"event_type":"delete","pre_image":{"V1":104,"V2":1004}}                                                                                                 |
+-------------------------+---+----------------------------------------------------------------------------------------------------------------------------------------------------------+
12 rows selected
<<<
SELECT * FROM C;
>>>
+-------------------------+---+-------------------------+
| PHOENIX_ROW_TIMESTAMP() | K |         CDC JSON        |
+-------------------------+---+-------------------------+
| 2024-05-28 09:55:30.623 | 1 | {"event_type":"upsert"} |
| 2024-05-28 09:55:30.623 | 2 | {"event_type":"upsert"} |
| 2024-05-28 09:55:30.923 | 3 | {"event_type":"upsert"} |
| 2024-05-28 09:55:31.023 | 1 | {"event_type":"upsert"} |
| 2024-05-28 09:55:31.123 | 1 | {"event_type":"delete"} |
| 2024-05-28 09:55:31.323 | 1 | {"event_type":"upsert"} |
| 2024-05-28 09:55:31.423 | 1 | {"event_type":"delete"} |
| 2024-05-28 09:55:31.523 | 2 | {"event_type":"upsert"} |
| 2024-05-28 09:55:31.623 | 1 | {"event_type":"upsert"} |
| 2024-05-28 09:55:31.723 | 1 | {"event_type":"delete"} |
| 2024-05-28 09:55:31.823 | 1 | {"event_type":"upsert"} |
| 2024-05-28 09:55:31.923 | 1 | {"event_type":"delete"} |
+-------------------------+---+-------------------------+
12 rows selected
<<<
SELECT 'dummy', k, "CDC JSON" FROM C ORDER BY PHOENIX_ROW_TIMESTAMP() ASC, K ASC;
>>>
+---------+---+-------------------------+
| 'dummy' | K |         CDC JSON        |
+---------+---+-------------------------+
| dummy   | 1 | {"event_type":"upsert"} |
| dummy   | 2 | {"event_type":"upsert"} |
| dummy   | 3 | {"event_type":"upsert"} |
| dummy   | 1 | {"event_type":"upsert"} |
| dummy   | 1 | {"event_type":"delete"} |
| dummy   | 1 | {"event_type":"upsert"} |
| dummy   | 1 | {"event_type":"delete"} |
| dummy   | 2 | {"event_type":"upsert"} |
| dummy   | 1 | {"event_type":"upsert"} |
| dummy   | 1 | {"event_type":"delete"} |
| dummy   | 1 | {"event_type":"upsert"} |
| dummy   | 1 | {"event_type":"delete"} |
+---------+---+-------------------------+
12 rows selected
<<<
SELECT PHOENIX_ROW_TIMESTAMP(), k, "CDC JSON" FROM C ORDER BY k ASC;
>>>
+-------------------------+---+-------------------------+
| PHOENIX_ROW_TIMESTAMP() | K |         CDC JSON        |
+-------------------------+---+-------------------------+
| 2024-05-28 09:55:30.623 | 1 | {"event_type":"upsert"} |
| 2024-05-28 09:55:31.023 | 1 | {"event_type":"upsert"} |
| 2024-05-28 09:55:31.123 | 1 | {"event_type":"delete"} |
| 2024-05-28 09:55:31.323 | 1 | {"event_type":"upsert"} |
| 2024-05-28 09:55:31.423 | 1 | {"event_type":"delete"} |
| 2024-05-28 09:55:31.623 | 1 | {"event_type":"upsert"} |
| 2024-05-28 09:55:31.723 | 1 | {"event_type":"delete"} |
| 2024-05-28 09:55:31.823 | 1 | {"event_type":"upsert"} |
| 2024-05-28 09:55:31.923 | 1 | {"event_type":"delete"} |
| 2024-05-28 09:55:30.623 | 2 | {"event_type":"upsert"} |
| 2024-05-28 09:55:31.523 | 2 | {"event_type":"upsert"} |
| 2024-05-28 09:55:30.923 | 3 | {"event_type":"upsert"} |
+-------------------------+---+-------------------------+
12 rows selected
<<<
SELECT PHOENIX_ROW_TIMESTAMP(), k, "CDC JSON" FROM C ORDER BY k DESC;
>>>
+-------------------------+---+-------------------------+
| PHOENIX_ROW_TIMESTAMP() | K |         CDC JSON        |
+-------------------------+---+-------------------------+
| 2024-05-28 09:55:30.923 | 3 | {"event_type":"upsert"} |
| 2024-05-28 09:55:30.623 | 2 | {"event_type":"upsert"} |
| 2024-05-28 09:55:31.523 | 2 | {"event_type":"upsert"} |
| 2024-05-28 09:55:30.623 | 1 | {"event_type":"upsert"} |
| 2024-05-28 09:55:31.023 | 1 | {"event_type":"upsert"} |
| 2024-05-28 09:55:31.123 | 1 | {"event_type":"delete"} |
| 2024-05-28 09:55:31.323 | 1 | {"event_type":"upsert"} |
| 2024-05-28 09:55:31.423 | 1 | {"event_type":"delete"} |
| 2024-05-28 09:55:31.623 | 1 | {"event_type":"upsert"} |
| 2024-05-28 09:55:31.723 | 1 | {"event_type":"delete"} |
| 2024-05-28 09:55:31.823 | 1 | {"event_type":"upsert"} |
| 2024-05-28 09:55:31.923 | 1 | {"event_type":"delete"} |
+-------------------------+---+-------------------------+
12 rows selected
<<<
SELECT /*+ CDC_INCLUDE(CHANGE) */ PHOENIX_ROW_TIMESTAMP(), "CDC JSON" FROM C ORDER BY PHOENIX_ROW_TIMESTAMP() DESC LIMIT 1;
>>>
+-------------------------+-------------------------+
| PHOENIX_ROW_TIMESTAMP() |         CDC JSON        |
+-------------------------+-------------------------+
| 2024-05-28 09:55:31.923 | {"event_type":"delete"} |
+-------------------------+-------------------------+
1 row selected
<<<
SELECT * FROM T;
>>>
+---+-----+------+-------+
| K |  V1 |  V2  |   VB  |
+---+-----+------+-------+
| 2 | 201 | null | 20001 |
| 3 | 300 | null | null  |
| 9 | 9   | null | null  |
+---+-----+------+-------+
3 rows selected
<<<
