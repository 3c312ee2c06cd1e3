"""static/channel.js on its own, in the real browser: the rules that keep a dragged slider or a live drawing from
flooding the server or showing an old answer over a new one. Each test drives a Channel with a `send` whose answers
the test releases by hand."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

# A Channel whose send() parks each request until release(i) or fail(i) settles it; `shown` and `errors` record what
# reached onAnswer and onError, in order.
HARNESS = """async () => {
  const { Channel } = await import('/static/channel.js');
  const t = { sent: [], settle: [], shown: [], errors: [] };
  t.channel = new Channel(
    (req) => new Promise((resolve, reject) => { t.sent.push(req.n); t.settle.push({ resolve, reject }); }),
    (data, req) => t.shown.push([req.n, data]),
    (err, req) => t.errors.push([req.n, err.message]));
  t.ask = (n) => t.channel.ask(() => (n === null ? null : { n }));
  t.release = (i, data) => t.settle[i].resolve(data);
  t.fail = (i, msg) => t.settle[i].reject(new Error(msg));
  window.t = t;
}"""


@pytest.fixture
def page(browser: Any, base_url: str) -> Iterator[Any]:
    context = browser.new_context()
    p = context.new_page()
    p.goto(base_url + "/static/favicon.svg")  # same origin as the module, nothing else running
    p.evaluate(HARNESS)
    yield p
    context.close()


def state(page: Any) -> dict:
    page.wait_for_timeout(20)  # let settled promises run their callbacks
    return page.evaluate("() => ({ sent: t.sent, shown: t.shown, errors: t.errors, idle: t.channel.idle() })")


def test_one_request_at_a_time_and_the_newest_wish_wins(page):
    page.evaluate("() => { t.ask(1); t.ask(2); t.ask(3); t.ask(4); }")
    assert state(page)["sent"] == [1], "a second request started while one was in flight"
    page.evaluate("() => t.release(0, 'a')")
    s = state(page)
    assert s["sent"] == [1, 4] and s["shown"] == [[1, "a"]], "the queued wishes 2 and 3 should have been replaced by 4"
    page.evaluate("() => t.release(1, 'b')")
    s = state(page)
    assert s["shown"] == [[1, "a"], [4, "b"]] and s["idle"]


def test_clear_drops_answers_in_flight_and_queued_wishes(page):
    page.evaluate("() => { t.ask(1); t.ask(2); t.channel.invalidate(); }")
    page.evaluate("() => t.release(0, 'stale')")
    s = state(page)
    assert s["shown"] == [] and s["sent"] == [1], "an answer from before Clear was shown, or the queued wish still ran"
    page.evaluate("() => { t.ask(3); }")
    page.evaluate("() => t.release(1, 'fresh')")
    assert state(page)["shown"] == [[3, "fresh"]]


def test_errors_reach_on_error_unless_stale_and_the_channel_goes_on(page):
    page.evaluate("() => { t.ask(1); }")
    page.evaluate("() => t.fail(0, 'HTTP 422')")
    s = state(page)
    assert s["errors"] == [[1, "HTTP 422"]] and s["idle"]
    page.evaluate("() => { t.ask(2); t.channel.invalidate(); }")
    state(page)
    page.evaluate("() => t.fail(1, 'late')")
    assert state(page)["errors"] == [[1, "HTTP 422"]], "the error of a request made stale by Clear was reported"
    page.evaluate("() => { t.ask(null); }")
    assert state(page)["sent"] == [1, 2], "a job with nothing to send still sent something"
    page.evaluate("() => { t.ask(5); }")
    state(page)
    page.evaluate("() => t.release(2, 'ok')")
    assert state(page)["shown"] == [[5, "ok"]]


def test_the_region_says_it_is_busy_until_the_newest_answer_is_on_show(page):
    """aria-busy on the element the answers go to: a screen reader waits for the newest answer before it reads it."""
    page.evaluate("""() => {
      t.region = document.createElement('div');
      t.channel.region = t.region;
      t.ask(1); t.ask(2);
    }""")
    busy = "() => t.region.getAttribute('aria-busy')"
    assert page.evaluate(busy) == "true"
    page.evaluate("() => t.release(0, 'a')")
    state(page)
    assert page.evaluate(busy) == "true", "the queued wish 2 is in flight: the answer on show is not the newest"
    page.evaluate("() => t.release(1, 'b')")
    assert state(page)["shown"][-1] == [2, "b"] and page.evaluate(busy) == "false"
