"""scripts/gpu_check.py on a CPU (`--device cpu --small`, as CI runs it), so the GPU's one
prepared script never rots: it runs end to end, prints one JSON document, every check passes,
and its sections hold what docs/benchmark.md quotes from the GPU run. Its predictions can be
made again from a saved report without a device (`--predict-from`). The cost model runs at three
acceptance levels: their counts are asserted; how close its tok/s comes to the measured one is a
timing, which the report states as a goal and the suite never asserts, so the suite runs each level
LEVEL_REPEATS times instead of the script's 7 (about 90 s less of a 155 s run; the counts are the
same in every repeat)."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "gpu_check.py"
LEVEL_REPEATS = 2


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("gpu_check") / "report.json"
    result = subprocess.run([sys.executable, str(SCRIPT), "--device", "cpu", "--small", "--out", str(out),
                             "--level-repeats", str(LEVEL_REPEATS)],
                            cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert json.loads(result.stdout) == json.loads(out.read_text()), result.stderr[-3000:]   # one JSON document
    return json.loads(out.read_text()) | {"returncode": result.returncode}


@pytest.mark.gpu_check
def test_every_check_passes_on_a_cpu(report):
    assert report["schema"] == "specviz.gpu_check/1" and report["environment"]["device"] == "cpu"
    assert report["checks"] and all(report["checks"].values()), report["checks"]
    assert report["returncode"] == 0
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
    assert set(report["goals"]) == {"engine_ms_per_step", "cost_model_worst_level",
                                    "cost_model_error_spread"}                          # no GPU goal on a CPU


@pytest.mark.gpu_check
def test_host_reads_counted_by_python_and_by_the_profiler(report):
    """Greedy and sampled steps each make one Python-level read (the readout's tolist), and the profiler,
    which also sees the reads made inside operators (HostReads cannot), records no other: a sampled step on a
    CPU draws by the law's cumulative sum (engine/decode/sampling.py draw), where torch.multinomial read its
    own check back (_local_scalar_dense) at every draw."""
    syncs = report["steps"]["host_syncs"]
    assert len(syncs["greedy"]) == len(syncs["sampled"]) == 3
    for step in syncs["greedy"] + syncs["sampled"]:
        assert step["python_reads"] == ["tolist"] and "memcpy_dtoh" not in step
    assert all(step["profiler_reads"] == {} for step in syncs["greedy"] + syncs["sampled"])
    assert report["checks"]["greedy_steps_read_nothing_else"]


@pytest.mark.gpu_check
def test_identity_at_the_presets_shapes(report):
    """At the --small shapes (a GPU run: the presets' real shapes), random weights: float32 target-only
    on graphs and speculative decoding on graphs equal eager target-only in every run; bfloat16's
    differences, where any, carry their first differing token, step and top-2 margin."""
    float32, bfloat16 = report["shape_identity"]
    assert (float32["dtype"], bfloat16["dtype"]) == ("float32", "bfloat16") and float32["shapes"] == "small"
    for kind in ("graphs_target_only", "speculative"):
        assert float32[kind]["runs"] == float32[kind]["identical"] == (4 if kind == "graphs_target_only" else 8)
        assert bfloat16[kind]["runs"] == float32[kind]["runs"]
    assert float32["differences"] == []
    for difference in bfloat16["differences"]:
        assert difference["token"] >= 0 and difference["step"] >= 0 and difference["margin"] >= 0
    assert report["checks"]["float32_identical_at_real_shapes"]


@pytest.mark.gpu_check
def test_the_cost_model_is_reported_at_three_acceptance_levels(report):
    """The target drafting for itself accepts everything, the pair's random draft almost nothing, the
    noisy copy of the target some: those are counts, the same on any machine, and asserted. How far the
    model's tok/s is from the measured one, and how alike that error is across the levels, are timings:
    the report states them as goals, met or not, and the suite asserts only that it states them right
    (a busy AVX2 EPYC scattered one level's repeats from -27 % to +22 %; quiet, all three ran 1-5 % below)."""
    levels = {level["level"]: level for level in report["acceptance_levels"]}
    assert list(levels) == ["self", "perturbed", "random"]
    assert levels["self"]["acceptance"] == 1.0 and levels["self"]["tokens_per_step"] == 6.0
    assert levels["random"]["acceptance"] < 0.1
    assert levels["random"]["tokens_per_step"] + 0.3 < levels["perturbed"]["tokens_per_step"] < 5.0
    for level in levels.values():
        assert level["repeats"] == len(level["errors"]) == LEVEL_REPEATS and level["engine_ms"] > 0
        assert level["error"] == statistics.median(level["errors"])
        assert level["predicted_tok_s"] > 0 and level["measured_tok_s"] > 0
    errors = [level["error"] for level in levels.values()]
    worst, spread = report["goals"]["cost_model_worst_level"], report["goals"]["cost_model_error_spread"]
    assert worst["measured"] == max(abs(error) for error in errors) and worst["met"] == (worst["measured"] <= 0.10)
    assert spread["measured"] == max(errors) - min(errors) and spread["met"] == (spread["measured"] <= 0.10)
    assert not any("cost_model" in name for name in report["checks"])       # a timing never decides the verdict


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


def test_the_cost_models_step_and_speed_are_its_formula():
    """DeviceCosts.step_ms and tokens_per_s, the model gpu_check compares with runs, against the
    formula worked by hand: k draft tokens + the verify of k + 1 + the engine's work; E(a, k)."""
    from engine.device_costs import DeviceCosts
    costs = DeviceCosts(device="cpu", cache="static", graphs=False, target_token_ms=2.0, draft_token_ms=0.5,
                        verify_ms=((1, 2.2), (5, 3.0)))
    assert costs.step_ms(5, engine_ms=0.4) == pytest.approx(5 * 0.5 + 3.0 + 0.4)
    assert costs.step_ms(0) == 2.0                                       # nothing drafted: one target token
    assert costs.tokens_per_s(1.0, [5], 0.4) == pytest.approx(1000 * 6 / 5.9)
    assert costs.tokens_per_s(0.0, [5, 1], 0.4) == pytest.approx(1000 * 2 / (5.9 + 0.5 + 2.2 + 0.4))
    assert costs.tokens_per_s(0.5, [1]) == pytest.approx(1000 * 1.5 / 2.7)


def test_a_level_repeat_count_below_one_is_refused_in_one_sentence():
    result = subprocess.run([sys.executable, str(SCRIPT), "--device", "cpu", "--small", "--level-repeats", "0"],
                            cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip().endswith("error: --level-repeats must be 1 or more, got 0")
