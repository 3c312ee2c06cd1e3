"""BENCHMARKS.md from the JSON results: the tables the README points at."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from statistics import median


def _table(headers: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---:" for _ in headers) + "|"]
    lines += ["| " + " | ".join("" if v is None else str(v) for v in r) + " |" for r in rows]
    return "\n".join(lines)


def _in_process(model: dict | None, precision: str) -> list[dict]:
    """The in-process rows of one model file: `onnxruntime` is FP32, `onnxruntime_int8` the INT8 file."""
    return (model or {}).get("onnxruntime" if precision == "fp32" else f"onnxruntime_{precision}") or []


def _best_in_process(model: dict | None, precision: str) -> float | None:
    return max((o["images_per_s"] for o in _in_process(model, precision)), default=None)


def _ceiling_ratio(run: dict, p16: dict, cores: int) -> tuple[float, float, float]:
    """The best paired ratio any request path could reach here: each /predict costs at least the model's CPU (its
    onnxruntime ms at 16 clients) and what a GET that does nothing costs the event loop and the client (bench/service.py
    _floor); the in-process run costs its cores over its rate an image. Returns (in-process ms an image, the least a
    /predict can cost, what one costs today)."""
    in_process = median(p["in_process_images_per_s"] for p in run["paired"])
    model_ms, floor = p16["cpu"]["other_threads_ms"], run["floor"]["cpu"]
    least = model_ms + floor["event_loop_ms"] + floor["client_ms"]
    today = model_ms + p16["cpu"]["event_loop_ms"] + p16["cpu"]["client_ms"]
    return 1000.0 * cores / in_process, least, today


def _ceiling(run: dict, p16: dict, cores: int, precision: str) -> list[str]:
    per_image, least, today = _ceiling_ratio(run, p16, cores)
    model_ms, floor = p16["cpu"]["other_threads_ms"], run["floor"]["cpu"]
    return [
        f"ceiling of that ratio on {cores} cores: in-process CPU an image over the least a /predict can cost (its model CPU, "
        f"and the event loop and client CPU of `GET {run['floor']['path']}`)",
        precision,
        "",
        f"{per_image:.2f} / ({model_ms} + {floor['event_loop_ms']} + {floor['client_ms']}) = {per_image / least:.2f} "
        f"(with the /predict loop's {p16['cpu']['event_loop_ms']} ms: {per_image / today:.2f})",
    ]


def _ratios(ratios: list[float]) -> str:
    return ", ".join(f"{x:.2f}" for x in ratios) + f" (median {median(ratios):.2f})"


def _targets(model: dict, svc: dict) -> str:
    cores = svc.get("cores")
    big = [o for o in model["onnxruntime"] if o["batch"] >= 16]
    rows = [["model at batch >= 16, fraction of the GEMM roofline", "fp32", ">= 0.6", min(o["fraction_of_roofline"] for o in big)]]
    for precision, run in svc["precisions"].items():
        best = _best_in_process(model, precision)
        b1 = next(o for o in _in_process(model, precision) if o["batch"] == 1)

        def at(path: str, c: int, endpoints: dict = run["endpoints"]) -> dict:
            return next(r for r in endpoints[path] if r["concurrency"] == c)

        p16, p1, r1 = at("/predict", 16), at("/predict", 1), at("/reconstruct", 1)
        rows += [
            [
                "service at 16 clients / best in-process images/s",
                precision,
                ">= 0.6",
                f"{p16['throughput_rps']} / {best} = {p16['throughput_rps'] / best:.2f}",
            ]
        ]
        if run.get("paired"):
            ratios = [p["ratio"] for p in run["paired"]]
            rows += [
                [
                    "the same, each service run over the mean in-process rate just before and after it",
                    precision,
                    ">= 0.6",
                    _ratios(ratios),
                ]
            ]
        if run.get("paired") and "v2" in run["paired"][0]:
            rows += [
                [
                    "the same for /v2 with binary tensors, which does no image work",
                    precision,
                    "",
                    _ratios([p["v2"]["ratio"] for p in run["paired"]]),
                ],
                [
                    "`/predict` at 16 clients over the model in process on one thread (what a batch under load runs on)",
                    precision,
                    "",
                    ", ".join(f"{p['ratio_one_thread']:.2f}" for p in run["paired"]),
                ],
            ]
        if run.get("paired") and run.get("floor") and cores:
            rows += [_ceiling(run, p16, cores, precision)]
        rows += [
            [
                "`/predict` p50 at concurrency 1 minus the model's batch-1 latency",
                precision,
                "<= 3 ms",
                f"{p1['p50_ms']} - {b1['latency_ms']} = {p1['p50_ms'] - b1['latency_ms']:.2f} ms",
            ],
            ["`/reconstruct` p50 at concurrency 1", precision, "<= 3 ms", f"{r1['p50_ms']} ms"],
        ]
    return _table(["target", "model", "bar", "measured"], rows)


def _runs(results_dir: Path) -> str:
    """Which run each part's figures are from: its machine and time, as `python -m bench` stamped it."""
    rows = []
    for p in sorted(results_dir.glob("*.json")):
        data = json.loads(p.read_text())
        if p.stem == "system" or "skipped" in data:
            continue
        run = data.get("run")
        rows.append([p.stem, run["cpu"] if run else "not stamped", run["when"] if run else ""])
    return _table(["part", "machine", "run at"], rows) if rows else ""


