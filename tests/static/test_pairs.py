"""Section 7 of the page (static/pairs.js) tells the truth at a glance, in real Chromium against the real service: each
redrawing takes the colour of the ink it explains, whichever digit the network ranks first; a capsule the answer does
not name is not drawn as a digit; the sliders are named by what they were measured to do on this network's decoder;
the section is reached from the top of the page."""

from __future__ import annotations

import base64
import io
import json
import urllib.request
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.static.pages import Watch, network_quiet
from tests.static.test_page import ONE, OUTPUT, PAIR, SEVEN_BAR, WAIT_MS, ZERO, draw, expect, overlay_colours, predictions, slider_names

LEFT_ONE = [[(x * 0.6 + 0.05, y) for x, y in stroke] for stroke in ONE]
RIGHT_ZERO = [[(x * 0.8 + 0.15, y * 0.8 + 0.1) for x, y in stroke] for stroke in ZERO]


def draw_two(page: Any, first: list, second: list) -> None:
    """`first` in red, then `second` in green, waiting for the answer to the second."""
    page.get_by_test_id(PAIR).scroll_into_view_if_needed()
    draw(page, first, canvas=PAIR)
    page.wait_for_function("() => (document.querySelector('[data-testid=\"pair-verdict\"]').dataset.ranked || '') !== ''")
    page.get_by_test_id("pair-ink-2").click()
    draw(page, second, steps=2, canvas=PAIR)
    settled(page)


def settled(page: Any) -> None:
    """Section 7 shows the answer to its newest request: none is queued or in flight (the verdict's aria-busy)."""
    expect(page.get_by_test_id("pair-verdict")).to_have_attribute("aria-busy", "false", timeout=WAIT_MS)


def colour_of(page: Any) -> dict[int, str]:
    """The colour each named digit's redrawing is shown in, by digit."""
    verdict = page.get_by_test_id("pair-verdict")
    ranked = [int(d) for d in verdict.get_attribute("data-ranked").split(",")]
    colours = verdict.get_attribute("data-colours").split(",")
    return {d: c for d, c in zip(ranked, colours) if c}


@pytest.mark.parametrize("order", ["one first", "zero first"])
def test_each_redrawing_takes_the_colour_of_its_ink(session: tuple[Any, Watch], order: str) -> None:
    page, _ = session
    first, second, red, green = (LEFT_ONE, RIGHT_ZERO, 1, 0) if order == "one first" else (RIGHT_ZERO, LEFT_ONE, 0, 1)
    draw_two(page, first, second)
    expect(page.get_by_test_id("pair-verdict")).to_contain_text("Two digits")
    assert colour_of(page) == {red: "red", green: "green"}, "a redrawing is not in the colour of the ink it explains"
    expect(page.get_by_test_id("pair-legend")).to_have_text("red ink green ink")
    ranked = [int(d) for d in page.get_by_test_id("pair-verdict").get_attribute("data-ranked").split(",")]
    said = page.get_by_test_id("pair-overlay").get_attribute("aria-label")
    for k, digit in enumerate(ranked[:2]):  # a screen reader hears the colours the overlay shows, swapped or not
        assert f"the {('first', 'second')[k]} capsule's ({digit}) in {colour_of(page)[digit]}, as its ink" in said, said
    colours = overlay_colours(page)
    assert colours["red"] >= 10 and colours["green"] >= 10, colours
    OUTPUT.mkdir(exist_ok=True)
    page.locator("#pairs").screenshot(path=str(OUTPUT / f"pairs-{order.replace(' ', '-')}.png"))


