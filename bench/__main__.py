"""`python -m bench [--only PART ...]` (PARTS below: roofline, the model, the service, ..., the page, pairs by path):
run, write JSON, render BENCHMARKS.md and docs/performance.md's summary."""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

from bench import (
    abandon,
    containers,
    edge,
    front,
    grpc,
    honesty,
    insight,
    model,
    page,
    pair_paths,
    pairs,
    processes,
    profile,
    realinput,
    report,
    roofline,
    service,
    soak,
    system,
    triton,
)
from model import MNIST_DIR

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
PARTS = (
    "roofline",
    "model",
    "profile",
    "service",
    "edge",
    "abandon",
    "triton",
    "grpc",
    "soak",
    "realinput",
    "insight",
    "containers",
    "pairs",
    "honesty",
    "page",
    "pair_paths",
    "front",
    "processes",
)


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--only", nargs="*", choices=PARTS, default=list(PARTS))
    p.add_argument("--weights", type=Path, default=ROOT / "weights")
    p.add_argument("--results", type=Path, default=RESULTS, help="where the parts' JSON goes (BENCHMARKS.md beside it unless this default)")
    p.add_argument("--seconds", type=float, default=2.0, help="minimum timing per in-process measurement")
    p.add_argument("--load-seconds", type=float, default=8.0, help="duration of each service concurrency level")
    p.add_argument(
        "--paired-rounds",
        type=int,
        default=3,
        help="rounds of in-process then service at 16 clients, back to back, for the drift-free ratio (0: none)",
    )
    p.add_argument("--soak-seconds", type=float, default=60.0)
    p.add_argument("--no-torch", action="store_true", help="skip the PyTorch eager comparison")
    args = p.parse_args(argv)
    args.results.mkdir(parents=True, exist_ok=True)

    machine = system.describe()
    when = time.strftime("%Y-%m-%d %H:%M:%S %Z")

    def write(name: str, data: dict) -> dict:
        """A part's results, stamped with the run they came from: a later run of other parts leaves them be."""
        data = data if name == "system" else {**data, "run": {"cpu": machine["cpu"], "when": when}}
        (args.results / f"{name}.json").write_text(json.dumps(data, indent=1) + "\n")
        logging.info("%s: %s", name, json.dumps(data)[:400])
        return data

    write("system", {**machine, "when": when})
    roof_path = args.results / "roofline.json"
    if "roofline" in args.only:
        write("roofline", roofline.measure(args.seconds))
    roof = json.loads(roof_path.read_text())["roofline_gflops"] if roof_path.exists() else roofline.measure(args.seconds)["roofline_gflops"]
    if "model" in args.only:
        write("model", model.measure(args.weights, roof, args.seconds, torch_too=not args.no_torch))
    if "profile" in args.only:
        write("profile", profile.measure(args.weights))
    if "service" in args.only:
        card = json.loads((args.weights / "model-card.json").read_text())
        model_path = args.results / "model.json"
        tables = json.loads(model_path.read_text()) if model_path.exists() else {}
        best_batch = {
            p: max(rows, key=lambda r: r["images_per_s"])["batch"]
            for p, rows in (("fp32", tables.get("onnxruntime")), ("int8", tables.get("onnxruntime_int8")))
            if rows
        }
        write(
            "service",
            service.measure(
                args.load_seconds,
                precisions=("fp32", "int8") if "int8" in card else ("fp32",),
                weights=args.weights,
                paired_rounds=args.paired_rounds,
                paired_batch=best_batch,
            ),
        )
    if "edge" in args.only:
        write("edge", edge.measure(args.load_seconds))
    if "abandon" in args.only:
        write("abandon", abandon.measure(min(args.load_seconds, 5.0)))
    if "triton" in args.only:
        write("triton", triton.measure(args.load_seconds))
    if "grpc" in args.only:
        write("grpc", grpc.measure(args.load_seconds, max(args.paired_rounds, 1)))
    if "soak" in args.only:
        write("soak", soak.measure(args.soak_seconds))
    if "realinput" in args.only:
        write("realinput", realinput.measure(args.weights, args.seconds))
    if "insight" in args.only:
        write("insight", insight.measure(args.weights, args.seconds))
    if "pairs" in args.only:
        write("pairs", pairs.measure(args.weights, args.seconds, args.load_seconds))
    if "containers" in args.only:
        write("containers", containers.measure())
    if "honesty" in args.only:
        write("honesty", honesty.run("held_out", args.weights, ROOT / MNIST_DIR))
    if "pair_paths" in args.only:
        write("pair_paths", pair_paths.measure(args.weights, ROOT / MNIST_DIR))
    if "front" in args.only:
        write("front", front.measure(min(args.load_seconds, 6.0)))
    if "processes" in args.only:
        tables = json.loads((args.results / "model.json").read_text()) if (args.results / "model.json").exists() else {}
        rows = tables.get("onnxruntime_int8") or [{"batch": service.PAIRED_BATCH, "images_per_s": 0}]
        best = max(rows, key=lambda r: r["images_per_s"])["batch"]
        write("processes", processes.measure(args.weights, best, min(args.load_seconds, 6.0)))
    if "page" in args.only:
        write("page", page.measure(args.weights))
    # the project's BENCHMARKS.md renders the project's results; results kept elsewhere get theirs beside them
    out = ROOT / "BENCHMARKS.md" if args.results.resolve() == RESULTS.resolve() else args.results / "BENCHMARKS.md"
    out.write_text(report.render(args.results))
    logging.info("wrote %s", out)
    if args.results.resolve() == RESULTS.resolve():  # docs/performance.md opens with the same results, summed up
        performance = ROOT / "docs" / "performance.md"
        performance.write_text(report.with_summary(performance.read_text(), report.summary(args.results)))
        logging.info("wrote %s's summary", performance)


if __name__ == "__main__":
    main()
