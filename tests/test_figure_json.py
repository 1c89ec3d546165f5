"""Every figure SpecViz sends is the JSON plotly.py writes for it. specviz/figures/common.py (`Figure`) sends the
dicts without plotly.py's validation (it was most of a redraw's time); the oracle is plotly.py itself: each figure
built again as a validated `go.Figure` and written by plotly.py. The figures: those of every view of every bundled
file (the upload walk's views, tests/test_upload_walk.py), of every Lab stage and Compare, a live run's stand-ins and
the class's star on the load chart, each on a laptop, a phone and a projector. A planted figure JSON that keeps the
properties set to None, or the template by name, is caught."""

from __future__ import annotations

import json
from typing import Any

import pytest

import specviz.figures.common as common
from engine.formats.trace import Trace, first_steps
from engine.load.class_point import class_point
from fakes import FakeRunner
from specviz.assets import ASSETS_DIR, load_lab_traces
from specviz.explore.compare import Comparison, Side, compare_outputs
from specviz.figures.acceptance import held_while_live
from specviz.figures.common import Figure
from specviz.figures.load import LoadRun, throughput_figure
from specviz.lab.handlers import LabHandlers
from specviz.lab.views import KEYS, recorded_lab
from specviz.run.views import render
from specviz.style import FigureStyle
from test_class_point import SWEEP, run
from test_upload_walk import CASES, KINDS, document

EMPTY_LEFT_OUT = ("annotations", "shapes", "images")    # plotly.py leaves an empty list of these out of the layout
SCREENS = ((False, 1440), (False, 390), (True, 1280))   # (large text, width): a laptop, a phone, a projector


def plotly_writes(figure: Figure) -> dict[str, Any]:
    """What plotly.py writes for the validated figure of the same spec."""
    return normalised(json.loads(figure.plotly.to_json()))


def sent(figure: Figure) -> dict[str, Any]:
    return normalised(json.loads(figure.to_json()))


def normalised(written: dict[str, Any]) -> dict[str, Any]:
    """`written` with the layout's empty lists left out (plotly.py draws an empty list and none alike)."""
    layout = {key: value for key, value in written["layout"].items() if not (key in EMPTY_LEFT_OUT and value == [])}
    return {**written, "layout": layout}


def recorded(monkeypatch: pytest.MonkeyPatch) -> list[Figure]:
    """The list every figure built from now on joins."""
    built: list[Figure] = []

    class Recorded(Figure):
        def __init__(self, traces, spec):
            super().__init__(traces, spec)
            built.append(self)

    monkeypatch.setattr(common, "Figure", Recorded)
    return built


def built_figures(kind: str, name: str, monkeypatch: pytest.MonkeyPatch) -> list[Figure]:
    """Every figure the views of the bundled file `name` build."""
    built = recorded(monkeypatch)
    KINDS[kind][2](document(kind, name).encode())
    return built


@pytest.mark.parametrize("kind, name", CASES, ids=[f"{kind}-{name}" for kind, name in CASES])
def test_every_figure_of_a_bundled_files_views_is_the_json_plotly_writes(kind, name, monkeypatch):
    figures = built_figures(kind, name, monkeypatch)
    assert figures or kind == "race"                      # a race is drawn as HTML, not as Plotly figures
    for figure in figures:
        assert sent(figure) == plotly_writes(figure), repr(figure)


def test_every_figure_of_the_lab_compare_a_live_run_and_the_class_star_is_the_json_plotly_writes(monkeypatch):
    built = recorded(monkeypatch)
    lab = recorded_lab(load_lab_traces(KEYS))
    handlers = LabHandlers(FakeRunner(), shown_first=lab)
    greedy, sampled = (Trace.load(ASSETS_DIR / "traces" / name) for name in ("qwen-coder-greedy.json",
                                                                             "qwen-coder-sampled.json"))
    comparison = Comparison({"A": Side(5, 0.0, "model"), "B": Side(5, 0.7, "model")}, {"A": greedy, "B": sampled})
    star = class_point([run(0, 2, 40), run(0.5, 2.5, 40), run(1, 3, 40)])

    def draws(action) -> None:                  # each view builds figures of its own
        before = len(built)
        action()
        assert len(built) > before

    for large, width in SCREENS:
        style = FigureStyle.for_screen(large, width)
        for key in KEYS:
            draws(lambda: handlers.show(lab, key, "", large, width))
            draws(lambda: handlers.select_step(lab, key, 1, large, width))
        draws(lambda: compare_outputs(comparison, "", style))
        draws(lambda: held_while_live(style))
        draws(lambda: render(first_steps(greedy, 3), "", live=True, style=style))
        draws(lambda: throughput_figure(LoadRun.of(SWEEP), style, point=star))
    for figure in built:
        assert sent(figure) == plotly_writes(figure), repr(figure)


def test_a_figure_sent_with_its_none_properties_or_its_template_by_name_is_caught(monkeypatch):
    figures = built_figures("trace", "qwen-coder-greedy.json", monkeypatch)
    monkeypatch.setattr(common, "without_none", lambda value: value)
    assert any(sent(figure) != plotly_writes(figure) for figure in figures)
    monkeypatch.undo()
    figures = built_figures("trace", "qwen-coder-greedy.json", monkeypatch)
    monkeypatch.setattr(common, "with_template", lambda layout: layout)
    assert all(sent(figure) != plotly_writes(figure) for figure in figures)


def test_reading_a_figure_reads_plotlys_validated_figure():
    figure = Figure([{"type": "bar", "x": [1, 2], "y": [3, 4], "name": None}], {"template": "none", "height": 200})
    assert figure.data[0].y == (3, 4) and figure.layout.height == 200 and figure.data[0].name is None
    assert figure == Figure([{"type": "bar", "x": [1, 2], "y": [3, 4]}], {"template": "none", "height": 200})
    misspelt = Figure([{"type": "bar", "x": [1], "colour": "red"}], {})
    json.loads(misspelt.to_json())                       # sent as it is: Plotly ignores what it does not know
    with pytest.raises(ValueError, match="colour"):      # read through plotly.py: its check says what is wrong
        misspelt.data
