"""scripts/gpu_check.py on a CPU (`--device cpu --small`, as CI runs it), so the GPU's one
prepared script never rots: it runs end to end, prints one JSON document, every check passes,
and its sections hold what docs/benchmark.md quotes from the GPU run. Its predictions can be
made again from a saved report without a device (`--predict-from`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "gpu_check.py"


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("gpu_check") / "report.json"
    result = subprocess.run([sys.executable, str(SCRIPT), "--device", "cpu", "--small", "--out", str(out)],
                            cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout) == json.loads(out.read_text())          # one JSON document on stdout
    return json.loads(out.read_text())


@pytest.mark.gpu_check
def test_every_check_passes_on_a_cpu(report):
    assert report["schema"] == "specviz.gpu_check/1" and report["environment"]["device"] == "cpu"
    assert report["checks"] and all(report["checks"].values()), report["checks"]
    float32, bfloat16 = report["identity"]
    assert float32["runs"] == float32["identical"] == 16 and bfloat16["runs"] == 16
    assert all(flip["near_tie"] for flip in bfloat16["flips"])


@pytest.mark.gpu_check
def test_the_sections_docs_quote_are_there(report):
    costs = report["costs"]["small"]
    for kind in ("eager", "graphs"):
        assert costs[kind]["target_token_ms"] > 0 and set(costs[kind]["verify_ms"]) == {str(k) for k in range(1, 9)}
    steps = report["steps"]
    assert steps["copies_per_step"] == [1, 1, 1]
    assert set(steps["median_step_ms"]) == {"draft", "verify", "engine", "total"}
    predicted = report["predicted"]["small"]
    assert predicted["model_drafter"] and predicted["ngram_edits"]
    assert set(report["goals"]) == {"engine_ms_per_step", "model_drafter_vs_cost_model"}    # no GPU goal on a CPU


@pytest.mark.gpu_check
def test_predictions_are_made_again_from_a_saved_report(report, tmp_path):
    saved = tmp_path / "saved.json"
    saved.write_text(json.dumps(report))
    result = subprocess.run([sys.executable, str(SCRIPT), "--predict-from", str(saved)], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout)["predicted"] == report["predicted"]


def test_the_gpu_report_in_the_docs_passed_its_checks():
    """docs/benchmark.md quotes docs/gpu/gpu_check-h200.json: the GPU run it records passed."""
    saved = json.loads((ROOT / "docs" / "gpu" / "gpu_check-h200.json").read_text())
    assert saved["environment"]["device"].startswith("NVIDIA") and all(saved["checks"].values())
