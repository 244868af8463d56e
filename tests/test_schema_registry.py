"""The schema registry server against real clients, and the Avro encoder end to end through it.

* Confluent's own ``SchemaRegistryClient`` and ``AvroDeserializer`` (confluent-kafka) read what the
  encoder framed, with schemas fetched from our server by id;
* fastavro with a schema fetched over plain HTTP;
* the REST API's status codes, ``error_code`` bodies and content type; compatibility levels;
* schema evolution after ADD/DROP COLUMN read by a client holding the old schema;
* durability: schemas and ids survive a restart of the server on the same directory.
"""

from __future__ import annotations

import io
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka.schema_registry as sr
import confluent_kafka.schema_registry.avro as avro_sr
import confluent_kafka.serialization as serialization
import fastavro
import httpx
import pytest

import changefeed
from changefeed.engine.catalog import TableSchema
from changefeed.engine.changes import rows_to_batch
from changefeed.exceptions import InvalidOption, SchemaRegistryError
from changefeed.formats.crdb_avro import CrdbAvroEncoder
from changefeed.formats.schema_registry import RegistryClient, parse_registry_url
from changefeed.server.registry import BackgroundRegistry
from tests.test_avro import _jsonable, change_row, feed_of, make_table

CT = "application/vnd.schemaregistry.v1+json"
LONG_REC = '{"type":"record","name":"t","fields":[{"name":"a","type":["null","long"],"default":null}]}'


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with BackgroundRegistry(tmp_path_factory.mktemp("registry")) as url:
        yield url


@pytest.fixture()
def http(registry: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=registry) as c:
        yield c


def register(http: httpx.Client, subject: str, schema: str) -> httpx.Response:
    return http.post(f"/subjects/{subject}/versions", json={"schema": schema}, headers={"Content-Type": CT})


def tables(tmp_path: Path, *statements: str) -> list[TableSchema]:
    """Run statements; the schema of the last-named table after each statement."""
    out: list[TableSchema] = []
    conn = changefeed.connect(str(tmp_path / "db"), dialect="sql")
    try:
        for s in statements:
            conn.execute(s)
            conn.db.refresh_catalog()
            t = conn.db.find_table(s.split()[2].split("(")[0])
            assert t is not None
            out.append(t)
    finally:
        conn.close()
    return out


# ============================================================================ the REST API


def test_register_and_read_back(http: httpx.Client) -> None:
    r = register(http, "api-value", LONG_REC)
    assert r.status_code == 200 and r.headers["content-type"] == CT
    sid = r.json()["id"]
    assert register(http, "api-value", LONG_REC).json() == {"id": sid}  # same schema, same id
    spaced = json.dumps(json.loads(LONG_REC), indent=2)
    assert register(http, "other-value", spaced).json() == {"id": sid}  # canonical form dedup
    assert http.get(f"/schemas/ids/{sid}").json() == {"schema": LONG_REC}
    assert http.get(f"/schemas/ids/{sid}/schema").json() == json.loads(LONG_REC)
    assert {"subject": "api-value", "version": 1} in http.get(f"/schemas/ids/{sid}/versions").json()
    assert "api-value" in http.get("/subjects").json()
    assert http.get("/subjects/api-value/versions").json() == [1]
    latest = http.get("/subjects/api-value/versions/latest").json()
    assert latest == {"subject": "api-value", "version": 1, "id": sid, "schema": LONG_REC}
    assert http.get("/subjects/api-value/versions/1/schema").json() == json.loads(LONG_REC)
    found = http.post("/subjects/api-value", json={"schema": LONG_REC}).json()
    assert found["id"] == sid and found["version"] == 1
    assert http.get("/mode").json() == {"mode": "READWRITE"}
    assert http.get("/config").json() == {"compatibilityLevel": "BACKWARD"}


def test_error_codes(http: httpx.Client) -> None:
    def err(r: httpx.Response) -> tuple[int, int]:
        assert r.headers["content-type"] == CT
        return r.status_code, r.json()["error_code"]

    assert err(http.get("/subjects/nope/versions")) == (404, 40401)
    register(http, "err-value", LONG_REC)
    assert err(http.get("/subjects/err-value/versions/7")) == (404, 40402)
    assert err(http.get("/schemas/ids/9999")) == (404, 40403)
    assert err(http.get("/subjects/err-value/versions/zero")) == (422, 42202)
    assert err(register(http, "err-value", '{"type":"record"}')) == (422, 42201)
    assert err(register(http, "err-value", "not json")) == (422, 42201)
    assert err(http.post("/subjects/err-value", json={"schema": '"string"'})) == (404, 40403)
    assert err(http.put("/config", json={"compatibility": "SIDEWAYS"})) == (422, 42203)
    assert err(http.get("/config/err-value")) == (404, 40408)
    assert err(http.get("/no/such/route")) == (404, 404)
    assert err(http.patch("/subjects")) == (405, 405)
    msg = http.get("/subjects/nope/versions").json()["message"]
    assert msg == "Subject 'nope' not found."


