"""Every figure SpecViz sends is the JSON plotly.py writes for it. specviz/figures/common.py (`Figure`) sends the dicts without
plotly.py's validation (it was most of a redraw's time); the oracle is plotly.py itself: each figure of every view
of every bundled file (the upload walk's views, tests/test_upload_walk.py) built again as a validated
`go.Figure` and written by plotly.py. A planted figure JSON that keeps the properties set to None, or the template
by name, is caught."""

from __future__ import annotations

import json
from typing import Any

import pytest

import specviz.figures.common as common
from specviz.figures.common import Figure
from test_upload_walk import CASES, KINDS, document

EMPTY_LEFT_OUT = ("annotations", "shapes", "images")    # plotly.py leaves an empty list of these out of the layout


def plotly_writes(figure: Figure) -> dict[str, Any]:
    """What plotly.py writes for the validated figure of the same spec."""
    return normalised(json.loads(figure.plotly.to_json()))


def sent(figure: Figure) -> dict[str, Any]:
    return normalised(json.loads(figure.to_json()))


def normalised(written: dict[str, Any]) -> dict[str, Any]:
    """`written` with the layout's empty lists left out (plotly.py draws an empty list and none alike)."""
    layout = {key: value for key, value in written["layout"].items() if not (key in EMPTY_LEFT_OUT and value == [])}
    return {**written, "layout": layout}


def built_figures(kind: str, name: str, monkeypatch: pytest.MonkeyPatch) -> list[Figure]:
    """Every figure the views of the bundled file `name` build."""
    built: list[Figure] = []

    class Recorded(Figure):
        def __init__(self, traces, spec):
            super().__init__(traces, spec)
            built.append(self)

    monkeypatch.setattr(common, "Figure", Recorded)
    KINDS[kind][2](document(kind, name).encode())
    return built


@pytest.mark.parametrize("kind, name", CASES, ids=[f"{kind}-{name}" for kind, name in CASES])
def test_every_figure_of_a_bundled_files_views_is_the_json_plotly_writes(kind, name, monkeypatch):
    figures = built_figures(kind, name, monkeypatch)
    assert figures or kind == "race"                      # a race is drawn as HTML, not as Plotly figures
    for figure in figures:
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
