"""The tour presented (issue #33, item 3), in Debian's chromium: opened by its link (`?tour=1`) and walked with
Next at 1440 x 900, at 1280 x 720 with large text (a projector) and at 390 x 844 (a phone).

At every chapter it waits for the exact state (the tour's `data-ready`, every visible chart drawn and fitted to
its box, large fonts after the toggle), then fails on: the chapter's outlined element off the part of the screen
the tour's sheet leaves free (or, where the chapter names the part of it its question reads, that part); any
horizontal overflow inside a figure or a table on screen (a chart wider than its box or the screen, a table wider
than its box, a line of text cut off by a box that does not scroll); any chart text the page draws (cut to its clip
paths) past the chart's side or over another such text (titles, legend entries, annotations, axis titles, tick
labels and the texts inside bars: a tree's node labels, a timeline's tokens); the page wider than the screen. Each
failure names the element. The arrow keys and the chapter list move through the tour too. Screenshots of a few
chapters at each size land in test-artifacts/tour-<mode>-<chapter>.png for a person to look at.
"""

from __future__ import annotations

import pytest

from engine.background_load import LoadStatus
from fakes import FakeRunner
from test_ui_browser import ARTIFACTS, WAIT_MS
from ui_server import serve

pytestmark = pytest.mark.browser

MODES = {"desktop": (1440, 900, False), "projector": (1280, 720, True), "phone": (390, 844, False)}
CHAPTERS = 9
SHOTS = (1, 3, 4, 5, 6, 7, 8, 9)         # the chapters whose screenshots are kept
LARGE_FONT = 18                      # FigureStyle.for_screen(large=True).font_size
# Every visible chart is drawn, fitted to its box, and (large text) in the large font.
SETTLED_JS = """(large) => [...document.querySelectorAll('.js-plotly-plot')].filter(p => p.getClientRects().length > 0)
    .every(p => p._fullLayout && Math.abs(p._fullLayout.width - p.getBoundingClientRect().width) <= 2
                && (!large || !p.layout.font || p.layout.font.size >= %d))""" % LARGE_FONT
