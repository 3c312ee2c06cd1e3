"""Property-based requests generated from the service's own OpenAPI schema: no 5xx, ever.

Driven through schemathesis's Python API and hypothesis directly (its pytest plugin does not load
under this pytest), one hypothesis run per operation.
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode

from harness.server import Server


@pytest.fixture(scope="module")
def api():
    s = Server().wait_ready()
    try:
        yield s, schemathesis.openapi.from_url(s.url + "/openapi.json")
    finally:
        s.stop()


def test_no_server_errors_on_generated_requests(api):
    server, schema = api
    operations = [op.ok() for op in schema.get_all_operations()]
    assert {f"{o.method.upper()} {o.path}" for o in operations} >= {
        "POST /predict",
        "POST /predict/batch",
        "POST /reconstruct",
        "POST /perturb",
        "GET /model",
        "GET /readyz",
    }
    seen: dict[str, set[int]] = {}
    modes = {"get": (GenerationMode.POSITIVE,), "post": (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)}
    for operation, mode in [(op, mode) for op in operations for mode in modes[op.method.lower()]]:
        key = f"{operation.method.upper()} {operation.path}"

        @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        @given(case=operation.as_strategy(generation_mode=mode))
        def run(case) -> None:  # called at once, below: the loop variables it reads are this iteration's
            response = case.call(base_url=server.url, timeout=30)
            seen.setdefault(key, set()).add(response.status_code)  # noqa: B023 (run() is called in this iteration)
            assert response.status_code < 500, f"{key}: {response.status_code} {response.text[:300]}"  # noqa: B023

        run()
    assert set(seen) == {f"{o.method.upper()} {o.path}" for o in operations}  # every operation was called
    assert {400, 422} & seen["POST /reconstruct"] and 200 in seen["POST /predict"], seen
