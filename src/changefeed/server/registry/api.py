"""The Confluent Schema Registry REST API over :class:`RegistryStore`.

Routes (Confluent's paths, bodies, status codes and ``{"error_code", "message"}`` errors; content
type ``application/vnd.schemaregistry.v1+json``)::

    GET    /                                   {}
    GET    /schemas/types                      ["AVRO"]
    GET    /schemas/ids/{id}                   {"schema": ...}
    GET    /schemas/ids/{id}/schema            the schema itself
    GET    /schemas/ids/{id}/versions          [{"subject", "version"}]
    GET    /schemas/ids/{id}/subjects          [subject]
    GET    /subjects[?deleted=true]            [subject]
    POST   /subjects/{s}                       lookup: {"subject", "version", "id", "schema"}
    DELETE /subjects/{s}[?permanent=true]      [version]
    GET    /subjects/{s}/versions              [version]
    POST   /subjects/{s}/versions              register: {"id"}
    GET    /subjects/{s}/versions/{v|latest}   {"subject", "version", "id", "schema"}
    GET    /subjects/{s}/versions/{v}/schema   the schema itself
    DELETE /subjects/{s}/versions/{v}          version
    POST   /compatibility/subjects/{s}/versions/{v|latest}   {"is_compatible"}
    GET|PUT|DELETE /config[/{s}]               {"compatibilityLevel"} / {"compatibility"}
    GET    /mode[/{s}]                         {"mode": "READWRITE"}
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import orjson

from changefeed.server.http.wire import Request, Response
from changefeed.server.registry import compat
from changefeed.server.registry.store import (
    COMPATIBILITY_LEVELS,
    DEFAULT_COMPATIBILITY,
    RegistryStore,
    Version,
)

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
MAX_VERSION = 2**31 - 1


class ApiError(Exception):
    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def error_response(status: int, message: str, code: int | None = None) -> Response:
    body = orjson.dumps({"error_code": code if code is not None else status, "message": message})
    return Response(status, body, CONTENT_TYPE)


def _ok(value: Any) -> Response:
    return Response(200, orjson.dumps(value), CONTENT_TYPE)


def subject_not_found(s: str) -> ApiError:
    return ApiError(404, 40401, f"Subject '{s}' not found.")


def version_not_found(v: object) -> ApiError:
    return ApiError(404, 40402, f"Version {v} not found.")


def _flag(req: Request, name: str) -> bool:
    return req.param(name, "false").lower() == "true"


def _body(req: Request) -> dict[str, Any]:
    if not req.body.strip():
        return {}
    try:
        obj = orjson.loads(req.body)
    except orjson.JSONDecodeError as exc:
        raise ApiError(400, 400, f"Unexpected character in request body: {exc}") from None
    if not isinstance(obj, dict):
        raise ApiError(422, 422, "Request body must be a JSON object")
    return obj


def _schema_of(req: Request) -> tuple[Any, str]:
    """The parsed schema of a register/lookup/compatibility body, and its type."""
    body = _body(req)
    schema_type = str(body.get("schemaType") or "AVRO").upper()
    if schema_type != "AVRO":
        raise ApiError(422, 42201, f"Invalid schema: schema type {schema_type} is not supported (only AVRO)")
    if body.get("references"):
        raise ApiError(422, 42201, "Invalid schema: schema references are not supported")
    text = body.get("schema")
    if not isinstance(text, str) or not text.strip():
        raise ApiError(422, 42201, "Empty schema")
    try:
        return compat.parse(text), schema_type
    except compat.InvalidSchema as exc:
        raise ApiError(422, 42201, f"Invalid schema {text}, details: {exc}") from None


def _version_number(text: str) -> int | None:
    """A version path segment: a number in [1, 2^31-1], or None for ``latest`` / ``-1``."""
    if text in ("latest", "-1"):
        return None
    if text.isdigit() and 1 <= int(text) <= MAX_VERSION:
        return int(text)
    raise ApiError(
        422,
        42202,
        f"The specified version '{text}' is not a valid version id. "
        'Allowed values are between [1, 2^31-1] and the string "latest"',
    )


def _schema_id(text: str) -> int:
    if not text.lstrip("-").isdigit():
        raise ApiError(404, 404, "HTTP 404 Not Found")
    return int(text)


def _version_json(v: Version) -> dict[str, Any]:
    return {"subject": v.subject, "version": v.version, "id": v.id, "schema": v.schema}


class RegistryApi:
    """Request -> Response. Reads (GET) run on the loop: they are short SQLite reads; writes run
    in the loop's thread pool, since a write may wait for another process's transaction."""

    def __init__(self, store: RegistryStore) -> None:
        self.store = store

    async def handle(self, req: Request) -> Response:
        try:
            if req.method == "GET":
                return self._route(req)
            return await asyncio.to_thread(self._route, req)
        except ApiError as exc:
            return error_response(exc.status, exc.message, exc.code)
        except Exception as exc:  # the store failed: Confluent's backend error
            return error_response(500, f"Error in the backend data store: {exc}", 50001)

    # ------------------------------------------------------------------ routing
    def _route(self, req: Request) -> Response:
        p, m = req.path, req.method
        n = len(p)
        routes: list[tuple[bool, dict[str, Callable[[], Response]]]] = [
            (n == 0, {"GET": lambda: _ok({})}),
            (p == ["schemas", "types"], {"GET": lambda: _ok(["AVRO"])}),
            (n == 3 and p[:2] == ["schemas", "ids"], {"GET": lambda: self.get_schema(req, _schema_id(p[2]))}),
            (
                n == 4 and p[:2] == ["schemas", "ids"] and p[3] in ("schema", "versions", "subjects"),
                {"GET": lambda: self.get_schema_extra(req, _schema_id(p[2]), p[3])},
            ),
            (p == ["subjects"], {"GET": lambda: _ok(self.store.subjects(_flag(req, "deleted")))}),
            (
                n == 2 and p[0] == "subjects",
                {"POST": lambda: self.lookup(req, p[1]), "DELETE": lambda: self.delete_subject(req, p[1])},
            ),
            (
                n == 3 and p[0] == "subjects" and p[2] == "versions",
                {"GET": lambda: self.list_versions(req, p[1]), "POST": lambda: self.register(req, p[1])},
            ),
            (
                n == 4 and p[0] == "subjects" and p[2] == "versions",
                {
                    "GET": lambda: _ok(_version_json(self.version(req, p[1], p[3]))),
                    "DELETE": lambda: self.delete_version(req, p[1], p[3]),
                },
            ),
            (
                n == 5 and p[0] == "subjects" and p[2] == "versions" and p[4] == "schema",
                {"GET": lambda: _ok(orjson.Fragment(self.version(req, p[1], p[3]).schema))},
            ),
            (
                n == 5 and p[:2] == ["compatibility", "subjects"] and p[3] == "versions",
                {"POST": lambda: self.check(req, p[2], p[4])},
            ),
            (
                n in (1, 2) and p[0] == "config",
                {
                    "GET": lambda: self.get_config(req, p[1] if n == 2 else ""),
                    "PUT": lambda: self.put_config(req, p[1] if n == 2 else ""),
                    "DELETE": lambda: self.delete_config(p[1] if n == 2 else ""),
                },
            ),
            (n in (1, 2) and p[0] == "mode", {"GET": lambda: _ok({"mode": "READWRITE"})}),
        ]
        for matched, methods in routes:
            if matched:
                handler = methods.get(m)
                if handler is None:
                    raise ApiError(405, 405, "HTTP 405 Method Not Allowed")
                return handler()
        raise ApiError(404, 404, "HTTP 404 Not Found")

    # ------------------------------------------------------------------ schemas
    def get_schema(self, req: Request, schema_id: int) -> Response:
        found = self.store.schema_by_id(schema_id)
        if found is None:
            raise ApiError(404, 40403, f"Schema {schema_id} not found")
        out: dict[str, Any] = {"schema": found[0]}
        if found[1] != "AVRO":
            out["schemaType"] = found[1]
        return _ok(out)

    def get_schema_extra(self, req: Request, schema_id: int, what: str) -> Response:
        found = self.store.schema_by_id(schema_id)
        if found is None:
            raise ApiError(404, 40403, f"Schema {schema_id} not found")
        if what == "schema":
            return _ok(orjson.Fragment(found[0]))
        pairs = self.store.versions_of_id(schema_id, _flag(req, "deleted"))
        if what == "subjects":
            return _ok(sorted({s for s, _ in pairs}))
        return _ok([{"subject": s, "version": v} for s, v in pairs])

    # ------------------------------------------------------------------ subjects
    def _live_versions(self, subject: str, deleted: bool = False) -> list[Version]:
        versions = self.store.versions(subject, include_deleted=deleted)
        if not versions:
            raise subject_not_found(subject)
        return versions

    def list_versions(self, req: Request, subject: str) -> Response:
        return _ok([v.version for v in self._live_versions(subject, _flag(req, "deleted"))])

    def version(self, req: Request, subject: str, text: str) -> Version:
        number = _version_number(text)
        versions = self._live_versions(subject, _flag(req, "deleted"))
        if number is None:
            return versions[-1]
        for v in versions:
            if v.version == number:
                return v
        raise version_not_found(number)

    def level(self, subject: str) -> str:
        return self.store.compatibility(subject) or self.store.compatibility("") or DEFAULT_COMPATIBILITY

    def register(self, req: Request, subject: str) -> Response:
        obj, schema_type = _schema_of(req)
        canonical = compat.canonical(obj)
        existing = self.store.id_of(canonical)
        live = self.store.versions(subject)
        if existing is not None and any(v.id == existing for v in live):
            return _ok({"id": existing})
        level = self.level(subject)
        previous = [orjson.loads(v.schema) for v in live]
        if not compat.compatible(level, obj, previous):
            raise ApiError(
                409,
                409,
                f'Schema being registered is incompatible with an earlier schema for subject "{subject}"; '
                f"compatibility level {level}",
            )
        schema_id, _, _ = self.store.register(subject, canonical, compat.compact(obj), schema_type)
        return _ok({"id": schema_id})

    def lookup(self, req: Request, subject: str) -> Response:
        obj, _ = _schema_of(req)
        versions = self._live_versions(subject, _flag(req, "deleted"))
        schema_id = self.store.id_of(compat.canonical(obj))
        for v in versions:
            if v.id == schema_id:
                return _ok(_version_json(v))
        raise ApiError(404, 40403, "Schema not found")

    def delete_subject(self, req: Request, subject: str) -> Response:
        permanent = _flag(req, "permanent")
        all_versions = self.store.versions(subject, include_deleted=True)
        if not all_versions:
            raise subject_not_found(subject)
        live = [v for v in all_versions if not v.deleted]
        if permanent:
            if live:
                raise ApiError(
                    404, 40405, f"Subject '{subject}' was not deleted first before being permanently deleted"
                )
            return _ok(self.store.hard_delete(subject, None))
        if not live:
            raise ApiError(
                404, 40404, f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently"
            )
        return _ok(self.store.soft_delete(subject, None))

    def delete_version(self, req: Request, subject: str, text: str) -> Response:
        permanent = _flag(req, "permanent")
        number = _version_number(text)
        all_versions = self.store.versions(subject, include_deleted=True)
        if not all_versions:
            raise subject_not_found(subject)
        candidates = [v for v in all_versions if not v.deleted] if number is None else all_versions
        target = candidates[-1] if number is None and candidates else None
        if number is not None:
            target = next((v for v in all_versions if v.version == number), None)
        if target is None:
            raise version_not_found(number if number is not None else text)
        if permanent:
            if not target.deleted:
                raise ApiError(
                    404,
                    40407,
                    f"Subject '{subject}' Version {target.version} was not deleted first before being "
                    "permanently deleted",
                )
            self.store.hard_delete(subject, target.version)
            return _ok(target.version)
        if target.deleted:
            raise ApiError(
                404,
                40406,
                f"Subject '{subject}' Version {target.version} was soft deleted.Set permanent=true to delete "
                "permanently",
            )
        self.store.soft_delete(subject, target.version)
        return _ok(target.version)

    # ------------------------------------------------------------------ compatibility
    def check(self, req: Request, subject: str, text: str) -> Response:
        obj, _ = _schema_of(req)
        number = _version_number(text)
        versions = self._live_versions(subject)
        level = self.level(subject)
        if number is None:
            if level.endswith("_TRANSITIVE"):
                previous = [orjson.loads(v.schema) for v in versions]
            else:
                previous = [orjson.loads(versions[-1].schema)]
        else:
            match = [v for v in versions if v.version == number]
            if not match:
                raise version_not_found(number)
            previous = [orjson.loads(match[0].schema)]
        return _ok({"is_compatible": compat.compatible(level, obj, previous)})

    # ------------------------------------------------------------------ config
    def get_config(self, req: Request, subject: str) -> Response:
        if not subject:
            return _ok({"compatibilityLevel": self.store.compatibility("") or DEFAULT_COMPATIBILITY})
        level = self.store.compatibility(subject)
        if level is None:
            if _flag(req, "defaultToGlobal"):
                return _ok({"compatibilityLevel": self.store.compatibility("") or DEFAULT_COMPATIBILITY})
            raise ApiError(
                404, 40408, f"Subject '{subject}' does not have subject-level compatibility configured"
            )
        return _ok({"compatibilityLevel": level})

    def put_config(self, req: Request, subject: str) -> Response:
        body = _body(req)
        level = str(body.get("compatibility", "")).upper()
        if level not in COMPATIBILITY_LEVELS:
            raise ApiError(
                422,
                42203,
                "Invalid compatibility level. Valid values are none, backward, forward, full, "
                "backward_transitive, forward_transitive, and full_transitive",
            )
        self.store.set_compatibility(subject, level)
        return _ok({"compatibility": level})

    def delete_config(self, subject: str) -> Response:
        old = self.store.delete_compatibility(subject)
        if subject and old is None:
            raise ApiError(404, 40401, f"Subject '{subject}' not found.")
        return _ok({"compatibilityLevel": old or DEFAULT_COMPATIBILITY})