PROBLEMS_JS = """() => {
    const problems = [];
    const shown = e => e.getClientRects().length > 0 && getComputedStyle(e).visibility !== 'hidden';
    const box = e => e.getBoundingClientRect();
    // The part of a chart's text the page draws: its box cut to every clip path above it (Plotly clips a bar's
    // text to the plot area, so a timeline's columns scrolled past the axis range are not drawn); null if none.
    const drawn = (e, plot) => {
        const r = box(e);
        let left = r.left, right = r.right, top = r.top, bottom = r.bottom;
        for (let a = e; a && a !== plot; a = a.parentElement) {
            const clip = (a.getAttribute('clip-path') || '').match(/#([^)'"]+)/);
            const path = clip && document.getElementById(clip[1]), rect = path && path.querySelector('rect');
            if (!rect || !a.getScreenCTM) continue;
            const m = a.getScreenCTM(), x = rect.x.baseVal.value, y = rect.y.baseVal.value;
            const corners = [[x, y], [x + rect.width.baseVal.value, y + rect.height.baseVal.value]]
                .map(([cx, cy]) => new DOMPoint(cx, cy).matrixTransform(m));
            left = Math.max(left, Math.min(corners[0].x, corners[1].x));
            right = Math.min(right, Math.max(corners[0].x, corners[1].x));
            top = Math.max(top, Math.min(corners[0].y, corners[1].y));
            bottom = Math.min(bottom, Math.max(corners[0].y, corners[1].y));
        }
        return right - left > 1 && bottom - top > 1 ? {left, right, top, bottom} : null;
    };
    const name = e => { const owner = e.closest('[id^=sv-]'); return owner ? '#' + owner.id : e.tagName.toLowerCase(); };
    const sheet = document.querySelector('.sv-tour-sheet');
    const free = sheet && shown(sheet) ? box(sheet).top : innerHeight;      // the screen above the tour's sheet
    const onScreen = r => r.bottom > 0 && r.top < free && r.width > 0;
    const page = document.documentElement;
    if (page.scrollWidth > innerWidth + 1) problems.push(`the page is ${page.scrollWidth} px wide in ${innerWidth} px`);
    const selector = document.querySelector('.sv-tour').dataset.outline;
    const target = selector && document.querySelector(selector);
    if (target && !getComputedStyle(target).outlineStyle.startsWith('solid'))
        problems.push(`the outlined ${name(target)} has no outline drawn`);
    if (!target) problems.push('no element is outlined');
    else {
        const t = box(target), least = Math.min(t.height, 80);
        const seen = Math.min(t.bottom, free) - Math.max(t.top, 0);
        const focus = document.querySelector('.sv-tour').dataset.focus;     // the part of it the question reads
        const part = focus && document.querySelector(focus);
        if (focus && !part) problems.push(`the focus ${focus} of the outlined ${name(target)} is not on the page`);
        if (seen < least - 1 || (!focus && t.top < -1))
            problems.push(`the outlined ${name(target)} is off-screen: ${Math.round(t.top)}-${Math.round(t.bottom)} px ` +
                          `with the screen free above ${Math.round(free)} px`);
        const end = part && document.querySelector('.sv-tour').dataset.focusEnd;   // where the part it reads ends
        if (part) {
            const first = box(part), last = end ? box(document.querySelector(end)) : first;
            const f = {top: Math.min(first.top, last.top), bottom: Math.max(first.bottom, last.bottom)};
            f.height = f.bottom - f.top;
            if (f.top < -1 || (f.bottom > free + 1 && f.height < free))
                problems.push(`the part ${focus} the question reads is off-screen: ${Math.round(f.top)}-` +
                              `${Math.round(f.bottom)} px with the screen free above ${Math.round(free)} px`);
        }
        if (t.left < -1 || t.right > innerWidth + 1)
            problems.push(`the outlined ${name(target)} runs past the screen's sides (${Math.round(t.left)}-${Math.round(t.right)} px)`);
    }
    for (const plot of [...document.querySelectorAll('.js-plotly-plot')].filter(shown)) {
        const p = box(plot);
        if (!onScreen(p)) continue;
        const svg = box(plot.querySelector('.main-svg'));
        if (svg.width > p.width + 2) problems.push(`${name(plot)}: the chart is ${Math.round(svg.width)} px in a ${Math.round(p.width)} px box`);
        // A chart drawn wider than the screen on purpose sits in a box that scrolls sideways (a phone's tree): the
        // box must stay on the screen, and the chart within the box's scroll width.
        let scroller = null;
        for (let a = plot.parentElement; a && !scroller; a = a.parentElement)
            if (['auto', 'scroll'].includes(getComputedStyle(a).overflowX)) scroller = a;
        const frame = scroller ? box(scroller) : {left: 0, right: innerWidth};
        if (frame.left < -1 || frame.right > innerWidth + 1 || (!scroller && (p.left < -1 || p.right > innerWidth + 1)))
            problems.push(`${name(plot)}: the chart runs past the screen`);
        const texts = [...plot.querySelectorAll('.g-gtitle text, .legendtext, .annotation-text, .g-xtitle text, ' +
                                                '.g-ytitle text, .xtick text, .ytick text, .bartext')]
            .filter(e => shown(e) && e.textContent.trim() !== '')
            .map(e => ({e, r: drawn(e, plot)})).filter(t => t.r !== null);
        for (const {e: text, r} of texts) {
            if (r.left < svg.left - 1 || r.right > svg.right + 1)
                problems.push(`${name(plot)}: "${text.textContent.slice(0, 40)}" runs past the chart's side`);
        }
        for (let i = 0; i < texts.length; i++) for (let j = i + 1; j < texts.length; j++) {
            const a = texts[i].r, b = texts[j].r;
            const x = Math.min(a.right, b.right) - Math.max(a.left, b.left), y = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
            if (x > 2 && y > 2 && !texts[i].e.contains(texts[j].e) && !texts[j].e.contains(texts[i].e))
                problems.push(`${name(plot)}: "${texts[i].e.textContent.slice(0, 30)}" is drawn over ` +
                              `"${texts[j].e.textContent.slice(0, 30)}"`);
        }
    }
    for (const wrap of [...document.querySelectorAll('.sv-table-wrap')].filter(shown)) {
        if (!onScreen(box(wrap))) continue;
        if (wrap.scrollWidth > wrap.clientWidth + 1)
            problems.push(`${name(wrap)}: the table "${(wrap.querySelector('caption') || wrap).innerText.slice(0, 40)}" ` +
                          `is ${wrap.scrollWidth} px wide in a ${wrap.clientWidth} px box (columns scroll out of sight)`);
    }
    for (const e of [...document.querySelectorAll('body *')].filter(shown)) {    // text cut by a box that hides it
        if (e.closest('svg') || e.closest('.sv-tour') || e.clientWidth <= 1 || e.scrollWidth <= e.clientWidth + 1) continue;
        if (!onScreen(box(e))) continue;
        const overflow = getComputedStyle(e).overflowX;
        if (['hidden', 'clip'].includes(overflow) || (overflow === 'visible' && getComputedStyle(e).textOverflow === 'ellipsis'))
            problems.push(`${name(e)}: "${(e.innerText || '').slice(0, 40)}" is cut off (${e.scrollWidth} px of text in ` +
                          `a ${e.clientWidth} px box that does not scroll)`);
    }
    return problems;
}"""