def test_a_1_written_above_a_digit_is_read_with_it_each_in_its_ink(session: tuple[Any, Watch]) -> None:
    """A 1 in red above a 0 in green, as in a column of figures: the service takes them apart by the rows between them
    (a 1 is as tall as a digit, however narrow), and the page frames each ink where the service split them, so each
    redrawing takes its own ink's colour."""
    page, _ = session
    top_one = [[(x, y * 0.42 + 0.03) for x, y in stroke] for stroke in ONE]
    bottom_zero = [[(x, y * 0.42 + 0.55) for x, y in stroke] for stroke in ZERO]
    page.get_by_test_id("pair-clear").click()
    draw_two(page, top_one, bottom_zero)
    expect(page.get_by_test_id("pair-verdict")).to_contain_text("Two digits")
    assert colour_of(page) == {1: "red", 0: "green"}, "a redrawing is not in the colour of the ink it explains"


def test_undo_and_ctrl_z_take_back_the_last_stroke_where_it_was_drawn(page: Any) -> None:
    """Section 7 has an Undo of its own, and Ctrl+Z undoes on the canvas drawn on last: after drawing in section 7, it
    takes back section 7's stroke and leaves section 1's digit and its reading alone (it undid section 1's, out of sight)."""
    from tests.static.test_page import wait_predicted, wait_settled

    draw(page, ZERO)
    wait_predicted(page, 0)
    wait_settled(page)
    expect(page.get_by_test_id("pair-undo")).to_be_disabled()
    draw_two(page, LEFT_ONE, RIGHT_ZERO)
    expect(page.get_by_test_id("pair-verdict")).to_contain_text("Two digits")
    page.keyboard.press("Control+z")
    settled(page)
    assert predictions(page) == "1", f"Ctrl+Z did not take back section 7's 0: {predictions(page)!r}"
    expect(page.get_by_test_id("pair-ink-2")).to_have_attribute("aria-pressed", "true")  # the ink chosen stays
    expect(page.get_by_test_id("prediction")).to_have_text("0")
    expect(page.get_by_test_id("undo")).to_be_enabled()  # section 1's stroke is still there
    page.get_by_test_id("pair-undo").click()
    expect(page.get_by_test_id("pair-verdict")).to_have_text("Draw two digits, one over the other or side by side")
    expect(page.get_by_test_id("pair-undo")).to_be_disabled()
    page.get_by_test_id("draw-canvas").scroll_into_view_if_needed()
    with page.expect_request(lambda r: urlsplit(r.url).path == "/predict" and "model=multimnist" not in r.url):
        draw(page, SEVEN_BAR)  # a stroke over section 1's 0: Ctrl+Z is section 1's again
    wait_settled(page)
    with page.expect_request(lambda r: urlsplit(r.url).path == "/predict" and "model=multimnist" not in r.url):
        page.keyboard.press("Control+z")
    wait_predicted(page, 0)
    page.keyboard.press("Control+z")  # and the 0 itself
    expect(page.get_by_test_id("undo")).to_be_disabled()
    expect(page.get_by_test_id("pair-verdict")).to_have_text("Draw two digits, one over the other or side by side")


def test_a_dot_over_a_photo_of_two_digits_keeps_both(session: tuple[Any, Watch]) -> None:
    """A phone photo of a 1 and a 0 written side by side, wider than tall, on off-white paper; a dot drawn on the paper
    beside them goes with the photo as one picture, the photo's own rectangle, and both digits are still read (sent
    with the square canvas's white margins, the sheet itself was ink: "No digits")."""
    from PIL import Image

    from tests.static.test_page import paper_photo

    page, _ = session
    one = [[(0.15 + 0.3 * x, y * 0.7 + 0.15) for x, y in stroke] for stroke in ONE]
    zero = [[(0.45 + 0.45 * x, y * 0.7 + 0.15) for x, y in stroke] for stroke in ZERO]
    page.get_by_test_id(PAIR).scroll_into_view_if_needed()
    page.get_by_test_id("pair-upload").set_input_files(
        {"name": "10.jpg", "mimeType": "image/jpeg", "buffer": paper_photo(one + zero, (420, 300))}
    )
    settled(page)
    expect(page.get_by_test_id("pair-verdict")).to_contain_text("Two digits")
    assert sorted(predictions(page).split(",")) == ["0", "1"], predictions(page)
    with page.expect_request(lambda r: urlsplit(r.url).path == "/predict") as req:
        draw(page, [[(0.5, 0.78)]], canvas=PAIR)  # on the paper, below the digits (the photo spans y 0.14-0.86)
    picture = Image.open(io.BytesIO(base64.b64decode(req.value.post_data_json["image"].split(",", 1)[1])))
    assert picture.size == (280, 200), f"sent {picture.size}: not the photo's own rectangle"
    settled(page)
    assert sorted(predictions(page).split(",")) == ["0", "1"], page.get_by_test_id("pair-verdict").text_content()


