"""The Run tab's "Use the fastest here" in Debian's chromium (issue #40 item 2): once the load has priced this
machine, the button beside Run says what it sets, and pressing it sets the k slider, a chain, the draft model and
the bfloat16 target and the int4 draft on the page. The load is a fake's (a status with known costs and facts: the page is the layer
under test); the oracle for the k is the i.i.d. model worked out by hand in tests/test_machine_choice.py."""

from __future__ import annotations

import dataclasses

import pytest

from engine.background_load import LoadStatus
from fakes import FakeRunner
from test_machine_choice import CPU_LIKE, RECORDED, SAME_PAIR, by_hand
from test_ui_browser import ARTIFACTS, WAIT_MS
from specviz.serving.fastest_here import recorded_acceptance
from ui_server import serve

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def app():
    machine = dataclasses.replace(SAME_PAIR, int4_draft_pays=True)          # a CPU that runs the int4 kernel
    status = LoadStatus("qwen-coder", "ready", 1.0, "models ready", 9.0, device_costs=CPU_LIKE, machine=machine)
    demo, url = serve(FakeRunner(status=status))
    yield url
    demo.close()


def test_the_button_beside_run_sets_what_the_status_line_chose(browser, app):
    alpha = recorded_acceptance(RECORDED, SAME_PAIR)
    best = max((1, 2, 3, 4, 5, 6, 8), key=lambda k: by_hand(alpha, k))
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    page.set_default_timeout(WAIT_MS)
    page.goto(app, wait_until="domcontentloaded")
    page.wait_for_selector("#sv-use-fastest", state="visible")
    assert page.inner_text("#sv-use-fastest") == (
        f"Use the fastest here: a chain of k = {best} with the draft model, a bfloat16 target and an int4 draft")
    assert f"**k = {best}" not in page.inner_text("#sv-load-status")           # rendered, not raw markdown
    assert f"k = {best} is the fastest here" in page.inner_text("#sv-load-status")
    for box, value in (("#sv-k", "1" if best != 1 else "2"), ("#sv-tree-nodes", "8")):    # away from the choice
        page.fill(f"{box} input[type=number]", value)
        page.press(f"{box} input[type=number]", "Enter")
    page.click("#sv-use-fastest")
    page.wait_for_function("k => document.querySelector('#sv-k input[type=number]').value === String(k)", arg=best)
    page.wait_for_function("() => document.querySelector('#sv-tree-nodes input[type=number]').value === '0'")
    page.click("#sv-more .label-wrap")                               # "More settings", where the dtypes are
    page.wait_for_selector("#sv-target-dtype input", state="visible")
    assert page.input_value("#sv-target-dtype input") == "bfloat16"
    assert page.input_value("#sv-draft-dtype input") == "int4"
    page.screenshot(path=str(ARTIFACTS / "use-the-fastest-here.png"), full_page=False)
    assert "bfloat16" in page.inner_text("#sv-exactness")          # the exactness note follows the target dtype
    page.close()
