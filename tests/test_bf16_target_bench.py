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
