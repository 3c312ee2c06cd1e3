"""?include=routing: every iteration of dynamic routing for the input, from weights/routing.onnx, against the served graph."""

from __future__ import annotations

import numpy as np
import pytest

from model.data import load_mnist
from tests.conftest import MNIST


@pytest.fixture(scope="module")
def digits() -> tuple[np.ndarray, np.ndarray]:
    x, y = load_mnist(MNIST, "test")
    return x[:8].astype(np.float32) / 255.0, y[:8]


def test_the_trained_iteration_is_the_served_prediction(client, digits):
    """Iteration 3 of the trace has the answer's own lengths and coupling map; iteration 1 is uniform; the routing runs
    past the trained 3 and the winner's length grows as it settles."""
    x, y = digits
    for img, label in zip(x[:4], y[:4]):
        body = {"pixels": img.tolist()}
        r = client.post("/predict?include=routing,coupling_grid", json=body).json()
        rt = r["routing"]
        assert rt["trained"] == 3 and rt["capsule_type"] == "mean" and len(rt["iterations"]) == 6
        assert [it["iteration"] for it in rt["iterations"]] == [1, 2, 3, 4, 5, 6]
        third = rt["iterations"][2]
        np.testing.assert_allclose(third["lengths"], r["lengths"], atol=1e-4)
        np.testing.assert_allclose(third["coupling_grid"], r["coupling_grid"], atol=1e-4)
        first = np.array(rt["iterations"][0]["coupling_grid"])
        np.testing.assert_allclose(first, rt["uniform_coupling"], atol=1e-5)
        assert rt["uniform_coupling"] == pytest.approx(0.1)
        winner = [it["lengths"][label] for it in rt["iterations"]]
        assert r["prediction"] == label and winner[0] < winner[2] < winner[5]
        for it in rt["iterations"]:
            for name in ("coupling", "agreement"):
                grid = np.array(it[f"{name}_grid"])
                assert grid.shape == (10, 6, 6)
                assert it[f"{name}_range"] == pytest.approx([grid.min(), grid.max()], abs=1e-4)


def test_one_capsule_type(client, digits):
    """routing_type=t: the maps of primary capsule type t (channel t, i = t*36 + row*6 + col), checked at the trained
    iteration against the full coupling the answer gives with include=coupling."""
    img = digits[0][0]
    r = client.post("/predict?include=routing,coupling&routing_type=5", json={"pixels": img.tolist()}).json()
    assert r["routing"]["capsule_type"] == 5
    c = np.array(r["coupling"]).reshape(32, 6, 6, 10)[5].transpose(2, 0, 1)
    np.testing.assert_allclose(r["routing"]["iterations"][2]["coupling_grid"], c, atol=1e-4)
    mean = client.post("/predict?include=routing&routing_type=mean", json={"pixels": img.tolist()}).json()
    assert mean["routing"]["capsule_type"] == "mean"


def test_batch_traces_each_item(client, digits):
    x, _ = digits
    r = client.post("/predict/batch?include=routing", json={"pixels": x[:3].tolist()}).json()["results"]
    for item in r:
        np.testing.assert_allclose(item["routing"]["iterations"][2]["lengths"], item["lengths"], atol=1e-4)
    assert r[0]["routing"]["iterations"][5]["lengths"] != r[1]["routing"]["iterations"][5]["lengths"]


@pytest.mark.parametrize(
    "query, message",
    [
        ("include=routing&routing_type=32", "routing_type must be `mean` or a capsule type 0-31, got 32"),
        ("include=routing&routing_type=-1", "routing_type must be `mean` or a capsule type 0-31"),
        ("include=routing&routing_type=first", "got 'first'"),
        ("routing_type=3", "routing_type needs include=routing"),
        ("include=routes", "include: unknown value(s) ['routes']"),
    ],
)
def test_bad_routing_queries_are_422(client, digits, query, message):
    r = client.post(f"/predict?{query}", json={"pixels": digits[0][0].tolist()})
    assert r.status_code == 422 and message in r.json()["detail"]


def test_the_model_card_describes_the_trace(client):
    card = client.get("/model").json()
    assert card["routing"]["iterations"] == 6 and card["routing"]["trained"] == card["architecture"]["routing_iterations"] == 3
    assert card["outputs"]["primary"] == ["N", 1152, 8]
