"""scripts/draft_acceptance.py on the tiny random pair: each draft dtype's row holds the counts its own engine runs
give (recounted here run by run), the saved JSON says what ran where, and a draft dtype it does not know is refused
in one sentence."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from benchmarks.prompts import PROMPTS
from engine import SpecConfig, SpeculativeEngine, load_pair

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "draft_acceptance.py"
TOKENS, K = 8, 3


def recount(draft_dtype: str, temperature: float, seeds: list[int]) -> tuple[int, int]:
    engine = SpeculativeEngine(load_pair("tiny-random", draft_dtype=draft_dtype, target_dtype="float32"))
    summaries = [engine.generate(prompt, SpecConfig(k=K, temperature=temperature, max_new_tokens=TOKENS,
                                                    seed=seed)).summary
                 for seed in seeds for prompt in PROMPTS.values()]
    return sum(summary.accepted for summary in summaries), sum(summary.drafted for summary in summaries)


def test_each_row_is_its_engine_runs_counted(tmp_path):
    out = tmp_path / "acceptance.json"
    result = subprocess.run([sys.executable, str(SCRIPT), "--preset", "tiny-random", "--drafts", "float32,int8",
                             "--target-dtype", "float32", "--k", str(K), "--tokens", str(TOKENS), "--seeds", "2",
                             "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    saved = json.loads(out.read_text())
    assert saved["preset"] == "tiny-random" and saved["cpu"]["cores"] >= 1 and "draft_acceptance.py" in saved["command"]
    assert [row["draft_dtype"] for row in saved["rows"]] == ["float32", "int8"]
    for row in saved["rows"]:
        greedy, sampled = row["temperatures"]
        assert (greedy["temperature"], greedy["seeds"], sampled["temperature"], sampled["seeds"]) == (0.0, [0], 0.7, [0, 1])
        for measured in (greedy, sampled):
            counts = recount(row["draft_dtype"], measured["temperature"], measured["seeds"])
            assert (measured["accepted"], measured["drafted"]) == counts
            assert measured["acceptance"] == round(counts[0] / counts[1], 4)
        assert f"{row['draft_dtype']} draft, float32 target, T = 0.7: {sampled['acceptance']:.1%} accepted" in result.stdout


def test_an_unknown_draft_dtype_is_refused_in_one_sentence():
    result = subprocess.run([sys.executable, str(SCRIPT), "--drafts", "int3"], cwd=ROOT, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip().splitlines()[-1].endswith("--drafts takes draft dtypes from auto, float32, bfloat16, "
                                                           "float16, int8, int4, got 'int3'")