def render(results_dir: Path) -> str:
    def load(name: str) -> dict | None:
        p = results_dir / f"{name}.json"
        return json.loads(p.read_text()) if p.exists() else None

    parts = [
        "# Benchmarks",
        "",
        "Written by `make bench` (python -m bench) from `bench/results/*.json`. `--only` runs some parts and keeps the others'",
        "figures, so the parts may come from different runs (below); compare figures only within one run.",
    ]
    parts += _system(load("system"))
    runs = _runs(results_dir)
    if runs:
        parts += ["", "Each part's run (a part measured before runs were stamped: see the notes at the end):", "", runs]
    parts += _roofline(load("roofline"))
    model = load("model")
    parts += _model(model)
    parts += _profile(load("profile"))
    svc = load("service")
    parts += _service(svc, model)
    if model and svc:
        parts += ["## Targets, computed from the tables above", "", _targets(model, svc), ""]
    parts += _soak(load("soak"))
    parts += _realinput(load("realinput"))
    parts += _insight(load("insight"))
    parts += _edge(load("edge"))
    parts += _abandon(load("abandon"))
    parts += _pairs(load("pairs"))
    parts += _containers(load("containers"))
    parts += _triton(load("triton"))
    parts += _grpc(load("grpc"))
    parts += _honesty(load("honesty"))
    parts += _page(load("page"))
    parts += _pair_paths(load("pair_paths"))
    parts += _front(load("front"))
    parts += _processes(load("processes"))
    parts += _processes(load("processes-16-cores"))
    parts += _training_routes(load("training_routes"))
    notes = results_dir / "NOTES.md"
    if notes.exists():
        parts += ["", notes.read_text().strip()]
    return "\n".join(parts) + "\n"


def _grpc(data: dict | None) -> list[str]:
    """The two tables of bench/grpc.py: gRPC against REST /v2 for the same request, and tracing on against off."""
    if not data:
        return []
    out: list[str] = []
    transports = data.get("transports")
    if transports:
        rest = {r["concurrency"]: r for r in transports["rows"] if r["transport"].startswith("REST /v2 (binary")}
        out += [
            "",
            "## The Open Inference Protocol over gRPC against REST /v2",
            "",
            f"One service with both (CAPSNET_GRPC_PORT), `capsnet` at batch 1, one 28x28 image a request, lengths and poses "
            f"asked for; gRPC with raw contents, REST with the binary tensor extension and with JSON; pre-built requests "
            f"(bench/grpc.py), {transports['duration_s']} s a row, the transports alternated level by level:",
            "",
            _table(
                ["clients", "transport", "infer/s", "p50 ms", "p99 ms", "errors", "server CPU ms a request", "/ REST binary infer/s"],
                [
                    [
                        r["concurrency"],
                        r["transport"],
                        r["throughput_rps"],
                        r["p50_ms"],
                        r["p99_ms"],
                        r["errors"],
                        r["server_cpu_ms_per_request"],
                        round(r["throughput_rps"] / rest[r["concurrency"]]["throughput_rps"], 2)
                        if r["concurrency"] in rest and rest[r["concurrency"]]["throughput_rps"]
                        else "",
                    ]
                    for r in transports["rows"]
                ],
            ),
        ]
    traced = data.get("tracing")
    if traced:
        by = {(r["round"], r["concurrency"], r["tracing"]): r for r in traced["rows"]}
        out += [
            "",
            "## Tracing on against off (/predict)",
            "",
            f"Two servers, one with OpenTelemetry on ({traced['exporter']}; {traced['collector']['exports']} exports, "
            f"{traced['collector']['bytes']:,} bytes), one with it off; off then on at each client count, "
            f"{traced['rounds']} rounds of {traced['duration_s']} s a row:",
            "",
            _table(
                ["round", "clients", "tracing", "req/s", "p50 ms", "p99 ms", "errors", "server CPU ms a request", "on / off req/s"],
                [
                    [
                        r["round"],
                        r["concurrency"],
                        r["tracing"],
                        r["throughput_rps"],
                        r["p50_ms"],
                        r["p99_ms"],
                        r["errors"],
                        r["server_cpu_ms_per_request"],
                        round(r["throughput_rps"] / off["throughput_rps"], 3)
                        if r["tracing"] == "on" and (off := by.get((r["round"], r["concurrency"], "off"))) and off["throughput_rps"]
                        else "",
                    ]
                    for r in traced["rows"]
                ],
            ),
        ]
    return out


def _honesty(data: dict | None) -> list[str]:
    """bench/honesty.py: the blank and is_digit answers on what people upload, and what the rule costs a /predict."""
    if not data:
        return []
    out = [
        "",
        "## Honest answers: blank, is_digit",
        "",
        f"The held-out sets (model/honesty_sets.py: fonts, seeds and MNIST digits the rule was not fitted on) as uploads "
        f"through the service's preprocessing, engine ({data['model']['file']}) and the card's rule (bench/honesty.py). "
        f"Flagged: not answered blank and is_digit false.",
        "",
        _table(
            ["set", "kind", "n", "answered blank %", "flagged %", "read right %", "why (flagged)"],
            [
                [
                    r["set"],
                    r["kind"],
                    r["n"],
                    round(100 * r["blank"], 2),
                    round(100 * r["flagged"], 2),
                    "" if r.get("accuracy") is None else round(100 * r["accuracy"], 2),
                    ", ".join(f"{k} {v}" for k, v in r.get("why", {}).items()),
                ]
                for r in data["sets"]
            ],
        ),
    ]
    score = data.get("signals", {}).get("rule_score")
    if score:
        out += [
            "",
            "ROC AUC of the rule's score, real digits against all non-digits not answered blank: "
            f"{score['auc_digits_vs']['all_non_digits']}.",
        ]
    cost = data.get("rule_cost")
    if cost:
        out += [
            "",
            f"What the rule costs a /predict (its signals and the scorer, one input that is a digit; the answer of why is computed only "
            f"for an input turned away): "
            f"{cost['us_per_input']} us, against {cost['predict_ms']} ms for the engine's call on that input.",
        ]
    return out


