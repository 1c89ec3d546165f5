"""Step detail, output text and metrics HTML: content from the trace, everything escaped."""

from __future__ import annotations

import dataclasses
from html import escape, unescape

import pytest

from engine.metrics import BaselineStats
from engine.records import CacheLengths, EmittedToken
from engine.config import Exactness, SpecConfig
from specviz.quantities import ACCEPTANCE_RATE, TOKENS_PER_STEP
from specviz.run.handlers import Handlers
from specviz.run.output_view import metrics_html, output_html
from specviz.run.step_detail import cache_sentence, find_step, step_detail_html
from trace_factory import html_trace, make_step, make_trace, trace_from_steps, with_stale


def test_cache_sentence_in_words():
    assert cache_sentence("target", CacheLengths(48, 53, 3, 50, 0)) == "target cache 48 → 53 → 50: 3 rejected positions cut"
    assert cache_sentence("draft", CacheLengths(10, 14, 0, 14, 0)) == "draft cache 10 → 14: nothing to cut"


def test_cache_sentence_says_what_a_lab_mode_left_in_place():
    previous = CacheLengths(58, 64, 0, 64, 7)
    assert (cache_sentence("target", CacheLengths(64, 70, 0, 70, 12), previous, "none")
            == "target cache 64 → 70: 5 rejected positions left in place, 12 stale in total")
    assert (cache_sentence("target", CacheLengths(64, 70, 0, 70, 12), previous, "zero_fill")
            == "target cache 64 → 70: 5 rejected positions zero-filled in place, 12 stale in total")
    assert (cache_sentence("target", CacheLengths(64, 70, 0, 70, 7), previous, "none")
            == "target cache 64 → 70: nothing to cut, 7 stale in total")
    assert cache_sentence("target", CacheLengths(0, 52, 0, 52, 5), None, "none").endswith(": 5 rejected positions "
                                                                                       "left in place, 5 stale in total")
    unknown = cache_sentence("target", CacheLengths(52, 58, 5, 58, None), None, "none")     # a trace/1 record, as given
    assert unknown == "target cache 52 → 58 → 58: 5 rejected positions cut; stale positions unknown (a specviz.trace/1 record)"


def test_step_detail_spells_out_stale_positions_of_a_lab_run():
    trace = with_stale(make_trace([4, 1, 0]))
    html = unescape(step_detail_html(trace, 2))
    assert "target cache 21 → 26<" in html and "draft cache 20 → 24<" in html
    assert ("d1 was rejected and d2–d4 after it were never checked, but this lab mode removes nothing: 4 positions "
            "left in place, now stale (7 stale in total); a correct engine would cut k − accepted = 4 − 0 = 4.") in html
    assert "3 positions left in place, now stale (5 stale in total)" in html
    assert "Before: 21 positions (18 of committed text + 3 stale) for 19 committed tokens" in html
    zero = unescape(step_detail_html(with_stale(make_trace([4, 1, 0]), True), 1))
    assert "2 positions zero-filled in place, now stale (2 stale in total)" in zero


def test_step_detail_shows_p_q_ratio_draw_and_residual_at_a_sampled_rejection():
    trace = make_trace([4, 1], sampling=True)
    html = unescape(step_detail_html(trace, 1))
    assert "Step 1" in html and "1 of 4 drafts accepted" in html
    assert "0.600" in html and "0.200" in html and "0.333" in html and "0.433" in html
    assert "u = 0.433 ≥ 0.333: reject" in html and "min(1, p/q) = 0.333" in html
    assert "✗ rejected" in html and "– unverified" in html
    assert "residual" in html and "norm(max(0, p − q))" in html and "0.550" in html
    assert "the residual's most likely one (0.550)" in html      # the sum chart: tests/test_ui_residual.py
    assert "1 − Σ min(p, q) = 1 − 0.700 = 0.300" in html
    assert "target cache 16 → 21 → 18<" in html and "so 3 positions are cut: k − accepted = 4 − 1 = 3." in html
    assert "draft cache 15 → 20 → 18<" in html
    assert "so 2 positions are cut: max(0, k − accepted − 1) = max(0, 4 − 1 − 1) = 2" in html
    assert "Carryover" in html and "sv-carryover" in html        # step 1 gets d4 + bonus of step 0
    assert "the previous step's last draft d4" in html and "the previous step's bonus token" in html