def test_the_chosen_ink_keeps_its_colour_under_the_pointer(session: tuple[Any, Watch]) -> None:
    """Clicking "Second digit" and leaving the pointer on it shows it chosen, its white label on its ink's green (the
    hover's pale blue took over, and the white label all but vanished: the click looked as if it had done nothing)."""
    page, _ = session
    button = page.get_by_test_id("pair-ink-2")
    button.scroll_into_view_if_needed()
    button.click()
    button.hover()
    expect(button).to_have_attribute("aria-pressed", "true")
    expect(button).to_have_css("background-color", "rgb(42, 157, 58)")
    expect(button).to_have_css("color", "rgb(255, 255, 255)")
    page.get_by_test_id("pair-ink-1").click()


def test_a_slow_answer_says_it_is_coming(page: Any) -> None:
    """With the answers held back (a slow network), both sections say they are reading, beside the answer they will
    replace, and stop saying so when the answer comes; after a quick answer there is no such cue."""

    def cue_shown(selector: str) -> None:
        page.wait_for_function(
            f"""() => {{ const s = getComputedStyle(document.querySelector('{selector}'), '::after');
                        return s.content.includes('reading') && s.opacity === '1'; }}"""
        )

    def cue(selector: str) -> str:
        return page.evaluate(f"() => getComputedStyle(document.querySelector('{selector}'), '::after').content")

    draw(page, ZERO)
    expect(page.get_by_test_id("verdict")).to_have_attribute("aria-busy", "false", timeout=WAIT_MS)
    assert cue("#verdict .verdict-main") == "none", "a cue with nothing in flight"
    # from here on every request waits to leave the page until the test lets it, as over a slow network
    page.evaluate(
        """() => { let release; const gate = new Promise(r => { release = r; }); window.__release = release;
                   const f = window.fetch; window.fetch = (u, o) => gate.then(() => f(u, o)); }"""
    )
    draw(page, SEVEN_BAR)
    cue_shown("#verdict .verdict-main")
    # shown only once a request has been out a while: an answer in tens of milliseconds shows none, and no flicker
    delay = page.evaluate("() => getComputedStyle(document.querySelector('#verdict .verdict-main'), '::after').animationDelay")
    assert delay == "0.4s", delay
    page.get_by_test_id(PAIR).scroll_into_view_if_needed()
    draw(page, LEFT_ONE, canvas=PAIR)
    cue_shown("#pair-verdict")
    page.evaluate("() => window.__release()")
    settled(page)
    expect(page.get_by_test_id("verdict")).to_have_attribute("aria-busy", "false", timeout=WAIT_MS)
    assert cue("#pair-verdict") == "none" and cue("#verdict .verdict-main") == "none"