def _page(data: dict | None) -> list[str]:
    """bench/page.py: the pose sliders in Chromium, the decoder in the browser against the server drawing each move."""
    if not data or "drags" not in data:
        return []
    return [
        "",
        "## The pose sliders: the decoder in the browser",
        "",
        f"Headless Chromium, a drawn 0, then slider 1 dragged across {data['positions']} positions at {data['hz']} Hz (the moves "
        "fired as a hand fires them); Chromium's network emulation adds the round trip. `browser`: the page's own decoder "
        "(static/capsule_decoder.js); `server`: the weights refused, so each move goes to /reconstruct as the page falls back.",
        "",
        _table(
            ["round trip ms", "decoder", "moves/s", "pictures/s during the drag", "last picture after the last move ms"],
            [
                [d["rtt_ms"], d["where"], d.get("moves_per_s"), d["pictures_per_s_during_drag"], d["last_picture_after_last_move_ms"]]
                for d in data["drags"]
            ],
        ),
        "",
        f"First touch of a slider to the first picture drawn in the browser (nothing cached, loopback): "
        f"{data['first_touch_to_picture_here_ms']} ms, the decoder file's {data['decoder_file_bytes']:,} bytes fetched and checked "
        f"against the card's sha256; then {data['ms_a_picture_in_the_browser']} ms a picture. The page's first load, which fetches no "
        f"weights: {data['page_first_load_bytes']:,} bytes.",
    ]


TRACED = "pixels, the digits traced with the pen"


def _pair_paths(data: dict | None) -> list[str]:
    """bench/pair_paths.py: lone digits and pairs through each path, read by the two-digit network and the card's rule."""
    if not data or "card_rule" not in data:
        return []
    rows = [
        [
            path,
            round(100 * f["lone_called_two"], 1),
            round(100 * f["lone_read_right"], 1),
            round(100 * f["pairs_called_one"], 1),
            round(100 * f["pairs_both_named"], 1),
            round(100 * f["pairs_two_longest_right"], 1),
            round(100 * f.get("pairs_read_right", f["pairs_two_longest_right"]), 1),
        ]
        for path, f in [*data["card_rule"].items(), *([(TRACED, data["traced_pixels"])] if "traced_pixels" in data else [])]
    ]
    rows += [
        [
            f"{path}, written apart",
            "",
            "",
            round(100 * f["pairs_called_one"], 1),
            round(100 * f["pairs_both_named"], 1),
            round(100 * f["pairs_two_longest_right"], 1),
            round(100 * f["pairs_read_right"], 1),
        ]
        for path, f in data.get("apart", {}).items()
    ]
    return [
        "",
        f"## Two digits as people send them ({data['model']})",
        "",
        f"{data['per_path']} lone MNIST test digits and {data['per_path']} test pairs (each digit shifted up to 4 px, as "
        "MultiMNIST makes them) through each path: JSON pixels; uploads (dark ink on white, "
        + ", ".join(data["uploads"])
        + "); the page's canvas (pen strokes traced from each digit, drawn with its round pen). Read by the committed "
        'network, the card\'s one-or-two rule and its pair choice (bench/pair_paths.py; "read right": the pair as the '
        "service reads it, whatever the rule says of one or two). The row of the digits traced with the pen: the same "
        "items made of each digit's traced strokes, composited as the test pairs are and sent as pixels, so what tracing "
        "costs without the page or "
        "the service. Written apart: the same pairs side by side, as people write two digits (their 28 px frames 0, 4 or "
        "8 px apart), uploaded as one picture and drawn on the canvas each on its own half; the service lays them over "
        "each other as MultiMNIST's pairs are (service/inputs/preprocess.fit_pair).",
        "",
        _table(
            [
                "path",
                "lone called two %",
                "lone read right %",
                "pairs called one %",
                "pairs, both named %",
                "pairs, two longest right %",
                "pairs, read right %",
            ],
            rows,
        ),
        *_digits_at_all(data.get("card_digits")),
    ]


def _digits_at_all(data: dict | None) -> list[str]:
    """The card's digits-at-all rule on the same held-out inputs and on non-digits uploaded (bench/pair_paths.py)."""
    if not data:
        return []
    rows = [[f"real inputs, {path}", "", round(100 * share, 1)] for path, share in data["real_turned_away"].items()]
    rows += [[name, data["non_digits"][name], round(100 * share, 1)] for name, share in data["turned_away"].items()]
    return [
        "",
        "The card's digits-at-all rule on the same real inputs, and on what is no digit uploaded (the `is_digit` sets' "
        "held-out letters and symbols, clean and photographed, and scribbles; uniform noise): the share answered with no "
        "digit (`not_digits`).",
        "",
        _table(["inputs", "count", "answered with no digit %"], rows),
    ]


def _system(system: dict | None) -> list[str]:
    if not (system):
        return []
    parts: list[str] = []
    v = system["versions"]
    parts += [
        "",
        f"The latest run's machine: {system['cpu']}, {system['cores']} cores (affinity {system['affinity']}); "
        f"Python {system['python']}; "
        + ", ".join(f"{k} {x}" for k, x in v.items())
        + f"; providers {system['onnxruntime_providers']}."
        + (f" Environment: {system['env']}." if system.get("env") else ""),
        f"Run at {system.get('when', '')}.",
    ]
    return parts


def _roofline(roof: dict | None) -> list[str]:
    if not (roof):
        return []
    parts: list[str] = []
    parts += [
        "",
        "## Roofline: fp32 GEMM",
        "",
        _table(
            ["GEMM (1024^3)", "GFLOP/s"],
            [
                ["numpy (OpenBLAS)", roof["numpy_gflops"]],
                ["onnxruntime MatMul (MLAS)", roof["onnxruntime_mlas_gflops"]],
                ["**roofline used**", f"**{roof['roofline_gflops']}**"],
            ],
        ),
    ]
    return parts


