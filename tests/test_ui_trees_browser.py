"""Token trees in a real browser (issue #19): the Explore tab's trees vs chain figure draws the recorded
budget sweep's numbers, and the Lab's stage T shows the chain and the tree side by side with the numbers
of their recorded traces; both before any model loads (a fake runner serves the page)."""

from __future__ import annotations

import pytest

from fakes import FakeRunner
from specviz.assets import load_lab_traces, load_tree_sweep
from specviz.figures.tree_budget import budget_verdicts
from specviz.lab.views import KEYS
from test_ui_browser import ARTIFACTS, open_page, wait_text, wait_true
from ui_server import serve

pytestmark = pytest.mark.browser

LINE_JS = """([meta, expected]) => {
    const plot = document.querySelector('#sv-trees-figure .js-plotly-plot');
    const line = plot && plot.data ? plot.data.find(t => t.meta === meta) : null;
    if (!line || line.y.length !== expected.length) return false;
    return Array.from(line.y).every((v, i) => Math.abs(v - expected[i]) < 1e-9);
}"""
TREE_JS = """() => {
    const plot = document.querySelector('#sv-lab-tree .js-plotly-plot');
    return !!(plot && plot.data && plot.data.length && plot.offsetParent !== null);
}"""


@pytest.fixture(scope="module")
def recorded_app():
    demo, url = serve(FakeRunner())
    yield url
    demo.close()


def test_trees_vs_chain_and_the_lab_tree_stage_show_the_recorded_numbers(browser, recorded_app):
    table = load_tree_sweep().table
    traces = load_lab_traces(KEYS)
    assert table is not None and "T" in traces
    ARTIFACTS.mkdir(exist_ok=True)
    page = open_page(browser, recorded_app, width=1400)
    page.get_by_role("tab", name="Explore").click()
    for meta, field in (("speed.T=0", "tokens_per_s"), ("length.T=0.7", "mean_accepted_length")):
        temperature = float(meta.split("=")[1])
        expected = [getattr(table.cell(5, temperature, b), field) for b in table.tree_budgets]
        page.wait_for_function(LINE_JS, arg=[meta, expected])           # the drawn line is the sweep's means
    wait_text(page, "#sv-trees-words", budget_verdicts(table)[0][:60])
    page.locator("#sv-trees").screenshot(path=str(ARTIFACTS / "browser-trees.png"))
    page.get_by_role("tab", name="Lab").click()
    page.get_by_text("T. D, drafting a token tree").click()
    wait_true(page, f"({TREE_JS})()")
    tree, chain = traces["T"], traces["D"]
    wait_text(page, "#sv-lab-verdict", f"{tree.summary.target_forwards} target forwards instead of "
                                        f"{chain.summary.target_forwards}")
    wait_text(page, "#sv-lab-verdict", f"{tree.summary.tokens_per_s:.1f} tok/s")
    page.screenshot(path=str(ARTIFACTS / "browser-lab-tree.png"), full_page=True)
    page.close()
