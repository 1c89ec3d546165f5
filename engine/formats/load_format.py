"""A load run (`specviz.load/1`): the same concurrency grid on a vLLM server with speculation and on
the same weights served without (engine/load/, docs/architecture.md §11). This module writes it;
engine/formats/load_reader.py reads it back strictly. Ratios (speculative / not) are computed by
readers, never stored. A run whose second server could not be measured is saved unfinished
(`unfinished_document`: the first server's record and why the second is missing) for `--resume`. Torch-free."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Sequence

LOAD_SCHEMA = "specviz.load/1"
UNFINISHED_SCHEMA = "specviz.load-unfinished/1"     # the server with speculation measured, the baseline missing
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


def unfinished_document(finished_part: dict[str, Any], missing: str) -> dict[str, Any]:
    """A document whose server without speculation could not be measured: the same fields, `servers` holding only
    the speculative server's record, `missing` the one sentence that says why (`python -m engine load --resume`)."""
    return {**finished_part, "format": UNFINISHED_SCHEMA, "servers": finished_part["servers"][:1], "missing": missing}


def save_load(document: dict[str, Any], path: str | Path) -> None:
    Path(path).write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
