"""Token timeline: one column per step, one row per draft position, cells coloured by verdict.

Rows d1..dK hold the draft's proposals (accepted / rejected / unverified). The row
above them holds the token the target adds itself each step: a *recovered* token at the
first rejection (greedy: the target's argmax; sampling: drawn from norm(max(0, p − q))),
or a *bonus* token after a full accept (greedy: the argmax; sampling: drawn from p). The
bottom row marks the carryover fed to the draft model before it drafts. Besides its
Okabe-Ito colour each kind has its own fill pattern (specviz/style.py PATTERNS), so colour is never
the only cue. A run on another engine (a vLLM server) keeps each draft's kind but draws the drafts it
did not return as '⬚' (other_engine.UNKNOWN_MARK, in the legend: a token's own text can be '?') and the ones
SpecViz rebuilt as '≈token'; its hovers say what it does not return
(specviz/other_engine.py) where p and q would be.
`style.timeline_steps` steps are shown at once, around the selected step; drag (pan)
or zoom to see the others. A cell holds style.TOKEN_CHARS characters on every screen ('·Return', not '·Retu…'), a
longer token up to style.shrunk_chars of them in a font shrunk to fit ('·Returns', '·function'), and a longer one
on two lines ('·palin' over 'drome'; cut only past two lines' worth): a narrow
screen shows fewer steps rather than narrower cells (style.FigureStyle.for_screen), and the figure is as tall as its
wrapped title, subtitle and legend need, so they never squeeze its rows (issue #41).
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any

from engine.config import SpecConfig
from engine.records import StepRecord
from engine.formats.trace import Trace, emitted_places
from specviz.figures.common import (Figure, empty_figure, highlight, legend_px, make_figure, step_window, text_px,
                                    x_range)
from specviz.other_engine import draft_label, draft_origin, no_numbers, target_label, unknown_legend
from specviz.quantities import probability_text
from specviz.run.step_reasons import carryover_sentence
from specviz.style import CATEGORIES, COLORS, TEXT_ON, FigureStyle, kind_labels, pattern, shrunk_chars
from specviz.tokens import number, two_lines, visible

TITLE = "Token timeline"
SUBTITLE = "one column per step: the draft's guesses d1..dk, and the token the target adds itself (top row)"
TREE_SUBTITLE = ("one column per step: its tree's accepted path d1.., the first candidate rejected after it,<br>"
                 "and the token the target adds itself (top row); under each step number, its tree's node count (n)")
CELL_HEIGHT = 0.86
TWO_LINE_SCALE = 0.8          # a two-line cell's font / the cell font, at most: two lines fill 0.86 of a row's height
AUDIT_COLOR = "#000000"       # the audit's marks: black with a white edge, apart from every kind's fill
AUDIT_LEGEND = "✕ audit: the target would (almost) never emit this token"
AUDIT_CORNER = (0.36, 0.28)   # a mark's place from its cell's centre: inside its top right corner (a phone's last
                              # column clipped a mark past the cell), over the end of only the longest tokens


@dataclass
class _Cells:
    """Bar coordinates of one category of cells."""

    x: list[int] = field(default_factory=list)
    base: list[float] = field(default_factory=list)
    text: list[str] = field(default_factory=list)
    hover: list[str] = field(default_factory=list)
    scale: list[float] = field(default_factory=list)     # each cell's font / the style's cell font

    def add(self, step: int, row: int, shown: str, chars: int, hover: str) -> None:
        """A cell of the visible text `shown`: whole in a font shrunk to the cell's `chars` characters, up to
        style.shrunk_chars(chars) characters on one line; a longer one on two lines in a font no larger than
        TWO_LINE_SCALE of the cell's (two lines fit its height), cut with an ellipsis only past two lines' worth
        (the hover has it whole)."""
        lines = two_lines(shown, shrunk_chars(chars))
        longest = max(len(line) for line in lines)
        self.x.append(step)
        self.base.append(row - CELL_HEIGHT / 2)
        self.text.append("<br>".join(_escape(line) for line in lines))
        self.hover.append(hover)
        self.scale.append(min(1.0 if len(lines) == 1 else TWO_LINE_SCALE, chars / longest) if longest else 1.0)


def timeline_figure(trace: Trace | None, selected_step: int | None = None, follow_end: bool = False,
                    style: FigureStyle = FigureStyle(), divergence: int | None = None, title: str = TITLE) -> Figure:
    """Timeline of `trace`; `selected_step` (a step index) is outlined and scrolled into view;
    `follow_end` shows the newest steps instead (while streaming); `divergence` (a step index)
    gets a red line where the output first leaves target-only decoding (lab mode); `title` names
    the run where a tab shows several timelines (wrapped like every title, so keep user text escaped)."""
    if trace is None or not trace.steps:
        return empty_figure(title, "No steps yet: press Run.", style)
    max_k = max(step.k for step in trace.steps)
    cells = {name: _Cells() for name in (*CATEGORIES, "carryover")}
    for position, step in enumerate(trace.steps):
        previous = trace.steps[position - 1] if position else None
        _add_step(cells, step, previous, max_k + 1, style.cell_chars, trace.config)
    tree = any(step.tree is not None for step in trace.steps)
    bars = [_bar(name, cell, style, kind_labels(tree)[name]) for name, cell in cells.items()]
    if any(not draft.known for step in trace.steps for draft in step.draft):
        bars.append(_unknown_key(trace.config))
    if trace.audit is not None:
        bars.append(_audit_marks(trace, max_k + 1))
    indices = [step.index for step in trace.steps]
    window = step_window(indices, style.timeline_steps, selected_step, follow_end)
    rows = max_k + 2
    ticks = ({"tickmode": "array", "tickvals": indices, "ticktext": [_tree_tick(step) for step in trace.steps]}
             if tree else {"tickmode": "linear", "dtick": 1 if window or len(trace.steps) <= 20 else 5})
    subtitle = TREE_SUBTITLE if tree else SUBTITLE
    # Each part as tall as its text, so a phone's longer wrapped subtitle and legend never squeeze the rows (their
    # labels ran into each other): title and subtitle, the divergence label, the rows, ticks and axis title, legend.
    top = (text_px(f"<b>{title}</b>", style.line_chars(style.title_size, bold=True), style.title_size, 1.25)
           + text_px(subtitle, style.line_chars(style.font_size), style.font_size) + 16
           + (2 * style.font_size if divergence is not None else 0))
    bottom = (int(((2 if tree else 1) + 1) * 1.4 * style.font_size) + 20
              + legend_px([trace["name"] for trace in bars], style))
    rows_px = rows * (34 + 2 * (style.cell_font_size - 12))
    return make_figure(
        bars, title, subtitle, style, height=top + rows_px + bottom,
        barmode="overlay", bargap=0.05, dragmode="pan", shapes=highlight(selected_step) + divergence_line(divergence),
        annotations=divergence_label(divergence, style), margin={"t": top, "b": bottom},
        yaxis={"tickvals": list(range(rows)), "ticktext": ["carry", *(f"d{i}" for i in range(1, max_k + 1)), "target +1"],
               "range": [-0.55, rows - 0.45], "fixedrange": True, "showgrid": False, "zeroline": False},
        xaxis={"title": {"text": "step (drag sideways to scroll)" if window else "step"}, "range": x_range(indices, window),
               **ticks, "showgrid": False, "zeroline": False})


def _tree_tick(step: StepRecord) -> str:
    """A tree step's tick: its index over its tree's node count."""
    return f"{step.index}" if step.tree is None else f"{step.index}<br>({len(step.tree.nodes)})"


def divergence_line(step: int | None) -> list[dict[str, Any]]:
    """A red line on the left edge of the step where the output first leaves target-only (none for None)."""
    if step is None:
        return []
    return [{"type": "line", "name": "divergence", "xref": "x", "yref": "paper", "x0": step - 0.5, "x1": step - 0.5,
             "y0": 0, "y1": 1, "line": {"color": COLORS["rejected"], "width": 3}, "layer": "above"}]


def divergence_label(step: int | None, style: FigureStyle) -> list[dict[str, Any]]:
    if step is None:
        return []
    where = {"x": 0.0, "xref": "paper"} if style.narrow else {"x": step - 0.5, "xref": "x"}  # a phone: no room right
    return [{"text": f"<b>output leaves target-only at step {step}</b>", "name": "divergence", **where, "y": 1.0,
             "yref": "paper", "xanchor": "left", "yanchor": "bottom", "showarrow": False,
             "font": {"color": COLORS["rejected"], "size": style.font_size}, "bgcolor": "rgba(255,255,255,0.85)"}]


def _add_step(cells: dict[str, _Cells], step: StepRecord, previous: StepRecord | None, target_row: int, chars: int,
              config: SpecConfig) -> None:
    greedy = config.is_greedy
    for position, (draft, verdict) in enumerate(zip(step.draft, step.verdicts)):
        target = step.target[position]
        shown = draft_label(draft) if config.is_external else draft.text
        lines = [f"<b>step {step.index}, d{position + 1}: {_escape(visible(shown))}</b> ({verdict})"]
        if config.is_external:
            lines += [_escape(sentence) for sentence in (draft_origin(config, draft), no_numbers(config)) if sentence]
        else:
            lines += [f"q (draft prob) = {probability_text(draft.q)}",
                      f"p (target prob) = {probability_text(target.p)}"]
        if step.accept_prob[position] is not None:
            lines.append(f"min(1, p/q) = {probability_text(step.accept_prob[position])}")
        if step.draws[position] is not None:
            lines.append(f"random draw u = {number(step.draws[position])}"
                         f" ({'u < min(1,p/q): accept' if verdict == 'accepted' else 'u ≥ min(1,p/q): reject'})")
        choice = _escape(visible(target_label(target)))
        if greedy and verdict != "unverified":
            lines.append("= the target's argmax: accept" if verdict == "accepted"
                         else f"≠ the target's argmax {choice}: reject")
        elif verdict != "accepted" and target.known:
            lines.append(f"target's choice here: {choice}")
        cells[verdict].add(step.index, position + 1, visible(shown), chars, "<br>".join(lines))
    extra = step.emitted[-1] if step.emitted and step.emitted[-1].kind != "accepted" else None
    if extra is not None:
        position = len(step.emitted)
        p = next((alt.prob for alt in step.target[position - 1].top if alt.id == extra.id), None)
        if extra.kind == "recovered":
            why = (f"the target's argmax at d{position}, which replaces the rejected draft" if greedy
                   else f"drawn from the residual norm(max(0, p − q)) after d{position} was rejected")
        elif step.k == 0:
            why = "no drafts this step: " + ("the target's argmax" if greedy else "drawn from the target's p")
        elif step.tree is not None:
            why = (f"the target's {'argmax' if greedy else 'draw from p'} after the accepted path's last node, "
                   "a leaf of the tree")
        else:
            why = (f"the target's argmax after all {step.num_accepted} drafts were accepted" if greedy
                   else f"drawn from the target's p after all {step.num_accepted} drafts were accepted")
        hover = (f"<b>step {step.index}: {_escape(visible(extra.text))}</b> ({extra.kind})<br>{why}"
                 + (f"<br>target prob of this token = {probability_text(p)}" if p is not None else "")
                 + (f"<br>{_escape(no_numbers(config))}" if config.is_external else ""))
        cells[extra.kind].add(step.index, target_row, visible(extra.text), chars, hover)
    if step.carryover:
        carried = " ".join(visible(token.text) for token in step.carryover)     # a plain space between tokens
        cells["carryover"].add(step.index, 0, carried, chars,
                               f"<b>step {step.index}: carryover</b><br>{_escape(carried)}<br>"
                               + _escape(carryover_sentence(step, previous)).replace("; ", "<br>"))


def _bar(name: str, cells: _Cells, style: FigureStyle, label: str) -> dict[str, Any]:
    """One category's cells as a bar trace; an empty category gets one invisible (None) cell so
    that the legend always lists every colour, from the first step of a run on."""
    if not cells.x:
        cells = _Cells(x=[None], base=[None], text=[""], hover=[""], scale=[1.0])  # type: ignore[list-item]
    marker: dict[str, Any] = {"color": COLORS[name], "line": {"width": 0}}
    if pattern(name):        # patterned as well as coloured: colour-blind viewers, greyscale projectors
        marker["pattern"] = pattern(name)
    return {
        "type": "bar", "name": label, "meta": name, "x": cells.x, "y": [CELL_HEIGHT] * len(cells.x),
        "base": cells.base, "text": cells.text, "hovertext": cells.hover, "hovertemplate": "%{hovertext}<extra></extra>",
        "width": 0.92, "marker": marker, "textposition": "inside", "insidetextanchor": "middle", "textangle": 0,
        "constraintext": "none", "cliponaxis": True,
        "textfont": {"color": TEXT_ON[name], "family": "monospace",
                     "size": [round(style.cell_font_size * scale, 1) for scale in cells.scale]},
    }


def audit_cells(trace: Trace, target_row: int) -> list[tuple[int, int, int]]:
    """(step, row, position among the emitted tokens) of each token the trace's audit marked: an accepted draft in
    its draft row, the target's own token in the target row."""
    marked = set(trace.audit.marked) if trace.audit is not None else set()
    return [(step.index, j + 1 if step.emitted[j].kind == "accepted" else target_row, position)
            for position, step, j in emitted_places(trace) if position in marked]


