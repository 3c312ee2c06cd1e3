"""The honesty sets are a fixed yardstick: the same images for the same seed on every run, other images in the other
split, and every image a uint8 greyscale array as an upload is. MNIST is replaced here by small IDX files made on the
spot (digits from the training half for calibration, the test half for held out); the glyph sets need the fonts of
FONT_PACKAGES and are skipped where none is installed."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from model import honesty_sets as hs
from model.idx import FILES
from tests.needs import missing

MNIST_SETS = {
    "mnist": hs.mnist,
    "mnist_photo": hs.mnist_photo,
    "mnist_tight": hs.mnist_tight,
    "mnist_8x8": hs.mnist_8x8,
    "mnist_lowres": hs.mnist_lowres,
}
TRAIN_LABEL, TEST_LABEL = 3, 7
NO_FONTS = not (hs.fonts_for("calibration") and hs.fonts_for("held_out"))
NO_FONTS_WHY = f"no fonts for the glyph sets: apt-get install {' '.join(hs.FONT_PACKAGES)}"


@pytest.fixture
def fonts() -> None:
    if NO_FONTS:
        missing("fonts", NO_FONTS_WHY)


needs_fonts = pytest.mark.usefixtures("fonts")


def _write_idx(path: Path, arr: np.ndarray, magic: int) -> None:
    path.write_bytes(struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in arr.shape) + arr.astype(np.uint8).tobytes())


@pytest.fixture(scope="module")
def mnist_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Twelve fake digits per half, each a ring of its own size and place (a crude 0); every training label 3, every test
    label 7."""
    d = tmp_path_factory.mktemp("mnist")
    rng = np.random.default_rng(0)
    for stems, label in ((FILES["train"], TRAIN_LABEL), (FILES["test"], TEST_LABEL)):
        x = np.zeros((12, 28, 28), np.uint8)
        for img in x:
            (top, left), h, w = rng.integers(4, 10, 2), int(rng.integers(10, 16)), int(rng.integers(6, 12))
            img[top : top + h, left : left + w] = rng.integers(128, 256)
            img[top + 2 : top + h - 2, left + 2 : left + w - 2] = 0
        _write_idx(d / stems[0], x, 2051)
        _write_idx(d / stems[1], np.full(12, label, np.uint8), 2049)
    return d


def _makers(mnist_dir: Path) -> dict:
    makers = {name: (lambda split, n, f=f: f(split, n, mnist_dir)) for name, f in MNIST_SETS.items()}
    makers |= {
        "scribbles": hs.scribbles,
        "blank": lambda split, n: hs.blank(split, n, jpeg=False),
        "blank_jpeg": lambda split, n: hs.blank(split, n, jpeg=True),
    }
    if not NO_FONTS:
        makers |= {
            "glyphs_clean": lambda split, n: hs.glyphs(split, n, photographed=False),
            "glyphs_photo": lambda split, n: hs.glyphs(split, n, photographed=True),
        }
    return makers


def _same(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return len(a) == len(b) and all(x.shape == y.shape and np.array_equal(x, y) for x, y in zip(a, b))


def test_every_set_of_the_catalogue_is_tested(mnist_dir):
    """A set added to SETS without a maker here would go untested (the glyph sets only where fonts are installed)."""
    assert set(_makers(mnist_dir)) | ({"glyphs_clean", "glyphs_photo"} if NO_FONTS else set()) == set(hs.SETS)


@pytest.mark.parametrize("name", list(hs.SETS))
def test_a_set_is_the_same_for_its_seed_and_other_in_the_other_split(mnist_dir, name):
    makers = _makers(mnist_dir)
    if name not in makers:
        missing("fonts", NO_FONTS_WHY)
    make = makers[name]
    images, labels = make("held_out", 6)
    again, labels_again = make("held_out", 6)
    assert _same(images, again), "the same split and size must give the same images"
    assert (labels is None) == (labels_again is None) and (labels is None or np.array_equal(labels, labels_again))
    other, _ = make("calibration", 6)
    assert sum(x.shape == y.shape and np.array_equal(x, y) for x, y in zip(images, other)) == 0, "the splits must not share an image"
    shorter, _ = make("held_out", 3)
    assert _same(shorter, images[:3]), "image i must not depend on the set's size"


@pytest.mark.parametrize("name", list(hs.SETS))
def test_images_are_uint8_greyscale_uploads(mnist_dir, name):
    makers = _makers(mnist_dir)
    if name not in makers:
        missing("fonts", NO_FONTS_WHY)
    images, labels = makers[name]("calibration", 8)
    assert len(images) == 8
    for im in images:
        assert isinstance(im, np.ndarray) and im.dtype == np.uint8 and im.ndim == 2 and im.size >= 16
    if hs.SETS[name].kind == "digit":
        assert labels is not None and labels.dtype == np.uint8 and len(labels) == 8
        if name != "mnist":
            assert all(float(im.std()) > 0 for im in images), "a digit set's image holds more than one level"
    else:
        assert labels is None


@pytest.mark.parametrize("name", list(MNIST_SETS))
def test_digits_come_from_the_training_half_for_calibration_and_the_test_half_held_out(mnist_dir, name):
    assert set(MNIST_SETS[name]("calibration", 5, mnist_dir)[1]) == {TRAIN_LABEL}
    assert set(MNIST_SETS[name]("held_out", 5, mnist_dir)[1]) == {TEST_LABEL}


def test_blank_sheets_hold_no_ink_but_light_and_noise():
    """Light and noise only: no sheet is one flat level, and none is far from its own smooth light (no marks on it)."""
    images, _ = hs.blank("held_out", 20, jpeg=False)
    for im in images:
        assert im.std() > 0
        residual = im.astype(np.float32) - np.median(im)
        assert np.abs(residual).max() < 140  # a mark would reach the ink's level; light spans at most 40 levels, shadows 30%


def test_glyph_list_holds_nothing_a_reader_could_take_for_a_digit():
    assert set(hs.GLYPHS).isdisjoint("0123456789OoQDIil|!/\\()[]JjZzSs$BbGgqdL^.,:;-_'\"")


@needs_fonts
def test_fonts_are_split_by_family_and_symbol_fonts_left_out():
    held, calibration = hs.fonts_for("held_out"), hs.fonts_for("calibration")
    families = {split: {hs._family(p) for p in fonts} for split, fonts in (("held_out", held), ("calibration", calibration))}
    assert families["held_out"].isdisjoint(families["calibration"])
    assert families["held_out"] <= set(hs.HELD_OUT_FAMILIES)
    assert not (families["held_out"] | families["calibration"]) & set(hs.SYMBOL_FAMILIES)


def test_glyphs_without_fonts_say_what_to_install():
    with pytest.raises(hs.FontsMissing, match="fonts-dejavu-core"):
        hs.glyphs("held_out", 2, photographed=False, fonts=[])


def test_an_unknown_split_is_refused():
    with pytest.raises(ValueError, match="unknown split"):
        hs.scribbles("test", 2)
