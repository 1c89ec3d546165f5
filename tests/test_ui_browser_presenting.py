"""Presenting (issue #17), measured in Debian's chromium: desktop (1400 px), large text (the header's
"Large text (projector)" toggle) and a phone (390 px), on every tab.

On each tab it checks what a projector or a phone shows: nothing wider than the screen, the figures
before the controls on a phone, no chart title, subtitle, legend entry or panel label running past its
chart or under Plotly's tool bar, the step table's verdict column in sight, and no text cut off by a box
that does not scroll. Every check first waits for the exact figure state (each chart drawn with its
traces and fitted to its box; the large fonts after the toggle), never for time.
Screenshots land in test-artifacts/presenting-<tab>-<mode>.png for a person to look at.
"""

from __future__ import annotations

import json

import pytest

from fakes import FakeRunner
from sweep_factory import make_sweep
from test_ui_browser import ARTIFACTS, WAIT_MS
from ui_server import serve

pytestmark = pytest.mark.browser

MODES = {"desktop": (1400, 900, False), "large": (1400, 900, True), "phone": (390, 844, False)}
LARGE_FONT = 18                      # FigureStyle.for_screen(large=True).font_size
TABS = {                             # tab -> (a figure the tab draws, or None; figures, controls on a phone)
    "Run": ("#sv-timeline", [("#sv-views", "#sv-controls")]),
    "Race": (None, [("#sv-race-view", "#sv-race-controls")]),
    "Explore": ("#sv-heat-speedup", [("#sv-sweep-views", "#sv-sweep-controls"),
                                     ("#sv-compare-tokens", "#sv-compare-controls")]),
    "Lab": ("#sv-lab-timeline", [("#sv-lab-views", "#sv-lab-controls")]),
}
# The tab's figure has its traces, and every visible chart is drawn at its box's width (Plotly refits
# on a resize event); a chart before its first run is a placeholder with a note and no traces.
FITTED_JS = """(figure) => {
    const drawn = document.querySelector(`${figure} .js-plotly-plot`);
    const plots = [...document.querySelectorAll('.js-plotly-plot')].filter(p => p.getClientRects().length > 0);
    return !!drawn && !!drawn.data && drawn.data.length > 0 && plots.every(p => p._fullLayout &&
        Math.abs(p._fullLayout.width - p.getBoundingClientRect().width) <= 2);
}"""
FONT_JS = """(selector) => { const p = document.querySelector(`${selector} .js-plotly-plot`);
    return p && p.layout && p.layout.font ? p.layout.font.size : -1; }"""
# Each problem as one sentence; an empty list is a page that passes.
PROBLEMS_JS = """() => {
    const shown = e => e.getClientRects().length > 0 && getComputedStyle(e).visibility !== 'hidden';
    const box = e => e.getBoundingClientRect();
    const meets = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
    const name = e => e.closest('[id^=sv-]')?.id || e.tagName;
    const problems = [];
    const page = document.documentElement;
    if (page.scrollWidth > innerWidth) problems.push(`the page is ${page.scrollWidth} px wide in ${innerWidth} px`);
    for (const plot of [...document.querySelectorAll('.js-plotly-plot')].filter(shown)) {
        const p = box(plot), svg = box(plot.querySelector('.main-svg'));
        if (p.left < 0 || p.right > innerWidth) problems.push(`${name(plot)} runs past the screen`);
        const texts = [...plot.querySelectorAll('.g-gtitle text, .legendtext, .annotation-text, .g-xtitle text, ' +
                                                '.g-ytitle text')].filter(shown);
        for (const text of texts) {
            const t = box(text);
            if (t.left < svg.left - 1 || t.right > svg.right + 1)
                problems.push(`${name(plot)}: "${text.textContent.slice(0, 40)}" is cut off`);
            for (const bar of [...plot.querySelectorAll('.modebar')].filter(shown))
                if (meets(box(bar), t)) problems.push(`${name(plot)}: the tool bar covers "${text.textContent}"`);
        }
    }
    for (const wrap of [...document.querySelectorAll('.sv-table-wrap')].filter(shown)) {
        const w = box(wrap);
        for (const end of [0, wrap.scrollWidth]) {   // the table scrolled to either end: the verdicts stay in sight
            wrap.scrollLeft = end;
            for (const cell of [...wrap.querySelectorAll('.sv-verdict')].filter(shown)) {
                const c = box(cell);
                if (c.left < w.left - 1 || c.right > w.right + 1)
                    problems.push(`${name(wrap)}: a verdict is out of sight (scrolled to ${wrap.scrollLeft} px)`);
            }
        }
        const caption = wrap.querySelector('caption');
        if (caption && shown(caption) && (box(caption).left < w.left - 1 || box(caption).right > w.right + 1))
            problems.push(`${name(wrap)}: the table's caption runs past its box`);
        wrap.scrollLeft = 0;
    }
    for (const e of [...document.querySelectorAll('body *')].filter(shown)) {
        if (e.closest('svg') || e.clientWidth <= 1 || e.scrollWidth <= e.clientWidth + 1) continue;
        let clip = e;                                 // the box that decides: the first that does not overflow visibly
        while (clip && getComputedStyle(clip).overflowX === 'visible') clip = clip.parentElement;
        if (clip && !['auto', 'scroll'].includes(getComputedStyle(clip).overflowX))
            problems.push(`${name(e)}: "${(e.innerText || '').slice(0, 40)}" is cut off by a box that does not scroll`);
    }
    return problems;
}"""
ORDER_JS = """(selectors) => selectors.map(s => document.querySelector(s).getBoundingClientRect().top)"""


@pytest.fixture(scope="module")
def app():
    """The page as app.py serves it, with the recorded trace, race, sweep and lab runs from assets/."""
    demo, url = serve(FakeRunner())
    yield url
    demo.close()