def test_compatibility(http: httpx.Client) -> None:
    # BACKWARD by default: adding a field without a default is refused, with a default accepted
    assert register(http, "cmp-value", LONG_REC).status_code == 200
    no_default = '{"type":"record","name":"t","fields":[{"name":"a","type":["null","long"],"default":null},{"name":"b","type":"string"}]}'
    with_default = '{"type":"record","name":"t","fields":[{"name":"a","type":["null","long"],"default":null},{"name":"b","type":["null","string"],"default":null}]}'
    promoted = '{"type":"record","name":"t","fields":[{"name":"a","type":["null","double"],"default":null}]}'
    check = http.post("/compatibility/subjects/cmp-value/versions/latest", json={"schema": no_default})
    assert check.json() == {"is_compatible": False}
    r = register(http, "cmp-value", no_default)
    assert r.status_code == 409 and r.json()["error_code"] == 409
    assert http.post("/compatibility/subjects/cmp-value/versions/1", json={"schema": promoted}).json() == {
        "is_compatible": True
    }  # long -> double promotion
    assert register(http, "cmp-value", with_default).status_code == 200
    assert http.get("/subjects/cmp-value/versions").json() == [1, 2]
    # FORWARD on the subject: old readers must read the new; dropping a defaulted field is fine
    assert http.put("/config/cmp-value", json={"compatibility": "FORWARD"}).json() == {
        "compatibility": "FORWARD"
    }
    assert http.get("/config/cmp-value").json() == {"compatibilityLevel": "FORWARD"}
    string_a = '{"type":"record","name":"t","fields":[{"name":"a","type":["null","string"],"default":null}]}'
    assert register(http, "cmp-value", string_a).status_code == 409
    http.put("/config/cmp-value", json={"compatibility": "NONE"})
    assert register(http, "cmp-value", string_a).status_code == 200


def test_soft_and_permanent_delete(http: httpx.Client) -> None:
    register(http, "del-value", LONG_REC)
    assert http.delete("/subjects/del-value/versions/1?permanent=true").json()["error_code"] == 40407
    assert http.delete("/subjects/del-value/versions/1").json() == 1
    assert http.delete("/subjects/del-value/versions/1").json()["error_code"] == 40406
    assert http.get("/subjects/del-value/versions").json()["error_code"] == 40401
    assert http.get("/subjects/del-value/versions?deleted=true").json() == [1]
    assert "del-value" not in http.get("/subjects").json()
    assert "del-value" in http.get("/subjects?deleted=true").json()
    register(http, "del-value", LONG_REC)  # re-registering after a soft delete: next version
    assert http.get("/subjects/del-value/versions").json() == [2]
    assert http.delete("/subjects/del-value?permanent=true").json()["error_code"] == 40405
    assert http.delete("/subjects/del-value").json() == [2]
    assert http.delete("/subjects/del-value?permanent=true").json() == [1, 2]
    assert http.get("/subjects/del-value/versions?deleted=true").json()["error_code"] == 40401


def test_keep_alive_and_bad_requests(registry: str) -> None:
    host, port = registry.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as s:
        f = s.makefile("rb")
        for _ in range(3):  # three requests on one connection
            s.sendall(b"GET /mode HTTP/1.1\r\nHost: x\r\n\r\n")
            assert f.readline().startswith(b"HTTP/1.1 200")
            length = 0
            while (line := f.readline()) != b"\r\n":
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            assert json.loads(f.read(length)) == {"mode": "READWRITE"}
        s.sendall(b"garbage\r\n\r\n")
        assert f.readline().startswith(b"HTTP/1.1 400")


