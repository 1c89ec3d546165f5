"""Speculation under load (issue #39): a `specviz.load/1` run (engine/formats/load_reader.py) drawn against the
number N of requests sent at once, on a log2 axis: throughput with and without speculation, their ratio with 1×
and the crossover named, acceptance per request, and the step's cost per token as the batch grows.

What each chart shows, and whether it is measured or derived:
- the whole server's tokens/s is the document's aggregate (all requests' tokens / first send to last token);
- a request's tokens/s is its tokens / its own time from send to done, the median over the level's requests
  (what one user waits; the document's decode-only speed is not used: a server may stream a request's tokens
  in one burst, and a burst's few microseconds make that speed meaningless);
- ratios (with speculation / without) and the crossover (the first N whose ratio falls below 1×) are computed
  here, never stored;
- acceptance per request is accepted / drafted from the request's own steps (its trace); whether it changed with
  load is judged per prompt, against that prompt's requests at the lowest N it ran (the level's mean also moves
  with the mix of prompts, which is not load);
- a step's time is measured (the gap between two of a request's steps reaching the client: one step of the whole
  batch, draft and verify), the time per token derived (that time / the tokens the step emitted); a request's
  first step is left out (it holds the wait in the queue and the prompt's prefill);
- the batch cost model's predictions (engine/load/batch_model.py: the forward probe's curve, calibrated at the
  lowest N) are drawn dotted beside the measured ratio and step time, where the run carries the probe.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

from engine.formats.trace import Trace
from engine.load.batch_model import BatchModel, disagreements, later_steps, measured_model, why_sentence
from engine.load.class_point import ClassPoint
from engine.load.stats import RequestTimes, median_request_speed
from specviz.figures.common import Figure, axis, empty_figure, legend_px, make_figure, text_px
from specviz.quantities import ACCEPTANCE_RATE
from specviz.style import COLORS, FigureStyle

NO_LOAD = "No load run yet: upload a specviz.load/1 file."
WITH, WITHOUT = "#0072B2", "#555555"            # with speculation (blue, solid), without (grey, dashed)
AGGREGATE, PER_REQUEST = "#0072B2", "#E69F00"   # the two ratios
CLASS = "#CC79A7"                               # the page's own class (a star; Okabe-Ito reddish purple)
MODEL = "#009E73"                               # the batch cost model's predictions (green, dotted)
PREDICTED_CROSSOVER = {"symbol": "diamond-open", "size": 18, "color": MODEL, "line": {"width": 3}}
CROSSOVER = {"symbol": "circle-open", "size": 22, "line": {"width": 3}}   # in its ratio's colour; one request's square
CLICK = "click a point to list its requests"


@dataclass(frozen=True)
class Request:
    """One request of the speculative server: its prompt, its acceptance and its steps' times (None: no trace)."""

    prompt_index: int
    drafted: int
    accepted: int
    step_ms: tuple[float, ...]           # each step after the first: the gap before it reached the client
    step_tokens: tuple[int, ...]         # the tokens each of those steps emitted

    @property
    def rate(self) -> float | None:
        return self.accepted / self.drafted if self.drafted else None


@dataclass(frozen=True)
class Level:
    """One concurrency N, both servers."""

    n: int
    aggregate: tuple[float, float]         # tokens/s of the whole server: (with speculation, without)
    per_request: tuple[float, float]       # median of each request's tokens / (done - sent): (with, without)
    tokens: tuple[int, int]
    wall_s: tuple[float, float]
    acceptance: float | None               # the level's pooled accepted / drafted (the document's)
    requests: tuple[Request, ...]          # the speculative server's, with a trace split into measured steps

    def ratio(self, which: str) -> float | None:
        """With speculation / without, of "aggregate" or "per_request" (None where the server without made 0)."""
        spec, plain = getattr(self, which)
        return spec / plain if plain > 0 else None

    @property
    def step_ms(self) -> float | None:
        """The mean measured step time over the level's requests' steps after their first."""
        steps = [ms for request in self.requests for ms in request.step_ms]
        return sum(steps) / len(steps) if steps else None

    @property
    def token_ms(self) -> float | None:
        """Derived: the steps' time / the tokens they emitted, over the level's requests."""
        tokens = sum(sum(request.step_tokens) for request in self.requests)
        return sum(ms for request in self.requests for ms in request.step_ms) / tokens if tokens else None


