"""Whatever a client sends gets a clear JSON 4xx, never a 500 (a table of hostile inputs)."""

from __future__ import annotations

import io
import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from service.settings import Settings
from tests.service.helpers import b64, encode, stroke_digit_one

GOOD_PNG = stroke_digit_one()
MAX_BODY = Settings.model_fields["max_body_bytes"].default
POSE = [0.0] * 16


def png_bomb(width: int = 30000, height: int = 30000) -> bytes:
    """A 1-bit PNG whose header claims width x height: ~100 kB on the wire, 112 MB decoded."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    row = b"\x00" + b"\x00" * ((width + 7) // 8)
    comp = zlib.compressobj(9)
    idat = b"".join(comp.compress(row) for _ in range(height)) + comp.flush()
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0))
        + chunk(b"IDAT", idat)
        + chunk(b"IEND", b"")
    )


def multipart(data: bytes, name: str = "x.png", ctype: str = "image/png") -> dict:
    return {"files": {"file": (name, data, ctype)}}


CASES = [
    # (id, method, path, request kwargs, expected status, expected error code)
    ("empty-multipart-file", "post", "/predict", multipart(b""), 400, "bad_input"),
    ("random-bytes", "post", "/predict", multipart(np.random.default_rng(0).bytes(5000)), 400, "bad_input"),
    ("truncated-png", "post", "/predict", multipart(GOOD_PNG[: len(GOOD_PNG) // 2]), 400, "bad_input"),
    ("text-file-as-image", "post", "/predict", multipart(b"hello", "x.txt", "text/plain"), 400, "bad_input"),
    ("tiff-not-accepted", "post", "/predict", multipart(encode(Image.new("L", (8, 8)), "TIFF")), 400, "bad_input"),
    (
        "multipart-no-boundary",
        "post",
        "/predict",
        {"content": b"abc", "headers": {"content-type": "multipart/form-data"}},
        400,
        "bad_input",
    ),
    (
        "multipart-garbage",
        "post",
        "/predict",
        {"content": b"garbage", "headers": {"content-type": "multipart/form-data; boundary=xyz"}},
        400,
        "bad_input",
    ),
    (
        "multipart-truncated",
        "post",
        "/predict",
        {
            "content": b'--xyz\r\nContent-Disposition: form-data; name="file"; filename="a.png"\r\n\r\nPNG',
            "headers": {"content-type": "multipart/form-data; boundary=xyz"},
        },
        400,
        "bad_input",
    ),
    (
        "multipart-1000-parts",
        "post",
        "/predict",
        {
            "content": b"".join(b'--xyz\r\nContent-Disposition: form-data; name="f%d"\r\n\r\nv\r\n' % i for i in range(1000))
            + b"--xyz--\r\n",
            "headers": {"content-type": "multipart/form-data; boundary=xyz"},
        },
        422,
        "invalid",
    ),
    (
        "multipart-field-not-a-file",
        "post",
        "/predict",
        {
            "content": b'--xyz\r\nContent-Disposition: form-data; name="file"\r\n\r\nnot an upload\r\n--xyz--\r\n',
            "headers": {"content-type": "multipart/form-data; boundary=xyz"},
        },
        422,
        "invalid",
    ),
    ("no-file-field", "post", "/predict", {"files": {"other": ("x.png", GOOD_PNG, "image/png")}}, 422, "invalid"),
    ("wrong-media-type", "post", "/predict", {"content": b"abc", "headers": {"content-type": "text/plain"}}, 415, "unsupported_media_type"),
    ("no-media-type", "post", "/predict", {"content": b"abc"}, 415, "unsupported_media_type"),
    ("reconstruct-form", "post", "/reconstruct", {"data": {"digit": "1"}}, 415, "unsupported_media_type"),
    (
        "body-30MB",
        "post",
        "/predict",
        {"content": b"0" * (30 * 1024 * 1024), "headers": {"content-type": "application/json"}},
        413,
        "too_large",
    ),
    ("empty-json-body", "post", "/predict", {"content": b"", "headers": {"content-type": "application/json"}}, 400, "bad_json"),
    ("broken-json", "post", "/predict", {"content": b'{"pixels": [[', "headers": {"content-type": "application/json"}}, 400, "bad_json"),
    (
        "deep-json",
        "post",
        "/predict",
        {"content": b"[" * 100000 + b"]" * 100000, "headers": {"content-type": "application/json"}},
        400,
        "bad_json",
    ),
    (
        "deep-json-reconstruct",
        "post",
        "/reconstruct",
        {"content": b'{"digit":' + b"[" * 5000, "headers": {"content-type": "application/json"}},
        400,
        "bad_json",
    ),
    (
        "huge-json",
        "post",
        "/predict/batch",
        {"content": b'{"images": ["' + b"A" * MAX_BODY + b'"]}', "headers": {"content-type": "application/json"}},
        413,
        "too_large",
    ),
    ("json-not-object", "post", "/predict", {"json": [1, 2, 3]}, 422, "invalid"),
    ("both-image-and-pixels", "post", "/predict", {"json": {"image": b64(GOOD_PNG), "pixels": [[0] * 28] * 28}}, 422, "invalid"),
    ("unknown-field", "post", "/predict", {"json": {"picture": "x"}}, 422, "invalid"),
    ("bad-base64", "post", "/predict", {"json": {"image": "not base64!"}}, 400, "bad_input"),
    ("data-url-not-base64", "post", "/predict", {"json": {"image": "data:image/png,abc"}}, 400, "bad_input"),
    ("base64-of-garbage", "post", "/predict", {"json": {"image": b64(b"garbage" * 10)}}, 400, "bad_input"),
    (
        "pixels-nan",
        "post",
        "/predict",
        {"content": b'{"pixels": [[NaN]]}', "headers": {"content-type": "application/json"}},
        400,
        "bad_json",  # not JSON (RFC 8259): the parser refuses it
    ),
    (
        "pixels-inf",
        "post",
        "/predict",
        {"content": b'{"pixels": [[1e999]]}', "headers": {"content-type": "application/json"}},
        400,
        "bad_json",  # a number past float64 is refused by the parser
    ),
    ("pixels-out-of-range", "post", "/predict", {"json": {"pixels": [[2.0] * 28] * 28}}, 422, "invalid"),
    ("pixels-negative", "post", "/predict", {"json": {"pixels": [[-0.1] * 28] * 28}}, 422, "invalid"),
    ("pixels-wrong-shape", "post", "/predict", {"json": {"pixels": [[0.0] * 27] * 28}}, 422, "invalid"),
    ("pixels-ragged", "post", "/predict", {"json": {"pixels": [[0.0] * 28] * 27 + [[0.0] * 3]}}, 422, "invalid"),
    ("pixels-flat", "post", "/predict", {"json": {"pixels": [0.0] * 784}}, 422, "invalid"),
    ("pixels-strings", "post", "/predict", {"json": {"pixels": [["a"] * 28] * 28}}, 422, "invalid"),
    ("batch-too-many", "post", "/predict/batch", {"json": {"pixels": [[[0.0] * 28] * 28] * 65}}, 422, "invalid"),
    ("batch-too-many-files", "post", "/predict/batch", {"files": [("file", ("x.png", GOOD_PNG, "image/png"))] * 65}, 422, "invalid"),
    ("batch-empty", "post", "/predict/batch", {"json": {"images": []}}, 422, "invalid"),
    ("batch-one-bad-image", "post", "/predict/batch", {"json": {"images": [b64(GOOD_PNG), b64(b"junk")]}}, 400, "bad_input"),
    ("digit-10", "post", "/reconstruct", {"json": {"digit": 10, "pose": POSE}}, 422, "invalid"),
    ("digit-minus-1", "post", "/reconstruct", {"json": {"digit": -1, "pose": POSE}}, 422, "invalid"),
    ("digit-float", "post", "/reconstruct", {"json": {"digit": 1.5, "pose": POSE}}, 422, "invalid"),
    ("pose-short", "post", "/reconstruct", {"json": {"digit": 1, "pose": [0.0] * 15}}, 422, "invalid"),
    ("pose-long", "post", "/reconstruct", {"json": {"digit": 1, "pose": [0.0] * 17}}, 422, "invalid"),
    (
        "pose-nan",
        "post",
        "/reconstruct",
        {"content": b'{"digit": 1, "pose": [NaN, 0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]}', "headers": {"content-type": "application/json"}},
        400,
        "bad_json",  # not JSON (RFC 8259): the parser refuses it
    ),
    (
        "pose-infinity",
        "post",
        "/reconstruct",
        {"content": b'{"digit": 1, "pose": [Infinity, 0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]}', "headers": {"content-type": "application/json"}},
        400,
        "bad_json",  # not JSON (RFC 8259): the parser refuses it
    ),
    ("pose-huge", "post", "/reconstruct", {"json": {"digit": 1, "pose": [1e30] + [0.0] * 15}}, 422, "invalid"),
    ("perturb-too-many-deltas", "post", "/perturb", {"json": {"digit": 1, "pose": POSE, "deltas": [0.0] * 42}}, 422, "invalid"),
    ("perturb-no-deltas", "post", "/perturb", {"json": {"digit": 1, "pose": POSE, "deltas": []}}, 422, "invalid"),
    (
        "perturb-nan-delta",
        "post",
        "/perturb",
        {
            "content": b'{"digit": 1, "pose": [0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0], "deltas": [NaN]}',
            "headers": {"content-type": "application/json"},
        },
        400,
        "bad_json",  # not JSON (RFC 8259): the parser refuses it
    ),
    ("include-unknown", "post", "/predict?include=weights", {"json": {"pixels": [[0.0] * 28] * 28}}, 422, "invalid"),
    # a query parameter a route does not take, misspelt or not, and a single-valued one twice: refused, not read past
    ("query-misspelt", "post", "/predict?inlcude=routing", {"json": {"pixels": [[0.0] * 28] * 28}}, 422, "invalid"),
    ("query-unknown", "post", "/perturb?include=pixels", {"json": {"digit": 1, "pose": POSE}}, 422, "invalid"),
    ("query-model-twice", "post", "/predict?model=multimnist&model=capsnet", {"json": {"pixels": [[0.0] * 28] * 28}}, 422, "invalid"),
    ("traversal", "get", "/static/../weights/model-card.json", {}, 404, "not_found"),
    ("traversal-encoded", "get", "/static/%2e%2e/weights/capsnet.onnx", {}, 404, "not_found"),
    ("traversal-double-encoded", "get", "/static/..%252fservice%252fapp.py", {}, 404, "not_found"),
    ("directory-listing", "get", "/static/", {}, 404, "not_found"),
    ("unknown-path", "get", "/etc/passwd", {}, 404, "not_found"),
    ("wrong-method", "get", "/predict", {}, 405, "method_not_allowed"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_gets_a_clear_json_4xx(client, case):
    _, method, path, kwargs, status, code = case
    r = getattr(client, method)(path, **kwargs)
    assert r.status_code == status, r.text[:300]
    body = r.json()
    assert body["error"] == code and body["detail"]
    assert r.headers["x-content-type-options"] == "nosniff"


def test_decompression_bomb_is_refused_before_decoding(client):
    bomb = png_bomb()
    assert len(bomb) < 1_000_000
    r = client.post("/predict", files={"file": ("bomb.png", bomb, "image/png")})
    assert r.status_code == 413 and "900000000 pixels" in r.json()["detail"]
    r = client.post("/predict", json={"image": b64(bomb)})
    assert r.status_code == 413


@pytest.mark.parametrize("side, said", [(10_000, "10000x10000 = 100000000 pixels"), (20_000, "400000000 pixels")])
def test_an_image_past_pillows_guard_is_refused_in_the_services_words(client, side, said):
    """Between Pillow's own guard (89 M pixels) and twice it, and past that, the answer names the size and the service's
    limit, as for any image over it, not Pillow's limits and its talk of a DOS attack."""
    r = client.post("/predict", files={"file": ("big.png", png_bomb(side, side), "image/png")})
    detail = r.json()["detail"]
    assert r.status_code == 413 and said in detail and "over the 16777216 pixel limit" in detail, detail
    assert "bomb" not in detail and "89478485" not in detail and "178956970" not in detail, detail


