"""The Lab tab: recorded lab traces load, the divergence marker sits at engine.lab.first_divergence,
and the handlers record every stage (fake runner, then the real tiny-random pair)."""

from __future__ import annotations


import re

import gradio as gr
import pytest

from app import EngineRunner
from engine.lab import cache_drift, first_divergence
from fakes import FakeRunner
from specviz.assets import ASSETS_DIR, LAB_PREFIX, load_demo_trace, load_lab_traces, trace_paths
from specviz.lab.handlers import LabHandlers
from specviz.lab.views import (KEYS, REFERENCE, RUN_ORDER, WHAT_IF, LabSet, LabViews, choice, difference, recorded_lab,
                               render_lab, render_step)
from specviz.serving.policy import Policy
from trace_factory import make_trace

NAMES = LabViews.names()


def divergence_shapes(fig):
    return [shape for shape in fig.layout.shapes if shape.name == "divergence"]


def lab_pair():
    """Stage A leaves the reference in step 1 (a recovered token where D accepted d2)."""
    return LabSet({"A": make_trace([4, 1, 4, 2]), REFERENCE: make_trace([4, 4, 4, 2])}, "test")


def test_divergence_marker_sits_at_first_divergence():
    lab = lab_pair()
    step = first_divergence(lab.traces["A"], lab.reference.output.token_ids)
    assert step == 1
    views = render_lab(lab, "A", "status")
    (line,) = divergence_shapes(views.timeline)
    assert line.x0 == line.x1 == step - 0.5
    assert any(a.name == "divergence" and f"step {step}" in a.text for a in views.timeline.layout.annotations)
    (drift_line,) = divergence_shapes(views.drift)
    assert drift_line.x0 == step - 0.5
    assert "leaves target-only decoding at token 7 (step 1)" in views.verdict      # 5 tokens in step 0, then d1, d2
    diff = difference(lab.traces["A"], lab.reference)
    assert diff.position == 6 and diff.got != diff.expected and diff.step == step
    assert views.verdict.count("sv-tok sv-recovered") == 1 and "sv-tok sv-rejected" not in views.verdict


@pytest.mark.parametrize("key", ["A", "B", "C"])
def test_the_diverging_token_is_styled_as_the_timeline_marks_it(key):
    """Issue #33 item 7: Lab A's diverging token '·#' was styled as a rejected draft on the 'this stage' line
    while the timeline marks it recovered. The stage's chip takes its kind from the stage's own output (the
    timeline's cell of that kind sits in the diverging step); the 'target-only:' line's from target-only decoding,
    which drafts nothing: the target's own token of a step without drafts, never a green accepted draft (stage D's
    kind stood there; planted back: caught)."""
    lab = recorded_lab(load_lab_traces(KEYS))
    trace, views = lab.traces[key], render_lab(lab, key, "")
    diff = difference(trace, lab.reference)
    assert not diff.identical                                   # the recorded stages A-C each leave target-only
    kinds = [token.kind for step in trace.steps for token in step.emitted]
    expected = [token.kind for step in lab.reference.steps for token in step.emitted]    # stage D's own kinds
    line = views.verdict.split("sv-lab-diff")[1]
    mine, theirs = re.findall(r"<span class='sv-tok sv-(\w+)'", line)
    assert (mine, theirs) == (kinds[diff.position], "bonus") and expected[diff.position] == "accepted"
    assert "no drafts" in line.split("target-only:")[1]
    cells = {t.meta: [x for x in t.x if x is not None] for t in views.timeline.data if t.type == "bar"}
    assert diff.step in cells[mine]


def test_the_reference_itself_is_identical_and_unmarked():
    views = render_lab(lab_pair(), REFERENCE, "status")
    assert not divergence_shapes(views.timeline) and not divergence_shapes(views.drift)
    assert "identical to target-only" in views.verdict
    assert "D. + real cutoff" in views.explanation


def test_a_missing_stage_says_how_to_get_it():
    views = render_lab(lab_pair(), "C", "status")
    assert "press <b>Run the lab</b>" in views.verdict and not views.timeline.data
    assert "zero" in views.explanation.lower()
    empty = render_lab(None, "A", "status")
    assert "No lab traces yet" in empty.verdict


def test_verdict_compares_acceptance_with_the_correct_engine():
    lab = lab_pair()
    views = render_lab(lab, "A", "")
    assert f"correct engine (D): {100 * lab.reference.summary.acceptance_rate:.1f}%" in views.verdict


def line(fig, meta):
    return next((t for t in fig.data if t.meta == meta), None)


