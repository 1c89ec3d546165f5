"""A preset's models as folders another engine can load (a vLLM server: scripts/vllm.sh, bench.py's
vLLM rows). Embedded GGUF presets are converted on first use into SpecViz's cache
(engine/loading/gguf_cache.py), whose folders are ordinary Hugging Face model directories; a Hub
preset gives its Hub ids (the other engine then needs the network or a filled Hugging Face cache).
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from engine.loading.gguf_cache import cache_root, converted_embedded
from engine.loading.weights import EMBEDDED_PREFIX, embedded_spec
from engine.presets import get_preset


def _to_stderr(message: str) -> None:
    print(message, file=sys.stderr)


def model_folder(reference: str | None, report: Callable[[str], None] = _to_stderr) -> str:
    """The folder (or Hub id) that holds `reference`, a preset's target or draft; "" for none (an
    n-gram preset's draft). Conversion progress goes to `report`."""
    if reference is None:
        return ""
    if reference.startswith(EMBEDDED_PREFIX):
        return str(converted_embedded(embedded_spec(reference), cache_root(), report))
    return reference


def preset_folders(preset: str, report: Callable[[str], None] = _to_stderr) -> tuple[str, str]:
    """(target, draft) of a preset as `model_folder` gives them; raises ModelLoadError for an unknown preset."""
    chosen = get_preset(preset)
    return model_folder(chosen.target, report), model_folder(chosen.draft, report)
