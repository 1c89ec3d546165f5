"""bench.py on tiny-random: every default row runs, both references divide every row, greedy rows
are checked against the stock target-only output, and the figure draws the headline rows with
their theory ceilings; the GPU suite's rows run on a CPU with random weights at small shapes (the
graphs replayed by their eager stand-in), with the device's costs in the JSON. (Speed itself is
only ever claimed by bench.py's own run, never asserted.)"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import bench
from engine.cli.machine import machine_record
from benchmarks.configurations import (BF16_TARGET, CONFIGURATIONS, INT4_BF16_TARGET, INT4_DERIVED, GPU_ASSISTED_SAME_K, REFERENCE_BF16_TARGET, GPU_REFERENCE_EAGER, GPU_REFERENCE_GRAPHS,
                                       REFERENCE_SAME_KERNELS, REFERENCE_STOCK, SUITES, selected)
from benchmarks.figure import speedup_svg
from benchmarks.table import closing_note

HALF = 0.0005           # half the last digit of a ratio rounded to 3 decimals


def test_the_default_run_measures_both_references_and_quotes_both_speedups(tmp_path, capsys):
    out, figure = tmp_path / "results.json", tmp_path / "speedup.svg"
    assert bench.main(["--quick", "--no-startup", "--max-new-tokens", "6", "--temperatures", "0,0.7",
                       "--out", str(out), "--figure", str(figure)]) == 0
    results = json.loads(out.read_text())
    rows = {(r["name"], r["temperature"]): r for r in results["rows"]}
    for temperature in (0.0, 0.7):
        assert rows[(REFERENCE_STOCK, temperature)]["speedup"] == 1.0
        assert rows[(REFERENCE_SAME_KERNELS, temperature)]["vs_same_kernels"] == 1.0
        best = rows[(SUITES["cpu"].best.format(k=5), temperature)]
        assert best["speedup"] and best["vs_same_kernels"] and best["vs_assisted"]
        # speedup / vs_same_kernels is the same-kernels reference's own speedup, up to the three ratios' rounding to
        # 3 decimals (benchmarks/table.py): at most HALF / b + a HALF / b^2 + HALF, for a / b, to first order.
        a, b = best["speedup"], best["vs_same_kernels"]
        rounding = HALF / b + a * HALF / b ** 2 + HALF
        assert abs(a / b - rows[(REFERENCE_SAME_KERNELS, temperature)]["speedup"]) <= rounding * 1.01
    assert all(r["identical"] is True for r in results["rows"] if r["temperature"] == 0)   # lossless greedy, every row
    assert results["cpu"]["flags"] == machine_record()["flags"] and len(results["cpu"]["load_average_after"]) == 3
    assert results["command"].endswith("--quick --no-startup --max-new-tokens 6 --temperatures 0,0.7 --out " + str(out)
                                       + " --figure " + str(figure)) and results["commit"]
    printed = capsys.readouterr().out
    assert "vs stock fp32 target-only" in printed and "vs target-only on the same kernels" in printed
    assert closing_note(results) in printed and f"{SUITES['cpu'].best.format(k=5)}: greedy: " in printed
    # where time goes (issue #40 item 4): every timed row's parts add up to its wall time per token, each part
    # measured inside the run the wall time was kept from; each printed
    timed = [r for r in results["rows"] if r["phases_ms_per_token"]]
    assert {r["name"] for r in timed} >= {REFERENCE_STOCK, REFERENCE_SAME_KERNELS, SUITES["cpu"].best.format(k=5)}
    for r in timed:
        parts = r["phases_ms_per_token"]
        per_token = 1000 * r["wall_s"] / r["tokens"]           # wall_s is saved to 2 decimals, each part to 3
        assert abs(sum(parts.values()) - per_token) <= 1000 * 0.005 / r["tokens"] + 0.0005 * len(parts)
        assert all(ms > 0 for ms in parts.values()), parts
        assert f"Where time goes, {r['name']}, T = {r['temperature']:g}: " in printed
    best_parts = rows[(SUITES["cpu"].best.format(k=5), 0.0)]["phases_ms_per_token"]
    assert list(best_parts) == ["draft", "verify", "accept_cut_emit", "outside_steps"]
    assert list(rows[(REFERENCE_STOCK, 0.0)]["phases_ms_per_token"]) == ["prefill", "decode"]
    assert rows[("transformers assisted (stock fp32 pair), k=5", 0.0)]["phases_ms_per_token"] is None
    svg = figure.read_text()
    headline = [r for r in results["rows"] if r["headline"]]
    with_theory = [r for r in headline if r["theoretical_speedup"]]           # the references have none
    assert svg.count("<rect") == 1 + 2 + len(headline) and svg.count("<title>theory") == len(with_theory) > 0


def test_the_default_selection_is_small_and_the_grid_holds_everything():
    default = selected(grid=False, only=[], k=5)
    assert [c.name for c in default[:2]] == [REFERENCE_STOCK, REFERENCE_SAME_KERNELS]
    assert len(default) < len(CONFIGURATIONS) == len(selected(grid=True, only=[], k=5))
    narrowed = selected(grid=True, only=["n-gram"], k=5)
    assert [c.name for c in narrowed][2:] == ["SpecViz, n-gram drafter"]
    # where the CPU computes bfloat16 natively the bfloat16 target's rows join the default run, its own
    # target-only reference first (its greedy rows are compared with it), then the int8 and the int4 draft on it
    native = selected(grid=False, only=[], k=5, native_bf16=True)
    added = [c.name for c in native if c not in default]
    assert added == [REFERENCE_BF16_TARGET, BF16_TARGET + ", k={k}", INT4_BF16_TARGET + ", k={k}"]
    assert [c.pair for c in native if c not in default] == ["bf16-target", "bf16-target", INT4_DERIVED]


def test_the_bfloat16_rows_run_only_where_the_cpu_computes_bfloat16_natively(monkeypatch):
    """bench.py asks the CPU (engine/runtime/cpu/native_bf16.py), never for tiny-random or a GPU run."""
    import engine.runtime.cpu.native_bf16 as native_bf16
    for refusal, expected in ((None, True), ("no native bfloat16 here", False)):
        monkeypatch.setattr(native_bf16, "native_bf16_refusal", lambda refusal=refusal: refusal)
        assert bench._native_bf16(SUITES["cpu"], "qwen-coder") is expected
        assert bench._native_bf16(SUITES["cpu"], "tiny-random") is False
        assert bench._native_bf16(SUITES["cuda"], "qwen-coder") is False


def test_the_figure_marks_a_missing_theory_without_a_tick():
    results = {"preset": "p", "max_new_tokens": 8, "prompts": {"a": "b"},
               "rows": [{"name": "x", "temperature": 0.0, "headline": True, "speedup": 2.0, "theoretical_speedup": None}]}
    svg = speedup_svg(results)
    assert "2.00x" in svg and "<title>theory" not in svg


def test_the_gpu_suite_runs_its_rows_and_records_the_device_costs(tmp_path, capsys):
    out = tmp_path / "results.json"
    assert bench.main(["--suite", "cuda", "--device", "cpu", "--random-weights", str(tmp_path), "--quick",
                       "--max-new-tokens", "6", "--temperatures", "0", "--out", str(out)]) == 0
    results = json.loads(out.read_text())
    rows = {r["name"]: r for r in results["rows"]}
    assert results["device"] == "cuda" and results["random_weights"] is True
    assert rows[GPU_REFERENCE_EAGER]["speedup"] == 1.0 and rows[GPU_REFERENCE_GRAPHS]["vs_same_kernels"] == 1.0
    best = rows[SUITES["cuda"].best.format(k=5)]
    assert best["vs_assisted"] and rows[GPU_ASSISTED_SAME_K.format(k=5)]["tokens_per_s"] > 0
    costs = results["device_costs"]
    assert costs["cache"] == "static" and set(costs["verify_cost"]) == {str(k) for k in range(1, 9)}
    printed = capsys.readouterr().out
    assert "vs eager target-only" in printed and "random weights" in printed


def test_random_weights_outside_the_cuda_suite_is_refused_with_a_sentence(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        bench.parse(["--random-weights", str(tmp_path)])
    assert exit_info.value.code == 2 and "--random-weights stands in for the preset's weights" in capsys.readouterr().err
    assert bench.parse(["--suite", "cuda", "--random-weights", str(tmp_path)]).random_weights == str(tmp_path)


def test_tokens_per_step_is_one_definition_for_specviz_and_vllm_rows():
    """τ in the table is vLLM's mean_acceptance_length for every row: 1 + accepted / the steps that
    verified drafts (a step that drafted nothing, an n-gram miss, is left out; the budget's cut is
    not counted as tokens), so SpecViz's rows and vLLM's compare like with like. Oracle: hand counts,
    and a real n-gram run's own summary."""
    from benchmarks.rows import Row
    from benchmarks.table import tokens_per_step
    from engine.config import NGRAM_DRAFTER, SpecConfig
    from engine.decode.speculative import SpeculativeEngine
    from engine.loading.tiny import build_tiny_pair
    assert tokens_per_step(Row("r", 0.0, tokens=12, accepted=7, steps=5, verify_steps=3)) == round(1 + 7 / 3, 3)
    assert tokens_per_step(Row("target-only", 0.0, tokens=6, steps=6)) == 1.0
    trace = SpeculativeEngine(build_tiny_pair(seed=0)).generate(
        "aaaa bbbb aaaa bbbb aaaa", SpecConfig(k=4, max_new_tokens=24, drafter=NGRAM_DRAFTER))
    summary = trace.summary
    assert summary.verify_steps < summary.steps                     # some lookups found nothing
    row = Row("n-gram", 0.0, tokens=summary.new_tokens, accepted=summary.accepted, steps=summary.steps,
              verify_steps=summary.verify_steps)
    assert tokens_per_step(row) == round(summary.mean_accepted_length, 3)


def test_a_sigterm_ends_bench_through_its_finally_blocks(tmp_path):
    """bench.py's servers are stopped in `finally` blocks; a SIGTERM must reach them (Python's default exits at once,
    which left a vLLM server running). Oracle: the child prints from its finally block, and without the handler it
    does not (planted: the same child without calling it)."""
    import signal
    import subprocess
    child = ("import sys, time; sys.path.insert(0, {root!r}); import bench\n"
             "{install}\n"
             "try:\n    print('ready', flush=True); time.sleep(120)\nfinally:\n    print('server stopped', flush=True)\n")
    root = str(Path(__file__).resolve().parent.parent)
    outputs = {}
    for install in ("bench.stop_cleanly_on_sigterm()", "pass"):
        process = subprocess.Popen([sys.executable, "-c", child.format(root=root, install=install)],
                                   stdout=subprocess.PIPE, text=True)
        assert process.stdout.readline().strip() == "ready"
        process.send_signal(signal.SIGTERM)
        outputs[install] = (process.stdout.read(), process.wait(timeout=60))
    assert outputs["bench.stop_cleanly_on_sigterm()"] == ("server stopped\n", 128 + signal.SIGTERM)
    assert outputs["pass"] == ("", -signal.SIGTERM)