def _animated_gif() -> bytes:
    frames = [Image.new("L", (40, 40), 255) for _ in range(3)]
    for i, f in enumerate(frames):
        f.paste(0, (18, 5 + i, 22, 35))
    buf = io.BytesIO()
    frames[0].save(buf, "GIF", save_all=True, append_images=frames[1:], duration=100, loop=0)
    return buf.getvalue()


def _cmyk_jpeg() -> bytes:
    im = Image.open(io.BytesIO(GOOD_PNG)).convert("CMYK")
    return encode(im, "JPEG")


def _png16() -> bytes:
    a = np.full((60, 60), 65535, np.uint16)
    a[10:50, 27:33] = 0
    return encode(Image.fromarray(a))


ODD = [
    ("animated-gif", _animated_gif, 1),
    ("cmyk-jpeg", _cmyk_jpeg, 1),
    ("png-16-bit", _png16, 1),
    ("palette-png", lambda: encode(Image.open(io.BytesIO(GOOD_PNG)).convert("P")), 1),
    ("rgba-png", lambda: encode(Image.open(io.BytesIO(GOOD_PNG)).convert("RGBA")), 1),
    ("bmp", lambda: encode(Image.open(io.BytesIO(GOOD_PNG)), "BMP"), 1),
    ("webp", lambda: encode(Image.open(io.BytesIO(GOOD_PNG)).convert("RGB"), "WEBP", lossless=True), 1),
    ("one-by-one", lambda: encode(Image.new("L", (1, 1), 0)), None),
    ("blank-white", lambda: encode(Image.new("RGB", (64, 64), "white")), None),
    ("very-wide", lambda: encode(Image.new("L", (4000, 3), 0)), None),
    ("very-tall-thin-ink", lambda: encode(Image.fromarray(np.pad(np.zeros((300, 2), np.uint8), 10, constant_values=255))), 1),
]


