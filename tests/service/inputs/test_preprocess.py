"""Uploads are made to look like MNIST: bright ink on black, fit to 20x20, centred by mass."""

from __future__ import annotations

import io

import cv2
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from PIL import Image

from service.inputs.preprocess import (
    BOLD_STROKE,
    INK_THRESHOLD,
    SIDE_SHIFT,
    _median,
    centre_of_mass,
    drawing_to_mnist,
    find_digit,
    fit_and_centre,
    flatten_alpha,
    ink_box,
    is_drawing,
    resize_bilinear,
    side_by_side,
    stroke_width,
    thinned,
    to_grey,
    to_mnist,
    uniform_paper,
)
from tests.service import realworld


def test_centre_of_mass_is_row_then_column():
    img = np.zeros((10, 20))
    img[2, 15] = 1.0
    assert centre_of_mass(img) == (2.0, 15.0)


def test_dark_ink_on_white_paper_becomes_bright_on_black():
    img = np.ones((50, 40))
    img[10:40, 18:22] = 0.0
    out = to_mnist(img)
    assert out[0, 0] == 0.0 and out.max() == pytest.approx(1.0, abs=0.05)


def test_light_ink_on_dark_is_kept():
    img = np.zeros((50, 40))
    img[10:40, 18:22] = 1.0
    a, b = to_mnist(img), to_mnist(1.0 - img)
    assert np.allclose(a, b, atol=1e-6)


def test_transparent_canvas_with_black_ink():
    rgb = np.zeros((100, 100, 3))
    alpha = np.zeros((100, 100))
    alpha[20:80, 45:55] = 1.0  # black stroke on transparency: looks blank if alpha is dropped
    out = to_mnist(rgb, alpha)
    assert out.sum() > 10


def test_transparent_canvas_with_white_ink():
    rgb = np.ones((100, 100, 3))
    alpha = np.zeros((100, 100))
    alpha[20:80, 45:55] = 1.0
    assert to_mnist(rgb, alpha).sum() > 10


def test_flatten_alpha_picks_a_contrasting_background():
    dark = flatten_alpha(np.zeros((4, 4, 3)), np.eye(4))
    assert dark[0, 1].tolist() == [1.0, 1.0, 1.0] and dark[0, 0].tolist() == [0.0, 0.0, 0.0]


def test_fits_20x20_keeping_aspect_ratio_and_centres_by_mass():
    img = np.zeros((200, 100))
    img[:, :] = 1.0  # a 2:1 tall block
    out = fit_and_centre(img)
    rows, cols = np.nonzero(out > 0.5)
    assert rows.max() - rows.min() + 1 == 20
    assert cols.max() - cols.min() + 1 == 10
    cy, cx = centre_of_mass(out)
    assert abs(cy - 13.5) <= 0.5 and abs(cx - 13.5) <= 0.5


def test_offset_and_scale_do_not_matter():
    small = np.zeros((28, 28))
    small[2:9, 3:5] = 1.0  # a small "1" in the corner
    big = np.zeros((300, 300))
    big[150:290, 200:240] = 1.0  # the same shape, large, elsewhere
    a, b = to_mnist(small), to_mnist(big)
    assert np.abs(a - b).mean() < 0.05


def test_blank_image_gives_blank_input():
    for img in (np.zeros((28, 28)), np.ones((10, 7)), np.full((5, 5, 3), 0.5)):
        out = to_mnist(img)
        assert out.shape == (28, 28) and not out.any()


def test_faint_ink_on_grey_paper_is_scaled_to_full_strength():
    img = np.full((30, 30), 0.8)
    img[10:20, 10:20] = 0.3  # grey ink on light grey paper
    out = find_digit(img)
    assert out.max() == pytest.approx(1.0) and out[0, 0] == 0.0


def _shaded_paper(h: int = 400, w: int = 600, seed: int = 0) -> np.ndarray:
    """Paper lit from one side (60% darker at the far edge) with grain: brighter in one corner than ink is in another."""
    rng = np.random.default_rng(seed)
    light = np.linspace(1.0, 0.4, w)[None, :] * np.ones((h, 1))
    return np.clip(0.9 * light + rng.normal(0, 0.03, (h, w)), 0, 1)


