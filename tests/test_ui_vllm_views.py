"""The Run tab's views on a vLLM trace (issue #32, item 3 page side): a trace built by engine/vllm/to_trace.py
from a recorded vLLM stream (tests/vllm_traces.py) draws the drafts vLLM did not return as '⬚' cells of their
own kind (rejected / unverified; the mark is in the legend, and a real '?' token reads as itself), marks n-gram drafts SpecViz rebuilt, says in one sentence why p, q and the
draws are absent (never blank cells without a reason), names the engine, method, k and dtype, and its
acceptance charts agree with the server's own per-step counts. It exports and uploads like any trace."""

from __future__ import annotations

import dataclasses
import html
from collections import Counter

from engine.formats.trace import Trace
from fakes import FakeRunner
from specviz.figures.acceptance import histogram_figure, position_figure
from specviz.figures.timeline import timeline_figure
from specviz.other_engine import UNKNOWN_MARK
from specviz.run.handlers import Handlers
from specviz.run.views import Views, render
from specviz.tokens import short
from trace_factory import make_trace
from vllm_traces import ngram_trace, recorded_metrics, vllm_trace

NAMES = Views.names()
NO_NUMBERS = "vLLM does not return p, q or the random draws"
FINAL_METRICS = recorded_metrics("long")          # the server's own counts: 3 bonus steps, partial and no accepts
ACCEPTED = FINAL_METRICS["per_step_accepted"]
K = FINAL_METRICS["num_spec_tokens"]


def cells(figure) -> dict[str, list[tuple[int, str, str]]]:
    """Each kind's timeline cells as (step, text, hover)."""
    return {bar.meta: [(x, text, hover) for x, text, hover in zip(bar.x, bar.text, bar.hovertext) if x is not None]
            for bar in figure.data}


def test_drafts_vllm_did_not_return_are_question_marks_of_their_own_kind():
    drawn = cells(timeline_figure(vllm_trace("long")))
    rejected = [step for step, accepted in enumerate(ACCEPTED, start=1) if accepted < K]
    assert sorted(step for step, _, _ in drawn["rejected"]) == rejected            # one rejection a step, as vLLM counted
    assert Counter(step for step, _, _ in drawn["unverified"]) == {
        step: K - accepted - 1 for step, accepted in enumerate(ACCEPTED, start=1) if K - accepted - 1 > 0}
    for kind in ("rejected", "unverified"):
        for step, text, hover in drawn[kind]:
            assert text == UNKNOWN_MARK, (kind, step, text)
            assert "vLLM does not return the drafts it rejected" in hover and NO_NUMBERS in hover
            assert "q (draft prob)" not in hover and "p (target prob)" not in hover
    trace = vllm_trace("long")
    kept = [(step.index, html.escape(short(token.text), quote=False)) for step in trace.steps for token in step.emitted if token.kind == "accepted"]
    assert [(step, text) for step, text, _ in drawn["accepted"]] == kept and len(kept) == sum(ACCEPTED)
    assert all(NO_NUMBERS in hover for kind in ("recovered", "bonus") for _, _, hover in drawn[kind])


def with_question_mark(trace: Trace) -> tuple[Trace, int]:
    """The trace with its first accepted draft's token text made '?' (a real token: vLLM returned it)."""
    step = next(step for step in trace.steps if step.num_accepted and step.num_accepted < step.k)
    draft = dataclasses.replace(step.draft[0], text="?")
    emitted = (dataclasses.replace(step.emitted[0], text="?"), *step.emitted[1:])
    changed = dataclasses.replace(step, draft=(draft, *step.draft[1:]), emitted=emitted)
    return dataclasses.replace(trace, steps=tuple(changed if s is step else s for s in trace.steps)), step.index


def test_an_accepted_question_mark_does_not_look_like_a_draft_vllm_did_not_return():
    trace, index = with_question_mark(vllm_trace("long"))
    figure = timeline_figure(trace)
    drawn = cells(figure)
    assert (index, "?") in [(step, text) for step, text, _ in drawn["accepted"]]
    unknown = [text for kind in ("rejected", "unverified") for step, text, _ in drawn[kind] if step == index]
    assert unknown and set(unknown) == {UNKNOWN_MARK} != {"?"}
    legend = [bar.name for bar in figure.data if bar.meta == "unknown"]
    assert legend == [f"{UNKNOWN_MARK} not returned by vLLM (colour: its verdict)"]
    detail = render(trace, "", selected=index).detail
    assert "<span class='sv-tok sv-accepted'>?</span>" in detail
    assert f"<span class='sv-tok sv-rejected sv-unknown' title='vLLM does not return the drafts it rejected: drawn as " \
           f"&#x27;{UNKNOWN_MARK}&#x27;.'>{UNKNOWN_MARK}</span>" in detail
    own = timeline_figure(make_trace([2, 3]))                               # SpecViz's own: every draft known
    assert "unknown" not in [bar.meta for bar in own.data]


