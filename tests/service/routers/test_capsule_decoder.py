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