def test_two_digits_in_one_ink_are_told_apart_by_capsule(session: tuple[Any, Watch]) -> None:
    """Both digits drawn in red: the colours cannot stand for inks, so red is the first capsule's and green the second's,
    and the legend and the overlay's label say so, not 'green ink' for ink nobody drew."""
    page, _ = session
    page.get_by_test_id(PAIR).scroll_into_view_if_needed()
    draw(page, LEFT_ONE, canvas=PAIR)
    page.wait_for_function("() => (document.querySelector('[data-testid=\"pair-verdict\"]').dataset.ranked || '') !== ''")
    draw(page, RIGHT_ZERO, steps=2, canvas=PAIR)
    settled(page)
    expect(page.get_by_test_id("pair-verdict")).to_contain_text("Two digits")
    ranked = [int(d) for d in page.get_by_test_id("pair-verdict").get_attribute("data-ranked").split(",")]
    assert colour_of(page) == {ranked[0]: "red", ranked[1]: "green"}
    expect(page.get_by_test_id("pair-legend")).to_have_text("first capsule second capsule")
    said = page.get_by_test_id("pair-overlay").get_attribute("aria-label")
    assert "ink" not in said and f"the first capsule's ({ranked[0]}) in red" in said, said


def test_a_capsule_the_answer_does_not_name_is_not_drawn(session: tuple[Any, Watch]) -> None:
    """The answer names one digit (the service's own answer, its second name taken away on the way to the page): the
    second capsule's redrawing, bar colour and sliders are not offered as a digit's."""
    page, _ = session

    def one_digit(route: Any) -> None:
        answer = route.fetch().json()
        answer["predictions"] = answer["ranked"][:1]
        route.fulfill(status=200, content_type="application/json", body=json.dumps(answer))

    page.route(lambda url: urlsplit(url).path == "/predict" and "model=multimnist" in url, one_digit)
    draw_two(page, LEFT_ONE, RIGHT_ZERO)
    expect(page.get_by_test_id("pair-verdict")).to_contain_text("One digit")
    first = int(predictions(page))
    assert colour_of(page) == {first: {1: "red", 0: "green"}[first]}, "the lone redrawing is not in its own ink's colour"
    expect(page.get_by_test_id("pair-legend")).to_have_text(f"{colour_of(page)[first]} ink")
    assert page.get_by_test_id("pair-alone-1").get_attribute("src")
    assert page.get_by_test_id("pair-alone-2").get_attribute("src") is None
    expect(page.locator("figure.is-unnamed")).to_have_count(1)
    expect(page.locator("figure.is-unnamed figcaption")).to_contain_text("not read as a digit")
    assert overlay_colours(page)["green" if colour_of(page)[first] == "red" else "red"] == 0
    expect(page.locator("#pair-capsule option[value='1']")).to_be_disabled()
    expect(page.get_by_test_id("pair-pose-label-0")).not_to_have_text("")  # the named digit's sliders keep their names
    expect(page.locator("#pair-lengths li.pair-first, #pair-lengths li.pair-second")).to_have_count(1)
    page.locator("#pairs").screenshot(path=str(OUTPUT / "pairs-one-named.png"))


GRID = [[(0.2, y), (0.8, y)] for y in (0.25, 0.45, 0.65)] + [[(x, 0.2), (x, 0.8)] for x in (0.3, 0.5, 0.7)]  # a '#'


def test_the_overlay_names_no_colours_before_a_reading_or_after_clear(session: tuple[Any, Watch]) -> None:
    """A screen reader hears what the empty overlay shows: nothing redrawn yet, on a fresh page and after Clear."""
    page, _ = session
    overlay = page.get_by_test_id("pair-overlay")
    empty = "The two reconstructions overlaid: none yet"
    expect(overlay).to_have_attribute("aria-label", empty)
    draw_two(page, LEFT_ONE, RIGHT_ZERO)
    expect(overlay).not_to_have_attribute("aria-label", empty)
    page.get_by_test_id("pair-clear").click()
    expect(overlay).to_have_attribute("aria-label", empty)


