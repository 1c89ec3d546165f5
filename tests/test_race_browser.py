"""The Race tab in Debian's chromium (Playwright): the recorded race replays by itself when the
tab opens, Replay plays it again from the recorded times (no model), a new race (fake runner)
replays as soon as it arrives, a race JSON uploads back, a bad one is refused by its field.

Every wait is for the view's exact state (the root's data-state, each lane's data-shown count
of tokens on screen, which lane says it finished first), never for time. Screenshots go to
test-artifacts/.
"""

from __future__ import annotations

import json

import pytest

from fakes import FakeRunner
from race_factory import make_race
from test_ui_browser import ARTIFACTS, load_page
from ui_server import serve

pytestmark = pytest.mark.browser

ROOT = "#sv-race-view .sv-race"
SHOWN_JS = """(lane) => Number(document.querySelector(`#sv-race-view .sv-lane[data-lane='${lane}']`).dataset.shown)"""
# The recorded race: speculative steps of 0.3 s against one target-only token every 0.2 s.
RECORDED = make_race((3, 3, 1, 3, 0, 2, 3, 3), k=3, token_s=0.2, step_s=0.3)




@pytest.fixture(scope="module")
def race_app():
    demo, url = serve(FakeRunner(accepted=(2, 0, 2, 1)), race=(RECORDED, "recorded.json"))
    yield url
    demo.close()


def open_race_tab(browser, url, width=1440, height=900):
    page = load_page(browser, url, width, height)
    page.click("#sv-tab-race-button, button[role=tab]:has-text('Race')")
    page.wait_for_selector(ROOT)
    return page


def wait_state(page, state):
    page.wait_for_function(f"document.querySelector('{ROOT}') && "
                           f"document.querySelector('{ROOT}').dataset.state === '{state}'")


def wait_shown(page, lane, condition):
    page.wait_for_function(f"(n => {condition})(({SHOWN_JS})('{lane}'))")


def place(page, lane):
    return page.inner_text(f"#sv-race-view .sv-lane[data-lane='{lane}'] .sv-lane-place")


def test_the_recorded_race_replays_at_its_pace_and_replay_plays_it_again(browser, race_app):
    ARTIFACTS.mkdir(exist_ok=True)
    fast_total, slow_total = len(RECORDED.speculative.token_ids), len(RECORDED.target_only.tokens)
    page = open_race_tab(browser, race_app)
    wait_state(page, "playing")                               # opening the tab starts the replay
    wait_shown(page, "speculative", f"n > 0 && n < {fast_total}")
    page.screenshot(path=str(ARTIFACTS / "race-mid-replay.png"))
    wait_state(page, "done")
    assert page.evaluate(SHOWN_JS, "speculative") == fast_total and page.evaluate(SHOWN_JS, "target-only") == slow_total
    assert place(page, "speculative") == "finished first" and place(page, "target-only") == "finished second"
    verdict = page.inner_text("#sv-race-view .sv-race-verdict")
    assert "Speculative decoding finished first" in verdict and f"{RECORDED.speedup:.2f}×" in verdict
    steps = page.locator("#sv-race-view .sv-rstep")           # each step a box of the tokens one forward emitted
    assert steps.count() == len(RECORDED.speculative.steps)
    assert page.locator("#sv-race-view .sv-rstep .sv-rt.sv-accepted").count() == sum(
        step.accepted for step in RECORDED.speculative.steps)
    page.screenshot(path=str(ARTIFACTS / "race-done.png"))

    page.click("#sv-race-replay")                             # from the recorded times, no model involved
    wait_state(page, "playing")
    wait_shown(page, "target-only", f"n < {slow_total}")
    wait_state(page, "done")
    assert page.evaluate(SHOWN_JS, "target-only") == slow_total
    page.close()


def test_a_new_race_replays_when_it_arrives_and_a_race_file_round_trips(browser, race_app, tmp_path):
    page = open_race_tab(browser, race_app)
    wait_state(page, "done")
    page.fill("#sv-race-prompt textarea", "def g(y):")
    page.click("#sv-race-go")
    new = make_race((2, 0, 2, 1), k=5, prompt="def g(y):")
    page.wait_for_function(f"document.querySelector('#sv-race-view .sv-lane').dataset.total === "
                           f"'{len(new.target_only.tokens)}'")
    wait_state(page, "done")
    assert page.evaluate(SHOWN_JS, "speculative") == len(new.speculative.token_ids)
    page.click("#sv-race-io")
    page.click("#sv-race-download")
    link = page.wait_for_selector("#sv-race-files a[download]")
    assert "specviz-race.json" in link.get_attribute("href")

    bad = json.loads(RECORDED.to_json())
    bad["speculative"]["steps"][1]["tokens"][0]["kind"] = "guessed"
    path = tmp_path / "bad-race.json"
    path.write_text(json.dumps(bad), encoding="utf-8")
    with page.expect_file_chooser() as chooser:
        page.click("#sv-race-upload")
    chooser.value.set_files(str(path))
    page.wait_for_selector("text=speculative.steps[1].tokens[0].kind must be one of")
    assert page.evaluate(SHOWN_JS, "speculative") == len(new.speculative.token_ids)    # the race shown stays

    good = tmp_path / "race.json"
    RECORDED.save(good)
    with page.expect_file_chooser() as chooser:
        page.click("#sv-race-upload")
    chooser.value.set_files(str(good))
    page.wait_for_function(f"document.querySelector('#sv-race-view .sv-lane').dataset.total === "
                           f"'{len(RECORDED.target_only.tokens)}'")
    wait_state(page, "done")
    page.close()


def test_phone_width_stacks_the_lanes(browser, race_app):
    page = open_race_tab(browser, race_app, width=390, height=844)
    page.locator("#sv-race-view").scroll_into_view_if_needed()   # it plays once it is in view
    wait_state(page, "done")
    boxes = [page.locator(f"#sv-race-view .sv-lane[data-lane='{lane}']").bounding_box()
             for lane in ("target-only", "speculative")]
    assert boxes[1]["y"] >= boxes[0]["y"] + boxes[0]["height"] - 1      # one above the other
    page.screenshot(path=str(ARTIFACTS / "race-phone.png"), full_page=True)
    page.close()
