"""Fuzzing the API from its own OpenAPI document with schemathesis: valid and invalid requests
for every operation, on random ids and on the caller's real conversation; no 5xx, no hang, and
the answers match the document. ``TETHER_FUZZ_EXAMPLES`` sets the examples per operation."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)
from tests.serve._serve_support import Database, Server, add_user, new_conversation, start_run, wait_status

from tether.serve._app import API

EXAMPLES = int(os.environ.get("TETHER_FUZZ_EXAMPLES", "30"))
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
LABELS = [f"{op.method} {op.path}" for op in API.operations]


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("fuzz")
    db = Database("sqlite", path=tmp / "serve.db")
    token = add_user(db, "fuzzer")
    server = Server(
        db, model="py:tests.serve.scripted:fast_words", extra_env={"TETHER_TEST_EFFECTS": str(tmp / "fx")}
    )
    server.start(tmp)
    with server.client(token) as client:
        cid = new_conversation(client)
        run_id = start_run(client, cid, "hello")
        wait_status(client, run_id, ("completed",))
        doc = client.get("/openapi.json").json()
    yield {
        "server": server,
        "token": token,
        "cid": cid,
        "run_id": run_id,
        "schema": schemathesis.openapi.from_dict(doc),
    }
    server.stop()
    assert "Traceback" not in server.log(), server.log()[-3000:]


@pytest.mark.parametrize("label", LABELS)
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=["valid", "invalid"])
def test_fuzz_operation(target: dict[str, Any], label: str, mode: GenerationMode) -> None:
    method, path = label.split(" ", 1)
    operation = target["schema"][path][method]
    server: Server = target["server"]
    headers = {"Authorization": f"Bearer {target['token']}"}
    own = {"conversation_id": target["cid"], "run_id": target["run_id"]}
    params = {k: v for k, v in own.items() if "{" + k + "}" in path}
    strategies = [operation.as_strategy(generation_mode=mode)]
    if params and mode is GenerationMode.POSITIVE:
        strategies.append(operation.as_strategy(generation_mode=mode, path_parameters=params))

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=st.one_of(strategies))
    def check(case: Any) -> None:
        if path.endswith("/cancel") or path.endswith("/decisions") or method == "DELETE":
            case.path_parameters = {  # never stop or delete the shared fixtures
                k: ("x" + v if v in own.values() else v) for k, v in (case.path_parameters or {}).items()
            }
        try:
            response = case.call(base_url=server.url, headers=headers, timeout=15)
        except Exception as exc:  # a hang or a dropped connection is a failure too
            raise AssertionError(f"{label}: no answer ({exc})") from exc
        case.validate_response(response, checks=CHECKS)

    check()
    assert httpx.get(f"{server.url}/healthz").status_code == 200
