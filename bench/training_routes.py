"""Two roads to the paper's MultiMNIST figure side by side, at equal CPU time on one machine:
`python -m bench.training_routes [--cpu-minutes 30]` -> bench/results/training_routes.json.

Each route is `model.train_multimnist` from the same start (the committed MNIST network, each copying what its shapes
allow) for the same CPU time of its process (`--budget-clock cpu`, one thread: so that a machine shared with other work
gives both the same amount of it), with its rate annealed over that time, fresh pairs every step and the same
1,000 test pairs scored after every epoch of 6,400 pairs. What is compared is the test pairs read right against the
CPU minutes spent, not against the wall clock. Minutes of CPU, hence not part of `make bench`.
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
import tempfile
from pathlib import Path

from model import MNIST_DIR

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "results" / "training_routes.json"
log = logging.getLogger("bench.training_routes")

# each at its own best setting on a CPU: the paper's network under bfloat16 autocast (its convolutions' matrix work is
# what AMX speeds up); the lighter one in float32 (a per-channel 9x9 convolution ran slower under bfloat16, measured)
ROUTES = {
    "paper": {
        "what": "the paper's network: 9x9 primary convolution over 256 channels, 32 types, 3200 primary capsules",
        "args": ["--bf16"],
    },
    "separable-16": {
        "what": "a 9x9 filter per channel then a 1x1 mixing, 16 types: 1600 primary capsules; the same digit capsules, three "
        "routing iterations and decoder",
        "args": ["--primary-conv", "separable", "--primary-types", "16"],
    },
}


def run_route(name: str, extra: list[str], cpu_minutes: float, data: str, lr: float, out: Path) -> list[dict]:
    cmd = [sys.executable, "-m", "model.train_multimnist", "--data", data, "--out", str(out), "--budget-minutes", str(cpu_minutes),
           "--budget-clock", "cpu", "--lr", str(lr), "--lr-final", str(lr / 10), "--pairs-per-epoch", "6400", "--eval-pairs", "1000",
           "--threads", "1", *extra]  # fmt: skip
    # one thread: its CPU time is its own work (threads that wait for each other spin, and a busy machine makes them wait)
    log.info("%s: %s", name, " ".join(cmd))
    subprocess.run(cmd, check=True, cwd=ROOT)
    return json.loads((out / "history.json").read_text())


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cpu-minutes", type=float, default=30.0, help="CPU time of each route's process")
    p.add_argument("--lr", type=float, default=1e-3, help="Adam's rate at the start of each route, annealed tenfold")
    p.add_argument("--data", default=MNIST_DIR, help="directory holding MNIST's four IDX files")
    p.add_argument("--only", nargs="*", choices=list(ROUTES), default=list(ROUTES))
    args = p.parse_args(argv)
    from model.machine import cpu_model

    results = json.loads(OUT.read_text()) if OUT.exists() else {}
    results.update({"machine": cpu_model(), "cpu_minutes": args.cpu_minutes, "start": "weights/capsnet.onnx (the MNIST network)"})
    results.setdefault("routes", {})
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.only:
            route = ROUTES[name]
            history = run_route(name, route["args"], args.cpu_minutes, args.data, args.lr, Path(tmp) / name)
            cpu = 0.0
            curve = []
            for h in history:
                cpu += h["cpu_seconds"]
                score, averaged = h["test"]["both_right"], h["ema_test"]["both_right"]
                curve.append({"cpu_minutes": round(cpu / 60, 2), "pairs_seen": h["pairs_seen"], "both_right": round(score, 4),
                              "averaged_weights_both_right": round(averaged, 4)})  # fmt: skip
            results["routes"][name] = {"what": route["what"], "args": route["args"], "curve": curve}
            OUT.write_text(json.dumps(results, indent=1) + "\n")
            log.info("%s: %s", name, curve[-1])


if __name__ == "__main__":
    main()