# Issue 41: the step box must be in step with the step panel's heading, and the sheet must leave the evidence room.
IN_STEP_JS = """() => {
    const problems = [];
    for (const [box, slider] of [['#sv-detail', '#sv-scrubber'], ['#sv-lab-detail', '#sv-lab-scrubber']]) {
        const heading = document.querySelector(box + ' .sv-step-no');
        if (!heading || heading.getClientRects().length === 0) continue;
        const step = (heading.innerText.match(/^Step (\\d+)/) || [])[1];
        const values = [...document.querySelectorAll(slider + ' input')].map(i => i.value);
        if (step === undefined || values.some(v => v !== step))
            problems.push(`${box} says "${heading.innerText}" while ${slider} holds ${values.join(' / ')}`);
    }
    const sheet = document.querySelector('.sv-tour-sheet').getBoundingClientRect();
    if (sheet.height > (innerWidth > 700 ? 0.33 : 0.31) * innerHeight)     // specviz/tour/sheet.py: 32vh, a phone 30vh
        problems.push(`the tour's sheet takes ${Math.round(sheet.height)} of ${innerHeight} px`);
    return problems;
}"""


@pytest.fixture(scope="module")
def app():
    """The page as app.py serves it, its recorded runs from assets/ (the tour's chapters read them)."""
    demo, url = serve(FakeRunner(status=LoadStatus("qwen-coder", "ready", 1.0, "", 9.0)))
    yield url
    demo.close()


def open_tour(browser, url: str, mode: str):
    width, height, large = MODES[mode]
    page = browser.new_page(viewport={"width": width, "height": height})
    page.set_default_timeout(WAIT_MS)
    page.goto(url + "?tour=1", wait_until="domcontentloaded")
    page.wait_for_selector("#sv-timeline .js-plotly-plot")
    if large:
        page.check("#sv-large input")
        page.wait_for_function("document.body.classList.contains('sv-large')")
    return page


def wait_chapter(page, n: int, large: bool) -> None:
    """The chapter's view set (or its error said), then every chart on screen settled."""
    page.wait_for_selector(f".sv-tour[data-ready='{n}'], .sv-tour[data-error]", state="attached")
    error = page.evaluate("document.querySelector('.sv-tour').dataset.error || ''")
    assert not error, f"chapter {n} could not set its view: {error}"
    page.wait_for_function(SETTLED_JS, arg=large)
    said = page.inner_text(".sv-tour-status") if page.is_visible(".sv-tour-status") else ""
    assert not said, f"chapter {n}: {said}"                 # the tab shows the recording the chapter quotes


