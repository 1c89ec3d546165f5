"""The Explore tab's handlers: a sweep streamed from a fake runner, Stop, bad input, upload and download,
the comparison of two runs; then a small real sweep and comparison on tiny-random through app.EngineRunner."""

from __future__ import annotations

import csv
import json
import threading
from pathlib import Path

import gradio as gr
import pytest

from app import EngineRunner
from engine.config import SpecConfig
from fakes import FakeRunner
from specviz.compare import Comparison, CompareHandlers, Side, aligned_timelines, comparison_table
from specviz.explore import ExploreHandlers, SweepControls, parse_seeds
from specviz.explore_views import ExploreViews
from specviz.policy import Policy
from specviz.runner import ModelChoice, SweepRequest
from specviz.sweep_table import SweepTable
from sweep_factory import make_sweep
from trace_factory import make_trace

NAMES = ExploreViews.names()
PROMPTS = ["def fib(n):", "Count to ten."]


def sweep_args(**changes):
    values = dict(preset="tiny-random", draft="", target="", drafter="model", ks=[1, 2, 4], temperatures=[0.0, 0.7],
                  prompts=PROMPTS[:1], seeds="0", max_new_tokens=16)
    values.update(changes)
    return [values[name] for name in SweepControls.__dataclass_fields__]


def progress(fraction, desc=None):
    """Stands in for gr.Progress outside a Gradio request."""


def run_sweep(handlers, table=None, **changes):
    return [dict(zip(NAMES, out)) for out in handlers.sweep(table, None, False, None, *sweep_args(**changes),
                                                            progress=progress)]


def test_sweep_streams_progress_and_ends_with_the_whole_table():
    runner = FakeRunner()
    updates = run_sweep(ExploreHandlers(runner, min_interval=0.0), ks=[1, 2, 4], temperatures=[0.0, 0.7],
                        prompts=PROMPTS, seeds="0, 1")
    request = runner.sweep_requests[0]
    assert request.ks == (1, 2, 4) and request.temperatures == (0.0, 0.7) and request.seeds == (0, 1)
    assert request.prompts == tuple(PROMPTS) and request.config.max_new_tokens == 16 and request.num_runs == 24
    assert "Loading tiny-random" in updates[0]["status"] and updates[0]["speedup"] == gr.update()
    running = [u for u in updates if u["status"].startswith("Sweep:")]
    assert [u["status"].split("**")[1] for u in running] == [f"{n} / 24" for n in range(1, 25)]
    assert "left" in running[0]["status"]
    final = updates[-1]
    assert final["status"].startswith("Done: 24 runs")
    table = final["table"]
    assert len(table.cells) == 6 and table.num_runs == 24
    heat = [t for t in final["speedup"].data if t.meta == "speedup"][0]
    assert sum(v is not None for row in heat.z for v in row) == 6
    assert final["temperature"]["choices"] == [("0", 0.0), ("0.7", 0.7)]


def test_stop_keeps_the_finished_runs():
    handlers = ExploreHandlers(FakeRunner(), min_interval=0.0)
    updates = []
    for out in handlers.sweep(None, None, False, None, *sweep_args(), progress=progress):
        updates.append(dict(zip(NAMES, out)))
        if updates[-1]["status"].startswith("Sweep: **2 / 6**"):
            handlers.stop()
    final = updates[-1]
    assert final["status"] == "Stopped: the 2 finished runs of 6 are kept."
    assert final["table"].num_runs == 2 and {(c.k, c.temperature) for c in final["table"].cells} == {(1, 0.0),
                                                                                                    (2, 0.0)}


def test_an_engine_failure_keeps_the_finished_cells_and_says_why():
    handlers = ExploreHandlers(FakeRunner(sweep_fail_at=3), min_interval=0.0)
    updates = []
    with pytest.raises(gr.Error, match="The sweep stopped: RuntimeError: simulated engine failure"):
        for out in handlers.sweep(None, None, False, None, *sweep_args(), progress=progress):
            updates.append(dict(zip(NAMES, out)))
    assert updates[-1]["status"] == "Stopped by an error after 3 runs." and updates[-1]["table"].num_runs == 3
    with pytest.raises(gr.Error, match="Could not start the sweep: no such model"):
        run_sweep(ExploreHandlers(FakeRunner(fail_load="no such model")))


