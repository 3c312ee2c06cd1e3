"""Execution providers are chosen explicitly, and a missing GPU degrades to the CPU with a clear log line."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

import service.engine.local as engine_module
from model.digit_rule import recon_error
from service.engine.card import load_card
from service.engine.local import CUDA_OPTIONS, choose_providers, load_engine

WEIGHTS = Path(__file__).resolve().parents[3] / "weights"


def test_cuda_first_when_onnxruntime_offers_it():
    chosen = choose_providers("cuda,cpu", ["CUDAExecutionProvider", "CPUExecutionProvider"])
    assert chosen == [("CUDAExecutionProvider", CUDA_OPTIONS), ("CPUExecutionProvider", {})]
    assert CUDA_OPTIONS["cudnn_conv_algo_search"] != "EXHAUSTIVE"  # the first request must not pay for a search


def test_missing_cuda_falls_back_to_cpu_and_says_so(caplog):
    with caplog.at_level(logging.WARNING, logger="capsnet.engine"):
        chosen = choose_providers("cuda,cpu", ["CPUExecutionProvider"])
    assert chosen == [("CPUExecutionProvider", {})]
    assert "CUDAExecutionProvider requested" in caplog.text and "falling back" in caplog.text


def test_cpu_is_always_last_resort():
    assert choose_providers("cuda", ["CPUExecutionProvider"]) == [("CPUExecutionProvider", {})]


def test_unknown_provider_is_refused():
    with pytest.raises(ValueError, match="unknown execution provider 'tpu'"):
        choose_providers("tpu,cpu", ["CPUExecutionProvider"])


def test_the_real_engine_reports_the_provider_it_runs_on(client):
    engine = client.app.state.capsnet.engine
    assert engine.provider == engine.capsnet.get_providers()[0] == "CPUExecutionProvider"
    assert engine.device == "CPU"


def test_under_load_a_second_session_with_fewer_threads_gives_the_same_answers():
    card = load_card(WEIGHTS)
    engine = load_engine(WEIGHTS, card, "cpu", threads=2, busy_threads=1)
    assert engine.capsnet_busy is not None
    x = np.zeros((3, 1, 28, 28), np.float32)
    x[:, :, 6:22, 12:16] = 1.0
    alone, busy = engine.predict(x), engine.predict(x, busy=True)
    for k in alone:
        assert np.allclose(alone[k], busy[k], atol=1e-5), k
    assert load_engine(WEIGHTS, card, "cpu", threads=1, busy_threads=1).capsnet_busy is None  # same threads: one session
    # the nine redraws an image are too little work to share: one thread, alone or under load, leaving the loop its core
    int8 = load_engine(WEIGHTS, card, "cpu", threads=2, precision="int8", busy_threads=1)
    assert int8.counterfactual_decoder.get_session_options().intra_op_num_threads == 1
    assert int8.capsnet.get_session_options().intra_op_num_threads == 2
    assert engine.warm_up(1) > 0  # ms per image on the busy session, which sets the batches in flight


class _PlacedAsAsked:
    """A stand-in session that runs where it is asked to, as onnxruntime-gpu does on a machine with a working GPU."""

    def __init__(self, path: Path, providers: list[tuple[str, dict]], threads: int) -> None:
        self.path, self._providers = path, [name for name, _ in providers]

    def get_providers(self) -> list[str]:
        return self._providers


@pytest.mark.parametrize(
    ("available", "file", "precision", "device", "redraws"),
    [
        (["CUDAExecutionProvider", "CPUExecutionProvider"], "capsnet.onnx", "fp32", "GPU", "decoder.onnx"),
        (["CPUExecutionProvider"], "capsnet-int8.onnx", "int8", "CPU", "decoder-int8.onnx"),
    ],
)
def test_auto_precision_follows_the_providers(monkeypatch, available, file, precision, device, redraws):
    card = load_card(WEIGHTS)
    assert card.int8.meets_bars, "the committed card's INT8 file met its bars: auto serves it on the CPU"
    monkeypatch.setattr(ort, "get_available_providers", lambda: available)
    monkeypatch.setattr(engine_module, "open_session", _PlacedAsAsked)
    engine = load_engine(WEIGHTS, card, "cuda,cpu", 1, "auto")
    assert (engine.model_file, engine.precision, engine.device) == (file, precision, device)
    assert engine.capsnet.path.name == file
    assert engine.describe()["counterfactuals"] == redraws  # the counterfactuals in INT8 beside the INT8 network only


@pytest.mark.filterwarnings("ignore:Specified provider 'CUDAExecutionProvider'")
def test_auto_precision_follows_where_the_model_actually_runs(monkeypatch, caplog):
    """onnxruntime-gpu lists CUDA even without a usable GPU and then runs on the CPU: auto takes the CPU's file."""
    monkeypatch.setattr(ort, "get_available_providers", lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"])
    with caplog.at_level(logging.WARNING, logger="capsnet.engine"):
        engine = load_engine(WEIGHTS, load_card(WEIGHTS), "cuda,cpu", 1, "auto")  # this onnxruntime has no CUDA: placed on the CPU
    assert (engine.device, engine.precision, engine.model_file) == ("CPU", "int8", "capsnet-int8.onnx")
    assert "serving int8 rather than fp32" in caplog.text


def test_the_precision_is_stored_not_read_off_the_file_name():
    card = load_card(WEIGHTS)
    assert load_engine(WEIGHTS, card, "cpu", 1, "fp32").precision == "fp32"
    engine = load_engine(WEIGHTS, card, "cpu", 1, "int8")
    assert (engine.precision, engine.model_file) == ("int8", card.int8.file)


@pytest.fixture(scope="module")
def local_engine():
    card = load_card(WEIGHTS)
    return load_engine(WEIGHTS, card, "cpu", 1, "fp32")


def _digits(n: int) -> np.ndarray:
    from harness.payloads import stroke_images

    return stroke_images(n)


def test_the_counterfactuals_are_the_decoder_on_every_capsules_own_pose(local_engine):
    """The winner's redraw comes from the graph and the decoder runs the other nine: the same images and errors as
    decoding all ten, as the is_digit rule was calibrated."""
    images = _digits(6)
    out = local_engine.predict(images)
    n, k, dim = out["poses"].shape
    every = local_engine.reconstruct(np.tile(np.arange(k, dtype=np.int64), n), out["poses"].reshape(n * k, dim)).reshape(n, k, 28, 28)
    np.testing.assert_allclose(out["counterfactuals"], every, atol=1e-6)
    # recon_error's own figures (0 for a perfect redraw, 1 for an empty one) are held by tests/model/test_calibrate.py
    np.testing.assert_allclose(out["recon_errors"], recon_error(images[:, 0], every), rtol=1e-5, atol=1e-6)


def test_only_the_rows_that_ask_are_explained_and_the_others_cost_no_decoding(local_engine, monkeypatch):
    images = _digits(5)
    full = local_engine.predict(images)
    rows: list[int] = []
    real = local_engine.redraw
    monkeypatch.setattr(local_engine, "redraw", lambda d, p: rows.append(len(d)) or real(d, p))
    explain = np.array([True, False, True, False, False])
    out = local_engine.predict(images, explain=explain)
    assert rows == [2 * 9]  # nine decodes for each of the two rows that asked
    np.testing.assert_allclose(out["recon_errors"][explain], full["recon_errors"][explain], rtol=1e-5, atol=1e-6)
    assert not out["recon_errors"][~explain].any() and not out["counterfactuals"][~explain].any()
    rows.clear()
    local_engine.predict(images, explain=np.zeros(5, bool))
    assert rows == []


def test_beside_the_int8_network_the_counterfactuals_are_redrawn_in_int8_and_judged_alike():
    """The INT8 decoder redraws the nine losers on the CPU: recon_errors within the card's measured parity of decoder.onnx's,
    the same is_digit verdicts, and the pictures asked for by pose still decoder.onnx's own."""
    card = load_card(WEIGHTS)
    engine = load_engine(WEIGHTS, card, "cpu", 1, "int8")
    assert engine.counterfactual_file == card.int8.decoder.file == "decoder-int8.onnx"
    images = _digits(8)
    out = engine.predict(images)
    n, k, dim = out["poses"].shape
    fp32 = engine.reconstruct(np.tile(np.arange(k, dtype=np.int64), n), out["poses"].reshape(n * k, dim)).reshape(n, k, 28, 28)
    fp32[np.arange(n), out["lengths"].argmax(1)] = out["reconstruction"][:, 0]
    errors = recon_error(images[:, 0], fp32)
    assert 0 < np.abs(out["recon_errors"] - errors).max() <= card.int8.decoder.model_extra["parity"]["recon_error_max_abs"]
    same = {**out, "recon_errors": errors}
    assert (card.digit_rule.judge(images, out)[1] == card.digit_rule.judge(images, same)[1]).all()
    alone = engine.predict(images[:2])  # an image's answer does not depend on what shares its batch
    np.testing.assert_array_equal(alone["recon_errors"], out["recon_errors"][:2])
    assert engine.counterfactual_decoder is not None and engine.decoder is not engine.counterfactual_decoder


def test_the_fp32_network_or_a_decoder_short_of_its_bars_redraws_with_decoder_onnx():
    card = load_card(WEIGHTS)
    assert load_engine(WEIGHTS, card, "cpu", 1, "fp32").counterfactual_decoder is None
    short = card.int8.decoder.model_copy(update={"meets_bars": False})
    card = card.model_copy(update={"int8": card.int8.model_copy(update={"decoder": short})})
    engine = load_engine(WEIGHTS, card, "cpu", 1, "int8")
    assert engine.counterfactual_decoder is None and engine.describe()["counterfactuals"] == "decoder.onnx"
