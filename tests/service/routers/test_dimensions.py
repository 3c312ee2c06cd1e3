"""GET /dimensions serves each network's committed dimension atlas, and only for the model version it was measured on."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.settings import Settings
from tests.conftest import WEIGHTS

LABELS = {"ink", "thickness", "width", "height", "slant", "x", "y", "local"}


@pytest.mark.parametrize("query", ["", "?model=multimnist"])
def test_every_dimension_of_every_capsule_is_described(client, query: str):
    r = client.get("/dimensions" + query)
    assert r.status_code == 200
    atlas = r.json()
    card = client.get("/model").json()
    assert atlas["model_version"] == (card["multimnist"] if query else card)["version"]
    assert [c["digit"] for c in atlas["digits"]] == list(range(10))
    for c in atlas["digits"]:
        assert [d["dim"] for d in c["dims"]] == list(range(16))
        assert all(d["label"] in LABELS and d["direction"] in (-1, 1) for d in c["dims"])
    assert sum(atlas["label_counts"].values()) == 160


def test_the_two_networks_atlases_differ(client):
    """Section 7's sliders are named from the two-digit network's own decoder, not the MNIST network's."""
    one, two = (client.get("/dimensions" + q).json() for q in ("", "?model=multimnist"))
    assert one["digits"] != two["digits"]


@pytest.mark.parametrize(
    ("stale", "query", "command"),
    [("dimensions.json", "", "`python -m model.atlas`"), ("multimnist-dimensions.json", "?model=multimnist", "--network multimnist")],
)
def test_an_atlas_of_another_model_is_not_served(tmp_path: Path, stale: str, query: str, command: str):
    weights = tmp_path / "weights"
    shutil.copytree(WEIGHTS, weights)
    atlas = json.loads((weights / stale).read_text())
    (weights / stale).write_text(json.dumps({**atlas, "model_version": "another"}))
    with TestClient(create_app(Settings(weights_dir=weights, intra_op_threads=1, warmup_runs=0))) as c:
        r = c.get("/dimensions" + query)
        other = c.get("/dimensions" + ("" if query else "?model=multimnist"))
    assert r.status_code == 404 and command in r.json()["detail"]
    assert other.status_code == 200  # the other network's atlas is still its own


def test_an_unknown_model_is_refused(client):
    r = client.get("/dimensions?model=mnist")
    assert r.status_code == 422 and "model" in r.text


@pytest.mark.parametrize("query", ["", "?model=multimnist"])
def test_an_atlas_is_gzipped_for_a_client_that_takes_it(client, query: str):
    """The page fetches both atlases on its first load: a browser gets each in a seventh of its JSON's bytes."""
    plain = client.get("/dimensions" + query, headers={"Accept-Encoding": "identity"})
    packed = client.get("/dimensions" + query, headers={"Accept-Encoding": "gzip, deflate, br"})
    assert "content-encoding" not in plain.headers and packed.headers["content-encoding"] == "gzip"
    assert packed.headers["vary"] == plain.headers["vary"] == "Accept-Encoding"
    assert packed.json() == plain.json()
    assert int(packed.headers["content-length"]) < len(plain.content) / 5
