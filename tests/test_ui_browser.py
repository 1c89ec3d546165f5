"""End to end in Debian's chromium (Playwright): run the real tiny-random pair, watch the timeline
grow, scrub; stop a (gated, fake) run and keep its steps; upload traces; phone width.

Every assertion waits for the exact figure state it checks (Plotly draws after the status line
changes), never for time, so a busy or slow machine only makes the tests slower.
Screenshots land in test-artifacts/ (desktop, phone, large text) for a person to look at.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from fakes import FakeRunner
from specviz.assets import ASSETS_DIR, DEMO_SWEEP, DemoTrace
from specviz.serving.stop import StopSignals
from specviz.style import FigureStyle
from trace_factory import make_trace
from ui_server import serve

pytestmark = pytest.mark.browser

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"
WAIT_MS = 180_000        # how long a wait may take before it counts as hung (a limit, not a speed claim)
SPAN_JS = """() => {
    const range = document.querySelector('#sv-timeline .js-plotly-plot').layout.xaxis.range;
    return range[1] - range[0];
}"""
COLUMNS_JS = """() => {
    const plot = document.querySelector('#sv-timeline .js-plotly-plot');
    const xs = plot.data.filter(t => t.meta !== 'carryover').flatMap(t => Array.from(t.x));
    return new Set(xs.filter(x => x !== null)).size;
}"""
FONT_JS = """() => document.querySelector('#sv-timeline .js-plotly-plot').layout.font.size"""
CELLS_JS = """(category) => {
    const plot = document.querySelector('#sv-timeline .js-plotly-plot');
    if (!plot || !plot.data) return -1;
    return plot.data.filter(t => t.meta === category).reduce((n, t) => n + t.x.filter(x => x !== null).length, 0);
}"""


RECORDED = (4, 2, 0, 4, 3, 1, 4, 2) * 3          # the slow app's recorded trace: 24 steps
HELD_AFTER = 3                                   # the gated run's steps before it waits for Stop


@pytest.fixture
def slow_app(monkeypatch):
    """A fake run that records HELD_AFTER steps, then holds its next step until the server has
    received Stop: what Stop keeps is then exactly HELD_AFTER + 1 steps, however slow the machine."""
    stop_received = threading.Event()
    request_stop = StopSignals.request_stop

    def request_stop_and_release(signals: StopSignals, session: str) -> bool:
        stopped = request_stop(signals, session)
        stop_received.set()
        return stopped

    monkeypatch.setattr(StopSignals, "request_stop", request_stop_and_release)
    recorded = DemoTrace(make_trace(list(RECORDED), sampling=True), "recorded.json")
    runner = FakeRunner(accepted=RECORDED + RECORDED, hold_after=HELD_AFTER, release=stop_received)
    demo, url = serve(runner, demo_trace=recorded)
    yield url
    stop_received.set()
    demo.close()


def load_page(browser, url, width=1440, height=900):
    """A new page at `url`, its document loaded (not yet drawn); every wait limited to WAIT_MS."""
    page = browser.new_page(viewport={"width": width, "height": height})
    page.set_default_timeout(WAIT_MS)
    page.goto(url, wait_until="domcontentloaded")
    return page


def open_page(browser, url, width=1440, height=900):
    """The app's Run tab with its timeline drawn."""
    page = load_page(browser, url, width, height)
    page.wait_for_selector("#sv-timeline .js-plotly-plot")
    return page


def choose_preset(page, name):
    page.click("#sv-preset input")
    page.get_by_role("option", name=name).click()


def wait_status(page, text):
    page.wait_for_function("(text) => document.querySelector('#sv-status').innerText.includes(text)", arg=text)


def wait_cells(page, category, condition):
    """Wait until the timeline's count of `category` cells satisfies the JS `condition` on n."""
    page.wait_for_function(f"(n => {condition})(({CELLS_JS})({json.dumps(category)}))")


def wait_columns(page, count):
    page.wait_for_function(f"({COLUMNS_JS})() === {count}")


def upload(page, path):
    with page.expect_file_chooser() as chooser:
        page.click("#sv-upload")
    chooser.value.set_files(str(path))


def detail_text(page):
    return page.inner_text("#sv-detail")