@pytest.mark.parametrize("change, message", [
    (dict(ks=[]), "Tick at least one k"),
    (dict(temperatures=[]), "Tick at least one temperature"),
    (dict(prompts=[]), "Tick at least one prompt"),
    (dict(seeds="zero"), "Seeds must be whole numbers"),
    (dict(seeds=""), "Enter at least one seed"),
    (dict(max_new_tokens=999), "max new tokens must be from 1 to 256"),
    (dict(ks=list(range(1, 9)), temperatures=[0, 0.3, 0.7, 1.0], prompts=PROMPTS * 2, seeds="0,1,2,3"),
     "the limit is 240"),
    (dict(preset="custom", target=""), "Enter a target model"),
])
def test_bad_sweep_settings_are_one_clear_error_before_any_model_loads(change, message):
    runner = FakeRunner()
    with pytest.raises(gr.Error, match=message):
        run_sweep(ExploreHandlers(runner), **change)
    assert not runner.sweep_requests


def test_a_hosted_policy_limits_the_sweep():
    with pytest.raises(gr.Error, match="max new tokens must be a whole number from 1 to 128"):
        run_sweep(ExploreHandlers(FakeRunner(), policy=Policy.hosted_default()), max_new_tokens=200)


def test_parse_seeds():
    assert parse_seeds("0, 1 ,2;3, 1") == (0, 1, 2, 3)


def test_upload_shows_a_sweep_and_rejects_bad_files():
    handlers = ExploreHandlers(FakeRunner())
    views = dict(zip(NAMES, handlers.upload(json.dumps(make_sweep()).encode(), False, 1280)))
    assert views["status"].startswith("Showing an uploaded sweep: 24 cells") and len(views["table"].cells) == 24
    assert "tiny-random" in views["about"] and "T = 0: k = 3" in views["about"]
    for data, message in [(b"", "empty"), (b"{", "Not a SpecViz sweep: not JSON"),
                          (json.dumps({"schema": "specviz.trace/1"}).encode(), "Not a SpecViz sweep: schema"),
                          (json.dumps(make_sweep(ks=())).encode(), "holds no cells")]:
        with pytest.raises(gr.Error, match=message):
            handlers.upload(data, False, None)


def test_uploaded_meta_is_escaped():
    document = make_sweep(prompts=["<script>alert(1)</script>"])
    document["meta"]["preset"] = "<b>x</b>"
    views = dict(zip(NAMES, ExploreHandlers(FakeRunner()).upload(json.dumps(document).encode(), False, None)))
    assert "<script>" not in views["about"] and "&lt;script&gt;" in views["about"] and "&lt;b&gt;" in views["about"]


def test_download_writes_json_and_csv():
    handlers = ExploreHandlers(FakeRunner())
    with pytest.raises(gr.Error, match="no sweep to download"):
        handlers.download(None)
    table = SweepTable.from_dict(make_sweep())
    paths = [Path(p) for p in handlers.download(table)]
    assert [p.name for p in paths] == ["specviz-sweep.json", "specviz-sweep.csv"]
    assert SweepTable.load(paths[0]).cells == table.cells
    assert len(list(csv.DictReader(paths[1].open(encoding="utf-8")))) == len(table.cells)


def test_select_temperature_redraws_theory_and_positions():
    table = SweepTable.from_dict(make_sweep())
    theory, positions = ExploreHandlers(FakeRunner()).select_temperature(table, 0.7, False, None)
    assert theory.layout.title.subtitle.text.startswith("T = 0.7") and positions.data


# --- comparison -----------------------------------------------------------------------------------

def compare_args(**changes):
    values = dict(preset="tiny-random", draft="", target="", prompt="def fib(n):", max_new_tokens=32, seed=0,
                  k_a=5, temperature_a=0.0, drafter_a="model", k_b=5, temperature_b=0.0, drafter_b="ngram")
    values.update(changes)
    return list(values.values())


def test_compare_runs_a_then_b_and_tables_their_metrics():
    runner = FakeRunner(accepted=(4, 2, 0, 4))
    outputs = list(CompareHandlers(runner).compare(False, 1280, *compare_args()))
    assert [o[1] for o in outputs] == ["Running A (k = 5, greedy, draft model)…",
                                       "Running B (k = 5, greedy, n-gram)…", "Done: A and B side by side."]
    assert [r.config.drafter for r in runner.requests] == ["model", "ngram"]
    comparison, _, timeline_a, timeline_b, table = outputs[-1]
    assert set(comparison.traces) == {"A", "B"}
    assert timeline_a.layout.xaxis.range == timeline_b.layout.xaxis.range
    assert "A: k = 5" in timeline_a.layout.title.text and "n-gram" in timeline_b.layout.title.text
    assert "acceptance rate" in table and "target forwards" in table and "tokens / s" in table