def test_reconstructed_ngram_drafts_are_marked_as_rebuilt():
    trace = ngram_trace()
    rebuilt = [(step.index, draft.text) for step in trace.steps for draft in step.draft if draft.origin == "reconstructed"]
    assert rebuilt, "the fixture must hold a reconstructed draft"
    drawn = [cell for kind in ("rejected", "unverified") for cell in cells(timeline_figure(trace))[kind]]
    for index, text in rebuilt:
        step, label, hover = next(cell for cell in drawn if cell[0] == index and cell[1] == "≈" + text)
        assert "rebuilt by SpecViz with vLLM's own n-gram lookup rule" in hover
    detail = render(trace, "", selected=rebuilt[0][0]).detail
    assert f">≈{rebuilt[0][1]}</span><br><small>reconstructed</small>" in detail


def test_the_step_detail_says_why_there_are_no_numbers():
    trace = vllm_trace("long")
    for step in trace.steps[1:]:
        detail = render(trace, "", selected=step.index).detail
        assert NO_NUMBERS in detail and "draw u</th>" not in detail
        assert "vLLM does not time its draft and verify phases" in detail and "verify 0.0 ms" not in detail
        assert "draft: not reported by vLLM" in detail and "n-gram" not in detail
        if step.num_accepted < step.k:
            assert f"vLLM does not return the drafts it rejected: drawn as &#x27;{UNKNOWN_MARK}&#x27;." in detail
            assert "<span class='sv-tok sv-rejected sv-unknown' title=" in detail and f">{UNKNOWN_MARK}</span>" in detail


def test_a_sampled_vllm_rejection_names_vllms_test_not_a_blank_residual():
    trace = vllm_trace("sampled")
    step = next(step for step in trace.steps if step.rejected_at is not None)
    detail = render(trace, "", selected=step.index).detail
    assert "rejected by vLLM&#x27;s own test of u against min(1, p/q), whose numbers it does not return" in detail
    assert f"vLLM drew <span class='sv-tok sv-recovered'>{step.emitted[-1].text}</span> in its place" in detail
    assert "did not record the residual" not in detail and "min(1, p/q)</th>" not in detail


def test_the_cards_name_the_engine_its_k_and_dtype_and_claim_no_exactness():
    metrics = render(vllm_trace(), "").metrics
    assert "<div class='sv-card-label'>engine</div><div class='sv-card-value'>vLLM 0.32.0</div>" in metrics
    assert "k = 3 is the server&#x27;s setting" in metrics
    assert ("vLLM 0.32.0 at http://127.0.0.1:8011 · target /tmp/vllm-dev/pair/target (float32) · draft model (the server’s)"
            " · k = 3, the server&#x27;s setting · greedy") in metrics
    assert "SpecViz&#x27;s exactness guarantees cover its own engine, not this one" in metrics
    assert "exact up to float rounding" not in metrics and "predicted speedup" not in metrics
    own = render(make_trace([2, 3]), "").metrics                           # SpecViz's own runs: as before
    assert "engine</div>" not in own and "the server" not in own


def test_the_acceptance_charts_agree_with_the_servers_counts():
    trace = vllm_trace("long")
    verify_steps = len(ACCEPTED)
    by_position = position_figure(trace).data[0].y
    for position in range(K):        # accepted at d(i+1) among the steps that reached it, from vLLM's own array
        reached = sum(accepted >= position for accepted in ACCEPTED)
        assert abs(by_position[position] - sum(accepted > position for accepted in ACCEPTED) / reached) < 1e-9
    histogram = histogram_figure(trace).data[0]
    counts = [round(share * verify_steps) for share in histogram.y]        # shares of the steps that verified
    assert counts == FINAL_METRICS["acceptance_histogram"] == list(histogram.customdata)   # vLLM's own histogram
    assert len(trace.steps) - verify_steps == 1                              # the prefill's step, left out


def test_a_vllm_trace_exports_uploads_and_draws_the_same():
    trace = vllm_trace()
    handlers = Handlers(FakeRunner())
    uploaded = dict(zip(NAMES, handlers.upload(trace.to_json().encode(), False, None)))
    assert isinstance(uploaded["trace"], Trace) and uploaded["trace"].config.engine == "vllm 0.32.0"
    assert cells(uploaded["timeline"]) == cells(timeline_figure(trace, selected_step=0))
    assert "vLLM 0.32.0" in uploaded["metrics"]
    files = handlers.export(trace, 3)
    exported = next(path for path in files if path.endswith(".json"))
    with open(exported, encoding="utf-8") as handle:
        assert Trace.from_json(handle.read()).to_dict() == trace.to_dict()       # the export reads back as it was


def test_a_live_vllm_run_draws_before_its_final_counts_arrive():
    live = vllm_trace("sampled", complete=False, chunks=6)
    views = render(live, "running", live=True)
    assert not live.complete and "incomplete" in views.output and UNKNOWN_MARK in str(cells(views.timeline)["rejected"])