@dataclass(frozen=True)
class LoadRun:
    """What the charts draw of one document the load reader checked: its levels in the grid's order, k and T."""

    levels: tuple[Level, ...]
    k: int
    temperature: float
    model: BatchModel | None = None      # the batch cost model, where the run carries the forward probe

    @classmethod
    def of(cls, document: dict[str, Any]) -> "LoadRun":
        spec, plain = document["servers"]
        levels = tuple(_level(a, b) for a, b in zip(spec["levels"], plain["levels"]))
        probe, k = plain.get("forward_probe"), document["pair"]["k"]
        steps = {level.n: [(request.step_ms, request.step_tokens) for request in level.requests] for level in levels}
        return cls(levels, k, document["settings"]["temperature"], measured_model(probe, k, steps) if probe else None)


def model_sentences(run: LoadRun) -> str:
    """What the model predicts against what was measured, why, and where the two disagree by more than 15 %."""
    model = run.model
    if model is None:
        return ("No forward probe in this run, so the batch cost model is not drawn (python -m engine load records "
                "one on the server without speculation).")
    predicted, measured = model.crossover(), crossover(run.levels, "aggregate")
    where = (f"N = {predicted.n}" if predicted else "none up to the last N") + " predicted, " + (
        f"N = {measured.n} measured" if measured else "none measured")
    off = disagreements(model, {level.n: ratio for level in run.levels if (ratio := level.ratio("aggregate"))})
    gap = ("The model and the measurement disagree by more than 15 % at " + ", ".join(
        f"N = {n} ({p:.2f}× predicted, {m:.2f}× measured)" for n, p, m in off) + "." if off else
        "The model is within 15 % of the measured ratio at every N.")
    return (f"**Why (the batch cost model):** {why_sentence(model)}\n\n**The model against the measurement:** "
            f"crossover {where}. {gap} The model takes the drafts' cost from the steps measured at "
            f"N = {model.calibrated_n} and each N's tokens per step from that N's own steps; every other step time "
            "is its prediction from the forward probe (the target timed over 1, 2, 4, … tokens). At "
            f"N = {model.calibrated_n} it matches the measured step by construction; its ratio still differs there "
            "because the measured walls also hold the prompts' prefill, which the model leaves out. A step's tokens "
            "here are those it emitted: the τ printed by the run (vLLM's mean acceptance length) also counts drafts "
            "vLLM accepted past the token budget or the end of the text, and never sent.")


def _level(spec: dict[str, Any], plain: dict[str, Any]) -> Level:
    acceptance = spec.get("acceptance") or {}
    requests = tuple(request for request in (_request(r) for r in spec["requests"]) if request is not None)
    return Level(spec["concurrency"], (spec["aggregate_tokens_per_s"], plain["aggregate_tokens_per_s"]),
                 (_median_speed(spec["requests"]), _median_speed(plain["requests"])),
                 (spec["output_tokens"], plain["output_tokens"]), (spec["wall_s"], plain["wall_s"]),
                 acceptance.get("rate"), requests)


def _median_speed(requests: Sequence[dict[str, Any]]) -> float:
    return median_request_speed([RequestTimes(r["prompt_index"], r["sent_s"], r["first_token_s"], r["done_s"],
                                              r["output_tokens"]) for r in requests])


def _request(request: dict[str, Any]) -> Request | None:
    """The request's counts from its own trace; None without one, or when its steps are not the server's
    measured steps (a trace whose per-step counts never arrived)."""
    if request.get("trace") is None:
        return None
    trace = Trace.from_dict(request["trace"])
    if trace.split is not None:
        return None
    return Request(request["prompt_index"], sum(step.k for step in trace.steps),
                   sum(step.num_accepted for step in trace.steps), *later_steps(trace))


