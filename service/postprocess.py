"""Postprocess: every answer a route gives, built from the network's outputs, in one home (the routes only route); JSON
serialised by orjson straight from numpy, since a prediction carries ~1,900 numbers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import orjson
from fastapi.responses import JSONResponse

from model.pair_rule import choice_signals
from service.engine.card import DigitRule
from service.engine.routing_inspector import RoutingInspector
from service.engine.two_digit import PairEngine
from service.errors import Invalid
from service.inputs.images import encode_png

if TYPE_CHECKING:
    from service.state import AppState

DECIMALS = 5


class FastJSON(JSONResponse):
    def render(self, content: Any) -> bytes:
        return orjson.dumps(content, option=orjson.OPT_SERIALIZE_NUMPY)


PIXELS = "pixels"  # the ?include= value that adds each image's values to its PNG
EXTRAS = {"coupling", "coupling_grid", "counterfactuals", "routing", PIXELS}  # what ?include= can add to a one-digit answer
PIXELS_DOC = "`pixels` adds each image's values (rows in [0,1], 5 decimals) beside its PNG"
PIXELS_PARAM = {
    "name": "include",
    "in": "query",
    "required": False,
    "description": PIXELS_DOC,
    "schema": {"anyOf": [{"const": PIXELS}, {"type": "null"}], "title": "Include"},
}


def included(values: list[str] | None, allowed: set[str]) -> set[str]:
    """?include=a,b (or ?include=a&include=b) as a set, every name one of `allowed` (else a 422 naming them)."""
    parts = {p.strip() for value in values or () for p in value.split(",") if p.strip()}
    unknown = parts - allowed
    if unknown:
        raise Invalid(f"include: unknown value(s) {sorted(unknown)}; choose from {sorted(allowed)}")
    return parts


def picture(pixels: np.ndarray, with_pixels: bool = False) -> dict[str, Any]:
    """[H,W] in [0,1] -> {"png": base64} as the API returns images, and its rows of values when the caller asks
    (?include=pixels): 784 rounded numbers are 10 KB of JSON that a viewer of the PNG never reads."""
    p = np.clip(pixels.astype(np.float32), 0.0, 1.0)
    out: dict[str, Any] = {"png": encode_png(p)}
    if with_pixels:
        out["pixels"] = np.round(p, DECIMALS)
    return out


def rounded(x: np.ndarray) -> np.ndarray:
    return np.round(x.astype(np.float32), DECIMALS)


def pair_answer(
    engine: PairEngine,
    out: dict[str, np.ndarray],
    image: np.ndarray,
    blank_rule: DigitRule,
    with_pixels: bool = False,
    path: str | None = None,
) -> dict[str, Any]:
    """One input's answer: the digits found (two, one, or none: never a second digit the capsules do not back, nor a
    digit in what the card's digits rule reads as none), the redrawings of the two capsules read as the pair (with two
    digits, the card's pair choice among the three longest; else the two longest), and what the network saw. `image`
    [1,S,S]; blank as the MNIST card's rule says; `path` how it came (model.pair_rule.PATHS), whose thresholds tell one
    digit from two and digits from none."""
    lengths = out["lengths"][0]
    order = [int(k) for k in np.argsort(-lengths, kind="stable")[:3]]
    card = engine.card
    blank = float(image.sum()) < blank_rule.blank_ink_below
    two, present = card.read(out["lengths"][:1], out["poses"][:1], out["reconstructions"][:1], image[None], path)
    second, not_digits = bool(two[0]), not blank and not bool(present[0])
    drawn = out["reconstructions"][:1]  # [1,2,1,S,S]: the two longest capsules' redrawings
    ranks = [0, 1]
    if second and card.pair_choice is not None and "third" in out:
        # two digits: which two, of the pairs the three longest capsules make (model/pair_rule.py's PairChoice)
        drawn = np.concatenate([drawn, out["third"][:1]], 1)
        ranks = [int(r) for r in card.pair_choice.choice.ranks(choice_signals(out["lengths"][:1], drawn, image[None]))[0]]
    ranked = [order[r] for r in ranks]
    found = [] if blank or not_digits else ranked[: 2 if second else 1]
    return {
        "predictions": found,
        "ranked": ranked,
        "lengths": rounded(lengths),
        "poses": rounded(out["poses"][0]),
        "reconstructions": [picture(drawn[0, r, 0], with_pixels) for r in ranks],
        "input": picture(image[0], with_pixels),
        "blank": blank,
        "not_digits": not_digits,
        "model": {"name": card.name, "version": card.version, "provider": engine.provider},
    }


def routing_answer(inspector: RoutingInspector, trace: dict[str, np.ndarray], i: int, capsule_type: int | None) -> dict[str, Any]:
    """Item i of a trace as the API returns it: per iteration the lengths and the 6x6 maps per digit, of the mean over
    the 32 capsule types or of one type (channel of PrimaryCaps), with their ranges so a legend can say them."""
    c, g, k = inspector.card.primary_channels, inspector.card.primary_grid, inspector.card.num_classes

    def grids(x: np.ndarray) -> np.ndarray:  # [R,10,1152] -> [R,10,6,6]; i = channel*36 + row*6 + col
        x = x.reshape(inspector.iterations, k, c, g, g)
        return x.mean(2) if capsule_type is None else x[:, :, capsule_type]

    coupling, agreement = grids(trace["coupling"][i]), grids(trace["agreement"][i])
    return {
        "trained": inspector.trained,
        "capsule_type": "mean" if capsule_type is None else capsule_type,
        "uniform_coupling": 1.0 / k,
        "iterations": [
            {
                "iteration": r + 1,
                "lengths": rounded(trace["lengths"][i, r]),
                "coupling_grid": rounded(coupling[r]),
                "agreement_grid": rounded(agreement[r]),
                "coupling_range": [float(coupling[r].min()), float(coupling[r].max())],
                "agreement_range": [float(agreement[r].min()), float(agreement[r].max())],
            }
            for r in range(inspector.iterations)
        ],
    }


Verdicts = tuple[np.ndarray, np.ndarray, list]  # DigitRule.judge's blank, is_digit and why, one row per input


def digit_answer(
    out: dict[str, np.ndarray],
    i: int,
    image: np.ndarray,
    state: AppState,
    extras: set[str],
    verdicts: Verdicts,
    routing: tuple[dict[str, np.ndarray], int | None] | None = None,
) -> dict[str, Any]:
    """Input i's answer to /predict and /predict/batch: the capsules, the verdicts (blank, is_digit and why), the
    redrawings and what the network saw, and the extras asked for."""
    card = state.card
    lengths, errors = out["lengths"][i], out["recon_errors"][i]
    blank, is_digit, why = verdicts[0][i], verdicts[1][i], verdicts[2][i]
    r: dict[str, Any] = {
        "prediction": int(lengths.argmax()),
        "lengths": rounded(lengths),
        "poses": rounded(out["poses"][i]),
        "blank": bool(blank),
        "is_digit": bool(is_digit),
        "why_not_digit": None if why is None else {"signals": why[0], "reason": why[1]},
        "recon_errors": rounded(errors),
        "reconstruction": picture(out["reconstruction"][i, 0], PIXELS in extras),
        "input": picture(image[0], PIXELS in extras),
        "model": {"name": card.name, "version": card.version, "provider": state.engine.provider, "precision": state.engine.precision},
    }
    if "counterfactuals" in extras:
        r["counterfactuals"] = [encode_png(x) for x in out["counterfactuals"][i]]
    if extras & {"coupling", "coupling_grid"}:
        c = out["coupling"][i]  # [1152,10], i = channel*36 + row*6 + col
        g = card.primary_grid
        if "coupling" in extras:
            r["coupling"] = rounded(c)
        r["coupling_grid"] = rounded(c.reshape(card.primary_channels, g, g, card.num_classes).mean(0).transpose(2, 0, 1))
    if routing is not None:
        assert state.routing_inspector is not None
        r["routing"] = routing_answer(state.routing_inspector, routing[0], i, routing[1])
    return r