@pytest.mark.parametrize("mode", list(MODES))
def test_the_tour_presents_at_every_size(browser, app, mode):
    ARTIFACTS.mkdir(exist_ok=True)
    large = MODES[mode][2]
    page = open_tour(browser, app, mode)
    problems: list[str] = []
    for n in range(1, CHAPTERS + 1):
        if n > 1:
            page.click(".sv-tour-next")
        wait_chapter(page, n, large)
        assert page.evaluate("new URLSearchParams(location.search).get('tour')") == str(n)
        problems += [f"{mode}, chapter {n}: {problem}" for problem in page.evaluate(PROBLEMS_JS)]
        problems += [f"{mode}, chapter {n}: {problem}" for problem in page.evaluate(IN_STEP_JS)]
        if n in SHOTS:
            page.screenshot(path=str(ARTIFACTS / f"tour-{mode}-{n}.png"))
    page.close()
    assert not problems, "\n".join(problems)


def test_keys_list_and_answer(browser, app):
    """The arrow keys move a chapter; the list jumps to one; the answer shows only on reveal; Escape closes."""
    page = open_tour(browser, app, "desktop")
    wait_chapter(page, 1, False)
    page.locator("body").press("ArrowRight")
    wait_chapter(page, 2, False)
    page.keyboard.press("ArrowLeft")
    wait_chapter(page, 1, False)
    for _ in range(3):                                  # three chapters on at once: the last one's view wins
        page.keyboard.press("ArrowRight")
    wait_chapter(page, 4, False)
    page.wait_for_timeout(2000)                         # what an earlier chapter still setting its view would undo
    assert page.inner_text("#sv-detail .sv-step-no").startswith(
        page.evaluate("'Step ' + JSON.parse(document.querySelector(\".sv-tour-chapter[data-n='4']\").dataset.view).step"))
    assert "sampled" in page.inner_text("#sv-status")
    page.select_option(".sv-tour-list", "9")
    wait_chapter(page, 9, False)
    assert page.evaluate("document.querySelector('.sv-tour').dataset.outline") == "#sv-race-view"
    assert page.evaluate("getComputedStyle(document.querySelector('#sv-race-view')).outlineStyle") == "solid"
    answer = page.locator(".sv-tour-chapter[data-n='9'] .sv-tour-answer")
    assert not answer.is_visible()
    page.click(".sv-tour-chapter[data-n='9'] summary")
    assert answer.is_visible()
    page.keyboard.press("Escape")
    page.wait_for_selector(".sv-tour-sheet", state="hidden")
    assert page.evaluate("getComputedStyle(document.querySelector('#sv-race-view')).outlineStyle") == "none"
    page.goto(app + "#tour=6", wait_until="domcontentloaded")      # the other form of a chapter's link
    # attached, not visible: chapter 6 opens the Lab tab, which may hide the Run tab's timeline before a check sees it
    page.wait_for_selector("#sv-timeline .js-plotly-plot", state="attached")
    wait_chapter(page, 6, False)
    assert page.evaluate("document.querySelector('.sv-tour').dataset.outline") == "#sv-lab-verdict"
    page.close()


@pytest.mark.parametrize("chapter", [2, 4])
def test_a_chapter_link_sets_the_step_box_and_next_moves_on_from_it(browser, app, chapter):
    """Issue 41: `?tour=4` showed "Step 1" in the heading with 0 in the step box, and the step's first "Next ▶" did
    nothing. The box holds the chapter's step, the step's Next moves the heading one step on, and the tour's own
    button is named apart from it."""
    page = open_tour(browser, app, "projector")
    page.goto(app + f"?tour={chapter}", wait_until="domcontentloaded")
    wait_chapter(page, chapter, False)
    step = page.evaluate(f"JSON.parse(document.querySelector(\".sv-tour-chapter[data-n='{chapter}']\").dataset.view).step")
    assert page.inner_text("#sv-detail .sv-step-no").startswith(f"Step {step} ")
    assert page.input_value("#sv-scrubber input[type=number]") == str(step)
    assert page.inner_text(".sv-tour-next").strip() != page.inner_text("#sv-next").strip()
    page.click("#sv-next")
    page.wait_for_function("(s) => document.querySelector('#sv-detail .sv-step-no').innerText.startsWith('Step ' + s + ' ')",
                           arg=step + 1)
    assert page.input_value("#sv-scrubber input[type=number]") == str(step + 1)
    page.close()