def _audit_marks(trace: Trace, target_row: int) -> dict[str, Any]:
    """A mark in the corner of every cell whose token the audit marked (engine/formats/trace_audit.py); with none
    marked, one invisible point, so the legend still says the run was audited."""
    audit = trace.audit
    emitted = [step.emitted[j] for _, step, j in emitted_places(trace)]
    scorer = _escape(audit.scored_by)
    rule = (f"it is not the argmax of the target ({scorer}):<br>greedy decoding would not emit it"
            if audit.temperature == 0 else
            f"the target ({scorer}) gives it<br>p = %{{customdata[1]}} at T = {audit.temperature:g}, under "
            f"{audit.threshold:g}: it would emit it<br>less than once in a million draws")
    cells = audit_cells(trace, target_row)
    return {"type": "scatter", "mode": "markers", "meta": "audit", "showlegend": True, "cliponaxis": True,
            "name": AUDIT_LEGEND if cells else f"{AUDIT_LEGEND} (none in this run)",
            "x": [step + AUDIT_CORNER[0] for step, _, _ in cells] or [None],
            "y": [row + AUDIT_CORNER[1] for _, row, _ in cells] or [None],
            "marker": {"symbol": "x", "size": 10, "color": AUDIT_COLOR, "line": {"color": "#FFFFFF", "width": 1.5}},
            "customdata": [[_escape(visible(emitted[position].text)), f"{audit.probabilities[position]:.2g}"]
                           for _, _, position in cells] or [["", ""]],
            "hovertemplate": f"<b>audit: %{{customdata[0]}}</b><br>{rule}<extra></extra>"}


def _unknown_key(config: SpecConfig) -> dict[str, Any]:
    """A legend-only entry naming the mark of a draft the engine did not return (no cells of its own: each
    such draft keeps its verdict's colour and pattern)."""
    return {"type": "bar", "name": unknown_legend(config), "meta": "unknown", "x": [None], "y": [None], "text": [""],
            "hovertext": [""],
            "marker": {"color": "rgba(0,0,0,0)", "line": {"width": 1, "color": "#555"}}, "hoverinfo": "skip",
            "showlegend": True}


def _escape(text: str) -> str:
    return html.escape(text, quote=False)
