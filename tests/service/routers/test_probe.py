"""POST /probe: the network on affine transforms of its input (model/affine.py), as the page's equivariance probe uses it."""

from __future__ import annotations

import numpy as np
import pytest

from model.affine import Affine, warp
from model.data import load_mnist
from tests.conftest import MNIST
from tests.service.helpers import b64, png_pixels, stroke_digit_one


@pytest.fixture(scope="module")
def seven() -> np.ndarray:
    x, y = load_mnist(MNIST, "test")
    assert y[0] == 7
    return x[0].astype(np.float32) / 255.0


def test_each_transform_is_what_predict_says_of_that_image(client, seven):
    """A result is /predict's answer on the transformed pixels, and its input picture is that image."""
    transforms = [{}, {"rotate": 30}, {"scale": 0.7, "shear": 20}, {"tx": 3, "ty": -2}]
    r = client.post("/probe?include=pixels", json={"pixels": seven.tolist(), "transforms": transforms}).json()
    assert len(r["results"]) == 4
    np.testing.assert_allclose(r["input"]["pixels"], seven, atol=1e-5)
    for t, res in zip(transforms, r["results"]):
        moved = warp(seven, Affine(**t))
        direct = client.post("/predict", json={"pixels": moved.tolist()}).json()
        assert res["prediction"] == direct["prediction"]
        np.testing.assert_allclose(res["lengths"], direct["lengths"], atol=1e-4)
        np.testing.assert_allclose(res["poses"], direct["poses"], atol=1e-4)
        np.testing.assert_allclose(png_pixels(res["input"]["png"]) / 255.0, moved, atol=1 / 255 + 1e-6)
        np.testing.assert_allclose(res["input"]["pixels"], moved, atol=1e-5)  # as /predict's input, with include=pixels
        assert res["transform"] == {"rotate": 0.0, "scale": 1.0, "shear": 0.0, "tx": 0.0, "ty": 0.0} | t


def test_identity_keeps_the_prediction_and_a_large_rotation_loses_it(client, seven):
    angles = [0, 15, 90, 180]
    r = client.post("/probe", json={"pixels": seven.tolist(), "transforms": [{"rotate": a} for a in angles]}).json()["results"]
    assert r[0]["prediction"] == r[1]["prediction"] == 7
    assert all(list(res["input"]) == ["png"] for res in r)  # each picture as every other answer's, its values only on request
    assert max(r[3]["lengths"]) < max(r[0]["lengths"]) and r[3]["lengths"][7] < 0.5  # an upside-down 7 is no confident 7


def test_an_uploaded_image_is_preprocessed_first(client):
    """`image` goes through /predict's preprocessing; the transforms apply to the 28x28 result."""
    png = stroke_digit_one()
    direct = client.post("/predict?include=pixels", json={"image": b64(png)}).json()
    r = client.post("/probe?include=pixels", json={"image": b64(png), "transforms": [{}]}).json()
    np.testing.assert_allclose(r["input"]["pixels"], direct["input"]["pixels"], atol=1e-5)
    np.testing.assert_allclose(r["results"][0]["lengths"], direct["lengths"], atol=1e-4)


@pytest.mark.parametrize(
    "body, message",
    [
        ({"transforms": [{}]}, "send exactly one of 'image' or 'pixels'"),
        ({"pixels": "P", "transforms": []}, "transforms"),
        ({"pixels": "P", "transforms": [{}] * 65}, "at most 64 items"),
        ({"pixels": "P", "transforms": [{"rotate": 181}]}, "transforms.0.rotate"),
        ({"pixels": "P", "transforms": [{"scale": 0.1}]}, "transforms.0.scale"),
        ({"pixels": "P", "transforms": [{"shear": float("nan")}]}, None),
        ({"pixels": "P", "transforms": [{"turn": 3}]}, "transforms.0.turn"),
    ],
)
def test_bad_probes_are_4xx(client, seven, body, message):
    if body.get("pixels") == "P":
        body = {**body, "pixels": seven.tolist()}
    import json

    r = client.post("/probe", content=json.dumps(body), headers={"content-type": "application/json"})
    assert 400 <= r.status_code < 500, r.text[:200]
    if message:
        assert message in r.json()["detail"]
