"""Every knob of the service, read from environment variables prefixed CAPSNET_ (e.g. CAPSNET_PORT=8080); tracing's from
OpenTelemetry's own OTEL_* variables, so that a collector's usual configuration applies unchanged."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from service.engine.cores import available_cores

ROOT = Path(__file__).resolve().parent.parent


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CAPSNET_", extra="ignore")

    host: str = Field("127.0.0.1", description="address uvicorn binds")
    port: int = Field(8000, ge=0, le=65535, description="port uvicorn binds (0: any free port)")
    grpc_port: int | None = Field(
        None,
        ge=1,
        le=65535,
        description="port of the Open Inference Protocol over gRPC (Triton's GRPCInferenceService), on `host`; unset: no gRPC",
    )
    processes: int = Field(
        default_factory=lambda: min(2, available_cores()),
        ge=1,
        le=64,
        description="worker processes serving the port (and the gRPC port), each with its own copy of the models "
        "(service/processes.py); more than one lets every core take requests. Default: 2, or 1 where the process may use "
        "one CPU only (its affinity and its cgroup's CPU quota); on two cores two served more requests than one at 4 and "
        "16 clients (docs/scale-out.md)",
    )
    worker_stall_s: float = Field(
        10.0,
        ge=0,
        description="with several processes: a warm worker whose event loop has not marked itself alive (once a second) "
        "for this long is killed and replaced, and the group is not ready meanwhile, as with a worker that died: a hung "
        "worker would otherwise hold the connections the kernel hands it. 0: never",
    )
    api_keys_file: Path | None = Field(
        None,
        description="a file of API keys, one a line: with it, every request but the probes, the page and what it loads before "
        "the key (/openapi.json, /dimensions, /multimnist/sample, /static/, /decoders/) needs `Authorization: Bearer <key>` "
        "(gRPC metadata too); unset: no key asked",
    )
    payload_log: str | None = Field(
        None, description="a file (or `-`, standard error) for JSON lines of what the models were given and answered; unset: off"
    )
    payload_log_sample: float = Field(1.0, gt=0.0, le=1.0, description="with payload_log: the share of requests written")
    payload_log_tensors: bool = Field(False, description="with payload_log: write input tensors' values, not only their sha256")
    weights_dir: Path = Field(ROOT / "weights", description="holds capsnet.onnx, decoder.onnx, model-card.json")
    static_dir: Path = Field(ROOT / "static", description="the page's scripts and styles")
    templates_dir: Path = Field(ROOT / "templates", description="the page's jinja2 templates")
    log_level: str = Field("info", description="logging level")
    mnist_dir: Path = Field(
        ROOT.parent / "shared" / "data" / "mnist",
        description="MNIST's IDX files, for the page's random pairs of test digits (GET /multimnist/sample); absent: no such button",
    )

    precision: Literal["auto", "fp32", "int8"] = Field(
        "auto",
        description="capsnet model: fp32, int8, or auto (on the CPU, int8 when the model card says it met both bars: no more than "
        "0.05 points of accuracy lost, faster, no non-finite output; on CUDA, fp32). Beside int8 on the CPU the counterfactual "
        "redraws run in int8 too, where the card says that decoder met its bars",
    )
    providers: str = Field("cuda,cpu", description="execution providers in order of preference: cuda, cpu")
    engine_url: str | None = Field(
        None,
        description="base URL of an Open Inference Protocol server (Triton, KServe, another instance of this service) that runs "
        "both models instead of this process, e.g. http://triton:8000 (service/engine/remote.py)",
    )
    engine_timeout_s: float = Field(
        10.0, gt=0, description="with engine_url: connect and network timeout of each call to the engine (then 503 engine_unavailable)"
    )
    engine_start_timeout_s: float = Field(
        120.0, ge=0, description="with engine_url: how long start-up waits for the engine to be ready before the process exits (0: forever)"
    )
    intra_op_threads: int = Field(
        0, ge=0, description="onnxruntime intra-op threads for a batch run while no other request is in flight (0: one per physical core)"
    )
    intra_op_threads_busy: int = Field(
        1,
        ge=0,
        description="intra-op threads for a batch run while other requests are in flight, so the event loop keeps a core "
        "(0: as intra_op_threads)",
    )

    max_batch: int = Field(32, ge=1, le=1024, description="most images the batcher runs in one session call")
    max_wait_ms: float = Field(0.0, ge=0, le=1000, description="how long the batcher waits to fill a batch (0: takes what is queued)")
    workers: int = Field(
        0,
        ge=0,
        le=64,
        description="batches the model runs at once, each on its own thread (0: as many as keep the model level with the event "
        "loop, from a timing at start-up)",
    )
    max_queue: int = Field(512, ge=1, description="images waiting for the model before requests get 503")
    request_timeout_s: float = Field(10.0, gt=0, description="longest a request may wait for the model (then 503)")
    drop_abandoned: bool = Field(
        True,
        description="stop work on a request whose client has gone (not decoded, taken out of the queue, its answer not "
        "encoded; a batch already in the model finishes): false serves it to the end for nobody, as a measure of what dropping saves",
    )

    max_body_bytes: int = Field(16 * 1024 * 1024, ge=1024, description="largest request body (413 past it): a 12 MP phone JPEG is 2-8 MB")
    # checked from the header before decoding (imaging.open_image); capped below Pillow's own decompression-bomb guard
    # (Image.MAX_IMAGE_PIXELS, left at its default: no process-wide state set per app), which would refuse first otherwise
    # 2**24: a "16 MP" phone's sensor is up to 4656x3496 = 16.3 M pixels, over a round 16,000,000
    max_image_pixels: int = Field(16_777_216, ge=1, le=89_478_485, description="largest width x height of an upload (413 past it)")
    inline_decode_pixels: int = Field(
        4096,
        ge=0,
        description="uploads of up to this many pixels in all (an MNIST-sized image, ~0.4 ms) are decoded and preprocessed on "
        "the event loop; larger ones in the decode pool",
    )
    decode_workers: int = Field(2, ge=1, le=64, description="threads that decode and preprocess larger uploads")
    decode_pool_pixels: int = Field(
        64_000_000,
        ge=1,
        description="decoded pixels the decode pool holds, running and waiting (four of the largest legal uploads); past it, 503",
    )
    max_json_values: int = Field(
        131_072,
        ge=1024,
        description="most values in a JSON body, counted by its commas (413 past it): a /predict/batch of 64 images as pixels holds 50,176",
    )
    inline_parse_bytes: int = Field(
        256 * 1024,
        ge=0,
        description="request bodies of up to this many bytes are parsed (JSON, multipart) on the event loop; larger ones in the "
        "decode pool, where a byte counts as a pixel",
    )
    body_timeout_s: float = Field(
        10.0, gt=0, description="time a request body may take to arrive beyond what its size needs at body_min_rate (then 408)"
    )
    body_min_rate: int = Field(
        50_000, ge=1, description="slowest upload accepted, in bytes a second (400 kbit/s): a 16 MiB body may take 10 s + 336 s"
    )
    max_batch_items: int = Field(64, ge=1, description="most images in one /predict/batch request")
    max_deltas: int = Field(41, ge=1, description="most deltas in one /perturb request")
    max_abs_pose: float = Field(10.0, gt=0, description="largest |value| of a pose dimension or delta")

    cors_origins: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="comma-separated origins allowed by CORS (none by default)"
    )
    keepalive_timeout_s: int = Field(
        5, ge=1, description="an idle keep-alive connection is closed after this many seconds (uvicorn's timeout_keep_alive)"
    )
    graceful_timeout_s: float = Field(20.0, ge=0, description="how long SIGTERM waits for in-flight requests")
    warmup_runs: int = Field(3, ge=0, description="inference runs before /readyz says ready")

    @field_validator("cors_origins", mode="before")
    @classmethod
    def _split(cls, v: object) -> object:
        return [o.strip() for o in v.split(",") if o.strip()] if isinstance(v, str) else v


class TracingSettings(BaseSettings):
    """OpenTelemetry's environment variables (its SDK configuration specification), for the spans service/tracing.py
    makes. Off unless an exporter is named: OTEL_TRACES_EXPORTER, or an OTLP endpoint, which names the OTLP exporter.
    Read apart from Settings so that a wrong value turns tracing off with a warning instead of stopping the service."""

    model_config = SettingsConfigDict(env_prefix="OTEL_", extra="ignore")

    sdk_disabled: bool = Field(False, description="true: no tracing, whatever else is set")
    traces_exporter: str | None = Field(
        None, description="comma-separated: otlp, console or none (unset: otlp where an OTLP endpoint is set, else none)"
    )
    traces_sampler: str = Field(
        "parentbased_always_on",
        description="always_on, always_off, traceidratio, or parentbased_ before any of them (a caller's sampled flag wins)",
    )
    traces_sampler_arg: str | None = Field(None, description="traceidratio's ratio, 0 to 1 (unset: 1)")
    service_name: str = Field("capsnet-serve", description="the resource's service.name")
    exporter_otlp_endpoint: str | None = Field(None, description="the collector's base URL, e.g. http://collector:4318")
    exporter_otlp_traces_endpoint: str | None = Field(None, description="the traces endpoint itself, ahead of the base URL")
    exporter_otlp_protocol: str = Field("http/protobuf", description="http/protobuf (port 4318) or grpc (port 4317)")
    exporter_otlp_traces_protocol: str | None = Field(None, description="the traces exporter's protocol, ahead of the general one")


@lru_cache
def get_settings() -> Settings:
    return Settings()
