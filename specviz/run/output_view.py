"""Output text highlighted by token origin, and the run's metrics, as escaped HTML."""

from __future__ import annotations

from html import escape

from engine.config import MAX_K, NGRAM_DRAFTER
from engine.runtime.kernel_names import describe_kernel
from engine.metrics import (expected_speedup, expected_tokens_per_step, steady_speedup, verified_acceptance,
                            verify_cost)
from engine.formats.trace import Trace
from specviz.style import LABELS
from specviz.tokens import formatted, percent

ORIGINS = ("accepted", "recovered", "bonus")
TOKENS_PER_STEP_TIP = ("Tokens per step = accepted drafts + 1 (the recovered or bonus token the target adds), averaged "
                       "over steps: the tokens one target forward emits. vLLM calls this the mean acceptance length.")


def output_html(trace: Trace | None, selected_step: int | None = None) -> str:
    """The generated text, each token a span marked by origin (accepted draft, recovered, bonus: a colour
    and an underline style); the tokens the step `selected_step` (an index) emitted are outlined."""
    if trace is None:
        return "<div class='sv-output sv-empty'>The generated text appears here.</div>"
    legend = "".join(f"<span class='sv-out sv-{kind}'>{escape(LABELS[kind])}</span>" for kind in ORIGINS)
    legend += "<span class='sv-out sv-accepted sv-selected'>selected step</span>" if selected_step is not None else ""
    spans = "".join(
        f"<span class='sv-out sv-{token.kind}{' sv-selected' if step.index == selected_step else ''}' "
        f"title='step {step.index}: {escape(LABELS[token.kind])}'>{escape(token.text)}</span>"
        for step in trace.steps for token in step.emitted)
    state = "" if trace.complete else "<span class='sv-badge sv-warn'>incomplete: stopped or still running</span>"
    prompt = escape(trace.prompt.text)
    wrapped = "" if trace.config.raw else ": the text below inside the model's chat template, when it has one"
    return (f"<div class='sv-output'><div class='sv-legend'>{legend}{state}</div>"
            f"<details class='sv-prompt'><summary>Prompt ({len(trace.prompt.token_ids)} tokens{wrapped})</summary>"
            f"<pre>{prompt}</pre></details>"
            f"<div class='sv-text'>{spans or '<span class=sv-muted>(no tokens yet)</span>'}</div></div>")


def metrics_html(trace: Trace | None) -> str:
    """Cards: acceptance rate, tokens per step, tokens/s, forwards vs tokens, baseline comparison."""
    if trace is None:
        return "<div class='sv-metrics sv-empty'>Metrics appear after the first step.</div>"
    summary = trace.summary
    config = trace.config
    alpha = verified_acceptance(trace.steps)
    max_k = max((step.k for step in trace.steps), default=config.k)
    model = (f"; with a = {alpha:.2f}, the measured share of checked drafts accepted, the i.i.d. model predicts "
             f"{expected_tokens_per_step(alpha, max_k):.2f}") if alpha is not None else ""
    cards = [
        metric_card("acceptance rate", percent(summary.acceptance_rate),
                    f"{summary.accepted} of {summary.drafted} drafted tokens accepted"
                    + (f" ({percent(alpha)} of those the target checked)" if alpha is not None else "")),
        metric_card("tokens per step",
                    formatted(summary.mean_accepted_length, "{:.2f}"),
                    f"tokens emitted per step (one target forward each): accepted drafts + 1 recovered or bonus "
                    f"token, so up to k + 1 = {max_k + 1}{model}", TOKENS_PER_STEP_TIP),
        metric_card("target forwards", f"{summary.target_forwards}",
                    f"for {summary.new_tokens} tokens (target-only needs {summary.new_tokens})"),
        metric_card("speed", formatted(summary.tokens_per_s, "{:.1f} tok/s"),
                    f"{summary.wall_s:.2f} s wall time"),
    ]
    if summary.estimated_alpha is not None and summary.cost_ratio is not None:
        cards.append(_predicted_card(trace, max_k))
    if summary.baseline is not None:
        cards.append(metric_card("speedup vs target-only", formatted(summary.speedup, "{:.2f}×"),
                                 f"target-only: {summary.baseline.tokens_per_s:.1f} tok/s"))
    return (f"<div class='sv-metrics'><div class='sv-cards'>{''.join(cards)}</div>"
            f"{_baseline_badge(trace)}<div class='sv-config'>{escape(_config_line(trace))}</div></div>")


