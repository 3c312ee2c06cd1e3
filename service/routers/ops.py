"""Liveness, readiness, the model card and Prometheus metrics: what an operator and an orchestrator ask."""

from __future__ import annotations

import onnxruntime as ort
from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST

from service.deps import ReadyDep, StateDep
from service.engine.tensors import ORT_TYPES
from service.http.body import MAX_JSON_DEPTH
from service.schemas import ErrorBody, Health, Ready, ServedModel

ONNX_TYPES = {datatype: onnx for onnx, datatype in ORT_TYPES.items()}  # FP32 -> tensor(float), as /model has always named it
router = APIRouter(tags=["operations"])


@router.get("/healthz", response_model=Health, summary="Alive (the process answers)")
async def healthz() -> dict:
    return {"status": "ok"}


@router.get(
    "/readyz",
    response_model=Ready,
    responses={503: {"model": Ready, "description": "still loading or warming up"}},
    summary="Ready: sessions loaded and warmed",
)
async def readyz(state: StateDep) -> JSONResponse:
    engine = state.engine
    if not state.ready or engine is None:
        return JSONResponse({"status": "loading", "provider": None, "device": None}, status_code=503, headers={"Retry-After": "1"})
    if state.group is not None and not state.group.all_ready():  # one of several processes: ready when the whole is
        return JSONResponse(
            {"status": "processes_loading", "provider": engine.provider, "device": engine.device},
            status_code=503,
            headers={"Retry-After": "1"},
        )
    # ready only while the engine is: a remote one's health is checked at most once a second
    body = {"provider": engine.provider, "device": engine.device}
    if (url := engine.describe().get("url")) is not None:
        body["engine"] = url
    if not await engine.check_ready():
        return JSONResponse({"status": "engine_unavailable", **body}, status_code=503, headers={"Retry-After": "1"})
    return JSONResponse({"status": "ready", **body})


@router.get(
    "/model",
    response_model=ServedModel,
    summary="The model card, the active execution provider and the input spec",
    responses={503: {"model": ErrorBody, "description": "still loading or warming up; see Retry-After"}},
)
async def model(state: ReadyDep) -> JSONResponse:
    engine, s = state.engine, state.settings
    inp = engine.signatures()["capsnet"][0][0]
    return JSONResponse(
        {
            **state.card.model_dump(mode="json"),
            "provider": engine.provider,
            "device": engine.device,
            "precision": engine.precision,
            "model_file": engine.model_file,
            "session_providers": engine.session_providers,
            "available_providers": ort.get_available_providers(),
            "engine": engine.describe(),
            "input_spec": {"name": inp.name, "type": ONNX_TYPES[inp.datatype], "shape": [None if d == -1 else d for d in inp.shape]},
            "limits": {
                "max_body_bytes": s.max_body_bytes,
                "max_image_pixels": s.max_image_pixels,
                "max_batch_items": s.max_batch_items,
                "max_deltas": s.max_deltas,
                "max_abs_pose": s.max_abs_pose,
                "max_json_depth": MAX_JSON_DEPTH,
                "max_json_values": s.max_json_values,
                "body_timeout_s": s.body_timeout_s,
                "body_min_rate": s.body_min_rate,
                "request_timeout_s": s.request_timeout_s,
            },
            "batching": {
                "max_batch": s.max_batch,
                "max_wait_ms": s.max_wait_ms,
                "max_queue": s.max_queue,
                "batches_in_flight": state.batcher.workers if state.batcher else None,
                "intra_op_threads": s.intra_op_threads or "one per core",
                "intra_op_threads_under_load": s.intra_op_threads_busy if engine.busy_session else "as intra_op_threads",
            },
        }
    )


@router.get(
    "/metrics",
    summary="Prometheus metrics",
    response_class=Response,
    responses={200: {"content": {"text/plain": {"example": 'capsnet_requests_total{endpoint="/predict",method="POST",status="200"} 3.0'}}}},
)
async def metrics(state: StateDep) -> Response:
    return Response(state.metrics.exposition(), media_type=CONTENT_TYPE_LATEST)