def crossover(levels: Sequence[Level], which: str) -> Level | None:
    """The first level whose ratio `which` falls below 1× (speculation costs more than it buys there)."""
    return next((level for level in levels if (ratio := level.ratio(which)) is not None and ratio < 1.0), None)


def crossover_sentence(levels: Sequence[Level], which: str) -> str:
    """Where speculation stops paying, in words, for "aggregate" or "per_request"."""
    if not levels:
        return ""
    first = crossover(levels, which)
    span = f"N = {levels[0].n} to {levels[-1].n}" if len(levels) > 1 else f"N = {levels[0].n}"
    if first is None:
        return f"speculation pays at every load measured ({span})"
    below = [level.n for level in levels if (ratio := level.ratio(which)) is not None and ratio < 1.0]
    pays = [level.n for level in levels if (ratio := level.ratio(which)) is not None and ratio >= 1.0]
    if not pays:
        return f"speculation costs more than it buys at every load measured ({span})"
    if all(n >= first.n for n in below) and all(n < first.n for n in pays):
        return f"from N = {first.n} speculation costs more than it buys"
    return (f"speculation costs more than it buys at N = {_names(below)} but pays at N = {_names(pays)}: no single "
            f"crossover (the first N below 1× is {first.n})")


def _names(numbers: Sequence[int]) -> str:
    words = [str(n) for n in numbers]
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def _x_axis(levels: Sequence[Level], style: FigureStyle, also: Sequence[float] = (), **settings: Any) -> dict[str, Any]:
    """A log2 axis of N: the grid's levels as its ticks (its range also holds the values `also`)."""
    ns = [level.n for level in levels]
    low, high = min([*ns, *also]) / 1.4, max([*ns, *also]) * 1.4
    return axis(style, type="log", tickmode="array", tickvals=ns, ticktext=[str(n) for n in ns],
                range=[math.log10(low), math.log10(high)],
                title={"text": "N: requests at once" if style.narrow else "N: requests sent at once (log₂ scale)"},
                **settings)


def _framed(traces: list[dict[str, Any]], title: str, subtitle: str, style: FigureStyle, plot_px: int,
            **layout: Any) -> Figure:
    """make_figure with the title, subtitle and legend each as tall as their wrapped text, so a phone's longer lines
    never squeeze the plot (as the timeline does, specviz/figures/timeline.py)."""
    top = (text_px(f"<b>{title}</b>", style.line_chars(style.title_size, bold=True), style.title_size, 1.25)
           + text_px(subtitle, style.line_chars(style.font_size), style.font_size) + 24)
    names = [trace["name"] for trace in traces if trace.get("showlegend", True) is not False and trace.get("name")]
    bottom = int(2 * 1.4 * style.font_size) + 24 + legend_px(names, style)
    return make_figure(traces, title, subtitle, style, height=top + plot_px + bottom,
                       margin={"t": top, "b": bottom}, **layout)


def _cramped(style: FigureStyle) -> bool:
    """A phone or a projector: side-by-side panels stack."""
    return style.narrow or style.font_size > FigureStyle().font_size


def _line(levels: Sequence[Level], values: Sequence[float | None], name: str, meta: str, color: str, dash: str,
          symbol: str, hover: str, customdata: Sequence[Sequence[Any]], **axes: Any) -> dict[str, Any]:
    return {"type": "scatter", "mode": "lines+markers", "x": [level.n for level in levels], "y": list(values),
            "name": name, "meta": meta, "line": {"color": color, "dash": dash, "width": 2.5},
            "marker": {"symbol": symbol, "size": 11, "color": color, "line": {"color": "#FFFFFF", "width": 1}},
            "customdata": [list(row) for row in customdata], "hovertemplate": hover + "<extra></extra>", **axes}


