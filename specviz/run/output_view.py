"""Output text highlighted by token origin, and the run's metrics, as escaped HTML. A run on another
engine (a vLLM server) gets a card naming it, its own config line and no exactness claim of SpecViz's."""

from __future__ import annotations

from html import escape

from engine.config import MAX_K, NGRAM_DRAFTER
from engine.runtime.kernel_names import describe_kernel, target_dtype_words
from engine.metrics import (TreeCounts, expected_speedup, expected_tokens_per_step, steady_speedup, tree_counts,
                            verify_cost)
from engine.formats.trace import Trace
from specviz.other_engine import config_words, cut_note, engine_name, no_guarantee, no_numbers, split_words
from specviz.quantities import (ACCEPTANCE_RATE, ALPHA, NODE_ACCEPTANCE, TOKENS_PER_STEP, Quantity, alpha_text,
                                shown_alpha, speed_note_html)
from specviz.style import kind_labels
from specviz.tokens import formatted, percent

ORIGINS = ("accepted", "recovered", "bonus")
PREDICTED_TIP = ("Leviathan et al.'s expected speedup: the tokens a step emits on average, E, over what a step costs in "
                 "target-only tokens, k draft tokens and one verify forward.")


def output_html(trace: Trace | None, selected_step: int | None = None) -> str:
    """The generated text, each token a span marked by origin (accepted draft, recovered, bonus: a colour
    and an underline style); the tokens the step `selected_step` (an index) emitted are outlined."""
    if trace is None:
        return "<div class='sv-output sv-empty'>The generated text appears here.</div>"
    labels = kind_labels(trace.config.is_tree)
    legend = "".join(f"<span class='sv-out sv-{kind}'>{escape(labels[kind])}</span>" for kind in ORIGINS)
    legend += "<span class='sv-out sv-accepted sv-selected'>selected step</span>" if selected_step is not None else ""
    spans = "".join(
        f"<span class='sv-out sv-{token.kind}{' sv-selected' if step.index == selected_step else ''}' "
        f"title='step {step.index}: {escape(labels[token.kind])}'>{escape(token.text)}</span>"
        for step in trace.steps for token in step.emitted)
    state = "" if trace.complete else "<span class='sv-badge sv-warn'>incomplete: stopped or still running</span>"
    prompt = escape(trace.prompt.text)
    wrapped = "" if trace.config.raw else ", counted inside the model's chat template"
    generated = sum(step.num_emitted for step in trace.steps)
    return (f"<div class='sv-output'><div class='sv-output-head'>Generated output ({generated} "
            f"token{'s' * (generated != 1)}, each marked by where it came from)</div>"
            f"<div class='sv-legend'>{legend}{state}</div>"
            f"<div class='sv-text'>{spans or '<span class=sv-muted>(no tokens yet)</span>'}</div>"
            f"<details class='sv-prompt'><summary>The prompt: the input, not generated "
            f"({len(trace.prompt.token_ids)} tokens{wrapped})</summary><pre>{prompt}</pre></details></div>")