def test_step_detail_greedy_rejection_names_the_argmax_and_a_full_accept_the_bonus():
    trace = make_trace([4, 2])
    assert "target's argmax" in step_detail_html(trace, 1)
    full = step_detail_html(trace, 0)
    assert "All 4 drafts accepted" in full and "bonus" in full
    assert "draws" not in full and "unused" not in full
    rejected = step_detail_html(trace, 1)          # d3 rejected: d4 and the unreached +1 were computed after a rejected draft
    assert rejected.count("after a rejected draft: unused") == 2


def test_step_detail_escapes_tokens_and_clamps_the_index():
    trace = html_trace()
    html = step_detail_html(trace, 0)
    assert "&lt;script&gt;" in html and "<script>" not in html
    assert find_step(trace, 99).index == 1 and find_step(trace, -5).index == 0 and find_step(trace, None).index == 1
    assert "No step" in step_detail_html(None, 0)


def test_output_html_marks_origins_and_escapes():
    trace = html_trace()
    html = output_html(trace)
    assert "&lt;img src=x onerror=alert(1)&gt;" in html and "<img" not in html
    assert "&lt;b&gt;bold?&lt;/b&gt; &amp; more" in html
    emitted = [t for s in trace.steps for t in s.emitted]
    for kind in ("accepted", "recovered", "bonus"):
        assert html.count(f"class='sv-out sv-{kind}' title=") == sum(t.kind == kind for t in emitted)
    assert "sv-selected" not in html
    selected = output_html(trace, 1)
    assert selected.count("sv-selected' title='step 1:") == trace.steps[1].num_emitted
    assert "sv-selected' title='step 0" not in selected
    assert "incomplete" not in html
    assert "incomplete" in output_html(make_trace([1], complete=False))
    generated = sum(step.num_emitted for step in trace.steps)      # the output is named, the prompt comes after it
    assert f"Generated output ({generated} tokens, each marked by where it came from)" in html
    assert (f"The prompt: the input, not generated ({len(trace.prompt.token_ids)} tokens, counted inside the "
            "model's chat template)") in html
    assert html.index("Generated output") < html.index("class='sv-text'") < html.index("The prompt: the input")
    raw = dataclasses.replace(trace, config=trace.config.replace(raw=True))
    assert f"The prompt: the input, not generated ({len(trace.prompt.token_ids)} tokens)" in output_html(raw)


def test_metrics_without_and_with_baseline():
    trace = make_trace([4, 1, 0, 2])
    html = metrics_html(trace)
    assert "43.8%" in html                                  # 7 of 16 drafted
    assert "7 of 16 drafted" in html and "for 11 tokens" in html
    assert "predicted speedup" in html and "expected acceptance α = Σ min(p, q) = 0.700" in html
    assert "c = 0.30" in html and "a = " not in html                    # one acceptance letter: α (issue #27)
    assert "at α = 0.700 the i.i.d. model expects E = " in html
    assert ">acceptance rate r<" in html and ">tokens per step τ<" in html and "mean accepted length" not in html
    assert escape(TOKENS_PER_STEP.tip, quote=True) in html and escape(ACCEPTANCE_RATE.tip, quote=True) in html
    assert "vLLM&#x27;s mean acceptance length" in html and "accepted drafts + 1" in html
    assert "speedup vs target-only" not in html and "(checked)" not in html
    assert "exact up to float rounding at near ties</span>" in html and escape(Exactness.UP_TO_ROUNDING.note) in html
    same = make_trace([4, 1], baseline=BaselineStats(tokens_per_s=10.0, identical=True, wall_s=1.0))
    html = metrics_html(same)
    assert "speedup vs target-only" in html and "✓ identical to the target-only run (checked)" in html
    unexpected = make_trace([4, 1], baseline=BaselineStats(tokens_per_s=10.0, identical=False, exact_expected=True))
    assert "✗ differs from the target-only run (checked)" in metrics_html(unexpected)
    assert "near tie" in metrics_html(unexpected)
    differs = make_trace([4, 1], target_dtype="bfloat16",
                         baseline=BaselineStats(tokens_per_s=10.0, identical=False, exact_expected=False))
    html = metrics_html(differs)
    assert "(checked; allowed here: near ties may flip)" in html and escape(Exactness.NEAR_TIES_MAY_FLIP.note) in html
    assert "near ties may flip</span>" in metrics_html(make_trace([4, 1], target_dtype="bfloat16"))
    assert "lossless in law</span>" in metrics_html(make_trace([4, 1], sampling=True))