def throughput_figure(run: LoadRun | None, style: FigureStyle = FigureStyle(),
                      point: ClassPoint | None = None) -> Figure:
    """Tokens/s against N with and without speculation: the whole server's (left) and one request's (right); `point`,
    the page's own class on a vLLM server (engine/load/class_point.py), is drawn on both as a star."""
    title = "Throughput as requests pile up"
    if run is None:
        return empty_figure(title, NO_LOAD, style)
    levels = run.levels
    cramped = _cramped(style)
    left, right = {"xaxis": "x", "yaxis": "y"}, {"xaxis": "x2", "yaxis": "y2"}
    traces = []
    for side, (name, color, dash, symbol) in enumerate((("with speculation", WITH, "solid", "circle"),
                                                       ("without speculation", WITHOUT, "dash", "square"))):
        traces.append(_line(levels, [level.aggregate[side] for level in levels], f"{name}: whole server",
                            f"aggregate.{'spec' if side == 0 else 'plain'}", color, dash, symbol,
                            f"N = %{{x}} requests at once, {name}:<br>the server made %{{y:.0f}} tokens a second in all"
                            "<br>(%{customdata[1]} tokens ÷ %{customdata[2]:.2f} s from the first request sent to "
                            f"the last token)<br>{CLICK}",
                            [[level.n, level.tokens[side], level.wall_s[side]] for level in levels], **left))
        traces.append(_line(levels, [level.per_request[side] for level in levels], f"{name}: one request",
                            f"per_request.{'spec' if side == 0 else 'plain'}", color, "dot" if side == 0 else "dashdot",
                            symbol, f"N = %{{x}} requests at once, {name}:<br>a request got %{{y:.0f}} tokens a second"
                            "<br>(the median request: its tokens ÷ its time from sent to done)<br>" + CLICK,
                            [[level.n] for level in levels], showlegend=True, **right))
    also: tuple[float, ...] = ()
    if point is not None:
        traces += _class_stars(point, left, right)
        also = (point.mean_concurrency,)
    left_x, right_x = ([0.0, 1.0], [0.0, 1.0]) if cramped else ([0.0, 0.45], [0.56, 1.0])
    top_y, bottom_y = ([0.6, 1.0], [0.0, 0.4]) if cramped else ([0.0, 1.0], [0.0, 1.0])
    first, second = ("Top", "Bottom") if cramped else ("Left", "Right")
    subtitle = (f"{first}: the whole server's tokens per second (all requests together). {second}: what one request "
                "gets (its tokens ÷ its time from sent to done, the median request).")
    return _framed(traces, title, subtitle, style, 620 if cramped else 300,
                   xaxis=_x_axis(levels, style, also, domain=left_x, anchor="y"),
                   xaxis2=_x_axis(levels, style, also, domain=right_x, anchor="y2"),
                   yaxis=axis(style, domain=top_y, rangemode="tozero", title={"text": "whole server, tokens/s"}),
                   yaxis2=axis(style, domain=bottom_y, anchor="x2", rangemode="tozero",
                               title={"text": "one request, tokens/s"}))


def _class_stars(point: ClassPoint, left: dict[str, str], right: dict[str, str]) -> list[dict[str, Any]]:
    """The class's point on both panels: at N = its mean runs streaming at once, its whole-server and median-run speed."""
    name = f"your class: {point.runs} runs, {point.mean_concurrency:.1f} at once on average"
    where = (f"your class on the vLLM server: {point.runs} runs, on average %{{x:.1f}} streaming at once (peak "
             f"{point.peak_concurrency})<br>")
    star = {"symbol": "star", "size": 18, "color": CLASS, "line": {"color": "#000000", "width": 1}}
    common = {"type": "scatter", "mode": "markers", "x": [point.mean_concurrency], "marker": star}
    return [common | {"y": [point.aggregate_tokens_per_s], "name": name, "meta": "class.aggregate",
                      "hovertemplate": where + f"the server made %{{y:.0f}} tokens a second in all ({point.output_tokens} "
                                               f"tokens ÷ {point.wall_s:.1f} s, first run sent to last token)"
                                               "<extra></extra>", **left},
            common | {"y": [point.per_request_tokens_per_s], "name": name, "meta": "class.per_request",
                      "showlegend": False,
                      "hovertemplate": where + "the median run got %{y:.0f} tokens a second (its tokens ÷ its time "
                                               "from sent to done)<extra></extra>", **right}]