def test_a_drawing_of_no_digit_is_answered_with_none(session: tuple[Any, Watch]) -> None:
    """A '#' drawn on section 7: the capsules are longest somewhere, but the card's digits rule reads no digit, so none
    is named, none redrawn, and the sliders offer no pose."""
    page, _ = session
    page.get_by_test_id(PAIR).scroll_into_view_if_needed()
    draw(page, GRID, steps=3, canvas=PAIR)
    settled(page)
    expect(page.get_by_test_id("pair-verdict")).to_contain_text("No digits")
    assert predictions(page) == "" and colour_of(page) == {}
    expect(page.locator("figure.is-unnamed")).to_have_count(2)
    expect(page.locator("figure.is-unnamed figcaption").first).to_contain_text("no digit read")
    assert overlay_colours(page) == {"red": 0, "green": 0}
    expect(page.get_by_test_id("pair-slider-1")).to_be_disabled()
    page.locator("#pairs").screenshot(path=str(OUTPUT / "pairs-no-digits.png"))


def test_the_sliders_name_what_each_dimension_does_to_the_chosen_digit(session: tuple[Any, Watch]) -> None:
    """Under each of section 7's sliders, what +0.1 on it does to that digit's drawing, from the two-digit network's own
    atlas (GET /dimensions?model=multimnist), for the capsule chosen: the longest's, then the second's."""
    page, _ = session
    atlas = json.loads(urllib.request.urlopen(page.url.rstrip("/") + "/dimensions?model=multimnist").read())
    draw_two(page, LEFT_ONE, RIGHT_ZERO)
    expect(page.get_by_test_id("pair-verdict")).to_contain_text("Two digits")
    ranked = [int(d) for d in page.get_by_test_id("pair-verdict").get_attribute("data-ranked").split(",")]
    for which in (0, 1):
        page.get_by_test_id("pair-capsule").select_option(str(which))
        want = slider_names(atlas, ranked[which])
        expect(page.get_by_test_id("pair-pose-label-0")).to_have_text(want[0])
        assert [page.get_by_test_id(f"pair-pose-label-{d}").text_content() for d in range(16)] == want
    assert any(t != "local" for w in ranked for t in slider_names(atlas, w)), "the atlas names no dimension of these digits"
    expect(page.get_by_test_id("pair-slider-legend")).to_contain_text(f"{atlas['rule']['poses_per_digit']} test pairs")
    page.locator("#pairs").screenshot(path=str(OUTPUT / "pairs-named-sliders.png"))

    # an answer that names no digit offers no pose, and no names: the service's answer to one more stroke, its digits
    # taken away on the way to the page
    def no_digits(route: Any) -> None:
        answer = route.fetch().json()
        answer["predictions"], answer["not_digits"] = [], True
        route.fulfill(status=200, content_type="application/json", body=json.dumps(answer))

    page.route(lambda url: urlsplit(url).path == "/predict" and "model=multimnist" in url, no_digits)
    draw(page, [[(0.1, 0.9), (0.2, 0.92)]], canvas=PAIR)
    settled(page)
    expect(page.get_by_test_id("pair-verdict")).to_contain_text("No digits")
    assert [page.get_by_test_id(f"pair-pose-label-{d}").text_content() for d in range(16)] == [""] * 16
    page.unroute_all()
    draw(page, [[(0.1, 0.85), (0.2, 0.86)]], canvas=PAIR)
    settled(page)
    expect(page.get_by_test_id("pair-pose-label-0")).not_to_have_text("")
    page.get_by_test_id("pair-clear").click()
    expect(page.get_by_test_id("pair-pose-label-0")).to_have_text("")


def test_a_failed_read_says_so_and_leaves_no_earlier_answer_on_show(session: tuple[Any, Watch]) -> None:
    """The service read a pair; the next read fails (a gateway's 502): the verdict says the read failed, and the earlier
    answer's redrawings are gone rather than shown as the new drawing's."""
    page, watch = session
    draw_two(page, LEFT_ONE, RIGHT_ZERO)
    expect(page.get_by_test_id("pair-verdict")).to_contain_text("Two digits")
    assert page.get_by_test_id("pair-alone-1").get_attribute("src")
    failed: list[Any] = []
    page.on("response", lambda r: r.status == 502 and failed.append(r))
    page.route(
        lambda url: urlsplit(url).path == "/predict" and "model=multimnist" in url,
        lambda route: route.fulfill(status=502, content_type="text/html", body="<html><body>Bad Gateway</body></html>"),
    )
    draw(page, LEFT_ONE, canvas=PAIR)
    settled(page)
    expect(page.get_by_test_id("pair-verdict")).to_contain_text("Could not read the digits: HTTP 502")
    assert page.get_by_test_id("pair-alone-1").get_attribute("src") is None
    network_quiet(page)
    for _ in range(100):  # the browser logs each failed response itself, a moment after the page has shown it
        if sum("status of 502" in e for e in watch.errors) >= len(failed):
            break
        page.wait_for_timeout(100)
    watch.errors = [e for e in watch.errors if "status of 502" not in e]


