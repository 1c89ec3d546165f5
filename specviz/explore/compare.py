"""Two runs side by side: the same prompt under settings A and B (k, temperature, drafter).

The two outputs are lined up by output token position (specviz/figures/alignment.py), since
runs with different k split the same text into different steps; each run's own token
timeline follows, and a table sets their metrics against each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from typing import Any, Iterator

import gradio as gr

from engine.config import MODEL_DRAFTER, NGRAM_DRAFTER, ConfigError, SpecConfig
from engine.formats.trace import Trace
from specviz import updates
from specviz.controls import checked_prompt, choose_models
from specviz.figures.alignment import alignment_figure, first_difference
from specviz.figures.common import Figure, empty_figure
from specviz.figures.timeline import TITLE as TIMELINE_TITLE
from specviz.figures.timeline import timeline_figure
from specviz.serving.policy import Policy
from specviz.quantities import ACCEPTANCE_RATE, TOKENS_PER_STEP, Quantity, speed_note_html
from specviz.recording import record_run
from specviz.serving.runner import VLLM_SERVER, RunRequest, Runner
from specviz.serving.stop import STOPPED_IN_QUEUE, Stoppable
from specviz.style import FigureStyle
from specviz.tokens import formatted, percent
from specviz.updates import ComponentFields

SIDES = ("A", "B")
PRESETS = {   # button label -> (A, B) as (k, temperature, drafter)
    "draft model vs n-gram": ((5, 0.0, MODEL_DRAFTER), (5, 0.0, NGRAM_DRAFTER)),
    "k = 2 vs k = 8": ((2, 0.0, MODEL_DRAFTER), (8, 0.0, MODEL_DRAFTER)),
    "greedy vs T = 1": ((4, 0.0, MODEL_DRAFTER), (4, 1.0, MODEL_DRAFTER)),
}


@dataclass(frozen=True)
class Side:
    """One side's settings."""

    k: int
    temperature: float
    drafter: str

    @property
    def label(self) -> str:
        drafter = "n-gram" if self.drafter == NGRAM_DRAFTER else "draft model"
        return f"k = {self.k}, {'greedy' if self.temperature == 0 else f'T = {self.temperature:g}'}, {drafter}"


@dataclass(frozen=True)
class Comparison:
    """What the comparison shows: each side's settings and (possibly partial) trace."""

    sides: dict[str, Side]
    traces: dict[str, Trace]


@dataclass(frozen=True)
class CompareViews(ComponentFields):
    """One value per output component of the comparison, in the order of `names()`."""

    state: Comparison | None
    status: str
    alignment: Figure           # both outputs by token position
    timeline_a: Figure
    timeline_b: Figure
    table: str


def compare_outputs(comparison: Comparison | None, status: str, style: FigureStyle = FigureStyle()) -> tuple[Any, ...]:
    """The layout's output values (CompareViews order) for a comparison."""
    return compare_views(comparison, status, style).outputs()


def compare_status_only(status: str) -> tuple[Any, ...]:
    """Outputs that change the status line only (the comparison on screen stays)."""
    return updates.status_only(CompareViews.names(), status)


def compare_views(comparison: Comparison | None, status: str, style: FigureStyle = FigureStyle()) -> CompareViews:
    """Everything the comparison shows: the outputs lined up by token position, each run's timeline, the table."""
    timelines = side_timelines(comparison, style)
    runs = {side: comparison.traces[side] for side in SIDES if side in comparison.traces} if comparison else {}
    return CompareViews(comparison, status, alignment_figure(runs, style), timelines["A"], timelines["B"],
                        comparison_table(comparison))


def side_timelines(comparison: Comparison | None, style: FigureStyle = FigureStyle()) -> dict[str, Figure]:
    """Each side's own token timeline (its steps; the outputs are lined up by token position above)."""
    figures: dict[str, Figure] = {}
    for side in SIDES:
        trace = comparison.traces.get(side) if comparison else None
        if trace is None or not trace.steps:
            figures[side] = empty_figure(f"{TIMELINE_TITLE} {side}", "Press Run A and B.", style)
            continue
        figures[side] = timeline_figure(trace, selected_step=None, style=style,
                                        title=f"{side}: {escape(comparison.sides[side].label)}")
    return figures


def comparison_table(comparison: Comparison | None) -> str:
    """Metric rows, A and B columns, and how B compares."""
    if comparison is None or not comparison.traces:
        return ""
    a, b = comparison.traces.get("A"), comparison.traces.get("B")
    rows = [("settings", *(escape(comparison.sides[s].label) if s in comparison.traces else "–" for s in SIDES), "")]
    for label, value, fmt, better in METRICS:
        va = value(a) if a else None
        vb = value(b) if b else None
        rows.append((label.html() if isinstance(label, Quantity) else label, fmt(va), fmt(vb),
                     _relation(va, vb, better)))
    body = "".join(f"<tr><th>{label}</th><td>{x}</td><td>{y}</td><td class='sv-muted'>{rel}</td></tr>"
                   for label, x, y, rel in rows)
    return (f"<div class='sv-table-wrap'><table class='sv-table sv-compare'><thead><tr><th></th><th>A</th><th>B</th>"
            f"<th>B vs A</th></tr></thead><tbody>{body}</tbody></table></div>{speed_note_html()}{_identity(a, b)}")


