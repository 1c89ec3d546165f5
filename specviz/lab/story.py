"""The Lab tab's sentences that read a stage's numbers: why its acceptance is what it is, and
what each cache holds after the selected step (stale and missing positions apart).

Every number comes from the traces (engine.lab.cache_positions reads the KV records), so
a planted wrong number shows up in tests/test_ui_lab.py.
"""

from __future__ import annotations

from html import escape

from engine.lab import LAB_STAGES, CachePositions, cache_positions, first_divergence
from engine.formats.trace import Trace
from specviz.figures.lab import words
from specviz.quantities import ACCEPTANCE_RATE
from specviz.run.step_detail import find_step
from specviz.tokens import percent

KEPT = {"none": "kept as they were", "zero_fill": "zero-filled in place", "truncate": "cut"}


def acceptance_note(key: str, trace: Trace, lab_traces: dict[str, Trace], reference: Trace | None) -> str:
    """One or two sentences: why this stage accepts what it does, against D (and the stage before)."""
    rate = trace.summary.acceptance_rate
    correct = reference.summary.acceptance_rate if reference is not None else None
    counts = cache_positions(trace)
    stale_from = next((step.index for step, (target, _) in zip(trace.steps, counts) if target.stale), None)
    if stale_from is None:
        text = (f"{ACCEPTANCE_RATE.title} = {percent(rate)}: every cache holds exactly the committed text, so each step's drafts "
                "are checked against the text both models really read.")
        if trace.config.draft_temperature >= 0 and correct is not None:
            text += (f" Below D's {percent(correct)} only because sampled guesses hit the target's argmax "
                     "less often than the draft's own argmax does.")
        return text
    worst = counts[-1][0].stale
    kept = KEPT.get(trace.config.cutoff_mode, "kept")
    versus = f" (D, the correct engine: {percent(correct)})" if correct is not None else ""
    text = (f"{ACCEPTANCE_RATE.title} = {percent(rate)}{versus}: from step {stale_from} on, rejected drafts are {kept} in both "
            f"caches ({worst} stale target positions by the end), so every later token is read against slots that "
            "hold no committed text, at positions past the real end, and the two models agree less.")
    earlier = _stage_before(key, lab_traces)
    if earlier is not None and rate is not None and earlier[1].summary.acceptance_rate is not None \
            and rate < earlier[1].summary.acceptance_rate:
        same_until = first_divergence(trace, earlier[1].output.token_ids)
        text += (f" It is even below stage {earlier[0]} ({percent(earlier[1].summary.acceptance_rate)}), not "
                 f"because the fix hurts: both keep their stale rows, and "
                 + (f"from step {same_until} on the two write different text, so their acceptances count different "
                    "tokens; which broken run agrees more is chance." if same_until is not None
                    else "their outputs are the same text, only split into steps differently."))
    return text


def step_caches_html(trace: Trace, step_index: int) -> str:
    """After the selected step: each cache's stale and missing positions, and where they come from."""
    position = trace.steps.index(find_step(trace, step_index))
    target, draft = cache_positions(trace)[position]
    lines = [f"<b>After step {trace.steps[position].index}</b>: target cache {escape(words(target))}"
             + ("" if draft is None else f"; draft cache {escape(words(draft))}") + "."]
    kept = KEPT.get(trace.config.cutoff_mode, "kept")
    if _any(target, draft, "stale"):
        lines.append(f"Stale: rejected drafts {kept} instead of removed (the target fed all k drafts, the draft "
                     "only d1..d(k−1), so the target piles up one more per rejection).")
    if _any(target, draft, "missing"):
        lines.append("Missing: after a fully accepted step the draft model never fed its last draft d_k "
                     "(no carryover), so that committed token is absent from its cache.")
    if not _any(target, draft, "stale") and not _any(target, draft, "missing"):
        lines.append("Both caches equal a fresh prefill of the committed text (minus the tokens still pending).")
    return "<div class='sv-row sv-lab-caches'>" + " ".join(lines) + "</div>"


def _any(target: CachePositions, draft: CachePositions | None, kind: str) -> bool:
    return any(getattr(count, kind) for count in (target, draft) if count is not None)


def _stage_before(key: str, traces: dict[str, Trace]) -> tuple[str, Trace] | None:
    """The lab stage just before `key` (A for B, B for C), when it was recorded."""
    order = [stage.key for stage in LAB_STAGES]
    if key not in order or order.index(key) == 0:
        return None
    earlier = order[order.index(key) - 1]
    return (earlier, traces[earlier]) if earlier in traces else None
