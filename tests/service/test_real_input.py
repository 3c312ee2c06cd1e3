"""Real input through the real app: photos of handwriting, non-digits, blank paper, and MNIST as uploaded PNGs.

The sets are generated (tests/service/realworld.py) from fixed seeds, so each figure is the same on every run; the
bars are quoted in docs/preprocessing.md (tests/test_docs_figures.py). Each test prints its figure."""

from __future__ import annotations

import base64
import io
from collections import Counter

import numpy as np
import pytest
from PIL import Image

from tests.needs import need_mnist
from tests.service import realworld
from tests.service.helpers import encode

# the bars, quoted by docs/preprocessing.md (tests/test_docs_figures.py holds the two together)
PHOTOS_READ = 0.98  # of 250 photos of test digits
PNG_READ, PNG_FLAGGED = 0.99, 0.02  # of the 10k test digits as PNG
NON_DIGITS_FLAGGED = 0.8


def mnist_test() -> tuple[np.ndarray, np.ndarray]:
    from model.data import load_mnist

    return load_mnist(need_mnist(), "test")


def post(client, data: bytes, include: str = "") -> dict:
    r = client.post("/predict" + (f"?include={include}" if include else ""), files={"file": ("upload", data, "application/octet-stream")})
    assert r.status_code == 200, r.text[:300]
    return r.json()


def test_photos_of_handwritten_digits_are_read(client):
    """Uneven light, shadows, grain, noise, JPEG, blue pen, pencil, ruled lines, small and off centre: >= 98% read."""
    x, y = mnist_test()
    rng = np.random.default_rng(2026)
    idx = rng.permutation(len(x))[:250]
    wrong = [int(y[i]) for i in idx if post(client, realworld.photo_of_digit(x[i], rng))["prediction"] != y[i]]
    accuracy = 1 - len(wrong) / len(idx)
    print(f"photos: {accuracy:.1%} of {len(idx)} read right; missed {sorted(wrong)}")  # the figure, shown by pytest -rP
    assert accuracy >= PHOTOS_READ, f"{accuracy:.1%} of {len(idx)} photos read right; missed digits {sorted(wrong)}"


def test_photos_are_read_as_a_phone_turned_them(client):
    """A phone held sideways or upside down stores the sensor's pixels and an EXIF orientation: the service reads the
    photo as every viewer shows it. Sixes and nines upside down, and other digits turned a quarter either way."""
    x, y = mnist_test()
    rng = np.random.default_rng(90)
    upturned = [i for i in rng.permutation(len(x)) if y[i] in (6, 9)][:20]
    sideways = [i for i in rng.permutation(len(x)) if y[i] not in (6, 9)][:20]
    cases = [(i, 3) for i in upturned] + [(i, 6 if k % 2 else 8) for k, i in enumerate(sideways)]
    wrong = [
        (int(y[i]), o)
        for i, o in cases
        if post(client, realworld.as_phone_stores(realworld.photo_of_digit(x[i], rng), o))["prediction"] != y[i]
    ]
    print(f"turned photos: {len(cases) - len(wrong)} of {len(cases)} read right; missed (digit, orientation) {wrong}")
    assert len(wrong) <= 1, f"missed (digit, orientation): {wrong}"


def test_mnist_digits_uploaded_as_png_are_read_and_rarely_flagged(client):
    """All 10k test digits as dark-on-white PNGs: >= 99% read right, <= 2% called blank or not a digit."""
    x, y = mnist_test()
    right = flagged = 0
    for start in range(0, len(x), 64):
        files = [("file", (f"{i}.png", encode(Image.fromarray(255 - x[i])), "image/png")) for i in range(start, min(start + 64, len(x)))]
        r = client.post("/predict/batch", files=files)
        assert r.status_code == 200, r.text[:300]
        for k, res in enumerate(r.json()["results"]):
            right += res["prediction"] == y[start + k]
            flagged += res["blank"] or not res["is_digit"]
    print(f"MNIST as PNG: {right} of {len(x)} read right, {flagged} flagged")
    read, called = right / len(x), flagged / len(x)
    assert read >= PNG_READ and called <= PNG_FLAGGED, f"read right {read:.2%}, flagged {called:.2%}"


def test_non_digits_are_flagged(client):
    """Letters and symbols that resemble no digit, scribbles, hatching and noise, drawn and photographed: >= 80% flagged."""
    rng = np.random.default_rng(17)
    flagged: Counter[str] = Counter()
    per_kind = 50
    for kind in realworld.NON_DIGIT_KINDS:
        for _ in range(per_kind):
            body = post(client, realworld.non_digit(rng, kind)[1])
            flagged[kind] += body["blank"] or not body["is_digit"]
    share = sum(flagged.values()) / (per_kind * len(realworld.NON_DIGIT_KINDS))
    print(f"non-digits: {share:.1%} flagged; by kind (of {per_kind}): {dict(flagged)}")
    assert share >= NON_DIGITS_FLAGGED, f"{share:.0%} flagged; by kind (of {per_kind}): {dict(flagged)}"


def test_blank_paper_and_empty_canvases_are_blank(client):
    rng = np.random.default_rng(5)
    missed = [
        kind
        for kind in ["paper"] * 40 + ["canvas"] * 20
        if not (body := post(client, realworld.blank(rng, kind)[1]))["blank"] or body["is_digit"]
    ]
    assert not missed, f"not blank: {Counter(missed)}"


@pytest.mark.parametrize(
    "make",
    [lambda: encode(Image.new("L", (1, 1), 0)), lambda: encode(Image.new("RGB", (3000, 3000), "white"))],
    ids=["one-pixel", "white-3000x3000"],
)
def test_empty_uploads_are_blank_not_a_confident_digit(client, make):
    body = post(client, make())
    assert body["blank"] and not body["is_digit"]


def test_all_zero_pixels_are_blank(client):
    body = client.post("/predict", json={"pixels": [[0.0] * 28] * 28}).json()
    assert body["blank"] and not body["is_digit"] and len(body["recon_errors"]) == 10


def test_counterfactuals_redraw_each_capsule_and_the_winner_matches_best(client):
    x, y = mnist_test()
    body = post(client, encode(Image.fromarray(255 - x[0])), include="counterfactuals,pixels")
    errors = np.array(body["recon_errors"])
    assert body["is_digit"] and not body["blank"] and body["prediction"] == y[0]
    assert errors.argmin() == body["prediction"] and errors.min() < 0.3 < np.median(errors)
    images = [np.asarray(Image.open(io.BytesIO(base64.b64decode(png)))) for png in body["counterfactuals"]]
    assert len(images) == 10 and all(im.shape == (28, 28) for im in images)
    # the winner's counterfactual is the reconstruction the response already carries
    assert np.abs(images[body["prediction"]].astype(int) - np.array(body["reconstruction"]["pixels"]) * 255).max() <= 2