def test_durable_across_restart(tmp_path: Path) -> None:
    with BackgroundRegistry(tmp_path) as url, httpx.Client(base_url=url) as h:
        assert register(h, "d-key", '"long"').json() == {"id": 1}  # ids from 1 in a fresh database
        assert register(h, "d-value", LONG_REC).json() == {"id": 2}
        h.put("/config", json={"compatibility": "FULL"})
    with BackgroundRegistry(tmp_path) as url, httpx.Client(base_url=url) as h:
        assert h.get("/schemas/ids/2").json() == {"schema": LONG_REC}
        assert h.get("/subjects").json() == ["d-key", "d-value"]
        assert register(h, "d-value", LONG_REC).json() == {"id": 2}
        assert register(h, "e-value", '"string"').json() == {"id": 3}
        assert h.get("/config").json() == {"compatibilityLevel": "FULL"}
    assert (tmp_path / "schema_registry.sqlite").exists()


def test_confluent_client_api(registry: str) -> None:
    client = sr.SchemaRegistryClient({"url": registry})
    sid = client.register_schema("cc-value", sr.Schema(LONG_REC, "AVRO"))
    assert client.get_schema(sid).schema_str == LONG_REC
    latest = client.get_latest_version("cc-value")
    assert (latest.schema_id, latest.version) == (sid, 1)
    assert client.lookup_schema("cc-value", sr.Schema(LONG_REC, "AVRO")).version == 1
    assert "cc-value" in client.get_subjects()
    assert client.get_versions("cc-value") == [1]
    assert client.test_compatibility("cc-value", sr.Schema(LONG_REC, "AVRO")) is True
    with pytest.raises(sr.error.SchemaRegistryError) as exc:
        client.get_schema(424242)
    assert exc.value.error_code == 40403


# ============================================================================ the encoder through the registry


def confluent_decode(registry: str, topic: str, key: bytes, value: bytes) -> tuple[Any, Any]:
    client = sr.SchemaRegistryClient({"url": registry})
    de = avro_sr.AvroDeserializer(client)
    ctx_k = serialization.SerializationContext(topic, serialization.MessageField.KEY)
    ctx_v = serialization.SerializationContext(topic, serialization.MessageField.VALUE)
    return de(key, ctx_k), (de(value, ctx_v) if value else None)


def test_core_example_through_registry(tmp_path: Path) -> None:
    """A fresh registry hands the spec's example ids 1 and 2; Confluent's deserializer reads it."""
    with BackgroundRegistry(tmp_path / "reg") as url:
        (t,) = tables(tmp_path, "CREATE TABLE cdc_test (a INT PRIMARY KEY)")
        enc = CrdbAvroEncoder()  # default resolver: the caching client for the feed's URL
        feed = feed_of(t, confluent_schema_registry=url)
        [(_, key, value, _)] = enc.encode_python(rows_to_batch(t, [change_row(t, 1, {"a": 0})]), t, feed)
        assert key == b"\x00\x00\x00\x00\x01\x02\x00"
        assert value == b"\x00\x00\x00\x00\x02\x02\x02\x00"
        assert key is not None
        assert confluent_decode(url, "cdc_test", key, value) == ({"a": 0}, {"after": {"a": 0}})
        # fastavro with the schema fetched over HTTP
        schema = json.loads(httpx.get(f"{url}/schemas/ids/2").json()["schema"])
        assert fastavro.schemaless_reader(io.BytesIO(value[5:]), fastavro.parse_schema(schema), None) == {
            "after": {"a": 0}
        }
        assert httpx.get(f"{url}/subjects").json() == ["cdc_test-key", "cdc_test-value"]


def test_types_through_confluent_deserializer(tmp_path: Path, registry: str) -> None:
    g = json.loads((Path(__file__).parent / "golden" / "avro" / "types.json").read_text())
    cols = ", ".join(f"{c['column']} {c['sql']}" for c in g["cases"])
    t = make_table(tmp_path, *g["setup"], f"CREATE TABLE types (k INT PRIMARY KEY, {cols})")
    row = {"k": 7, **{c["column"]: c["value"] for c in g["cases"]}}
    feed = feed_of(t, confluent_schema_registry=registry, updated=True, diff=True)
    [(_, key, value, _)] = CrdbAvroEncoder().encode_python(rows_to_batch(t, [change_row(t, 1, row)]), t, feed)
    assert key is not None
    k, v = confluent_decode(registry, "types", key, value)
    assert k == {"k": 7}
    assert v["before"] is None and v["updated"] == "1000.0000000000"
    assert [_jsonable(v["after"][c["column"]]) for c in g["cases"]] == [c["decoded"] for c in g["cases"]]