def test_uneven_light_and_grain_are_not_ink():
    assert not to_mnist(_shaded_paper()).any()


def test_a_small_digit_on_shaded_paper_is_found_and_fills_the_box():
    img = _shaded_paper()
    img[250:330, 470:480] *= 0.35  # a small "1" in the dark corner
    out = to_mnist(img)
    rows, cols = np.nonzero(out > 0.5)
    assert rows.max() - rows.min() + 1 >= 18  # scaled up to the 20 px box, not a dot in a grey frame
    assert cols.max() - cols.min() + 1 <= 6


def test_ruled_lines_and_specks_are_dropped():
    img = np.ones((300, 400))
    img[::30, :] = 0.7  # ruled lines across the sheet
    img[40, 30] = img[260, 350] = 0.0  # specks
    img[100:200, 195:205] = 0.0  # the digit, crossing three lines
    out = to_mnist(img)
    rows, cols = np.nonzero(out > 0.5)
    assert rows.max() - rows.min() + 1 >= 18 and cols.max() - cols.min() + 1 <= 6


def test_a_filled_blob_drawn_on_the_canvas_stays_filled():
    """A 6 whose loop is drawn as one filled blob: on a page canvas the paper is one exact level, so the blob is ink through
    and through (an estimate of uneven light took the blob for a shadow and hollowed it to a ring)."""
    img = np.ones((280, 280), np.float32)
    cv2.line(img, (170, 40), (110, 170), 0.0, 18)
    cv2.circle(img, (135, 195), 45, 0.0, -1)
    out = to_mnist(img)
    solid = cv2.erode((out >= 0.9).astype(np.uint8), np.ones((4, 4), np.uint8))
    assert solid.any(), "the blob came out hollow"


def test_only_a_canvas_or_clean_scan_counts_as_uniform_paper():
    rng = np.random.default_rng(3)
    canvas = np.zeros((280, 280), np.float32)
    canvas[60:220, 130:150] = 1.0
    assert uniform_paper(canvas) and uniform_paper(1.0 - canvas)
    for _ in range(5):  # photographed paper: grain, noise and light are never one level
        _, data = realworld.blank(rng, "paper")
        grey = np.asarray(Image.open(io.BytesIO(data)).convert("L"), np.float32) / 255.0
        assert not uniform_paper(grey)


def test_a_two_stroke_digit_is_kept_whole():
    img = np.ones((200, 200))
    img[50:150, 90:100] = 0.0  # the stem of a 4 ...
    img[90:100, 40:85] = 0.0  # ... and its arm, not touching it
    ink = to_mnist(img).reshape(28, 28) > 0.3
    rows, cols = np.nonzero(ink)
    assert rows.max() - rows.min() >= 18  # the stem, the longer stroke, sets the digit's height
    stem = int(np.median(cols))  # most of the ink is the stem's
    assert np.count_nonzero(ink[:, : stem - 5]) >= 8  # and the arm reaches well left of it


@settings(max_examples=60, deadline=None)
@given(
    arrays(
        np.float64,
        st.tuples(st.integers(1, 64), st.integers(1, 64)),
        elements=st.floats(-2, 3) | st.sampled_from([np.nan, np.inf, -np.inf]),
    )
)
def test_any_grey_array_gives_a_valid_input(arr):
    out = to_mnist(arr)
    assert out.shape == (28, 28) and out.dtype == np.float32
    assert np.isfinite(out).all() and out.min() >= 0.0 and out.max() <= 1.0


@settings(max_examples=30, deadline=None)
@given(
    arrays(np.float32, st.tuples(st.integers(1, 40), st.integers(1, 40), st.just(3)), elements=st.floats(0, 1, width=32)), st.floats(0, 1)
)
def test_any_colour_array_with_alpha_gives_a_valid_input(arr, a):
    alpha = np.full(arr.shape[:2], a, dtype=np.float32)
    out = to_mnist(arr, alpha)
    assert out.shape == (28, 28) and np.isfinite(out).all() and out.min() >= 0.0 and out.max() <= 1.0