def _model(model: dict | None) -> list[str]:
    if not (model):
        return []
    parts: list[str] = []
    m = model["macs_per_image"]
    parts += [
        "",
        "## Model in process",
        "",
        f"One forward pass: {model['gflop_per_image']} GFLOP ("
        + ", ".join(f"{k} {v / 1e6:.2f}M" for k, v in m.items())
        + " multiply-adds).",
        "",
        _table(
            ["batch", "onnxruntime ms/call", "images/s", "GFLOP/s", "of roofline", "PyTorch eager images/s", "PyTorch of roofline"],
            [
                [
                    o["batch"],
                    o["latency_ms"],
                    o["images_per_s"],
                    o["gflops"],
                    o["fraction_of_roofline"],
                    p["images_per_s"] if p else None,
                    p["fraction_of_roofline"] if p else None,
                ]
                for o, p in zip(model["onnxruntime"], model["pytorch_eager"] or [None] * len(model["onnxruntime"]))
            ],
        ),
        "",
        f"decoder.onnx alone at batch 1 (what a slider drag runs): {model['decoder_batch1_ms']} ms.",
    ]
    if model.get("onnxruntime_int8"):
        parts += [
            "",
            "INT8 model (convolutions quantised; fraction of the *fp32* roofline):",
            "",
            _table(
                ["batch", "ms/call", "images/s", "effective GFLOP/s", "of fp32 roofline"],
                [
                    [o["batch"], o["latency_ms"], o["images_per_s"], o["gflops"], o["fraction_of_roofline"]]
                    for o in model["onnxruntime_int8"]
                ],
            ),
        ]
    if model.get("onnxruntime_cuda"):
        parts += [
            "",
            "CUDA execution provider (IOBinding, inputs and outputs on the device):",
            "",
            _table(
                ["batch", "ms/call", "images/s", "GFLOP/s"],
                [[o["batch"], o["latency_ms"], o["images_per_s"], o["gflops"]] for o in model["onnxruntime_cuda"]],
            ),
        ]
    return parts


def _profile(prof: dict | None) -> list[str]:
    if not (prof):
        return []
    parts: list[str] = []
    parts += ["", f"## Where the time goes (onnxruntime profiler, batch {prof['batch']})"]
    for p in [prof] + ([prof["int8"]] if prof.get("int8") else []):
        parts += [
            "",
            f"`{p.get('file', 'capsnet.onnx')}`: {p['total_ms_per_run']} ms a run",
            "",
            _table(
                ["operator", "share", "ms/run", "nodes"],
                [[r["op"], f"{100 * r['share']:.1f}%", r["ms_per_run"], r["nodes"]] for r in p["by_op"] if r["share"] >= 0.001],
            ),
        ]
    return parts


def _service(svc: dict | None, model: dict | None) -> list[str]:
    if not (svc):
        return []
    parts: list[str] = []
    parts += [
        "",
        f"## Service over loopback ({svc['duration_s']} s per level, client on the same 2 cores)",
        "",
        "CPU per request: the server's event-loop thread (HTTP, multipart, image decoding and preprocessing, JSON), "
        "its other threads (onnxruntime) and the load generator; busy: the whole machine's CPU use. "
        "`/predict` throughput is also given as a fraction of the best in-process rate of the same model file.",
        "",
    ]
    for precision, run in svc["precisions"].items():
        best = _best_in_process(model, precision)
        for path, rows in run["endpoints"].items():
            ratio = path == "/predict" and best
            parts += [
                f"`POST {path}`" + (" (PNG upload)" if path == "/predict" else "") + f", `CAPSNET_PRECISION={precision}`",
                "",
                _table(
                    ["concurrency", "requests", "req/s"]
                    + (["of model"] if ratio else [])
                    + ["p50 ms", "p95 ms", "p99 ms", "errors", "loop ms/req", "onnxruntime ms/req", "client ms/req", "busy"],
                    [
                        [r["concurrency"], r["requests"], r["throughput_rps"]]
                        + ([round(r["throughput_rps"] / best, 2)] if ratio else [])
                        + [r["p50_ms"], r["p95_ms"], r["p99_ms"], r["errors"]]
                        + [r.get("cpu", {}).get(k) for k in ("event_loop_ms", "other_threads_ms", "client_ms", "machine_busy_fraction")]
                        for r in rows
                    ],
                ),
                "",
            ]
        if run.get("paired"):
            parts += _paired(run["paired"], precision)
    return parts


def _paired(paired: list[dict], precision: str) -> list[str]:
    batch = paired[0].get("in_process_batch", 32)
    parts = [
        f"`POST /predict` at 16 clients, each run between two in-process runs of the same file at batch {batch} "
        f"and divided by their mean (`CAPSNET_PRECISION={precision}`; the ratio without the drift between the tables above)",
        "",
    ]
    if "v2" not in paired[0]:  # measured before the protocol's path and the one-thread rate were
        return parts + [
            _table(
                ["round", "in-process before", "in-process after", "service req/s", "ratio", "p50 ms", "errors"],
                [
                    [k + 1, p["in_process_before"], p["in_process_after"], p["service_rps"], p["ratio"], p["p50_ms"], p["errors"]]
                    for k, p in enumerate(paired)
                ],
            ),
            "",
        ]
    keys = ("in_process_images_per_s", "one_thread_images_per_s", "service_rps", "ratio", "ratio_one_thread", "p50_ms", "errors")
    rows = [
        [k + 1, path, *(p[key] for key in keys)]
        for k, round_ in enumerate(paired)
        for path, p in (("/predict, 28x28 PNG upload", round_), ("/v2 capsnet, binary tensors", round_["v2"]))
    ]
    return parts + [
        "Beside it, in the same rounds, the Open Inference Protocol's binary path, which does no image work (no decoding, "
        "preprocessing, redrawing or answer to build); and the in-process rate on one thread, which is what the service's "
        "model has under load (a batch run while other requests are in flight takes one thread, "
        "`CAPSNET_INTRA_OP_THREADS_BUSY`, and leaves the event loop the other core).",
        "",
        _table(
            ["round", "request", "in-process images/s", "in-process, one thread", "service req/s", "ratio", "ratio to one thread"]
            + ["p50 ms", "errors"],
            rows,
        ),
        "",
    ]


