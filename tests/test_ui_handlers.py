"""UI handlers driven by a fake runner: streaming, errors, stop, scrubbing, import and export."""

from __future__ import annotations

import dataclasses
import inspect
import itertools
import json
import os
import re
import threading
import time
from pathlib import Path

import gradio as gr
import pytest

from control_values import Session, controls, progress
from engine.formats.trace import Trace
from fakes import FakeRunner
from specviz.assets import DemoTrace
from specviz.controls import Controls
from specviz.figures.acceptance import WHILE_LIVE
from specviz.serving.policy import MIN_TOP_P, Policy
from specviz.run.handlers import Handlers
from engine.vllm.server_info import FIX_NAME
from specviz.run.recorded import CONTROL_FIELDS, RecordedRuns
from specviz.serving.runner import CUSTOM
from specviz.style import FigureStyle
from specviz.run.views import HELD_WHILE_LIVE, Views, render
from trace_factory import make_trace

NAMES = Views.names()


def starts(update: dict) -> bool:
    """An update from before the run's first step: the page cleared ('Starting…', or 'Models ready' when the
    page saw no loading), or its status alone ('Models ready' after the clear)."""
    return update["status"].startswith(("Starting the run", "Models ready"))


def run_all(handlers, **changes):
    """Every update of a run after those from before its first step, which a run too fast for its page to see
    may skip (the queue's worker steps the run while the page watches)."""
    updates = [dict(zip(NAMES, out)) for out in handlers.run(None, False, None, *controls(**changes),
                                                             progress=progress)]
    return list(itertools.dropwhile(starts, updates))


def test_a_run_clears_the_old_trace_the_moment_it_starts():
    """Issue 41: "Models ready: reading the prompt…" sat above the previous run's timeline. The first update of
    a run that leaves the queue empties every view (the session keeps its trace until the run has steps), and
    no later update before the first step draws the old trace again. The run's first step waits until the
    test has seen that update."""
    old = make_trace([4, 2, 0])
    release = threading.Event()
    handlers = Handlers(FakeRunner(accepted=(4, 2), hold_after=0, release=release), min_interval=0.0)
    updates = []
    for out in handlers.run(old, False, None, *controls(), progress=progress):
        updates.append(dict(zip(NAMES, out)))
        release.set()
    first = updates[0]
    assert starts(first) and first["trace"] is old                   # the session still holds the old trace
    assert "No step to show yet" in first["detail"] and "sv-empty" in first["output"]
    assert not first["timeline"].data and first["scrubber"]["interactive"] is False
    before = list(itertools.takewhile(starts, updates))
    assert all(u["timeline"] == gr.update() or not u["timeline"].data for u in before)
    assert updates[-1]["trace"] is not old and updates[-1]["status"].startswith("Done")


def test_run_parameters_are_the_controls_in_order():
    parameters = list(inspect.signature(Handlers(FakeRunner()).run).parameters)
    assert parameters == ["trace", "large", "width", *Controls.names(), "request", "progress"]


def test_run_streams_partial_traces_then_the_complete_one():
    render(make_trace([1, 2]), "")                # warm plotly up: the first figure of a process is slow
    runner = FakeRunner(accepted=(4, 2, 0, 4, 3), delay=0.1)
    updates = run_all(Handlers(runner, min_interval=0.0))
    traces = [u["trace"] for u in updates]
    counts = [len(t.steps) for t in traces]
    # The first step is always drawn; later redraws (the last partial one included) may be skipped
    # when drawing is slow (a loaded machine), so the counts only have to grow, and the complete
    # trace of all 5 steps comes last.
    assert counts[0] == 1 and counts[-1] == 5 and counts[:-1] == sorted(set(counts[:-1])) and max(counts[:-1]) <= 5
    assert not traces[0].complete and traces[-1].complete
    assert "Running" in updates[0]["status"] and updates[-1]["status"].startswith("Done: 5 steps")
    final = updates[-1]
    assert final["scrubber"]["maximum"] == 4 and final["scrubber"]["value"] == 4
    assert "Step 4" in final["detail"]
    assert len([b for b in final["timeline"].data if b.meta == "accepted"][0].x) == 13
    request = runner.requests[0]
    assert request.models.preset == "tiny-random" and request.config.k == 4 and request.prompt == "def add(a, b):"


