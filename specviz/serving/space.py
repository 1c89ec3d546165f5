"""Running on a Hugging Face Space: how the app knows (the `SPACE_ID` variable every Space
sets) and where a Space's caches go (its persistent storage, `/data`, when it has one), so
the one-time conversion of the default weights survives a restart; whether the Space runs on
ZeroGPU (as `spaces` itself decides: the `SPACES_ZERO_GPU` variable, with the `spaces` package
installed) and how many seconds of GPU one run asks for there. Plain functions of the
environment; app.py calls them at start-up. Hosted mode's default is in specviz/serving/policy.py.
"""

from __future__ import annotations

import importlib.util
import math
import os
from pathlib import Path
from typing import Mapping, MutableMapping

from engine.config import SpecConfig

SPACE_ENV = "SPACE_ID"                 # set by Hugging Face on every Space ("owner/name")
PERSISTENT_DIR = Path("/data")         # a Space's persistent storage, when the owner has added it
CACHE_DIRS = {                         # variable -> folder under the persistent storage
    "SPECVIZ_CACHE": "specviz-cache",  # converted GGUF weights (engine/loading/gguf_cache.py)
    "HF_HOME": "huggingface",          # the Hub presets' downloads
}
ZERO_GPU_ENV = "SPACES_ZERO_GPU"       # set by Hugging Face on a ZeroGPU Space; `spaces` reads it too
_TRUE = {"1", "true", "yes", "on"}
# What one run asks ZeroGPU for (`gpu_seconds`). Allowances, not measurements: no run has been
# timed on ZeroGPU yet (docs/usage.md). SETUP covers loading the pair onto the GPU from the
# converted files, capturing its graphs and probing its costs; FORWARD is a generous allowance
# for one eager forward of the default pair's target (graphs only finish sooner). ZeroGPU charges the seconds used, not the seconds asked for; asking for
# fewer puts the visitor earlier in its queue.
GPU_SETUP_S = 30.0
GPU_FORWARD_S = 0.025


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


def on_zero_gpu(environ: Mapping[str, str] = os.environ) -> bool:
    """True on a ZeroGPU Space: `SPACES_ZERO_GPU` says yes and the `spaces` package is installed
    (spaces.GPU is then real; anywhere else it is effect-free and SpecViz does not use it)."""
    return (environ.get(ZERO_GPU_ENV, "").strip().lower() in _TRUE
            and importlib.util.find_spec("spaces") is not None)


def gpu_seconds(config: SpecConfig, with_baseline: bool) -> int:
    """The GPU seconds one run asks ZeroGPU for: the setup, then at worst one token per step, each
    step k draft forwards (a tree's levels are at most k) and one verify, and the target-only
    baseline's one forward a token when the run compares with it."""
    forwards = config.max_new_tokens * (config.k + 1) + (config.max_new_tokens if with_baseline else 0)
    return math.ceil(GPU_SETUP_S + forwards * GPU_FORWARD_S)