def test_section_7_is_reached_from_the_top_of_the_page(session: tuple[Any, Watch]) -> None:
    page, _ = session
    link = page.get_by_test_id("jump-pairs")
    expect(link).to_be_visible()
    assert link.bounding_box()["y"] < 300, "the link to section 7 is not at the top of the page"
    link.click()
    page.wait_for_function("() => { const t = document.getElementById('h-pairs').getBoundingClientRect().top; return t >= 0 && t < 200; }")


def test_pen_strokes_traced_from_test_pairs_are_read_on_the_page_as_the_canvas_set_reads_them(session: tuple[Any, Watch]) -> None:
    """The canvas path of bench/pair_paths.py (the card's `held_out.canvas` figures) is what the page does: MNIST test
    pairs, each digit's pen strokes traced from it (model/pen_strokes.py), drawn with the mouse in red then green, are
    named as the same strokes rendered in process and sent through the service's drawing path are named."""
    import numpy as np
    from PIL import Image

    from harness.pen_paths import pair_items
    from model.idx import load_mnist
    from model.pen_strokes import PAGE_SIDE, PEN, place, render, trace
    from tests.needs import need_mnist

    page, _ = session
    x, y = load_mnist(need_mnist(), "test")
    pairs = pair_items(x, y, 6, seed=7)[6:]  # six pairs
    base = page.url.rstrip("/")
    agree = named = 0
    for item in pairs:
        strokes = [place(trace(x[d] / 255.0), 28 / 36, dx / 36, dy / 36) for d, (dy, dx) in zip(item["digits"], item["shifts"])]
        # in process: the same strokes rendered as the page's pen draws them, sent as a canvas drawing
        alpha = (render(strokes[0] + strokes[1], PAGE_SIDE, PEN) * 255).astype(np.uint8)
        buf = io.BytesIO()
        Image.merge("RGBA", (Image.new("L", alpha.shape[::-1], 17),) * 3 + (Image.fromarray(alpha),)).save(buf, "PNG")
        data_url = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()
        expected = page.request.post(base + "/predict?model=multimnist", data={"image": data_url, "source": "canvas"}).json()
        # on the page, with the mouse
        page.get_by_test_id("pair-clear").click()
        page.get_by_test_id(PAIR).scroll_into_view_if_needed()
        draw(page, strokes[0], steps=1, canvas=PAIR)
        page.get_by_test_id("pair-ink-2").click()
        draw(page, strokes[1], steps=1, canvas=PAIR)
        settled(page)
        agree += sorted(int(d) for d in predictions(page).split(",") if d) == sorted(expected["predictions"])
        named += bool(expected["predictions"])
    assert named >= 5, f"the service named digits in only {named} of the 6 pairs: an agreement on nothing proves nothing"
    assert agree >= 5, f"the page named the digits as the canvas set does for {agree} of 6 pairs"