def ratio_figure(run: LoadRun | None, style: FigureStyle = FigureStyle()) -> Figure:
    """Speculation's speed / the plain server's against N, with 1× drawn and the crossover marked and named."""
    title = "Does speculation still pay?"
    if run is None:
        return empty_figure(title, NO_LOAD, style)
    levels = run.levels
    ns = [level.n for level in levels]
    traces: list[dict[str, Any]] = [
        {"type": "scatter", "mode": "lines", "x": [min(ns) / 1.4, max(ns) * 1.4], "y": [1.0, 1.0], "meta": "one",
         "name": "1×: as fast as without speculation", "line": {"color": COLORS["committed"], "dash": "dot",
                                                                  "width": 1.5}, "hoverinfo": "skip"}]
    marks = []
    for which, name, color, dash in (("aggregate", "whole server", AGGREGATE, "solid"),
                                     ("per_request", "one request", PER_REQUEST, "dash")):
        ratios = [level.ratio(which) for level in levels]
        traces.append(_line(levels, ratios, f"{name}: with ÷ without speculation", f"ratio.{which}", color, dash,
                            "circle" if which == "aggregate" else "diamond",
                            f"N = %{{x}} requests at once:<br>{_ratio_words(which)} is %{{y:.2f}}× what it is without "
                            "speculation<br>(%{customdata[1]}; above 1×: speculation pays)<br>" + CLICK,
                            [[level.n, _pair_words(level, which)] for level in levels]))
        if (first := crossover(levels, which)) is not None:
            marks.append({"type": "scatter", "mode": "markers", "x": [first.n], "y": [first.ratio(which)],
                          "meta": f"crossover.{which}", "name": f"crossover, {name}: the first N below 1×",
                          "marker": CROSSOVER | ({"color": AGGREGATE} if which == "aggregate" else
                                                 {"color": PER_REQUEST, "symbol": "square-open", "size": 30}),
                          "customdata": [[first.n]],
                          "hovertemplate": f"crossover ({name}): from N = {first.n} speculation is slower than "
                                           "the same server without it<extra></extra>"})
    if run.model is not None:
        points = [run.model.at(level.n) for level in levels]
        traces.append(_line(levels, [point.ratio if point else None for point in points],
                            "whole server, predicted by the batch cost model", "ratio.model", MODEL, "dot",
                            "diamond", "N = %{x} requests at once:<br>the batch cost model predicts %{y:.2f}× "
                            "(the target verifies %{customdata[1]} tokens a step,<br>%{customdata[2]:.1f}× its "
                            "%{customdata[0]}-token plain step; calibrated at N = "
                            f"{run.model.calibrated_n})<br>{CLICK}",
                            [[level.n, point.verify_tokens if point else 0, point.verify_growth if point else 0.0]
                             for level, point in zip(levels, points)]))
        if (predicted := run.model.crossover()) is not None:
            marks.append({"type": "scatter", "mode": "markers", "x": [predicted.n], "y": [predicted.ratio],
                          "meta": "crossover.model", "name": "crossover, predicted: the model's first N below 1×",
                          "marker": PREDICTED_CROSSOVER, "customdata": [[predicted.n]],
                          "hovertemplate": f"the batch cost model predicts speculation stops paying at N = "
                                           f"{predicted.n}<extra></extra>"})
    whole, one = crossover_sentence(levels, "aggregate"), crossover_sentence(levels, "per_request")
    words = ([f"Whole server and one request alike: {whole}."] if whole == one else
             [f"Whole server: {whole}.", f"One request: {one}."])
    values = [r for level in levels for which in ("aggregate", "per_request") if (r := level.ratio(which))]
    if run.model is not None:
        values += [point.ratio for point in run.model.points]
    top = max([*values, 1.0]) * 1.15
    return _framed([*traces, *marks], title, "<br>".join(words), style, 280, xaxis=_x_axis(levels, style),
                   yaxis={"title": {"text": "with ÷ without speculation (×)"}, "range": [0, top]})


