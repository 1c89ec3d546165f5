"""The Lab tab's content: one prompt run through the engine as it stands after each lab stage.

Stages A-D come from engine.lab (each switches a piece of the correct engine off);
a fifth, "what if" run keeps the correct engine but lets the draft sample while the
target verifies greedily. Stage D is the correct engine, so its greedy output is
target-only's, token for token (tests/test_lab.py proves it): every stage is compared
with D's output, and a live run also checks D itself against target-only decoding. The
tree stage T (engine.lab.TREE_STAGE) puts D's chain beside a token tree (specviz/lab/tree_stage.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from typing import Any, Callable

from engine.config import SpecConfig
from engine.lab import LAB_STAGES, TREE_STAGE, cache_positions, first_divergence
from engine.formats.trace import Trace
from specviz.figures.common import Figure
from specviz.figures.lab import drift_figure
from specviz.figures.timeline import TITLE as TIMELINE_TITLE, timeline_figure
from specviz.figures.tree import is_tree_trace, tree_figure
from specviz.lab.story import acceptance_note, step_caches_html
from specviz.lab.tree_stage import chain_timeline, is_tree_stage, tree_comparison_html
from specviz.quantities import ACCEPTANCE_RATE, TOKENS_PER_STEP
from specviz.run.output_view import metric_card
from specviz.run.step_detail import find_step, step_detail_html
from specviz.run.views import Scrubber, scrubber_for, shown_tree
from specviz.style import FigureStyle, kind_labels
from specviz.tokens import chip, formatted, percent, visible
from specviz.updates import ComponentFields

REFERENCE = "D"                       # the correct engine: target-only's output in float32 greedy decoding
# The "target-only:" line's token: target-only decoding drafts nothing, so each of its tokens is a step without
# drafts, which the engine emits and the timeline marks as the target's own ("bonus") token, never as an accepted
# draft (issue #33 item 2 review: stage D's green accepted-draft chip stood on the target-only line).
TARGET_ONLY_KIND = "bonus"
TARGET_ONLY_TIP = "target-only decoding's token: the target's own choice, no drafts (a step without drafts)"
WHAT_IF = "sampled-draft"             # key (and recorded file lab-sampled-draft.json) of the extra run
SAMPLED_DRAFT_TEMPERATURE = 1.0
TAIL_CHARS = 80                         # the shared text before the first difference: its last tokens, this many chars


@dataclass(frozen=True)
class LabChoice:
    key: str
    title: str
    explanation: str
    apply: Callable[[SpecConfig], SpecConfig]


CHOICES: tuple[LabChoice, ...] = tuple(LabChoice(s.key, s.title, s.explanation, s.apply) for s in LAB_STAGES) + (
    LabChoice(WHAT_IF, "What if: the draft samples, the target stays greedy",
              "The correct engine (D), but the draft model now samples its guesses at temperature "
              f"{SAMPLED_DRAFT_TEMPERATURE:g} instead of taking its argmax, while the target still verifies "
              "greedily: a draft token is accepted only if it equals the target's argmax, and the first "
              "mismatch is replaced by that argmax. Acceptance drops, since random guesses agree less often, "
              "but every emitted token is still the target's own greedy choice: the output stays identical "
              "to target-only decoding.",
              lambda config: LAB_STAGES[-1].apply(config).replace(draft_temperature=SAMPLED_DRAFT_TEMPERATURE)),
    LabChoice(TREE_STAGE.key, TREE_STAGE.title, TREE_STAGE.explanation, TREE_STAGE.apply),
)
KEYS = tuple(choice.key for choice in CHOICES)
RUN_ORDER = (REFERENCE, *(key for key in KEYS if key != REFERENCE))     # the reference first


def choice(key: str) -> LabChoice:
    return next((c for c in CHOICES if c.key == key), CHOICES[0])


@dataclass(frozen=True)
class LabSet:
    """Traces of one prompt by stage key; `checked`: was D identical to a target-only run (None: not run)."""

    traces: dict[str, Trace]
    source: str                        # "recorded" or the models' label
    checked: bool | None = None

    @property
    def reference(self) -> Trace | None:
        return self.traces.get(REFERENCE)


def recorded_lab(traces: dict[str, Trace]) -> LabSet | None:
    """The shipped lab traces as a set; D's recorded target-only check (--baseline) when it has one."""
    if not traces:
        return None
    reference = traces.get(REFERENCE)
    baseline = reference.summary.baseline if reference is not None else None
    return LabSet(traces, "recorded", None if baseline is None else baseline.identical)


@dataclass(frozen=True)
class Difference:
    """Where a stage's output first leaves the reference's (None everywhere when identical)."""

    step: int | None                   # first_divergence: the step index
    position: int | None               # index into the generated tokens
    got: str | None
    expected: str | None

    @property
    def identical(self) -> bool:
        return self.position is None


