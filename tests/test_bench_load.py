"""bench.py --load (benchmarks/load_rows.py) on real vLLM servers of the tiny random pair, started and stopped by the
sweep one after the other: the saved document reads back through the strict load reader, every summary row is that
document's own numbers (the whole server's tokens/s with and without speculation, their ratio, the batch cost
model's), the row the Explore view draws is the same, and the printed rows say it."""

from __future__ import annotations

import pytest

from benchmarks.load_rows import load_lines, run_load
from engine.config import SpecConfig
from engine.formats.load_reader import read_load
from engine.load.batch_model import document_model
from engine.load.sweep import Served
from specviz.figures.load import LoadRun, ratio_figure

pytestmark = pytest.mark.vllm
LEVELS = [1, 2]


def test_bench_load_saves_the_sweep_and_its_rows_are_the_documents_numbers(tmp_path):
    from vllm_session import require_vllm, save_tiny_pair
    require_vllm()
    save_tiny_pair(tmp_path)
    out = tmp_path / "bench.load.json"
    printed: list[str] = []
    summary = run_load(Served(str(tmp_path / "target"), str(tmp_path / "draft"), "draft_model", 3, "float32", True),
                       LEVELS, SpecConfig(temperature=0.0, max_new_tokens=6), out, {"cpu_model": "test", "cores": 2},
                       {"command": "bench.py --load", "commit": ""}, printed.append)
    document = read_load(out)
    assert summary["file"] == "bench.load.json" and [row["n"] for row in summary["rows"]] == LEVELS
    spec, plain = document["servers"]
    model = document_model(document)
    assert model is not None and summary["model"] is True
    for row, with_level, without_level in zip(summary["rows"], spec["levels"], plain["levels"]):
        assert row["with_tokens_per_s"] == with_level["aggregate_tokens_per_s"]
        assert row["without_tokens_per_s"] == without_level["aggregate_tokens_per_s"]
        assert row["ratio"] == pytest.approx(with_level["aggregate_tokens_per_s"]
                                             / without_level["aggregate_tokens_per_s"])
        assert row["predicted_ratio"] == model.at(row["n"]).ratio
    drawn = [trace for trace in ratio_figure(LoadRun.of(document)).to_dict()["data"]
             if trace.get("meta") == "ratio.aggregate"][0]["y"]
    assert drawn == pytest.approx([row["ratio"] for row in summary["rows"]])
    measured = next((row["n"] for row in summary["rows"] if row["ratio"] < 1), None)
    assert summary["crossover"] == measured
    assert summary["predicted_crossover"] == (model.crossover().n if model.crossover() else None)
    lines = load_lines(summary)
    for row in summary["rows"]:
        assert f"| {row['n']} | {row['with_tokens_per_s']:.1f} | {row['without_tokens_per_s']:.1f} | " \
               f"{row['ratio']:.2f}x | {row['predicted_ratio']:.2f}x |" in lines
    assert any(line.startswith("forward probe  1 tok:") for line in printed)
    assert document["servers"][0]["threads"] == document["servers"][1]["threads"] == 2