def _ratio_words(which: str) -> str:
    return ("the whole server's speed with speculation" if which == "aggregate" else
            "one request's speed with speculation")


def _pair_words(level: Level, which: str) -> str:
    spec, plain = getattr(level, which)
    return f"{spec:.0f} tokens/s with, {plain:.0f} without"


def acceptance_figure(run: LoadRun | None, style: FigureStyle = FigureStyle()) -> Figure:
    """Each request's acceptance rate against N (a hollow point, nudged by prompt) and the level's pooled rate,
    with a sentence saying whether acceptance changed with load."""
    title = "Acceptance per request as requests pile up"
    if run is None:
        return empty_figure(title, NO_LOAD, style)
    levels = run.levels
    points = [(level.n, request) for level in levels for request in level.requests if request.rate is not None]
    prompts = sorted({request.prompt_index for _, request in points})
    nudge = {p: 1.0 + (i - (len(prompts) - 1) / 2) * 0.04 for i, p in enumerate(prompts)}
    traces = [
        {"type": "scatter", "mode": "markers", "meta": "requests", "name": "one request (x nudged by prompt)",
         "x": [n * nudge[request.prompt_index] for n, request in points], "y": [request.rate for _, request in points],
         "marker": {"size": 8, "color": "rgba(0,0,0,0)", "line": {"color": COLORS["accepted"], "width": 1.5}},
         "customdata": [[n, request.prompt_index + 1, request.accepted, request.drafted] for n, request in points],
         "hovertemplate": "N = %{customdata[0]} requests at once, this one on prompt %{customdata[1]}:<br>the target "
                          "accepted %{customdata[2]} of its %{customdata[3]} drafted tokens (%{y:.0%})<br>" + CLICK
                          + "<extra></extra>"},
        _line(levels, [level.acceptance for level in levels], "the level's requests together", "acceptance",
              COLORS["accepted"], "solid", "circle",
              f"N = %{{x}} requests at once:<br>together they had %{{y:.0%}} of their drafts accepted<br>{CLICK}",
              [[level.n] for level in levels])]
    return _framed(traces, title, acceptance_sentence(run), style, 260, xaxis=_x_axis(levels, style),
                   yaxis={"title": {"text": ACCEPTANCE_RATE.label}, "tickformat": ".0%", "range": [0, 1.05]})


def acceptance_sentence(run: LoadRun) -> str:
    """Whether acceptance per request changed with load: each prompt's requests against the same prompt's at the
    lowest N it ran (its spread there); only a request outside that spread counts as a change."""
    levels = run.levels
    first: dict[int, tuple[int, list[float]]] = {}
    changes: list[tuple[float, int, int, float, float]] = []
    compared = 0
    for level in levels:
        for request in level.requests:
            if request.rate is None:
                continue
            n, rates = first.setdefault(request.prompt_index, (level.n, []))
            if n == level.n:
                rates.append(request.rate)
                continue
            compared += 1
            if not min(rates) <= request.rate <= max(rates):
                near = min(rates, key=lambda rate: abs(rate - request.rate))
                changes.append((abs(request.rate - near), request.prompt_index, level.n, near, request.rate))
    if not first:
        return "No request carried its steps, so acceptance per request is not known."
    if not compared:
        return "No prompt ran at two levels, so acceptance per request cannot be compared across load."
    temperature = run.temperature
    chance = (f" At T = {temperature:g} each request samples its own tokens, so some of this is chance."
              if temperature > 0 else "")
    mix = "The line moves with the mix of prompts a level sends, not with load."
    if not changes:
        return ("The solid line (the level's requests together) moves with the mix of prompts each level sends, not "
                "with load. Acceptance did not change with load: each prompt's requests accepted the same share of "
                "their drafts at every N as at the lowest N it ran.")
    size, prompt, n, before, after = max(changes)
    return (f"Acceptance changed with load for {len(changes)} request{'s' if len(changes) > 1 else ''}: the largest, "
            f"prompt {prompt + 1} at N = {n}, accepted {after:.0%} of its drafts against {before:.0%} at "
            f"N = {first[prompt][0]} ({size * 100:.0f} points).{chance} {mix}")