@given(arrays(np.float32, st.integers(1, 300), elements=st.floats(0, 1, width=32)))
def test_the_median_is_numpys(values):
    """The paper's level and the ink's are read by a median of our own (one sort): the same value np.median gives."""
    assert _median(values) == float(np.median(values))


@given(arrays(np.float32, st.tuples(st.integers(1, 40), st.integers(1, 40)), elements=st.floats(0, 1, width=32)))
def test_the_ink_box_is_every_row_and_column_that_holds_ink(ink):
    """The digit is cropped to exactly the rows and columns with ink above the threshold, and an image without is None."""
    rows, cols = np.flatnonzero((ink > 0.5).any(1)), np.flatnonzero((ink > 0.5).any(0))
    crop = ink_box(ink, 0.5)
    if not rows.size:
        assert crop is None
    else:
        assert crop is not None and np.array_equal(crop, ink[rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1])


@given(
    arrays(np.float32, st.tuples(st.integers(2, 60), st.integers(2, 60)), elements=st.floats(0, 1, width=32)),
    st.integers(1, 40),
    st.integers(1, 40),
)
def test_resizing_a_crop_is_pillows_bilinear_resize(img, height, width):
    """A crop (a view into a larger image, as fit_and_centre passes) is scaled as Pillow scales the same pixels."""
    crop = img[1:, ::2]
    expected = np.asarray(Image.fromarray(np.ascontiguousarray(crop)).resize((width, height), Image.Resampling.BILINEAR))
    assert np.array_equal(resize_bilinear(crop, height, width), expected)


def _fit_by_pillow(ink: np.ndarray, size: int, box: int) -> np.ndarray:
    """MNIST's recipe written plainly: the ink's box scaled by Pillow to fit `box`, whatever its size, then centred by mass."""
    out = np.zeros((size, size), np.float32)
    crop = ink_box(ink, INK_THRESHOLD)
    if crop is None:
        return out
    h, w = crop.shape
    nh, nw = max(1, round(h * box / max(h, w))), max(1, round(w * box / max(h, w)))
    patch = np.clip(np.asarray(Image.fromarray(np.ascontiguousarray(crop, np.float32)).resize((nw, nh), Image.Resampling.BILINEAR)), 0, 1)
    cy, cx = centre_of_mass(patch)
    top, left = int(round((size - 1) / 2 - cy)), int(round((size - 1) / 2 - cx))
    r0, c0, r1, c1 = max(top, 0), max(left, 0), min(top + nh, size), min(left + nw, size)
    if r1 > r0 and c1 > c0:
        out[r0:r1, c0:c1] = patch[r0 - top : r1 - top, c0 - left : c1 - left]
    return out


@given(
    st.sampled_from([(28, 20), (36, 13), (36, 26)]),
    st.integers(1, 30),
    st.booleans(),
    st.integers(0, 2**32 - 1),
    st.sampled_from([np.float32, np.float64]),
)
def test_fitting_is_pillows_resize_whatever_the_ink_s_size(frame, side, fits, seed, dtype):
    """The ink fit and centred as Pillow scales it, values past [0,1] clipped; a digit that fits the box already (an
    MNIST digit) keeps every value, only moved to centre its mass."""
    size, box = frame
    rng = np.random.default_rng(seed)
    other = min(side, box)
    shape = ((box, other) if rng.integers(2) else (other, box)) if fits else (side, int(rng.integers(1, 31)))
    crop = rng.uniform(-0.5, 1.5, shape).astype(dtype)
    crop[[0, -1], :] = crop[:, [0, -1]] = 0.6  # ink on every edge: the ink's box is the whole crop
    page = np.zeros((40, 40), dtype)
    page[3 : 3 + shape[0], 5 : 5 + shape[1]] = crop
    out = fit_and_centre(page, size, box)
    assert np.array_equal(out, _fit_by_pillow(page, size, box))
    if fits:  # its values as they were (clipped), in a box of the same size
        assert np.array_equal(ink_box(out, 0.0), np.clip(crop, 0, 1).astype(np.float32))


