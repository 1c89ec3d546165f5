"""The torch line (docs/architecture.md): engine/'s top-level modules, the document formats
(engine/formats/) and the kernel-name table are the torch-free core that the UI imports;
engine/decode/, engine/loading/ and engine/runtime/'s device folders are where torch lives. Each
core module must import with torch and transformers made unimportable, in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BLOCK = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('torch', 'transformers', 'gradio', 'plotly'):
            raise ImportError(f'{name} is blocked: the torch-free core must not import it')
sys.meta_path.insert(0, Block())
"""


def core_modules() -> list[str]:
    top = [f"engine.{path.stem}" for path in (ROOT / "engine").glob("*.py") if path.stem != "__main__"]
    formats = [f"engine.formats.{path.stem}" for path in (ROOT / "engine" / "formats").glob("*.py")]
    vllm = [f"engine.vllm.{path.stem}" for path in (ROOT / "engine" / "vllm").glob("*.py")]   # §10: the UI imports it
    return sorted(top + formats + vllm + ["engine.runtime", "engine.runtime.kernel_names"])


def import_with_torch_blocked(modules: list[str]) -> subprocess.CompletedProcess:
    code = BLOCK + "\n".join(f"import {name}" for name in modules) + "\nprint('ok')"
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_every_core_engine_module_imports_without_torch_transformers_gradio_or_plotly():
    modules = core_modules()
    assert {"engine.config", "engine.records", "engine.formats.trace", "engine.formats.sweep_reader",
            "engine.metrics", "engine.presets", "engine.lab", "engine.runtime.kernel_names",
            "engine.vllm.source", "engine.vllm.server"} <= set(modules)
    result = import_with_torch_blocked(modules)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]


def test_the_block_catches_a_module_that_imports_torch():
    """The check itself: the decode loop imports torch, so it must fail under the same block."""
    result = import_with_torch_blocked(["engine.decode.generation"])
    assert result.returncode != 0 and "torch is blocked" in result.stderr
