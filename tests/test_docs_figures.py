"""Figures quoted in the README and docs/ are the card's and BENCHMARKS' own: each is formatted here from its source
and must stand in the prose as written, so that new weights or a new benchmark run that changes one fails here until
the prose says it too."""

from __future__ import annotations

import json
import math
import re

import pytest

from tests.conftest import REPO, WEIGHTS
from tests.needs import missing
from tests.service import test_real_input as real_input
from tests.service import test_tight_crops as tight_crops

CARD = json.loads((WEIGHTS / "model-card.json").read_text())
PAIRS = CARD["multimnist"]
DIGITS = PAIRS["digits"]["held_out"]
HELD = PAIRS["second_digit"]["held_out"]
CHOICE = PAIRS["pair_choice"]
PAGE = json.loads((REPO / "bench" / "results" / "page.json").read_text())
REAL = json.loads((REPO / "bench" / "results" / "realinput.json").read_text())
HEAVY = REAL["health_under_heavy_uploads"]
PAIR_PATHS = json.loads((REPO / "bench" / "results" / "pair_paths.json").read_text())
PAIR_ATLAS = json.loads((WEIGHTS / "multimnist-dimensions.json").read_text())
ATLAS_COUNTS, ATLAS_READ = PAIR_ATLAS["label_counts"], PAIR_ATLAS["rule"]


def _pct(x: float, digits: int = 1) -> str:
    return f"{100 * x:.{digits}f}%"


COUNTS_PER_DIGIT = (980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009)  # MNIST's 10,000 test digits by class

