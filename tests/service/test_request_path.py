"""One request path: method, then media type, then size and JSON, each checked once; rejections
counted under their route; HEAD on every GET endpoint; one error code per mistake; responses as /openapi.json says."""

from __future__ import annotations

import asyncio
import re
import socket
import time

import httpx
import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from service.app import create_app
from service.http.body import MAX_JSON_DEPTH
from service.settings import Settings
from tests.service.helpers import b64, stroke_digit_one

GOOD_PNG = stroke_digit_one()
PIXELS = [[0.0] * 28] * 28
POSE = [0.1] * 16
JSON_ENDPOINTS = ["/predict", "/predict/batch", "/reconstruct", "/perturb"]


def _count(metrics: str, line_start: str) -> float:
    return sum(float(line.split()[-1]) for line in metrics.splitlines() if line.startswith(line_start))


@pytest.mark.parametrize("method", ["put", "delete", "patch"])
def test_a_method_the_path_does_not_take_is_405_before_its_media_type_is_looked_at(client, method):
    r = client.request(method.upper(), "/predict", content=b"hello", headers={"content-type": "text/plain"})
    assert r.status_code == 405 and r.json() == {"error": "method_not_allowed", "detail": f"/predict takes POST, not {method.upper()}"}
    assert r.headers["allow"] == "POST" and r.headers["content-type"] == "application/json"


@pytest.mark.parametrize("method", ["POST", "DELETE"])
@pytest.mark.parametrize("path", ["/healthz", "/model", "/static/app.js"])
def test_a_405_lists_every_method_the_path_takes_head_with_get(client, method, path):
    """Every GET path also answers HEAD (served as GET without the body), so its 405 says so, in Allow (RFC 9110) and in
    words."""
    r = client.request(method, path)
    assert r.status_code == 405 and r.headers["allow"] == "GET, HEAD"
    assert r.json() == {"error": "method_not_allowed", "detail": f"{path} takes GET or HEAD, not {method}"}


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/model", "/", "/metrics", "/openapi.json", "/static/app.js"])
def test_head_answers_every_get_endpoint_with_the_headers_and_no_body(client, path):
    get, head = client.get(path), client.head(path)
    assert head.status_code == get.status_code == 200
    assert head.content == b""
    assert head.headers["content-type"] == get.headers["content-type"]
    assert head.headers["x-content-type-options"] == "nosniff"
    if path != "/metrics":  # the only one whose body changes between two requests
        assert head.headers["content-length"] == get.headers["content-length"]


def test_head_over_a_real_server_sends_no_body(server):
    """On one keep-alive connection, HEAD then GET: the GET's answer starts right after the HEAD's headers, so no body
    was sent (an HTTP client reads none after a HEAD whatever comes, and would not tell)."""
    for path in ("/healthz", "/model"):
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            ask = f"{{}} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
            sock.sendall((ask.format("HEAD") + ask.format("GET")).encode())
            got = b""
            while got.count(b"HTTP/1.1 200 ") < 2 or not got.endswith(b"}"):
                chunk = sock.recv(65536)
                assert chunk, got
                got += chunk
        head, _, rest = got.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 ") and int(re.search(rb"content-length: (\d+)", head).group(1)) > 0
        assert rest.startswith(b"HTTP/1.1 200 "), rest[:80]  # the GET's status line, with nothing before it
    assert httpx.head(server.url + "/predict", timeout=10).status_code == 405


def test_early_rejections_are_counted_under_the_route_they_were_sent_to(client):
    sends = [
        (415, {"content": b"abc", "headers": {"content-type": "text/plain"}}),
        (413, {"content": b"0" * (Settings().max_body_bytes + 1), "headers": {"content-type": "application/json"}}),
        (400, {"content": b"{", "headers": {"content-type": "application/json"}}),
    ]
    before = client.get("/metrics").text
    for status, kwargs in sends:
        assert client.post("/predict", **kwargs).status_code == status
    assert client.put("/predict").status_code == 405
    assert client.head("/healthz").status_code == 200
    after = client.get("/metrics").text
    for path, method, status in [
        ("/predict", "POST", 415),
        ("/predict", "POST", 413),
        ("/predict", "POST", 400),
        ("/predict", "PUT", 405),
        ("/healthz", "HEAD", 200),
    ]:
        line = f'capsnet_requests_total{{endpoint="{path}",method="{method}",status="{status}"}}'
        assert _count(after, line) == _count(before, line) + 1, line


