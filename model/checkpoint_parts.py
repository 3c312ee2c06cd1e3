"""A training checkpoint cut into parts small enough to carry back from a machine that returns only small files (a GPU
machine had for a fixed time), and put together again.

`python -m model.checkpoint_parts pack checkpoints/multimnist/best.pt $OUT` keeps what the export reads (the weights
the checkpoint's score was measured on, and the run's record: epochs, pairs, history, arguments), drops the
optimiser's state (two more copies of every weight) and writes `<name>.partNN` files of at most `--part-mib` MiB with a
`<name>.parts.json` manifest that holds their order and the whole's sha256. Such a machine may return only a few files
of 16 MiB; the MultiMNIST network's weights alone are 45 MB. `unpack DIR OUT.pt` checks the sha256 and writes a
checkpoint that `model.export_multimnist --checkpoint` takes, and that `--resume` continues with a fresh optimiser.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import logging
from pathlib import Path

import torch

from model.cli import log_to_console
from model.train import checkpoint_weights

log = logging.getLogger("capsnet.checkpoint_parts")

PART_MIB = 15  # under a 16 MiB limit on each file brought back
# what the model card is written from
RECORD = ("config", "args", "epoch", "history", "best_acc", "train_seconds", "pairs_seen", "started_from")


def slim(ckpt: dict) -> dict:
    """The best weights and the run's record, without the optimiser, scheduler or the other weights. The best weights
    are `model` (what a resume loads) and, when they were the average, `ema` too, the same tensors saved once: so
    `best_weights` still says which they were, and the export's card does not call an average the trained weights."""
    which, weights = ckpt.get("best_weights", "model"), checkpoint_weights(ckpt)
    record = {k: ckpt[k] for k in RECORD if k in ckpt}
    return {"model": weights, "ema": weights if which == "ema" else None, "best_weights": which, **record}


def pack(checkpoint: Path, out: Path, part_mib: float = PART_MIB) -> list[Path]:
    """Write `checkpoint`'s slim form into `out` as parts and a manifest; returns every file written."""
    buffer = io.BytesIO()
    torch.save(slim(torch.load(checkpoint, map_location="cpu", weights_only=False)), buffer)
    data, size = buffer.getvalue(), int(part_mib * 2**20)
    out.mkdir(parents=True, exist_ok=True)
    parts = []
    for k, start in enumerate(range(0, len(data), size)):
        parts.append(out / f"{checkpoint.stem}.part{k:02d}")
        parts[-1].write_bytes(data[start : start + size])
    manifest = out / f"{checkpoint.stem}.parts.json"
    manifest.write_text(json.dumps({"parts": [p.name for p in parts], "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}))
    log.info("%s -> %d parts of at most %.0f MiB (%d bytes) and %s", checkpoint, len(parts), part_mib, len(data), manifest.name)
    return [*parts, manifest]


def unpack(directory: Path, out: Path) -> Path:
    """Join the parts that `directory`'s one manifest names into `out`, refusing a missing, short or altered part."""
    manifests = sorted(directory.glob("*.parts.json"))
    if len(manifests) != 1:
        raise SystemExit(f"{directory}: expected one *.parts.json manifest, found {len(manifests)}")
    manifest = json.loads(manifests[0].read_text())
    missing = [name for name in manifest["parts"] if not (directory / name).is_file()]
    if missing:
        raise SystemExit(f"{directory}: parts missing: {', '.join(missing)}")
    data = b"".join((directory / name).read_bytes() for name in manifest["parts"])
    if len(data) != manifest["bytes"] or hashlib.sha256(data).hexdigest() != manifest["sha256"]:
        raise SystemExit(f"{directory}: the parts do not make the checkpoint the manifest describes (size or sha256 differs)")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(data)
    log.info("%d parts -> %s (%d bytes, sha256 checked)", len(manifest["parts"]), out, len(data))
    return out


def main(argv: list[str] | None = None) -> None:
    log_to_console()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    a = sub.add_parser("pack", help="checkpoint -> parts and manifest in a directory")
    a.add_argument("checkpoint", type=Path)
    a.add_argument("out", type=Path)
    a.add_argument("--part-mib", type=float, default=PART_MIB, help="largest part, MiB")
    b = sub.add_parser("unpack", help="a directory's parts -> checkpoint")
    b.add_argument("directory", type=Path)
    b.add_argument("out", type=Path)
    args = p.parse_args(argv)
    if args.command == "pack":
        pack(args.checkpoint, args.out, args.part_mib)
    else:
        unpack(args.directory, args.out)


if __name__ == "__main__":
    main()