def _soak(soak: dict | None) -> list[str]:
    if not (soak):
        return []
    parts: list[str] = []
    parts += [
        "## Soak",
        "",
        f"{soak['clients']} clients, {soak['duration_s']} s, each alternating a good and a malformed request: "
        f"{soak['requests']} requests, statuses {soak['statuses']}, **{soak['server_errors_5xx']} 5xx**; "
        f"server RSS {soak['rss_mb_start']} MB at start, {soak['rss_mb_end']} MB at end (max {soak['rss_mb_max']}, "
        f"growth over the second half {soak['rss_mb_growth_second_half']} MB).",
    ]
    return parts


def _realinput(real: dict | None) -> list[str]:
    if not (real):
        return []
    parts: list[str] = []
    h = real["health_under_heavy_uploads"]
    parts += [
        "",
        "## Real input",
        "",
        "Decoding and preprocessing one upload, in process (uploads over `CAPSNET_INLINE_DECODE_PIXELS`, "
        "4096 by default, run in the decode pool, off the event loop):",
        "",
        _table(["upload", "bytes", "pixels", "ms"], [[r["upload"], r["bytes"], r["pixels"], r["ms"]] for r in real["preprocess"]]),
        "",
        "The network alone against the network plus the decoder on all ten capsules (`recon_errors`, `is_digit`), as the batcher runs it:",
        "",
        _table(
            ["model", "batch", "network ms", "with counterfactuals ms", "added"],
            [
                [r["precision"], r["batch"], r["network_ms"], r["with_counterfactuals_ms"], f"{100 * r['added']:.0f}%"]
                for r in real["counterfactuals"]
            ],
        ),
        "",
        f"`/healthz` while {h['uploads']} PNGs of 4000x4000 RGBA pixels ({h['upload_bytes']} bytes each) are posted at once: "
        f"{h['healthz_probes']} probes, p50 {h['healthz_p50_ms']} ms, worst **{h['healthz_max_ms']} ms**; uploads answered "
        f"{h['statuses']} in {h['upload_ms']} ms.",
    ]
    return parts


def _insight(seen: dict | None) -> list[str]:
    if not (seen):
        return []
    parts: list[str] = []
    parts += [
        "",
        "## Routing inspector and probe",
        "",
        "The network with the `primary` output (the routing trace's input, fetched on "
        "every /predict) against without it, and the trace itself (routing.onnx, one thread) with its answer, in process:",
        "",
        _table(
            ["model", "batch", "network ms before", "network ms now", "trace ms", "answer ms"],
            [
                [
                    r["precision"],
                    r["batch"],
                    r["network_ms_before"],
                    r["network_ms_now"],
                    r.get("trace_ms", ""),
                    r.get("describe_ms", ""),
                ]
                for r in seen["in_process"]
            ],
        ),
        "",
        "The page's requests one at a time on an idle server (a drawn stroke, or the 28x28 it became; INT8 on the CPU):",
        "",
        _table(
            ["request", "p50 ms", "p95 ms", "answer bytes"],
            [[r["request"], r["p50_ms"], r["p95_ms"], r["bytes"]] for r in seen["page_requests"]],
        ),
    ]
    return parts


def _edge(edge: dict | None) -> list[str]:
    if not (edge and "rows" in edge):
        return []
    parts: list[str] = []
    parts += [
        "",
        "## The edge (HAProxy in front, deploy/edge/haproxy.cfg)",
        "",
        f"/predict (a PNG digit, multipart, the default precision) straight to the service and through the edge, "
        f"{edge['duration_s']} s a row, alternated over {edge['rounds']} rounds:",
        "",
        _table(
            ["round", "clients", "path", "req/s", "p50 ms", "p99 ms", "errors"],
            [[r["round"], r["concurrency"], r["path"], r["throughput_rps"], r["p50_ms"], r["p99_ms"], r["errors"]] for r in edge["rows"]],
        ),
    ]
    if "attack_rows" in edge:
        a = edge["attack"]
        parts += [
            "",
            f"/predict through the edge, quiet and while slow clients hold {a['connections_held']:,} connections (headers "
            "that never end, bodies trickled at 10 bytes a second; harness/attack.py, from two processes on these same "
            f"cores, a connection the server cuts opened again: {a['cut_by_the_server']:,} cut in all), alternated; the "
            f"CPU seconds each party spent in a row of {edge['duration_s']} s (two cores: at most {2 * edge['duration_s']:g}):",
            "",
            _table(
                ["round", "clients", "attack", "req/s", "p50 ms", "p99 ms", "errors", "CPU s: service", "edge", "attack"],
                [
                    [r["round"], r["concurrency"], r["attack"], r["throughput_rps"], r["p50_ms"], r["p99_ms"], r["errors"]]
                    + [r["service_cpu_s"], r["edge_cpu_s"], r["attack_cpu_s"]]
                    for r in edge["attack_rows"]
                ],
            ),
        ]
    return parts