def _predicted_card(trace: Trace, k: int) -> str:
    """Leviathan et al.'s speedup, E / ((k c + 1) v), from this run's α, c and, when a target-only run
    was timed, its measured verify cost v (else v = 1, their assumption), beside the speedup the
    steps after the first reached: the measured card also pays for the prompt's prefill."""
    summary = trace.summary
    alpha, c = summary.estimated_alpha, summary.cost_ratio
    v = verify_cost(trace.steps, summary.baseline)
    at_one = expected_speedup(alpha, k, c)
    if v is None and trace.device_costs is not None:
        costs = trace.device_costs
        v = costs.verify_cost(k)
        return metric_card("predicted speedup", f"{at_one / v:.2f}×",
                           f"(1 − α^(k+1)) / ((1 − α)(k·c + 1)·v), Leviathan et al., with "
                           f"{_alpha_words(trace.config.is_greedy, alpha)}, k = {k}, c = {c:.2f} (a draft token's time "
                           f"/ a verify forward's, prefill step left out) and v = {v:.2f}, a verify of k + 1 tokens / "
                           f"one target token as measured on this {costs.device} when the pair loaded (Leviathan et "
                           f"al. take v = 1: {at_one:.2f}×). Tick 'compare with target-only' to measure the speedup")
    terms = (f"(1 − α^(k+1)) / ((1 − α)(k·c + 1)·v), Leviathan et al., with "
             f"{_alpha_words(trace.config.is_greedy, alpha)}, k = {k}, c = {c:.2f} (a draft token's time / a "
             "verify forward's, prefill step left out)")
    if v is None:
        return metric_card("predicted speedup", f"{at_one:.2f}×",
                           f"{terms} and v = 1 (their assumption: a verify forward costs one target-only token)")
    steady = steady_speedup(trace.steps, summary.baseline)
    later = f"; the steps after the first ran at {steady:.2f}×" if steady is not None else ""
    return metric_card("predicted speedup", f"{at_one / v:.2f}×",
                       f"{terms} and v = {v:.2f}, this run's verify forward of up to k + 1 tokens / one target-only "
                       f"token (Leviathan et al. take v = 1: {at_one:.2f}×){later}. The measured speedup also "
                       "pays for step 0, which prefills the prompt in both models")


def _alpha_words(greedy: bool, alpha: float) -> str:
    """α as the predicted-speedup card defines it: expected, over every drafted position (checked or
    not), so it differs from the measured a of the tokens-per-step card, which counts checked drafts."""
    if greedy:
        return (f"α = {alpha:.2f}, the share of all drafted positions, checked or not, where the draft's argmax is "
                "the target's (greedy's Σₓ min(p(x), q(x)))")
    return (f"α = Σₓ min(p(x), q(x)) = {alpha:.2f}, the chance a draft is accepted expected from the two "
            "distributions, averaged over all drafted positions, checked or not")


def metric_card(label: str, value: str, note: str, tip: str = "") -> str:
    """One figure of a run as a card: label, value, a note under it, and a tooltip (`tip`)."""
    title = f" title='{escape(tip)}'" if tip else ""
    return (f"<div class='sv-card'{title}><div class='sv-card-label'>{escape(label)}</div>"
            f"<div class='sv-card-value'>{escape(value)}</div><div class='sv-card-note'>{escape(note)}</div></div>")


def _baseline_badge(trace: Trace) -> str:
    """What the settings guarantee (engine.config.Exactness, the one rule) and, when a target-only
    run was compared, what the check found; both read the rule, so they never contradict."""
    baseline, exactness = trace.summary.baseline, trace.config.exactness
    note = f"<span class='sv-muted'>{escape(exactness.note)}</span>"
    if baseline is None:
        return f"<div class='sv-note'><span class='sv-badge sv-info'>{escape(exactness.label)}</span> {note}</div>"
    if baseline.identical:
        return (f"<div class='sv-note'><span class='sv-badge sv-ok'>✓ identical to the target-only run (checked)"
                f"</span> {note}</div>")
    where = _first_difference_words(trace)
    if exactness.token_for_token:
        badge = "<span class='sv-badge sv-bad'>✗ differs from the target-only run (checked)</span>"
        why = ("<span class='sv-muted'>Greedy with a float32 target allows this only where float rounding flips "
               "a near tie; anything else is a bug: please report it.</span>")
        return f"<div class='sv-note'>{badge} {why}{where}</div>"
    return (f"<div class='sv-note'><span class='sv-badge sv-warn'>≠ differs from the target-only run (checked; "
            f"allowed here: {escape(exactness.label)})</span> {note}{where}</div>")


def _first_difference_words(trace: Trace) -> str:
    """Where a greedy run first left target-only decoding, and the target's top-2 margin there."""
    difference = trace.summary.baseline.first_difference
    if difference is None:
        return ""
    near = "a near tie" if difference.near_tie else "not a near tie"
    dtype = trace.config.target_dtype or "?"
    return (f" <span class='sv-first-difference'>It first differs at new token {difference.token + 1}, emitted in "
            f"step {difference.step}: there the target's two likeliest tokens are {difference.margin:.3g} apart in "
            f"logit ({near}). The verify forward scores k + 1 tokens at once and rounds ({dtype}) differently from "
            "one-token decoding, enough to swap two tokens that close; a float32 target decodes identically.</span>")


def _config_line(trace: Trace) -> str:
    config = trace.config
    drafter = ("n-gram prompt lookup" if config.drafter == NGRAM_DRAFTER
               else f"draft {config.draft or '?'} ({config.draft_dtype or '?'})")
    sampling = "greedy" if config.is_greedy else (f"temperature {config.temperature:g}, top-p {config.top_p:g}"
                                                   f", top-k {config.top_k or 'off'}")
    k = f"adaptive k from {config.k}, at most {min(2 * config.k, MAX_K)}" if config.adaptive_k else f"k = {config.k}"
    kernels = "".join(f" · {role} kernel: {describe_kernel(name)}" for role, name in
                      (("target", config.target_kernel), ("draft", config.draft_kernel)) if name)
    cache = (" · static KV cache (sized once; a cut moves its write pointer)" if config.cache == "static"
             else " · dynamic KV cache")
    return (f"target {config.target or '?'} ({config.target_dtype or '?'}) · {drafter} · {k} · {sampling}"
            f" · max {config.max_new_tokens} new tokens · seed {config.seed}{cache}{kernels}")
