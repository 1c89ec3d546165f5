"""bench.py's bf16-target rows on tiny-random: they run beside the float32 default, their greedy
rows are checked against target-only decoding of the same target, and the JSON and the printed
note say which target dtype ran and, where float32 ran instead, why."""

from __future__ import annotations

import json

import pytest

import bench
from benchmarks.configurations import BF16_TARGET, REFERENCE_BF16_TARGET
from engine.runtime.cpu.native_bf16 import native_bf16_refusal

pytestmark = pytest.mark.cpu_arithmetic     # which dtype runs depends on the CPU


def test_the_bf16_target_rows_say_which_dtype_ran_and_against_what_they_are_identical(tmp_path, capsys):
    out = tmp_path / "results.json"
    assert bench.main(["--quick", "--grid", "--only", "bf16 target", "--no-startup", "--peer", "none",
                       "--max-new-tokens", "6", "--temperatures", "0", "--out", str(out)]) == 0
    results = json.loads(out.read_text())
    rows = {r["name"]: r for r in results["rows"]}
    reference, speculative = rows[REFERENCE_BF16_TARGET], rows[BF16_TARGET + ", k=5"]
    assert reference["identical"] is True and isinstance(speculative["identical"], bool)
    assert reference["vs_same_kernels"] and speculative["vs_same_kernels"]     # beside the float32 prepacked target
    reason = native_bf16_refusal()
    record = results["bf16_target"]
    assert record["target_dtype"] == ("bfloat16" if reason is None else "float32")
    assert record["fallback_reason"] == reason
    printed = capsys.readouterr().out
    assert bench.bf16_target_line(results) in printed and "a different claim" in printed
    if reason is not None:
        assert reason in printed


def test_a_run_with_vllms_rows_keeps_the_bf16_target_record(tmp_path, monkeypatch):
    """The peer's rows free every pair but the audit's before vLLM's servers start; the record of which target
    dtype ran is read before that (a run of 2026-11-29 lost it). The peer is a stand-in that frees the pairs as
    the real one does, isolating the order."""
    def peer_freeing_pairs(args, suite, preset, pairs, rows, table, greedy_reference):
        for key in [key for key in pairs if key != "plain"]:
            del pairs[key]
        return {"engine": "stand-in", "servers": [], "specviz_threads": 1}
    monkeypatch.setattr(bench, "_peer", peer_freeing_pairs)
    out = tmp_path / "results.json"
    assert bench.main(["--quick", "--grid", "--only", "bf16 target", "--no-startup", "--peer", "vllm",
                       "--max-new-tokens", "4", "--temperatures", "0", "--out", str(out)]) == 0
    results = json.loads(out.read_text())
    assert results["vllm"]["engine"] == "stand-in"
    assert results["bf16_target"]["target_dtype"] == ("bfloat16" if native_bf16_refusal() is None else "float32")