def test_one_exactness_rule_for_every_setting():
    greedy = SpecConfig(target_dtype="float32")
    assert greedy.exactness is Exactness.UP_TO_ROUNDING and greedy.exactness.token_for_token
    for draft_dtype in ("int8", "bfloat16", "float16", "auto"):               # the draft never matters
        assert greedy.replace(draft_dtype=draft_dtype).exactness is Exactness.UP_TO_ROUNDING
    assert greedy.replace(carryover=False).exactness is Exactness.UP_TO_ROUNDING           # the draft's cache only
    assert greedy.replace(draft_temperature=1.0).exactness is Exactness.UP_TO_ROUNDING     # sampled drafting
    for target_dtype in ("bfloat16", "float16"):
        assert greedy.replace(target_dtype=target_dtype).exactness is Exactness.NEAR_TIES_MAY_FLIP
    assert greedy.replace(temperature=0.7).exactness is Exactness.IN_LAW
    for cutoff_mode in ("none", "zero_fill"):                                   # the target's cache keeps rejects
        assert greedy.replace(cutoff_mode=cutoff_mode).exactness is Exactness.NOT_GUARANTEED
        assert greedy.replace(cutoff_mode=cutoff_mode, temperature=0.7).exactness is Exactness.NOT_GUARANTEED
    assert [level.token_for_token for level in Exactness] == [False, True, False, False]


def test_the_note_under_the_controls_reads_the_rule_and_never_calls_an_int8_draft_bfloat16():
    assert Handlers.exactness("float32", 0.0) == Exactness.UP_TO_ROUNDING.note
    assert Handlers.exactness("bfloat16", 0) == Exactness.NEAR_TIES_MAY_FLIP.note
    assert Handlers.exactness("float32", 0.8) == Exactness.IN_LAW.note
    assert Handlers.exactness("float32", 99) == ""                          # out of range: Run says why
    from specviz.run.handlers import SERVER_EXACTNESS
    from specviz.serving.runner import VLLM_SERVER
    assert Handlers.exactness("float32", 0.0, VLLM_SERVER) == SERVER_EXACTNESS           # the server decides
    assert Handlers.exactness("float32", 0.0, "qwen-coder") == Exactness.UP_TO_ROUNDING.note
    assert "int8" in Exactness.UP_TO_ROUNDING.note
    assert not any("bfloat16 draft" in level.note for level in Exactness)


def test_step_detail_of_an_ngram_step_without_a_match():
    from trace_factory import make_steps, trace_from_steps
    steps = make_steps([2, 0], k=[4, 0], ngram=True)
    trace = trace_from_steps(steps, ngram=True)
    html = step_detail_html(trace, 1)
    assert "no drafts (plain target step)" in html and "n-gram drafter has no model to feed" in html
    assert "no drafts this step: the target&#x27;s argmax here" in html and "all drafts accepted" not in html
    assert "draft: n-gram lookup, no cache" in html


