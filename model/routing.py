"""The routing trace: dynamic routing unrolled past the trained 3 iterations, every step kept, as weights/routing.onnx.

Why a graph of its own: the served graph keeps only the last iteration's coupling. routing.onnx takes the 1152 primary
capsules that capsnet.onnx (and its INT8 twin) output as `primary`, and holds only W (1152 x 8 x 160) and the routing
arithmetic (DigitCaps.route, the same code that trained), so the convolutions run once per request, and the trace's
iteration 3 is the served prediction to float precision whichever precision serves (INT8 quantises only the convolutions).

    primary [N,1152,8]
      -> u_hat = u W                            [N,10,1152,16]
      -> R iterations of routing, each kept:
         lengths   |v_j|                        [N,R,10]
         coupling  c_ij (softmax of b_ij)       [N,R,10,1152]
         agreement u_hat_j|i . v_j              [N,R,10,1152]   (what iteration r adds to b_ij for r+1)

`python -m model.routing` writes routing.onnx beside the committed weights, adds the `primary` output to capsnet.onnx and
capsnet-int8.onnx when a graph made before it lacks one (the graph's arithmetic is unchanged: a tensor it already
computes becomes an output), checks parity, and records the files and the trace in the model card. model/export.py
calls it after every export.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import warnings
from pathlib import Path

import numpy as np
import onnx
import torch
from torch import Tensor, nn

from model import FP32_FILE
from model.capsnet import CapsNet, DigitCaps, agreement
from model.cli import log_to_console

log = logging.getLogger("capsnet.routing")

FILE = "routing.onnx"
OUTPUTS = ("lengths", "coupling", "agreement")
PARITY_ATOL = 1e-4


class RoutingTrace(nn.Module):
    def __init__(self, digit: DigitCaps, iterations: int) -> None:
        super().__init__()
        self.digit = digit
        self.iterations = iterations

    def forward(self, primary: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        u_hat = self.digit.predictions(primary)  # [N,10,1152,16]
        steps = list(self.digit.route(u_hat, self.iterations))
        lengths = torch.stack([torch.sqrt((v * v).sum(-1) + 1e-12) for v, _ in steps], 1)  # [N,R,10], as CapsNet.forward
        coupling = torch.stack([c for _, c in steps], 1)  # [N,R,10,1152]
        agree = torch.stack([agreement(u_hat, v) for v, _ in steps], 1)  # [N,R,10,1152]
        return lengths, coupling, agree


def add_primary_output(path: Path) -> bool:
    """Make the primary capsules (the input of DigitCaps' first MatMul, through its Transpose) an output named `primary`;
    False when the graph has one already."""
    model = onnx.load(str(path))
    graph = model.graph
    if any(o.name == "primary" for o in graph.output):
        return False
    produced_by = {out: node for node in graph.node for out in node.output}
    matmul = next(n for n in graph.node if n.op_type == "MatMul" and "digit.W" in n.input)
    transpose = produced_by[next(i for i in matmul.input if i != "digit.W")]
    if transpose.op_type != "Transpose":
        raise ValueError(f"{path}: DigitCaps' MatMul is fed by {transpose.op_type}, not the Transpose of the primary capsules")
    graph.node.append(onnx.helper.make_node("Identity", [transpose.input[0]], ["primary"], name="primary_capsules"))
    lengths = next(o for o in graph.output if o.name == "lengths")
    batch = lengths.type.tensor_type.shape.dim[0]
    out = onnx.helper.make_tensor_value_info("primary", onnx.TensorProto.FLOAT, [None, 1152, 8])
    out.type.tensor_type.shape.dim[0].CopyFrom(batch)
    graph.output.append(out)
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return True


def export(model: CapsNet, path: Path, iterations: int) -> None:
    trace = RoutingTrace(model.digit, iterations).eval()
    batch = torch.export.Dim("batch", min=1, max=4096)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            trace,
            (torch.rand(2, model.cfg.num_primary, model.cfg.primary_dim),),
            str(path),
            dynamo=True,
            external_data=False,
            opset_version=18,
            input_names=["primary"],
            output_names=list(OUTPUTS),
            dynamic_shapes={"primary": {0: batch}},
            optimize=True,
            verbose=False,
        )


def check_parity(weights: Path, capsnet_files: list[str], trained: int) -> dict[str, float]:
    """Iteration `trained` of the trace against each served graph's lengths and coupling, on real-looking and random input."""
    import onnxruntime as ort

    trace = ort.InferenceSession(str(weights / FILE), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).random((5, 1, 28, 28), dtype=np.float32) ** 4
    worst: dict[str, float] = {}
    for name in capsnet_files:
        sess = ort.InferenceSession(str(weights / name), providers=["CPUExecutionProvider"])
        lengths, coupling, primary = sess.run(["lengths", "coupling", "primary"], {"image": x})
        t_lengths, t_coupling, _ = trace.run(list(OUTPUTS), {"primary": primary})
        diff = max(
            float(np.abs(t_lengths[:, trained - 1] - lengths).max()),
            float(np.abs(t_coupling[:, trained - 1].transpose(0, 2, 1) - coupling).max()),
        )
        worst[name] = float(f"{diff:.3g}")
        if diff > PARITY_ATOL:
            raise RuntimeError(f"{FILE} at iteration {trained} differs from {name} by {diff} (> {PARITY_ATOL})")
    return worst


def _file_entry(path: Path) -> dict:
    return {"sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "bytes": path.stat().st_size}


def run(weights: Path, iterations: int) -> dict:
    from model.onnx_weights import load_onnx_into

    card_path = weights / "model-card.json"
    card = json.loads(card_path.read_text())
    capsnet_files = [FP32_FILE] + ([card["int8"]["file"]] if (card.get("int8") or {}).get("file") else [])
    for name in capsnet_files:
        if add_primary_output(weights / name):
            log.info("%s: added the output `primary`", name)
    model = CapsNet()
    load_onnx_into(model, weights / FP32_FILE)
    export(model, weights / FILE, iterations)
    trained = int(card["architecture"]["routing_iterations"])
    parity = check_parity(weights, capsnet_files, trained)
    log.info("%s: iteration %d against the served graphs, max abs diff %s", FILE, trained, parity)
    cfg = model.cfg
    card["outputs"]["primary"] = ["N", cfg.num_primary, cfg.primary_dim]
    for name in [*capsnet_files, FILE]:
        card["files"][name] = _file_entry(weights / name)
    if "int8" in card and card["int8"].get("file") in capsnet_files:
        card["int8"]["sha256"] = card["files"][card["int8"]["file"]]["sha256"]
    card["routing"] = {
        "file": FILE,
        "iterations": iterations,
        "trained": trained,
        "inputs": {"primary": ["N", cfg.num_primary, cfg.primary_dim]},
        "outputs": {
            "lengths": ["N", iterations, cfg.num_classes],
            "coupling": ["N", iterations, cfg.num_classes, cfg.num_primary],
            "agreement": ["N", iterations, cfg.num_classes, cfg.num_primary],
        },
        "definition": "iteration r (1-based): c = softmax_j(b) with b = 0 at r = 1 (uniform coupling), v = squash(sum_i c_ij u_hat_j|i), "
        "agreement = u_hat_j|i . v_j, which b adds before iteration r + 1; the served prediction is iteration `trained`",
        "parity_max_abs_diff_at_trained": parity,
    }
    card_path.write_text(json.dumps(card, indent=1) + "\n")
    return card["routing"]


def main(argv: list[str] | None = None) -> None:
    log_to_console()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--weights", default="weights", help="directory of capsnet.onnx and the model card (default: %(default)s)")
    p.add_argument(
        "--iterations",
        type=int,
        default=6,
        help="routing iterations the trace unrolls (default: %(default)s, twice the trained 3: enough to see it settle)",
    )
    args = p.parse_args(argv)
    run(Path(args.weights), args.iterations)


if __name__ == "__main__":
    main()
