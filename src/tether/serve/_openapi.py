"""The OpenAPI 3.1 document, generated from the route table and the msgspec body types."""

from __future__ import annotations

import re
from typing import Any

import msgspec

from ._api import Api, Operation
from ._events import EventOut
from ._schemas import ErrorOut

__all__ = ["openapi_document"]

_PATH_PARAM = re.compile(r"{(\w+)}")
_REF = "#/components/schemas/{name}"
_SSE_EVENT: dict[str, Any] = {
    "type": "object",
    "description": "One server-sent event: `id` is the event's sequence number in the run, `data` a RunEvent",
    "properties": {
        "id": {"type": "string", "pattern": "^[0-9]+$"},
        "event": {"type": "string"},
        "data": {
            "type": "string",
            "contentMediaType": "application/json",
            "contentSchema": {"$ref": "#/components/schemas/RunEvent"},
        },
    },
    "required": ["data"],
}


def _content(schema: dict[str, Any], media: str = "application/json") -> dict[str, Any]:
    return {media: {"schema": schema}}


def openapi_document(api: Api, *, title: str, version: str, auth: bool) -> dict[str, Any]:
    types: list[Any] = [ErrorOut, EventOut]
    for op in api.operations:
        for t in (op.body, op.response):
            if t is not None and t not in types:
                types.append(t)
    schemas, components = msgspec.json.schema_components(types, ref_template=_REF)
    by_type = dict(zip(types, schemas, strict=True))
    error = by_type[ErrorOut]
    paths: dict[str, dict[str, Any]] = {}
    for op in api.operations:
        paths.setdefault(op.path, {})[op.method.lower()] = _operation(op, by_type, error, auth)
    doc: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {
            "title": title,
            "version": version,
            "description": "The tether conversation service. Errors are JSON bodies "
            '`{"error": {"type", "message"}}`. Run events: see the `RunEvent` schema.',
        },
        "paths": paths,
        "components": {"schemas": {**components, "RunEvent": by_type[EventOut]}},
    }
    if auth:
        doc["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
    return doc


def _operation(op: Operation, by_type: dict[Any, Any], error: dict[str, Any], auth: bool) -> dict[str, Any]:
    params: list[dict[str, Any]] = [
        {
            "name": name,
            "in": "path",
            "required": True,
            "schema": {"type": "string", "minLength": 1, "maxLength": 512},
        }
        for name in _PATH_PARAM.findall(op.path)
    ]
    params += [
        {"name": q.name, "in": "query", "required": False, "description": q.description, "schema": q.schema}
        for q in op.query
    ]
    params += [
        {"name": h.name, "in": "header", "required": False, "description": h.description, "schema": h.schema}
        for h in op.headers
    ]
    responses: dict[str, Any] = {}
    if op.stream and op.stream_event is not None:
        event = {
            "type": "object",
            "properties": {
                "data": {
                    "type": "string",
                    "contentMediaType": "application/json",
                    "contentSchema": op.stream_event,
                }
            },
            "required": ["data"],
        }
        responses[str(op.status)] = {
            "description": "text/event-stream: `data: <event JSON>` per event",
            "content": _content(event, "text/event-stream"),
        }
    elif op.stream:
        responses[str(op.status)] = {
            "description": "text/event-stream: `id: <seq>` and `data: <RunEvent JSON>` per event",
            "content": _content(_SSE_EVENT, "text/event-stream"),
        }
    elif op.response is None:
        responses[str(op.status)] = {"description": "done"}
    else:
        responses[str(op.status)] = {"description": "OK", "content": _content(by_type[op.response])}
    for status in sorted({*op.errors, *((401,) if op.auth and auth else ())}):
        responses[str(status)] = {"description": "error", "content": _content(error)}
        if status == 204:  # listed with the errors: an empty answer (nothing to stream)
            responses[str(status)] = {"description": "no content"}
    responses["default"] = {"description": "error", "content": _content(error)}
    out: dict[str, Any] = {
        "operationId": op.name,
        "summary": op.summary,
        "parameters": params,
        "responses": responses,
    }
    if op.description:
        out["description"] = op.description
    if op.tags:
        out["tags"] = list(op.tags)
    if op.body is not None:
        out["requestBody"] = {"required": op.body_required, "content": _content(by_type[op.body])}
    out["security"] = [{"bearer": []}] if op.auth and auth else []
    return out
