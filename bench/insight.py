"""What the insight features cost: the `primary` output every /predict now fetches, the routing trace, and the page's
requests one at a time on a real server (as a person at the page makes them), against what the page asked before."""

from __future__ import annotations

import base64
import time
from pathlib import Path

import httpx
import numpy as np

from bench.realinput import canvas_png
from harness.payloads import digit_pngs, stroke_images
from harness.server import Server
from model.machine import timed

OUTPUTS_BEFORE = ["lengths", "poses", "reconstruction", "coupling"]


def in_process(weights: Path, min_seconds: float) -> list[dict]:
    """The network with and without the `primary` output; the trace (routing.onnx) and its answer, batch 1."""
    from service.engine.card import load_card
    from service.engine.local import load_engine
    from service.engine.outputs import OUTPUTS
    from service.engine.routing_inspector import load_routing_inspector
    from service.postprocess import routing_answer

    card = load_card(weights)
    inspector = load_routing_inspector(weights, card)
    assert inspector is not None
    rows = []
    for precision in ("fp32", "int8"):
        engine = load_engine(weights, card, "cpu", 0, precision)
        for batch in (1, 32):
            x = stroke_images(batch)
            before, _ = timed(lambda e=engine, x=x: e.capsnet.run(OUTPUTS_BEFORE, {"image": x}), min_seconds)
            now, _ = timed(lambda e=engine, x=x: e.capsnet.run(list(OUTPUTS), {"image": x}), min_seconds)
            row = {
                "precision": precision,
                "batch": batch,
                "network_ms_before": round(before * 1000, 3),
                "network_ms_now": round(now * 1000, 3),
            }
            if batch == 1:
                primary = engine.capsnet.run(["primary"], {"image": x})[0]
                trace_s, _ = timed(lambda p=primary: inspector.unroll(p), min_seconds)
                trace = inspector.unroll(primary)
                describe_s, _ = timed(lambda t=trace: routing_answer(inspector, t, 0, None), min_seconds)
                row |= {"trace_ms": round(trace_s * 1000, 3), "describe_ms": round(describe_s * 1000, 3)}
            rows.append(row)
    return rows


def page_requests(requests: int = 60) -> list[dict]:
    """Each of the page's requests, sequentially on an idle server: median round trip and answer size."""
    png = digit_pngs(1)[0]
    server = Server({"CAPSNET_INTRA_OP_THREADS": "1"}).wait_ready()
    try:
        with httpx.Client(timeout=30) as client:
            answer = client.post(server.url + "/predict?include=pixels", files={"file": ("d.png", png, "image/png")}).json()
            pixels = answer["input"]["pixels"]
            canvas = "data:image/png;base64," + base64.b64encode(canvas_png()).decode()
            pose = [0.0] * 16
            calls = {
                "/predict?include=counterfactuals,routing, its 280x280 canvas as an upload (the page before)": (
                    "/predict?include=counterfactuals,routing",
                    {"json": {"image": canvas}},
                ),
                "/predict?include=counterfactuals,routing,pixels, the canvas as `source: canvas` (the page now)": (
                    "/predict?include=counterfactuals,routing,pixels",
                    {"json": {"image": canvas, "source": "canvas"}},
                ),
                "/probe, 1 transform (a probe slider moved)": ("/probe", {"json": {"pixels": pixels, "transforms": [{"rotate": 20}]}}),
                "/probe, 13 transforms (the sweep for the plot)": (
                    "/probe",
                    {"json": {"pixels": pixels, "transforms": [{"rotate": a} for a in range(-45, 46, 7)][:13]}},
                ),
                "/reconstruct (a pose slider moved)": ("/reconstruct", {"json": {"digit": 3, "pose": pose}}),
            }
            rows = []
            for name, (path, kwargs) in calls.items():
                times, size = [], 0
                for i in range(requests + 5):
                    t0 = time.perf_counter()
                    r = client.post(server.url + path, **kwargs)
                    if i >= 5:
                        times.append((time.perf_counter() - t0) * 1000)
                    assert r.status_code == 200, r.text[:200]
                    size = len(r.content)
                rows.append(
                    {
                        "request": name,
                        "p50_ms": round(float(np.median(times)), 2),
                        "p95_ms": round(float(np.percentile(times, 95)), 2),
                        "bytes": size,
                    }
                )
            return rows
    finally:
        server.stop()


def measure(weights: Path, min_seconds: float = 2.0) -> dict:
    return {"in_process": in_process(weights, min_seconds), "page_requests": page_requests()}
