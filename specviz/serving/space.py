"""Running on a Hugging Face Space: how the app knows (the `SPACE_ID` variable every Space
sets) and where a Space's caches go (its persistent storage, `/data`, when it has one), so
the one-time conversion of the default weights survives a restart. Plain functions of the
environment; app.py calls them at start-up. Hosted mode's default is in specviz/serving/policy.py.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping, MutableMapping

SPACE_ENV = "SPACE_ID"                 # set by Hugging Face on every Space ("owner/name")
PERSISTENT_DIR = Path("/data")         # a Space's persistent storage, when the owner has added it
CACHE_DIRS = {                         # variable -> folder under the persistent storage
    "SPECVIZ_CACHE": "specviz-cache",  # converted GGUF weights (engine/loading/gguf_cache.py)
    "HF_HOME": "huggingface",          # the Hub presets' downloads
}


def on_space(environ: Mapping[str, str] = os.environ) -> bool:
    return bool(environ.get(SPACE_ENV, "").strip())


def use_persistent_storage(environ: MutableMapping[str, str], data_dir: Path = PERSISTENT_DIR) -> dict[str, str]:
    """On a Space with writable persistent storage, point each cache that is not set already into it;
    the variables set (none elsewhere)."""
    if not on_space(environ) or not (data_dir.is_dir() and os.access(data_dir, os.W_OK)):
        return {}
    chosen = {name: str(data_dir / folder) for name, folder in CACHE_DIRS.items() if not environ.get(name)}
    environ.update(chosen)
    return chosen
