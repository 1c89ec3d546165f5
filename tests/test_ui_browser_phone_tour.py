"""A phone (390 x 844) in Debian's chromium (issue #41): the tour's sheet leaves the chapter's evidence in view, and the
draft tree's axis titles sit on the part of its scrolling figure the screen shows.

- The sheet: its navigation is one row (two rows took 80 px) and the sheet at most specviz/tour/sheet.py's
  PHONE_SHEET_HEIGHT (30vh) of the screen, measured at the tour's longest chapter (it took up to 336 of 844 px, 40%).
  The plant puts the old phone rules back (40vh, the buttons' words, a wrapping row) and the check names both.
- The tree: a phone draws it TREE_MIN_PX (600 px) wide in a box that scrolls sideways; Plotly centres axis titles
  on the whole figure, so "depth: tokens after the committed text" and "target KV cache row" sat half past the
  screen's edge. Each title must be drawn whole inside the box's visible part. The plant gives the figure back
  Plotly's centred titles (a relayout in the page) and the check names both.
Every wait is for the exact state (the chapter shown, the tree drawn and fitted), never for time.
"""

from __future__ import annotations

import pytest

import specviz.figures.tree
from specviz.tour.sheet import PHONE_SHEET_HEIGHT
from test_tour_browser import app  # noqa: F401  (the page with the recorded runs the tour quotes)
from test_ui_browser import ARTIFACTS, WAIT_MS

pytestmark = pytest.mark.browser

PHONE = {"width": 390, "height": 844}
SHEET_SHARE = float(PHONE_SHEET_HEIGHT.removesuffix("vh")) / 100
LONGEST = 6                   # the chapter whose words take the most room (the Lab's four stages)
LAB_TREE_STAGE = "T. D, drafting a token tree"
AXIS_TITLES = ("^depth(:| \\()", "^target KV cache row")     # patterns: not the ticks' "depth 1", ...

# What is wrong with the phone's tour sheet, one sentence each.
SHEET_JS = """(share) => {
    const problems = [];
    const sheet = document.querySelector('.sv-tour-sheet').getBoundingClientRect();
    if (sheet.height > share * innerHeight + 1)
        problems.push(`the sheet takes ${Math.round(sheet.height)} of ${innerHeight} px`);
    const tops = [...document.querySelectorAll('.sv-tour-nav > *')].filter(e => e.getClientRects().length)
        .map(e => Math.round(e.getBoundingClientRect().top));
    if (Math.max(...tops) - Math.min(...tops) > 4) problems.push(`the navigation takes ${new Set(tops).size} rows`);
    return problems;
}"""

# The tree's axis titles as drawn, each with the visible part of the box that scrolls it.
TITLES_JS = """(names) => {
    const plot = document.querySelector('#sv-lab-tree .js-plotly-plot');
    const box = plot.closest('#sv-lab-tree').getBoundingClientRect();
    const texts = [...plot.querySelectorAll('text')].filter(t => t.getClientRects().length > 0);
    return names.map(name => {
        const drawn = texts.filter(t => new RegExp(name).test(t.textContent)).map(t => t.getBoundingClientRect());
        if (!drawn.length) return `"${name}" is not drawn`;
        const outside = drawn.filter(r => r.left < box.left - 1 || r.right > box.right + 1);
        const r = outside[0];
        return r ? `"${name}" runs past the screen's part of the tree (${Math.round(r.left)}-${Math.round(r.right)} ` +
                   `px in ${Math.round(box.left)}-${Math.round(box.right)})` : '';
    }).filter(problem => problem);
}"""
TREE_DRAWN_JS = """() => { const p = document.querySelector('#sv-lab-tree .js-plotly-plot');
    return !!p && !!p._fullLayout && !!p.data && p.data.length > 0 && p.getClientRects().length > 0; }"""


# The plant's sheet: the phone rules before issue #41's round five.
OLD_SHEET = """.sv-tour .sv-tour-sheet, body.sv-large .sv-tour .sv-tour-sheet { max-height: 40vh !important; }
    .sv-tour .sv-tour-nav { flex-wrap: wrap !important; }
    .sv-tour .sv-tour-nav .sv-tour-word { display: inline !important; }"""


def phone(browser, url: str):
    page = browser.new_page(viewport=PHONE)
    page.set_default_timeout(WAIT_MS)
    page.goto(url, wait_until="domcontentloaded")
    page.wait_for_selector("#sv-timeline .js-plotly-plot", state="attached")
    return page


def test_the_phone_sheet_leaves_the_evidence_room(browser, app):  # noqa: F811
    page = phone(browser, app + f"?tour={LONGEST}")
    page.wait_for_selector(f".sv-tour-chapter[data-n='{LONGEST}']:not([hidden])")
    assert page.evaluate(SHEET_JS, SHEET_SHARE) == []
    page.screenshot(path=str(ARTIFACTS / "phone-tour-sheet.png"))
    page.add_style_tag(content=OLD_SHEET)                                  # the plant
    problems = page.evaluate(SHEET_JS, SHEET_SHARE)
    assert any("the sheet takes" in problem for problem in problems), problems
    assert any("the navigation takes" in problem for problem in problems), problems
    page.close()


def tree_titles(browser, url: str, shot: str | None = None) -> list[str]:
    """The Lab's tree stage on a phone: what its axis titles get wrong."""
    page = phone(browser, url)
    page.get_by_role("tab", name="Lab", exact=True).click()
    page.locator("label", has_text=LAB_TREE_STAGE).click()
    page.wait_for_function(TREE_DRAWN_JS)
    assert page.evaluate("document.querySelector('#sv-lab-tree').scrollWidth > "
                         "document.querySelector('#sv-lab-tree').clientWidth")          # the phone's tree scrolls
    problems = page.evaluate(TITLES_JS, list(AXIS_TITLES))
    if shot:
        page.locator("#sv-lab-tree").screenshot(path=str(ARTIFACTS / shot))
    page.close()
    return problems


def test_the_phone_tree_titles_sit_on_screen(browser, app, monkeypatch):  # noqa: F811
    ARTIFACTS.mkdir(exist_ok=True)
    assert tree_titles(browser, app, "phone-tree-titles.png") == []
    monkeypatch.setattr(specviz.figures.tree, "_axis_titles",                 # the plant: centred titles
                        lambda depth, tick, style: (depth, specviz.figures.tree.GATHER_AXIS, []))
    problems = tree_titles(browser, app)
    assert len(problems) == 2 and all("runs past" in problem for problem in problems), problems