def test_a_live_run_sends_the_acceptance_charts_stand_ins_once_and_draws_them_when_it_ends():
    """While a run streams, the three acceptance charts (they sum up the whole run) show a note, sent
    with the first live update only; every later live update leaves them as they are; Done draws them."""
    render(make_trace([1, 2]), "")                # warm plotly up: the first figure of a process is slow
    updates = run_all(Handlers(FakeRunner(accepted=(4, 2, 0, 4, 3), delay=0.1), min_interval=0.0))
    live, final = updates[:-1], updates[-1]
    assert len(live) >= 2, "the fake run's steps are slow enough for two live redraws"
    for name in HELD_WHILE_LIVE:
        first = live[0][name]
        assert [a.text for a in first.layout.annotations] == [WHILE_LIVE] and not first.data
        assert all(update[name] == gr.update() for update in live[1:])
        assert final[name].data, f"{name} is drawn when the run ends"
    assert all(update["timeline"] != gr.update() for update in live)     # what a step changes is redrawn


def test_run_passes_every_control_into_the_request():
    runner = FakeRunner(accepted=(1,))
    run_all(Handlers(runner), k=6.0, adaptive_k=True, temperature=0.7, top_p=0.9, top_k=20.0, max_new_tokens=32,
            seed=7, drafter="ngram", draft_dtype="bfloat16", target_dtype="bfloat16")
    request = runner.requests[0]
    config = request.config
    assert (config.k, config.adaptive_k, config.temperature, config.top_p, config.top_k) == (6, True, 0.7, 0.9, 20)
    assert (config.max_new_tokens, config.seed, config.drafter) == (32, 7, "ngram")
    assert request.models.key == ("preset", "tiny-random", "bfloat16", "bfloat16")


def test_run_throttles_redraws_of_a_fast_run():
    updates = run_all(Handlers(FakeRunner(accepted=(1,) * 40, delay=0.01), min_interval=60.0))
    assert 1 <= len(updates) <= 2                 # at most the first step it sees, then the finished trace
    assert updates[-1]["trace"].complete and updates[-1]["status"].startswith("Done: 40 steps")


class SlowBaseline(FakeRunner):
    """A baseline that takes long enough for the page to see it run."""

    def with_baseline(self, request, trace):
        time.sleep(0.5)
        return super().with_baseline(request, trace)


def test_baseline_runs_after_the_generation():
    updates = run_all(Handlers(SlowBaseline(accepted=(4, 1))), with_baseline=True)
    assert "target-only" in updates[-2]["status"]
    final = updates[-1]["trace"]
    assert final.baseline is not None and final.baseline.identical
    assert "speedup vs target-only" in updates[-1]["metrics"]


