"""The Explore tab's "Trees vs chain" section (issue #19): a sweep over node budgets, drawn and explained.

It opens on the default pair's recorded budget sweep (specviz/assets.py `TREE_SWEEP`), before any model
loads, and takes an uploaded sweep of its own; a sweep without budgets says so instead of an empty plot.
The figure is specviz/figures/tree_budget.py; beside it, what was measured, on which machine, and one
sentence per temperature on where the extra verify cost stops paying.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

import gradio as gr

from engine.formats.sweep_format import MAX_SWEEP_BYTES, SweepFormatError
from engine.formats.sweep_reader import SweepTable
from specviz.assets import RecordedSweep
from specviz.figures.common import Figure
from specviz.figures.tree_budget import NO_BUDGETS, budget_verdicts, tree_budget_figure, tree_depth
from specviz.quantities import speed_note_html
from specviz.style import FigureStyle
from specviz.updates import ComponentFields
from specviz.serving.uploads import parse_upload

HEADING = ("<h2 class='sv-section'>Trees vs chain</h2><p class='sv-muted'>A token tree drafts several guesses "
           "per position (the draft's top choices) and the target checks every branch in one forward, so more of "
           "each step survives, but that forward now reads every node instead of k + 1 tokens. On a GPU with room "
           "to spare that costs almost nothing; on a CPU it costs time. Per node budget: tokens per step τ, one "
           "target forward each (what the tree buys), tokens/s (what you get), and the verify forward's cost (what it costs).</p>")
RECORD_HINT = "python -m engine sweep --ks 5 --tree-budgets 0,4,8,16,32"


@dataclass(frozen=True)
class TreeViews(ComponentFields):
    """One value per output component of the section, in the order of `names()`."""

    table: SweepTable | None
    figure: Figure
    about: str


def render_trees(table: SweepTable | None, source: str, style: FigureStyle = FigureStyle()) -> TreeViews:
    """The figure and the words for `table`; `source` says where it came from ("the recorded sweep x.json")."""
    return TreeViews(table, tree_budget_figure(table, style), about_trees(table, source))


def about_trees(table: SweepTable | None, source: str) -> str:
    """What was measured and where (the speeds are this machine's), then the verdict sentences."""
    if table is None or not table.cells:
        return (f"<div class='sv-note'>No budget sweep to show: record one with <code>{RECORD_HINT}</code> and "
                "load its JSON here.</div>")
    if tree_depth(table) is None:
        return (f"<div class='sv-note' id='sv-trees-none'>{escape(source[:1].upper() + source[1:])}: "
                f"{escape(NO_BUDGETS)}</div>")
    meta = table.meta
    prompts, seeds = table.meta_list("prompts"), table.meta_list("seeds")
    machine = meta.get("machine") if isinstance(meta.get("machine"), str) else ""
    measured = (f"Speeds measured on <b>{escape(machine)}</b>: another machine gives other speeds, and a GPU, "
                "where a wider verify forward costs almost nothing, favours larger trees." if machine else
                "This sweep does not say which machine measured it: its speeds are that machine's, not this one's.")
    models = f"{meta.get('draft') or '?'} → {meta.get('target') or '?'}"
    facts = (f"{escape(source[:1].upper() + source[1:])}: {escape(models)}, "
             f"{table.num_runs} runs ({_count(len(prompts), 'prompt')} × {_count(len(seeds), 'seed')} × "
             f"{_count(len(table.temperatures), 'temperature')} × {len(table.tree_budgets)} drafts: the chain and "
             f"{_count(len(table.tree_budgets) - 1, 'tree budget')}), "
             f"{escape(str(meta.get('max_new_tokens', '?')))} new tokens each.")
    verdicts = "".join(f"<li>{escape(sentence)}</li>" for sentence in budget_verdicts(table))
    return (f"<div class='sv-about' id='sv-trees-about'><div>{facts}</div><div>{measured} {_noise(table)}</div>"
            f"<ul class='sv-trees-verdicts'>{verdicts}</ul>{speed_note_html()}</div>")


def _noise(table: SweepTable) -> str:
    """How far to trust a difference: the runs' scatter, and what a verify cost under 1× can only be."""
    text = ("Each point is one run: where single runs scatter more than two budgets differ, the difference is "
            "noise (timings on a busy machine vary from run to run).")
    if any(cell.verify_cost is not None and cell.verify_cost < 1 for cell in table.cells):
        text += (" A verify cost under 1× is such noise too: reading k + 1 tokens takes at least as long as reading "
                 "one, but the two were timed in different runs.")
    return text


def _count(number: int, noun: str) -> str:
    return f"{number or '?'} {noun}{'' if number == 1 else 's'}"


class TreeHandlers:
    """The section's events: an uploaded sweep, and a redraw for the large-text toggle or a new width.
    `shown_first` is the sweep a page shows before its session uploads one (the session's state starts
    as None, as the Run tab's does: specviz/run/tab.py)."""

    def __init__(self, shown_first: SweepTable | None = None):
        self.shown_first = shown_first

    def upload(self, data: bytes | None, large: bool, width: float | None) -> tuple:
        """Show an uploaded sweep; a bad file is a gr.Error and the shown sweep stays."""
        table = parse_upload(data, MAX_SWEEP_BYTES, "sweep", SweepTable.from_json, SweepFormatError)
        if not table.cells:
            raise gr.Error("The sweep holds no cells: nothing to draw.")
        return render_trees(table, "the uploaded sweep", FigureStyle.for_screen(large, width)).outputs()

    def restyle(self, table: SweepTable | None, about: str, large: bool, width: float | None) -> tuple:
        table = table if table is not None else self.shown_first
        return table, tree_budget_figure(table, FigureStyle.for_screen(large, width)), about   # the words stay


def trees_section(recorded: RecordedSweep, large: gr.Checkbox, width: gr.Number) -> None:
    """The section's components and events, inside the Explore tab."""
    handlers = TreeHandlers(shown_first=recorded.table)
    source = f"the recorded sweep {recorded.name}" if recorded.table is not None else ""
    first = render_trees(recorded.table, source)
    gr.HTML(HEADING)
    with gr.Column(elem_id="sv-trees"):
        views = {"table": gr.State(None),      # None: the recorded sweep (why: specviz/run/tab.py)
                 "figure": gr.Plot(first.figure, show_label=False, elem_id="sv-trees-figure"),
                 "about": gr.HTML(first.about, elem_id="sv-trees-words")}
        upload = gr.UploadButton("Load a budget sweep (JSON)", file_types=[".json"], type="binary", size="sm",
                                 elem_id="sv-trees-upload")
    outputs = [views[name] for name in TreeViews.names()]
    upload.upload(handlers.upload, inputs=[upload, large, width], outputs=outputs, concurrency_limit=2,
                  api_name="trees_upload", api_visibility="private")
    for control in (large, width):
        control.change(handlers.restyle, inputs=[views["table"], views["about"], large, width], outputs=outputs,
                       show_progress="hidden", concurrency_limit=None, api_name="trees_restyle",
                       api_visibility="private")