def test_tiny_random_run_scrub_and_screenshots(browser, tiny_app):
    ARTIFACTS.mkdir(exist_ok=True)
    page = open_page(browser, tiny_app)
    choose_preset(page, "tiny-random")
    page.fill("#sv-prompt textarea", "def fib(n):")
    page.fill("#sv-max-new input[type=number]", "96")
    page.press("#sv-max-new input[type=number]", "Enter")
    page.click("#sv-run")
    page.wait_for_function(f"({CELLS_JS})('accepted') + ({CELLS_JS})('rejected') > 0")
    wait_status(page, "Done")
    status = page.inner_text("#sv-status")
    num_steps = int(status.split("Done: ")[1].split(" steps")[0])
    assert num_steps > 5
    wait_columns(page, num_steps)                                       # one timeline column per recorded step
    assert "96 new tokens" in status or "EOS" in status

    scrubber = page.locator("#sv-scrubber input[type=range]")
    scrubber.focus()
    page.keyboard.press("Home")
    page.wait_for_function("document.querySelector('#sv-detail').innerText.includes('Step 0')")
    page.click("#sv-next")
    page.wait_for_function("document.querySelector('#sv-detail').innerText.includes('Step 1')")
    assert "target cache" in detail_text(page) and "draft cache" in detail_text(page)
    page.screenshot(path=str(ARTIFACTS / "browser-desktop.png"), full_page=True)

    page.set_viewport_size({"width": 1280, "height": 800})
    small_font = page.evaluate(FONT_JS)
    page.check("#sv-large input")
    page.wait_for_function("document.body.classList.contains('sv-large')")
    page.wait_for_function(f"({FONT_JS})() > {small_font}")           # the figures redrawn in large text
    page.screenshot(path=str(ARTIFACTS / "browser-large-text.png"))
    page.close()


def test_replay_and_phone_width(browser, slow_app):
    ARTIFACTS.mkdir(exist_ok=True)
    desktop = open_page(browser, slow_app)
    recorded = sum(RECORDED)                                          # the recorded trace, before any model loads
    wait_cells(desktop, "accepted", f"n === {recorded}")
    # as many steps as have room for their cells' text (issue #41: 13 of 7-character cells at 1440 px)
    desktop.wait_for_function(f"({SPAN_JS})() === {FigureStyle.for_screen(width=1440).timeline_steps}")
    desktop.click("#sv-replay")                                       # ... plays back step by step
    wait_cells(desktop, "accepted", f"n >= 0 && n < {recorded}")
    desktop.click("#sv-stop")
    wait_status(desktop, "Replayed 24 recorded steps")
    wait_cells(desktop, "accepted", f"n === {recorded}")              # Stop shows the whole trace again
    wait_columns(desktop, len(RECORDED))
    desktop.close()
    phone = open_page(browser, slow_app, width=390, height=844)     # a phone loads the page at its own width
    phone.wait_for_function(f"({SPAN_JS})() < 10")
    phone.screenshot(path=str(ARTIFACTS / "browser-phone.png"), full_page=True)
    phone.close()


def test_stop_keeps_the_partial_trace_and_the_app_stays_usable(browser, slow_app, tmp_path):
    page = open_page(browser, slow_app)
    wait_columns(page, len(RECORDED))                       # the recorded trace is on screen
    page.click("#sv-run")
    wait_status(page, "Running…")                           # the run's own views replace it ...
    wait_cells(page, "accepted", f"n < {sum(RECORDED)}")    # ... the live timeline with fewer steps
    page.click("#sv-stop")                                  # the run holds its step HELD_AFTER until Stop arrives
    wait_status(page, f"Stopped: the {HELD_AFTER + 1} steps recorded so far are kept.")
    kept = sum(RECORDED[:HELD_AFTER + 1])
    wait_cells(page, "accepted", f"n === {kept}")
    wait_columns(page, HELD_AFTER + 1)
    assert "incomplete" in page.inner_text("#sv-output")
    page.click("#sv-prev")                                  # scrubbing works on the kept steps
    page.wait_for_function("document.querySelector('#sv-detail').innerText.includes('Step ')")

    page.fill("#sv-prompt textarea", "")
    page.click("#sv-run")
    page.wait_for_selector("text=The prompt is empty")
    assert page.evaluate(CELLS_JS, "accepted") == kept        # an error loses nothing

    good = tmp_path / "good.json"
    make_trace([4, 1, 0], sampling=True).save(good)
    page.click("#sv-io")
    upload(page, good)
    wait_status(page, "Replaying an uploaded trace: 3 steps")
    wait_cells(page, "accepted", "n === 5")
    page.click("#sv-export")                 # downloads: the zip, the trace JSON, one page per figure, plotly.min.js
    page.wait_for_selector("#sv-files [aria-label='specviz-export.zip']")
    assert page.locator("#sv-files [aria-label='plotly.min.js']").count() == 1
    assert page.locator("#sv-files [aria-label='specviz-trace.json'] >> xpath=..").locator("a[download]").count() == 1
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"schema": "specviz.trace/1"}), encoding="utf-8")
    upload(page, broken)
    page.wait_for_selector("text=Not a SpecViz trace")
    assert page.evaluate(CELLS_JS, "accepted") == 5
    page.close()


HEAT_JS = """(id) => {
    const plot = document.querySelector(`#${id} .js-plotly-plot`);
    if (!plot || !plot.data) return -1;
    const heat = plot.data.find(t => t.type === 'heatmap');
    return heat ? heat.z.flat().filter(v => v !== null).length : 0;
}"""
STARS_JS = """() => document.querySelector('#sv-heat-speedup .js-plotly-plot')
    .data.find(t => t.meta === 'best_k').x.length"""