@pytest.mark.parametrize("make, digit", [(o[1], o[2]) for o in ODD], ids=[o[0] for o in ODD])
def test_odd_but_valid_images_are_answered(client, make, digit):
    r = client.post("/predict", files={"file": ("x", make(), "application/octet-stream")})
    assert r.status_code == 200, r.text[:300]
    body = r.json()
    assert len(body["lengths"]) == 10
    if digit is not None:
        assert body["prediction"] == digit
    else:
        assert all(np.isfinite(body["lengths"]))


def test_blank_image_input_is_blank(client):
    body = client.post("/predict?include=pixels", files={"file": ("x.png", encode(Image.new("L", (50, 50), 255)), "image/png")}).json()
    assert not np.array(body["input"]["pixels"]).any()


def test_security_headers_and_closed_cors(client):
    r = client.get("/")
    csp = r.headers["content-security-policy"]
    assert "default-src 'self'" in csp and "script-src 'self'" in csp
    assert r.headers["x-content-type-options"] == "nosniff"
    pre = client.options("/predict", headers={"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"})
    assert "access-control-allow-origin" not in pre.headers


def test_error_messages_are_in_the_clients_terms(client):
    """What a person reads when a request is wrong names their mistake in their terms: no pydantic prefixes, no class
    names of this service, no double negatives, a truncated file called truncated, and the usual cause of a JSON string
    broken over lines (base64 wrapped at 76 columns) named."""

    def detail(r, status: int) -> str:
        assert r.status_code == status, r.text[:300]
        return r.json()["detail"]

    said = detail(client.post("/predict", content=b"abc"), 415)
    assert said.endswith("not a body without a Content-Type header"), said
    said = detail(client.post("/predict?inlcude=routing", json={"pixels": [[0.0] * 28] * 28}), 422)
    assert said == "/predict takes no query parameter 'inlcude' (it takes: include, model, routing_type)", said
    assert detail(client.post("/predict", json=[1, 2, 3]), 422) == "the body should be a JSON object"
    assert detail(client.post("/reconstruct", json=[1, 2]), 422) == "the body should be a JSON object"
    said = detail(client.post("/predict", json={"image": b64(GOOD_PNG), "pixels": [[0] * 28] * 28}), 422)
    assert "Value error" not in said and "exactly one of" in said, said
    said = detail(client.post("/predict?include=routing&routing_type=abc", json={"pixels": [[0] * 28] * 28}), 422)
    assert "Value error" not in said and "routing_type" in said, said
    said = detail(client.post("/predict", files={"file": ("cut.png", GOOD_PNG[: len(GOOD_PNG) // 2], "image/png")}), 400)
    assert said == "cannot decode image: this PNG file is truncated or corrupt", said
    wrapped = "\n".join(b64(GOOD_PNG)[i : i + 76] for i in range(0, len(b64(GOOD_PNG)), 76))
    said = detail(client.post("/predict", content=f'{{"image": "{wrapped}"}}', headers={"content-type": "application/json"}), 400)
    assert "base64 -w0" in said, said
    # a compressed body (the Open Inference Protocol's routes take gzip; these do not) is refused as compressed, not
    # read as JSON that is not UTF-8
    pixels = b'{"pixels": ' + str([[0.0] * 28] * 28).encode() + b"}"
    gzipped = zlib.compress(pixels, wbits=31)
    said = detail(client.post("/predict", content=gzipped, headers={"content-type": "application/json", "content-encoding": "gzip"}), 415)
    assert said == "/predict takes bodies as they are, not with Content-Encoding gzip", said
    said = detail(client.post("/predict", content=pixels.decode().encode("utf-16"), headers={"content-type": "application/json"}), 400)
    assert "JSON is UTF-8 text" in said, said


@pytest.mark.parametrize(
    "path, body, field",
    [
        ("/predict", {"pixels": [["0"] * 28] * 28}, "pixels.0.0"),
        ("/predict", {"pixels": [[True] * 28] * 28}, "pixels.0.0"),
        ("/reconstruct", {"digit": "3", "pose": [0.0] * 16}, "digit"),
        ("/reconstruct", {"digit": 3, "pose": ["0.1"] + [0.0] * 15}, "pose.0"),
        ("/probe", {"pixels": [[0.0] * 28] * 28, "transforms": [{"rotate": "5"}]}, "transforms.0.rotate"),
        ("/probe", {"pixels": [[0.0] * 28] * 28, "transforms": [{"rotate": True}]}, "transforms.0.rotate"),
    ],
    ids=["pixels-as-strings", "pixels-as-booleans", "digit-as-string", "pose-as-strings", "rotate-as-string", "rotate-as-boolean"],
)
def test_numbers_are_json_numbers(client, path, body, field):
    """A string or a boolean where the API takes a number is a 422 naming the field: "0" read as 0 and true as 1 gave
    answers to what the client may not have meant. A number is a number however JSON writes it: 0 where a float goes, 3.0
    for a digit (Python's json writes floats so)."""
    r = client.post(path, json=body)
    assert r.status_code == 422 and r.json()["detail"].startswith(field) and "JSON number" in r.json()["detail"], r.text[:300]
    assert client.post("/predict", json={"pixels": [[0] * 28] * 28}).status_code == 200
    assert (
        client.post(
            "/reconstruct",
            content=b'{"digit": 3.0, "pose": [' + b",".join([b"0.0"] * 16) + b"]}",
            headers={"content-type": "application/json"},
        ).status_code
        == 200
    )


def test_a_validation_error_without_details_is_a_422_not_a_500():
    from fastapi.exceptions import RequestValidationError

    from service.errors import classify

    failure = classify(RequestValidationError([]))
    assert (failure.status, failure.code, failure.detail) == (422, "invalid", "invalid request")


def test_a_16_mp_phone_photo_is_taken(client):
    """A "16 MP" phone's photo is 4624x3472 (16.05 M pixels) or 4656x3496: under the limit, read at reduced scale, not
    a 413 for being over a round 16,000,000."""
    buf = io.BytesIO()
    Image.new("L", (4656, 3496), 235).save(buf, "JPEG", quality=70)
    r = client.post("/predict", files={"file": ("phone.jpg", buf.getvalue(), "image/jpeg")})
    assert r.status_code == 200 and r.json()["blank"], r.text[:300]