def check_cache_numbers(trace, views) -> None:
    """The oracle: stale positions are the KV records' own `stale`; missing ones are counted from the
    steps (without the carryover, each fully accepted step before this one left its d_k unfed)."""
    full_accepts, missing = 0, []
    for step in trace.steps:
        missing.append(0 if trace.config.carryover else full_accepts)
        full_accepts += step.k > 0 and step.num_accepted == step.k
    assert list(line(views.drift, "target.stale").y) == [step.kv_target.stale for step in trace.steps]
    assert list(line(views.drift, "draft.stale").y) == [step.kv_draft.stale for step in trace.steps]
    draft_missing = line(views.drift, "draft.missing")
    assert (list(draft_missing.y) if draft_missing else [0] * len(missing)) == [-m for m in missing]
    last = trace.steps[-1]
    assert f"{last.kv_target.stale} · 0" in views.verdict
    assert f"{last.kv_draft.stale} · {missing[-1]}" in views.verdict
    assert f"{100 * trace.summary.acceptance_rate:.1f}%" in views.verdict
    assert f"{trace.summary.mean_accepted_length:.2f}" in views.verdict


def recorded_set():
    lab = recorded_lab(load_lab_traces(KEYS))
    assert lab is not None and {"A", "B", "C", "D"} <= set(lab.traces)
    return lab


@pytest.mark.parametrize("key", ["A", "B", "C", "D"])
def test_each_recorded_stage_shows_its_records_numbers(key):
    lab = recorded_set()
    check_cache_numbers(lab.traces[key], render_lab(lab, key, ""))


def test_a_planted_wrong_count_is_caught(monkeypatch):
    """Plant an off-by-one in the stale/missing split: the oracle above must fail on stage A."""
    import engine.lab
    real = engine.lab.cache_drift
    monkeypatch.setattr(engine.lab, "cache_drift", lambda trace: [(t, None if d is None else d + 1) for t, d in real(trace)])
    lab = recorded_set()
    with pytest.raises(AssertionError):
        check_cache_numbers(lab.traces["A"], render_lab(lab, "A", ""))


def test_stage_a_misses_positions_and_b_does_not():
    lab = recorded_set()
    assert line(render_lab(lab, "A", "").drift, "draft.missing") is not None
    assert line(render_lab(lab, "B", "").drift, "draft.missing") is None
    assert line(render_lab(lab, "D", "").drift, "target.stale").y[-1] == 0


def test_every_stage_says_why_its_acceptance_is_what_it_is():
    lab = recorded_set()
    rates = {key: lab.traces[key].summary.acceptance_rate for key in "ABCD"}
    for key in "ABCD":
        verdict = render_lab(lab, key, "").verdict
        assert f"Acceptance rate r = {100 * rates[key]:.1f}%" in verdict
        assert "problem C" not in render_lab(lab, key, "").explanation      # a name the page never explains
    if rates["B"] < rates["A"]:                     # B below A: the text says why, with A's number
        verdict = render_lab(lab, "B", "").verdict
        assert f"below stage A ({100 * rates['A']:.1f}%)" in verdict and "different text" in verdict


def test_every_stage_runs_the_same_prompt_k_and_length():
    lab = recorded_set()
    configs = {(t.prompt.text, t.config.k, t.config.max_new_tokens, t.config.seed) for t in lab.traces.values()}
    assert len(configs) == 1
    assert len({t.summary.new_tokens for t in lab.traces.values()}) == 1
    ends = {tuple(render_lab(lab, key, "").drift.layout.xaxis.range) for key in lab.traces if key != "T"}
    assert len(ends) == 1                           # one step axis for every chain stage (the tree's: its own)


def test_scrubbing_moves_the_detail_and_the_marks():
    lab = recorded_set()
    trace = lab.traces["A"]
    step = trace.steps[5]
    views = render_step(lab, "A", step.index)
    assert f"Step {step.index}" in views.detail and f"After step {step.index}</b>" in views.detail
    band = [s for s in views.drift.layout.shapes if s.type == "rect"]
    assert band and band[0].x0 == step.index - 0.5
    handlers = LabHandlers(FakeRunner())
    moved, *_ = handlers.next_step(lab, "A", step.index, False, None)
    assert moved == trace.steps[6].index
    moved, *_ = handlers.previous_step(lab, "A", trace.steps[0].index, False, None)
    assert moved == trace.steps[0].index


def test_lab_traces_load_from_assets_and_never_become_the_demo_trace(tmp_path):
    traces = tmp_path / "traces"
    traces.mkdir()
    make_trace([4, 1]).save(traces / f"{LAB_PREFIX}A.json")
    make_trace([4, 4]).save(traces / f"{LAB_PREFIX}D.json")
    (traces / f"{LAB_PREFIX}B.json").write_text("{", encoding="utf-8")          # unreadable: left out
    loaded = load_lab_traces(KEYS, tmp_path)
    assert set(loaded) == {"A", "D"}
    assert load_demo_trace(tmp_path).trace is None and not trace_paths(tmp_path)
    lab = recorded_lab(loaded)
    assert lab.source == "recorded" and lab.checked is None and recorded_lab({}) is None


