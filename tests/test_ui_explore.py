"""The Explore tab's handlers: a sweep streamed from a fake runner, Stop, bad input, upload and download,
the comparison of two runs; then a small real sweep and comparison on tiny-random through app.EngineRunner."""

from __future__ import annotations

import csv
import dataclasses
import json
import threading
from pathlib import Path

import gradio as gr
import pytest

from app import EngineRunner
from engine.cli.sweep import write_sweep
from engine.config import SpecConfig
from engine.formats.sweep_format import RunResult
from engine.formats.sweep_reader import SweepTable
from engine.formats.trace import TextTokens, Trace
from fakes import FakeRunner
from specviz.assets import ASSETS_DIR, load_recorded_sweep
from specviz.explore.compare import Comparison, CompareHandlers, CompareViews, Side, comparison_table, compare_views
from specviz.explore.handlers import ExploreHandlers, SweepControls, parse_seeds
from specviz.explore.views import ExploreViews
from specviz.figures.alignment import alignment_figure, placed_tokens
from specviz.serving.policy import Policy
from specviz.serving.runner import ModelChoice, SweepRequest
from sweep_factory import make_sweep
from trace_factory import make_trace

NAMES = ExploreViews.names()
PROMPTS = ["def fib(n):", "Count to ten."]


def sweep_args(**changes):
    values = dict(preset="tiny-random", draft="", target="", drafter="model", ks=[1, 2, 4], temperatures=[0.0, 0.7],
                  prompts=PROMPTS[:1], seeds="0", max_new_tokens=16, server="")
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
    for data, message in [(b"", "empty"), (b"{", "Not a SpecViz sweep: not valid JSON"),
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


def test_the_download_is_the_bytes_the_command_line_writes(tmp_path):
    """One format: the UI's JSON and CSV of a sweep the CLI wrote are that sweep's files, byte for byte."""
    def run(k, temperature, prompt_index, seed, alpha, positions):
        return RunResult(k=k, temperature=temperature, prompt_index=prompt_index, seed=seed, acceptance_rate=alpha,
                         mean_accepted_length=None if alpha is None else 1 + k * alpha,
                         per_position_acceptance=positions, tokens_per_s=10.0 / 3 + k, baseline_tokens_per_s=7.25,
                         target_forwards_per_token=1 / (k + 1), wall_s=0.1 * (seed + 1),
                         estimated_alpha=alpha, cost_ratio=None if alpha is None else 0.2, identical=temperature == 0)
    results = [run(1, 0.0, 0, 0, 0.8, (0.8,)), run(1, 0.0, 0, 1, 0.6, (0.6,)), run(3, 0.0, 0, 0, 0.7, (1.0, 0.5)),
               run(3, 0.0, 0, 1, None, (None, None, 0.25)), run(1, 0.7, 1, 0, 1 / 3, (1 / 3,))]
    stem = tmp_path / "cli"
    write_sweep(stem, results, make_sweep()["meta"])
    paths = [Path(p) for p in ExploreHandlers(FakeRunner()).download(SweepTable.load(stem.with_suffix(".json")))]
    assert paths[0].read_bytes() == stem.with_suffix(".json").read_bytes()
    assert paths[1].read_bytes() == stem.with_suffix(".csv").read_bytes()


def test_select_temperature_redraws_theory_the_gap_and_positions():
    table = SweepTable.from_dict(make_sweep())
    theory, gap, words, positions = ExploreHandlers(FakeRunner()).select_temperature(table, 0.7, False, None)
    assert theory.layout.title.subtitle.text.startswith("T = 0.7") and positions.data
    assert not gap.data and "did not record the costs" in gap.layout.annotations[0].text   # no runs, no costs
    recorded = load_recorded_sweep(ASSETS_DIR).table                                      # the default pair's sweep
    theory, gap, words, positions = ExploreHandlers(FakeRunner()).select_temperature(recorded, 0.7, False, None)
    assert gap.layout.title.subtitle.text.startswith("T = 0.7") and "At T = 0.7" in words


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
    views = CompareViews(*outputs[-1])
    assert set(views.state.traces) == {"A", "B"}
    assert "A: k = 5" in views.timeline_a.layout.title.text and "n-gram" in views.timeline_b.layout.title.text
    assert [bar.meta for bar in views.alignment.data] == ["accepted", "recovered", "bonus"]
    assert "acceptance rate" in views.table and "target forwards" in views.table and "tokens / s" in views.table


def test_comparison_table():
    short, long = make_trace([4, 4]), make_trace([1, 0, 2, 1, 0, 3, 1, 0, 2, 1])
    comparison = Comparison({"A": Side(4, 0.0, "model"), "B": Side(4, 0.0, "ngram")}, {"A": short, "B": long})
    table = comparison_table(comparison)
    assert "outputs differ from token 2" in table and "5.00× (worse)" in table       # forwards: 2 vs 10
    assert "only a float-rounding near tie" in table                                 # both greedy, float32
    sampled = Comparison(comparison.sides, {"A": short, "B": make_trace([1, 0, 2], sampling=True)})
    assert "A: exact up to float rounding at near ties; B: lossless in law" in comparison_table(sampled)
    stopped = comparison_table(Comparison(comparison.sides, {"A": make_trace([4]), "B": short}))
    assert "A ended sooner" in stopped and "after 5 tokens, all equal" in stopped
    same = comparison_table(Comparison(comparison.sides, {"A": short, "B": short}))
    assert "identical output" in same and "same" in same


TEXT = [(2000 + i, f"w{i}") for i in range(30)]


def spelled(accepted: list[int], k: int) -> Trace:
    """A trace whose steps accept `accepted` drafts, its emitted tokens rewritten to spell TEXT in order."""
    trace, words = make_trace(accepted, k=k), iter(TEXT)
    steps = []
    for step in trace.steps:
        emitted = []
        for token in step.emitted:
            token_id, text = next(words)
            emitted.append(dataclasses.replace(token, id=token_id, text=text))
        steps.append(dataclasses.replace(step, emitted=tuple(emitted)))
    written = TEXT[:sum(len(step.emitted) for step in steps)]
    output = TextTokens("".join(text for _, text in written), tuple(token_id for token_id, _ in written))
    return dataclasses.replace(trace, steps=tuple(steps), output=output)


def test_two_runs_of_different_step_splits_line_up_token_by_token():
    few, many = spelled([4, 4, 4, 4, 4], k=4), spelled([1, 0, 2, 1, 0, 3, 1, 0, 2, 1, 2, 0], k=4)   # 25 tokens each
    assert len(few.steps) != len(many.steps)
    runs = {"A": few, "B": many}
    for trace in runs.values():
        placed = placed_tokens(trace)
        assert [item.position for item in placed] == list(range(1, 26))
        assert [(item.token.id, item.token.text) for item in placed] == TEXT[:25]
    figure = alignment_figure(runs)
    cells = {}                                                           # (row, position) -> text of the cell
    for bar in figure.data:
        for x, base, label in zip(bar.x, bar.base, bar.text):
            if x is not None:
                cells[(round(base + 0.4), x)] = label
    assert all(cells[(1, position)] == cells[(0, position)] == f"w{position - 1}" for position in range(1, 26))
    starts = {(round(shape.y0 + 0.5), shape.x0 + 0.5) for shape in figure.layout.shapes if shape.name == "step start"}
    assert starts == {(1, p) for p in (1, 6, 11, 16, 21)} | {(0, p) for p in (1, 3, 4, 7, 9, 10, 14, 16, 17, 20, 22, 25)}
    assert not [shape for shape in figure.layout.shapes if shape.name == "first difference"]
    changed = dataclasses.replace(many, steps=many.steps[:-1] + (dataclasses.replace(
        many.steps[-1], emitted=(dataclasses.replace(many.steps[-1].emitted[0], id=1),)),))
    lines = [shape for shape in alignment_figure({"A": few, "B": changed}).layout.shapes
             if shape.name == "first difference"]
    assert [line.x0 for line in lines] == [24.5]                          # B's last token is now another id
    views = compare_views(Comparison({"A": Side(4, 0.0, "model"), "B": Side(4, 0.0, "ngram")}, runs), "done")
    assert "identical output" in views.table and list(views.alignment.layout.yaxis.ticktext) == ["A", "B"]


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
    assert all(c.verify_cost is not None and c.draft_cost is not None for c in table.cells)   # measured costs
    assert [t.meta for t in views["theory"].data if str(t.meta).startswith("model")] == [
        "model.length", "model.speedup", "model.speedup_measured_verify"]


def test_the_sweep_handler_on_tiny_random(engine_runner):
    updates = run_sweep(ExploreHandlers(engine_runner, min_interval=0.0), ks=[1, 2], temperatures=[0.0],
                        max_new_tokens=8)
    assert updates[-1]["status"].startswith("Done: 2 runs") and len(updates[-1]["table"].cells) == 2


def test_draft_model_vs_ngram_on_tiny_random(engine_runner):
    outputs = list(CompareHandlers(engine_runner).compare(False, None, *compare_args(max_new_tokens=24)))
    views = CompareViews(*outputs[-1])
    comparison, status, timeline_a, timeline_b, table = (views.state, views.status, views.timeline_a,
                                                         views.timeline_b, views.table)
    assert status == "Done: A and B side by side."
    a, b = comparison.traces["A"], comparison.traces["B"]
    assert a.config.drafter == "model" and b.config.drafter == "ngram" and b.config.draft == "ngram"
    assert a.output.token_ids == b.output.token_ids                   # greedy float32: both are target-only
    assert "identical output" in table
    assert any(t.meta == "accepted" for t in timeline_a.data) and timeline_b.data


def test_the_side_panel_follows_the_sweep_on_screen():
    from specviz.assets import ASSETS_DIR, load_examples
    from specviz.explore.settings import SETTING_NAMES, settings_note, settings_values
    examples = [e.prompt for e in load_examples(ASSETS_DIR)]
    ks = list(range(1, 9))
    document = make_sweep(ks=(2, 5), temperatures=(0.3,), prompts=(examples[1], "not an example prompt"))
    document["meta"].update(seeds=[3, 4], max_new_tokens=48)
    table = SweepTable.from_dict(document)
    shown = dict(zip(SETTING_NAMES, settings_values(table, ks, examples)))
    assert shown == {"ks": [2, 5], "temperatures": [0.3], "prompts": [examples[1]], "seeds": "3, 4",
                     "max_new_tokens": 48}
    note = settings_note(table, "the uploaded sweep's", ks, examples)
    assert note.startswith("Set to the uploaded sweep's settings")
    assert "1 prompt not among the examples" in note                 # what the controls cannot tick is said
    document["meta"].update(ks=[2, 9], max_new_tokens=1000)
    note = settings_note(SweepTable.from_dict(document), "the uploaded sweep's", ks, examples)
    assert "k = 9" in note and "1000 new tokens" in note
    nothing_offered = SweepTable.from_dict(make_sweep(ks=(9,), prompts=("not an example prompt",)))
    assert dict(zip(SETTING_NAMES, settings_values(nothing_offered, ks, examples)))["prompts"] == []  # none ran
    assert "Not offered" not in settings_note(SweepTable.from_dict(make_sweep(prompts=examples[:1])), "x", ks,
                                              examples)
