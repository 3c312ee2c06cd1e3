"""GET /dimensions serves the committed dimension atlas, and only for the model it was measured on."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from fastapi.testclient import TestClient

from service.app import create_app
from service.settings import Settings
from tests.conftest import WEIGHTS

LABELS = {"ink", "thickness", "width", "height", "slant", "x", "y", "local"}


def test_every_dimension_of_every_capsule_is_described(client):
    r = client.get("/dimensions")
    assert r.status_code == 200
    atlas = r.json()
    assert atlas["model_version"] == client.get("/model").json()["version"]
    assert [c["digit"] for c in atlas["digits"]] == list(range(10))
    for c in atlas["digits"]:
        assert [d["dim"] for d in c["dims"]] == list(range(16))
        assert all(d["label"] in LABELS and d["direction"] in (-1, 1) for d in c["dims"])
    assert sum(atlas["label_counts"].values()) == 160


def test_an_atlas_of_another_model_is_not_served(tmp_path: Path):
    weights = tmp_path / "weights"
    shutil.copytree(WEIGHTS, weights)
    atlas = json.loads((weights / "dimensions.json").read_text())
    (weights / "dimensions.json").write_text(json.dumps({**atlas, "model_version": "another"}))
    with TestClient(create_app(Settings(weights_dir=weights, intra_op_threads=1, warmup_runs=0))) as c:
        r = c.get("/dimensions")
    assert r.status_code == 404 and "model.atlas" in r.json()["detail"]