QUOTES = [
    ("docs/preprocessing.md", f"`/healthz` answers within {HEAVY['healthz_max_ms']:g} ms at worst (p50 {HEAVY['healthz_p50_ms']:g} ms"),
    ("docs/preprocessing.md", f"(an MNIST-sized image, ~{REAL['preprocess'][0]['ms']:.1f} ms)"),
    ("docs/preprocessing.md", f"at least {real_input.PHOTOS_READ:.0%} of 250 read right"),
    (
        "docs/preprocessing.md",
        f"PNG at least {real_input.PNG_READ:.0%} read right and at most {real_input.PNG_FLAGGED:.0%} flagged",
    ),
    ("docs/preprocessing.md", f"at least {real_input.NON_DIGITS_FLAGGED:.0%} flagged"),
    ("docs/preprocessing.md", f"at least {tight_crops.CROPS_READ:.0%} of each 200 read right and none blank"),
    ("README.md", f"{_pct(CARD['test']['accuracy'], 2)} on the 10,000 test digits"),
    ("README.md", f"names both digits of {_pct(PAIRS['test']['both_right'])} of MultiMNIST's test pairs"),
    ("README.md", f"{_pct(CHOICE['test_pairs']['read_right'])} as the\nservice reads a pair"),
    ("docs/model.md", f"**{_pct(CARD['test']['accuracy'], 2)} on the 10k MNIST test set**"),
    ("docs/multimnist.md", f"**{_pct(PAIRS['test']['both_right'])} of the 10,000 test pairs**"),
    ("docs/multimnist.md", f"at least one of the two in {_pct(PAIRS['test']['at_least_one_right'])}"),
    ("docs/multimnist.md", f"both digits of {_pct(CHOICE['test_pairs']['read_right'])} of the same test pairs"),
    (
        "docs/multimnist.md",
        "on the held-out pairs it names both digits of\n{:.1f}, {:.1f} and {:.1f}% (pixels, upload, canvas) against {:.1f}, {:.1f} and "
        "{:.1f}% for the two longest, and of the 10,000 test\npairs {:.1f}% against {:.1f}%".format(
            *(100 * CHOICE["held_out"][p]["pairs_read_right"] for p in ("pixels", "upload", "canvas")),
            *(100 * CHOICE["held_out"][p]["pairs_two_longest_right"] for p in ("pixels", "upload", "canvas")),
            100 * CHOICE["test_pairs"]["read_right"],
            100 * CHOICE["test_pairs"]["two_longest_right"],
        ),
    ),
    ("docs/multimnist.md", f"{_pct(PAIRS['test']['reconstruction_nearer_own_digit'])} of the redrawings are nearer their own digit"),
    ("docs/multimnist.md", f"It has seen {PAIRS['training']['pairs_seen']:,} training images"),
    (
        "docs/multimnist.md",
        "Of the 160 dimensions: " + ", ".join(f"{k} {n}" for k, n in sorted(ATLAS_COUNTS.items(), key=lambda kn: (-kn[1], kn[0]))),
    ),
    ("docs/multimnist.md", f"the first {ATLAS_READ['poses_per_digit']} of the first {ATLAS_READ['test_pairs']:,} of the 10,000 test"),
    ("docs/multimnist.md", f"A label needs the sweep monotonic for {ATLAS_READ['monotonic']:.0%} of the poses"),
    (
        "docs/multimnist.md",
        f"with this rule about {_pct(HELD['upload']['lone_called_two'])} and {_pct(HELD['canvas']['lone_called_two'])} of\n"
        f"uploaded and drawn lone digits are answered as two, and {_pct(HELD['upload']['pairs_called_one'])} and "
        f"{_pct(HELD['canvas']['pairs_called_one'])} of such pairs as one",
    ),
    (
        "docs/multimnist.md",
        f"(both named {_pct(HELD['upload']['pairs_both_named'], 0)} uploaded, {_pct(HELD['canvas']['pairs_both_named'], 0)}\n"
        f"drawn, against {_pct(HELD['pixels']['pairs_both_named'], 0)})",
    ),
    (
        "docs/multimnist.md",
        "the card's figures are: lone digits answered\nas two {:.1f}, {:.1f} and {:.1f}%, pairs answered as one {:.1f}, {:.1f} and "
        "{:.1f}%, both digits named {:.1f}, {:.1f} and {:.1f}%".format(
            *(100 * HELD[p]["lone_called_two"] for p in ("pixels", "upload", "canvas")),
            *(100 * HELD[p]["pairs_called_one"] for p in ("pixels", "upload", "canvas")),
            *(100 * HELD[p]["pairs_both_named"] for p in ("pixels", "upload", "canvas")),
        ),
    ),
    (
        "docs/multimnist.md",
        "it turns away {:.1f}% of clean\nletters and symbols, {:.1f}% of photographed ones, {:.1f}% of scribbles and {:.1f}% of noise, "
        "and {:.2f}, {:.2f} and {:.2f}% of real\ninputs".format(
            *(100 * DIGITS["turned_away"][k] for k in ("glyphs_clean", "glyphs_photo", "scribbles", "noise")),
            *(100 * DIGITS["real_turned_away"][p] for p in ("pixels", "upload", "canvas")),
        ),
    ),
    (
        "docs/multimnist.md",
        "have the two longest capsules right in {:.1f}% of them, against {:.1f}% for the digits' own ink\nand {:.1f}% through the "
        "page's canvas".format(
            *(
                100 * f["pairs_two_longest_right"]
                for f in (PAIR_PATHS["traced_pixels"], PAIR_PATHS["card_rule"]["pixels"], PAIR_PATHS["card_rule"]["canvas"])
            )
        ),
    ),
    (
        "docs/multimnist.md",
        "both named {:.1f}% uploaded and {:.1f}% drawn, against {:.1f}% and {:.1f}% for the same pairs drawn over each other".format(
            *(100 * PAIR_PATHS["apart"][p]["pairs_both_named"] for p in ("upload", "canvas")),
            *(100 * PAIR_PATHS["card_rule"][p]["pairs_both_named"] for p in ("upload", "canvas")),
        ),
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


HELD_OUT_SETS = [  # the card's held-out sets of the is_digit rule, as docs/preprocessing.md names them, in its order
    ("glyphs_clean", "letters and symbols, clean"),
    ("glyphs_photo", "letters and symbols, photographed"),
    ("scribbles", "scribbles"),
    ("blank", "blank paper (slope up to 40 levels, shadows, noise up to sigma 8)"),
    ("blank_jpeg", "the same as JPEG"),
    ("mnist", "MNIST test digits as PNG"),
    ("mnist_photo", "photographed"),
    ("mnist_tight", "tightly cropped"),
    ("mnist_8x8", "8x8 scans blown up"),
    ("mnist_lowres", "9x9 to 14x14 scans blown up"),
]


def _share(x: float) -> str:
    """A share as the tables write it: one decimal, two under 1% (0.25%), none for nothing."""
    if x == 0:
        return "0%"
    return (f"{100 * x:.2f}".rstrip("0").rstrip(".") if x < 0.01 else f"{100 * x:.1f}") + "%"


def test_the_is_digit_table_is_the_cards_held_out_figures():
    """docs/preprocessing.md's table, row by row, from the card's is_digit.calibration.held_out for the served INT8 file."""
    calibration = CARD["is_digit"]["calibration"]
    sets = calibration["held_out"]["capsnet-int8.onnx"]["sets"]
    text = (REPO / "docs" / "preprocessing.md").read_text()
    rows = []
    for key, name in HELD_OUT_SETS:
        s = sets[key]
        right = _share(s["read_right"]) if "read_right" in s else ""
        rows.append(f"| {name} | {s['n']:,} | {_share(s['blank'])} | {_share(s['flagged'])} | {right} |")
    assert "\n".join(rows) in text, "\n".join(rows)
    prose = " ".join(text.split())
    auc = calibration["held_out"]["capsnet-int8.onnx"]["auc"]
    assert f"The score's ROC AUC, real digits against everything that is not one: {auc:.3f}" in prose
    assert f"Its threshold turns away {_share(calibration['train_flagged'])} of the training digits" in prose


def _prose(doc: str) -> str:
    return " ".join((REPO / doc).read_text().split())


def test_the_model_docs_quote_the_cards_training_test_and_int8_figures():
    prose = _prose("docs/model.md")
    history = [h["test_accuracy"] for h in CARD["training"]["history"]]
    epochs = ", ".join(f"{100 * a:.2f}" for a in history[:-1]) + f", **{100 * history[-1]:.2f}**"
    assert f"Test accuracy by epoch, trained weights: {epochs}" in prose
    training = CARD["training"]
    steps = [h["seconds_per_step"] for h in training["history"]]
    hours, minutes = divmod(round(training["train_seconds"] / 60), 60)
    assert (
        f"after {training['epochs']} epochs ({hours} h {minutes} min of training on 2 CPU cores at {min(steps):.2f}-{max(steps):.2f} s "
        f"a step of {training['batch_size']}" in prose
    )
    per_digit = ", ".join(f"{k} {100 * a:.2f}" for k, a in enumerate(CARD["test"]["per_class"]))
    assert f"Per digit: {per_digit}." in prose
    assert f"({CARD['test']['errors']} errors)" in prose
    worst = max(CARD["parity_max_abs_diff"].values())
    mantissa, exponent = f"{worst:.1e}".split("e")
    assert f"max abs difference <= {mantissa}e{int(exponent)} on every output" in prose
    int8 = CARD["int8"]
    rate = int8["images_per_s_batch32"]
    assert f"also makes {int8['test']['errors']} errors ({100 * int8['test']['accuracy']:.2f}%; " in prose
    fp32_right, int8_right = ([round(a * n) for a, n in zip(card["per_class"], COUNTS_PER_DIGIT)] for card in (CARD["test"], int8["test"]))
    moved = {d: i - f for d, (f, i) in enumerate(zip(fp32_right, int8_right)) if i != f}
    assert moved == {4: -1, 9: 1}, moved  # the prose: one more 4 wrong and one fewer 9 than FP32
    assert f"runs {int8['speedup_batch32']:.2f}x faster at batch 32 ({rate['int8']:,.0f} against {rate['fp32']:,.0f} images/s)" in prose
    redraws = int8["decoder"]
    parity, calls = redraws["parity"], redraws["nine_redraws_per_s"]
    worst, median = parity["recon_error_max_abs"], parity["recon_error_max_abs_median"]
    assert f"{parity['is_digit_changed']} `is_digit` verdicts changed" in prose
    assert f"`recon_errors` within {worst:.3f} (median over digits of the largest difference {median:.3f})" in prose
    assert f"every pixel within {parity['pixel_max_abs']:.3f}" in prose
    assert f"INT8 decoder, within {worst:.2f} of `decoder.onnx`'s errors" in _prose("docs/preprocessing.md")
    held = redraws["held_out_sets"].values()
    assert f"{sum(s['is_digit_changed'] for s in held)} verdicts of {sum(s['inputs'] for s in held):,};" in prose
    speed = f"nine redraws {redraws['speedup_nine_redraws']:.1f}x faster ({calls['int8']:,.0f} against {calls['fp32']:,.0f} calls"
    assert speed in prose


ROBUSTNESS_NAMES = {"none": "none (clean)", "rotate": "rotation ±{:g}°", "scale": "scale ×{:g}", "shear": "shear ±{:g}°"}


def test_the_robustness_table_is_the_cards():
    rows = []
    for r in CARD["robustness"]["accuracy"]:
        name = ROBUSTNESS_NAMES[r["transform"]].format(r["value"])
        ours, theirs = 100 * r["capsnet"], 100 * r["baseline_cnn"]
        rows.append(f"| {name} | {ours:.2f}% | {theirs:.2f}% | {ours - theirs:+.2f} |")
    assert "\n".join(rows) in (REPO / "docs" / "model.md").read_text(), "\n".join(rows)


def test_the_routing_figures_are_the_committed_graphs():
    """docs/model.md's walk through routing, re-run: the first MNIST test digit through capsnet.onnx's primary capsules
    and routing.onnx's six iterations."""
    import numpy as np
    import onnxruntime as ort

    from model.data import load_mnist
    from tests.needs import need_mnist

    x, y = load_mnist(need_mnist(), "test")
    image = (x[:1].astype(np.float32) / 255.0)[:, None]
    cpu = ["CPUExecutionProvider"]
    primary = ort.InferenceSession(str(WEIGHTS / "capsnet.onnx"), providers=cpu).run(["primary"], {"image": image})[0]
    lengths, coupling = ort.InferenceSession(str(WEIGHTS / "routing.onnx"), providers=cpu).run(
        ["lengths", "coupling"], {"primary": primary}
    )
    digit, types = int(y[0]), CARD["architecture"]["primary_channels"]
    path = ", ".join(f"{v:.2f}" + (" (served)" if i == CARD["routing"]["trained"] else "") for i, v in enumerate(lengths[0, :, digit], 1))
    maps = coupling[0, :, digit].reshape(len(lengths[0]), types, -1).mean(1)  # [iteration, position]: the mean over types

    def spread(i: int) -> str:
        return f"{maps[i - 1].min():.3f}-{maps[i - 1].max():.3f}"

    prose = _prose("docs/model.md")
    assert f"for the first MNIST test digit (a {digit}) the winner's length goes {path}" in prose
    assert f"spreads from {maps[0].mean():.3f} to {spread(2)} after iteration 2 and {spread(6)} by iteration 6" in prose


def test_the_robustness_prose_is_the_tables_arithmetic():
    gaps = [100 * (r["capsnet"] - r["baseline_cnn"]) for r in CARD["robustness"]["accuracy"]]
    baseline = 1_199_882  # pytorch/examples' MNIST CNN, as the card's robustness.models says
    assert f"{baseline:,} parameters" in CARD["robustness"]["models"]["baseline_cnn"]
    ours = CARD["parameters"]["without_decoder"]
    prose = _prose("docs/model.md")
    assert f"CapsNet is ahead under every transform, by {min(gaps):.1f} to {max(gaps):.1f} points" in prose and min(gaps) > 0
    assert f"the CapsNet has {ours / baseline:.1f}x the baseline's parameters without its decoder ({ours / 1e6:.1f}M against 1.2M)" in prose
    assert f"a {gaps[0]:.2f}-point higher clean accuracy" in prose


def test_the_grpc_docs_tables_are_the_benchmarks():
    """docs/grpc-and-tracing.md's "Measured": both tables row by row, and the ranges the prose reads off them, from
    bench/results/grpc.json."""
    grpc = json.loads((REPO / "bench" / "results" / "grpc.json").read_text())
    text = (REPO / "docs" / "grpc-and-tracing.md").read_text()
    prose = " ".join(text.split())
    rows = grpc["transports"]["rows"]
    by = {(r["transport"].split(" (")[0] + (" JSON" if "JSON" in r["transport"] else ""), r["concurrency"]): r for r in rows}
    levels = sorted({r["concurrency"] for r in rows})
    table = []
    for c in levels:
        g, b, j = by["gRPC", c], by["REST /v2", c], by["REST /v2 JSON", c]
        table.append(
            f"| {c} | {g['throughput_rps']:.0f} | {b['throughput_rps']:.0f} | {j['throughput_rps']:.0f} | "
            f"{g['p50_ms']:.1f} / {g['p99_ms']:.1f} | {b['p50_ms']:.1f} / {b['p99_ms']:.1f} |"
        )
    assert "\n".join(table) in text, "\n".join(table)
    ratios = [by["gRPC", c]["throughput_rps"] / by["REST /v2", c]["throughput_rps"] for c in levels]
    cpu = [r["server_cpu_ms_per_request"] for r in rows]
    assert f"gRPC serves {min(ratios):.2f}-{max(ratios):.2f} times REST's rate here" in prose
    assert f"The server's CPU a request is about the same on both ({min(cpu):.1f}-{max(cpu):.1f} ms" in prose
    traced = grpc["tracing"]["rows"]
    added = []
    for c in sorted({r["concurrency"] for r in traced}):
        pairs = [
            (next(r for r in traced if r["round"] == k and r["concurrency"] == c and r["tracing"] == "off"),
             next(r for r in traced if r["round"] == k and r["concurrency"] == c and r["tracing"] == "on"))
            for k in range(1, grpc["tracing"]["rounds"] + 1)
        ]  # fmt: skip
        rates = ", ".join(f"{on['throughput_rps'] / off['throughput_rps']:.2f}" for off, on in pairs)
        cpus = ", ".join(f"{off['server_cpu_ms_per_request']:.2f} -> {on['server_cpu_ms_per_request']:.2f}" for off, on in pairs)
        assert f"| {c} | {rates} | {cpus} |" in text
        added += [on["server_cpu_ms_per_request"] - off["server_cpu_ms_per_request"] for off, on in pairs]
    assert f"a traced request costs {min(added):.1f}-{max(added):.1f} ms more" in prose


def test_the_page_decoder_comparison_is_the_benchmarks_notes():
    """docs/page-decoder.md's reasons for typed arrays are the side-by-side in BENCHMARKS.md's notes, as measured there."""
    notes = " ".join((REPO / "bench" / "results" / "NOTES.md").read_text().split())
    prose = _prose("docs/page-decoder.md")
    runtime = int(re.search(r"\| ([\d,]+) \(runtime\)", notes).group(1).replace(",", ""))
    assert f"onnxruntime-web's WebAssembly runtime is {runtime / 1e6:.1f} MB before the model" in prose
    one = re.search(r"\| one picture \| ([\d.-]+) ms \| ([\d.-]+) ms \|", notes)
    assert f"a picture in {one.group(2)} ms against {one.group(1)} ms" in prose
    grid = re.search(r"\| Figure 4's 176 pictures \| about (\d+) ms", notes).group(1)
    assert f"Figure 4's 176 pictures take about {grid} ms here" in prose
    server = next(d for d in PAGE["drags"] if d["where"] == "server" and d["rtt_ms"] == 200)
    assert f"at a 200 ms round trip a drag showed {round(server['pictures_per_s_during_drag'])} pictures a second" in prose


def test_what_a_remote_engine_moves_is_the_graphs_outputs():
    """docs/scale-out.md's bytes an image over the wire, from the card's output shapes (float32)."""
    outputs, kb = CARD["outputs"], 4 / 1000

    def size(name: str) -> float:
        return math.prod(d for d in outputs[name] if isinstance(d, int)) * kb

    base = size("lengths") + size("poses") + size("reconstruction")
    extra = size("coupling") + size("primary")
    redrawings = (CARD["architecture"]["num_classes"] - 1) * size("reconstruction")
    prose = _prose("docs/scale-out.md")
    assert f"lengths, poses and the reconstruction, {base:.1f} KB an image, and `coupling` and `primary` ({extra:.0f} KB" in prose
    assert f"the nine redrawings from the remote `decoder` ({redrawings:.0f} KB)" in prose
    assert f"moves about {base + redrawings:.0f} KB an image instead of {base + extra + redrawings:.0f} KB" in prose


def test_the_multimnist_training_record_is_the_cards():
    """docs/multimnist.md's account of training: where each epoch ran and how fast, and the test pairs' figure by images
    seen, each read from the card's history."""
    history = PAIRS["training"]["history"]
    gpu = [h for h in history if h.get("device", "").startswith("NVIDIA")]
    cpu = [h for h in history if h not in gpu]
    before = {h["epoch"]: h["pairs_seen"] for h in history}
    gpu_pairs, cpu_pairs = (sum(h["pairs_seen"] - before.get(h["epoch"] - 1, 0) for h in runs) for runs in (gpu, cpu))
    gpu_seconds = sum(h["seconds"] for h in gpu)
    cpu_steps = [h["seconds_per_step"] for h in cpu]
    prose = _prose("docs/multimnist.md")
    assert f"{cpu_pairs:,} of them in {len(cpu)} epochs on 2 CPU cores" in prose
    assert f"{min(cpu_steps):.1f}-{max(cpu_steps):.1f} s a step of 128 pairs" in prose
    assert f"the rest in {len(gpu)} epochs on one {gpu[0]['device']} ({gpu_pairs:,} pairs in {gpu_seconds / 60:.1f} minutes" in prose
    assert f"{gpu_pairs / gpu_seconds:,.0f} pairs a second" in prose
    assert f"against {128 / max(cpu_steps):.0f} to {128 / min(cpu_steps):.0f} a second on the 2 cores" in prose
    fewest, most = (gpu_pairs / gpu_seconds) / (128 / min(cpu_steps)), (gpu_pairs / gpu_seconds) / (128 / max(cpu_steps))
    assert f"at about {round(fewest, -2):.0f} to {round(most, -2):.0f} times the pairs a second of the 2 cores" in prose
    scored = r"Both right on 3,000 test pairs by epoch \(2,000 for the first three\), the trained weights: (.*?): still gaining"
    by_images = re.search(scored, prose).group(1)
    quoted = re.findall(r"([\d.]+)% after ([\d,.]+)(M?)", re.sub(r"\(.*?\)", "", by_images))
    assert len(quoted) >= 8
    for share, seen, millions in quoted:
        images = round(float(seen) * 1e6) if millions else int(seen.replace(",", ""))
        epoch = min(history, key=lambda h: abs(h["pairs_seen"] - images))
        assert abs(epoch["pairs_seen"] - images) <= (50_000 if millions else 0), (seen, epoch["pairs_seen"])
        assert f"{100 * epoch['test']['both_right']:.1f}" == share, (share, seen, epoch["test"])


def test_the_gpu_runs_account_is_the_cards_history():
    """docs/training.md's account of the runs on a GPU: where each began and ended, read from the history."""
    history = PAIRS["training"]["history"]
    on_gpu = [i for i, h in enumerate(history) if h.get("device", "").startswith("NVIDIA")]
    start = history[on_gpu[0] - 1]  # the export it went on from: its averaged weights were the ones exported
    restarts = [i for i in on_gpu[1:] if history[i]["lr"] > history[i - 1]["lr"]]  # a run resumed at a higher rate
    first_end, last = history[restarts[0] - 1], history[on_gpu[-1]]
    prose = _prose("docs/training.md")
    assert (
        f"took the test pairs' figure (3,000 pairs) from {100 * start['ema_test']['both_right']:.1f}% to "
        f"{100 * first_end['test']['both_right']:.1f}% over {round((first_end['pairs_seen'] - start['pairs_seen']) / 1e6)}M pairs"
    ) in prose
    assert f"took it to {100 * last['test']['both_right']:.1f}% ({_pct(PAIRS['test']['both_right'])} on the 10,000" in prose


def test_the_gpu_runs_speeds_are_the_cards_history():
    """docs/training.md's step times and epoch times on the GPU, by batch size and pen-drawn share, from the history."""
    from statistics import median

    runs: dict[tuple[int, float], list[dict]] = {}
    for h in PAIRS["training"]["history"]:
        if h.get("device", "").startswith("NVIDIA"):
            runs.setdefault((h["batch_size"], h.get("drawn_share", 0)), []).append(h)
    plain, drawn, large = runs[(256, 0)], runs[(256, 0.2)], runs[(1024, 0.2)]
    prose = _prose("docs/training.md")
    assert f"{1000 * median(h['seconds_per_step'] for h in plain):.0f} ms a step once warm" in prose
    assert f"its scoring in about {median(h['seconds'] for h in plain):.0f} s" in prose
    drawn_s, large_s = median(h["seconds"] for h in drawn), median(h["seconds"] for h in large)
    large_step = median(h["seconds_per_step"] for h in large)
    assert f"`--drawn-share 0.2`: {drawn_s:.1f} s an epoch" in prose
    assert f"ran at {1000 * large_step:.0f} ms a step ({round(1024 / large_step, -2):,.0f} pairs a second)" in prose
    assert f"its scoring in {large_s:.1f} s against the run before's {drawn_s:.1f} s" in prose
    trained = sum(h["seconds"] for h in large) / 60
    assert f"got {len(large)} epochs, {trained:.1f} minutes of training" in prose
    assert f"the rate then at {large[-1]['lr']:.1e}".replace("e-05", "e-5") in prose


def test_the_is_digit_auc_is_the_benchmarks():
    """docs/preprocessing.md's ROC AUC of the rule's score, and of the winning capsule's length alone, from make bench."""
    signals = json.loads((REPO / "bench" / "results" / "honesty.json").read_text())["signals"]
    prose = _prose("docs/preprocessing.md")
    assert f"real digits against everything that is not one: {signals['rule_score']['auc_digits_vs']['all_non_digits']:.3f}" in prose
    assert f"the winning capsule's length alone: {signals['winner_length']['auc_digits_vs']['all_non_digits']:.3f}" in prose


def test_the_font_families_are_the_splits():
    """docs/preprocessing.md's count of font families in each split of the is_digit sets, as they are installed."""
    from model import honesty_sets as hs

    families = {s: {hs._family(p) for p in hs.fonts_for(s)} for s in hs.SPLITS}
    if not families["held_out"]:
        missing("fonts", "the fonts of requirements/fonts.txt are not installed")
    prose = _prose("docs/preprocessing.md")
    assert f"letters and symbols of {len(families['calibration'])} font families" in prose
    assert f"{len(families['held_out'])} font families it never saw" in prose


def test_the_two_roads_are_the_benchmarks():
    """docs/multimnist.md's two roads to the paper's figure, from bench/results/training_routes.json."""
    routes = json.loads((REPO / "bench" / "results" / "training_routes.json").read_text())["routes"]
    paper, light = routes["paper"]["curve"][-1], routes["separable-16"]["curve"][-1]
    prose = _prose("docs/multimnist.md")
    assert (
        f"right on {100 * paper['both_right']:.1f}% of 1,000 test pairs after {paper['cpu_minutes']:.1f} CPU minutes and "
        f"{paper['pairs_seen']:,} pairs"
    ) in prose
    assert f"{100 * light['both_right']:.1f}% after {light['cpu_minutes']:.1f} CPU minutes and {light['pairs_seen']:,} pairs" in prose
    assert f"sees {light['pairs_seen'] / paper['pairs_seen']:.1f} times the pairs" in prose
    assert all(
        p["both_right"] > max(q["both_right"] for q in routes["separable-16"]["curve"] if q["cpu_minutes"] <= p["cpu_minutes"])
        for p in routes["paper"]["curve"]
    ), "the paper's network reads more right at every CPU minute"


def test_the_processes_default_is_the_benchmarks():
    """docs/scale-out.md's one process against two, from bench/results/processes.json."""
    runs = json.loads((REPO / "bench" / "results" / "processes.json").read_text())["processes"]
    rate = {(n, r["clients"]): r["requests_per_s"] for n, rows in runs.items() for r in rows}
    cpu = {(n, r["clients"]): r["cpu_ms_per_request"] for n, rows in runs.items() for r in rows}
    assert (
        f"{rate['1', 16]:.0f} against {rate['2', 16]:.0f} requests/s at 16 clients, {rate['1', 1]:.0f} against "
        f"{rate['2', 1]:.0f} at 1 client, {cpu['1', 16]:.1f} against {cpu['2', 16]:.1f} ms of CPU a request at 16 clients"
    ) in _prose("docs/scale-out.md")


def test_the_pages_drawing_cost_over_a_small_upload_is_the_benchmarks():
    """docs/performance.md: the page's canvas (JSON, source canvas) and a 280x280 drawing uploaded as a file, each
    against a 28x28 PNG upload, the front's CPU (the process less the model, whose work is the same for each)."""
    rows = json.loads((REPO / "bench" / "results" / "front.json").read_text())["service"]
    small, page = rows["/predict, 28x28 PNG (multipart)"], rows["/predict, the page's canvas (JSON, source canvas)"]
    upload = rows["/predict, 280x280 PNG (multipart)"]
    assert (
        f"was {page['front_ms']:.1f} ms for the page's drawing, {upload['front_ms']:.1f} ms for the same drawing uploaded as a "
        f"280x280 PNG file and {small['front_ms']:.1f} ms for a 28x28 upload"
    ) in _prose("docs/performance.md")


@pytest.mark.parametrize("part", ["pairs", "pair_paths"])
def test_the_two_digit_benchmarks_quoted_are_of_the_committed_network(part: str) -> None:
    """The docs quote these parts' figures as the served network's: measured on another, they are another's."""
    measured = json.loads((REPO / "bench" / "results" / f"{part}.json").read_text())["model"]
    assert measured == PAIRS["version"], f"bench/results/{part}.json measured {measured}: run `python -m bench --only {part}`"