METRICS = (   # label (a named quantity carries its tooltip), value of a trace, format, "higher" | "lower" is better
    (ACCEPTANCE_RATE, lambda t: t.summary.acceptance_rate, lambda v: percent(v), "higher"),
    (TOKENS_PER_STEP, lambda t: t.summary.mean_accepted_length, lambda v: formatted(v, "{:.2f}"), "higher"),
    ("tokens / s", lambda t: t.summary.tokens_per_s, lambda v: formatted(v, "{:.1f}"), "higher"),
    ("target forwards", lambda t: t.summary.target_forwards, lambda v: formatted(v, "{:.0f}"), "lower"),
    ("new tokens", lambda t: t.summary.new_tokens, lambda v: formatted(v, "{:.0f}"), ""),
    ("wall time", lambda t: t.summary.wall_s, lambda v: formatted(v, "{:.2f} s"), "lower"),
)



def _relation(a: float | None, b: float | None, better: str) -> str:
    if a is None or b is None or not better or a == 0:
        return ""
    ratio = b / a
    if abs(ratio - 1) < 0.005:
        return "same"
    word = "better" if (ratio > 1) == (better == "higher") else "worse"
    return f"{ratio:.2f}× ({word})"


def _identity(a: Trace | None, b: Trace | None) -> str:
    if a is None or b is None:
        return ""
    ids_a, ids_b = a.output.token_ids, b.output.token_ids
    if ids_a == ids_b:
        return "<div class='sv-note'><span class='sv-badge sv-ok'>✓ A and B wrote identical output</span></div>"
    position = first_difference([a, b])
    if position is None:
        shorter, count = ("A", len(ids_a)) if len(ids_a) < len(ids_b) else ("B", len(ids_b))
        return (f"<div class='sv-note'><span class='sv-badge sv-warn'>{shorter} ended sooner</span> "
                f"<span class='sv-muted'>(after {count} tokens, all equal to the other run's)</span></div>")
    both_exact = a.config.exactness.token_for_token and b.config.exactness.token_for_token
    why = ("both are greedy with a float32 target, so only a float-rounding near tie allows this" if both_exact
           else "; ".join(f"{side}: {trace.config.exactness.label}" for side, trace in (("A", a), ("B", b))))
    return (f"<div class='sv-note'><span class='sv-badge sv-warn'>≠ outputs differ from token {position}</span>"
            f" <span class='sv-muted'>({escape(why)})</span></div>")


class CompareHandlers(Stoppable):
    """Runs A then B in one generator (Stop keeps what finished)."""

    def __init__(self, runner: Runner, policy: Policy = Policy()):
        super().__init__()
        self.runner = runner
        self.policy = policy

    def compare(self, large: bool, width: float | None, preset: str, draft: str, target: str, prompt: str,
                max_new_tokens: float, seed: float, k_a: float, temperature_a: float, drafter_a: str, k_b: float,
                temperature_b: float, drafter_b: str, request: gr.Request = None) -> Iterator[tuple[Any, ...]]:
        style = FigureStyle.for_screen(large, width)
        sides = {"A": _side(k_a, temperature_a, drafter_a), "B": _side(k_b, temperature_b, drafter_b)}
        requests = {name: _request(preset, draft, target, prompt, max_new_tokens, seed, side, self.policy)
                    for name, side in sides.items()}
        comparison = Comparison(sides, {})
        with self.stop_signal(request) as stop:
            if stop.is_set():
                yield compare_status_only(STOPPED_IN_QUEUE)
                return
            for name in SIDES:
                if stop.is_set():
                    break
                yield compare_outputs(comparison, f"Running {name} ({sides[name].label})…", style)
                trace = record_run(self.runner, requests[name], stop, lambda fraction, message: None,
                                   f"Could not run {name}", f"Run {name} failed")
                comparison = Comparison(sides, {**comparison.traces, name: trace})
            done = "Stopped: the finished runs are kept." if stop.is_set() else "Done: A and B side by side."
            yield compare_outputs(comparison, done, style)

    def restyle(self, comparison: Comparison | None, status: str, large: bool, width: float | None) -> tuple[Any, ...]:
        return compare_outputs(comparison, status, FigureStyle.for_screen(large, width))

    @staticmethod
    def preset(name: str) -> tuple[Any, ...]:
        """The six side widgets set to a named pair of settings."""
        a, b = PRESETS[name]
        return (*a, *b)


def _side(k: Any, temperature: Any, drafter: str) -> Side:
    try:
        return Side(int(k), float(temperature), drafter or MODEL_DRAFTER)
    except (TypeError, ValueError):
        raise gr.Error("k and temperature must be numbers for both A and B.") from None


def _request(preset: str, draft: str, target: str, prompt: str, max_new_tokens: Any, seed: Any, side: Side,
             policy: Policy) -> RunRequest:
    try:
        if preset == VLLM_SERVER:      # a server speculates at its own k with its own drafter: no A against B
            raise ConfigError("Two runs side by side use SpecViz's own engine (a vLLM server runs its own k and "
                              "drafter): choose a preset or custom models for them.")
        text = checked_prompt(prompt)
        config = SpecConfig(k=side.k, temperature=side.temperature, drafter=side.drafter,
                            max_new_tokens=int(max_new_tokens), seed=int(seed or 0))
        request = RunRequest(choose_models(preset, draft, target, side.drafter), text, config)
        policy.check(request)
        return request
    except (ConfigError, TypeError, ValueError) as error:
        raise gr.Error(str(error)) from None
