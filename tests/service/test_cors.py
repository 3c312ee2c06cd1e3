"""CORS when configured (CAPSNET_CORS_ORIGINS): the origins named may call the API from a browser, preflight included;
others are not told they may."""

from __future__ import annotations

import numpy as np
from fastapi.testclient import TestClient

from service.app import create_app
from service.settings import Settings

ORIGIN = "https://digits.example"


def test_a_named_origin_may_call_and_another_may_not():
    with TestClient(create_app(Settings(intra_op_threads=1, warmup_runs=1, cors_origins=ORIGIN))) as c:
        pre = c.options(
            "/predict",
            headers={"Origin": ORIGIN, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"},
        )
        assert pre.status_code == 200 and pre.headers["access-control-allow-origin"] == ORIGIN
        assert "POST" in pre.headers["access-control-allow-methods"]
        r = c.post("/predict", json={"pixels": np.zeros((28, 28)).tolist()}, headers={"Origin": ORIGIN})
        assert r.status_code == 200 and r.headers["access-control-allow-origin"] == ORIGIN
        other = c.post("/predict", json={"pixels": np.zeros((28, 28)).tolist()}, headers={"Origin": "https://elsewhere.example"})
        assert "access-control-allow-origin" not in other.headers
        denied = c.options("/predict", headers={"Origin": "https://elsewhere.example", "Access-Control-Request-Method": "POST"})
        assert denied.status_code == 400 and "access-control-allow-origin" not in denied.headers
