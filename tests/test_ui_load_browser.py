"""Explore's "Speculation under load" in chromium (issue #39 items 2-3): the recorded run in assets/ is drawn with its
crossover named in words and the batch cost model's predicted crossover beside it, said why in the status, and a click on a chart's point lists that level's requests, one of which opens on the Run
tab's timeline as an ordinary trace. On the real tiny-random app (tests/conftest.py `tiny_app`); no model runs."""

from __future__ import annotations

import pytest

from specviz.assets import ASSETS_DIR
from specviz.explore.load_view import recorded_load
from specviz.figures.load import LoadRun, crossover_sentence

pytestmark = pytest.mark.browser

SUBTITLE_JS = """() => {
  const plot = document.querySelector('#sv-load-ratio .js-plotly-plot');
  return plot && plot.layout ? plot.layout.title.subtitle.text.replace(/<br>/g, ' ') : '';
}"""
POINT_JS = """(n) => {           // the whole server's ratio at N = n: its trace's index, and the point's index in it
  const plot = document.querySelector('#sv-load-ratio .js-plotly-plot');
  const trace = plot.data.findIndex((t) => t.meta === 'ratio.aggregate');
  return [trace, plot.data[trace].x.indexOf(n)];
}"""


def test_the_crossover_is_named_and_a_point_opens_its_request_on_the_run_tab(browser, tiny_app):
    shipped, _ = recorded_load(ASSETS_DIR)
    levels = LoadRun.of(shipped).levels
    n = levels[-2].n
    level = shipped["servers"][0]["levels"][len(levels) - 2]
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    page.goto(tiny_app, wait_until="domcontentloaded")
    page.wait_for_selector("#sv-tab-explore-button")
    page.click("#sv-tab-explore-button")
    page.wait_for_selector("#sv-load-ratio .js-plotly-plot")
    page.wait_for_function(f"({SUBTITLE_JS})().includes({crossover_sentence(levels, 'aggregate')!r})")
    # the batch cost model beside the measurement: its dotted ratio, its crossover, and the page's sentence why
    predicted = LoadRun.of(shipped).model.crossover()
    assert page.evaluate("() => document.querySelector('#sv-load-ratio .js-plotly-plot').data"
                         ".filter((t) => t.meta === 'crossover.model').map((t) => t.x[0])") == [predicted.n]
    assert f"The model predicts speculation stops paying at N = {predicted.n}" in page.inner_text("#sv-load-status")

    page.locator("#sv-load-ratio").scroll_into_view_if_needed()
    trace, index = page.evaluate(POINT_JS, n)
    point = page.locator(f"#sv-load-ratio .scatterlayer .trace:nth-child({trace + 1}) .points path.point").nth(index)
    box = point.bounding_box()
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.wait_for_function(f"document.querySelectorAll('#sv-load-request label').length === {n}")
    assert f"Requests at N = {n}" in page.inner_text("#sv-load-request")

    page.click("#sv-load-open")                          # the first request, chosen when the level was picked
    steps = len(level["requests"][0]["trace"]["steps"])
    page.wait_for_function("(t) => (document.querySelector('#sv-status') || {innerText: ''}).innerText.includes(t)",
                           arg=f"Replaying an uploaded trace: {steps} steps")
    assert page.get_attribute("#sv-tab-run-button", "aria-selected") == "true"
    page.wait_for_selector("#sv-timeline .js-plotly-plot")
    page.close()
