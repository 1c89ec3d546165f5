"""A load run (`specviz.load/1`): the same concurrency grid on a vLLM server with speculation and on
the same weights served without (engine/load/, docs/architecture.md §11). This module writes it;
engine/formats/load_reader.py reads it back strictly. Ratios (speculative / not) are computed by
readers, never stored. Torch-free."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Sequence

LOAD_SCHEMA = "specviz.load/1"
MAX_LOAD_BYTES = 64 * 1024 * 1024       # every request's whole trace at every level rides along
METHODS = ("draft_model", "ngram")


class LoadFormatError(ValueError):
    """The data is not a valid specviz.load/1 document; the message says where."""


def load_document(pair: dict[str, Any], settings: dict[str, Any], servers: Sequence[dict[str, Any]],
                  machine: dict[str, Any], provenance: dict[str, str]) -> dict[str, Any]:
    """The document: `pair` {target, draft, method, k, dtype}, `settings` {temperature, max_tokens, levels,
    prompts}, `servers` the speculative server's record then the baseline's (engine/load/runner.py)."""
    return {"format": LOAD_SCHEMA, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "command": provenance.get("command", ""), "commit": provenance.get("commit", ""),
            "machine": machine, "pair": pair, "settings": settings, "servers": list(servers)}


def save_load(document: dict[str, Any], path: str | Path) -> None:
    Path(path).write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