def test_a_picture_of_two_digits_is_uploaded_and_read_as_the_service_reads_its_file(session: tuple[Any, Watch]) -> None:
    """Pictures of test pairs (ink on paper, 144 px, PNG and JPEG, dark on light and light on dark) uploaded on section 7
    go to the service as the files they are, byte for byte: the page names what the service names for them, and shows
    the picture under the strokes; strokes drawn over it go with it as one opaque picture, the strokes in the ink's tone;
    a file that is not an image is said to be none."""
    import numpy as np
    from PIL import Image

    from bench.pair_paths import _composite
    from harness.pen_paths import pair_items
    from model.idx import load_mnist
    from tests.needs import need_mnist

    page, _ = session
    x, y = load_mnist(need_mnist(), "test")
    base = page.url.rstrip("/")
    verdict = "document.querySelector('[data-testid=\"pair-verdict\"]').dataset"
    sent: list[Any] = []
    page.on("request", lambda r: sent.append(r) if "model=multimnist" in r.url and r.method == "POST" else None)

    def answered(act: Any) -> None:
        """`act`, then wait for the answer to it (the verdict's ranked capsules, cleared before)."""
        page.evaluate(f"() => {{ delete {verdict}.ranked; }}")
        act()
        page.wait_for_function(f"() => !!{verdict}.ranked")
        settled(page)

    def export(request: Any) -> np.ndarray:
        return np.asarray(Image.open(io.BytesIO(base64.b64decode(request.post_data_json["image"].split(",", 1)[1]))).convert("RGBA"))

    page.get_by_test_id(PAIR).scroll_into_view_if_needed()
    for k, item in enumerate(pair_items(x, y, 4, seed=11)[4:]):
        ink = (_composite(x, item) * 255).astype(np.uint8)
        light_on_dark = k == 3
        paper = Image.fromarray(ink if light_on_dark else 255 - ink).resize((144, 144), Image.Resampling.BICUBIC)
        buf, kind = io.BytesIO(), ("png", "jpeg")[k % 2]
        paper.save(buf, format=kind.upper())
        upload = {"name": f"pair.{kind}", "mimeType": f"image/{kind}", "buffer": buf.getvalue()}
        expected = page.request.post(base + "/predict?model=multimnist", multipart={"file": upload}).json()
        answered(lambda u=upload: page.get_by_test_id("pair-upload").set_input_files(u))
        # what the network saw, pixel for pixel, is what it saw of the file sent by the test: the file went as it is
        assert page.get_by_test_id("pair-input").get_attribute("src").endswith(expected["input"]["png"]), f"pair {k}: not the file"
        assert expected["predictions"], f"pair {k}: the service named no digit"
        assert predictions(page) == ",".join(map(str, expected["predictions"])), f"pair {k}: the page and the service differ"
        # the picture is on show under where a person would draw: its ink's pixels on the canvas
        tone = "d[i] > 160 && d[i + 1] > 160 && d[i + 2] > 160" if light_on_dark else "d[i] < 100 && d[i + 1] < 100 && d[i + 2] < 100"
        shown = page.evaluate(
            f"""() => {{ const c = document.querySelector('[data-testid="pair-canvas"]');
                        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
                        let n = 0; for (let i = 0; i < d.length; i += 4) n += {tone}; return n; }}"""
        )
        assert shown > 100, f"pair {k}: the uploaded picture is not shown on the canvas"
        if k == 0:
            page.locator("#pairs").screenshot(path=str(OUTPUT / "pairs-uploaded.png"))

        # a stroke over the picture: both go as one opaque picture, searched for its ink as a photo is, the stroke in the
        # ink's tone (light over light ink on dark), and answered as the service answers that picture
        answered(lambda: draw(page, [[(0.1, 0.1), (0.2, 0.12)]], canvas=PAIR))
        body = sent[-1].post_data_json
        assert "source" not in body
        img = export(sent[-1])
        assert (img[..., 3] == 255).all(), "the picture with strokes went with a transparent ground"
        lum = img[..., :3].mean(-1)
        stroke, middle = lum[32:36, 42:52], lum[60:220, 60:220]
        if light_on_dark:
            assert stroke.mean() > 200 and (middle > 160).sum() > 100, "the stroke or the picture's light ink is missing"
        else:
            assert stroke.mean() < 60 and (middle < 100).sum() > 100, "the stroke or the picture's dark ink is missing"
        again = page.request.post(base + "/predict?model=multimnist", data=body).json()
        assert predictions(page) == ",".join(map(str, again["predictions"]))

    page.get_by_test_id("pair-upload").set_input_files({"name": "notes.txt", "mimeType": "text/plain", "buffer": b"two digits"})
    expect(page.get_by_test_id("pair-verdict")).to_have_text("That file is not an image (text/plain).")
    page.get_by_test_id("pair-clear").click()
    expect(page.get_by_test_id("pair-verdict")).to_have_text("Draw two digits, one over the other or side by side")