def metrics_html(trace: Trace | None) -> str:
    """Cards: acceptance rate r, tokens per step τ, target forwards, speed, predicted and measured speedup.
    A tree run's cards count nodes (drafted, every one checked; tried by the walk) and path tokens."""
    if trace is None:
        return "<div class='sv-metrics sv-empty'>Metrics appear after the first step.</div>"
    summary = trace.summary
    max_k = max((step.k for step in trace.steps), default=trace.config.k)
    trees = tree_counts(trace.steps)
    cards = _tree_cards(trace, trees) if trees is not None else _chain_cards(trace, max_k)
    if trace.config.is_external:
        cards.insert(0, metric_card("engine", engine_name(trace.config),
                                    f"k = {trace.config.k} is the server's setting. {no_numbers(trace.config)}"))
    cards += [
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
    config = config_words(trace.config) if trace.config.is_external else _config_line(trace)
    return (f"<div class='sv-metrics'><div class='sv-cards'>{''.join(cards)}</div>"
            f"{speed_note_html()}{_baseline_badge(trace)}<div class='sv-config'>{escape(config)}</div></div>")


def _chain_cards(trace: Trace, max_k: int) -> list[str]:
    """r (accepted / drafted) and τ, with the i.i.d. model's E at this run's α beside τ."""
    summary = trace.summary
    alpha = None if summary.estimated_alpha is None else shown_alpha(summary.estimated_alpha)
    model = (f"; at {ALPHA.symbol} = {alpha_text(alpha)} the i.i.d. model expects E = (1 − α^(k+1)) / (1 − α) = "
             f"{expected_tokens_per_step(alpha, max_k):.2f}") if alpha is not None else ""
    cards = [
        metric_card("", percent(summary.acceptance_rate),
                    f"{summary.accepted} of {summary.drafted} drafted tokens accepted (drafts after a rejected one "
                    "count as drafted, never checked)", quantity=ACCEPTANCE_RATE),
        metric_card("", formatted(summary.mean_accepted_length, "{:.2f}"),
                    f"accepted drafts + 1 recovered or bonus token per step that verified drafts, one target forward "
                    f"each, so at most k + 1 = {max_k + 1}{model}{left_out_note(trace)}{cut_note(trace)}",
                    quantity=TOKENS_PER_STEP),
    ]
    if alpha is not None:
        cards.append(metric_card("", alpha_text(alpha),
                                 "Σ min(p, q) at each drafted position, averaged: the chance a draft is accepted, "
                                 "expected from the two models' probabilities (the i.i.d. model's parameter)",
                                 quantity=ALPHA))
    return cards


def _tree_cards(trace: Trace, trees: TreeCounts) -> list[str]:
    """A tree run counts nodes, not a chain's drafts: drafted (all checked), tried by the walk, accepted."""
    summary = trace.summary
    per_step = trees.nodes / trees.steps
    return [
        metric_card("tree nodes drafted", f"{per_step:.1f} a step",
                    f"{trees.nodes} nodes in {trees.steps} steps, every one checked by its step's one target forward; "
                    f"the walk tried {trees.tried} of them (the walk never reached the others)"),
        metric_card("", percent(trees.acceptance_rate),
                    f"{trees.accepted} path tokens accepted of {trees.nodes} nodes drafted "
                    f"({trees.accepted / trees.steps:.2f} a step); not the chain's acceptance rate r: a tree drafts several "
                    "candidates for a position and at most one is accepted", quantity=NODE_ACCEPTANCE),
        metric_card("", formatted(summary.mean_accepted_length, "{:.2f}"),
                    f"the accepted path + 1 recovered or bonus token per step, one target forward each"
                    f"{left_out_note(trace)}", quantity=TOKENS_PER_STEP),
    ]


def left_out_note(trace: Trace) -> str:
    """'; 2 steps that drafted nothing are left out (…)': the steps τ does not count, when there are any."""
    count = trace.summary.undrafted_steps
    if not count:
        return ""
    ngram = trace.config.drafter == NGRAM_DRAFTER
    if trace.config.is_external:        # vLLM's prefill step drafts nothing; its n-gram lookups may find no match
        why = "the prefill's token" + (", and n-gram lookups that found no match" if ngram and count > 1 else "")
    else:                               # SpecViz's own first step drafts; a last step with one token left does not
        why = ("n-gram lookups without a match, or " if ngram else "") + "the token budget's last token"
    return (f"; {count} step{'s' * (count != 1)} that drafted nothing ({why}) {'are' if count != 1 else 'is'} left "
            "out: one token each, nothing verified, as vLLM counts")


def _predicted_card(trace: Trace, k: int) -> str:
    """Leviathan et al.'s speedup, E / ((k c + 1) v), from this run's α, c and, when a target-only run
    was timed, its measured verify cost v (else v = 1, their assumption), beside the speedup the
    steps after the first reached: the measured card also pays for the prompt's prefill."""
    summary = trace.summary
    alpha, c = shown_alpha(summary.estimated_alpha), round(summary.cost_ratio, 2)   # the digits shown below
    v = verify_cost(trace.steps, summary.baseline)
    v = None if v is None else round(v, 2)
    at_one = expected_speedup(alpha, k, c)
    terms = (f"(1 − α^(k+1)) / ((1 − α)(k·c + 1)·v), Leviathan et al., with {ALPHA.name} α = Σ min(p, q) = "
             f"{alpha_text(alpha)}, k = {k}, c = {c:.2f} (a draft token's time / a verify forward's, prefill step left out)")
    if v is None and trace.device_costs is not None:
        costs = trace.device_costs
        v = round(costs.verify_cost(k), 2)
        return metric_card("predicted speedup", f"{at_one / v:.2f}×",
                           f"{terms} and v = {v:.2f}, a verify of k + 1 tokens / one target token as measured on this "
                           f"{costs.device} when the pair loaded (Leviathan et al. take v = 1: {at_one:.2f}×). Tick "
                           "'compare with target-only' to measure the speedup", PREDICTED_TIP, wide=True)
    if v is None:
        return metric_card("predicted speedup", f"{at_one:.2f}×",
                           f"{terms} and v = 1 (their assumption: a verify forward costs one target-only token)",
                           PREDICTED_TIP, wide=True)
    steady = steady_speedup(trace.steps, summary.baseline)
    later = f"; the steps after the first ran at {steady:.2f}×" if steady is not None else ""
    return metric_card("predicted speedup", f"{at_one / v:.2f}×",
                       f"{terms} and v = {v:.2f}, this run's verify forward of up to k + 1 tokens / one target-only "
                       f"token (Leviathan et al. take v = 1: {at_one:.2f}×){later}. The measured speedup also "
                       "pays for step 0, which prefills the prompt in both models", PREDICTED_TIP, wide=True)


def metric_card(label: str, value: str, note: str, tip: str = "", quantity: Quantity | None = None,
                wide: bool = False) -> str:
    """One figure of a run as a card: label, value, a note under it, and a tooltip (`tip`). A card that
    shows a named `quantity` (specviz/quantities.py) takes its label and tooltip from it; a `wide` one (a
    long note) takes a whole row of the cards' grid."""
    if quantity is not None:
        label, tip = quantity.label, quantity.tip
    title = f" title='{escape(tip)}'" if tip else ""
    marked = f" data-quantity='{quantity.key}'" if quantity is not None else ""
    return (f"<div class='sv-card{' sv-card-wide' if wide else ''}'{title}{marked}><div class='sv-card-label'>{escape(label)}</div>"
            f"<div class='sv-card-value'>{escape(value)}</div><div class='sv-card-note'>{escape(note)}</div></div>")


def _baseline_badge(trace: Trace) -> str:
    """What the settings guarantee (engine.config.Exactness, the one rule) and, when a target-only
    run was compared, what the check found; both read the rule, so they never contradict."""
    baseline, exactness = trace.summary.baseline, trace.config.exactness
    if trace.config.is_external:
        split = split_words(trace)      # provisional or unsplit steps say so first
        return ((f"<div class='sv-note'><span class='sv-badge sv-warn'>{escape(split)}</span></div>" if split else "")
                + f"<div class='sv-note'><span class='sv-badge sv-info'>{escape(engine_name(trace.config))}</span> "
                f"<span class='sv-muted'>{escape(no_guarantee(trace.config))}</span></div>")
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
    dtype_words = target_dtype_words(config.target_dtype)
    dtype_words = f" · {dtype_words}" if dtype_words and config.is_greedy else ""
    return (f"target {config.target or '?'} ({config.target_dtype or '?'}) · {drafter} · {k} · {sampling}"
            f" · max {config.max_new_tokens} new tokens · seed {config.seed}{cache}{kernels}{dtype_words}")