@pytest.mark.parametrize("body", [b'{"digit": 1, "pose": [', b"", b"\xff\xfe"], ids=["truncated", "empty", "not-utf8"])
@pytest.mark.parametrize("path", JSON_ENDPOINTS)
def test_malformed_json_is_bad_json_on_every_endpoint(client, path, body):
    r = client.post(path, content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400, r.text
    assert r.json()["error"] == "bad_json" and r.json()["detail"].startswith("request body is not valid JSON")


@pytest.mark.parametrize("path", JSON_ENDPOINTS)
def test_json_nested_past_the_parsers_limit_is_bad_json(client, path):
    deep = MAX_JSON_DEPTH + 1
    r = client.post(path, content=b'{"a": "[[[[", "b": ' + b"[" * deep + b"]" * deep + b"}", headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"] == "bad_json"
    assert r.json()["detail"].startswith("request body is not valid JSON: depth limit exceeded"), r.json()
    # at the limit it parses, and the schema has its say
    ok = MAX_JSON_DEPTH - 1
    r = client.post(path, content=b'{"a": "[[[[", "b": ' + b"[" * ok + b"]" * ok + b"}", headers={"content-type": "application/json"})
    assert r.status_code != 400 or r.json()["error"] != "bad_json", r.json()


def test_a_structured_json_media_type_is_json(client):
    r = client.post(
        "/reconstruct",
        content=b'{"digit": 1, "pose": [' + b",".join([b"0"] * 16) + b"]}",
        headers={"content-type": "application/vnd.capsnet+json; charset=utf-8"},
    )
    assert r.status_code == 200, r.text


def test_a_bad_item_of_a_json_batch_is_named(client):
    r = client.post("/predict/batch", json={"images": [b64(GOOD_PNG), b64(GOOD_PNG), b64(b"junk" * 20)]})
    assert r.status_code == 400 and r.json()["error"] == "bad_input"
    assert r.json()["detail"].startswith("image 2: cannot decode image"), r.json()
    r = client.post("/predict/batch", json={"images": [b64(GOOD_PNG), b64(GOOD_PNG), "not base64!"]})
    assert r.status_code == 400 and r.json()["detail"].startswith("image 2: image is not valid base64"), r.json()
    r = client.post("/predict/batch", json={"pixels": [PIXELS, PIXELS, [[0.0] * 27] * 28]})
    assert r.status_code == 422 and r.json()["detail"] == "image 2: pixels must be 28 rows of 28 numbers each, got shape [28, 27]"


def test_a_bad_file_of_a_multipart_batch_is_named(client):
    files = [
        ("file", ("a.png", GOOD_PNG, "image/png")),
        ("file", ("b.png", GOOD_PNG, "image/png")),
        ("file", ("c.png", b"junk", "image/png")),
    ]
    r = client.post("/predict/batch", files=files)
    assert r.status_code == 400 and r.json()["error"] == "bad_input"
    assert r.json()["detail"].startswith("image 2: cannot decode image"), r.json()


def _post_scope(headers: list[tuple[bytes, bytes]]) -> dict:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/predict",
        "raw_path": b"/predict",
        "root_path": "",
        "query_string": b"",
        "headers": headers,
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }


@pytest.mark.parametrize("declared", [None, 2000], ids=["chunked-trickle", "declared-then-stalled"])
def test_a_body_slower_than_the_minimum_rate_is_refused_with_408_and_closed(declared):
    """0.3 s plus 1000 bytes a second: a chunked body trickled at 100 bytes a second falls behind at once; a declared
    2000-byte body that stalls after its first bytes has 0.3 + 2 s."""
    app = create_app(Settings(warmup_runs=0, body_timeout_s=0.3, body_min_rate=1000))
    sent: list[dict] = []

    async def receive() -> dict:
        await asyncio.sleep(0.1 if declared is None else 60)
        return {"type": "http.request", "body": b" " * 10, "more_body": True}

    async def send(message: dict) -> None:
        sent.append(message)

    headers = [(b"content-type", b"application/json")] + ([(b"content-length", str(declared).encode())] if declared else [])

    async def run() -> float:
        t0 = time.monotonic()
        await asyncio.wait_for(app(_post_scope(headers), receive, send), 10)
        return time.monotonic() - t0

    elapsed = asyncio.run(run())
    start = next(m for m in sent if m["type"] == "http.response.start")
    assert start["status"] == 408 and (b"connection", b"close") in start["headers"]
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    assert b'"error":"request_timeout"' in body and b"did not arrive in time" in body, body
    assert elapsed >= 0.3, "refused before its time was up"  # wait_for's 10 s above is the bound for a hang


def test_a_body_without_content_length_is_refused_once_past_the_limit_and_not_read_further():
    """Driven as ASGI (TestClient reads a streamed body whole before the app sees it): 1 MB chunks of a 64 MB upload."""
    app = create_app(Settings(warmup_runs=0))
    limit, chunk = app.state.capsnet.settings.max_body_bytes, b"[" + b"0" * (1 << 20)
    asked, sent = 0, []

    async def receive() -> dict:
        nonlocal asked
        asked += 1
        return {"type": "http.request", "body": chunk, "more_body": asked < 64}

    async def send(message: dict) -> None:
        sent.append(message)

    asyncio.run(app(_post_scope([(b"content-type", b"application/json")]), receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    assert start["status"] == 413 and (b"connection", b"close") in start["headers"]
    assert asked == limit // len(chunk) + 1  # the chunk that crossed the limit was the last one read


def test_one_in_flight_count_feeds_the_gauge_and_the_batcher_less_those_still_receiving(client):
    state = client.app.state.capsnet
    batcher, metrics = state.batcher, state.metrics
    seen: list[tuple[int, bool]] = []
    real = batcher._run

    def spy(images, busy=False, explain=None, fetch=frozenset()):
        seen.append((metrics.in_flight, busy))
        return real(images, busy, explain, fetch)

    batcher._run = spy
    try:
        client.post("/predict", json={"pixels": PIXELS})
        with metrics.serving():  # as if another request were being served while this one runs
            client.post("/predict", json={"pixels": PIXELS})
            with metrics.receiving_body():  # ... and now as if that one were still waiting for its body
                client.post("/predict", json={"pixels": PIXELS})
    finally:
        batcher._run = real
    assert seen == [(1, False), (2, True), (2, False)]
    text = client.get("/metrics").text
    assert "capsnet_requests_in_flight 1.0" in text and "capsnet_requests_receiving 0.0" in text  # the scrape itself
    assert _count(text, 'capsnet_batches_total{load="busy"}') >= 1


def test_bodies_trickled_by_strangers_do_not_make_a_lone_request_run_as_if_the_service_were_busy(server):
    """Requests whose bodies are still arriving wait on their clients, not on the service: a lone /predict among them
    runs alone (on every core), and /metrics counts them as receiving until they end."""
    trickling = []
    try:
        for _ in range(5):
            s = socket.create_connection(("127.0.0.1", server.port))
            s.sendall(b"POST /predict HTTP/1.1\r\nHost: capsnet\r\nContent-Type: application/json\r\nContent-Length: 3000\r\n\r\n{")
            trickling.append(s)
        with httpx.Client(base_url=server.url, timeout=10) as c:
            deadline = time.monotonic() + 30
            while _count(c.get("/metrics").text, "capsnet_requests_receiving") < 5 and time.monotonic() < deadline:
                time.sleep(0.02)
            before = c.get("/metrics").text
            assert _count(before, "capsnet_requests_receiving") == 5
            assert c.post("/predict", files={"file": ("one.png", GOOD_PNG, "image/png")}).json()["prediction"] == 1
            after = c.get("/metrics").text
            for s in trickling:
                s.close()
            trickling = []
            deadline = time.monotonic() + 30
            while _count(c.get("/metrics").text, "capsnet_requests_receiving") > 0 and time.monotonic() < deadline:
                time.sleep(0.02)
            assert _count(c.get("/metrics").text, "capsnet_requests_receiving") == 0  # the gone clients are not counted
    finally:
        for s in trickling:
            s.close()
    assert _count(after, 'capsnet_batches_total{load="alone"}') == _count(before, 'capsnet_batches_total{load="alone"}') + 1
    assert _count(after, 'capsnet_batches_total{load="busy"}') == _count(before, 'capsnet_batches_total{load="busy"}')


def test_each_request_fetches_only_the_graph_outputs_it_answers_with(client):
    """`coupling` [1152,10] and `primary` [1152,8] (83 KB an image, against 3.8 KB for lengths, poses and the
    reconstruction) leave the session only for requests that answer with them: include=coupling or coupling_grid,
    include=routing, and a protocol request naming them or naming no outputs (then all are answered)."""
    batcher = client.app.state.capsnet.batcher
    real, fetched = batcher._run, []

    def spy(images, busy=False, explain=None, fetch=frozenset()):
        out = real(images, busy, explain, fetch)
        fetched.append(set(out) & {"coupling", "primary"})
        return out

    image = {"name": "image", "shape": [1, 1, 28, 28], "datatype": "FP32", "data": [0.0] * 784}
    batcher._run = spy
    try:
        answers = [
            client.post("/predict", json={"pixels": PIXELS}),
            client.post("/predict?include=coupling_grid", json={"pixels": PIXELS}),
            client.post("/predict/batch?include=routing", json={"pixels": [PIXELS, PIXELS]}),
            client.post("/v2/models/capsnet/infer", json={"inputs": [image], "outputs": [{"name": "lengths"}]}),
            client.post("/v2/models/capsnet/infer", json={"inputs": [image]}),
        ]
    finally:
        batcher._run = real
    assert [r.status_code for r in answers] == [200] * 5
    assert fetched == [set(), {"coupling"}, {"primary"}, set(), {"coupling", "primary"}]
    assert "coupling_grid" in answers[1].json() and "routing" in answers[2].json()["results"][0]
    assert [o["name"] for o in answers[4].json()["outputs"]] == ["lengths", "poses", "reconstruction", "coupling", "primary"]


# ---- responses against the schemas /openapi.json declares for them ----


@pytest.fixture(scope="module")
def spec(client) -> dict:
    return client.get("/openapi.json").json()


def _validator(spec: dict, path: str, method: str, status: int) -> Draft202012Validator:
    """The declared schema of one response, its $refs resolved against the whole document."""
    pointer = "/".join(
        ["#/paths", path.replace("~", "~0").replace("/", "~1"), method, "responses", str(status), "content", "application~1json", "schema"]
    )
    registry = Registry().with_resource("urn:openapi", Resource(contents=spec, specification=DRAFT202012))
    return Draft202012Validator({"$ref": "urn:openapi" + pointer}, registry=registry)


def _assert_valid(spec: dict, path: str, method: str, r: httpx.Response) -> None:
    errors = [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message[:200]}"
        for e in _validator(spec, path, method, r.status_code).iter_errors(r.json())
    ]
    assert not errors, f"{method.upper()} {path} {r.status_code}: {errors[:5]}"


OK_CALLS = [
    ("post", "/predict", {"json": {"pixels": PIXELS}}),
    ("post", "/predict", {"files": {"file": ("one.png", GOOD_PNG, "image/png")}}),
    ("post", "/predict?include=coupling,counterfactuals", {"json": {"image": b64(GOOD_PNG)}}),
    ("post", "/predict?include=coupling_grid", {"json": {"pixels": PIXELS}}),
    ("post", "/predict?include=routing&routing_type=7", {"json": {"pixels": PIXELS}}),
    ("post", "/predict/batch?include=routing", {"json": {"pixels": [PIXELS, PIXELS]}}),
    ("post", "/probe", {"json": {"pixels": PIXELS, "transforms": [{}, {"rotate": 30, "scale": 0.8, "shear": -10, "tx": 1, "ty": -2}]}}),
    ("post", "/probe", {"json": {"image": b64(GOOD_PNG), "transforms": [{"rotate": -45}]}}),
    ("post", "/predict/batch", {"json": {"pixels": [PIXELS, PIXELS]}}),
    ("post", "/predict/batch?include=coupling", {"files": [("file", ("a.png", GOOD_PNG, "image/png"))] * 2}),
    ("post", "/reconstruct", {"json": {"digit": 3, "pose": POSE}}),
    ("post", "/perturb", {"json": {"digit": 3, "pose": POSE}}),
    ("post", "/perturb", {"json": {"digit": 3, "pose": POSE, "deltas": [-1.0, 1.0]}}),
    ("get", "/healthz", {}),
    ("get", "/readyz", {}),
    ("get", "/model", {}),
]


@pytest.mark.parametrize("method, url, kwargs", OK_CALLS, ids=[f"{m} {u}" for m, u, _ in OK_CALLS])
def test_every_200_matches_its_declared_schema(client, spec, method, url, kwargs):
    r = client.request(method.upper(), url, **kwargs)
    assert r.status_code == 200, r.text[:300]
    _assert_valid(spec, url.split("?")[0], method, r)


ERROR_CALLS = [
    ("/predict", {"content": b"{", "headers": {"content-type": "application/json"}}, 400),
    ("/predict", {"json": {"image": "not base64!"}}, 400),
    ("/predict", {"content": b"0" * (Settings().max_body_bytes + 1), "headers": {"content-type": "application/json"}}, 413),
    ("/predict/batch", {"content": b"x", "headers": {"content-type": "text/plain"}}, 415),
    ("/predict", {"json": {"pixels": [[2.0] * 28] * 28}}, 422),
    ("/reconstruct", {"json": {"digit": 12, "pose": POSE}}, 422),
    ("/perturb", {"json": {"digit": 1, "pose": POSE, "deltas": [0.0] * 42}}, 422),
    ("/predict?include=routing&routing_type=32", {"json": {"pixels": PIXELS}}, 422),
    ("/probe", {"json": {"pixels": PIXELS, "transforms": [{"scale": 0}]}}, 422),
    ("/probe", {"files": {"file": ("one.png", GOOD_PNG, "image/png")}}, 415),
]


@pytest.mark.parametrize("path, kwargs, status", ERROR_CALLS, ids=[f"{p} {s}" for p, _, s in ERROR_CALLS])
def test_every_error_matches_the_error_body_declared(client, spec, path, kwargs, status):
    r = client.post(path, **kwargs)
    assert r.status_code == status, r.text[:300]
    _assert_valid(spec, path.split("?")[0], "post", r)


def test_validation_errors_list_each_field(client, spec):
    r = client.post("/reconstruct", json={"digit": 12, "pose": "x"})
    assert r.status_code == 422
    assert {tuple(e["loc"]) for e in r.json()["errors"]} == {("body", "digit"), ("body", "pose")}


@pytest.mark.parametrize(
    "path, body, loc",
    [
        ("/reconstruct", {"digit": 12, "pose": [0.0] * 16}, ["body", "digit"]),
        ("/predict", {"pixels": [[2.0]]}, ["body", "pixels", 0, 0]),
        ("/predict/batch", {"images": "x"}, ["body", "images"]),
        ("/probe", {"pixels": [[0.0] * 28] * 28, "transforms": [{"rotate": 999}]}, ["body", "transforms", 0, "rotate"]),
        ("/predict?model=nope", {"pixels": [[0.0] * 28] * 28}, ["query", "model"]),
    ],
)
def test_every_route_locates_a_field_at_fault_alike(client, path, body, loc):
    """`errors[].loc` starts with where the field is (`body` or `query`) on every route, as FastAPI writes it, whichever
    way the route reads its body; the detail names the first field without `body`."""
    r = client.post(path, json=body)
    assert r.status_code == 422 and r.json()["errors"][0]["loc"] == loc
    assert r.json()["detail"].startswith(".".join(str(p) for p in loc if p != "body") + ": ")


def test_openapi_documents_the_model_the_error_body_and_the_decoder_limits(spec):
    schemas = spec["components"]["schemas"]
    model = spec["paths"]["/model"]["get"]["responses"]
    assert model["200"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ServedModel"}
    assert "503" in model
    assert {
        "name",
        "version",
        "provider",
        "device",
        "precision",
        "model_file",
        "session_providers",
        "available_providers",
        "input_spec",
        "limits",
        "batching",
    } <= set(schemas["ServedModel"]["required"])
    assert schemas["ServedModel"]["additionalProperties"] is True  # the card's own fields

    error = schemas["ErrorBody"]
    assert set(error["required"]) == {"error", "detail"} and {"errors", "id"} <= set(error["properties"])
    assert schemas["FieldError"]["required"] == ["loc", "msg", "type"]

    limits = Settings()
    for name in ("ReconstructRequest", "PerturbRequest"):
        pose = schemas[name]["properties"]["pose"]
        assert pose["minItems"] == pose["maxItems"] == 16, name
        assert pose["items"]["minimum"] == -limits.max_abs_pose and pose["items"]["maximum"] == limits.max_abs_pose, name
    deltas = next(s for s in schemas["PerturbRequest"]["properties"]["deltas"]["anyOf"] if s.get("type") == "array")
    assert deltas["maxItems"] == limits.max_deltas == 41 and deltas["minItems"] == 1
