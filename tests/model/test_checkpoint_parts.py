"""A checkpoint cut into parts under a 16 MiB limit on each file comes back whole, slim, and checked."""

from __future__ import annotations

import pytest
import torch

from model.capsnet import CapsNet
from model.checkpoint_parts import main, pack, unpack
from model.multimnist import CONFIG
from model.train import checkpoint_weights


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A MultiMNIST checkpoint as training writes it: weights, their average (the better one), optimiser, record."""
    torch.manual_seed(0)
    model, average = CapsNet(CONFIG), CapsNet(CONFIG)
    opt = torch.optim.Adam(model.parameters())
    path = tmp_path_factory.mktemp("ckpt") / "best.pt"
    record = {"epoch": 7, "pairs_seen": 420_000, "history": [{"epoch": 7, "lr": 4e-4}], "best_acc": 0.9, "train_seconds": 60.0}
    ckpt = {"model": model.state_dict(), "ema": average.state_dict(), "optimizer": opt.state_dict(), "scheduler": {}, **record}
    torch.save({**ckpt, "best_weights": "ema", "config": CONFIG.as_dict(), "args": {"lr": 1e-3}}, path)
    return path


def test_parts_stay_under_the_limit_and_join_into_the_best_weights_and_the_record(checkpoint, tmp_path) -> None:
    files = pack(checkpoint, tmp_path / "out", part_mib=8)
    parts = [f for f in files if ".part" in f.suffix]
    assert len(parts) >= 5 and all(p.stat().st_size <= 8 * 2**20 for p in parts), "a 45 MB network in parts of 8 MiB"
    whole = torch.load(unpack(tmp_path / "out", tmp_path / "joined.pt"), weights_only=False)
    original = torch.load(checkpoint, weights_only=False)
    weights = checkpoint_weights(whole)
    assert all(torch.equal(weights[k], original["ema"][k]) for k in original["ema"]), "the weights the score was measured on"
    assert "optimizer" not in whole and whole["best_weights"] == "ema", "the card says the average was exported"
    assert all(torch.equal(whole["model"][k], weights[k]) for k in weights), "a resume loads the same best weights"
    assert {k: whole[k] for k in ("epoch", "pairs_seen", "history", "best_acc", "args")} == {
        k: original[k] for k in ("epoch", "pairs_seen", "history", "best_acc", "args")
    }


def test_a_missing_or_altered_part_is_refused(checkpoint, tmp_path) -> None:
    main(["pack", str(checkpoint), str(tmp_path / "out"), "--part-mib", "15"])
    part = tmp_path / "out" / "best.part01"
    data = bytearray(part.read_bytes())
    data[100] ^= 1
    part.write_bytes(bytes(data))
    with pytest.raises(SystemExit, match="sha256"):
        main(["unpack", str(tmp_path / "out"), str(tmp_path / "joined.pt")])
    part.unlink()
    with pytest.raises(SystemExit, match="missing: best.part01"):
        unpack(tmp_path / "out", tmp_path / "joined.pt")
    assert not (tmp_path / "joined.pt").exists()
