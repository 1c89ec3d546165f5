"""The Race tab's handlers and view with a fake runner: a race streams its lane statuses and ends
with a race the view shows in full; bad input and failures are one gr.Error and keep the race
shown; Stop keeps the last race; a downloaded race uploads back; the view says the truth about
who won and by how much; the page has the tab and its recorded race."""

from __future__ import annotations

import json
import re

import gradio as gr
import pytest

from engine.formats.race import Race
from fakes import FakeRunner
from race_factory import make_race
from specviz.layout import build_demo
from specviz.serving.policy import Policy
from specviz.race.handlers import RaceHandlers
from specviz.race.views import race_html, verdict
from specviz.serving.runner import CUSTOM

SHOWN = make_race()


def progress(fraction, desc=None):
    """Stands in for gr.Progress outside a Gradio request."""


def race_args(**changes):
    values = dict(preset="tiny-random", draft="", target="", drafter="model", prompt="def add(a, b):", k=4,
                  temperature=0.0, max_new_tokens=64)
    values.update(changes)
    return list(values.values())


def run(handlers, **changes):
    return list(handlers.race(SHOWN, *race_args(**changes), progress=progress))


def test_a_race_streams_its_lanes_then_shows_the_whole_race():
    runner = FakeRunner(accepted=(4, 2, 0, 4))
    updates = run(RaceHandlers(runner))
    statuses = [status for _, _, status in updates]
    assert statuses[0].startswith("Warming up both lanes") and statuses[1].startswith("Lane 1 of 2: target-only")
    assert statuses[2] == "Lane 2 of 2: speculative decoding: 5 tokens so far…"
    race, view, status = updates[-1]
    assert isinstance(race, Race) and race.prompt == "def add(a, b):" and race.config.k == 4
    assert all(state is SHOWN for state, _, _ in updates[:-1])       # the old race stays until the new one is whole
    assert view.count("class='sv-rstep'") == 4 and "Just recorded on this server." in view
    assert status.startswith(f"Race of {len(race.speculative.token_ids)} and")
    assert runner.race_requests[0].models.preset == "tiny-random"


@pytest.mark.parametrize("changes, message", [(dict(prompt="  "), "The prompt is empty"),
                                              (dict(k=40), "k must be a whole number from 1 to 16"),
                                              (dict(temperature="hot"), "temperature"),
                                              (dict(preset=CUSTOM, target=""), "target")])
def test_bad_input_is_one_sentence_before_anything_runs(changes, message):
    runner = FakeRunner()
    with pytest.raises(gr.Error, match=message):
        run(RaceHandlers(runner), **changes)
    assert runner.race_requests == []


def test_hosted_mode_is_checked_before_a_race():
    runner = FakeRunner()
    with pytest.raises(gr.Error, match="is a local path"):
        run(RaceHandlers(runner, policy=Policy.hosted_default()), preset=CUSTOM, draft="", drafter="ngram",
            target="/srv/big-model")
    assert runner.race_requests == []


def test_a_failing_load_is_one_sentence():
    with pytest.raises(gr.Error, match="Could not race: no such model"):
        run(RaceHandlers(FakeRunner(fail_load="no such model")))


def test_stop_keeps_the_last_race():
    handlers = RaceHandlers(FakeRunner(accepted=(4,) * 12))
    updates = handlers.race(SHOWN, *race_args(), progress=progress)
    next(updates)                                   # the race is under way
    handlers.stop()
    race, view, status = list(updates)[-1]
    assert race is SHOWN and status.startswith("Stopped: a race needs both lanes")


def test_a_downloaded_race_uploads_back_and_a_bad_one_is_refused_with_its_field():
    handlers = RaceHandlers(FakeRunner())
    paths = handlers.export(SHOWN)
    assert [p.rsplit("/", 1)[1] for p in paths] == ["specviz-race.json"]
    with open(paths[0], "rb") as file:
        data = file.read()
    race, view, status = handlers.upload(data)
    assert race == SHOWN and "Loaded from a race file" in view
    document = json.loads(data)
    document["target_only"]["tokens"][-1]["t_s"] = 99.0
    with pytest.raises(gr.Error, match=r"Not a SpecViz race: target_only.tokens\[13\].t_s is 99, after the lane"):
        handlers.upload(json.dumps(document).encode())
    with pytest.raises(gr.Error, match="The uploaded file is empty"):
        handlers.upload(b"")
    with pytest.raises(gr.Error, match="no race to download"):
        handlers.export(None)


def test_the_verdict_names_the_winner_and_the_factor_it_measured():
    fast = make_race((3, 3, 3), k=3, token_s=0.3, step_s=0.4)        # 12 tokens: 1.2 s against 3.6 s
    assert fast.speedup == pytest.approx(3.0)
    text = verdict(fast)
    assert "Speculative decoding finished first</b>: 12 tokens in 1.2 s against 3.6 s, <b>3.00×</b>" in text
    assert "one target forward per token (12 forwards); speculative decoding needed 3, 4.00 tokens" in text
    slow = make_race((0, 0, 0, 0), k=3, token_s=0.1, step_s=0.5)      # nothing accepted: 2.0 s against 0.4 s
    assert "Target-only decoding finished first</b>: speculative decoding reached 5.00× its time" in verdict(slow)
    html = race_html(slow)
    assert re.search(r"data-lane='target-only'[^>]*>.*?finished first", html)
    assert race_html(None).count("press <b>Race</b>") == 1


def test_the_page_has_the_race_tab_with_its_recorded_race():
    demo = build_demo(FakeRunner(), race=(SHOWN, "recorded.json"))
    view = next(block for block in demo.blocks.values() if getattr(block, "elem_id", None) == "sv-race-view")
    assert "data-lane='speculative'" in view.value and "Recorded earlier (recorded.json)" in view.value
    assert "sv-race-replay" in view.js_on_load