def open_mode(browser, url: str, mode: str):  # noqa: F811
    width, height, large = MODES[mode]
    page = browser.new_page(viewport={"width": width, "height": height})
    page.set_default_timeout(WAIT_MS)
    page.goto(url, wait_until="domcontentloaded")
    page.wait_for_selector("#sv-timeline .js-plotly-plot")
    if large:
        page.check("#sv-large input")
        page.wait_for_function("document.body.classList.contains('sv-large')")
    return page


def show_tab(page, tab: str, mode: str) -> None:
    """Open `tab` and wait until its charts are drawn, fitted, and (large text) redrawn in large fonts."""
    page.get_by_role("tab", name=tab, exact=True).click()
    figure, pairs = TABS[tab]
    page.wait_for_selector(pairs[0][0], state="visible")
    if figure is None:
        page.wait_for_selector("#sv-race-view .sv-race-lanes", state="visible")
        return
    page.wait_for_selector(f"{figure} .js-plotly-plot", state="visible")
    if MODES[mode][2]:
        page.wait_for_function(f"({FONT_JS})('{figure}') >= {LARGE_FONT}")
    page.wait_for_function(FITTED_JS, arg=figure)


def hover_every_chart(page) -> None:
    """Plotly shows its tool bar over a chart the pointer is on: hover each one before measuring."""
    for plot in page.locator(".js-plotly-plot").all():
        if plot.is_visible():
            plot.scroll_into_view_if_needed()
            plot.hover(position={"x": 40, "y": 40})


@pytest.mark.parametrize("mode", list(MODES))
def test_every_tab_fits_and_clips_nothing(browser, app, mode):  # noqa: F811
    ARTIFACTS.mkdir(exist_ok=True)
    page = open_mode(browser, app, mode)
    problems: list[str] = []
    for tab, (_, pairs) in TABS.items():
        show_tab(page, tab, mode)
        hover_every_chart(page)
        problems += [f"{tab}, {mode}: {problem}" for problem in page.evaluate(PROBLEMS_JS)]
        bars = page.evaluate("() => [...document.querySelectorAll('.modebar')].filter(b => b.getClientRects()"
                             ".length > 0).length")
        if mode == "phone" and bars:
            problems.append(f"{tab}, phone: {bars} Plotly tool bars are shown")
        if mode != "phone" and TABS[tab][0] is not None and not bars:
            problems.append(f"{tab}, {mode}: no tool bar after hovering (the overlap check saw none)")
        for figures, controls in pairs if mode == "phone" else []:
            figures_y, controls_y = page.evaluate(ORDER_JS, [figures, controls])
            if not figures_y < controls_y:
                problems.append(f"{tab}, phone: {figures} ({figures_y:.0f}) comes after {controls} ({controls_y:.0f})")
        page.screenshot(path=str(ARTIFACTS / f"presenting-{tab.lower()}-{mode}.png"), full_page=True)
    page.close()
    assert not problems, "\n".join(problems)


def test_the_step_table_scrolls_in_large_text_and_keeps_its_verdicts(browser, app):  # noqa: F811
    page = open_mode(browser, app, "large")
    show_tab(page, "Run", "large")
    wrap = page.locator("#sv-detail .sv-table-wrap").first
    scroll, client = wrap.evaluate("w => [w.scrollWidth, w.clientWidth]")
    assert scroll > client                       # the table is wider than its box in large text: it scrolls ...
    wrap.evaluate("w => { w.scrollLeft = 0; }")
    inside = """w => { const b = w.getBoundingClientRect();
        return [...w.querySelectorAll('.sv-verdict')].every(c => { const r = c.getBoundingClientRect();
            return r.left >= b.left - 1 && r.right <= b.right + 1; }); }"""
    assert wrap.evaluate(inside)                 # ... and the verdict column stays in sight at either end
    wrap.evaluate("w => { w.scrollLeft = w.scrollWidth; }")
    assert wrap.evaluate(inside)
    page.close()


TICKED_JS = """(selector) => [...document.querySelectorAll(`${selector} label`)]
    .filter(label => label.querySelector('input').checked).map(label => label.innerText.trim())"""


def test_an_uploaded_sweep_sets_the_side_panel(browser, app, tmp_path):  # noqa: F811
    document = make_sweep(ks=(2, 5), temperatures=(0.3,), prompts=("not one of the example prompts",))
    document["meta"].update(seeds=[3, 4], max_new_tokens=48)
    path = tmp_path / "uploaded-sweep.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    page = open_mode(browser, app, "desktop")
    show_tab(page, "Explore", "desktop")
    page.click("#sv-sweep-io")
    with page.expect_file_chooser() as chooser:
        page.click("#sv-sweep-upload")
    chooser.value.set_files(str(path))
    page.wait_for_function(f"JSON.stringify(({TICKED_JS})('#sv-sweep-ks')) === '[\"2\",\"5\"]'")
    assert page.evaluate(TICKED_JS, "#sv-sweep-temperatures") == ["0.3"]
    assert page.evaluate(TICKED_JS, "#sv-sweep-prompts") == []           # its prompt is not an example
    assert page.input_value("#sv-sweep-seeds textarea, #sv-sweep-seeds input") == "3, 4"
    assert page.input_value("#sv-sweep-max-new input[type=number]") == "48"
    page.wait_for_function("document.querySelector('#sv-sweep-settings-note').innerText"
                           ".includes(\"Set to the uploaded sweep's settings\")")
    assert "1 prompt not among the examples" in page.inner_text("#sv-sweep-settings-note")
    assert "Showing an uploaded sweep: 2 cells" in page.inner_text("#sv-sweep-status")
    page.close()
