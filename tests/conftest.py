"""Shared paths. Tests run from any directory; MNIST (../shared/data/mnist) is optional and only the
committed-accuracy test uses it."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
from hypothesis import settings

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

# No wall-clock deadline per generated example: on a machine shared with other work one example may wait out a
# scheduler's pause, and the test would fail for the machine, not the code. How a parser's time grows with its input is
# held by tests/service/test_parsing_time.py, as ratios measured in one run.
settings.register_profile("shared-machine", deadline=None)
settings.load_profile("shared-machine")

WEIGHTS = REPO / "weights"
MNIST = REPO.parent / "shared" / "data" / "mnist"


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


def committed_pairs() -> bool:
    """Whether the committed model card has the two-digit network (model/export_multimnist.py writes its entry)."""
    import json

    return "multimnist" in json.loads((WEIGHTS / "model-card.json").read_text())


@pytest.fixture(scope="session")
def pair_weights(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """weights/ when its card has the two-digit network; until then a copy of weights/ beside the two-digit network exported
    untrained, warm-started from the MNIST weights as training starts (model.train_multimnist.init_from_mnist), with a
    card entry written by the export's own code: the contract, the endpoints and the page run for real on it, and what
    needs the trained network (accuracy) is checked only on the committed one."""
    if committed_pairs():
        return WEIGHTS
    import json
    import shutil

    from model.capsnet import CapsNet
    from model.export_multimnist import build_entry, export, parity
    from model.multimnist import CONFIG
    from model.train_multimnist import init_from_mnist

    out = tmp_path_factory.mktemp("pair-weights") / "weights"
    shutil.copytree(WEIGHTS, out)
    model = CapsNet(CONFIG)
    init_from_mnist(model, WEIGHTS / "capsnet.onnx")
    model.eval()
    net, dec = export(model, out)
    stand_in = {"epoch": 0, "pairs_seen": 0, "args": {"init": "weights/capsnet.onnx"}, "history": []}
    rule = {"second_min_length": 0.5, "measured_on": "nothing: an untrained stand-in for the tests"}
    entry = build_entry(model, stand_in, net, dec, parity(model, net, dec), {"pairs": 0}, rule, 23)
    card = json.loads((out / "model-card.json").read_text())
    card["multimnist"] = entry
    (out / "model-card.json").write_text(json.dumps(card, indent=1))
    return out


def fewest(p: float, n: int, risk: float = 1e-3) -> int:
    """The bar for a count of successes out of n when each succeeds with the card's rate p: the largest k with
    P(Binomial(n, p) < k) <= risk. A test holding a figure to k fails a network that does as the card says once in
    1/risk runs at most, and a real regression far more often: the margin comes from the set's size, not from the last
    results."""
    below, k = 0.0, 0
    while k <= n:
        term = math.comb(n, k) * p**k * (1 - p) ** (n - k)
        if below + term > risk:
            return k
        below += term
        k += 1
    return n


def most(p: float, n: int, risk: float = 1e-3) -> int:
    """The bar for a count of failures out of n at the card's rate p: the smallest k with P(Binomial(n, p) > k) <= risk."""
    return n - fewest(1 - p, n, risk)