def _drawn(side: int = 280, colour: tuple[float, float, float] = (0.07, 0.08, 0.09)) -> tuple[np.ndarray, np.ndarray]:
    """A 7 drawn with a round anti-aliased pen on a transparent canvas: colour [H,W,3], alpha [H,W]."""
    alpha = np.zeros((side, side), np.float32)
    cv2.polylines(alpha, [np.array([[80, 60], [200, 60], [120, 230]], np.int32)], False, 1.0, 18, cv2.LINE_AA)
    return np.broadcast_to(np.array(colour, np.float32), (side, side, 3)).copy(), alpha


def test_a_drawing_is_read_as_its_ink_and_reads_as_the_search_would():
    """Ink of one colour on transparency holds nothing but its alpha: it is fit and centred as the page's canvas is, and
    for a clean drawing that is exactly what the search of a photo finds in it."""
    rgb, alpha = _drawn()
    assert is_drawing(rgb, alpha)
    searched = fit_and_centre(find_digit(flatten_alpha(to_grey(rgb), alpha)))
    assert np.abs(to_mnist(rgb, alpha) - searched).max() < 1e-6
    assert np.array_equal(to_mnist(rgb, alpha), drawing_to_mnist(alpha))
    alpha[262:272, 262:272] = 1.0  # a dot drawn in the corner is part of the drawing, as on the page; the search drops it
    assert to_mnist(rgb, alpha)[22:, 22:].sum() > 0.3
    assert fit_and_centre(find_digit(flatten_alpha(rgb[..., 0], alpha)))[22:, 22:].sum() == 0


def test_only_one_colour_on_transparency_is_a_drawing():
    rgb, alpha = _drawn()
    assert is_drawing(rgb[..., 0], alpha)  # grey with alpha
    assert is_drawing(rgb, np.zeros_like(alpha))  # a blank canvas
    edge = rgb.copy()
    edge[(alpha > 0) & (alpha < 1)] += 3.0 / 255.0  # a premultiplied canvas rounds its strokes' edges
    assert is_drawing(edge, alpha)
    cut_out = rgb.copy()
    cut_out[:, :150] = 0.9  # paper with ink on it, cut out onto transparency: two colours
    assert not is_drawing(cut_out, alpha)
    assert not is_drawing(rgb, np.ones_like(alpha))  # an opaque picture has no transparent ground
    assert not is_drawing(rgb, np.where(alpha > 0, 0.3, 0.0).astype(np.float32))  # only faint marks: judged as any picture


def test_a_drawing_is_judged_alike_from_the_8_bit_values_an_upload_decodes_to():
    rgb, alpha = _drawn()
    cut_out = rgb.copy()
    cut_out[:, :150] = 0.9
    faint = np.where(alpha > 0, 0.3, 0.0).astype(np.float32)
    cases = [(rgb, alpha), (rgb[..., 0], alpha), (rgb, np.zeros_like(alpha)), (cut_out, alpha), (rgb, np.ones_like(alpha)), (rgb, faint)]
    for pixels, a in cases:
        p8, a8 = (np.round(x * 255).astype(np.uint8) for x in (pixels, a))
        assert is_drawing(p8, a8) == is_drawing(p8 / np.float32(255), a8 / np.float32(255))
    assert [is_drawing(*(np.round(x * 255).astype(np.uint8) for x in c)) for c in cases] == [True, True, True, False, False, False]


@pytest.mark.parametrize("side", [280, 36, 1500])
@pytest.mark.parametrize("digit_box", [None, 20])
def test_a_drawing_reads_the_same_from_its_8_bit_alpha(side, digit_box):
    """A drawing's 8-bit alpha as decoded, of which only the ink's box becomes floats, gives the input its alpha in [0,1]
    gives: the page's canvas, a thumbnail, one larger than the search's working size, and a blank one, for one digit and
    for two."""
    _, alpha = _drawn()
    alpha = cv2.resize(alpha, (side, side), interpolation=cv2.INTER_AREA)
    a8 = np.round(alpha * 255).astype(np.uint8)
    size, box = (28, 20) if digit_box is None else (36, 23)
    for drawing in (a8, np.zeros_like(a8)):
        read = drawing_to_mnist(drawing, size, box, digit_box)
        assert np.array_equal(read, drawing_to_mnist(drawing / np.float32(255.0), size, box, digit_box))
        assert read.sum() > 10 if drawing.any() else not read.any()


