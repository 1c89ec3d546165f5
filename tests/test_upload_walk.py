"""Every uploaded file is refused with its bad field's path, or it renders completely: a systematic walk.

Every field of every bundled trace, race, sweep and load file (assets/), and of a sampled trace that holds
every field a trace can (a baseline too), is set to each of twenty odd values (document_walk.ODD_VALUES:
wrong types, NaN, infinities, huge and negative numbers, broken strings, empty containers) and
deleted, one field at a time. Each damaged file goes
through its tab's upload handler, as the page sends it:

- refused: one gr.Error, "Not a SpecViz <kind>: <the field's path>: ...", one line;
- or accepted: then every view it reaches renders and serialises as Gradio sends it (figures as
  Plotly JSON, HTML as UTF-8): a trace's Run tab views at every step; a race's lanes; a sweep's
  heatmaps, theory and positions at every temperature, the settings panel, the trees section and
  its downloads, at a phone's size (the most cramped layouts); a load run's charts, every level's
  requests, and each request opened on the Run tab.

A field added to a format later is walked the same way, so it cannot reopen the hole. Bundled traces
are walked over their first steps (the fields are the same at every step; the whole files render in
test_trace_fuzz.py, whose random damage also reaches the later places of a field); load runs over
their first levels, each request's trace cut the same way; the sweeps and the race whole, each field
at its first place.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
from typing import Any, Callable

import gradio as gr
import plotly.graph_objects as go
import pytest

from document_walk import DELETE, ODD_VALUES, fields, replaced, where
from engine.formats.load_format import MAX_LOAD_BYTES, LoadFormatError
from engine.formats.load_reader import parse_load_json
from engine.formats.race import MAX_RACE_BYTES, Race, RaceFormatError
from engine.formats.sweep_format import MAX_SWEEP_BYTES, SweepFormatError
from engine.formats.sweep_reader import SweepTable
from engine.formats.trace import MAX_TRACE_BYTES, Trace, TraceFormatError, first_steps
from engine.metrics import BaselineStats
from fakes import FakeRunner
from specviz.assets import ASSETS_DIR
from specviz.explore.handlers import KS, ExploreHandlers
from specviz.explore.load_view import LoadHandlers, request_choices
from specviz.explore.settings import settings_note, settings_values
from specviz.explore.trees import TreeHandlers
from specviz.figures.common import Figure
from specviz.race.handlers import RaceHandlers
from specviz.run.handlers import Handlers
from specviz.serving.uploads import parse_upload
from trace_factory import make_trace

FOLDERS = {"trace": "traces", "race": "races", "sweep": "sweeps", "load": "loads"}
NOT_UPLOADS = ("examples.json", "prompts.json")     # the bundled JSON files that are no upload format
TRACES = sorted((ASSETS_DIR / "traces").glob("*.json"))
RACES = sorted((ASSETS_DIR / "races").glob("*.json"))
SWEEPS = sorted(path for path in (ASSETS_DIR / "sweeps").glob("*.json") if path.name != "prompts.json")
LOADS = sorted((ASSETS_DIR / "loads").glob("*.json"))
LOAD_LEVELS = 1             # levels kept of a bundled load run (N = 1: its one request, its trace cut as above)
TRACE_STEPS = 3             # steps kept of a bundled trace: the first (the prefill), a middle one, the last
PHONE = (False, 300)        # the narrowest screen: every figure in its cramped layout
REFUSED = re.compile(r"^Not a SpecViz (trace|race|sweep|load run): (?P<why>[^\n]*\S)$")
PLOTLY_CHECKED: set[bytes] = set()      # digests of the figures plotly.py has accepted in this process
WHOLE_DOCUMENT = ("the document", "the load document", "top level", "a JSON object", "schema")    # what a refusal of the root names


def shown(value: Any) -> None:
    """Send `value` the way Gradio does: a figure as Plotly JSON (gr.Plot), which plotly.py's checks must accept;
    text as UTF-8; updates and tuples item by item."""
    if isinstance(value, Figure):
        accepted_by_plotly(value.to_json())
    elif isinstance(value, str):
        value.encode("utf-8")
    elif isinstance(value, dict):
        for item in value.values():
            shown(item)
    elif isinstance(value, (tuple, list)):
        for item in value:
            shown(item)


def accepted_by_plotly(figure_json: str) -> None:
    """plotly.py's validation of a figure as it is sent (it raises ValueError naming a value a property does not
    take): the app sends figures unvalidated (specviz/figures/common.py), so a damaged file's value that reaches a
    figure is checked here. Each distinct figure once: most damage leaves most figures as they were."""
    digest = hashlib.blake2b(figure_json.encode("utf-8", "surrogatepass"), digest_size=16).digest()
    if digest not in PLOTLY_CHECKED:
        go.Figure(json.loads(figure_json))
        PLOTLY_CHECKED.add(digest)


# --- what each kind of file reaches once accepted --------------------------------------------------

def read_trace(data: bytes) -> Any:
    return parse_upload(data, MAX_TRACE_BYTES, "trace", Trace.from_json, TraceFormatError)


def trace_views(data: bytes) -> None:
    handlers = Handlers(FakeRunner(), replay_delay=0.0)
    uploaded = handlers.upload(data, *PHONE)
    trace = uploaded[0]
    shown(uploaded)
    for step in trace.steps:
        shown(handlers.select_step(trace, step.index, *PHONE))


def read_race(data: bytes) -> Any:
    return parse_upload(data, MAX_RACE_BYTES, "race", Race.from_json, RaceFormatError)


def race_views(data: bytes) -> None:
    race, html, status = RaceHandlers(FakeRunner()).upload(data)
    shown((html, status))
    Race.from_json(race.to_json())


def read_sweep(data: bytes) -> Any:
    """What the views draw from: the cells, the runs and the meta (the document itself always differs)."""
    table = parse_upload(data, MAX_SWEEP_BYTES, "sweep", SweepTable.from_json, SweepFormatError)
    return table.cells, table.runs, table.meta


def sweep_views(data: bytes) -> None:
    explore, trees = ExploreHandlers(FakeRunner()), TreeHandlers()
    views = explore.upload(data, *PHONE)
    table = views[0]
    shown(views)
    for temperature in table.temperatures:
        shown(explore.select_temperature(table, temperature, *PHONE))
    shown(settings_values(table, list(KS), []))
    shown(settings_note(table, "the uploaded sweep's", list(KS), []))
    shown(trees.upload(data, *PHONE))
    SweepTable.from_json(table.to_json())
    table.to_csv()


def read_load_run(data: bytes) -> Any:
    return parse_upload(data, MAX_LOAD_BYTES, "load run", parse_load_json, LoadFormatError)


def load_views(data: bytes) -> None:
    """Explore's load section: the charts, every level's request list and every request opened (its trace
    read by the Run tab's upload, as the Open button sends it)."""
    handlers = LoadHandlers(None, "")
    views = handlers.upload(data, *PHONE)
    document = views[0]
    shown(views)
    shown(handlers.restyle(document, "", True, 1280))
    for level in document["servers"][0]["levels"]:
        shown(handlers.select_level(document, level["concurrency"]))
        for _, index in request_choices(document, level["concurrency"]):
            opened_views(handlers.open_request(document, level["concurrency"], index))


@functools.lru_cache(maxsize=64)
def opened_views(trace_json: str) -> None:
    """A request's trace opened on the Run tab (trace_views), drawn once per distinct trace: damage elsewhere in the
    load run (its machine record, a level's figures) opens the very trace the undamaged run opened, whose views are
    the same and drew already (most of the load walk's time went to drawing them again)."""
    trace_views(trace_json.encode())


# kind -> (its name in messages, what the reader makes of a file, every view of an accepted file)
KINDS: dict[str, tuple[str, Callable[[bytes], Any], Callable[[bytes], None]]] = {
    "trace": ("trace", read_trace, trace_views), "race": ("race", read_race, race_views),
    "sweep": ("sweep", read_sweep, sweep_views), "load": ("load run", read_load_run, load_views)}


# --- the documents ---------------------------------------------------------------------------------

@functools.cache
def document(kind: str, name: str) -> str:
    """The undamaged document as JSON: a bundled file (a trace cut to its first steps) or the sampled trace."""
    if name == "sampled":
        return make_trace([4, 1, 0], sampling=True, baseline=BaselineStats(3.0, True, 1.0, True)).to_json()
    path = ASSETS_DIR / FOLDERS[kind] / name
    if kind == "trace":
        return first_steps(Trace.load(path), TRACE_STEPS).to_json()
    if kind == "load":
        return json.dumps(cut_load(json.loads(path.read_text(encoding="utf-8"))))
    return path.read_text(encoding="utf-8")


def cut_load(run: dict[str, Any]) -> dict[str, Any]:
    """A load run cut to its first LOAD_LEVELS levels, each request's trace to its first steps (the fields are
    the same at every level and request; the whole file reads in test_load_figures.py)."""
    run["settings"]["levels"] = run["settings"]["levels"][:LOAD_LEVELS]
    for server in run["servers"]:
        server["levels"] = server["levels"][:LOAD_LEVELS]
        for level in server["levels"]:
            for request in level["requests"]:
                if request["trace"] is not None:
                    request["trace"] = first_steps(Trace.from_dict(request["trace"]), TRACE_STEPS).to_dict()
    return run


CASES = [("trace", "sampled"), *(("trace", path.name) for path in TRACES), *(("race", path.name) for path in RACES),
         *(("sweep", path.name) for path in SWEEPS), *(("load", path.name) for path in LOADS)]


def walk(kind: str, name: str, within: tuple[str, ...] = ()) -> list[str]:
    """Every field at its first place (those under `within`'s paths only, when given), set to each odd
    value and deleted: the problems found."""
    label, read, views = KINDS[kind]
    text = document(kind, name)
    original = json.loads(text)
    views(text.encode())
    undamaged = read(text.encode())
    names = {label, *(key for path in fields(original) for key in path if key != "[]")}   # the root: its kind
    problems = []
    for field, places in sorted(fields(original).items()):
        if within and not where(places[0]).startswith(within):
            continue
        for value in (*ODD_VALUES, DELETE):
            damaged = replaced(json.loads(text), places[0], value)
            data = json.dumps(damaged, allow_nan=True).encode("utf-8", "surrogatepass")
            problem = _refused_or_renders(read, views, data, undamaged, names)
            if problem:
                problems.append(f"{where(places[0])} = {'(deleted)' if value is DELETE else repr(value)}: {problem}")
    return problems


def _refused_or_renders(read: Callable[[bytes], Any], views: Callable[[bytes], None], data: bytes,
                        undamaged: Any, names: set[str]) -> str:
    """'' when the upload is refused in one line naming a field of the document (`names`: its keys), or
    renders everywhere (not drawn again when the reader made of it what it made of the undamaged
    file); else what went wrong."""
    try:
        if read(data) != undamaged:
            views(data)
    except gr.Error as error:
        if error.message == "The sweep holds no cells: nothing to draw.":
            return ""
        refused = REFUSED.match(error.message)
        why = refused.group("why") if refused else ""
        if not refused or not (any(re.search(rf"\b{re.escape(key)}\b", why) for key in names)
                               or any(words in why for words in WHOLE_DOCUMENT)):
            return f"refused without a field's path: {error.message!r}"
        return ""
    except Exception as error:  # a crash in a view: the defect this test exists for
        return f"{type(error).__name__}: {error}"
    return ""


@pytest.mark.parametrize("kind, name", CASES, ids=[f"{kind}-{name}" for kind, name in CASES])
def test_every_field_set_to_each_odd_value_or_deleted_is_refused_by_path_or_renders(kind, name):
    problems = walk(kind, name)
    assert not problems, f"{len(problems)} damaged {kind}s crash a view:\n" + "\n".join(problems[:20])


def test_the_walk_reaches_every_bundled_file_and_every_odd_kind_of_value():
    bundled = {path for path in ASSETS_DIR.rglob("*.json") if path.name not in NOT_UPLOADS}
    assert {ASSETS_DIR / FOLDERS[kind] / name for kind, name in CASES if name != "sampled"} == bundled
    assert len(ODD_VALUES) == 20 and any(isinstance(v, float) and math.isnan(v) for v in ODD_VALUES)
    assert {type(v) for v in ODD_VALUES} >= {type(None), bool, int, float, str, list, dict}


# --- the walk finds what it exists for ------------------------------------------------------------

def test_a_view_that_crashes_on_an_accepted_file_is_caught(monkeypatch):
    """Plant the issue's first crash: the theory figure of a temperature without chain cells (max() of
    nothing). The walk over the bundled trees sweep must report it."""
    import specviz.figures.sweep as sweep_figures
    real = sweep_figures.theory_figure

    def planted(table, temperature, style=None, device_costs=None):
        return (real(table, temperature, style, device_costs) if table.at(temperature) or temperature is None
                else max([]))

    monkeypatch.setattr(sweep_figures, "theory_figure", planted)
    monkeypatch.setattr("specviz.explore.views.theory_figure", planted)
    problems = walk("sweep", "qwen-coder-trees.json", within=("cells",))      # the planted crash is a cell's
    assert any("max() arg is an empty sequence" in problem for problem in problems), problems[:5]


def test_a_reader_that_lets_a_bad_value_through_is_caught(monkeypatch):
    """Plant a reader that takes a negative draft cost, as it did: the only chain cell at T = 0 of the trees
    sweep at -0.5 makes the model's k c + v zero at k = 2, and the walk reports the view's crash."""
    import engine.formats.sweep_reader as reader
    monkeypatch.setitem(reader.RANGES, "draft_cost", (None, None))
    problems = walk("sweep", "qwen-coder-trees.json", within=("cells",))
    assert "cells[0].draft_cost = -0.5: ZeroDivisionError: float division by zero" in problems, problems[:5]


def test_a_figure_plotly_refuses_is_caught(monkeypatch):
    """The app sends figures unvalidated, so the walk checks them: plant a histogram that a damaged prompt turns
    invalid (a negative tick count on its axis) and the walk reports plotly.py's refusal for that field."""
    import specviz.run.views as run_views
    real = run_views.histogram_figure
    original = Trace.from_json(document("trace", "sampled")).prompt.text

    def planted(trace, style=None):
        figure = real(trace, style=style)
        return figure if trace is None or trace.prompt.text == original else figure.with_layout(xaxis={"nticks": -1})

    monkeypatch.setattr(run_views, "histogram_figure", planted)
    problems = walk("trace", "sampled", within=("prompt",))
    assert any(problem.startswith("prompt.text = ") and "ValueError" in problem and "nticks" in problem
               for problem in problems), problems[:5]


def test_a_refusal_without_the_fields_path_is_caught(monkeypatch):
    import engine.formats.race_reader as reader
    real = reader.race_from_dict

    def vague(data):
        try:
            return real(data)
        except reader.RaceFormatError:
            raise reader.RaceFormatError("something is wrong") from None

    monkeypatch.setattr(reader, "race_from_dict", vague)
    problems = walk("race", RACES[0].name)
    assert problems and all("refused without a field's path" in problem for problem in problems), problems[:3]


def test_the_error_names_the_damaged_field():
    """Spot checks of the paths the readers name, one per format."""
    cases = [("trace", "sampled", ("steps", 1, "draft", 0, "q"), "x", "steps[1].draft[0].q"),
             ("race", RACES[0].name, ("speculative", "steps", 2, "t_s"), -1, "speculative.steps[2].t_s"),
             ("sweep", "qwen-coder.json", ("cells", 3, "draft_cost"), -0.5, "cells[3].draft_cost"),
             ("load", LOADS[0].name, ("servers", 1, "levels", 0, "requests", 0, "done_s"), -1,
              "servers[1].levels[0].requests[0].done_s")]
    for kind, name, path, value, named in cases:
        data = json.dumps(replaced(json.loads(document(kind, name)), path, value)).encode()
        with pytest.raises(gr.Error) as refused:
            KINDS[kind][2](data)
        assert named in refused.value.message, refused.value.message
