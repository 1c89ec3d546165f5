"""A vLLM trace in a real browser (Debian's chromium, Playwright) on the real Gradio app: the page opens on a
trace built from a recorded vLLM 0.32 stream and draws the drafts vLLM did not return as '⬚' cells, says why p
and q are absent, names the engine; then the picker's "vLLM server (URL)…" shows its URL box and a run streams
from the recorded server replayed over real HTTP (tests/vllm_replay.py) through app.py's real EngineRunner;
a dead address is one sentence and the drawn run stays; Explore's load view then stars that run as the page's class
(engine/load/class_point.py). Each wait is for the exact state asserted."""

from __future__ import annotations

import pytest

from app import EngineRunner
from specviz.assets import DemoTrace
from specviz.other_engine import UNKNOWN_MARK
from test_ui_browser import CELLS_JS, open_page, wait_cells, wait_status
from ui_server import serve
from vllm_replay import ReplayServer, load_recording
from vllm_traces import recorded_metrics, vllm_trace

pytestmark = pytest.mark.browser

RECORDING = load_recording()
UNKNOWN_JS = """() => {
    const plot = document.querySelector('#sv-timeline .js-plotly-plot');
    return plot.data.filter(t => t.meta === 'rejected' || t.meta === 'unverified')
        .flatMap(t => Array.from(t.text).filter((text, i) => t.x[i] !== null));
}"""


@pytest.fixture(scope="module")
def vllm_app():
    replay = ReplayServer(RECORDING)
    demo, url = serve(EngineRunner(device="cpu"), demo_trace=DemoTrace(vllm_trace("long"), "vllm-long.json"))
    yield url, replay
    demo.close()
    replay.close()


def test_a_vllm_trace_and_a_run_on_the_server_in_the_browser(browser, vllm_app):
    url, replay = vllm_app
    page = open_page(browser, url)
    page.set_default_timeout(60_000)
    metrics = recorded_metrics("long")
    unknown = sum(k - a for k, a in zip(metrics["per_step_drafted"], metrics["per_step_accepted"]))
    page.wait_for_function(f"({UNKNOWN_JS})().length === {unknown}")
    assert set(page.evaluate(UNKNOWN_JS)) == {UNKNOWN_MARK}          # every unreturned draft drawn as '⬚'
    page.wait_for_function("document.querySelector('#sv-metrics').innerText.includes('vLLM 0.32.0')")
    assert "k = 3 is the server's setting" in page.inner_text("#sv-metrics")
    tau = f"{metrics['mean_acceptance_length']:.2f}"                # the server's own τ on the τ card (2.79, not 2.67)
    assert page.locator("[data-quantity='tokens_per_step'] .sv-card-value").inner_text() == tau
    page.locator("#sv-scrubber input[type=range]").focus()
    page.keyboard.press("Home")                                     # step 0: the prefill; then a step with drafts
    page.click("#sv-next")
    page.wait_for_function("document.querySelector('#sv-detail').innerText.includes('Step 1 ')")
    assert "vLLM does not return p, q or the random draws" in page.inner_text("#sv-detail")

    page.click("#sv-preset input")
    page.get_by_role("option", name="vLLM server (URL)…").click()
    page.wait_for_selector("#sv-server textarea, #sv-server input", state="visible")
    assert page.locator("#sv-draft").is_hidden() and "the k slider is not used" in page.inner_text("#sv-preset-info")
    box = page.locator("#sv-server textarea, #sv-server input").first
    box.fill(replay.url)
    page.fill("#sv-prompt textarea", "abc")
    page.fill("#sv-max-new input[type=number]", "24")
    page.press("#sv-max-new input[type=number]", "Enter")
    page.click("#sv-run")
    wait_status(page, "Done")
    greedy = recorded_metrics("greedy")
    wait_cells(page, "accepted", f"n === {greedy['num_accepted_draft_tokens']}")
    drawn = page.evaluate(CELLS_JS, "rejected")

    box.fill("127.0.0.1:9")                                         # nothing listens there
    page.click("#sv-run")
    page.wait_for_selector("text=No vLLM server answers at http://127.0.0.1:9")
    assert page.evaluate(CELLS_JS, "rejected") == drawn              # the drawn run stays

    # a class is load: Explore's load view stars the page's own run on the throughput chart (one run: N = 1)
    page.click("#sv-tab-explore-button")
    page.click("#sv-load-class-button")
    page.wait_for_function("document.querySelector('#sv-load-class').innerText.includes('the latest run on')")
    assert "ran alone, so N = 1" in page.inner_text("#sv-load-class")
    stars = page.evaluate("() => document.querySelector('#sv-load-throughput .js-plotly-plot').data"
                          ".filter((t) => t.meta && t.meta.startsWith('class.')).map((t) => [t.meta, t.x[0]])")
    assert stars == [["class.aggregate", 1.0], ["class.per_request", 1.0]]
    page.close()