def test_schema_evolution(tmp_path: Path, registry: str) -> None:
    """ADD and DROP COLUMN register new versions; a client holding the first schema reads them all."""
    t1, t2, t3 = tables(
        tmp_path,
        "CREATE TABLE evo (id INT PRIMARY KEY, name STRING)",
        "ALTER TABLE evo ADD COLUMN likes_treats BOOL DEFAULT TRUE",
        "ALTER TABLE evo DROP COLUMN name",
    )
    enc = CrdbAvroEncoder(RegistryClient(registry))
    msgs = []
    for t, row in ((t1, {"id": 1, "name": "Petee"}), (t2, {"id": 2, "name": "Carl", "likes_treats": True}), (t3, {"id": 3, "likes_treats": False})):  # fmt: skip
        feed = feed_of(t, confluent_schema_registry=registry)
        msgs += enc.encode_python(rows_to_batch(t, [change_row(t, 1, row)]), t, feed)
    ids = [int.from_bytes(v[1:5], "big") for _, _, v, _ in msgs]
    assert len(set(ids)) == 3
    versions = httpx.get(f"{registry}/subjects/evo-value/versions").json()
    assert versions == [1, 2, 3]
    old_reader = fastavro.parse_schema(
        json.loads(httpx.get(f"{registry}/schemas/ids/{ids[0]}").json()["schema"])
    )
    read = []
    for (_, _, v, _), sid in zip(msgs, ids, strict=True):
        writer = fastavro.parse_schema(
            json.loads(httpx.get(f"{registry}/schemas/ids/{sid}").json()["schema"])
        )
        read.append(fastavro.schemaless_reader(io.BytesIO(v[5:]), writer, old_reader))
    assert read == [
        {"after": {"id": 1, "name": "Petee"}},
        {"after": {"id": 2, "name": "Carl"}},
        {"after": {"id": 3, "name": None}},
    ]


def test_client_errors(tmp_path: Path) -> None:
    with pytest.raises(InvalidOption, match='unsupported scheme: "ftp"'):
        parse_registry_url("ftp://localhost:8081")
    with pytest.raises(InvalidOption, match="port"):
        parse_registry_url("http://localhost:notaport")
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = RegistryClient(f"http://127.0.0.1:{port}", timeout=2)
    with pytest.raises(SchemaRegistryError, match="contacting confluent schema registry"):
        client.register("x-value", '"long"')
    with pytest.raises(SchemaRegistryError, match="contacting confluent schema registry"):
        client.ping()
    with BackgroundRegistry(tmp_path) as url:
        client = RegistryClient(url)
        client.ping()
        with pytest.raises(SchemaRegistryError, match=rf"registering schema to {url} 422"):
            client.register("x-value", '{"type":"nope"}')
        assert client.register("x-value", '"long"') == 1
        assert client.register("x-value", '"long"') == 1  # cached


def test_lookups_per_second_smoke(registry: str) -> None:
    """Keep-alive lookups are fast (the benchmark measures; this only guards against a collapse)."""
    import http.client
    import time

    register(httpx.Client(base_url=registry), "speed-value", LONG_REC)
    host, port = registry.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port))
    n, start = 300, time.perf_counter()
    for _ in range(n):
        conn.request("GET", "/subjects/speed-value/versions/latest")
        conn.getresponse().read()
    assert n / (time.perf_counter() - start) > 200


def test_confluent_serializer_registers(registry: str) -> None:
    """A producer's AvroSerializer auto-registers (and, with use.latest.version, looks up) here."""
    client = sr.SchemaRegistryClient({"url": registry})
    schema = '{"type":"record","name":"u","fields":[{"name":"x","type":"long"}]}'
    ctx = serialization.SerializationContext("produced", serialization.MessageField.VALUE)
    framed = avro_sr.AvroSerializer(client, schema)({"x": 5}, ctx)
    sid = int.from_bytes(framed[1:5], "big")
    assert framed[5:] == b"\n" and client.get_latest_version("produced-value").schema_id == sid
    latest = avro_sr.AvroSerializer(
        client, schema, conf={"auto.register.schemas": False, "use.latest.version": True}
    )
    assert latest({"x": 6}, ctx)[:5] == framed[:5]
    assert avro_sr.AvroDeserializer(client)(framed, ctx) == {"x": 5}


def _register_many(args: tuple[str, int]) -> list[int]:
    db, _worker = args
    from changefeed.server.registry.compat import canonical
    from changefeed.server.registry.store import RegistryStore

    store = RegistryStore(Path(db))
    try:
        out = []
        for i in range(30):
            text = f'{{"type":"fixed","name":"f{i}","size":{i + 1}}}'
            out.append(store.register(f"s{i % 3}", canonical(json.loads(text)), text, "AVRO")[0])
        return out
    finally:
        store.close()