def _abandon(gone: dict | None) -> list[str]:
    if not (gone and "dropped" in gone):
        return []
    parts: list[str] = []
    modes = (("served_to_the_end", "served to the end (CAPSNET_DROP_ABANDONED=false)"), ("dropped", "dropped (the default)"))
    storm = ", ".join(f"{n} {how.replace('_', ' ')}" for how, n in gone["storm"].items())
    parts += [
        "",
        "## Clients that vanish (bench/abandon.py)",
        "",
        f"{gone['request']}. {gone['steady_clients']} steady clients for {gone['seconds']:g} s, quiet and while 1,500 clients "
        f"send a request and vanish ({storm}); then {gone['dropped']['first_good']['vanished']} requests each sent whole and "
        "reset at once, and one ordinary request after them (the median of 5 rounds). Work for a client that has gone "
        "served to the end, and dropped:",
        "",
        _table(
            [
                "abandoned work",
                "quiet p50 ms",
                "quiet p99 ms",
                "storm p50 ms",
                "storm p99 ms",
                "storm req/s",
                "p99 storm/quiet",
                "first good request ms",
            ],
            [
                [
                    label,
                    r["quiet"]["p50_ms"],
                    r["quiet"]["p99_ms"],
                    r["storm"]["p50_ms"],
                    r["storm"]["p99_ms"],
                    r["storm"]["throughput_rps"],
                    gone["storm_p99_over_quiet"].get(key),
                    r["first_good"]["first_good_ms"],
                ]
                for key, label in modes
                for r in [gone[key]]
            ],
        ),
        "",
        "Where the dropped requests stopped (`capsnet_requests_abandoned_total`): "
        + ", ".join(
            f"{m.group(1)} {int(v)}"
            for k, v in gone["dropped"]["metrics"].items()
            if (m := re.fullmatch(r'capsnet_requests_abandoned_total\{phase="(\w+)"\}', k))
        )
        + ".",
    ]
    return parts


def _pairs(two: dict | None) -> list[str]:
    if not (two and "in_process" in two):
        return []
    parts: list[str] = []
    parts += [
        "",
        f"## Two digits at once (multimnist.onnx, {two['model']})",
        "",
        *(
            []
            if two.get("both_right") is None
            else [
                f"The committed export: both digits read right on {two['both_right']:.1%} of the test pairs."
                if two.get("committed", True)
                else f"Measured on an export that is not the committed one ({two['both_right']:.1%} of the test pairs read "
                "right). The timings depend on the architecture, not on how far it is trained.",
                "",
            ]
        ),
        "In process (onnxruntime, CPU defaults; sparse random 36x36 inputs):",
        "",
        _table(["batch", "ms a call", "images/s"], [[r["batch"], r["ms_per_call"], r["images_per_s"]] for r in two["in_process"]]),
        "",
        f"`/predict?model=multimnist`, a 144x144 PNG of two overlapping test digits (multipart), {two['duration_s']} s a row; the "
        "two-digit network is not batched (one call at a time, service/engine/two_digit.py):",
        "",
        _table(
            ["clients", "req/s", "p50 ms", "p99 ms", "errors"],
            [[r["concurrency"], r["throughput_rps"], r["p50_ms"], r["p99_ms"], r["errors"]] for r in two["service"]],
        ),
    ]
    return parts


def _containers(images: dict | None) -> list[str]:
    if not (images and "rows" in images):
        return []
    parts: list[str] = []
    parts += [
        "",
        "## Container images (the Dockerfile, built and run by tests/containers)",
        "",
        f"Engine: {images['engine']}, at {images.get('when', '')}. Cold: no layer cache (base image present); warm: nothing "
        "changed; code change: one line of service/ changed. Ready: from `run` to /readyz 200. Base images (MB; where no "
        "registry answers, stand-ins built from Debian's packages by tests/containers/setup.sh): "
        + ", ".join(f"{k} {v}" for k, v in images["base_images_mb"].items())
        + ".",
        "",
        _table(
            ["image", "size MB", "cold build s", "warm build s", "code change build s", "run to ready s"],
            [
                [r["image"], r["size_mb"], r["cold_build_s"], r["warm_build_s"], r["code_change_build_s"], r["run_to_ready_s"]]
                for r in images["rows"]
            ],
        ),
    ]
    return parts


def _triton(oip: dict | None) -> list[str]:
    if not (oip and "rows" in oip):
        return []
    parts: list[str] = []
    by = {(r["server"], r["concurrency"]): r for r in oip["rows"]}
    parts += [
        "",
        "## The Open Inference Protocol: ours against Triton's front",
        "",
        f"`capsnet`, {oip['model_file']}, one 28x28 image a request as JSON, lengths and poses back as JSON; Triton is "
        f"nvidia-pytriton's tritonserver, its Python backend running the same file in onnxruntime (harness/tritonserver.py); "
        f"{oip['duration_s']} s a row, the two alternated:",
        "",
        _table(
            ["clients", "server", "req/s", "p50 ms", "p99 ms", "errors", "server CPU ms an inference", "ours / Triton req/s"],
            [
                [
                    r["concurrency"],
                    r["server"],
                    r["throughput_rps"],
                    r["p50_ms"],
                    r["p99_ms"],
                    r["errors"],
                    r["server_cpu_ms_per_inference"],
                    round(r["throughput_rps"] / by[("triton", r["concurrency"])]["throughput_rps"], 2)
                    if r["server"] == "capsnet-serve" and by.get(("triton", r["concurrency"]), {}).get("throughput_rps")
                    else "",
                ]
                for r in oip["rows"]
            ],
        ),
    ]
    return parts


