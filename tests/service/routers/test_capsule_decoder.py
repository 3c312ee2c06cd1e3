"""POST /reconstruct and /perturb (service/routers/capsule_decoder.py): the decoder driven by a pose."""

from __future__ import annotations

import numpy as np
import pytest

from tests.service.helpers import png_pixels, stroke_digit_one


def test_reconstruct_of_a_predicted_pose_reproduces_its_reconstruction(client):
    body = client.post("/predict?include=pixels", files={"file": ("one.png", stroke_digit_one(), "image/png")}).json()
    d = body["prediction"]
    r = client.post("/reconstruct?include=pixels", json={"digit": d, "pose": body["poses"][d]})
    assert r.status_code == 200
    assert np.abs(np.array(r.json()["reconstruction"]["pixels"]) - np.array(body["reconstruction"]["pixels"])).max() < 1e-3


def test_perturb_grid_is_16_rows_by_deltas_columns(client):
    pose = [0.1] * 16
    r = client.post("/perturb", json={"digit": 4, "pose": pose})
    assert r.status_code == 200
    body = r.json()
    assert body["deltas"] == pytest.approx([-0.25, -0.2, -0.15, -0.1, -0.05, 0.0, 0.05, 0.1, 0.15, 0.2, 0.25])
    assert png_pixels(body["grid"]["png"]).shape == (16 * 28, 11 * 28)
    r = client.post("/perturb", json={"digit": 4, "pose": pose, "deltas": [-0.5, 0.5, 0.0]})
    grid = png_pixels(r.json()["grid"]["png"])
    assert grid.shape == (16 * 28, 3 * 28)
    # the delta-0 column is the unperturbed reconstruction in every row
    plain = np.array(client.post("/reconstruct?include=pixels", json={"digit": 4, "pose": pose}).json()["reconstruction"]["pixels"])
    for row in range(16):
        tile = grid[row * 28 : (row + 1) * 28, 56:84] / 255.0
        assert np.abs(tile - plain).max() <= 1 / 255 + 1e-6


def test_the_page_gets_the_committed_decoder_file_under_its_sha256(client):
    """The page's own decoder reads the very file the service runs, named by the card's sha256, cacheable for good."""
    import json

    from tests.conftest import WEIGHTS

    card = json.loads((WEIGHTS / "model-card.json").read_text())
    sha = card["files"]["decoder.onnx"]["sha256"]
    r = client.get(f"/decoders/{sha}.onnx")
    assert r.status_code == 200
    assert r.content == (WEIGHTS / "decoder.onnx").read_bytes()
    assert "immutable" in r.headers["cache-control"]
    # the page is told where, and where each layer lies in the file
    page = client.get("/").text
    assert f"/decoders/{sha}.onnx" in page
    assert '"decoder.net.4.weight"' in page.replace("&#34;", '"')


def test_a_decoder_file_the_server_does_not_have_is_a_404(client):
    r = client.get(f"/decoders/{'0' * 64}.onnx")
    assert r.status_code == 404
    assert r.json()["error"] == "model_not_served"


def test_a_card_without_layer_offsets_offers_no_decoder_file(tmp_path):
    """A weights directory exported before the page had its decoder: the page is told of none, and draws on the server."""
    import json
    import shutil

    from fastapi.testclient import TestClient

    from service.app import create_app
    from service.settings import Settings
    from tests.conftest import WEIGHTS

    weights = tmp_path / "weights"
    shutil.copytree(WEIGHTS, weights)
    card = json.loads((weights / "model-card.json").read_text())
    del card["decoder"]["tensors"]
    (weights / "model-card.json").write_text(json.dumps(card))
    with TestClient(create_app(Settings(weights_dir=weights, intra_op_threads=1, warmup_runs=1))) as c:
        assert 'data-decoder=""' in c.get("/").text
        assert c.get(f"/decoders/{card['files']['decoder.onnx']['sha256']}.onnx").status_code == 404