def test_concurrent_processes_share_ids(tmp_path: Path) -> None:
    """Two processes registering the same schemas into one directory agree on every id."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        a, b = pool.map(_register_many, [(str(tmp_path), 0), (str(tmp_path), 1)])
    assert a == b
    assert sorted(set(a)) == list(range(1, 31))


def test_serve_command(tmp_path: Path) -> None:
    """``changefeed serve --registry`` answers, and SIGTERM ends it with exit 0."""
    import os
    import signal
    import subprocess
    import sys
    import time

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    src = str(Path(__file__).resolve().parents[1] / "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p)}
    cmd = [sys.executable, "-m", "changefeed.cli.main", "serve", "--db", str(tmp_path / "db")]
    proc = subprocess.Popen([*cmd, "--registry", f"127.0.0.1:{port}"], env=env, stderr=subprocess.PIPE)
    try:
        for _ in range(300):
            try:
                r = httpx.get(f"http://127.0.0.1:{port}/mode", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.05)
        assert r.json() == {"mode": "READWRITE"}
        assert register(httpx.Client(base_url=f"http://127.0.0.1:{port}"), "cli-key", '"long"').json() == {
            "id": 1
        }
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    assert (tmp_path / "db" / "schema_registry.sqlite").exists()


def test_core_changefeed_avro_example(tmp_path: Path) -> None:
    """The spec's Avro core changefeed, through ``conn.stream``."""
    from tests.test_avro import octal

    expected = (Path(__file__).parent / "golden" / "avro" / "core_changefeed.txt").read_text().splitlines()
    with BackgroundRegistry(tmp_path / "registry") as url:
        conn = changefeed.connect(str(tmp_path / "db"), dialect="sql")
        try:
            conn.execute("CREATE TABLE cdc_test (a INT PRIMARY KEY)")
            conn.execute("INSERT INTO cdc_test VALUES (0)")
            stmt = f"EXPERIMENTAL CHANGEFEED FOR cdc_test WITH format = avro, confluent_schema_registry = '{url}'"
            stream = iter(conn.stream(stmt))
            try:
                table, key, value = next(stream)
            finally:
                close = getattr(stream, "close", None)
                if close is not None:
                    close()
        finally:
            conn.close()
    assert key is not None
    assert ["table,key,value", f"{table},{octal(key)},{octal(value)}"] == expected


@pytest.mark.spark
def test_avro_job_on_spark(tmp_path: Path, spark: Any) -> None:
    """CREATE CHANGEFEED .. INTO 'topics://' WITH format = avro: the Spark job encodes on the
    executors, registers through our registry, and Confluent's deserializer reads every record."""
    from changefeed.pipeline.runner import run_until_idle
    from changefeed.testing.validators import read_topic

    db = tmp_path / "db"
    with BackgroundRegistry(tmp_path / "registry") as url:
        conn = changefeed.connect(db)
        try:
            conn.execute("CREATE TABLE t (a INT PRIMARY KEY, b STRING)")
            conn.execute("INSERT INTO t VALUES (1, 'x'), (2, 'y')")
            conn.execute(
                f"CREATE CHANGEFEED FOR t INTO 'topics://' WITH format = avro, "
                f"confluent_schema_registry = '{url}', diff"
            )
            conn.execute("UPDATE t SET b = 'z' WHERE a = 1")
            conn.execute("DELETE FROM t WHERE a = 2")
        finally:
            conn.close()
        run_until_idle(db, spark=spark, gc=False)
        records = read_topic(db, "t")
        got = sorted(
            (confluent_decode(url, "t", k, v) for _, _, k, v, _ in records if k is not None),
            key=lambda kv: (kv[0]["a"], kv[1]["after"] is None, str(kv[1]["after"])),
        )
        assert httpx.get(f"{url}/subjects").json() == ["t-key", "t-value"]
    assert got == [
        ({"a": 1}, {"before": None, "after": {"a": 1, "b": "x"}}),
        ({"a": 1}, {"before": {"a": 1, "b": "x"}, "after": {"a": 1, "b": "z"}}),
        ({"a": 2}, {"before": None, "after": {"a": 2, "b": "y"}}),
        ({"a": 2}, {"before": {"a": 2, "b": "y"}, "after": None}),
    ]
