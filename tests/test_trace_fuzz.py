"""Fuzzing the trace reader: a damaged trace is refused with one gr.Error naming a field, or it
loads and renders every view of every step.

Documents are uploaded as JSON through the Run tab's handler. A trace that loads goes through
every view a loaded trace reaches: the Run tab's outputs, the scrubber's figures and detail at
every step (phone and projector sizes), Prev/Next, the replay (all outputs after each step),
the Lab tab with the trace as a stage and as the reference, and a JSON round trip. Figures are
serialised as gr.Plot sends them and HTML encoded as UTF-8, so a value that would only fail on
its way to the browser fails here.

- Hypothesis: one to three random damages to a bundled trace as the replay shows it after its
  first few steps (so that every step can be rendered): a value replaced by another of any JSON
  type (NaN, infinities, huge and negative numbers, lone surrogates included) or nudged within
  its type, a key or list item deleted, added or duplicated.
- Each bundled trace, whole, renders everywhere.

The systematic walk (every field set to each odd value, and deleted) is tests/test_upload_walk.py.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from pathlib import Path
from typing import Any

import gradio as gr
import pytest
from hypothesis import given, settings, strategies as st

from engine.metrics import BaselineStats
from engine.formats.trace import Trace
from document_walk import DELETE, fields, replaced
from fakes import FakeRunner
from specviz.assets import ASSETS_DIR
from specviz.run.handlers import Handlers
from specviz.lab.views import REFERENCE, LabSet, render_lab
from engine.formats.trace import first_steps
from specviz.style import FigureStyle
from test_upload_walk import shown
from trace_factory import make_trace

BUNDLED = sorted((ASSETS_DIR / "traces").glob("*.json"))
MAX_STEPS = 5            # steps kept of a bundled trace: one more than the phone figures show at once
PHONE = 300              # viewport pixels: figures show 4 steps at once and scroll
FIELD_PATH = re.compile(r"\b(trace|schema|config|prompt|output|steps|summary|complete)\b")
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.integers(-(2**70), 2**70),
    st.sampled_from([2**31, 2**53 + 1, 2**64, 10**30, float("nan"), float("inf"), float("-inf"), 1e308, -0.0,
                     1.0000001, -1e-9, 0.5]),
    st.floats(allow_nan=True, allow_infinity=True), st.floats(0.0, 1.0),
    st.text(max_size=4),
    st.sampled_from(["", "x", "\ud800", "NaN", "accepted", "rejected", "unverified", "recovered", "bonus", "<b>&"]),
)
VALUES = st.one_of(SCALARS, st.lists(SCALARS, max_size=3), st.dictionaries(st.text(max_size=3), SCALARS, max_size=2))
ACTIONS = ("replace", "replace", "nudge", "delete", "add", "duplicate")


@functools.cache
def _sampled() -> Trace:
    """Three sampled steps that accepted 4 (bonus), 1 and 0 drafts, with a baseline: every field a trace holds."""
    return make_trace([4, 1, 0], sampling=True, baseline=BaselineStats(3.0, True, 1.0, True))


@functools.cache
def _bundled(path: Path) -> Trace:
    return Trace.load(path)


@functools.cache
def _lab_reference() -> Trace:
    return _bundled(ASSETS_DIR / "traces" / f"lab-{REFERENCE}.json")




def _nudged(value: Any) -> st.SearchStrategy:
    """Values of the same JSON type, changed a little: the kind of damage a hand edit does."""
    if isinstance(value, bool):
        return st.just(not value)
    if isinstance(value, (int, float)):
        return st.sampled_from([value + 1, value - 1, -value, value * 1000, value / 2, 0])
    if isinstance(value, str):
        return st.sampled_from(["", value + value, value[:1]])
    if isinstance(value, list):
        return st.sampled_from([[], value[:-1], value + value[-1:], value[::-1]])
    if isinstance(value, dict):
        return st.just({})
    return st.none()


def _damage(data: st.DataObject, document: Any, path: tuple[Any, ...]) -> Any:
    """`document` with the value at `path` replaced, nudged, deleted or duplicated, or a key added beside it."""
    if not path:
        return data.draw(VALUES, label="root")
    *parents, key = path
    parent = document
    for step in parents:
        parent = parent[step]
    action = data.draw(st.sampled_from(ACTIONS), label="action")
    if action == "replace":
        return replaced(document, path, data.draw(VALUES, label="value"))
    if action == "nudge":
        return replaced(document, path, data.draw(_nudged(parent[key]), label="nudged"))
    if action == "delete":
        return replaced(document, path, DELETE)
    if action == "add" and isinstance(parent, dict):
        parent[data.draw(st.text(max_size=3), label="new key")] = data.draw(VALUES, label="value")
    elif isinstance(parent, list):
        parent.insert(key, copy.deepcopy(parent[key]))
    return document


def _renders_every_step(handlers: Handlers, trace: Trace, uploaded: tuple[Any, ...]) -> None:
    """The Run tab's outputs, and the scrubber's figures and detail at every step (phone size)."""
    shown(uploaded)                                    # the first step selected
    for step in trace.steps:                           # figures outlining the step, and its detail
        shown(handlers.select_step(trace, step.index, False, PHONE))


def _renders_everywhere(handlers: Handlers, trace: Trace, uploaded: tuple[Any, ...]) -> None:
    """Every view a loaded trace reaches, for every step; raises whatever a renderer raises."""
    _renders_every_step(handlers, trace, uploaded)
    for step in trace.steps:
        shown(handlers.select_step(trace, step.index, True, None))
    shown(handlers.restyle(trace, None, True, None, ""))
    if trace.steps:
        shown(handlers.next_step(trace, trace.steps[0].index, False, PHONE))
        shown(handlers.previous_step(trace, trace.steps[-1].index, False, PHONE))
        for views in handlers.replay(trace, False, PHONE):     # the Run tab's outputs after each step
            shown(views)
    style = FigureStyle.for_screen(False, PHONE)
    for lab, key in ((LabSet({"A": trace, REFERENCE: _lab_reference()}, "recorded", True), "A"),
                     (LabSet({REFERENCE: trace, "B": _lab_reference()}, "recorded"), "B"),
                     (LabSet({REFERENCE: trace}, "recorded", False), REFERENCE)):
        shown(render_lab(lab, key, "", style).outputs())
    assert Trace.from_json(trace.to_json()) == trace


def _refused_or_renders(document: Any, undamaged: Trace) -> None:
    """Upload `document`: a gr.Error naming a field, or a trace that renders everywhere (skipped when it is
    `undamaged`)."""
    handlers = Handlers(FakeRunner(), replay_delay=0.0)
    try:
        uploaded = handlers.upload(json.dumps(document).encode(), False, PHONE)
    except gr.Error as error:
        assert error.message.startswith("Not a SpecViz trace: "), error.message
        assert "\n" not in error.message and FIELD_PATH.search(error.message), error.message
        return
    if uploaded[0] != undamaged:                       # a field the reader ignores: nothing new to render
        _renders_everywhere(handlers, uploaded[0], uploaded)


@pytest.mark.parametrize("path", BUNDLED, ids=[path.stem for path in BUNDLED])
def test_every_bundled_trace_renders_every_step(path):
    handlers = Handlers(FakeRunner(), replay_delay=0.0)
    uploaded = handlers.upload(path.read_bytes(), False, PHONE)
    assert uploaded[0] == _bundled(path)
    _renders_everywhere(handlers, uploaded[0], uploaded)


def test_the_sampled_trace_renders_every_step():
    handlers = Handlers(FakeRunner(), replay_delay=0.0)
    uploaded = handlers.upload(_sampled().to_json().encode(), False, PHONE)
    assert uploaded[0] == _sampled()
    _renders_everywhere(handlers, uploaded[0], uploaded)


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(st.sampled_from(BUNDLED), st.integers(0, MAX_STEPS), st.integers(1, 3), st.data())
def test_random_damage_to_a_bundled_trace_is_refused_by_name_or_renders_everywhere(path, steps, damages, data):
    undamaged = first_steps(_bundled(path), steps)
    document = undamaged.to_dict()
    for _ in range(damages):
        found = fields(document)
        field = data.draw(st.sampled_from(sorted(found)[1:] or [()]), label="field")   # the root only when empty
        document = _damage(data, document, data.draw(st.sampled_from(found[field]), label="path"))
    _refused_or_renders(document, undamaged)
