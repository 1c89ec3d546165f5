"""specviz must never import torch, directly or through engine: the page starts without it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_importing_every_specviz_module_and_building_the_page_loads_no_torch():
    modules = sorted(".".join(path.relative_to(ROOT).with_suffix("").parts)
                     for path in (ROOT / "specviz").rglob("*.py"))
    code = "\n".join([
        "import sys",
        *(f"import {name}" for name in modules),
        "sys.path.insert(0, 'tests')",
        "from fakes import FakeRunner",
        "from specviz.layout import build_demo",
        "build_demo(FakeRunner())",
        "heavy = sorted(m for m in ('torch', 'transformers', 'engine.loading.models', 'engine.decode.speculative') if m in sys.modules)",
        "assert not heavy, heavy",
        "print('ok', len(sys.modules))",
    ])
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith("ok")
    assert "specviz.layout" in modules and "specviz.figures.timeline" in modules