# Two digits for the two-digit network (size 36, the card's pair box 23, an MNIST digit's box 20): drawn over each other
# they are scaled together; written apart, as people write two digits, laid over each other as MultiMNIST's pairs are.
PAIR_SIZE, PAIR_BOX, DIGIT_BOX = 36, 23, 20


@pytest.fixture(scope="module")
def mnist_test_digits() -> tuple[np.ndarray, np.ndarray]:
    from model.idx import load_mnist
    from tests.needs import need_mnist

    return load_mnist(need_mnist(), "test")


def _apart(a: np.ndarray, b: np.ndarray, gap: int = 4, vertical: bool = False) -> np.ndarray:
    """Two 28x28 digits (0-255) side by side, `gap` px between their frames (one above the other if `vertical`), as
    dark ink on white paper at 4x: [4*28, 4*(56+gap)] in [0,1]."""
    if vertical:
        page = np.zeros((56 + gap, 28), np.float32)
        page[:28], page[28 + gap :] = a / 255.0, b / 255.0
    else:
        page = np.zeros((28, 56 + gap), np.float32)
        page[:, :28], page[:, 28 + gap :] = a / 255.0, b / 255.0
    return 1.0 - cv2.resize(page, (page.shape[1] * 4, page.shape[0] * 4), interpolation=cv2.INTER_LINEAR)


def test_two_digits_written_apart_are_laid_over_each_other_as_multimnist_makes_its_pairs(mnist_test_digits):
    """What the network gets is the two digits as MNIST drew them, each fit to its box and centred, one over the other (a
    couple of px towards the side each was written on): not the pair squeezed into one digit's box, nor one digit alone."""
    x, _ = mnist_test_digits
    for vertical in (False, True):
        for a, b in ((0, 1), (2, 3), (4, 5)):
            got = to_mnist(_apart(x[a], x[b], vertical=vertical), None, PAIR_SIZE, PAIR_BOX, DIGIT_BOX)
            axis = 0 if vertical else 1
            each = [fit_and_centre(x[d] / 255.0, PAIR_SIZE, DIGIT_BOX) for d in (a, b)]
            want = np.minimum(np.roll(each[0], -SIDE_SHIFT, axis) + np.roll(each[1], SIDE_SHIFT, axis), 1.0)
            assert np.corrcoef(got.ravel(), want.ravel())[0, 1] > 0.9, (a, b, vertical)


def test_one_digit_and_two_drawn_over_each_other_are_not_taken_apart(mnist_test_digits):
    """Lone MNIST digits at a photo's size are not split in two, nor pairs drawn over each other (MultiMNIST's own), so
    both keep the framing the network was trained on."""
    import torch

    from model.multimnist import fixed_test_pairs

    x, y = mnist_test_digits
    lone = [side_by_side(cv2.resize(x[i] / 255.0, (140, 140), interpolation=cv2.INTER_LINEAR)) for i in range(300)]
    assert lone.count(None) == 300
    pairs = fixed_test_pairs(torch.from_numpy(x[:2000] / 255.0).float().unsqueeze(1), torch.from_numpy(y[:2000].copy()), 300)
    assert all(side_by_side(p[0].numpy()) is None for p in pairs.image)


def test_a_broken_stroke_a_dot_or_a_dash_beside_a_digit_is_one_digit():
    ink = np.zeros((100, 140), np.float32)
    ink[10:90, 40:46] = 1.0
    ink[10:90, 48:54] = 1.0  # a stroke broken along its length by a 2 px band: narrower than SIDE_GAP of its height
    assert side_by_side(ink) is None
    dot = ink.copy()
    dot[50:56, 80:86] = 1.0  # a dot well apart: too little ink (SIDE_MASS)
    assert side_by_side(dot) is None
    dash = ink.copy()
    dash[48:56, 80:130] = 1.0  # a dash with as much ink as a stroke, but no digit's height (SIDE_SPAN)
    assert side_by_side(dash) is None