def _front(data: dict | None) -> list[str]:
    if not data:
        return []
    cols = ["requests/s", "p50 ms", "event loop ms", "front ms (the process less the model)", "model ms", "whole process ms", "errors"]

    def cells(r: dict) -> list:
        return [r["requests_per_s"], r["p50_ms"], r["event_loop_ms"], r["front_ms"], r["model_ms"], r["process_ms"], r["errors"]]

    health = data["service"]["GET /healthz"]
    rows = [[kind, *cells(r), f"{r['event_loop_ms'] / health['event_loop_ms']:.1f}x"] for kind, r in data["service"].items()]
    out = [
        "",
        "## The front's CPU a request (bench/front.py)",
        "",
        f"The service with one onnxruntime thread a session (so the model's work is on its `capsnet-infer-*` threads), "
        f"{data['clients']} keep-alive clients, {data['duration_s']:g} s a kind; CPU a request read from /proc per thread. "
        "The last column is the event loop's CPU a request over `GET /healthz`'s.",
        "",
        _table(["request", *cols, "loop over /healthz"], rows),
        "",
    ]
    if data.get("loop_profile"):
        prof = data["loop_profile"]
        rows = [[r["phase"], f"{100 * r['share']:.1f}%", r["ms_per_request"]] for r in prof["phases"]]
        out += [
            f"Where the event loop's CPU goes on `{prof['request']}` ({prof['loop_ms']} ms a request in that run), py-spy's "
            f"{prof['samples']} samples of the main thread, each put in the phase of its innermost telling frame "
            "(bench/loop_profile.py). Sending is uvicorn's write of the response's head, and on loopback that write also "
            "delivers the bytes to a client on the same cores and wakes it: sent as one write with the body, it cost the same "
            "(BENCHMARKS.md's notes).",
            "",
            _table(["phase", "share", "ms a request"], rows),
            "",
        ]
    if data.get("side_by_side"):
        out += _side_by_side(data["side_by_side"], data["peer_file"], data["clients"])
    return out


def _side_by_side(side: dict, peer_file: str, clients: int) -> list[str]:
    """Each kind the peer serves: the median round of each server, and the service over the peer round by round."""

    def ratio(a: list[dict], b: list[dict], key: str) -> str:
        r = [x[key] / y[key] for x, y in zip(a, b, strict=True) if y[key]]
        return f"{median(r):.2f} ({min(r):.2f}-{max(r):.2f})" if r else ""

    keys = ("requests_per_s", "p50_ms", "event_loop_ms", "process_ms")
    rows, ratios = [], []
    for kind, by in side["kinds"].items():
        for who in ("service", "peer"):
            runs = by[who]
            medians = [round(median([r[k] for r in runs]), 3) for k in keys]
            rows.append([kind if who == "service" else "", who, *medians, sum(r["errors"] for r in runs)])
        ratios.append([kind, *(ratio(by["service"], by["peer"], k) for k in ("event_loop_ms", "process_ms", "requests_per_s"))])
    return [
        f"Beside it, the same clients and bytes against `{peer_file}` (FastAPI + Pillow + onnxruntime in 18 lines, the INT8 "
        "file, no batching, no preprocessing: its model runs on anyio's threads, so its front is its whole process). Both "
        f"servers up together, each kind sent to one and then the other for {side['duration_s']:g} s at {clients} clients, "
        f"{side['rounds']} rounds with the order swapped each round; each column's median over the rounds:",
        "",
        _table(["request", "server", "requests/s", "p50 ms", "event loop ms", "whole process ms", "errors"], rows),
        "",
        "The service over the peer, round by round (median, and the range over the rounds): below 1 the service spends less "
        "(for requests/s, above 1 it serves more).",
        "",
        _table(["request", "event loop ms", "whole process ms", "requests/s"], ratios),
        "",
    ]


def _processes(data: dict | None) -> list[str]:
    """bench/processes.py: CAPSNET_PROCESSES=1 against 2 (and 8 on 16 cores or more), /predict beside in-process INT8."""
    if not data:
        return []
    keys = ("clients", "requests_per_s", "p50_ms", "p99_ms", "cpu_ms_per_request", "in_process_images_per_s", "ratio", "errors")
    rows = [[n, *(r[k] for k in keys)] for n, runs in data["processes"].items() for r in runs]
    return [
        f"## One process against several behind the port, {data['cores']} cores (bench/processes.py)",
        "",
        *([data["note"], ""] if data.get("note") else []),
        f"`CAPSNET_PROCESSES` worker processes on {data['cores']} cores, `/predict` with 28x28 PNG uploads, {data['duration_s']:g} s "
        f"at each client count, the servers taken in turn for {data.get('rounds', 1)} rounds (the median of them below); each "
        f"run bracketed by the INT8 file in process at batch {data['in_process_batch']} (its best), and divided by their mean. "
        "CPU a request: the supervisor and its workers together, read from /proc.",
        "",
        _table(
            ["processes", "clients", "requests/s", "p50 ms", "p99 ms", "CPU ms a request", "in process, images/s", "ratio", "errors"], rows
        ),
        "",
    ]


def _training_routes(data: dict | None) -> list[str]:
    """bench/training_routes.py's run (not a `make bench` part: an hour of CPU): the test pairs read right by CPU minutes."""
    if not data or not data.get("routes"):
        return []
    marks = sorted({m for r in data["routes"].values() for m in (5, 10, 15, 20, 25, 30) if m <= r["curve"][-1]["cpu_minutes"] + 1e-9})

    def at(curve: list[dict], minutes: float) -> str:
        done = [c for c in curve if c["cpu_minutes"] <= minutes + 1e-9]
        return f"{100 * done[-1]['both_right']:.1f}% ({done[-1]['pairs_seen']:,})" if done else ""

    def end(curve: list[dict]) -> str:
        return f"{100 * curve[-1]['both_right']:.1f}% after {curve[-1]['cpu_minutes']:.1f} ({curve[-1]['pairs_seen']:,})"

    rows = [[name, r["what"], *(at(r["curve"], m) for m in marks), end(r["curve"])] for name, r in data["routes"].items()]
    return [
        "## Two roads to MultiMNIST at equal CPU time (bench/training_routes.py)",
        "",
        f"Each route from {data['start']}, one thread, {data['cpu_minutes']:g} CPU minutes of its own process, the rate annealed "
        f"tenfold over them; both digits right on 1,000 fixed test pairs after the last epoch by that CPU minute, and the "
        f"pairs seen. Run on {data['machine']}.",
        "",
        _table(["route", "network", *(f"{m} CPU min" for m in marks), "at the end"], rows),
        "",
    ]


# ---- docs/performance.md's summary: the same results, a row a question, written between its markers ----

