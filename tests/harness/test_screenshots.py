"""The README's screenshots are of the page as it is and of the networks the card names: each records the networks'
versions (harness/screenshots.py), and `make screenshots` takes them anew from the real page."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image

from harness.screenshots import take, versions
from tests.conftest import REPO, WEIGHTS
from tests.needs import missing, need_mnist

SHOTS = {"screenshot.png": "README.md", "pairs.png": "README.md", "pairs-apart.png": "docs/multimnist.md"}  # and where each is shown


@pytest.mark.parametrize("name", SHOTS)
def test_the_readme_shows_the_committed_networks(name: str) -> None:
    """A screenshot of weights no longer committed shows another network's figures (the card's score on the page, its
    answers): new weights need new screenshots."""
    doc = REPO / SHOTS[name]
    assert f"{'docs/' if doc.name == 'README.md' else ''}{name}" in doc.read_text()
    with Image.open(REPO / "docs" / name) as im:
        shown = {k: v for k, v in im.text.items() if k in ("capsnet", "multimnist")}
    assert shown == versions(WEIGHTS), f"docs/{name} shows {shown}, the card names {versions(WEIGHTS)}: run `make screenshots`"


def test_the_screenshots_are_taken_of_the_real_page(tmp_path: Path) -> None:
    from harness.page import CHROMIUM

    if not Path(CHROMIUM).exists():
        missing("browser", f"Chromium not found at {CHROMIUM}: apt-get install chromium")
    shots = take(tmp_path, need_mnist())
    assert set(shots) == {"page", "pairs", "pairs_apart"}
    for path in shots.values():
        with Image.open(path) as im:
            assert im.text["capsnet"] == versions(WEIGHTS)["capsnet"]
            size = im.size
        assert size[0] >= 1200, f"{path.name}: {size}"
    with Image.open(shots["page"]) as im:
        assert im.size[1] > 2000, "the whole page, every section"
