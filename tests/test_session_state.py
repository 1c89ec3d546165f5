"""Every tab keeps a session's value (its trace, lab, sweep, race) in a gr.State whose default is None,
and its handlers read None as what the page opened on: the recorded trace, lab, sweep and race.

Why None: Gradio derives a State component's config from its default value on every update of every
page and for every new session, and a dataclass default goes through `dataclasses.asdict` each time:
the Run tab's recorded trace cost 4.7 ms per update per page, and a new session 58 ms instead of 18
(`git show e9811c1:docs/benchmark.md`, "A class at once": a profile, no saved run). The oracle for each handler is the same call with the recorded
value passed explicitly, as the session held it before."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import gradio as gr
import pytest

from fakes import FakeRunner
from specviz.assets import ASSETS_DIR, load_demo_trace, load_lab_traces, load_recorded_race, load_recorded_sweep
from specviz.explore.handlers import ExploreHandlers
from specviz.explore.trees import TreeHandlers
from specviz.lab.handlers import LabHandlers
from specviz.lab.views import KEYS, recorded_lab
from specviz.layout import build_demo
from specviz.race.handlers import RaceHandlers
from specviz.run.handlers import Handlers

WIDTH = 1280


def comparable(outputs) -> list:
    """Handler outputs as plain values: figures as their JSON, updates as dicts."""
    values = outputs if isinstance(outputs, (tuple, list)) else [outputs]
    return [value.to_json() if hasattr(value, "to_json") else value for value in values]


def file_texts(paths: list[str]) -> list[str]:
    """The names of exported files, and the text of the data files among them (the HTML pages hold
    random element ids)."""
    return [Path(path).name for path in paths] + \
        [Path(path).read_text(encoding="utf-8") for path in paths if path.endswith((".json", ".csv"))]


def test_no_tab_keeps_a_dataclass_as_a_state_default():
    demo = build_demo(FakeRunner())
    states = [block for block in demo.blocks.values() if isinstance(block, gr.State)]
    assert len(states) >= 6                    # Run, Race, Explore's sweep and trees, Lab, the comparison
    assert [type(state.value).__name__ for state in states if dataclasses.is_dataclass(state.value)] == []


def test_a_new_run_tab_session_scrubs_replays_restyles_and_exports_the_recorded_trace():
    trace = load_demo_trace(ASSETS_DIR).trace
    handlers = Handlers(FakeRunner(), shown_first=trace, replay_delay=0)
    step = trace.steps[3].index
    assert comparable(handlers.select_step(None, step, False, WIDTH)) == \
        comparable(handlers.select_step(trace, step, False, WIDTH))
    assert comparable(handlers.next_step(None, step, False, WIDTH)) == \
        comparable(handlers.next_step(trace, step, False, WIDTH))
    assert comparable(handlers.restyle(None, step, True, WIDTH, "shown")) == \
        comparable(handlers.restyle(trace, step, True, WIDTH, "shown"))
    assert file_texts(handlers.export(None, step)) == file_texts(handlers.export(trace, step))
    replayed = list(handlers.replay(None, False, WIDTH))
    assert len(replayed) == len(trace.steps) + 1 and replayed[-1][0] is trace


def test_a_session_that_has_its_own_trace_keeps_it():
    trace = load_demo_trace(ASSETS_DIR).trace
    other = dataclasses.replace(trace, steps=trace.steps[:2])
    handlers = Handlers(FakeRunner(), shown_first=trace)
    assert comparable(handlers.restyle(other, None, False, WIDTH, "")) != \
        comparable(handlers.restyle(None, None, False, WIDTH, ""))


def test_a_new_lab_session_shows_and_steps_through_the_recorded_lab():
    lab = recorded_lab(load_lab_traces(KEYS))
    handlers = LabHandlers(FakeRunner(), shown_first=lab)
    for key in KEYS:
        assert comparable(handlers.show(None, key, "", False, WIDTH)) == \
            comparable(handlers.show(lab, key, "", False, WIDTH))
    key = KEYS[0]
    step = lab.traces[key].steps[1].index
    assert comparable(handlers.next_step(None, key, step, False, WIDTH)) == \
        comparable(handlers.next_step(lab, key, step, False, WIDTH))
    assert comparable(handlers.restyle(None, key, "", True, WIDTH, step)) == \
        comparable(handlers.restyle(lab, key, "", True, WIDTH, step))


def test_a_new_explore_session_redraws_and_downloads_the_recorded_sweeps():
    table = load_recorded_sweep(ASSETS_DIR).table
    handlers = ExploreHandlers(FakeRunner(), shown_first=table)
    temperature = table.temperatures[-1]
    assert comparable(handlers.select_temperature(None, temperature, False, WIDTH)) == \
        comparable(handlers.select_temperature(table, temperature, False, WIDTH))
    assert comparable(handlers.restyle(None, temperature, True, WIDTH, "")) == \
        comparable(handlers.restyle(table, temperature, True, WIDTH, ""))
    assert file_texts(handlers.download(None)) == file_texts(handlers.download(table))
    trees = TreeHandlers(shown_first=table)
    assert comparable(trees.restyle(None, "words", True, WIDTH)) == comparable(trees.restyle(table, "words", True, WIDTH))


def test_a_new_race_session_downloads_the_recorded_race():
    race, _ = load_recorded_race(ASSETS_DIR)
    handlers = RaceHandlers(FakeRunner(), shown_first=race)
    texts = file_texts(handlers.export(None))
    assert texts == file_texts(handlers.export(race)) and json.loads(texts[-1])


@pytest.mark.parametrize("handlers", [Handlers(FakeRunner()), RaceHandlers(FakeRunner())],
                         ids=["run", "race"])
def test_with_nothing_recorded_a_new_session_still_gets_a_clear_sentence(handlers):
    with pytest.raises(gr.Error, match="Nothing to export yet|no race to download"):
        handlers.export(None)
