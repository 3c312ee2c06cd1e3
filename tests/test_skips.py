"""Nothing is skipped without a flag: every skip in the suite goes through tests/needs.py's `missing`, which names the
need and the variable that makes it a failure, and CI sets every one of those variables."""

from __future__ import annotations

import re
from pathlib import Path

from tests.needs import NEEDS

TESTS = Path(__file__).resolve().parent
SKIPS = re.compile(r"pytest\.skip\(|\.skipif\(|importorskip\(|pytest\.mark\.skip\b|pytest\.xfail\(|\.xfail\b")


def test_the_suite_skips_only_through_missing() -> None:
    elsewhere = [
        f"{path.relative_to(TESTS)}:{n}: {line.strip()}"
        for path in sorted(TESTS.rglob("*.py"))
        if path.name not in ("needs.py", "test_skips.py") and "node_modules" not in path.parts
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if SKIPS.search(line)
    ]
    assert not elsewhere, "skips that no flag can turn into failures:\n" + "\n".join(elsewhere)


def test_ci_makes_every_need_a_failure() -> None:
    ci = (TESTS.parent / ".ci" / "run").read_text()
    for need, flag in NEEDS.items():
        assert re.search(rf"^export {flag}=1\b", ci, re.M), f"{need}: .ci/run does not set {flag}=1"
