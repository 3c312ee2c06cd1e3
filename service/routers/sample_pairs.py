"""GET /multimnist/sample: two random MNIST test digits overlaid as the paper's MultiMNIST, for the page's button."""

from __future__ import annotations

import numpy as np
from fastapi import APIRouter

from service.deps import ReadyDep
from service.errors import NotServed
from service.inputs.mnist_test_set import sample_pair
from service.postprocess import FastJSON
from service.schemas import ERRORS, ErrorBody, PairSample
from service.threads import in_thread

router = APIRouter(tags=["predict"])


@router.get(
    "/multimnist/sample",
    response_model=PairSample,
    responses={404: {"model": ErrorBody, "description": "no MNIST test digits here, or no two-digit model"}, 503: ERRORS[503]},
    summary="Two random MNIST test digits, overlaid",
)
async def sample(state: ReadyDep) -> FastJSON:
    """A pair made as the test pairs are (36x36, each digit shifted up to 4 px, added and clipped), from MNIST's test set when
    this server has it (CAPSNET_MNIST_DIR); 404 when it has not, or serves no two-digit model."""
    if state.pair_engine is None or state.test_digits is None or not state.test_digits.available():
        raise NotServed("no MNIST test digits on this server (CAPSNET_MNIST_DIR), or no two-digit model")
    images, labels = await in_thread(state.test_digits.load)
    card = state.pair_engine.card
    pixels, digits = sample_pair(images, labels, card.image_size, card.input.max_shift, np.random.default_rng())
    return FastJSON({"pixels": np.round(pixels, 4), "labels": digits})