def test_a_1_above_a_digit_is_two_digits_and_an_underline_is_not_one():
    """One above the other, a side is a digit by its height against the other's, not its width: a 1 is as tall as the
    digit under it and a fifth as wide; an underline as wide as the digit has no digit's height."""
    ink = np.zeros((220, 100), np.float32)
    ink[10:100, 46:54] = 1.0  # a 1
    ink[130:210, 20:80] = 1.0
    ink[138:202, 28:72] = 0.0  # a 0 below it, a 30 px band between
    first, second, axis = side_by_side(ink)
    assert axis == 0 and first[:115].sum() == ink[:115].sum() and second[115:].sum() == ink[115:].sum()
    underlined = np.zeros_like(ink)
    underlined[10:100, 20:80] = 1.0
    underlined[18:92, 28:72] = 0.0  # a 0
    underlined[140:150, 10:90] = 1.0  # a line under the digit, with as much ink as a stroke of it
    assert side_by_side(underlined) is None


def test_two_digits_apart_with_a_stray_dot_beyond_them_are_still_two():
    """The widest band (between the second digit and a dot) fails the checks; the narrower one between the digits holds."""
    ink = np.zeros((100, 200), np.float32)
    ink[10:90, 20:26], ink[10:90, 60:66] = 1.0, 1.0  # two digits, 34 px apart
    ink[50:54, 180:184] = 1.0  # a speck far to the right
    first, second, axis = side_by_side(ink)
    assert axis == 1 and first[:, :40].sum() == ink[:, :40].sum() and second[:, 40:].sum() == ink[:, 40:].sum()


def test_a_canvas_drawing_of_two_digits_side_by_side_is_thinned_to_a_digits_strokes(mnist_test_digits):
    """The page's pen is as wide whatever is drawn: two digits on halves of the canvas have strokes twice as wide for
    their size as one digit drawn over the whole of it. Laid over each other, their strokes are worn down to about the
    width of a full-size drawing's (stroke_width over the digit's longer side); a full-size drawing is left as it is."""
    from model.pen_strokes import PAGE_SIDE, PEN, place, render, trace

    x, _ = mnist_test_digits

    def share(ink: np.ndarray) -> float:
        mask = (ink > 0.5).astype(np.uint8)
        rows, cols = np.flatnonzero(mask.any(1)), np.flatnonzero(mask.any(0))
        return stroke_width(mask) / max(rows[-1] - rows[0] + 1, cols[-1] - cols[0] + 1)

    for i in range(5):
        full = render(place(trace(x[i] / 255.0), 28 / 36, 0, 0), PAGE_SIDE, PEN)
        half = render(place(trace(x[i] / 255.0), 0.45, 0, 0), PAGE_SIDE, PEN)
        assert share(full) <= BOLD_STROKE and abs(share(thinned(full)) - share(full)) < 0.015, i  # cropped and shrunk only
        assert share(half) > BOLD_STROKE and abs(share(thinned(half)) - share(full)) < 0.025, i


def test_the_search_in_a_photo_keeps_a_second_digit_only_for_two_digits(mnist_test_digits):
    """The one-digit search keeps the strongest digit on the page and drops another one written well apart from it; for
    the two-digit network it keeps both."""
    x, _ = mnist_test_digits
    paper = _apart(x[7], x[8], gap=12)
    ink_one, ink_two = find_digit(paper), find_digit(paper, digits=2)
    half = paper.shape[1] // 2
    assert (ink_one[:, :half].sum() > 0) != (ink_one[:, half:].sum() > 0)
    assert ink_two[:, :half].sum() > 0 and ink_two[:, half:].sum() > 0


@pytest.mark.parametrize("margin", [0, 3], ids=["cropped-tight", "with-margin"])
def test_a_strokes_width_is_its_width_however_tightly_cropped(margin: int) -> None:
    """A bar 20 px wide and 109 tall, as a 1 drawn with the page's pen is once cropped: about 20 px wide either way."""
    bar = np.zeros((109 + 2 * margin, 20 + 2 * margin), np.uint8)
    bar[margin : margin + 109, margin : margin + 20] = 1
    assert 15 <= stroke_width(bar) <= 20