def difference(trace: Trace, reference: Trace) -> Difference:
    """The first differing output token of `trace` against `reference`, and the step that emitted it."""
    ids, reference_ids = trace.output.token_ids, reference.output.token_ids
    if ids == reference_ids:
        return Difference(None, None, None, None)
    shorter = min(len(ids), len(reference_ids))
    position = next((i for i, (a, b) in enumerate(zip(ids, reference_ids)) if a != b), shorter)
    got = _token_texts(trace)[position] if position < len(ids) else "(end)"
    expected = _token_texts(reference)[position] if position < len(reference_ids) else "(end)"
    step = first_divergence(trace, reference_ids)
    if step is None:                   # the stage stopped early: it ends where the reference goes on
        step = trace.steps[-1].index if trace.steps else None
    return Difference(step, position, got, expected)


@dataclass(frozen=True)
class LabViews(ComponentFields):
    """One value per output component of the lab view, in the order of `names()`."""

    lab: LabSet | None
    status: str
    explanation: str
    verdict: str
    chain_timeline: Figure | None           # the tree stage's chain (stage D) beside it; None (hidden) elsewhere
    timeline: Figure
    scrubber: Scrubber
    detail: str
    tree: Figure | None                     # the selected step's draft tree; None (hidden) without one
    drift: Figure

    def outputs(self) -> tuple[Any, ...]:
        """The values in `names()` order; the scrubber as a slider update, the tree stage's figures shown only there."""
        special = {"scrubber": self.scrubber.update(), "chain_timeline": shown_tree(self.chain_timeline),
                   "tree": shown_tree(self.tree)}
        return tuple(special[name] if name in special else getattr(self, name) for name in self.names())


@dataclass(frozen=True)
class StepViews:
    """What changes when the selected step moves: the figures that mark it and its detail."""

    timeline: Figure
    detail: str
    drift: Figure
    tree: Figure | None = None              # the selected step's draft tree (the tree stage)
    chain: Figure | None = None             # the tree stage's chain (stage D), on the tree's step axis


def render_lab(lab: LabSet | None, key: str, status: str, style: FigureStyle = FigureStyle(),
               selected: int | None = None) -> LabViews:
    """The stage `key` of `lab`: explanation, verdict cards, timeline with the divergence line, the
    selected step's detail (default: the step where the output first leaves target-only, else the first)
    and the stale/missing cache positions."""
    picked = choice(key)
    explanation = (f"<div class='sv-lab-text'><h3>{escape(picked.title)}</h3><p>{escape(picked.explanation)}</p></div>")
    trace = lab.traces.get(picked.key) if lab else None
    reference = lab.reference if lab else None
    if trace is None or not trace.steps:
        missing = ("Not recorded for this prompt yet: press <b>Run the lab</b>." if lab and lab.traces
                   else "No lab traces yet: press <b>Run the lab</b>.")
        return LabViews(lab, status, explanation, f"<div class='sv-note'>{missing}</div>", None,
                        timeline_figure(None, style=style), scrubber_for(None, None),
                        step_detail_html(None, None), None, drift_figure(None, style=style))
    diff = difference(trace, reference) if reference is not None else None
    index = find_step(trace, selected if selected is not None else diff.step if diff and diff.step is not None
                      else trace.steps[0].index).index
    views = render_step(lab, picked.key, index, style)
    return LabViews(lab, status, explanation, verdict_html(picked.key, trace, reference, diff, lab), views.chain,
                    views.timeline, scrubber_for(trace, index), views.detail, views.tree, views.drift)


def render_step(lab: LabSet | None, key: str, index: int | None, style: FigureStyle = FigureStyle()) -> StepViews:
    """The figures and detail of stage `key` with step `index` selected (the nearest recorded step)."""
    trace = lab.traces.get(choice(key).key) if lab else None
    if trace is None or not trace.steps:
        return StepViews(timeline_figure(None, style=style), step_detail_html(None, None), drift_figure(None, style=style))
    step = find_step(trace, index).index
    reference = lab.reference if lab else None
    diff = difference(trace, reference) if reference is not None else None
    divergence = diff.step if diff else None
    tree_stage = is_tree_stage(key)
    # The chain stages share one step axis, so A-D line up; the tree stage takes fewer, longer steps: its own axis
    # (issue 41: stage T's 11 steps were drawn on an axis running to ~27)
    last_step = None if tree_stage else max(t.steps[-1].index for name, t in lab.traces.items()
                                            if t.steps and not is_tree_stage(name))
    detail = step_detail_html(trace, step) + step_caches_html(trace, step)
    title = f"Tree (stage T): up to {trace.config.tree_nodes} nodes a step" if tree_stage else TIMELINE_TITLE
    timeline = timeline_figure(trace, selected_step=step, style=style, divergence=divergence, title=title)
    chain, timeline = chain_timeline(reference, timeline, style) if tree_stage else (None, timeline)
    return StepViews(timeline, detail, drift_figure(trace, divergence, style=style, selected=step, last_step=last_step),
                     tree_figure(trace, selected_step=step, style=style) if is_tree_trace(trace) else None, chain)