def test_a_lab_trace_in_the_run_tab_says_one_thing_about_exactness():
    """Every text about exactness reads SpecConfig.exactness: one note, never two that disagree,
    even when an older file's baseline carries an exact_expected that contradicts its config."""

    from engine.formats.trace import Trace
    from specviz.assets import ASSETS_DIR
    for key in ("A", "B", "C", "D", "sampled-draft"):
        trace = Trace.load(ASSETS_DIR / "traces" / f"lab-{key}.json")
        html = metrics_html(trace) + output_html(trace) + step_detail_html(trace, 0)
        expected = trace.config.exactness
        assert escape(expected.note) in html, key
        assert not any(escape(level.note) in html for level in Exactness if level is not expected), key
        if trace.summary.baseline is not None and not trace.summary.baseline.identical:
            assert f"allowed here: {expected.label}" in html and "please report it" not in html
    lab_a = Trace.load(ASSETS_DIR / "traces" / "lab-A.json")
    contradicting = lab_a.with_baseline(dataclasses.replace(lab_a.summary.baseline, exact_expected=True))
    html = metrics_html(contradicting)
    assert "allowed here: not guaranteed" in html and "please report it" not in html
    assert escape(Exactness.UP_TO_ROUNDING.note) not in html


def test_the_predicted_speedup_uses_the_measured_verify_cost_and_names_the_prefill():
    """Hand-computed oracle. Fake steps: 12 ms per draft token, 40 ms per verify, 12 k + 45 ms per step,
    α = 0.7, k = 4, so c = 12 / 40 = 0.30 and E = (1 − 0.7⁵) / 0.3 = 2.773; a target-only run at 20 tok/s
    is 50 ms per token, so v = 40 / 50 = 0.80. Leviathan et al. (v = 1): 2.773 / 2.2 = 1.26×; at the
    measured v: 1.26 / 0.8 = 1.58×. The steps after the first emit 2 + 1 + 3 = 6 tokens in 3 × 93 ms:
    21.5 tok/s, 1.08× the target-only run."""
    trace = make_trace([4, 1, 0, 2], baseline=BaselineStats(tokens_per_s=20.0, identical=True, wall_s=1.0))
    card = unescape(metrics_html(trace)).split("predicted speedup")[1].split("speedup vs target-only")[0]
    assert ">1.58×<" in card and "v = 0.80, this run's verify forward" in card and "take v = 1: 1.26×" in card
    assert "the steps after the first ran at 1.08×" in card and "also pays for step 0" in card
    alone = unescape(metrics_html(make_trace([4, 1, 0, 2]))).split("predicted speedup")[1]
    assert ">1.26×<" in alone and "v = 1 (their assumption" in alone and "steps after the first" not in alone


def _ended_at_eos(num_accepted: int, sampling: bool = False) -> str:
    """Step detail of a 5-draft step whose d2 is an accepted end-of-sequence token, with `num_accepted`
    drafts accepted by the verify forward (the rest of the output is cut at d2)."""
    step = make_step(1, 20, 5, num_accepted, sampling=sampling, eos=True)
    step = dataclasses.replace(step, emitted=tuple(EmittedToken(d.id, d.text, "accepted") for d in step.draft[:2]))
    first = make_step(0, 12, 4, 4, first=True, sampling=sampling)
    return unescape(step_detail_html(trace_from_steps([first, step], sampling=sampling), 1))


@pytest.mark.parametrize("sampling", [False, True], ids=["greedy", "sampled"])
def test_a_rejection_after_an_accepted_eos_is_not_said_to_emit_anything(sampling):
    page = _ended_at_eos(4, sampling)
    assert "Rejected at d5</b>, after the end-of-sequence token d2" in page and "neither is emitted" in page
    assert "emitted instead" not in page and "was drawn from the residual" not in page
    assert "after the EOS, so nothing is emitted" in page and "after the EOS: unused" in page
    assert page.count("after the EOS, so not kept") == 2                      # d3 and d4, accepted past d2


def test_all_drafts_accepted_past_an_eos_bring_no_bonus():
    page = _ended_at_eos(5)
    assert "All 5 drafts accepted</b>, but d2 is the end-of-sequence token" in page
    assert "as a bonus token for free" not in page
    assert "all drafts accepted, but the output ended at the EOS d2: not emitted" in page


def test_a_recovered_eos_and_a_plain_rejection_are_still_emitted():
    for eos in (True, False):
        step = make_step(1, 20, 5, 2, eos=eos)                 # the recovered token is the EOS, or no EOS at all
        page = unescape(step_detail_html(trace_from_steps([make_step(0, 12, 4, 4, first=True), step]), 1))
        assert "which is emitted instead (recovered)" in page and "after the EOS" not in page