DIVERGENCE_JS = """() => {
    const plot = document.querySelector('#sv-lab-timeline .js-plotly-plot');
    if (!plot || !plot.layout) return -1;
    return (plot.layout.shapes || []).filter(s => s.name === 'divergence').length;
}"""


PLOT_CELLS_JS = """([selector, category]) => {
    const plot = document.querySelector(`${selector} .js-plotly-plot`);
    if (!plot || !plot.data) return -1;
    return plot.data.filter(t => t.meta === category).reduce((n, t) => n + t.x.filter(x => x !== null).length, 0);
}"""


def wait_true(page, expression):
    """Wait until a JS expression over the page's figures is true (the state, not a status line)."""
    page.wait_for_function(f"() => {expression}")


def wait_text(page, selector, text):
    page.wait_for_function("([selector, text]) => document.querySelector(selector).innerText.includes(text)",
                           arg=[selector, text])


def tick_only(page, group_id, wanted):
    """Leave exactly the `wanted` boxes of a checkbox group ticked (by their labels)."""
    for label in page.locator(f"#{group_id} label").all():
        if label.locator("input").is_checked() != (label.inner_text().strip() in wanted):
            label.click()
    ticked = page.locator(f"#{group_id} input:checked").count()
    assert ticked == len(wanted), f"{group_id}: {ticked} ticked, wanted {sorted(wanted)}"


def test_explore_tab_sweeps_and_compares_on_tiny_random(browser, tiny_app):
    ARTIFACTS.mkdir(exist_ok=True)
    page = open_page(browser, tiny_app)
    page.get_by_role("tab", name="Explore").click()
    page.wait_for_selector("#sv-heat-speedup .js-plotly-plot")
    if (ASSETS_DIR / "sweeps" / DEMO_SWEEP).exists():            # the recorded sweep shows before anything runs
        wait_true(page, f"({HEAT_JS})('sv-heat-speedup') > 0")
        page.wait_for_selector("#sv-theory .js-plotly-plot")
    page.click("#sv-explore-preset input")
    page.get_by_role("option", name="tiny-random").click()
    # The controls start at the recorded sweep's own settings; choose a small grid of our own.
    tick_only(page, "sv-sweep-ks", {"1", "2", "4"})
    tick_only(page, "sv-sweep-temperatures", {"0", "0.7"})
    tick_only(page, "sv-sweep-prompts", {"Code: palindrome check"})
    page.fill("#sv-sweep-seeds textarea, #sv-sweep-seeds input", "0")
    page.fill("#sv-sweep-max-new input[type=number]", "8")
    page.press("#sv-sweep-max-new input[type=number]", "Enter")
    page.click("#sv-sweep-run")
    for heatmap in ("sv-heat-acceptance", "sv-heat-length", "sv-heat-speedup"):
        wait_true(page, f"({HEAT_JS})('{heatmap}') === 6")           # 3 k x 2 temperatures, every cell drawn
    wait_true(page, f"({STARS_JS})() === 2")                          # the fastest k of each temperature
    wait_true(page, f"({PLOT_CELLS_JS})(['#sv-theory', 'measured.speedup']) === 3")
    assert "Done: 6 runs" in page.inner_text("#sv-sweep-status")
    page.get_by_text("draft model vs n-gram").click()
    page.click("#sv-compare-run")
    wait_text(page, "#sv-compare-status", "Done: A and B side by side.")
    wait_true(page, f"({PLOT_CELLS_JS})(['#sv-compare-a', 'accepted']) > 0 && "
                    f"({PLOT_CELLS_JS})(['#sv-compare-b', 'accepted']) >= 0")
    wait_text(page, "#sv-compare-table", "target forwards")
    page.screenshot(path=str(ARTIFACTS / "browser-explore.png"), full_page=True)
    page.close()


def test_lab_tab_records_every_stage_on_tiny_random(browser, tiny_app):
    ARTIFACTS.mkdir(exist_ok=True)
    page = open_page(browser, tiny_app)
    page.get_by_role("tab", name="Lab").click()
    page.wait_for_selector("#sv-lab-timeline .js-plotly-plot")
    if not page.is_visible("#sv-lab-run"):
        page.click("#sv-lab-run-box")
    page.click("#sv-lab-preset input")
    page.get_by_role("option", name="tiny-random").click()
    page.fill("#sv-lab-prompt textarea", "Write a palindrome check in Python.")
    page.click("#sv-lab-run")
    wait_text(page, "#sv-lab-status", "Recorded all 6 runs")
    wait_true(page, f"({DIVERGENCE_JS})() === 1")                     # stage A leaves target-only: a red line
    wait_text(page, "#sv-lab-verdict", "output leaves target-only decoding")
    page.screenshot(path=str(ARTIFACTS / "browser-lab.png"), full_page=True)
    page.get_by_text("D. + real cutoff").click()
    wait_text(page, "#sv-lab-verdict", "identical to target-only")
    wait_true(page, f"({DIVERGENCE_JS})() === 0")
    page.close()