def verdict_html(key: str, trace: Trace, reference: Trace | None, diff: Difference | None, lab: LabSet) -> str:
    """Cards (acceptance and tokens per step vs the correct engine, each cache's stale and missing
    positions at the end), why the acceptance is what it is, and the output verdict."""
    if is_tree_stage(key):
        return (f"<div class='sv-metrics'>{tree_comparison_html(reference, trace)}"
                f"{_output_verdict(trace, reference, diff, lab)}</div>")
    summary = trace.summary
    correct = reference.summary if reference is not None else None
    target, draft = cache_positions(trace)[-1]
    cards = [
        metric_card("", percent(summary.acceptance_rate),
                    f"correct engine (D): {percent(correct.acceptance_rate)}" if correct else "",
                    quantity=ACCEPTANCE_RATE),
        metric_card("", formatted(summary.mean_accepted_length, "{:.2f}"),
                    f"correct engine (D): {correct.mean_accepted_length:.2f}" if correct and correct.mean_accepted_length
                    else "", quantity=TOKENS_PER_STEP),
        metric_card("target cache at the end", _positions(target), "stale · missing positions",
                    "stale: kept positions holding no committed text; missing: committed tokens never fed"),
    ]
    if draft is not None:
        cards.append(metric_card("draft cache at the end", _positions(draft), "stale · missing positions",
                                 "stale: kept positions holding no committed text; missing: committed tokens never fed"))
    why = acceptance_note(key, trace, lab.traces, reference)
    return (f"<div class='sv-metrics'><div class='sv-cards'>{''.join(cards)}</div>"
            f"<div class='sv-note sv-lab-why'>{escape(why)}</div>"
            f"{_output_verdict(trace, reference, diff, lab)}</div>")


def _positions(count: Any) -> str:
    text = f"{count.stale} · {count.missing}"
    return text if count.known else f"net {count.stale - count.missing:+d}"


def _output_verdict(trace: Trace, reference: Trace | None, diff: Difference | None, lab: LabSet) -> str:
    if reference is None or diff is None:
        return "<div class='sv-note'>No stage D run to compare with: run the lab.</div>"
    where = ("D was checked against target-only decoding" if lab.checked
             else "but D itself differed from target-only: a float-rounding near tie or a bug, please report it"
             if lab.checked is False
             else "D is target-only's output, exact up to float rounding at near ties (greedy, float32)")
    if diff.identical:
        badge = "<span class='sv-badge sv-ok'>✓ output identical to target-only decoding</span>"
        return f"<div class='sv-note'>{badge} <span class='sv-muted'>({where})</span></div>"
    badge = (f"<span class='sv-badge sv-bad'>✗ output leaves target-only decoding at token {diff.position + 1} "
             f"(step {diff.step})</span>")
    shared = _tail(_token_texts(trace)[:diff.position])
    kind = _kind_at(trace, diff.position)
    labels = kind_labels(trace.config.is_tree)
    return (f"<div class='sv-note'>{badge} <span class='sv-muted'>({where})</span></div>"
            f"<div class='sv-text sv-lab-diff'><div><span class='sv-muted'>this stage:</span> "
            f"{shared}"
            f"{chip(diff.got or '', kind, f'this stage emitted it as {labels.get(kind, kind)}')}…</div>"
            f"<div><span class='sv-muted'>target-only:</span> {shared}"
            f"{chip(diff.expected, TARGET_ONLY_KIND, TARGET_ONLY_TIP) if diff.expected is not None else chip('', 'plain')}"
            "…</div></div>")


def _tail(texts: list[str], chars: int = TAIL_CHARS) -> str:
    """The last tokens of `texts` (at least `chars` characters of them, whole tokens), visible, with a line break
    allowed between tokens only (a phone broke 'is_palin' / 'drome(s)' inside a token: issue #41)."""
    kept: list[str] = []
    for text in reversed(texts):
        if sum(len(token) for token in kept) >= chars:
            break
        kept.insert(0, text)
    return "<wbr>".join(escape(visible(text)) for text in kept)


def _token_texts(trace: Trace) -> list[str]:
    return [token.text for step in trace.steps for token in step.emitted]


def _kind_at(trace: Trace, position: int) -> str:
    """The kind (accepted, recovered, bonus) of output token `position`, as the timeline marks it ('plain' past
    the end)."""
    kinds = [token.kind for step in trace.steps for token in step.emitted]
    return kinds[position] if position < len(kinds) else "plain"

