"""SpecViz engine: speculative decoding with a step-by-step trace recorder.

The public names are loaded lazily, so `engine.formats.trace`, `engine.config` and
`engine.metrics` (pure Python) can be imported by the UI without pulling in torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "SpecConfig": "engine.config",
    "ConfigError": "engine.config",
    "Trace": "engine.formats.trace",
    "TraceFormatError": "engine.formats.trace",
    "StepRecord": "engine.records",
    "load_pair": "engine.loading.models",
    "ModelPair": "engine.decode.pair",
    "ModelLoadError": "engine.presets",
    "PRESETS": "engine.presets",
    "SpeculativeEngine": "engine.decode.speculative",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'engine' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