SUMMARY_BEGIN = "<!-- summary: written by `make bench` from bench/results (bench/report.py summary) -->"
SUMMARY_END = "<!-- end of summary -->"


def _ranged(values: list[float], digits: int = 2) -> str:
    lo, hi = min(values), max(values)
    return f"{lo:.{digits}f}" if f"{lo:.{digits}f}" == f"{hi:.{digits}f}" else f"{lo:.{digits}f}-{hi:.{digits}f}"


def _summary_service(svc: dict, model: dict) -> list[list[str]]:
    """/predict and /reconstruct beside the model alone, one column a precision."""
    runs = {p: svc["precisions"].get(p) for p in ("fp32", "int8")}

    def at(run: dict | None, path: str, c: int) -> dict | None:
        return next((r for r in run["endpoints"][path] if r["concurrency"] == c), None) if run else None

    def cells(fn: Callable[[str, dict], str]) -> list[str]:
        return [fn(p, run) if run else "" for p, run in runs.items()]

    def p1(p: str, run: dict) -> str:
        b1 = next(o for o in _in_process(model, p) if o["batch"] == 1)
        return f"p50 {at(run, '/predict', 1)['p50_ms']} ms (model alone at batch 1: {b1['latency_ms']} ms)"

    def p16(p: str, run: dict) -> str:
        r = at(run, "/predict", 16)
        paired = f", paired {_ranged([x['ratio'] for x in run['paired']])} of in-process" if run.get("paired") else ""
        return f"{r['throughput_rps']} req/s{paired}, p99 {r['p99_ms']} ms, {r['errors']} errors"

    def ceiling(p: str, run: dict) -> str:
        if not (run.get("paired") and run.get("floor") and svc.get("cores")):
            return ""
        per_image, least, _ = _ceiling_ratio(run, at(run, "/predict", 16), svc["cores"])
        return f"{per_image / least:.2f}"

    return [
        ["`/predict` PNG upload, 1 client", *cells(p1)],
        ["`/predict` PNG upload, 16 clients", *cells(p16)],
        ["the most that ratio can be here (a /predict costing its model and what `GET /healthz` costs)", *cells(ceiling)],
        ["`/reconstruct`, 1 client", *cells(lambda p, run: f"p50 {at(run, '/reconstruct', 1)['p50_ms']} ms")],
    ]


def summary(results_dir: Path) -> str:
    """The table docs/performance.md opens with, from the same JSON as BENCHMARKS.md: each figure there is a result's."""

    def load(name: str) -> dict | None:
        p = results_dir / f"{name}.json"
        return json.loads(p.read_text()) if p.exists() else None

    roof, model, svc, edge, triton, soak = (load(n) for n in ("roofline", "model", "service", "edge", "triton", "soak"))
    rows: list[list[str]] = []
    if roof:
        rows.append([f"fp32 GEMM roofline (onnxruntime MLAS, {roof['n']}^3)", f"{roof['onnxruntime_mlas_gflops']} GFLOP/s", ""])
    if model:
        batches = [o["batch"] for o in model["onnxruntime"]]

        def rates(p: str) -> str:
            return " / ".join(f"{o['images_per_s']:.0f}" for o in _in_process(model, p))

        fractions = _ranged([o["fraction_of_roofline"] for o in model["onnxruntime"]])
        rows.append(
            [
                f"model, onnxruntime, batch {' / '.join(map(str, batches))}, images/s",
                f"{rates('fp32')} ({fractions} of the roofline)",
                rates("int8"),
            ]
        )
    if svc and model:
        rows += _summary_service(svc, model)
    if edge:

        def through(c: int, path: str) -> str:
            return _ranged([r["throughput_rps"] for r in edge["rows"] if r["concurrency"] == c and r["path"] == path], 0)

        levels = sorted({r["concurrency"] for r in edge["rows"]})
        rows.append(
            [
                "the same through the edge (HAProxy), req/s",
                "",
                "; ".join(f"{c} client{'s' if c > 1 else ''}: {through(c, 'edge')} against {through(c, 'direct')} direct" for c in levels),
            ]
        )
    if triton:
        ours = {r["concurrency"]: r for r in triton["rows"] if r["server"] == "capsnet-serve"}
        theirs = {r["concurrency"]: r for r in triton["rows"] if r["server"] == "triton"}
        levels = sorted(set(ours) & set(theirs))
        rates = " / ".join(f"{ours[c]['throughput_rps']:.0f}" for c in levels)
        against = " / ".join(f"{ours[c]['throughput_rps'] / theirs[c]['throughput_rps']:.2f}x" for c in levels)
        clients = " / ".join(str(c) for c in levels)
        what = "`/v2` `capsnet` against Triton's own HTTP front on the same file, req/s"
        rows.append([what, f"{clients} clients: {rates}, {against} Triton's", ""])
    if soak:
        rows.append(
            [
                f"soak, {soak['clients']} clients, {soak['duration_s']:.0f} s, every other request malformed",
                "",
                f"{soak['requests']:,} requests, {soak['server_errors_5xx']} 5xx, "
                f"RSS {soak['rss_mb_start']:.0f} -> {soak['rss_mb_end']:.0f} MB",
            ]
        )
    lines = ["| | FP32 | INT8 (the default, `auto`) |", "|---|---|---|", *("| " + " | ".join(r) + " |" for r in rows)]
    return "\n".join([SUMMARY_BEGIN, *lines, SUMMARY_END])


def with_summary(doc: str, table: str) -> str:
    """`doc` with the text between its summary markers replaced by `table` (markers included)."""
    pattern = re.compile(re.escape(SUMMARY_BEGIN) + r".*?" + re.escape(SUMMARY_END), re.S)
    if not pattern.search(doc):
        raise ValueError("docs/performance.md has no summary markers")
    return pattern.sub(lambda _: table, doc)
