"""A class in Debian's chromium (Playwright): two students on one server, the real tiny-random engine.

The first student presses Run on an example; while that run is under way a second browser (its own
session) picks the same example and presses Run: it joins the run in progress, says so in one line
under the status, and ends on the same trace, with one run on the server. A third student who asks
for it once it is done gets the recorded trace at once, with its age. A student with another prompt
meanwhile is told its place in the queue. Each step waits `STEP_DELAY` first, so the second
browser lands mid-run however fast the machine; every wait is for the exact state it checks.
Screenshots land in test-artifacts/ for a person to look at.
"""

from __future__ import annotations

import re

import pytest

from slow_runner import SlowRunner
from test_ui_browser import ARTIFACTS, open_page
from ui_server import serve

pytestmark = pytest.mark.browser

STEP_DELAY = 0.3                   # seconds before each step: the recorded example's run takes ~10 s
EXAMPLE = "Code: palindrome check"
SHARED_LIVE = re.compile(r"Shared run: the same models, prompt, settings and seed as a run started \d+ s ago on this "
                         r"server: its steps as they arrive\.")
SHARED_RECORDED = re.compile(r"Shared run: the same models, prompt, settings and seed as a run (\d+ s|\d+ min \d+ s) "
                             r"ago on this server: its trace, step by step\.")
ACCEPTED_JS = """() => {
    const plot = document.querySelector('#sv-timeline .js-plotly-plot');
    return plot.data.filter(t => t.meta === 'accepted').reduce((n, t) => n + t.x.filter(x => x !== null).length, 0);
}"""


@pytest.fixture(scope="module")
def class_app():
    """The real app on the tiny-random pair, each step slowed down; yields its URL and runner."""
    runner = SlowRunner(delay=STEP_DELAY, default_preset="tiny-random")
    demo, url = serve(runner)
    yield url, runner
    demo.close()


def pick_example(page, name):
    page.get_by_role("button", name=name).click()
    page.wait_for_function("(text) => document.querySelector('#sv-prompt textarea').value.startsWith(text)",
                           arg="Write a Python function that checks whether a string is a palindrome")


def wait_status(page, pattern):
    page.wait_for_function("(pattern) => new RegExp(pattern).test(document.querySelector('#sv-status').innerText)",
                           arg=pattern)


def test_a_second_browser_joins_the_run_in_progress_and_a_third_gets_it_recorded(browser, class_app):
    url, runner = class_app
    ARTIFACTS.mkdir(exist_ok=True)
    runs_before = len(runner.slowed)                  # the module's server may have run other tests' requests
    first, second = open_page(browser, url), open_page(browser, url)
    for page in (first, second):
        pick_example(page, EXAMPLE)
    first.click("#sv-run")
    wait_status(first, r"Running… step [1-9]")                 # the run is under way
    second.click("#sv-run")
    wait_status(second, SHARED_LIVE.pattern)
    wait_status(second, r"Running… step")                       # the steps arrive on the second page too
    second.evaluate("window.scrollTo(0, 0)")
    second.screenshot(path=str(ARTIFACTS / "browser-class-joined.png"))
    for page in (first, second):
        wait_status(page, r"^Done: ")
    assert SHARED_LIVE.search(second.inner_text("#sv-status"))
    assert "Shared run" not in first.inner_text("#sv-status")
    assert first.evaluate(ACCEPTED_JS) == second.evaluate(ACCEPTED_JS) > 0       # one trace on both pages
    assert len(runner.slowed) == runs_before + 1                                  # one run on the server

    third = open_page(browser, url)
    pick_example(third, EXAMPLE)
    third.click("#sv-run")
    wait_status(third, SHARED_RECORDED.pattern)
    assert third.inner_text("#sv-status").startswith("Done: ") and len(runner.slowed) == runs_before + 1
    assert third.evaluate(ACCEPTED_JS) == first.evaluate(ACCEPTED_JS)
    for page in (first, second, third):
        page.close()


def test_another_prompt_waits_and_is_told_its_place_and_wait(browser, class_app):
    url, runner = class_app
    running, waiting = open_page(browser, url), open_page(browser, url)
    running.fill("#sv-prompt textarea", "def fibonacci(n):")
    waiting.fill("#sv-prompt textarea", "def factorial(n):")
    running.click("#sv-run")
    wait_status(running, r"Running… step")
    waiting.click("#sv-run")
    wait_status(waiting, r"Waiting in the queue: place 2 \(1 run ahead of yours\) · about \d+")
    waiting.evaluate("window.scrollTo(0, 0)")
    waiting.screenshot(path=str(ARTIFACTS / "browser-class-waiting.png"))
    wait_status(waiting, r"^Done: ")
    assert "Shared run" not in waiting.inner_text("#sv-status")
    for page in (running, waiting):
        page.close()
