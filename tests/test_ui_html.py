"""Step detail, output text and metrics HTML: content from the trace, everything escaped."""

from __future__ import annotations

from engine.metrics import BaselineStats
from engine.records import CacheLengths
from specviz.exactness import exactness_note, is_exact
from specviz.output_view import metrics_html, output_html
from specviz.step_detail import cache_sentence, find_step, step_detail_html
from trace_factory import html_trace, make_trace


def test_cache_sentence_in_words():
    assert cache_sentence("target", CacheLengths(48, 53, 3, 50)) == "target cache 48 → 53 → 50: 3 rejected positions cut"
    assert cache_sentence("draft", CacheLengths(10, 14, 0, 14)).endswith("nothing to cut")


def test_step_detail_shows_p_q_ratio_draw_and_residual_at_a_sampled_rejection():
    trace = make_trace([4, 1], sampling=True)
    html = step_detail_html(trace, 1)
    assert "Step 1" in html and "1 of 4 drafts accepted" in html
    assert "0.600" in html and "0.200" in html and "0.333" in html and "0.433" in html
    assert "✗ rejected" in html and "– unverified" in html
    assert "residual" in html and "norm(max(0, p − q))" in html and "0.550" in html
    assert "target cache 16 → 21 → 18: 3 rejected positions cut" in html
    assert "draft cache 15 → 20 → 18: 2 rejected positions cut" in html
    assert "Carryover" in html and "sv-carryover" in html        # step 1 gets d4 + bonus of step 0


def test_step_detail_greedy_rejection_names_the_argmax_and_a_full_accept_the_bonus():
    trace = make_trace([4, 2])
    assert "target's argmax" in step_detail_html(trace, 1)
    full = step_detail_html(trace, 0)
    assert "All 4 drafts accepted" in full and "bonus" in full
    assert "draws" not in full


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
        assert html.count(f"class='sv-out sv-{kind}'") == sum(t.kind == kind for t in emitted)
    assert "incomplete" not in html
    assert "incomplete" in output_html(make_trace([1], complete=False))


def test_metrics_without_and_with_baseline():
    trace = make_trace([4, 1, 0, 2])
    html = metrics_html(trace)
    assert "43.8%" in html                                  # 7 of 16 drafted
    assert "7 of 16 drafted" in html and "for 11 tokens" in html
    assert "speedup vs target-only" not in html and "Greedy with a float32 target" in html
    assert "predicted speedup" in html and "α = Σ min(p, q) = 0.70" in html and "c = 0.30" in html
    same = make_trace([4, 1], baseline=BaselineStats(tokens_per_s=10.0, identical=True, wall_s=1.0))
    html = metrics_html(same)
    assert "speedup vs target-only" in html and "✓ identical to target-only output" in html
    differs = make_trace([4, 1], target_dtype="bfloat16",
                         baseline=BaselineStats(tokens_per_s=10.0, identical=False, exact_expected=False))
    html = metrics_html(differs)
    assert "allowed here" in html and "bfloat16 target" in html and "not guaranteed" in html


def test_exactness_note():
    assert is_exact("float32", 0.0) and not is_exact("bfloat16", 0.0) and not is_exact("float32", 0.7)
    assert "not guaranteed" in exactness_note("bfloat16", 0.0)
    assert "bfloat16 draft" in exactness_note("float32", 0.0)       # a bf16 draft keeps exactness
    assert "distribution" in exactness_note("float32", 0.8)


def test_step_detail_of_an_ngram_step_without_a_match():
    from trace_factory import make_steps, trace_from_steps
    steps = make_steps([2, 0], k=[4, 0], ngram=True)
    trace = trace_from_steps(steps, ngram=True)
    html = step_detail_html(trace, 1)
    assert "no drafts (plain target step)" in html and "n-gram drafter has no model to feed" in html
    assert "draft: n-gram lookup, no cache" in html
