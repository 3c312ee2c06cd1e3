"""service/settings.py, the one home of every knob, and the README's configuration table cannot part ways."""

from __future__ import annotations

import re

from service.settings import Settings
from tests.conftest import REPO


def test_the_readme_names_every_setting_and_no_other() -> None:
    readme = (REPO / "README.md").read_text()
    table = readme[readme.index("## Configuration") : readme.index("## More")]
    named = set(re.findall(r"`(CAPSNET_[A-Z0-9_]+)`", table))
    fields = {f"CAPSNET_{name.upper()}" for name in Settings.model_fields}
    assert fields - named == set(), "settings the README's configuration table does not name"
    assert named - fields == set(), "variables the README names that no setting reads"
