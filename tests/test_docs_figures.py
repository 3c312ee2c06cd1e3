"""Figures quoted in the README and docs/ are the card's and BENCHMARKS' own: each is formatted here from its source
and must stand in the prose as written, so that new weights or a new benchmark run that changes one fails here until
the prose says it too."""

from __future__ import annotations

import json

import pytest

from tests.conftest import REPO, WEIGHTS

CARD = json.loads((WEIGHTS / "model-card.json").read_text())
PAIRS = CARD["multimnist"]
HELD = PAIRS["second_digit"]["held_out"]
PAGE = json.loads((REPO / "bench" / "results" / "page.json").read_text())


def _pct(x: float, digits: int = 1) -> str:
    return f"{100 * x:.{digits}f}%"


QUOTES = [
    ("README.md", f"{_pct(CARD['test']['accuracy'], 2)} on the 10,000 test digits"),
    ("README.md", f"names both digits of {_pct(PAIRS['test']['both_right'])} of MultiMNIST's test pairs"),
    ("docs/model.md", f"**{_pct(CARD['test']['accuracy'], 2)} on the 10k MNIST test set**"),
    ("docs/multimnist.md", f"**{_pct(PAIRS['test']['both_right'])} of the 10,000 test pairs**"),
    ("docs/multimnist.md", f"at least one of the two in {_pct(PAIRS['test']['at_least_one_right'])}"),
    ("docs/multimnist.md", f"{_pct(PAIRS['test']['reconstruction_nearer_own_digit'])} of the redrawings are nearer their own digit"),
    ("docs/multimnist.md", f"It has seen {PAIRS['training']['pairs_seen']:,} training images"),
    (
        "docs/multimnist.md",
        f"with this rule about {_pct(HELD['upload']['lone_called_two'], 0)} and {_pct(HELD['canvas']['lone_called_two'], 0)}",
    ),
    (
        "docs/multimnist.md",
        f"(both named {_pct(HELD['upload']['pairs_both_named'], 0)} uploaded, {_pct(HELD['canvas']['pairs_both_named'], 0)}\n"
        f"drawn, against {_pct(HELD['pixels']['pairs_both_named'], 0)})",
    ),
    ("docs/page-decoder.md", f"first load stays as it was ({round(PAGE['page_first_load_bytes'] / 1000)} KB)"),
    ("docs/page-decoder.md", f"`decoder.onnx` ({CARD['files']['decoder.onnx']['bytes'] / 1e6:.1f} MB)"),
    ("docs/page-decoder.md", f"`multimnist-decoder.onnx` ({PAIRS['files']['multimnist-decoder.onnx']['bytes'] / 1e6:.1f} MB)"),
    (
        "docs/page-decoder.md",
        "the last one {} ms after the hand stopped".format(
            next(d for d in PAGE["drags"] if d["where"] == "server" and d["rtt_ms"] == 200)["last_picture_after_last_move_ms"]
        ),
    ),
]


@pytest.mark.parametrize("doc, quote", QUOTES, ids=[f"{d}:{q[:40]}" for d, q in QUOTES])
def test_the_prose_quotes_its_source(doc: str, quote: str) -> None:
    text = (REPO / doc).read_text()
    assert quote in text or quote.replace("\n", " ") in " ".join(text.split()), f"{doc} does not say: {quote!r}"
