"""The dimension atlases (model/atlas.py) as GET /dimensions serves them: read with each version of the weights, served
only for the model version they were measured on, and serialised and gzipped once, since they never change within a
version (58 KB of JSON each, 8-9 KB gzipped: the page fetches one per network on its first load)."""

from __future__ import annotations

import gzip
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

log = logging.getLogger("capsnet.atlas")


@dataclass(frozen=True, slots=True)
class Atlas:
    document: dict[str, Any]
    json: bytes
    gzipped: bytes

    @classmethod
    def of(cls, document: dict[str, Any]) -> Atlas:
        body = orjson.dumps(document)
        return cls(document, body, gzip.compress(body, 9, mtime=0))


def load_atlas(path: Path, version: str) -> Atlas | None:
    """The atlas at `path` (`python -m model.atlas` writes it beside the weights) when it was measured on the model of
    `version`; None otherwise (logged)."""
    try:
        document = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        log.error("%s unreadable: %s", path, e)
        return None
    if document.get("model_version") != version:
        log.warning("%s was measured on model %s, this is %s: not served", path, document.get("model_version"), version)
        return None
    return Atlas.of(document)
