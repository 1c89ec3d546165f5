"""scripts/figure_send.py runs and saves what docs/architecture.md quotes from it: a row for every bundled trace on
every screen, each redraw's figures written both ways (the milliseconds are the machine's; nothing here times them).
That both ways write the same JSON is tests/test_figure_json.py's."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from specviz.assets import ASSETS_DIR

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "figure_send.py"


def load_script():
    spec = importlib.util.spec_from_file_location("figure_send", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_script_saves_a_row_for_every_bundled_trace_and_screen(tmp_path):
    script = load_script()
    out = tmp_path / "figure-send.json"
    assert script.main(["--repeats", "1", "--out", str(out)]) == 0
    saved = json.loads(out.read_text(encoding="utf-8"))
    traces = {path.name for path in (ASSETS_DIR / "traces").glob("*.json")}
    assert {(row["trace"], row["screen"]) for row in saved["rows"]} == {(t, s) for t in traces for s in script.SCREENS}
    assert all(row["figures"] == 5 + ("lab-T" in row["trace"]) for row in saved["rows"])    # a tree run: its tree
    assert all(row["dicts_ms"] > 0 and row["validated_ms"] > 0 for row in saved["rows"])
    ratios = [row["validated_over_dicts"] for row in saved["rows"]]
    assert saved["lowest_ratio"] == min(ratios) and saved["highest_ratio"] == max(ratios)
    assert saved["machine"]["cores"] and saved["command"].endswith(f"--repeats 1 --out {out}")

