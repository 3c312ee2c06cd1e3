"""`python -m bench`: each part's JSON says which run it is from, and results kept elsewhere leave the project's
BENCHMARKS.md alone."""

from __future__ import annotations

import json

from bench.__main__ import ROOT, main


def test_a_run_into_another_folder_stamps_its_parts_and_writes_its_report_there(tmp_path):
    project_report = (ROOT / "BENCHMARKS.md").read_bytes()
    main(["--only", "roofline", "--results", str(tmp_path), "--seconds", "0.1"])
    run = json.loads((tmp_path / "roofline.json").read_text())["run"]
    assert run["when"] == json.loads((tmp_path / "system.json").read_text())["when"]
    assert f"| roofline | {run['cpu']} | {run['when']} |" in (tmp_path / "BENCHMARKS.md").read_text()
    assert (ROOT / "BENCHMARKS.md").read_bytes() == project_report
