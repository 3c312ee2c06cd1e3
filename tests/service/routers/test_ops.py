"""GET /healthz, /readyz, /model, /metrics and /openapi.json (service/routers/ops.py), and the app around them."""

from __future__ import annotations

import gc
import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.settings import Settings
from tests.conftest import WEIGHTS
from tests.service.helpers import stroke_digit_one


def test_ops_endpoints(client):
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["provider"] == "CPUExecutionProvider"
    card = json.loads((WEIGHTS / "model-card.json").read_text())
    m = client.get("/model").json()
    assert m["version"] == card["version"] and m["files"] == card["files"]
    assert m["provider"] == "CPUExecutionProvider" and m["input_spec"]["shape"] == [None, 1, 28, 28]
    assert m["batching"]["batches_in_flight"] >= 1 and m["batching"]["max_batch"] >= 1


def test_long_lived_objects_are_frozen_out_of_the_collector_while_serving():
    with TestClient(create_app(Settings(intra_op_threads=1, warmup_runs=0))) as c:
        assert c.get("/readyz").status_code == 200
        assert gc.get_freeze_count() > 10_000  # FastAPI's and pydantic's objects, not traversed by full collections
    assert gc.get_freeze_count() == 0  # after shutdown they can be collected again


def test_metrics_count_requests_and_batches(client):
    before = client.get("/metrics").text
    client.post("/predict", json={"pixels": [[0.0] * 28] * 28})
    client.post("/reconstruct", json={"digit": 1, "pose": [0.0] * 16})
    after = client.get("/metrics").text

    def count(text: str, needle: str) -> float:
        return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(needle))

    assert (
        count(after, 'capsnet_requests_total{endpoint="/predict",method="POST",status="200"}')
        == count(before, 'capsnet_requests_total{endpoint="/predict",method="POST",status="200"}') + 1
    )
    assert (
        count(after, 'capsnet_requests_total{endpoint="/reconstruct"')
        == count(before, 'capsnet_requests_total{endpoint="/reconstruct"') + 1
    )
    assert count(after, "capsnet_batch_size_count") >= count(before, "capsnet_batch_size_count") + 1
    assert 'capsnet_request_seconds_bucket{endpoint="/predict"' in after


ZEROS = [0.0] * 784


@pytest.mark.parametrize(
    ("path", "kwargs"),
    [
        ("/predict", {"files": {"file": ("one.png", stroke_digit_one(), "image/png")}}),
        ("/predict/batch", {"json": {"pixels": [[[0.0] * 28] * 28] * 3}}),
        ("/probe", {"json": {"pixels": [[0.0] * 28] * 28, "transforms": [{"rotate": 10}, {}]}}),
        ("/v2/models/capsnet/infer", {"json": {"inputs": [{"name": "image", "datatype": "FP32", "shape": [1, 1, 28, 28], "data": ZEROS}]}}),
    ],
)
def test_where_a_request_spent_its_time_is_on_metrics_by_phase(client, path, kwargs):
    """As KServe reports it: preprocess, queue, predict, postprocess, each once per request under its endpoint, and
    together no more than the request's whole time."""
    phases = ("preprocess", "queue", "predict", "postprocess")

    def read() -> dict[str, float]:
        text = client.get("/metrics").text
        out = {}
        for name in (*phases, ""):
            family = f"capsnet_request_{name}_seconds" if name else "capsnet_request_seconds"
            # the whole request is counted by route template; its phases by model for the protocol's routes, as KServe does
            label = path if name or not path.startswith("/v2/") else "/v2/models/{model_name}/infer"
            for stat in ("count", "sum"):
                needle = f'{family}_{stat}{{endpoint="{label}"}}'
                out[f"{name}_{stat}"] = sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(needle))
        return out

    before = read()
    assert client.post(path, **kwargs).status_code == 200
    after = read()
    delta = {k: after[k] - before[k] for k in after}
    for name in phases:
        assert delta[f"{name}_count"] == 1, (name, delta)
    assert delta["predict_sum"] > 0 and delta["preprocess_sum"] > 0
    assert sum(delta[f"{name}_sum"] for name in phases) <= delta["_sum"], delta


def test_openapi_documents_every_endpoint_with_examples(client):
    from fastapi.routing import APIRoute

    spec = client.get("/openapi.json").json()
    for path in ("/predict", "/predict/batch", "/probe", "/reconstruct", "/perturb", "/healthz", "/readyz", "/model", "/metrics"):
        assert path in spec["paths"], path
    # every route of the API, the decoders' files among them; the page itself is not an API (routers are included
    # without prefixes, each behind a route of the app that keeps it as `original_router`)
    routers = [getattr(r, "original_router", None) for r in client.app.routes]
    served = {r.path for router in routers if router for r in router.routes if isinstance(r, APIRoute)} - {
        "/",
        "/v2/",
    }  # /v2/: /v2 as the protocol spells it
    assert {"/predict", "/v2/models/{model_name}/infer"} <= served
    assert served - set(spec["paths"]) == set(), "served but not in the schema"
    text = json.dumps(spec)
    assert '"multipart/form-data"' in text and '"examples"' in text
    for name in ("ReconstructRequest", "PerturbRequest", "Prediction"):
        assert "examples" in spec["components"]["schemas"][name], name
    for path, names in (
        ("/predict", ["include", "routing_type", "model"]),
        ("/predict/batch", ["include", "routing_type"]),
        ("/probe", ["include"]),
        ("/reconstruct", ["model", "include"]),
        ("/perturb", ["model"]),
    ):
        # parsed from their types (service/deps.py), documented in the form clients generate code from
        assert [p["name"] for p in spec["paths"][path]["post"]["parameters"]] == names, path


OPENAPI = Path(__file__).with_name("openapi.json")


def test_the_openapi_schema_is_the_committed_one_byte_for_byte(client):
    """What clients generate their code from changes only on purpose: after a deliberate change to the API, write the new
    schema over tests/service/routers/openapi.json (`curl -s 127.0.0.1:8000/openapi.json > ...`) and review the diff."""
    assert client.get("/openapi.json").content == OPENAPI.read_bytes()