def step_cost_figure(run: LoadRun | None, style: FigureStyle = FigureStyle()) -> Figure:
    """The speculative server's step time against N (measured) and its time per emitted token (derived)."""
    title = "The step's cost as the batch grows"
    if run is None:
        return empty_figure(title, NO_LOAD, style)
    levels = run.levels
    k = run.k
    traces = [
        _line(levels, [level.step_ms for level in levels], "a step (measured)", "step_ms", COLORS["target"], "solid",
              "circle", f"N = %{{x}} requests at once:<br>a step took %{{y:.1f}} ms on average (measured: the gap "
                        "between two of a request's steps<br>reaching the client, the whole batch drafting "
                        f"and verifying up to {k} + 1 tokens a request)<br>{CLICK}",
              [[level.n] for level in levels]),
        _line(levels, [level.token_ms for level in levels], "per token emitted (derived)", "token_ms",
              COLORS["draft"], "dash", "diamond",
              "N = %{x} requests at once:<br>%{y:.1f} ms per token a request received (derived: the steps' time<br>"
              "÷ the tokens they emitted; %{customdata[1]:.2f} tokens a step)<br>" + CLICK,
              [[level.n, _tokens_per_step(level)] for level in levels])]
    if run.model is not None:
        traces.append(_line(levels, [point.step_s * 1000 if (point := run.model.at(level.n)) else None
                                     for level in levels], "a step (batch cost model)", "step_ms.model", MODEL, "dot",
                            "diamond", "N = %{x} requests at once:<br>the batch cost model predicts a step of "
                            "%{y:.1f} ms: the target's forward over %{customdata[1]} tokens (probe)<br>and the "
                            f"drafts' forwards (calibrated at N = {run.model.calibrated_n})<br>{CLICK}",
                            [[level.n, level.n * (k + 1)] for level in levels]))
    subtitle = ("Measured: the time between two of a request's steps reaching the client, the mean over the "
                "level's steps after each request's first (the first holds the queue and the prompt). Derived: "
                "that time ÷ the tokens each step emitted. Only the server with speculation reports steps.")
    if run.model is not None:
        traces.append(_line(levels, [point.plain_s * 1000 if (point := run.model.at(level.n)) else None
                                     for level in levels], "a step without speculation (forward probe)",
                            "plain_ms.model", WITHOUT, "dashdot", "square",
                            "N = %{x} requests at once:<br>without speculation a step is one target forward over "
                            "%{x} tokens: %{y:.0f} ms (the forward probe)<br>" + CLICK,
                            [[level.n] for level in levels]))
        subtitle += (" Dotted: the batch cost model's step (the target verifying N × (k + 1) tokens, timed by the "
                     "forward probe, plus the drafts' forwards); grey: a step without speculation, one forward over "
                     "N tokens, which brings each request one token. Where the per-token line rises above the grey "
                     "one, a token costs more with speculation than without it.")
    return _framed(traces, title, subtitle, style, 260, xaxis=_x_axis(levels, style),
                   yaxis={"title": {"text": "milliseconds"}, "rangemode": "tozero"})


def _tokens_per_step(level: Level) -> float | None:
    steps = sum(len(request.step_ms) for request in level.requests)
    return sum(sum(request.step_tokens) for request in level.requests) / steps if steps else None