def test_two_digits_written_side_by_side_are_read_and_each_redrawn_in_its_ink(session: tuple[Any, Watch]) -> None:
    """Two MNIST test digits written apart, as people write two digits: each one's pen strokes traced from it on its own
    half of the canvas (as bench/pair_paths.apart draws them), red then green, sometimes the red one on the right. The
    service lays them over each other as MultiMNIST's pairs are; the page names both for most pairs (the canvas set
    written apart: 88% of 400, BENCHMARKS.md), and each digit it names is redrawn in the colour of the ink it was drawn in."""
    from harness.pen_paths import apart_strokes, pair_items
    from model.idx import load_mnist
    from tests.needs import need_mnist

    page, _ = session
    x, y = load_mnist(need_mnist(), "test")
    both = coloured = 0
    for k, item in enumerate(pair_items(x, y, 6, seed=5)[6:]):  # six pairs
        red, green = item["digits"]
        red_left = k % 2 == 0  # the red digit on the left, then on the right
        order, shifts = ((red, green), item["shifts"]) if red_left else ((green, red), item["shifts"][::-1])
        left, right = apart_strokes([x[d] for d in order], shifts, 4 * (k % 3))
        page.get_by_test_id("pair-clear").click()
        draw_two(page, *((left, right) if red_left else (right, left)))
        named = sorted(int(d) for d in predictions(page).split(",") if d)
        if named == sorted([int(y[red]), int(y[green])]):
            both += 1
            coloured += colour_of(page) == {int(y[red]): "red", int(y[green]): "green"}
        if k == 1:
            page.locator("#pairs").screenshot(path=str(OUTPUT / "pairs-side-by-side.png"))
    assert both >= 4, f"both digits written apart named in {both} of 6 pairs"
    assert coloured == both, f"of {both} pairs named, {coloured} redrawn in their own inks' colours"


def track_shades(page: Any, test_id: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The slider's track colour at 15% and at 35% of its width, read off a screenshot (clear of the thumb at 0)."""
    from PIL import Image

    slider = page.get_by_test_id(test_id)
    slider.scroll_into_view_if_needed()
    shot = Image.open(io.BytesIO(slider.screenshot())).convert("RGB")
    y = shot.height // 2
    return shot.getpixel((int(0.15 * shot.width), y)), shot.getpixel((int(0.35 * shot.width), y))


def test_the_shaded_band_is_the_papers_range_on_both_kinds_of_slider(session: tuple[Any, Watch]) -> None:
    """The paper's shifts run from -0.25 to +0.25. Section 4's sliders go to ±0.5 and shade the middle half; section 7's
    go to ±0.25, so the whole of their track is the band (shading their middle half marked ±0.125 as the paper's)."""
    page, _ = session

    def near(a: tuple[int, ...], b: tuple[int, ...]) -> bool:  # within the screenshot's rounding of a translucent colour
        return max(abs(x - y) for x, y in zip(a, b, strict=True)) <= 3

    outside, inside = track_shades(page, "pose-slider-0")  # -0.35 and -0.15
    assert not near(outside, inside), f"section 4's band is not shaded: {outside} {inside}"
    pair = track_shades(page, "pair-slider-0")  # -0.175 and -0.075
    assert near(pair[0], inside) and near(pair[1], inside), f"section 7's band is not its whole track: {pair}, band {inside}"