def test_shipped_lab_traces_are_complete_and_d_is_target_only():
    shipped = sorted(path.name for path in (ASSETS_DIR / "traces").glob(f"{LAB_PREFIX}*.json"))
    if not shipped:
        pytest.skip("no lab traces recorded in assets/traces yet")
    lab = recorded_lab(load_lab_traces(KEYS))
    assert {"A", "B", "C", "D"} <= set(lab.traces), shipped           # the what-if run is optional
    assert lab.checked is True                                          # recorded with --baseline: D == target-only
    assert all(trace.config.is_greedy for trace in lab.traces.values())
    for key, trace in lab.traces.items():                               # each file holds the stage it is named for
        assert choice(key).apply(trace.config) == trace.config, key
    if WHAT_IF in lab.traces:
        assert difference(lab.traces[WHAT_IF], lab.reference).identical
    assert len({trace.prompt.text for trace in lab.traces.values()}) == 1


# --- handlers ---------------------------------------------------------------------------------------

def run_lab(handlers, key="A", **changes):
    values = dict(preset="tiny-random", draft="", target="", prompt="def fib(n):", k=4, max_new_tokens=24)
    values.update(changes)
    return [dict(zip(NAMES, out)) for out in handlers.run(None, key, False, None, *values.values(),
                                                          progress=lambda fraction, desc=None: None)]


def test_run_records_d_first_then_every_stage_with_lab_configs():
    runner = FakeRunner()
    updates = run_lab(LabHandlers(runner))
    assert [r.config.cutoff_mode for r in runner.requests] == ["truncate", "none", "none", "zero_fill", "truncate",
                                                               "truncate"]
    assert [r.config.carryover for r in runner.requests] == [True, False, True, True, True, True]
    assert [r.config.draft_temperature for r in runner.requests][-2] == 1.0
    assert [r.config.tree_nodes for r in runner.requests] == [0, 0, 0, 0, 0, 16]      # the tree stage T last
    assert all(r.config.temperature == 0.0 and r.config.drafter == "model" for r in runner.requests)
    statuses = [u["status"] for u in updates]
    assert statuses[0] == f"Recording 1 of 6: {choice(REFERENCE).title}…"
    assert "Checking stage D against target-only decoding…" in statuses
    final = updates[-1]
    assert set(final["lab"].traces) == set(RUN_ORDER) and final["lab"].checked is True
    assert final["status"].startswith("Recorded all 6 runs on tiny-random")


def test_run_refuses_bad_input_and_reports_engine_errors():
    with pytest.raises(gr.Error, match="The prompt is empty"):
        run_lab(LabHandlers(FakeRunner()), prompt=" ")
    with pytest.raises(gr.Error, match="max new tokens must be from 1 to 256"):
        run_lab(LabHandlers(FakeRunner()), max_new_tokens=1000)
    with pytest.raises(gr.Error, match="k must be a whole number from 1 to 8 on this hosted server"):
        run_lab(LabHandlers(FakeRunner(), policy=Policy.hosted_default()), k=12)
    with pytest.raises(gr.Error, match="Could not run the lab: no such model"):
        run_lab(LabHandlers(FakeRunner(fail_load="no such model")))


def test_stop_keeps_the_finished_stages():
    handlers = LabHandlers(FakeRunner())
    updates = []
    for out in handlers.run(None, "A", False, None, "tiny-random", "", "", "def f():", 4, 24,
                            progress=lambda fraction, desc=None: None):
        updates.append(dict(zip(NAMES, out)))
        if updates[-1]["status"].startswith("Recording 3 of 6"):
            handlers.stop()
    final = updates[-1]
    assert final["status"] == "Stopped: 3 of 6 stages recorded." and set(final["lab"].traces) == {"D", "A", "B"}


def test_show_switches_stage_without_running():
    runner = FakeRunner()
    lab = lab_pair()
    views = dict(zip(NAMES, LabHandlers(runner).show(lab, REFERENCE, "kept status", True, 390)))
    assert views["status"] == "kept status" and views["lab"] is lab and not runner.requests
    assert views["timeline"].layout.font.size == 18                   # large text


def test_the_lab_on_tiny_random():
    updates = run_lab(LabHandlers(EngineRunner(device="cpu")), prompt="Write a palindrome check in Python.",
                      k=5, max_new_tokens=32)
    lab = updates[-1]["lab"]
    assert set(lab.traces) == set(KEYS) and lab.checked is True
    for key in KEYS:
        config = lab.traces[key].config
        assert config.carryover == choice(key).apply(config).carryover
    reference_ids = lab.reference.output.token_ids
    assert first_divergence(lab.traces["A"], reference_ids) is not None          # nothing cleaned up: it drifts
    assert any(target > 0 for target, _ in cache_drift(lab.traces["A"]))
    assert difference(lab.traces[WHAT_IF], lab.reference).identical              # sampled drafts stay exact
    views = render_lab(lab, "A", "")
    assert divergence_shapes(views.timeline) and "✗ output leaves target-only" in views.verdict
