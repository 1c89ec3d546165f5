"""End to end in Debian's chromium (Playwright): a real token-tree run of the tiny-random pair through
the real server, driven by the Run tab's tree controls; the tree figure follows the run step by step,
then the scrubber. Every wait is for a figure state (the tree plot's title and cells), never for time.
Screenshots land in test-artifacts/ (browser-tree-*.png) for a person to look at.
"""

from __future__ import annotations

import re
import threading

import pytest

from test_ui_browser import ARTIFACTS, CELLS_JS, choose_preset, open_page, wait_status
from ui_server import serve

pytestmark = pytest.mark.browser

TREE_STEP_JS = """() => {
    const plot = document.querySelector('#sv-tree .js-plotly-plot');
    if (!plot || !plot.layout || !plot.layout.title) return -1;
    const match = /step (\\d+)/.exec(plot.layout.title.text || '');
    return match ? Number(match[1]) : -1;
}"""
TREE_CELLS_JS = """() => {
    const plot = document.querySelector('#sv-tree .js-plotly-plot');
    if (!plot || !plot.data) return -1;
    return plot.data.filter(t => ['accepted', 'rejected', 'unreached'].includes(t.meta))
        .reduce((n, t) => n + t.x.filter(x => x !== null).length, 0);
}"""
TREE_NODES, BRANCH = 8, 2
GATE_S = 180             # how long a gated step may wait for the test before it counts as hung (a limit, not a speed)


class GatedGeneration:
    """A real engine generation whose every step waits for the test's go-ahead. The page redraws a live
    run at most every 0.15 s (specviz/run/handlers.py), so an ungated tiny run can finish between two
    redraws on a fast machine; gated, the first step's tree is on screen while the run still waits."""

    def __init__(self, generation, gate: threading.Semaphore):
        self._generation, self._gate = generation, gate

    @property
    def is_done(self) -> bool:
        return self._generation.is_done

    def step(self):
        if not self._gate.acquire(timeout=GATE_S):
            raise RuntimeError("the test never let this step run")
        return self._generation.step()

    def trace(self):
        return self._generation.trace()


@pytest.fixture(scope="module")
def gated_app():
    """The real tiny-random engine behind the real server, its steps released one by one by the test."""
    from app import EngineRunner
    gate = threading.Semaphore(0)

    class GatedRunner(EngineRunner):
        def start(self, request, progress):
            return GatedGeneration(super().start(request, progress), gate)

    demo, url = serve(GatedRunner(device="cpu"))
    yield url, gate
    demo.close()


def set_slider(page, elem_id, value):
    box = page.locator(f"#{elem_id} input[type=number]")
    box.fill(str(value))
    box.press("Enter")


def wait_tree_step(page, condition):
    page.wait_for_function(f"(n => {condition})(({TREE_STEP_JS})())")


def test_tree_run_draws_the_tree_step_by_step(browser, gated_app):
    url, gate = gated_app
    ARTIFACTS.mkdir(exist_ok=True)
    page = open_page(browser, url)
    choose_preset(page, "tiny-random")
    page.fill("#sv-prompt textarea", "def fib(n):")
    set_slider(page, "sv-max-new", 96)
    set_slider(page, "sv-tree-nodes", TREE_NODES)
    set_slider(page, "sv-tree-branch", BRANCH)
    assert not page.is_visible("#sv-tree .js-plotly-plot")        # the recorded chain trace has no tree
    page.click("#sv-run")
    gate.release()                                                  # step 0 runs; step 1 waits at the gate
    wait_tree_step(page, "n === 0")                                 # the live run's first tree is drawn ...
    assert "Running" in page.inner_text("#sv-status")               # ... while the run is still going
    gate.release(10_000)                                            # then the rest of the run, ungated
    wait_status(page, "Done")
    status = page.inner_text("#sv-status")
    num_steps = int(status.split("Done: ")[1].split(" steps")[0])
    wait_tree_step(page, f"n === {num_steps - 1}")                   # the finished run shows its last step

    scrubber = page.locator("#sv-scrubber input[type=range]")
    scrubber.focus()
    page.keyboard.press("Home")
    wait_tree_step(page, "n === 0")
    page.click("#sv-next")
    wait_tree_step(page, "n === 1")                                   # step 1's tree ...
    page.wait_for_function(f"({TREE_CELLS_JS})() > 0 && ({TREE_CELLS_JS})() <= {TREE_NODES}")
    caption = page.evaluate("() => document.querySelector('#sv-tree .js-plotly-plot').layout.title.subtitle.text")
    assert re.search(r"\d+ nodes? drafted, depth \d", caption) and "The KV gather (below)" in caption
    detail = page.inner_text("#sv-detail")                          # the step panel reads as a tree step (#27)
    assert detail.startswith("Step 1 ") and "tried by the walk" in detail and "Why the walk stopped there:" in detail
    tags = page.evaluate("() => document.querySelector('#sv-tree .js-plotly-plot').layout.annotations"
                         ".filter(a => a.name === 'node id').length")
    assert tags == page.evaluate(TREE_CELLS_JS)                      # every drawn node carries its id
    page.locator("#sv-tree").scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "browser-tree-step1.png"), full_page=True)
    page.click("#sv-next")
    wait_tree_step(page, "n === 2")                                   # ... then the next one
    page.locator("#sv-tree").screenshot(path=str(ARTIFACTS / "browser-tree-step2.png"))
    ticks = page.evaluate("() => document.querySelector('#sv-timeline .js-plotly-plot').layout.xaxis.ticktext")
    assert all(re.fullmatch(r"\d+<br>\(\d+\)", tick) for tick in ticks)                  # each step's node count
    page.close()


def test_tree_controls_refuse_a_tree_with_the_ngram_drafter(browser, tiny_app):
    page = open_page(browser, tiny_app)
    choose_preset(page, "tiny-random")
    set_slider(page, "sv-tree-nodes", TREE_NODES)
    page.get_by_text("n-gram lookup").click()
    accepted = page.evaluate(CELLS_JS, "accepted")
    page.click("#sv-run")
    page.wait_for_selector("text=a token tree needs the draft model")
    assert page.evaluate(CELLS_JS, "accepted") == accepted            # the error loses nothing on screen
    page.close()
