"""A phone (390 x 844) in Debian's chromium (issue #41): the tour's sheet leaves the chapter's evidence in view, and the
draft tree's axis titles sit on the part of its scrolling figure the screen shows.

- The sheet: its navigation is one row (two rows took 80 px) and the sheet at most specviz/tour/sheet.py's
  PHONE_SHEET_HEIGHT (30vh) of the screen, measured at the tour's longest chapter (it took up to 336 of 844 px, 40%).
  The plant puts the old phone rules back (40vh, the buttons' words, a wrapping row) and the check names both.
- The tree: a phone draws it TREE_MIN_PX (600 px) wide in a box that scrolls sideways; Plotly centres axis titles
  on the whole figure, so "depth: tokens after the committed text" and "target KV cache row" sat half past the
  screen's edge. Each title must be drawn whole inside the box's visible part. The plant gives the figure back
  Plotly's centred titles (a relayout in the page) and the check names both.
- The span a sampled chapter reads (chapter 4: d2's test down to d3's verdict) lands whole above the sheet; the plant
  gives the chapter back its old focus (d2's row alone), which left d3's draw and verdict under the sheet.
- The chapter list reads "Chapter 4 of 9 ▾" whole (the native list cut "4. A sampled step: min(1, p/q) a") and still
  moves the tour; "Hide text" folds the sheet to its row of buttons, "Show text" and the next chapter unfold it.
- The tree's title, caption, legend, axis titles and gather title stay in the box's visible part when the box is swiped to its far end
  (specviz/pinned_captions.py); the plant cancels the pin with a CSS rule, and the check names what left the screen.
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


# The span the chapter reads (its focus down to its focus_end) against the screen the sheet leaves.
SPAN_JS = """() => {
    const root = document.querySelector('.sv-tour'), free = document.querySelector('.sv-tour-sheet')
        .getBoundingClientRect().top;
    const top = document.querySelector(root.dataset.focus).getBoundingClientRect().top;
    const end = root.dataset.focusEnd ? document.querySelector(root.dataset.focusEnd) : null;
    const verdict = document.querySelector('#sv-detail tr.sv-rejected td.sv-verdict').getBoundingClientRect();
    const bottom = Math.max(end ? end.getBoundingClientRect().bottom : top, verdict.bottom);
    return top < -1 || bottom > free + 1 ? [`the span the chapter reads runs ${Math.round(top)}-${Math.round(bottom)} ` +
        `px with the screen free above ${Math.round(free)} px`] : [];
}"""
# The plant: chapter 4 with the focus it had before (the row of the draft before the rejection, no end).
OLD_FOCUS_JS = """() => {
    const chapter = document.querySelector(".sv-tour-chapter[data-n='4']"), view = JSON.parse(chapter.dataset.view);
    view.focus = '#sv-detail .sv-table-wrap tr:has(+ tr.sv-rejected)';
    delete view.focus_end;
    chapter.dataset.view = JSON.stringify(view);
}"""
LABEL_CUT_JS = """() => { const label = document.querySelector('.sv-tour-pick-label');
    return label.scrollWidth > label.clientWidth + 1 ? `"${label.innerText}" is cut: ${label.scrollWidth} px of text ` +
        `in ${label.clientWidth} px` : ''; }"""


def test_a_sampled_chapter_lands_with_both_drafts_it_reads_above_the_sheet(browser, app):  # noqa: F811
    page = phone(browser, app + "?tour=4")
    page.wait_for_selector(".sv-tour[data-ready='4']", state="attached")
    assert page.evaluate(SPAN_JS) == []
    page.screenshot(path=str(ARTIFACTS / "phone-tour-4.png"))
    page.evaluate(OLD_FOCUS_JS)                                                 # the plant
    page.select_option(".sv-tour-list", "3")
    page.wait_for_selector(".sv-tour[data-ready='3']", state="attached")
    page.select_option(".sv-tour-list", "4")
    page.wait_for_selector(".sv-tour[data-ready='4']", state="attached")
    problems = page.evaluate(SPAN_JS)
    assert len(problems) == 1 and "the span the chapter reads" in problems[0], problems
    page.close()


QUESTION_IN_SIGHT_JS = """() => { const sheet = document.querySelector('.sv-tour-sheet').getBoundingClientRect();
    const question = document.querySelector('.sv-tour-chapter:not([hidden]) .sv-tour-question summary')
        .getBoundingClientRect();
    return question.top >= sheet.top - 1 && question.bottom <= sheet.bottom + 1; }"""


def test_a_long_chapters_question_stays_in_sight_at_the_sheets_bottom(browser, app):  # noqa: F811
    """A phone's chapter 8 is longer than its sheet: the words scroll inside it, and the question ended under the fold
    ("How many rows does the target's"). The question sticks to the sheet's bottom; the plant unsticks it."""
    page = phone(browser, app + "?tour=8")
    page.wait_for_selector(".sv-tour[data-ready='8']", state="attached")
    assert page.evaluate("document.querySelector('.sv-tour-sheet').scrollHeight > "
                         "document.querySelector('.sv-tour-sheet').clientHeight")         # the words do scroll
    assert page.evaluate(QUESTION_IN_SIGHT_JS)
    page.add_style_tag(content=".sv-tour .sv-tour-question:not([open]) { position: static !important; }")
    assert not page.evaluate(QUESTION_IN_SIGHT_JS)
    page.close()