@pytest.mark.parametrize("changes, message", [
    (dict(prompt="   "), "prompt is empty"),
    (dict(k=0), "k must be a whole number from 1 to 16, got 0"),
    (dict(k=2.5), "k must be a whole number"),
    (dict(temperature=None), "temperature is empty"),
    (dict(top_p=0), "top-p must be in (0, 1]"),
    (dict(max_new_tokens=0), "max new tokens"),
    (dict(preset=CUSTOM), "Enter a target model"),
    (dict(preset=CUSTOM, target="gpt2"), "Enter a draft model"),
    (dict(prompt="too long"), "longer than the model's context"),
])
def test_bad_input_is_a_clear_gr_error(changes, message):
    with pytest.raises(gr.Error, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        run_all(Handlers(FakeRunner()), **changes)


def test_custom_pair_request():
    runner = FakeRunner(accepted=(1,))
    run_all(Handlers(runner), preset=CUSTOM, draft=" distilgpt2 ", target="gpt2")
    assert runner.requests[0].models.key == ("custom", "distilgpt2", "gpt2", "float32", "float32")


def test_model_load_error_is_a_gr_error():
    with pytest.raises(gr.Error, match="Could not start: no such model: nope"):
        run_all(Handlers(FakeRunner(fail_load="no such model: nope")))


def test_engine_failure_mid_run_keeps_the_recorded_steps():
    handlers = Handlers(FakeRunner(accepted=(4, 2, 0, 4), fail_at=2), min_interval=0.0)
    seen = []
    with pytest.raises(gr.Error, match="simulated engine failure. The steps recorded before it are kept"):
        for out in handlers.run(None, False, None, *controls(), progress=progress):
            seen.append(dict(zip(NAMES, out)))
    assert len(seen[-1]["trace"].steps) == 2 and "error after 2 steps" in seen[-1]["status"]


def test_stop_ends_the_run_after_the_current_step_and_keeps_the_partial_trace():
    """The run holds its fourth step until this page has drawn three and pressed Stop (another session's Stop
    came first, after the first step, and changed nothing): the step in progress ends, and the run stops."""
    release = threading.Event()
    handlers = Handlers(FakeRunner(accepted=(4, 2, 0, 4, 3, 1), delay=0.1, hold_after=3, release=release),
                        min_interval=0.0)
    mine, other = Session("mine"), Session("other")
    updates = []
    for out in handlers.run(None, False, None, *controls(), request=mine, progress=progress):
        updates.append(dict(zip(NAMES, out)))
        drawn = len(updates[-1]["trace"].steps) if updates[-1]["trace"] is not None else 0
        if drawn >= 1:
            handlers.stop(other)                 # another session's Stop does not touch this run
        if drawn == 3 and not release.is_set():
            handlers.stop(mine)
            release.set()
    final = updates[-1]
    assert final["status"] == f"Stopped: the {len(final['trace'].steps)} steps recorded so far are kept."
    assert len(final["trace"].steps) == 4 and not final["trace"].complete
    assert "incomplete" in final["output"]
    assert handlers.stops.num_running == 0
    handlers.stop(mine)                          # nothing running: harmless


def test_scrubber_prev_next_and_select():
    handlers = Handlers(FakeRunner())
    trace = make_trace([4, 1, 0, 2, 3])
    timeline, kv, detail, tree, output = handlers.select_step(trace, 2.0, False, None)
    assert "Step 2" in detail and any(shape.x0 == 1.5 for shape in timeline.layout.shapes)
    assert kv.data and tree["visible"] is False                     # a chain run has no tree to show
    selected = re.findall(r"<span class='sv-out sv-\w+ sv-selected' title='step (\d+)", output)
    assert selected == ["2"] * trace.steps[2].num_emitted           # the output outlines the step's tokens
    slider, _, _, detail, _, output = handlers.next_step(trace, 2, False, None)
    assert slider["value"] == 3 and "Step 3" in detail and output.count(" sv-selected' title=") == trace.steps[3].num_emitted
    slider, _, _, detail, _, _ = handlers.previous_step(trace, 0, False, None)
    assert slider["value"] == 0 and "Step 0" in detail             # clamped at the first step
    slider, _, _, detail, _, _ = handlers.next_step(trace, 4, False, None)
    assert slider["value"] == 4
    _, _, _, detail, _, _ = handlers.next_step(None, 0, False, None)
    assert "No step" in detail
    *_, output = handlers.select_step(trace, 99, False, None)      # clamped to the last step
    assert output.count(" sv-selected' title=") == trace.steps[-1].num_emitted


def test_a_recorded_run_is_offered_and_sets_the_controls():
    greedy, sampled = make_trace([4, 1, 0]), make_trace([2, 4, 1, 0], sampling=True, prompt="Sampled haiku")
    runs = RecordedRuns(DemoTrace(greedy, "g.json", choices=(("g.json", greedy), ("s.json", sampled))))
    assert runs.choices() == [("greedy (T = 0) · k = 4 · 3 steps", "g.json"),
                              ("sampled (T = 0.8) · k = 4 · 4 steps", "s.json")]
    out = runs.show("s.json", False, None)
    views = dict(zip(NAMES, out[:len(NAMES)]))
    controls = dict(zip(CONTROL_FIELDS, out[len(NAMES):]))
    assert views["trace"] is sampled and "s.json" in views["status"] and "temperature 0.8" in views["status"]
    assert views["scrubber"]["value"] == 0 and "Step 0" in views["detail"]
    assert controls["prompt"]["value"] == "Sampled haiku" and controls["temperature"]["value"] == 0.8
    assert controls["k"]["value"] == 4 and controls["max_new_tokens"]["value"] == sampled.config.max_new_tokens
    assert controls["tree_nodes"]["value"] == 0 and controls["tree_branch"]["value"] == sampled.config.tree_branch
    tree = dataclasses.replace(greedy, config=greedy.config.replace(tree_nodes=24, tree_branch=3))
    for policy, nodes in ((Policy(), 24), (Policy.hosted_default(), 16)):     # a tree run resets the tree sliders
        out = RecordedRuns(DemoTrace(tree, "t.json"), policy).show("t.json", False, None)
        controls = dict(zip(CONTROL_FIELDS, out[len(NAMES):]))
        assert controls["tree_nodes"]["value"] == nodes and controls["tree_branch"]["value"] == 3
    no_top_p = dataclasses.replace(sampled, config=sampled.config.replace(top_p=0.01))  # below the slider's floor
    shown = RecordedRuns(DemoTrace(no_top_p, "p.json")).show("p.json", False, None)
    controls = dict(zip(CONTROL_FIELDS, shown[len(NAMES):]))
    assert controls["top_p"]["value"] == MIN_TOP_P
    with pytest.raises(gr.Error, match="no recorded trace named"):
        runs.show("missing.json", False, None)
    assert [name for _, name in RecordedRuns(DemoTrace(greedy, "g.json")).choices()] == ["g.json"]


def test_a_recorded_vllm_run_names_its_server_in_its_label_and_status():
    greedy = make_trace([4, 1, 0])
    served = dataclasses.replace(greedy, config=greedy.config.replace(engine="vllm 0.32.0"))
    fixed = dataclasses.replace(greedy, config=greedy.config.replace(
        engine=f"vllm 0.32.0 + {FIX_NAME}", temperature=0.7))
    runs = RecordedRuns(DemoTrace(greedy, "g.json", choices=(("v.json", served), ("f.json", fixed))))
    assert runs.choices() == [("vLLM 0.32.0 · greedy (T = 0) · k = 4 · 3 steps", "v.json"),
                              ("vLLM 0.32.0, CPU sampler fixed · sampled (T = 0.7) · k = 4 · 3 steps", "f.json")]
    status = dict(zip(NAMES, runs.show("v.json", False, None)[:len(NAMES)]))["status"]
    assert "a run of a vLLM 0.32.0 server (greedy, 3 steps), drawn from what the server reported" in status
    assert "record the same request with SpecViz's own engine" in status


def test_upload_replays_a_trace_and_rejects_bad_files():
    handlers = Handlers(FakeRunner())
    trace = make_trace([4, 1, 0], sampling=True)
    out = dict(zip(NAMES, handlers.upload(trace.to_json().encode(), False, None)))
    assert out["trace"] == trace and "3 steps" in out["status"] and out["scrubber"]["value"] == 0
    with pytest.raises(gr.Error, match="Not a SpecViz trace: not valid JSON"):
        handlers.upload(b"{not json", False, None)
    broken = trace.to_dict()
    del broken["steps"][1]["num_accepted"]
    with pytest.raises(gr.Error, match=r"missing field steps\[1\].num_accepted"):
        handlers.upload(json.dumps(broken).encode(), False, None)
    with pytest.raises(gr.Error, match="empty"):
        handlers.upload(b"", False, None)


def test_export_frames_the_selected_step_and_shares_one_plotly_js():
    import zipfile
    trace = make_trace([4, 1, 0])
    paths = [Path(p) for p in Handlers(FakeRunner()).export(trace, 1)]
    names = [p.name for p in paths]
    assert names[:2] == ["specviz-export.zip", "specviz-trace.json"] and names.count("plotly.min.js") == 1
    assert Trace.load(paths[1]) == trace
    pages = [p for p in paths if p.suffix == ".html"]
    assert len(pages) == 5
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert '<script charset="utf-8" src="plotly.min.js"></script>' in text and len(text) < 300_000
    assert (paths[0].parent / "plotly.min.js").stat().st_size > 1_000_000          # the one copy of plotly.js
    timeline = next(p for p in pages if p.name == "specviz-timeline.html").read_text(encoding="utf-8")
    assert '"x0":0.5,"x1":1.5' in timeline.replace(" ", "")                           # step 1 is framed
    with zipfile.ZipFile(paths[0]) as bundle:
        assert sorted(bundle.namelist()) == sorted(f"specviz-export/{name}" for name in names[1:])
    with pytest.raises(gr.Error, match="Nothing to export"):
        Handlers(FakeRunner()).export(None)


def test_preset_change_shows_custom_boxes_and_sets_the_drafter():
    handlers = Handlers(FakeRunner())
    draft, target, drafter, text, server, *_ = handlers.preset_changed(CUSTOM)
    assert draft["visible"] and target["visible"] and not server["visible"] and "vocabulary" in text
    draft, target, drafter, text, server, *_ = handlers.preset_changed("smollm2-ngram")
    assert not draft["visible"] and drafter["value"] == "ngram" and "SmolLM2" in text


def test_restyle_uses_large_fonts():
    out = dict(zip(NAMES, Handlers(FakeRunner()).restyle(make_trace([2, 3]), 1, True, None, "status")))
    assert out["timeline"].layout.font.size == 18 and out["status"] == "status" and "Step 1" in out["detail"]


def test_narrow_screens_show_fewer_steps_at_once():
    trace = make_trace([2, 4, 0, 1] * 10)
    wide = dict(zip(NAMES, Handlers(FakeRunner()).restyle(trace, 20, False, 1400, "")))
    phone = dict(zip(NAMES, Handlers(FakeRunner()).restyle(trace, 20, False, 390, "")))
    span = lambda fig: fig.layout.xaxis.range[1] - fig.layout.xaxis.range[0]
    # the timeline shows as many steps as its token cells fit at the width the page reported (FigureStyle, the
    # layout's own count since issue 41's minimum cell width); the cache chart keeps its own narrower window
    wide_steps, phone_steps = (FigureStyle.for_screen(False, width).timeline_steps for width in (1400, 390))
    assert span(wide["timeline"]) == wide_steps and span(phone["timeline"]) == phone_steps < wide_steps
    assert span(phone["kv_cache"]) == 7 < span(wide["kv_cache"])


def test_replay_plays_a_recorded_trace_step_by_step_and_stops_on_request():
    handlers = Handlers(FakeRunner(), replay_delay=0.0)
    trace = make_trace([4, 1, 0, 2], sampling=True)
    updates = [dict(zip(NAMES, out)) for out in handlers.replay(trace, False, None, request=Session("s"))]
    cells = [len([b for b in u["timeline"].data if b.meta == "accepted"][0].x) for u in updates]
    assert cells == [4, 5, 5, 7, 7] and all(u["trace"] is trace for u in updates)
    assert "Replaying… step 0 of 3" in updates[0]["status"] and updates[-1]["status"].startswith("Replayed 4")
    assert "incomplete" in updates[0]["output"] and "incomplete" not in updates[-1]["output"]
    stopped = []
    for out in handlers.replay(trace, False, None, request=Session("s")):
        stopped.append(out)
        handlers.stop(Session("s"))
    assert len(stopped) == 2                     # the first step, then the whole trace
    with pytest.raises(gr.Error, match="no recorded trace"):
        list(handlers.replay(None, False, None))


def test_first_steps_is_a_consistent_prefix():
    from engine.formats.trace import first_steps
    trace = make_trace([4, 1, 0, 2])
    prefix = first_steps(trace, 2)
    assert len(prefix.steps) == 2 and not prefix.complete
    assert prefix.output.token_ids == tuple(t.id for s in trace.steps[:2] for t in s.emitted)
    assert Trace.from_json(prefix.to_json()).summary.new_tokens == 7
    assert first_steps(trace, 4) == trace


def test_old_export_folders_are_pruned(tmp_path):
    from specviz.run.export import prune_exports
    for i in range(5):
        folder = tmp_path / f"specviz-export-{i}"
        folder.mkdir()
        os.utime(folder, (i, i))
    (tmp_path / "unrelated").mkdir()
    prune_exports(tmp_path, keep=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["specviz-export-3", "specviz-export-4", "unrelated"]


def test_unexpected_failures_become_one_line_errors():
    class Broken(FakeRunner):
        def start(self, request, progress):
            raise RuntimeError("CUDA out of memory")

    with pytest.raises(gr.Error, match="Could not start: RuntimeError: CUDA out of memory"):
        run_all(Handlers(Broken()))

    class BrokenBaseline(FakeRunner):
        def with_baseline(self, request, trace):
            raise RuntimeError("baseline exploded")

    seen = []
    with pytest.raises(gr.Error, match="baseline exploded. The speculative run is kept"):
        for out in Handlers(BrokenBaseline(accepted=(4, 1))).run(None, False, None, *controls(with_baseline=True),
                                                                  progress=progress):
            seen.append(dict(zip(NAMES, out)))
    assert seen[-1]["trace"].complete and len(seen[-1]["trace"].steps) == 2