def test_comparison_table_and_alignment():
    short, long = make_trace([4, 4]), make_trace([1, 0, 2, 1, 0, 3, 1, 0, 2, 1])
    comparison = Comparison({"A": Side(4, 0.0, "model"), "B": Side(4, 0.0, "ngram")}, {"A": short, "B": long})
    figures = aligned_timelines(comparison)
    assert list(figures["A"].layout.xaxis.range) == list(figures["B"].layout.xaxis.range) == [-0.5, 9.5]
    table = comparison_table(comparison)
    assert "outputs differ from token" in table and "5.00× (worse)" in table       # forwards: 2 vs 10
    same = comparison_table(Comparison(comparison.sides, {"A": short, "B": short}))
    assert "identical output" in same and "same" in same


def test_compare_presets_and_bad_input():
    handlers = CompareHandlers(FakeRunner())
    assert handlers.preset("draft model vs n-gram") == (5, 0.0, "model", 5, 0.0, "ngram")
    with pytest.raises(gr.Error, match="The prompt is empty"):
        list(handlers.compare(False, None, *compare_args(prompt="  ")))
    with pytest.raises(gr.Error, match="k must be a whole number from 1 to 8 on this hosted server"):
        list(CompareHandlers(FakeRunner(), policy=Policy.hosted_default()).compare(False, None,
                                                                                    *compare_args(k_b=12)))
    with pytest.raises(gr.Error, match="Could not run A: no such model"):
        list(CompareHandlers(FakeRunner(fail_load="no such model")).compare(False, None, *compare_args()))


def test_compare_stop_keeps_a():
    handlers = CompareHandlers(FakeRunner(delay=0.05))
    outputs = []
    for out in handlers.compare(False, None, *compare_args()):
        outputs.append(out)
        if out[1].startswith("Running B"):
            threading.Timer(0.1, handlers.stop).start()
    comparison = outputs[-1][0]
    assert outputs[-1][1].startswith("Stopped") and comparison.traces["A"].complete
    assert "B" not in comparison.traces or not comparison.traces["B"].complete


# --- the real engine, tiny-random ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def engine_runner():
    return EngineRunner(device="cpu")


def test_a_small_tiny_random_sweep_gives_a_complete_table_and_figures(engine_runner):
    request = SweepRequest(ModelChoice(preset="tiny-random"), ("def fib(n):",), (1, 3), (0.0, 0.7), (0,),
                           SpecConfig(max_new_tokens=12))
    updates = list(engine_runner.sweep(request, lambda fraction, message: None))
    assert [u.done for u in updates] == [1, 2, 3, 4] and updates[-1].total == 4
    table = SweepTable.from_dict(updates[-1].document)
    assert {(c.k, c.temperature) for c in table.cells} == {(1, 0.0), (3, 0.0), (1, 0.7), (3, 0.7)}
    assert table.meta["target"] == "tiny-random/target" and len(table.document["runs"]) == 4
    assert all(run["identical"] for run in table.document["runs"] if run["temperature"] == 0.0)
    views = dict(zip(NAMES, ExploreHandlers(engine_runner).upload(table.to_json().encode(), False, None)))
    for name in ("acceptance", "length", "speedup"):
        heat = [t for t in views[name].data if t.meta == name][0]
        assert sum(v is not None for row in heat.z for v in row) == 4
    assert [t.meta for t in views["theory"].data if str(t.meta).startswith("model")] == ["model.length",
                                                                                         "model.speedup"]


def test_the_sweep_handler_on_tiny_random(engine_runner):
    updates = run_sweep(ExploreHandlers(engine_runner, min_interval=0.0), ks=[1, 2], temperatures=[0.0],
                        max_new_tokens=8)
    assert updates[-1]["status"].startswith("Done: 2 runs") and len(updates[-1]["table"].cells) == 2


def test_draft_model_vs_ngram_on_tiny_random(engine_runner):
    outputs = list(CompareHandlers(engine_runner).compare(False, None, *compare_args(max_new_tokens=24)))
    comparison, status, timeline_a, timeline_b, table = outputs[-1]
    assert status == "Done: A and B side by side."
    a, b = comparison.traces["A"], comparison.traces["B"]
    assert a.config.drafter == "model" and b.config.drafter == "ngram" and b.config.draft == "ngram"
    assert a.output.token_ids == b.output.token_ids                   # greedy float32: both are target-only
    assert "identical output" in table
    assert any(t.meta == "accepted" for t in timeline_a.data) and timeline_b.data
