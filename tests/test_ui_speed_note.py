"""One sentence beside every speed (issue #33 item 8): the same chain ran at 8.8 tok/s in the recorded run, 6.41
in Explore's trees sweep, 1.3 in the Lab and 1.4 live on a busy machine, and only the Lab said that the machine's
load is why. Every HTML view that shows a speed in tokens per second (the Run cards, Explore's trees sweep and
comparison table, the Lab's tree stage, the race) carries specviz/quantities.py SPEED_NOTE; a view with a speed
and without the sentence is caught (planted: the Run cards without it).
"""

from __future__ import annotations

import re
from html import escape, unescape

import pytest

from specviz.assets import ASSETS_DIR, load_demo_trace, load_lab_traces, load_recorded_race, load_tree_sweep
from specviz.explore.compare import Comparison, Side, comparison_table
from specviz.explore.trees import about_trees
from specviz.lab.views import KEYS, recorded_lab, render_lab
from specviz.quantities import SPEED_NOTE
from specviz.race.views import race_html
from specviz.run.output_view import metrics_html

SPEED = re.compile(r"tok/s|tokens/s|tokens / s|tokens per second")


def speed_views() -> dict[str, str]:
    greedy = load_demo_trace().trace
    lab = recorded_lab(load_lab_traces(KEYS))
    race, _ = load_recorded_race(ASSETS_DIR)
    comparison = Comparison({"A": Side(5, 0.0, "model"), "B": Side(3, 0.0, "model")}, {"A": greedy, "B": greedy})
    return {"Run cards": metrics_html(greedy), "Explore trees": about_trees(load_tree_sweep(ASSETS_DIR).table, "x"),
            "Explore compare": comparison_table(comparison), "Lab tree stage": render_lab(lab, "T", "").verdict,
            "Race": race_html(race)}


def check(views: dict[str, str]) -> None:
    for name, html in views.items():
        assert SPEED.search(unescape(re.sub(r"<[^>]+>", " ", html))), f"{name} shows no speed: the test is stale"
        assert escape(SPEED_NOTE, quote=True) in html or escape(SPEED_NOTE, quote=False) in html, \
            f"{name} shows a speed without saying a busy machine slows it"


def test_every_speed_says_the_machines_load_changes_it():
    check(speed_views())


def test_a_planted_speed_without_the_sentence_is_caught():
    views = speed_views()
    views["Run cards"] = views["Run cards"].replace(escape(SPEED_NOTE), "")
    with pytest.raises(AssertionError, match="Run cards"):
        check(views)