def test_the_chapter_list_reads_whole_and_the_sheet_folds(browser, app):  # noqa: F811
    page = phone(browser, app + "?tour=4")
    page.wait_for_selector(".sv-tour[data-ready='4']", state="attached")
    assert page.inner_text(".sv-tour-pick-label") == "Chapter 4 of 9 ▾"
    assert page.evaluate(LABEL_CUT_JS) == ""
    page.select_option(".sv-tour-list", "5")                                    # the list under the label still works
    page.wait_for_selector(".sv-tour[data-ready='5']", state="attached")
    assert page.inner_text(".sv-tour-pick-label") == "Chapter 5 of 9 ▾"
    nav = page.evaluate("document.querySelector('.sv-tour-nav').getBoundingClientRect().height")
    page.click(".sv-tour-fold")
    page.wait_for_function("(nav) => document.querySelector('.sv-tour-sheet').getBoundingClientRect().height < nav + 24",
                           arg=nav)
    assert page.get_attribute(".sv-tour-fold", "aria-expanded") == "false"
    assert not page.is_visible(".sv-tour-chapter[data-n='5'] .sv-tour-text")
    page.wait_for_function("() => document.body.style.paddingBottom === "
                           "document.querySelector('.sv-tour-sheet').offsetHeight + 'px'")  # the page's end clears it
    page.click(".sv-tour-fold")
    page.wait_for_selector(".sv-tour-chapter[data-n='5'] .sv-tour-text", state="visible")
    page.click(".sv-tour-fold")
    page.click(".sv-tour-next")                                                 # a new chapter is read unfolded
    page.wait_for_selector(".sv-tour[data-ready='6']", state="attached")
    assert page.is_visible(".sv-tour-chapter[data-n='6'] .sv-tour-text")
    page.add_style_tag(content=".sv-tour .sv-tour-pick-label { width: 60px; overflow: hidden; }")   # the plant: cut
    assert "is cut" in page.evaluate(LABEL_CUT_JS)
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


# The tree's title, caption and legend texts drawn outside the visible part of its sideways-scrolled box.
PINNED_JS = """() => {
    const box = document.querySelector('#sv-lab-tree'), seen = box.getBoundingClientRect();
    const words = [...box.querySelectorAll('.annotation-text')]        // the axis titles and the gather's title
        .filter(t => /^(depth|target KV cache row|The KV gather)/.test(t.textContent));
    if (words.length < 3) return [`only ${words.length} of the axis titles and the gather's title are drawn`];
    return [...box.querySelectorAll('.g-gtitle text, .legendtext'), ...words].filter(t => t.textContent.trim())
        .map(t => [t.textContent.slice(0, 30), t.getBoundingClientRect()])
        .filter(([, r]) => r.left < seen.left - 1 || r.right > seen.right + 1)
        .map(([words, r]) => `"${words}" is drawn at ${Math.round(r.left)}-${Math.round(r.right)} px, the box shows ` +
                             `${Math.round(seen.left)}-${Math.round(seen.right)} px`);
}"""
SWIPED_JS = """() => { const box = document.querySelector('#sv-lab-tree'); box.scrollLeft = box.scrollWidth;
    const title = box.querySelector('.g-gtitle'); return box.scrollLeft > 0 && title.style.transform !== ''; }"""


def test_a_swiped_tree_keeps_its_caption_and_legend_in_view(browser, app):  # noqa: F811
    page = phone(browser, app)
    page.get_by_role("tab", name="Lab", exact=True).click()
    page.locator("label", has_text=LAB_TREE_STAGE).click()
    page.wait_for_function(TREE_DRAWN_JS)
    page.locator("#sv-lab-tree").scroll_into_view_if_needed()
    assert page.evaluate(PINNED_JS) == []                                       # unswiped: all of it on screen
    page.wait_for_function(SWIPED_JS)                                           # swiped to the far end, pinned
    assert page.evaluate(PINNED_JS) == []
    page.locator("#sv-lab-tree").screenshot(path=str(ARTIFACTS / "phone-tree-swiped.png"))
    page.add_style_tag(content="#sv-lab-tree .g-gtitle, #sv-lab-tree .legend, #sv-lab-tree .annotation "
                               "{ transform: none !important; }")
    problems = page.evaluate(PINNED_JS)                                         # the plant: no pin
    assert any("Draft tree" in problem for problem in problems), problems
    assert any("accepted path" in problem for problem in problems), problems
    assert any("The KV gather" in problem for problem in problems), problems
    page.close()
